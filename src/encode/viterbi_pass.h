/* The end-state choice and the traceback, included by every ISA's file so that the fmaf() in
 * the recomputed costs compiles to that ISA's instruction (the generic file calls libm). */
#ifndef TCQ_VITERBI_PASS_H
#define TCQ_VITERBI_PASS_H

#include "viterbi.h"

#include <math.h>

/* fma(e, d, m) with d = x_t - v(s), e = d or w_t d: the contract of tcq_kernels.h (Encoder). */
static inline __attribute__((always_inline)) float vit_cost(const vit_scratch *sc, const float *x, const float *w, int t, uint32_t s, float m)
{
    const float d = x[t] - sc->v[s];
    return fmaf(w ? w[t] * d : d, d, m);
}

/* D_t(s) as the forward pass had it, recomputed from the stored minima. */
static inline __attribute__((always_inline)) float vit_D(tcq_block_params p, const vit_scratch *sc, const float *x, const float *w,
                          int start_ov, int t, uint32_t s)
{
    if (t == 0)
        return (start_ov < 0 || (int)(s >> p.k) == start_ov) ? vit_cost(sc, x, w, 0, s, 0.0f) : INFINITY;
    const size_t G = (size_t)1 << (p.L - p.k);
    return vit_cost(sc, x, w, t, s, sc->M[(size_t)t * G + (s >> p.k)]);
}

#ifndef VIT_ARGMIN
/* The smallest s with D[s] equal to the minimum (N >= 256, a multiple of 16).  The minimum of
 * costs >= 0 does not depend on the order, so it is taken in 8 independent chains. */
static inline uint32_t vit_argmin_scalar(const float *D, uint32_t N)
{
    float m[8];
    for (int i = 0; i < 8; i++) m[i] = D[i];
    for (uint32_t s = 8; s < N; s += 8)
        for (int i = 0; i < 8; i++) m[i] = D[s + i] < m[i] ? D[s + i] : m[i];
    float best = m[0];
    for (int i = 1; i < 8; i++) best = m[i] < best ? m[i] : best;
    uint32_t s = 0;
    while (D[s] != best) s++;
    return s;
}
#define VIT_ARGMIN vit_argmin_scalar
#endif

/* After the forward pass left D_{T-1} in D: choose the end state (smallest s among equal
 * minima, restricted to (s & (G-1)) == end_ov when end_ov >= 0) and trace back into states. */
static inline void vit_pass_tail(tcq_block_params p, const vit_scratch *sc, const float *D, const float *x,
                                 const float *w, int start_ov, int end_ov, uint32_t *states, int t_stop)
{
    const uint32_t N = 1u << p.L, G = 1u << (p.L - p.k), J = 1u << p.k;
    uint32_t best_s;
    if (end_ov >= 0) {
        /* states with low bits end_ov: end_ov + i G */
        best_s = (uint32_t)end_ov;
        float best = D[best_s];
        for (uint32_t i = 1; i < J; i++) {
            const uint32_t s = (uint32_t)end_ov + i * G;
            if (D[s] < best) {
                best = D[s];
                best_s = s;
            }
        }
    } else {
        best_s = VIT_ARGMIN(D, N);
    }
    states[p.T - 1] = best_s;
    for (int t = p.T - 1; t > t_stop; t--) {
        const uint32_t g = states[t] >> p.k;
        float best = vit_D(p, sc, x, w, start_ov, t - 1, g);
        uint32_t bj = 0;
        for (uint32_t j = 1; j < J; j++) {
            const float v = vit_D(p, sc, x, w, start_ov, t - 1, g + j * G);
            if (v < best) {
                best = v;
                bj = j;
            }
        }
        states[t - 1] = g + bj * G;
    }
}

/* One pass with a given forward recursion. */
#define VIT_DEFINE_PASS(name, fwd)                                                                 \
    void name(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov,   \
              int end_ov, uint32_t *states, int t_stop)                                            \
    {                                                                                              \
        vit_pass_tail(p, sc, fwd(p, sc, x, w, start_ov), x, w, start_ov, end_ov, states, t_stop);  \
    }

#endif
