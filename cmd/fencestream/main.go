// Command fencestream runs the whole geofencing pipeline in one process: an
// embedded Kafka-protocol broker (or --brokers), the declared topics, the demo
// fences, the debouncer, occupancy, visits, the fenceview web page and API, and a
// simulated fleet feeding pings in real time.
//
//	go run ./cmd/fencestream
//
// Data lives under --data (default ./data): the broker's log in data/broker,
// Goka's local state in data/state and the simulator's position in
// data/sim.json. Ctrl-C stops cleanly; running again resumes where it stopped.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/dirlock"
	"github.com/fencestream/fencestream/topology/embedded"
)

func main() {
	ctx, stop := host.SignalContext()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the process at once
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitMismatch = 3 // local state or topics do not match the broker
)

type options struct {
	cl          cluster.Config
	logs        host.LogFlags
	mapCfg      fenceview.MapConfig
	data        string
	brokerPort  int
	listen      string
	partitions  int
	resetState  bool
	noSim       bool
	devices     int
	parked      int
	rate        float64
	simWarmup   time.Duration
	noise       float64
	seed        int64
	progress    time.Duration
	timerEvery  time.Duration
	maxSkew     time.Duration
	recordCache int
	mods        []host.Module // every module the binary links (processors/modules)
	fences      *fences.Shared
	hotStandby  bool
	storage     statestore.Kind
	noDemoFence bool
	subsWrites  bool
	http        host.HTTPFlags
	brokerTLS   [2]string // cert, key files of the embedded broker
	brokerUsers []embedded.User
	dropSASL    bool
}

func (o *options) register(fs *flag.FlagSet) error {
	o.cl.ClientID = "fencestream"
	o.cl.RegisterFlags(fs)
	o.logs.Register(fs)
	o.http.Register(fs)
	o.mapCfg.RegisterFlags(fs)
	fs.StringVar(&o.data, "data", "data", "data directory: embedded broker in DATA/broker, Goka state in DATA/state, simulator position in DATA/sim.json")
	fs.StringVar(&o.brokerTLS[0], "broker-tls-cert", "", "the embedded broker serves TLS with this PEM certificate (needs --broker-tls-key); the processors trust it unless --tls-ca says otherwise")
	fs.StringVar(&o.brokerTLS[1], "broker-tls-key", "", "PEM private key of --broker-tls-cert")
	fs.Func("broker-sasl-user", "the embedded broker requires SASL and accepts MECHANISM:USER:PASSWORD (repeatable); the processors log in as the first unless --sasl-* say otherwise", func(v string) error {
		u, err := embedded.ParseUser(v)
		o.brokerUsers = append(o.brokerUsers, u)
		return err
	})
	fs.BoolVar(&o.dropSASL, "broker-drop-sasl", false, "start the embedded broker with no SASL user although it was served with some: it accepts anyone (without it such a start is refused)")
	fs.IntVar(&o.brokerPort, "broker-port", 9092, "port of the embedded broker on 127.0.0.1 (0: any free port); ignored with --brokers")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address of the web page and API (port 0: any free port; the URL is printed)")
	fs.IntVar(&o.partitions, "partitions", int(topology.DefaultPartitions), "partition count of the keyed topics (permanent once created)")
	fs.BoolVar(&o.resetState, "reset-state", false, "delete DATA/state before starting; it is rebuilt from the broker")
	fs.BoolVar(&o.noSim, "no-sim", false, "do not run the fleet simulator")
	fs.IntVar(&o.devices, "devices", 50, "simulated moving devices")
	fs.IntVar(&o.parked, "parked", 10, "simulated devices parked near fence edges")
	fs.Float64Var(&o.rate, "rate", 1, "pings per second per simulated device")
	fs.DurationVar(&o.simWarmup, "sim-warmup", 5*time.Minute, "on a first start, how long the simulated fleet has been out already: that much event time is sent at once, so triggers show within seconds")
	fs.Float64Var(&o.noise, "noise", 5, "GPS noise sigma of the simulator, metres")
	fs.Int64Var(&o.seed, "seed", 1, "simulator seed (a new seed starts new timelines)")
	fs.DurationVar(&o.progress, "progress", 5*time.Second, "interval of the progress line")
	fs.DurationVar(&o.maxSkew, "max-clock-skew", group.DefaultMaxSkew, "an input whose HLC is further ahead of this machine's clock is dead-lettered (future-hlc)")
	fs.DurationVar(&o.timerEvery, "timer-interval", group.DefaultTimerInterval, "how often every group looks for due timers (silence timeouts, window closes, expiries): a timer fires up to this late")
	fs.IntVar(&o.recordCache, "record-cache", group.DefaultRecordCache, "bytes of dirty table values each group keeps in memory, writing each key to its store and changelog once per commit interval (group.RecordCache; 0: off)")
	fs.TextVar(&o.storage, "storage", statestore.Default, statestore.FlagUsage)
	fs.BoolVar(&o.hotStandby, "hot-standby", false, "keep warm standby copies of the debouncer's and occupancy's state")
	fs.BoolVar(&o.subsWrites, "subscription-writes", false, "let fenceview's API write subscriptions: PUT/DELETE /v1/subscriptions/{id}, POST /v1/subscriptions/{id}/disable (default: read-only, those answer 405); the API has no authentication")
	fs.BoolVar(&o.noDemoFence, "no-demo-fences", false, "do not load the demo fences into an empty fences topic")
	// The modules' own flags (the debouncer's settings, occupancy's bounds):
	// one fence catalogue for all of them, fenceview and the simulator.
	o.fences = fences.NewShared(geofence.TopicFences)
	o.mods = modules.All(o.fences)
	return host.RegisterFlags(fs, o.mods...)
}

// validate reports the modules' flag problems with the first of the binary's
// own, so that a bad module flag is never hidden behind another mistake.
func (o *options) validate() error {
	return errors.Join(host.ValidateFlags(o.mods...), o.validateOwn())
}

func (o *options) validateOwn() error {
	if err := o.http.Validate(); err != nil {
		return err
	}
	if (o.brokerTLS[0] == "") != (o.brokerTLS[1] == "") {
		return errors.New("--broker-tls-cert and --broker-tls-key go together")
	}
	if o.dropSASL && len(o.brokerUsers) > 0 {
		return errors.New("--broker-drop-sasl and --broker-sasl-user contradict each other")
	}
	switch {
	case o.data == "":
		return errors.New("--data must not be empty")
	case o.partitions <= 0 || o.partitions > 1<<20:
		return fmt.Errorf("--partitions must be between 1 and %d, got %d", 1<<20, o.partitions)
	case o.brokerPort < 0 || o.brokerPort > 65535:
		return fmt.Errorf("--broker-port must be a port number, got %d", o.brokerPort)
	case o.progress <= 0:
		return fmt.Errorf("--progress must be positive, got %v", o.progress)
	case o.maxSkew <= 0:
		return fmt.Errorf("--max-clock-skew must be positive, got %v", o.maxSkew)
	case o.timerEvery <= 0:
		return fmt.Errorf("--timer-interval must be positive, got %v", o.timerEvery)
	case o.recordCache < 0:
		return fmt.Errorf("--record-cache must not be negative, got %d", o.recordCache)
	}
	if err := o.mapCfg.Validate(); err != nil {
		return err
	}
	if !o.noSim {
		switch {
		case o.devices < 0 || o.parked < 0 || o.devices+o.parked == 0:
			return fmt.Errorf("--devices and --parked must be >= 0 and not both 0 (or use --no-sim), got %d and %d", o.devices, o.parked)
		case !(o.rate > 0) || o.rate > 1000:
			return fmt.Errorf("--rate must be in (0, 1000] pings per second, got %v", o.rate)
		case !(o.noise >= 0) || o.noise > 10000:
			return fmt.Errorf("--noise must be >= 0 metres, got %v", o.noise)
		case o.simWarmup < 0 || o.simWarmup > 24*time.Hour:
			return fmt.Errorf("--sim-warmup must be between 0 and 24h, got %v", o.simWarmup)
		}
	}
	if len(o.cl.Brokers) > 0 {
		return o.cl.Validate()
	}
	return nil
}

func (o *options) stateDir() string  { return filepath.Join(o.data, "state") }
func (o *options) brokerDir() string { return filepath.Join(o.data, "broker") }
func (o *options) simFile() string   { return filepath.Join(o.data, "sim.json") }

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fencestream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	if err := o.register(fs); err != nil {
		fmt.Fprintf(stderr, "fencestream: %v\n", err)
		return exitFailure
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: fencestream [flags]

Runs the whole pipeline in one process: an embedded Kafka-protocol broker (unless
--brokers is given), the declared topics, the demo fences (into an empty fences
topic), the debouncer, occupancy, the web page and API, and a simulated fleet.
Ctrl-C stops it; running it again resumes from DATA.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fencestream: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "fencestream: %v\n", err)
		return exitUsage
	}
	log, err := o.logs.Logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fencestream: %v\n", err)
		return exitUsage
	}
	slog.SetDefault(log) // occupancy's lag reporter logs to the default logger

	err = runPipeline(ctx, &o, log, stdout)
	switch {
	case err == nil:
		log.Info("fencestream stopped")
		return exitOK
	case errors.Is(err, errBrokerDataGone):
		fmt.Fprintf(stderr, `
fencestream: refusing to start: the embedded broker's data in %s is gone,
but the local state in %s was kept.
The state was built from records that no longer exist anywhere, so it can be
neither matched to a new broker nor rebuilt from it. Start afresh by deleting
it (the devices' debounce state and the occupancy counts go with the broker's data):
  rm -rf %s
or run again with --reset-state, which does that for you.
`, o.brokerDir(), o.stateDir(), o.stateDir())
		return exitMismatch
	case errors.Is(err, statestore.ErrStateMismatch):
		fmt.Fprintf(stderr, `
fencestream: refusing to start: the local state in %s does not belong to the Kafka cluster at %s.
  %v
It was built from another cluster's records (%s was replaced, or --brokers
points elsewhere now), which this broker does not hold. Delete it; it is then
rebuilt from what this broker holds:
  rm -rf %s
or run again with --reset-state, which does that for you.
`, o.stateDir(), strings.Join(o.cl.Brokers, ","), err, o.brokerDir(), o.stateDir())
		return exitMismatch
	case errors.Is(err, topology.ErrMismatch):
		fmt.Fprintf(stderr, "fencestream: the broker's topics do not match the declared topology (--partitions %d):\n%v\n", o.partitions, err)
		return exitMismatch
	default:
		fmt.Fprintf(stderr, "fencestream: %v\n", err)
		return exitFailure
	}
}

func runPipeline(ctx context.Context, o *options, log *slog.Logger, stdout io.Writer) error {
	// One all-in-one per --data, locked before anything in it is read or
	// deleted (--reset-state included); the broker and state directories
	// inside take their own locks too.
	lock, err := dirlock.Acquire(o.data)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	defer func() { _ = lock.Release() }()
	if o.resetState {
		if err := os.RemoveAll(o.stateDir()); err != nil {
			return fmt.Errorf("--reset-state: %w", err)
		}
		log.Info("local state deleted; it is rebuilt from the broker", "dir", o.stateDir())
	}
	if err := os.MkdirAll(o.data, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	brokerNote := "external"
	if len(o.cl.Brokers) == 0 {
		if err := checkFreshBroker(o.brokerDir(), o.stateDir()); err != nil {
			return err
		}
		bopts := []embedded.Opt{embedded.DataDir(o.brokerDir()), embedded.Port(o.brokerPort)}
		if o.brokerTLS[0] != "" {
			t, err := embedded.TLSFiles(o.brokerTLS[0], o.brokerTLS[1])
			if err != nil {
				return err
			}
			bopts = append(bopts, t)
			if !o.cl.TLS {
				o.cl.TLS = true
				if o.cl.TLSCAFile == "" {
					o.cl.TLSCAFile = o.brokerTLS[0] // a certificate in the trust pool verifies itself
				}
			}
		}
		for _, u := range o.brokerUsers {
			bopts = append(bopts, u.Opt())
		}
		if o.dropSASL {
			bopts = append(bopts, embedded.DropSASL())
		}
		if len(o.brokerUsers) > 0 && o.cl.SASLMechanism == "" {
			u := o.brokerUsers[0]
			o.cl.SASLMechanism, o.cl.SASLUser, o.cl.SASLPassword = u.Mechanism, u.Name, u.Password
		}
		b, err := embedded.Start(bopts...)
		if errors.Is(err, embedded.ErrUsersMissing) {
			return fmt.Errorf("%w: give them again (--broker-sasl-user), or --broker-drop-sasl to accept anyone", err)
		}
		if err != nil {
			if o.brokerPort != 0 {
				err = fmt.Errorf("%w (is another Kafka listening on port %d? pass --broker-port 0 for any free port, or --brokers to use that Kafka)", err, o.brokerPort)
			}
			return err
		}
		// Closed last, after every client: a clean close flushes its log to disk.
		defer func() {
			b.Close()
			log.Info("embedded broker stopped", "data", b.DataDir())
		}()
		o.cl.Brokers = b.Addrs()
		brokerNote = "embedded, data in " + o.brokerDir()
		log.Info("embedded broker started", "addr", strings.Join(b.Addrs(), ","), "data", b.DataDir())
	}
	topo, err := host.Compose(modules.Base(int32(o.partitions)), o.mods...)
	if err != nil {
		return err
	}
	clusterID, err := group.CheckBroker(ctx, o.cl, topo, true)
	if err != nil {
		return err
	}
	// Before anything is loaded or announced: the processors would refuse
	// mismatched state too, but only after the banner and the demo fences.
	if err := checkStateCluster(o.stateDir(), clusterID); err != nil {
		return err
	}
	if !o.noDemoFence {
		if err := loadDemoIfEmpty(ctx, o.cl, log); err != nil {
			return err
		}
	}
	l, err := host.Listen(o.listen)
	if err != nil {
		return err
	}
	url := "http://" + l.Addr().String() + "/"
	printBanner(stdout, url, strings.Join(o.cl.Brokers, ","), brokerNote, o)

	g, gctx := errgroup.WithContext(ctx)
	// One fence catalogue for the debouncer, occupancy, fenceview and the
	// simulator: the first to follow it runs the follower.
	cat, catReady, follow := o.fences.Follow(o.cl, log.With("component", "fences"), prometheus.DefaultRegisterer)
	if follow != nil {
		g.Go(func() error { return follow(gctx) })
	}
	g.Go(func() error {
		vopts := []fenceview.Opt{
			fenceview.Partitions(int32(o.partitions)),
			fenceview.Topology(topo),
			fenceview.ModuleRoutes(host.Routes(o.mods...)...),
			fenceview.NoCreateTopics(),
			fenceview.Catalogue(cat, catReady),
			fenceview.StateDir(filepath.Join(o.stateDir(), "fenceview")), // a restart catches up
			fenceview.Logger(log.With("component", "fenceview")),
			fenceview.Map(o.mapCfg),
			fenceview.DebounceDefaults(debounce.DefaultSettings()), // the debouncer's, below
			fenceview.MaxStreams(o.http.MaxStreams),
			fenceview.HTTP(o.http.Opts()...),
		}
		if o.subsWrites {
			vopts = append(vopts, fenceview.WritableSubscriptions())
		}
		return fenceview.Run(gctx, o.cl, l, vopts...)
	})
	// Every linked module (processors/modules) runs with the same options.
	g.Go(func() error {
		return host.RunAll(gctx, host.Env{
			Cluster: o.cl, Topology: topo, Log: log, Registerer: prometheus.DefaultRegisterer,
			Group: []group.Opt{
				group.StateDir(o.stateDir()), group.Storage(o.storage),
				group.HotStandby(o.hotStandby), group.RecoverAhead(o.hotStandby),
				group.TimerInterval(o.timerEvery), group.MaxClockSkew(o.maxSkew), group.RecordCache(o.recordCache),
				group.Registerer(prometheus.DefaultRegisterer),
			},
		}, o.mods...)
	})
	sim := newSimulator(o, topo, cat, catReady, log.With("component", "simulator"))
	if !o.noSim {
		g.Go(func() error { return sim.run(gctx) })
	}
	kopts, err := o.cl.Kgo()
	if err != nil {
		return err
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", strings.Join(o.cl.Brokers, ","), err)
	}
	defer kc.Close()
	g.Go(func() error { return reportProgress(gctx, o.progress, sim, kadm.NewClient(kc), log) })
	err = g.Wait()
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func printBanner(w io.Writer, url, brokers, brokerNote string, o *options) {
	sim := fmt.Sprintf("%d moving + %d parked devices at %g Hz (seed %d)", o.devices, o.parked, o.rate, o.seed)
	if o.noSim {
		sim = "off (--no-sim)"
	}
	fmt.Fprintf(w, `
  fencestream is running

    web page   %s
    API        %sv1/fences
    Kafka      %s (%s)
    simulator  %s
    state      %s

  Try: curl -s '%sv1/fences?sort=count&order=desc&limit=5'
       go run ./cmd/fencectl skew pings --brokers %s
  Stop with Ctrl-C; run again to resume.

`, url, url, brokers, brokerNote, sim, o.stateDir(), url, brokers)
}

// loadDemoIfEmpty publishes the bundled demo fences when the fences topic has
// never held a record.
func loadDemoIfEmpty(ctx context.Context, cl cluster.Config, log *slog.Logger) error {
	kopts, err := cl.Kgo()
	if err != nil {
		return err
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", strings.Join(cl.Brokers, ","), err)
	}
	defer kc.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(kc).ListEndOffsets(cctx, geofence.TopicFences)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", geofence.TopicFences, err)
	}
	var held int64
	ends.Each(func(o kadm.ListedOffset) { held += o.Offset })
	if held > 0 {
		log.Info("fences topic already holds fences; demo set not loaded", "records", held)
		return nil
	}
	demo, err := fences.ParseFeatureCollection(fences.DemoGeoJSON())
	if err != nil {
		return fmt.Errorf("demo fences: %w", err)
	}
	codec := codecs.For[pb.Fence]()
	recs := make([]*kgo.Record, 0, len(demo))
	for _, f := range demo {
		if err := topology.ValidateKey(f.GetFenceId(), 0); err != nil {
			return fmt.Errorf("demo fence: %w", err)
		}
		v, err := codec.Marshal(f)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Topic: geofence.TopicFences, Key: []byte(f.GetFenceId()), Value: v})
	}
	if err := kc.ProduceSync(cctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("loading demo fences: %w", err)
	}
	log.Info("demo fences loaded", "fences", len(recs))
	return nil
}
