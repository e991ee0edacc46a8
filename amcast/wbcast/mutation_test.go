package wbcast

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const wbcastImport = "github.com/weft-dev/weft/amcast/wbcast"

// mutationRefs lists the places in one Go source file that touch the
// test-only knobs of this package: Config.Mutation (a field selector or a
// composite-literal key) or a wbcast.Mut* identifier. Files that do not
// import this package cannot reach them.
func mutationRefs(fset *token.FileSet, f *ast.File) []string {
	name := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == wbcastImport {
			name = "wbcast"
			if im.Name != nil {
				name = im.Name.Name
			}
		}
	}
	if name == "" {
		return nil
	}
	var refs []string
	at := func(n ast.Node, what string) {
		refs = append(refs, fset.Position(n.Pos()).String()+": "+what)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if x.Sel.Name == "Mutation" || x.Sel.Name == "Mutations" {
				at(x, "."+x.Sel.Name)
			} else if id, ok := x.X.(*ast.Ident); ok && id.Name == name && strings.HasPrefix(x.Sel.Name, "Mut") {
				at(x, name+"."+x.Sel.Name)
			}
		case *ast.KeyValueExpr:
			if id, ok := x.Key.(*ast.Ident); ok && id.Name == "Mutation" {
				at(x, "Mutation:")
			}
		}
		return true
	})
	return refs
}

// TestMutationOnlyInTests: the knobs that break WbCast on purpose
// (mutation.go) are set only by tests. No non-test file of the module
// outside this package — node, config, cmd, sim, ... — may reference them.
func TestMutationOnlyInTests(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files, importers := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == self || d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, im := range f.Imports {
			if im.Path.Value == strconv.Quote(wbcastImport) {
				importers++
			}
		}
		for _, r := range mutationRefs(fset, f) {
			t.Errorf("%s: the test-only wbcast mutation knobs are referenced outside tests", r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The scan must have seen the module, including the packages that
	// build WbCast processes (sim, node).
	if files < 50 || importers < 2 {
		t.Fatalf("scanned %d files, %d importing wbcast: not the module", files, importers)
	}
}

// TestMutationRefs: the scan finds every way to set a knob.
func TestMutationRefs(t *testing.T) {
	src := `package x
import w "github.com/weft-dev/weft/amcast/wbcast"
func f(c *w.Config) {
	c.Mutation = w.MutForgetDone
	_ = w.Config{Mutation: 1}
	_ = w.Mutations
	_ = w.New
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if refs := mutationRefs(fset, f); len(refs) != 4 {
		t.Fatalf("found %d references, want 4: %q", len(refs), refs)
	}
	other, err := parser.ParseFile(fset, "y.go", "package y\nfunc f(c *struct{ Mutation int }) { c.Mutation = 1 }", 0)
	if err != nil {
		t.Fatal(err)
	}
	if refs := mutationRefs(fset, other); len(refs) != 0 {
		t.Fatalf("a file that does not import wbcast: %q", refs)
	}
}

// TestMutationNames: every knob has a distinct name.
func TestMutationNames(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Mutations {
		s := k.String()
		if s == "" || strings.Contains(s, "+") || s == "unknown" || seen[s] {
			t.Fatalf("knob %d named %q", uint32(k), s)
		}
		seen[s] = true
	}
	if len(Mutations) < 8 {
		t.Fatalf("%d knobs, issue #10 asks for at least 8", len(Mutations))
	}
	if s := (MutForgetDone | MutFreshRetryLTS).String(); s != "forget-done+fresh-retry-lts" {
		t.Fatalf("combined knobs named %q", s)
	}
	if s := Mutation(0).String(); s != "none" {
		t.Fatalf("no knob named %q", s)
	}
}
