/* AVX-512 BF16 dense bf16 kernel: vdpbf16ps multiplies the stored bf16 weights by the
 * activations rounded to bf16 (kernels.h's contract), 32 k a step, with no widening at all:
 * a tile of up to 6 activation rows x 4 outputs holds 24 accumulators of 16 lanes. */
#include "dense16_x86.h"

AI __m512bh ld_bh(const uint16_t *p) { return (__m512bh)_mm512_loadu_si512(p); }
AI __m512bh ld_bh_tail(const uint16_t *p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

AI void tile_bf(const kd16_args *a, const int MR, int64_t m0, int64_t n0, int nv, int64_t k0, int64_t kl, int first)
{
    const int64_t K = a->w->in;
    const int64_t L = a->lda;
    const uint16_t *x = (const uint16_t *)a->xa + m0 * L;
    const uint16_t *W = a->w->dense, *w[4];
    for (int n = 0; n < 4; n++) w[n] = W + (n0 + TCQ_MIN(n, nv - 1)) * K;
    __m512 acc[6][4];
    for (int m = 0; m < MR; m++)
        for (int n = 0; n < 4; n++) acc[m][n] = _mm512_setzero_ps();
    const int64_t k1 = k0 + kl, k32 = k0 + (kl & ~(int64_t)31);
    int64_t k = k0;
    for (; k < k32; k += 32) {
        const __m512bh w0 = ld_bh(w[0] + k), w1 = ld_bh(w[1] + k), w2 = ld_bh(w[2] + k), w3 = ld_bh(w[3] + k);
        for (int m = 0; m < MR; m++) {
            const __m512bh xv = ld_bh(x + m * L + k);
            acc[m][0] = _mm512_dpbf16_ps(acc[m][0], xv, w0);
            acc[m][1] = _mm512_dpbf16_ps(acc[m][1], xv, w1);
            acc[m][2] = _mm512_dpbf16_ps(acc[m][2], xv, w2);
            acc[m][3] = _mm512_dpbf16_ps(acc[m][3], xv, w3);
        }
    }
    if (k < k1) {   /* zeros on both sides past the row: +0 terms */
        const __mmask32 t = (__mmask32)((1ull << (k1 - k)) - 1);
        const __m512bh w0 = ld_bh_tail(w[0] + k, t), w1 = ld_bh_tail(w[1] + k, t);
        const __m512bh w2 = ld_bh_tail(w[2] + k, t), w3 = ld_bh_tail(w[3] + k, t);
        for (int m = 0; m < MR; m++) {
            const __m512bh xv = ld_bh_tail(x + m * L + k, t);
            acc[m][0] = _mm512_dpbf16_ps(acc[m][0], xv, w0);
            acc[m][1] = _mm512_dpbf16_ps(acc[m][1], xv, w1);
            acc[m][2] = _mm512_dpbf16_ps(acc[m][2], xv, w2);
            acc[m][3] = _mm512_dpbf16_ps(acc[m][3], xv, w3);
        }
    }
    for (int m = 0; m < MR; m++)
        d16_store(a->y + (m0 + m) * a->ldy + n0, d16_hsum4_512(acc[m][0], acc[m][1], acc[m][2], acc[m][3]), nv, first);
}

static void tile(const kd16_args *a, int64_t m0, int mr, int64_t n0, int nv, int64_t k0, int64_t kl, int first)
{
    switch (mr) {
    case 1: tile_bf(a, 1, m0, n0, nv, k0, kl, first); break;
    case 2: tile_bf(a, 2, m0, n0, nv, k0, kl, first); break;
    case 3: tile_bf(a, 3, m0, n0, nv, k0, kl, first); break;
    case 4: tile_bf(a, 4, m0, n0, nv, k0, kl, first); break;
    case 5: tile_bf(a, 5, m0, n0, nv, k0, kl, first); break;
    default: tile_bf(a, 6, m0, n0, nv, k0, kl, first); break;
    }
}

/* kc 2048: 64 steps of 24 vdpbf16ps per block against one reduction; a 128-row chunk's activation
 * block is 512 KB, half of Zen 5's L2.  The GEMM regime (dense16_avx512.c's, on f32 panels) from
 * M = 12 as for f16: vdpbf16ps on a bf16-pair panel ran 1.5x its time at M = 128 */
static const kd16_isa bf16_512 = {.name = "avx512bf16", .mr = 6, .prep = KD16_PREP_BF16, .kc = 2048, .mc = 128,
                                  .tile = tile, .gemm = tcq_d16_gemm_avx512, .gemm_name = "gemm.avx512",
                                  .gemm_prep = KD16_PREP_F32R, .gemm_from = 12};

const kd16_isa *tcq_d16_avx512_bf16(void) { return &bf16_512; }
