/* Dense f16 / bf16 driver: walks an ISA table's tiles over outputs [r0, r1) of every activation
 * row (kernels.h, "dense f16 / bf16", states the contract; ref/dense_ref.c is its golden).
 *
 * One activation row (M <= mr) streams the weight rows: each group of 4 outputs runs its k
 * blocks back to back.  More rows run k-block-major inside chunks of mc rows, so the chunk's
 * activation block (mc x kc) stays in L2 while every group of 4 weight rows meets it; from
 * panel_from rows on, the group's k block is widened to f32 once and reused by every tile.
 * Both orders add each output's block sums in the same order: the same bits. */
#include "kernels.h"

#include <string.h>

void tcq_d16_rows(const kd16_isa *k, const kd16_args *a, int64_t r0, int64_t r1, float *panel)
{
    const int64_t K = a->w->in, M = a->M;
    if (M <= k->mr) {
        for (int64_t n0 = r0; n0 < r1; n0 += 4) {
            const int nv = (int)TCQ_MIN(4, r1 - n0);
            for (int64_t k0 = 0; k0 < K; k0 += k->kc)
                k->tile(a, 0, (int)M, n0, nv, k0, TCQ_MIN(k->kc, K - k0), NULL, k0 == 0);
        }
        return;
    }
    const int use_panel = k->panel && M >= k->panel_from;
    for (int64_t c0 = 0; c0 < M; c0 += k->mc) {
        const int64_t c1 = TCQ_MIN(M, c0 + k->mc);
        for (int64_t k0 = 0; k0 < K; k0 += k->kc) {
            const int64_t kl = TCQ_MIN(k->kc, K - k0);
            for (int64_t n0 = r0; n0 < r1; n0 += 4) {
                const int nv = (int)TCQ_MIN(4, r1 - n0);
                if (use_panel) k->panel(a->w, n0, nv, k0, kl, k->kc, panel);
                for (int64_t m0 = c0; m0 < c1; m0 += k->mr)
                    k->tile(a, m0, (int)TCQ_MIN(k->mr, c1 - m0), n0, nv, k0, kl, use_panel ? panel : NULL, k0 == 0);
            }
        }
    }
}

/* tcq_f32_to_bf16 inline: a call per element cost more than the prefill's tiles saved */
static inline uint32_t bf16_rne(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

void tcq_d16_prep(int prep, const float *x, int64_t in, int64_t m0, int64_t m1, void *xa)
{
    if (prep == KD16_PREP_BF16)
        for (int64_t i = m0 * in; i < m1 * in; i++) ((uint16_t *)xa)[i] = (uint16_t)bf16_rne(x[i]);
    else
        for (int64_t i = m0 * in; i < m1 * in; i++) {
            const uint32_t u = bf16_rne(x[i]) << 16;
            memcpy((float *)xa + i, &u, 4);
        }
}
