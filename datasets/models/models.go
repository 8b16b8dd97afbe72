// Package models embeds kvq's built-in probe model (a Hugging Face
// directory: config.json, model.safetensors, tokenizer files), the model
// commands run on when no --model is given. Only the CLI imports it, so
// that libraries built on kvq do not carry the weights.
package models

import (
	"embed"
	"io/fs"
)

//go:embed kvq-probe
var models embed.FS

// ProbeModelName is the built-in model's name.
const ProbeModelName = "kvq-probe"

// ProbeModel returns the built-in probe model as a Hugging Face directory
// tree, or false when this build carries none.
func ProbeModel() (fs.FS, bool) {
	sub, err := fs.Sub(models, ProbeModelName)
	if err != nil {
		return nil, false
	}
	if _, err := fs.Stat(sub, "config.json"); err != nil {
		return nil, false
	}
	return sub, true
}
