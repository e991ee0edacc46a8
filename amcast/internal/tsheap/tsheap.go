// Package tsheap is a binary min-heap of (timestamp, message id) pairs, the
// priority queue Skeen-family protocols use for their delivery rule. Entries
// are never updated in place: protocols push a new entry and skip stale ones
// when they reach the top (lazy deletion).
package tsheap

import "github.com/weft-dev/weft/wire"

// Entry is one heap element.
type Entry struct {
	TS wire.Timestamp
	ID wire.MsgID
}

func less(a, b Entry) bool {
	if a.TS != b.TS {
		return a.TS.Less(b.TS)
	}
	return a.ID.Less(b.ID)
}

// Heap is a min-heap of entries ordered by timestamp, then id.
// The zero value is an empty heap.
type Heap struct {
	es []Entry
}

// Len returns the number of entries.
func (h *Heap) Len() int { return len(h.es) }

// Push adds an entry.
func (h *Heap) Push(e Entry) {
	h.es = append(h.es, e)
	i := len(h.es) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(h.es[i], h.es[p]) {
			break
		}
		h.es[i], h.es[p] = h.es[p], h.es[i]
		i = p
	}
}

// Top returns the smallest entry. REQUIRES: Len() > 0.
func (h *Heap) Top() Entry { return h.es[0] }

// Pop removes and returns the smallest entry. REQUIRES: Len() > 0.
func (h *Heap) Pop() Entry {
	top := h.es[0]
	n := len(h.es) - 1
	h.es[0] = h.es[n]
	h.es = h.es[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(h.es[r], h.es[l]) {
			m = r
		}
		if !less(h.es[m], h.es[i]) {
			break
		}
		h.es[i], h.es[m] = h.es[m], h.es[i]
		i = m
	}
	return top
}

// Reset empties the heap.
func (h *Heap) Reset() { h.es = h.es[:0] }
