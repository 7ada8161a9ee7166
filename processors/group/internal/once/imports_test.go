package once

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsNoKit: the protocol is testable without Goka and below the kit's
// public API, so neither is among its dependencies.
func TestImportsNoKit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/fencestream/fencestream/processors/group" || strings.HasPrefix(dep, "github.com/lovoo/goka") || strings.HasPrefix(dep, "github.com/IBM/sarama") {
			t.Errorf("internal/once depends on %s", dep)
		}
	}
}
