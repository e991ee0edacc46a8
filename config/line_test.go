package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorsNameTheLine: where the TOML decoder knows the line of a bad
// input (syntax errors, values of the wrong type), the error carries it,
// and Load prints it as file:line, the form editors jump to.
func TestErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, text, field string
		line              int
	}{
		// minimal starts with an empty line: id is on line 2.
		{"syntax", strings.Replace(minimal, "id = 1", "id = = 1", 1), "", 2},
		{"unterminated string", strings.Replace(minimal, `data_dir = "/tmp/x"`, `data_dir = "/tmp/x`, 1), "data_dir", 3},
		{"wrong type", strings.Replace(minimal, "id = 1", `id = "one"`, 1), "id", 2},
		{"wrong type in a table", minimal + "[gossip]\nenabled = 3\n", "gossip.enabled", 10},
	} {
		_, err := Parse(tc.text, Agent)
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: got %v, want a FieldError", tc.name, err)
			continue
		}
		if fe.Line != tc.line || (tc.field != "" && fe.Field != tc.field) {
			t.Errorf("%s: line %d field %q (%v), want line %d field %q", tc.name, fe.Line, fe.Field, err, tc.line, tc.field)
		}
	}
	path := filepath.Join(t.TempDir(), "n.toml")
	if err := os.WriteFile(path, []byte(strings.Replace(minimal, "id = 1", `id = "one"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), "config "+path+":2: id: ") {
		t.Errorf("Load: %v, want an error starting with %q", err, "config "+path+":2: id: ")
	}
	// A validation error has no line from the decoder: file and key only.
	if err := os.WriteFile(path, []byte(strings.Replace(minimal, "id = 1", "id = 7", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = Load(path); err == nil || !strings.HasPrefix(err.Error(), "config "+path+": id: ") {
		t.Errorf("Load: %v, want an error starting with %q", err, "config "+path+": id: ")
	}
}
