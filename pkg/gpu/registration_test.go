//go:build cuda || cudaemu

package gpu

import (
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
)

// TestBackendRegistration checks the GPU's Registration against the
// device it opens (its KV formats and weight dtypes against SupportsKV and
// Upload), and that it lists the devices Probe finds.
func TestBackendRegistration(t *testing.T) {
	r := Registration()
	if r.Unavailable != nil || r.Default || r.Name != Name {
		t.Fatalf("Registration() = %q, unavailable %v, default %v; want %q, available, not the default", r.Name, r.Unavailable, r.Default, Name)
	}
	lines, err := r.Probe()
	if err != nil {
		t.Skip(err)
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "gpu 0: ") || !strings.Contains(lines[0], "compute ") {
		t.Errorf("Probe() = %q, want a line per device, the first \"gpu 0: NAME (compute ...)\"", lines)
	}
	backendtest.RunRegistration(t, r)
}
