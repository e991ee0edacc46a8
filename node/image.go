package node

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Snapshot encoding: the magic, then each record as a uvarint length and
// its wire.Append encoding.
var snapshotMagic = []byte("weftsnap\x01")

func encodeSnapshot(recs []wire.Message) []byte {
	n := len(snapshotMagic)
	for _, r := range recs {
		n += binary.MaxVarintLen32 + wire.Size(r)
	}
	b := make([]byte, 0, n)
	b = append(b, snapshotMagic...)
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(wire.Size(r)))
		b = wire.Append(b, r)
	}
	return b
}

var errBadSnapshot = errors.New("node: malformed snapshot")

func decodeSnapshot(b []byte) ([]wire.Message, error) {
	if len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != string(snapshotMagic) {
		return nil, fmt.Errorf("%w: bad magic", errBadSnapshot)
	}
	b = b[len(snapshotMagic):]
	var out []wire.Message
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: bad record length at record %d", errBadSnapshot, len(out))
		}
		m, err := wire.Decode(b[k : k+int(n)])
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", errBadSnapshot, len(out), err)
		}
		out = append(out, m)
		b = b[k+int(n):]
	}
	return out, nil
}
