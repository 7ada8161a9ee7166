package host_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/topology"
)

func counter(name string) host.Module {
	return host.Define(host.Module{Name: name, Flags: func(fs *flag.FlagSet) { fs.Int(name+"-cap", 1, "cap") }})
}

// Two modules with one name are refused, and the error names where each was
// defined.
func TestDuplicateModuleNamesBothOrigins(t *testing.T) {
	a := counter("counts")
	b := host.Define(host.Module{Name: "counts"})
	err := host.Check([]host.Module{a, b})
	if err == nil {
		t.Fatal("a duplicate module name was accepted")
	}
	for _, want := range []string{"module counts is linked twice", a.Origin(), b.Origin()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if a.Origin() == b.Origin() || !strings.Contains(a.Origin(), "module_test.go:") {
		t.Errorf("origins %q and %q do not say where each module was defined", a.Origin(), b.Origin())
	}
	if _, err := host.Compose(&topology.Topology{Name: "t"}, a, b); err == nil {
		t.Error("Compose accepted a duplicate module name")
	}
	if err := host.Check([]host.Module{a, counter("other")}); err != nil {
		t.Errorf("distinct modules refused: %v", err)
	}
}

// A flag two modules define, or one the binary has already, is refused with
// both owners instead of panicking in package flag.
func TestFlagDefinedTwiceIsRefused(t *testing.T) {
	fs := flag.NewFlagSet("bin", flag.ContinueOnError)
	fs.Int("partitions", 1, "")
	clash := host.Define(host.Module{Name: "x", Flags: func(fs *flag.FlagSet) { fs.Int("partitions", 2, "") }})
	err := host.RegisterFlags(fs, clash)
	if err == nil || !strings.Contains(err.Error(), "--partitions (module x; already defined by the binary bin)") {
		t.Fatalf("got %v", err)
	}
	fs = flag.NewFlagSet("bin", flag.ContinueOnError)
	y := host.Define(host.Module{Name: "y", Flags: func(fs *flag.FlagSet) { fs.Int("x-cap", 2, "") }})
	err = host.RegisterFlags(fs, counter("x"), y)
	if err == nil || !strings.Contains(err.Error(), "--x-cap (module y; already defined by module x)") {
		t.Fatalf("got %v", err)
	}
	fs = flag.NewFlagSet("bin", flag.ContinueOnError)
	if err := host.RegisterFlags(fs, counter("x"), counter("z")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--x-cap", "3", "--z-cap", "4"}); err != nil {
		t.Fatal(err)
	}
}

// A module's declaration extends the base; a base that already declares the
// module's topic differently is refused.
func TestComposeAddsDeclarations(t *testing.T) {
	base := &topology.Topology{Name: "t", KeyedPartitions: 6}
	m := host.Define(host.Module{Name: "m", Declares: topology.Extension{
		Topics: []topology.Topic{{Name: "m-table", Key: "device_id", Value: "x", Cleanup: topology.CleanupCompact}},
	}})
	got, err := host.Compose(base, m)
	if err != nil {
		t.Fatal(err)
	}
	tp, ok := got.Topic("m-table")
	if !ok || tp.Partitions != 6 {
		t.Fatalf("m-table: %+v %v", tp, ok)
	}
	if _, ok := base.Topic("m-table"); ok {
		t.Error("Compose changed its base")
	}
}

// Two routes with one pattern are refused.
func TestDuplicateRouteIsRefused(t *testing.T) {
	r := host.Route{Pattern: "GET /v1/x/{id}"}
	err := host.Check([]host.Module{host.Define(host.Module{Name: "a", Routes: []host.Route{r}}), host.Define(host.Module{Name: "b", Routes: []host.Route{r}})})
	if err == nil || !strings.Contains(err.Error(), `route "GET /v1/x/{id}" is served by modules a and b`) {
		t.Fatalf("got %v", err)
	}
}

// RunAll gives every module the same group options and stops the others
// when one fails, naming it.
func TestRunAllStopsOnAFailure(t *testing.T) {
	seen := make(chan int, 2)
	ok := host.Define(host.Module{Name: "ok", Run: func(ctx context.Context, env host.Env) error {
		seen <- len(env.Group)
		<-ctx.Done()
		return nil
	}})
	bad := host.Define(host.Module{Name: "bad", Run: func(ctx context.Context, env host.Env) error {
		seen <- len(env.Group)
		return io.ErrUnexpectedEOF
	}})
	err := host.RunAll(context.Background(), host.Env{Group: []group.Opt{group.StateDir("x")}}, ok, bad)
	if err == nil || !strings.Contains(err.Error(), "bad: unexpected EOF") {
		t.Fatalf("got %v", err)
	}
	for range 2 {
		if n := <-seen; n != 1 {
			t.Errorf("a module got %d group options, want 1", n)
		}
	}
}

// A bad module flag is reported by the binary's flag parsing at once, with
// (not after) a missing --brokers or --state-dir, and every module's problem
// is reported, not the first.
func TestBadModuleFlagIsReportedAtOnce(t *testing.T) {
	t.Setenv("FENCESTREAM_BROKERS", "")
	capped := func(name string) host.Module {
		var n int
		return host.Define(host.Module{Name: name,
			Flags: func(fs *flag.FlagSet) { fs.IntVar(&n, name+"-cap", 1, "cap") },
			Validate: func() error {
				if n <= 0 {
					return fmt.Errorf("--%s-cap must be positive, got %d", name, n)
				}
				return nil
			}})
	}
	b := host.Binary{Name: "bin", Base: func(int32) *topology.Topology { return &topology.Topology{Name: "t"} },
		Modules: []host.Module{capped("a"), capped("b")}}
	err := b.Run(context.Background(), []string{"--a-cap", "0", "--b-cap", "-1"}, io.Discard, nil)
	if !errors.As(err, new(host.UsageError)) {
		t.Fatalf("got %v, want a UsageError", err)
	}
	for _, want := range []string{"a: --a-cap must be positive, got 0", "b: --b-cap must be positive, got -1", "--state-dir is required", "no brokers given"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Index(err.Error(), "--a-cap") > strings.Index(err.Error(), "--state-dir") {
		t.Errorf("the module's problem comes after the binary's: %q", err)
	}
}
