/* AVX-512 forward pass (the two in-place phases of viterbi.h).  Phase 1, per 16 groups:
 * 2^k - 1 vertical vminps over the predecessor vectors D[g + j 2^(L-k)] and one store.
 * Phase 2, per 16 states: d = x - v (vsubps with the table as memory operand), the minima
 * expanded to their 2^k successors (vpermps; for k = 4 an embedded broadcast), one fma. */
#include "viterbi_pass.h"

#include <immintrin.h>
#include <math.h>

#define VIT_INLINE static inline __attribute__((always_inline))

VIT_INLINE void fwd_init(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov)
{
    const uint32_t N = 1u << p.L, J = 1u << p.k;
    float *D = sc->D;
    if (start_ov >= 0) {
        const __m512 inf = _mm512_set1_ps(INFINITY);
        for (uint32_t s = 0; s < N; s += 16) _mm512_store_ps(D + s, inf);
        for (uint32_t i = 0; i < J; i++) {
            const uint32_t s = (uint32_t)start_ov * J + i;
            const float d = x[0] - sc->v[s];
            D[s] = fmaf(w ? w[0] * d : d, d, 0.0f);
        }
        return;
    }
    const __m512 xv = _mm512_set1_ps(x[0]), wv = _mm512_set1_ps(w ? w[0] : 1.0f), z = _mm512_setzero_ps();
    for (uint32_t s = 0; s < N; s += 16) {
        const __m512 d = _mm512_sub_ps(xv, _mm512_load_ps(sc->v + s));
        _mm512_store_ps(D + s, _mm512_fmadd_ps(w ? _mm512_mul_ps(wv, d) : d, d, z));
    }
}

VIT_INLINE const float *fwd(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov,
                            const int K, const int W)
{
    const uint32_t G = 1u << (p.L - K), J = 1u << K;
    const float *v = sc->v;
    float *D = sc->D;
    fwd_init(p, sc, x, W ? w : NULL, start_ov);
    __m512i idx[8];
    for (uint32_t q = 0; q < J && K < 4; q++)
        idx[q] = _mm512_srli_epi32(_mm512_add_epi32(_mm512_set1_epi32((int)(16 * q)),
                                                    _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)),
                                   K);
    for (int t = 1; t < p.T; t++) {
        float *M = sc->M + (size_t)t * G;
        const __m512 xv = _mm512_set1_ps(x[t]), wv = _mm512_set1_ps(W ? w[t] : 1.0f);
        for (uint32_t m = 0; m < G; m += 16) {
            __m512 best = _mm512_load_ps(D + m);
            for (uint32_t j = 1; j < J; j++) best = _mm512_min_ps(_mm512_load_ps(D + m + j * G), best);
            _mm512_store_ps(M + m, best);
        }
        if (K == 4) {
            for (uint32_t g = 0; g < G; g++) {
                const __m512 d = _mm512_sub_ps(xv, _mm512_load_ps(v + 16 * g));
                _mm512_store_ps(D + 16 * g, _mm512_fmadd_ps(W ? _mm512_mul_ps(wv, d) : d, d, _mm512_set1_ps(M[g])));
            }
        } else {
            for (uint32_t m = 0; m < G; m += 16) {
                const __m512 mv = _mm512_load_ps(M + m);
                for (uint32_t q = 0; q < J; q++) {
                    const uint32_t s = m * J + 16 * q;
                    const __m512 d = _mm512_sub_ps(xv, _mm512_load_ps(v + s));
                    _mm512_store_ps(D + s, _mm512_fmadd_ps(W ? _mm512_mul_ps(wv, d) : d, d,
                                                           _mm512_permutexvar_ps(idx[q], mv)));
                }
            }
        }
    }
    return D;
}

const float *vit_fwd_avx512(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov)
{
    switch (p.k * 2 + (w != NULL)) {
    case 2: return fwd(p, sc, x, w, start_ov, 1, 0);
    case 3: return fwd(p, sc, x, w, start_ov, 1, 1);
    case 4: return fwd(p, sc, x, w, start_ov, 2, 0);
    case 5: return fwd(p, sc, x, w, start_ov, 2, 1);
    case 6: return fwd(p, sc, x, w, start_ov, 3, 0);
    case 7: return fwd(p, sc, x, w, start_ov, 3, 1);
    case 8: return fwd(p, sc, x, w, start_ov, 4, 0);
    default: return fwd(p, sc, x, w, start_ov, 4, 1);
    }
}

VIT_DEFINE_PASS(vit_pass_avx512, vit_fwd_avx512)
