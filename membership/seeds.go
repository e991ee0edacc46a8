package membership

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// Seed-list consistency (the seed's advice: keep the seed list small and
// identical on every node). A driver publishes SeedDigest of its
// configured list as KeySeedDigest; every node then sees the digests of
// the live members and SeedMajority tells which lists differ from the
// majority's. A differing list is an operator's mistake that gossip
// survives (any seed that answers is enough to join), but it splits a
// cluster in two when the lists are disjoint and both halves restart,
// which is why it is reported, not refused.

// SeedDigest returns the digest of a configured seed list as gossiped
// under KeySeedDigest: "<count>:<16 hex digits>", the count and FNV-1a 64
// of the sorted, de-duplicated ids. The list is taken as configured (the
// node's own id included if it is there), so nodes with the same
// configuration publish the same digest.
func SeedDigest(seeds []wire.ProcID) string {
	ids := slices.Clone(seeds)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	h := fnv.New64a()
	var b [4]byte
	for _, id := range ids {
		binary.BigEndian.PutUint32(b[:], uint32(id))
		h.Write(b[:])
	}
	return fmt.Sprintf("%d:%016x", len(ids), h.Sum64())
}

// SeedVote is one member's published seed digest.
type SeedVote struct {
	Node   wire.ProcID
	Digest string
}

// SeedVerdict is the outcome of SeedMajority.
type SeedVerdict struct {
	// Voters is the number of votes counted.
	Voters int
	// Majority is the digest more than half of the voters publish; ""
	// when none has a majority.
	Majority string
	// Differ are the voters whose digest is not the majority's, sorted;
	// with no majority and more than one digest, every voter.
	Differ []wire.ProcID
}

// Mismatch reports whether node's list is flagged.
func (v *SeedVerdict) Mismatch(node wire.ProcID) bool {
	_, ok := slices.BinarySearch(v.Differ, node)
	return ok
}

// SeedMajority judges the seed lists of the votes (one per node; empty
// digests do not vote). A strict majority is required: with two digests
// held by two voters each, neither list is the reference and all four
// are flagged, since nothing tells which one the operator meant.
func SeedMajority(votes []SeedVote) SeedVerdict {
	count := map[string]int{}
	var v SeedVerdict
	for _, vt := range votes {
		if vt.Digest != "" {
			count[vt.Digest]++
			v.Voters++
		}
	}
	for d, c := range count {
		if 2*c > v.Voters {
			v.Majority = d
		}
	}
	if len(count) <= 1 {
		return v
	}
	for _, vt := range votes {
		if vt.Digest != "" && vt.Digest != v.Majority {
			v.Differ = append(v.Differ, vt.Node)
		}
	}
	slices.Sort(v.Differ)
	return v
}

// SeedVotes returns the published seed digests of this node and of the
// members judged up, sorted by node: the electorate of SeedMajority.
// Members down or departed do not vote (a dead node's stale list must
// not outvote the live ones), nor members that publish no digest.
func (n *Node) SeedVotes() []SeedVote {
	var votes []SeedVote
	for i := range n.eps {
		e := &n.eps[i]
		if e.id != n.id && !e.alive() {
			continue
		}
		app := n.appsOf(e)
		if j, ok := slices.BinarySearchFunc(app, KeySeedDigest, func(a AppState, k Key) int { return int(a.Key) - int(k) }); ok {
			votes = append(votes, SeedVote{Node: e.id, Digest: app[j].Value})
		}
	}
	return votes
}

// SeedLimit is the most seeds weft considers reasonable for a cluster of
// groups replica groups: max(3, groups). Seeds are where new and
// restarted nodes meet, and every node gossips to a seed more often than
// to other peers, so a long list adds traffic on more nodes without
// making joins more reliable; Cassandra's advice is 2-3 per data centre.
// One per group (weft's default list) is always within it, and 3 lets a
// small cluster lose a seed or two.
func SeedLimit(groups int) int { return max(3, groups) }
