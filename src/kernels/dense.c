/* Dense (f32/f16/bf16) and MLX affine weights: dequantize rows to f32, multiply with OpenBLAS
 * sgemm (single-threaded per call; the pool splits the rows). */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

static float load_scalar(const void *p, tcq_dtype t, int64_t i)
{
    switch (t) {
    case TCQ_DTYPE_F32: return ((const float *)p)[i];
    case TCQ_DTYPE_F16: return tcq_f16_to_f32(((const uint16_t *)p)[i]);
    default: return tcq_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

void tcq_dense_decode_rows(const tcq_weight *w, int64_t r0, int64_t r1, float *out)
{
    const int64_t in = w->in;
    if (w->fmt == TCQ_WF_F32) {
        memcpy(out, (const float *)w->dense + r0 * in, (size_t)((r1 - r0) * in) * 4);
        return;
    }
    if (w->fmt == TCQ_WF_F16 || w->fmt == TCQ_WF_BF16) {
        const uint16_t *src = (const uint16_t *)w->dense + r0 * in;
        const int64_t n = (r1 - r0) * in;
        if (w->fmt == TCQ_WF_F16)
            for (int64_t i = 0; i < n; i++) out[i] = tcq_f16_to_f32(src[i]);
        else {
            /* bf16 is the top half of an f32: an inline shift the compiler vectorizes */
            uint32_t *o = (uint32_t *)out;
            for (int64_t i = 0; i < n; i++) o[i] = (uint32_t)src[i] << 16;
        }
        return;
    }
    /* affine: weight = fmaf(scale, q, bias) per group */
    const tcq_affine *a = &w->af;
    const int64_t wpr = in * a->bits / 32, gpr = in / a->group_size;
    const uint32_t qmask = (1u << a->bits) - 1u;
    for (int64_t r = r0; r < r1; r++) {
        const uint32_t *wr = a->w + r * wpr;
        float *o = out + (r - r0) * in;
        for (int64_t g = 0; g < gpr; g++) {
            const float s = load_scalar(a->scales, a->sdtype, r * gpr + g);
            const float b = load_scalar(a->biases, a->sdtype, r * gpr + g);
            for (int64_t j = g * a->group_size; j < (g + 1) * a->group_size; j++) {
                const int64_t bit = j * a->bits;
                const uint32_t q = (wr[bit >> 5] >> (bit & 31)) & qmask;
                o[j] = fmaf(s, (float)q, b);
            }
        }
    }
}

void tcq_dense_rows(const tcq_weight *w, const float *x, int64_t M, int64_t r0, int64_t r1, float *y,
                    int64_t ldy, float *scratch, int isa)
{
    const int64_t in = w->in, nr = r1 - r0;
    const float *W;
    if (w->fmt != TCQ_WF_F32 && isa == TCQ_ISA_AVX512 && M <= TCQ_MAX_BATCH) {
        /* a small batch is bound by widening the weights: do it in registers, once per 4 rows.
         * Up to a decode batch (TCQ_MAX_BATCH rows) this also keeps every row bit-identical to
         * the same row alone (the kernel's rows do not interact; sgemm's blocking would not):
         * tcq serve's replies do not depend on what else is in the batch. */
        for (int64_t m0 = 0; m0 < M; m0 += 4)
            tcq_dense_rows_avx512(w, x + m0 * in, M - m0 < 4 ? M - m0 : 4, r0, r1, y + m0 * ldy, ldy);
        return;
    }
    if (w->fmt == TCQ_WF_F32)
        W = (const float *)w->dense + r0 * in;
    else {
        if (isa == TCQ_ISA_AVX512) tcq_dense_decode_rows_avx512(w, r0, r1, scratch);
        else tcq_dense_decode_rows(w, r0, r1, scratch);
        W = scratch;
    }
    if (M == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)nr, (int)in, 1.0f, W, (int)in, x, 1, 0.0f, y + r0, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nr, (int)in, 1.0f, x, (int)in, W,
                    (int)in, 0.0f, y + r0, (int)ldy);
}
