package amcasttest

import (
	"fmt"
	"slices"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

// CheckSafety checks what has been delivered so far with the project's
// checker (internal/check, no termination: a script may stop anywhere):
// validity (a replica delivers only messages addressed to its group, with
// the payload every other replica delivered), integrity (no replica delivers
// a message twice), order (each group's members deliver prefixes of one
// sequence; no cycle across groups) and gts (one non-⊥ global timestamp per
// message, strictly increasing at each replica). Clients' completions are
// checked here: a client completes a message once, with the gts the
// replicas delivered it with (or ⊥, the leader's answer for a message
// delivered long ago and collected; see wire.Delivered).
//
// It returns the first violation found.
func (e *Env) CheckSafety() error {
	h, name := e.history()
	for _, v := range check.Check(h, check.Options{MaxViolations: -1}).Violations {
		if !(e.Unordered && v.Kind == check.KindOrder) {
			return fmt.Errorf("%s: %s (processes: %s)", v.Kind, v.Detail, name)
		}
	}
	gts := map[wire.MsgID]wire.Timestamp{}
	first := map[wire.MsgID]wire.ProcID{}
	for p, ds := range e.delivered {
		if id := wire.ProcID(p); e.Topo.IsReplica(id) {
			for _, d := range ds {
				if d.GTS.IsZero() {
					// The checker skips ⊥ (an unrecorded gts); a replica
					// always knows the gts it delivers with.
					return fmt.Errorf("%s delivered %s with gts ⊥", e.Name(id), d.M.ID)
				}
				if _, ok := gts[d.M.ID]; !ok {
					gts[d.M.ID], first[d.M.ID] = d.GTS, id
				}
			}
		}
	}
	for p, ds := range e.delivered {
		id := wire.ProcID(p)
		if e.Topo.IsReplica(id) {
			continue
		}
		seen := map[wire.MsgID]bool{}
		for _, d := range ds {
			if seen[d.M.ID] {
				return fmt.Errorf("%s completed %s twice", e.Name(id), d.M.ID)
			}
			seen[d.M.ID] = true
			if g, ok := gts[d.M.ID]; ok && !d.GTS.IsZero() && g != d.GTS {
				return fmt.Errorf("%s completed %s with gts %s but %s delivered it with gts %s", e.Name(id), d.M.ID, d.GTS, e.Name(first[d.M.ID]), g)
			}
		}
	}
	return nil
}

// history renders the replicas' deliveries as a check.History. The checker
// numbers replicas g*Replicas+i; with groups of different sizes Replicas is
// the largest size (the missing ids simply never deliver). Each message is
// recorded as multicast at time 0 with the first delivered copy's
// destinations and payload digest (injected messages have no client-side
// multicast). It also returns the mapping of checker ids to names, for
// error messages.
func (e *Env) history() (*check.History, string) {
	R := 0
	for _, ms := range e.Topo.Groups {
		R = max(R, len(ms))
	}
	h := &check.History{Config: check.Config{Protocol: "amcasttest", Groups: e.Topo.NumGroups(), Replicas: R}}
	var mcast []check.Event
	known := map[wire.MsgID]bool{}
	var t int64
	var name []string
	for p, ds := range e.delivered {
		id := wire.ProcID(p)
		g, ok := e.Topo.GroupOf(id)
		if !ok {
			continue
		}
		cp := int(g)*R + e.Topo.MemberIndex(id)
		name = append(name, fmt.Sprintf("%d=%s", cp, e.Name(id)))
		for _, d := range ds {
			if d.Install {
				t++
				h.Events = append(h.Events, check.Event{Ev: check.EvInstall, Proc: cp, Group: int(g), GTS: check.GTS{T: d.GTS.T, G: int(d.GTS.G)}, T: t})
				continue
			}
			if !known[d.M.ID] {
				known[d.M.ID] = true
				dest := make([]int, len(d.M.Dest))
				for i, x := range d.M.Dest {
					dest[i] = int(x)
				}
				mcast = append(mcast, check.Event{Ev: check.EvMulticast, ID: d.M.ID.Full(), Dest: dest, Digest: check.Digest(d.M.Payload)})
			}
			t++
			h.Events = append(h.Events, check.Event{Ev: check.EvDeliver, Proc: cp, Group: int(g), ID: d.M.ID.Full(),
				GTS: check.GTS{T: d.GTS.T, G: int(d.GTS.G)}, T: t, Digest: check.Digest(d.M.Payload)})
		}
	}
	h.Events = append(mcast, h.Events...)
	slices.Sort(name)
	return h, fmt.Sprint(name)
}
