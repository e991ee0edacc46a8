package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
)

// What every `weft bench` run shares, raw multicasts (bench.go) or
// weft-kv (bench_kv.go): the run's set-up, its clusters, and one rung of
// closed-loop client processes with the window's resource accounting.

// benchEnv is one run of weft bench or weft bench kv.
type benchEnv struct {
	ctx  context.Context
	exe  string // re-executed for the agents and the client processes
	root string // the clusters' working directories are under it
	o    *benchOptions
}

// newBenchEnv draws the seed if none was given, and sets up the run: the
// executable, Ctrl-C, the working directory (a temporary one unless
// --dir) and the profiles' directory. done cleans up.
func newBenchEnv(cmd *cobra.Command, o *benchOptions) (e *benchEnv, done func(), err error) {
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	root := o.dir
	tmp := root == ""
	if tmp {
		if root, err = os.MkdirTemp("", "weft-bench-"); err != nil {
			return nil, nil, err
		}
	}
	if o.cpuProfile != "" {
		if err := os.MkdirAll(o.cpuProfile, 0o755); err != nil {
			if tmp {
				os.RemoveAll(root)
			}
			return nil, nil, fmt.Errorf("--cpu-profile: %w", err)
		}
	}
	ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt)
	return &benchEnv{ctx: ctx, exe: exe, root: root, o: o}, func() {
		cancel()
		if tmp {
			os.RemoveAll(root)
		}
	}, nil
}

// benchConfig is one cluster configuration of a run.
type benchConfig struct {
	protocol string
	replicas int
	mode     string // durability: fsync, nofsync, or none (Skeen)
}

// configs lists the run's cluster configurations: each protocol in each
// durability mode, except Skeen: 1 replica per group, nothing persisted.
func (o *benchOptions) configs() []benchConfig {
	var out []benchConfig
	for _, p := range o.protocols {
		if p == "skeen" {
			out = append(out, benchConfig{p, 1, "none"})
			continue
		}
		for _, mode := range o.durability {
			out = append(out, benchConfig{p, o.replicas, mode})
		}
	}
	return out
}

// startCluster starts c's 3 groups of agents running service ("" for
// none) in a directory of their own.
func (e *benchEnv) startCluster(c benchConfig, service string) (*benchCluster, error) {
	name := c.protocol + "-" + c.mode
	if service != "" {
		name += "-" + service
	}
	dir := filepath.Join(e.root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	what := ""
	if service != "" {
		what = ", service " + service
	}
	fmt.Fprintf(os.Stderr, "== bench: %s, 3 groups x %d replicas, durability %s%s: starting the agents in %s\n", c.protocol, c.replicas, c.mode, what, dir)
	profile := ""
	if e.o.cpuProfile != "" {
		profile = filepath.Join(e.o.cpuProfile, name)
	}
	return startBenchCluster(e.ctx, e.exe, dir, c.protocol, 3, c.replicas, c.mode == "nofsync", service, profile, e.o.sessionLease, e.o.clientShare())
}

// retire stops cl's agents and settles the files they leave, so that the
// next cluster's windows do not pay for them. A cluster without fsync
// leaves hundreds of MiB of page cache unwritten (388 MiB after the
// nofsync ladder at 1 group), which the kernel writes back about 30 s
// later (vm.dirty_expire_centisecs), in the next cluster's first rows,
// where every fdatasync waits behind it: the fsync row at 32 clients
// that followed had 28 loop stalls of 60-130 ms (docs/batching.md,
// "The previous cluster's pages"). In a temporary directory the
// cluster's files are removed, their pages dropped unwritten; in one the
// user keeps (--dir), they are synced file by file before the next
// cluster starts.
func (e *benchEnv) retire(cl *benchCluster) error {
	cl.stop()
	if e.o.dir == "" { // a temporary root
		return os.RemoveAll(cl.dir)
	}
	start := time.Now()
	n, err := syncTree(cl.dir)
	if err != nil {
		return fmt.Errorf("syncing the stopped cluster's files in %s: %w", cl.dir, err)
	}
	fmt.Fprintf(os.Stderr, "   synced the stopped cluster's %d files in %v\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}

// syncTree fsyncs every regular file under dir and returns how many.
func syncTree(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		n++
		return err
	})
	return n, err
}

// clientShare is the agents' client_share for the run: the most
// multicasts one client of any rung keeps in flight (benchInFlight), and
// at least the configuration's default. A leader sheds a client's
// MULTICASTs beyond its share waiting in its inbox; a bench client must
// never be shed for carrying the workers the rung asked for.
func (o *benchOptions) clientShare() int {
	share := config.DefaultClientShare
	for _, n := range o.clients {
		for _, w := range procWorkers(n, min(o.clientProcs, n)) {
			share = max(share, benchInFlight(w, benchClients(w, o.sharedClients)))
		}
	}
	return share
}

// benchProc is one client process of a rung.
type benchProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr bytes.Buffer
}

// benchRun is what one rung's client processes reported, with the
// resources the agents and the clients used in its window.
type benchRun struct {
	results []benchClientResult
	rss     [][2]float64 // the agents' memory at the end of each --interval
	// sliceCPU holds the agents' and the clients' CPU ticks in each --interval.
	sliceCPU [][2]uint64
	// CPU ticks, read/write system calls and context switches in the
	// window, of the agents and of the client processes, over secs.
	sCPU, sSys, sCS, cCPU, cSys, cCS uint64
	// The agents' Readies, WAL syncs and raw sync pauses in the window
	// (their status).
	sReadies, sSyncs, sPauses uint64
	sBallots, sLeads          uint64 // the agents' ballots started and won in the window
	sStalls                   uint64 // the agents' loop stalls in the window (node/stall.go)
	secs                      float64
}

// runProcs runs one rung: clients workers over procs client processes
// (`weft bench-client`, each given spec with its share of the workers), a
// warm-up, the window, and returns what they measured.
func (e *benchEnv) runProcs(cl *benchCluster, clients, procs int, spec benchClientSpec) (*benchRun, error) {
	o := e.o
	var ps []*benchProc
	defer func() {
		for _, p := range ps {
			p.stdin.Close()
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	}()
	spec.Cluster, spec.KeyFile, spec.Groups, spec.Nodes = "weft-bench", cl.keyFile, cl.topo.Groups, cl.nodes
	spec.Warmup, spec.Window, spec.Interval, spec.Seed = o.warmup, o.window, o.interval, o.seed
	spec.SharedClients = o.sharedClients
	first := 0
	for i, w := range procWorkers(clients, procs) {
		spec.Workers, spec.FirstWorker = w, first
		if o.cpuProfile != "" {
			spec.CPUProfile = filepath.Join(o.cpuProfile, fmt.Sprintf("%s-g%d-c%d-client%d.pprof", filepath.Base(cl.dir), spec.PerMsg, clients, i))
		}
		first += w
		p := &benchProc{cmd: exec.Command(e.exe, "bench-client")}
		p.cmd.Stderr = &p.stderr
		var err error
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			return nil, err
		}
		out, err := p.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := p.cmd.Start(); err != nil {
			return nil, err
		}
		ps = append(ps, p)
		p.lines = bufio.NewScanner(out)
		p.lines.Buffer(make([]byte, 1<<20), 1<<30)
		b, _ := json.Marshal(spec)
		if _, err := fmt.Fprintf(p.stdin, "%s\n", b); err != nil {
			return nil, err
		}
	}
	for _, p := range ps {
		if !p.lines.Scan() || p.lines.Text() != `{"ready":true}` {
			return nil, fmt.Errorf("a client process did not start: %q %s", p.lines.Text(), p.stderr.String())
		}
	}
	t0 := time.Now().Add(100 * time.Millisecond)
	for _, p := range ps {
		fmt.Fprintf(p.stdin, "go %d\n", t0.UnixNano())
	}
	var clientPids []int
	for _, p := range ps {
		clientPids = append(clientPids, p.cmd.Process.Pid)
	}
	wstart, wend := t0.Add(o.warmup), t0.Add(o.warmup+o.window)
	if err := sleepUntil(e.ctx, wstart); err != nil {
		return nil, err
	}
	run := &benchRun{}
	r0 := cl.counts(e.ctx)
	s0, c0, at0 := sampleProcs(cl.pids()), sampleProcs(clientPids), time.Now()
	sc, cc := s0.CPU, c0.CPU
	for end := wstart.Add(o.interval); o.interval > 0 && !end.After(wend); end = end.Add(o.interval) {
		if err := sleepUntil(e.ctx, end); err != nil {
			return nil, err
		}
		m, s := agentsRSS(cl.pids())
		run.rss = append(run.rss, [2]float64{m, s})
		// A process gone since reads 0 ticks: its slice then counts no
		// CPU rather than wrapping around.
		sc1, cc1 := cpuTicks(cl.pids()), cpuTicks(clientPids)
		run.sliceCPU = append(run.sliceCPU, [2]uint64{sc1 - min(sc, sc1), cc1 - min(cc, cc1)})
		sc, cc = sc1, cc1
	}
	if err := sleepUntil(e.ctx, wend); err != nil {
		return nil, err
	}
	s1, c1, at1 := sampleProcs(cl.pids()), sampleProcs(clientPids), time.Now()
	r1 := cl.counts(e.ctx)
	for _, p := range ps {
		if !p.lines.Scan() {
			return nil, fmt.Errorf("a client process ended without a result: %s", p.stderr.String())
		}
		var res benchClientResult
		if err := json.Unmarshal(p.lines.Bytes(), &res); err != nil {
			return nil, fmt.Errorf("a client process's result: %w", err)
		}
		if res.Error != "" {
			return nil, errors.New(res.Error)
		}
		run.results = append(run.results, res)
		run.cSys += res.Recvmsgs
	}
	run.sCPU, run.sSys, run.sCS = s1.since(s0)
	run.cCPU, run.cSys, run.cCS = c1.since(c0)
	// Socket reads made with recvmsg are not in /proc/<pid>/io: the
	// agents' from their status (taken around the samples), the clients'
	// from their results.
	d := countsSince(r0, r1)
	run.sSys += uint64(d.recvmsgs)
	run.sReadies, run.sSyncs, run.sPauses = uint64(d.readies), uint64(d.syncs), uint64(d.pauses)
	run.sBallots, run.sLeads, run.sStalls = uint64(d.ballots), uint64(d.leads), uint64(d.stalls)
	run.secs = at1.Sub(at0).Seconds()
	for _, p := range ps {
		if err := p.cmd.Wait(); err != nil {
			return nil, fmt.Errorf("a client process: %v: %s", err, p.stderr.String())
		}
	}
	ps = nil
	return run, nil
}

// procWorkers spreads clients workers over procs client processes: how
// many each process runs.
func procWorkers(clients, procs int) []int {
	ws := make([]int, procs)
	for i := range ws {
		ws[i] = clients / procs
		if i < clients%procs {
			ws[i]++
		}
	}
	return ws
}

// clientConns is how many client.Clients (each its own id, session and
// connection to every node) a rung of clients workers over procs
// processes uses in all, with --shared-clients shared: clients with 0.
func clientConns(clients, procs, shared int) int {
	n := 0
	for _, w := range procWorkers(clients, procs) {
		n += benchClients(w, shared)
	}
	return n
}

// kind merges every process's latencies and errors of one operation kind.
func (r *benchRun) kind(k int) (lat latKind, errs int) {
	lat = newLatKind()
	for _, res := range r.results {
		if k < len(res.Lat) {
			lat.merge(res.Lat[k])
		}
		if k < len(res.Errors) {
			errs += res.Errors[k]
		}
	}
	return lat, errs
}

// cpu is the window's resource use per operation, n operations completed.
func (r *benchRun) cpu(n int) benchCPU {
	c := benchCPU{ServerCores: float64(r.sCPU) / clockTicks / r.secs, ClientCores: float64(r.cCPU) / clockTicks / r.secs,
		ServerRawSyncPauses: r.sPauses, ServerBallots: r.sBallots, ServerLeaderChanges: r.sLeads, ServerLoopStalls: r.sStalls}
	if n > 0 {
		// The counters cover [at0, at1], the completions the window: the
		// same span up to the sampling's few milliseconds.
		f := float64(n)
		c.ServerCPUus = float64(r.sCPU) / clockTicks * 1e6 / f
		c.ClientCPUus = float64(r.cCPU) / clockTicks * 1e6 / f
		c.TotalCPUus = c.ServerCPUus + c.ClientCPUus
		c.ServerRWSyscalls, c.ClientRWSyscalls = float64(r.sSys)/f, float64(r.cSys)/f
		c.ServerCtxSwitches, c.ClientCtxSwitches = float64(r.sCS)/f, float64(r.cCS)/f
		c.ServerReadies, c.ServerSyncs = float64(r.sReadies)/f, float64(r.sSyncs)/f
	}
	return c
}

func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}
