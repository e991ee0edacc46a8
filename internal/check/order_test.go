package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestGap(t *testing.T) {
	// Proc 1 skips b, which its group-mates delivered before d.
	h := without(base(), "b", 1)
	r := Check(h, Options{})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, "proc 1", "d", "b", "prefix")
	r = Check(h, Options{Termination: TermAll})
	expect(t, r, KindOrder, KindTermination)
}

func TestTwoGroupCycle(t *testing.T) {
	mk := func(gts map[string]GTS) *History {
		b := newBuilder(3, 3)
		b.mc("x", 0, 1).mc("y", 0, 1)
		b.group(0, gts, "x", "y")
		b.group(1, gts, "y", "x")
		return &b.h
	}
	// Without GTSs only the graph sees it.
	r := Check(mk(nil), Options{Termination: TermAll})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, "x <g0 y <g1 x")
	// With GTSs the GTS checker sees it too.
	r = Check(mk(map[string]GTS{"x": {1, 0}, "y": {2, 1}}), Options{Termination: TermAll})
	expect(t, r, KindOrder, KindGTS)
	expectHas(t, r, KindGTS, "not increasing")
}

func TestThreeGroupCycle(t *testing.T) {
	b := newBuilder(3, 3)
	b.mc("a", 0, 2).mc("b", 0, 1).mc("c", 1, 2)
	b.group(0, nil, "a", "b")
	b.group(1, nil, "b", "c")
	b.group(2, nil, "c", "a")
	r := Check(&b.h, Options{Termination: TermAll})
	expect(t, r, KindOrder)
	if r.Count(KindOrder) != 1 {
		t.Fatal(r)
	}
	expectHas(t, r, KindOrder, "a <g0 b <g1 c <g2 a")
}

func TestGapEdgeCycle(t *testing.T) {
	// Group 1 delivers mp then m. Group 0, also a destination of mp,
	// delivers m but never mp. Sequence edges alone (mp→m in g1, nothing in
	// g0) are acyclic; the gap edge m→mp of g0 closes the cycle.
	b := newBuilder(3, 3)
	b.mc("mp", 0, 1).mc("m", 0, 1)
	b.group(1, nil, "mp", "m")
	b.group(0, nil, "m")
	r := Check(&b.h, Options{})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, "mp <g1 m <g0(gap) mp")
	expect(t, Check(&b.h, Options{Termination: TermQuorum}), KindOrder, KindTermination, KindAgreement)
}

func TestShortestCycleReported(t *testing.T) {
	// One SCC holding a 4-cycle and a 2-cycle: g0 orders p<q<r<s, g1 orders
	// s<p, g2 orders r<q. The shortest cycle is q <g0 r <g2 q.
	b := newBuilder(3, 1)
	b.mc("p", 0, 1).mc("q", 0, 2).mc("r", 0, 2).mc("s", 0, 1)
	b.group(0, nil, "p", "q", "r", "s")
	b.group(1, nil, "s", "p")
	b.group(2, nil, "r", "q")
	r := Check(&b.h, Options{})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, "cycle of 2 messages", "component of 4", "q <g0 r <g2 q")
}

func TestLongCycle(t *testing.T) {
	// A 100,000-message cycle: g0 delivers m0..m(n-1), g1 delivers m(n-1)
	// then m0. Exercises the iterative SCC and BFS on a deep graph.
	const n = 100000
	b := newBuilder(2, 1)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d", i)
		if i == 0 || i == n-1 {
			b.mc(ids[i], 0, 1)
		} else {
			b.mc(ids[i], 0)
		}
	}
	b.group(0, nil, ids...)
	b.group(1, nil, ids[n-1], ids[0])
	r := Check(&b.h, Options{})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, fmt.Sprintf("m%d <g1 m0", n-1))
}

// TestDigraphAgainstBruteForce compares the SCC and shortest-cycle code with
// a brute-force computation on random small graphs.
func TestDigraphAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for it := 0; it < 2000; it++ {
		n := 1 + r.IntN(12)
		ne := r.IntN(3 * n)
		adjm := make([][]bool, n)
		for i := range adjm {
			adjm[i] = make([]bool, n)
		}
		out := make([][]int32, n)
		for k := 0; k < ne; k++ {
			u, v := r.IntN(n), r.IntN(n)
			if u == v {
				continue
			}
			adjm[u][v] = true
			out[u] = append(out[u], int32(v)) // parallel edges allowed
		}
		gr := &digraph{start: make([]int32, n+1)}
		for u := 0; u < n; u++ {
			gr.start[u+1] = gr.start[u] + int32(len(out[u]))
			for _, v := range out[u] {
				gr.adj = append(gr.adj, v)
				gr.lab = append(gr.lab, int32(u))
			}
		}
		// Brute force: reachability closure.
		reach := make([][]bool, n)
		for i := range reach {
			reach[i] = slices.Clone(adjm[i])
		}
		for k := 0; k < n; k++ {
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					if reach[i][k] && reach[k][j] {
						reach[i][j] = true
					}
				}
			}
		}
		removed := make([]bool, n)
		comps := gr.sccs(removed)
		inCycle := 0
		for i := 0; i < n; i++ {
			if reach[i][i] {
				inCycle++
			}
		}
		total := 0
		for _, comp := range comps {
			total += len(comp)
			for _, u := range comp {
				for _, v := range comp {
					if !reach[u][v] && u != v {
						t.Fatalf("it %d: %d, %d in one component but not mutually reachable", it, u, v)
					}
				}
			}
			// Brute-force shortest cycle within the component (BFS from
			// every node, over all edges: a shortest cycle through a node
			// stays in its component).
			bestBF := 1 << 30
			for _, s := range comp {
				dist := make([]int, n)
				for i := range dist {
					dist[i] = -1
				}
				dist[s] = 0
				q := []int32{s}
				for len(q) > 0 {
					u := q[0]
					q = q[1:]
					for _, v := range out[u] {
						if v == s && dist[u]+1 < bestBF {
							bestBF = dist[u] + 1
						}
						if dist[v] < 0 {
							dist[v] = dist[u] + 1
							q = append(q, v)
						}
					}
				}
			}
			budget := 1 << 30
			cyc, labs, exact := gr.shortestCycle(comp, &budget)
			if !exact || len(cyc) != bestBF || len(labs) != len(cyc) {
				t.Fatalf("it %d: cycle %v (exact %v), want length %d", it, cyc, exact, bestBF)
			}
			for i, u := range cyc {
				v := cyc[(i+1)%len(cyc)]
				if !adjm[u][v] || labs[i] != u {
					t.Fatalf("it %d: cycle %v has no edge %d→%d (label %d)", it, cyc, u, v, labs[i])
				}
			}
		}
		if total != inCycle {
			t.Fatalf("it %d: components cover %d nodes, %d nodes lie on cycles", it, total, inCycle)
		}
	}
}
