package wire

import (
	"bytes"
	"errors"
	"testing"
)

// TestReadDecodeRejects checks the READ codecs refuse what no encoder
// writes: an unknown mode or status, and a query or error over its cap.
func TestReadDecodeRejects(t *testing.T) {
	rd := Append(nil, &Read{ID: MsgID{Client: 7, Seq: 1}, G: 1, Mode: ReadLocal, Query: []byte("q")})
	modeAt := len(rd) - 3 // mode byte, query length, query
	for _, mode := range []byte{0, byte(readModeEnd), 255} {
		b := bytes.Clone(rd)
		b[modeAt] = mode
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("READ with mode %d: err %v, want ErrMalformed", mode, err)
		}
	}
	rr := Append(nil, &ReadReply{ID: MsgID{Client: 7, Seq: 1}, G: 1})
	statusAt := 2 + sizeMsgID(MsgID{Client: 7, Seq: 1}) + 1
	for _, st := range []byte{byte(readStatusEnd), 255} {
		b := bytes.Clone(rr)
		b[statusAt] = st
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("READ_REPLY with status %d: err %v, want ErrMalformed", st, err)
		}
	}
	big := Append(nil, &ReadReply{ID: MsgID{Client: 7, Seq: 1}, Err: string(make([]byte, MaxReadErr+1))})
	if _, err := Decode(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("READ_REPLY with a %d-byte error: err %v, want ErrTooLarge", MaxReadErr+1, err)
	}
	huge := Append(nil, &Read{ID: MsgID{Client: 7, Seq: 1}, Mode: ReadLocal, Query: make([]byte, MaxPayload+1)})
	if _, err := Decode(huge); !errors.Is(err, ErrTooLarge) {
		t.Errorf("READ with a query over MaxPayload: err %v, want ErrTooLarge", err)
	}
}
