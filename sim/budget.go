package sim

import "github.com/weft-dev/weft/wire"

// The swarm's failure budget: the nemesis keeps at most MaxDown (f)
// members of a group unavailable at once, and leaves at most that many
// down for good at GST. Unavailable is more than down. A member that is
// behind its group's delivered floor holds no copy of the prefix its group
// may have collected. With collection by a quorum (wbcast's default;
// not with wbcast.Config.CollectAfterAll) that prefix survives on the
// members at or above the floor only, so a member behind it, being caught up by a
// SNAPSHOT, is as good as down until it caught up. A member that lost its disk is behind from its wipe (it is
// down, then inert until it rejoined, then behind until it installed a
// snapshot). Without this rule the swarm could wipe a group's last
// up-to-date member while the others were still behind: the prefix gone,
// no member could lead (docs/disk-loss.md; the operator's rule is the
// same: never lose a second disk in a group before the first replacement
// caught up).

// floorReporter is a replica whose group collects what lies below a
// delivered floor (wbcast.Process).
type floorReporter interface {
	MaxDelivered() wire.Timestamp
	Floor() wire.Timestamp
}

// noteFloor raises replica p's group's floor to the one p knows: the
// simulator keeps the highest any member reported (what was collected
// stays collected, whichever member learnt it and even if it crashed
// since).
func (f *faultState) noteFloor(p wire.ProcID) {
	fr, ok := f.s.procs[p].(floorReporter)
	if !ok {
		return
	}
	g, _ := f.s.topo.GroupOf(p)
	if fl := fr.Floor(); f.floors[g].Less(fl) {
		f.floors[g] = fl
	}
}

// behind reports whether up replica p's last delivery is below its
// group's floor: it lacks a prefix the group may have collected.
func (f *faultState) behind(p wire.ProcID) bool {
	fr, ok := f.s.procs[p].(floorReporter)
	if !ok {
		return false
	}
	g, _ := f.s.topo.GroupOf(p)
	return fr.MaxDelivered().Less(f.floors[g])
}

// down reports whether replica p is down for the budget: crashed, about
// to crash (a torn crash pending), or inert after a disk loss.
func (f *faultState) down(p wire.ProcID) bool {
	return !f.s.up[p] || f.torn[p] != noTorn || f.inert(p)
}

// groupsUnderBudget lists the groups with fewer than MaxDown members
// unavailable: those the nemesis may crash a member of. A group left out
// only because members behind its floor counted is a fault withheld
// (FaultStats.Withheld).
func (f *faultState) groupsUnderBudget() []wire.GroupID {
	s := f.s
	var groups []wire.GroupID
	withheld := false
	for g := range s.topo.Groups {
		down, behind := 0, 0
		for _, p := range s.topo.Members(wire.GroupID(g)) {
			switch {
			case f.down(p):
				down++
			case f.behind(p):
				behind++
			}
		}
		switch {
		case down+behind < f.cfg.MaxDown:
			groups = append(groups, wire.GroupID(g))
		case down < f.cfg.MaxDown:
			withheld = true
		}
	}
	if withheld {
		f.stats.Withheld++
	}
	return groups
}
