#!/usr/bin/env bash
# gpu-check.sh: the device check of kvq's CUDA backend, run on a GPU
# machine from the repository root, in about 8 minutes. The machine needs
# no Go: `make gpu-check-build` on the development machine builds what it
# runs (bin/kvq-cuda, bin/gpu.test, bin/gpubench packed in
# bin/gpu-check.tar.xz, and shared/ with stories260K), and the device tool
# carries them there:
#
#   make gpu-check-build            # here
#   bash scripts/gpu-check.sh       # there ($OUT, if set, receives the logs)
#
# Steps: the device and driver; the binary's libraries; pkg/gpu's tests on
# the device (the conformance suite, the kernels against their reference
# kernels, CPU-vs-GPU greedy, teacher-forced logits, batched decode, the
# Gemma ops and Gemma 2/3 against the CPU);
# the same tests with the kernels rebuilt by the machine's nvcc for sm_90
# when it has one; the CLI (generate, eval, bench with --device cuda);
# gpubench (1B and 8B shapes); the PyTorch peer. It prints one summary
# and exits non-zero when a check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kvq-gpu-check}
mkdir -p "$out"
if [[ -f bin/gpu-check.tar.xz ]]; then tar -xJf bin/gpu-check.tar.xz -C bin; fi
[[ -e ../shared ]] || ln -s "$PWD/shared" ../shared
declare -a summary
status=0
step() { # step NAME SECONDS CMD...: run CMD with a time limit, log it, record the result
	local name=$1 limit=$2
	shift 2
	local t0=$SECONDS
	timeout "$limit" "$@" >"$out/$name.log" 2>&1
	local rc=$?
	local line="$name: $([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)") in $((SECONDS - t0)) s"
	summary+=("$line")
	echo "== $line"
	tail -n 25 "$out/$name.log"
	[[ $rc == 0 ]] || status=1
	return $rc
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
step libs 10 bash -c 'ldd bin/kvq-cuda; ! ldd bin/kvq-cuda | grep -q "not found"'
step version 20 bin/kvq-cuda version
# The kernels as embedded (compute_80 PTX, JIT-compiled by the driver).
step tests 240 bash -c 'cd pkg/gpu && ../../bin/gpu.test -test.v -test.timeout 230s'
# The same sources built for sm_90 by the machine's own nvcc.
if command -v nvcc >/dev/null; then
	if nvcc -std=c++17 -arch=sm_90 -cubin -O3 -I pkg/gpu/kernels -o "$out/kvq_sm90.cubin" pkg/gpu/kernels/kvq.cu >"$out/nvcc.log" 2>&1; then
		step tests-sm90 200 env KVQ_PTX="$out/kvq_sm90.cubin" bash -c 'cd pkg/gpu && ../../bin/gpu.test -test.timeout 190s -test.run "Ops|KV|Attention|Greedy|Teacher|Batched|Softcap|Gemma"'
	else
		summary+=("tests-sm90: nvcc failed (see nvcc.log)")
		tail -n 20 "$out/nvcc.log"
		status=1
	fi
fi
st=shared/models/stories260K/stories260K.gguf
step cli 120 bash -c "set -e
	bin/kvq-cuda generate --device cuda -m $st -p 'Once upon a time' -n 40
	bin/kvq-cuda generate --device cpu -m $st -p 'Once upon a time' -n 40
	bin/kvq-cuda eval --device cuda --cache fp16,bf16 --tasks '' --chunks 4 -o json > $out/eval-cuda.json || test \$? = 3
	bin/kvq-cuda eval --device cpu --cache fp16,bf16 --tasks '' --chunks 4 -o json > $out/eval-cpu.json || test \$? = 3
	bin/kvq-cuda bench --device cuda --cache fp16,bf16 --num-prompts 16 --input-len 128 --output-len 32"
# Decode attention per cache format (8K/32K/128K tokens, batch 1 and 32;
# time relative to fp16 and GB/s against the measured bandwidth).
step gpubench 300 bin/gpubench -shapes 1b,8b -attn-formats fp16,fp8-e4m3,q8_0,q4_0,int4 -attn-ctx 8192,32768,131072 -attn-batch 1,32 -json "$out/gpubench.json"
step peer 200 env PYTHONUNBUFFERED=1 python3 scripts/gpu-peer.py --shapes 1b,8b --json "$out/peer.json"
echo
echo "== summary"
printf '%s\n' "${summary[@]}"
grep -hE "^(device|read bandwidth|[0-9a-z]+ (F16|BF16|Q8_0):|  (prefill|decode)|decode attention)" "$out/gpubench.log" 2>/dev/null
grep -hE "read bandwidth|prefill|decode batch" "$out/peer.log" 2>/dev/null
exit $status
