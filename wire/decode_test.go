package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
)

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
	v5 := slices.Clone(valid)
	v5[0] = 5
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
		{"version 7", badVersion, ErrVersion, "version byte 7"},
		{"version 5 (before id runs)", v5, ErrVersion, "version byte 5"},
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

// TestIDListRuns: ids of one session share one run (about 19 bytes an id
// instead of 43), the order is kept, and the decoder takes only the
// canonical form.
func TestIDListRuns(t *testing.T) {
	s1 := SessionID{Hi: 1 << 60, Lo: 1<<63 + 5}
	s2 := SessionID{Hi: 3 << 60, Lo: 1<<62 + 7}
	var ids []MsgID
	for i := range 100 {
		ids = append(ids, MsgID{Client: 9, Session: s1, Seq: 100_000 + uint64(i), Digest: Digest{byte(i), 15: 1}})
	}
	one := Append(nil, &RecCollected{IDs: ids[:1]})
	all := Append(nil, &RecCollected{IDs: ids})
	if per := float64(len(all)-len(one)) / 99; per > 20 {
		t.Errorf("an id in a run takes %.1f bytes, want at most 20", per)
	}
	// Order kept, sessions interleaved: s1, s2, s1 are three runs.
	mixed := []MsgID{ids[5], {Client: 9, Session: s2, Seq: 1}, ids[2], ids[3]}
	m, err := Decode(Append(nil, &RecExpired{IDs: mixed}))
	if err != nil || !slices.Equal(m.(*RecExpired).IDs, mixed) {
		t.Fatalf("decoded %v, %v; want %v", m, err, mixed)
	}

	// Hand-made lists: header, count, then runs.
	list := func(count uint64, runs ...[]byte) []byte {
		b := append([]byte{Version, byte(KindRecCollected)}, binary.AppendUvarint(nil, count)...)
		for _, r := range runs {
			b = append(b, r...)
		}
		return b
	}
	run := func(client, n uint64, seqs ...uint64) []byte {
		b := binary.AppendUvarint(nil, client)
		b = appendSession(b, s1)
		b = binary.AppendUvarint(b, n)
		for _, q := range seqs {
			b = binary.AppendUvarint(b, q)
			b = append(b, make([]byte, len(Digest{}))...)
		}
		return b
	}
	if _, err := Decode(list(2, run(9, 2, 1, 2))); err != nil {
		t.Fatalf("a canonical list does not decode: %v", err)
	}
	for name, in := range map[string][]byte{
		"two runs of one session in a row": list(2, run(9, 1, 1), run(9, 1, 2)),
		"an empty run":                     list(1, run(9, 0), run(8, 1, 1)),
		"a run longer than the list":       list(1, run(9, 2, 1, 2)),
		"fewer ids than counted":           list(3, run(9, 2, 1, 2)),
	} {
		if _, err := Decode(in); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error %v, want ErrMalformed", name, err)
		}
	}
}

// TestSeqDigestsFastPath: a snapshot's collected ids decode through
// seqDigests' one-step path (a minimal varint, a whole digest) to what
// they were, at every varint length, and every id it cannot take in one
// step fails as the field-by-field path fails it: a non-minimal varint,
// a varint past 64 bits, a digest cut short.
func TestSeqDigestsFastPath(t *testing.T) {
	var ids []SeqDigest
	for i, seq := range []uint64{0, 1, 127, 128, 300, 1 << 21, 1<<35 + 7, 1<<56 - 1, 1 << 63, math.MaxUint64} {
		ids = append(ids, SeqDigest{Seq: seq, Digest: Digest{byte(i), 0xee, 15: byte(i)}})
	}
	snap := func(ids []SeqDigest) *RecSnapshot {
		return &RecSnapshot{Done: []ClientDone{{Client: 5, Session: SessionID{Lo: 1}, Floor: 2, Collected: ids}}}
	}
	enc := Append(nil, snap(ids))
	for _, reuse := range []bool{false, true} {
		var m Message
		var err error
		if reuse {
			m, _, err = DecodeReusing(enc, make([]SeqDigest, 0, 3))
		} else {
			m, err = Decode(enc)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := m.(*RecSnapshot).Done[0].Collected; !slices.Equal(got, ids) {
			t.Fatalf("reuse %v: decoded %v, want %v", reuse, got, ids)
		}
	}
	// One id last, so that its bytes end the encoding: 18 for seq 300.
	one := Append(nil, snap([]SeqDigest{{Seq: 300, Digest: Digest{1}}}))
	head := one[:len(one)-18]
	digest := one[len(one)-16:]
	for _, tc := range []struct {
		name string
		id   []byte
		want string
	}{
		{"non-minimal varint", append([]byte{0xac, 0x82, 0x00}, digest...), "non-minimal varint"},
		{"varint past 64 bits", append(bytes.Repeat([]byte{0xff}, 9), append([]byte{0x02}, digest...)...), "overflows 64 bits"},
		{"eleven-byte varint", append(bytes.Repeat([]byte{0x80}, 10), append([]byte{0x01}, digest...)...), ""},
		{"digest cut short", []byte{0xac, 0x02, 1, 2, 3}, "truncated input"},
		{"varint cut short", []byte{0xac}, "truncated input"},
	} {
		b := append(slices.Clone(head), tc.id...)
		_, err := Decode(b)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "done.collected") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrMalformed about done.collected: %s", tc.name, err, tc.want)
		}
	}
}
