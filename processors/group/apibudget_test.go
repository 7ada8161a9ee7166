package group_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// apiBudget is the most top-level exported identifiers (types, functions,
// constants, variables; methods aside) the Processor API may have: what a
// newcomer reads in `go doc` before writing a processor (issue 26).
const apiBudget = 110

func TestAPIBudget(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	names := exportedIdents(t, filepath.Dir(here))
	if len(names) <= apiBudget {
		return
	}
	t.Errorf("processors/group exports %d top-level identifiers, budget %d: move some behind internal/ or into a sub-package\n%s",
		len(names), apiBudget, strings.Join(names, "\n"))
}

// exportedIdents lists the top-level exported identifiers of the non-test Go
// files in dir, sorted.
func exportedIdents(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fs := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// The counter counts what go doc lists at the top level: exported types,
// functions, constants and variables, not methods, unexported names or tests.
func TestExportedIdentsCounts(t *testing.T) {
	dir := t.TempDir()
	src := `package x

type A struct{}
type b struct{}

func (A) M()   {}
func F()       {}
func g()       {}
const C, d = 1, 2
var (
	V = 1
	w = 2
)
`
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package x\n\nfunc TestT() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := exportedIdents(t, dir), []string{"A", "C", "F", "V"}; !slices.Equal(got, want) {
		t.Fatalf("exportedIdents = %v, want %v", got, want)
	}
}
