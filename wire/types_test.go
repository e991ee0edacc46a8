package wire

import (
	"math"
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
