/* The registry of CUDA kernel families: every kernel family tcq_cuda_linear can run, with what
 * reaches it (path, M, axis, k), the context options that pin it, what it is checked against
 * and how closely, and the call itself.  The dispatcher (dispatch.cu) picks an entry and calls
 * its launch; tests/cuda/test_cuda.c runs its cases on the entries; `tcq cuda-bench --list` prints
 * them and `--kernel NAME` times one.  The CUDA twin of src/kernels/registry.h.  Internal: the
 * tests and the bench link libtcq statically. */
#ifndef TCQ_CUDA_REGISTRY_H
#define TCQ_CUDA_REGISTRY_H

#include "tcq_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* In the dispatcher's order of preference (dispatch.cu, pick()). */
typedef enum tcq_cuda_fam {
    TCQ_CF_FAST = 0,   /* "fast":      TCQ_PATH_FAST on dp4a, the CPU's activation blocks (fast.cu) */
    TCQ_CF_INT8,       /* "int8":      TCQ_PATH_FAST on the integer tensor cores (imma.cu) */
    TCQ_CF_INT,        /* "int":       the exact path on the integer tensor cores, x in 3 limbs */
    TCQ_CF_INT16,      /* "int16":     the same, x in 2 limbs (M = 6..8) */
    TCQ_CF_PAIR,       /* "pair":      pair-table f16 tensor-core kernels (linear.cu) */
    TCQ_CF_WGMMA,      /* "wgmma":     Hopper wgmma, weights decoded into registers (wgmma.cu) */
    TCQ_CF_WGMMA_SS,   /* "wgmma-ss":  Hopper wgmma, weights decoded into shared memory (wgss.cu) */
    TCQ_CF_GEMM,       /* "bf16-gemm": decode to bf16 + cuBLAS (dense.cu) */
    TCQ_CF_COUNT
} tcq_cuda_fam;

/* What a family's output is compared with (tests/cuda/test_cuda.c): float64 products of the
 * decoded weights and x, with what the family's contract rounds first. */
typedef enum tcq_cuda_ref {
    TCQ_CREF_EXACT = 0,   /* nothing rounded */
    TCQ_CREF_BF16,        /* W and x to bf16 */
    TCQ_CREF_F16X,        /* x to f16 after a power-of-two scale per row (largest |x| in [2^14, 2^15));
                           * on axis 0 x times the per-input scale first, in f32 */
    TCQ_CREF_FAST,        /* the fast path's per-output bound (TCQ_FAST_QB) over the family's
                           * activation blocks (tcq_cuda_fast_block), and where those are the CPU's
                           * also the CPU fast path's integer sums */
} tcq_cuda_ref;

/* One call: y = x W^T, or with up the fused y = silu(x W^T) * (x up^T) (w the gate). */
typedef tcq_status (*tcq_cuda_launch_fn)(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up,
                                         const float *x, float *y, int64_t M);

typedef struct tcq_cuda_family {
    const char *name;         /* tcq_cuda_linear_kernel's name */
    const char *op;           /* "linear" (both axes) or "reduce" (axis 1 only) */
    tcq_kpath path;           /* the path that reaches it (EXACT: AUTO too) */
    const char *regime;       /* where the built-in dispatcher runs it, in words */
    int axes;                 /* 1: axis 0, 2: axis 1, 3: both */
    int k_min, k_max;         /* the k it is built for */
    int64_t m_max;            /* the largest M it takes when pinned (axis 1; see regime) */
    int fused_swiglu;         /* tcq_cuda_linear_swiglu runs gate and up in one launch */
    int sm90;                 /* needs compute capability 9.0 (wgmma): elsewhere its pin falls through */
    tcq_cuda_opts pin;        /* context options under which the dispatcher runs it wherever it can */
    tcq_cuda_ref ref;         /* what it is checked against */
    double tol;               /* relative RMS error against that reference, linear */
    double tol_swiglu;        /* the same through silu(g) u */
    const char *reference;    /* the check, in words */
    tcq_cuda_launch_fn launch;   /* NULL in a build without CUDA */
} tcq_cuda_family;

/* Entry i (tcq_cuda_fam order), NULL outside [0, TCQ_CF_COUNT). */
const tcq_cuda_family *tcq_cuda_family_get(int i);
/* By name, NULL if there is none. */
const tcq_cuda_family *tcq_cuda_family_find(const char *name);

#ifdef __cplusplus
}
#endif
#endif
