package quant

import "fmt"

// CheckLayers reports, as an error wrapping ErrBadSpec, a per-layer override
// of s that names a layer an n-layer model does not have (L99 on a 32-layer
// model, L-40, or a range reaching past the last layer) or whose range
// selects no layer once negative indices are resolved. ForLayer silently
// ignores such overrides, so whoever knows the model's depth calls this
// first (kvcache.NewLayout does).
func (s Spec) CheckLayers(n int) error {
	for _, o := range s.Overrides {
		if o.Sliding {
			continue
		}
		from, to := o.From, o.To
		if from < 0 {
			from += n
		}
		if to < 0 {
			to += n
		}
		name := fmt.Sprintf("L%d", o.From)
		if o.To != o.From {
			name = fmt.Sprintf("L%d-%d", o.From, o.To)
		}
		switch {
		case from < 0 || from >= n || to < 0 || to >= n:
			if n == 1 {
				return fmt.Errorf("%w %q: %s: the model has 1 layer (valid: L0, or L-1)", ErrBadSpec, s.quoted(), name)
			}
			return fmt.Errorf("%w %q: %s: the model has %d layers (valid: L0 to L%d, or L-%d to L-1)", ErrBadSpec, s.quoted(), name, n, n-1, n)
		case from > to:
			return fmt.Errorf("%w %q: %s selects no layer of a %d-layer model (layers %d to %d)", ErrBadSpec, s.quoted(), name, n, from, to)
		}
	}
	return nil
}

// quoted is the spec as typed, for errors (String is lower-cased).
func (s Spec) quoted() string {
	if s.typed != "" {
		return s.typed
	}
	return s.text
}
