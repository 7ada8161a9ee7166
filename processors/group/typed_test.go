package group_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// compile builds a one-file program against this module (as an overlay file in
// a package that does not exist on disk) and returns the compiler's output.
func compile(t *testing.T, body string) (string, error) {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	virtual := filepath.Join(filepath.Dir(here), "zz_typecheck", "main.go")
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	prog := `package main

import (
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group"
)

var _ = testpb.Ping{}

func main() {
	var c *group.Context[testpb.DeviceState, *testpb.DeviceState]
	var out group.Out[testpb.Trigger, *testpb.Trigger]
	var loop group.LoopOut[testpb.Trigger, *testpb.Trigger]
	_, _, _ = c, out, loop
` + body + `
}
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{virtual: src}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", ov, "-o", os.DevNull, "./zz_typecheck")
	cmd.Dir = filepath.Dir(here)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Typed edges: an output declared for Trigger takes a *Trigger, and nothing
// else compiles; a context cannot emit to a topic by name.
func TestWrongTypeEmitDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler")
	}
	if out, err := compile(t, `out.Emit(c, "k", &testpb.Trigger{})
	loop.Send(c, "k", &testpb.Trigger{})`); err != nil {
		t.Fatalf("the right type does not compile: %v\n%s", err, out)
	}
	for _, tc := range []struct{ body, want string }{
		{`out.Emit(c, "k", &testpb.Ping{})`, "cannot use &testpb.Ping{}"},
		{`loop.Send(c, "k", &testpb.Fence{})`, "cannot use &testpb.Fence{}"},
		{`c.Emit("fence-triggers", "k", &testpb.Ping{})`, "c.Emit undefined"},
	} {
		out, err := compile(t, tc.body)
		if err == nil {
			t.Errorf("%s compiled", tc.body)
			continue
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s: compiler said %q, want %q", tc.body, out, tc.want)
		}
	}
}
