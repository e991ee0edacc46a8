package wire

import (
	"bytes"
	"math"
	"reflect"
	"slices"
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
