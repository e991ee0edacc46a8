package sim

import (
	"fmt"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

// The client side of a run: issuing the workload's multicasts, client
// sessions, and the check of every client reply.

// issue multicasts the next message of a client (or script entry i).
func (s *Sim) issue(i int) error {
	w := &s.cfg.Workload
	var ci int
	var dest []wire.GroupID
	if w.Mode == Script {
		sc := w.Script[i]
		ci, dest = sc.Client, append([]wire.GroupID(nil), sc.Dest...)
	} else {
		if s.issued >= w.Messages {
			return nil
		}
		ci = i
		dest = s.randomDest()
	}
	c := s.clients[ci]
	if w.SessionEvery > 0 && s.nextSeq[ci] >= uint64(w.SessionEvery) && (c.Outstanding() == 0 || w.CrashClients) {
		var err error
		if c, err = s.newSession(ci); err != nil {
			return err
		}
	}
	s.nextSeq[ci]++
	m := wire.AppMsg{ID: wire.MsgID{Client: c.ID(), Session: c.Session(), Seq: s.nextSeq[ci]}, Dest: dest}
	if s.cfg.Payload != nil {
		m.Payload = s.cfg.Payload(ci, dest)
	} else if w.PayloadSize > 0 {
		m.Payload = make([]byte, w.PayloadSize)
		for j := range m.Payload {
			m.Payload[j] = byte(s.rng.Uint32())
		}
	}
	m.Seal()
	s.issued++
	s.stats.Multicasts++
	if s.f != nil && s.cfg.MaxTime == 0 && s.now+s.cfg.Faults.Conv > s.horizon {
		// The liveness phase bounds how long a multicast may take after
		// GST: one issued after GST gets the whole phase too.
		s.horizon = s.now + s.cfg.Faults.Conv
	}
	if len(dest) > 1 {
		s.stats.MultiGroup++
	}
	s.lastProgress = s.now
	s.track(&m)
	if s.hist != nil {
		d := make([]int, len(dest))
		for j, g := range dest {
			d[j] = int(g)
		}
		if mi := s.msgs[m.ID]; mi != nil {
			mi.hist = len(s.hist.Events)
		}
		s.hist.Events = append(s.hist.Events, check.Event{Ev: "multicast", ID: m.ID.Full(), Dest: d, T: s.now, Digest: check.Digest(m.Payload)})
	}
	if s.cfg.OnIssue != nil {
		s.cfg.OnIssue(ci, &m, s.now)
	}
	if err := c.Multicast(m); err != nil {
		return err
	}
	if err := s.flush(c.ID(), true); err != nil {
		return err
	}
	if w.Mode == OpenLoop && s.issued < w.Messages {
		s.push(event{at: s.now + s.expDelay(w.Interval), kind: evIssue, arg: int32(ci), fg: true})
	}
	if w.Mode == ClosedLoop && w.CrashClients && w.SessionEvery > 0 && s.nextSeq[ci] == uint64(w.SessionEvery) {
		// A closed-loop client issues only once answered, so it would
		// never restart with a message in flight: crash it while its
		// session's last message is, within 2δ of sending it.
		s.crashIn[ci] = c.Session()
		s.push(event{at: s.now + s.rng.Int64N(2*s.cfg.Delta), kind: evClientCrash, arg: int32(ci), fg: true})
	}
	return nil
}

// crashClient restarts closed-loop client ci (evClientCrash) if the
// session it was to crash in still has its message in flight; answered,
// the client has already moved on to a new session.
func (s *Sim) crashClient(ci int) error {
	c := s.clients[ci]
	if c.Session() != s.crashIn[ci] || c.Outstanding() == 0 {
		return nil
	}
	return s.issue(ci) // a new session (issue), giving up the one in flight
}

// newSession replaces client ci by a new incarnation with the same id and
// the next session number (the simulator's sessions count 0, 1, 2, ...
// per client; real clients draw them at random).
func (s *Sim) newSession(ci int) (*amcast.Client, error) {
	old := s.clients[ci]
	c, err := amcast.NewSessionClient(s.topo, old.ID(), wire.SessionID{Hi: old.Session().Hi, Lo: old.Session().Lo + 1})
	if err != nil {
		return nil, err
	}
	c.RetryTicks, c.ExpireTicks = old.RetryTicks, old.ExpireTicks
	for _, id := range old.OutstandingIDs() { // Workload.CrashClients
		s.giveUp(id)
	}
	for g := range s.cfg.Groups {
		if err := c.SetLeader(wire.GroupID(g), old.Leader(wire.GroupID(g))); err != nil {
			return nil, err
		}
	}
	s.clients[ci] = c
	s.procs[c.ID()] = c
	s.nextSeq[ci] = 0
	s.stats.Sessions++
	return c, nil
}

// checkReply is the client-reply check: a client is told a message was
// delivered only if it was, with the gts it is told. The designated
// replier answers when it delivers, so the delivery is already recorded;
// gts ⊥ is the answer of a leader that delivered and collected the message
// long ago (a retry).
func (s *Sim) checkReply(client wire.ProcID, d amcast.Delivery) error {
	mi := s.msgs[d.M.ID]
	switch {
	case mi == nil:
		return fmt.Errorf("sim: t=%d client %d was told %s (never multicast) was delivered", s.now, client, d.M.ID)
	case mi.first == 0 && d.GTS.IsZero():
		return fmt.Errorf("sim: t=%d client %d was told %s was delivered and collected, and no replica has delivered it", s.now, client, d.M.ID)
	case mi.first == 0:
		// A leader answers once the commit rests on durable acks, before
		// its own delivery record is durable (wbcast.SendsBeforeSync): the
		// message must then be delivered with the gts told, by every
		// replica of its destinations (the convergence count), and the
		// first delivery is checked against it (recordDelivery).
		if !mi.told.IsZero() && mi.told != d.GTS {
			return fmt.Errorf("sim: t=%d client %d was told %s was delivered at %s, and before at %s", s.now, client, d.M.ID, d.GTS, mi.told)
		}
		mi.told = d.GTS
	case !d.GTS.IsZero() && d.GTS != mi.gts:
		return fmt.Errorf("sim: t=%d client %d was told %s was delivered at %s; replicas delivered it at %s", s.now, client, d.M.ID, d.GTS, mi.gts)
	}
	s.stats.Replies++
	return nil
}

// track registers a new multicast for the convergence count. A malformed
// destination list (possible only in a Script) is left to the checkers.
func (s *Sim) track(m *wire.AppMsg) {
	if _, dup := s.msgs[m.ID]; dup || m.Validate(s.cfg.Groups) != nil {
		return
	}
	mi := &msgInfo{t: s.now, dest: m.Dest, got: len(s.got), hist: -1}
	s.msgs[m.ID] = mi
	for _, g := range m.Dest {
		s.got = append(s.got, 0)
		s.addressed[g]++
		for _, p := range s.topo.Members(g) {
			if s.up[p] {
				s.remaining++ // an amnesiac replica too: it rejoins and installs
			}
		}
	}
}

// trackOptional tracks optional message m (Sim.optional) for convergence
// from its first delivery on, or its first delivery applied before it
// was durable (early.go; giveUp keeps tracking a message applied so):
// delivered once, it must be delivered everywhere (agreement,
// check.Event.Optional), and the run converges only then.
func (s *Sim) trackOptional(m *wire.AppMsg) {
	if s.msgs[m.ID] != nil {
		return
	}
	s.track(m)
	if mi := s.msgs[m.ID]; mi != nil {
		mi.injected = true
	}
}

// expired handles a client's give-up on message id (Workload.ExpireTicks).
func (s *Sim) expired(client wire.ProcID, id wire.MsgID) error {
	if s.f != nil && s.now > s.cfg.Faults.GST+s.cfg.Faults.Conv {
		return fmt.Errorf("sim: t=%d client %d gave up on %s after the liveness phase began (GST %d + %d): it was not delivered in time",
			s.now, client, id, s.cfg.Faults.GST, s.cfg.Faults.Conv)
	}
	s.stats.Expired++
	s.giveUp(id)
	return nil
}

// giveUp handles a message its client will never send again (it expired,
// or the client restarted with it outstanding): it becomes optional in the
// history (check.Event.Optional: no termination unless some replica
// delivers it) and, if no replica has delivered it yet (nor applied it
// before its delivery was durable, early.go), leaves the
// convergence count until one does (recordDelivery tracks it again then,
// as it does injected messages).
func (s *Sim) giveUp(id wire.MsgID) {
	mi := s.msgs[id]
	if mi == nil || mi.injected {
		return
	}
	s.stats.GivenUp++
	if s.hist != nil && mi.hist >= 0 {
		s.hist.Events[mi.hist].Optional = true
	}
	if s.optional == nil {
		s.optional = map[wire.MsgID]bool{}
	}
	s.optional[id] = true
	if mi.first != 0 || mi.applied {
		mi.injected = true // delivered (or applied) somewhere: it must complete
		return
	}
	for _, g := range mi.dest {
		s.addressed[g]--
		for _, p := range s.topo.Members(g) {
			if s.up[p] {
				s.remaining--
			}
		}
	}
	delete(s.msgs, id)
}

func (s *Sim) randomDest() []wire.GroupID {
	w := &s.cfg.Workload
	k := w.DestMin + s.rng.IntN(w.DestMax-w.DestMin+1)
	perm := s.rng.Perm(s.cfg.Groups)[:k]
	dest := make([]wire.GroupID, k)
	for i, g := range perm {
		dest[i] = wire.GroupID(g)
	}
	sortGroups(dest)
	return dest
}

func sortGroups(d []wire.GroupID) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

func (s *Sim) expDelay(mean int64) int64 {
	return 1 + int64(s.rng.ExpFloat64()*float64(mean))
}
