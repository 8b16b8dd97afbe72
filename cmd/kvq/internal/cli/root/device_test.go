package root

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
)

// TestDeviceFlag: every command that runs the model takes --device; an
// unknown device (the error lists the registered backends) and a
// registered one this build lacks (cuda without CUDA) are usage errors
// (exit 2) before any work; cpu and auto run (auto on the CPU here).
func TestDeviceFlag(t *testing.T) {
	reg := cmdutil.Backends()
	cmds := [][]string{
		{"generate", "-n", "2", "-p", "Once"},
		{"eval", "--tasks", "", "--no-speed", "--chunks", "1", "--ctx", "64", "--cache", "int8"},
		{"bench", "--num-prompts", "1", "--input-len", "8", "--output-len", "2"},
		{"calibrate", "stats", "--samples", "1", "--seq-len", "16"},
		{"serve", "--port", "0"},
	}
	gpuless := true
	for _, c := range cmds {
		code, _, stderr := run(t, append(c, "--device", "tpu")...)
		if code != 2 || !strings.Contains(stderr, `--device "tpu": want auto, cpu or cuda`) {
			t.Errorf("kvq %s --device tpu: exit %d, stderr %q; want 2 naming the flag and the registered backends", c[0], code, stderr)
		}
		for _, r := range reg.All() {
			if r.Unavailable == nil {
				continue
			}
			gpuless = gpuless && r.Name == "cuda"
			code, _, stderr = run(t, append(c, "--device", r.Name)...)
			if code != 2 || !strings.Contains(stderr, "--device "+r.Name+": "+r.Unavailable.Error()) {
				t.Errorf("kvq %s --device %s: exit %d, stderr %q; want 2 saying %q", c[0], r.Name, code, stderr, r.Unavailable)
			}
		}
	}
	if r, _ := reg.Lookup("cuda"); r.Unavailable != nil && !strings.Contains(r.Unavailable.Error(), "built without CUDA") {
		t.Errorf("--device cuda in a build without CUDA says %q, want it to say the build has no CUDA", r.Unavailable)
	}
	for _, dev := range []string{"cpu", "auto"} {
		code, stdout, stderr := run(t, "generate", "-n", "2", "-p", "Once", "--device", dev)
		if code != 0 || stdout == "" {
			t.Errorf("kvq generate --device %s: exit %d, stdout %q, stderr %q", dev, code, stdout, stderr)
		}
		if gpuless && strings.Contains(stderr, "GPU") {
			t.Errorf("kvq generate --device %s in a CPU build mentions a GPU: %q", dev, stderr)
		}
	}
}

// testRegistry is a registry of the CPU and three made-up backends: tpu,
// not in this build; npu, which does not open; fast, which opens (the CPU
// backend, counting the opens in *opened).
func testRegistry(t *testing.T, opened *int) *backend.Registry {
	t.Helper()
	fail := errors.New("npu: no device")
	reg, err := backend.NewRegistry(
		cpu.Registration(),
		backend.Registration{
			Name: "tpu", Description: "tensor cores", Unavailable: errors.New("this kvq was built without the tpu tag"),
			Open: func(context.Context, backend.OpenOptions) (backend.Backend, error) {
				t.Error("the unavailable tpu backend was opened")
				return nil, fail
			},
		},
		backend.Registration{
			Name: "npu", Description: "a neural processor",
			Open:  func(context.Context, backend.OpenOptions) (backend.Backend, error) { return nil, fail },
			Probe: func() ([]string, error) { return nil, fail },
		},
		backend.Registration{
			Name: "fast", Description: "the CPU under another name",
			Open: func(context.Context, backend.OpenOptions) (backend.Backend, error) {
				*opened++
				return cpu.New(1), nil
			},
			Probe: func() ([]string, error) { return []string{"fast 0: one core", "fast 1: another"}, nil },
		},
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// runWith runs kvq with args on a factory whose backends are reg.
func runWith(t *testing.T, reg *backend.Registry, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, Version: "test", Backends: reg}
	code = Run(context.Background(), f, args)
	return code, out.String(), errOut.String()
}

// TestDeviceRegistry: --device, its help, and kvq version follow the
// factory's backend registry, whatever it holds.
func TestDeviceRegistry(t *testing.T) {
	var opened int
	reg := testRegistry(t, &opened)
	gen := []string{"generate", "-n", "2", "-p", "Once"}
	for _, tc := range []struct {
		device string
		code   int
		stderr string // in stderr
		opened int    // opens of fast
	}{
		{"nope", 2, `--device "nope": want auto, cpu, tpu, npu or fast`, 0},
		{"tpu", 2, "--device tpu: this kvq was built without the tpu tag", 0},
		{"npu", 2, "--device npu: npu: no device", 0},
		{"fast", 0, "", 1},
		{"cpu", 0, "", 0},
		{"auto", 0, "kvq: --device auto: npu did not open (npu: no device); running on fast", 1},
	} {
		t.Run(tc.device, func(t *testing.T) {
			opened = 0
			code, stdout, stderr := runWith(t, reg, append(gen, "--device", tc.device)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) || opened != tc.opened {
				t.Errorf("kvq generate --device %s: exit %d, stderr %q, fast opened %d times; want exit %d, stderr with %q, %d opens",
					tc.device, code, stderr, opened, tc.code, tc.stderr, tc.opened)
			}
			if tc.code == 0 && stdout == "" {
				t.Errorf("kvq generate --device %s printed nothing", tc.device)
			}
		})
	}

	_, help, _ := runWith(t, reg, "generate", "--help")
	help = strings.Join(strings.Fields(help), " ")
	if want := "where the model runs: auto (the first of tpu, npu, fast that this kvq has and that opens, else cpu), cpu, tpu, npu, or fast"; !strings.Contains(help, want) {
		t.Errorf("kvq generate --help does not say %q:\n%s", want, help)
	}

	code, out, stderr := runWith(t, reg, "version")
	if code != 0 {
		t.Fatalf("kvq version: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		"cpu (available): the host CPU (Go with SIMD assembly kernels)",
		"tpu (unavailable): this kvq was built without the tpu tag",
		"npu (available): a neural processor",
		"  npu: no device",
		"fast (available): the CPU under another name",
		"  fast 0: one core",
		"  fast 1: another",
	}
	if len(lines) != 1+len(want) || !strings.HasSuffix(lines[0], ", backends cpu+npu+fast)") || strings.Join(lines[1:], "\n") != strings.Join(want, "\n") {
		t.Errorf("kvq version =\n%s\nwant the build line ending \", backends cpu+npu+fast)\" and\n%s", out, strings.Join(want, "\n"))
	}
}
