package group_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The kit knows nothing of geofencing: none of its packages imports, even
// indirectly, the geofence schema or an application package.
func TestKitImportsNoApplication(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	kit := []string{"./processors/group/...", "./processors/statestore/...", "./topology/...", "./codecs", "./codecs/kitpb"}
	cmd := exec.Command("go", append([]string{"list", "-deps"}, kit...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	app := []string{"/codecs/geofencepb", "/codecs/visitspb", "/processors/geofence", "/processors/fences",
		"/processors/debounce", "/processors/occupancy", "/processors/fleet", "/processors/fenceview", "/processors/visits", "/processors/devicestats"}
	for _, pkg := range strings.Fields(string(out)) {
		for _, a := range app {
			if strings.HasPrefix(pkg, "github.com/fencestream/fencestream"+a) {
				t.Errorf("the kit depends on %s", pkg)
			}
		}
	}
}
