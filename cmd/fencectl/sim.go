package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology/hlc"
	"github.com/fencestream/fencestream/topology/produce"
)

// fleetFlags are the simulator's shape flags, shared by sim and sim misorder.
type fleetFlags struct {
	devices, parked int
	rate, noise     float64
	seed            int64
	duration        time.Duration
	fencesFile      string
}

func (f *fleetFlags) register(fs *flag.FlagSet, devices, parked int, duration time.Duration) {
	fs.IntVar(&f.devices, "devices", devices, "moving devices (veh-0001, ...)")
	fs.IntVar(&f.parked, "parked", parked, "devices parked near fence edges (park-0001, ...)")
	fs.Float64Var(&f.rate, "rate", 1, "pings per second per device")
	fs.Float64Var(&f.noise, "noise", fleet.DefaultNoiseSigmaM, "GPS noise sigma in metres")
	fs.Int64Var(&f.seed, "seed", 1, "random seed: the same seed and flags give the same pings and truth")
	fs.DurationVar(&f.duration, "duration", duration, "simulated time span (0: forever, routes repeat in laps)")
	fs.StringVar(&f.fencesFile, "fences", "", "GeoJSON FeatureCollection to drive through (default: the bundled demo set)")
}

func (f *fleetFlags) validate() error {
	switch {
	case f.devices < 0 || f.parked < 0:
		return fmt.Errorf("--devices and --parked must be >= 0, got %d and %d", f.devices, f.parked)
	case f.devices+f.parked == 0:
		return errors.New("no devices: set --devices or --parked")
	case !(f.rate > 0) || f.rate > 1000:
		return fmt.Errorf("--rate must be in (0, 1000] pings per second, got %v", f.rate)
	case !(f.noise >= 0) || f.noise > 10000:
		return fmt.Errorf("--noise must be a distance in metres >= 0, got %v", f.noise)
	case f.duration < 0:
		return fmt.Errorf("--duration must be >= 0, got %v", f.duration)
	}
	return nil
}

// interval is the ping interval of one device.
func (f *fleetFlags) interval() time.Duration {
	return max(time.Millisecond, time.Duration(float64(time.Second)/f.rate))
}

func (f *fleetFlags) config() fleet.Config {
	return fleet.Config{
		Seed:        f.seed,
		Moving:      f.devices,
		Parked:      f.parked,
		NoiseSigmaM: f.noise,
		Interval:    f.interval(),
		Duration:    f.duration,
	}
}

func (f *fleetFlags) fences() ([]fences.Fence, error) {
	if f.fencesFile == "" {
		return fences.Demo(), nil
	}
	data, err := os.ReadFile(f.fencesFile)
	if err != nil {
		return nil, fmt.Errorf("reading fence file: %w", err)
	}
	fs, err := fences.ParseFences(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.fencesFile, err)
	}
	return fs, nil
}

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "misorder" {
		return runSimMisorder(args[1:], stdout, stderr)
	}
	c := newCommand("sim", "sim --brokers B [--devices N --parked N --rate HZ --noise M --seed S --duration D --truth FILE]",
		`Runs the seeded fleet simulator and produces its pings to the pings topic, keyed by
device_id through the key-discipline producer (HLC stamped, keys validated, hot keys
reported). Event time starts now and, at --pace 1, advances in real time. With --duration 0
it runs until interrupted. --truth writes the ground truth (true transitions, parked
devices) as JSON. "fencectl sim misorder" compares keying strategies without a broker.`)
	var kf kafkaFlags
	kf.register(c.fs)
	var ff fleetFlags
	ff.register(c.fs, 50, 10, 0)
	pace := c.fs.Float64("pace", 1, "simulated seconds per wall-clock second (0: as fast as the broker takes them)")
	keying := c.fs.String("keying", "device", "record key: device (the only keying the pings topic allows); fence, pair, round-robin and null exist for \"sim misorder\"")
	truthFile := c.fs.String("truth", "", "write the ground truth as JSON to this file")
	partitions := partitionsFlag(c.fs)
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageErr(stderr, "unexpected arguments %q", pos)
	}
	if err := ff.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	if !(*pace >= 0) {
		return c.usageErr(stderr, "--pace must be >= 0, got %v", *pace)
	}
	k, err := fleet.ParseKeying(*keying)
	if err != nil {
		return c.usageErr(stderr, "--keying: %v", err)
	}
	if k != fleet.KeyDevice {
		return c.usageErr(stderr, "--keying %s: the pings topic requires key = device_id (the debouncer needs each device's pings in order); to compare keying strategies run \"fencectl sim misorder\"", k)
	}
	if err := checkPartitions(*partitions); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	fs, err := ff.fences()
	if err != nil {
		return c.fail(stderr, err)
	}
	cfg := ff.config()
	cfg.Pace = *pace
	now := time.Now()
	cfg.Start = now
	if *pace == 0 && ff.duration > 0 {
		cfg.Start = now.Add(-ff.duration) // the whole span lies in the past, ending now
	}
	sim, err := fleet.New(cfg, fs)
	if err != nil {
		return c.fail(stderr, err)
	}
	if *truthFile != "" {
		if err := writeTruth(*truthFile, sim); err != nil {
			return c.fail(stderr, err)
		}
		log.Info("ground truth written", "file", *truthFile, "transitions", len(sim.Truth().Transitions))
	}

	kc, adm, err := kf.connect(ctx)
	if err != nil {
		return c.fail(stderr, err)
	}
	err = requireTopic(ctx, adm, kf, geofence.TopicPings)
	kc.Close()
	if err != nil {
		return c.fail(stderr, err)
	}
	topo := geofence.Topology(geofence.Partitions(int32(*partitions)))
	prod, err := produce.New[pb.Ping](kf.cl, topo.MustTopic(geofence.TopicPings),
		produce.HLC(hlc.New(nil)), produce.Logger(log))
	if err != nil {
		return c.fail(stderr, err)
	}
	log.Info("simulating", "devices", ff.devices, "parked", ff.parked, "interval", cfg.Interval, "seed", ff.seed,
		"duration", ff.duration, "pace", *pace, "brokers", kf.brokers())
	st, err := streamPings(ctx, sim, prod, log)
	if cerr := prod.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing producer: %w", cerr)
	}
	fmt.Fprintf(stdout, "sent %d pings of %d devices to %s, simulated %v\n", st.sent, ff.devices+ff.parked, geofence.TopicPings, st.simulated.Round(time.Millisecond))
	if err != nil {
		return c.fail(stderr, err)
	}
	return exitOK
}

type streamStats struct {
	sent      int64
	simulated time.Duration
}

// streamPings produces the simulator's pings until it ends or ctx does (a clean
// stop). Delivery is confirmed in order by a second goroutine, which bounds the
// records in flight.
func streamPings(ctx context.Context, sim *fleet.Sim, prod *produce.Producer[pb.Ping, *pb.Ping], log *slog.Logger) (streamStats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waits := make(chan func() error, 8192)
	var (
		sent, acked atomic.Int64
		lastMs      atomic.Int64
		errOnce     sync.Once
		firstErr    error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for w := range waits {
			if err := w(); err != nil {
				fail(err)
				continue
			}
			acked.Add(1)
		}
	})
	wg.Go(func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		prev, prevT := int64(0), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				n := acked.Load()
				log.Info("progress", "pings", n, "pings_per_s", fmt.Sprintf("%.0f", float64(n-prev)/now.Sub(prevT).Seconds()),
					"event_time", time.UnixMilli(lastMs.Load()).UTC().Format(time.RFC3339))
				prev, prevT = n, now
			}
		}
	})
	start := sim.Config().Start.UnixMilli()
	err := sim.Stream(ctx, func(p *pb.Ping) bool {
		wait, err := prod.EmitAsync(p.GetDeviceId(), p)
		if err != nil {
			fail(err)
			return false
		}
		lastMs.Store(p.GetDeviceTimeMs())
		sent.Add(1)
		select {
		case waits <- wait:
			return true
		case <-ctx.Done():
			return false
		}
	})
	close(waits)
	cancel()
	wg.Wait()
	if firstErr != nil {
		err = firstErr
	} else if errors.Is(err, context.Canceled) {
		err = nil
	}
	var simulated time.Duration
	if sent.Load() > 0 {
		simulated = time.Duration(lastMs.Load()-start)*time.Millisecond + sim.Config().Interval
	}
	return streamStats{sent: acked.Load(), simulated: simulated}, err
}

// truthJSON is the ground-truth file format.
type truthJSON struct {
	Seed        int64                    `json:"seed"`
	StartMs     int64                    `json:"start_ms"`
	IntervalMs  int64                    `json:"interval_ms"`
	SpanMs      int64                    `json:"span_ms"`
	Devices     []string                 `json:"devices"`
	Transitions []transitionJSON         `json:"transitions"`
	FinalInside map[string][]string      `json:"final_inside"`
	Parked      map[string]parkedJSONRow `json:"parked"`
}

type transitionJSON struct {
	DeviceID string `json:"device_id"`
	FenceID  string `json:"fence_id"`
	Type     string `json:"type"`
	TimeMs   int64  `json:"time_ms"`
}

type parkedJSONRow struct {
	FenceID   string  `json:"fence_id"`
	Inside    bool    `json:"inside"`
	DistanceM float64 `json:"distance_m"`
}

func writeTruth(path string, sim *fleet.Sim) error {
	t := sim.Truth()
	cfg := sim.Config()
	out := truthJSON{
		Seed: cfg.Seed, StartMs: cfg.Start.UnixMilli(), IntervalMs: cfg.Interval.Milliseconds(), SpanMs: sim.Span().Milliseconds(),
		Devices: sim.Devices(), Transitions: make([]transitionJSON, len(t.Transitions)),
		FinalInside: t.FinalInside, Parked: map[string]parkedJSONRow{},
	}
	for i, tr := range t.Transitions {
		out.Transitions[i] = transitionJSON{DeviceID: tr.DeviceID, FenceID: tr.FenceID,
			Type: strings.TrimPrefix(tr.Type.String(), "TRIGGER_TYPE_"), TimeMs: tr.TimeMs}
	}
	for id, p := range t.Parked {
		out.Parked[id] = parkedJSONRow{FenceID: p.FenceID, Inside: p.Inside, DistanceM: p.DistanceM}
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing truth: %w", err)
	}
	return nil
}

func runSimMisorder(args []string, stdout, stderr io.Writer) int {
	c := newCommand("sim misorder", "sim misorder [--seed S --devices N --duration D --partitions P --consumers C]",
		`Replays the simulator's true transitions as triggers under each keying strategy (device_id,
fence_id, device|fence pair, round-robin, null) through P partitions and C consumers, and
prints misordered pairs per million (consecutive triggers of one device consumed out of
order) and partition skew (max/mean). device_id keying gives 0. No broker is needed.`)
	var ff fleetFlags
	ff.register(c.fs, 200, 50, 30*time.Minute)
	partitions := partitionsFlag(c.fs)
	consumers := c.fs.Int("consumers", 8, "consumers sharing the partitions")
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageErr(stderr, "unexpected arguments %q", pos)
	}
	if err := ff.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	if ff.duration == 0 {
		return c.usageErr(stderr, "--duration must be positive for misorder")
	}
	if err := checkPartitions(*partitions); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	if *consumers <= 0 {
		return c.usageErr(stderr, "--consumers must be positive, got %d", *consumers)
	}
	fs, err := ff.fences()
	if err != nil {
		return c.fail(stderr, err)
	}
	sim, err := fleet.New(ff.config(), fs)
	if err != nil {
		return c.fail(stderr, err)
	}
	trigs := sim.Truth().Triggers()
	fmt.Fprintf(stdout, "seed %d: %d true transitions of %d devices over %v; %d partitions, %d consumers\n",
		ff.seed, len(trigs), ff.devices+ff.parked, ff.duration, *partitions, *consumers)
	if len(trigs) == 0 {
		fmt.Fprintln(stdout, "no transitions: add --devices or --duration")
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "KEYING\tMISORDERED PAIRS / 1M\tSKEW\t")
	for _, k := range fleet.Keyings() {
		mis, skew := fleet.MeasureMisordering(trigs, k, int32(*partitions), *consumers, ff.seed)
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t\n", k, mis, skew)
	}
	tw.Flush()
	return exitOK
}
