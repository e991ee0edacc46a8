// Package check records atomic multicast histories and checks them against
// the properties of atomic multicast (Gotsman et al., "White-Box Atomic
// Multicast"): Validity, Integrity, Ordering and Termination, plus the
// global-timestamp invariants of timestamp-based protocols (Skeen, WbCast).
//
// A History is a Config followed by events in time order. It is stored as
// JSON lines (see Writer and ReadJSONL) and checked with Check.
//
// Process ids: the replicas of group g are the processes
//
//	g*Replicas + i,  for i in [0, Replicas)
//
// so there are Groups*Replicas replica processes, numbered 0..N-1, and the
// group of process p is p / Replicas. The checker derives group membership
// from Config this way; see Config.Proc and Config.GroupOf.
//
// The package is pure: no I/O beyond the io.Reader/io.Writer it is handed, no
// clock, no randomness, no goroutines.
package check

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// Config describes the system a history was recorded on.
type Config struct {
	Protocol string
	Groups   int
	Replicas int
	Seed     uint64
}

// Procs returns the number of replica processes, Groups*Replicas.
func (c Config) Procs() int { return c.Groups * c.Replicas }

// Proc returns the id of replica i of group g: g*Replicas + i.
func (c Config) Proc(g, i int) int { return g*c.Replicas + i }

// GroupOf returns the group of replica process p (p / Replicas), or -1 if p
// is not a valid replica id.
func (c Config) GroupOf(p int) int {
	if p < 0 || c.Replicas <= 0 || p >= c.Procs() {
		return -1
	}
	return p / c.Replicas
}

// Quorum returns the size of a majority quorum of a group: Replicas/2 + 1.
func (c Config) Quorum() int { return c.Replicas/2 + 1 }

// GTS is a global timestamp (time, group), ordered lexicographically. The
// zero value means "not recorded".
type GTS struct {
	T uint64
	G int
}

// IsZero reports whether ts is the zero ("not recorded") timestamp.
func (ts GTS) IsZero() bool { return ts == GTS{} }

// Less reports whether ts < o in (T, G) lexicographic order.
func (ts GTS) Less(o GTS) bool {
	if ts.T != o.T {
		return ts.T < o.T
	}
	return ts.G < o.G
}

func (ts GTS) String() string {
	return "(" + strconv.FormatUint(ts.T, 10) + "," + strconv.Itoa(ts.G) + ")"
}

// Event kinds.
const (
	EvMulticast = "multicast"
	EvDeliver   = "deliver"
	EvCrash     = "crash"
	EvRestart   = "restart"
	EvInstall   = "install"
	EvWipe      = "wipe"
)

// Event is one entry of a history. Which fields are meaningful depends on Ev:
//
//	multicast: ID, Dest, T, Digest
//	deliver:   Proc, Group, ID, GTS, T, Digest
//	crash:     Proc, T
//	restart:   Proc, T
//	install:   Proc, Group, GTS, T (state transfer: install.go)
//	wipe:      Proc, T (lost its durable state: install.go)
type Event struct {
	Ev     string // "multicast", "deliver", "crash", "restart", "install"
	ID     string // message id (multicast, deliver)
	Dest   []int  // multicast: sorted destination groups
	Proc   int    // deliver, crash, restart
	Group  int    // deliver
	GTS    GTS    // deliver
	T      int64  // virtual time
	Digest uint64 // payload digest (multicast, deliver); 0 = not recorded; NOT written to the JSON file
	// Optional (multicast) excuses the message from termination unless some
	// process delivers it (then agreement holds it to the usual rule): a
	// message of a client that does not retry, such as the simulator's
	// adversarial clients, may be lost with the process it reached. NOT
	// written to the JSON file.
	Optional bool
}

// History is a recorded run: its configuration and its events in time
// order. The order of a process's deliver events is its delivery order.
type History struct {
	Config Config
	Events []Event
}

// Digest returns the 64-bit FNV-1a hash of payload, mapped so that it is
// never 0 (0 means "not recorded").
func Digest(payload []byte) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for _, c := range payload {
		h ^= uint64(c)
		h *= prime64
	}
	if h == 0 {
		h = 1
	}
	return h
}

// ---------------------------------------------------------------------------
// Writing

// Writer streams a history as JSON lines. It buffers its output: call Flush
// when done. The first line, written by NewWriter, is the config line.
//
// Line shapes (exact key order):
//
//	{"ev":"config","protocol":"wbcast","groups":3,"replicas":3,"seed":42}
//	{"ev":"multicast","id":"m1","dest":[0,2],"t":5}
//	{"ev":"deliver","proc":4,"group":1,"id":"m1","gts":[7,2],"t":9}
//	{"ev":"crash","proc":4,"t":11}
//	{"ev":"restart","proc":4,"t":15}
//
// Event.Digest is not written.
type Writer struct {
	bw  *bufio.Writer
	err error
}

// NewWriter returns a Writer on w and writes (buffers) the config line.
func NewWriter(w io.Writer, cfg Config) *Writer {
	wr := &Writer{bw: bufio.NewWriterSize(w, 64<<10)}
	b := wr.bw.AvailableBuffer()
	b = append(b, `{"ev":"config","protocol":`...)
	b = appendJSONString(b, cfg.Protocol)
	b = append(b, `,"groups":`...)
	b = strconv.AppendInt(b, int64(cfg.Groups), 10)
	b = append(b, `,"replicas":`...)
	b = strconv.AppendInt(b, int64(cfg.Replicas), 10)
	b = append(b, `,"seed":`...)
	b = strconv.AppendUint(b, cfg.Seed, 10)
	b = append(b, "}\n"...)
	_, wr.err = wr.bw.Write(b)
	return wr
}

// Write appends one event. An event with an unknown Ev is rejected (nothing
// is written). Write errors from the underlying writer are sticky: once one
// occurs, every later Write and Flush returns it.
func (w *Writer) Write(ev Event) error {
	if w.err != nil {
		return w.err
	}
	b := w.bw.AvailableBuffer()
	switch ev.Ev {
	case EvMulticast:
		b = append(b, `{"ev":"multicast","id":`...)
		b = appendJSONString(b, ev.ID)
		b = append(b, `,"dest":[`...)
		for i, g := range ev.Dest {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(g), 10)
		}
		b = append(b, `],"t":`...)
	case EvDeliver:
		b = append(b, `{"ev":"deliver","proc":`...)
		b = strconv.AppendInt(b, int64(ev.Proc), 10)
		b = append(b, `,"group":`...)
		b = strconv.AppendInt(b, int64(ev.Group), 10)
		b = append(b, `,"id":`...)
		b = appendJSONString(b, ev.ID)
		b = append(b, `,"gts":[`...)
		b = strconv.AppendUint(b, ev.GTS.T, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(ev.GTS.G), 10)
		b = append(b, `],"t":`...)
	case EvInstall:
		b = append(b, `{"ev":"install","proc":`...)
		b = strconv.AppendInt(b, int64(ev.Proc), 10)
		b = append(b, `,"group":`...)
		b = strconv.AppendInt(b, int64(ev.Group), 10)
		b = append(b, `,"gts":[`...)
		b = strconv.AppendUint(b, ev.GTS.T, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(ev.GTS.G), 10)
		b = append(b, `],"t":`...)
	case EvCrash, EvRestart, EvWipe:
		b = append(b, `{"ev":"`...)
		b = append(b, ev.Ev...)
		b = append(b, `","proc":`...)
		b = strconv.AppendInt(b, int64(ev.Proc), 10)
		b = append(b, `,"t":`...)
	default:
		return fmt.Errorf("check: cannot write event with unknown ev %q", ev.Ev)
	}
	b = strconv.AppendInt(b, ev.T, 10)
	b = append(b, "}\n"...)
	_, w.err = w.bw.Write(b)
	return w.err
}

// Flush writes any buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.err = w.bw.Flush()
	return w.err
}

// WriteJSONL writes h to w as JSON lines and flushes.
func WriteJSONL(w io.Writer, h *History) error {
	wr := NewWriter(w, h.Config)
	for i := range h.Events {
		if err := wr.Write(h.Events[i]); err != nil {
			return err
		}
	}
	return wr.Flush()
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. It escapes '"', '\\'
// and control characters, and, like encoding/json, U+2028 and U+2029; it
// replaces invalid UTF-8 bytes with U+FFFD. '<', '>' and '&' are left as
// they are (no HTML context here).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ---------------------------------------------------------------------------
// Reading

// maxProcs bounds Groups*Replicas accepted by ReadJSONL and Check, so that a
// corrupt config cannot make the checker allocate without bound.
const maxProcs = 1 << 20

// ReadJSONL parses a JSON-lines history as written by Writer. The first
// non-blank line must be the config line; blank lines are skipped. Keys may
// come in any order, but every key of the event's shape must be present and
// no other key is accepted. It rejects unknown "ev" values, a missing or
// non-first config line, malformed JSON, non-integer numbers, and a config
// with Groups or Replicas < 1. Errors name the 1-based line number.
//
// ReadJSONL checks the format only: semantic problems (a delivery at an
// unknown process, a destination out of range, ...) are left to Check.
func ReadJSONL(r io.Reader) (*History, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	h := &History{}
	p := lineParser{intern: make(map[string]string)}
	lineNo := 0
	haveConfig := false
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("check: line %d: %w", lineNo+1, err)
		}
		if len(line) == 0 && err == io.EOF {
			break
		}
		lineNo++
		if isBlank(line) {
			if err == io.EOF {
				break
			}
			continue
		}
		rec, perr := p.parse(line)
		if perr != nil {
			return nil, fmt.Errorf("check: line %d: %v", lineNo, perr)
		}
		if !haveConfig {
			if rec.ev != "config" {
				return nil, fmt.Errorf("check: line %d: first line must be the config line, got ev %q", lineNo, rec.ev)
			}
			h.Config = rec.cfg
			haveConfig = true
		} else {
			if rec.ev == "config" {
				return nil, fmt.Errorf("check: line %d: config line must be first and unique", lineNo)
			}
			h.Events = append(h.Events, rec.event)
		}
		if err == io.EOF {
			break
		}
	}
	if !haveConfig {
		return nil, errors.New("check: missing config line")
	}
	return h, nil
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// Keys, as bits of lineParser's seen set.
const (
	kEv = 1 << iota
	kProtocol
	kGroups
	kReplicas
	kSeed
	kID
	kDest
	kProc
	kGroup
	kGTS
	kT
)

var keyNames = [...]string{"ev", "protocol", "groups", "replicas", "seed", "id", "dest", "proc", "group", "gts", "t"}

// Required (and allowed) keys per event kind.
var shapes = map[string]int{
	"config":    kEv | kProtocol | kGroups | kReplicas | kSeed,
	EvMulticast: kEv | kID | kDest | kT,
	EvDeliver:   kEv | kProc | kGroup | kID | kGTS | kT,
	EvCrash:     kEv | kProc | kT,
	EvRestart:   kEv | kProc | kT,
	EvInstall:   kEv | kProc | kGroup | kGTS | kT,
	EvWipe:      kEv | kProc | kT,
}

type record struct {
	ev    string
	cfg   Config
	event Event
}

// lineParser is a strict parser for the flat JSON objects of the history
// format. Strings with escapes or non-ASCII bytes are decoded by
// encoding/json; everything else is handled here for speed.
type lineParser struct {
	b      []byte
	i      int
	intern map[string]string
}

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("col %d: %s", e.off+1, e.msg) }

func (p *lineParser) errf(format string, args ...any) error {
	return &syntaxError{off: p.i, msg: fmt.Sprintf(format, args...)}
}

func (p *lineParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *lineParser) expect(c byte) error {
	p.ws()
	if p.i >= len(p.b) {
		return p.errf("unexpected end of line, want %q", c)
	}
	if p.b[p.i] != c {
		return p.errf("want %q, got %q", c, p.b[p.i])
	}
	p.i++
	return nil
}

// rawString scans a JSON string token and returns its bytes (including the
// quotes) and whether it needs full decoding.
func (p *lineParser) rawString() (tok []byte, simple bool, err error) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false, p.errf("want string")
	}
	start := p.i
	simple = true
	for j := p.i + 1; j < len(p.b); j++ {
		c := p.b[j]
		switch {
		case c == '"':
			p.i = j + 1
			return p.b[start:p.i], simple, nil
		case c == '\\':
			simple = false
			j++
		case c < 0x20:
			p.i = j
			return nil, false, p.errf("control character in string")
		case c >= utf8.RuneSelf:
			simple = false
		}
	}
	return nil, false, p.errf("unterminated string")
}

func (p *lineParser) str() (string, error) {
	tok, simple, err := p.rawString()
	if err != nil {
		return "", err
	}
	if simple {
		raw := tok[1 : len(tok)-1]
		if s, ok := p.intern[string(raw)]; ok {
			return s, nil
		}
		s := string(raw)
		p.intern[s] = s
		return s, nil
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", p.errf("bad string: %v", err)
	}
	if t, ok := p.intern[s]; ok {
		return t, nil
	}
	p.intern[s] = s
	return s, nil
}

// number scans a JSON integer token.
func (p *lineParser) number() ([]byte, error) {
	p.ws()
	start := p.i
	j := p.i
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	d := j
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	if j == d {
		return nil, p.errf("want integer")
	}
	if p.b[d] == '0' && j-d > 1 {
		return nil, p.errf("leading zero in number")
	}
	if j < len(p.b) && (p.b[j] == '.' || p.b[j] == 'e' || p.b[j] == 'E') {
		return nil, p.errf("want integer, got non-integer number")
	}
	p.i = j
	return p.b[start:j], nil
}

func (p *lineParser) int64() (int64, error) {
	at := p.i
	tok, err := p.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(tok), 10, 64)
	if err != nil {
		p.i = at
		return 0, p.errf("integer out of range: %s", tok)
	}
	return v, nil
}

func (p *lineParser) int() (int, error) {
	at := p.i
	v, err := p.int64()
	if err != nil {
		return 0, err
	}
	if int64(int(v)) != v {
		p.i = at
		return 0, p.errf("integer out of range: %d", v)
	}
	return int(v), nil
}

func (p *lineParser) uint64() (uint64, error) {
	at := p.i
	tok, err := p.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(tok), 10, 64)
	if err != nil {
		p.i = at
		return 0, p.errf("unsigned integer out of range: %s", tok)
	}
	return v, nil
}

func (p *lineParser) intArray() ([]int, error) {
	if err := p.expect('['); err != nil {
		return nil, err
	}
	out := []int{}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return out, nil
	}
	for {
		v, err := p.int()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if err := p.expect(']'); err != nil {
			return nil, err
		}
		return out, nil
	}
}

func (p *lineParser) gts() (GTS, error) {
	if err := p.expect('['); err != nil {
		return GTS{}, err
	}
	t, err := p.uint64()
	if err != nil {
		return GTS{}, err
	}
	if err := p.expect(','); err != nil {
		return GTS{}, err
	}
	g, err := p.int()
	if err != nil {
		return GTS{}, err
	}
	if err := p.expect(']'); err != nil {
		return GTS{}, err
	}
	return GTS{T: t, G: g}, nil
}

func (p *lineParser) parse(line []byte) (record, error) {
	p.b, p.i = line, 0
	var rec record
	seen := 0
	if err := p.expect('{'); err != nil {
		return rec, err
	}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		return rec, p.errf(`missing "ev"`)
	}
	for {
		keyAt := p.i
		tok, simple, err := p.rawString()
		if err != nil {
			return rec, err
		}
		key := tok[1 : len(tok)-1]
		if !simple {
			var s string
			if err := json.Unmarshal(tok, &s); err != nil {
				return rec, p.errf("bad key: %v", err)
			}
			key = []byte(s)
		}
		if err := p.expect(':'); err != nil {
			return rec, err
		}
		var bit int
		switch string(key) {
		case "ev":
			bit = kEv
			rec.ev, err = p.str()
		case "protocol":
			bit = kProtocol
			rec.cfg.Protocol, err = p.str()
		case "groups":
			bit = kGroups
			rec.cfg.Groups, err = p.int()
		case "replicas":
			bit = kReplicas
			rec.cfg.Replicas, err = p.int()
		case "seed":
			bit = kSeed
			rec.cfg.Seed, err = p.uint64()
		case "id":
			bit = kID
			rec.event.ID, err = p.str()
		case "dest":
			bit = kDest
			rec.event.Dest, err = p.intArray()
		case "proc":
			bit = kProc
			rec.event.Proc, err = p.int()
		case "group":
			bit = kGroup
			rec.event.Group, err = p.int()
		case "gts":
			bit = kGTS
			rec.event.GTS, err = p.gts()
		case "t":
			bit = kT
			rec.event.T, err = p.int64()
		default:
			p.i = keyAt
			return rec, p.errf("unknown key %q", key)
		}
		if err != nil {
			return rec, err
		}
		if seen&bit != 0 {
			p.i = keyAt
			return rec, p.errf("duplicate key %q", key)
		}
		seen |= bit
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if err := p.expect('}'); err != nil {
			return rec, err
		}
		break
	}
	p.ws()
	if p.i != len(p.b) {
		return rec, p.errf("trailing data after object")
	}
	if seen&kEv == 0 {
		return rec, errors.New(`missing "ev"`)
	}
	want, ok := shapes[rec.ev]
	if !ok {
		return rec, fmt.Errorf("unknown ev %q", rec.ev)
	}
	if seen != want {
		for k, name := range keyNames {
			bit := 1 << k
			if want&bit != 0 && seen&bit == 0 {
				return rec, fmt.Errorf("%s event: missing key %q", rec.ev, name)
			}
			if want&bit == 0 && seen&bit != 0 {
				return rec, fmt.Errorf("%s event: unexpected key %q", rec.ev, name)
			}
		}
	}
	if rec.ev == "config" {
		c := rec.cfg
		if c.Groups < 1 || c.Replicas < 1 || c.Groups > maxProcs || c.Replicas > maxProcs || c.Groups*c.Replicas > maxProcs {
			return rec, fmt.Errorf("config: invalid groups=%d replicas=%d", c.Groups, c.Replicas)
		}
	}
	rec.event.Ev = rec.ev
	return rec, nil
}
