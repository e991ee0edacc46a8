package sim

import (
	"fmt"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// restoreCheck is Config.CheckRestore: after every Ready of a replica it
// rebuilds the replica with the protocol's Restore from every record the
// replica persisted so far and compares it with the live one
// (ProtocolSpec.CompareRestored). With faults the stores are the fault
// state's (the ones restarts use); without, it keeps its own.
type restoreCheck struct {
	s        *Sim
	stores   []amcast.Store   // own stores, nil when the fault state keeps them
	restored []amcast.Machine // per replica: Restore of its store as of the last records
	live     []amcast.Machine // per replica: the incarnation restored[id] was built for
	buf      []byte
}

func newRestoreCheck(s *Sim) *restoreCheck {
	rc := &restoreCheck{s: s, restored: make([]amcast.Machine, s.nrep), live: make([]amcast.Machine, s.nrep)}
	if s.f == nil || s.f.stores == nil {
		rc.stores = make([]amcast.Store, s.nrep)
		for i := range rc.stores {
			rc.stores[i] = s.spec.NewStore()
		}
	}
	return rc
}

// check runs after replica id's Ready, whose records recs are durable.
func (rc *restoreCheck) check(id wire.ProcID, recs []wire.Message) error {
	s := rc.s
	if s.f != nil && s.f.inert(id) {
		return nil // inert after a disk loss: nothing durable to compare
	}
	var st amcast.Store
	if rc.stores == nil {
		st = s.f.stores[id]
	} else {
		st = rc.stores[id]
		for _, r := range recs {
			// Through the codec, as the fault state does: the store must
			// share no memory with the machine.
			rc.buf = wire.Append(rc.buf[:0], r)
			rec, err := wire.Decode(rc.buf)
			if err != nil {
				return fmt.Errorf("sim: t=%d p%d persisted %s: %w", s.now, id, wire.Describe(r), err)
			}
			if err := st.Apply(rec); err != nil {
				return fmt.Errorf("sim: t=%d p%d store refused %s: %w", s.now, id, wire.Describe(r), err)
			}
		}
	}
	// Restore depends on the store alone: it is rebuilt only when records
	// were applied, or for a new incarnation (a torn crash may have applied
	// records unseen); the comparison runs after every Ready.
	if len(recs) > 0 || rc.live[id] != s.procs[id] {
		m, err := s.spec.Restore(s.topo, id, st)
		if err != nil {
			return fmt.Errorf("sim: t=%d restoring p%d for CheckRestore: %w", s.now, id, err)
		}
		rc.restored[id], rc.live[id] = m, s.procs[id]
	}
	if err := s.spec.CompareRestored(s.procs[id], rc.restored[id]); err != nil {
		return fmt.Errorf("sim: t=%d CheckRestore: %w", s.now, err)
	}
	if s.spec.CompareImage != nil {
		if err := s.spec.CompareImage(s.topo, s.procs[id], st); err != nil {
			return fmt.Errorf("sim: t=%d CheckRestore: p%d: %w", s.now, id, err)
		}
	}
	return nil
}
