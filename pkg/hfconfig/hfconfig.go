// Package hfconfig checks the fields of a Hugging Face config.json that
// set a transformer's attention geometry and RoPE, once for every reader
// of the file: kvq estimate's config parser (pkg/estimate) and the
// runtime's loader (pkg/runtime) both call Check, so that a config one of
// them refuses the other refuses too, with the same words. It imports only
// the standard library.
package hfconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Object is a decoded config.json object (or its text_config), its values
// still JSON.
type Object = map[string]json.RawMessage

// Check checks the fields of c that every reader relies on and returns the
// first problem, naming the field and its value:
//
//   - num_attention_heads, when present, is at least 1; without head_dim,
//     hidden_size is a multiple of it (the head size is their quotient);
//   - num_key_value_heads, when present, is 1 to num_attention_heads;
//   - rope_theta, when present, is a positive finite number;
//   - rms_norm_eps, when present, is a finite number ≥ 0;
//   - rope_scaling.factor, when present, is a positive finite number.
//
// A field that is absent or null is not checked; a reader applies its
// default. The error has no kind: the caller wraps it in its own.
func Check(c Object) error {
	heads, hasHeads, err := count(c, "num_attention_heads")
	if err != nil {
		return err
	}
	if hasHeads && heads < 1 {
		return fmt.Errorf("num_attention_heads is %d, want at least 1", heads)
	}
	// A head_dim below 1 each reader refuses itself, in its own words.
	_, hasHeadDim, err := count(c, "head_dim")
	if err != nil {
		return err
	}
	hidden, hasHidden, err := count(c, "hidden_size")
	if err != nil {
		return err
	}
	if hasHeads && hasHidden && !hasHeadDim && hidden%heads != 0 {
		return fmt.Errorf("hidden_size = %d is not a multiple of num_attention_heads = %d, and there is no head_dim", hidden, heads)
	}
	if kv, ok, err := count(c, "num_key_value_heads"); err != nil {
		return err
	} else if ok && hasHeads && (kv < 1 || kv > heads) {
		return fmt.Errorf("num_key_value_heads = %d, want 1 to num_attention_heads = %d", kv, heads)
	}
	if err := positive(c, "rope_theta", "rope_theta", false); err != nil {
		return err
	}
	if err := positive(c, "rms_norm_eps", "rms_norm_eps", true); err != nil {
		return err
	}
	if present(c, "rope_scaling") {
		var rs Object
		if err := json.Unmarshal(c["rope_scaling"], &rs); err != nil {
			return fmt.Errorf("rope_scaling = %s is not an object", c["rope_scaling"])
		}
		if err := positive(rs, "factor", "rope_scaling.factor", false); err != nil {
			return err
		}
	}
	return nil
}

func present(c Object, key string) bool {
	v, ok := c[key]
	return ok && string(bytes.TrimSpace(v)) != "null"
}

// count reads key as an integer (4096.0 counts as 4096).
func count(c Object, key string) (int64, bool, error) {
	if !present(c, key) {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(c[key], &f); err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, false, fmt.Errorf("%s = %s, want an integer", key, c[key])
	}
	return int64(f), true, nil
}

// positive checks that key, when present, is a finite number above zero
// (or at zero, with zero).
func positive(c Object, key, name string, zero bool) error {
	if !present(c, key) {
		return nil
	}
	var f float64
	want := "a positive finite number"
	if zero {
		want = "a finite number ≥ 0"
	}
	if err := json.Unmarshal(c[key], &f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 || f == 0 && !zero {
		return fmt.Errorf("%s = %s, want %s", name, bytes.TrimSpace(c[key]), want)
	}
	return nil
}
