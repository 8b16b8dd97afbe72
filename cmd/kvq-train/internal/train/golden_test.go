package train

import (
	"context"
	"math"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
)

// goldenStep is what one step of goldenConfig's run reports: its loss and
// the global gradient norm before clipping.
type goldenStep struct{ loss, gradNorm float64 }

// goldenTrajectory is goldenConfig's run as the trainer computed it with
// internal/simd's "avx2" kernels, the kernel set the shipped probe model was
// trained with. Recorded at c992e84: internal/simd's arithmetic was last
// changed before any of the shipped model's four stages was trained, and
// the run still matched the checkpoint sha256 that the test this one
// replaces (TestGoldenCheckpoint) pinned.
var goldenTrajectory = []goldenStep{
	{5.6355641583663019, 1.685777006110122},
	{5.4973513551000153, 1.3799280645927341},
	{5.3035117754614163, 1.4701947725902162},
	{5.1652737957016255, 1.2952048722097524},
	{5.0544779888573643, 1.1481634122893334},
	{4.9537344753277424, 1.1575227766442118},
}

// genericTrajectory is the same run with the "generic" kernels (-tags
// purego), recorded at the same commit; GOARCH=386 gave the same numbers.
// It differs from goldenTrajectory by at most 6.1e-10 relative in the loss
// and 1.3e-8 in the gradient norm: what a change of float32 rounding alone
// does to this run. Builds with GOAMD64=v3, where the compiler fuses
// multiply-adds, stayed within 1.1e-9 and 2.3e-8 of it with either kernel
// set.
var genericTrajectory = []goldenStep{
	{5.6355641587261305, 1.6857770198711368},
	{5.4973513558533948, 1.3799280592579177},
	{5.303511778354804, 1.4701947645985372},
	{5.165273797307238, 1.2952048741283813},
	{5.0544779919498879, 1.1481634266180292},
	{4.9537344762092692, 1.157522786709988},
}

// Relative tolerances of a run against goldenTrajectory, about three orders
// of magnitude above the measured rounding differences (genericTrajectory:
// 1600× for the loss, 800× for the gradient norm), so that kernels that
// round differently pass: the generic kernels with DotF32 summed in one
// accumulator, with its reduction in float64, or with float32(math.Exp) in
// place of ExpShiftTaylor stayed within 2.2e-9 (loss) and 5.1e-8 (gradient
// norm). They are well below what a wrong gradient does (largest relative
// difference over the six steps, loss and gradient norm): SwiGLU's gate
// gradient ×1.5: 7.2e-4, 1.4e-2; its up gradient ×1.1: 1.0e-4, 5.6e-3, and
// ×1.01: 2.0e-5, 5.4e-4; the attention score gradient ×1.1: 8.4e-6,
// 1.5e-4; RMSNorm's weight gradient ×2: 6.7e-6, 1.7e-2. The gradient norm
// also catches what AdamW and clipping hide from the loss: every gradient
// ×2 left the losses within 1e-6 and doubled the norm.
const (
	goldenLossTol     = 1e-6
	goldenGradNormTol = 1e-5
)

// goldenConfig is testConfig with the second stage's data: numbered policy
// rules, conversations and confusable copies, without requests about
// unlisted topics (UnlistedShare 0, which DefaultConfig sets to 0.25): the
// data the trajectories were recorded with.
func goldenConfig() Config {
	c := testConfig()
	c.ListPolicy, c.AllowRules, c.SafetyTurns, c.ConfusableCopy, c.UnlistedShare = false, true, 3, 0.5, 0
	return c
}

// relDiff returns |got-want|/|want|.
func relDiff(got, want float64) float64 { return math.Abs(got-want) / math.Abs(want) }

// TestGoldenTrajectory trains goldenConfig and requires every step's loss
// and gradient norm to stay within the stated tolerances of
// goldenTrajectory, whichever kernel set runs. It guards the training
// arithmetic (a wrong gradient, a changed data pipeline or schedule) without
// pinning bits: optimizing internal/simd does not force a retrain of the
// shipped model, which `make probe-model` re-creates byte for byte only
// with the kernels it was trained with.
//
// No GOARCH or GOAMD64 guard: the tolerances absorb the multiply-adds a
// compiler fuses (GOAMD64=v3 measured well inside them; see
// genericTrajectory), so the test runs everywhere.
func TestGoldenTrajectory(t *testing.T) {
	var got []goldenStep
	err := Train(context.Background(), goldenConfig(), t.TempDir(), func(s Step) {
		got = append(got, goldenStep{s.Loss, s.GradNorm})
	})
	if err != nil {
		t.Fatalf("Train: %v", err)
	}
	if len(got) != len(goldenTrajectory) {
		t.Fatalf("Train reported %d steps, want %d", len(got), len(goldenTrajectory))
	}
	for i, g := range got {
		w := goldenTrajectory[i]
		if d := relDiff(g.loss, w.loss); !(d <= goldenLossTol) {
			t.Errorf("kernels %s, step %d: loss %.17g, want %.17g (relative difference %.2g > %g)",
				simd.Kernels(), i+1, g.loss, w.loss, d, goldenLossTol)
		}
		if d := relDiff(g.gradNorm, w.gradNorm); !(d <= goldenGradNormTol) {
			t.Errorf("kernels %s, step %d: gradient norm %.17g, want %.17g (relative difference %.2g > %g)",
				simd.Kernels(), i+1, g.gradNorm, w.gradNorm, d, goldenGradNormTol)
		}
	}
}

// TestGoldenTolerances checks that the tolerances keep their stated margin
// (100× at least) over the difference between the recorded trajectories:
// re-recording one of them, or tightening a tolerance, must keep it.
func TestGoldenTolerances(t *testing.T) {
	const margin = 100
	for i, g := range genericTrajectory {
		w := goldenTrajectory[i]
		if d := relDiff(g.loss, w.loss); d*margin > goldenLossTol {
			t.Errorf("step %d: generic and avx2 losses differ by %.2g relative, over goldenLossTol/%d", i+1, d, margin)
		}
		if d := relDiff(g.gradNorm, w.gradNorm); d*margin > goldenGradNormTol {
			t.Errorf("step %d: generic and avx2 gradient norms differ by %.2g relative, over goldenGradNormTol/%d", i+1, d, margin)
		}
	}
}
