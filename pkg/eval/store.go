package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/kvqlabs/kvq/internal/atomicfile"
)

// A Store keeps a run's finished work in a directory, so that running the
// same evaluation again resumes where it stopped: every generation item's
// outputs under every cache and every teacher-forced chunk's per-position
// values, one JSON line each in items.jsonl, written with one write call
// and synced. A crash can leave at most a partial last line, which Open
// drops. config.json holds the run's configuration hash; a store of
// another configuration is refused (or, with force, emptied).
type Store struct {
	dir   string
	f     *os.File
	items map[string][]GenOutput
	texts map[int][]accum
}

type storeConfig struct {
	Schema string `json:"schema"`
	Hash   string `json:"config_sha256"`
	// Config is the configuration in words, for a person reading it.
	Config any `json:"config"`
}

type record struct {
	Kind    string      `json:"kind"` // "item" or "chunk"
	Key     string      `json:"key,omitempty"`
	Chunk   int         `json:"chunk,omitempty"`
	Outputs []GenOutput `json:"outputs,omitempty"`
	// Texts are the outputs' bytes (base64): JSON strings would replace
	// invalid UTF-8, which a model can emit.
	Texts [][]byte     `json:"texts,omitempty"`
	Text  []chunkAccum `json:"text,omitempty"`
}

// chunkAccum is accum in JSON.
type chunkAccum struct {
	NLL     []float64 `json:"nll"`
	NLLBase []float64 `json:"nll_base"`
	KLD     []float64 `json:"kld"`
	DP      []float64 `json:"dp"`
	Same    []bool    `json:"same"`
	Pos     []int     `json:"pos"`
}

// OpenStore opens (creating it when needed) the store in dir for a run of
// configuration hash (described by config, written beside it). A store
// holding another configuration is an error unless force, which empties
// it.
func OpenStore(dir, hash string, config any, force bool) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrStore, dir, err)
	}
	cfgPath := filepath.Join(dir, "config.json")
	itemsPath := filepath.Join(dir, "items.jsonl")
	var old storeConfig
	if b, err := os.ReadFile(cfgPath); err == nil {
		if err := json.Unmarshal(b, &old); err != nil {
			if !force {
				return nil, fmt.Errorf("%w %s: %s is not kvq's (%v); use --force to start over", ErrStore, dir, cfgPath, err)
			}
		}
		if old.Hash != hash && !force {
			return nil, fmt.Errorf("%w %s holds a run of another configuration (%s); use another --out, or --force to discard it", ErrStore, dir, cfgPath)
		}
		if old.Hash != hash {
			if err := os.Remove(itemsPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%w %s: %w", ErrStore, dir, err)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w %s: %w", ErrStore, dir, err)
	}
	cfg, err := json.MarshalIndent(storeConfig{Schema: Schema, Hash: hash, Config: config}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(cfgPath, func(w io.Writer) error { _, err := w.Write(append(cfg, '\n')); return err }); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrStore, dir, err)
	}
	s := &Store{dir: dir, items: map[string][]GenOutput{}, texts: map[int][]accum{}}
	good, err := s.load(itemsPath)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(itemsPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrStore, dir, err)
	}
	// Drop a partial last line left by a crash.
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w %s: %w", ErrStore, dir, err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w %s: %w", ErrStore, dir, err)
	}
	s.f = f
	return s, nil
}

// load reads the complete lines of path and returns their length.
func (s *Store) load(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrStore, err)
	}
	var good int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		end := good + int64(len(text)) + 1
		if end > int64(len(b)) || b[end-1] != '\n' {
			break // a partial last line
		}
		var r record
		if err := json.Unmarshal(text, &r); err != nil {
			return 0, fmt.Errorf("%w: %s line %d is not a record (%v); use --force to start over", ErrStore, path, line, err)
		}
		switch r.Kind {
		case "item":
			for i := range r.Outputs {
				if i < len(r.Texts) {
					r.Outputs[i].Text = string(r.Texts[i])
				}
			}
			s.items[r.Key] = r.Outputs
		case "chunk":
			acc := make([]accum, len(r.Text))
			for i, c := range r.Text {
				acc[i] = accum{nll: c.NLL, nllBase: c.NLLBase, kld: c.KLD, dp: c.DP, same: c.Same, pos: c.Pos}
			}
			s.texts[r.Chunk] = acc
		}
		good = end
	}
	return good, nil
}

// Items is the number of items the store holds.
func (s *Store) Items() int { return len(s.items) }

// Chunks is the number of text chunks the store holds.
func (s *Store) Chunks() int { return len(s.texts) }

// Item returns the stored outputs of key, or nil.
func (s *Store) Item(key string) []GenOutput { return s.items[key] }

// PutItem records key's outputs.
func (s *Store) PutItem(key string, outs []GenOutput) error {
	r := record{Kind: "item", Key: key, Outputs: outs}
	for _, o := range outs {
		r.Texts = append(r.Texts, []byte(o.Text))
	}
	if err := s.append(r); err != nil {
		return err
	}
	s.items[key] = outs
	return nil
}

// chunk returns the stored values of text chunk i, or nil.
func (s *Store) chunk(i int) []accum { return s.texts[i] }

// putChunk records text chunk i's values per cache.
func (s *Store) putChunk(i int, acc []accum) error {
	r := record{Kind: "chunk", Chunk: i}
	for _, a := range acc {
		r.Text = append(r.Text, chunkAccum{NLL: a.nll, NLLBase: a.nllBase, KLD: a.kld, DP: a.dp, Same: a.same, Pos: a.pos})
	}
	if err := s.append(r); err != nil {
		return err
	}
	s.texts[i] = acc
	return nil
}

// append writes one record as one line with one write, then syncs.
func (s *Store) append(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%w %s: %w", ErrStore, s.dir, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("%w %s: %w", ErrStore, s.dir, err)
	}
	return nil
}

// Close closes the store's file.
func (s *Store) Close() error { return s.f.Close() }

// parseYAML decodes YAML into plain values (maps, lists, scalars).
func parseYAML(data []byte) (any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return v, nil
}
