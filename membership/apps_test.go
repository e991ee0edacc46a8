package membership

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestAppTableInternRelease(t *testing.T) {
	tb := NewAppTable()
	if r := tb.intern(nil); r != 0 || tb.Lists() != 0 {
		t.Fatalf("empty list: ref %d, %d lists", r, tb.Lists())
	}
	a := []AppState{{KeyStatus, 2, "NORMAL"}}
	b := []AppState{{KeyStatus, 2, "NORMAL"}} // equal, another slice
	c := []AppState{{KeyStatus, 3, "NORMAL"}}
	ra, rb, rc := tb.intern(a), tb.intern(b), tb.intern(c)
	if ra != rb || ra == rc || tb.Lists() != 2 {
		t.Fatalf("refs %d %d %d, %d lists", ra, rb, rc, tb.Lists())
	}
	if &tb.items(ra)[0] != &a[0] {
		t.Error("the first copy is not the one kept")
	}
	if tb.maxVer(rc) != 3 || tb.cost(ra) != appCost(a) {
		t.Errorf("max %d cost %d", tb.maxVer(rc), tb.cost(ra))
	}
	tb.release(ra)
	if tb.Lists() != 2 {
		t.Fatal("released with a reference left")
	}
	tb.release(rb)
	if tb.Lists() != 1 {
		t.Fatal("not released at the last reference")
	}
	if r := tb.intern(b); r != ra {
		t.Errorf("freed slot not reused: %d, want %d", r, ra)
	}
}

// TestAppTableChurn interns and releases random lists against a naive
// model: equal contents share a ref, refs count exactly, freed lists are
// unlinked from their hash chains (every live list is still found).
func TestAppTableChurn(t *testing.T) {
	t.Run("fnv", func(t *testing.T) { appTableChurn(t) })
	t.Run("collisions", func(t *testing.T) {
		// Eight buckets: long chains, unlinked from the head, middle and
		// tail.
		defer func(h func([]AppState) uint64) { hashOf = h }(hashOf)
		hashOf = func(items []AppState) uint64 { return hashItems(items) % 8 }
		appTableChurn(t)
	})
}

func appTableChurn(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tb := NewAppTable()
	type held struct {
		ref  appRef
		text string
	}
	var live []held
	byText := map[string]appRef{}
	count := map[appRef]int{}
	for step := 0; step < 20000; step++ {
		if len(live) > 0 && r.IntN(2) == 0 {
			k := r.IntN(len(live))
			h := live[k]
			live = append(live[:k], live[k+1:]...)
			tb.release(h.ref)
			if count[h.ref]--; count[h.ref] == 0 {
				delete(byText, h.text)
				delete(count, h.ref)
			}
			continue
		}
		var items []AppState
		for key := 1; key <= 3; key++ {
			if r.IntN(2) == 0 {
				items = append(items, AppState{Key(key), uint64(r.IntN(4)), fmt.Sprint(r.IntN(3))})
			}
		}
		if len(items) == 0 {
			continue
		}
		text := fmt.Sprint(items)
		ref := tb.intern(items)
		if want, ok := byText[text]; ok && ref != want {
			t.Fatalf("step %d: %s got ref %d, held as %d", step, text, ref, want)
		}
		if fmt.Sprint(tb.items(ref)) != text {
			t.Fatalf("step %d: ref %d holds %v, want %s", step, ref, tb.items(ref), text)
		}
		byText[text] = ref
		count[ref]++
		live = append(live, held{ref, text})
		if tb.Lists() != len(byText) {
			t.Fatalf("step %d: %d lists, model %d", step, tb.Lists(), len(byText))
		}
	}
	for ref, n := range count {
		if int(tb.lists[ref].refs) != n {
			t.Fatalf("ref %d: %d references, model %d", ref, tb.lists[ref].refs, n)
		}
	}
}
