package host

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Module is one processor as binaries host it: what it declares, the flags it
// adds, how its groups run and the routes it serves. A processor package
// exports a function returning its Module (made with Define); a binary is the
// set of modules it links. Every field but Name is optional.
type Module struct {
	// Name identifies the module in errors and logs; unique in a binary.
	Name string
	// Declares is what the module adds to the binary's base topology: its
	// topics, processor declarations and boundaries (topology.Extend rules).
	// With Groups, a processor here says only what code cannot (Doc, Flows
	// narrower than the derived ones): its edges come from the handlers.
	Declares topology.Extension
	// Groups, if set, builds the module's groups (handlers registered, no
	// broker) on the topology composed so far: their processor
	// declarations are derived from what the handlers register
	// (group.Declarer), so no edge is written twice.
	Groups func(topo *topology.Topology) ([]group.Declarer, error)
	// Flags adds the module's own flags to fs, once per binary, before
	// parsing; the closure keeps the parsed values for Run. A flag two
	// modules (or a module and the binary) both define is refused.
	Flags func(fs *flag.FlagSet)
	// Validate checks the module's parsed flags before anything connects. A
	// binary reports its error at once, with any of its own flags' errors
	// (a missing --brokers or --state-dir does not hide it); name the flag
	// in the error, the binary prefixes the module's name.
	Validate func() error
	// Run builds the module's groups from env and runs them until ctx ends;
	// a clean stop returns nil.
	Run func(ctx context.Context, env Env) error
	// Routes are served by the query server (fenceview) of a binary that
	// links the module.
	Routes []Route
	// Describe, if set, draws the module's inside on the composed topology
	// topo, which shows only its groups and topics: text is printed after
	// topo.Describe() (a DSL app's groups and operators, as Kafka Streams'
	// Topology.describe()), mermaid is added to topo.Mermaid()'s flowchart
	// (subgraphs and edges only, naming a topic by topology.MermaidID, so
	// the whole stays one diagram). fencectl topology describe prints both.
	Describe func(topo *topology.Topology) (text, mermaid string, err error)

	origin string
}

// Define returns m marked with where it was defined (the caller's file and
// line), so a duplicate name names both places.
func Define(m Module) Module {
	m.origin = callerOrigin(2)
	return m
}

// Origin is where the module was defined ("" if not made with Define).
func (m Module) Origin() string { return m.origin }

func callerOrigin(skip int) string {
	_, file, line, ok := runtime.Caller(skip)
	if !ok {
		return "unknown"
	}
	return fmt.Sprintf("%s:%d", filepath.Join(filepath.Base(filepath.Dir(file)), filepath.Base(file)), line)
}

// Env is what a binary gives each module's Run.
type Env struct {
	Cluster cluster.Config
	// Topology is the binary's composed topology (Compose).
	Topology *topology.Topology
	Log      *slog.Logger
	// Registerer is where the module registers its metrics.
	Registerer prometheus.Registerer
	// Group is what the binary's flags imply for every group (state
	// directory, storage, standby, clock skew, metrics registry): pass it to
	// each Group.Processor or Group.Run, before the module's own options.
	Group []group.Opt
	// Started reports a processor once it is built, so that the binary's
	// readiness covers it; never nil.
	Started func(*group.Processor)
}

// Logger is env.Log, or slog.Default() when none is set (a module run
// directly, by a test or a benchmark).
func (e Env) Logger() *slog.Logger {
	if e.Log == nil {
		return slog.Default()
	}
	return e.Log
}

// Route is an HTTP route a module serves through the query server.
type Route struct {
	// Pattern is a net/http pattern such as "GET /v1/counts/{device}".
	Pattern string
	// Build makes the route's handler from the query server's cluster and
	// view options; run, if not nil, runs alongside the server (a view).
	Build func(env RouteEnv) (h http.Handler, run func(context.Context) error, err error)
}

// RouteEnv is what the query server gives a route's Build.
type RouteEnv struct {
	Cluster cluster.Config
	// View are the options every view of the query server takes (state
	// directory, partitions served).
	View []view.Opt
	Log  *slog.Logger
}

// ViewRoute serves pattern from a typed view of table: the view runs beside
// the server, the route answers 503 until it has recovered, then serve
// answers.
func ViewRoute[M any, PM codecs.Message[M]](pattern, table string, serve func(v *view.View[M, PM], w http.ResponseWriter, r *http.Request)) Route {
	return Route{Pattern: pattern, Build: func(env RouteEnv) (http.Handler, func(context.Context) error, error) {
		v, err := view.New[M, PM](env.Cluster, table, env.View...)
		if err != nil {
			return nil, nil, err
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !v.Recovered() {
				WriteNotReady(w, "view of "+table+" is recovering")
				return
			}
			serve(v, w, r)
		})
		return h, v.Run, nil
	}}
}

// Check refuses a module set with a duplicate name (naming both origins),
// an empty name, or two routes with one pattern.
func Check(mods []Module) error {
	byName := map[string]Module{}
	routes := map[string]string{}
	var errs []error
	for _, m := range mods {
		if m.Name == "" {
			errs = append(errs, fmt.Errorf("a module defined at %s has no name", orUnknown(m.origin)))
			continue
		}
		if prev, ok := byName[m.Name]; ok {
			errs = append(errs, fmt.Errorf("module %s is linked twice: defined at %s and at %s", m.Name, orUnknown(prev.origin), orUnknown(m.origin)))
			continue
		}
		byName[m.Name] = m
		for _, r := range m.Routes {
			if prev, ok := routes[r.Pattern]; ok {
				errs = append(errs, fmt.Errorf("route %q is served by modules %s and %s", r.Pattern, prev, m.Name))
				continue
			}
			routes[r.Pattern] = m.Name
		}
	}
	return errors.Join(errs...)
}

func orUnknown(origin string) string {
	if origin == "" {
		return "an unknown place (not made with host.Define)"
	}
	return origin
}

// Compose returns base extended by every module's declaration (base is not
// changed), after Check. Topics go first; then each module's groups are
// built on them and their declarations derived (Module.Groups), merged with
// what Declares says of them; then processors and boundaries are added and
// the whole validated, so a derived re-key without a Boundary is refused
// here, before anything runs.
func Compose(base *topology.Topology, mods ...Module) (*topology.Topology, error) {
	if err := Check(mods); err != nil {
		return nil, err
	}
	t := base.Clone()
	topics := make([]topology.Extension, 0, len(mods))
	for _, m := range mods {
		if len(m.Declares.Topics) > 0 {
			topics = append(topics, topology.Extension{Name: m.Name, Topics: m.Declares.Topics})
		}
	}
	if err := t.Extend(topics...); err != nil {
		return nil, err
	}
	rest := make([]topology.Extension, 0, len(mods))
	for _, m := range mods {
		procs, err := derive(t, m)
		if err != nil {
			return nil, err
		}
		if len(procs)+len(m.Declares.Boundaries) == 0 {
			continue
		}
		rest = append(rest, topology.Extension{Name: m.Name, Processors: procs, Boundaries: m.Declares.Boundaries})
	}
	if err := t.Extend(rest...); err != nil {
		return nil, err
	}
	return t, nil
}

// derive is m's processor declarations: Declares' as written, and for each
// group Groups builds, the derived one with Declares' Doc and Flows.
func derive(t *topology.Topology, m Module) ([]topology.Processor, error) {
	procs := slices.Clone(m.Declares.Processors)
	if m.Groups == nil {
		return procs, nil
	}
	gs, err := m.Groups(t)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", m.Name, err)
	}
	for _, g := range gs {
		p, err := g.Declaration()
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name, err)
		}
		i := slices.IndexFunc(procs, func(q topology.Processor) bool { return q.Group == p.Group })
		if i < 0 {
			procs = append(procs, p)
			continue
		}
		q := procs[i]
		if len(q.Streams)+len(q.Emits)+len(q.Joins)+len(q.Lookups) > 0 || q.Loop != "" || q.Timers != "" || q.Table != "" {
			return nil, fmt.Errorf("module %s: group %s's edges are derived from its handlers, so Declares must not list them (Streams, Emits, Table, Loop, Joins, Lookups, Timers); keep only Doc, Flows and Broadcast", m.Name, p.Group)
		}
		// Broadcast inputs are read outside the group (a follower), so only
		// Declares can say them.
		p.Doc, p.Flows, p.Broadcast = q.Doc, q.Flows, q.Broadcast
		procs[i] = p
	}
	return procs, nil
}

// RegisterFlags adds every module's flags to fs. A flag name defined twice
// (by two modules, or by a module and the binary) is an error naming both.
func RegisterFlags(fs *flag.FlagSet, mods ...Module) error {
	owner := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { owner[f.Name] = "the binary " + fs.Name() })
	for _, m := range mods {
		if m.Flags == nil {
			continue
		}
		scratch := flag.NewFlagSet(m.Name, flag.ContinueOnError)
		m.Flags(scratch)
		var clash []string
		scratch.VisitAll(func(f *flag.Flag) {
			if prev, ok := owner[f.Name]; ok {
				clash = append(clash, fmt.Sprintf("--%s (module %s; already defined by %s)", f.Name, m.Name, prev))
			}
		})
		if len(clash) > 0 {
			return fmt.Errorf("flags defined twice: %s", strings.Join(clash, ", "))
		}
		m.Flags(fs)
		scratch.VisitAll(func(f *flag.Flag) { owner[f.Name] = "module " + m.Name })
	}
	return nil
}

// ValidateFlags runs every module's Validate and joins what they report,
// each prefixed with its module's name. Binaries run it before, and apart
// from, their own flags' checks, so that a bad module flag is reported
// even when --brokers or --state-dir is missing too.
func ValidateFlags(mods ...Module) error {
	var errs []error
	for _, m := range mods {
		if m.Validate == nil {
			continue
		}
		if err := m.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
		}
	}
	return errors.Join(errs...)
}

// RunAll runs every module with a Run until ctx ends or one fails (which
// stops the others); each module's log is env.Log with component=name.
func RunAll(ctx context.Context, env Env, mods ...Module) error {
	if env.Started == nil {
		env.Started = func(*group.Processor) {}
	}
	if env.Log == nil {
		env.Log = slog.Default()
	}
	if env.Registerer == nil {
		env.Registerer = prometheus.DefaultRegisterer
	}
	eg, ctx := errgroup.WithContext(ctx)
	for _, m := range mods {
		if m.Run == nil {
			continue
		}
		menv := env
		menv.Log = env.Log.With("component", m.Name)
		menv.Group = slices.Clone(env.Group)
		eg.Go(func() error {
			if err := m.Run(ctx, menv); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			return nil
		})
	}
	return eg.Wait()
}

// Routes lists every route of mods, in module order.
func Routes(mods ...Module) []Route {
	var rs []Route
	for _, m := range mods {
		rs = append(rs, m.Routes...)
	}
	return rs
}

// RunProcessors runs procs until ctx ends, each only once gate is closed (nil:
// at once; a catalogue the handlers need loaded, say), and once every one is
// ready logs "<name> ready" and hands each to env.Started. A clean stop
// returns nil.
func RunProcessors(ctx context.Context, env Env, name string, gate <-chan struct{}, procs ...*group.Processor) error {
	eg, ctx := errgroup.WithContext(ctx)
	wait := func() bool {
		if gate == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-gate:
			return true
		}
	}
	for _, p := range procs {
		eg.Go(func() error {
			if !wait() {
				return nil
			}
			return p.Run(ctx)
		})
	}
	eg.Go(func() error {
		if !wait() {
			return nil
		}
		for _, p := range procs {
			if p.WaitForReadyContext(ctx) != nil {
				return nil // ctx ended or the processor failed; its goroutine reports that
			}
		}
		if env.Log != nil {
			env.Log.Info(name + " ready")
		}
		if env.Started != nil {
			for _, p := range procs {
				env.Started(p)
			}
		}
		return nil
	})
	return eg.Wait()
}
