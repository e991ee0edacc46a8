package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// fuzzCorpus returns the seed corpus of a protocol's FuzzStep, by name:
// seeds and messages that reach each kind of handler, from strangers and
// in the name of replicas and clients. Sender bytes index FuzzReplica's
// choices: replicas 0..nrep-1, the run's clients, then two strangers.
func fuzzCorpus(protocol string) map[string]struct {
	seed uint64
	data []byte
} {
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
	type entry = struct {
		seed uint64
		data []byte
	}
	c := map[string]entry{
		"stranger_multicasts": {7, FuzzInput(
			FuzzMsg{stranger, mc(strangerID, 1, "new", 0, 1)},
			FuzzMsg{stranger, mc(strangerID, 1, "other", 0)},
			FuzzMsg{stranger, mc(nrep, 1, "not mine", 0, 1)},
			FuzzMsg{stranger + 1, mc(strangerID, 2, "", 0)})},
		"stranger_timestamps": {20, FuzzInput(
			FuzzMsg{stranger, &wire.Propose{ID: id(nrep, 2), G: 1, LTS: ts(4, 1)}},
			FuzzMsg{stranger, &wire.SoftTS{ID: id(nrep, 2), G: 1, LTS: ts(4, 1)}},
			FuzzMsg{stranger, &wire.HardTS{ID: id(nrep, 2), G: 0, LTS: ts(9, 0)}})},
		"stranger_paxos": {33, FuzzInput(
			FuzzMsg{stranger, &wire.PaxosPrepare{B: b(9, 1), From: 0}},
			FuzzMsg{stranger, &wire.PaxosAccept{B: b(9, 1), Slot: 3, Cmd: assign}},
			FuzzMsg{stranger, &wire.PaxosDecided{First: 0, Cmds: []wire.Command{final}}},
			FuzzMsg{stranger, &wire.PaxosHeartbeat{B: b(9, 1), Leader: true, Commit: 50}})},
		"replica_paxos": {61, FuzzInput(
			FuzzMsg{1, &wire.PaxosPrepare{B: b(5, 1), From: 0}},
			FuzzMsg{0, &wire.PaxosAccept{B: b(0, 0), Slot: 2, Cmd: final}},
			FuzzMsg{2, &wire.PaxosAccepted{B: b(0, 0), Slot: 2}},
			FuzzMsg{0, &wire.PaxosDecided{First: 1, Cmds: []wire.Command{assign, final}}},
			FuzzMsg{1, &wire.PaxosPromise{B: b(5, 1), Entries: []wire.LogEntry{{Slot: 1, B: b(0, 0), Cmd: assign}}}},
			FuzzMsg{0, &wire.PaxosHeartbeat{B: b(0, 0), Leader: true, Executed: 3, Commit: 3}})},
		"replica_timestamps": {94, FuzzInput(
			FuzzMsg{3, &wire.Propose{ID: id(nrep, 3), G: 1, LTS: ts(1, 1)}},
			FuzzMsg{3, &wire.HardTS{ID: id(nrep, 3), G: 1, LTS: ts(1, 1)}},
			FuzzMsg{4, &wire.SoftTS{ID: id(nrep, 3), G: 1, LTS: ts(2, 1)}},
			FuzzMsg{1, &wire.Propose{ID: id(nrep, 3), G: 1, LTS: ts(7, 1)}})},
		"client_reuses_ids": {125, FuzzInput(
			FuzzMsg{client, mc(nrep, 2, "forged", 0, 1)},
			FuzzMsg{client, mc(nrep, 3, "", 1)},
			FuzzMsg{client + 1, mc(nrep+1, 1, "x", 0)})},
	}
	return c
}

// TestFuzzCorpus runs each protocol's seed corpus through FuzzReplica (the
// FuzzStep targets run the files too; this keeps the corpus honest when
// the files are rewritten) and, with WEFT_WRITE_FUZZ_CORPUS=1, rewrites
// amcast/<protocol>/testdata/fuzz/FuzzStep.
func TestFuzzCorpus(t *testing.T) {
	write := os.Getenv("WEFT_WRITE_FUZZ_CORPUS") == "1"
	for _, protocol := range []string{"ftskeen", "fastcast", "skeen"} {
		dir := filepath.Join("..", "amcast", protocol, "testdata", "fuzz", "FuzzStep")
		for name, e := range fuzzCorpus(protocol) {
			if err := FuzzReplica(protocol, e.seed, e.data); err != nil {
				t.Errorf("%s %s: %v", protocol, name, err)
			}
			if !write {
				continue
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf("go test fuzz v1\nuint64(%d)\n[]byte(%s)\n", e.seed, strconv.Quote(string(e.data)))
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
