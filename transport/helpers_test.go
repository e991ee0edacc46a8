package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// guard bounds every wait in these tests. It is a failure guard only: no
// test asserts anything about how long something takes.
const guard = 10 * time.Second

// transportGoroutines returns the stacks of goroutines running methods of
// this package.
func transportGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "weft/transport.(*") {
			out = append(out, g)
		}
	}
	return out
}

// checkLeaks makes the test fail if, once its cleanups (which close the
// transports) have run, goroutines of this package are still running or
// there are more goroutines than when it started. Call it first, so its
// cleanup runs last.
func checkLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(guard)
		for {
			gs := transportGoroutines()
			n := runtime.NumGoroutine()
			if len(gs) == 0 && n <= before {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutine leak: %d goroutines, %d before; transport goroutines:\n%s", n, before, strings.Join(gs, "\n\n"))
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// waitFor polls cond until it holds, failing the test after guard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// testLogger logs to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// captureHandler records log records (and forwards them to t.Log).
type captureHandler struct {
	mu   *sync.Mutex
	recs *[]slog.Record
	next slog.Handler
}

func newCapture(t *testing.T) (*slog.Logger, func() []slog.Record) {
	h := captureHandler{mu: new(sync.Mutex), recs: new([]slog.Record), next: testLogger(t).Handler()}
	return slog.New(h), func() []slog.Record {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Clone(*h.recs)
	}
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h captureHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.recs = append(*h.recs, r.Clone())
	h.mu.Unlock()
	return h.next.Handle(ctx, r)
}
func (h captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	// Attributes added by With are not needed by the tests; keep
	// capturing into the same slice.
	return captureHandler{mu: h.mu, recs: h.recs, next: h.next.WithAttrs(as)}
}
func (h captureHandler) WithGroup(name string) slog.Handler {
	return captureHandler{mu: h.mu, recs: h.recs, next: h.next.WithGroup(name)}
}

// recordAttr returns the string value of attribute key in r.
func recordAttr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// recorder is a Handler that keeps every message by sender.
type recorder struct {
	mu   sync.Mutex
	msgs map[wire.ProcID][]wire.Message
	gate chan struct{} // if non-nil, the handler waits for it to close (set under mu)
	// also, if set (before the transport starts), is called for every
	// message after it is recorded.
	also func(from wire.ProcID, m wire.Message)
}

func newRecorder() *recorder { return &recorder{msgs: map[wire.ProcID][]wire.Message{}} }

func (r *recorder) handle(from wire.ProcID, m wire.Message) {
	r.mu.Lock()
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	r.mu.Lock()
	r.msgs[from] = append(r.msgs[from], m)
	r.mu.Unlock()
	if r.also != nil {
		r.also(from, m)
	}
}

func (r *recorder) count(from wire.ProcID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs[from])
}

// seqs returns the sequence numbers of the messages from one sender.
func (r *recorder) seqs(from wire.ProcID) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]uint64, 0, len(r.msgs[from]))
	for _, m := range r.msgs[from] {
		out = append(out, seqOf(m))
	}
	return out
}

// last returns the sequence number of the last message from one sender, 0
// if none.
func (r *recorder) last(from wire.ProcID) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := r.msgs[from]
	if len(ms) == 0 {
		return 0
	}
	return seqOf(ms[len(ms)-1])
}

func seqOf(m wire.Message) uint64 {
	switch m := m.(type) {
	case *wire.Propose:
		return m.ID.Seq
	case *wire.Multicast:
		return m.M.ID.Seq
	case *wire.Delivered:
		return m.ID.Seq
	}
	return 0
}

// msg is the test message number seq from a process.
func msg(from wire.ProcID, seq uint64) wire.Message {
	return &wire.Propose{ID: wire.MsgID{Client: from, Seq: seq}, G: 1, LTS: wire.Timestamp{T: seq, G: 1}}
}

// sendSeq sends messages first..last from tr to to, retrying while the
// queue is full (the test wants them all).
func sendSeq(t *testing.T, tr *Transport, self, to wire.ProcID, first, last uint64) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for s := first; s <= last; s++ {
		for {
			err := tr.Send(to, msg(self, s))
			if err == nil {
				break
			}
			if !errors.Is(err, ErrQueueFull) {
				t.Errorf("Send(%d, seq %d): %v", to, s, err)
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("Send(%d, seq %d): queue full for too long", to, s)
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// checkRun checks seqs is exactly first..last.
func checkRun(t *testing.T, what string, seqs []uint64, first, last uint64) {
	t.Helper()
	if uint64(len(seqs)) != last-first+1 {
		t.Fatalf("%s: got %d messages, want %d", what, len(seqs), last-first+1)
	}
	for i, s := range seqs {
		if s != first+uint64(i) {
			t.Fatalf("%s: message %d has seq %d, want %d", what, i, s, first+uint64(i))
		}
	}
}

// checkIncreasing checks seqs is strictly increasing (gaps allowed: lossy
// but FIFO).
func checkIncreasing(t *testing.T, what string, seqs []uint64) {
	t.Helper()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("%s: seq %d after %d at position %d: reordered or duplicated", what, seqs[i], seqs[i-1], i)
		}
	}
}

// node is one transport under test with its recorder.
type node struct {
	id  wire.ProcID
	tr  *Transport
	rec *recorder
	cfg Config
}

// baseConfig is the configuration the tests start from: fast backoff,
// logs to t.Log.
func baseConfig(t *testing.T, self wire.ProcID) Config {
	return Config{
		ClusterName:    "test",
		Self:           self,
		DialBackoffMin: 2 * time.Millisecond,
		DialBackoffMax: 50 * time.Millisecond,
		Seed:           42,
		Logger:         testLogger(t),
	}
}

// startNode starts a transport from cfg with a recorder as its Handler
// (unless cfg has one) and closes it at cleanup.
func startNode(t *testing.T, cfg Config) *node {
	t.Helper()
	n := &node{id: cfg.Self, rec: newRecorder()}
	if cfg.Handler == nil {
		cfg.Handler = n.rec.handle
	}
	n.cfg = cfg
	tr, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%d): %v", cfg.Self, err)
	}
	n.tr = tr
	t.Cleanup(func() { tr.Close() })
	return n
}

// listen opens a loopback listener on a free port.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// cluster starts one node per id, fully meshed, each listing itself in
// Peers too; mutate may adjust each config.
func cluster(t *testing.T, ids []wire.ProcID, mutate func(*Config)) map[wire.ProcID]*node {
	t.Helper()
	lns := map[wire.ProcID]net.Listener{}
	peers := map[wire.ProcID]string{}
	for _, id := range ids {
		lns[id] = listen(t)
		peers[id] = lns[id].Addr().String()
	}
	nodes := map[wire.ProcID]*node{}
	for _, id := range ids {
		cfg := baseConfig(t, id)
		cfg.Listener = lns[id]
		cfg.Peers = peers
		if mutate != nil {
			mutate(&cfg)
		}
		nodes[id] = startNode(t, cfg)
	}
	return nodes
}

// freeAddr returns a loopback address nothing listens on (a port that was
// just free).
func freeAddr(t *testing.T) string {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// raw is a hand-driven connection to a transport, for feeding it bad
// input.
type raw struct {
	t    *testing.T
	conn net.Conn
	fr   *FrameReader
}

func dialRaw(t *testing.T, addr string) *raw {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, guard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(guard))
	return &raw{t: t, conn: conn, fr: NewFrameReader(conn, DefaultMaxFrame)}
}

func (r *raw) write(b []byte) {
	r.t.Helper()
	if _, err := r.conn.Write(b); err != nil {
		r.t.Fatalf("raw write: %v", err)
	}
}

// answer reads the acceptor's preamble and first frame.
func (r *raw) answer() (FrameType, []byte) {
	r.t.Helper()
	var pre [PreambleLen]byte
	if _, err := io.ReadFull(r.fr.br, pre[:]); err != nil {
		r.t.Fatalf("reading preamble: %v", err)
	}
	if string(pre[:]) != string(AppendPreamble(nil)) {
		r.t.Fatalf("preamble %q", pre)
	}
	typ, payload, err := r.fr.Next()
	if err != nil {
		r.t.Fatalf("reading answer: %v", err)
	}
	return typ, payload
}

// expectReject reads the answer and checks it is a reject for reason.
func (r *raw) expectReject(reason Reason) {
	r.t.Helper()
	typ, payload := r.answer()
	if typ != FrameReject {
		r.t.Fatalf("answer is %s, want REJECT", typ)
	}
	n, err := DecodeNotice(payload)
	if err != nil {
		r.t.Fatal(err)
	}
	if n.Reason != reason {
		r.t.Fatalf("rejected for %s (%q), want %s", n.Reason, n.Text, reason)
	}
	r.expectClosed()
}

// handshake sends a hello and expects a welcome.
func (r *raw) handshake(h Hello) {
	r.t.Helper()
	r.write(AppendFrame(AppendPreamble(nil), FrameHello, AppendHello(nil, h)))
	typ, payload := r.answer()
	if typ != FrameWelcome {
		n, _ := DecodeNotice(payload)
		r.t.Fatalf("answer is %s %+v, want WELCOME", typ, n)
	}
}

// expectClosed reads until the transport closes the connection.
func (r *raw) expectClosed() {
	r.t.Helper()
	buf := make([]byte, 4096)
	for {
		_, err := r.conn.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			r.t.Fatal("connection still open")
		}
		return
	}
}
