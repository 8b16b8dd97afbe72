package datasets

import (
	"embed"
	"io/fs"
)

//go:embed models
var models embed.FS

// ProbeModelName is the built-in model's name.
const ProbeModelName = "kvq-probe"

// ProbeModel returns the built-in probe model as a Hugging Face directory
// tree (config.json, model.safetensors, tokenizer files), or false when this
// build carries none.
func ProbeModel() (fs.FS, bool) {
	sub, err := fs.Sub(models, "models/"+ProbeModelName)
	if err != nil {
		return nil, false
	}
	if _, err := fs.Stat(sub, "config.json"); err != nil {
		return nil, false
	}
	return sub, true
}
