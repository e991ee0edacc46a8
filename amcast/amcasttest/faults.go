package amcasttest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// This file holds the fault commands (crash, restart, partition, isolate,
// heal) and run, which interleaves message delivery with ticks.

// MaxRunRounds caps the rounds of one run command.
const MaxRunRounds = 10000

func (e *Env) replicaArgs(t *testing.T, d *datadriven.TestData, key string) []wire.ProcID {
	ps, ok := argProcs(t, d, key)
	if !ok || len(ps) == 0 {
		d.Fatalf(t, "%s needs %s=", d.Cmd, key)
	}
	for _, p := range ps {
		if !e.Topo.IsReplica(p) {
			d.Fatalf(t, "%s: %s is not a replica", d.Cmd, e.Name(p))
		}
	}
	return ps
}

func (e *Env) procArgs(t *testing.T, d *datadriven.TestData, key string) ([]wire.ProcID, bool) {
	ps, ok := argProcs(t, d, key)
	for _, p := range ps {
		if int(p) >= len(e.Procs) {
			d.Fatalf(t, "%s: no process %d", d.Cmd, p)
		}
	}
	return ps, ok
}

// cmdCrash discards the machines of the given replicas. Their stores stay;
// messages they sent stay in flight; messages to them are dropped when
// delivered while they are down.
func (e *Env) cmdCrash(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	for _, p := range e.replicaArgs(t, d, "p") {
		if e.down[p] {
			d.Fatalf(t, "crash: %s is already down", e.Name(p))
		}
		e.Procs[p] = nil
		e.down[p] = true
		fmt.Fprintf(w, "%s crashed\n", e.Name(p))
	}
}

// cmdRestart rebuilds crashed replicas from their stores.
func (e *Env) cmdRestart(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	if e.Durability == nil || e.Durability.Restore == nil {
		d.Fatalf(t, "restart: the environment has no Durability.Restore")
	}
	for _, p := range e.replicaArgs(t, d, "p") {
		if !e.down[p] {
			d.Fatalf(t, "restart: %s is not down", e.Name(p))
		}
		st := e.stores[p]
		if st == nil {
			d.Fatalf(t, "restart: %s has no store", e.Name(p))
		}
		m, err := e.Durability.Restore(e.Protocol, e.Topo, p, st)
		if err != nil {
			fmt.Fprintf(w, "restart %s: error: %v\n", e.Name(p), err)
			continue
		}
		if m.ID() != p {
			d.Fatalf(t, "restart: replica %d reports id %d", p, m.ID())
		}
		e.Procs[p] = m
		e.down[p] = false
		fmt.Fprintf(w, "%s restarted: %s\n", e.Name(p), strings.TrimPrefix(e.StatusLine(p), e.Name(p)+": "))
		writeLines(w, "  ", e.drain(t, p))
	}
}

// cmdPartition cuts directed links: from each of from= to each of to=, or
// both ways between each of a= and each of b=.
func (e *Env) cmdPartition(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	var ls []link
	if from, ok := e.procArgs(t, d, "from"); ok {
		to, ok := e.procArgs(t, d, "to")
		if !ok {
			d.Fatalf(t, "partition from= needs to=")
		}
		for _, f := range from {
			for _, q := range to {
				ls = append(ls, link{f, q})
			}
		}
	} else {
		a, ok1 := e.procArgs(t, d, "a")
		b, ok2 := e.procArgs(t, d, "b")
		if !ok1 || !ok2 {
			d.Fatalf(t, "partition needs from= and to=, or a= and b=")
		}
		for _, x := range a {
			for _, y := range b {
				ls = append(ls, link{x, y}, link{y, x})
			}
		}
	}
	mode, verb := cutDrop, "cut"
	if d.HasArg("hold") {
		mode, verb = cutHold, "held"
	}
	var names []string
	for _, l := range ls {
		if l.from == l.to {
			d.Fatalf(t, "partition: %s cannot be cut from itself", e.Name(l.from))
		}
		if e.cut[l] != mode {
			e.cut[l] = mode
			names = append(names, e.Name(l.from)+"->"+e.Name(l.to))
		}
	}
	if len(names) == 0 {
		fmt.Fprintf(w, "no new links %s\n", verb)
		return
	}
	fmt.Fprintf(w, "%s %s\n", verb, strings.Join(names, " "))
}

// cmdIsolate cuts every link between the given processes and all others,
// in the given direction (in, out or both; default both).
func (e *Env) cmdIsolate(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	ps, ok := e.procArgs(t, d, "p")
	if !ok {
		d.Fatalf(t, "isolate needs p=")
	}
	dir, ok := argOne(t, d, "dir")
	if !ok {
		dir = "both"
	}
	if dir != "in" && dir != "out" && dir != "both" {
		d.Fatalf(t, "isolate: dir=%s (want in, out or both)", dir)
	}
	for _, p := range ps {
		n := 0
		for q := range e.Procs {
			other := wire.ProcID(q)
			if other == p {
				continue
			}
			var ls []link
			if dir != "in" {
				ls = append(ls, link{p, other})
			}
			if dir != "out" {
				ls = append(ls, link{other, p})
			}
			for _, l := range ls {
				if e.cut[l] != cutDrop {
					e.cut[l] = cutDrop
					n++
				}
			}
		}
		fmt.Fprintf(w, "%s isolated (%s): %d link(s) cut\n", e.Name(p), dir, n)
	}
}

// cmdHeal restores every cut link, or only those touching p=.
func (e *Env) cmdHeal(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	ps, only := e.procArgs(t, d, "p")
	n := 0
	for l := range e.cut {
		if only && !slices.Contains(ps, l.from) && !slices.Contains(ps, l.to) {
			continue
		}
		delete(e.cut, l)
		n++
	}
	fmt.Fprintf(w, "healed %d link(s)\n", n)
}

// role is what a process shows of its role.
type role struct {
	status, ballot, cballot string
}

func (r role) String() string {
	s := r.status
	if r.ballot != "" {
		s += " b=" + r.ballot
		if r.cballot != r.ballot {
			s += " cb=" + r.cballot
		}
	}
	return s
}

func (e *Env) roles() map[wire.ProcID]role {
	out := map[wire.ProcID]role{}
	for id, m := range e.Procs {
		if m == nil || !e.Topo.IsReplica(wire.ProcID(id)) {
			continue
		}
		var r role
		r.status, _ = statusOf(m)
		if x, ok := m.(interface {
			Ballot() (wire.Ballot, wire.Ballot)
		}); ok {
			b, cb := x.Ballot()
			r.ballot, r.cballot = b.String(), cb.String()
		}
		out[wire.ProcID(id)] = r
	}
	return out
}

func (e *Env) roleChanges(before, after map[wire.ProcID]role) []string {
	var out []string
	for id := range e.Procs {
		p := wire.ProcID(id)
		a, ok := after[p]
		b, had := before[p]
		if !ok || !had || a == b {
			continue
		}
		if a.status != b.status {
			out = append(out, fmt.Sprintf("%s becomes %s", e.Name(p), a))
		} else {
			out = append(out, fmt.Sprintf("%s is %s", e.Name(p), a))
		}
	}
	return out
}

// runStats counts what a run did.
type runStats struct {
	handled, handledHB int // messages that reached their recipient
	dropped, droppedHB int // messages dropped (cut link, crashed recipient)
	deliveries         int // application deliveries and client completions
}

// cmdRun runs ticks= rounds; each round delivers every message in flight at
// its start (the messages it causes wait for the next round), then ticks
// every live process once, in id order. One round is about one δ per tick.
//
// Without quiet, each round prints what happened except heartbeats that
// caused nothing but heartbeats (they are counted in the summary). With
// quiet, only deliveries and role changes are printed, prefixed with their
// round. Both end with a summary line.
func (e *Env) cmdRun(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	n := argInt(t, d, "ticks", 0)
	if n < 1 || n > MaxRunRounds {
		d.Fatalf(t, "%s: ticks=%d (want 1..%d)", d.Cmd, n, MaxRunRounds)
	}
	quiet := d.HasArg("quiet")
	var st runStats
	for round := 1; round <= n; round++ {
		var rw strings.Builder
		before := e.roles()
		prefix := fmt.Sprintf("round %d: ", round)
		quietLines := func(ls []outLine) {
			for _, l := range ls {
				if l.deliver {
					st.deliveries++
					if quiet {
						rw.WriteString(prefix + l.text + "\n")
					}
				}
			}
		}
		e.deliverEach(t, filter{}, nil, true, func(r *stepResult) {
			hb := r.env.Msg.Kind() == wire.KindHeartbeat
			if r.dropped != "" {
				st.dropped++
				if hb {
					st.droppedHB++
				} else if !quiet {
					r.write(&rw, "  ")
				}
				return
			}
			st.handled++
			if hb {
				st.handledHB++
			}
			quietLines(r.out)
			if quiet {
				return
			}
			rest := nonHeartbeat(r.out)
			if hb && r.err == "" && len(rest) == 0 {
				return
			}
			(&stepResult{env: r.env, err: r.err, out: rest}).write(&rw, "  ")
		})
		for id := range e.Procs {
			if e.down[id] {
				continue
			}
			out := e.tick(t, wire.ProcID(id))
			quietLines(out)
			if quiet {
				continue
			}
			if rest := nonHeartbeat(out); len(rest) > 0 {
				fmt.Fprintf(&rw, "tick %s\n", e.Name(wire.ProcID(id)))
				writeLines(&rw, "  ", rest)
			}
		}
		for _, c := range e.roleChanges(before, e.roles()) {
			if quiet {
				rw.WriteString(prefix + c + "\n")
			} else {
				rw.WriteString(c + "\n")
			}
		}
		if rw.Len() > 0 {
			if !quiet {
				fmt.Fprintf(w, "round %d\n", round)
			}
			w.WriteString(rw.String())
		}
		if err := e.CheckSafety(); err != nil {
			d.Fatalf(t, "safety violation in round %d: %v\noutput so far:\n%s", round, err, w.String())
		}
	}
	fmt.Fprintf(w, "after %d round(s): %d message(s) handled (%d heartbeats), %d dropped (%d heartbeats), %d deliveries, %d in flight\n",
		n, st.handled, st.handledHB, st.dropped, st.droppedHB, st.deliveries, e.InFlight())
}

func nonHeartbeat(ls []outLine) []outLine {
	var out []outLine
	for _, l := range ls {
		if !l.hb {
			out = append(out, l)
		}
	}
	return out
}

// coverageString renders the non-zero coverage counters, or "".
func coverageString(c amcast.Coverage) string {
	var parts []string
	for _, f := range []struct {
		name string
		v    int
	}{
		{"ballots", c.BallotsStarted}, {"leads", c.LeaderChanges}, {"withacc", c.RecoveriesWithAccepted},
		{"retried", c.Retried}, {"remulticasts", c.Remulticasts}, {"catchups", c.CatchUps}, {"collected", c.Collected},
		{"expired", c.SessionsExpired},
	} {
		if f.v != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", f.name, f.v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "cov{" + strings.Join(parts, " ") + "}"
}
