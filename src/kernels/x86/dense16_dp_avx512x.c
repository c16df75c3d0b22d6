/* AVX-512 BF16 GEMM for dense bf16 and f16 weights on the fast path (linear.c runs it only where
 * tcq_cpu()->avx512bf16; kernels.h, "bf16 activations", states its contract).
 *
 * The activations are rounded to bf16 once per call (tcq_d16_round_bf16_avx512x: RNE, the bits of
 * tcq_f32_to_bf16), then the dot-product shape of llamafile's tinyBLAS: both operands k-contiguous
 * as stored, a tile of 6 activation rows x 4 outputs held in 24 zmm accumulators of 16 f32 lanes,
 * each step of 32 k = 4 weight loads, 6 activation loads and 24 vdpbf16ps, no packing.  (A panel
 * form, weights transposed into bf16 pairs, ran 1.5x the time of the f32 GEMM; an earlier form of
 * this kernel cut k into blocks of 1024 with the accumulators parked in memory between blocks:
 * ~140 cycles a block switch, 0.8x this speed.  docs/PERFORMANCE.md, issue 27.)
 *
 * An output's sum depends on its row of W and its row of x alone: lane l of its accumulator takes
 * the pairs k = 32 j + 2 l, 32 j + 2 l + 1 for j ascending (one vdpbf16ps each), then
 * d16_hsum4_512's fixed tree.  M, the tile a row lands in, the item split and the thread count
 * change no bit.
 *
 * Loop order inside an item (16 outputs, DENSE16_DP_ROWS in linear.c): 6-row tiles outermost, the
 * item's 4 groups of 4 outputs inside, each tile over all of k: the tile's activations (6 rows,
 * <= 204 KB at K = 17408) and the item's weights (16 rows, <= 557 KB) stay in the 1 MB L2, and the
 * 10 row streams of a tile are long enough for the hardware prefetchers.
 *
 * f16 weights: the item's 16 rows (whole k) are rounded to bf16 first (vcvtph2ps, exact, then
 * vcvtne2ps2bf16, RNE: the bits of tcq_f32_to_bf16(tcq_f16_to_f32(h)) for every h, test_kernels
 * checks all 65536) into the thread's scratch, <= 557 KB at K = 17408, and every tile of the call
 * runs over that copy while it sits in L2: one conversion per weight per call, never a copy of the
 * whole matrix.  The rest is the bf16 kernel as it stands, so an output's bits still depend on its
 * W row and x row alone. */
#include "dense16_x86.h"

AI __m512bh bh(__m512i v) { return (__m512bh)v; }

/* rows [m0, m0 + MR) x 4 outputs (w[], nv valid, starting at n0) over all of k, into y */
AI void dp_tile(const int MR, const kd16_args *a, int64_t m0, const uint16_t *const w[4], int nv, int64_t n0)
{
    const int64_t K = a->w->in, ldx = a->ldxb, kf = K & ~(int64_t)31;
    const uint16_t *xb = a->xb + m0 * ldx;
    __m512 acc[6][4];
    for (int m = 0; m < MR; m++)
        for (int n = 0; n < 4; n++) acc[m][n] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k < kf; k += 32) {
        const __m512bh w0 = bh(_mm512_loadu_si512(w[0] + k)), w1 = bh(_mm512_loadu_si512(w[1] + k));
        const __m512bh w2 = bh(_mm512_loadu_si512(w[2] + k)), w3 = bh(_mm512_loadu_si512(w[3] + k));
        for (int m = 0; m < MR; m++) {
            const __m512bh xv = bh(_mm512_loadu_si512(xb + m * ldx + k));
            acc[m][0] = _mm512_dpbf16_ps(acc[m][0], w0, xv);
            acc[m][1] = _mm512_dpbf16_ps(acc[m][1], w1, xv);
            acc[m][2] = _mm512_dpbf16_ps(acc[m][2], w2, xv);
            acc[m][3] = _mm512_dpbf16_ps(acc[m][3], w3, xv);
        }
    }
    if (k < K) {   /* the row's tail: weights past K masked to zero, the activations zero-padded */
        const __mmask32 t = (__mmask32)((1ull << (K - k)) - 1);
        const __m512bh w0 = bh(_mm512_maskz_loadu_epi16(t, w[0] + k)), w1 = bh(_mm512_maskz_loadu_epi16(t, w[1] + k));
        const __m512bh w2 = bh(_mm512_maskz_loadu_epi16(t, w[2] + k)), w3 = bh(_mm512_maskz_loadu_epi16(t, w[3] + k));
        for (int m = 0; m < MR; m++) {
            const __m512bh xv = bh(_mm512_loadu_si512(xb + m * ldx + k));
            acc[m][0] = _mm512_dpbf16_ps(acc[m][0], w0, xv);
            acc[m][1] = _mm512_dpbf16_ps(acc[m][1], w1, xv);
            acc[m][2] = _mm512_dpbf16_ps(acc[m][2], w2, xv);
            acc[m][3] = _mm512_dpbf16_ps(acc[m][3], w3, xv);
        }
    }
    for (int m = 0; m < MR; m++)
        d16_store(a->y + (m0 + m) * a->ldy + n0, d16_hsum4_512(acc[m][0], acc[m][1], acc[m][2], acc[m][3]), nv, 1);
}

/* rows [r0, r1) of f16 W [., K] rounded to bf16 rows of ld (>= K rounded up to 32) in wb, zeros
 * past K */
void tcq_d16_f16_to_bf16_avx512x(const uint16_t *W, int64_t K, int64_t r0, int64_t r1, uint16_t *wb, int64_t ld)
{
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *s = W + r * K;
        uint16_t *o = wb + (r - r0) * ld;
        for (int64_t k = 0; k < ld; k += 32) {
            const int64_t n = TCQ_MAX(0, TCQ_MIN(32, K - k));
            const __mmask16 lo = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
            const __mmask16 hi = n >= 32 ? (__mmask16)0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
            const __m512 a = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lo, s + k));
            const __m512 b = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(hi, s + k + 16));
            _mm512_storeu_si512(o + k, (__m512i)_mm512_cvtne2ps_pbh(b, a));
        }
    }
}

static void gemm_dp(const kd16_args *a, int64_t r0, int64_t r1, void *scratch)
{
    const int64_t M = a->M;
    int64_t ld = a->w->in;
    const uint16_t *W = (const uint16_t *)a->w->dense + r0 * ld;   /* row r0 */
    if (a->w->fmt == TCQ_WF_F16) {   /* the item's rows as bf16, read by every tile below */
        tcq_d16_f16_to_bf16_avx512x(a->w->dense, a->w->in, r0, r1, scratch, a->ldxb);
        W = scratch;
        ld = a->ldxb;
    }
    for (int64_t m0 = 0; m0 < M; m0 += 6) {
        const int mr = (int)TCQ_MIN(6, M - m0);
        for (int64_t n0 = r0; n0 < r1; n0 += 4) {
            const int nv = (int)TCQ_MIN(4, r1 - n0);
            const uint16_t *w[4];
            for (int n = 0; n < 4; n++) w[n] = W + (n0 - r0 + TCQ_MIN(n, nv - 1)) * ld;
            switch (mr) {
            case 1: dp_tile(1, a, m0, w, nv, n0); break;
            case 2: dp_tile(2, a, m0, w, nv, n0); break;
            case 3: dp_tile(3, a, m0, w, nv, n0); break;
            case 4: dp_tile(4, a, m0, w, nv, n0); break;
            case 5: dp_tile(5, a, m0, w, nv, n0); break;
            default: dp_tile(6, a, m0, w, nv, n0); break;
            }
        }
    }
}

void tcq_d16_round_bf16_avx512x(const float *x, int64_t K, int64_t m0, int64_t m1, uint16_t *xb, int64_t ldxb)
{
    for (int64_t m = m0; m < m1; m++) {
        const float *xm = x + m * K;
        uint16_t *o = xb + m * ldxb;
        for (int64_t k = 0; k < ldxb; k += 32) {
            const int64_t n = TCQ_MAX(0, TCQ_MIN(32, K - k));
            const __mmask16 lo = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
            const __mmask16 hi = n >= 32 ? (__mmask16)0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
            const __m512 a = _mm512_maskz_loadu_ps(lo, xm + k), b = _mm512_maskz_loadu_ps(hi, xm + k + 16);
            _mm512_storeu_si512(o + k, (__m512i)_mm512_cvtne2ps_pbh(b, a));
        }
    }
}

kd16_gemm_fn tcq_d16_gemm_dp_avx512x(void) { return gemm_dp; }
