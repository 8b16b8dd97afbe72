package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"

	"github.com/kvqlabs/kvq/datasets"
)

// Request is one request of a workload.
type Request struct {
	Index     int
	Prompt    []int  // token ids, for in-process targets (BOS included as the model adds it)
	Text      string // the prompt as text, for HTTP endpoint targets
	MaxTokens int    // output tokens asked for
	IgnoreEOS bool   // generate exactly MaxTokens (vLLM's random dataset forces it)
	// TokenIDs marks a prompt made as token ids (Random, Fixed): a
	// completions endpoint is sent Prompt itself, not Text, as vllm bench's
	// random dataset does, so that the server prefills exactly the tokens
	// the in-process engine does (Text, their decoding, may re-encode to
	// other and more tokens: twice as many on the built-in model).
	TokenIDs bool
	// Messages are the chat turns Prompt and Text were rendered from, for
	// chat-completion endpoints; nil unless the workload file gave messages.
	Messages []Message
}

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Tokenizer is what the workload generators need of the model's tokenizer.
type Tokenizer interface {
	// Encode tokenizes text with BOS as the model adds it.
	Encode(text string) []int
	Decode(ids []int) string
	// Vocab is the number of token ids.
	Vocab() int
	// Chat renders messages with the chat template (with the generation
	// prompt), returning the ids and the text; it may fail when the model
	// has no template.
	Chat(messages []Message) ([]int, string, error)
}

// SpecialTokens is implemented by tokenizers that can tell special ids
// (BOS, EOS, chat markers) apart; random prompts then avoid them. Without
// it, random prompts draw from every id in [0, Vocab) except those
// Encode("") returns (the BOS).
type SpecialTokens interface {
	Special(id int) bool
}

// The streams of the generators' PCGs (the second PCG word), so that a seed
// gives unrelated streams to different generators.
const (
	streamRandom  = 0x72616e646f6d // "random"
	streamFile    = 0x66696c65     // "file"
	streamArrival = 0x617272697661 // "arriva"
	streamDepth   = 0x6465707468   // "depth"
)

// MaxPrompts bounds the requests a workload builder makes (n), and
// MaxPromptTokens the prompt tokens Random makes in all (n × inputLen).
// The requests are built before the first is sent and held for the run,
// each with its token ids (8 bytes each) and text, and each is served,
// hundreds of milliseconds on a real model: 100,000 requests is hours
// of serving, and 2^26 prompt tokens about 1 GiB of ids and text.
const (
	MaxPrompts      = 100_000
	MaxPromptTokens = 1 << 26
)

// checkCount refuses n requests past MaxPrompts.
func checkCount(n int) error {
	if n > MaxPrompts {
		return fmt.Errorf("%w: %d requests (at most %d)", ErrWorkload, n, MaxPrompts)
	}
	return nil
}

// Fixed is Random with range ratio 0: n prompts of exactly inputLen tokens
// (BOS included) asking for exactly outputLen tokens, with IgnoreEOS set,
// like vLLM's random dataset with --random-range-ratio 0.
func Fixed(tok Tokenizer, n, inputLen, outputLen int, seed uint64) ([]Request, error) {
	return Random(tok, n, inputLen, outputLen, 0, seed)
}

// Random makes n prompts as vLLM's random dataset does (vllm/benchmarks/
// datasets/random.py). With b = len(tok.Encode("")) (the BOS the model
// adds), the prompt's own length is drawn uniformly from the integers in
// [⌊(L−b)·(1−r)⌋, ⌈(L−b)·(1+r)⌉] and the output length from
// [max(1, ⌊O·(1−r)⌋), max(1, ⌈O·(1+r)⌉)], where L = inputLen, O =
// outputLen and r = rangeRatio in [0, 1). Prompt i's tokens are the
// allowed ids in order from a random offset, allowed[(offset+i+j) mod
// |allowed|], where allowed is [0, Vocab) less special ids (SpecialTokens)
// and the BOS. The text is then decoded and re-encoded up to 10 times,
// padding with random allowed ids or truncating, until it re-encodes to
// the drawn length (vLLM's gen_prompt_decode_to_target_len); Prompt is BOS
// plus exactly the drawn number of ids and Text their decoding, which
// re-encodes to Prompt unless the tokenizer never settled. IgnoreEOS and
// TokenIDs are set on every request. The same arguments give the same
// requests.
func Random(tok Tokenizer, n, inputLen, outputLen int, rangeRatio float64, seed uint64) ([]Request, error) {
	switch {
	case tok == nil:
		return nil, fmt.Errorf("%w: no tokenizer", ErrWorkload)
	case n < 1:
		return nil, fmt.Errorf("%w: %d requests", ErrWorkload, n)
	case !(rangeRatio >= 0 && rangeRatio < 1):
		return nil, fmt.Errorf("%w: range ratio %v outside [0, 1)", ErrWorkload, rangeRatio)
	case outputLen < 1:
		return nil, fmt.Errorf("%w: output length %d", ErrWorkload, outputLen)
	case n > MaxPrompts:
		return nil, checkCount(n)
	case inputLen > MaxPromptTokens/n:
		return nil, fmt.Errorf("%w: %d requests of %d prompt tokens (at most %d prompt tokens in all)", ErrWorkload, n, inputLen, MaxPromptTokens)
	}
	bos := tok.Encode("")
	own := max(0, inputLen-len(bos))
	inLo := int(math.Floor(float64(own) * (1 - rangeRatio)))
	inHi := int(math.Ceil(float64(own) * (1 + rangeRatio)))
	outLo := max(1, int(math.Floor(float64(outputLen)*(1-rangeRatio))))
	outHi := max(1, int(math.Ceil(float64(outputLen)*(1+rangeRatio))))
	if inLo < 1 {
		return nil, fmt.Errorf("%w: input length %d with range ratio %v leaves prompts of %d tokens after the %d the model adds",
			ErrWorkload, inputLen, rangeRatio, inLo, len(bos))
	}
	allowed := allowedIDs(tok, bos)
	if len(allowed) == 0 {
		return nil, fmt.Errorf("%w: the tokenizer has no ordinary token ids (vocabulary %d)", ErrWorkload, tok.Vocab())
	}
	rng := rand.New(rand.NewPCG(seed, streamRandom))
	reqs := make([]Request, n)
	for i := range reqs {
		inLen := inLo + rng.IntN(inHi-inLo+1)
		outLen := outLo + rng.IntN(outHi-outLo+1)
		offset := rng.IntN(max(1, tok.Vocab()))
		seq := make([]int, inLen)
		for j := range seq {
			seq[j] = allowed[(offset+i+j)%len(allowed)]
		}
		seq = align(tok, bos, seq, allowed, rng)
		reqs[i] = Request{
			Index:     i,
			Prompt:    append(slices.Clip(bos), seq...),
			Text:      tok.Decode(seq),
			MaxTokens: outLen,
			IgnoreEOS: true,
			TokenIDs:  true,
		}
	}
	return reqs, nil
}

// alignTries is how often align re-encodes (vLLM's max_retry).
const alignTries = 10

// align makes seq (ids without BOS) re-encode to its own length, as
// vLLM's gen_prompt_decode_to_target_len does: decode, re-encode, pad with
// random allowed ids or truncate to the length, up to alignTries times.
// The result always has len(seq) ids.
func align(tok Tokenizer, bos, seq, allowed []int, rng *rand.Rand) []int {
	target := len(seq)
	for range alignTries {
		re := tok.Encode(tok.Decode(seq))
		if len(re) >= len(bos) && slices.Equal(re[:len(bos)], bos) {
			re = re[len(bos):]
		}
		if len(re) == target {
			return re
		}
		if len(re) > target {
			re = re[:target]
		}
		for len(re) < target {
			re = append(re, allowed[rng.IntN(len(allowed))])
		}
		seq = re
	}
	return seq
}

// allowedIDs is [0, Vocab) less special ids and bos.
func allowedIDs(tok Tokenizer, bos []int) []int {
	sp, _ := tok.(SpecialTokens)
	var ids []int
	for id := range tok.Vocab() {
		if slices.Contains(bos, id) || (sp != nil && sp.Special(id)) {
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

// ShareGPT pruning, vLLM's is_valid_sequence defaults: prompts and replies
// of fewer than 4 tokens, prompts over 1024 tokens and pairs over 2048
// are skipped.
const (
	shareGPTMinLen    = 4
	shareGPTMaxPrompt = 1024
	shareGPTMaxTotal  = 2048
)

// fileEntry is one entry of a workload file.
type fileEntry struct {
	Prompt        *string   `json:"prompt"`
	MaxTokens     *int      `json:"max_tokens"`
	OutputLen     *int      `json:"output_len"`
	Messages      []Message `json:"messages"`
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`

	line int   // in a JSONL file
	off  int64 // in a JSON array: the object's byte offset
}

func (e *fileEntry) shareGPT() bool { return e.Conversations != nil }

// where is "path:line" of e.
func (e *fileEntry) where(path string) string {
	line := e.line
	if line == 0 {
		line = countLines(path, e.off)
	}
	return fmt.Sprintf("%s:%d", path, line)
}

// FromFile reads a workload file: JSON Lines, one object per line, or one
// JSON array of the same objects. Each object is one of
//
//	{"prompt": "text", "max_tokens": 128}      (or "output_len"; both optional)
//	{"messages": [{"role": "user", "content": "text"}], "max_tokens": 128}
//	{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}
//
// and every object of a file must be of the same kind, prompts (the first
// two) or ShareGPT conversations. Messages are rendered with tok.Chat.
//
// Prompt files keep their order. Each request asks for outputLen tokens
// when outputLen > 0, otherwise for the object's max_tokens or output_len
// (an object with neither is then an error).
//
// ShareGPT files are read as vLLM's sharegpt dataset does: conversations
// of fewer than two turns are dropped, the rest shuffled with seed; the
// prompt is turn 0's value and the output length the token count of turn
// 1's value (tok.Encode, BOS included, as vLLM counts it) unless outputLen
// > 0 overrides it (--sharegpt-output-len); pairs vLLM would skip are
// skipped (prompt or reply under 4 tokens — the reply check only without
// outputLen —, prompt over 1024, both over 2048). IgnoreEOS is not set.
//
// n > 0 takes the first n requests, repeating the file's requests in
// order when it has fewer; n ≤ 0 takes them all. Malformed lines are
// errors naming file:line and wrapping ErrWorkload.
func FromFile(tok Tokenizer, path string, n, outputLen int, seed uint64) ([]Request, error) {
	if tok == nil {
		return nil, fmt.Errorf("%w: no tokenizer", ErrWorkload)
	}
	if err := checkCount(n); err != nil {
		return nil, err
	}
	entries, err := readEntries(path)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%w: %s has no entries", ErrWorkload, path)
	}
	kind := entries[0].shareGPT()
	for _, e := range entries {
		if e.shareGPT() != kind {
			return nil, fmt.Errorf("%w: %s: mixes ShareGPT conversations and prompts (%s is the other kind)", ErrWorkload, e.where(path), entries[0].where(path))
		}
	}
	var reqs []Request
	if kind {
		reqs = shareGPTRequests(tok, entries, n, outputLen, seed)
		if len(reqs) == 0 {
			return nil, fmt.Errorf("%w: %s: no conversation fits vLLM's ShareGPT limits (2+ turns, prompt and reply of 4+ tokens, prompt ≤ %d, both ≤ %d)",
				ErrWorkload, path, shareGPTMaxPrompt, shareGPTMaxTotal)
		}
	} else {
		if reqs, err = promptRequests(tok, path, entries, n, outputLen); err != nil {
			return nil, err
		}
	}
	if n > 0 {
		have := len(reqs)
		for i := have; i < n; i++ {
			r := reqs[i%have]
			r.Prompt = slices.Clone(r.Prompt)
			reqs = append(reqs, r)
		}
		reqs = reqs[:n]
	}
	for i := range reqs {
		reqs[i].Index = i
	}
	return reqs, nil
}

func shareGPTRequests(tok Tokenizer, entries []*fileEntry, n, outputLen int, seed uint64) []Request {
	var convs []*fileEntry
	for _, e := range entries {
		if len(e.Conversations) >= 2 {
			convs = append(convs, e)
		}
	}
	rng := rand.New(rand.NewPCG(seed, streamFile))
	rng.Shuffle(len(convs), func(i, j int) { convs[i], convs[j] = convs[j], convs[i] })
	var reqs []Request
	for _, e := range convs {
		if n > 0 && len(reqs) >= n {
			break
		}
		prompt := e.Conversations[0].Value
		ids := tok.Encode(prompt)
		out := outputLen
		if out <= 0 {
			out = len(tok.Encode(e.Conversations[1].Value))
		}
		if len(ids) < shareGPTMinLen || (outputLen <= 0 && out < shareGPTMinLen) ||
			len(ids) > shareGPTMaxPrompt || len(ids)+out > shareGPTMaxTotal {
			continue
		}
		reqs = append(reqs, Request{Prompt: ids, Text: prompt, MaxTokens: out})
	}
	return reqs
}

func promptRequests(tok Tokenizer, path string, entries []*fileEntry, n, outputLen int) ([]Request, error) {
	if n > 0 && n < len(entries) {
		entries = entries[:n]
	}
	reqs := make([]Request, 0, len(entries))
	for _, e := range entries {
		out := outputLen
		if out <= 0 {
			switch {
			case e.MaxTokens != nil:
				out = *e.MaxTokens
			case e.OutputLen != nil:
				out = *e.OutputLen
			default:
				return nil, fmt.Errorf("%w: %s: no max_tokens or output_len, and no output length was given", ErrWorkload, e.where(path))
			}
		}
		r := Request{MaxTokens: out}
		if e.Prompt != nil {
			r.Text = *e.Prompt
			r.Prompt = tok.Encode(r.Text)
		} else {
			ids, text, err := tok.Chat(e.Messages)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: rendering messages: %w", ErrWorkload, e.where(path), err)
			}
			r.Prompt, r.Text, r.Messages = ids, text, e.Messages
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

// readEntries parses a workload file into checked entries, each with its
// line number.
func readEntries(path string) ([]*fileEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWorkload, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	skipped, err := skipSpace(br)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrWorkload, path, err)
	}
	if b, _ := br.Peek(1); b[0] == '[' {
		return readArray(path, io.MultiReader(bytes.NewReader(skipped), br))
	}
	var entries []*fileEntry
	for line := 1 + bytes.Count(skipped, []byte("\n")); ; line++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			e, perr := parseEntry(b)
			if perr != nil {
				return nil, fmt.Errorf("%w: %s:%d: %w", ErrWorkload, path, line, perr)
			}
			e.line = line
			entries = append(entries, e)
		}
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %w", ErrWorkload, path, line, err)
		}
	}
}

// skipSpace consumes leading white space and returns it; it returns io.EOF
// when nothing else follows.
func skipSpace(br *bufio.Reader) ([]byte, error) {
	var skipped []byte
	for {
		b, err := br.ReadByte()
		if err != nil {
			return skipped, err
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			skipped = append(skipped, b)
			continue
		}
		return skipped, br.UnreadByte()
	}
}

// countLines is the 1-based line of byte offset off in the file at path
// (read again only to word an error, so that parsing keeps no line table).
func countLines(path string, off int64) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	line := 1
	buf := make([]byte, 1<<16)
	for off > 0 {
		n, err := f.Read(buf[:min(int64(len(buf)), off)])
		line += bytes.Count(buf[:n], []byte("\n"))
		off -= int64(n)
		if err != nil {
			break
		}
	}
	return line
}

// readArray parses a JSON array of entries from r, which starts at the
// start of the file at path.
func readArray(path string, r io.Reader) ([]*fileEntry, error) {
	dec := json.NewDecoder(r)
	errAt := func(off int64, err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		return fmt.Errorf("%w: %s:%d: %w", ErrWorkload, path, countLines(path, off), err)
	}
	if _, err := dec.Token(); err != nil {
		return nil, errAt(dec.InputOffset(), err)
	}
	var entries []*fileEntry
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errAt(dec.InputOffset(), err)
		}
		off := dec.InputOffset() - int64(len(raw))
		e, err := parseEntry(raw)
		if err != nil {
			return nil, errAt(off, err)
		}
		e.off = off
		entries = append(entries, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, errAt(dec.InputOffset(), err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errAt(dec.InputOffset(), errors.New("data after the array"))
	}
	return entries, nil
}

// parseEntry decodes and checks one object.
func parseEntry(b []byte) (*fileEntry, error) {
	var e fileEntry
	if err := json.Unmarshal(b, &e); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%q: want %s, not a JSON %s", te.Field, jsonKind(te.Type), te.Value)
		}
		return nil, err
	}
	kinds := 0
	for _, has := range []bool{e.Prompt != nil, e.Messages != nil, e.Conversations != nil} {
		if has {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		return nil, errors.New(`no "prompt", "messages" or "conversations"`)
	case kinds > 1:
		return nil, errors.New(`more than one of "prompt", "messages" and "conversations"`)
	case e.Prompt != nil && *e.Prompt == "":
		return nil, errors.New(`empty "prompt"`)
	case e.Messages != nil && len(e.Messages) == 0:
		return nil, errors.New(`empty "messages"`)
	case e.MaxTokens != nil && e.OutputLen != nil:
		return nil, errors.New(`both "max_tokens" and "output_len"`)
	case e.MaxTokens != nil && *e.MaxTokens < 1:
		return nil, fmt.Errorf(`"max_tokens" %d`, *e.MaxTokens)
	case e.OutputLen != nil && *e.OutputLen < 1:
		return nil, fmt.Errorf(`"output_len" %d`, *e.OutputLen)
	}
	return &e, nil
}

// jsonKind names what JSON value decodes into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Slice:
		return "an array"
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}

// BuiltIn makes n prompts from kvq's built-in eval-split data (package
// datasets, seeded with seed): in turn a story, a multi-key lookup, a copy
// task, a JSON record, a passkey in about 1.5 kB of filler and a safety
// policy with padding, each asking for outputLen tokens with IgnoreEOS set
// (so that caches compared on the same workload do the same work). The
// same arguments give the same requests.
func BuiltIn(tok Tokenizer, n, outputLen int, seed uint64) ([]Request, error) {
	switch {
	case tok == nil:
		return nil, fmt.Errorf("%w: no tokenizer", ErrWorkload)
	case n < 1:
		return nil, fmt.Errorf("%w: %d requests", ErrWorkload, n)
	case outputLen < 1:
		return nil, fmt.Errorf("%w: output length %d", ErrWorkload, outputLen)
	case n > MaxPrompts:
		return nil, checkCount(n)
	}
	g := datasets.New(datasets.Eval, seed)
	reqs := make([]Request, n)
	for i := range reqs {
		var text string
		switch i % 6 {
		case 0:
			text = g.Story().Text()
		case 1:
			text = g.MultiKey(16).Prompt
		case 2:
			text = g.Copy(24).Prompt
		case 3:
			text = g.JSONRecord().Prompt
		case 4:
			text = g.Passkey(1500, float64(i%7)/6).Prompt
		default:
			text = g.Safety(i%12 == 5, 6, 600).Prompt
		}
		reqs[i] = Request{Index: i, Prompt: tok.Encode(text), Text: text, MaxTokens: outputLen, IgnoreEOS: true}
	}
	return reqs, nil
}
