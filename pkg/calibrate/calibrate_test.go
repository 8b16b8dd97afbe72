package calibrate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/safetensors"
)

// testModel writes and loads a tiny Hugging Face model (2 layers, 2 KV
// heads of 16).
func testModel(t *testing.T) (*runtime.Model, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if err := modeltest.WriteHF(dir, modeltest.Spec{DType: "F16", Seed: 3, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, dir
}

// fakeRecorder is a recorder of 2 layers, 2 heads of 4 fed batches whose
// every value is known.
func fakeRecorder(opts RecordOptions, batches ...[]float32) *Recorder {
	r := &Recorder{}
	m := &runtime.Model{Config: runtime.Config{Layers: 2, KVHeads: 2, HeadDim: 4}}
	r = NewRecorder(m, opts)
	for _, b := range batches {
		for l := range 2 {
			r.ObserveKV(&runtime.KVObservation{Layer: l, N: len(b) / 8, K: b, KPre: b, V: scaled(b, 2)})
		}
	}
	return r
}

func scaled(x []float32, s float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = s * v
	}
	return out
}

// TestStrategiesByHand checks each strategy's arithmetic on batches whose
// extremes are known: vLLM's warm-up constants, llm-compressor's moving
// average (first batch initializes, then 1% steps), the static min-max,
// percentiles and per-head granularity.
func TestStrategiesByHand(t *testing.T) {
	// Two tokens × (2 heads × 4): head 0 spans [-1, 3], head 1 [-0.5, 0.5].
	b1 := []float32{-1, 0, 1, 3, -0.5, 0, 0.5, 0.25, 0, 0, 0, 0, 0, 0, 0, 0}
	// Head 0 reaches 8, head 1 -2.
	b2 := []float32{8, 0, 0, 0, -2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	rec := fakeRecorder(RecordOptions{MSE: true}, b1, b2)
	const e4m3 = 448.0
	tests := []struct {
		strategy string
		k, v     []float32 // layer 0
	}{
		{"default", []float32{1}, []float32{1}},
		{"warmup:data", []float32{3.0 / 200}, []float32{6.0 / 100}},
		{"warmup:data:head", []float32{3.0 / 200, 0.5 / 200}, []float32{6.0 / 100, 1.0 / 100}},
		{"dataset", []float32{float32((3 + 0.01*(8-3)) / e4m3)}, []float32{float32((6 + 0.01*(16-6)) / e4m3)}},
		{"dataset:static_minmax", []float32{8 / e4m3}, []float32{16 / e4m3}},
		// Head 1: min −0.5 then −2 (EMA −0.515), max 0.5 then 0 (EMA 0.495).
		{"dataset:minmax:head", []float32{float32((3 + 0.01*(8-3)) / e4m3), float32(0.515 / e4m3)}, []float32{float32((6 + 0.01*(16-6)) / e4m3), float32(1.03 / e4m3)}},
		{"percentile:100", []float32{8 / e4m3}, []float32{16 / e4m3}},
	}
	for _, tt := range tests {
		s, err := ParseStrategy(tt.strategy, PerTensor)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := Compute(s, rec, nil, ScaleOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tt.strategy, err)
		}
		for _, side := range []struct {
			got, want []float32
			name      string
		}{{sc.K[0], tt.k, "k"}, {sc.V[0], tt.v, "v"}} {
			if len(side.got) != len(side.want) {
				t.Fatalf("%s %s: %v, want %v", tt.strategy, side.name, side.got, side.want)
			}
			for i := range side.got {
				// Percentiles come from 3%-wide bins; the rest is exact.
				tol := 1e-6
				if strings.HasPrefix(tt.strategy, "percentile") {
					tol = 0.035
				}
				if d := math.Abs(float64(side.got[i]-side.want[i])) / float64(side.want[i]); d > tol {
					t.Errorf("%s %s[%d] = %g, want %g", tt.strategy, side.name, i, side.got[i], side.want[i])
				}
			}
		}
	}
	// warmup:random needs its own batch.
	s, _ := ParseStrategy("warmup", PerTensor)
	if !s.Random {
		t.Error("warmup defaults to random tokens, as vLLM's profiling run")
	}
	if _, err := Compute(s, rec, nil, ScaleOptions{}); !errors.Is(err, ErrOptions) {
		t.Errorf("warmup:random without a warm-up batch: %v", err)
	}
	// Scales are rounded to the shipping dtype.
	s, _ = ParseStrategy("dataset", PerTensor)
	sc, _ := Compute(s, rec, nil, ScaleOptions{DType: "F16"})
	if got, want := sc.K[0][0], simd.F16ToF32Scalar(simd.F32ToF16Scalar(float32(3.05/e4m3))); got != want {
		t.Errorf("F16-rounded scale %g, want %g", got, want)
	}
	// MSE: the shrink stays within llm-compressor's grid (1 down to 0.81)
	// and never has more error than no clipping. (For fp8, whose relative
	// precision does not depend on the scale, it rarely leaves 1.)
	vals := make([]float32, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	vals[7] = 40
	if p := mseShrink(vals, 40, quant.E4M3); !(p <= 1 && p > 0.8) {
		t.Errorf("mse shrink = %g, want in (0.8, 1]", p)
	}
	sq := func(amax float32) (e float64) {
		s := amax / 448
		for _, v := range vals {
			d := float64(quant.E4M3.Decode(quant.E4M3.Encode(v/s, true))*s - v)
			e += math.Pow(math.Abs(d), mseNorm)
		}
		return e
	}
	if p := mseShrink(vals, 40, quant.E4M3); sq(40*p) > sq(40) {
		t.Errorf("mse shrink %g has more error than no clipping", p)
	}
	if _, err := ParseStrategy("dataset:bogus", PerTensor); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown option: %v", err)
	}
	if _, err := ParseStrategy("percentile:200", PerTensor); !errors.Is(err, ErrOptions) {
		t.Errorf("percentile 200: %v", err)
	}
	if _, err := ParseStrategy("nope", PerTensor); !errors.Is(err, ErrOptions) {
		t.Errorf("unknown strategy: %v", err)
	}
}

// TestStats checks the per-channel statistics against a direct
// computation, the histogram's counts, percentiles and outlier channels.
func TestStats(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	var batches [][]float32
	var all []float32
	for range 3 {
		b := make([]float32, 50*8)
		for i := range b {
			b[i] = float32(rng.NormFloat64())
			if i%8 == 5 { // channel 5 (head 1, index 1) is an outlier channel
				b[i] *= 20
			}
		}
		batches = append(batches, b)
		all = append(all, b...)
	}
	rec := fakeRecorder(RecordOptions{}, batches...)
	st := rec.Stats("m", DataInfo{}, []float64{50, 99})
	k := st.Layer[0].K
	if k.Count != int64(len(all)) {
		t.Fatalf("count %d, want %d", k.Count, len(all))
	}
	for c := range 8 {
		var lo, hi float32 = float32(math.Inf(1)), float32(math.Inf(-1))
		var sum float64
		n := 0
		for i := c; i < len(all); i += 8 {
			lo, hi = min(lo, all[i]), max(hi, all[i])
			sum += float64(all[i])
			n++
		}
		if k.Channels.Min[c] != lo || k.Channels.Max[c] != hi || math.Abs(float64(k.Channels.Mean[c])-sum/float64(n)) > 1e-5 {
			t.Errorf("channel %d: min %g max %g mean %g, want %g %g %g", c, k.Channels.Min[c], k.Channels.Max[c], k.Channels.Mean[c], lo, hi, sum/float64(n))
		}
	}
	var hist int64
	for _, n := range k.Hist.Count {
		hist += n
	}
	if hist+k.Hist.Zeros != k.Count {
		t.Errorf("histogram holds %d + %d zeros of %d", hist, k.Hist.Zeros, k.Count)
	}
	abs := make([]float64, len(all))
	for i, v := range all {
		abs[i] = math.Abs(float64(v))
	}
	slices.Sort(abs)
	for i, p := range st.Percentiles {
		want := eval.Percentile(abs, p/100)
		if got := k.AbsPercentiles[i]; math.Abs(got-want)/want > 0.04 {
			t.Errorf("p%g of |x| = %g, want %g", p, got, want)
		}
	}
	if !slices.Equal(k.Spread.OutlierChannels, []int{5}) {
		t.Errorf("outlier channels %v, want [5]", k.Spread.OutlierChannels)
	}
	if len(k.Batches) != 3 || st.Layer[1].V.Absmax != 2*k.Absmax {
		t.Errorf("batches %d, V absmax %g (K %g)", len(k.Batches), st.Layer[1].V.Absmax, k.Absmax)
	}
}

func testScales(g Granularity) *Scales {
	s := &Scales{DType: "float8_e4m3fn", Strategy: "dataset:minmax:" + g.String(), Granularity: g, Layers: 2, KVHeads: 2,
		Data: DataInfo{Source: "x", SHA256: "ab"}}
	n := 1
	if g == PerHead {
		n = 2
	}
	for l := range 2 {
		var k, v []float32
		for h := range n {
			// Values exact in F16 and BF16, so every export holds them.
			k = append(k, float32(math.Ldexp(1, -5-l-h)))
			v = append(v, float32(math.Ldexp(3, -8-l+h)))
		}
		s.K, s.V = append(s.K, k), append(s.V, v)
	}
	return s
}

// TestExportsRoundTrip writes every export and reads it back: the kvq file
// (through calibrate and through --cache fp8:scales@FILE's parser),
// safetensors in each dtype and granularity (a file, and a checkpoint
// directory), and SGLang's legacy file (max of K and V per layer).
func TestExportsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, g := range []Granularity{PerTensor, PerHead} {
		s := testScales(g)
		p := filepath.Join(dir, g.String()+".json")
		if err := s.Save(p); err != nil {
			t.Fatal(err)
		}
		back, err := LoadScales(p, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !back.Equal(s) || back.Strategy != s.Strategy || back.Granularity != g || back.Data.SHA256 != "ab" {
			t.Errorf("%s kvq file: read back %+v, want %+v", g, back, s)
		}
		if f, err := quant.Formats().Lookup("fp8:scales@" + p); err != nil {
			t.Errorf("fp8:scales@%s: %v", p, err)
		} else if _, err := kvcache.NewLayout(kvcache.Geometry{Layers: 2, KVHeads: 2, HeadDim: 16}, quant.NewSpec("x", f, f), 0); err != nil {
			t.Errorf("layout with %s: %v", p, err)
		}
		for _, dt := range []string{"F32", "F16", "BF16"} {
			var buf bytes.Buffer
			if err := s.WriteSafetensors(&buf, dt); err != nil {
				t.Fatal(err)
			}
			sp := filepath.Join(dir, g.String()+dt+".safetensors")
			if err := os.WriteFile(sp, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			back, err := LoadScales(sp, 2, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !back.Equal(s) || back.Granularity != g {
				t.Errorf("%s %s safetensors: read back K %v V %v, want K %v V %v", g, dt, back.K, back.V, s.K, s.V)
			}
			st, err := safetensors.Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			want := []int64{1}
			if g == PerHead {
				want = []int64{2, 1, 1}
			}
			ti, ok := st.Tensor("model.layers.1.self_attn.v_scale")
			if !ok || !slices.Equal(ti.Shape, want) || string(ti.DType) != dt {
				t.Errorf("%s %s: v_scale tensor %+v, want shape %v dtype %s", g, dt, ti, want, dt)
			}
		}
		sg, err := s.MarshalSGLang("llama")
		if err != nil {
			t.Fatal(err)
		}
		sgp := filepath.Join(dir, g.String()+"-sglang.json")
		os.WriteFile(sgp, sg, 0o644)
		back, err = LoadScales(sgp, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		for l := range 2 {
			want := max(slices.Max(s.K[l]), slices.Max(s.V[l]))
			if back.K[l][0] != want || back.V[l][0] != want {
				t.Errorf("%s SGLang layer %d: %v %v, want %g for both", g, l, back.K[l], back.V[l], want)
			}
		}
	}
	// A checkpoint directory with the scales beside the weights.
	m, mdir := testModel(t)
	s := testScales(PerHead)
	s.Layers, s.KVHeads = m.Config.Layers, m.Config.KVHeads
	if err := WriteCheckpoint(mdir, s, "F16"); err != nil {
		t.Fatal(err)
	}
	sh, err := ReadCheckpointScales(mdir, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !sh.Effective().Equal(s) || sh.Scheme == nil || sh.Scheme["strategy"] != "attn_head" {
		t.Errorf("checkpoint: %+v, scheme %v", sh.Effective(), sh.Scheme)
	}
	if _, err := runtime.Load(context.Background(), mdir, runtime.LoadOptions{}); err != nil {
		t.Errorf("the model still loads with its scales: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mdir, "config.json.kvq-backup")); err != nil {
		t.Errorf("config.json backup: %v", err)
	}
}

// TestLoadScalesErrors: scales for another model, malformed files and
// invalid values fail with ErrScales naming the file and what is wrong.
func TestLoadScalesErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o644)
		return p
	}
	var st bytes.Buffer
	testScales(PerHead).WriteSafetensors(&st, "F32")
	tests := []struct {
		path, want string
	}{
		{write("layers.json", []byte(`{"layers": 4, "k_scale": {"0": 1, "1": 1}}`)), `"layers" is 4, the model has 2`},
		{write("extra.json", []byte(`{"k_scale": {"0": 1, "1": 1, "2": 1}}`)), "k_scale has layer 2"},
		{write("heads.json", []byte(`{"k_scale": {"0": [1, 1, 1], "1": 1}}`)), "lists 3 per-head scales, the model has 2"},
		{write("missing.json", []byte(`{"k_scale": {"0": 1}}`)), "no k_scale for layer 1"},
		{write("bad.json", []byte(`{"k_scale": `)), "not a JSON object"},
		{write("zero.json", []byte(`{"k_scale": {"0": 0, "1": 1}}`)), "not a positive finite"},
		{write("trunc.safetensors", st.Bytes()[:st.Len()-3]), "trunc.safetensors"},
		{filepath.Join(dir, "nope.json"), "nope.json"},
	}
	for _, tt := range tests {
		_, err := LoadScales(tt.path, 2, 2)
		if !errors.Is(err, ErrScales) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), filepath.Base(tt.path)) {
			t.Errorf("LoadScales(%s) = %v, want ErrScales naming the file and %q", filepath.Base(tt.path), err, tt.want)
		}
	}
	// Safetensors heads for another model.
	_, err := LoadScales(write("h.safetensors", st.Bytes()), 2, 4)
	if !errors.Is(err, ErrScales) || !strings.Contains(err.Error(), "one per KV head ([4, 1, 1])") {
		t.Errorf("per-head safetensors for 4 heads: %v", err)
	}
}

// scaleFile writes a safetensors file of named scale tensors.
func scaleFile(t *testing.T, path string, dtype string, tensors map[string][]float32, shapes map[string][]int64) {
	t.Helper()
	w := safetensors.NewWriter()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range tensors {
			if !yield(k) {
				return
			}
		}
	}) {
		var b []byte
		for _, x := range tensors[name] {
			switch dtype {
			case "BF16":
				b = binary.LittleEndian.AppendUint16(b, simd.F32ToBF16Scalar(x))
			case "F16":
				b = binary.LittleEndian.AppendUint16(b, simd.F32ToF16Scalar(x))
			default:
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
			}
		}
		shape, ok := shapes[name]
		if !ok {
			shape = []int64{int64(len(tensors[name]))}
		}
		if err := w.Add(name, safetensors.DType(dtype), shape, b); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := w.WriteTo(f); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointSpellings reads every spelling of a KV scale vLLM loads.
func TestCheckpointSpellings(t *testing.T) {
	tests := []struct {
		name  string
		dtype string
		t     map[string][]float32
		shape map[string][]int64
		k, v  [2][]float32
		legacy,
		q int
	}{
		{"llm-compressor", "BF16", map[string][]float32{"model.layers.0.self_attn.k_scale": {0.5}, "model.layers.0.self_attn.v_scale": {0.25}, "model.layers.1.self_attn.k_scale": {2}, "model.layers.1.self_attn.v_scale": {4}},
			nil, [2][]float32{{0.5}, {2}}, [2][]float32{{0.25}, {4}}, 0, 0},
		{"0-d scalars (AutoFP8)", "F32", map[string][]float32{"model.layers.0.self_attn.k_scale": {0.5}, "model.layers.0.self_attn.v_scale": {0.25}, "model.layers.1.self_attn.k_scale": {2}, "model.layers.1.self_attn.v_scale": {4}},
			map[string][]int64{"model.layers.0.self_attn.k_scale": {}, "model.layers.0.self_attn.v_scale": {}, "model.layers.1.self_attn.k_scale": {}, "model.layers.1.self_attn.v_scale": {}},
			[2][]float32{{0.5}, {2}}, [2][]float32{{0.25}, {4}}, 0, 0},
		{"per head [H,1,1]", "F16", map[string][]float32{"model.layers.0.self_attn.k_scale": {0.5, 1}, "model.layers.0.self_attn.v_scale": {0.25, 0.125}, "model.layers.1.self_attn.k_scale": {2, 4}, "model.layers.1.self_attn.v_scale": {4, 8}},
			map[string][]int64{"model.layers.0.self_attn.k_scale": {2, 1, 1}, "model.layers.0.self_attn.v_scale": {2, 1, 1}, "model.layers.1.self_attn.k_scale": {2, 1, 1}, "model.layers.1.self_attn.v_scale": {2, 1, 1}},
			[2][]float32{{0.5, 1}, {2, 4}}, [2][]float32{{0.25, 0.125}, {4, 8}}, 0, 0},
		{"ModelOpt and remapped", "F32", map[string][]float32{"model.layers.0.self_attn.k_proj.k_scale": {0.5}, "model.layers.0.self_attn.v_proj.v_scale": {0.25}, "model.layers.1.self_attn.attn.k_scale": {2}, "model.layers.1.self_attn.attn.v_scale": {4}, "model.layers.0.self_attn.q_proj.q_scale": {1}},
			nil, [2][]float32{{0.5}, {2}}, [2][]float32{{0.25}, {4}}, 0, 1},
		{"fused qkv and Quark output_scale", "F32", map[string][]float32{"model.layers.0.self_attn.qkv_proj.k_scale": {0.5}, "model.layers.0.self_attn.qkv_proj.v_scale": {0.25}, "model.layers.1.self_attn.k_proj.output_scale": {2}, "model.layers.1.self_attn.v_proj.output_scale": {4}},
			nil, [2][]float32{{0.5}, {2}}, [2][]float32{{0.25}, {4}}, 0, 0},
		{"legacy kv_scale", "F32", map[string][]float32{"model.layers.0.self_attn.kv_scale": {0.5}, "model.layers.1.self_attn.kv_scale": {2}},
			nil, [2][]float32{{0.5}, {2}}, [2][]float32{{0.5}, {2}}, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			scaleFile(t, filepath.Join(dir, "model.safetensors"), tt.dtype, tt.t, tt.shape)
			sh, err := ReadCheckpointScales(dir, 2, 2)
			if err != nil {
				t.Fatal(err)
			}
			for l := range 2 {
				if !slices.Equal(sh.K[l], tt.k[l]) || !slices.Equal(sh.V[l], tt.v[l]) {
					t.Errorf("layer %d: K %v V %v, want %v %v", l, sh.K[l], sh.V[l], tt.k[l], tt.v[l])
				}
			}
			if len(sh.Legacy) != tt.legacy || sh.QScales != tt.q || sh.DType != tt.dtype {
				t.Errorf("legacy %v, q %d, dtype %s", sh.Legacy, sh.QScales, sh.DType)
			}
		})
	}
}

// TestLoadData reads each JSONL record kind, cuts text files into windows,
// and names the file and line of a bad record.
func TestLoadData(t *testing.T) {
	m, _ := testModel(t)
	dir := t.TempDir()
	jl := filepath.Join(dir, "d.jsonl")
	os.WriteFile(jl, []byte("# comment\n{\"text\": \"hello there world\"}\n\n{\"prompt\": \"Q: 1+1?\", \"completion\": \" 2\"}\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"hello\"}]}\n"), 0o644)
	txt := filepath.Join(dir, "d.txt")
	os.WriteFile(txt, []byte(strings.Repeat("the quick brown fox ", 40)), 0o644)
	d, err := LoadData(context.Background(), m, DataOptions{Paths: []string{jl, txt}, SeqLen: 64, Samples: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	long := 0
	for _, s := range d.Samples {
		if len(s) > 64 {
			t.Errorf("sample of %d tokens, want at most 64", len(s))
		}
		if len(s) == 64 {
			long++
		}
	}
	// 3 records and 800 bytes of text in windows of 64.
	if len(d.Samples) < 5 || long == 0 || len(d.SHA256) != 64 {
		t.Errorf("%d samples (%d full windows), hash %q", len(d.Samples), long, d.SHA256)
	}
	again, _ := LoadData(context.Background(), m, DataOptions{Paths: []string{jl, txt}, SeqLen: 64, Samples: 100, Seed: 1})
	other, _ := LoadData(context.Background(), m, DataOptions{Paths: []string{jl, txt}, SeqLen: 64, Samples: 3, Seed: 2})
	if again.SHA256 != d.SHA256 || other.SHA256 == d.SHA256 || len(other.Samples) != 3 {
		t.Errorf("hashes: same data %v, other data %v; %d samples", again.SHA256 == d.SHA256, other.SHA256 != d.SHA256, len(other.Samples))
	}
	for _, tt := range []struct{ body, want string }{
		{"{\"text\": \"a\"}\n{\"txt\": 1}\n", "d2.jsonl:2"},
		{"{\"text\": \"a\", \"prompt\": \"b\"}\n", `exactly one of "text", "prompt" and "messages"`},
		{"{\"messages\": [{\"content\": \"hi\"}]}\n", "message 0 has no role"},
		{"\n# only comments\n", "no records"},
	} {
		p := filepath.Join(dir, "d2.jsonl")
		os.WriteFile(p, []byte(tt.body), 0o644)
		if _, err := LoadData(context.Background(), m, DataOptions{Paths: []string{p}}); !errors.Is(err, ErrData) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want ErrData with %q", tt.body, err, tt.want)
		}
	}
	if _, err := LoadData(context.Background(), m, DataOptions{SeqLen: 4096}); !errors.Is(err, ErrOptions) {
		t.Errorf("seq-len beyond the context: %v", err)
	}
	b, err := LoadData(context.Background(), m, DataOptions{Samples: 4, SeqLen: 128, Seed: 9})
	if err != nil || len(b.Samples) != 4 || !strings.Contains(b.Source, "built-in") {
		t.Errorf("built-in data: %v, %+v", err, b)
	}
}
