/* The GPU encoder's entries that are not public API (encode_cuda.cu; cuda_stub.c without CUDA).
 * C linkage; the library's internals only. */
#ifndef TCQ_ENCODE_CUDA_H
#define TCQ_ENCODE_CUDA_H

#include "../core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tcq_cuda_encode_blocks (no sq_err) with one weight vector w [T] for every block: BlockLDLQ's
 * axis 1 weighs a block's positions by D_b's diagonal, the same for all R rows, so T floats go
 * up instead of n x T (17.8 MB a block of a 14B gate: ~5 ms of a 27 ms call).  The same words as
 * tcq_cuda_encode_blocks with w repeated n times. */
tcq_status tcq_cuda_encode_blocks_w1(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts,
                                     const float *x /* [n*T] */, const float *w /* [T] */, int64_t n,
                                     uint32_t *words /* [n*T*k/32] */);

#ifdef __cplusplus
}
#endif
#endif
