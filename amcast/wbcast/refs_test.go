package wbcast

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast/internal/tsheap"
	"github.com/weft-dev/weft/wire"
)

// TestCheckRefs: checkRefs, which the swarm's restore checks run, finds a
// record held by the delivery log or by either heap that is out of recs
// without its dropped flag, or dropped while still in recs; a consistent
// process passes.
func TestCheckRefs(t *testing.T) {
	topo, _ := amcastTopo(2, 3)
	id := wire.MsgID{Client: 6, Session: wire.Session(9), Seq: 1}
	for _, tc := range []struct {
		where string
		hold  func(p *Process, r *record)
	}{
		{"the delivery log", func(p *Process, r *record) { p.dlog = append(p.dlog, logEntry{r: r}) }},
		{"the pending heap", func(p *Process, r *record) { p.pending.Push(tsheap.Entry[*record]{ID: id, Ref: r}) }},
		{"the committed heap", func(p *Process, r *record) { p.committed.Push(tsheap.Entry[*record]{ID: id, Ref: r}) }},
	} {
		p, err := New(Config{Topology: topo, ID: 0})
		if err != nil {
			t.Fatal(err)
		}
		r := &record{m: wire.AppMsg{ID: id}}
		tc.hold(p, r)
		if err := p.checkRefs(); err == nil || !strings.Contains(err.Error(), tc.where) {
			t.Errorf("%s holds a record out of recs, not dropped: %v", tc.where, err)
		}
		p.recs[id] = r
		if err := p.checkRefs(); err != nil {
			t.Errorf("%s holds a record in recs: %v", tc.where, err)
		}
		r.dropped = true
		if err := p.checkRefs(); err == nil || !strings.Contains(err.Error(), tc.where) {
			t.Errorf("%s holds a dropped record still in recs: %v", tc.where, err)
		}
		delete(p.recs, id)
		if err := p.checkRefs(); err != nil {
			t.Errorf("%s holds a dropped record out of recs: %v", tc.where, err)
		}
	}
}
