package root

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEvalFP4 runs kvq eval on the built-in model with the engines' FP4
// caches beside fp16 and checks the report: their names, 4.5 bits per value
// (head_dim 64: 32 bytes of E2M1 codes and 4 scale bytes per head and token,
// 576 bytes per token over 4 layers, 2 KV heads, K and V), nvfp4's fp32
// tensor scales as codec state (one per layer side: 32 bytes), and text
// metrics that show a small, nonzero loss (a cache that stored nothing, or
// stored fp16, would fail one bound or the other).
func TestEvalFP4(t *testing.T) {
	args := []string{"eval", "--cache", "fp16,nvfp4,fp4_e2m1", "--no-speed", "--tasks", "copy", "-n", "1", "--ctx", "256", "--chunks", "2", "-o", "json"}
	code, out, stderr := run(t, args...)
	if code != 0 {
		t.Fatalf("kvq %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
	}
	var rep struct {
		Caches []struct {
			Spec          string
			BytesPerToken float64 `json:"bytes_per_token"`
			StateBytes    int64   `json:"state_bytes"`
			BitsPerValue  float64 `json:"bits_per_value"`
		}
		Text struct {
			Caches []struct {
				Cache   string
				PPL     float64
				KLD     struct{ Mean float64 }
				SameTop float64 `json:"same_top"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Caches) != 3 || len(rep.Text.Caches) != 3 {
		t.Fatalf("report caches %+v, text %+v: want fp16, nvfp4, fp4_e2m1", rep.Caches, rep.Text.Caches)
	}
	for i, want := range []struct {
		spec  string
		bytes float64
		state int64
		bits  float64
	}{{"fp16", 2048, 0, 16}, {"nvfp4", 576, 32, 4.5}, {"fp4_e2m1", 576, 0, 4.5}} {
		c := rep.Caches[i]
		if c.Spec != want.spec || c.BytesPerToken != want.bytes || c.StateBytes != want.state || c.BitsPerValue != want.bits {
			t.Errorf("cache %d = %+v, want %+v", i, c, want)
		}
		tx := rep.Text.Caches[i]
		if tx.Cache != want.spec {
			t.Errorf("text row %d is %q, want %q", i, tx.Cache, want.spec)
		}
		if i == 0 {
			continue
		}
		if !(tx.KLD.Mean > 1e-5 && tx.KLD.Mean < 0.05 && tx.SameTop > 0.9 && tx.PPL > rep.Text.Caches[0].PPL*0.98) {
			t.Errorf("%s: KLD %g, same-top %g, PPL %g (fp16 %g): want a small nonzero loss", tx.Cache, tx.KLD.Mean, tx.SameTop, tx.PPL, rep.Text.Caches[0].PPL)
		}
	}
}
