package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestQualityUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"quality", "--help"}, exitOK, "Usage: fencectl quality"},
		{[]string{"quality", "--format", "xml"}, exitUsage, "--format must be table or json"},
		{[]string{"quality", "--noise", "5,x"}, exitUsage, `--noise: "x" is not a number`},
		{[]string{"quality", "--noise", "-1"}, exitUsage, "noise -1 m"},
		{[]string{"quality", "--fixes", "0"}, exitUsage, "--fixes must be at least 1"},
		{[]string{"quality", "extra"}, exitUsage, "unexpected arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := fencectl(t, tc.args...)
			wantCode(t, code, tc.code, out, errs)
			wantContains(t, out+errs, tc.want)
		})
	}
}

// The table names every detector and band; the JSON carries the same scores.
func TestQuality(t *testing.T) {
	args := []string{"quality", "--devices", "200", "--noise", "5", "--accuracy", "1", "--moving", "4"}
	code, out, errs := fencectl(t, args...)
	wantCode(t, code, exitOK, out, errs)
	for _, want := range []string{"raw", "consec5", "n3+hyst5m", "strict", "sprt", "mean-all",
		"inside 0-2 m", "outside 10-20 m", "final state correct", "recall", "false ENTERs", "flapping", "delay to ENTER",
		"Moving fleet: 4 devices"} {
		wantContains(t, out, want)
	}
	code, out, errs = fencectl(t, append(args, "--format", "json")...)
	wantCode(t, code, exitOK, out, errs)
	var r struct {
		Parked []struct {
			Scores map[string]struct {
				Near struct{ Devices, Correct int }
			}
		}
		Moving struct{ Transitions int }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if len(r.Parked) != 1 || r.Parked[0].Scores["sprt"].Near.Devices == 0 || r.Moving.Transitions == 0 {
		t.Fatalf("JSON report lacks scores: %s", out[:min(len(out), 500)])
	}
}

// --scenarios runs issue 20's scenarios instead of the grid.
func TestQualityScenarios(t *testing.T) {
	code, out, errs := fencectl(t, "quality", "--scenarios", "road,tunnel", "--devices", "30")
	wantCode(t, code, exitOK, out, errs)
	for _, want := range []string{"Scenario road: 30 devices", "Scenario tunnel: 30 devices", "sprt-v1", "false ENTER devices", "missed / owed", "ENTER delay p50/p90"} {
		wantContains(t, out, want)
	}
	code, out, errs = fencectl(t, "quality", "--scenarios", "nope")
	wantCode(t, code, exitUsage, out, errs)
	wantContains(t, errs, `unknown scenario "nope"`)
}
