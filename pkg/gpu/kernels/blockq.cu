// blockq.cu: the kernels of ggml's block weight types (decoder and GEMV
// in blockq.cuh): the reference product, embedding, decode GEMV and the
// tensor-core GEMM (gemm.cu's kvq_gemm with its block-type tile loader),
// one set per type.
#pragma once
#include "common.cuh"
#include "blockq.cuh"
#include "dense.cu"
#include "gemm.cu"

#define KVQ_BLK_KERNELS(s, DT)                   \
	KVQ_MATMUL_REF(kvq_matmul_ref_##s, DT)       \
	KVQ_EMBED(kvq_embed_##s, DT)                 \
	KVQ_GEMV_BLK_ALL(s, DT)                      \
	KVQ_GEMM(kvq_gemm_##s##_64, DT, 64)          \
	KVQ_GEMM(kvq_gemm_##s##_128, DT, 128)
KVQ_BLK_KERNELS(q40, KVQ_Q40)
KVQ_BLK_KERNELS(q41, KVQ_Q41)
KVQ_BLK_KERNELS(q50, KVQ_Q50)
KVQ_BLK_KERNELS(q51, KVQ_Q51)
KVQ_BLK_KERNELS(q2k, KVQ_Q2K)
KVQ_BLK_KERNELS(q3k, KVQ_Q3K)
KVQ_BLK_KERNELS(q4k, KVQ_Q4K)
KVQ_BLK_KERNELS(q5k, KVQ_Q5K)
KVQ_BLK_KERNELS(q6k, KVQ_Q6K)
KVQ_BLK_KERNELS(iq4nl, KVQ_IQ4NL)
KVQ_BLK_KERNELS(iq4xs, KVQ_IQ4XS)
KVQ_BLK_KERNELS(mxfp4, KVQ_MXFP4)
