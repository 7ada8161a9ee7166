package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/fencestream/fencestream/processors/quality"
)

func runQuality(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("quality", "quality [--seed S] [--devices N] [--noise 2,5,10] [--accuracy 1,0.5] [--fixes N] [--moving N] [--format table|json] [--scenarios all|outliers,road,crossings,...]",
		`Scores trigger detectors against ground truth on seeded workloads, without a broker:
devices parked 0-20 m inside or outside a polygon edge (one workload per noise level and
accuracy ratio), and the moving fleet over the demo fences. Per distance band it prints
final-state correctness, recall, false ENTERs, flapping devices and delay to ENTER for a
raw point-in-polygon detector, 5 consecutive samples, 3 samples + 5 m exit hysteresis,
the debouncer's strict and sprt detectors, and the all-fixes bound (the mean of every
fix). With --scenarios it runs issue 20's scenarios instead (outliers, optimistic,
outliers+optimistic, road, tunnel, sparse-parked, sparse-moving; --devices each) and
prints, per scenario and detector, final-state correctness, devices with a false or a
second ENTER by distance band, missed transitions and the ENTER delay p50/p90. The
crossings scenario (in all) drives vehicles at 10-30 m/s past fences 50-300 m across
with a fix every 30-60 s and scores the debouncer's CROSS triggers: true crossings
found (by how far the true path ran inside), false crossings and the time error.
The same seed gives the same report on every machine.`)
	seed := c.fs.Int64("seed", 1, "seed of every workload")
	devices := c.fs.Int("devices", 2000, "parked devices per workload (half of them within 10 m of the edge)")
	noise := c.fs.String("noise", "2,5,10", "GPS noise levels, σ metres per axis, comma-separated")
	accuracy := c.fs.String("accuracy", "1,0.5", "reported accuracy as a multiple of the noise σ, comma-separated")
	fixes := c.fs.Int("fixes", 100, "fixes per parked device, at 1 Hz")
	moving := c.fs.Int("moving", 60, "devices of the moving fleet (0: none)")
	format := c.fs.String("format", "table", "output: table or json")
	scenarios := c.fs.String("scenarios", "", "run these scenarios (comma-separated, or all) instead of the parked grid and the moving fleet")
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageErr(stderr, "unexpected arguments %q", pos)
	}
	if *format != "table" && *format != "json" {
		return c.usageErr(stderr, "--format must be table or json, got %q", *format)
	}
	noises, err := floats(*noise)
	if err != nil {
		return c.usageErr(stderr, "--noise: %v", err)
	}
	ratios, err := floats(*accuracy)
	if err != nil {
		return c.usageErr(stderr, "--accuracy: %v", err)
	}
	if *devices < 1 || *fixes < 1 || *moving < 0 {
		return c.usageErr(stderr, "--devices and --fixes must be at least 1, --moving at least 0")
	}
	m := *moving
	if m == 0 {
		m = -1 // quality.Config: negative means no moving workload
	}
	if ctx.Err() != nil {
		return c.fail(stderr, ctx.Err())
	}
	if *scenarios != "" {
		var names []string
		if *scenarios != "all" {
			names = strings.Split(*scenarios, ",")
		}
		// crossings is scored apart (its triggers are CROSS); "all" runs it too.
		runCross := *scenarios == "all" || slices.Contains(names, quality.ScenarioCrossings)
		names = slices.DeleteFunc(names, func(n string) bool { return n == quality.ScenarioCrossings })
		var res []quality.ScenarioResult
		if *scenarios == "all" || len(names) > 0 {
			if res, err = quality.RunScenarios(*seed, *devices, names); err != nil {
				return c.usageErr(stderr, "%v", err)
			}
		}
		var cross *quality.CrossingResult
		if runCross {
			cr, err := quality.RunCrossings(*seed, *devices)
			if err != nil {
				return c.usageErr(stderr, "%v", err)
			}
			cross = &cr
		}
		if *format == "json" {
			err = json.NewEncoder(stdout).Encode(struct {
				Seed      int64                    `json:"seed"`
				Scenarios []quality.ScenarioResult `json:"scenarios"`
				Crossings *quality.CrossingResult  `json:"crossings,omitempty"`
			}{*seed, res, cross})
		} else {
			err = quality.WriteScenarioTable(stdout, *seed, res)
			if err == nil && cross != nil {
				err = quality.WriteCrossingTable(stdout, *seed, *cross)
			}
		}
		if err != nil {
			return c.fail(stderr, err)
		}
		return exitOK
	}
	r, err := quality.Run(quality.Config{Seed: *seed, Devices: *devices, Noise: noises, AccuracyRatio: ratios, Fixes: *fixes, Moving: m})
	if err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	if *format == "json" {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteTable(stdout)
	}
	if err != nil {
		return c.fail(stderr, err)
	}
	return exitOK
}

// floats parses a comma-separated list of numbers.
func floats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, v)
	}
	return out, nil
}
