package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// ModelDir is the exported Hugging Face directory's name inside a
// training directory.
const ModelDir = "model"

// Step reports one finished optimizer step.
type Step struct {
	Step, Steps  int     // steps done (1-based) and in total
	Loss         float64 // weighted mean cross-entropy of the step's batch, in nats
	GradNorm     float64 // global gradient norm before clipping
	TokensPerSec float64 // training throughput of this step (forward+backward+update)
	Tokens       int     // input tokens in the step's batch
	LR           float64
	SeqBytes     int // the curriculum's longest document text this step
}

// Train trains cfg's model in dir, a directory it creates if needed. It
// resumes from dir/checkpoint.bin when one exists (the checkpoint's config
// must match cfg except for Workers and CheckpointEvery), writes a
// checkpoint every cfg.CheckpointEvery steps and at the end, and finally
// exports the model as a Hugging Face directory to dir/model. progress, if
// not nil, is called after every step.
//
// When ctx is cancelled, Train abandons the step in progress, writes a
// checkpoint of the last finished step and returns an error wrapping
// ctx.Err(); calling Train again continues the run, and the result is
// bit-identical to an uninterrupted run.
func Train(ctx context.Context, cfg Config, dir string, progress func(Step)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	st, err := loadCheckpoint(dir)
	if err != nil {
		return err
	}
	if st == nil {
		m, err := NewModel(cfg)
		if err != nil {
			return err
		}
		if cfg.InitFrom != "" {
			if err := initFrom(m, cfg.InitFrom); err != nil {
				return err
			}
		}
		st = &state{model: m, m: make([]float32, len(m.w)), v: make([]float32, len(m.w))}
	} else if !reflect.DeepEqual(st.model.cfg.identity(), cfg.identity()) {
		return fmt.Errorf("%w: %s was written by a run with another configuration (%s)", ErrCheckpoint,
			filepath.Join(dir, CheckpointFile), configDiff(st.model.cfg.identity(), cfg.identity()))
	}
	st.model.cfg = cfg
	e := newEngine(cfg, st.model.lay, st.model.w)
	stop := func(err error) error {
		if serr := saveCheckpoint(dir, st); serr != nil {
			return errors.Join(err, serr)
		}
		return fmt.Errorf("train: stopped after step %d of %d (checkpoint saved in %s): %w", st.step, cfg.Steps, dir, err)
	}
	for st.step < cfg.Steps {
		if err := ctx.Err(); err != nil {
			return stop(err)
		}
		s, err := e.trainStep(ctx, st, cfg.makeBatch(st.step))
		if err != nil {
			if ctx.Err() != nil {
				return stop(ctx.Err())
			}
			return err
		}
		if progress != nil {
			progress(s)
		}
		if cfg.CheckpointEvery > 0 && st.step%cfg.CheckpointEvery == 0 && st.step < cfg.Steps {
			if err := saveCheckpoint(dir, st); err != nil {
				return err
			}
		}
	}
	if err := saveCheckpoint(dir, st); err != nil {
		return err
	}
	return exportAtomic(filepath.Join(dir, ModelDir), st.model)
}

// initFrom copies into m, whose architecture must be the same, the
// checkpointed weights of the training directory dir or, when dir has no
// checkpoint but a model.safetensors, the weights Export wrote there (a
// training directory's model/, or a shipped model).
func initFrom(m *Model, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, CheckpointFile)); os.IsNotExist(err) {
		if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
			return importWeights(m, dir)
		}
	}
	src, err := Load(dir)
	if err != nil {
		return fmt.Errorf("train: init from: %w", err)
	}
	a, b := src.cfg, m.cfg
	if a.Layers != b.Layers || a.Dim != b.Dim || a.Heads != b.Heads || a.KVHeads != b.KVHeads ||
		a.HeadDim != b.HeadDim || a.Hidden != b.Hidden || a.Vocab != b.Vocab || a.Context != b.Context || len(src.w) != len(m.w) {
		return fmt.Errorf("%w: init from %s: its model (%d layers, dim %d, %d/%d heads of %d, hidden %d, vocab %d, context %d) is not this run's (%d layers, dim %d, %d/%d heads of %d, hidden %d, vocab %d, context %d)",
			ErrConfig, dir, a.Layers, a.Dim, a.Heads, a.KVHeads, a.HeadDim, a.Hidden, a.Vocab, a.Context,
			b.Layers, b.Dim, b.Heads, b.KVHeads, b.HeadDim, b.Hidden, b.Vocab, b.Context)
	}
	copy(m.w, src.w)
	return nil
}

// trainStep runs step st.step on its batch b: forward, backward,
// clipping, AdamW. On error (cancellation) the weights are unchanged.
func (e *engine) trainStep(ctx context.Context, st *state, b *batch) (Step, error) {
	c := &e.cfg
	t0 := time.Now()
	loss, err := e.forward(ctx, b)
	if err != nil {
		return Step{}, err
	}
	if err := e.backward(ctx, b); err != nil {
		return Step{}, err
	}
	norm := e.gradNorm()
	gscale := 1.0
	if c.Clip > 0 && norm > c.Clip {
		gscale = c.Clip / norm
	}
	lr := c.lr(st.step)
	e.adamW(st.m, st.v, st.step+1, lr, gscale)
	e.syncWeights()
	st.step++
	return Step{
		Step: st.step, Steps: c.Steps, Loss: loss, GradNorm: norm, Tokens: b.nt(),
		TokensPerSec: float64(b.nt()) / time.Since(t0).Seconds(), LR: lr, SeqBytes: b.bytes,
	}, nil
}

// Logits runs the model over one document (tokens, BOS first, at most
// Context of them) and returns Vocab logits per token, token-major.
func (m *Model) Logits(ctx context.Context, tokens []int) ([]float32, error) {
	if len(tokens) == 0 || len(tokens) > m.cfg.Context {
		return nil, fmt.Errorf("train: %d tokens, want 1 to %d", len(tokens), m.cfg.Context)
	}
	toks := make([]int32, len(tokens))
	for i, t := range tokens {
		if t < 0 || t >= m.cfg.Vocab {
			return nil, fmt.Errorf("train: token id %d outside vocabulary of %d", t, m.cfg.Vocab)
		}
		toks[i] = int32(t)
	}
	b := &batch{}
	b.addDoc(toks, nil)
	e := newEngine(m.cfg, m.lay, m.w)
	if _, err := e.forward(ctx, b); err != nil {
		return nil, err
	}
	return append([]float32(nil), e.logits[:len(tokens)*m.cfg.Vocab]...), nil
}

// configDiff names the fields in which the checkpoint's configuration a
// differs from the requested b: "Steps 2600 there, 800 here; LR ...".
func configDiff(a, b Config) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := 0; i < va.NumField(); i++ {
		fa, fb := va.Field(i), vb.Field(i)
		if !va.Type().Field(i).IsExported() || reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			continue
		}
		show := func(v reflect.Value) string {
			s := fmt.Sprint(v.Interface())
			if len(s) > 40 {
				s = s[:37] + "..."
			}
			return s
		}
		out = append(out, fmt.Sprintf("%s %s there, %s here", va.Type().Field(i).Name, show(fa), show(fb)))
	}
	if len(out) == 0 {
		return "unexported settings differ"
	}
	return strings.Join(out, "; ")
}
