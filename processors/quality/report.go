package quality

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as aligned text tables: per parked workload,
// one block per score with a row per distance band and a column per
// detector; then the moving fleet.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i := range r.Parked {
		r.writeParked(tw, &r.Parked[i])
	}
	if m := r.Moving; m != nil {
		fmt.Fprintf(tw, "Moving fleet: %d devices over the demo fences, noise σ %g m per axis, accuracy %g m, %d true transitions, seed %d\n",
			m.Devices, m.NoiseM, m.NoiseM, m.Transitions, r.Seed)
		fmt.Fprintln(tw, "detector\tdetected\tmissed\tspurious\tfinal wrong\tdelay p50 s\tp95 s\tmax s\t")
		for _, name := range r.Detectors {
			s, ok := m.Scores[name]
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", name, s.Detected, s.Missed, s.Spurious, s.FinalWrong,
				secs(s.DelayP50S), secs(s.DelayP95S), secs(s.DelayMaxS))
		}
	}
	return tw.Flush()
}

func (r *Report) writeParked(tw *tabwriter.Writer, p *ParkedWorkload) {
	first := p.Scores[r.Detectors[0]]
	fmt.Fprintf(tw, "Parked: %d devices (%d within %d m of the edge), noise σ %g m per axis, accuracy %g m, %d fixes at 1 Hz, seed %d\n",
		p.Devices, first.Near.Devices, nearM, p.NoiseM, p.AccuracyM, p.Fixes, r.Seed)
	header := func(title string) {
		fmt.Fprintf(tw, "%s\tdevices\t%s\t\n", title, strings.Join(r.Detectors, "\t"))
	}
	type row struct {
		name  string
		score func(s *ParkedScores) *Score
	}
	var rows []row
	for i, b := range p.Bands {
		rows = append(rows, row{"  " + b, func(s *ParkedScores) *Score { return &s.Bands[i] }})
	}
	rows = append(rows,
		row{fmt.Sprintf("  within %d m", nearM), func(s *ParkedScores) *Score { return &s.Near }},
		row{"  all", func(s *ParkedScores) *Score { return &s.All }})
	block := func(title string, include func(*Score) bool, cell func(name string, s *Score) string) {
		header(title)
		for _, rw := range rows {
			sc := rw.score(first)
			if !include(sc) {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d", rw.name, sc.Devices)
			for _, name := range r.Detectors {
				fmt.Fprintf(tw, "\t%s", cell(name, rw.score(p.Scores[name])))
			}
			fmt.Fprint(tw, "\t\n")
		}
	}
	all := func(*Score) bool { return true }
	hasInside := func(s *Score) bool { return s.Inside > 0 }
	hasOutside := func(s *Score) bool { return s.Inside < s.Devices }
	block("final state correct", all, func(_ string, s *Score) string { return pct(s.Correct, s.Devices) })
	block("recall (inside, entered)", hasInside, func(_ string, s *Score) string { return pct(s.Entered, s.Inside) })
	block("false ENTERs (outside)", hasOutside, func(_ string, s *Score) string { return fmt.Sprint(s.FalseEnters) })
	block("flapping devices (>1 trigger)", all, func(name string, s *Score) string {
		if name == MeanBound {
			return "-"
		}
		return fmt.Sprint(s.Flapping)
	})
	block("delay to ENTER p50/p90/p95 s", hasInside, func(_ string, s *Score) string {
		if s.DelayP50S < 0 {
			return "-"
		}
		return fmt.Sprintf("%s/%s/%s", secs(s.DelayP50S), secs(s.DelayP90S), secs(s.DelayP95S))
	})
	near := func(s *Score) bool { return s == &first.Near }
	block("triggers / true transitions", near, func(name string, s *Score) string {
		if s.Inside == 0 || name == MeanBound {
			return "-"
		}
		return fmt.Sprintf("%d/%d=%.2f", s.Triggers, s.Inside, float64(s.Triggers)/float64(s.Inside))
	})
	block("devices with a second ENTER", near, func(name string, s *Score) string {
		if name == MeanBound {
			return "-"
		}
		return fmt.Sprint(s.SecondEnters)
	})
	fmt.Fprintln(tw)
}

func pct(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

func secs(s float64) string {
	if s < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", s)
}

// WriteScenarioTable writes one block per scenario: a row per score, a
// column per detector.
func WriteScenarioTable(w io.Writer, seed int64, results []ScenarioResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range results {
		var names []string
		for _, d := range Detectors() {
			if _, ok := r.Scores[d]; ok {
				names = append(names, d)
			}
		}
		fmt.Fprintf(tw, "Scenario %s: %d devices, seed %d: %s\n", r.Name, r.Devices, seed, r.Description)
		fmt.Fprintf(tw, "\t%s\t\n", strings.Join(names, "\t"))
		row := func(title string, cell func(s *ScenarioScore) string) {
			fmt.Fprint(tw, title)
			for _, n := range names {
				fmt.Fprintf(tw, "\t%s", cell(r.Scores[n]))
			}
			fmt.Fprint(tw, "\t\n")
		}
		bands := func(v []int) string {
			parts := make([]string, len(v))
			for i, n := range v {
				parts[i] = fmt.Sprint(n)
			}
			return strings.Join(parts, "/")
		}
		row("  final state correct", func(s *ScenarioScore) string { return pct(s.Correct, s.Devices) })
		row("  false ENTER devices "+strings.Join(ScenarioBands(), "/"), func(s *ScenarioScore) string { return bands(s.FalseEnters) })
		row("  second ENTER devices "+strings.Join(ScenarioBands(), "/"), func(s *ScenarioScore) string { return bands(s.SecondEnters) })
		row("  missed / owed transitions", func(s *ScenarioScore) string { return fmt.Sprintf("%d/%d", s.Missed, s.Owed) })
		row("  ENTER delay p50/p90 s", func(s *ScenarioScore) string {
			if s.DelayP50S < 0 {
				return "-"
			}
			return fmt.Sprintf("%s/%s", secs(s.DelayP50S), secs(s.DelayP90S))
		})
		row("  ENTER delay p90 s "+strings.Join(ScenarioBands(), "/"), func(s *ScenarioScore) string {
			parts := make([]string, len(s.DelayP90ByBandS))
			for i, v := range s.DelayP90ByBandS {
				parts[i] = secs(v)
			}
			return strings.Join(parts, "/")
		})
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
