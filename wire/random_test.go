package wire

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Random messages.

// randNum returns a value of random bit width, so every varint length shows
// up often.
func randNum(r *rand.Rand, maxBits int) uint64 {
	w := r.IntN(maxBits + 1)
	if w == 0 {
		return 0
	}
	return r.Uint64() >> (64 - w)
}

func randID(r *rand.Rand) MsgID {
	return MsgID{Client: ProcID(randNum(r, 32)), Session: SessionID{Hi: randNum(r, 64), Lo: randNum(r, 64)}, Seq: randNum(r, 64)}
}

// randIDList is an id list (REC_COLLECTED, REC_EXPIRED) with runs of one
// session, sessions that come back after another's run, and digests.
func randIDList(r *rand.Rand) []MsgID {
	var ids []MsgID
	for range r.IntN(8) {
		var id MsgID
		switch {
		case len(ids) > 0 && r.IntN(2) == 0: // the run goes on
			id = ids[len(ids)-1]
			id.Seq = randNum(r, 64)
		case len(ids) > 1 && r.IntN(3) == 0: // an earlier session again
			id = ids[r.IntN(len(ids))]
			id.Seq = randNum(r, 64)
		default:
			id = randID(r)
		}
		id.Digest = Digest{byte(r.IntN(256)), 15: byte(r.IntN(256))}
		ids = append(ids, id)
	}
	return ids
}

func randTS(r *rand.Rand) Timestamp {
	return Timestamp{T: randNum(r, 64), G: GroupID(randNum(r, 32))}
}

func randBallot(r *rand.Rand) Ballot {
	return Ballot{N: uint32(randNum(r, 32)), P: ProcID(randNum(r, 32))}
}

func randBallots(r *rand.Rand) []Ballot {
	n := r.IntN(6)
	if n == 0 {
		return nil
	}
	bs := make([]Ballot, n)
	for i := range bs {
		bs[i] = randBallot(r)
	}
	return bs
}

func randAppMsg(r *rand.Rand) AppMsg {
	m := AppMsg{ID: randID(r), Floor: randNum(r, 64)}
	n := r.IntN(6)
	if r.IntN(20) == 0 {
		n = r.IntN(MaxGroups + 1)
	}
	for range n {
		m.Dest = append(m.Dest, GroupID(randNum(r, 32)))
	}
	slices.Sort(m.Dest)
	m.Dest = slices.Compact(m.Dest)
	if len(m.Dest) == 0 {
		m.Dest = nil
	}
	p := r.IntN(40)
	if r.IntN(20) == 0 {
		p = r.IntN(5000)
	}
	if p > 0 {
		m.Payload = make([]byte, p)
		for i := range m.Payload {
			m.Payload[i] = byte(r.Uint32())
		}
	}
	return m
}

func randState(r *rand.Rand) MsgState {
	return MsgState{
		M:       randAppMsg(r),
		Phase:   Phase(r.IntN(int(PhaseCommitted) + 1)),
		LTS:     randTS(r),
		GTS:     randTS(r),
		Ballots: randBallots(r),
		LTSs:    randTSs(r),
	}
}

func randTSs(r *rand.Rand) []Timestamp {
	n := r.IntN(4)
	if n == 0 {
		return nil
	}
	ts := make([]Timestamp, n)
	for i := range ts {
		ts[i] = randTS(r)
	}
	return ts
}

func randStates(r *rand.Rand) []MsgState {
	n := r.IntN(4)
	if n == 0 {
		return nil
	}
	ss := make([]MsgState, n)
	for i := range ss {
		ss[i] = randState(r)
	}
	return ss
}

func randPaged(r *rand.Rand) Paged {
	return Paged{Page: uint32(randNum(r, 32)), More: r.IntN(2) == 0}
}

// randMessage returns a random message of kind k.
func randMessage(r *rand.Rand, k Kind) Message {
	switch k {
	case KindMulticast:
		return &Multicast{M: randAppMsg(r)}
	case KindPropose:
		return &Propose{ID: randID(r), G: GroupID(randNum(r, 32)), LTS: randTS(r)}
	case KindAccept:
		return &Accept{M: randAppMsg(r), G: GroupID(randNum(r, 32)), B: randBallot(r), LTS: randTS(r), Linf: randTS(r)}
	case KindAcceptAck:
		return &AcceptAck{ID: randID(r), G: GroupID(randNum(r, 32)), Ballots: randBallots(r), GTS: randTS(r), Linf: randTS(r)}
	case KindDeliver:
		d := &Deliver{ID: randID(r), B: randBallot(r), LTS: randTS(r), GTS: randTS(r), Prev: randTS(r), Linf: randTS(r)}
		if r.IntN(2) == 0 {
			m := randAppMsg(r)
			d.M = &m
		}
		return d
	case KindDelivered:
		d := &Delivered{ID: randID(r), G: GroupID(randNum(r, 32)), GTS: randTS(r), Leader: ProcID(randNum(r, 32))}
		if r.IntN(2) == 0 {
			d.HasResult = true
			d.Result = randBytes(r)
		}
		return d
	case KindNewLeader:
		return &NewLeader{B: randBallot(r)}
	case KindNewLeaderAck:
		return &NewLeaderAck{B: randBallot(r), CBallot: randBallot(r), Clock: randNum(r, 64), MaxDelivered: randTS(r), Linf: randTS(r), State: randStates(r), Paged: randPaged(r)}
	case KindSnapshot:
		return &Snapshot{B: randBallot(r), Image: *randMessage(r, KindRecSnapshot).(*RecSnapshot), Paged: randPaged(r)}
	case KindRejoin:
		return &Rejoin{Floor: randBallot(r)}
	case KindHandOver:
		return &HandOver{B: randBallot(r)}
	case KindAppSnapRequest:
		return &AppSnapRequest{Point: randTS(r), Snap: randTS(r), Offset: randNum(r, 40)}
	case KindAppSnapChunk:
		total := randNum(r, 40)
		var data []byte
		for range r.IntN(5) {
			data = append(data, byte(r.IntN(256)))
		}
		return &AppSnapChunk{Snap: randTS(r), Offset: total / 2, Total: total, Data: data}
	case KindRecInstall:
		return &RecInstall{Image: *randMessage(r, KindRecSnapshot).(*RecSnapshot), Paged: randPaged(r)}
	case KindNewState:
		return &NewState{B: randBallot(r), Clock: randNum(r, 64), State: randStates(r), Paged: randPaged(r)}
	case KindNewStateAck:
		return &NewStateAck{B: randBallot(r), MaxDelivered: randTS(r)}
	case KindHeartbeat:
		return &Heartbeat{B: randBallot(r), CBallot: randBallot(r), Leader: r.IntN(2) == 1, MaxDelivered: randTS(r), Linf: randTS(r)}
	case KindRecBallot:
		return &RecBallot{Ballot: randBallot(r), CBallot: randBallot(r)}
	case KindRecAccepted:
		return &RecAccepted{S: randState(r)}
	case KindRecDelivered:
		return &RecDelivered{M: randAppMsg(r), LTS: randTS(r), GTS: randTS(r)}
	case KindRecSnapshot:
		ss := randStates(r)
		var del []bool
		for range ss {
			del = append(del, r.IntN(2) == 0)
		}
		var done []ClientDone
		for range r.IntN(3) {
			c := ClientDone{Client: ProcID(randNum(r, 32)), Session: SessionID{Hi: randNum(r, 64), Lo: randNum(r, 64)}, Floor: randNum(r, 64)}
			for range r.IntN(3) {
				c.Collected = append(c.Collected, SeqDigest{Seq: randNum(r, 64), Digest: Digest{byte(r.IntN(256)), 7: byte(r.IntN(256))}})
			}
			done = append(done, c)
		}
		return &RecSnapshot{Ballot: randBallot(r), CBallot: randBallot(r), Clock: randNum(r, 64), MaxDelivered: randTS(r),
			Msgs: ss, Delivered: del, Done: done}
	case KindRecCollected:
		return &RecCollected{IDs: randIDList(r)}
	case KindRecNewState:
		return &RecNewState{B: randBallot(r), Clock: randNum(r, 64), State: randStates(r), Paged: randPaged(r)}
	case KindPaxosPrepare:
		return &PaxosPrepare{B: randBallot(r), From: randNum(r, 64)}
	case KindPaxosPromise:
		var es []LogEntry
		for range r.IntN(4) {
			es = append(es, LogEntry{Slot: randNum(r, 64), B: randBallot(r), Decided: r.IntN(2) == 1, Cmd: randCommand(r)})
		}
		return &PaxosPromise{B: randBallot(r), Executed: randNum(r, 64), Entries: es}
	case KindPaxosAccept:
		return &PaxosAccept{B: randBallot(r), Slot: randNum(r, 64), Cmd: randCommand(r)}
	case KindPaxosAccepted:
		return &PaxosAccepted{B: randBallot(r), Slot: randNum(r, 64)}
	case KindPaxosDecided:
		var cs []Command
		for range r.IntN(4) {
			cs = append(cs, randCommand(r))
		}
		return &PaxosDecided{First: randNum(r, 64), Cmds: cs}
	case KindPaxosHeartbeat:
		return &PaxosHeartbeat{B: randBallot(r), Leader: r.IntN(2) == 1, Executed: randNum(r, 64), Commit: randNum(r, 64)}
	case KindSoftTS:
		return &SoftTS{ID: randID(r), G: GroupID(randNum(r, 32)), LTS: randTS(r)}
	case KindHardTS:
		return &HardTS{ID: randID(r), G: GroupID(randNum(r, 32)), LTS: randTS(r)}
	case KindRecSlotAccepted:
		return &RecSlotAccepted{B: randBallot(r), Slot: randNum(r, 64), Cmd: randCommand(r)}
	case KindRecSlotDecided:
		return &RecSlotDecided{Slot: randNum(r, 64), Cmd: randCommand(r)}
	case KindRecExpired:
		var ks []SessionKey
		for range r.IntN(4) {
			ks = append(ks, SessionKey{Client: ProcID(randNum(r, 32)), Session: SessionID{Hi: randNum(r, 64), Lo: randNum(r, 64)}})
		}
		return &RecExpired{Sessions: ks, IDs: randIDList(r)}
	case KindGossip:
		return &Gossip{Data: randBytes(r)}
	case KindViewRequest:
		return &ViewRequest{}
	case KindView:
		var es []ViewEntry
		id := ProcID(0)
		for range r.IntN(4) {
			id += ProcID(1 + randNum(r, 16))
			es = append(es, ViewEntry{ID: id, Group: GroupID(randNum(r, 32)), Ballot: randBallot(r),
				Leader: r.IntN(2) == 0, Alive: r.IntN(2) == 0, Addr: string(randBytes(r))})
		}
		return &View{Entries: es}
	case KindOverloaded:
		return &Overloaded{ID: randID(r)}
	case KindReadIndex:
		return &ReadIndex{B: randBallot(r), Seq: randNum(r, 64)}
	case KindReadIndexAck:
		return &ReadIndexAck{B: randBallot(r), Seq: randNum(r, 64)}
	case KindRead:
		return &Read{ID: randID(r), G: GroupID(randNum(r, 32)), Mode: ReadMode(1 + r.IntN(int(readModeEnd-1))), Query: randBytes(r)}
	case KindReadReply:
		return &ReadReply{ID: randID(r), G: GroupID(randNum(r, 32)), Status: ReadStatus(r.IntN(int(readStatusEnd))), Index: randTS(r),
			Leader: ProcID(randNum(r, 32)), Result: randBytes(r), Err: string(randBytes(r))}
	case KindVote:
		return &Vote{ID: randID(r), GTS: randTS(r), G: GroupID(randNum(r, 32)), Vote: randBytes(r)}
	case KindVotePull:
		return &VotePull{ID: randID(r), GTS: randTS(r), G: GroupID(randNum(r, 32))}
	case KindApplied:
		return &Applied{G: GroupID(randNum(r, 32)), GTS: randTS(r)}
	case KindBatch:
		b := &Batch{}
		for range 2 + r.IntN(4) {
			k := KindBatch
			for k == KindBatch {
				k = Kind(1 + r.IntN(int(kindEndMessages-1)))
			}
			b.Msgs = append(b.Msgs, randMessage(r, k))
		}
		return b
	}
	panic("randMessage: kind " + k.String())
}

func randCommand(r *rand.Rand) Command {
	return Command{Op: CmdOp(r.IntN(int(cmdOpEnd))), M: randAppMsg(r), TS: randTS(r)}
}

func TestRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	kinds := allKinds()
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		checkRoundTrip(t, randMessage(r, kinds[r.IntN(len(kinds))]))
	}
}

// randBytes returns a short random byte string (possibly empty).
func randBytes(r *rand.Rand) []byte {
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	if len(b) == 0 {
		return nil
	}
	return b
}
