package check

import (
	"testing"
)

func TestDuplicateDelivery(t *testing.T) {
	b := &builder{h: *base()}
	b.dl(0, "a", baseGTS["a"])
	r := Check(&b.h, Options{Termination: TermAll})
	expect(t, r, KindIntegrity)
	expectHas(t, r, KindIntegrity, "proc 0", "a")
}

func TestDuplicateAcrossRestart(t *testing.T) {
	b := &builder{h: *base()}
	b.h.Events = append(b.h.Events,
		Event{Ev: EvCrash, Proc: 0, T: b.t()},
		Event{Ev: EvRestart, Proc: 0, T: b.t() + 1})
	b.dl(0, "b", baseGTS["b"])
	expect(t, Check(&b.h, Options{Termination: TermAll}), KindIntegrity)
}

func TestDeliveryToGroupNotInDest(t *testing.T) {
	b := &builder{h: *base()}
	b.dl(6, "a", baseGTS["a"]) // proc 6 is in group 2; a→{0}
	r := Check(&b.h, Options{Termination: TermAll})
	expect(t, r, KindValidity)
	expectHas(t, r, KindValidity, "proc 6", "not in its dest")
}

func TestDeliveryOfUnknownID(t *testing.T) {
	b := &builder{h: *base()}
	b.dl(0, "zz", GTS{9, 0})
	r := Check(&b.h, Options{Termination: TermAll})
	expect(t, r, KindValidity)
	expectHas(t, r, KindValidity, "zz", "never multicast")
}

func TestOtherValidity(t *testing.T) {
	t.Run("wrong stated group", func(t *testing.T) {
		h := clone(base())
		for i := range h.Events {
			if h.Events[i].Ev == EvDeliver && h.Events[i].Proc == 4 && h.Events[i].ID == "d" {
				h.Events[i].Group = 0
			}
		}
		expect(t, Check(h, Options{}), KindValidity)
	})
	t.Run("unknown proc", func(t *testing.T) {
		b := &builder{h: *base()}
		b.dl(9, "e", baseGTS["e"])
		b.dl(-1, "e", baseGTS["e"])
		r := Check(&b.h, Options{})
		expect(t, r, KindValidity)
		if r.Count(KindValidity) != 2 {
			t.Fatal(r)
		}
	})
	t.Run("deliver before multicast", func(t *testing.T) {
		h := clone(base())
		for i := range h.Events {
			if h.Events[i].Ev == EvDeliver && h.Events[i].ID == "e" && h.Events[i].Proc == 7 {
				h.Events[i].T = 2 // e is multicast at t=5
			}
		}
		r := Check(h, Options{Termination: TermAll})
		expect(t, r, KindValidity)
		expectHas(t, r, KindValidity, "before its multicast")
	})
	t.Run("deliver while crashed", func(t *testing.T) {
		b := newBuilder(1, 1)
		b.mc("x", 0)
		b.h.Events = append(b.h.Events, Event{Ev: EvCrash, Proc: 0, T: 2})
		b.dl(0, "x", GTS{})
		expect(t, Check(&b.h, Options{}), KindValidity)
	})
	t.Run("bad multicasts", func(t *testing.T) {
		b := newBuilder(2, 1)
		b.mc("x", 0).mc("x", 0).mc("y", 1, 0).mc("z").mc("w", 5)
		r := Check(&b.h, Options{})
		expect(t, r, KindValidity)
		if r.Count(KindValidity) != 4 {
			t.Fatal(r)
		}
	})
	t.Run("unknown event and bad config", func(t *testing.T) {
		b := newBuilder(1, 1)
		b.h.Events = append(b.h.Events, Event{Ev: "bogus"})
		expect(t, Check(&b.h, Options{}), KindValidity)
		expect(t, Check(&History{Config: Config{Groups: 0, Replicas: 3}}, Options{}), KindValidity)
	})
}

func TestCorruptedPayload(t *testing.T) {
	h := clone(base())
	for i := range h.Events {
		h.Events[i].Digest = Digest([]byte("payload of " + h.Events[i].ID))
	}
	expect(t, Check(h, Options{Termination: TermAll}))
	for i := range h.Events {
		if h.Events[i].Ev == EvDeliver && h.Events[i].ID == "c" && h.Events[i].Proc == 5 {
			h.Events[i].Digest = Digest([]byte("corrupted"))
		}
	}
	r := Check(h, Options{Termination: TermAll})
	expect(t, r, KindValidity)
	expectHas(t, r, KindValidity, "proc 5", "digest")
}
