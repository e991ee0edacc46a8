package check

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPurity enforces that the package stays pure: no I/O packages, no
// global randomness, no wall clock or timers, no goroutines, no third-party
// modules.
func TestPurity(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{
		"net": true, "os": true, "syscall": true, "math/rand": true,
		"crypto/rand": true, "log": true, "log/slog": true, "unsafe": true,
	}
	timeFuncs := map[string]bool{
		"Now": true, "Sleep": true, "After": true, "AfterFunc": true, "Tick": true,
		"NewTimer": true, "NewTicker": true, "Since": true, "Until": true,
	}
	files := append(append([]string{}, pkg.GoFiles...), pkg.TestGoFiles...)
	if len(pkg.GoFiles) == 0 {
		t.Fatal("no Go files found")
	}
	for i, name := range files {
		isTest := i >= len(pkg.GoFiles)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		timeName := ""
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			root := strings.SplitN(path, "/", 2)[0]
			switch {
			case forbidden[path] || root == "net" || root == "os" || root == "syscall":
				t.Errorf("%s imports %s", name, path)
			case strings.Contains(root, ".") && !strings.HasPrefix(path, "github.com/weft-dev/weft/"):
				t.Errorf("%s imports third-party %s", name, path)
			case path == "time":
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		if isTest {
			continue // tests may use go statements etc.; imports are checked
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement at %v", name, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && timeFuncs[n.Sel.Name] {
					t.Errorf("%s: time.%s at %v", name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}
