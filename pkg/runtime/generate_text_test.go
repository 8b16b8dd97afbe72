package runtime_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestGenerateText: the streamed text of stories260K's greedy
// continuation is the reference continuation, piece by piece and then the
// decoder's remainder once; the statistics count the tokens and the cache
// is sized for what was written; a failing callback stops the run.
func TestGenerateText(t *testing.T) {
	_, _, gguf := testutil.Stories260K(t)
	m, err := runtime.Load(context.Background(), gguf, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt, err := m.GenerationPrompt("Once upon a time", false, "")
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, m)
	defer r.Close()
	spec := mustSpec(t, "fp16")
	var text strings.Builder
	pieces, finals := 0, 0
	st, err := r.GenerateText(context.Background(), prompt, runtime.TextOptions{Spec: spec, MaxTokens: 64,
		OnText: func(piece string, final bool) error {
			if final {
				finals++
			} else {
				pieces++
			}
			text.WriteString(piece)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text.String(); got != storiesContinuation {
		t.Errorf("GenerateText text =\n%q\nwant\n%q", got, storiesContinuation)
	}
	if pieces != 64 || finals != 1 || st.GeneratedTokens != 64 || st.PromptTokens != len(prompt) {
		t.Errorf("%d pieces, %d final calls, stats %+v; want 64, 1 and 64 generated tokens", pieces, finals, st)
	}
	l, err := kvcache.NewLayout(m.Geometry(), spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := l.BlocksFor(len(prompt) + 63); st.KV.Blocks != want {
		t.Errorf("cache of %d blocks, want %d (the prompt and all but the last token)", st.KV.Blocks, want)
	}

	stop := errors.New("stop")
	calls := 0
	st, err = r.GenerateText(context.Background(), prompt, runtime.TextOptions{Spec: spec, MaxTokens: 64,
		OnText: func(piece string, final bool) error {
			calls++
			if calls == 3 {
				return stop
			}
			return nil
		}})
	if !errors.Is(err, stop) || calls != 4 { // three pieces, then the remainder
		t.Errorf("stopping callback: err %v after %d calls; want the callback's error after 4", err, calls)
	}
	if _, err := r.GenerateText(context.Background(), nil, runtime.TextOptions{Spec: spec, MaxTokens: 4}); !errors.Is(err, runtime.ErrEmptyPrompt) {
		t.Errorf("empty prompt: %v, want ErrEmptyPrompt", err)
	}
}

// TestGenerationPrompt: plain text is the tokenizer's encoding with BOS;
// with the chat template it is ChatPrompt's rendering of the system and
// user messages.
func TestGenerationPrompt(t *testing.T) {
	p := filepath.Join(t.TempDir(), "chat.gguf")
	if err := modeltest.WriteGGUF(p, modeltest.Spec{Arch: "llama", Seed: 5}); err != nil {
		t.Fatal(err)
	}
	m := load(t, p, runtime.LoadOptions{})
	got, err := m.GenerationPrompt("hello there", false, "")
	if want := m.Tokenizer.Encode("hello there", true); err != nil || !equalInts(got, want) {
		t.Errorf("GenerationPrompt(plain) = %v, %v; want %v", got, err, want)
	}
	for _, system := range []string{"", "be brief"} {
		msgs := []chat.Message{{Role: "user", Content: "hello there"}}
		if system != "" {
			msgs = append([]chat.Message{{Role: "system", Content: system}}, msgs...)
		}
		want, _, err := m.ChatPrompt(msgs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.GenerationPrompt("hello there", true, system)
		if err != nil || !equalInts(got, want) {
			t.Errorf("GenerationPrompt(chat, system %q) = %v, %v; want %v", system, got, err, want)
		}
	}
}

// TestGenerationKV: the cache for the prompt and all but the last token,
// or the largest comparison cache for all of them, whichever is larger;
// the spec's layout error is returned and a candidate's is skipped.
func TestGenerationKV(t *testing.T) {
	g := kvcache.Geometry{Layers: 2, KVHeads: 2, HeadDim: 64}
	costIn := func(g kvcache.Geometry, spec string, tokens int) int64 {
		l, err := kvcache.NewLayout(g, mustSpec(t, spec), 0)
		if err != nil {
			t.Fatal(err)
		}
		return l.SeqCost(tokens)
	}
	cost := func(spec string, tokens int) int64 { return costIn(g, spec, tokens) }
	for _, tc := range []struct {
		name    string
		spec    string
		compare []string
		want    int64
	}{
		{"alone", "fp16", nil, cost("fp16", 10+99)},
		{"smaller candidate", "fp16", []string{"int4"}, cost("fp16", 10+99)},
		{"larger candidate", "int4", []string{"fp16"}, cost("fp16", 10+100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cands = mustSpecs(t, tc.compare)
			got, err := runtime.GenerationKV(g, 10, 100, mustSpec(t, tc.spec), cands)
			if err != nil || got != tc.want {
				t.Errorf("GenerationKV(%s, %v) = %d, %v; want %d", tc.spec, tc.compare, got, err, tc.want)
			}
		})
	}
	odd := kvcache.Geometry{Layers: 2, KVHeads: 2, HeadDim: 8} // not a multiple of q4_0's 32-value blocks
	if _, err := runtime.GenerationKV(odd, 10, 100, mustSpec(t, "q4_0"), nil); err == nil {
		t.Error("GenerationKV(q4_0, head size 8) succeeded, want the layout's error")
	}
	if got, err := runtime.GenerationKV(odd, 10, 100, mustSpec(t, "fp16"), mustSpecs(t, []string{"q4_0"})); err != nil || got != costIn(odd, "fp16", 10+99) {
		t.Errorf("GenerationKV(fp16, q4_0 candidate, head size 8) = %d, %v; want fp16's cost alone", got, err)
	}
}

func mustSpecs(t testing.TB, ss []string) []quant.Spec {
	t.Helper()
	var out []quant.Spec
	for _, s := range ss {
		out = append(out, mustSpec(t, s))
	}
	return out
}
