package tokenizer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"slices"
	"testing"
)

// writeLlama2C builds a llama2.c tokenizer file.
func writeLlama2C(maxLen int32, tokens []string, scores []float32) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, maxLen)
	for i, tok := range tokens {
		binary.Write(&b, binary.LittleEndian, math.Float32bits(scores[i]))
		binary.Write(&b, binary.LittleEndian, int32(len(tok)))
		b.WriteString(tok)
	}
	return b.Bytes()
}

func TestParseLlama2C(t *testing.T) {
	tokens := []string{"<unk>", "\n<s>\n", "\n</s>\n", " a", "b"}
	scores := []float32{0, 0, 0, -1, -2.5}
	file := writeLlama2C(6, tokens, scores)

	for _, vocabSize := range []int{5, 0} {
		v, err := ParseLlama2C(bytes.NewReader(file), int64(len(file)), vocabSize)
		if err != nil {
			t.Fatalf("ParseLlama2C(vocabSize %d): %v", vocabSize, err)
		}
		if !slices.Equal(v.Tokens, tokens) || !slices.Equal(v.Scores, scores) {
			t.Errorf("ParseLlama2C(vocabSize %d) = %q %v, want %q %v", vocabSize, v.Tokens, v.Scores, tokens, scores)
		}
		if v.Kind != SentencePieceBPE || v.UNK != 0 || v.BOS != 1 || v.EOS != 2 || v.PAD != -1 ||
			!v.AddBOS || v.AddEOS || !v.AddSpacePrefix || v.SpaceIsMetaspace || v.Types != nil {
			t.Errorf("ParseLlama2C(vocabSize %d) conventions = %+v", vocabSize, v)
		}
	}

	tests := []struct {
		name      string
		data      []byte
		size      int64 // -1: len(data)
		vocabSize int
		token     int
		field     string
	}{
		{"empty", nil, -1, 5, -1, "max_token_length"},
		{"short header", file[:3], -1, 5, -1, "max_token_length"},
		{"negative max length", writeLlama2C(-1, tokens, scores), -1, 5, -1, "max_token_length"},
		{"vocab too large", file, -1, 1000, -1, "vocab size"},
		{"negative vocab size", file, -1, -1, -1, "vocab size"},
		{"negative size", file, -5, 5, -1, "size"},
		{"truncated score", file[:len(file)-len("b")-6], -1, 0, 4, "score"},
		{"truncated length", file[:len(file)-len("b")-2], -1, 0, 4, "length"},
		{"length past end", file[:len(file)-1], -1, 5, 4, "length"},
		{"negative length", writeNegativeLength(), -1, 1, 0, "length"},
		{"trailing data", append(slices.Clone(file), 0, 0), -1, 5, -1, "trailing data"},
		{"vocab size too small", file, -1, 4, -1, "trailing data"},
		{"reader shorter than size", file[:len(file)-1], int64(len(file)), 5, 4, "text"},
	}
	// Offsets: header 4, then entries of 8+len bytes: 17, 30, 44, 54; the
	// last length field is at 54+4.
	_, err := ParseLlama2C(bytes.NewReader(file[:len(file)-1]), int64(len(file)-1), 5)
	if want := "tokenizer: malformed llama2.c tokenizer file: token 4 length at offset 58: length 1 outside the 0 bytes left"; err == nil || err.Error() != want {
		t.Errorf("ParseLlama2C(truncated) error = %q, want %q", err, want)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.size
			if size == -1 {
				size = int64(len(tc.data))
			}
			_, err := ParseLlama2C(bytes.NewReader(tc.data), size, tc.vocabSize)
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) {
				t.Fatalf("ParseLlama2C error = %v, want a *FormatError", err)
			}
			if fe.Token != tc.token || fe.Field != tc.field {
				t.Errorf("ParseLlama2C error = %q (token %d, field %q), want token %d, field %q", err, fe.Token, fe.Field, tc.token, tc.field)
			}
		})
	}
}

func writeNegativeLength() []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, []int32{4, 0, -3})
	return b.Bytes()
}

// errReader fails every read.
type errReader struct{}

func (errReader) ReadAt([]byte, int64) (int, error) { return 0, errors.New("disk on fire") }

func TestParseLlama2CReadError(t *testing.T) {
	_, err := ParseLlama2C(errReader{}, 100, 1)
	if err == nil || errors.Is(err, ErrFormat) {
		t.Fatalf("ParseLlama2C(failing reader) error = %v, want the reader's error", err)
	}
}

// FuzzParseLlama2C checks that arbitrary bytes never panic, that the result
// either fails or yields consistent slices, and that New never panics on it.
func FuzzParseLlama2C(f *testing.F) {
	f.Add(writeLlama2C(6, []string{"<unk>", "\n<s>\n", "\n</s>\n", " a", "b"}, []float32{0, 0, 0, -1, -2}), 0)
	f.Add(writeLlama2C(2, []string{"<0x41>", "ab"}, []float32{0, float32(math.NaN())}), 2)
	f.Add(writeNegativeLength(), 1)
	// A slice of tok512 (specials and the first merged pieces) rather than
	// the whole 6 KB file, which the fuzzer would spend its time minimizing.
	if p, ok := lookupShared("tok512.bin"); ok {
		b, _ := os.ReadFile(p)
		if v, err := ParseLlama2C(bytes.NewReader(b), int64(len(b)), 512); err == nil {
			tokens := append(slices.Clone(v.Tokens[:3]), v.Tokens[259:300]...)
			scores := append(slices.Clone(v.Scores[:3]), v.Scores[259:300]...)
			f.Add(writeLlama2C(7, tokens, scores), len(tokens))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, vocabSize int) {
		v, err := ParseLlama2C(bytes.NewReader(data), int64(len(data)), vocabSize)
		if err != nil {
			return
		}
		if len(v.Tokens) != len(v.Scores) {
			t.Fatalf("%d tokens, %d scores", len(v.Tokens), len(v.Scores))
		}
		tk, err := New(v)
		if err != nil {
			return
		}
		ids := tk.Encode("Once upon a time \xff 世", true)
		tk.Decode(ids)
	})
}
