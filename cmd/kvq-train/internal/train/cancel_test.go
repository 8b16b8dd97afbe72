package train

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// countdown is a context whose Err turns to context.Canceled at its n-th
// call: it cancels a pass at the n-th place that checks.
type countdown struct {
	context.Context
	n int
}

func (c *countdown) Err() error {
	if c.n--; c.n <= 0 {
		return context.Canceled
	}
	return nil
}

// TestPassesStopInsideLayers: the forward and backward passes check their
// context between the large ops inside a layer, not only between layers,
// so that Ctrl-C stops a training step within a fraction of a second.
func TestPassesStopInsideLayers(t *testing.T) {
	cfg := SmokeConfig()
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(cfg, m.lay, m.w)
	b := cfg.makeBatch(0)
	// The first check is before layer 0; the second is inside it.
	_, err = e.forward(&countdown{Context: context.Background(), n: 2}, b)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "forward stopped in layer 0") {
		t.Errorf("forward cancelled at its second check: %v, want stopped in layer 0", err)
	}
	if _, err := e.forward(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	last := cfg.Layers - 1
	err = e.backward(&countdown{Context: context.Background(), n: 2}, b)
	if want := fmt.Sprintf("backward stopped in layer %d:", last); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), want) {
		t.Errorf("backward cancelled at its second check: %v, want %q", err, want)
	}
}
