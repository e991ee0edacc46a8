package demo

// Real-process tests of the data-directory lock and member identity
// (issue #11 items 2 and 3; node/datadir.go): a second agent on a data
// directory another holds, an agent on another member's or another
// cluster's directory, and members whose data directories were wiped,
// refused and then rejoined inert with --rejoin, under a client workload
// whose history the checkers must pass. Skipped with -short.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

// refusedWithin bounds a refused agent's run (the bootstrap probe is 1s).
const refusedWithin = 30 * time.Second

// runRefused runs `weft agent --config cfgPath flags...`, which must exit
// non-zero with every string of want in its output; it returns the output.
func runRefused(t *testing.T, cfgPath string, flags []string, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), refusedWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, weftBinary(t), append([]string{"agent", "--config", cfgPath}, flags...)...)
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("agent --config %s %v still running after %v; it should have refused to start:\n%s", cfgPath, flags, refusedWithin, out)
	case !errors.As(err, &ee):
		t.Fatalf("agent --config %s %v: %v, want a non-zero exit:\n%s", cfgPath, flags, err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("agent --config %s %v exited with %v; its output lacks %q:\n%s", cfgPath, flags, err, w, out)
		}
	}
	return string(out)
}

// deriveConfig writes a copy of agent configuration from with edit applied,
// and returns its path.
func deriveConfig(t *testing.T, from string, edit func(*config.Config)) string {
	t.Helper()
	cfg, err := config.Load(from)
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	path := filepath.Join(t.TempDir(), "derived.toml")
	if err := os.WriteFile(path, []byte(cfg.Format()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// wipe loses agent p's disk: its data directory is moved aside, to the
// path it returns, and an empty one takes its place, as after a disk
// replacement. (The deliveries log the checks read is outside it.)
func (c *cluster) wipe(p wire.ProcID) string {
	c.t.Helper()
	a := c.agent(p)
	if a.running() {
		c.t.Fatalf("p%d is running", p)
	}
	lost := a.dir + ".lost"
	if err := os.Rename(a.dir, lost); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Mkdir(a.dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	c.logf("wiped p%d's data directory (moved to %s)", p, lost)
	return lost
}

// onlyLock fails the test if dir holds anything but the LOCK file: a
// refused agent opened nothing else.
func onlyLock(t *testing.T, dir string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Name() != "LOCK" {
			t.Errorf("a refused agent left %s in %s", e.Name(), dir)
		}
	}
}

// refuseThenRejoin restarts wiped agent p without --rejoin (refused: its
// peers have seen it), then with --rejoin, and waits until it has rejoined
// its group (no longer amnesiac, incarnation 2).
func (c *cluster) refuseThenRejoin(p wire.ProcID) {
	c.t.Helper()
	a := c.agent(p)
	runRefused(c.t, a.cfgPath, nil, "data_dir "+a.dir+" is empty, but member "+strconv.Itoa(int(p))+` already ran in cluster "weft-demo"`,
		"start it with --rejoin")
	onlyLock(c.t, a.dir)
	c.logf("p%d on an empty data directory without --rejoin: refused", p)
	c.restart(p, "--rejoin")
	pid := a.cmd.Process.Pid
	var st node.Status
	c.waitFor(fmt.Sprintf("p%d to rejoin its group", p), rejoinWithin, func(sts map[wire.ProcID]node.Status) bool {
		st = sts[p]
		return st.Pid == pid && !st.Amnesiac && st.Role == "FOLLOWER"
	})
	if st.Incarnation != 2 {
		c.t.Errorf("p%d rejoined at incarnation %d, want 2", p, st.Incarnation)
	}
	if log := tailN(a.logPath, 1000); !strings.Contains(log, "AMNESIAC: this member lost its data directory: it is inert") {
		c.t.Errorf("p%d's log does not say it was an inert amnesiac:\n%s", p, tailN(a.logPath, 40))
	}
	c.logf("p%d with --rejoin: rejoined its group (%s, incarnation %d, ballot %s)", p, st.Role, st.Incarnation, st.Ballot)
}

// A 3x3 WbCast cluster under load: a follower's and then a leader's data
// directory are wiped; each restart without --rejoin is refused, and with
// --rejoin the member rejoins its group (a ballot established without it,
// then a snapshot of the delivered prefix) and delivers again, also
// through a crash and restart of its group's leader. A second agent on
// a running member's directory, and agents on another member's or another
// cluster's directory, are refused. Every checker passes over the whole
// history (the wiped members' deliveries before the wipe included) and no
// acknowledged multicast is lost.
func TestIdentityWipeAndRejoin(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 3, Replicas: 3, Clients: 8})
	c.load(time.Second, 50)

	// A second agent on a running member's data directory.
	busy := c.follower(2)
	a := c.agent(busy.ID)
	runRefused(t, a.cfgPath, nil, fmt.Sprintf("data_dir %s is locked by pid %d (another weft agent?)", a.dir, a.cmd.Process.Pid))
	c.logf("a second agent on p%d's data directory: refused", busy.ID)

	// A follower's disk is lost.
	f := c.follower(0)
	c.kill(f.ID)
	lost := c.wipe(f.ID)
	c.refuseThenRejoin(f.ID)
	c.waitDelivering(0, c.members(0, f.ID))
	c.load(time.Second, 50)

	// The lost directory is member f's: another member's or another
	// cluster's agent refuses it.
	other := c.agent(busy.ID)
	cfgPath := deriveConfig(t, other.cfgPath, func(cfg *config.Config) { cfg.DataDir = lost })
	runRefused(t, cfgPath, nil, fmt.Sprintf(`data_dir %s holds the state of member %d of cluster "weft-demo"`, lost, f.ID),
		fmt.Sprintf("not of member %d", busy.ID))
	cfgPath = deriveConfig(t, c.agent(f.ID).cfgPath, func(cfg *config.Config) { cfg.DataDir, cfg.Cluster = lost, "weft-other" })
	runRefused(t, cfgPath, nil, fmt.Sprintf(`data_dir %s belongs to cluster "weft-demo"`, lost), `not to cluster "weft-other"`)
	c.logf("p%d's old data directory under p%d's config, and under another cluster's: refused", f.ID, busy.ID)

	// A leader's disk is lost.
	l := c.leader(1)
	c.kill(l.ID)
	c.waitNewLeader(1, l)
	c.waitDelivering(1, c.members(1, l.ID))
	c.wipe(l.ID)
	c.refuseThenRejoin(l.ID)
	c.load(time.Second, 50)

	// g0, with its rejoined member, loses its leader too: the others elect
	// a leader and g0 delivers again; the old leader restarts from its WAL.
	l0 := c.leader(0)
	c.kill(l0.ID)
	c.restart(l0.ID)
	c.waitFor("g0 to elect a leader above "+l0.Ballot.String(), leaderWithin, func(sts map[wire.ProcID]node.Status) bool {
		ld, ok := c.r.leaderOf(sts, 0)
		return ok && l0.Ballot.Less(ld.Ballot) && !ld.Amnesiac
	})
	c.waitDelivering(0, c.members(0, f.ID))
	c.waitRejoin(l0.ID)
	c.load(time.Second, 50)
	for _, p := range []wire.ProcID{f.ID, l.ID} {
		if st := c.r.snapshot()[p]; st.Amnesiac || st.Stats.Delivered == 0 || st.Coverage.Rejoins == 0 && st.Incarnation != 2 {
			t.Errorf("p%d did not rejoin: amnesiac %v, delivered %d, incarnation %d, core %+v", p, st.Amnesiac, st.Stats.Delivered, st.Incarnation, st.Coverage)
		}
	}
	c.finish()
}

// TestDataDirLockTwoProcesses starts `weft agent` twice on one
// configuration: the second exits at once, non-zero, naming the first's
// pid; the first keeps running and its data directory (WAL, identity,
// deliveries log) is byte for byte what it was.
func TestDataDirLockTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	dir := t.TempDir()
	opt := Options{Exe: weftBinary(t), Workload: WorkloadMulticast, Duration: 3 * time.Second, Groups: 1, Replicas: 1, KillGroup: -1, Dir: dir, Out: logWriter{t}}
	if err := opt.defaults(); err != nil {
		t.Fatal(err)
	}
	r := &run{opt: opt, dir: dir, hc: &http.Client{Timeout: 500 * time.Millisecond},
		statuses: map[wire.ProcID]node.Status{}, replies: map[string]wire.Timestamp{}, killGroup: -1}
	var err error
	if r.topo, err = amcast.NewTopology(1, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.setup(); err != nil {
		t.Fatal(err)
	}
	a := r.agents[0]
	if err := r.start(a); err != nil {
		t.Fatal(err)
	}
	defer r.stopAll(5 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.poll(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	pid := a.cmd.Process.Pid
	// Up, leading, and done writing its start-up files (gossip stores its
	// generation at its first round).
	if !r.waitFor(ctx, upWithin, func(sts map[wire.ProcID]node.Status) bool {
		_, err := os.Stat(filepath.Join(a.dir, "gossip-generation"))
		return sts[0].Pid == pid && sts[0].Leader && err == nil
	}) {
		t.Fatalf("the agent did not come up:\n%s", tailN(a.logPath, 20))
	}
	before := hashTree(t, a.dir)
	out := runRefused(t, a.cfgPath, nil, fmt.Sprintf("data_dir %s is locked by pid %d (another weft agent?)", a.dir, pid))
	if strings.Contains(out, "wal") {
		t.Errorf("the refused agent mentions the WAL: it got past the lock:\n%s", out)
	}
	if after := hashTree(t, a.dir); !maps.Equal(before, after) {
		t.Errorf("the data directory changed while the second agent ran:\nbefore %v\nafter  %v", before, after)
	}
	if !a.running() {
		t.Fatalf("the first agent stopped:\n%s", tailN(a.logPath, 20))
	}
	if !r.waitFor(ctx, upWithin, func(sts map[wire.ProcID]node.Status) bool { return sts[0].Pid == pid }) {
		t.Errorf("the first agent stopped answering")
	}
	r.stopAll(5 * time.Second)
	if !a.cmd.ProcessState.Success() {
		t.Errorf("the first agent exited with %v:\n%s", a.cmd.ProcessState, tailN(a.logPath, 20))
	}
}

// hashTree returns the SHA-256 of every file under dir but LOCK (which the
// refused agent opens to try the lock), by relative path.
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(b))[:16]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(out))
	if !slices.ContainsFunc(names, func(k string) bool { return strings.HasPrefix(k, "wal"+string(filepath.Separator)) }) {
		t.Fatalf("no WAL file under %s: %v", dir, names)
	}
	return out
}
