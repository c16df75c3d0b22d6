/* AVX2 forward pass: the AVX-512 structure on 8 lanes.  For k >= 3 a group's minimum covers
 * whole output vectors, so the expansion is a broadcast load; for k = 1, 2 it is a vpermps. */
#include "viterbi_pass.h"

#include <immintrin.h>
#include <math.h>

#define VIT_INLINE static inline __attribute__((always_inline))

VIT_INLINE void fwd_init(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov)
{
    const uint32_t N = 1u << p.L, J = 1u << p.k;
    float *D = sc->D;
    if (start_ov >= 0) {
        const __m256 inf = _mm256_set1_ps(INFINITY);
        for (uint32_t s = 0; s < N; s += 8) _mm256_store_ps(D + s, inf);
        for (uint32_t i = 0; i < J; i++) {
            const uint32_t s = (uint32_t)start_ov * J + i;
            const float d = x[0] - sc->v[s];
            D[s] = fmaf(w ? w[0] * d : d, d, 0.0f);
        }
        return;
    }
    const __m256 xv = _mm256_set1_ps(x[0]), wv = _mm256_set1_ps(w ? w[0] : 1.0f), z = _mm256_setzero_ps();
    for (uint32_t s = 0; s < N; s += 8) {
        const __m256 d = _mm256_sub_ps(xv, _mm256_load_ps(sc->v + s));
        _mm256_store_ps(D + s, _mm256_fmadd_ps(w ? _mm256_mul_ps(wv, d) : d, d, z));
    }
}

VIT_INLINE const float *fwd(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov,
                            const int K, const int W)
{
    const uint32_t G = 1u << (p.L - K), J = 1u << K;
    const float *v = sc->v;
    float *D = sc->D;
    fwd_init(p, sc, x, W ? w : NULL, start_ov);
    __m256i idx[4];
    for (uint32_t q = 0; q < J && K < 3; q++)
        idx[q] = _mm256_srli_epi32(_mm256_add_epi32(_mm256_set1_epi32((int)(8 * q)),
                                                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), K);
    for (int t = 1; t < p.T; t++) {
        float *M = sc->M + (size_t)t * G;
        const __m256 xv = _mm256_set1_ps(x[t]), wv = _mm256_set1_ps(W ? w[t] : 1.0f);
        for (uint32_t m = 0; m < G; m += 8) {
            __m256 best = _mm256_load_ps(D + m);
            for (uint32_t j = 1; j < J; j++) best = _mm256_min_ps(_mm256_load_ps(D + m + j * G), best);
            _mm256_store_ps(M + m, best);
        }
        if (K >= 3) {
            const uint32_t V = J / 8;   /* output vectors per group */
            for (uint32_t g = 0; g < G; g++) {
                const __m256 mg = _mm256_broadcast_ss(M + g);
                for (uint32_t u = 0; u < V; u++) {
                    const uint32_t s = g * J + 8 * u;
                    const __m256 d = _mm256_sub_ps(xv, _mm256_load_ps(v + s));
                    _mm256_store_ps(D + s, _mm256_fmadd_ps(W ? _mm256_mul_ps(wv, d) : d, d, mg));
                }
            }
        } else {
            for (uint32_t m = 0; m < G; m += 8) {
                const __m256 mv = _mm256_load_ps(M + m);
                for (uint32_t q = 0; q < J; q++) {
                    const uint32_t s = m * J + 8 * q;
                    const __m256 d = _mm256_sub_ps(xv, _mm256_load_ps(v + s));
                    _mm256_store_ps(D + s, _mm256_fmadd_ps(W ? _mm256_mul_ps(wv, d) : d, d,
                                                           _mm256_permutevar8x32_ps(mv, idx[q])));
                }
            }
        }
    }
    return D;
}

const float *vit_fwd_avx2(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov)
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

VIT_DEFINE_PASS(vit_pass_avx2, vit_fwd_avx2)
