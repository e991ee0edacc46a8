package wire

import "encoding/binary"

// Id lists (REC_COLLECTED, REC_EXPIRED) are encoded in runs of ids of one
// client session: the session once, then each id's sequence number and
// digest. A replica persists every message's id twice, when it collects
// the message and when it forgets the id after the session lease, and an
// id on its own (client, 128-bit session, sequence number, digest) took
// about 43 bytes: a quarter of a message's log in the benchmark (341 bytes:
// REC_ACCEPTED 132, REC_DELIVERED 123, the two ids 86). In runs an id
// takes about 19, and the log is what compaction's frequency follows
// (docs/batching.md).
//
//	count          uvarint: ids in the list
//	runs, until count ids:
//	  client       uvarint
//	  session      uvarint Hi, uvarint Lo
//	  n            uvarint: ids in the run, at least 1
//	  n times      uvarint Seq, 16 bytes Digest
//
// The list keeps its order: a run is a maximal stretch of consecutive ids
// of one session, so writers sort a list by session when its order does
// not matter (Process.collect) and the encoding is canonical: two runs in
// a row never have the same session.

// minListedIDSize is the fewest bytes an id takes in a list (in a run:
// a one-byte sequence number and the digest).
const minListedIDSize = 1 + len(Digest{})

func appendIDList(buf []byte, ids []MsgID) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(ids)))
	for i := 0; i < len(ids); {
		j := runEnd(ids, i)
		buf = binary.AppendUvarint(buf, uint64(ids[i].Client))
		buf = appendSession(buf, ids[i].Session)
		buf = binary.AppendUvarint(buf, uint64(j-i))
		for _, id := range ids[i:j] {
			buf = binary.AppendUvarint(buf, id.Seq)
			buf = append(buf, id.Digest[:]...)
		}
		i = j
	}
	return buf
}

// runEnd is the end of the run of ids starting at i.
func runEnd(ids []MsgID, i int) int {
	j := i + 1
	for j < len(ids) && ids[j].Client == ids[i].Client && ids[j].Session == ids[i].Session {
		j++
	}
	return j
}

func sizeIDList(ids []MsgID) int {
	n := uvarintLen(uint64(len(ids)))
	for i := 0; i < len(ids); {
		j := runEnd(ids, i)
		n += uvarintLen(uint64(ids[i].Client)) + sessionLen(ids[i].Session) + uvarintLen(uint64(j-i))
		for _, id := range ids[i:j] {
			n += uvarintLen(id.Seq) + len(id.Digest)
		}
		i = j
	}
	return n
}

// idList decodes an id list (nil if empty).
func (d *decoder) idList(field string) []MsgID {
	n := d.count(field, MaxStateEntries, minListedIDSize)
	if n == 0 {
		return nil
	}
	ids := make([]MsgID, 0, n)
	var prev SessionKey
	for len(ids) < n && d.err == nil {
		k := SessionKey{Client: ProcID(d.u32(field)), Session: d.session(field)}
		run := d.uvarint(field)
		switch {
		case d.err != nil:
		case run == 0 || run > uint64(n-len(ids)):
			d.fail(ErrMalformed, field, "a run of ids that is empty or longer than the list")
		case len(ids) > 0 && k == prev:
			d.fail(ErrMalformed, field, "two runs of ids of one session in a row")
		}
		prev = k
		for range run {
			if d.err != nil {
				break
			}
			ids = append(ids, MsgID{Client: k.Client, Session: k.Session, Seq: d.uvarint(field), Digest: d.digest(field)})
		}
	}
	if d.err != nil {
		return nil
	}
	return ids
}
