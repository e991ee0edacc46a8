package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
)

// TestInspectDataDir: weft config check's verdicts on a data directory
// are the agent's (openDataDir): its own member's state passes, another
// cluster's, member's or protocol's and an identity without its WAL are
// refused, and a path the agent could not create is an error.
func TestInspectDataDir(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, id *identity, wal bool) string {
		t.Helper()
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if id != nil {
			if err := writeIdentity(vfs.OS(), dir, id); err != nil {
				t.Fatal(err)
			}
		}
		if wal {
			if err := os.Mkdir(filepath.Join(dir, walDir), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	mine := &identity{Format: identityFormat, Cluster: "c", Member: 3, Protocol: ProtocolWbCast, Incarnation: 2}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, want, wantErr string
	}{
		{"absent", filepath.Join(root, "a", "b"), "absent: the agent creates it under " + root, ""},
		{"empty", mk("empty", nil, false), "empty: the agent starts a new member", ""},
		{"own state", mk("own", mine, true), `holds the state of member 3 of cluster "c" (wbcast, incarnation 2)`, ""},
		{"wal only", mk("walonly", nil, true), "without IDENTITY", ""},
		{"other member", mk("other", &identity{Format: identityFormat, Cluster: "c", Member: 4, Protocol: ProtocolWbCast, Incarnation: 1}, true), "", "not of member 3"},
		{"other cluster", mk("othercl", &identity{Format: identityFormat, Cluster: "d", Member: 3, Protocol: ProtocolWbCast, Incarnation: 1}, true), "", `not to cluster "c"`},
		{"other protocol", mk("otherpr", &identity{Format: identityFormat, Cluster: "c", Member: 3, Protocol: ProtocolFTSkeen, Incarnation: 1}, true), "", "ftskeen replica"},
		{"identity without wal", mk("lost", mine, false), "", "no write-ahead log"},
		{"a file", file, "", "not a directory"},
		{"under a file", filepath.Join(file, "d"), "", "not a directory"},
	} {
		got, err := InspectDataDir(tc.dir, "c", 3, ProtocolWbCast)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %q, %v; want an error with %q", tc.name, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !strings.Contains(got, tc.want)):
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	// The check leaves nothing behind.
	if ents, _ := os.ReadDir(filepath.Join(root, "empty")); len(ents) != 0 {
		t.Errorf("InspectDataDir left %v in an empty directory", ents)
	}
}
