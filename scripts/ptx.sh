#!/usr/bin/env bash
# ptx.sh: compile kvq's CUDA kernels (pkg/gpu/kernels/kvq.cu) to PTX for
# compute_80 with nvcc (11.8 or later), into pkg/gpu/ptx/kvq.ptx, whose
# first line records the SHA-256 of the kernel sources it was made from
# (pkg/gpu's TestPTXFresh fails when the sources changed and the PTX was
# not remade). The emulator-only files (emu.cuh, emutest.cu) are not part
# of the hash.
set -euo pipefail
cd "$(dirname "$0")/.."
k=pkg/gpu/kernels
NVCC=${NVCC:-nvcc}
ccbin=()
if command -v g++-11 >/dev/null; then ccbin=(-ccbin g++-11); fi # nvcc 11.8 refuses gcc 12
sum=$(scripts/ptx-sum.sh)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$NVCC" "${ccbin[@]}" -std=c++17 -arch=compute_80 -ptx -lineinfo -I "$k" -o "$tmp" "$k/kvq.cu"
{ echo "// kvq-kernels-sha256: $sum"; cat "$tmp"; } > pkg/gpu/ptx/kvq.ptx
echo "ptx: pkg/gpu/ptx/kvq.ptx ($(wc -c < pkg/gpu/ptx/kvq.ptx) bytes) from $("$NVCC" --version | tail -1)"
