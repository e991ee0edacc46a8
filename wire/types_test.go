package wire

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"testing"
)

// TestSessionID: a session renders in hex without leading zeros and parses
// back, whole 128 bits; ids order by client, then session (high bits
// first), then seq; malformed text is refused.
func TestSessionID(t *testing.T) {
	for _, s := range []SessionID{{}, Session(1), Session(math.MaxUint64), {Hi: 1}, {Hi: 0xabc, Lo: 7}, {Hi: math.MaxUint64, Lo: math.MaxUint64}} {
		got, err := ParseSession(s.String())
		if err != nil || got != s {
			t.Errorf("ParseSession(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
	}
	if got := (SessionID{Hi: 0xabc, Lo: 7}).String(); got != "abc0000000000000007" {
		t.Errorf("String = %q", got)
	}
	for _, bad := range []string{"", "xyz", "123456789012345678901234567890123", "-1"} {
		if _, err := ParseSession(bad); err == nil {
			t.Errorf("ParseSession(%q) accepted", bad)
		}
	}
	ordered := []MsgID{
		{Client: 1, Session: Session(math.MaxUint64), Seq: 9},
		{Client: 1, Session: SessionID{Hi: 1}, Seq: 1},
		{Client: 1, Session: SessionID{Hi: 1}, Seq: 2},
		{Client: 2, Seq: 1},
	}
	for i := range ordered {
		for j := range ordered {
			if got, want := ordered[i].Less(ordered[j]), i < j; got != want {
				t.Errorf("%s < %s = %v", ordered[i], ordered[j], got)
			}
		}
	}
	if k, o := ordered[0].Key(), ordered[1].Key(); k.Compare(o) >= 0 || o.Compare(k) <= 0 || k.Compare(k) != 0 {
		t.Errorf("SessionKey.Compare orders %s and %s wrongly", k, o)
	}
}

// TestContentDigestForm pins the digest's definition: the stack buffer's
// single Sum256 and the streaming form for larger messages must both be
// the SHA-256 of uvarint(len(dest)) | each destination, 4 bytes big-endian
// | payload (ids in existing logs and snapshots carry it).
func TestContentDigestForm(t *testing.T) {
	want := func(dest []GroupID, payload []byte) Digest {
		b := binary.AppendUvarint(nil, uint64(len(dest)))
		for _, g := range dest {
			b = binary.BigEndian.AppendUint32(b, uint32(g))
		}
		sum := sha256.Sum256(append(b, payload...))
		return Digest(sum[:16])
	}
	for _, n := range []int{0, 1, 64, 200, 235, 236, 237, 255, 256, 257, 4096} {
		for _, dest := range [][]GroupID{nil, {0}, {1, 7}, {0, 1, 2, 3, 4, 5}} {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(i*7 + n)
			}
			if got, w := ContentDigest(dest, p), want(dest, p); got != w {
				t.Fatalf("payload %d, dest %v: digest %x, want %x", n, dest, got, w)
			}
		}
	}
	// One value computed outside Go (Python's hashlib), so that the
	// reference above cannot drift with the code.
	if got := fmt.Sprintf("%x", ContentDigest([]GroupID{1, 2}, []byte("weft"))); got != "24407f0c5741d68a83e84c8969b97318" {
		t.Fatalf("digest of {1,2} \"weft\": %s", got)
	}
}

// TestIDsUnpadded: MsgID and SessionKey have no padding (their fields'
// sizes add up to theirs), so maps keyed by them hash and compare each as
// one block of memory (see MsgID's pad); and the ids a decode builds
// compare equal to the same ids written with field names.
func TestIDsUnpadded(t *testing.T) {
	for _, v := range []any{MsgID{}, SessionKey{}} {
		typ := reflect.TypeOf(v)
		sum := uintptr(0)
		for i := range typ.NumField() {
			sum += typ.Field(i).Type.Size()
		}
		if sum != typ.Size() {
			t.Errorf("%s: fields of %d bytes in %d: padded", typ, sum, typ.Size())
		}
	}
	want := []MsgID{{Client: 7, Session: Session(3), Seq: 9, Digest: Digest{1}}, {Client: 8, Seq: 1}}
	m, err := Decode(Append(nil, &RecCollected{IDs: want}))
	if err != nil {
		t.Fatal(err)
	}
	got := m.(*RecCollected).IDs
	held := map[MsgID]bool{want[0]: true, want[1]: true}
	for i, id := range got {
		if id != want[i] || !held[id] || id.Key() != (SessionKey{Client: want[i].Client, Session: want[i].Session}) {
			t.Errorf("decoded id %d: %v, want %v", i, id, want[i])
		}
	}
}
