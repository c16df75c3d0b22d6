/* AVX-512 forward pass.  The costs D_t are never stored: for each 16 groups g of step t+1, the
 * 2^k predecessor vectors D_t(g + j 2^(L-k)) are computed in registers from M_t (one vsubps
 * with the value table as memory operand, one lane expansion of M_t -- vpermps, or for k = 4 an
 * embedded broadcast -- and one fma each), and reduced by a tree of vminps into M_{t+1}, the
 * only store.  Only D_{T-1} is written out, for the end-state choice. */
#include "viterbi_pass.h"

#include <immintrin.h>
#include <math.h>

#define VIT_INLINE static inline __attribute__((always_inline))

/* The 16 costs D_t(s..s+15) (s a multiple of 16) built on the minima Mt of step t. */
VIT_INLINE __m512 cost16(const float *v, const float *Mt, uint32_t s, __m512 xv, __m512 wv, const __m512i *idx,
                         const int K, const int W)
{
    const __m512 d = _mm512_sub_ps(xv, _mm512_load_ps(v + s));
    const __m512 e = W ? _mm512_mul_ps(wv, d) : d;
    __m512 m;
    if (K == 4) {
        m = _mm512_set1_ps(Mt[s >> 4]);
    } else {
        const uint32_t gb = s >> K;   /* first group; its lane offset picks the expansion */
        m = _mm512_permutexvar_ps(idx[(gb & 15) >> (4 - K)], _mm512_load_ps(Mt + (gb & ~15u)));
    }
    return _mm512_fmadd_ps(e, d, m);
}

VIT_INLINE __m512 min_tree(__m512 *r, const int J)
{
    /* the minimum of costs >= 0 does not depend on the order (tcq.h) */
    for (int h = J / 2; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) r[j] = _mm512_min_ps(r[j + h], r[j]);
    return r[0];
}

/* LF: L as a compile-time constant (0: read p.L), so that for the artifacts' L = 12 every
 * offset j 2^(L-k) is an immediate and the address arithmetic leaves the loop. */
VIT_INLINE const float *fwd(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov,
                            const int K, const int W, const int LF)
{
    const int L = LF ? LF : p.L;
    const uint32_t N = 1u << L, G = 1u << (L - K);
    const int J = 1 << K;
    const float *v = sc->v;
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i idx[8];
    for (int q = 0; q < J && K < 4; q++)
        idx[q] = _mm512_srli_epi32(_mm512_add_epi32(_mm512_set1_epi32(16 * q), iota), K);
    /* step 0 into M_1 */
    {
        const __m512 xv = _mm512_set1_ps(x[0]), wv = _mm512_set1_ps(W ? w[0] : 1.0f), z = _mm512_setzero_ps(),
                     inf = _mm512_set1_ps(INFINITY);
        const __m512i ov = _mm512_set1_epi32(start_ov);
        float *M1 = sc->M + G;
        for (uint32_t m = 0; m < G; m += 16) {
            __m512 r[16];
            for (int j = 0; j < J; j++) {
                const uint32_t s = m + (uint32_t)j * G;
                const __m512 d = _mm512_sub_ps(xv, _mm512_load_ps(v + s));
                r[j] = _mm512_fmadd_ps(W ? _mm512_mul_ps(wv, d) : d, d, z);
                if (start_ov >= 0) {
                    const __mmask16 ok = _mm512_cmpeq_epi32_mask(
                        _mm512_srli_epi32(_mm512_add_epi32(_mm512_set1_epi32((int)s), iota), K), ov);
                    r[j] = _mm512_mask_blend_ps(ok, inf, r[j]);
                }
            }
            _mm512_store_ps(M1 + m, min_tree(r, J));
        }
    }
    for (int t = 1; t + 1 < p.T; t++) {
        const float *Mt = sc->M + (size_t)t * G;
        float *Mn = sc->M + (size_t)(t + 1) * G;
        const __m512 xv = _mm512_set1_ps(x[t]), wv = _mm512_set1_ps(W ? w[t] : 1.0f);
        if (K < 4 && L - 2 * K >= 4) {
            /* 2^k chunks of 16 groups at a time: chunk q's predecessors in row j expand lanes
             * 16q/2^k.. of one M_t vector per j, so each such vector is loaded once and the
             * permutation index is fixed per q */
            for (uint32_t m0 = 0; m0 < G; m0 += 16 * (uint32_t)J) {
                __m512 mv[8];
                for (int j = 0; j < J; j++) mv[j] = _mm512_load_ps(Mt + ((m0 + (uint32_t)j * G) >> K));
                for (int q = 0; q < J; q++) {
                    __m512 r[8];
                    for (int j = 0; j < J; j++) {
                        const uint32_t s = m0 + 16 * (uint32_t)q + (uint32_t)j * G;
                        const __m512 d = _mm512_sub_ps(xv, _mm512_load_ps(v + s));
                        r[j] = _mm512_fmadd_ps(W ? _mm512_mul_ps(wv, d) : d, d, _mm512_permutexvar_ps(idx[q], mv[j]));
                    }
                    _mm512_store_ps(Mn + m0 + 16 * q, min_tree(r, J));
                }
            }
            continue;
        }
        if (K == 4) {
            /* one group per predecessor vector: its minimum is an embedded broadcast */
            for (uint32_t m = 0; m < G; m += 16) {
                const float *mb = Mt + (m >> 4);
                __m512 r[16];
                for (int j = 0; j < J; j++) {
                    const __m512 d = _mm512_sub_ps(xv, _mm512_load_ps(v + m + (uint32_t)j * G));
                    r[j] = _mm512_fmadd_ps(W ? _mm512_mul_ps(wv, d) : d, d, _mm512_set1_ps(mb[(uint32_t)j * (G >> 4)]));
                }
                _mm512_store_ps(Mn + m, min_tree(r, J));
            }
            continue;
        }
        for (uint32_t m = 0; m < G; m += 16) {
            __m512 r[16];
            for (int j = 0; j < J; j++) r[j] = cost16(v, Mt, m + (uint32_t)j * G, xv, wv, idx, K, W);
            _mm512_store_ps(Mn + m, min_tree(r, J));
        }
    }
    /* the last step's costs, stored for the end-state choice */
    const int t = p.T - 1;
    const float *Mt = sc->M + (size_t)t * G;
    const __m512 xv = _mm512_set1_ps(x[t]), wv = _mm512_set1_ps(W ? w[t] : 1.0f);
    for (uint32_t s = 0; s < N; s += 16) _mm512_store_ps(sc->D + s, cost16(v, Mt, s, xv, wv, idx, K, W));
    return sc->D;
}

const float *vit_fwd_avx512(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov)
{
    if (p.L == 12) {
        switch (p.k * 2 + (w != NULL)) {
        case 4: return fwd(p, sc, x, w, start_ov, 2, 0, 12);
        case 5: return fwd(p, sc, x, w, start_ov, 2, 1, 12);
        case 6: return fwd(p, sc, x, w, start_ov, 3, 0, 12);
        case 7: return fwd(p, sc, x, w, start_ov, 3, 1, 12);
        case 8: return fwd(p, sc, x, w, start_ov, 4, 0, 12);
        case 9: return fwd(p, sc, x, w, start_ov, 4, 1, 12);
        default: break;
        }
    }
    switch (p.k * 2 + (w != NULL)) {
    case 2: return fwd(p, sc, x, w, start_ov, 1, 0, 0);
    case 3: return fwd(p, sc, x, w, start_ov, 1, 1, 0);
    case 4: return fwd(p, sc, x, w, start_ov, 2, 0, 0);
    case 5: return fwd(p, sc, x, w, start_ov, 2, 1, 0);
    case 6: return fwd(p, sc, x, w, start_ov, 3, 0, 0);
    case 7: return fwd(p, sc, x, w, start_ov, 3, 1, 0);
    case 8: return fwd(p, sc, x, w, start_ov, 4, 0, 0);
    default: return fwd(p, sc, x, w, start_ov, 4, 1, 0);
    }
}

VIT_DEFINE_PASS(vit_pass_avx512, vit_fwd_avx512)
