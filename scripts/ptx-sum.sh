#!/usr/bin/env bash
# ptx-sum.sh: the SHA-256 of the kernel sources that go into the PTX
# (every pkg/gpu/kernels file but the emulator's emu.cuh and emutest.cu),
# as pkg/gpu's TestPTXFresh computes it: for each file in name order, its
# name, a newline, its bytes.
set -euo pipefail
cd "$(dirname "$0")/../pkg/gpu/kernels"
for f in $(ls | LC_ALL=C sort); do
	case $f in emu.cuh | emutest.cu) continue ;; esac
	printf '%s\n' "$f"
	cat "$f"
done | sha256sum | cut -d' ' -f1
