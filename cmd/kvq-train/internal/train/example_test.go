package train_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kvqlabs/kvq/cmd/kvq-train/internal/train"
)

// Train a tiny model for a few steps; the run leaves a checkpoint and a
// Hugging Face directory that runtime.Load reads.
func ExampleTrain() {
	dir, err := os.MkdirTemp("", "kvq-train")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cfg := train.SmokeConfig()
	steps := 0
	if err := train.Train(context.Background(), cfg, dir, func(s train.Step) { steps = s.Step }); err != nil {
		panic(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, train.ModelDir, "*"))
	fmt.Println("steps:", steps)
	for _, f := range files {
		fmt.Println(filepath.Base(f))
	}
	// Output:
	// steps: 6
	// config.json
	// generation_config.json
	// model.safetensors
	// tokenizer.json
	// tokenizer_config.json
}

// Export re-exports the model of a training directory's checkpoint.
func ExampleExport() {
	dir, err := os.MkdirTemp("", "kvq-train")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cfg := train.SmokeConfig()
	cfg.Steps = 1
	if err := train.Train(context.Background(), cfg, dir, nil); err != nil {
		panic(err)
	}
	m, err := train.Load(dir)
	if err != nil {
		panic(err)
	}
	if err := train.Export(filepath.Join(dir, "copy"), m); err != nil {
		panic(err)
	}
	fmt.Println(m.Params(), "parameters exported")
	// Output: 35488 parameters exported
}
