# kvq — developer tasks. `make test` is what CI runs (via .ci/run).
GO ?= go
PKGS := ./...

.PHONY: all build test test-purego vet fuzz bench bench-runtime clean

all: build

build:
	$(GO) build -o bin/kvq ./cmd/kvq

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags purego $(PKGS)

# Unit tests, with the assembly kernels and again with the pure-Go fallbacks.
test: vet
	$(GO) test -count=1 $(PKGS)
	$(GO) test -count=1 -tags purego $(PKGS)

# Short fuzzing runs of every fuzz target (FUZZTIME each).
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./pkg/gguf/
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./pkg/safetensors/
	$(GO) test -run='^$$' -fuzz='^FuzzParseIndex$$' -fuzztime=$(FUZZTIME) ./pkg/safetensors/
	$(GO) test -run='^$$' -fuzz='^FuzzIntegerRoundTrip$$' -fuzztime=$(FUZZTIME) ./pkg/quant/
	$(GO) test -run='^$$' -fuzz='^FuzzParseConfig$$' -fuzztime=$(FUZZTIME) ./pkg/estimate/

# Kernel and runtime benchmarks; compare runs with benchstat.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/simd/ ./pkg/runtime/...

clean:
	rm -rf bin
