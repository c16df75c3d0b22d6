/* AVX2 forward pass: the AVX-512 structure (viterbi_avx512.c) on 8 lanes.  The costs D_t live
 * only in registers; for each 8 groups of step t+1 the 2^k predecessor vectors are built from
 * M_t (vpermps for k = 1, 2; a broadcast load for k >= 3, where one group covers whole
 * vectors) and reduced by vminps into M_{t+1}.  Only D_{T-1} is stored.  (The broadcast lane
 * order of the AVX-512 pass measured slower here for k = 1: with 256-bit vectors the shuffle
 * port is not one of the two FMA ports, so vpermps is nearly free.) */
#include "viterbi.h"

#include <immintrin.h>

/* The smallest s with D[s] equal to the minimum: a vector min, then the first equal lane. */
static inline uint32_t vit_argmin_avx2(const float *D, uint32_t N)
{
    __m256 m0 = _mm256_load_ps(D), m1 = _mm256_load_ps(D + 8);
    for (uint32_t s = 16; s < N; s += 16) {
        m0 = _mm256_min_ps(_mm256_load_ps(D + s), m0);
        m1 = _mm256_min_ps(_mm256_load_ps(D + s + 8), m1);
    }
    __m256 m = _mm256_min_ps(m0, m1);
    m = _mm256_min_ps(m, _mm256_permute2f128_ps(m, m, 1));
    m = _mm256_min_ps(m, _mm256_permute_ps(m, 0x4e));
    m = _mm256_min_ps(m, _mm256_permute_ps(m, 0xb1));
    for (uint32_t s = 0;; s += 8) {
        const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_load_ps(D + s), m, _CMP_EQ_OQ));
        if (eq) return s + (uint32_t)__builtin_ctz((unsigned)eq);
    }
}
#define VIT_ARGMIN vit_argmin_avx2
#include "viterbi_pass.h"

#include <math.h>

#define VIT_INLINE static inline __attribute__((always_inline))

/* The 8 costs D_t(s..s+7) (s a multiple of 8) built on the minima Mt of step t. */
VIT_INLINE __m256 cost8(const float *v, const float *Mt, uint32_t s, __m256 xv, __m256 wv, const __m256i *idx,
                        const int K, const int W)
{
    const __m256 d = _mm256_sub_ps(xv, _mm256_load_ps(v + s));
    const __m256 e = W ? _mm256_mul_ps(wv, d) : d;
    __m256 m;
    if (K >= 3) {
        m = _mm256_broadcast_ss(Mt + (s >> K));
    } else {
        const uint32_t gb = s >> K;
        m = _mm256_permutevar8x32_ps(_mm256_load_ps(Mt + (gb & ~7u)), idx[(gb & 7) >> (3 - K)]);
    }
    return _mm256_fmadd_ps(e, d, m);
}

VIT_INLINE __m256 min_tree(__m256 *r, const int J)
{
    for (int h = J / 2; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) r[j] = _mm256_min_ps(r[j + h], r[j]);
    return r[0];
}

VIT_INLINE const float *fwd(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov,
                            const int K, const int W)
{
    const uint32_t N = 1u << p.L, G = 1u << (p.L - K);
    const int J = 1 << K;
    const float *v = sc->v;
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i idx[4];
    for (int q = 0; q < J && K < 3; q++) idx[q] = _mm256_srli_epi32(_mm256_add_epi32(_mm256_set1_epi32(8 * q), iota), K);
    {
        const __m256 xv = _mm256_set1_ps(x[0]), wv = _mm256_set1_ps(W ? w[0] : 1.0f), z = _mm256_setzero_ps(),
                     inf = _mm256_set1_ps(INFINITY);
        const __m256i ov = _mm256_set1_epi32(start_ov);
        float *M1 = sc->M + G;
        for (uint32_t m = 0; m < G; m += 8) {
            __m256 r[16];
            for (int j = 0; j < J; j++) {
                const uint32_t s = m + (uint32_t)j * G;
                const __m256 d = _mm256_sub_ps(xv, _mm256_load_ps(v + s));
                r[j] = _mm256_fmadd_ps(W ? _mm256_mul_ps(wv, d) : d, d, z);
                if (start_ov >= 0) {
                    const __m256i lane = _mm256_srli_epi32(_mm256_add_epi32(_mm256_set1_epi32((int)s), iota), K);
                    r[j] = _mm256_blendv_ps(inf, r[j], _mm256_castsi256_ps(_mm256_cmpeq_epi32(lane, ov)));
                }
            }
            _mm256_store_ps(M1 + m, min_tree(r, J));
        }
    }
    for (int t = 1; t + 1 < p.T; t++) {
        const float *Mt = sc->M + (size_t)t * G;
        float *Mn = sc->M + (size_t)(t + 1) * G;
        const __m256 xv = _mm256_set1_ps(x[t]), wv = _mm256_set1_ps(W ? w[t] : 1.0f);
        if (K < 3 && p.L - 2 * K >= 3) {
            for (uint32_t m0 = 0; m0 < G; m0 += 8 * (uint32_t)J) {
                __m256 mv[4];
                for (int j = 0; j < J; j++) mv[j] = _mm256_load_ps(Mt + ((m0 + (uint32_t)j * G) >> K));
                for (int q = 0; q < J; q++) {
                    __m256 r[4];
                    for (int j = 0; j < J; j++) {
                        const uint32_t s = m0 + 8 * (uint32_t)q + (uint32_t)j * G;
                        const __m256 d = _mm256_sub_ps(xv, _mm256_load_ps(v + s));
                        r[j] = _mm256_fmadd_ps(W ? _mm256_mul_ps(wv, d) : d, d, _mm256_permutevar8x32_ps(mv[j], idx[q]));
                    }
                    _mm256_store_ps(Mn + m0 + 8 * q, min_tree(r, J));
                }
            }
            continue;
        }
        if (K >= 3) {
            /* one group covers whole vectors: its minimum is a broadcast load; pointers with
             * size_t offsets so that j G folds into displacements */
            for (uint32_t m = 0; m < G; m += 8) {
                /* (m + j G) >> k = (m >> k) + j (G >> k): m is a multiple of 8, j G of 2^k */
                const float *vm = v + m, *mm = Mt + (m >> K);
                __m256 r[16];
                for (int j = 0; j < J; j++) {
                    const __m256 d = _mm256_sub_ps(xv, _mm256_load_ps(vm + (size_t)j * G));
                    r[j] = _mm256_fmadd_ps(W ? _mm256_mul_ps(wv, d) : d, d, _mm256_broadcast_ss(mm + (size_t)j * (G >> K)));
                }
                _mm256_store_ps(Mn + m, min_tree(r, J));
            }
            continue;
        }
        for (uint32_t m = 0; m < G; m += 8) {
            __m256 r[16];
            for (int j = 0; j < J; j++) r[j] = cost8(v, Mt, m + (uint32_t)j * G, xv, wv, idx, K, W);
            _mm256_store_ps(Mn + m, min_tree(r, J));
        }
    }
    const int t = p.T - 1;
    const float *Mt = sc->M + (size_t)t * G;
    const __m256 xv = _mm256_set1_ps(x[t]), wv = _mm256_set1_ps(W ? w[t] : 1.0f);
    for (uint32_t s = 0; s < N; s += 8) _mm256_store_ps(sc->D + s, cost8(v, Mt, s, xv, wv, idx, K, W));
    return sc->D;
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
