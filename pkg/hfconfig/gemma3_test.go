package hfconfig

import (
	"encoding/json"
	"testing"
)

// TestTextConfig checks the text model's config of a multimodal
// config.json: the top level's architectures inherited, Gemma 3's
// defaults in place of omitted fields, a text-only config left alone, and
// a text_config that is not an object refused.
func TestTextConfig(t *testing.T) {
	var c Object
	if err := json.Unmarshal([]byte(`{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
		"text_config": {"model_type": "gemma3_text", "hidden_size": 2560, "num_hidden_layers": 34, "sliding_window": 1024}}`), &c); err != nil {
		t.Fatal(err)
	}
	text, ok, err := TextConfig(c)
	if err != nil || !ok {
		t.Fatalf("TextConfig: %v, %v", ok, err)
	}
	for k, want := range map[string]string{"hidden_size": "2560", "sliding_window": "1024", "num_attention_heads": "8", "head_dim": "256",
		"rope_local_base_freq": "10000", "architectures": `["Gemma3ForConditionalGeneration"]`} {
		if string(text[k]) != want {
			t.Errorf("%s = %s, want %s", k, text[k], want)
		}
	}
	if _, ok, _ := TextConfig(Object{"num_hidden_layers": json.RawMessage("2")}); ok {
		t.Error("a text-only config has a text_config")
	}
	if _, _, err := TextConfig(Object{"text_config": json.RawMessage("3")}); err == nil {
		t.Error("text_config = 3 accepted")
	}
}
