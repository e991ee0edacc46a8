package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/wire"
)

// benchClientSpec is what `weft bench` tells each of its client processes
// (`weft bench-client`, one JSON line on its stdin).
type benchClientSpec struct {
	Cluster string                 `json:"cluster"`
	KeyFile string                 `json:"key_file"`
	Groups  [][]wire.ProcID        `json:"groups"`
	Nodes   map[wire.ProcID]string `json:"nodes"`
	// Workers closed-loop workers, numbered from FirstWorker across the
	// whole run (the home group of worker w is w mod groups).
	Workers     int           `json:"workers"`
	FirstWorker int           `json:"first_worker"`
	Dest        string        `json:"dest"` // uniform or home
	PerMsg      int           `json:"groups_per_msg"`
	Payload     int           `json:"payload"`
	Warmup      time.Duration `json:"warmup"`
	Window      time.Duration `json:"window"`
	Interval    time.Duration `json:"interval"` // 0: no timeline
	Seed        uint64        `json:"seed"`
	// KV, if set, makes the workers weft-kv clients running its mix
	// (bench_kv_mix.go) instead of multicasting raw payloads.
	KV *kvMixSpec `json:"kv,omitempty"`
	// SharedClients, if above 0, is how many client.Clients the workers
	// share (worker i of the process uses client i mod SharedClients, at
	// most one per worker: benchClients); 0 gives every worker its own.
	SharedClients int `json:"shared_clients"`
	// CPUProfile, if set, is where the process writes a CPU profile of
	// its window (weft bench --cpu-profile).
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// benchClientResult is a client process's answer (one JSON line on its
// stdout): by operation kind (raw multicasts: kind 0 only; weft-kv: the
// kvKinds), the latencies of the operations sent and answered inside the
// window (bench_hist.go), and the failures.
type benchClientResult struct {
	Lat []latKind `json:"lat"`
	// Intervals holds, with an interval, the latencies of each slice of
	// the window (by completion time), all kinds together
	// (bench_timeline.go).
	Intervals []latHist `json:"intervals,omitempty"`
	Errors    []int     `json:"errors"`
	// Recvmsgs is the socket reads the process's clients made with
	// recvmsg in the window (transport.Stats.ReadsRecvmsg), which
	// /proc/<pid>/io does not count.
	Recvmsgs uint64 `json:"recvmsgs"`
	Error    string `json:"error,omitempty"`
}

// benchClientCmd is the hidden subcommand `weft bench` re-executes for
// its client processes: by default each worker is its own client (own id,
// session and connections, like one connection per client thread); with
// --shared-clients the workers share a few (benchClientSpec.SharedClients).
func benchClientCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "bench-client",
		Hidden: true,
		Short:  "A client process of weft bench (internal): a JSON spec on stdin, results on stdout",
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res := runBenchClient(cmd.Context(), os.Stdin, cmd.OutOrStdout())
			if res.Error != "" {
				return errors.New(res.Error)
			}
			return nil
		},
	}
}

// runBenchClient reads the spec, creates the clients, says {"ready":true},
// waits for "go <unix ns>" (the start of the warm-up), runs the workers
// until the window ends and writes the result.
func runBenchClient(ctx context.Context, in io.Reader, out io.Writer) benchClientResult {
	var res benchClientResult
	defer func() { json.NewEncoder(out).Encode(res) }()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var spec benchClientSpec
	if !sc.Scan() {
		res.Error = "bench-client: no spec on stdin"
		return res
	}
	if err := json.Unmarshal(sc.Bytes(), &spec); err != nil {
		res.Error = "bench-client: spec: " + err.Error()
		return res
	}
	topo, err := amcast.TopologyOf(spec.Groups)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	key, err := config.ReadClusterKey(spec.KeyFile)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	var keys *kvKeys
	if spec.KV != nil {
		if keys, err = newKVKeys(spec.KV, topo.NumGroups()); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	if n := benchClients(spec.Workers, spec.SharedClients); n <= benchClientsOneP {
		setProcs(os.Getenv("GOMAXPROCS"), 1)
	}
	clients := make([]*client.Client, benchClients(spec.Workers, spec.SharedClients))
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	for i := range clients {
		// A slow tick: retries and view requests only matter under
		// failures, and 180 clients ticking every 10ms would spend the
		// client processes' CPU on timers. A weft-kv client waits for
		// every shard's answer (a transaction's outcome is in each).
		if clients[i], err = client.New(client.Config{Cluster: spec.Cluster, ClusterKey: key, Topology: topo, Nodes: spec.Nodes,
			Tick: 100 * time.Millisecond, AllGroups: spec.KV != nil, MaxInFlight: benchInFlight(spec.Workers, len(clients))}); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	ops, kinds := make([]benchOp, spec.Workers), 1
	for i := range ops {
		cl, w := clients[i%len(clients)], spec.FirstWorker+i
		rng := rand.New(rand.NewPCG(spec.Seed, uint64(w)))
		if keys == nil {
			ops[i] = multicastOp(cl, topo.NumGroups(), spec, w, rng)
			continue
		}
		kinds = len(kvKinds)
		if ops[i], err = kvOp(cl, topo.NumGroups(), spec.KV, keys, rng); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	res.Lat, res.Errors = make([]latKind, kinds), make([]int, kinds)
	for k := range res.Lat {
		res.Lat[k] = newLatKind()
	}
	if spec.Interval > 0 {
		res.Intervals = make([]latHist, int(spec.Window/spec.Interval))
		for i := range res.Intervals {
			res.Intervals[i] = newLatHist()
		}
	}
	fmt.Fprintln(out, `{"ready":true}`)
	if !sc.Scan() {
		res.Error = "bench-client: no go line on stdin"
		return res
	}
	word, ns, _ := strings.Cut(sc.Text(), " ")
	t0n, err := strconv.ParseInt(ns, 10, 64)
	if word != "go" || err != nil {
		res.Error = fmt.Sprintf("bench-client: want \"go <unix ns>\", got %q", sc.Text())
		return res
	}
	t0 := time.Unix(0, t0n)
	wstart, wend := t0.Add(spec.Warmup), t0.Add(spec.Warmup+spec.Window)
	time.Sleep(time.Until(t0))
	var mu sync.Mutex
	var wg sync.WaitGroup
	recvmsgs := func() (n uint64) {
		for _, cl := range clients {
			n += cl.TransportStats().ReadsRecvmsg
		}
		return n
	}
	var profErr error
	wg.Go(func() {
		time.Sleep(time.Until(wstart))
		stop := func() {}
		if spec.CPUProfile != "" {
			if stop, profErr = startCPUProfile(spec.CPUProfile); profErr != nil {
				stop = func() {}
			}
		}
		r0 := recvmsgs()
		time.Sleep(time.Until(wend))
		res.Recvmsgs = recvmsgs() - r0
		stop()
	})
	for _, op := range ops {
		wg.Go(func() {
			errs := closedLoop(ctx, op, &res, spec, wstart, wend)
			mu.Lock()
			for k, n := range errs {
				res.Errors[k] += n
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if profErr != nil {
		res.Error = profErr.Error()
	}
	return res
}

// benchClients is how many client.Clients a process of workers workers
// creates: one per worker with shared 0, else shared (at most one per
// worker).
func benchClients(workers, shared int) int {
	if shared == 0 {
		return workers
	}
	return min(shared, workers)
}

// benchInFlight is the MaxInFlight of each of a process's clients shared
// by workers workers: as many as the most workers one of them carries
// (worker i uses client i mod clients), so that a rung of n workers has n
// multicasts in flight. With the client's default (64) the workers above
// it waited for a slot inside the client: the 180 rung of --shared-clients
// 1 over two processes (90 workers a client) ran 128 multicasts in flight,
// not 180. The agents' client_share is raised to match
// (benchOptions.clientShare).
func benchInFlight(workers, clients int) int {
	return max(1, (workers+clients-1)/max(clients, 1))
}

// benchOp runs one worker's n-th operation and returns its kind (an index
// into the result's lists), also when it fails.
type benchOp func(ctx context.Context, n int) (kind int, err error)

// multicastOp multicasts payloads of spec.Payload bytes to spec.PerMsg
// groups drawn by spec.Dest (benchDest): the raw multicast benchmark.
func multicastOp(cl *client.Client, groups int, spec benchClientSpec, w int, rng *rand.Rand) benchOp {
	payload := make([]byte, spec.Payload)
	for i := range payload {
		payload[i] = byte('a' + rng.IntN(26))
	}
	home := w % groups
	return func(ctx context.Context, n int) (int, error) {
		dest := benchDest(spec.Dest, spec.PerMsg, groups, home, n, rng)
		if len(payload) > 0 {
			payload[n%len(payload)]++ // every message its own content
		}
		_, err := cl.Multicast(ctx, dest, payload)
		return 0, err
	}
}

// closedLoop runs op closed-loop until wend, counts into res (shared by
// the process's workers) the latencies (call to return of op) of the
// operations started at or after wstart and answered by wend, by kind and
// with spec.Interval by interval of completion, and returns the failures
// by kind.
func closedLoop(ctx context.Context, op benchOp, res *benchClientResult, spec benchClientSpec, wstart, wend time.Time) []int {
	// An operation still in flight at the end of the window no longer
	// counts; give it a little while, then leave it.
	ctx, cancel := context.WithDeadline(ctx, wend.Add(2*time.Second))
	defer cancel()
	errs := make([]int, len(res.Lat))
	for n := 0; ; n++ {
		start := time.Now()
		if !start.Before(wend) {
			return errs
		}
		k, err := op(ctx, n)
		done := time.Now()
		switch {
		case err != nil && ctx.Err() != nil:
			return errs
		case err != nil:
			errs[k]++
			time.Sleep(10 * time.Millisecond) // overloaded: back off
		case !start.Before(wstart) && !done.After(wend):
			ns := int64(done.Sub(start))
			res.Lat[k].add(ns)
			if len(res.Intervals) > 0 {
				res.Intervals[min(int(done.Sub(wstart)/spec.Interval), len(res.Intervals)-1)].add(ns)
			}
		}
	}
}

// benchDest is message n's destinations: k groups drawn uniformly, or the
// worker's home group plus k-1 neighbours rotating over the others.
func benchDest(model string, k, groups, home, n int, rng *rand.Rand) []wire.GroupID {
	dest := make([]wire.GroupID, 0, k)
	if model == "home" {
		dest = append(dest, wire.GroupID(home))
		for j := 1; j < k; j++ {
			dest = append(dest, wire.GroupID((home+1+(n+j-1)%(groups-1))%groups))
		}
	} else {
		for _, g := range rng.Perm(groups)[:k] {
			dest = append(dest, wire.GroupID(g))
		}
	}
	slices.Sort(dest)
	return slices.Compact(dest)
}
