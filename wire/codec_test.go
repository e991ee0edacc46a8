package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// sampleState is a MsgState with every field set.
func sampleState(seq uint64, ph Phase) MsgState {
	return MsgState{
		M:       AppMsg{ID: MsgID{Client: 9, Seq: seq}, Dest: []GroupID{1, 3}, Payload: []byte("st")},
		Phase:   ph,
		LTS:     Timestamp{T: 4, G: 1},
		GTS:     Timestamp{T: 6, G: 3},
		Ballots: []Ballot{{N: 2, P: 3}, {N: 1, P: 9}},
		LTSs:    []Timestamp{{T: 4, G: 1}, {T: 6, G: 3}},
	}
}

// samples returns one or more messages of every kind, with their Describe
// rendering.
func samples() []struct {
	m    Message
	desc string
} {
	big := MsgID{Client: math.MaxUint32, Seq: math.MaxUint64, Digest: Digest{0: 0xff, 15: 0x80}}
	return []struct {
		m    Message
		desc string
	}{
		{&Multicast{M: AppMsg{ID: MsgID{Client: 7, Seq: 1}, Dest: []GroupID{0, 2}, Payload: []byte("hello")}},
			`MULTICAST 7.1 dest=[0 2] payload="hello"`},
		{&Multicast{M: AppMsg{ID: big, Dest: []GroupID{0, 1, math.MaxUint32}, Payload: bytes.Repeat([]byte{0xff}, 300)}},
			`MULTICAST 4294967295.18446744073709551615 dest=[0 1 4294967295] payload=300B`},
		{&Multicast{M: AppMsg{ID: MsgID{Client: 1, Seq: 0}}},
			`MULTICAST 1.0 dest=[] payload=0B`},
		{&Propose{ID: MsgID{Client: 7, Seq: 1}, G: 2, LTS: Timestamp{T: 3, G: 2}},
			`PROPOSE 7.1 g=2 lts=3.g2`},
		{&Accept{M: AppMsg{ID: MsgID{Client: 7, Seq: 1}, Dest: []GroupID{0, 2}, Payload: []byte("hello")}, G: 0, B: Ballot{0, 0}, LTS: Timestamp{3, 0}},
			`ACCEPT 7.1 dest=[0 2] g=0 b=0.p0 lts=3.g0`},
		{&Accept{M: AppMsg{ID: big, Dest: []GroupID{5}}, G: 5, B: Ballot{math.MaxUint32, math.MaxUint32}, LTS: Timestamp{math.MaxUint64, 5}},
			`ACCEPT 4294967295.18446744073709551615 dest=[5] g=5 b=4294967295.p4294967295 lts=18446744073709551615.g5`},
		{&AcceptAck{ID: MsgID{Client: 7, Seq: 1}, G: 2, Ballots: []Ballot{{0, 0}, {1, 6}}, GTS: Timestamp{3, 2}},
			`ACCEPT_ACK 7.1 g=2 B=[0.p0 1.p6] gts=3.g2`},
		{&AcceptAck{ID: MsgID{Client: 7, Seq: 1}, G: 2, GTS: Timestamp{3, 2}, Linf: Timestamp{2, 0}},
			`ACCEPT_ACK 7.1 g=2 B=[] gts=3.g2 linf=2.g0`},
		{&Deliver{ID: MsgID{Client: 7, Seq: 1}, B: Ballot{0, 0}, LTS: Timestamp{1, 0}, GTS: Timestamp{3, 2}},
			`DELIVER 7.1 b=0.p0 lts=1.g0 gts=3.g2`},
		{&Deliver{ID: MsgID{Client: 7, Seq: 2}, B: Ballot{1, 1}, LTS: Timestamp{4, 0}, GTS: Timestamp{5, 2}, Prev: Timestamp{3, 2}, Linf: Timestamp{2, 1},
			M: &AppMsg{ID: MsgID{Client: 7, Seq: 2}, Dest: []GroupID{0, 2}, Payload: []byte("x")}},
			`DELIVER 7.2 b=1.p1 lts=4.g0 gts=5.g2 prev=3.g2 linf=2.g1 +msg`},
		{&Delivered{ID: MsgID{Client: 7, Seq: 1}, G: 2, GTS: Timestamp{3, 2}, Leader: 6},
			`DELIVERED 7.1 g=2 gts=3.g2 leader=p6`},
		{&Delivered{ID: MsgID{Client: 7, Seq: 1}, G: 2, GTS: Timestamp{3, 2}, Leader: 6, HasResult: true, Result: []byte("ok")},
			`DELIVERED 7.1 g=2 gts=3.g2 leader=p6 result=2B`},
		{&NewLeader{B: Ballot{1, 4}},
			`NEW_LEADER b=1.p4`},
		{&NewLeaderAck{B: Ballot{1, 4}, CBallot: Ballot{0, 3}, Clock: 17, MaxDelivered: Timestamp{5, 1},
			State: []MsgState{sampleState(1, PhaseAccepted), sampleState(2, PhaseCommitted)}},
			`NEW_LEADER_ACK b=1.p4 cb=0.p3 clock=17 maxd=5.g1 state=[{9.1 ACCEPTED dest=[1 3] lts=4.g1 gts=6.g3 B=[2.p3 1.p9]} {9.2 COMMITTED dest=[1 3] lts=4.g1 gts=6.g3 B=[2.p3 1.p9]}]`},
		{&NewLeaderAck{B: Ballot{1, 4}},
			`NEW_LEADER_ACK b=1.p4 cb=0.p0 clock=0 state=[]`},
		{&NewLeaderAck{B: Ballot{1, 4}, State: []MsgState{sampleState(3, PhaseCommitted)}, Paged: Paged{Page: 2, More: true}},
			`NEW_LEADER_ACK b=1.p4 cb=0.p0 clock=0 state=[{9.3 COMMITTED dest=[1 3] lts=4.g1 gts=6.g3 B=[2.p3 1.p9]}] page=2 more`},
		{&NewLeaderAck{B: Ballot{1, 4}, Linf: Timestamp{3, 0}},
			`NEW_LEADER_ACK b=1.p4 cb=0.p0 clock=0 linf=3.g0 state=[]`},
		{&Snapshot{B: Ballot{2, 4}, Image: RecSnapshot{Clock: 9, MaxDelivered: Timestamp{8, 1}, Msgs: []MsgState{sampleState(1, PhaseCommitted)}, Delivered: []bool{true},
			Done: []ClientDone{{Client: 7, Session: Session(1), Collected: []SeqDigest{{Seq: 1}}}}}, Paged: Paged{Page: 1}},
			`SNAPSHOT b=2.p4 point=8.g1 clock=9 msgs=1 sessions=1 page=1`},
		{&HandOver{B: Ballot{4, 2}}, "HANDOVER b=4.p2"},
		{&Rejoin{Floor: Ballot{3, 5}},
			`REJOIN floor=3.p5`},
		{&AppSnapRequest{Point: Timestamp{8, 1}, Offset: 1 << 20},
			`APP_SNAPSHOT_REQUEST point=8.g1 snap=0.g0 offset=1048576`},
		{&AppSnapChunk{Snap: Timestamp{9, 1}, Offset: 4, Total: 7, Data: []byte("abc")},
			`APP_SNAPSHOT_CHUNK snap=9.g1 offset=4 total=7 data=3B`},
		{&RecInstall{Image: RecSnapshot{MaxDelivered: Timestamp{8, 1}}, Paged: Paged{More: true}},
			`REC_INSTALL point=8.g1 clock=0 msgs=0 sessions=0 page=0 more`},
		{&NewState{B: Ballot{1, 4}, Clock: 20, State: []MsgState{{M: AppMsg{ID: MsgID{Client: 3, Seq: 3}}}}},
			`NEW_STATE b=1.p4 clock=20 state=[{3.3 START dest=[] lts=0.g0 gts=0.g0 B=[]}]`},
		{&NewState{B: Ballot{1, 4}, Clock: 20, Paged: Paged{Page: math.MaxUint32}},
			`NEW_STATE b=1.p4 clock=20 state=[] page=4294967295`},
		{&NewState{B: Ballot{1, 4}, Clock: 20, Paged: Paged{More: true}},
			`NEW_STATE b=1.p4 clock=20 state=[] page=0 more`},
		{&NewStateAck{B: Ballot{1, 4}, MaxDelivered: Timestamp{5, 1}},
			`NEW_STATE_ACK b=1.p4 maxd=5.g1`},
		{&Heartbeat{B: Ballot{1, 4}, CBallot: Ballot{1, 4}, Leader: true, MaxDelivered: Timestamp{3, 1}, Linf: Timestamp{2, 0}},
			`HEARTBEAT b=1.p4 cb=1.p4 leader=true maxd=3.g1 linf=2.g0`},
		{&Heartbeat{B: Ballot{1, 4}},
			`HEARTBEAT b=1.p4 cb=0.p0 leader=false`},
		{&RecBallot{Ballot: Ballot{2, 5}, CBallot: Ballot{1, 4}},
			`REC_BALLOT b=2.p5 cb=1.p4`},
		{&RecAccepted{S: sampleState(8, PhaseProposed)},
			`REC_ACCEPTED {9.8 PROPOSED dest=[1 3] lts=4.g1 gts=6.g3 B=[2.p3 1.p9]}`},
		{&RecDelivered{M: AppMsg{ID: MsgID{Client: 7, Seq: 1}, Dest: []GroupID{2}}, LTS: Timestamp{3, 2}, GTS: Timestamp{3, 2}},
			`REC_DELIVERED 7.1 lts=3.g2 gts=3.g2`},
		{&RecCollected{IDs: []MsgID{{Client: 7, Seq: 1}, {Client: 8, Session: Session(1 << 63), Seq: 3}}},
			`REC_COLLECTED ids=[7.1 8.3@8000000000000000]`},
		{&RecExpired{Sessions: []SessionKey{{Client: 7, Session: Session(1)}, {Client: 8, Session: Session(0xab)}}, IDs: []MsgID{{Client: 9, Seq: 2}}},
			`REC_EXPIRED sessions=[7@1 8@ab] ids=[9.2]`},
		{&RecSnapshot{Ballot: Ballot{2, 5}, CBallot: Ballot{2, 5}, Clock: 9, MaxDelivered: Timestamp{6, 3},
			Msgs: []MsgState{sampleState(1, PhaseCommitted)}, Delivered: []bool{true},
			Done: []ClientDone{{Client: 9, Collected: []SeqDigest{{Seq: 6, Digest: Digest{1}}, {Seq: 9}}}, {Client: 9, Session: Session(3), Floor: 7}}},
			`REC_SNAPSHOT b=2.p5 cb=2.p5 clock=9 maxd=6.g3 msgs=1 sessions=2`},
		{&RecNewState{B: Ballot{2, 5}, Clock: 1 << 40, State: []MsgState{sampleState(1, PhaseStart)}},
			`REC_NEW_STATE b=2.p5 clock=1099511627776 state=[{9.1 START dest=[1 3] lts=4.g1 gts=6.g3 B=[2.p3 1.p9]}]`},
		{&RecNewState{B: Ballot{2, 5}, Clock: 9, State: []MsgState{sampleState(2, PhaseAccepted)}, Paged: Paged{Page: 300}},
			`REC_NEW_STATE b=2.p5 clock=9 state=[{9.2 ACCEPTED dest=[1 3] lts=4.g1 gts=6.g3 B=[2.p3 1.p9]}] page=300`},
		{&PaxosPrepare{B: Ballot{1, 4}, From: 12},
			`PAXOS_PREPARE b=1.p4 from=12`},
		{&PaxosPromise{B: Ballot{1, 4}, Executed: 3, Entries: []LogEntry{
			{Slot: 3, B: Ballot{0, 3}, Cmd: sampleAssign()},
			{Slot: 4, B: Ballot{0, 3}, Decided: true, Cmd: sampleFinal()},
			{Slot: 5, B: Ballot{0, 3}}}},
			`PAXOS_PROMISE b=1.p4 exec=3 entries=[{3 b=0.p3 ASSIGN 7.1 dest=[0 2]} {4 b=0.p3 decided FINAL 7.1 dest=[0 2] gts=5.g2} {5 b=0.p3 NOOP}]`},
		{&PaxosPromise{B: Ballot{1, 4}},
			`PAXOS_PROMISE b=1.p4 exec=0 entries=[]`},
		{&PaxosAccept{B: Ballot{0, 3}, Slot: 7, Cmd: sampleAssign()},
			`PAXOS_ACCEPT b=0.p3 slot=7 ASSIGN 7.1 dest=[0 2]`},
		{&PaxosAccept{B: Ballot{0, 3}, Slot: math.MaxUint64, Cmd: Command{Op: CmdAssign, M: AppMsg{ID: MsgID{Client: 7, Seq: 2}, Dest: []GroupID{1}}, TS: Timestamp{4, 1}}},
			`PAXOS_ACCEPT b=0.p3 slot=18446744073709551615 ASSIGN 7.2 dest=[1] lts=4.g1`},
		{&PaxosAccepted{B: Ballot{0, 3}, Slot: 7},
			`PAXOS_ACCEPTED b=0.p3 slot=7`},
		{&PaxosDecided{First: 2, Cmds: []Command{sampleAssign(), {Op: CmdNoop}, sampleFinal()}},
			`PAXOS_DECIDED first=2 cmds=[ASSIGN 7.1 dest=[0 2] | NOOP | FINAL 7.1 dest=[0 2] gts=5.g2]`},
		{&PaxosHeartbeat{B: Ballot{2, 1}, Leader: true, Executed: 9, Commit: 10},
			`PAXOS_HEARTBEAT b=2.p1 leader=true exec=9 commit=10`},
		{&SoftTS{ID: MsgID{Client: 7, Seq: 1}, G: 2, LTS: Timestamp{5, 2}},
			`SOFT_TS 7.1 g=2 lts=5.g2`},
		{&HardTS{ID: MsgID{Client: 7, Seq: 1}, G: 0, LTS: Timestamp{3, 0}},
			`HARD_TS 7.1 g=0 lts=3.g0`},
		{&RecSlotAccepted{B: Ballot{0, 3}, Slot: 7, Cmd: sampleFinal()},
			`REC_SLOT_ACCEPTED b=0.p3 slot=7 FINAL 7.1 dest=[0 2] gts=5.g2`},
		{&RecSlotDecided{Slot: 8, Cmd: Command{Op: CmdNoop}},
			`REC_SLOT_DECIDED slot=8 NOOP`},
		{&Gossip{Data: []byte{1, 2, 3}}, `GOSSIP 3B`},
		{&ViewRequest{}, `VIEW_REQUEST`},
		{&View{Entries: []ViewEntry{{ID: 0, Group: 0, Ballot: Ballot{2, 0}, Leader: true, Alive: true, Addr: "127.0.0.1:7100"},
			{ID: 4, Group: 1, Ballot: Ballot{1, 3}}}},
			`VIEW p0:g0:2.p0:leader@127.0.0.1:7100 p4:g1:1.p3:down`},
		{&Overloaded{ID: MsgID{Client: 7, Seq: 3}}, `OVERLOADED 7.3`},
		{&ReadIndex{B: Ballot{2, 1}, Seq: 9}, `READ_INDEX b=2.p1 seq=9`},
		{&ReadIndexAck{B: Ballot{3, 2}, Seq: 9}, `READ_INDEX_ACK b=3.p2 seq=9`},
		{&Read{ID: MsgID{Client: 7, Seq: 4}, G: 1, Mode: ReadLinearizable, Query: []byte("k")}, `READ 7.4 g=1 mode=linearizable query=1B`},
		{&Read{ID: MsgID{Client: 7, Seq: 5}, Mode: ReadLocal}, `READ 7.5 g=0 mode=local query=0B`},
		{&ReadReply{ID: MsgID{Client: 7, Seq: 4}, G: 1, Index: Timestamp{5, 1}, Leader: 3, Result: []byte("v")},
			`READ_REPLY 7.4 g=1 OK index=5.g1 leader=p3 result=1B`},
		{&ReadReply{ID: MsgID{Client: 7, Seq: 4}, G: 1, Status: ReadNotLeader, Leader: 4, Err: "deposed"},
			`READ_REPLY 7.4 g=1 NOT_LEADER leader=p4 err="deposed"`},
		{&Vote{ID: MsgID{Client: 7, Seq: 4}, GTS: Timestamp{5, 1}, G: 2, Vote: []byte{1}}, `VOTE 7.4 gts=5.g1 g=2 vote=1B`},
		{&VotePull{ID: MsgID{Client: 7, Seq: 4}, GTS: Timestamp{5, 1}, G: 2}, `VOTE_PULL 7.4 gts=5.g1 g=2`},
		{&Batch{Msgs: []Message{&NewLeader{B: Ballot{2, 1}}, &VotePull{ID: MsgID{Client: 7, Seq: 4}, GTS: Timestamp{5, 1}, G: 2}}},
			`BATCH msgs=2 [NEW_LEADER b=2.p1; VOTE_PULL 7.4 gts=5.g1 g=2]`},
		{&Applied{G: 2, GTS: Timestamp{9, 1}}, `APPLIED g=2 gts=9.g1`},
	}
}

// sampleAssign and sampleFinal are log commands with their fields set.
func sampleAssign() Command {
	return Command{Op: CmdAssign, M: AppMsg{ID: MsgID{Client: 7, Seq: 1}, Dest: []GroupID{0, 2}, Payload: []byte("hi")}}
}

func sampleFinal() Command {
	return Command{Op: CmdFinal, M: AppMsg{ID: MsgID{Client: 7, Seq: 1}, Dest: []GroupID{0, 2}}, TS: Timestamp{5, 2}}
}

// allKinds lists every kind that has a name, i.e. every defined kind.
func allKinds() []Kind {
	var ks []Kind
	for k := range kindNames {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestSamplesCoverEveryKind(t *testing.T) {
	seen := map[Kind]bool{}
	for _, s := range samples() {
		seen[s.m.Kind()] = true
	}
	for _, k := range allKinds() {
		if !seen[k] {
			t.Errorf("no codec sample for kind %v", k)
		}
		if k == KindInvalid || (k >= kindEndMessages && k < KindRecBallot) || k >= kindEndRecords {
			t.Errorf("kind %v has a name but is outside the defined ranges", k)
		}
	}
	if n := int(kindEndMessages-1) + int(kindEndRecords-KindRecBallot); len(seen) != n {
		t.Errorf("samples cover %d kinds, want %d", len(seen), n)
	}
}

func checkRoundTrip(t testing.TB, m Message) []byte {
	t.Helper()
	enc := Append(nil, m)
	if len(enc) != Size(m) {
		t.Fatalf("%s: Size = %d, encoding has %d bytes", Describe(m), Size(m), len(enc))
	}
	if enc[0] != Version || Kind(enc[1]) != m.Kind() {
		t.Fatalf("%s: header % x", Describe(m), enc[:2])
	}
	got, err := Decode(enc)
	if err != nil {
		t.Fatalf("%s: Decode: %v\nencoding % x", Describe(m), err, enc)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip mismatch:\n got  %#v\n want %#v", got, m)
	}
	// Appending after a prefix leaves the prefix alone and adds the same bytes.
	prefix := []byte("prefix")
	enc2 := Append(prefix[:len(prefix):len(prefix)], m)
	if !bytes.Equal(enc2[:len(prefix)], prefix) || !bytes.Equal(enc2[len(prefix):], enc) {
		t.Fatalf("%s: Append after a prefix differs", Describe(m))
	}
	return enc
}

func TestRoundTripSamples(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.m.Kind().String(), func(t *testing.T) {
			checkRoundTrip(t, s.m)
		})
	}
}

func TestDescribe(t *testing.T) {
	for _, s := range samples() {
		if got := Describe(s.m); got != s.desc {
			t.Errorf("Describe:\n got  %s\n want %s", got, s.desc)
		}
	}
	e := Envelope{From: 3, To: 12, Msg: &NewLeader{B: Ballot{1, 3}}}
	if got, want := DescribeEnvelope(e), "p3->p12 NEW_LEADER b=1.p3"; got != want {
		t.Errorf("DescribeEnvelope = %q, want %q", got, want)
	}
	if got := Describe(nil); got != "<nil>" {
		t.Errorf("Describe(nil) = %q", got)
	}
	if got := Describe((*Accept)(nil)); got != "ACCEPT <nil>" {
		t.Errorf("Describe(nil *Accept) = %q", got)
	}
	long := &Multicast{M: AppMsg{ID: MsgID{Client: 1, Seq: 1}, Dest: []GroupID{0}, Payload: []byte("0123456789abcdefg")}}
	if got, want := Describe(long), "MULTICAST 1.1 dest=[0] payload=17B"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	quote := &Multicast{M: AppMsg{ID: MsgID{Client: 1, Seq: 1}, Dest: []GroupID{0}, Payload: []byte(`a"b`)}}
	if got, want := Describe(quote), "MULTICAST 1.1 dest=[0] payload=3B"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

func TestDecodeCopiesBytes(t *testing.T) {
	m := &Accept{M: AppMsg{ID: MsgID{Client: 1, Seq: 2}, Dest: []GroupID{0, 1}, Payload: []byte("payload")}}
	enc := Append(nil, m)
	got, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		enc[i] = 0xAA
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("decoded message changed with its input: %#v", got)
	}
}

func TestAppendPanics(t *testing.T) {
	type bogus struct{ Message }
	for name, m := range map[string]Message{
		"nil":         nil,
		"nil pointer": (*Accept)(nil),
		"unknown":     bogus{},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Append(%s) did not panic", name)
				}
			}()
			Append(nil, m)
		})
	}
}

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
		var ids []MsgID
		for range r.IntN(4) {
			ids = append(ids, randID(r))
		}
		return &RecCollected{IDs: ids}
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
		var ids []MsgID
		for range r.IntN(4) {
			ids = append(ids, randID(r))
		}
		return &RecExpired{Sessions: ks, IDs: ids}
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

// Errors.

// raw builds an encoding by hand: version, kind, then each item as a uvarint
// (uint64/int) or verbatim ([]byte).
func raw(version byte, k Kind, items ...any) []byte {
	b := []byte{version, byte(k)}
	for _, it := range items {
		switch v := it.(type) {
		case int:
			b = binary.AppendUvarint(b, uint64(v))
		case uint64:
			b = binary.AppendUvarint(b, v)
		case []byte:
			b = append(b, v...)
		default:
			panic("raw: bad item")
		}
	}
	return b
}

func TestDecodeErrors(t *testing.T) {
	valid := Append(nil, &Accept{M: AppMsg{ID: MsgID{Client: 7, Seq: 1}, Dest: []GroupID{0, 2}, Payload: []byte("hi")}, B: Ballot{1, 2}, LTS: Timestamp{3, 0}})
	withTrailing := append(slices.Clone(valid), 0)
	badVersion := slices.Clone(valid)
	badVersion[0] = Version + 1
	oldVersion := slices.Clone(valid)
	oldVersion[0] = 1
	v2 := slices.Clone(valid)
	v2[0] = 2
	v4 := slices.Clone(valid)
	v4[0] = 4
	zeroVersion := slices.Clone(valid)
	zeroVersion[0] = 0
	dg := make([]byte, len(Digest{})) // a MsgID's digest

	tests := []struct {
		name    string
		in      []byte
		want    error
		wantMsg string // substring of the error text
	}{
		{"empty", nil, ErrMalformed, "empty"},
		{"version only", []byte{Version}, ErrMalformed, "kind"},
		{"version 6", badVersion, ErrVersion, "version byte 6"},
		{"version 4 (before 128-bit sessions)", v4, ErrVersion, "version byte 4"},
		{"version 1 (before client sessions)", oldVersion, ErrVersion, "version byte 1"},
		{"version 2 (before content digests)", v2, ErrVersion, "version byte 2"},
		{"version 0", zeroVersion, ErrVersion, "version byte 0"},
		{"kind 0", raw(Version, KindInvalid), ErrUnknownKind, "kind byte 0"},
		{"kind end of messages", raw(Version, kindEndMessages), ErrUnknownKind, "kind byte 37"},
		{"kind 99", raw(Version, 99), ErrUnknownKind, "kind byte 99"},
		{"kind end of records", raw(Version, kindEndRecords), ErrUnknownKind, "kind byte 110"},
		{"kind 255", raw(Version, 255), ErrUnknownKind, "kind byte 255"},
		{"trailing byte", withTrailing, ErrMalformed, "1 trailing bytes"},
		{"trailing after empty body", raw(Version, KindNewLeader, 1, 2, 3), ErrMalformed, "trailing"},
		{"unsorted dest", raw(Version, KindMulticast, 1, 0, 0, 1, dg, 0, 2, 5, 3, 0), ErrMalformed, "m.dest"},
		{"duplicate dest", raw(Version, KindMulticast, 1, 0, 0, 1, dg, 0, 2, 5, 5, 0), ErrMalformed, "not strictly increasing"},
		{"dest over 32 bits", raw(Version, KindMulticast, 1, 0, 0, 1, dg, 0, 1, uint64(1)<<32, 0), ErrMalformed, "32 bits"},
		{"client over 32 bits", raw(Version, KindRecDelivered, uint64(1)<<32, 0, 1, 0, 1, 0), ErrMalformed, "id"},
		{"ballot over 32 bits", raw(Version, KindNewLeader, uint64(math.MaxUint64), 0), ErrMalformed, "field b"},
		{"varint overflow", raw(Version, KindNewLeader, bytes.Repeat([]byte{0xff}, 10), []byte{1}), ErrMalformed, "overflow"},
		{"varint too long", raw(Version, KindNewLeader, bytes.Repeat([]byte{0x80}, 11)), ErrMalformed, "overflow"},
		{"non-minimal varint", raw(Version, KindNewLeader, []byte{0x81, 0x00}, 0), ErrMalformed, "non-minimal"},
		{"non-minimal zero", raw(Version, KindNewLeader, []byte{0x80, 0x00}, 0), ErrMalformed, "non-minimal"},
		{"heartbeat bool 2", raw(Version, KindHeartbeat, 1, 1, 1, 1, 2), ErrMalformed, "leader"},
		{"phase out of range", raw(Version, KindRecAccepted, 1, 0, 0, 1, dg, 0, 0, 0, []byte{byte(PhaseCommitted) + 1}, 0, 0, 0, 0, 0), ErrMalformed, "s.phase"},
		{"command op out of range", raw(Version, KindPaxosAccept, 0, 0, 1, []byte{byte(cmdOpEnd)}, 1, 0, 0, 1, dg, 0, 0, 0, 0, 0), ErrMalformed, "cmd.op"},
		{"promise entry op out of range", raw(Version, KindPaxosPromise, 0, 0, 0, 1, 1, 0, 0, []byte{0}, []byte{9}, 1, 0, 1, 0, 0, 0, 0, 0), ErrMalformed, "entries.cmd.op"},
		{"promise entries past end", raw(Version, KindPaxosPromise, 0, 0, 0, 5, 1, 0, 0), ErrMalformed, "entries"},
		{"decided bool 2", raw(Version, KindPaxosPromise, 0, 0, 0, 1, 1, 0, 0, []byte{2}, []byte{0}, 1, 0, 1, 0, 0, 0, 0, 0), ErrMalformed, "entries.decided"},
		{"command dest unsorted", raw(Version, KindRecSlotDecided, 1, []byte{1}, 1, 0, 0, 1, dg, 0, 2, 4, 3, 0, 0, 0), ErrMalformed, "cmd.m.dest"},
		{"phase 255", raw(Version, KindRecAccepted, 1, 0, 0, 1, dg, 0, 0, 0, []byte{255}, 0, 0, 0, 0, 0), ErrMalformed, "phase 255"},
		{"oversized payload", raw(Version, KindMulticast, 1, 0, 0, 1, dg, 0, 1, 0, MaxPayload+1), ErrTooLarge, "m.payload"},
		{"oversized result", raw(Version, KindDelivered, 1, 0, 0, 1, dg, 0, 1, 0, 0, []byte{1}, MaxPayload+1), ErrTooLarge, "result"},
		{"result past end", raw(Version, KindDelivered, 1, 0, 0, 1, dg, 0, 1, 0, 0, []byte{1}, 5, []byte("ab")), ErrMalformed, "result"},
		{"huge payload", raw(Version, KindMulticast, 1, 0, 0, 1, dg, 0, 1, 0, uint64(math.MaxUint64)), ErrTooLarge, "limit"},
		{"payload past end", raw(Version, KindMulticast, 1, 0, 0, 1, dg, 0, 1, 0, 10, []byte("abc")), ErrMalformed, "only 3 bytes left"},
		{"max payload past end", raw(Version, KindMulticast, 1, 0, 0, 1, dg, 0, 1, 0, MaxPayload), ErrMalformed, "m.payload"},
		{"too many dest groups", raw(Version, KindMulticast, 1, 0, 0, 1, dg, 0, MaxGroups+1), ErrTooLarge, "m.dest"},
		{"dest count past end", raw(Version, KindMulticast, 1, 0, 0, 1, dg, 0, MaxGroups, 0, 1), ErrMalformed, "m.dest"},
		{"too many ballots", raw(Version, KindAcceptAck, 1, 0, 0, 1, dg, 0, uint64(1)<<40), ErrTooLarge, "ballots"},
		{"ballot count past end", raw(Version, KindAcceptAck, 1, 0, 0, 1, dg, 0, 3, 1, 1, 1, 1, 1), ErrMalformed, "ballots"},
		{"too many states", raw(Version, KindNewState, 1, 1, 1, MaxStateEntries+1), ErrTooLarge, "state"},
		{"state count past end", raw(Version, KindNewState, 1, 1, 1, MaxStateEntries, bytes.Repeat([]byte{0}, 30)), ErrMalformed, "state"},
		{"state ballots past end", raw(Version, KindRecNewState, 1, 1, 1, 1, 1, 0, 0, 1, dg, 0, 0, 0, []byte{0}, 0, 0, 0, 0, 500), ErrMalformed, "state.ballots"},
		{"page over 32 bits", raw(Version, KindNewState, 1, 1, 1, 0, uint64(1)<<32, 0), ErrMalformed, "field page"},
		{"more bool 2", raw(Version, KindNewLeaderAck, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 7, 2), ErrMalformed, "field more"},
		{"rec page truncated", raw(Version, KindRecNewState, 1, 1, 1, 0), ErrMalformed, "field page"},
		{"rec more missing", raw(Version, KindRecNewState, 1, 1, 1, 0, 3), ErrMalformed, "field more"},
		{"nested dest unsorted", raw(Version, KindNewLeaderAck, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, dg, 0, 2, 4, 4, 0, []byte{0}, 0, 0, 0, 0, 0), ErrMalformed, "state.m.dest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode(% x) = %v, %v; want error %v", tc.in, m, err, tc.want)
			}
			if m != nil {
				t.Errorf("Decode returned a message with an error: %v", m)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
		})
	}
}

func TestDecodeEveryTruncation(t *testing.T) {
	for _, s := range samples() {
		enc := Append(nil, s.m)
		for n := range len(enc) {
			m, err := Decode(enc[:n])
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s truncated to %d of %d bytes: got %v, %v; want ErrMalformed", s.m.Kind(), n, len(enc), m, err)
			}
		}
	}
}

// TestDecodeSmallInputSmallAlloc checks that huge counts in tiny inputs are
// refused before anything big is allocated.
func TestDecodeSmallInputSmallAlloc(t *testing.T) {
	inputs := [][]byte{
		raw(Version, KindMulticast, 1, 1, MaxGroups, 0),
		raw(Version, KindMulticast, 1, 1, 0, MaxPayload),
		raw(Version, KindAcceptAck, 1, 1, 0, MaxGroups),
		raw(Version, KindNewState, 1, 1, 1, MaxStateEntries, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0}),
		raw(Version, KindRecNewState, 1, 1, 1, 1000, bytes.Repeat([]byte{0}, 100)),
	}
	for _, in := range inputs {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range 10 {
			if _, err := Decode(in); err == nil {
				t.Fatalf("Decode(% x) succeeded", in)
			}
		}
		runtime.ReadMemStats(&after)
		if perCall := (after.TotalAlloc - before.TotalAlloc) / 10; perCall > 4096 {
			t.Errorf("Decode(% x) allocated %d bytes per call", in, perCall)
		}
	}
}

// Fuzzing.

func fuzzSeeds() [][]byte {
	var seeds [][]byte
	for _, s := range samples() {
		seeds = append(seeds, Append(nil, s.m))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range allKinds() {
		seeds = append(seeds, Append(nil, randMessage(r, k)))
	}
	return seeds
}

// FuzzDecode checks Decode never panics, fails only with the sentinels, and
// is canonical: whatever decodes re-encodes to the same bytes and decodes to
// an equal value.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned %v with error %v", m, err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) &&
				!errors.Is(err, ErrUnknownKind) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Decode error %v wraps no sentinel", err)
			}
			return
		}
		enc := Append(nil, m)
		if !bytes.Equal(enc, data) {
			t.Fatalf("re-encoding differs:\n in  % x\n out % x", data, enc)
		}
		if Size(m) != len(enc) {
			t.Fatalf("Size = %d, encoding has %d bytes", Size(m), len(enc))
		}
		m2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decode mismatch:\n %#v\n %#v", m, m2)
		}
		_ = Describe(m)
	})
}

// byteSource is a rand.Source reading the fuzzer's bytes, so the fuzzer
// steers the random message generator. When the bytes run out it continues
// with a fixed PCG stream (a constant stream would make rand's rejection
// sampling loop forever).
type byteSource struct {
	b    []byte
	rest rand.PCG
}

func (s *byteSource) Uint64() uint64 {
	if len(s.b) == 0 {
		return s.rest.Uint64()
	}
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// FuzzRoundTrip builds messages from fuzzer-chosen field values and checks
// they round-trip.
func FuzzRoundTrip(f *testing.F) {
	for i := range allKinds() {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), bytes.Repeat([]byte{0xff, 0x07, 0x80, 0x01}, 64))
	}
	kinds := allKinds()
	f.Fuzz(func(t *testing.T, k uint8, data []byte) {
		r := rand.New(&byteSource{b: data, rest: *rand.NewPCG(5, 6)})
		checkRoundTrip(t, randMessage(r, kinds[int(k)%len(kinds)]))
	})
}

// Benchmarks.

func benchAccept() *Accept {
	return &Accept{
		M: AppMsg{
			ID:      MsgID{Client: 1001, Seq: 123456},
			Dest:    []GroupID{0, 2, 5},
			Payload: bytes.Repeat([]byte("x"), 32),
		},
		G:   2,
		B:   Ballot{N: 3, P: 7},
		LTS: Timestamp{T: 98765, G: 2},
	}
}

func BenchmarkEncodeAccept(b *testing.B) {
	m := benchAccept()
	buf := Append(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], m)
	}
	b.ReportMetric(float64(len(buf)), "bytes/msg")
}

func BenchmarkEncodeAcceptFresh(b *testing.B) {
	m := benchAccept()
	b.ReportAllocs()
	for b.Loop() {
		_ = Append(nil, m)
	}
}

func BenchmarkDecodeAccept(b *testing.B) {
	enc := Append(nil, benchAccept())
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(enc)), "bytes/msg")
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
