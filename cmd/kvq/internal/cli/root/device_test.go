package root

import (
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/gpu"
)

// TestDeviceFlag: every command that runs the model takes --device; an
// unknown device, and cuda in a build without CUDA, are usage errors
// (exit 2) before any work; cpu and auto run (auto on the CPU here).
func TestDeviceFlag(t *testing.T) {
	cmds := [][]string{
		{"generate", "-n", "2", "-p", "Once"},
		{"eval", "--tasks", "", "--no-speed", "--chunks", "1", "--ctx", "64", "--cache", "int8"},
		{"bench", "--num-prompts", "1", "--input-len", "8", "--output-len", "2"},
		{"calibrate", "stats", "--samples", "1", "--seq-len", "16"},
		{"serve", "--port", "0"},
	}
	for _, c := range cmds {
		code, _, stderr := run(t, append(c, "--device", "tpu")...)
		if code != 2 || !strings.Contains(stderr, `--device "tpu"`) {
			t.Errorf("kvq %s --device tpu: exit %d, stderr %q; want 2 naming the flag", c[0], code, stderr)
		}
		if !gpu.Available {
			code, _, stderr = run(t, append(c, "--device", "cuda")...)
			if code != 2 || !strings.Contains(stderr, "built without CUDA") {
				t.Errorf("kvq %s --device cuda: exit %d, stderr %q; want 2 saying the build has no CUDA", c[0], code, stderr)
			}
		}
	}
	for _, dev := range []string{"cpu", "auto"} {
		code, stdout, stderr := run(t, "generate", "-n", "2", "-p", "Once", "--device", dev)
		if code != 0 || stdout == "" {
			t.Errorf("kvq generate --device %s: exit %d, stdout %q, stderr %q", dev, code, stdout, stderr)
		}
		if !gpu.Available && strings.Contains(stderr, "GPU") {
			t.Errorf("kvq generate --device %s in a CPU build mentions a GPU: %q", dev, stderr)
		}
	}
}
