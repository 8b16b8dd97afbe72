package safetensors

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// IndexFileName is the usual name of a sharded checkpoint's index.
const IndexFileName = "model.safetensors.index.json"

// MaxIndexSize is the largest index ParseIndex reads, in bytes. Real indexes
// are well under a megabyte.
const MaxIndexSize = 64 << 20

// Index is the parsed index of a sharded checkpoint, such as
// model.safetensors.index.json:
//
//	{"metadata": {"total_size": 123}, "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors", ...}}
type Index struct {
	// TotalSize is metadata.total_size, the bytes of all tensors as the
	// writer counted them; 0 when absent. It is informational: Verify does
	// not check it.
	TotalSize int64
	// WeightMap maps every tensor name to the base name of the shard file
	// that holds it.
	WeightMap map[string]string
}

// ParseIndex reads and validates a sharded-checkpoint index. It requires a
// non-empty weight_map whose values are plain base names, so that joining one
// to the model directory stays inside it: not empty, not "." or "..", and
// without '/', '\\', ':' or NUL (nor, on Windows, a reserved name such as
// "NUL"). Other keys, and other metadata than total_size, are ignored.
//
// Malformed contents give a *FormatError whose Offset, Line and Column locate
// the problem in the index; a failing r gives its error, wrapped.
func ParseIndex(r io.Reader) (*Index, error) {
	src, err := io.ReadAll(io.LimitReader(r, MaxIndexSize+1))
	if err != nil {
		return nil, fmt.Errorf("safetensors: reading the index: %w", err)
	}
	if len(src) > MaxIndexSize {
		return nil, errorf(MaxIndexSize, "", ErrIndex, "the index is larger than %d bytes", MaxIndexSize)
	}
	jr, err := newJSONReader(src, 0)
	if err != nil {
		return nil, err
	}
	tok, p, err := jr.next()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, jr.errAt(p, "", ErrIndex, "the index is %s, want an object", describe(tok))
	}
	ix := &Index{}
	seen := make(map[string]bool)
	for {
		key, p, ok, err := jr.key()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if seen[key] {
			return nil, jr.errAt(p, "", ErrDuplicate, "key %q given twice", key)
		}
		seen[key] = true
		switch key {
		case "metadata":
			err = jr.indexMetadata(ix)
		case "weight_map":
			err = jr.weightMap(ix)
		default:
			var tok json.Token
			if tok, _, err = jr.next(); err == nil {
				err = jr.skip(tok)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if ix.WeightMap == nil {
		return nil, jr.errAt(len(src), "", ErrIndex, "the index has no weight_map")
	}
	return ix, nil
}

// indexMetadata reads the metadata object (or null), keeping total_size.
func (r *jsonReader) indexMetadata(ix *Index) error {
	tok, p, err := r.next()
	if err != nil || tok == nil {
		return err
	}
	if tok != json.Delim('{') {
		return r.errAt(p, "", ErrIndex, "metadata is %s, want an object", describe(tok))
	}
	seen := make(map[string]bool)
	for {
		key, p, ok, err := r.key()
		if err != nil || !ok {
			return err
		}
		if seen[key] {
			return r.errAt(p, "", ErrDuplicate, "metadata key %q given twice", key)
		}
		seen[key] = true
		tok, p, err := r.next()
		if err != nil {
			return err
		}
		if key != "total_size" {
			if err := r.skip(tok); err != nil {
				return err
			}
			continue
		}
		n, msg := int64Of(tok)
		if msg != "" {
			// Some writers store the size as a float ("1.6e10"); accept
			// those that are whole numbers.
			var f float64
			if num, isNum := tok.(json.Number); isNum {
				f, err = strconv.ParseFloat(string(num), 64)
			}
			if _, isNum := tok.(json.Number); !isNum || err != nil || f < 0 || f >= math.MaxInt64 || f != math.Trunc(f) {
				return r.errAt(p, "", ErrIndex, "total_size is %s", msg)
			}
			n = int64(f)
		}
		ix.TotalSize = n
	}
}

// weightMap reads the weight_map object of tensor names to shard names.
func (r *jsonReader) weightMap(ix *Index) error {
	tok, p, err := r.next()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return r.errAt(p, "", ErrIndex, "weight_map is %s, want an object", describe(tok))
	}
	ix.WeightMap = make(map[string]string)
	for {
		name, p, ok, err := r.key()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if _, dup := ix.WeightMap[name]; dup {
			return r.errAt(p, name, ErrDuplicate, "the tensor is mapped twice in weight_map")
		}
		tok, p, err := r.next()
		if err != nil {
			return err
		}
		file, isString := tok.(string)
		if !isString {
			return r.errAt(p, name, ErrIndex, "the shard is %s, want a file name", describe(tok))
		}
		if msg := checkBaseName(file); msg != "" {
			return r.errAt(p, name, ErrIndex, "shard file name %q %s", file, msg)
		}
		ix.WeightMap[name] = file
	}
	if len(ix.WeightMap) == 0 {
		return r.errAt(p, "", ErrIndex, "weight_map is empty")
	}
	return nil
}

// checkBaseName says why name is not a plain file name that stays in the
// directory it is joined to, or returns "".
func checkBaseName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case name == "." || name == "..":
		return "is not a file"
	case strings.ContainsAny(name, "/\\"):
		return "contains a path separator"
	case strings.ContainsAny(name, ":\x00"):
		return "contains ':' or NUL"
	case !filepath.IsLocal(name): // reserved names on Windows
		return "is not a local file name"
	}
	return ""
}

// Files returns the distinct shard file names of the index, sorted.
func (ix *Index) Files() []string {
	set := make(map[string]struct{})
	for _, f := range ix.WeightMap {
		set[f] = struct{}{}
	}
	return slices.Sorted(maps.Keys(set))
}

// Verify checks the index against its parsed shards, keyed by shard file
// name: every file of Files is present, every tensor of WeightMap is in the
// shard it names, and every tensor of a shard is mapped to that shard. It
// reports the first mismatch, in name order, wrapping ErrIndex. TotalSize is
// not checked.
func (ix *Index) Verify(shards map[string]*File) error {
	for _, file := range ix.Files() {
		if shards[file] == nil {
			return fmt.Errorf("%w: shard %q is missing", ErrIndex, file)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ix.WeightMap)) {
		file := ix.WeightMap[name]
		if _, ok := shards[file].Tensor(name); !ok {
			return fmt.Errorf("%w: tensor %q is mapped to %s, which does not hold it", ErrIndex, name, file)
		}
	}
	for _, file := range slices.Sorted(maps.Keys(shards)) {
		f := shards[file]
		if f == nil {
			continue
		}
		for _, t := range f.Tensors {
			switch mapped, ok := ix.WeightMap[t.Name]; {
			case !ok:
				return fmt.Errorf("%w: tensor %q of %s is not in weight_map", ErrIndex, t.Name, file)
			case mapped != file:
				return fmt.Errorf("%w: tensor %q of %s is mapped to %s", ErrIndex, t.Name, file, mapped)
			}
		}
	}
	return nil
}
