package kv

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseTxn builds a transaction from clauses, one operation each, as `weft
// kv txn` takes them:
//
//	if KEY = VALUE      the key exists and holds VALUE (the rest of the clause)
//	if KEY absent       the key does not exist
//	if KEY present      the key exists
//	if KEY >= N         the key's integer value is at least N (absent: 0)
//	read KEY            return the key's value (before the writes)
//	put KEY VALUE       set the key (VALUE is the rest of the clause)
//	del KEY             delete the key
//	add KEY N           add N to the key's integer value (absent: 0)
//
// Keys cannot hold spaces here (the Go client and the HTTP API take any
// key).
func ParseTxn(clauses []string) (Txn, error) {
	var t Txn
	for i, c := range clauses {
		f := strings.Fields(c)
		bad := func(format string, args ...any) error {
			return errorf(ErrBadCommand, "clause %d %q: %s", i+1, c, fmt.Sprintf(format, args...))
		}
		if len(f) < 2 {
			return Txn{}, bad("want `if|read|put|del|add KEY ...`")
		}
		key := f[1]
		rest := func(n int) string { // the clause after its first n words, spaces kept
			s := strings.TrimSpace(c)
			for range n {
				s = strings.TrimSpace(s[strings.IndexFunc(s, isSpace):])
			}
			return s
		}
		switch f[0] {
		case "if":
			if len(f) < 3 {
				return Txn{}, bad("want `if KEY = VALUE`, `if KEY absent`, `if KEY present` or `if KEY >= N`")
			}
			cond := Cond{Key: key}
			switch f[2] {
			case "=":
				if len(f) < 4 {
					return Txn{}, bad("no value after =")
				}
				cond.Kind, cond.Value = CondEqual, []byte(rest(3))
			case "absent", "present":
				if len(f) != 3 {
					return Txn{}, bad("nothing may follow %s", f[2])
				}
				cond.Kind = map[string]CondKind{"absent": CondAbsent, "present": CondPresent}[f[2]]
			case ">=":
				n, err := strconv.ParseInt(strings.Join(f[3:], ""), 10, 64)
				if err != nil || len(f) != 4 {
					return Txn{}, bad("want an integer after >=")
				}
				cond.Kind, cond.Num = CondAtLeast, n
			default:
				return Txn{}, bad("%q is not =, absent, present or >=", f[2])
			}
			t.If = append(t.If, cond)
		case "read":
			if len(f) != 2 {
				return Txn{}, bad("want `read KEY`")
			}
			t.Reads = append(t.Reads, key)
		case "put":
			if len(f) < 3 {
				return Txn{}, bad("want `put KEY VALUE`")
			}
			t.Then = append(t.Then, Write{Key: key, Kind: WritePut, Value: []byte(rest(2))})
		case "del":
			if len(f) != 2 {
				return Txn{}, bad("want `del KEY`")
			}
			t.Then = append(t.Then, Write{Key: key, Kind: WriteDelete})
		case "add":
			n, err := strconv.ParseInt(strings.Join(f[2:], ""), 10, 64)
			if err != nil || len(f) != 3 {
				return Txn{}, bad("want `add KEY N` with an integer N")
			}
			t.Then = append(t.Then, Write{Key: key, Kind: WriteAdd, Delta: n})
		default:
			return Txn{}, bad("%q is not if, read, put, del or add", f[0])
		}
	}
	return t, t.Check()
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
