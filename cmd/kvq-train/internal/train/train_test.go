package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/datasets"
	"github.com/kvqlabs/kvq/internal/simd"
)

// testConfig is a run small enough for unit tests (tens of milliseconds a
// step) that still exercises packing, the curriculum, warm-up, clipping
// and GQA.
func testConfig() Config {
	c := SmokeConfig()
	c.Steps, c.TokensPerStep, c.Context = 6, 1024, 512
	c.CurriculumStart, c.CurriculumSteps, c.Warmup = 256, 4, 2
	c.CheckpointEvery = 2
	return c
}

func trainOrFatal(t *testing.T, cfg Config, dir string) {
	t.Helper()
	if err := Train(context.Background(), cfg, dir, nil); err != nil {
		t.Fatalf("Train: %v", err)
	}
}

// weightsOf returns the checkpoint in dir as bytes (weights and moments).
func checkpointBytes(t *testing.T, dir string) []byte {
	t.Helper()
	st, err := loadCheckpoint(dir)
	if err != nil || st == nil {
		t.Fatalf("loadCheckpoint(%s) = %v, %v", dir, st, err)
	}
	var b bytes.Buffer
	for _, v := range [][]float32{st.model.w, st.m, st.v} {
		for _, x := range v {
			u := math.Float32bits(x)
			b.Write([]byte{byte(u), byte(u >> 8), byte(u >> 16), byte(u >> 24)})
		}
	}
	return b.Bytes()
}

// TestDeterminism trains the same config three times, with 2, 1 and 3
// workers, and requires bit-identical checkpoints and exports.
func TestDeterminism(t *testing.T) {
	base := t.TempDir()
	var ref, refModel []byte
	for i, workers := range []int{2, 1, 3} {
		cfg := testConfig()
		cfg.Workers = workers
		dir := filepath.Join(base, string(rune('a'+i)))
		trainOrFatal(t, cfg, dir)
		got := checkpointBytes(t, dir)
		model, err := os.ReadFile(filepath.Join(dir, ModelDir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref, refModel = got, model
			continue
		}
		if !bytes.Equal(got, ref) {
			t.Errorf("workers=%d: checkpoint differs from the workers=2 run", workers)
		}
		if !bytes.Equal(model, refModel) {
			t.Errorf("workers=%d: exported weights differ from the workers=2 run", workers)
		}
	}
}

// TestResume interrupts runs in two ways (cancelling between steps from the
// progress callback, and from a timer at an arbitrary point, possibly
// mid-step), resumes them, and requires the uninterrupted run's exact
// weights and moments.
func TestResume(t *testing.T) {
	cfg := testConfig()
	base := t.TempDir()
	want := filepath.Join(base, "straight")
	trainOrFatal(t, cfg, want)
	ref := checkpointBytes(t, want)

	t.Run("between_steps", func(t *testing.T) {
		dir := filepath.Join(base, "between")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := Train(ctx, cfg, dir, func(s Step) {
			if s.Step == 3 {
				cancel()
			}
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Train with cancel at step 3 = %v, want context.Canceled", err)
		}
		st, err := loadCheckpoint(dir)
		if err != nil || st == nil || st.step != 3 {
			t.Fatalf("checkpoint after cancel: %+v, %v; want step 3", st, err)
		}
		if _, err := os.Stat(filepath.Join(dir, ModelDir)); err == nil {
			t.Errorf("a cancelled run exported a model")
		}
		cfg2 := cfg
		cfg2.Workers, cfg2.CheckpointEvery = 1, 1 // allowed to differ on resume
		trainOrFatal(t, cfg2, dir)
		if !bytes.Equal(checkpointBytes(t, dir), ref) {
			t.Errorf("resumed run differs from the uninterrupted run")
		}
	})

	t.Run("timer", func(t *testing.T) {
		dir := filepath.Join(base, "timer")
		for i := 0; ; i++ {
			// Growing deadlines: early ones may stop before the first
			// step; later ones land anywhere inside steps.
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i+1)*3*time.Millisecond)
			err := Train(ctx, cfg, dir, nil)
			cancel()
			if err == nil {
				t.Logf("finished after %d interruptions", i)
				break
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Train: %v", err)
			}
			if i > 200 {
				t.Fatal("no progress after 200 interrupted attempts")
			}
		}
		if !bytes.Equal(checkpointBytes(t, dir), ref) {
			t.Errorf("run interrupted by timers differs from the uninterrupted run")
		}
	})

	t.Run("config_mismatch", func(t *testing.T) {
		cfg2 := cfg
		cfg2.LR *= 2
		if err := Train(context.Background(), cfg2, want, nil); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("Train with another LR over a finished run = %v, want ErrCheckpoint", err)
		}
	})
}

func TestCheckpointCorrupt(t *testing.T) {
	cfg := testConfig()
	cfg.Steps = 1
	dir := t.TempDir()
	trainOrFatal(t, cfg, dir)
	path := filepath.Join(dir, CheckpointFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"flipped":   append(append([]byte(nil), data[:len(data)/2]...), append([]byte{data[len(data)/2] ^ 1}, data[len(data)/2+1:]...)...),
		"truncated": data[:len(data)-9],
		"empty":     nil,
		"magic":     append([]byte("NOTKVQ01"), data[8:]...),
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(dir); !errors.Is(err, ErrCheckpoint) {
				t.Errorf("Load of a %s checkpoint = %v, want ErrCheckpoint", name, err)
			}
		})
	}
}

func TestLossFalls(t *testing.T) {
	cfg := testConfig()
	cfg.Steps, cfg.Warmup, cfg.LR = 12, 2, 3e-3
	var first, last float64
	err := Train(context.Background(), cfg, t.TempDir(), func(s Step) {
		if s.Step == 1 {
			first = s.Loss
		}
		last = s.Loss
		if math.IsNaN(s.Loss) || s.TokensPerSec <= 0 || s.Tokens > cfg.TokensPerStep || s.SeqBytes > cfg.Context-1 {
			t.Errorf("bad step report %+v", s)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// A fresh model predicts ~uniformly over 264 ids: ln 264 ≈ 5.58.
	if math.Abs(first-math.Log(PaddedVocab)) > 0.3 {
		t.Errorf("first loss %.3f, want about ln %d = %.3f", first, PaddedVocab, math.Log(PaddedVocab))
	}
	if last > first-0.5 {
		t.Errorf("loss went from %.3f to %.3f in %d steps, want a drop of at least 0.5 nat", first, last, cfg.Steps)
	}
}

func TestSchedule(t *testing.T) {
	c := DefaultConfig()
	c.Steps, c.Warmup, c.LR, c.MinLR = 100, 10, 1e-3, 1e-4
	for _, tc := range []struct {
		step int
		want float64
	}{{0, 1e-4}, {4, 5e-4}, {9, 1e-3}, {10, 1e-3}, {55, 5.5e-4}, {100, 1e-4}} {
		if got := c.lr(tc.step); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("lr(%d) = %g, want %g", tc.step, got, tc.want)
		}
	}
	c.Context, c.CurriculumStart, c.CurriculumSteps = 2048, 256, 50
	for _, tc := range []struct{ step, want int }{{0, 256}, {25, 256 + 1791/2}, {50, 2047}, {99, 2047}} {
		if got := c.seqBytes(tc.step); got != tc.want {
			t.Errorf("seqBytes(%d) = %d, want %d", tc.step, got, tc.want)
		}
	}
}

func TestBatch(t *testing.T) {
	c := DefaultConfig()
	for _, s := range []int{0, c.CurriculumSteps} {
		b := c.makeBatch(s)
		if b.nt() > c.TokensPerStep || b.nt() < c.TokensPerStep-minDocBytes-1 {
			t.Errorf("step %d: %d tokens, want (%d, %d]", s, b.nt(), c.TokensPerStep-minDocBytes-1, c.TokensPerStep)
		}
		var wsum float64
		next := 0
		for _, d := range b.docs {
			if d.start != next || d.n > c.seqBytes(s)+1 || b.ids[d.start] != BOS || b.pos[d.start] != 0 {
				t.Fatalf("step %d: bad document %+v (starts with %d at position %d)", s, d, b.ids[d.start], b.pos[d.start])
			}
			if b.targets[d.start+d.n-1] != EOS {
				t.Errorf("step %d: document %+v does not end by predicting EOS", s, d)
			}
			next = d.start + d.n
		}
		for _, w := range b.weights {
			wsum += float64(w)
		}
		if next != b.nt() || wsum != b.wsum {
			t.Errorf("step %d: documents cover %d of %d tokens; weights sum %v, recorded %v", s, next, b.nt(), wsum, b.wsum)
		}
		if again := c.makeBatch(s); !slices.Equal(again.ids, b.ids) {
			t.Errorf("step %d: makeBatch is not deterministic", s)
		}
	}
}

func TestValidate(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"heads":      func(c *Config) { c.KVHeads = 3 },
		"odd head":   func(c *Config) { c.HeadDim = 7 },
		"vocab":      func(c *Config) { c.Vocab = 100 },
		"curriculum": func(c *Config) { c.CurriculumStart = 100 },
		"tokens":     func(c *Config) { c.TokensPerStep = 1000 },
		"beta":       func(c *Config) { c.Beta2 = 1 },
		"lr":         func(c *Config) { c.LR = math.NaN() },
		"confusable": func(c *Config) { c.ConfusableCopy = 1.5 },
		"unlisted":   func(c *Config) { c.UnlistedShare = -0.1 },
		"topics":     func(c *Config) { c.SafetyTopics = 1 },
		"near miss":  func(c *Config) { c.NearMissShare = 2 },
		"missing":    func(c *Config) { c.MissingKeyShare = -1 },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate() = %v, want ErrConfig", name, err)
		}
	}
	for _, c := range []Config{DefaultConfig(), SmokeConfig(), FinetuneConfig("base"), ThirdStageConfig("ft/model"), FourthStageConfig("ft3/model")} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
	}
}

// TestStageConfig checks that the recipe's stages chain: each fine-tune
// starts from the directory given, with a data seed of its own, and an
// unknown stage is a config error.
func TestStageConfig(t *testing.T) {
	seeds := map[uint64]int{}
	for n := 1; n <= Stages; n++ {
		c, err := StageConfig(n, "prev")
		if err != nil {
			t.Fatalf("StageConfig(%d): %v", n, err)
		}
		want := "prev"
		if n == 1 {
			want = "" // the base run starts from scratch
		}
		if c.InitFrom != want {
			t.Errorf("stage %d starts from %q, want %q", n, c.InitFrom, want)
		}
		if m, ok := seeds[c.Seed]; ok {
			t.Errorf("stages %d and %d draw their data with the same seed %d", m, n, c.Seed)
		}
		seeds[c.Seed] = n
	}
	if c, _ := StageConfig(4, "ft3/model"); !reflect.DeepEqual(c, FourthStageConfig("ft3/model")) {
		t.Errorf("StageConfig(4) is not FourthStageConfig")
	}
	for _, n := range []int{0, -1, Stages + 1} {
		if _, err := StageConfig(n, "prev"); !errors.Is(err, ErrConfig) {
			t.Errorf("StageConfig(%d) = %v, want ErrConfig", n, err)
		}
	}
}

func TestTaskMix(t *testing.T) {
	c := testConfig()
	c.TaskMix = [6]float64{0, 0, 0, 1, 0, 0} // copy only
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := newMixer(c.TaskMix, 1)
	g := datasets.New(datasets.Train, 1)
	for i := 0; i < 50; i++ {
		if e := m.sample(g, 300); e.Task != datasets.TaskCopy || len(e.Text()) > 300 {
			t.Fatalf("copy-only mix drew a %s example of %d bytes", e.Task, len(e.Text()))
		}
	}
	if newMixer([6]float64{}, 1) != nil {
		t.Errorf("an all-zero mix should defer to datasets.Sample")
	}
	c.TaskMix[0] = -1
	if err := c.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("Validate with a negative task weight = %v, want ErrConfig", err)
	}
}

// TestConfusableCopy: with ConfusableCopy 1 every copy example the mixer
// draws is CopyConfusable's (replayed on a generator with the same seed).
func TestConfusableCopy(t *testing.T) {
	m := newMixer([6]float64{0, 0, 0, 1, 0, 0}, 1)
	m.confusable = 1
	g, replay := datasets.New(datasets.Train, 1), datasets.New(datasets.Train, 1)
	for i := 0; i < 20; i++ {
		e := m.sample(g, 400)
		if want := replay.CopyConfusable(len(strings.Fields(e.Answer))); e.Prompt != want.Prompt {
			t.Fatalf("example %d: mixer drew %q, CopyConfusable gives %q", i, e.Prompt, want.Prompt)
		}
	}
}

func TestMixPhases(t *testing.T) {
	c := testConfig()
	copyOnly, storyOnly := [6]float64{0, 0, 0, 1, 0, 0}, [6]float64{1, 0, 0, 0, 0, 0}
	c.TaskMix = copyOnly
	c.MixPhases = []MixPhase{{From: 3, Mix: storyOnly}, {From: 5, Mix: copyOnly}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for s, want := range []([6]float64){copyOnly, copyOnly, copyOnly, storyOnly, storyOnly, copyOnly, copyOnly} {
		if got := c.mixAt(s); got != want {
			t.Errorf("mixAt(%d) = %v, want %v", s, got, want)
		}
	}
	// The batches differ exactly where the mix does.
	plain := c
	plain.MixPhases = nil
	if a, b := c.makeBatch(2), plain.makeBatch(2); !slices.Equal(a.ids, b.ids) {
		t.Errorf("step 2 (before the first phase) changed with the phases")
	}
	if a, b := c.makeBatch(3), plain.makeBatch(3); slices.Equal(a.ids, b.ids) {
		t.Errorf("step 3 (story phase) drew the same batch as the copy-only mix")
	}
	c.MixPhases = []MixPhase{{From: 5, Mix: storyOnly}, {From: 5, Mix: copyOnly}}
	if err := c.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("Validate with phases out of order = %v, want ErrConfig", err)
	}
}

// trainSource trains testConfig in base/src, a fresh temporary base, and
// loads the result: the source of a fine-tune.
func trainSource(t *testing.T) (cfg Config, base, src string, m *Model) {
	t.Helper()
	cfg, base = testConfig(), t.TempDir()
	src = filepath.Join(base, "src")
	trainOrFatal(t, cfg, src)
	m, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, base, src, m
}

// TestInitFrom checks the fine-tune stage: a run with InitFrom starts from
// the source run's weights (so with no steps it exports them unchanged),
// trains from there with its own fresh optimizer, and refuses a source of
// another architecture.
func TestInitFrom(t *testing.T) {
	cfg, base, src, srcModel := trainSource(t)

	ft := cfg
	ft.InitFrom, ft.Steps, ft.Seed = src, 0, 2
	dir := filepath.Join(base, "zero")
	trainOrFatal(t, ft, dir)
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.w, srcModel.w) {
		t.Error("a 0-step run from src does not hold src's weights")
	}

	ft.Steps = 2
	dir = filepath.Join(base, "two")
	trainOrFatal(t, ft, dir)
	if m, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(m.w, srcModel.w) {
		t.Error("2 fine-tune steps left the weights unchanged")
	}
	fresh := cfg
	fresh.Steps, fresh.Seed = 2, 2
	trainOrFatal(t, fresh, filepath.Join(base, "fresh"))
	if f, err := Load(filepath.Join(base, "fresh")); err != nil || slices.Equal(f.w, m.w) {
		t.Errorf("a fine-tune equals a fresh run of the same steps (err %v)", err)
	}

	other := ft
	other.Hidden *= 2
	if err := Train(context.Background(), other, filepath.Join(base, "other"), nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), src) {
		t.Errorf("init from a different architecture: %v, want ErrConfig naming %s", err, src)
	}
	if err := Train(context.Background(), FinetuneConfig(filepath.Join(base, "missing")), filepath.Join(base, "m"), nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("init from a missing directory: %v", err)
	}
}

// TestInitFromExport: InitFrom also takes a directory Export wrote (a
// shipped model, which has no checkpoint): the run starts from its F16
// weights, exactly; an export of another architecture, or a safetensors
// file with a tensor missing, is refused naming the file.
func TestInitFromExport(t *testing.T) {
	cfg, base, src, srcModel := trainSource(t)
	want := make([]float32, len(srcModel.w))
	h := make([]uint16, len(want))
	simd.F32ToF16(h, srcModel.w)
	simd.F16ToF32(want, h)

	ft := cfg
	ft.InitFrom, ft.Steps, ft.Seed = filepath.Join(src, ModelDir), 0, 2
	dir := filepath.Join(base, "zero")
	trainOrFatal(t, ft, dir)
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.w, want) {
		t.Error("a 0-step run from an export does not hold the export's F16 weights")
	}
	if slices.Equal(m.w, srcModel.w) {
		t.Error("the export's weights equal the F32 checkpoint's: F16 rounding lost, test is not testing the import")
	}

	other := ft
	other.Hidden *= 2
	path := filepath.Join(ft.InitFrom, "model.safetensors")
	if err := Train(context.Background(), other, filepath.Join(base, "other"), nil); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), path) {
		t.Errorf("init from an export of another architecture: %v, want ErrCheckpoint naming %s", err, path)
	}
	fewer := cfg
	fewer.Layers, fewer.Steps = fewer.Layers-1, 0
	trainOrFatal(t, fewer, filepath.Join(base, "fewer"))
	ft.InitFrom = filepath.Join(base, "fewer", ModelDir)
	if err := Train(context.Background(), ft, filepath.Join(base, "f"), nil); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), ft.InitFrom) {
		t.Errorf("init from an export with fewer layers: %v, want ErrCheckpoint naming it", err)
	}
}

// TestPolicyKnobs: AllowRules, UnlistedShare, OtherRule and NearMissShare
// reach the generator: the safety examples of a batch state numbered
// rules, and with OtherRule the default one; with UnlistedShare 1 every
// benign request is answered with the default rule's number; near misses
// change the topics asked.
func TestPolicyKnobs(t *testing.T) {
	c := testConfig()
	// JSON records fill the end of a batch, where fewer bytes are left
	// than a policy of numbered rules takes.
	c.TaskMix = [6]float64{0, 0, 0, 0, 1, 3}
	c.CurriculumStart, c.CurriculumSteps = c.Context-1, 0
	c.ListPolicy, c.AllowRules, c.UnlistedShare = false, true, 1
	docs := func(c Config) []string {
		var out []string
		for step := 0; step < 4; step++ {
			b := c.makeBatch(step)
			for _, d := range b.docs {
				out = append(out, b.text(d))
			}
		}
		return out
	}
	for _, d := range docs(c) {
		if !strings.HasPrefix(d, "System: ") {
			continue
		}
		if !strings.Contains(d, " forbidden.\n") || strings.Contains(d, "other topics") {
			t.Fatalf("AllowRules without OtherRule:\n%s", d)
		}
	}
	c.OtherRule = true
	rule := regexp.MustCompile(`\nother topics: (\d{4}) allowed\.\n`)
	benign := regexp.MustCompile(`\nAssistant: [a-z]+: (\d{4}) allowed\.`)
	answers := 0
	for _, d := range docs(c) {
		if !strings.HasPrefix(d, "System: ") {
			continue
		}
		m := rule.FindStringSubmatch(d)
		if m == nil {
			t.Fatalf("OtherRule: no default rule in\n%s", d)
		}
		for _, a := range benign.FindAllStringSubmatch(d, -1) {
			answers++
			if a[1] != m[1] {
				t.Errorf("benign answer restates rule %s, the default rule is %s:\n%s", a[1], m[1], d)
			}
		}
	}
	if answers == 0 {
		t.Error("no benign answer in four batches")
	}
	c.OtherRule = false
	plain := docs(c)
	c.NearMissShare = 1
	if slices.Equal(plain, docs(c)) {
		t.Error("NearMissShare 1 left the batches unchanged")
	}
}

// TestMixNothingFits: when no task of the mix fits the room (policies of
// numbered rules take at least 256 bytes), the mixer gives up after
// maxDraws draws and makeBatch leaves the batch's tail empty, instead of
// both drawing forever.
func TestMixNothingFits(t *testing.T) {
	c := testConfig()
	c.TaskMix = [6]float64{0, 0, 0, 0, 0, 1}
	c.CurriculumStart, c.CurriculumSteps = c.Context-1, 0
	c.ListPolicy, c.AllowRules = false, true
	c.TokensPerStep = minDocBytes + 2 // room for one document of 257 bytes
	done := make(chan string, 1)
	go func() {
		m := newMixer(c.TaskMix, 1)
		g := datasets.New(datasets.Train, 1)
		g.AllowRules = true
		if e := m.sample(g, 200); e.Task != "" {
			done <- fmt.Sprintf("sample(200) = a %s example of %d bytes", e.Task, len(e.Text()))
			return
		}
		b := c.makeBatch(0)
		for _, d := range b.docs {
			if s := b.text(d); !strings.HasPrefix(s, "System: ") || len(s) > 257 {
				done <- fmt.Sprintf("batch of 257 bytes holds %q", s)
				return
			}
		}
		done <- ""
	}()
	select {
	case msg := <-done:
		if msg != "" {
			t.Fatal(msg)
		}
	case <-time.After(time.Minute):
		t.Fatal("no return: the mixer draws forever when no task fits")
	}
}

// TestSafetyTopics: the policies of a batch list 2 to SafetyTopics
// forbidden topics, as many allowed ones with AllowRules (2 to 9 when it
// is 0), and longer lists do occur.
func TestSafetyTopics(t *testing.T) {
	c := testConfig()
	c.TaskMix = [6]float64{0, 0, 0, 0, 1, 3}
	c.Context, c.TokensPerStep = 2048, 8192
	c.CurriculumStart, c.CurriculumSteps = c.Context-1, 0
	c.ListPolicy, c.AllowRules = false, true
	rule := regexp.MustCompile(`(?m)^[a-z]+: \d{4} (forbidden|allowed)\.$`)
	most := func(c Config) int {
		n := 0
		for step := range 8 {
			b := c.makeBatch(step)
			for _, d := range b.docs {
				s := b.text(d)
				if !strings.HasPrefix(s, "System: ") {
					continue
				}
				// The policy's rules, before the padding's stories.
				policy, _, _ := strings.Cut(s, "Once upon")
				n = max(n, len(rule.FindAllString(policy, -1))/2)
			}
		}
		return n
	}
	for _, tc := range []struct{ topics, least, most int }{{0, 9, 9}, {14, 10, 14}} {
		c.SafetyTopics = tc.topics
		if got := most(c); got < tc.least || got > tc.most {
			t.Errorf("SafetyTopics %d: the longest policy lists %d forbidden topics, want %d to %d", tc.topics, got, tc.least, tc.most)
		}
	}
}

// TestMissingKeyShare: with MissingKeyShare 1 every multi-key question
// of a batch asks for a key not listed and is answered "none".
func TestMissingKeyShare(t *testing.T) {
	c := testConfig()
	c.TaskMix = [6]float64{0, 0, 1, 0, 0, 0}
	c.MissingKeyShare = 1
	b := c.makeBatch(0)
	for _, d := range b.docs {
		s := b.text(d)
		q := regexp.MustCompile(`\nAnswer: ([a-z]+-\d+): (.*)\n$`).FindStringSubmatch(s)
		if q == nil || q[2] != datasets.MissingKeyAnswer || strings.Contains(s, "\n"+q[1]+": ") {
			t.Fatalf("multi-key document with MissingKeyShare 1:\n%s", s)
		}
	}
}

// text is document d's bytes, without the special tokens.
func (b *batch) text(d doc) string {
	var s strings.Builder
	for _, id := range b.ids[d.start : d.start+d.n] {
		if id < 256 {
			s.WriteByte(byte(id))
		}
	}
	return s.String()
}
