package geofence_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// One option grammar, kgo's, in the kit and the application (DESIGN.md §5):
// options are an Opt named by a bare noun, and nothing configures a group by
// mutating it. Held against every package's non-test code.
func TestOptionGrammar(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	l := listRepo(t)
	for pkg, files := range l.files {
		for _, v := range optionGrammar(t, files) {
			t.Errorf("%s: %s", pkg, v)
		}
	}
}

// optionGrammar lists the exported functions of files that break the
// grammar:
//   - a With-prefixed function returning an option (a type named *Opt or
//     *Option): name it by a bare noun;
//   - a free function taking a *Group first and returning nothing that
//     registers no handler (no func parameter taking a *Context): a mutator
//     of a group under construction, which should be an option of New.
func optionGrammar(t *testing.T, files []string) []string {
	t.Helper()
	var found []string
	fs := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fs, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() {
				continue
			}
			at := fs.Position(fd.Name.Pos())
			n := fd.Name.Name
			if rest, ok := strings.CutPrefix(n, "With"); ok && rest != "" && rest[:1] == strings.ToUpper(rest[:1]) && returnsOption(fd.Type) {
				found = append(found, fmt.Sprintf("%s (%s) is a With-prefixed option: name it %s", n, at, rest))
			}
			if params := fd.Type.Params.List; len(params) > 0 && isPtrTo(params[0].Type, "Group") &&
				(fd.Type.Results == nil || len(fd.Type.Results.List) == 0) && !takesHandler(fd.Type) {
				found = append(found, fmt.Sprintf("%s (%s) mutates a group under construction: make it an option of New", n, at))
			}
		}
	}
	return found
}

// typeName is the name a type expression ends in: T, pkg.T, T[A], *T.
func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.IndexExpr:
		return typeName(x.X)
	case *ast.IndexListExpr:
		return typeName(x.X)
	case *ast.StarExpr:
		return typeName(x.X)
	}
	return ""
}

func isPtrTo(e ast.Expr, name string) bool {
	s, ok := e.(*ast.StarExpr)
	return ok && typeName(s.X) == name
}

func returnsOption(ft *ast.FuncType) bool {
	if ft.Results == nil || len(ft.Results.List) != 1 {
		return false
	}
	n := typeName(ft.Results.List[0].Type)
	return strings.HasSuffix(n, "Opt") || strings.HasSuffix(n, "Option")
}

// takesHandler: a parameter is a function whose first parameter is a
// *Context (Stream, OnTimer, windows' handlers).
func takesHandler(ft *ast.FuncType) bool {
	for _, p := range ft.Params.List {
		if h, ok := p.Type.(*ast.FuncType); ok && len(h.Params.List) > 0 && isPtrTo(h.Params.List[0].Type, "Context") {
			return true
		}
	}
	return false
}

// The grammar check refuses a With-prefixed option and a group mutator (the
// kind group.CacheEnvelopes, StateTTL and OrderedOutputs were), and lets
// bare-noun options, handler registrations and non-options pass.
func TestOptionGrammarRefuses(t *testing.T) {
	src := `package x

type Opt func(*config)
type config struct{}
type Group[S any] struct{}
type Context[S any] struct{}
type ViewOpt func(*config)

func WithClock(now func() int64) Opt              { return nil }
func WithViewDir(dir string) ViewOpt               { return nil }
func CacheStates[S any](g *Group[S], budget int)   {}
func OnDeadLetter[S any](g *Group[S], fn func(topic, reason string)) {}

func Now(now func() int64) Opt                                       { return nil }
func Stream[S any](g *Group[S], topic string, h func(c *Context[S], m int) error) {}
func Output[S any](g *Group[S], topic string) int                     { return 0 }
func WithProducerFlush(sc *config, d int) *config                     { return nil }
func Without(x int) Opt                                               { return nil }
`
	name := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range optionGrammar(t, []string{name}) {
		got = append(got, strings.Fields(v)[0])
	}
	slices.Sort(got)
	if want := []string{"CacheStates", "OnDeadLetter", "WithClock", "WithViewDir"}; !slices.Equal(got, want) {
		t.Fatalf("optionGrammar refused %v, want %v", got, want)
	}
}
