package tokenizer

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// benchText is the eval stories repeated to about 100 KB.
func benchText(size int) string {
	c := corpus()
	return strings.Repeat(c, size/len(c)+1)[:size]
}

// BenchmarkEncode measures Encode on ~100 KB of English text (the eval
// stories repeated) and reports tokens per second; the O(n²) reference runs
// on 4 KB as the naive baseline.
func BenchmarkEncode(b *testing.B) {
	type vocab struct {
		name string
		tk   func(testing.TB) *Tokenizer
		v    func() Vocab
	}
	vocabs := []vocab{
		{"tok512", loadTok512, func() Vocab { return Vocab{} }},
		{"bpe-trained-llama3", func(tb testing.TB) *Tokenizer { return mustNew(tb, trainedBPE()) }, trainedBPE},
	}
	for _, vc := range vocabs {
		for _, size := range []int{100_000, 4_000} {
			b.Run(fmt.Sprintf("%s/%dKB", vc.name, size/1000), func(b *testing.B) {
				tk := vc.tk(b)
				text := benchText(size)
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					n = len(tk.Encode(text, true))
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
		b.Run(fmt.Sprintf("%s/4KB/reference", vc.name), func(b *testing.B) {
			ref := newReference(vc.tk(b), vc.v())
			text := benchText(4_000)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n = len(ref.encode(text, true))
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	tk := loadTok512(b)
	text := benchText(100_000)
	ids := tk.Encode(text, true)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		tk.Decode(ids)
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkNew(b *testing.B) {
	v := trainedBPE()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseHF parses the Llama 3 stand-in of hf_published_test.go:
// the real vocabulary size (128256 ids) with few merges, so it measures
// the vocabulary and added-token work of a real file.
func BenchmarkParseHF(b *testing.B) {
	data := llama3Published.build(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseHF(bytes.NewReader(data), nil); err != nil {
			b.Fatal(err)
		}
	}
}
