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
