/* Host-side internals of the CUDA backend, shared by the .cu files. Not installed. */
#ifndef TCQ_CUDA_INTERNAL_H
#define TCQ_CUDA_INTERNAL_H

#include <stdarg.h>
#include <stdlib.h>
/* The C library's internals have C linkage. */
extern "C" {
#include "../../core/internal.h"
}

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

struct tcq_cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    int n_sm;
    int l2_bytes;
    int smem_optin;          /* max dynamic shared memory per block after opt-in */
    char name[256];
    void *scratch;           /* grown on demand; carved by each call */
    size_t scratch_bytes;
    int *counters;           /* zero at rest: each kernel that uses them resets what it touched */
    size_t n_counters;
    double encode_kernel_ms;   /* device time of the last tcq_cuda_encode_rows' kernels */
    /* the kernel choices of tcq_cuda_opts (tcq_cuda_ctx_set_opts; zero: built-in) */
    int chunk_pin;           /* im_chunk: item length of the int kernels (0: built-in) */
    int kernel_pin;          /* pair_table: M <= tc_max_m on the pair-table kernels */
    int fast_dp4a;           /* TCQ_PATH_FAST on the dp4a kernels (fast.cu), not int8 tensor cores */
    int tc_max_m;            /* largest M on the pair-table kernels (0: built-in) */
    int wg_ok;               /* the sm_90a wgmma kernels run on this device (probed at creation) */
    int wg_pin;              /* wgmma: 0 off, 1 on, -1 built-in */
    int wg_grid;             /* the wgmma kernels' block count (0: SMs x blocks per SM) */
    int ws_pin;              /* wgmma_ss: 0 off, 1 wherever it runs, -1 built-in (wgss.cu) */
    void *host_stage;          /* pinned host staging (cudaHostAlloc), grown on demand */
    size_t host_stage_bytes;
};

tcq_status tcq_cuda_fail(cudaError_t e, const char *what);
tcq_status tcq_cublas_fail(cublasStatus_t e, const char *what);
#define CU_TRY(call, what)                                                                         \
    do {                                                                                           \
        cudaError_t cu_e_ = (call);                                                                \
        if (cu_e_ != cudaSuccess) return tcq_cuda_fail(cu_e_, what);                               \
    } while (0)
/* After a launch: a bad configuration shows here, a fault later at tcq_cuda_sync(). */
#define CU_LAUNCHED(what) CU_TRY(cudaGetLastError(), what)

/* Scratch of at least `bytes` (256-byte aligned), valid until the next call on the context. */
tcq_status tcq_cuda_scratch(tcq_cuda_ctx *ctx, size_t bytes, void **out);
/* Pinned host memory of at least `bytes`, valid until the next call on the context (the
 * encoder's staging buffers: page-locked copies overlap with kernels, pageable ones do not). */
tcq_status tcq_cuda_host_stage(tcq_cuda_ctx *ctx, size_t bytes, void **out);
/* n counters, all zero, valid until the next call on the context. */
tcq_status tcq_cuda_counters(tcq_cuda_ctx *ctx, size_t n, int **out);
/* Validate a device view against what the kernels handle. */
tcq_status tcq_cuda_check_weight(const tcq_trellis *w);

/* y[i] = sum over s < S (in order) of part[s*n + i] / 147.800537109375 (the scatter chunk sums). */
tcq_status tcq_cuda_finish_chunks(tcq_cuda_ctx *ctx, const float *part, int S, int64_t n, float *y);
/* The integer tensor-core kernels (imma.cu): whether they take (w, M), and the call (up: fused
 * SwiGLU with w the gate). */
int tcq_cuda_im_supports(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M, int int8);
/* limbs: B columns an activation row: 3 the exact path (x' < 2^22 in three signed bytes), 2 its
 * 16-bit variant (x' < 2^14: "int16", M = 6..8), 1 the int8 path (TCQ_PATH_FAST). */
tcq_status tcq_cuda_linear_im(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x, float *y,
                              int64_t M, int limbs);
/* The integer kernels' item length along the reduced dimension (= the int8 path's activation block). */
int tcq_cuda_im_chunk(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M);

/* The wgmma kernels (wgmma.cu): axis 1, T = 256, k = 2..4, sm_90a. */
tcq_status tcq_cuda_wg_probe(tcq_cuda_ctx *ctx);
int tcq_cuda_wg_supports(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M);
tcq_status tcq_cuda_linear_wg(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M);
/* The decode-into-shared-memory wgmma kernel (wgss.cu): both axes, T = 256, k = 2..4, sm_90a. */
int tcq_cuda_ws_supports(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M);
tcq_status tcq_cuda_linear_ws(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M);

/* The large-M path (dense.cu): decode to bf16 + cuBLAS, what no tensor-core kernel takes. */
tcq_status tcq_cuda_linear_gemm(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M);
/* y [M, ldy] (columns [0, out) written) = xb [M, in] W^T, W [out, in] (wt = 0) or W^T [in, out]
 * (wt = 1), a cuBLAS bf16 GEMM with f32 accumulation (dense.cu; the timers' baseline too). */
tcq_status tcq_cuda_gemm_bf16(tcq_cuda_ctx *ctx, const __nv_bfloat16 *W, int wt, const __nv_bfloat16 *xb, void *y,
                              int64_t M, int64_t out, int64_t in, int64_t ldy, cudaDataType_t ytype);

static inline size_t tcq_align256(size_t n) { return (n + 255) & ~(size_t)255; }

#endif
