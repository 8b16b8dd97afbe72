// kvq.cu: the one translation unit of kvq's kernels (one PTX module,
// ptx/kvq.ptx; the emulator compiles the same unit).
#include "common.cuh"
#include "dense.cu"
#include "gemm.cu"
#include "blockq.cu"
#include "kvwrite.cu"
#include "softcap.cu"
#include "attn.cu"
