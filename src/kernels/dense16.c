/* Dense f16 / bf16 driver: walks an ISA table's tiles over outputs [r0, r1) of every activation
 * row (kernels.h, "dense f16 / bf16", states the contract; ref/dense_ref.c is its golden).
 *
 * Up to the table's mg rows: group by group of 4 outputs, each group's k blocks back to back,
 * every row of x in each block (balanced tiles of <= mr rows), so the weights are read once, in
 * order, from memory.  The first tile of a block prefetches the next group of the range (its 4
 * rows are contiguous: one linear stream a thread, a group ahead; 4 rows read side by side
 * without it took 1.7-2.0x the time of a plain read of the same bytes at M = 2 and 4, their FMAs
 * not hidden under the reads: docs/PERFORMANCE.md, "CPU, dense bf16 / f16", decisions).  More rows run k-block-major inside chunks of mc rows, so the
 * chunk's activation block (mc x kc) stays in L2 while every group of 4 weight rows meets it.
 * (From the table's gemm_from rows linear.c runs its GEMM instead.)  Both orders add each
 * output's block sums in the same order: the same bits. */
#include "kernels.h"

void tcq_d16_rows(const kd16_isa *k, const kd16_args *a, int64_t r0, int64_t r1)
{
    const int64_t K = a->w->in, M = a->M;
    if (M <= k->mg) {
        const int64_t nt = (M + k->mr - 1) / k->mr;
        const uint16_t *W = a->w->dense;
        for (int64_t n0 = r0; n0 < r1; n0 += 4) {
            const int nv = (int)TCQ_MIN(4, r1 - n0);
            const void *pf = n0 + 4 < r1 ? W + (n0 + 4) * K : NULL;
            for (int64_t k0 = 0; k0 < K; k0 += k->kc)
                for (int64_t t = 0, m0 = 0; t < nt; t++) {
                    const int mr = (int)((M - m0) / (nt - t));
                    k->tile(a, m0, mr, n0, nv, k0, TCQ_MIN(k->kc, K - k0), k0 == 0, t ? NULL : pf);
                    m0 += mr;
                }
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
                    k->tile(a, m0, (int)TCQ_MIN(k->mr, c1 - m0), n0, nv, k0, kl, k0 == 0, NULL);
            }
        }
    }
}
