package geofence_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The application's rules, held against the import graph of the repository's
// non-test code (`go list`): a fitness function, like the kit's own
// allow-list in processors/group/kitdeps_test.go. Each rule is a pure check of
// a graph, so the self-tests below can break every rule on purpose.

const mod = "github.com/fencestream/fencestream/"

// Every package under processors/ outside the kit is exactly one of these, so
// a new package fails the test until someone says what it is.
var (
	// appProcessors each run their own consumer groups and talk to each other
	// only through topics: none imports another (sub-packages, such as a
	// processor's own schema, belong to it).
	appProcessors = []string{"processors/debounce", "processors/occupancy", "processors/visits", "processors/devicestats", "processors/transitions", "processors/delivery"}

	// shared is the application's ground floor, which any processor may
	// import: the contract (topology declaration, trigger ids), the fence
	// catalogue, and the simulated fleet. It imports no processor.
	shared = []string{"processors/geofence", "processors/fences", "processors/fleet"}

	// readers serve other processors' tables and may import the processors
	// named here, for the read side of their state (decoding, summing parts).
	readers = map[string][]string{
		// delivery: the subscription write routes check records with its Validate.
		"processors/fenceview": {"processors/debounce", "processors/occupancy", "processors/visits", "processors/delivery"},
	}

	// composers link processors into binaries or measure them: they may import
	// any of them, and no processor may import them.
	composers = []string{"processors/modules", "processors/bench", "processors/quality"}
)

// kitRoots is the kit: the Processor API and everything under it, plus the
// ground floor it stands on (topic declarations, the codec, the hot-key
// record). publicKitRoot is the package an internal/ package must not import.
var (
	kitRoots      = []string{"processors/group", "topology", "codecs"}
	kitSchemas    = []string{"codecs/hotkeypb", "processors/group/kitpb"}
	publicKitRoot = "processors/group"
)

// under reports whether pkg is root or below it.
func under(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }

func underAny(pkg string, roots []string) (string, bool) {
	for _, r := range roots {
		if under(pkg, r) {
			return r, true
		}
	}
	return "", false
}

func isKit(pkg string) bool {
	if under(pkg, "codecs") {
		// codecs' schema sub-packages are applications', except the kit's.
		_, ok := underAny(pkg, kitSchemas)
		return pkg == "codecs" || ok
	}
	_, ok := underAny(pkg, kitRoots)
	return ok
}

// isApplication: anything of the repository that is not the kit (cmd/ too).
func isApplication(pkg string) bool { return !isKit(pkg) }

// checkRules returns every broken rule of graph (package → its non-test
// imports, both relative to the module; imports outside the module dropped).
func checkRules(graph map[string][]string) []string {
	var bad []string
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		imps := graph[p]
		// Rule 1: processors talk only through topics.
		if under(p, "processors") && !isKit(p) {
			if _, ok := classify(p); !ok {
				bad = append(bad, fmt.Sprintf("%s is under processors/ but is none of processor, shared, reader or composer: classify it in architecture_test.go", p))
			}
		}
		if own, ok := underAny(p, appProcessors); ok {
			for _, imp := range imps {
				if other, ok := underAny(imp, appProcessors); ok && other != own {
					bad = append(bad, fmt.Sprintf("processors talk only through topics: processor %s imports processor %s", p, imp))
				}
				if c, ok := underAny(imp, composers); ok {
					bad = append(bad, fmt.Sprintf("processor %s imports %s, which composes processors", p, c))
				}
				if r, ok := readerOf(imp); ok {
					bad = append(bad, fmt.Sprintf("processor %s imports the reader %s", p, r))
				}
			}
		}
		if _, ok := underAny(p, shared); ok {
			for _, imp := range imps {
				if kind, ok := classify(imp); ok && kind != "shared" {
					bad = append(bad, fmt.Sprintf("shared package %s imports %s %s: the ground floor imports no processor", p, kind, imp))
				}
			}
		}
		if r, ok := readerOf(p); ok {
			for _, imp := range imps {
				if proc, ok := underAny(imp, appProcessors); ok && !slices.Contains(readers[r], proc) {
					bad = append(bad, fmt.Sprintf("reader %s imports processor %s, which is not among the tables it serves", p, imp))
				}
				if c, ok := underAny(imp, composers); ok {
					bad = append(bad, fmt.Sprintf("reader %s imports %s, which composes processors", p, c))
				}
			}
		}
		// Rule 2: the declaration knows no implementation. The kit's topology
		// layer and the application's declaration import no processor.
		if under(p, "topology") || p == "processors/geofence" {
			for _, imp := range imps {
				if under(imp, "processors") && !under(imp, "processors/geofence") {
					bad = append(bad, fmt.Sprintf("the declaration knows no implementation: %s imports %s", p, imp))
				}
			}
		}
		// Rule 3: the kit imports no application package or schema.
		if isKit(p) {
			for _, imp := range imps {
				if isApplication(imp) {
					bad = append(bad, fmt.Sprintf("the kit imports no application: %s imports %s", p, imp))
				}
			}
		}
		// Rule 4: internal/ is below the public API, never above it.
		if strings.Contains("/"+p+"/", "/internal/") {
			for _, imp := range imps {
				if imp == publicKitRoot {
					bad = append(bad, fmt.Sprintf("an internal package imports the public kit root: %s imports %s", p, imp))
				}
			}
		}
	}
	return bad
}

func classify(pkg string) (string, bool) {
	if _, ok := underAny(pkg, appProcessors); ok {
		return "processor", true
	}
	if _, ok := underAny(pkg, shared); ok {
		return "shared", true
	}
	if _, ok := readerOf(pkg); ok {
		return "reader", true
	}
	if _, ok := underAny(pkg, composers); ok {
		return "composer", true
	}
	return "", false
}

func readerOf(pkg string) (string, bool) {
	for r := range readers {
		if under(pkg, r) {
			return r, true
		}
	}
	return "", false
}

type listed struct {
	imports map[string][]string
	files   map[string][]string // package → its non-test, non-generated Go files
}

func listRepo(t *testing.T) listed {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	cmd := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}\t{{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	l := listed{imports: map[string][]string{}, files: map[string][]string{}}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("go list line %q", line)
		}
		pkg, ok := strings.CutPrefix(f[0], mod)
		if !ok {
			continue
		}
		l.imports[pkg] = nil
		for imp := range strings.FieldsSeq(f[3]) {
			if rel, ok := strings.CutPrefix(imp, mod); ok {
				l.imports[pkg] = append(l.imports[pkg], rel)
			}
		}
		for name := range strings.FieldsSeq(f[2]) {
			if !strings.HasSuffix(name, ".pb.go") {
				l.files[pkg] = append(l.files[pkg], filepath.Join(f[1], name))
			}
		}
	}
	if len(l.imports) < 30 {
		t.Fatalf("go list found only %d packages:\n%s", len(l.imports), out)
	}
	return l
}

func TestArchitecture(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	l := listRepo(t)
	for _, v := range checkRules(l.imports) {
		t.Error(v)
	}
	// Every class names packages that exist, so a rename cannot empty a rule.
	for _, p := range slices.Concat(appProcessors, shared, composers, kitRoots, []string{"processors/fenceview"}) {
		if _, ok := l.imports[p]; !ok {
			t.Errorf("architecture_test.go names %s, which go list does not find", p)
		}
	}
	t.Run("NoExportedMutableGlobals", func(t *testing.T) {
		for pkg, files := range l.files {
			for _, v := range exportedVars(t, files) {
				t.Errorf("%s: exported package-level variable %s: make it a function, a constant or unexported (errors.New sentinels aside)", pkg, v)
			}
		}
	})
}

// exportedVars lists the exported package-level variables of files, except
// error sentinels (errors.New, fmt.Errorf): the one mutable global Go's own
// library makes idiomatic.
func exportedVars(t *testing.T, files []string) []string {
	t.Helper()
	var found []string
	fs := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fs, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !n.IsExported() || (i < len(vs.Values) && isErrorSentinel(vs.Values[i])) {
						continue
					}
					found = append(found, fmt.Sprintf("%s (%s)", n.Name, fs.Position(n.Pos())))
				}
			}
		}
	}
	return found
}

func isErrorSentinel(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	s, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && (x.Name == "errors" && s.Sel.Name == "New" || x.Name == "fmt" && s.Sel.Name == "Errorf")
}

// Each rule fails when broken: the real graph with one forbidden edge added.
func TestArchitectureRulesRefuse(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	l := listRepo(t)
	for _, c := range []struct {
		name     string
		pkg, imp string
		want     string
	}{
		{"processor imports processor", "processors/occupancy", "processors/debounce", "processors talk only through topics"},
		{"processor imports another's schema", "processors/devicestats", "processors/visits/visitspb", "processors talk only through topics"},
		{"processor imports a composer", "processors/debounce", "processors/modules", "composes processors"},
		{"shared imports processor", "processors/fences", "processors/occupancy", "the ground floor imports no processor"},
		{"reader imports a table it does not serve", "processors/fenceview", "processors/devicestats", "not among the tables it serves"},
		{"declaration imports implementation", "topology", "processors/debounce", "the declaration knows no implementation"},
		{"app declaration imports implementation", "processors/geofence", "processors/fences", "the declaration knows no implementation"},
		{"kit imports application", "processors/group", "processors/geofence", "the kit imports no application"},
		{"kit imports application schema", "processors/group/host", "codecs/geofencepb", "the kit imports no application"},
		{"ground floor imports application schema", "topology/produce", "codecs/geofencepb", "the kit imports no application"},
		{"internal imports public root", "processors/group/internal/core", "processors/group", "internal package imports the public kit root"},
		{"unclassified package", "processors/newthing", "topology", "classify it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := make(map[string][]string, len(l.imports)+1)
			for p, imps := range l.imports {
				g[p] = slices.Clone(imps)
			}
			g[c.pkg] = append(g[c.pkg], c.imp)
			var hit bool
			for _, v := range checkRules(g) {
				hit = hit || strings.Contains(v, c.want)
			}
			if !hit {
				t.Errorf("%s importing %s broke no rule %q", c.pkg, c.imp, c.want)
			}
		})
	}
}

// The exported-global check refuses a mutable variable and lets a sentinel pass.
func TestExportedVarsRefusesMutable(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "x.go")
	src := "package x\n\nimport \"errors\"\n\nvar ErrX = errors.New(\"x\")\n\nvar Bands = []string{\"a\"}\n\nvar hidden = 1\n"
	if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := exportedVars(t, []string{name})
	if len(got) != 1 || !strings.HasPrefix(got[0], "Bands ") {
		t.Fatalf("exportedVars = %v, want only Bands", got)
	}
}
