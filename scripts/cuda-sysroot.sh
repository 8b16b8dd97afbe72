#!/usr/bin/env bash
# cuda-sysroot.sh DIR: put the CUDA headers and link stubs that kvq's cuda
# build needs (cuda.h and friends, a stub libcuda.so) under DIR, taken out
# of Debian's nvidia-cuda-dev package without installing it (see
# docs/gpu.md). Nothing from NVIDIA is committed to the repository; the
# files are fetched at build time into a cache directory. Reruns with DIR
# already filled do nothing.
#
# It uses its own apt lists (bookworm contrib non-free) under DIR, so the
# machine's apt configuration is left alone.
set -euo pipefail
dir=${1:?usage: cuda-sysroot.sh DIR}
if [[ -f $dir/.ok ]]; then
	exit 0
fi
rm -rf "$dir"
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/deb"
src=$dir/apt/kvq-cuda.sources
cat >"$src" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
apt_opts=(-o "Dir::Etc::SourceList=$src" -o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$dir/apt/lists" -o "Dir::Cache=$dir/apt/cache"
	-o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" -qq)
echo "cuda-sysroot: fetching Debian's nvidia-cuda-dev (about 770 MB, once) into $dir" >&2
apt-get "${apt_opts[@]}" update
(cd "$dir/deb" && apt-get "${apt_opts[@]}" download nvidia-cuda-dev)
members=()
for h in cuda.h nvrtc.h cuComplex.h vector_types.h driver_types.h library_types.h \
	cuda_fp16.h cuda_fp16.hpp cuda_bf16.h cuda_bf16.hpp crt/host_defines.h; do
	members+=("./usr/include/$h")
done
members+=(./usr/lib/x86_64-linux-gnu/stubs/libcuda.so)
dpkg-deb --fsys-tarfile "$dir"/deb/nvidia-cuda-dev_*.deb | tar -x -C "$dir" "${members[@]}"
rm -rf "$dir/deb" "$dir/apt"
touch "$dir/.ok"
echo "cuda-sysroot: ready ($(du -sh "$dir" | cut -f1))" >&2
