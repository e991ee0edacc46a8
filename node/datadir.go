package node

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/weft-dev/weft/storage/vfs"
)

// The data directory (Config.DataDir) holds:
//
//	LOCK                 flock(2)ed by the running agent; holds its pid (datadir_lock.go)
//	IDENTITY             cluster, member id, protocol, incarnation; checksummed (datadir_identity.go)
//	wal/                 the write-ahead log and its snapshots: every promise, ack and delivery (storage/wal)
//	deliveries.cursor    the last delivery handed to the deliveries log (dlog.go)
//	gossip-generation    the last gossip generation (gossip.go)
//
// Every file but LOCK goes through Config.FS; the lock is flock(2) on the
// real filesystem, taken only when Config.FS is vfs.OS() (the in-memory
// and error-injecting filesystems of tests have no second process to
// exclude). The lock is taken before anything else in the directory is opened, and
// the identity is checked before the WAL is: an agent runs only on its own
// member's state. A member's state is its promises and acks (WbCast's
// safety rests on them, docs/disk-loss.md), so a member that lost it must
// not come back as a new one; openDataDir tells the two apart.

// Values of Config.InitialState.
const (
	// InitialNew: an empty data directory is a new member of a new
	// cluster, unless a peer's gossip has seen this member (the bootstrap
	// probe, Config.BootstrapProbe).
	InitialNew = "new"
	// InitialExisting: the cluster exists; an empty data directory is a
	// lost one and is refused (unless Config.Rejoin).
	InitialExisting = "existing"
)

// DefaultBootstrapProbe is how long the agent's bootstrap probe waits for
// its peers' answers (config key bootstrap_probe).
const DefaultBootstrapProbe = time.Second

// walDir is the WAL's directory in the data directory.
const walDir = "wal"

// startMode is how the node starts from its data directory.
type startMode int

const (
	// startRestore: replay the member's own WAL (empty for a member that
	// never persisted anything yet).
	startRestore startMode = iota
	// startNew: bootstrap a new member (no WAL, no identity).
	startNew
	// startAmnesiac: the member's state is lost; it runs inert
	// (protocolSpec.amnesiac).
	startAmnesiac
)

// openDataDir locks the data directory, reads and checks its identity, and
// decides how the node starts:
//
//   - IDENTITY of another cluster, member or protocol: refused.
//   - IDENTITY and wal/: the member's own state (startRestore). With
//     Config.Rejoin: refused, a rejoin is for a lost directory.
//   - IDENTITY marked amnesiac: startAmnesiac again (the store stays empty
//     for the life of the directory; wbcast.RestoreAmnesiac's contract).
//   - IDENTITY without wal/: the log was removed, the promises are lost:
//     refused, or startAmnesiac with Config.Rejoin.
//   - wal/ without IDENTITY: a directory from before identities, or a crash
//     during bootstrap (the WAL is created before the identity): adopted,
//     the identity is written (pending).
//   - neither (empty): with Config.Rejoin, startAmnesiac; with
//     InitialState "existing", refused; otherwise the peers are asked
//     (probePeers) and if any has seen this member run, refused; else
//     startNew, the identity written once the WAL exists (pending).
//
// The probe cannot tell a lost directory from a new one when no peer that
// saw the member is up (a whole-cluster restart after a disk loss, or
// gossip disabled): InitialState "existing" closes that gap for operators
// who set it once the cluster is running. A rejoining member's identity is
// written before its WAL exists, so a crash half-way cannot leave a WAL
// without an identity that would be adopted as a healthy member.
func (n *Node) openDataDir() (mode startMode, pending *identity, err error) {
	cfg := &n.cfg
	fsys := cfg.FS
	if fsys == vfs.OS() {
		lock, exclusive, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return 0, nil, err
		}
		n.lock = lock
		if !exclusive {
			n.log.Warn("data_dir lock: flock(2) is not available on this platform; nothing stops a second agent on this directory")
		}
	} else if err := fsys.MkdirAll(cfg.DataDir, 0o755); err != nil {
		// Another filesystem (tests' in-memory and error-injecting
		// ones) has no flock: no lock.
		return 0, nil, fmt.Errorf("node: data_dir: %w", err)
	}
	id, err := readIdentity(fsys, cfg.DataDir)
	if err != nil {
		return 0, nil, err
	}
	hasWAL := true
	if _, err := fsys.Stat(filepath.Join(cfg.DataDir, walDir)); errors.Is(err, fs.ErrNotExist) {
		hasWAL = false
	} else if err != nil {
		return 0, nil, fmt.Errorf("node: %w", err)
	}
	want := &identity{Format: identityFormat, Cluster: cfg.Cluster, Member: cfg.ID, Protocol: n.proto.name, Incarnation: 1}
	dir := cfg.DataDir
	switch {
	case id != nil:
		if err := id.check(dir, want); err != nil {
			return 0, nil, err
		}
		n.ident = *id
		switch {
		case id.Amnesiac:
			return startAmnesiac, nil, nil
		case hasWAL && cfg.Rejoin:
			return 0, nil, fmt.Errorf("node: --rejoin: data_dir %s holds the state of %s; a rejoin is only for a member whose data directory was lost: restart it without --rejoin", dir, id)
		case hasWAL:
			return startRestore, nil, nil
		case cfg.Rejoin:
			return n.rejoin(id.Incarnation + 1)
		}
		return 0, nil, fmt.Errorf("node: data_dir %s holds the identity of %s but no write-ahead log (%s/ was removed?): the member's promises are lost and it must not start as if new. %s",
			dir, id, walDir, n.proto.lostAdvice())
	case hasWAL:
		if cfg.Rejoin {
			return 0, nil, fmt.Errorf("node: --rejoin: data_dir %s holds a write-ahead log (member state); a rejoin is only for a member whose data directory was lost: restart it without --rejoin", dir)
		}
		n.ident = *want
		n.log.Info("data_dir has a write-ahead log but no identity (written before identities, or a crash during bootstrap): recording it", "identity", want.String())
		return startRestore, want, nil
	case cfg.Rejoin:
		return n.rejoin(2)
	case cfg.InitialState == InitialExisting:
		return 0, nil, fmt.Errorf("node: data_dir %s is empty and initial_state is %q: member %d of cluster %q ran before, so its state is lost (or data_dir is wrong); it must not start as if new. %s",
			dir, InitialExisting, cfg.ID, cfg.Cluster, n.proto.lostAdvice())
	}
	if cfg.BootstrapProbe > 0 && cfg.Listener != nil {
		n.log.Warn("bootstrap probe skipped: the node was given a Listener (the probe listens on Config.Listen)")
	} else if cfg.BootstrapProbe > 0 {
		res, err := probePeers(cfg, cfg.BootstrapProbe)
		if err != nil {
			return 0, nil, fmt.Errorf("node: bootstrap probe: %w", err)
		}
		if len(res.knownBy) > 0 {
			return 0, nil, fmt.Errorf("node: data_dir %s is empty, but member %d already ran in cluster %q: the gossip of peers %v has seen it. A member that lost its data directory must not start as if new (it would forget its promises and acks). %s",
				dir, cfg.ID, cfg.Cluster, res.knownBy, n.proto.lostAdvice())
		}
		n.log.Info("bootstrap probe: no peer has seen this member; starting as a new member", "asked", res.asked, "answered", res.answered, "waited_at_most", cfg.BootstrapProbe)
	}
	n.ident = *want
	return startNew, want, nil
}

// rejoin records that the member lost its state and starts it inert.
func (n *Node) rejoin(incarnation uint64) (startMode, *identity, error) {
	id := identity{Format: identityFormat, Cluster: n.cfg.Cluster, Member: n.cfg.ID, Protocol: n.proto.name,
		Incarnation: incarnation, Amnesiac: true}
	if err := writeIdentity(n.cfg.FS, n.cfg.DataDir, &id); err != nil {
		return 0, nil, err
	}
	n.ident = id
	return startAmnesiac, nil, nil
}

// check refuses an identity that is not the one this agent would write.
func (id *identity) check(dir string, want *identity) error {
	switch {
	case id.Cluster != want.Cluster:
		return fmt.Errorf("node: data_dir %s belongs to cluster %q (%s), not to cluster %q: is data_dir (or cluster) right?", dir, id.Cluster, id, want.Cluster)
	case id.Member != want.Member:
		return fmt.Errorf("node: data_dir %s holds the state of %s, not of member %d: is data_dir (or id) right?", dir, id, want.Member)
	case id.Protocol != want.Protocol:
		return fmt.Errorf("node: data_dir %s holds the state of %s, a %s replica; this agent runs %s", dir, id, id.Protocol, want.Protocol)
	}
	return nil
}

// lostAdvice is what an operator may do about a member whose data
// directory was lost.
func (ps *protocolSpec) lostAdvice() string {
	if ps.amnesiac != nil {
		return "If its disk was lost, start it with --rejoin: it comes back inert (a non-voting amnesiac, docs/disk-loss.md); if data_dir is wrong, fix it."
	}
	return fmt.Sprintf("%s has no disk-loss path (no --rejoin): if data_dir is wrong, fix it; if the disk was lost, the member stays down (docs/disk-loss.md).", ps.name)
}
