package runtime_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// ExampleRunner_Stream runs an fp16 and an int4 cache side by side over the
// same tokens in one forward and compares their top tokens position by
// position (the runtime example of docs/architecture.md).
func ExampleRunner_Stream() {
	ctx := context.Background()
	m, err := runtime.Load(ctx, "../../../shared/models/stories260K/stories260K.gguf", runtime.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var caches []*kvcache.Cache
	for _, name := range []string{"fp16", "int4"} {
		spec, err := quant.Formats().ParseSpec(name)
		if err != nil {
			log.Fatal(err)
		}
		layout, err := kvcache.NewLayout(m.Geometry(), spec, 0)
		if err != nil {
			log.Fatal(err)
		}
		c, err := r.NewCache(layout, kvcache.Options{Blocks: 8})
		if err != nil {
			log.Fatal(err)
		}
		if err := c.AddSeq(0); err != nil {
			log.Fatal(err)
		}
		caches = append(caches, c)
	}
	ids := m.Tokenizer.Encode("Once upon a time, there was a little girl", true)
	var top []int
	same := 0
	err = r.Stream(ctx, []runtime.Entry{
		{Cache: caches[0], Seq: 0, Tokens: ids, Logits: runtime.AllLogits},
		{Cache: caches[1], Seq: 0, Tokens: ids, Logits: runtime.AllLogits},
	}, func(e, i int, logits []float32) error {
		// Rows come by position, then entry: fp16's row i, then int4's.
		if e == 0 {
			top = append(top, runtime.Argmax(logits))
		} else if runtime.Argmax(logits) == top[i] {
			same++
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d positions, int4 agrees with fp16's top token at %d\n", len(ids), same)
	// Output: 13 positions, int4 agrees with fp16's top token at 13
}
