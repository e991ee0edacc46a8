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
		existing                 bool // initial_state = "existing"
	}{
		{"absent", filepath.Join(root, "a", "b"), "absent: the agent creates it under " + root, "", false},
		{"empty", mk("empty", nil, false), "empty: the agent starts a new member", "", false},
		{"own state", mk("own", mine, true), `holds the state of member 3 of cluster "c" (wbcast, incarnation 2); initial_state is "new": set "existing"`, "", false},
		{"own state, existing", filepath.Join(root, "own"), `holds the state of member 3 of cluster "c" (wbcast, incarnation 2)`, "", true},
		{"wal only", mk("walonly", nil, true), "without IDENTITY", "", false},
		{"absent, existing", filepath.Join(root, "a", "c"), "", `is absent and initial_state is "existing"`, true},
		{"empty, existing", filepath.Join(root, "empty"), "", `is empty and initial_state is "existing"`, true},
		{"other member", mk("other", &identity{Format: identityFormat, Cluster: "c", Member: 4, Protocol: ProtocolWbCast, Incarnation: 1}, true), "", "not of member 3", false},
		{"other cluster", mk("othercl", &identity{Format: identityFormat, Cluster: "d", Member: 3, Protocol: ProtocolWbCast, Incarnation: 1}, true), "", `not to cluster "c"`, false},
		{"other protocol", mk("otherpr", &identity{Format: identityFormat, Cluster: "c", Member: 3, Protocol: ProtocolFTSkeen, Incarnation: 1}, true), "", "ftskeen replica", false},
		{"identity without wal", mk("lost", mine, false), "", "no write-ahead log", false},
		{"a file", file, "", "not a directory", false},
		{"under a file", filepath.Join(file, "d"), "", "not a directory", false},
	} {
		initial := InitialNew
		if tc.existing {
			initial = InitialExisting
		}
		got, err := InspectDataDir(tc.dir, "c", 3, ProtocolWbCast, initial)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %q, %v; want an error with %q", tc.name, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !strings.Contains(got, tc.want)):
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		case tc.existing && strings.Contains(got, "set \"existing\""):
			t.Errorf("%s: %q: the hint to set initial_state is for \"new\" only", tc.name, got)
		}
	}
	// The check leaves nothing behind.
	if ents, _ := os.ReadDir(filepath.Join(root, "empty")); len(ents) != 0 {
		t.Errorf("InspectDataDir left %v in an empty directory", ents)
	}
}
