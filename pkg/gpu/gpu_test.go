//go:build !cuda && !cudaemu

package gpu

import (
	"context"
	"errors"
	"testing"
)

func TestOpenWithoutCUDA(t *testing.T) {
	_, err := Open(context.Background(), Options{})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open = %v, want ErrUnavailable", err)
	}
}
