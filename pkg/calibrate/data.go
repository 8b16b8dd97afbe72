package calibrate

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/datasets"
	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// Data is calibration data: token sequences of at most SeqLen tokens, in
// the order they are fed, and a hash that identifies them.
type Data struct {
	// Source names where the data came from ("built-in", file names, or
	// "random tokens").
	Source string
	// Samples are the token sequences, one forward batch each.
	Samples [][]int
	// SHA256 is the hex SHA-256 of the samples' token ids (with their
	// lengths): equal data gives an equal hash whatever the file names.
	SHA256 string
}

// Tokens returns the number of tokens in all samples.
func (d *Data) Tokens() int {
	n := 0
	for _, s := range d.Samples {
		n += len(s)
	}
	return n
}

// DataOptions select calibration data.
type DataOptions struct {
	// Paths are text files (each file one document, any extension but
	// .jsonl) and JSONL files (see LoadData). None: the built-in texts.
	Paths []string
	// Samples is the number of sequences (default 32).
	Samples int
	// SeqLen is the most tokens per sequence (default 512, at most the
	// model's context).
	SeqLen int
	// Seed fixes which windows and records are drawn.
	Seed uint64
}

// MaxTokens bounds the calibration tokens, Samples × SeqLen: LoadData
// holds every sample's token ids in memory (8 bytes each) before the first
// forward, so 2^26 tokens is 512 MiB of ids and, at the thousands of
// tokens per second a CPU records a real model, days of work;
// llm-compressor's recipes use 512 × 2048, about a million.
const MaxTokens = 1 << 26

// MaxSamples is the most samples of seqLen tokens LoadData accepts
// (MaxTokens / seqLen).
func MaxSamples(seqLen int) int { return MaxTokens / max(seqLen, 1) }

func (o *DataOptions) defaults(m *runtime.Model) error {
	if o.Samples == 0 {
		o.Samples = 32
	}
	if o.SeqLen == 0 {
		o.SeqLen = 512
		if m.ContextLen > 0 {
			o.SeqLen = min(o.SeqLen, m.ContextLen)
		}
	}
	switch {
	case o.Samples < 0:
		return fmt.Errorf("%w: %d samples", ErrOptions, o.Samples)
	case o.SeqLen >= 2 && o.Samples > MaxSamples(o.SeqLen):
		return fmt.Errorf("%w: %d samples of %d tokens (at most %d: %d tokens in all)", ErrOptions, o.Samples, o.SeqLen, MaxSamples(o.SeqLen), MaxTokens)
	case o.SeqLen < 2:
		return fmt.Errorf("%w: sequences of %d tokens (want at least 2)", ErrOptions, o.SeqLen)
	case m.ContextLen > 0 && o.SeqLen > m.ContextLen:
		return fmt.Errorf("%w: sequences of %d tokens, the model's context is %d", ErrOptions, o.SeqLen, m.ContextLen)
	}
	return nil
}

// document is one unit of calibration input: a record of a JSONL file (one
// sample, truncated to SeqLen) or a text file (cut into SeqLen windows).
type document struct {
	tokens []int
	record bool
}

// LoadData tokenizes calibration data for m.
//
// A text file is one document, tokenized with the model's BOS and cut into
// windows of SeqLen tokens. A .jsonl file holds one record per line, each a
// sample of its own (truncated to SeqLen), as llm-compressor feeds a
// dataset: {"text": "…"}, {"prompt": "…"} (with "completion" or "response"
// appended when present), or {"messages": [{"role", "content"}, …]}
// rendered with the model's chat template, assistant turns included. Blank
// lines and lines starting with # are skipped; a malformed line is an error
// naming the file and line.
//
// Without paths the data is the built-in probe texts (train split: a mix of
// stories, retrieval, copying, JSON and policy chats, disjoint from the
// evaluation split kvq eval and Compare score on).
//
// Windows and records are shuffled with Seed and the first Samples kept.
// Samples × SeqLen is at most MaxTokens; LoadData returns ctx's error,
// wrapped, when ctx ends while it draws or tokenizes.
func LoadData(ctx context.Context, m *runtime.Model, opts DataOptions) (*Data, error) {
	if err := opts.defaults(m); err != nil {
		return nil, err
	}
	var docs []document
	source := "built-in probe texts (train split)"
	if len(opts.Paths) == 0 {
		g := datasets.New(datasets.Train, opts.Seed)
		// Byte-level tokenizers give about a token per byte; others fewer,
		// so records stay within SeqLen either way after truncation.
		for range opts.Samples {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("calibrate: drawing the built-in texts: %w", err)
			}
			e := g.Sample(4 * opts.SeqLen)
			// Kept at SeqLen tokens now: the text drawn is longer.
			toks := m.Tokenizer.Encode(e.Text(), true)
			docs = append(docs, document{tokens: slices.Clone(toks[:min(len(toks), opts.SeqLen)]), record: true})
		}
	} else {
		source = strings.Join(opts.Paths, ", ")
		for _, p := range opts.Paths {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("calibrate: reading %s: %w", p, err)
			}
			ds, err := readDocuments(m, p)
			if err != nil {
				return nil, err
			}
			docs = append(docs, ds...)
		}
	}
	var samples [][]int
	for _, d := range docs {
		switch {
		case len(d.tokens) < 2:
		case d.record:
			samples = append(samples, d.tokens[:min(len(d.tokens), opts.SeqLen)])
		default:
			for i := 0; i+1 < len(d.tokens); i += opts.SeqLen {
				samples = append(samples, d.tokens[i:min(len(d.tokens), i+opts.SeqLen)])
			}
		}
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("%w: %s: no sample of two or more tokens", ErrData, source)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x6b7671))
	rng.Shuffle(len(samples), func(i, j int) { samples[i], samples[j] = samples[j], samples[i] })
	samples = samples[:min(len(samples), opts.Samples)]
	return newData(source, samples), nil
}

// RandomData is a batch of uniformly random token ids, what vLLM's
// calculate_kv_scales sees when its first forward is the profiling run.
func RandomData(m *runtime.Model, samples, seqLen int, seed uint64) *Data {
	rng := rand.New(rand.NewPCG(seed, 0x72616e64))
	out := make([][]int, samples)
	for i := range out {
		out[i] = make([]int, seqLen)
		for j := range out[i] {
			out[i][j] = rng.IntN(m.Vocab)
		}
	}
	return newData("random tokens", out)
}

func newData(source string, samples [][]int) *Data {
	h := sha256.New()
	var b [8]byte
	for _, s := range samples {
		binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
		h.Write(b[:])
		for _, t := range s {
			binary.LittleEndian.PutUint32(b[:4], uint32(t))
			h.Write(b[:4])
		}
	}
	return &Data{Source: source, Samples: samples, SHA256: hex.EncodeToString(h.Sum(nil))}
}

type record struct {
	Text       *string       `json:"text"`
	Prompt     *string       `json:"prompt"`
	Completion string        `json:"completion"`
	Response   string        `json:"response"`
	Messages   []chatMessage `json:"messages"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func readDocuments(m *runtime.Model, path string) ([]document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrData, err)
	}
	if !strings.EqualFold(filepath.Ext(path), ".jsonl") {
		// A binary file (a model, an archive) would be tokenized as text
		// without a word.
		if i := bytes.IndexByte(data, 0); i >= 0 {
			return nil, fmt.Errorf("%w: %s: not a text file (a NUL byte at offset %d)", ErrData, path, i)
		}
		if !utf8.Valid(data) {
			return nil, fmt.Errorf("%w: %s: not a text file (not UTF-8)", ErrData, path)
		}
		return []document{{tokens: m.Tokenizer.Encode(string(data), true)}}, nil
	}
	var docs []document
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("%w: %s:%d: %s", ErrData, path, ln, fmt.Sprintf(format, a...))
		}
		var r record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fail("%v (a record is {\"text\": …}, {\"prompt\": …[, \"completion\": …]} or {\"messages\": [{\"role\": …, \"content\": …}]})", err)
		}
		var toks []int
		switch n := btoi(r.Text != nil) + btoi(r.Prompt != nil) + btoi(r.Messages != nil); {
		case n != 1:
			return nil, fail(`give exactly one of "text", "prompt" and "messages"`)
		case r.Text != nil:
			toks = m.Tokenizer.Encode(*r.Text, true)
		case r.Prompt != nil:
			toks = m.Tokenizer.Encode(*r.Prompt+r.Completion+r.Response, true)
		default:
			msgs := make([]chat.Message, len(r.Messages))
			for i, cm := range r.Messages {
				if cm.Role == "" {
					return nil, fail("message %d has no role", i)
				}
				msgs[i] = chat.Message{Role: cm.Role, Content: cm.Content}
			}
			if toks, _, err = m.ChatConversation(msgs); err != nil {
				return nil, fail("%v", err)
			}
		}
		docs = append(docs, document{tokens: toks, record: true})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrData, path, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%w: %s has no records", ErrData, path)
	}
	return docs, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
