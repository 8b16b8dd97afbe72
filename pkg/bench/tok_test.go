package bench_test

import (
	"errors"
	"strings"

	"github.com/kvqlabs/kvq/pkg/bench"
)

// byteTok is a byte-level tokenizer: id 0 is BOS, 1 is EOS (both
// special), ids 2..257 are the bytes 0..255. Encode adds BOS.
type byteTok struct {
	noTemplate bool
}

var (
	_ bench.Tokenizer     = (*byteTok)(nil)
	_ bench.SpecialTokens = (*byteTok)(nil)
)

const (
	bosID     = 0
	eosID     = 1
	byteVocab = 258
)

func (t *byteTok) Encode(text string) []int {
	ids := []int{bosID}
	for i := range len(text) {
		ids = append(ids, int(text[i])+2)
	}
	return ids
}

func (t *byteTok) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 2 && id < byteVocab {
			b.WriteByte(byte(id - 2))
		}
	}
	return b.String()
}

func (t *byteTok) Vocab() int { return byteVocab }

func (t *byteTok) Special(id int) bool { return id == bosID || id == eosID }

var errNoTemplate = errors.New("no chat template")

func (t *byteTok) Chat(msgs []bench.Message) ([]int, string, error) {
	if t.noTemplate {
		return nil, "", errNoTemplate
	}
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<" + m.Role + ">" + m.Content + "\n")
	}
	b.WriteString("<assistant>")
	return t.Encode(b.String()), b.String(), nil
}

// plainTok is a tokenizer without BOS and without SpecialTokens: every id
// of its 300 is a byte (id mod 256).
type plainTok struct{}

var _ bench.Tokenizer = plainTok{}

func (plainTok) Encode(text string) []int {
	ids := make([]int, len(text))
	for i := range len(text) {
		ids[i] = int(text[i])
	}
	return ids
}

func (plainTok) Decode(ids []int) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id % 256)
	}
	return string(b)
}

func (plainTok) Vocab() int { return 300 }

func (plainTok) Chat([]bench.Message) ([]int, string, error) { return nil, "", errNoTemplate }
