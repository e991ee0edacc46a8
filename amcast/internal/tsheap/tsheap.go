// Package tsheap is a binary min-heap of (timestamp, message id) pairs, the
// priority queue Skeen-family protocols use for their delivery rule. Entries
// are never updated in place: protocols push a new entry and skip stale ones
// when they reach the top (lazy deletion).
package tsheap

import "github.com/weft-dev/weft/wire"

// Entry is one heap element. Ref is the protocol's own handle on the
// message (WbCast's record), so that the entry at the top needs no lookup
// by id; protocols without one use struct{}.
type Entry[V any] struct {
	TS  wire.Timestamp
	ID  wire.MsgID
	Ref V
}

func less[V any](a, b Entry[V]) bool {
	if a.TS != b.TS {
		return a.TS.Less(b.TS)
	}
	return a.ID.Less(b.ID)
}

// Heap is a min-heap of entries ordered by timestamp, then id.
// The zero value is an empty heap.
type Heap[V any] struct {
	es []Entry[V]
}

// Len returns the number of entries.
func (h *Heap[V]) Len() int { return len(h.es) }

// Push adds an entry.
func (h *Heap[V]) Push(e Entry[V]) {
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
func (h *Heap[V]) Top() Entry[V] { return h.es[0] }

// Pop removes and returns the smallest entry. REQUIRES: Len() > 0.
func (h *Heap[V]) Pop() Entry[V] {
	top := h.es[0]
	n := len(h.es) - 1
	h.es[0] = h.es[n]
	h.es[n] = Entry[V]{} // drop its Ref
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

// Refs yields every entry's Ref, in no particular order (an iter.Seq:
// for r := range h.Refs).
func (h *Heap[V]) Refs(yield func(V) bool) {
	for i := range h.es {
		if !yield(h.es[i].Ref) {
			return
		}
	}
}

// Reset empties the heap.
func (h *Heap[V]) Reset() {
	clear(h.es)
	h.es = h.es[:0]
}
