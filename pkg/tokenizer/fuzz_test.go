package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fuzzTokenizers returns the tokenizers FuzzEncodeDecode checks, each with
// its reference: SentencePiece with byte fallback (hand-built "▁" spelling,
// and tok512 when present) and byte-level BPE under each pre-tokenizer.
func fuzzTokenizers(tb testing.TB) map[string]*reference {
	vocabs := map[string]Vocab{
		"spm-hand":    handSPMVocab(),
		"bpe-gpt2":    handBPEVocab("gpt2"),
		"bpe-llama3":  handBPEVocab("llama3"),
		"bpe-qwen2":   handBPEVocab("qwen2"),
		"bpe-trained": trainedBPE(),
	}
	m := map[string]*reference{}
	for name, v := range vocabs {
		m[name] = newReference(mustNew(tb, v), v)
	}
	if _, ok := lookupShared("tok512.bin"); ok {
		m["tok512"] = newReference(loadTok512(tb), Vocab{})
	}
	return m
}

// FuzzEncodeDecode checks, for every vocabulary, that Encode never panics,
// that Decode(Encode(s)) == s (for the "▁"-spelled vocabulary only when s
// has no "▁", which decodes to a space), that the heap merge agrees with the
// O(n²) reference on short inputs, that a Decoder streams the same text, and
// that EncodeWithSpecials never panics and round-trips through
// DecodeWithSpecials for byte-level vocabularies.
func FuzzEncodeDecode(f *testing.F) {
	for _, s := range []string{"", "Once upon a time", "héllo 世界 🙂", "I'll DON'T 12345", "  a\n\n b  ",
		"<s>ab<|x|>c", "<|begin_of_text|>hi<|eot_id|>", "\xff\xfe", "e\u0301\u3000x", "▁a"} {
		f.Add(s)
	}
	refs := fuzzTokenizers(f)
	f.Fuzz(func(t *testing.T, s string) {
		for name, ref := range refs {
			tk := ref.tk
			ids := tk.Encode(s, true)
			if back := tk.Decode(ids); back != s && !(tk.metaspace && strings.Contains(s, "▁")) {
				t.Errorf("%s: Decode(Encode(%q)) = %q", name, s, back)
			}
			if len(s) <= 64 {
				if want := ref.encode(s, true); !slices.Equal(ids, want) {
					t.Errorf("%s: Encode(%q) = %v, reference %v", name, s, ids, want)
				}
			}
			d := tk.NewDecoder()
			var b strings.Builder
			for _, id := range ids {
				b.WriteString(d.Next(id))
			}
			b.WriteString(d.Flush())
			if got, want := b.String(), tk.Decode(ids); got != want {
				t.Errorf("%s: Decoder over %v = %q, Decode = %q", name, ids, got, want)
			}
			sp := tk.EncodeWithSpecials(s, false)
			if tk.Kind() == ByteLevelBPE {
				if back := tk.DecodeWithSpecials(sp); back != s {
					t.Errorf("%s: DecodeWithSpecials(EncodeWithSpecials(%q)) = %q", name, s, back)
				}
			}
		}
	})
}

// FuzzParseHF checks that ParseHF never panics, that its errors are
// *HFError values, and that New accepts every Vocab it returns and the
// tokenizer encodes and decodes without panicking. The seeds are the
// testdata/hf fixtures, with and without their tokenizer_config.json (an
// empty config input means none). The seeds are 5-12 KB, and the fuzzer
// spends up to a minute minimizing each new input of that size, so run it
// with a bounded minimization:
//
//	go test -run '^$' -fuzz FuzzParseHF -fuzztime 30s -fuzzminimizetime 100x ./pkg/tokenizer/
func FuzzParseHF(f *testing.F) {
	dirs, err := os.ReadDir(filepath.Join("testdata", "hf"))
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range dirs {
		tok, cfg := readHF(f, d.Name())
		f.Add(tok, cfg)
		f.Add(tok, []byte(nil))
	}
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`), []byte(`{"bos_token": "a"}`))
	f.Fuzz(func(t *testing.T, tok, cfg []byte) {
		if len(cfg) == 0 {
			cfg = nil
		}
		v, c, err := parseHFBytes(tok, cfg)
		if err != nil {
			var he *HFError
			if !errors.As(err, &he) {
				t.Fatalf("ParseHF error %v is a %T, want *HFError", err, err)
			}
			return
		}
		tk, err := New(v)
		if err != nil {
			t.Fatalf("New rejects what ParseHF returned (config %+v): %v", c, err)
		}
		for _, s := range []string{"", "Hello wörld 12345 🙂\n\n  x", "<s>[INST]<|endoftext|>a", "\xff▁ ▁"} {
			ids := tk.EncodeWithSpecials(s, true)
			for _, id := range ids {
				if id < 0 || id >= tk.VocabSize() {
					t.Fatalf("EncodeWithSpecials(%q) = %v: id out of range", s, ids)
				}
			}
			_ = tk.Decode(ids)
			_ = tk.Encode(s, false)
		}
	})
}
