package fastcast

import (
	"github.com/weft-dev/weft/amcast/internal/rskeen"
	"github.com/weft-dev/weft/wire"
)

// view is rskeen.View under an unexported name: embedded in Process it
// promotes the read-only methods without exposing a field callers could
// reach into (issue #10 item 8).
type view = rskeen.View

// host is the Process as its Paxos log's paxos.Host. It is a distinct type
// so that Execute and Lead, which make the replica order and deliver, are
// not methods of the public Process.
type host Process

func (h *host) Execute(slot uint64, c *wire.Command) { (*Process)(h).execute(slot, c) }
func (h *host) Lead(leading bool)                    { (*Process)(h).lead(leading) }
func (h *host) CheckCommand(c *wire.Command) error   { return h.core.CheckCommand(c) }

// open sets up the core and its log, fresh (st nil) or from st.
func (p *Process) open(cfg Config, st *Store) error {
	p.view = rskeen.ViewOf(&p.core)
	return p.core.Open((*host)(p), cfg, st)
}
