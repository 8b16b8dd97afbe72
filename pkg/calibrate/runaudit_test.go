package calibrate

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
)

// TestRunAudit: without data RunAudit is AuditScales alone; with data it
// records it (the same findings as AuditScales over Record's recorder),
// describes it, measures the effect, and reports the two stages in order;
// an effect option the measurement refuses is eval.ErrOptions.
func TestRunAudit(t *testing.T) {
	m, _ := testModel(t)
	rec, data := recordTest(t, m, RecordOptions{})
	s, _ := ParseStrategy("dataset", PerTensor)
	sc, err := Compute(s, rec, nil, ScaleOptions{Kind: quant.E4M3, DType: "F16"})
	if err != nil {
		t.Fatal(err)
	}
	sc.K = slices.Clone(sc.K)
	sc.K[1] = []float32{0}
	p := filepath.Join(t.TempDir(), "kv_scales.json")
	if err := sc.Save(p); err != nil {
		t.Fatal(err)
	}
	sh, err := ReadScalesFile(p, m.Config.Layers, m.Config.KVHeads)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("no data", func(t *testing.T) {
		calls := 0
		a, err := RunAudit(ctx, m, sh, AuditOptions{Kind: quant.E4M3, Progress: func(string, int, int) { calls++ }})
		if err != nil {
			t.Fatal(err)
		}
		if want := AuditScales(sh, nil, quant.E4M3); !reflect.DeepEqual(a, want) || calls != 0 {
			t.Errorf("RunAudit(no data) = %+v after %d progress calls, want AuditScales's %+v and none", a, calls, want)
		}
	})
	t.Run("data", func(t *testing.T) {
		type call struct {
			stage       string
			done, total int
		}
		var calls []call
		a, err := RunAudit(ctx, m, sh, AuditOptions{Kind: quant.E4M3, Data: data,
			Texts: []eval.Text{{Body: strings.Repeat(heldOut, 4)}}, Text: eval.TextOptions{Ctx: 64, MaxChunks: 2},
			Progress: func(stage string, done, total int) { calls = append(calls, call{stage, done, total}) }})
		if err != nil {
			t.Fatal(err)
		}
		want := AuditScales(sh, rec, quant.E4M3)
		if !reflect.DeepEqual(a.Findings, want.Findings) || !reflect.DeepEqual(a.Layers, want.Layers) {
			t.Errorf("findings %+v, want AuditScales over the recorded data's %+v", a.Findings, want.Findings)
		}
		if info := data.Info(); a.Data == nil || !reflect.DeepEqual(*a.Data, info) {
			t.Errorf("Data = %+v, want %+v", a.Data, info)
		}
		if a.Effect == nil || len(a.Effect.Results) != 4 || a.Effect.Results[0].Failed == "" || a.Effect.Results[2].KLD <= 0 {
			t.Errorf("Effect = %+v, want AuditEffect's four candidates, the shipped one failing", a.Effect)
		}
		n := len(data.Samples)
		if len(calls) < n+2 || calls[0] != (call{StageAudit, 0, n}) || calls[n] != (call{StageAudit, n, n}) {
			t.Fatalf("progress %v, want %s from 0/%d to %d/%d first", calls, StageAudit, n, n, n)
		}
		last := calls[len(calls)-1]
		for _, c := range calls[n+1:] {
			if c.stage != StageEffect {
				t.Fatalf("progress %v: want only %s after the recording", calls, StageEffect)
			}
		}
		if last.done != last.total || last.total == 0 {
			t.Errorf("last progress %v, want the effect complete", last)
		}
	})
	t.Run("refused effect options", func(t *testing.T) {
		if _, err := RunAudit(ctx, m, sh, AuditOptions{Kind: quant.E4M3, Data: data}); !errors.Is(err, ErrOptions) {
			t.Errorf("RunAudit(no held-out text) = %v, want ErrOptions", err)
		}
		texts := []eval.Text{{Body: strings.Repeat(heldOut, 4)}}
		if _, err := RunAudit(ctx, m, sh, AuditOptions{Kind: quant.E4M3, Data: data, Texts: texts, Text: eval.TextOptions{Ctx: 1}}); !errors.Is(err, eval.ErrOptions) {
			t.Errorf("RunAudit(1-token chunks) = %v, want eval.ErrOptions", err)
		}
	})
}
