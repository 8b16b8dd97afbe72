package train

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
)

// goldenCheckpoint is the sha256 of the checkpoint (weights and moments)
// after goldenConfig's run, by kernel set, as the trainer computed it when
// the shipped probe model was trained. A change of the arithmetic (an
// exponential, a summation order, a fused multiply-add) changes it: then
// `make probe-model` no longer reproduces the shipped weights, and the
// model and README numbers must be redone with it, or the change undone.
var goldenCheckpoint = map[string]string{
	"avx2":    "aa436b5cd89ab8d6a6ce7031253c1c55ba7b59a14cdf5fbfcd5bb37785b1f4b7",
	"generic": "3910b40706f8a3e1f23dbba7f3d4d48689f37ca5ad6a2ffe03bed0761392f909",
}

// goldenConfig is testConfig with the second stage's data: numbered policy
// rules, conversations and confusable copies, without requests about
// unlisted topics (UnlistedShare 0, which DefaultConfig now sets to 0.25):
// the data the hashes were recorded with.
func goldenConfig() Config {
	c := testConfig()
	c.ListPolicy, c.AllowRules, c.SafetyTurns, c.ConfusableCopy, c.UnlistedShare = false, true, 3, 0.5, 0
	return c
}

func TestGoldenCheckpoint(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("golden hashes are for amd64 (on %s the compiler may fuse multiply-adds)", runtime.GOARCH)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GOAMD64" && s.Value != "v1" && s.Value != "v2" {
				t.Skipf("golden hashes are for GOAMD64=v1 and v2 (with %s the compiler fuses multiply-adds)", s.Value)
			}
		}
	}
	want := goldenCheckpoint[simd.Kernels()]
	dir := t.TempDir()
	trainOrFatal(t, goldenConfig(), dir)
	got := fmt.Sprintf("%x", sha256.Sum256(checkpointBytes(t, dir)))
	if got != want {
		t.Errorf("kernels %s: checkpoint sha256 %s, want %s", simd.Kernels(), got, want)
	}
}
