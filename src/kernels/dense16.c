/* Dense f16 / bf16 driver: walks an ISA table's tiles over outputs [r0, r1) of every activation
 * row (kernels.h, "dense f16 / bf16", states the contract; ref/dense_ref.c is its golden).
 *
 * One activation row (M <= mr) streams the weight rows: each group of 4 outputs runs its k
 * blocks back to back.  More rows run k-block-major inside chunks of mc rows, so the chunk's
 * activation block (mc x kc) stays in L2 while every group of 4 weight rows meets it.  (From the
 * table's gemm_from rows linear.c runs its GEMM instead.)  Both orders add each output's block sums in the same order: the same bits. */
#include "kernels.h"

#include <string.h>

void tcq_d16_rows(const kd16_isa *k, const kd16_args *a, int64_t r0, int64_t r1)
{
    const int64_t K = a->w->in, M = a->M;
    if (M <= k->mr) {
        for (int64_t n0 = r0; n0 < r1; n0 += 4) {
            const int nv = (int)TCQ_MIN(4, r1 - n0);
            for (int64_t k0 = 0; k0 < K; k0 += k->kc)
                k->tile(a, 0, (int)M, n0, nv, k0, TCQ_MIN(k->kc, K - k0), k0 == 0);
        }
        return;
    }
    for (int64_t c0 = 0; c0 < M; c0 += k->mc) {
        const int64_t c1 = TCQ_MIN(M, c0 + k->mc);
        for (int64_t k0 = 0; k0 < K; k0 += k->kc) {
            const int64_t kl = TCQ_MIN(k->kc, K - k0);
            for (int64_t n0 = r0; n0 < r1; n0 += 4) {
                const int nv = (int)TCQ_MIN(4, r1 - n0);
                for (int64_t m0 = c0; m0 < c1; m0 += k->mr)
                    k->tile(a, m0, (int)TCQ_MIN(k->mr, c1 - m0), n0, nv, k0, kl, k0 == 0);
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

void tcq_d16_prep(int prep, const float *x, int64_t in, int64_t lda, int64_t m0, int64_t m1, void *xa)
{
    for (int64_t m = m0; m < m1; m++) {
        const float *xm = x + m * in;
        if (prep == KD16_PREP_BF16) {
            uint16_t *o = (uint16_t *)xa + m * lda;
            for (int64_t i = 0; i < in; i++) o[i] = (uint16_t)bf16_rne(xm[i]);
        } else {
            float *o = (float *)xa + m * lda;
            for (int64_t i = 0; i < in; i++) {
                const uint32_t u = bf16_rne(xm[i]) << 16;
                memcpy(o + i, &u, 4);
            }
        }
    }
}
