package node

// Remembered peers: bootstrap without seeds (issue #13 item 4). The node
// keeps the peers gossip judged up in DataDir/gossip-peers, and on
// restart the gossip core contacts those first, then the seeds
// (membership.Config.Bootstrap). A node whose seeds are down, or whose
// configuration lost them, still finds the cluster it was part of.
//
// The file is small text, one peer a line ("id address"), rewritten
// atomically (writeFileAtomic) when the set of live peers changed, at
// most once per adviceEvery, and never with an empty set: a node cut off
// from everyone keeps the last peers it saw, which is exactly when it
// needs them. It is bounded (maxRememberedPeers lines); a file that does
// not parse is ignored with a warning (the seeds still work), never a
// reason not to start.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

const (
	// peersFile is the file, in DataDir, of the remembered peers.
	peersFile = "gossip-peers"
	// maxRememberedPeers bounds the file: a restarting node needs one
	// live peer, and a few hundred covers any group layout weft runs.
	maxRememberedPeers = 256
	// maxPeerLine bounds a line (an id and a host:port).
	maxPeerLine = 300
	peersHeader = "# weft gossip peers: id address, one a line; contacted first on restart (written by the node)"
)

// rememberedPeer is one line of the file.
type rememberedPeer struct {
	ID   wire.ProcID
	Addr string
}

// peerMemory is the gossiper's view of the file.
type peerMemory struct {
	path  string
	saved []wire.ProcID // the ids last written (or read), sorted
}

// openPeers reads the remembered peers and returns those still replicas
// of the topology, in the file's order.
func (gs *gossiper) openPeers() []wire.ProcID {
	n := gs.n
	gs.adv.peers.path = filepath.Join(n.cfg.DataDir, peersFile)
	ps, err := readPeers(n.cfg.FS, gs.adv.peers.path)
	if err != nil {
		n.log.Warn("gossip: ignoring the remembered peers", "err", err)
		return nil
	}
	var ids []wire.ProcID
	for _, p := range ps {
		if _, ok := n.cfg.Topology.GroupOf(p.ID); !ok || p.ID == n.cfg.ID {
			continue // the topology changed: not a peer any more
		}
		if cur := n.cfg.Peers[p.ID]; cur != p.Addr && p.Addr != "" {
			n.log.Info("gossip: a remembered peer's address changed; using the configured one", "peer", uint32(p.ID), "was", p.Addr, "now", cur)
		}
		ids = append(ids, p.ID)
	}
	gs.adv.peers.saved = slices.Sorted(slices.Values(ids))
	if len(ids) > 0 {
		n.log.Info("gossip: contacting the remembered peers first, then the seeds", "peers", ids)
	}
	return ids
}

// rememberPeers rewrites the file if the live peers changed.
func (gs *gossiper) rememberPeers() {
	live := gs.g.LiveMembers() // sorted
	if len(live) > maxRememberedPeers {
		live = live[:maxRememberedPeers]
	}
	m := &gs.adv.peers
	if len(live) == 0 || slices.Equal(live, m.saved) {
		return
	}
	ps := make([]rememberedPeer, len(live))
	for i, p := range live {
		ps[i] = rememberedPeer{ID: p, Addr: gs.n.cfg.Peers[p]}
	}
	if err := writeFileAtomic(gs.n.cfg.FS, m.path, encodePeers(ps)); err != nil {
		// Not fatal: the seeds remain. Tried again at the next change.
		gs.n.log.Warn("gossip: cannot remember the live peers", "err", err)
		return
	}
	m.saved = live
}

func encodePeers(ps []rememberedPeer) []byte {
	var b strings.Builder
	b.WriteString(peersHeader + "\n")
	for _, p := range ps {
		addr := p.Addr
		if addr == "" {
			addr = "-"
		}
		fmt.Fprintf(&b, "%d %s\n", p.ID, addr)
	}
	return []byte(b.String())
}

// readPeers reads the file (none: no peers).
func readPeers(fsys vfs.FS, path string) ([]rememberedPeer, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Header, lines and one byte more: a longer file is not ours.
	limit := int64(len(peersHeader) + 1 + maxRememberedPeers*(maxPeerLine+1) + 1)
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) == limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit-1)
	}
	return parsePeers(path, b)
}

// parsePeers parses the file's content: comments, then "id address"
// lines with distinct ids.
func parsePeers(path string, b []byte) ([]rememberedPeer, error) {
	var ps []rememberedPeer
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 0, 1024), maxPeerLine+1)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		bad := func(why string) error { return fmt.Errorf("%s:%d: %s: %q", path, line, why, l) }
		if len(l) > maxPeerLine {
			return nil, bad("line too long")
		}
		idf, addr, ok := strings.Cut(l, " ")
		if !ok || strings.ContainsAny(addr, " \t") || addr == "" {
			return nil, bad(`want "id address"`)
		}
		id, err := strconv.ParseUint(idf, 10, 32)
		if err != nil {
			return nil, bad("bad id")
		}
		if slices.ContainsFunc(ps, func(p rememberedPeer) bool { return p.ID == wire.ProcID(id) }) {
			return nil, bad("duplicate id")
		}
		if len(ps) == maxRememberedPeers {
			return nil, bad(fmt.Sprintf("more than %d peers", maxRememberedPeers))
		}
		if addr == "-" {
			addr = ""
		}
		ps = append(ps, rememberedPeer{ID: wire.ProcID(id), Addr: addr})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ps, nil
}
