package weft

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// modulePath is this module's import path; imports under it are first-party.
const modulePath = "github.com/weft-dev/weft"

// coreDirs are the protocol-core directories, relative to the module root,
// scanned recursively. Missing ones are skipped, and so are testdata and
// test-support packages: directories named like Go's httptest or fstest
// ("...test", e.g. amcast/amcasttest), which exist only for tests and may use
// the testing package, files and third-party test libraries.
var coreDirs = []string{"wire", "amcast", "sim", "internal/check", "membership", "phi", "kv", "rsm"}

// forbiddenImports are import paths the core may not use, each with all of
// its subpackages ("net" also forbids "net/http"), except allowedImports.
var forbiddenImports = []string{
	"net", "os", "syscall", "math/rand", "crypto/rand", "log", "io/ioutil",
}

// allowedImports are exceptions to forbiddenImports.
var allowedImports = map[string]bool{"math/rand/v2": true}

// forbiddenTimeFuncs are package time identifiers that read the wall clock
// or create timers.
var forbiddenTimeFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

// Rule names, as they appear in violation messages.
const (
	ruleImport     = "forbidden-import"
	ruleThirdParty = "third-party-import"
	ruleClock      = "wall-clock"
	ruleGoroutine  = "goroutine"
)

// violation is one breach of the purity rules.
type violation struct {
	Pos    token.Position
	Rule   string
	Detail string
}

func (v violation) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", v.Pos.Filename, v.Pos.Line, v.Rule, v.Detail)
}

// isForbiddenImport reports whether path is one of forbiddenImports or a
// subpackage of one, and not explicitly allowed.
func isForbiddenImport(path string) bool {
	if allowedImports[path] {
		return false
	}
	for _, f := range forbiddenImports {
		if path == f || strings.HasPrefix(path, f+"/") {
			return true
		}
	}
	return false
}

// isThirdParty reports whether path belongs to a module other than this one:
// its first element looks like a domain name (contains a dot).
func isThirdParty(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	if !strings.Contains(first, ".") {
		return false
	}
	return path != modulePath && !strings.HasPrefix(path, modulePath+"/")
}

// scanPurity parses one Go source file and returns its purity violations.
// It is purely syntactic: a package named "time" is recognised by import
// path, under any local name, and a local variable that shadows it would be
// reported too (which errs on the safe side).
func scanPurity(filename string, src []byte) ([]violation, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var vs []violation
	report := func(pos token.Pos, rule, detail string) {
		vs = append(vs, violation{Pos: fset.Position(pos), Rule: rule, Detail: detail})
	}

	timeNames := map[string]bool{} // local names of package time
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: bad import path %s", fset.Position(imp.Pos()), imp.Path.Value)
		}
		switch {
		case isForbiddenImport(path):
			report(imp.Pos(), ruleImport, fmt.Sprintf("imports %q (no I/O, logging or global randomness in protocol cores)", path))
		case isThirdParty(path):
			report(imp.Pos(), ruleThirdParty, fmt.Sprintf("imports %q (protocol cores use only the standard library and %s/...)", path, modulePath))
		case path == "time":
			switch {
			case imp.Name == nil:
				timeNames["time"] = true
			case imp.Name.Name == ".":
				report(imp.Pos(), ruleClock, `dot-imports "time" (calls to time.Now etc. could not be checked)`)
			case imp.Name.Name != "_":
				timeNames[imp.Name.Name] = true
			}
		}
	}

	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n.Pos(), ruleGoroutine, "go statement (protocol cores are single-threaded)")
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && timeNames[x.Name] && forbiddenTimeFuncs[n.Sel.Name] {
				report(n.Pos(), ruleClock, fmt.Sprintf("uses time.%s (time is counted in ticks)", n.Sel.Name))
			}
		}
		return true
	})
	return vs, nil
}

// TestPurity checks every non-test Go file of the protocol cores.
func TestPurity(t *testing.T) {
	scanned := 0
	for _, dir := range coreDirs {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			continue
		}
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if path != dir && (name == "testdata" || strings.HasSuffix(name, "test") ||
					strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			vs, err := scanPurity(filepath.ToSlash(path), src)
			if err != nil {
				t.Errorf("parsing %s: %v", path, err)
				return nil
			}
			scanned++
			for _, v := range vs {
				t.Errorf("purity: %s", v)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walking %s: %v", dir, err)
		}
	}
	if scanned == 0 {
		t.Fatal("purity: no core Go files found; is the test running in the module root?")
	}
	t.Logf("purity: scanned %d files", scanned)
}

// TestModulePath keeps modulePath in step with go.mod.
func TestModulePath(t *testing.T) {
	f, err := os.Open("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			if got := strings.Trim(strings.TrimSpace(rest), `"`); got != modulePath {
				t.Fatalf("go.mod declares module %q, purity test assumes %q", got, modulePath)
			}
			return
		}
	}
	t.Fatal("no module line in go.mod")
}

// TestScanPurity feeds the scanner small snippets with known violations.
func TestScanPurity(t *testing.T) {
	type want struct {
		line int
		rule string
		text string // substring of the message
	}
	tests := []struct {
		name string
		src  string
		want []want
	}{}
	add := func(name, src string, w ...want) {
		tests = append(tests, struct {
			name string
			src  string
			want []want
		}{name, src, w})
	}

	for _, path := range []string{
		"net", "net/http", "net/netip", "os", "os/exec", "syscall", "math/rand",
		"crypto/rand", "log", "log/slog", "io/ioutil",
	} {
		add("import "+path, "package p\n\nimport _ "+strconv.Quote(path)+"\n",
			want{3, ruleImport, strconv.Quote(path)})
	}
	add("renamed import", "package p\n\nimport (\n\t\"fmt\"\n\tmrand \"math/rand\"\n)\n\nvar _ = fmt.Sprint(mrand.Int())\n",
		want{5, ruleImport, `"math/rand"`})
	for _, name := range slices.Sorted(maps.Keys(forbiddenTimeFuncs)) {
		add("time."+name, "package p\n\nimport \"time\"\n\nvar _ = time."+name+"\n",
			want{5, ruleClock, "time." + name})
		add("renamed time."+name, "package p\n\nimport t \"time\"\n\nfunc f() {\n\t_ = t."+name+"\n}\n",
			want{6, ruleClock, "time." + name})
	}
	add("call time.Now", "package p\n\nimport \"time\"\n\nfunc f() int64 {\n\treturn time.Now().UnixNano()\n}\n",
		want{6, ruleClock, "time.Now"})
	add("dot import time", "package p\n\nimport . \"time\"\n\nvar _ = Now()\n",
		want{3, ruleClock, "dot-imports"})
	add("go statement", "package p\n\nfunc f() {\n\tch := make(chan int)\n\tgo func() { ch <- 1 }()\n\t<-ch\n}\n",
		want{5, ruleGoroutine, "go statement"})
	for _, path := range []string{"github.com/spf13/cobra", "golang.org/x/exp/slices", "example.com/m", "github.com/weft-dev/weftx/wire"} {
		add("third party "+path, "package p\n\nimport _ "+strconv.Quote(path)+"\n",
			want{3, ruleThirdParty, strconv.Quote(path)})
	}
	add("several", "package p\n\nimport (\n\t\"os\"\n\t\"time\"\n)\n\nfunc f() {\n\tgo os.Exit(0)\n\ttime.Sleep(time.Second)\n}\n",
		want{4, ruleImport, `"os"`}, want{9, ruleGoroutine, "go"}, want{10, ruleClock, "time.Sleep"})
	add("clean", `package p

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
	_ "time"

	"github.com/weft-dev/weft"
	"github.com/weft-dev/weft/wire"
)

type clock struct{ now int }

func (c *clock) Now() int { return c.now }

var timeout = 3 * time.Second

func f(c *clock, d time.Duration, r *rand.Rand) error {
	var t time.Time
	_ = t.Add(d).Sub(t)
	_ = c.Now()
	_ = r.IntN(10)
	_ = wire.Version
	_ = weft.X
	return errors.New(fmt.Sprint(timeout))
}
`)

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := scanPurity("snippet.go", []byte(tc.src))
			if err != nil {
				t.Fatalf("scanPurity: %v", err)
			}
			if len(vs) != len(tc.want) {
				t.Fatalf("got %d violations %v, want %d", len(vs), vs, len(tc.want))
			}
			for i, w := range tc.want {
				msg := vs[i].String()
				prefix := fmt.Sprintf("snippet.go:%d: %s: ", w.line, w.rule)
				if !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, w.text) {
					t.Errorf("violation %d = %q, want prefix %q and text %q", i, msg, prefix, w.text)
				}
			}
		})
	}

	if _, err := scanPurity("bad.go", []byte("package p\nfunc {")); err == nil {
		t.Error("scanPurity accepted unparsable source")
	}
}
