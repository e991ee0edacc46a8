package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

// identityFile is the name, in the data directory, of the member's
// identity.
const identityFile = "IDENTITY"

// identityFormat is the version of the identity file's JSON.
const identityFormat = 1

// identity is what a data directory says about the member whose promises
// it holds (issue #11 item 3). It is written once at bootstrap (and again
// by a rejoin) and checked at every start, so that an agent never runs on
// another member's or another cluster's state.
//
// The cluster is identified by its name alone. A random cluster id would
// have to be drawn by one member and learnt by every other before it
// writes its own identity, so a new member could not bootstrap without
// reaching that one (the demo starts nine agents at once, in any order);
// an id derived from the configuration (etcd hashes the initial
// membership) would change whenever a member is replaced. The name is
// already what the transport's handshake compares, so two clusters that
// share a name share a network identity too: operators give each cluster
// its own name (config key "cluster").
type identity struct {
	Format   int         `json:"format"`
	Cluster  string      `json:"cluster"`
	Member   wire.ProcID `json:"member"`
	Protocol string      `json:"protocol"`
	// Incarnation counts the data directories this member has had, as far
	// as this one knows: 1 at bootstrap, one more at each rejoin after a
	// lost directory (which knows the lost one's count only if its
	// IDENTITY survived; otherwise it records 2).
	Incarnation uint64 `json:"incarnation"`
	// Amnesiac: the member lost its durable state and was started with
	// Config.Rejoin in this directory. It restarts through
	// wbcast.RestoreAmnesiac for as long as the directory lives: inert
	// until its log holds an adopted ballot's state (it rejoined), an
	// ordinary restart from then on.
	Amnesiac bool `json:"amnesiac,omitempty"`
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// encode renders the identity as the file holds it: one JSON line, then
// "crc32c <hex>" over that line's bytes (the file stays readable with cat).
func (id *identity) encode() []byte {
	js, _ := json.Marshal(id) // plain fields: cannot fail
	return fmt.Appendf(js, "\ncrc32c %08x\n", crc32.Checksum(js, crc32c))
}

// decodeIdentity parses an identity file. A checksum mismatch or a
// truncated file is an error: the node refuses to guess whose directory it
// is.
func decodeIdentity(b []byte) (*identity, error) {
	js, sum, ok := bytes.Cut(b, []byte("\ncrc32c "))
	if !ok {
		return nil, errors.New("no checksum line (truncated?)")
	}
	want, err := strconv.ParseUint(strings.TrimSpace(string(sum)), 16, 32)
	if err != nil {
		return nil, fmt.Errorf("bad checksum line %q", bytes.TrimSpace(sum))
	}
	if got := crc32.Checksum(js, crc32c); got != uint32(want) {
		return nil, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	var id identity
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&id); err != nil {
		return nil, err
	}
	if id.Format != identityFormat {
		return nil, fmt.Errorf("format %d, this agent reads %d", id.Format, identityFormat)
	}
	if id.Cluster == "" || id.Protocol == "" || id.Incarnation == 0 {
		return nil, errors.New("cluster, protocol or incarnation missing")
	}
	return &id, nil
}

func (id *identity) String() string {
	s := fmt.Sprintf("member %d of cluster %q (%s, incarnation %d", id.Member, id.Cluster, id.Protocol, id.Incarnation)
	if id.Amnesiac {
		s += ", amnesiac"
	}
	return s + ")"
}

// readIdentity reads dir's identity; nil, nil if there is none.
func readIdentity(fsys vfs.FS, dir string) (*identity, error) {
	path := filepath.Join(dir, identityFile)
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("node: %s: %w", path, err)
	}
	id, err := decodeIdentity(b)
	if err != nil {
		return nil, fmt.Errorf("node: %s is damaged: %v; refusing to guess whose state data_dir holds", path, err)
	}
	return id, nil
}

// writeIdentity stores dir's identity atomically and durably: a temporary
// file, fsync, rename over IDENTITY, fsync of the directory. A crash
// leaves the old file or the new one, never a mix.
func writeIdentity(fsys vfs.FS, dir string, id *identity) error {
	return writeFileAtomic(fsys, filepath.Join(dir, identityFile), id.encode())
}

// writeFileAtomic replaces path with data: write a temporary file, sync
// it, rename it over path, sync the directory.
func writeFileAtomic(fsys vfs.FS, path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = vfs.SyncDir(fsys, filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("node: writing %s: %w", path, err)
	}
	return nil
}
