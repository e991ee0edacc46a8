package membership

// appRef names a list in an AppTable; 0 is the empty list.
type appRef uint32

// AppTable stores endpoints' application-state lists, each distinct list
// once, reference counted by the records that hold it. Lists are
// immutable: a change makes a new list.
//
// Every Node has one. Nodes driven from one goroutine (a simulator) may
// share a table through Config.Apps, so a list that thousands of nodes
// hold about the same endpoint is stored once instead of once per node.
// A table must not be shared by nodes used from different goroutines.
type AppTable struct {
	lists []appList
	free  []appRef
	index map[uint64]appRef // content hash -> first list with that hash
	last  appRef            // the list interned last
}

type appList struct {
	items []AppState // sorted by key, immutable
	max   uint64     // highest item version
	cost  int        // appCost(items)
	refs  uint32
	hash  uint64
	next  appRef // next list with the same hash
}

// NewAppTable returns an empty table.
func NewAppTable() *AppTable {
	return &AppTable{lists: make([]appList, 1), index: map[uint64]appRef{}}
}

// Lists returns the number of distinct non-empty lists held.
func (t *AppTable) Lists() int { return len(t.lists) - 1 - len(t.free) }

func (t *AppTable) items(r appRef) []AppState { return t.lists[r].items }
func (t *AppTable) maxVer(r appRef) uint64    { return t.lists[r].max }
func (t *AppTable) cost(r appRef) int         { return t.lists[r].cost }

// hashOf is the content hash; tests replace it to force collisions.
var hashOf = hashItems

func hashItems(items []AppState) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	mix := func(x uint64) {
		for i := 0; i < 8; i++ {
			h = (h ^ (x & 0xff)) * prime
			x >>= 8
		}
	}
	for i := range items {
		a := &items[i]
		mix(uint64(a.Key))
		mix(a.Version)
		mix(uint64(len(a.Value)))
		for j := 0; j < len(a.Value); j++ {
			h = (h ^ uint64(a.Value[j])) * prime
		}
	}
	return h
}

func sameItems(a, b []AppState) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// intern returns a reference to a list equal to items, adding items (kept
// as is: the caller must not modify it afterwards) if the table has none.
// The reference is counted; give it back with release.
func (t *AppTable) intern(items []AppState) appRef {
	if len(items) == 0 {
		return 0
	}
	// The same slice as the last one interned: take it without hashing
	// (a simulator hands thousands of nodes the same lists in turn).
	if r := t.last; r != 0 && int(r) < len(t.lists) {
		if l := &t.lists[r]; len(l.items) == len(items) && l.refs > 0 && &l.items[0] == &items[0] {
			l.refs++
			return r
		}
	}
	h := hashOf(items)
	first, ok := t.index[h]
	if ok {
		for r := first; r != 0; r = t.lists[r].next {
			if l := &t.lists[r]; sameItems(l.items, items) {
				l.refs++
				t.last = r
				return r
			}
		}
	}
	var r appRef
	if k := len(t.free); k > 0 {
		r = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		t.lists = append(t.lists, appList{})
		r = appRef(len(t.lists) - 1)
	}
	l := appList{items: items, cost: appCost(items), refs: 1, hash: h, next: first}
	for i := range items {
		l.max = max(l.max, items[i].Version)
	}
	t.lists[r] = l
	t.index[h] = r
	t.last = r
	return r
}

// retain counts one more reference to r.
func (t *AppTable) retain(r appRef) {
	if r != 0 {
		t.lists[r].refs++
	}
}

// release gives back one reference to r, dropping the list with the last.
func (t *AppTable) release(r appRef) {
	if r == 0 {
		return
	}
	l := &t.lists[r]
	if l.refs--; l.refs > 0 {
		return
	}
	// Unlink r from its hash chain.
	if first := t.index[l.hash]; first == r {
		if l.next == 0 {
			delete(t.index, l.hash)
		} else {
			t.index[l.hash] = l.next
		}
	} else {
		for p := first; p != 0; p = t.lists[p].next {
			if t.lists[p].next == r {
				t.lists[p].next = l.next
				break
			}
		}
	}
	*l = appList{}
	t.free = append(t.free, r)
}
