# kvq — developer tasks. `make test` is what CI runs (via .ci/run).
GO ?= go
PKGS := ./...

.PHONY: all build test test-purego vet fuzz bench bench-runtime clean probe-model probe-model-smoke readme-check \
	cuda-sysroot build-cuda check-cuda ptx gpu-check-build test-cudaemu

all: build

build:
	$(GO) build -o bin/kvq ./cmd/kvq

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags purego $(PKGS)

# Unit tests, with the assembly kernels and again with the pure-Go fallbacks,
# then the race detector over the concurrent packages (the runtime, its KV
# cache, eval, calibrate, the engine, the server and its client): about 10 s
# on 2 cores once built, 30 s from a cold cache.
RACE_PKGS := ./pkg/runtime/... ./pkg/eval/... ./pkg/calibrate/... ./pkg/engine/... ./pkg/serve/... ./pkg/openai/...
test: vet
	$(GO) test -count=1 $(PKGS)
	$(GO) test -count=1 -tags purego $(PKGS)
	$(GO) test -race -count=1 $(RACE_PKGS)

# pkg/gpu's kernels and host code on the CPU emulator (-tags cudaemu; needs
# cgo and g++). A kernel edit always rebuilds: driver_emu.go embeds
# pkg/gpu/kernels, which puts those files in the build cache key, and this
# target also passes their hash in CGO_CXXFLAGS (also part of the key).
# To expose missing barriers, run the threads of each block in another
# order: go test -tags cudaemu ./pkg/gpu -args -emu.schedule=reverse (or
# random:SEED).
KERNELS_SHA = $(shell cat pkg/gpu/kernels/* | sha256sum | cut -c1-16)
test-cudaemu:
	CGO_ENABLED=1 CGO_CXXFLAGS="-O2 -DKVQ_KERNELS_SHA=$(KERNELS_SHA)" $(GO) test -tags cudaemu -count=1 ./pkg/gpu/...

# The examples of the README, of docs/ and of every --help, run as a user would from
# a fresh clone's root with ../shared beside it: exit codes and the output
# lines the README and docs/ show (scripts/readmecheck documents its markers:
# "your own" for a user's download, a stated run time of 30 s or more for
# a slow one). About 4 minutes on 2 cores.
readme-check: build
	$(GO) run ./scripts/readmecheck -kvq bin/kvq -readme README.md -docs docs -shared ../shared

# Short fuzzing runs of every fuzz target in the module, FUZZTIME each; the
# targets are found with go test -list '^Fuzz' (scripts/fuzz.sh).
FUZZTIME ?= 20s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

# Kernel and runtime benchmarks; compare runs with benchstat.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/simd/ ./pkg/runtime/...

# The probe model: train the base run and three fine-tuning stages (60 + 20
# minutes measured on 2 idle cores for the first two, about 7 and 5 for
# the third and fourth; resumable: run again after an interruption), then
# copy the fourth stage's export where go:embed takes it. The third and
# fourth stages start from the previous stage's exported F16 weights.
# Byte for byte the committed model only with the kernels it was trained
# with (internal/simd's avx2 set, GOAMD64 v1 or v2, as of ab03308); other
# kernels round differently (cmd/kvq-train/internal/train's TestGoldenTrajectory).
PROBE_DIR ?= probe-train
probe-model:
	$(GO) run ./cmd/kvq-train --dir $(PROBE_DIR)
	$(GO) run ./cmd/kvq-train --dir $(PROBE_DIR)-ft --finetune-from $(PROBE_DIR)
	$(GO) run ./cmd/kvq-train --dir $(PROBE_DIR)-ft3 --stage 3 --finetune-from $(PROBE_DIR)-ft/model
	$(GO) run ./cmd/kvq-train --dir $(PROBE_DIR)-ft4 --stage 4 --finetune-from $(PROBE_DIR)-ft3/model
	rm -rf datasets/models/kvq-probe
	cp -r $(PROBE_DIR)-ft4/model datasets/models/kvq-probe

# A tiny training run through the same code, for CI-size checks.
probe-model-smoke:
	$(GO) run ./cmd/kvq-train --dir $(PROBE_DIR)-smoke --smoke

# The CUDA build (docs/gpu.md). bin/kvq-cuda is for GPU hosts (it needs
# libcuda.so.1 and a GPU at run time); bin/kvq runs everywhere. The CUDA
# headers and the link stub come from Debian's nvidia-cuda-dev package,
# unpacked (not installed) into CUDA_SYSROOT once: about 1 minute, 770 MB
# downloaded, 1.6 MB kept. The kernels are PTX embedded in the binary
# (pkg/gpu/ptx/kvq.ptx, committed; make ptx remakes it with nvcc).
CUDA_SYSROOT ?= $(HOME)/.cache/kvq/cuda-sysroot
CUDA_ENV = CGO_ENABLED=1 CGO_CFLAGS="-I$(CUDA_SYSROOT)/usr/include" \
	CGO_LDFLAGS="-L$(CUDA_SYSROOT)/usr/lib/x86_64-linux-gnu/stubs"
cuda-sysroot:
	scripts/cuda-sysroot.sh $(CUDA_SYSROOT)

build-cuda: cuda-sysroot
	$(CUDA_ENV) $(GO) build -tags cuda -o bin/kvq-cuda ./cmd/kvq

# What CI checks of the cuda build without a GPU: it compiles, vets, and
# its test binaries compile (they cannot run here: gorgonia.org/cu exits
# the process in its init when no GPU is present).
check-cuda: cuda-sysroot
	$(CUDA_ENV) $(GO) build -tags cuda -o /dev/null ./cmd/kvq
	$(CUDA_ENV) $(GO) vet -tags cuda ./pkg/gpu/... ./cmd/... ./scripts/gpubench
	$(CUDA_ENV) $(GO) test -tags cuda -count=1 -c -o /dev/null ./pkg/gpu

ptx:
	scripts/ptx.sh

# What scripts/gpu-check.sh runs on a GPU machine (which has no Go):
# bin/kvq-cuda, pkg/gpu's test binary, bin/gpubench, and stories260K
# under shared/, packed as bin/gpu-check.tar.xz (the device tool carries
# it and shared/; the script unpacks it).
gpu-check-build: cuda-sysroot
	$(CUDA_ENV) $(GO) build -tags cuda -ldflags='-s -w' -o bin/kvq-cuda ./cmd/kvq
	$(CUDA_ENV) $(GO) test -tags cuda -ldflags='-s -w' -c -o bin/gpu.test ./pkg/gpu
	$(CUDA_ENV) $(GO) build -tags cuda -ldflags='-s -w' -o bin/gpubench ./scripts/gpubench
	mkdir -p shared/models/stories260K
	cp ../shared/models/stories260K/stories260K.gguf shared/models/stories260K/
	tar -cJf bin/gpu-check.tar.xz -C bin kvq-cuda gpu.test gpubench
	@echo "carry bin/gpu-check.tar.xz ($$(du -h bin/gpu-check.tar.xz | cut -f1)) and shared/ to the GPU machine"

clean:
	rm -rf bin
