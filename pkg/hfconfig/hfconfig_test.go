package hfconfig

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	base := `"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2`
	for _, tc := range []struct{ fields, want string }{
		{``, ""},
		{`, "head_dim": 60, "rope_theta": 500000, "rms_norm_eps": 1e-5, "rope_scaling": {"rope_type": "llama3", "factor": 8}`, ""},
		{`, "rms_norm_eps": 0, "rope_theta": null, "rope_scaling": null`, ""},
		{`, "num_key_value_heads": 8`, "num_key_value_heads = 8, want 1 to num_attention_heads = 4"},
		{`, "rope_theta": 0`, "rope_theta = 0, want a positive finite number"},
		{`, "rope_theta": -1`, "rope_theta = -1"},
		{`, "rope_theta": "NaN"`, `rope_theta = "NaN"`},
		{`, "rope_theta": 1e999`, "rope_theta = 1e999"},
		{`, "rms_norm_eps": -1`, "rms_norm_eps = -1, want a finite number ≥ 0"},
		{`, "rope_scaling": {"rope_type": "linear", "factor": -4}`, "rope_scaling.factor = -4"},
		{`, "rope_scaling": {"rope_type": "linear", "factor": 0}`, "rope_scaling.factor = 0"},
		{`, "rope_scaling": 3`, "rope_scaling = 3 is not an object"},
	} {
		var c Object
		if err := json.Unmarshal([]byte("{"+base+tc.fields+"}"), &c); err != nil {
			t.Fatal(err)
		}
		err := Check(c)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%s) = %v, want %q", tc.fields, err, tc.want)
		}
	}
	for _, cfg := range []string{`{"hidden_size": 256, "num_attention_heads": 3}`, `{"hidden_size": 256, "num_attention_heads": 0}`} {
		var c Object
		if err := json.Unmarshal([]byte(cfg), &c); err != nil {
			t.Fatal(err)
		}
		if err := Check(c); err == nil || !strings.Contains(err.Error(), "num_attention_heads") {
			t.Errorf("Check(%s) = %v, want an error naming num_attention_heads", cfg, err)
		}
	}
	var c Object
	_ = json.Unmarshal([]byte(`{"hidden_size": 256, "num_attention_heads": 3, "head_dim": 64}`), &c)
	if err := Check(c); err != nil {
		t.Errorf("a head_dim makes hidden_size's quotient irrelevant: %v", err)
	}
}
