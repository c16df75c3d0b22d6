/* The AVX-512 dense f16 / bf16 GEMM regime (kd16_isa.gemm, dense16_avx512.c).
 *
 * Outer products, as BLAS does it: 64 outputs' weights for KS values of k are widened to f32 and
 * transposed once into an L1 panel [KS][64], and a tile of up to 6 activation rows x 64 outputs
 * (24 accumulators) runs each k as 4 panel loads, 6 activation broadcasts and 24 vfmadd231ps.
 * The accumulators start from y after the first panel: each output is one sequential fmaf sum
 * over k from 0, the scalar reference's very sum.  vdpbf16ps on a bf16-pair panel ran 1.5x the
 * time of this (Zen 5, docs/PERFORMANCE.md, "CPU, dense bf16 / f16"). */
#ifndef TCQ_DENSE16_GEMM_AVX512_H
#define TCQ_DENSE16_GEMM_AVX512_H

#include "dense16_x86.h"

#define D16G_KS 128   /* k per panel: 128 x 64 floats = 32 KB, in L1 beside the tile's lines */
#define D16G_MC 256   /* activation rows per panel (the prefill chunk): the panel's cost spread */

/* 16 x 16 dwords: r[i] row i in, r[j] column j out */
AI void d16_transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* u[4g + c], 128-bit lane l: rows 4g..4g+3 of column 4l + c */
    for (int c = 0; c < 4; c++) {
        const __m512i a0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), a1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
        const __m512i b0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88), b1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
        /* a0: lanes (g0 l0, g0 l2, g1 l0, g1 l2), a1: (g0 l1, g0 l3, g1 l1, g1 l3); b the same for g2, g3 */
        r[c] = _mm512_shuffle_i32x4(a0, b0, 0x88);        /* l0: columns c */
        r[8 + c] = _mm512_shuffle_i32x4(a0, b0, 0xdd);    /* l2: columns 8 + c */
        r[4 + c] = _mm512_shuffle_i32x4(a1, b1, 0x88);    /* l1 */
        r[12 + c] = _mm512_shuffle_i32x4(a1, b1, 0xdd);   /* l3 */
    }
}

/* Panel of outputs [n0, n0 + nv) (nv <= 64; missing rows zero) over k in [s0, s0 + ns), widened
 * exactly (f16: vcvtph2ps; bf16: the top half of an f32) */
AI void d16_pack(const int BF, const tcq_weight *w, int64_t n0, int nv, int64_t s0, int64_t ns, uint32_t *panel)
{
    const int64_t K = w->in;
    const uint16_t *W = w->dense;
    for (int64_t sb = 0; sb < ns; sb += 16) {
        const int64_t k = s0 + sb, kn = TCQ_MIN(16, K - k);
        const __mmask16 km = kn >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << kn) - 1);
        for (int g = 0; g < 4; g++) {
            __m512i r[16];
            for (int i = 0; i < 16; i++) {
                const int n = 16 * g + i;
                const __m256i h = n < nv ? _mm256_maskz_loadu_epi16(km, W + (n0 + n) * K + k) : _mm256_setzero_si256();
                r[i] = BF ? _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16) : _mm512_castps_si512(_mm512_cvtph_ps(h));
            }
            d16_transpose16(r);
            for (int j = 0; j < 16 && sb + j < ns; j++) _mm512_store_si512(panel + (sb + j) * 64 + 16 * g, r[j]);
        }
    }
}

typedef void (*d16g_tile_fn)(const kd16_args *a, int64_t m0, int mr, int64_t n0, int nv, int64_t s0, int64_t ns,
                             const uint32_t *panel, int first);

/* the masks of a tile's 4 vectors for nv valid outputs */
AI void d16g_masks(int nv, __mmask16 vm[4])
{
    for (int j = 0; j < 4; j++) {
        const int v = nv - 16 * j;
        vm[j] = v >= 16 ? (__mmask16)0xffff : v <= 0 ? (__mmask16)0 : (__mmask16)((1u << v) - 1);
    }
}

/* outputs [r0, r1) of every row: panels of 64 outputs x D16G_KS steps, each met by all tiles */
AI void d16g_rows(const int BF, const kd16_args *a, int64_t r0, int64_t r1, uint32_t *panel, d16g_tile_fn tile)
{
    const int64_t S = a->w->in, M = a->M;
    for (int64_t n0 = r0; n0 < r1; n0 += 64) {
        const int nv = (int)TCQ_MIN(64, r1 - n0);
        for (int64_t c0 = 0; c0 < M; c0 += D16G_MC) {
            const int64_t c1 = TCQ_MIN(M, c0 + D16G_MC);
            for (int64_t s0 = 0; s0 < S; s0 += D16G_KS) {
                const int64_t ns = TCQ_MIN(D16G_KS, S - s0);
                d16_pack(BF, a->w, n0, nv, s0, ns, panel);
                for (int64_t m0 = c0; m0 < c1; m0 += 6)
                    tile(a, m0, (int)TCQ_MIN(6, c1 - m0), n0, nv, s0, ns, panel, s0 == 0);
            }
        }
    }
}

#endif
