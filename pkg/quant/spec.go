package quant

import (
	"fmt"
	"strconv"
	"strings"
)

// Spec is a user's cache choice: formats for K and V, fp16 windows, and
// per-layer overrides. The zero value is not valid; use ParseSpec.
//
// Grammar (comma-separated parts, case-insensitive):
//
//	NAME            both K and V in format NAME (fp16, bf16, ...)
//	k=NAME, v=NAME  K or V alone
//	residual=N      the most recent N tokens of each sequence stay in fp16
//	sink=N          the first N tokens of each sequence stay in fp16
//	L<i>=NAME       layer i (negative i counts from the last layer: L-1)
//	L<i>-<j>=NAME   layers i..j inclusive
//	sliding=NAME    the model's sliding-window layers (Gemma's local
//	                layers, Mistral's), K and V: "int4,sliding=fp16"
//	                leaves them unquantized, as vLLM's
//	                --kv-cache-dtype-skip-layers sliding_window does
//
// Overrides apply in the order given: a later one wins where they overlap
// ("int4,sliding=fp16,L0=int8": layer 0 in int8 even if it slides).
type Spec struct {
	K, V      Format
	Residual  int
	Sink      int
	Overrides []LayerOverride
	text      string
	typed     string // text as the user typed it, for errors
}

// LayerOverride sets the formats of layers From..To inclusive. Negative
// indices count from the end (-1 is the last layer). A Sliding override
// (sliding=NAME) sets those of the sliding-window layers instead, whatever
// From and To.
type LayerOverride struct {
	From, To int
	Sliding  bool
	K, V     Format
}

// String returns the spec as typed (normalized to lower case).
func (s Spec) String() string { return s.text }

// ForLayer returns the K and V formats of layer i of an n-layer model,
// a layer with full attention (sliding= overrides do not apply).
func (s Spec) ForLayer(i, n int) (k, v Format) { return s.ForLayerKind(i, n, false) }

// ForLayerKind returns the K and V formats of layer i of an n-layer model
// whose layer i is a sliding-window layer or not.
func (s Spec) ForLayerKind(i, n int, sliding bool) (k, v Format) {
	k, v = s.K, s.V
	for _, o := range s.Overrides {
		if o.Sliding {
			if sliding {
				k, v = o.K, o.V
			}
			continue
		}
		from, to := o.From, o.To
		if from < 0 {
			from += n
		}
		if to < 0 {
			to += n
		}
		if i >= from && i <= to {
			k, v = o.K, o.V
		}
	}
	return k, v
}

// NewSpec returns a spec of formats k and v, without windows or overrides,
// named name: for formats built in code (calibrated scales) rather than
// parsed.
func NewSpec(name string, k, v Format) Spec { return Spec{K: k, V: v, text: name} }

// Quantized reports whether f stores values in fewer than 16 bits, so that fp16
// sink and residual windows change what attention reads.
func Quantized(f Format) bool {
	_, plain := f.(floatFormat)
	return !plain
}

// ParseSpec parses one cache spec against the registry. Errors wrap
// ErrBadSpec (and the cause's sentinel: ErrUnknownFormat, ErrOption) and
// quote the spec as the user typed it.
func (r *Registry) ParseSpec(text string) (Spec, error) {
	orig := strings.TrimSpace(text)
	t := fold(orig)
	if t == "" {
		return Spec{}, fmt.Errorf("%w: empty spec", ErrBadSpec)
	}
	bad := func(format string, args ...any) error {
		return &specError{spec: orig, detail: fmt.Sprintf(format, args...)}
	}
	because := func(prefix string, err error) error {
		return &specError{spec: orig, detail: prefix + strings.TrimPrefix(err.Error(), "quant: "), cause: err}
	}
	s := Spec{text: t, typed: orig}
	given := map[string]bool{} // k=, v=, residual=, sink=
	for _, raw := range strings.Split(orig, ",") {
		raw = strings.TrimSpace(raw)
		part := fold(raw)
		key, val, hasEq := strings.Cut(part, "=")
		if !hasEq {
			f, err := r.Lookup(raw)
			if err != nil {
				return Spec{}, because("", err)
			}
			if s.K != nil || s.V != nil {
				return Spec{}, bad("format given twice (%q)", raw)
			}
			s.K, s.V = f, f
			continue
		}
		_, rawVal, _ := strings.Cut(raw, "=")
		key, val, rawVal = strings.TrimSpace(key), strings.TrimSpace(val), strings.TrimSpace(rawVal)
		if key == "k" || key == "v" || key == "residual" || key == "sink" {
			if given[key] {
				return Spec{}, bad("%s= given twice", key)
			}
			given[key] = true
		}
		switch {
		case key == "k" || key == "v":
			f, err := r.Lookup(rawVal)
			if err != nil {
				return Spec{}, because(key+"=: ", err)
			}
			if key == "k" {
				s.K = f
			} else {
				s.V = f
			}
		case key == "residual" || key == "sink":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return Spec{}, bad("%s=%q is not a non-negative integer", key, rawVal)
			}
			if key == "residual" {
				s.Residual = n
			} else {
				s.Sink = n
			}
		case key == "sliding":
			if given[key] {
				return Spec{}, bad("sliding= given twice")
			}
			given[key] = true
			f, err := r.Lookup(rawVal)
			if err != nil {
				return Spec{}, because("sliding=: ", err)
			}
			s.Overrides = append(s.Overrides, LayerOverride{Sliding: true, K: f, V: f})
		case strings.HasPrefix(key, "l"):
			o, err := parseLayerRange(key[1:])
			if err != nil {
				return Spec{}, bad("%q: %v", strings.TrimSpace(raw[:strings.Index(raw, "=")]), err)
			}
			f, err := r.Lookup(rawVal)
			if err != nil {
				return Spec{}, because(strings.TrimSpace(raw[:strings.Index(raw, "=")])+"=: ", err)
			}
			o.K, o.V = f, f
			s.Overrides = append(s.Overrides, o)
		default:
			return Spec{}, bad("unknown key %q (valid: k, v, residual, sink, sliding, L<layer>)", strings.TrimSpace(raw[:strings.Index(raw, "=")]))
		}
	}
	if s.K == nil && s.V == nil {
		return Spec{}, bad("no format named")
	}
	if s.K == nil {
		s.K = FP16
	}
	if s.V == nil {
		s.V = FP16
	}
	return s, nil
}

// specError is ErrBadSpec about one spec. Its message quotes the spec once
// and gives the cause without the cause's own "quant: " prefix, so that a
// message does not stutter through every sentinel it wraps: quant: bad
// cache spec "Int3": unknown format "Int3" (valid: ...).
type specError struct {
	spec, detail string
	cause        error
}

func (e *specError) Error() string {
	return fmt.Sprintf("%s %q: %s", ErrBadSpec.Error(), e.spec, e.detail)
}

func (e *specError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrBadSpec}
	}
	return []error{ErrBadSpec, e.cause}
}

func parseLayerRange(r string) (LayerOverride, error) {
	// "3", "-1", "0-3", "-2--1"
	idx := strings.Index(r[min(1, len(r)):], "-")
	var a, b string
	if idx < 0 {
		a, b = r, r
	} else {
		idx += min(1, len(r))
		a, b = r[:idx], r[idx+1:]
	}
	from, err1 := strconv.Atoi(a)
	to, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return LayerOverride{}, fmt.Errorf("layer range must look like L0, L-1 or L0-3")
	}
	if (from < 0) == (to < 0) && from > to {
		return LayerOverride{}, fmt.Errorf("layer range %d-%d is empty", from, to)
	}
	return LayerOverride{From: from, To: to}, nil
}

// ParseList splits a comma-separated list of specs ("fp16,int4,k=int8,v=int4")
// into specs. A bare format name, or a k= that would set K a second time,
// starts a new spec; other key=value parts modify the current one.
func (r *Registry) ParseList(text string) ([]Spec, error) {
	var groups [][]string
	hasFormat, hasK := false, false
	for _, part := range strings.Split(text, ",") {
		raw := strings.TrimSpace(part)
		p := fold(raw)
		if p == "" {
			return nil, fmt.Errorf("%w: empty entry in list %q", ErrBadSpec, text)
		}
		key, _, hasEq := strings.Cut(p, "=")
		key = strings.TrimSpace(key)
		newSpec := len(groups) == 0 || !hasEq && (hasFormat || hasK) || key == "k" && (hasFormat || hasK)
		if newSpec {
			groups = append(groups, nil)
			hasFormat, hasK = false, false
		}
		if !hasEq {
			hasFormat = true
		}
		if key == "k" {
			hasK = true
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], raw)
	}
	specs := make([]Spec, 0, len(groups))
	for _, g := range groups {
		s, err := r.ParseSpec(strings.Join(g, ","))
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}
