/* The CUDA dispatcher: which kernel family of the registry (registry.c) runs a call (pick(),
 * from measured crossovers; each family's *_supports() beside its kernels says what it can
 * take), the families' calls behind one signature, the public linear and fused SwiGLU entries,
 * and the name of the kernel a call runs. */
#include "cuda_internal.h"
#include "linear_io.h"
#include "registry.h"

#include <algorithm>

tcq_status tcq_cuda_linear_tc(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x, float *y,
                              int64_t M);
tcq_status tcq_cuda_swiglu_combine(tcq_cuda_ctx *ctx, const float *g, const float *u, float *y, int64_t n);
/* TCQ_PATH_FAST, M <= 8 (imma.cu's int8 columns, or fast.cu); larger M runs the exact kernels */
tcq_status tcq_cuda_linear_fast(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x, float *y,
                                int64_t M);

namespace {

constexpr int kTcMaxM = 32;   /* the pair-table kernels' limit */
/* Largest M for the pair-table kernels where no wgmma kernel runs; above it decode + cuBLAS.
 * Measured crossovers (H200, 2026-12-03, docs/PERFORMANCE.md): axis 1 the pair table wins to M = 16
 * (k=2: 76 vs 117 us) and loses from M = 24 (192 vs 116); axis 0 it already loses at M = 12
 * (151 vs 119). */
int tc_max_m(const tcq_cuda_ctx *ctx, const tcq_trellis *w)
{
    if (ctx->tc_max_m > 0) return std::min(ctx->tc_max_m, kTcMaxM);   /* tcq_cuda_opts */
    return w->axis ? 16 : 8;
}
constexpr int kFastMaxM = 8;

tcq_status check_call(tcq_cuda_ctx *ctx, const tcq_trellis *w, const void *x, const void *y, int64_t M, tcq_kpath path)
{
    if (!ctx || !w || !x || !y) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda linear: NULL argument");
    if (M < 1 || M > (1 << 20)) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda linear: M=%lld out of range", (long long)M);
    if (path != TCQ_PATH_AUTO && path != TCQ_PATH_EXACT && path != TCQ_PATH_FAST)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda linear: unknown path %d", (int)path);
    return tcq_cuda_check_weight(w);
}

/* The dispatcher's one decision, shared by the call and tcq_cuda_linear_kernel.  Measured
 * crossovers (docs/PERFORMANCE.md, sessions 10 to 12): on sm_90 the wgmma kernels beat the pair-table
 * ones from M = 9 (axis 1: 58-64 vs 71-103 us at M = 9..16), so the pair tables run only where
 * wgmma does not.  The integer kernels' three limbs of x' need a third n-tile from M = 6, so M =
 * 6..8 put x' in two ("int16", the wgmma kernels' precision): the scatter 51-63 us against
 * wgmma-ss's 69-71 and three limbs' 66-78, the reduce 38-42 against 44-49.  The scatter (since its
 * items fill the SMs in one round) takes the integer kernel at M = 3..5 too (48-58 vs 68-70). */
tcq_cuda_fam pick(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M, tcq_kpath path)
{
    /* FAST: the int8 tensor-core kernels wherever they run (M <= 8; axis 1 to 16, where wgmma,
     * exact, would take 57-64 us); the dp4a kernels up to their M elsewhere.  The scatter at M <= 2
     * ran dp4a until the int8 scatter's L2 prefetch (session 13, 5120x17408, k = 2 / 4: M=1 35.3 /
     * 36.4 against dp4a's 38.6 / 40.3 us, M=2 35.9 / 37.2 against 42.7 / 43.6) */
    if (path == TCQ_PATH_FAST) {
        if (!ctx->fast_dp4a && tcq_cuda_im_supports(ctx, w, M, 1)) return TCQ_CF_INT8;
        if (M <= kFastMaxM) return TCQ_CF_FAST;
    }
    if (ctx->kernel_pin == 1 && M <= tc_max_m(ctx, w)) return TCQ_CF_PAIR;   /* tcq_cuda_opts.pair_table */
    if (ctx->ws_pin == 1 && tcq_cuda_ws_supports(ctx, w, M)) return TCQ_CF_WGMMA_SS;
    if (M >= 6 && tcq_cuda_im_supports(ctx, w, M, 0)) return TCQ_CF_INT16;
    if (tcq_cuda_im_supports(ctx, w, M, 0)) return TCQ_CF_INT;
    if (tcq_cuda_wg_supports(ctx, w, M)) return TCQ_CF_WGMMA;
    if (tcq_cuda_ws_supports(ctx, w, M)) return TCQ_CF_WGMMA_SS;
    if (M <= tc_max_m(ctx, w)) return TCQ_CF_PAIR;
    return TCQ_CF_GEMM;
}

tcq_status no_fused(const char *name, const tcq_trellis *up)
{
    return up ? tcq_fail(TCQ_ERR_INTERNAL, "cuda %s: no fused SwiGLU (dispatch.cu combines two calls)", name) : TCQ_OK;
}
}  // namespace

/* The families' calls (registry.c's launch), one signature: up != NULL fuses SwiGLU. */
extern "C" {
tcq_status tcq_cuda_launch_fast(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                float *y, int64_t M)
{
    return tcq_cuda_linear_fast(ctx, w, up, x, y, M);
}
tcq_status tcq_cuda_launch_int8(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                float *y, int64_t M)
{
    return tcq_cuda_linear_im(ctx, w, up, x, y, M, 1);
}
tcq_status tcq_cuda_launch_int(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                               float *y, int64_t M)
{
    return tcq_cuda_linear_im(ctx, w, up, x, y, M, 3);
}
tcq_status tcq_cuda_launch_int16(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                 float *y, int64_t M)
{
    return tcq_cuda_linear_im(ctx, w, up, x, y, M, 2);
}
tcq_status tcq_cuda_launch_pair(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                float *y, int64_t M)
{
    return tcq_cuda_linear_tc(ctx, w, up, x, y, M);
}
tcq_status tcq_cuda_launch_wgmma(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                 float *y, int64_t M)
{
    TCQ_TRY(no_fused("wgmma", up));
    return tcq_cuda_linear_wg(ctx, w, x, y, M);
}
tcq_status tcq_cuda_launch_wgmma_ss(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                    float *y, int64_t M)
{
    TCQ_TRY(no_fused("wgmma-ss", up));
    return tcq_cuda_linear_ws(ctx, w, x, y, M);
}
tcq_status tcq_cuda_launch_gemm(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                float *y, int64_t M)
{
    TCQ_TRY(no_fused("bf16-gemm", up));
    return tcq_cuda_linear_gemm(ctx, w, x, y, M);
}
}

const char *tcq_cuda_linear_kernel(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M, tcq_kpath path)
{
    if (!ctx || !w) return NULL;
    return tcq_cuda_family_get(pick(ctx, w, M, path))->name;
}

int64_t tcq_cuda_fast_block(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M)
{
    if (!ctx || !w || M < 1) return 0;
    switch (pick(ctx, w, M, TCQ_PATH_FAST)) {
    case TCQ_CF_FAST: return TCQ_FAST_QB;
    case TCQ_CF_INT8: return tcq_cuda_im_chunk(ctx, w, M);
    default: return 0;
    }
}

tcq_status tcq_cuda_linear(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M, tcq_kpath path)
{
    TCQ_TRY(check_call(ctx, w, x, y, M, path));
    return tcq_cuda_family_get(pick(ctx, w, M, path))->launch(ctx, w, NULL, x, y, M);
}

tcq_status tcq_cuda_linear_swiglu(tcq_cuda_ctx *ctx, const tcq_trellis *gate, const tcq_trellis *up, const float *x,
                                  float *y, int64_t M, tcq_kpath path)
{
    TCQ_TRY(check_call(ctx, gate, x, y, M, path));
    TCQ_TRY(check_call(ctx, up, x, y, M, path));
    if (tcq_trellis_out(gate) != tcq_trellis_out(up) || tcq_trellis_in(gate) != tcq_trellis_in(up))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda swiglu: gate [%lld, %lld] and up [%lld, %lld] differ",
                        (long long)tcq_trellis_out(gate), (long long)tcq_trellis_in(gate),
                        (long long)tcq_trellis_out(up), (long long)tcq_trellis_in(up));
    const bool same = gate->axis == 1 && up->axis == 1 && gate->p.L == up->p.L && gate->p.k == up->p.k &&
                      gate->p.T == up->p.T && gate->rows == up->rows && gate->cols == up->cols;
    /* the fast, integer and pair-table kernels take both matrices in one fused launch */
    const tcq_cuda_family *f = tcq_cuda_family_get(pick(ctx, gate, M, path));
    if (same && f->fused_swiglu) return f->launch(ctx, gate, up, x, y, M);
    /* otherwise: both products into a temporary, then the combine (the linear kernels own the
     * context scratch) */
    const size_t n = (size_t)M * tcq_trellis_out(gate);
    float *tmp = NULL;
    CU_TRY(cudaMallocAsync((void **)&tmp, 2 * n * sizeof(float), ctx->stream), "cuda swiglu: temporaries");
    tcq_status s = tcq_cuda_linear(ctx, gate, x, tmp, M, path);
    if (s == TCQ_OK) s = tcq_cuda_linear(ctx, up, x, tmp + n, M, path);
    if (s == TCQ_OK) s = tcq_cuda_swiglu_combine(ctx, tmp, tmp + n, y, (int64_t)n);
    cudaFreeAsync(tmp, ctx->stream);
    return s;
}

namespace {
int io_limbs(tcq_cuda_fam k) { return k == TCQ_CF_INT8 ? 1 : k == TCQ_CF_INT ? 3 : k == TCQ_CF_INT16 ? 2 : 0; }
bool io_same(const tcq_trellis *g, const tcq_trellis *u)
{
    return g->axis == 1 && u->axis == 1 && g->p.L == u->p.L && g->p.k == u->p.k && g->p.T == u->p.T &&
           g->rows == u->rows && g->cols == u->cols;
}
}  // namespace

int tcq_cuda_linear_io_ok(const tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, int64_t M,
                          tcq_kpath path, int accumulate)
{
    if (!ctx || !w || M < 1 || (up && !io_same(w, up))) return 0;
    if (!io_limbs(pick(ctx, w, M, path))) return 0;
    /* the residual add happens in the chunk-sum launch, which a one-chunk call does not have */
    if (accumulate && !up) {
        const int64_t in = tcq_trellis_in(w);
        if (in <= tcq_cuda_im_chunk(ctx, w, M)) return 0;
    }
    return 1;
}

tcq_status tcq_cuda_linear_io(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x, float *y,
                              int64_t M, tcq_kpath path, const tcq_cuda_io *io)
{
    const bool srcd = io && io->src;
    TCQ_TRY(check_call(ctx, w, srcd ? (const void *)io->src : x, y, M, path));
    if (up) TCQ_TRY(check_call(ctx, up, srcd ? (const void *)io->src : x, y, M, path));
    if (!tcq_cuda_linear_io_ok(ctx, w, up, M, path, io && io->accumulate))
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "cuda linear: fused prep/finish only on the integer kernels (M=%lld, %s)",
                        (long long)M, tcq_cuda_linear_kernel(ctx, w, M, path));
    return tcq_cuda_linear_im_io(ctx, w, up, x, y, M, io_limbs(pick(ctx, w, M, path)), io);
}
