package hfconfig

import (
	"bytes"
	"encoding/json"
)

// gemma3TextDefaults are transformers' Gemma3TextConfig defaults for the
// fields the runtime and kvq estimate read: the multimodal Gemma 3
// releases (4B to 27B) serialize only the fields that differ from them in
// their text_config.
var gemma3TextDefaults = map[string]string{
	"vocab_size": "262208", "hidden_size": "2304", "intermediate_size": "9216", "num_hidden_layers": "26",
	"num_attention_heads": "8", "num_key_value_heads": "4", "head_dim": "256",
	"hidden_activation": `"gelu_pytorch_tanh"`, "max_position_embeddings": "131072", "rms_norm_eps": "1e-6",
	"rope_theta": "1000000", "query_pre_attn_scalar": "256", "sliding_window": "4096",
	"rope_local_base_freq": "10000", "sliding_window_pattern": "6",
}

// TextConfig returns the config of the text model of a multimodal
// config.json — its "text_config" object when the top level has no
// num_hidden_layers — with the top level's architectures, torch_dtype, quantization_config and
// tie_word_embeddings where the text config lacks them, and, for Gemma 3
// (model_type "gemma3_text" or "gemma3"), Gemma3TextConfig's defaults in
// place of the fields it omits. ok is false for a config that is its own
// text model; an error reports a text_config that is not an object.
func TextConfig(c Object) (text Object, ok bool, err error) {
	if !present(c, "text_config") || present(c, "num_hidden_layers") {
		return nil, false, nil
	}
	if err := json.Unmarshal(c["text_config"], &text); err != nil || text == nil {
		return nil, false, &textError{string(bytes.TrimSpace(c["text_config"]))}
	}
	for _, k := range []string{"architectures", "torch_dtype", "dtype", "quantization_config", "tie_word_embeddings"} {
		if !present(text, k) && present(c, k) {
			text[k] = c[k]
		}
	}
	var mt, top string
	_ = json.Unmarshal(text["model_type"], &mt)
	_ = json.Unmarshal(c["model_type"], &top)
	if mt == "gemma3_text" || mt == "" && top == "gemma3" {
		for k, v := range gemma3TextDefaults {
			if !present(text, k) {
				text[k] = json.RawMessage(v)
			}
		}
	}
	return text, true, nil
}

type textError struct{ v string }

func (e *textError) Error() string { return "text_config = " + shorten(e.v) + " is not an object" }

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
