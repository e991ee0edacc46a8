package weft

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Mutation knobs (issue #10 item 6) break a protocol on purpose so that
// tests can show the swarm catches it: wbcast.Config.Mutation,
// paxos.Config.Mutation (ftskeen.Mutation and fastcast.Mutation are
// aliases), with constants named Mut*. They are test only: no non-test
// file outside the packages that define them may set or name them, so a
// node, its configuration or a command can never run a broken protocol.

// knobPackages returns the import paths of the packages that define, in a
// non-test file, a type named Mutation or Mut* constants (the knob
// packages), found by parsing the module under root.
func knobPackages(t *testing.T, root string) map[string]bool {
	t.Helper()
	pkgs := map[string]bool{}
	walkGo(t, root, func(path string, f *ast.File) {
		knob := false
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range gd.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					knob = knob || s.Name.Name == "Mutation"
				case *ast.ValueSpec:
					for _, n := range s.Names {
						knob = knob || (gd.Tok == token.CONST && isKnobName(n.Name))
					}
				}
			}
		}
		if knob {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			pkgs[modulePath+"/"+filepath.ToSlash(rel)] = true
		}
	})
	return pkgs
}

// isKnobName reports whether name is a knob constant's: Mut followed by
// an upper-case letter (MutForgetDone, not Mutex).
func isKnobName(name string) bool {
	return len(name) > 3 && strings.HasPrefix(name, "Mut") && name[3] >= 'A' && name[3] <= 'Z'
}

// walkGo parses every non-test Go file of the module under root, skipping
// testdata and hidden directories.
func walkGo(t *testing.T, root string, fn func(path string, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
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
		fn(path, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// knobRefs lists the places in f that touch the knobs of the knob packages
// it imports: a .Mutation or .Mutations selector, a Mutation: key in a
// composite literal, or a pkg.Mut* identifier. A file that imports no knob
// package cannot reach them.
func knobRefs(f *ast.File, knobs map[string]bool) []string {
	names := map[string]bool{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if !knobs[p] {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		names[name] = true
	}
	if len(names) == 0 {
		return nil
	}
	var refs []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if x.Sel.Name == "Mutation" || x.Sel.Name == "Mutations" {
				refs = append(refs, "."+x.Sel.Name)
			} else if id, ok := x.X.(*ast.Ident); ok && names[id.Name] && isKnobName(x.Sel.Name) {
				refs = append(refs, id.Name+"."+x.Sel.Name)
			}
		case *ast.KeyValueExpr:
			if id, ok := x.Key.(*ast.Ident); ok && id.Name == "Mutation" {
				refs = append(refs, "Mutation:")
			}
		}
		return true
	})
	return refs
}

// TestMutationKnobsOnlyInTests: outside the knob packages, only _test.go
// files reference the mutation knobs (node, config, cmd, sim, ...).
func TestMutationKnobsOnlyInTests(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	knobs := knobPackages(t, root)
	for _, want := range []string{"amcast/wbcast", "amcast/ftskeen", "amcast/fastcast"} {
		if !knobs[modulePath+"/"+want] {
			t.Fatalf("knob packages %v: %s missing (does it still define Mutation?)", slices.Sorted(maps.Keys(knobs)), want)
		}
	}
	importers := 0
	walkGo(t, root, func(path string, f *ast.File) {
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		if knobs[modulePath+"/"+filepath.ToSlash(rel)] {
			return // a knob package uses its own knobs
		}
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); knobs[p] {
				importers++
				break
			}
		}
		for _, r := range knobRefs(f, knobs) {
			t.Errorf("%s: %s: a test-only mutation knob referenced outside tests", path, r)
		}
	})
	// The scan saw the packages that build protocol processes (sim, node).
	if importers < 2 {
		t.Fatalf("only %d files import a knob package: the scan missed the module", importers)
	}
}

// TestKnobRefs: the scan finds every way to set a knob, and nothing in a
// file that imports no knob package.
func TestKnobRefs(t *testing.T) {
	knobs := map[string]bool{modulePath + "/amcast/wbcast": true}
	src := `package x
import w "github.com/weft-dev/weft/amcast/wbcast"
func f(c *w.Config) {
	c.Mutation = w.MutForgetDone
	_ = w.Config{Mutation: 1}
	_ = w.Mutations
	_ = w.New
}`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if refs := knobRefs(f, knobs); len(refs) != 4 {
		t.Fatalf("found %q, want 4 references", refs)
	}
	other, err := parser.ParseFile(token.NewFileSet(), "y.go", "package y\nfunc f(c *struct{ Mutation int }) { c.Mutation = 1 }", 0)
	if err != nil {
		t.Fatal(err)
	}
	if refs := knobRefs(other, knobs); len(refs) != 0 {
		t.Fatalf("a file that imports no knob package: %q", refs)
	}
}
