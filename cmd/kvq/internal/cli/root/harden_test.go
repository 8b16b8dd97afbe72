package root

import (
	"encoding/json"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/calibrate"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
)

// TestCountLimits: a count flag past what it sizes is a usage error naming
// the flag and its limit, before any model is loaded or work is drawn
// (each of these used to grow memory until killed).
func TestCountLimits(t *testing.T) {
	huge := "1000000000000000000"
	evalArgs := []string{"eval", "--tasks", "copy", "--no-text", "--no-speed"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"eval -n", append(evalArgs, "-n", huge), "-n " + huge + ": at most " + strconv.Itoa(eval.MaxExamples)},
		{"eval -n one over", append(evalArgs, "-n", strconv.Itoa(eval.MaxExamples+1)), "at most " + strconv.Itoa(eval.MaxExamples)},
		{"eval --grid-depths", append(evalArgs, "--grid-depths", "1000000000"), "--grid-depths 1000000000: at most " + strconv.Itoa(eval.MaxExamples)},
		{"eval --grid-n", append(evalArgs, "--grid-n", "1000000000"), "--grid-n 1000000000: at most " + strconv.Itoa(eval.MaxExamples)},
		{"eval grid product", append(evalArgs, "--grid-n", "1000", "--grid-depths", "1000"), "--grid-depths 1000 × --grid-n 1000: at most"},
		{"formats --head-dim huge", []string{"formats", "--head-dim", huge}, "--head-dim " + huge + ": must be 1 to " + strconv.Itoa(quant.MaxHeadDim)},
		{"formats --head-dim 20000", []string{"formats", "--head-dim", "20000"}, "--head-dim 20000: must be 1 to " + strconv.Itoa(quant.MaxHeadDim)},
		{"bench --num-prompts huge", []string{"bench", "--num-prompts", huge}, "--num-prompts " + huge + ": at most " + strconv.Itoa(bench.MaxPrompts)},
		{"bench --num-prompts 1e9", []string{"bench", "--num-prompts", "1000000000"}, "--num-prompts 1000000000: at most " + strconv.Itoa(bench.MaxPrompts)},
		{"calibrate --samples", []string{"calibrate", "--samples", huge}, "--samples " + huge + ": at most " + strconv.Itoa(calibrate.MaxSamples(512))},
		{"calibrate --samples at --seq-len", []string{"calibrate", "--samples", "1000000", "--seq-len", "2048"}, "at most " + strconv.Itoa(calibrate.MaxSamples(2048)) + " sequences of --seq-len 2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("kvq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
			}
			if out != "" {
				t.Errorf("kvq %s printed %q before refusing", strings.Join(tc.args, " "), out)
			}
		})
	}
}

// TestSignalsWhileBuilding: at the largest counts the flags allow, the
// loops that draw examples, calibration samples and bench requests and
// the formats' rotations stop at SIGINT and SIGTERM within a second (they
// ran deaf to both until killed).
func TestSignalsWhileBuilding(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("no SIGINT to send to a child process on Windows")
	}
	if testing.Short() {
		t.Skip("runs long commands")
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"eval -n max", []string{"eval", "--tasks", "copy", "--no-text", "--no-speed", "-n", strconv.Itoa(eval.MaxExamples)}},
		{"formats --head-dim near max", []string{"formats", "--head-dim", "1000"}}, // not a power of two: dense rotations
		{"bench --num-prompts max", []string{"bench", "--num-prompts", strconv.Itoa(bench.MaxPrompts), "--dataset", "builtin", "--depths", "none", "--cache", "fp16"}},
		{"calibrate --samples max", []string{"calibrate", "--samples", strconv.Itoa(calibrate.MaxSamples(512)), "--compare", "none", "--out", t.TempDir()}},
	} {
		args, err := json.Marshal(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(tc.name+"/"+sig.String(), func(t *testing.T) {
				var stops []time.Duration
				for range 2 {
					stop := signalDuringPrefill(t, sig, string(args))
					if stop < time.Second {
						return
					}
					stops = append(stops, stop)
				}
				t.Errorf("kvq %s stopped %v after %v (twice over a second)", strings.Join(tc.args, " "), stops, sig)
			})
		}
	}
}
