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
// record). publicKitRoot is the Processor API: no test at or below it imports
// an application.
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
		bad = append(bad, internalBelowPublic(graph, p, imps)...)
		bad = append(bad, internalOwnTree(p, imps)...)
	}
	return bad
}

// checkTestRules returns every broken rule of testGraph (package → the
// imports of its tests, in-package and external) against graph (the non-test
// imports, through which a test's imports reach further). Processors' own
// tests may wire several processors into one pipeline, and an internal
// package's tests may drive it through the public API; the kit's tests may not
// reach an application, so the kit proves its guarantees on its own schema.
func checkTestRules(graph, testGraph map[string][]string) []string {
	var bad []string
	pkgs := make([]string, 0, len(testGraph))
	for p := range testGraph {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		imps := testGraph[p]
		// Rule 3, tests included, for the Processor API and all below it
		// (topology's and codecs' tests check the application's declaration
		// and schema on purpose).
		if under(p, publicKitRoot) {
			for _, imp := range imps {
				if isApplication(imp) {
					bad = append(bad, fmt.Sprintf("the kit's tests import no application: %s's tests import %s", p, imp))
				}
			}
		}
		bad = append(bad, internalOwnTree(p, imps)...)
	}
	return bad
}

// internalBelowPublic is rule 4 for p importing imps (graph: every package's
// non-test imports).
func internalBelowPublic(graph map[string][]string, p string, imps []string) []string {
	var bad []string
	for _, imp := range imps {
		// Rule 4: internal/ is below the public API, never above it. An
		// internal package imports neither the package whose internal/ it is
		// nor any public package of that tree built on it (a schema or a
		// store that imports nothing of the tree is ground floor).
		if parent, ok := internalParent(p); ok && under(imp, parent) {
			if _, internal := internalParent(imp); !internal && (imp == parent || reaches(graph, imp, parent)) {
				bad = append(bad, fmt.Sprintf("an internal package imports the public API above it: %s imports %s (public API %s)", p, imp, parent))
			}
		}
	}
	return bad
}

// internalOwnTree is rule 5 for p importing imps.
func internalOwnTree(p string, imps []string) []string {
	var bad []string
	for _, imp := range imps {
		// Rule 5: an internal package is its tree's alone. The compiler
		// refuses this too; the rule keeps the intent where it is read.
		if parent, ok := internalParent(imp); ok && !under(p, parent) {
			bad = append(bad, fmt.Sprintf("only %s and below may import its internal packages: %s imports %s", parent, p, imp))
		}
	}
	return bad
}

// internalParent returns the tree an internal package belongs to: the path
// before its last "/internal" element.
func internalParent(pkg string) (string, bool) {
	if strings.HasPrefix(pkg, "internal/") || pkg == "internal" {
		return "", false // the module's own internal/, open to all of it
	}
	i := strings.LastIndex("/"+pkg+"/", "/internal/")
	if i < 0 {
		return "", false
	}
	return pkg[:i-1], true
}

// reaches reports whether from imports to, directly or not, in graph.
func reaches(graph map[string][]string, from, to string) bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if p == to {
			return true
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		stack = append(stack, graph[p]...)
	}
	return false
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
	imports     map[string][]string
	testImports map[string][]string // package → its tests' imports (in-package and external)
	files       map[string][]string // package → its non-test, non-generated Go files
}

func listRepo(t *testing.T) listed {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	cmd := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	l := listed{imports: map[string][]string{}, testImports: map[string][]string{}, files: map[string][]string{}}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
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
		for imp := range strings.FieldsSeq(f[4]) {
			if rel, ok := strings.CutPrefix(imp, mod); ok && rel != pkg {
				l.testImports[pkg] = append(l.testImports[pkg], rel)
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
	for _, v := range checkTestRules(l.imports, l.testImports) {
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
		test     bool // the edge is a test's import
	}{
		{"processor imports processor", "processors/occupancy", "processors/debounce", "processors talk only through topics", false},
		{"processor imports another's schema", "processors/devicestats", "processors/visits/visitspb", "processors talk only through topics", false},
		{"processor imports a composer", "processors/debounce", "processors/modules", "composes processors", false},
		{"shared imports processor", "processors/fences", "processors/occupancy", "the ground floor imports no processor", false},
		{"reader imports a table it does not serve", "processors/fenceview", "processors/devicestats", "not among the tables it serves", false},
		{"declaration imports implementation", "topology", "processors/debounce", "the declaration knows no implementation", false},
		{"app declaration imports implementation", "processors/geofence", "processors/fences", "the declaration knows no implementation", false},
		{"kit imports application", "processors/group", "processors/geofence", "the kit imports no application", false},
		{"kit imports application schema", "processors/group/host", "codecs/geofencepb", "the kit imports no application", false},
		{"ground floor imports application schema", "topology/produce", "codecs/geofencepb", "the kit imports no application", false},
		{"internal imports public root", "processors/group/internal/core", "processors/group", "imports the public API above it", false},
		{"internal imports a public package built on the root", "processors/group/internal/testpb", "processors/group/host", "imports the public API above it", false},
		{"any tree's internal imports its public API", "processors/occupancy/internal/members", "processors/occupancy", "imports the public API above it", false},
		{"outside imports a kit internal", "processors/bench", "processors/group/internal/testpb", "only processors/group and below may import", false},
		{"outside test imports a kit internal", "processors/occupancy", "processors/group/internal/testpb", "only processors/group and below may import", true},
		{"kit test imports application schema", "processors/group", "codecs/geofencepb", "the kit's tests import no application", true},
		{"kit sub-package test imports application", "processors/group/grouptest", "processors/geofence", "the kit's tests import no application", true},
		{"unclassified package", "processors/newthing", "topology", "classify it", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := make(map[string][]string, len(l.imports)+1)
			for p, imps := range l.imports {
				g[p] = slices.Clone(imps)
			}
			tg := make(map[string][]string, len(l.testImports)+1)
			for p, imps := range l.testImports {
				tg[p] = slices.Clone(imps)
			}
			if c.test {
				tg[c.pkg] = append(tg[c.pkg], c.imp)
			} else {
				g[c.pkg] = append(g[c.pkg], c.imp)
			}
			var hit bool
			for _, v := range slices.Concat(checkRules(g), checkTestRules(g, tg)) {
				hit = hit || strings.Contains(v, c.want)
			}
			if !hit {
				t.Errorf("%s importing %s broke no rule %q", c.pkg, c.imp, c.want)
			}
		})
	}
}

// Rule 4 lets an internal package stand on the tree's ground floor: a public
// package that imports nothing of the tree (a schema, a store).
func TestInternalMayImportGroundFloor(t *testing.T) {
	g := map[string][]string{
		"processors/group":                 {"processors/group/kitpb", "processors/group/internal/core"},
		"processors/group/kitpb":           nil,
		"processors/group/host":            {"processors/group"},
		"processors/group/internal/core":   {"processors/group/kitpb"},
		"processors/group/internal/testpb": nil,
	}
	if bad := internalBelowPublic(g, "processors/group/internal/core", g["processors/group/internal/core"]); len(bad) > 0 {
		t.Errorf("internal importing a leaf schema broke %v", bad)
	}
	if bad := internalOwnTree("processors/group/host", []string{"processors/group/internal/core"}); len(bad) > 0 {
		t.Errorf("a kit package importing its tree's internal broke %v", bad)
	}
	if p, ok := internalParent("processors/group/internal/core/sub"); !ok || p != "processors/group" {
		t.Errorf("internalParent = %q, %v", p, ok)
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
