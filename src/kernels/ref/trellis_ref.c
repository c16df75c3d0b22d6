/* Scalar reference of every trellis kernel: the golden the SIMD kernels are tested against.
 * Straight loops over the FORMAT.md decode; no cleverness beyond decoding each block once. */
#include "../kernels.h"

#include <math.h>
#include <string.h>

/* Byte sum of x = s*MUL + ADD: the unsigned operand of the fast path's dot product. */
static inline int bytesum(uint32_t s)
{
    const uint32_t x = s * TCQ_RMAD_MUL + TCQ_RMAD_ADD;
    return (int)((x & 255u) + ((x >> 8) & 255u) + ((x >> 16) & 255u) + (x >> 24));
}

void tcq_ref_decode(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, float *out)
{
    const float scale = tcq_f16_to_f32(w->scales[r]);
    for (int64_t b = 0; b < nb; b++)
        tcq_block_decode_f32(w->p, tcq_trellis_block(w, r, b0 + b), scale, out + b * w->p.T);
}

/* exact, axis 1: y[m, r] = sum_c (value * scale) * x[m, c], f32, c ascending */
void tcq_ref_reduce_exact(const kr_args *a)
{
    const tcq_trellis *w = a->w;
    const int T = w->p.T;
    const int64_t nb = w->cols / T, C = w->cols;
    float wb[256];
    float *acc = a->scratch;   /* [M] */
    for (int64_t r = a->r0; r < a->r1; r++) {
        for (int64_t m = 0; m < a->M; m++) acc[m] = 0;
        for (int64_t b = 0; b < nb; b++) {
            tcq_ref_decode(w, r, b, 1, wb);
            for (int64_t m = 0; m < a->M; m++) {
                const float *x = a->x + m * C + b * T;
                float s = acc[m];
                for (int t = 0; t < T; t++) s = fmaf(wb[t], x[t], s);
                acc[m] = s;
            }
        }
        for (int64_t m = 0; m < a->M; m++) a->y[m * a->ldy + r] = acc[m];
    }
}

/* fast, axis 1: per activation block, the integer sum of bytesum * q plus the block's -510 sum(q)
 * correction is exact; blocks are combined in f32 with their step d; scale / 147.8 once. */
void tcq_ref_reduce_fast(const kr_args *a)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const int T = w->p.T;
    for (int64_t r = a->r0; r < a->r1; r++) {
        const float f = tcq_f16_to_f32(w->scales[r]) * TCQ_RMAD_RINV;
        for (int64_t m = 0; m < a->M; m++) {
            const int8_t *q = qa->q + m * qa->npad;
            float acc = 0;
            for (int64_t blk = 0; blk < qa->nblk; blk++) {
                int32_t isum = qa->corr[m * qa->nblk + blk];
                for (int64_t c = blk * TCQ_FAST_QB; c < (blk + 1) * TCQ_FAST_QB; c++) {
                    const uint32_t *words = tcq_trellis_block(w, r, c / T);
                    isum += bytesum(tcq_block_state(w->p, words, (int)(c % T))) * q[c];
                }
                acc = fmaf((float)isum, qa->d[m * qa->nblk + blk], acc);
            }
            a->y[m * a->ldy + r] = acc * f;
        }
    }
}

/* exact, axis 0: acc[m, c] = sum_i (value(s_ic) * scale_i) * x[m, i], i ascending */
void tcq_ref_scatter_exact(const ks_args *a)
{
    const tcq_trellis *w = a->w;
    const int T = w->p.T;
    const int64_t in = w->rows;
    float wb[256];
    for (int64_t j = 0; j < a->M * T; j++) a->acc[j] = 0;
    for (int64_t i = a->i0; i < a->i1; i++) {
        tcq_ref_decode(w, i, a->b, 1, wb);
        for (int64_t m = 0; m < a->M; m++) {
            const float xv = a->x[m * in + i];
            float *acc = a->acc + m * T;
            for (int t = 0; t < T; t++) acc[t] = fmaf(wb[t], xv, acc[t]);
        }
    }
}

/* fast, axis 0: the activation of stored row i is q_i ~ x_i * scale_i / d; per output column the
 * integer sum over an activation block is exact, blocks combine in f32, 1/147.8 once. */
void tcq_ref_scatter_fast(const ks_args *a)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const int T = w->p.T;
    int32_t isum[256];
    for (int64_t j = 0; j < a->M * T; j++) a->acc[j] = 0;
    for (int64_t m = 0; m < a->M; m++) {
        const int8_t *q = qa->q + m * qa->npad;
        float *acc = a->acc + m * T;
        for (int64_t i0 = a->i0; i0 < a->i1; i0 += TCQ_FAST_QB) {
            const int64_t blk = i0 / TCQ_FAST_QB, i1 = TCQ_MIN(a->i1, i0 + TCQ_FAST_QB);
            for (int t = 0; t < T; t++) isum[t] = qa->corr[m * qa->nblk + blk];
            for (int64_t i = i0; i < i1; i++) {
                const uint32_t *words = tcq_trellis_block(w, i, a->b);
                for (int t = 0; t < T; t++) isum[t] += bytesum(tcq_block_state(w->p, words, t)) * q[i];
            }
            const float d = qa->d[m * qa->nblk + blk];
            for (int t = 0; t < T; t++) acc[t] = fmaf((float)isum[t], d, acc[t]);
        }
        for (int t = 0; t < T; t++) acc[t] *= TCQ_RMAD_RINV;
    }
}

const tr_table tcq_tr_ref = {
    .isa = "scalar",
    .reduce = {{tcq_ref_reduce_exact, tcq_ref_reduce_exact, tcq_ref_reduce_exact},
               {tcq_ref_reduce_fast, tcq_ref_reduce_fast, tcq_ref_reduce_fast}},
    .scatter = {{tcq_ref_scatter_exact, tcq_ref_scatter_exact, tcq_ref_scatter_exact},
                {tcq_ref_scatter_fast, tcq_ref_scatter_fast, tcq_ref_scatter_fast}},
    .decode = tcq_ref_decode,
    /* decode + sgemm took 0.01-0.25x the scalar tile's time from M = 5 (2048 x 2048, k = 2,
     * docs/PERFORMANCE.md "The fast tiles at every M") */
    .gemm_from = {{5, 5}, {5, 5}},
};
