package main

import (
	"encoding/json"
	"testing"
)

// The crossings scenario runs alone (no ENTER scenario table) and in JSON
// carries its scores.
func TestQualityCrossings(t *testing.T) {
	args := []string{"quality", "--scenarios", "crossings", "--devices", "100"}
	code, out, errs := fencectl(t, args...)
	wantCode(t, code, exitOK, out, errs)
	for _, want := range []string{"Scenario crossings: 100 devices", "true crossings", "false crossings", "found, true chord >=100 m", "time error p50/p90"} {
		wantContains(t, out, want)
	}
	code, out, errs = fencectl(t, append(args, "--format", "json")...)
	wantCode(t, code, exitOK, out, errs)
	var r struct {
		Crossings struct {
			TrueCrossings int `json:"true_crossings"`
			Found         int `json:"found"`
		} `json:"crossings"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if r.Crossings.TrueCrossings == 0 || r.Crossings.Found == 0 {
		t.Fatalf("JSON report lacks crossing scores: %s", out[:min(len(out), 500)])
	}
}
