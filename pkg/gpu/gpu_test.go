//go:build !cuda && !cudaemu

package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
)

func TestOpenWithoutCUDA(t *testing.T) {
	_, err := Open(context.Background(), Options{})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open = %v, want ErrUnavailable", err)
	}
}

// TestBackendRegistrationWithoutCUDA: without the cuda tag the GPU backend
// still registers, as unavailable with the reason kvq prints, and the
// registry refuses to open it.
func TestBackendRegistrationWithoutCUDA(t *testing.T) {
	r := Registration()
	if r.Name != Name || r.Unavailable == nil || !strings.Contains(r.Unavailable.Error(), "built without CUDA") {
		t.Errorf("Registration() = %q, unavailable %v; want %q unavailable, built without CUDA", r.Name, r.Unavailable, Name)
	}
	backendtest.RunRegistration(t, r) // checks that Open and Supports are refused
}
