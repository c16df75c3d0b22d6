/* The CUDA kernel families (registry.h).  The regimes and pins restate what dispatch.cu's pick()
 * and each family's *_supports() decide, so a reader finds them in one table; test_cuda checks
 * that a call pinned to a family runs it (tcq_cuda_linear_kernel). */
#include "registry.h"

#include <string.h>

#ifdef TCQ_HAVE_CUDA
/* dispatch.cu: each family's call behind one signature */
tcq_status tcq_cuda_launch_fast(tcq_cuda_ctx *, const tcq_trellis *, const tcq_trellis *, const float *, float *, int64_t);
tcq_status tcq_cuda_launch_int8(tcq_cuda_ctx *, const tcq_trellis *, const tcq_trellis *, const float *, float *, int64_t);
tcq_status tcq_cuda_launch_int(tcq_cuda_ctx *, const tcq_trellis *, const tcq_trellis *, const float *, float *, int64_t);
tcq_status tcq_cuda_launch_int16(tcq_cuda_ctx *, const tcq_trellis *, const tcq_trellis *, const float *, float *, int64_t);
tcq_status tcq_cuda_launch_pair(tcq_cuda_ctx *, const tcq_trellis *, const tcq_trellis *, const float *, float *, int64_t);
tcq_status tcq_cuda_launch_wgmma(tcq_cuda_ctx *, const tcq_trellis *, const tcq_trellis *, const float *, float *, int64_t);
tcq_status tcq_cuda_launch_wgmma_ss(tcq_cuda_ctx *, const tcq_trellis *, const tcq_trellis *, const float *, float *,
                                    int64_t);
tcq_status tcq_cuda_launch_gemm(tcq_cuda_ctx *, const tcq_trellis *, const tcq_trellis *, const float *, float *, int64_t);
#define LAUNCH(f) tcq_cuda_launch_##f
#else
#define LAUNCH(f) NULL
#endif

#define F64 "float64 x W of tcq_trellis_decode"
#define FAST_REF "per output within the fast path's bound (TCQ_FAST_QB) of float64 over its activation blocks"

static const tcq_cuda_family families[TCQ_CF_COUNT] = {
    [TCQ_CF_FAST] = {"fast", "linear", TCQ_PATH_FAST, "FAST, M <= 8, where int8 does not run", 3, 1, 4, 8, 1, 0,
                     {.fast_dp4a = 1}, TCQ_CREF_FAST, 0.02, 0,
                     FAST_REF "; and within twice the rounding bound of the CPU fast path (scalar), same blocks",
                     LAUNCH(fast)},
    [TCQ_CF_INT8] = {"int8", "linear", TCQ_PATH_FAST,
                     "FAST, M <= 8 (axis 1: 16; T = 128 or 256, not interleaved)", 3, 1, 4, 16, 1, 0, {0},
                     TCQ_CREF_FAST, 0.02, 0, FAST_REF " (the item length, tcq_cuda_fast_block)", LAUNCH(int8)},
    [TCQ_CF_INT] = {"int", "linear", TCQ_PATH_EXACT, "M <= 5 (axis 1: T = 128 or 256, not interleaved)", 3, 1, 4, 5,
                    1, 0, {0}, TCQ_CREF_EXACT, 1e-5, 3e-5, F64, LAUNCH(int)},
    [TCQ_CF_INT16] = {"int16", "linear", TCQ_PATH_EXACT, "M = 6..8 where int runs", 3, 1, 4, 8, 1, 0, {0},
                      TCQ_CREF_EXACT, 3e-4, 6e-4, F64 " (x' < 2^14 per item: ~1.6e-4 relative)", LAUNCH(int16)},
    [TCQ_CF_PAIR] = {"pair", "linear", TCQ_PATH_EXACT,
                     "M <= 16 on axis 1, <= 8 on axis 0, where neither int nor a wgmma kernel runs", 3, 1, 4, 32, 1, 0,
                     {.pair_table = 1, .tc_max_m = 32}, TCQ_CREF_EXACT, 1e-5, 3e-5, F64, LAUNCH(pair)},
    [TCQ_CF_WGMMA] = {"wgmma", "reduce", TCQ_PATH_EXACT,
                      "axis 1, T = 256, sm_90: M = 9..256 (k = 2: to 768 with the last 256-row tile over half "
                      "full)", 2, 2, 4, 1 << 16, 0, 1, {.wgmma = 1}, TCQ_CREF_F16X, 1e-5, 3e-5,
                      F64 ", x rounded to f16 after a power-of-two scale per row", LAUNCH(wgmma)},
    [TCQ_CF_WGMMA_SS] = {"wgmma-ss", "linear", TCQ_PATH_EXACT,
                         "axis 0, T = 256, coded rows a multiple of 64, sm_90: M = 9..256 (3..5 where int does not "
                         "run); axis 1 only pinned", 3, 2, 4, 1 << 16, 0, 1, {.wgmma_ss = 1}, TCQ_CREF_F16X, 1e-5, 3e-5,
                         F64 ", x (axis 0: times its scale) rounded to f16 after a power-of-two scale per row",
                         LAUNCH(wgmma_ss)},
    [TCQ_CF_GEMM] = {"bf16-gemm", "linear", TCQ_PATH_EXACT, "every larger M", 3, 1, 4, 1 << 20, 0, 0,
                     {.wgmma = -1, .wgmma_ss = -1}, TCQ_CREF_BF16, 2e-5, 3e-5, F64 " with W and x rounded to bf16",
                     LAUNCH(gemm)},
};

const tcq_cuda_family *tcq_cuda_family_get(int i) { return i >= 0 && i < TCQ_CF_COUNT ? &families[i] : NULL; }

const tcq_cuda_family *tcq_cuda_family_find(const char *name)
{
    for (int i = 0; name && i < TCQ_CF_COUNT; i++)
        if (!strcmp(families[i].name, name)) return &families[i];
    return NULL;
}
