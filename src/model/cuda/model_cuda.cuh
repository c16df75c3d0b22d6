/* The device forward's kernels (model_kernels.cu) as model_cuda.cu launches them.  Not installed. */
#ifndef TCQ_MODEL_CUDA_CUH
#define TCQ_MODEL_CUDA_CUH

#include "../../kernels/cuda/cuda_internal.h"
#include "../../kernels/cuda/linear_io.h"

/* One row of a forward step: its token, position and session cache (read by the kernels from
 * device memory, so that one captured graph serves every step and every set of sessions). */
struct mk_row {
    int32_t tok, pos, ctx, pad;
    uint16_t *k, *v;          /* [n_layers, ctx, kv_dim] f16 */
};

/* Positions per attention block: a row's n positions are split over ceil(ctx / MK_ATT_SPLIT)
 * blocks (flash-decoding), combined by a second kernel. */
#define MK_ATT_SPLIT 128
#define MK_MAX_HD 256
#define MK_MAX_G 8   /* query heads per kv head */

/* x[r] = embedding row of rows[r].tok (any dense or affine format) */
void mk_embed(cudaStream_t st, const tcq_weight *emb, const mk_row *rows, float *x, int M);
/* x += y (y may be NULL), then out = rmsnorm(x) * w, per row of d */
void mk_add_norm(cudaStream_t st, float *x, const float *y, const float *w, float *out, int M, int d, float eps);
/* Per-head q/k RMSNorm (qn/kn NULL: none) and RoPE: q into qout [M, nh*hd], k and v (rows at
 * strides sq, sk, sv) into the rows' caches at their positions. */
void mk_qk_rope_store(cudaStream_t st, const float *q, int sq, const float *k, int sk, const float *v, int sv,
                      float *qout, const mk_row *rows, const float *qn, const float *kn, const float *inv_freq, int M,
                      int nh, int nkv, int hd, int interleaved, float eps, int layer);
/* The same from the stacked q/k/v projection's pending output (tcq_cuda_io.defer): its chunk sums
 * are added here instead of in a launch of their own. */
void mk_qk_rope_store_pend(cudaStream_t st, const tcq_cuda_pend &qkv, float *qout, const mk_row *rows, const float *qn,
                           const float *kn, const float *inv_freq, int M, int nh, int nkv, int hd, int interleaved,
                           float eps, int layer);
/* att[r, h] = softmax(q K^T / sqrt(hd)) V over positions [0, pos + 1); part: [M, nh, S, hd + 2] scratch. */
void mk_attention(cudaStream_t st, const float *q, float *att, const mk_row *rows, float *part, int S, int M, int nh,
                  int nkv, int hd, int layer);
/* y = x W^T for a dense or affine W (warp per output, f32 accumulation). */
void mk_dense(cudaStream_t st, const tcq_weight *w, const float *x, float *y, int M);
/* y = silu(g) * u, as the CPU's tcq_linear_swiglu rounds it */
void mk_swiglu(cudaStream_t st, const float *g, const float *u, float *y, int64_t n);

#endif
