package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kvqlabs/kvq/internal/atomicfile"
)

// Export file names in kvq calibrate's output directory.
const (
	FileKVQ         = "kv_scales.json"              // kvq's scales file (--cache fp8:scales@FILE)
	FileSafetensors = "kv_scales.safetensors"       // llm-compressor's tensors, for a checkpoint
	FileScheme      = "kv_cache_scheme.json"        // the config.json snippet vLLM needs
	FileSGLang      = "kv_cache_scales_sglang.json" // --quantization-param-path (SGLang; old vLLM)
)

// WriteExports writes the scales into dir in every format: kvq's file, the
// safetensors tensors in dtype dt, the kv_cache_scheme snippet and the
// legacy JSON. Each file is written atomically; dir is created. It returns
// the paths written.
func WriteExports(dir string, s *Scales, dt, modelType string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kvq, err := s.MarshalKVQ()
	if err != nil {
		return nil, err
	}
	var st bytes.Buffer
	if err := s.WriteSafetensors(&st, dt); err != nil {
		return nil, err
	}
	scheme, err := s.ConfigSnippet()
	if err != nil {
		return nil, err
	}
	sg, err := s.MarshalSGLang(modelType)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range []struct {
		name string
		b    []byte
	}{{FileKVQ, kvq}, {FileSafetensors, st.Bytes()}, {FileScheme, scheme}, {FileSGLang, sg}} {
		p := filepath.Join(dir, f.name)
		if err := writeFile(p, f.b); err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

func writeFile(path string, b []byte) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WriteCheckpoint puts the scales into the Hugging Face checkpoint in dir,
// the way vLLM loads them: kv_scales.safetensors beside the weights (added
// to model.safetensors.index.json when there is one, since vLLM reads only
// the files it lists) and quantization_config.kv_cache_scheme in
// config.json. The original config.json (and index) are kept as
// NAME.kvq-backup; a checkpoint that already ships other scales is refused.
func WriteCheckpoint(dir string, s *Scales, dt string) error {
	cfgPath := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrScales, err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrScales, cfgPath, err)
	}
	if sh, err := ReadCheckpointScales(dir, s.Layers, s.KVHeads); err == nil && sh.Any() {
		if _, ours := os.Stat(filepath.Join(dir, FileSafetensors)); ours != nil {
			return fmt.Errorf("%w: %s already ships KV scales (%s); remove them first or export beside it", ErrScales, dir, sh.KFrom[0]+sh.VFrom[0])
		}
	}
	qc, _ := cfg["quantization_config"].(map[string]any)
	if qc == nil {
		var snippet map[string]any
		b, err := s.ConfigSnippet()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &snippet); err != nil {
			return err
		}
		qc = snippet["quantization_config"].(map[string]any)
	}
	qc["kv_cache_scheme"] = s.KVCacheScheme()
	cfg["quantization_config"] = qc
	var st bytes.Buffer
	if err := s.WriteSafetensors(&st, dt); err != nil {
		return err
	}
	newCfg, err := jsonIndent(cfg)
	if err != nil {
		return err
	}
	var newIndex []byte
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	if b, err := os.ReadFile(indexPath); err == nil {
		var ix map[string]any
		if err := json.Unmarshal(b, &ix); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrScales, indexPath, err)
		}
		wm, _ := ix["weight_map"].(map[string]any)
		if wm == nil {
			return fmt.Errorf("%w: %s has no weight_map", ErrScales, indexPath)
		}
		for l := range s.Layers {
			wm[ScaleTensorName(l, true)] = FileSafetensors
			wm[ScaleTensorName(l, false)] = FileSafetensors
		}
		if newIndex, err = jsonIndent(ix); err != nil {
			return err
		}
		if err := backup(indexPath, b); err != nil {
			return err
		}
	}
	if err := backup(cfgPath, raw); err != nil {
		return err
	}
	// The tensors first: a config that announces scales must find them.
	if err := writeFile(filepath.Join(dir, FileSafetensors), st.Bytes()); err != nil {
		return err
	}
	if newIndex != nil {
		if err := writeFile(indexPath, newIndex); err != nil {
			return err
		}
	}
	return writeFile(cfgPath, newCfg)
}

// backup keeps the first original of path as path.kvq-backup.
func backup(path string, b []byte) error {
	bp := path + ".kvq-backup"
	if _, err := os.Stat(bp); err == nil {
		return nil
	}
	return writeFile(bp, b)
}
