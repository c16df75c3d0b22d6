/* The forward pass for any x86-64 (no ISA flags): the fast encoder's structure (two in-place
 * phases per step, stored group minima, no backpointers) in plain loops.  fmaf() is the libm
 * call here, which rounds exactly like the fused instructions of the vector paths. */
#include "viterbi_pass.h"

#include <math.h>

const float *vit_fwd_scalar(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov)
{
    const uint32_t N = 1u << p.L, G = 1u << (p.L - p.k), J = 1u << p.k;
    const float *v = sc->v;
    float *D = sc->D;
    for (uint32_t s = 0; s < N; s++) {
        const float d = x[0] - v[s];
        D[s] = (start_ov < 0 || (int)(s >> p.k) == start_ov) ? fmaf(w ? w[0] * d : d, d, 0.0f) : INFINITY;
    }
    for (int t = 1; t < p.T; t++) {
        float *M = sc->M + (size_t)t * G;
        for (uint32_t g = 0; g < G; g++) {
            float best = D[g];
            for (uint32_t j = 1; j < J; j++) {
                const float c = D[g + j * G];
                best = c < best ? c : best;
            }
            M[g] = best;
        }
        const float xt = x[t];
        if (w) {
            const float wt = w[t];
            for (uint32_t s = 0; s < N; s++) {
                const float d = xt - v[s];
                D[s] = fmaf(wt * d, d, M[s >> p.k]);
            }
        } else {
            for (uint32_t s = 0; s < N; s++) {
                const float d = xt - v[s];
                D[s] = fmaf(d, d, M[s >> p.k]);
            }
        }
    }
    return D;
}

VIT_DEFINE_PASS(vit_pass_scalar, vit_fwd_scalar)
