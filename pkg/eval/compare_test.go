package eval_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// TestCompareGreedyEmptyPrompt checks that an empty prompt is an options
// error, not a panic or a run per spec.
func TestCompareGreedyEmptyPrompt(t *testing.T) {
	m, specs := tinyModel(t, "fp16,int4")
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	calls := 0
	out, err := eval.CompareGreedy(context.Background(), r, nil, 4, specs, func(int, eval.Continuation) { calls++ })
	if !errors.Is(err, eval.ErrOptions) || len(out) != 0 || calls != 0 {
		t.Errorf("CompareGreedy(empty prompt) = %d continuations, %d callbacks, %v; want none and ErrOptions", len(out), calls, err)
	}
}

// TestContinuationText: a continuation's text is what GenerateText streams
// for the same greedy run, and the agreed text is the decoding of the
// tokens before the divergence (all of them when there is none).
func TestContinuationText(t *testing.T) {
	m, specs := tinyModel(t, "fp16,int4")
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	prompt := m.Tokenizer.Encode("the cat", true)
	out, err := eval.CompareGreedy(context.Background(), r, prompt, 12, specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	if _, err := r.GenerateText(context.Background(), prompt, runtime.TextOptions{Spec: specs[0], MaxTokens: 12,
		OnText: func(piece string, _ bool) error { streamed.WriteString(piece); return nil }}); err != nil {
		t.Fatal(err)
	}
	base := out[0]
	text, agreed := base.Text(m, prompt)
	if text != streamed.String() || agreed != text {
		t.Errorf("baseline Text = %q, %q; want GenerateText's %q twice", text, agreed, streamed.String())
	}
	if len(base.Tokens) < 3 {
		t.Fatalf("baseline of %d tokens, want at least 3", len(base.Tokens))
	}
	c := eval.Continuation{Tokens: base.Tokens, Diverge: 2}
	_, agreed = c.Text(m, prompt)
	want, _ := eval.Continuation{Tokens: base.Tokens[:2], Diverge: -1}.Text(m, prompt)
	if agreed != want || !strings.HasPrefix(text, agreed) || agreed == text {
		t.Errorf("Text with Diverge 2: agreed %q, want %q, a proper prefix of %q", agreed, want, text)
	}
}
