package check

// The order check's second half (check.go's doc, "order (b)"): the graph
// of every group's delivery order, with gap edges, and its cycles.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// graph builds the ordering graph and reports its cycles.
func (c *checker) graph() {
	M := len(c.name)
	if M == 0 {
		return
	}
	S := make([][]int32, c.G)
	inS := make([]bool, len(c.cnt))
	nEdges := 0
	for g := 0; g < c.G; g++ {
		S[g] = c.seq[c.longest(g)]
		for _, m := range S[g] {
			inS[int(c.slot[m])+c.destIndex(m, g)] = true
		}
		if len(S[g]) > 1 {
			nEdges += len(S[g]) - 1
		}
	}
	// Gap edges: counted in the same loop that emits them below.
	isGap := func(m int32, di int) bool {
		g := c.dest[m][di]
		return len(S[g]) > 0 && !inS[int(c.slot[m])+di]
	}
	outdeg := make([]int32, M+1)
	for g := 0; g < c.G; g++ {
		for i := 0; i+1 < len(S[g]); i++ {
			outdeg[S[g][i]]++
		}
	}
	for m := int32(0); int(m) < M; m++ {
		for di, g := range c.dest[m] {
			if isGap(m, di) {
				outdeg[S[g][len(S[g])-1]]++
				nEdges++
			}
		}
	}
	// CSR adjacency. Labels: g for a sequence edge, -(g+1) for a gap edge.
	start := make([]int32, M+1)
	for m := 0; m < M; m++ {
		start[m+1] = start[m] + outdeg[m]
	}
	adj := make([]int32, nEdges)
	lab := make([]int32, nEdges)
	pos := outdeg[:M]
	copy(pos, start[:M])
	indeg := make([]int32, M)
	for g := 0; g < c.G; g++ {
		for i := 0; i+1 < len(S[g]); i++ {
			u, v := S[g][i], S[g][i+1]
			adj[pos[u]], lab[pos[u]] = v, int32(g)
			pos[u]++
			indeg[v]++
		}
	}
	for m := int32(0); int(m) < M; m++ {
		for di, g := range c.dest[m] {
			if isGap(m, di) {
				u := S[g][len(S[g])-1]
				adj[pos[u]], lab[pos[u]] = m, int32(-(g + 1))
				pos[u]++
				indeg[m]++
			}
		}
	}
	gr := &digraph{start: start, adj: adj, lab: lab}

	// Kahn's algorithm.
	queue := make([]int32, 0, M)
	for m := int32(0); int(m) < M; m++ {
		if indeg[m] == 0 {
			queue = append(queue, m)
		}
	}
	for qi := 0; qi < len(queue); qi++ {
		u := queue[qi]
		for e := start[u]; e < start[u+1]; e++ {
			v := adj[e]
			indeg[v]--
			if indeg[v] == 0 {
				queue = append(queue, v)
			}
		}
	}
	if len(queue) == M {
		return
	}
	removed := make([]bool, M)
	for _, m := range queue {
		removed[m] = true
	}
	comps := gr.sccs(removed)
	budget := 4*nEdges + 1<<22
	for _, comp := range comps {
		if !c.want() {
			c.count(KindOrder)
			continue
		}
		cyc, labs, exact := gr.shortestCycle(comp, &budget)
		var sb strings.Builder
		fmt.Fprintf(&sb, "cycle of %d messages in the delivery order (component of %d", len(cyc), len(comp))
		if !exact {
			sb.WriteString("; search truncated, a shorter cycle may exist")
		}
		sb.WriteString("): ")
		const keep = 20 // edges shown at each end of a long cycle
		for i, m := range cyc {
			if len(cyc) > 2*keep+1 && i == keep {
				fmt.Fprintf(&sb, "... (%d more) ... ", len(cyc)-2*keep)
			}
			if len(cyc) > 2*keep+1 && i >= keep && i < len(cyc)-keep {
				continue
			}
			sb.WriteString(c.name[m])
			sb.WriteString(" <g")
			l := labs[i]
			if l >= 0 {
				sb.WriteString(strconv.Itoa(int(l)))
			} else {
				sb.WriteString(strconv.Itoa(int(-l - 1)))
				sb.WriteString("(gap)")
			}
			sb.WriteByte(' ')
		}
		sb.WriteString(c.name[cyc[0]])
		c.add(KindOrder, sb.String())
	}
}

// digraph is a directed graph in CSR form: the out-edges of u are
// adj[start[u]:start[u+1]], with labels lab[...].
type digraph struct {
	start []int32
	adj   []int32
	lab   []int32

	comp  []int32 // per node: SCC id, -1 if removed/trivial
	dist  []int32 // BFS scratch
	stamp []int32 // BFS scratch: BFS id that set dist
	par   []int32 // BFS scratch: edge index used to reach the node
	bfsID int32   // BFS scratch: id of the current BFS
}

// sccs returns the non-trivial strongly connected components among the
// nodes not removed (iterative Tarjan). Since the graph has no self-loops,
// non-trivial means at least two nodes. Components are returned in order of
// their smallest node.
func (gr *digraph) sccs(removed []bool) [][]int32 {
	n := len(removed)
	const unvisited = -1
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = unvisited
	}
	gr.comp = make([]int32, n)
	for i := range gr.comp {
		gr.comp[i] = -1
	}
	var stack []int32
	type frame struct {
		u int32
		e int32 // next edge to look at
	}
	var call []frame
	next := int32(0)
	var comps [][]int32
	for root := int32(0); int(root) < n; root++ {
		if removed[root] || index[root] != unvisited {
			continue
		}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		call = append(call, frame{root, gr.start[root]})
		for len(call) > 0 {
			f := &call[len(call)-1]
			u := f.u
			if f.e < gr.start[u+1] {
				v := gr.adj[f.e]
				f.e++
				if removed[v] {
					continue
				}
				if index[v] == unvisited {
					index[v], low[v] = next, next
					next++
					stack = append(stack, v)
					onStack[v] = true
					call = append(call, frame{v, gr.start[v]})
				} else if onStack[v] && index[v] < low[u] {
					low[u] = index[v]
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				if p := call[len(call)-1].u; low[u] < low[p] {
					low[p] = low[u]
				}
			}
			if low[u] == index[u] {
				k := len(stack) - 1
				for stack[k] != u {
					k--
				}
				members := stack[k:]
				for _, v := range members {
					onStack[v] = false
				}
				if len(members) > 1 {
					comp := append([]int32(nil), members...)
					id := int32(len(comps))
					for _, v := range comp {
						gr.comp[v] = id
					}
					comps = append(comps, comp)
				}
				stack = stack[:k]
			}
		}
	}
	for _, comp := range comps {
		sortInt32(comp)
	}
	sort.Slice(comps, func(i, j int) bool { return comps[i][0] < comps[j][0] })
	for id, comp := range comps {
		for _, v := range comp {
			gr.comp[v] = int32(id)
		}
	}
	return comps
}

func sortInt32(s []int32) { sort.Slice(s, func(i, j int) bool { return s[i] < s[j] }) }

// shortestCycle returns a shortest cycle within the component comp (which
// must be a non-trivial SCC) as its nodes and the labels of the edges
// cyc[i]→cyc[i+1] (the last edge closing the cycle). It runs a BFS from
// every node of the component, pruned by the best length found so far, and
// spends at most *budget edge visits beyond the first BFS; exact is false if
// the budget ran out before the search was complete.
func (gr *digraph) shortestCycle(comp []int32, budget *int) (cyc, labs []int32, exact bool) {
	n := len(gr.comp)
	if gr.dist == nil {
		gr.dist = make([]int32, n)
		gr.stamp = make([]int32, n)
		gr.par = make([]int32, n)
		for i := range gr.stamp {
			gr.stamp[i] = -1
		}
	}
	id := gr.comp[comp[0]]
	best := int32(len(comp) + 1) // longer than any simple cycle in comp
	// A component with as many internal edges as nodes is a single simple
	// cycle: the first BFS finds it and it is the shortest.
	internal := 0
	for _, u := range comp {
		for e := gr.start[u]; e < gr.start[u+1]; e++ {
			if gr.comp[gr.adj[e]] == id {
				internal++
			}
		}
	}
	single := internal == len(comp)
	bestSrc, bestClose := int32(-1), int32(-1)
	var bestPar []int32 // path reconstruction for the best cycle
	exact = true
	queue := make([]int32, 0, len(comp))
	for k, s := range comp {
		if k > 0 && *budget <= 0 {
			exact = false
			break
		}
		if best == 2 || (k > 0 && single) { // no cycle is shorter than 2 (no self-loops)
			break
		}
		gr.bfsID++
		bfsID := gr.bfsID
		queue = append(queue[:0], s)
		gr.stamp[s], gr.dist[s], gr.par[s] = bfsID, 0, -1
		found := false
		for qi := 0; qi < len(queue) && !found; qi++ {
			u := queue[qi]
			if gr.dist[u]+1 >= best {
				break
			}
			for e := gr.start[u]; e < gr.start[u+1]; e++ {
				*budget--
				v := gr.adj[e]
				if gr.comp[v] != id {
					continue
				}
				if v == s {
					best = gr.dist[u] + 1
					bestSrc, bestClose = s, e
					// Record the path s → ... → u.
					bestPar = bestPar[:0]
					for x := u; x != s; {
						pe := gr.par[x]
						bestPar = append(bestPar, pe)
						x = gr.src(pe)
					}
					found = true
					break
				}
				if gr.stamp[v] != bfsID {
					gr.stamp[v], gr.dist[v], gr.par[v] = bfsID, gr.dist[u]+1, e
					queue = append(queue, v)
				}
			}
		}
	}
	// bestPar holds the edges from u back to s, reversed.
	cyc = append(cyc, bestSrc)
	for i := len(bestPar) - 1; i >= 0; i-- {
		e := bestPar[i]
		labs = append(labs, gr.lab[e])
		cyc = append(cyc, gr.adj[e])
	}
	labs = append(labs, gr.lab[bestClose])
	return cyc, labs, exact
}

// src returns the source node of edge e (binary search in start).
func (gr *digraph) src(e int32) int32 {
	lo, hi := 0, len(gr.start)-1 // start[lo] <= e < start[hi]
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if gr.start[mid] <= e {
			lo = mid
		} else {
			hi = mid
		}
	}
	return int32(lo)
}
