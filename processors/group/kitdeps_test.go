package group_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// kitPackages is the kit: the processor kit's tree and the two foundations
// the repository's fixed top level gives it (topic declarations, the codec).
var kitPackages = []string{"./processors/group/...", "./topology/...", "./codecs"}

// kitMayImport is everything a kit package may import besides the standard
// library: the kit's own packages and the libraries it is built on. Anything
// else (an application package, a new library) fails the test until it is
// added here on purpose.
var kitMayImport = []string{
	"github.com/fencestream/fencestream/processors/group",
	"github.com/fencestream/fencestream/topology",
	"github.com/fencestream/fencestream/codecs",          // exactly: its schema sub-packages are applications'
	"github.com/fencestream/fencestream/codecs/hotkeypb", // except the producer's hot-key record
	"github.com/lovoo/goka",
	"github.com/IBM/sarama",
	"github.com/twmb/franz-go/pkg",
	"github.com/xdg-go/scram",
	"github.com/cockroachdb/pebble/v2",
	"github.com/syndtr/goleveldb/leveldb",
	"github.com/prometheus/client_golang/prometheus",
	"github.com/golang/protobuf/proto",
	"google.golang.org/protobuf",
	"golang.org/x/sync/errgroup",
	"golang.org/x/sys/unix", // statfs and access for the state directory watch
}

// The kit knows nothing of geofencing: each import of each kit package (its
// tests' imports aside) is on the allow-list.
func TestKitImportsNoApplication(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	cmd := exec.Command("go", append([]string{"list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{"\t"}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`}, kitPackages...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list found only %d kit packages:\n%s", len(lines), out)
	}
	for _, line := range lines {
		code, tests, _ := strings.Cut(line, "\t")
		f := strings.Fields(code)
		for _, imp := range f[1:] {
			if !kitAllows(imp) {
				t.Errorf("kit package %s imports %s, which is not on the kit's allow-list", f[0], imp)
			}
		}
		// The kit's tests run on the kit's own test schema (internal/testpb):
		// they may use any library, but nothing of the repository outside the kit.
		if f[0] != groupPath && !strings.HasPrefix(f[0], groupPath+"/") {
			continue // topology's and codecs' tests check the application's declaration and schema
		}
		for imp := range strings.FieldsSeq(tests) {
			if strings.HasPrefix(imp, modulePath) && !kitAllows(imp) {
				t.Errorf("the tests of kit package %s import %s: use processors/group/internal/testpb", f[0], imp)
			}
		}
	}
}

const (
	modulePath = "github.com/fencestream/fencestream/"
	groupPath  = modulePath + "processors/group"
)

func kitAllows(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	if !strings.Contains(first, ".") {
		return true // the standard library
	}
	for _, a := range kitMayImport {
		if a == "github.com/fencestream/fencestream/codecs" {
			if imp == a {
				return true
			}
			continue
		}
		if imp == a || strings.HasPrefix(imp, a+"/") {
			return true
		}
	}
	return false
}

// The allow-list refuses what it should: an application package, a schema
// under codecs, a library nobody added.
func TestKitAllowListRefusesApplications(t *testing.T) {
	for _, imp := range []string{
		"github.com/fencestream/fencestream/processors/geofence",
		"github.com/fencestream/fencestream/codecs/geofencepb",
		"github.com/fencestream/fencestream/processors/groupie",
		"github.com/paulmach/orb",
	} {
		if kitAllows(imp) {
			t.Errorf("kitAllows(%q) = true", imp)
		}
	}
	for _, imp := range []string{"net/http", "github.com/fencestream/fencestream/processors/group/kitpb", "github.com/fencestream/fencestream/codecs", "github.com/lovoo/goka/storage"} {
		if !kitAllows(imp) {
			t.Errorf("kitAllows(%q) = false", imp)
		}
	}
}
