/* AVX-512 forward pass.  The costs D_t are never stored: for each 16 groups g of step t+1, the
 * 2^k predecessor vectors D_t(g + j 2^(L-k)) are computed in registers from M_t and reduced by
 * a tree of vminps into M_{t+1}, the only store.  Only D_{T-1} is written out.
 *
 * The expansion of M_t to the lanes of its successors costs no shuffle: a vector holds the 16
 * groups m + pi(l), pi(l) = 2^k (l mod C) + l div C with C = 16 / 2^k, i.e. C consecutive
 * predecessor groups each repeated 2^k times, which is exactly what a broadcast load of C
 * floats gives (vbroadcastf32x8 / f32x4 / vbroadcastsd / vbroadcastss for k = 1..4, all pure
 * loads).  The value table is stored in the same lane order (vp), and one vpermps per 16
 * groups puts M_{t+1} back in natural order before the store.  Per 16 states that is one
 * vsubps (table as memory operand), one fma, (2^k-1)/2^k vminps and 1/2^k vpermps: 3 uops. */
#include "viterbi.h"

#include <immintrin.h>

/* The smallest s with D[s] equal to the minimum: a vector min, then the first equal lane. */
static inline uint32_t vit_argmin_avx512(const float *D, uint32_t N)
{
    __m512 m0 = _mm512_load_ps(D), m1 = _mm512_load_ps(D + 16);
    for (uint32_t s = 32; s < N; s += 32) {
        m0 = _mm512_min_ps(_mm512_load_ps(D + s), m0);
        m1 = _mm512_min_ps(_mm512_load_ps(D + s + 16), m1);
    }
    const __m512 best = _mm512_set1_ps(_mm512_reduce_min_ps(_mm512_min_ps(m0, m1)));
    for (uint32_t s = 0;; s += 16) {
        const __mmask16 eq = _mm512_cmpeq_ps_mask(_mm512_load_ps(D + s), best);
        if (eq) return s + (uint32_t)__builtin_ctz(eq);
    }
}
#define VIT_ARGMIN vit_argmin_avx512
#include "viterbi_pass.h"

#include <math.h>
#include <string.h>

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
    /* the minimum of costs >= 0 does not depend on the order (tcq_kernels.h) */
    for (int h = J / 2; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) r[j] = _mm512_min_ps(r[j + h], r[j]);
    return r[0];
}

/* The lane order of a vector of 16 groups (see the top of the file). */
static inline uint32_t lane_pi(uint32_t l, int K) { return ((l % (16u >> K)) << K) + l / (16u >> K); }

/* vp[16 b + l] = v[16 b + pi(l)], built once per (table, L, k) in each scratch (the seams
 * search runs this pass on the reversed table too). */
static void vp_build(vit_scratch *sc, int L, int K)
{
    const int key = (L << 8) | (K << 4) | 1;
    if (sc->vp_key == key && sc->vp_src == sc->v) return;
    sc->vp_src = sc->v;
    for (uint32_t s = 0; s < (1u << L); s++) sc->vp[s] = sc->v[(s & ~15u) + lane_pi(s & 15u, K)];
    sc->vp_key = key;
}

/* C = 16 / 2^k consecutive minima starting at Mt + o, each repeated 2^k times. */
VIT_INLINE __m512 bcast(const float *Mt, size_t o, const int K)
{
    switch (K) {
    case 1: return _mm512_broadcast_f32x8(_mm256_load_ps(Mt + o));
    case 2: return _mm512_broadcast_f32x4(_mm_load_ps(Mt + o));
    case 3: {
        double pair;
        memcpy(&pair, Mt + o, sizeof pair);
        return _mm512_castpd_ps(_mm512_set1_pd(pair));
    }
    default: return _mm512_set1_ps(Mt[o]);
    }
}

/* LF: L as a compile-time constant (0: read p.L), so that for the artifacts' L = 12 every
 * offset j 2^(L-k) is an immediate and the address arithmetic leaves the loop. */
VIT_INLINE const float *fwd(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov,
                            const int K, const int W, const int LF)
{
    const int L = LF ? LF : p.L;
    const uint32_t N = 1u << L, G = 1u << (L - K);
    const int J = 1 << K;
    vp_build(sc, L, K);
    const float *vp = sc->vp;
    uint32_t pi[16], pinv[16];
    for (uint32_t l = 0; l < 16; l++) {
        pi[l] = lane_pi(l, K);
        pinv[pi[l]] = l;
    }
    const __m512i piv = _mm512_loadu_si512(pi), pinvv = _mm512_loadu_si512(pinv);
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
                const __m512 d = _mm512_sub_ps(xv, _mm512_load_ps(vp + s));
                r[j] = _mm512_fmadd_ps(W ? _mm512_mul_ps(wv, d) : d, d, z);
                if (start_ov >= 0) {
                    const __mmask16 ok = _mm512_cmpeq_epi32_mask(
                        _mm512_srli_epi32(_mm512_add_epi32(_mm512_set1_epi32((int)s), piv), K), ov);
                    r[j] = _mm512_mask_blend_ps(ok, inf, r[j]);
                }
            }
            const __m512 mn = min_tree(r, J);
            _mm512_store_ps(M1 + m, K == 4 ? mn : _mm512_permutexvar_ps(pinvv, mn));
        }
    }
    for (int t = 1; t + 1 < p.T; t++) {
        const float *Mt = sc->M + (size_t)t * G;
        float *Mn = sc->M + (size_t)(t + 1) * G;
        const __m512 xv = _mm512_set1_ps(x[t]), wv = _mm512_set1_ps(W ? w[t] : 1.0f);
        for (uint32_t m = 0; m < G; m += 16) {
            /* pointers with size_t offsets: j G and j G / 2^k fold into displacements */
            const float *vm = vp + m, *mm = Mt + (m >> K);
            __m512 r[16];
            for (int j = 0; j < J; j++) {
                const __m512 d = _mm512_sub_ps(xv, _mm512_load_ps(vm + (size_t)j * G));
                r[j] = _mm512_fmadd_ps(W ? _mm512_mul_ps(wv, d) : d, d, bcast(mm, (uint32_t)j * (G >> K), K));
            }
            const __m512 mn = min_tree(r, J);
            _mm512_store_ps(Mn + m, K == 4 ? mn : _mm512_permutexvar_ps(pinvv, mn));
        }
    }
    /* the last step's costs in natural order, for the end-state choice */
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i idx[8];
    for (int q = 0; q < J && K < 4; q++)
        idx[q] = _mm512_srli_epi32(_mm512_add_epi32(_mm512_set1_epi32(16 * q), iota), K);
    const int t = p.T - 1;
    const float *Mt = sc->M + (size_t)t * G;
    const __m512 xv = _mm512_set1_ps(x[t]), wv = _mm512_set1_ps(W ? w[t] : 1.0f);
    for (uint32_t s = 0; s < N; s += 16) _mm512_store_ps(sc->D + s, cost16(sc->v, Mt, s, xv, wv, idx, K, W));
    return sc->D;
}

const float *vit_fwd_avx512(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov)
{
    if (p.L == 12) {
        switch (p.k * 2 + (w != NULL)) {
        case 2: return fwd(p, sc, x, w, start_ov, 1, 0, 12);
        case 3: return fwd(p, sc, x, w, start_ov, 1, 1, 12);
        case 4: return fwd(p, sc, x, w, start_ov, 2, 0, 12);
        case 5: return fwd(p, sc, x, w, start_ov, 2, 1, 12);
        case 6: return fwd(p, sc, x, w, start_ov, 3, 0, 12);
        case 7: return fwd(p, sc, x, w, start_ov, 3, 1, 12);
        case 8: return fwd(p, sc, x, w, start_ov, 4, 0, 12);
        default: return fwd(p, sc, x, w, start_ov, 4, 1, 12);
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
