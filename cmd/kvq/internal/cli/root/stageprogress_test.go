package root

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestBenchCalibrateProgressStages: off a terminal kvq bench and kvq
// calibrate show the library's stages (bench, decode sweep; calibrate,
// compare) as progress lines, one stage after the other, each finished
// before the next begins, and nothing after the command returns. (A stage
// faster than the interval prints no line.)
func TestBenchCalibrateProgressStages(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(model, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		stages []string
	}{
		{[]string{"bench", "--model", model, "--cache", "fp16,int4", "--num-prompts", "3", "--input-len", "16", "--output-len", "4", "--max-concurrency", "1,3",
			"--warmups", "1", "--depths", "0,16", "--depth-tokens", "2", "--depth-reps", "1", "-o", "json"}, []string{"bench", "decode sweep"}},
		{[]string{"calibrate", "--model", model, "--samples", "24", "--seq-len", "256", "--ctx", "64", "--chunks", "8", "--compare", "default,dataset",
			"--out", filepath.Join(t.TempDir(), "out"), "-o", "json"}, []string{"calibrate", "compare"}},
	} {
		var out, errOut lockedBuffer
		f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, ProgressInterval: time.Millisecond}, Version: "test"}
		if code := Run(context.Background(), f, c.args); code != 0 {
			t.Fatalf("kvq %v: exit %d: %s", c.args[0], code, errOut.String())
		}
		got := errOut.String()
		// Each stage's lines come together, the first stage's first, and
		// each ends with its "finished" line before the next begins.
		line := regexp.MustCompile(`^(` + strings.Join(c.stages, "|") + `): \d+/\d+(, finished after \S+| \(\d+%\) after \S+, ETA \S+)$`)
		seen, open := 0, ""
		for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
			if strings.HasPrefix(l, "kvq: ") || l == "" {
				continue
			}
			m := line.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("kvq %s: stderr line %q is no progress line of %v", c.args[0], l, c.stages)
			}
			if m[1] != open {
				if open != "" {
					t.Errorf("kvq %s: %s began before %s finished", c.args[0], m[1], open)
				}
				for seen < len(c.stages) && c.stages[seen] != m[1] {
					seen++
				}
				if seen == len(c.stages) {
					t.Fatalf("kvq %s: stage %s out of order in\n%s", c.args[0], m[1], got)
				}
				seen++
				open = m[1]
			}
			if strings.HasPrefix(m[2], ", finished") {
				open = ""
			}
		}
		if seen == 0 || open != "" {
			t.Errorf("kvq %s: progress lines %q: want at least one stage, every stage finished", c.args[0], got)
		}
		time.Sleep(20 * time.Millisecond)
		if errOut.String() != got {
			t.Errorf("kvq %s: progress lines after the command returned", c.args[0])
		}
	}
}
