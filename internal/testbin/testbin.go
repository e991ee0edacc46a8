// Package testbin builds the weft command once per test binary, for tests
// that run it as separate processes (demo's multi-process tests, the
// deployment checks in deploy).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var weft struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Weft returns the path of a weft binary built from this module's
// cmd/weft, building it on the first call; the test fails if it cannot be
// built. Call Cleanup from TestMain after the tests ran to remove it.
func Weft(t testing.TB) string {
	t.Helper()
	weft.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			weft.err = err
			return
		}
		if weft.dir, err = os.MkdirTemp("", "weft-bin-"); err != nil {
			weft.err = err
			return
		}
		path := filepath.Join(weft.dir, "weft")
		out, err := exec.Command(goTool, "build", "-o", path, "github.com/weft-dev/weft/cmd/weft").CombinedOutput()
		if err != nil {
			weft.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		weft.path = path
	})
	if weft.err != nil {
		t.Fatalf("building the weft binary: %v", weft.err)
	}
	return weft.path
}

// Cleanup removes the binary Weft built, if any.
func Cleanup() {
	if weft.dir != "" {
		os.RemoveAll(weft.dir)
	}
}
