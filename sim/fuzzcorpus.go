package sim

import (
	"fmt"
	"strconv"

	"github.com/weft-dev/weft/wire"
)

// FuzzSeed is one file of a FuzzStep seed corpus: the seed FuzzReplica
// draws its run and replica from, and its input (FuzzInput).
type FuzzSeed struct {
	Seed uint64
	Data []byte
}

// FuzzCorpusFiles is a corpus's files (amcasttest.CheckFuzzCorpus) by
// name, in the fuzzing engine's format.
func FuzzCorpusFiles(corpus map[string]FuzzSeed) map[string][]byte {
	files := make(map[string][]byte, len(corpus))
	for name, s := range corpus {
		files[name] = fmt.Appendf(nil, "go test fuzz v1\nuint64(%d)\n[]byte(%s)\n", s.Seed, strconv.Quote(string(s.Data)))
	}
	return files
}

// BaselineFuzzCorpus is the seed corpus of a baseline protocol's (skeen,
// ftskeen, fastcast) FuzzStep, by file name: seeds and messages that reach
// each kind of handler, from strangers and in the name of replicas and
// clients. Sender bytes index FuzzReplica's choices: replicas 0..nrep-1,
// the run's clients, then two strangers. Each protocol's TestFuzzCorpus
// keeps its files equal to this, so a change of the wire format makes
// them be rewritten: written once by a test that did not compare them,
// they had stayed at wire version 2 and, from version 3 on, decoded to
// nothing.
func BaselineFuzzCorpus(protocol string) map[string]FuzzSeed {
	nrep := 6
	if protocol == "skeen" {
		nrep = 2
	}
	client, stranger := byte(nrep), byte(nrep+2)
	id := func(c, s int) wire.MsgID { return wire.MsgID{Client: wire.ProcID(c), Seq: uint64(s)} }
	strangerID := nrep + 2 + 1
	mc := func(c, s int, payload string, dest ...wire.GroupID) wire.Message {
		return &wire.Multicast{M: wire.AppMsg{ID: id(c, s), Dest: dest, Payload: []byte(payload)}}
	}
	ts := func(t uint64, g wire.GroupID) wire.Timestamp { return wire.Timestamp{T: t, G: g} }
	b := func(n uint32, p int) wire.Ballot { return wire.Ballot{N: n, P: wire.ProcID(p)} }
	assign := wire.Command{Op: wire.CmdAssign, M: wire.AppMsg{ID: id(strangerID, 1), Dest: []wire.GroupID{0, 1}, Payload: []byte("x")}}
	final := wire.Command{Op: wire.CmdFinal, M: wire.AppMsg{ID: id(nrep, 2), Dest: []wire.GroupID{0, 1}}, TS: ts(3, 1)}
	return map[string]FuzzSeed{
		"stranger_multicasts": {Seed: 7, Data: FuzzInput(
			FuzzMsg{stranger, mc(strangerID, 1, "new", 0, 1)},
			FuzzMsg{stranger, mc(strangerID, 1, "other", 0)},
			FuzzMsg{stranger, mc(nrep, 1, "not mine", 0, 1)},
			FuzzMsg{stranger + 1, mc(strangerID, 2, "", 0)})},
		"stranger_timestamps": {Seed: 20, Data: FuzzInput(
			FuzzMsg{stranger, &wire.Propose{ID: id(nrep, 2), G: 1, LTS: ts(4, 1)}},
			FuzzMsg{stranger, &wire.SoftTS{ID: id(nrep, 2), G: 1, LTS: ts(4, 1)}},
			FuzzMsg{stranger, &wire.HardTS{ID: id(nrep, 2), G: 0, LTS: ts(9, 0)}})},
		"stranger_paxos": {Seed: 33, Data: FuzzInput(
			FuzzMsg{stranger, &wire.PaxosPrepare{B: b(9, 1), From: 0}},
			FuzzMsg{stranger, &wire.PaxosAccept{B: b(9, 1), Slot: 3, Cmd: assign}},
			FuzzMsg{stranger, &wire.PaxosDecided{First: 0, Cmds: []wire.Command{final}}},
			FuzzMsg{stranger, &wire.PaxosHeartbeat{B: b(9, 1), Leader: true, Commit: 50}})},
		"replica_paxos": {Seed: 61, Data: FuzzInput(
			FuzzMsg{1, &wire.PaxosPrepare{B: b(5, 1), From: 0}},
			FuzzMsg{0, &wire.PaxosAccept{B: b(0, 0), Slot: 2, Cmd: final}},
			FuzzMsg{2, &wire.PaxosAccepted{B: b(0, 0), Slot: 2}},
			FuzzMsg{0, &wire.PaxosDecided{First: 1, Cmds: []wire.Command{assign, final}}},
			FuzzMsg{1, &wire.PaxosPromise{B: b(5, 1), Entries: []wire.LogEntry{{Slot: 1, B: b(0, 0), Cmd: assign}}}},
			FuzzMsg{0, &wire.PaxosHeartbeat{B: b(0, 0), Leader: true, Executed: 3, Commit: 3}})},
		"replica_timestamps": {Seed: 94, Data: FuzzInput(
			FuzzMsg{3, &wire.Propose{ID: id(nrep, 3), G: 1, LTS: ts(1, 1)}},
			FuzzMsg{3, &wire.HardTS{ID: id(nrep, 3), G: 1, LTS: ts(1, 1)}},
			FuzzMsg{4, &wire.SoftTS{ID: id(nrep, 3), G: 1, LTS: ts(2, 1)}},
			FuzzMsg{1, &wire.Propose{ID: id(nrep, 3), G: 1, LTS: ts(7, 1)}})},
		"client_reuses_ids": {Seed: 125, Data: FuzzInput(
			FuzzMsg{client, mc(nrep, 2, "forged", 0, 1)},
			FuzzMsg{client, mc(nrep, 3, "", 1)},
			FuzzMsg{client + 1, mc(nrep+1, 1, "x", 0)})},
	}
}
