/* The fast path on the GPU (TCQ_PATH_FAST, M <= 8): int8 activations, decode folded into dp4a.
 *
 * Contract: tcq_kernels.h's fast path, the same as the CPU's.  The activation a (axis 1: x; axis 0:
 * x[i] * scale[i] in f32) is quantized per block of TCQ_FAST_QB = 64 positions of the reduced
 * dimension exactly as prep.c does it (d = amax/127, q = round-half-even(a * (127/amax)) in
 * [-127, 127], d = NaN for a block holding a NaN or Inf), so the integer block sums
 *     isum = sum_i bytesum(s_i) q_i - 510 sum_i q_i = sum_i y(s_i) q_i
 * are the CPU's to the bit.  Only the f32 combination of the blocks (isum * d) differs in order:
 * axis 1 a chain per lane over its blocks then a 5-level butterfly (the CPU: one chain over the
 * row), axis 0 a chain over the G blocks of a work item then the items' partials summed in
 * order (the CPU: four partitions).  Then scale/147.8 (axis 1: y = acc * f32(scale * (1/147.8)),
 * as the CPU) or 1/147.8 (axis 0) once per output.
 *
 * Decode.  The L-bit state of position t is a window of the block's bits; for an x = s*34038481
 * + 76625530 its byte sum times q is one dp4a of x (unsigned bytes) against q replicated into four
 * signed bytes (q4, prepared once per call).  So a weight costs: a funnel shift (or plain shift)
 * and an AND to cut the state out of registers, one IMAD, and one dp4a per activation row; the
 * code words (2k+1 32-bit loads per 64 weights), q4 (one 16-byte load per 4 weights and row) and
 * the per-block f32 step are amortized.  Design note with the SASS count: docs/PERFORMANCE.md, "CUDA
 * fast path".
 *
 * Work split (fixed by the shape, never by the device): axis 1 one warp per output row, lane l
 * taking the row's activation blocks l, l+32, ...; axis 0 items of 128 output columns x G
 * activation blocks (G from kScatterItems), partials [S, M, out] summed in a fixed order by k_finish.
 * No atomics: results are deterministic. */
#include "fast_quant.cuh"

using namespace tcq_fast;

tcq_status tcq_cuda_linear_fast(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                float *y, int64_t M);

namespace {

tcq_status launch(tcq_cuda_ctx *ctx, int k, const Geo &g, const Geo *up, int M, const Act &a, const ScatterSplit &sp,
                  float *y)
{
    switch (k) {
    case 1: return fast_launch_k1(ctx, g, up, M, a, sp, y);
    case 2: return fast_launch_k2(ctx, g, up, M, a, sp, y);
    case 3: return fast_launch_k3(ctx, g, up, M, a, sp, y);
    default: return fast_launch_k4(ctx, g, up, M, a, sp, y);
    }
}

}  // namespace

/* The fast path for 1 <= M <= kMaxM (dispatch.cu checked the call).  up != NULL:
 * fused SwiGLU with w as gate (both axis 1, same parameters and shape: checked by the caller). */
tcq_status tcq_cuda_linear_fast(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                float *y, int64_t M)
{
    if (M < 1 || M > kMaxM) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda fast linear: M=%lld outside [1, %d]", (long long)M, kMaxM);
    const int64_t in = tcq_trellis_in(w), nblk = (in + kQB - 1) / kQB, npad = nblk * kQB;
    const Geo g = tcq_tc::geo_of(w);
    ScatterSplit sp = {0, 1, nblk, NULL, y};
    if (w->axis == 0) {
        sp.ntiles = (w->cols + kScatterCols - 1) / kScatterCols;
        int64_t S = TCQ_MAX((int64_t)1, TCQ_MIN(nblk, (kScatterItems + sp.ntiles - 1) / sp.ntiles));
        sp.G = (nblk + S - 1) / S;
        sp.S = (nblk + sp.G - 1) / sp.G;
    }
    const size_t qb = tcq_align256((size_t)(M * npad) * 4), db = tcq_align256((size_t)(M * nblk) * 4);
    const size_t pb = sp.S > 1 ? (size_t)(sp.S * M * w->cols) * 4 : 0;
    void *scr;
    TCQ_TRY(tcq_cuda_scratch(ctx, qb + 2 * db + pb, &scr));
    char *b = (char *)scr;
    Act a = {(const uint32_t *)b, (const float *)(b + qb), (const int *)(b + qb + db), npad, nblk};
    if (pb) sp.part = (float *)(b + qb + 2 * db);
    const int64_t qwarps = M * nblk;
    k_quant<<<(unsigned)TCQ_MIN((qwarps + 7) / 8, (int64_t)1 << 16), 256, 0, ctx->stream>>>(
        x, (int)M, in, w->axis ? NULL : w->scales, nblk, npad, (uint32_t *)a.q4, (float *)a.d, (int *)a.corr);
    CU_LAUNCHED("cuda fast: activation quantization");
    Geo gu;
    if (up) gu = tcq_tc::geo_of(up);
    TCQ_TRY(launch(ctx, w->p.k, g, up ? &gu : NULL, (int)M, a, sp, y));
    if (sp.part) {
        const int64_t n = M * w->cols;
        k_finish<<<(unsigned)((n * kFinishLanes + 255) / 256), 256, 0, ctx->stream>>>(sp.part, sp.S, n, y);
        CU_LAUNCHED("cuda fast scatter: partial sums");
    }
    return TCQ_OK;
}
