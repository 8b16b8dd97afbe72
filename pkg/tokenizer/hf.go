package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Hugging Face tokenizer.json support. The file is a tree of typed nodes
// (normalizer, pre_tokenizer, model, post_processor, decoder) plus the
// added tokens. ParseHF accepts the node combinations that the Llama 2 /
// TinyLlama / Mistral (SentencePiece-style BPE with byte fallback), Llama 3,
// Qwen2 / Qwen2.5 / Qwen3 and GPT-2 families use, maps them onto a Vocab,
// and rejects everything else with an *HFError that names the JSON path.

// HFConfig is what ParseHF reports besides the Vocab: the special tokens
// and settings of tokenizer_config.json, completed from tokenizer.json
// where the config is missing or silent.
type HFConfig struct {
	// Special token texts, "" when the files name none. Without a
	// tokenizer_config.json, BOSToken and EOSToken come from the
	// post-processor template and UnkToken from model.unk_token.
	BOSToken, EOSToken, PadToken, UnkToken string
	// AddBOS and AddEOS say whether BOS and EOS are added around an
	// encoded text: add_bos_token and add_eos_token when the config has
	// them, else whether the post-processor template adds them.
	AddBOS, AddEOS bool
	// ChatTemplate is the Jinja chat template: chat_template when it is a
	// string, or, when it is a list of {name, template}, the one named
	// "default" or else the first. "" when absent.
	ChatTemplate string
	// ModelMaxLength is model_max_length, 0 when absent. Values beyond
	// int64 (transformers writes 1e30 to mean "no limit") become
	// math.MaxInt64.
	ModelMaxLength int64
}

// HFError describes a tokenizer.json or tokenizer_config.json that
// ParseHF cannot use. Err is ErrHFFormat (not JSON, or a value of the wrong
// shape), ErrUnsupported (a feature kvq does not implement),
// ErrUnknownPreTokenizer (a Split pattern kvq does not recognize) or
// ErrInvalidVocab (contents that contradict each other, such as a merge of
// an unknown token or two tokens with one id); Unwrap returns it.
type HFError struct {
	File string // "tokenizer.json" or "tokenizer_config.json"
	// Path is the JSON path of the offending value, such as
	// "model.merges[12]" or `model.vocab["abc"]`; "" for the whole file.
	Path string
	// Line and Column locate a JSON syntax error (1-based); 0 otherwise.
	Line, Column int
	Msg          string
	Err          error
}

func (e *HFError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Column)
	}
	if e.Path != "" {
		where += " " + e.Path
	}
	return fmt.Sprintf("%v: %s: %s", e.Err, where, e.Msg)
}

func (e *HFError) Unwrap() error { return e.Err }

const (
	hfTokenizerFile = "tokenizer.json"
	hfConfigFile    = "tokenizer_config.json"
)

// The Split patterns of the byte-level pre-tokenizers, exactly as
// tokenizer.json spells them (after JSON unescaping).
const (
	hfPatternGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	hfPatternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	hfPatternQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// hfPatterns maps the known Split patterns to PreTokenizer names.
var hfPatterns = map[string]string{
	hfPatternGPT2:   "gpt2",
	hfPatternLlama3: "llama3",
	hfPatternQwen2:  "qwen2",
	hfPatternO200k:  "o200k",
}

// ParseHF reads a Hugging Face tokenizer.json and, when tokenizerConfig is
// not nil, its tokenizer_config.json, and returns the Vocab to pass to New
// and the special-token settings.
//
// It accepts BPE models in two shapes:
//
//   - SentencePiece style (Llama 2, TinyLlama, Mistral): byte_fallback,
//     "▁" for spaces through the normalizer Sequence[Prepend("▁"),
//     Replace(" ", "▁")] or the Metaspace pre-tokenizer (prepend_scheme
//     "first", "always" or "never", split true or false). The Vocab has Kind
//     SentencePieceBPE and Merges instead of Scores.
//   - Byte level (GPT-2, Llama 3, Qwen2): the ByteLevel pre-tokenizer with
//     its own regex, or a Split whose pattern is the Llama 3 or Qwen2 regex
//     followed by ByteLevel(use_regex false); optionally the NFC
//     normalizer. The Vocab has Kind ByteLevelBPE.
//
// Merges may be "left right" strings or ["left", "right"] pairs. Added
// tokens become Control tokens when special, UserDefined otherwise, and may
// extend the model's vocabulary; together the ids must number the tokens
// 0..n-1. The special tokens come from tokenizer_config.json (bos_token,
// eos_token, pad_token, unk_token, add_bos_token, add_eos_token) and else
// from the post-processor template and model.unk_token; BOS, EOS, PAD and
// UNK are always typed Control (UNK: Unknown).
//
// Errors are *HFError values, or a reader's error wrapped with the file
// name; ParseHF never panics on file contents. New accepts every Vocab that
// ParseHF returns. Not supported: other model
// types (WordPiece, Unigram, WordLevel), other normalizers and
// pre-tokenizers, BPE dropout, subword prefixes and suffixes, and the
// lstrip, rstrip, single_word and normalized options of added tokens,
// which are ignored.
func ParseHF(tokenizerJSON io.Reader, tokenizerConfig io.Reader) (Vocab, HFConfig, error) {
	data, err := io.ReadAll(tokenizerJSON)
	if err != nil {
		return Vocab{}, HFConfig{}, fmt.Errorf("tokenizer: reading %s: %w", hfTokenizerFile, err)
	}
	p := &hfParser{file: hfTokenizerFile, data: data, templateBOSID: -1, templateEOSID: -1}
	v, cfg, err := p.parse()
	if err != nil {
		return Vocab{}, HFConfig{}, err
	}
	if tokenizerConfig != nil {
		cdata, err := io.ReadAll(tokenizerConfig)
		if err != nil {
			return Vocab{}, HFConfig{}, fmt.Errorf("tokenizer: reading %s: %w", hfConfigFile, err)
		}
		if err := p.applyConfig(&cfg, cdata); err != nil {
			return Vocab{}, HFConfig{}, err
		}
	}
	if err := p.finishSpecials(&v, &cfg); err != nil {
		return Vocab{}, HFConfig{}, err
	}
	return v, cfg, nil
}

// JSON shapes. Polymorphic nodes decode into hfNode, which has the fields
// of every node type kvq understands.

type hfFile struct {
	AddedTokens   []json.RawMessage `json:"added_tokens"`
	Normalizer    json.RawMessage   `json:"normalizer"`
	PreTokenizer  json.RawMessage   `json:"pre_tokenizer"`
	PostProcessor json.RawMessage   `json:"post_processor"`
	Decoder       json.RawMessage   `json:"decoder"`
	Model         json.RawMessage   `json:"model"`
}

type hfAddedToken struct {
	ID      *int64  `json:"id"`
	Content *string `json:"content"`
	Special bool    `json:"special"`
}

type hfModel struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

type hfNode struct {
	Type string `json:"type"`
	// Sequence
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Decoders      []json.RawMessage `json:"decoders"`
	// Prepend
	Prepend *string `json:"prepend"`
	// Replace, Split
	Pattern *hfPattern `json:"pattern"`
	// Replace, Strip (decoder)
	Content *string `json:"content"`
	// Split
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
	// ByteLevel, Metaspace (legacy)
	AddPrefixSpace *bool `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
	// Metaspace
	Replacement   *string `json:"replacement"`
	PrependScheme *string `json:"prepend_scheme"`
	Split         *bool   `json:"split"`
	// Strip (decoder)
	Start *int `json:"start"`
	Stop  *int `json:"stop"`
	// TemplateProcessing
	Single        []hfTemplatePiece    `json:"single"`
	SpecialTokens map[string]hfSpecial `json:"special_tokens"`
}

type hfPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type hfTemplatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type hfSpecial struct {
	IDs []int64 `json:"ids"`
}

type hfConfigJSON struct {
	AddBOSToken    *bool           `json:"add_bos_token"`
	AddEOSToken    *bool           `json:"add_eos_token"`
	BOSToken       json.RawMessage `json:"bos_token"`
	EOSToken       json.RawMessage `json:"eos_token"`
	PadToken       json.RawMessage `json:"pad_token"`
	UnkToken       json.RawMessage `json:"unk_token"`
	ChatTemplate   json.RawMessage `json:"chat_template"`
	ModelMaxLength json.RawMessage `json:"model_max_length"`
}

// hfParser holds the state shared by the parsing steps.
type hfParser struct {
	file string // file being read, for errors
	data []byte

	ids map[string]int // token text -> id, over model.vocab and added tokens
	// template specials from the post-processor, "" if none.
	templateBOS, templateEOS string
	// templateBOSID and templateEOSID are their ids, -1 if none.
	templateBOSID, templateEOSID int
	unkFromModel                 string
}

func (p *hfParser) errf(sentinel error, path, format string, args ...any) error {
	return &HFError{File: p.file, Path: path, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// decode unmarshals raw into v, turning JSON errors into *HFError values
// under path. Syntax errors get their line and column when raw is the
// whole file.
func (p *hfParser) decode(raw []byte, v any, path string) error {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		e := &HFError{File: p.file, Path: path, Msg: syn.Error(), Err: ErrHFFormat}
		if path == "" {
			e.Line, e.Column = lineColumn(raw, syn.Offset)
		}
		return e
	case errors.As(err, &typ):
		where := joinPath(path, typ.Field)
		return p.errf(ErrHFFormat, where, "%s where JSON %s is expected", typ.Value, goTypeName(typ.Type.String()))
	}
	return p.errf(ErrHFFormat, path, "%v", err)
}

// goTypeName turns the Go type of an UnmarshalTypeError into JSON words.
func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "array"
	case strings.HasPrefix(t, "map[") || strings.HasPrefix(t, "tokenizer.") || strings.HasPrefix(t, "struct"):
		return "object"
	case strings.Contains(t, "int") || strings.Contains(t, "float"):
		return "number"
	case strings.Contains(t, "bool"):
		return "boolean"
	case strings.Contains(t, "string"):
		return "string"
	}
	return t
}

func joinPath(path, field string) string {
	switch {
	case field == "":
		return path
	case path == "":
		return field
	}
	return path + "." + field
}

// lineColumn converts a byte offset into a 1-based line and column
// (counted in bytes).
func lineColumn(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col == 0 {
		col = 1 // the offset is after the bad byte, except at a line start
	}
	return line, col
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// parse reads tokenizer.json.
func (p *hfParser) parse() (Vocab, HFConfig, error) {
	var f hfFile
	if err := p.decode(p.data, &f, ""); err != nil {
		return Vocab{}, HFConfig{}, err
	}
	if isNull(f.Model) {
		return Vocab{}, HFConfig{}, p.errf(ErrHFFormat, "model", "missing")
	}
	var m hfModel
	if err := p.decode(f.Model, &m, "model"); err != nil {
		return Vocab{}, HFConfig{}, err
	}
	if err := p.checkModel(&m); err != nil {
		return Vocab{}, HFConfig{}, err
	}

	// The shape: SentencePiece style or byte level.
	var v Vocab
	byteLevel, err := p.preTokenizer(f.PreTokenizer, &v)
	if err != nil {
		return Vocab{}, HFConfig{}, err
	}
	if err := p.normalizer(f.Normalizer, &v, byteLevel); err != nil {
		return Vocab{}, HFConfig{}, err
	}
	if err := p.decoder(f.Decoder, byteLevel); err != nil {
		return Vocab{}, HFConfig{}, err
	}
	if byteLevel {
		v.Kind = ByteLevelBPE
		v.IgnoreMerges = IgnoreMergesOff
		if m.IgnoreMerges {
			v.IgnoreMerges = IgnoreMergesOn
		}
	} else {
		v.Kind = SentencePieceBPE
		v.FuseUnknown = m.FuseUnk
		if m.IgnoreMerges {
			v.IgnoreMerges = IgnoreMergesOn
		}
	}

	if err := p.tokens(&v, &m, f.AddedTokens); err != nil {
		return Vocab{}, HFConfig{}, err
	}
	if err := p.merges(&v, m.Merges); err != nil {
		return Vocab{}, HFConfig{}, err
	}
	if err := p.postProcessor(f.PostProcessor, "post_processor"); err != nil {
		return Vocab{}, HFConfig{}, err
	}

	v.BOS, v.EOS, v.UNK, v.PAD = -1, -1, -1, -1
	var cfg HFConfig
	if m.UnkToken != nil && *m.UnkToken != "" {
		if _, ok := p.ids[*m.UnkToken]; !ok {
			return Vocab{}, HFConfig{}, p.errf(ErrInvalidVocab, "model.unk_token", "%q is not a token", *m.UnkToken)
		}
		p.unkFromModel = *m.UnkToken
		cfg.UnkToken = *m.UnkToken
	}
	cfg.BOSToken, cfg.EOSToken = p.templateBOS, p.templateEOS
	cfg.AddBOS, cfg.AddEOS = p.templateBOS != "", p.templateEOS != ""
	return v, cfg, nil
}

func (p *hfParser) checkModel(m *hfModel) error {
	switch m.Type {
	case "BPE":
	case "":
		if isNull(m.Merges) {
			return p.errf(ErrHFFormat, "model.type", "missing")
		}
		// Files from old tokenizers versions leave out the type of a
		// BPE model, which alone has merges.
	default:
		return p.errf(ErrUnsupported, "model.type", "%q: kvq supports BPE tokenizers only (Llama 2/3, Mistral, Qwen2, GPT-2)", m.Type)
	}
	if m.Dropout != nil && *m.Dropout > 0 {
		return p.errf(ErrUnsupported, "model.dropout", "BPE dropout %v is not supported", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return p.errf(ErrUnsupported, "model.continuing_subword_prefix", "%q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return p.errf(ErrUnsupported, "model.end_of_word_suffix", "%q is not supported", *m.EndOfWordSuffix)
	}
	if isNull(m.Vocab) {
		return p.errf(ErrHFFormat, "model.vocab", "missing")
	}
	if isNull(m.Merges) {
		return p.errf(ErrHFFormat, "model.merges", "missing")
	}
	return nil
}

// preTokenizer interprets pre_tokenizer: it sets the Metaspace fields or
// the byte-level PreTokenizer of v and reports which shape it is.
func (p *hfParser) preTokenizer(raw json.RawMessage, v *Vocab) (byteLevel bool, err error) {
	const path = "pre_tokenizer"
	if isNull(raw) {
		return false, nil
	}
	var n hfNode
	if err := p.decode(raw, &n, path); err != nil {
		return false, err
	}
	switch n.Type {
	case "Metaspace":
		return false, p.metaspace(&n, path, v)
	case "ByteLevel":
		if err := p.byteLevelPre(&n, path, true); err != nil {
			return false, err
		}
		v.PreTokenizer = "gpt2"
		return true, nil
	case "Sequence":
		if len(n.Pretokenizers) == 1 {
			// A one-element Sequence is its element.
			return p.preTokenizer(n.Pretokenizers[0], v)
		}
		if len(n.Pretokenizers) != 2 {
			return false, p.errf(ErrUnsupported, path+".pretokenizers", "%d pre-tokenizers: kvq supports Split(pattern) followed by ByteLevel", len(n.Pretokenizers))
		}
		var split, bl hfNode
		if err := p.decode(n.Pretokenizers[0], &split, path+".pretokenizers[0]"); err != nil {
			return false, err
		}
		if err := p.decode(n.Pretokenizers[1], &bl, path+".pretokenizers[1]"); err != nil {
			return false, err
		}
		if split.Type != "Split" || bl.Type != "ByteLevel" {
			return false, p.errf(ErrUnsupported, path+".pretokenizers", "types %q, %q: kvq supports Split(pattern) followed by ByteLevel", split.Type, bl.Type)
		}
		name, err := p.split(&split, path+".pretokenizers[0]")
		if err != nil {
			return false, err
		}
		if err := p.byteLevelPre(&bl, path+".pretokenizers[1]", false); err != nil {
			return false, err
		}
		v.PreTokenizer = name
		return true, nil
	case "Split":
		return false, p.errf(ErrUnsupported, path, "Split without a following ByteLevel pre-tokenizer is not supported")
	}
	return false, p.errf(ErrUnsupported, path+".type", "%q: kvq supports Metaspace, ByteLevel and Sequence[Split, ByteLevel]", n.Type)
}

// byteLevelPre checks a ByteLevel pre-tokenizer; regex says whether it
// must split with the GPT-2 regex itself (use_regex true, the default) or
// follow a Split (use_regex false).
func (p *hfParser) byteLevelPre(n *hfNode, path string, regex bool) error {
	if n.AddPrefixSpace != nil && *n.AddPrefixSpace {
		return p.errf(ErrUnsupported, path+".add_prefix_space", "true is not supported (GPT-2, Llama 3 and Qwen2 use false)")
	}
	useRegex := n.UseRegex == nil || *n.UseRegex
	switch {
	case regex && !useRegex:
		return p.errf(ErrUnsupported, path+".use_regex", "false without a Split pre-tokenizer is not supported")
	case !regex && useRegex:
		return p.errf(ErrUnsupported, path+".use_regex", "true after a Split pre-tokenizer is not supported")
	}
	return nil
}

// split recognizes the pattern of a Split pre-tokenizer.
func (p *hfParser) split(n *hfNode, path string) (string, error) {
	if n.Pattern == nil || n.Pattern.Regex == nil {
		return "", p.errf(ErrUnsupported, path+".pattern", "want a Regex pattern")
	}
	if n.Behavior != "Isolated" {
		return "", p.errf(ErrUnsupported, path+".behavior", "%q: kvq supports \"Isolated\"", n.Behavior)
	}
	if n.Invert {
		return "", p.errf(ErrUnsupported, path+".invert", "true is not supported")
	}
	name, ok := hfPatterns[*n.Pattern.Regex]
	if !ok {
		return "", p.errf(ErrUnknownPreTokenizer, path+".pattern.Regex",
			"pattern %q is not one kvq knows: it supports the GPT-2, Llama 3 and Qwen2 patterns", *n.Pattern.Regex)
	}
	return name, nil
}

// metaspace interprets a Metaspace pre-tokenizer.
func (p *hfParser) metaspace(n *hfNode, path string, v *Vocab) error {
	if n.Replacement == nil || *n.Replacement != metaspace {
		got := "none"
		if n.Replacement != nil {
			got = strconv.Quote(*n.Replacement)
		}
		return p.errf(ErrUnsupported, path+".replacement", "%s: kvq supports \"▁\"", got)
	}
	scheme := "always" // the default of tokenizers' Metaspace
	if n.PrependScheme != nil {
		scheme = *n.PrependScheme
	}
	if n.AddPrefixSpace != nil && !*n.AddPrefixSpace {
		if n.PrependScheme != nil && scheme != "never" {
			return p.errf(ErrHFFormat, path+".add_prefix_space", "false contradicts prepend_scheme %q", scheme)
		}
		scheme = "never"
	}
	v.SpaceIsMetaspace = true
	switch scheme {
	case "always":
		v.AddSpacePrefix, v.PrefixRule = true, PrefixUnlessSpace
	case "first":
		v.AddSpacePrefix, v.PrefixRule = true, PrefixFirstOnly
	case "never":
	default:
		return p.errf(ErrHFFormat, path+".prepend_scheme", "%q: want \"first\", \"always\" or \"never\"", scheme)
	}
	// Files written before tokenizers 0.19 have no "split" and always
	// split.
	v.SplitOnSpace = n.Split == nil || *n.Split
	return nil
}

// normalizer interprets the normalizer.
func (p *hfParser) normalizer(raw json.RawMessage, v *Vocab, byteLevel bool) error {
	const path = "normalizer"
	if isNull(raw) {
		return nil
	}
	var n hfNode
	if err := p.decode(raw, &n, path); err != nil {
		return err
	}
	steps := []json.RawMessage{raw}
	paths := []string{path}
	if n.Type == "Sequence" {
		steps = n.Normalizers
		paths = paths[:0]
		for i := range steps {
			paths = append(paths, fmt.Sprintf("%s.normalizers[%d]", path, i))
		}
	}
	var prepend, replace bool
	for i, raw := range steps {
		var s hfNode
		if err := p.decode(raw, &s, paths[i]); err != nil {
			return err
		}
		switch s.Type {
		case "NFC":
			v.NFC = true
		case "Prepend":
			if s.Prepend == nil || *s.Prepend != metaspace {
				return p.errf(ErrUnsupported, paths[i]+".prepend", "kvq supports Prepend(\"▁\") only")
			}
			prepend = true
		case "Replace":
			if s.Pattern == nil || s.Pattern.String == nil || *s.Pattern.String != " " || s.Content == nil || *s.Content != metaspace {
				return p.errf(ErrUnsupported, paths[i], "kvq supports Replace(\" \", \"▁\") only")
			}
			replace = true
		default:
			return p.errf(ErrUnsupported, paths[i]+".type", "%q: kvq supports NFC, Prepend(\"▁\") and Replace(\" \", \"▁\")", s.Type)
		}
	}
	switch {
	case byteLevel && (prepend || replace):
		return p.errf(ErrUnsupported, path, "Prepend or Replace with a byte-level pre-tokenizer is not supported")
	case (prepend || replace) && v.SpaceIsMetaspace:
		return p.errf(ErrUnsupported, path, "Prepend or Replace with a Metaspace pre-tokenizer is not supported")
	case prepend && !replace:
		return p.errf(ErrUnsupported, path, "Prepend(\"▁\") without Replace(\" \", \"▁\") is not supported")
	}
	if replace {
		v.SpaceIsMetaspace = true
		v.AddSpacePrefix = prepend
		v.PrefixRule = PrefixEachStretch
	}
	return nil
}

// decoder checks that the decoder fits the shape: decoding itself is the
// package's own (byte-alphabet or "▁" spelling, byte tokens).
func (p *hfParser) decoder(raw json.RawMessage, byteLevel bool) error {
	const path = "decoder"
	if isNull(raw) {
		if byteLevel {
			return p.errf(ErrUnsupported, path, "a byte-level tokenizer needs the ByteLevel decoder")
		}
		return nil
	}
	var n hfNode
	if err := p.decode(raw, &n, path); err != nil {
		return err
	}
	steps := []json.RawMessage{raw}
	paths := []string{path}
	if n.Type == "Sequence" {
		steps = n.Decoders
		paths = paths[:0]
		for i := range steps {
			paths = append(paths, fmt.Sprintf("%s.decoders[%d]", path, i))
		}
	}
	sawByteLevel := false
	for i, raw := range steps {
		var s hfNode
		if err := p.decode(raw, &s, paths[i]); err != nil {
			return err
		}
		switch s.Type {
		case "ByteLevel":
			sawByteLevel = true
		case "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip":
		default:
			return p.errf(ErrUnsupported, paths[i]+".type", "%q: kvq supports the ByteLevel, Metaspace, Replace, ByteFallback, Fuse and Strip decoders", s.Type)
		}
	}
	if byteLevel != sawByteLevel {
		if byteLevel {
			return p.errf(ErrUnsupported, path, "a byte-level tokenizer needs the ByteLevel decoder")
		}
		return p.errf(ErrUnsupported, path, "the ByteLevel decoder needs a byte-level pre-tokenizer")
	}
	return nil
}

// tokens reads model.vocab and added_tokens into v.Tokens and v.Types.
func (p *hfParser) tokens(v *Vocab, m *hfModel, added []json.RawMessage) error {
	type entry struct {
		text    string
		id      int
		added   int // index in added_tokens, -1 for model.vocab
		special bool
	}
	pathOf := func(e entry) string {
		if e.added >= 0 {
			return fmt.Sprintf("added_tokens[%d]", e.added)
		}
		return "model.vocab[" + strconv.Quote(e.text) + "]"
	}
	var entries []entry
	// model.vocab is scanned in file order, for deterministic errors and
	// to see duplicate keys.
	err := scanVocab(m.Vocab, func(text string, num []byte) error {
		e := entry{text: text, added: -1}
		id, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil {
			return p.errf(ErrHFFormat, pathOf(e), "id %s is not an integer", num)
		}
		if id < 0 || id > math.MaxInt32 {
			return p.errf(ErrInvalidVocab, pathOf(e), "id %d out of range", id)
		}
		e.id = int(id)
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		var he *HFError
		if errors.As(err, &he) {
			return err
		}
		return p.errf(ErrHFFormat, "model.vocab", "%v", err)
	}
	nModel := len(entries)
	for i, raw := range added {
		path := fmt.Sprintf("added_tokens[%d]", i)
		var a hfAddedToken
		if err := p.decode(raw, &a, path); err != nil {
			return err
		}
		if a.ID == nil {
			return p.errf(ErrHFFormat, path+".id", "missing")
		}
		if a.Content == nil || *a.Content == "" {
			return p.errf(ErrHFFormat, path+".content", "missing or empty")
		}
		if *a.ID < 0 || *a.ID > math.MaxInt32 {
			return p.errf(ErrInvalidVocab, path+".id", "id %d out of range", *a.ID)
		}
		entries = append(entries, entry{text: *a.Content, id: int(*a.ID), added: i, special: a.Special})
	}

	// The ids must number the tokens 0..n-1; an added token may repeat a
	// model token with the same id (Llama 2's <unk>, <s>, </s>).
	limit := len(entries)
	v.Tokens = make([]string, 0, min(limit, 1<<20))
	owner := make([]int, 0, min(limit, 1<<20)) // entry index per id, -1 for none
	p.ids = make(map[string]int, limit)
	for i, e := range entries {
		added, prevAdded := e.added >= 0, false
		if e.id >= limit {
			return p.errf(ErrInvalidVocab, pathOf(e), "id %d out of range: %d entries can only number ids 0..%d", e.id, limit, limit-1)
		}
		for len(owner) <= e.id {
			owner = append(owner, -1)
			v.Tokens = append(v.Tokens, "")
		}
		if o := owner[e.id]; o >= 0 {
			prev := entries[o]
			prevAdded = prev.added >= 0
			if !added && !prevAdded && prev.text == e.text {
				return p.errf(ErrInvalidVocab, pathOf(e), "token listed twice")
			}
			if !added || prevAdded || prev.text != e.text {
				return p.errf(ErrInvalidVocab, pathOf(e), "id %d already used by %q (%s)", e.id, prev.text, pathOf(prev))
			}
		}
		if id, ok := p.ids[e.text]; ok && id != e.id {
			if !added && i < nModel {
				return p.errf(ErrInvalidVocab, pathOf(e), "token listed twice")
			}
			return p.errf(ErrInvalidVocab, pathOf(e), "token %q has id %d and %d", e.text, id, e.id)
		}
		owner[e.id] = i
		v.Tokens[e.id] = e.text
		p.ids[e.text] = e.id
	}
	for id, o := range owner {
		if o < 0 {
			return p.errf(ErrInvalidVocab, "model.vocab", "no token has id %d: the ids must number the tokens 0..%d", id, len(owner)-1)
		}
	}
	if len(owner) == 0 {
		return p.errf(ErrInvalidVocab, "model.vocab", "no tokens")
	}

	v.Types = make([]TokenType, len(v.Tokens))
	for i := range v.Types {
		v.Types[i] = Normal
	}
	for i, e := range entries {
		switch {
		case e.added >= 0 && e.special:
			v.Types[e.id] = Control
		case e.added >= 0:
			if v.Types[e.id] != Control {
				v.Types[e.id] = UserDefined
			}
		case i < nModel && v.Kind == SentencePieceBPE && m.ByteFallback:
			if _, ok := parseByteToken(e.text); ok {
				v.Types[e.id] = Byte
			}
		}
	}
	return nil
}

// scanVocab calls f for each "text": number member of the JSON object raw,
// in order. raw is known to be valid JSON; anything but an object of
// strings to numbers is an error.
func scanVocab(raw []byte, f func(text string, num []byte) error) error {
	i := 0
	skip := func() {
		for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
			i++
		}
	}
	errShape := errors.New("want a JSON object of token: id")
	skip()
	if i >= len(raw) || raw[i] != '{' {
		return errShape
	}
	i++
	skip()
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for {
		skip()
		if i >= len(raw) || raw[i] != '"' {
			return errShape
		}
		// The string ends at the first unescaped quote.
		j, escaped := i+1, false
		for j < len(raw) && raw[j] != '"' {
			if raw[j] == '\\' {
				escaped = true
				j++
			}
			j++
		}
		if j >= len(raw) {
			return errShape
		}
		var text string
		if escaped {
			if err := json.Unmarshal(raw[i:j+1], &text); err != nil {
				return err
			}
		} else {
			text = string(raw[i+1 : j])
		}
		i = j + 1
		skip()
		if i >= len(raw) || raw[i] != ':' {
			return errShape
		}
		i++
		skip()
		k := i
		for k < len(raw) && (raw[k] == '-' || raw[k] == '+' || raw[k] == '.' || raw[k] == 'e' || raw[k] == 'E' || '0' <= raw[k] && raw[k] <= '9') {
			k++
		}
		if k == i {
			return fmt.Errorf("model.vocab[%q]: want an integer id", text)
		}
		if err := f(text, raw[i:k]); err != nil {
			return err
		}
		i = k
		skip()
		if i < len(raw) && raw[i] == ',' {
			i++
			continue
		}
		if i < len(raw) && raw[i] == '}' {
			return nil
		}
		return errShape
	}
}

// pieceID returns the id that New's merge lookup uses for text: the lowest
// id of a Normal token with that text (or UserDefined, for SentencePiece).
func pieceID(v *Vocab, text string, ids map[string]int) (int, bool) {
	id, ok := ids[text]
	if !ok {
		return 0, false
	}
	typ := v.Types[id]
	return id, typ == Normal || typ == UserDefined && v.Kind == SentencePieceBPE
}

// merges reads model.merges into v.Merges, checking each against the
// vocabulary. Real files have all strings or all pairs, which decode in one
// go; element-wise decoding is for mixed lists and for precise errors.
func (p *hfParser) merges(v *Vocab, raw json.RawMessage) error {
	const path = "model.merges"
	var strs []string
	var pairs [][]string
	switch {
	case json.Unmarshal(raw, &strs) == nil:
		if len(strs) > 1<<24 {
			return p.errf(ErrUnsupported, path, "%d merges, more than %d", len(strs), 1<<24)
		}
		v.Merges = make([]string, 0, len(strs))
		for i, s := range strs {
			if err := p.addMergeString(v, i, s); err != nil {
				return err
			}
		}
		return nil
	case json.Unmarshal(raw, &pairs) == nil:
		if len(pairs) > 1<<24 {
			return p.errf(ErrUnsupported, path, "%d merges, more than %d", len(pairs), 1<<24)
		}
		v.Merges = make([]string, 0, len(pairs))
		for i, pair := range pairs {
			if err := p.addMergePair(v, i, pair); err != nil {
				return err
			}
		}
		return nil
	}
	var list []json.RawMessage
	if err := p.decode(raw, &list, path); err != nil {
		return err
	}
	if len(list) > 1<<24 {
		return p.errf(ErrUnsupported, path, "%d merges, more than %d", len(list), 1<<24)
	}
	v.Merges = make([]string, 0, len(list))
	for i, raw := range list {
		at := fmt.Sprintf("%s[%d]", path, i)
		raw = bytes.TrimSpace(raw)
		if len(raw) > 0 && raw[0] == '[' {
			var pair []string
			if err := p.decode(raw, &pair, at); err != nil {
				return err
			}
			if err := p.addMergePair(v, i, pair); err != nil {
				return err
			}
			continue
		}
		var s string
		if err := p.decode(raw, &s, at); err != nil {
			return err
		}
		if err := p.addMergeString(v, i, s); err != nil {
			return err
		}
	}
	return nil
}

// addMergeString adds merge i given as "left right".
func (p *hfParser) addMergeString(v *Vocab, i int, s string) error {
	left, right, ok := strings.Cut(s, " ")
	if !ok || strings.Contains(right, " ") {
		return p.errf(ErrHFFormat, fmt.Sprintf("model.merges[%d]", i), "%q is not \"left right\"", s)
	}
	return p.addMerge(v, i, left, right)
}

// addMergePair adds merge i given as ["left", "right"].
func (p *hfParser) addMergePair(v *Vocab, i int, pair []string) error {
	if len(pair) != 2 {
		return p.errf(ErrHFFormat, fmt.Sprintf("model.merges[%d]", i), "%d strings, want a [left, right] pair", len(pair))
	}
	return p.addMerge(v, i, pair[0], pair[1])
}

func (p *hfParser) addMerge(v *Vocab, i int, left, right string) error {
	at := fmt.Sprintf("model.merges[%d]", i)
	if left == "" || right == "" {
		return p.errf(ErrHFFormat, at, "empty half in merge %q + %q", left, right)
	}
	for _, half := range []string{left, right, left + right} {
		if _, ok := pieceID(v, half, p.ids); !ok {
			what := "is not a token"
			if _, known := p.ids[half]; known {
				what = "is a special or byte token"
			}
			return p.errf(ErrInvalidVocab, at, "merge %q + %q: %q %s", left, right, half, what)
		}
	}
	if strings.Contains(left[1:], " ") {
		// Vocab.Merges splits at the first space after the first byte.
		return p.errf(ErrUnsupported, at, "left half %q contains a space", left)
	}
	v.Merges = append(v.Merges, left+" "+right)
	return nil
}

// postProcessor finds the BOS and EOS that a TemplateProcessing adds.
func (p *hfParser) postProcessor(raw json.RawMessage, path string) error {
	if isNull(raw) {
		return nil
	}
	var n hfNode
	if err := p.decode(raw, &n, path); err != nil {
		return err
	}
	switch n.Type {
	case "ByteLevel":
		return nil
	case "Sequence":
		for i, r := range n.Processors {
			if err := p.postProcessor(r, fmt.Sprintf("%s.processors[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case "TemplateProcessing":
	default:
		return p.errf(ErrUnsupported, path+".type", "%q: kvq supports TemplateProcessing, ByteLevel and Sequence", n.Type)
	}
	seq := -1
	for i, piece := range n.Single {
		if piece.Sequence != nil {
			if seq >= 0 {
				return p.errf(ErrUnsupported, fmt.Sprintf("%s.single[%d]", path, i), "two sequences in the single template")
			}
			seq = i
		}
	}
	if seq < 0 {
		return p.errf(ErrHFFormat, path+".single", "no Sequence in the template")
	}
	for i, piece := range n.Single {
		if piece.SpecialToken == nil {
			continue
		}
		at := fmt.Sprintf("%s.single[%d]", path, i)
		name := piece.SpecialToken.ID
		id, ok := p.ids[name]
		if sp, listed := n.SpecialTokens[name]; listed {
			if len(sp.IDs) != 1 {
				return p.errf(ErrUnsupported, path+".special_tokens["+strconv.Quote(name)+"]", "%d ids: kvq supports one", len(sp.IDs))
			}
			if !ok || int64(id) != sp.IDs[0] {
				return p.errf(ErrInvalidVocab, path+".special_tokens["+strconv.Quote(name)+"]", "id %d is not the id of %q", sp.IDs[0], name)
			}
		}
		if !ok {
			return p.errf(ErrInvalidVocab, at, "special token %q is not a token", name)
		}
		if i < seq {
			if p.templateBOS != "" {
				return p.errf(ErrUnsupported, at, "more than one special token before the text")
			}
			p.templateBOS, p.templateBOSID = name, id
		} else {
			if p.templateEOS != "" {
				return p.errf(ErrUnsupported, at, "more than one special token after the text")
			}
			p.templateEOS, p.templateEOSID = name, id
		}
	}
	return nil
}

// applyConfig reads tokenizer_config.json over the defaults from
// tokenizer.json.
func (p *hfParser) applyConfig(cfg *HFConfig, data []byte) error {
	p.file = hfConfigFile
	var c hfConfigJSON
	if err := p.decode(data, &c, ""); err != nil {
		return err
	}
	for _, f := range []struct {
		raw  json.RawMessage
		name string
		dst  *string
	}{
		{c.BOSToken, "bos_token", &cfg.BOSToken},
		{c.EOSToken, "eos_token", &cfg.EOSToken},
		{c.PadToken, "pad_token", &cfg.PadToken},
		{c.UnkToken, "unk_token", &cfg.UnkToken},
	} {
		if f.raw == nil {
			continue // absent: keep what tokenizer.json says
		}
		s, err := p.tokenText(f.raw, f.name)
		if err != nil {
			return err
		}
		if s == "" && f.name == "unk_token" && p.unkFromModel != "" {
			continue // the BPE model still falls back to its unk_token
		}
		*f.dst = s
	}
	if c.AddBOSToken != nil {
		cfg.AddBOS = *c.AddBOSToken
	}
	if c.AddEOSToken != nil {
		cfg.AddEOS = *c.AddEOSToken
	}
	tmpl, err := p.chatTemplate(c.ChatTemplate)
	if err != nil {
		return err
	}
	cfg.ChatTemplate = tmpl
	if !isNull(c.ModelMaxLength) {
		n, err := maxLength(c.ModelMaxLength)
		if err != nil {
			return p.errf(ErrHFFormat, "model_max_length", "%v", err)
		}
		cfg.ModelMaxLength = n
	}
	return nil
}

// tokenText reads a special token given as a string, an AddedToken object
// {"content": ...} or null.
func (p *hfParser) tokenText(raw json.RawMessage, path string) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := p.decode(raw, &obj, path); err != nil || obj.Content == nil {
		return "", p.errf(ErrHFFormat, path, "want a string, an object with \"content\", or null")
	}
	return *obj.Content, nil
}

// chatTemplate reads chat_template: a string or a list of {name, template}.
func (p *hfParser) chatTemplate(raw json.RawMessage) (string, error) {
	const path = "chat_template"
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := p.decode(raw, &list, path); err != nil {
		return "", p.errf(ErrHFFormat, path, "want a string or a list of {name, template}")
	}
	for _, t := range list {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	if len(list) > 0 {
		return list[0].Template, nil
	}
	return "", nil
}

// maxLength reads model_max_length, clamping huge values.
func maxLength(raw json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(raw))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("negative length %d", n)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s is not a number", s)
	}
	switch {
	case f < 0 || f != f:
		return 0, fmt.Errorf("invalid length %s", s)
	case f >= math.MaxInt64:
		return math.MaxInt64, nil
	}
	return int64(f), nil
}

// finishSpecials resolves the special-token texts to ids. Texts that
// come from tokenizer.json were checked when read, so a failed lookup is
// always about tokenizer_config.json.
func (p *hfParser) finishSpecials(v *Vocab, cfg *HFConfig) error {
	p.file = hfConfigFile
	lookup := func(text, path string) (int, error) {
		if text == "" {
			return -1, nil
		}
		id, ok := p.ids[text]
		if !ok {
			return 0, p.errf(ErrInvalidVocab, path, "%q is not a token", text)
		}
		return id, nil
	}
	var err error
	if v.BOS, err = lookup(cfg.BOSToken, "bos_token"); err != nil {
		return err
	}
	if v.EOS, err = lookup(cfg.EOSToken, "eos_token"); err != nil {
		return err
	}
	if v.PAD, err = lookup(cfg.PadToken, "pad_token"); err != nil {
		return err
	}
	if v.UNK, err = lookup(cfg.UnkToken, "unk_token"); err != nil {
		return err
	}
	// The template decides which token is added when the config does
	// not name one (GPT-2 style configs) or names another.
	if cfg.AddBOS && p.templateBOS != "" && cfg.BOSToken != p.templateBOS {
		v.BOS = p.templateBOSID
	}
	if cfg.AddEOS && p.templateEOS != "" && cfg.EOSToken != p.templateEOS {
		v.EOS = p.templateEOSID
	}
	if cfg.AddBOS && v.BOS < 0 {
		return p.errf(ErrInvalidVocab, "add_bos_token", "true, but no bos_token")
	}
	if cfg.AddEOS && v.EOS < 0 {
		return p.errf(ErrInvalidVocab, "add_eos_token", "true, but no eos_token")
	}
	v.AddBOS, v.AddEOS = cfg.AddBOS, cfg.AddEOS
	for _, id := range []int{v.BOS, v.EOS, v.PAD} {
		if id >= 0 {
			v.Types[id] = Control
		}
	}
	if v.UNK >= 0 {
		v.Types[v.UNK] = Unknown
	}

	// What New checks about encodability, reported here with a path.
	p.file = hfTokenizerFile
	if v.Kind == ByteLevelBPE {
		for b := range 256 {
			if _, ok := pieceID(v, byteAlphabet[b], p.ids); !ok && v.UNK < 0 {
				return p.errf(ErrInvalidVocab, "model.vocab", "no token %q for byte 0x%02X and no unk_token", byteAlphabet[b], b)
			}
		}
	} else {
		var have [256]bool
		for id, typ := range v.Types {
			if b, ok := parseByteToken(v.Tokens[id]); ok && typ == Byte {
				have[b] = true
			}
		}
		for b := range 256 {
			if !have[b] && v.UNK < 0 {
				return p.errf(ErrInvalidVocab, "model", "no byte token <0x%02X> (byte_fallback) and no unk_token", b)
			}
		}
	}
	// Merges may not involve BOS, EOS, PAD or UNK, which New does not
	// treat as mergeable pieces.
	for i, m := range v.Merges {
		left, right, _ := cutMerge(m)
		for _, half := range []string{left, right, left + right} {
			if _, ok := pieceID(v, half, p.ids); !ok {
				return p.errf(ErrInvalidVocab, fmt.Sprintf("model.merges[%d]", i), "merge %q + %q uses the special token %q", left, right, half)
			}
		}
	}
	return nil
}

// cutMerge splits a Vocab.Merges string as New does.
func cutMerge(m string) (left, right string, ok bool) {
	if len(m) < 3 {
		return "", "", false
	}
	i := strings.IndexByte(m[1:], ' ') + 1
	if i < 1 || i == len(m)-1 {
		return "", "", false
	}
	return m[:i], m[i+1:], true
}
