/* Scalar reference of the dense f16 / bf16 kernels (kernels.h states the contract): one
 * sequential f32 sum per output, the golden the SIMD tables are tested against. */
#include "../kernels.h"

#include <math.h>

void tcq_d16_ref(const tcq_weight *w, const float *x, int64_t M, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    const int64_t K = w->in;
    const uint16_t *W = w->dense;
    for (int64_t m = 0; m < M; m++)
        for (int64_t r = r0; r < r1; r++) {
            const uint16_t *wr = W + r * K;
            const float *xm = x + m * K;
            float acc = 0.0f;
            if (w->fmt == TCQ_WF_BF16)
                for (int64_t k = 0; k < K; k++) acc = fmaf(tcq_bf16_to_f32(wr[k]), xm[k], acc);
            else
                for (int64_t k = 0; k < K; k++) acc = fmaf(tcq_f16_to_f32(wr[k]), xm[k], acc);
            y[m * ldy + r] = acc;
        }
}

void tcq_d16_round_bf16_ref(const float *x, int64_t K, int64_t m0, int64_t m1, uint16_t *xb, int64_t ldxb)
{
    for (int64_t m = m0; m < m1; m++)
        for (int64_t k = 0; k < ldxb; k++) xb[m * ldxb + k] = k < K ? tcq_f32_to_bf16(x[m * K + k]) : 0;
}

/* bf16 with the flush vdpbf16ps applies to its inputs (denormals as zero, sign kept) */
static float bf16_daz(uint16_t h)
{
    return (h & 0x7f80) == 0 ? ((h & 0x8000) ? -0.0f : 0.0f) : tcq_bf16_to_f32(h);
}

/* f32 result flushed to zero when denormal (vdpbf16ps's FTZ) */
static float ftz(float v) { return fabsf(v) < FLT_MIN ? copysignf(0.0f, v) : v; }

/* a weight as the bf16-activation GEMM multiplies it: bf16 as stored, f16 rounded to bf16 (RNE) */
static uint16_t wbf(tcq_wformat fmt, uint16_t h) { return fmt == TCQ_WF_F16 ? tcq_f32_to_bf16(tcq_f16_to_f32(h)) : h; }

/* The bf16-activation GEMM's order (kernels.h): 16 lanes over pairs of k, odd then even */
void tcq_d16_ref_dp(const kd16_args *a, int64_t r0, int64_t r1)
{
    const int64_t K = a->w->in;
    const uint16_t *W = a->w->dense;
    for (int64_t m = 0; m < a->M; m++)
        for (int64_t r = r0; r < r1; r++) {
            const uint16_t *wr = W + r * K, *xm = a->xb + m * a->ldxb;
            float lane[16] = {0};
            for (int64_t k = 0; k < K; k += 2) {
                const int l = (int)(k / 2 % 16);
                const float w1 = k + 1 < K ? bf16_daz(wbf(a->w->fmt, wr[k + 1])) : 0.0f;
                lane[l] = ftz(lane[l] + w1 * bf16_daz(xm[k + 1]));
                lane[l] = ftz(lane[l] + bf16_daz(wbf(a->w->fmt, wr[k])) * bf16_daz(xm[k]));
            }
            /* d16_hsum4_512's tree for one accumulator: halves, quarters, then pairs */
            float h[8], q[4], p[2];
            for (int i = 0; i < 8; i++) h[i] = lane[i] + lane[i + 8];
            for (int i = 0; i < 4; i++) q[i] = h[i] + h[i + 4];
            p[0] = q[0] + q[2], p[1] = q[1] + q[3];
            a->y[m * a->ldy + r] = p[0] + p[1];
        }
}
