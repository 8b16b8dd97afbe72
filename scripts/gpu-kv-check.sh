#!/usr/bin/env bash
# gpu-kv-check.sh: the device check of pkg/gpu's KV cache and attention
# kernels (docs/gpu-kv.md), in two halves:
#
#   scripts/gpu-kv-check.sh build   # on the dev machine: the cuda test binary, bin/gpu-kv.test
#   scripts/gpu-kv-check.sh run     # on the GPU machine (carry bin/gpu-kv.test): tests, then the benchmark
#
# run writes gpu-kv-tests.log and gpu-kv-bench.log into $OUT (or the
# current directory) and exits non-zero when a test fails. It takes a few
# minutes: the tests are the emulator's (sized for a CPU; the quantized
# formats' byte-identity tests TestKVWriteBytesQuant and
# TestKVQuantConformance, the fp16 windows' TestKVWindowSlots and the
# quantized decode's family kernels against its generic loader,
# TestQDecodeLoaders, included; the 15 MB PTX is JIT-compiled once per
# process, expect tens of seconds before the first test), the benchmark
# builds four 32K-token fp16 caches and, per quantized format, caches of
# 8K, 32K and 128K tokens at batch 1 and 32 (128K × 32 for fp16, q8_0 and
# q4_0 only; up to 17 GB at fp16), times 100 steps each,
# plus a 1 GiB device copy for the bandwidth to compare with. Compare
# each format's us/step with the fp16 row of the same context and batch.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
build)
	env=()
	if [ -n "${CUDA_SYSROOT:-}" ]; then
		env=(CGO_CFLAGS="-I$CUDA_SYSROOT/usr/include" CGO_LDFLAGS="-L$CUDA_SYSROOT/usr/lib/x86_64-linux-gnu/stubs")
	fi
	env CGO_ENABLED=1 "${env[@]}" go test -tags cuda -c -o bin/gpu-kv.test ./pkg/gpu
	ls -l bin/gpu-kv.test
	;;
run)
	out=${OUT:-$PWD}
	bin=$PWD/bin/gpu-kv.test
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv >"$out/gpu-kv-tests.log" 2>&1 || true
	cd pkg/gpu # the tests read kernels/ and ptx/
	rc=0
	timeout 300 "$bin" -test.v -test.count=1 \
		-test.run 'TestPTXFresh|TestSupportsKV|TestKV|TestAttention|TestQDecode|TestBenchDecodeAttention' >>"$out/gpu-kv-tests.log" 2>&1 || rc=$?
	grep -E '^(--- |FAIL|ok|PASS)' "$out/gpu-kv-tests.log" | grep -v -- '--- PASS: .*/' || true
	timeout 420 "$bin" -test.run '^$' -test.bench 'DecodeAttention' -test.benchtime 1x >"$out/gpu-kv-bench.log" 2>&1 || rc=$?
	cat "$out/gpu-kv-bench.log"
	exit $rc
	;;
*)
	echo "usage: $0 build|run" >&2
	exit 2
	;;
esac
