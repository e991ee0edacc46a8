package wbcast

import "fmt"

// The delivery heaps (pending, committed) and the delivery log (dlog)
// hold records, not ids: the entry at their head is then read without a
// lookup of its 48-byte id in recs (those lookups were 7.5% of a loaded
// agent's CPU with two destination groups; docs/batching.md, "Records
// instead of ids"). A record leaves recs only with its dropped flag set
// (collect, drop), and an entry whose record is dropped is stale, as one
// whose id had left recs was.

// checkRefs checks that the records the heaps and the log hold are in
// recs exactly when they are not dropped. CompareRestored runs it on the
// live process, so the swarm's restore checks (sim.Config.CheckRestore)
// run it after every Ready of every seed.
func (p *Process) checkRefs() error {
	check := func(where string, r *record) error {
		if in := p.recs[r.m.ID] == r; in == r.dropped {
			return fmt.Errorf("wbcast: p%d: %s holds %s, dropped=%v but in recs=%v", p.id, where, r.m.ID, r.dropped, in)
		}
		return nil
	}
	for _, e := range p.dlog {
		if err := check("the delivery log", e.r); err != nil {
			return err
		}
	}
	for r := range p.pending.Refs {
		if err := check("the pending heap", r); err != nil {
			return err
		}
	}
	for r := range p.committed.Refs {
		if err := check("the committed heap", r); err != nil {
			return err
		}
	}
	return nil
}
