package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

// InspectDataDir reports, without changing anything (but a probe file,
// created and removed at once), what an agent
// configured as member of cluster running protocol would find in dir,
// and returns the error the agent would stop with for a directory that
// is not this member's (another cluster, member or protocol, a damaged
// IDENTITY, an IDENTITY without its write-ahead log) or that it could not
// create. It is `weft config check`'s look at data_dir before the agent
// runs: the lock, the bootstrap probe and initial_state's verdict on an
// empty directory are left to the agent, which knows whether peers saw
// this member. Reading a directory a running agent holds is safe: only
// IDENTITY is read, and it is replaced atomically.
func InspectDataDir(dir, cluster string, member wire.ProcID, protocol, initialState string) (string, error) {
	// An empty directory with initial_state "existing" is a lost one: the
	// agent refuses it (openDataDir), naming the way out.
	lost := func(what string) error {
		return fmt.Errorf("data_dir %s is %s and initial_state is %q: member %d of cluster %q ran before, so its state is lost (or data_dir is wrong); the agent refuses it (weft agent --rejoin: docs/disk-loss.md)",
			dir, what, InitialExisting, member, cluster)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		anc, err := creatableFrom(dir)
		if err != nil {
			return "", err
		}
		if initialState == InitialExisting {
			return "", lost("absent")
		}
		return fmt.Sprintf("absent: the agent creates it under %s and starts a new member (see initial_state)", anc), nil
	case err != nil:
		return "", fmt.Errorf("data_dir %s: %w", dir, err)
	case !fi.IsDir():
		return "", fmt.Errorf("data_dir %s is not a directory", dir)
	}
	if err := writable(dir); err != nil {
		return "", err
	}
	id, err := readIdentity(vfs.OS(), dir)
	if err != nil {
		return "", err
	}
	_, werr := os.Stat(filepath.Join(dir, walDir))
	hasWAL := werr == nil
	want := &identity{Cluster: cluster, Member: member, Protocol: protocol}
	// Once a member has run, initial_state "new" only weakens the guard
	// against a lost directory (the bootstrap probe needs a peer up).
	hint := ""
	if initialState != InitialExisting {
		hint = fmt.Sprintf("; initial_state is %q: set %q now that this member has run (an empty data_dir is then always refused)", initialState, InitialExisting)
	}
	switch {
	case id != nil:
		if err := id.check(dir, want); err != nil {
			return "", err
		}
		if !hasWAL && !id.Amnesiac {
			return "", fmt.Errorf("data_dir %s holds the identity of %s but no write-ahead log (%s/ was removed?): the agent refuses to start it as if new (docs/disk-loss.md)", dir, id, walDir)
		}
		return "holds the state of " + id.String() + hint, nil
	case hasWAL:
		return "holds a write-ahead log without IDENTITY (from before identities): the agent adopts it as this member's" + hint, nil
	case initialState == InitialExisting:
		return "", lost("empty")
	}
	return "empty: the agent starts a new member (see initial_state)", nil
}

// creatableFrom returns the nearest existing ancestor of dir, which must
// be a directory this process may write in (the agent creates dir with
// MkdirAll).
func creatableFrom(dir string) (string, error) {
	for p := filepath.Dir(filepath.Clean(dir)); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) && p != filepath.Dir(p) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("data_dir %s: %w", dir, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("data_dir %s: %s is not a directory", dir, p)
		}
		return p, writable(p)
	}
}

// writable checks that files can be created in dir the way the agent will
// create them: by creating one (and removing it). access(2) would answer
// yes to root on a read-only filesystem.
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".weft-config-check-*")
	if err != nil {
		return fmt.Errorf("data_dir: cannot create files in %s: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
