package node

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/storage/wal"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// soloConfig is a one-replica WbCast node on dir.
func soloConfig(t *testing.T, dir string) Config {
	t.Helper()
	topo, err := amcast.NewTopology(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Cluster: "test", ID: 0, Topology: topo, Listen: "127.0.0.1:0", DataDir: dir}
}

func mustStart(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustRefuse(t *testing.T, cfg Config, want ...string) {
	t.Helper()
	n, err := New(cfg)
	if err == nil {
		n.Close()
		t.Fatalf("New started a node; want an error with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// A data directory another process holds is refused before anything in it
// is opened, with the holder's pid; the lock is released on Close, also
// when the node fails to start.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	l, _, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := soloConfig(t, dir)
	mustRefuse(t, cfg, "data_dir "+dir+" is locked by pid "+strconv.Itoa(os.Getpid())+" (another weft agent?)")
	if got := dirNames(t, dir); !slices.Equal(got, []string{lockFile}) {
		t.Errorf("the refused node touched the data directory: it holds %v, want only %s", got, lockFile)
	}
	l.release()

	n := mustStart(t, cfg)
	b, err := os.ReadFile(filepath.Join(dir, lockFile))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("LOCK holds %q (%v), want this process's pid", b, err)
	}
	mustRefuse(t, cfg, "is locked by pid")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// Released on Close; and a start that fails after taking the lock
	// (here: another member's identity) releases it too.
	other := cfg
	other.Cluster = "other"
	mustRefuse(t, other, `belongs to cluster "test"`)
	mustStart(t, cfg).Close()
}

// The identity is written at bootstrap and every start checks it: another
// cluster, member or protocol, or a damaged file, is refused.
func TestDataDirIdentity(t *testing.T) {
	dir := t.TempDir()
	cfg := soloConfig(t, dir)
	n := mustStart(t, cfg)
	if st := n.Status(); st.Incarnation != 1 || st.Amnesiac {
		t.Errorf("a new member: incarnation %d, amnesiac %v", st.Incarnation, st.Amnesiac)
	}
	n.Close()
	id, err := readIdentity(vfs.OS(), dir)
	if err != nil || id == nil {
		t.Fatalf("identity after bootstrap: %v, %v", id, err)
	}
	if *id != (identity{Format: identityFormat, Cluster: "test", Member: 0, Protocol: ProtocolWbCast, Incarnation: 1}) {
		t.Errorf("identity %+v", *id)
	}

	other := cfg
	other.Cluster = "prod"
	mustRefuse(t, other, `data_dir `+dir+` belongs to cluster "test"`, `not to cluster "prod"`)
	// Member 1 of a two-replica group, on member 0's directory.
	topo2, _ := amcast.NewTopology(1, 2)
	other = cfg
	other.Topology, other.ID, other.Peers = topo2, 1, map[wire.ProcID]string{0: "127.0.0.1:1"}
	mustRefuse(t, other, "holds the state of member 0 of cluster \"test\"", "not of member 1")
	other = cfg
	other.Protocol = ProtocolFTSkeen
	mustRefuse(t, other, "a wbcast replica; this agent runs ftskeen")

	// A flipped byte: the checksum catches it.
	path := filepath.Join(dir, identityFile)
	b, _ := os.ReadFile(path)
	bad := bytes.Replace(b, []byte(`"member":0`), []byte(`"member":1`), 1)
	os.WriteFile(path, bad, 0o644)
	mustRefuse(t, cfg, "IDENTITY is damaged: checksum mismatch", "refusing to guess")
	os.WriteFile(path, b[:len(b)/2], 0o644)
	mustRefuse(t, cfg, "IDENTITY is damaged")
	os.WriteFile(path, b, 0o644)
	mustStart(t, cfg).Close()
}

// A WAL without an identity (a data directory from before identities, or
// a crash between the WAL's creation and the identity's) is adopted.
func TestDataDirAdoptsAWALWithoutIdentity(t *testing.T) {
	dir := t.TempDir()
	w, err := wal.Open(vfs.OS(), filepath.Join(dir, walDir), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	cfg := soloConfig(t, dir)
	cfg.Rejoin = true
	mustRefuse(t, cfg, "--rejoin: data_dir "+dir+" holds a write-ahead log")
	cfg.Rejoin = false
	n := mustStart(t, cfg)
	if st := n.Status(); st.Incarnation != 1 || st.Amnesiac {
		t.Errorf("adopted: incarnation %d, amnesiac %v", st.Incarnation, st.Amnesiac)
	}
	n.Close()
	if id, err := readIdentity(vfs.OS(), dir); err != nil || id == nil || id.Member != 0 {
		t.Errorf("identity after adoption: %v, %v", id, err)
	}
}

// A member whose state is lost (an empty directory with initial_state
// "existing", or an identity whose WAL is gone) is refused; with Rejoin it
// starts inert, and stays inert across restarts of that directory.
func TestDataDirRejoin(t *testing.T) {
	dir := t.TempDir()
	cfg := soloConfig(t, dir)
	cfg.InitialState = InitialExisting
	mustRefuse(t, cfg, `data_dir `+dir+` is empty and initial_state is "existing"`, "start it with --rejoin")
	if _, err := os.Stat(filepath.Join(dir, identityFile)); err == nil {
		t.Fatal("a refused start wrote an identity")
	}

	cfg.Rejoin = true
	n := mustStart(t, cfg)
	st := n.Status()
	if !st.Amnesiac || st.Incarnation != 2 || st.Role != "RECOVERING" || st.Leader {
		t.Errorf("rejoined on an empty directory: amnesiac %v, incarnation %d, role %s, leader %v", st.Amnesiac, st.Incarnation, st.Role, st.Leader)
	}
	// Inert: the only member of its group never leads, even after many
	// election timeouts.
	time.Sleep(time.Duration(3*DefaultElectionTicks) * DefaultTick)
	if st := n.Status(); st.Leader || st.Stats.Records != 0 {
		t.Errorf("the amnesiac led (%v) or persisted %d records", st.Leader, st.Stats.Records)
	}
	n.Close()
	cfg.Rejoin, cfg.InitialState = false, InitialNew
	n = mustStart(t, cfg) // a restart of the rejoined directory: still inert
	if st := n.Status(); !st.Amnesiac || st.Incarnation != 2 {
		t.Errorf("restarted amnesiac: amnesiac %v, incarnation %d", st.Amnesiac, st.Incarnation)
	}
	n.Close()

	// A healthy member whose wal/ was removed: refused, or rejoined with
	// the next incarnation.
	dir2 := t.TempDir()
	cfg2 := soloConfig(t, dir2)
	mustStart(t, cfg2).Close()
	cfg2.Rejoin = true
	mustRefuse(t, cfg2, "--rejoin: data_dir "+dir2+" holds the state of member 0", "restart it without --rejoin")
	cfg2.Rejoin = false
	os.RemoveAll(filepath.Join(dir2, walDir))
	mustRefuse(t, cfg2, "no write-ahead log (wal/ was removed?)", "--rejoin")
	cfg2.Rejoin = true
	n = mustStart(t, cfg2)
	if st := n.Status(); !st.Amnesiac || st.Incarnation != 2 {
		t.Errorf("rejoined after losing wal/: amnesiac %v, incarnation %d", st.Amnesiac, st.Incarnation)
	}
	n.Close()

	// Protocols without a disk-loss path refuse --rejoin.
	for _, p := range []string{ProtocolFTSkeen, ProtocolFastCast, ProtocolSkeen} {
		c := soloConfig(t, t.TempDir())
		c.Protocol, c.Rejoin = p, true
		mustRefuse(t, c, "--rejoin: "+p+" has no disk-loss path")
		c.Rejoin, c.InitialState = false, InitialExisting
		mustRefuse(t, c, p+" has no disk-loss path (no --rejoin)")
	}
}

// syncBuffer is a log sink shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The bootstrap probe: members of a new cluster start (their peers answer
// but have never seen them); a member whose directory was wiped is refused
// because its peers' gossip saw it run. With mutual TLS too: the probe
// connects with the node's own certificate (a node certificate may not
// connect as a client).
func TestDataDirBootstrapProbe(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testBootstrapProbe(t, func(*Config) {}) })
	t.Run("mtls", func(t *testing.T) {
		now := time.Now()
		ca, err := transport.NewDevCA("test CA", now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		certs := map[wire.ProcID]*transport.TLS{}
		testBootstrapProbe(t, func(cfg *Config) {
			mu.Lock()
			defer mu.Unlock()
			if certs[cfg.ID] == nil {
				if certs[cfg.ID], err = transport.DevTLS("test", transport.NodeIdentity(cfg.ID), ca, nil, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			cfg.TLS = certs[cfg.ID]
		})
	})
}

func testBootstrapProbe(t *testing.T, secure func(*Config)) {
	var logs syncBuffer
	c := newCluster(t, 1, 3, func(cfg *Config) {
		gossipTune(cfg)
		secure(cfg)
		// The probe listens on the node's address: trade the listener
		// newCluster made for its address.
		if cfg.Listener != nil {
			cfg.Listen = cfg.Listener.Addr().String()
			cfg.Listener.Close()
			cfg.Listener = nil
		}
		cfg.BootstrapProbe = 500 * time.Millisecond
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	// newCluster starts the nodes one after the other: the last one
	// started once both others answered that they had never seen it.
	if !regexp.MustCompile(`starting as a new member" node=\d asked=2 answered="\[\d \d\]"`).MatchString(logs.String()) {
		t.Errorf("no member started after both others answered its probe:\n%s", logs.String())
	}
	waitUntil(t, 10*time.Second, "every member up at p0 and p1", func() bool { return allUp(c, 0, 1, 2) && allUp(c, 1, 0, 2) })
	c.stop(2)
	if err := os.RemoveAll(c.dirs[2]); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Cluster: "test", ID: 2, Topology: c.topo, Peers: c.addrs, Listen: c.addrs[2], DataDir: c.dirs[2],
		BootstrapProbe: 5 * time.Second}
	secure(&cfg)
	mustRefuse(t, cfg, "is empty, but member 2 already ran in cluster \"test\": the gossip of peers [0 1] has seen it", "--rejoin")
	cfg.Rejoin = true
	n := mustStart(t, cfg)
	defer n.Close()
	if st := n.Status(); !st.Amnesiac {
		t.Errorf("p2 rejoined but is not amnesiac")
	}
}

// The identity is replaced atomically: a crash (the crashable in-memory
// filesystem losing or tearing whatever was not synced) at any step of a
// write leaves the old identity or the new one, never a damaged file; once
// the write returned, the new one survives any crash.
func TestIdentityWriteIsAtomic(t *testing.T) {
	const dir = "/data"
	old := &identity{Format: identityFormat, Cluster: "c", Member: 3, Protocol: ProtocolWbCast, Incarnation: 1}
	next := &identity{Format: identityFormat, Cluster: "c", Member: 3, Protocol: ProtocolWbCast, Incarnation: 2, Amnesiac: true}
	for k := 1; ; k++ {
		completed := false
		for seed := range uint64(20) {
			mem := vfs.NewCrashableMem()
			if err := mem.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := vfs.SyncDir(mem, "/"); err != nil {
				t.Fatal(err)
			}
			if err := writeIdentity(mem, dir, old); err != nil {
				t.Fatal(err)
			}
			ops := 0
			fsys := vfs.WithErrors(mem, vfs.InjectorFunc(func(vfs.Op, string) error {
				if ops++; ops == k {
					return vfs.ErrInjected
				}
				return nil
			}))
			err := writeIdentity(fsys, dir, next)
			completed = err == nil
			got, rerr := readIdentity(mem.CrashClone(rand.New(rand.NewPCG(seed, uint64(k)))), dir)
			switch {
			case rerr != nil || got == nil:
				t.Fatalf("crash at step %d (seed %d): identity %v, %v", k, seed, got, rerr)
			case completed && *got != *next:
				t.Fatalf("the write returned, then a crash (seed %d) left %v", seed, got)
			case *got != *old && *got != *next:
				t.Fatalf("crash at step %d (seed %d) left %v", k, seed, got)
			}
		}
		if completed {
			if k < 5 {
				t.Fatalf("the write took %d steps: it cannot have created, written, synced, renamed and synced the directory", k-1)
			}
			return
		}
	}
}
