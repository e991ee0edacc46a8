package amcasttest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weft-dev/weft/wire"
)

// argVals returns the values of argument key, with comma-separated values
// split, so that both key=1,2 and key=(1,2) give ["1" "2"]. ok is false when
// the argument is absent.
func argVals(d *datadriven.TestData, key string) (vals []string, ok bool) {
	arg, ok := d.Arg(key)
	if !ok {
		return nil, false
	}
	for _, v := range arg.Vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				vals = append(vals, s)
			}
		}
	}
	return vals, true
}

// argOne returns the single value of argument key.
func argOne(t *testing.T, d *datadriven.TestData, key string) (string, bool) {
	vs, ok := argVals(d, key)
	if !ok {
		return "", false
	}
	if len(vs) != 1 {
		d.Fatalf(t, "argument %s: want one value, got %q", key, vs)
	}
	return vs[0], true
}

// argInt returns integer argument key, or def when it is absent.
func argInt(t *testing.T, d *datadriven.TestData, key string, def int) int {
	s, ok := argOne(t, d, key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		d.Fatalf(t, "argument %s: %v", key, err)
	}
	return n
}

// argInts returns the integer list of argument key.
func argInts(t *testing.T, d *datadriven.TestData, key string) ([]int, bool) {
	vs, ok := argVals(d, key)
	if !ok {
		return nil, false
	}
	out := make([]int, 0, len(vs))
	for _, s := range vs {
		n, err := strconv.Atoi(s)
		if err != nil {
			d.Fatalf(t, "argument %s: %v", key, err)
		}
		out = append(out, n)
	}
	return out, true
}

// ParseProc parses a process id written as "3", "p3" or "c3".
func ParseProc(s string) (wire.ProcID, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "p"), "c")
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("bad process id %q", s)
	}
	return wire.ProcID(n), nil
}

// ParseMsgID parses a message id written as wire.MsgID.String prints it:
// "<client>.<seq>" (session 0) or "<client>.<seq>@<session hex>".
func ParseMsgID(s string) (wire.MsgID, error) {
	bad := fmt.Errorf("bad message id %q (want <client>.<seq>[@<session hex>])", s)
	body, sess, hasSess := strings.Cut(s, "@")
	c, q, ok := strings.Cut(body, ".")
	if !ok {
		return wire.MsgID{}, bad
	}
	cn, err1 := strconv.ParseUint(c, 10, 32)
	qn, err2 := strconv.ParseUint(q, 10, 64)
	var sn wire.SessionID
	var err3 error
	if hasSess {
		sn, err3 = wire.ParseSession(sess)
	}
	if err1 != nil || err2 != nil || err3 != nil {
		return wire.MsgID{}, bad
	}
	return wire.MsgID{Client: wire.ProcID(cn), Session: sn, Seq: qn}, nil
}

// ParseTimestamp parses a timestamp written as Describe prints it: "3.g1".
func ParseTimestamp(s string) (wire.Timestamp, error) {
	ts, g, ok := strings.Cut(s, ".")
	if ok {
		g, ok = strings.CutPrefix(g, "g")
	}
	if !ok {
		return wire.Timestamp{}, fmt.Errorf("bad timestamp %q (want <t>.g<group>)", s)
	}
	tn, err1 := strconv.ParseUint(ts, 10, 64)
	gn, err2 := strconv.ParseUint(g, 10, 32)
	if err1 != nil || err2 != nil {
		return wire.Timestamp{}, fmt.Errorf("bad timestamp %q (want <t>.g<group>)", s)
	}
	return wire.Timestamp{T: tn, G: wire.GroupID(gn)}, nil
}

// ParseBallot parses a ballot written as Describe prints it: "0.p3".
func ParseBallot(s string) (wire.Ballot, error) {
	n, p, ok := strings.Cut(s, ".")
	if ok {
		p, ok = strings.CutPrefix(p, "p")
	}
	if !ok {
		return wire.Ballot{}, fmt.Errorf("bad ballot %q (want <n>.p<proc>)", s)
	}
	nn, err1 := strconv.ParseUint(n, 10, 32)
	pn, err2 := strconv.ParseUint(p, 10, 32)
	if err1 != nil || err2 != nil {
		return wire.Ballot{}, fmt.Errorf("bad ballot %q (want <n>.p<proc>)", s)
	}
	return wire.Ballot{N: uint32(nn), P: wire.ProcID(pn)}, nil
}

// ParseKind parses a message kind name such as ACCEPT or accept_ack.
func ParseKind(s string) (wire.Kind, error) {
	u := strings.ToUpper(s)
	for k := wire.Kind(1); k < 255; k++ {
		if k.String() == u {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown message kind %q", s)
}

func argProcs(t *testing.T, d *datadriven.TestData, key string) ([]wire.ProcID, bool) {
	vs, ok := argVals(d, key)
	if !ok {
		return nil, false
	}
	out := make([]wire.ProcID, 0, len(vs))
	for _, s := range vs {
		p, err := ParseProc(s)
		if err != nil {
			d.Fatalf(t, "argument %s: %v", key, err)
		}
		out = append(out, p)
	}
	return out, true
}

func argProc(t *testing.T, d *datadriven.TestData, key string) (wire.ProcID, bool) {
	s, ok := argOne(t, d, key)
	if !ok {
		return 0, false
	}
	p, err := ParseProc(s)
	if err != nil {
		d.Fatalf(t, "argument %s: %v", key, err)
	}
	return p, true
}

func argMsgID(t *testing.T, d *datadriven.TestData, key string) (wire.MsgID, bool) {
	s, ok := argOne(t, d, key)
	if !ok {
		return wire.MsgID{}, false
	}
	id, err := ParseMsgID(s)
	if err != nil {
		d.Fatalf(t, "argument %s: %v", key, err)
	}
	return id, true
}

func argTS(t *testing.T, d *datadriven.TestData, key string) (wire.Timestamp, bool) {
	s, ok := argOne(t, d, key)
	if !ok {
		return wire.Timestamp{}, false
	}
	ts, err := ParseTimestamp(s)
	if err != nil {
		d.Fatalf(t, "argument %s: %v", key, err)
	}
	return ts, true
}

func argBallot(t *testing.T, d *datadriven.TestData, key string) (wire.Ballot, bool) {
	s, ok := argOne(t, d, key)
	if !ok {
		return wire.Ballot{}, false
	}
	b, err := ParseBallot(s)
	if err != nil {
		d.Fatalf(t, "argument %s: %v", key, err)
	}
	return b, true
}

func argBallots(t *testing.T, d *datadriven.TestData, key string) ([]wire.Ballot, bool) {
	vs, ok := argVals(d, key)
	if !ok {
		return nil, false
	}
	out := make([]wire.Ballot, 0, len(vs))
	for _, s := range vs {
		b, err := ParseBallot(s)
		if err != nil {
			d.Fatalf(t, "argument %s: %v", key, err)
		}
		out = append(out, b)
	}
	return out, true
}

func argGroups(t *testing.T, d *datadriven.TestData, key string) ([]wire.GroupID, bool) {
	ns, ok := argInts(t, d, key)
	if !ok {
		return nil, false
	}
	out := make([]wire.GroupID, 0, len(ns))
	for _, n := range ns {
		if n < 0 {
			d.Fatalf(t, "argument %s: negative group %d", key, n)
		}
		out = append(out, wire.GroupID(n))
	}
	return out, true
}

func argKinds(t *testing.T, d *datadriven.TestData, key string) ([]wire.Kind, bool) {
	vs, ok := argVals(d, key)
	if !ok {
		return nil, false
	}
	out := make([]wire.Kind, 0, len(vs))
	for _, s := range vs {
		k, err := ParseKind(s)
		if err != nil {
			d.Fatalf(t, "argument %s: %v", key, err)
		}
		out = append(out, k)
	}
	return out, true
}

func argMsgIDs(t *testing.T, d *datadriven.TestData, key string) ([]wire.MsgID, bool) {
	vs, ok := argVals(d, key)
	if !ok {
		return nil, false
	}
	out := make([]wire.MsgID, 0, len(vs))
	for _, s := range vs {
		id, err := ParseMsgID(s)
		if err != nil {
			d.Fatalf(t, "argument %s: %v", key, err)
		}
		out = append(out, id)
	}
	return out, true
}
