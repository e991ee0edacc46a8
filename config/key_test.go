package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestClusterKeyFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "key")
	if err := os.WriteFile(good, []byte("  0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("tooshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse("cluster_key_file = "+strconv.Quote(good)+"\n"+minimal, Agent)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.ClusterKey()) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("key %q", c.ClusterKey())
	}
	if back, err := Parse(c.Format(), Agent); err != nil || string(back.ClusterKey()) != string(c.ClusterKey()) {
		t.Fatalf("round trip: %v", err)
	}
	if d, _ := Parse(minimal, Agent); d.ClusterKey() != nil {
		t.Fatal("a key without cluster_key_file")
	}
	for _, path := range []string{short, filepath.Join(dir, "missing")} {
		_, err := Parse("cluster_key_file = "+strconv.Quote(path)+"\n"+minimal, Agent)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "cluster_key_file" {
			t.Errorf("%s: %v, want a FieldError naming cluster_key_file", path, err)
		}
	}
}
