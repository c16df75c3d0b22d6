/* Benchmark timers for `tcq cuda-bench` / `tcq bench kernels --device cuda` and `tcq bench model`
 * (bench/).  Not public API: the tcq binary links libtcq statically, so these stay hidden in
 * libtcq.so.  Defined in timers.cu and src/encode/encode_cuda.cu (CUDA builds) or cuda_stub.c
 * (TCQ_ERR_UNSUPPORTED). */
#ifndef TCQ_CUDA_TIMERS_H
#define TCQ_CUDA_TIMERS_H

#include "tcq_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Median microseconds per call of a CUDA graph of `reps` back-to-back calls, cycling through n_w
 * weights (so the bytes read exceed the L2), repeated `trials` times. */
tcq_status tcq_cuda_time_linear(tcq_cuda_ctx *ctx, const tcq_trellis *const *w, int n_w, const float *x, float *y,
                                int64_t M, tcq_kpath path, int reps, int trials, double *us);
tcq_status tcq_cuda_time_swiglu(tcq_cuda_ctx *ctx, const tcq_trellis *const *gate, const tcq_trellis *const *up,
                                int n_w, const float *x, float *y, int64_t M, tcq_kpath path, int reps, int trials,
                                double *us);
/* cuBLAS bf16 GEMM y[M,out] = x[M,in] W^T (f32 accumulate, bf16 out), n_w weight copies. */
tcq_status tcq_cuda_time_dense_bf16(tcq_cuda_ctx *ctx, int64_t out, int64_t in, int64_t M, int n_w, int reps,
                                    int trials, double *us);
/* Device-to-device copy of `bytes`: GB/s counting bytes read plus written. */
tcq_status tcq_cuda_time_copy(tcq_cuda_ctx *ctx, size_t bytes, int reps, int trials, double *gbps);
/* GPU encoder throughput on R x C Gaussian rows, weights per second: one whole
 * tcq_cuda_encode_rows call after a warm-up call of the same shape (so the context's buffers are
 * grown: the steady state of a quantizer run) and its kernels alone (device time from the first
 * chunk's kernels to the last one's end; kernel_wps may be NULL). */
tcq_status tcq_cuda_time_encode(tcq_cuda_ctx *ctx, tcq_block_params p, int64_t R, int64_t C, double *wps,
                                double *kernel_wps);

#ifdef __cplusplus
}
#endif
#endif
