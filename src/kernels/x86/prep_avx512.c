/* tcq_kq_prepare with AVX-512: the same integers and steps as the scalar version in prep.c, bit
 * for bit (test_kernels compares every field).  It runs on the caller's thread before every fast
 * linear call, so at M = 1 it is serial time: the scalar loop (a libm call per element for fmaxf
 * and nearbyintf) took ~8 % of a k = 2 tinyqwen decode on two threads (docs/PERFORMANCE.md, "The
 * fast path's activation prep").
 *
 * Why the results match: products and the 127/amax division are the same f32 operations;
 * vcvtps2dq rounds to nearest even, as nearbyintf does in the default rounding mode, and the
 * clamps are the same; a block's maximum of |a| is exact in any order; the finiteness test is
 * |a| <= FLT_MAX on every lane, as in the loop. */
#include "../kernels.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>

/* v of one 16-lane slice: round(a * inv) clamped to [-lim, lim], or 0 where !ok */
static inline __m512i quant16(__m512 a, __m512 inv, int lim)
{
    const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(a, inv));
    return _mm512_max_epi32(_mm512_min_epi32(v, _mm512_set1_epi32(lim)), _mm512_set1_epi32(-lim));
}

void tcq_kq_fill_avx512(kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *scales)
{
    const int64_t nblk = qa->nblk, npad = qa->npad;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)), fmax = _mm512_set1_ps(FLT_MAX);
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * n;
        int8_t *q = qa->q + m * npad;
        uint32_t *q4 = qa->q4 + m * npad, *q2 = qa->q2 + m * npad;
        for (int64_t blk = 0; blk < nblk; blk++) {
            const int64_t i0 = blk * TCQ_FAST_QB;
            __m512 a[TCQ_FAST_QB / 16];
            __m512 amaxv = _mm512_setzero_ps();
            __mmask16 fin = 0xffff;
            for (int s = 0; s < TCQ_FAST_QB / 16; s++) {
                const int64_t i = i0 + 16 * s;
                const __mmask16 in = i + 16 <= n ? 0xffff : i >= n ? 0 : (__mmask16)((1u << (n - i)) - 1);
                a[s] = _mm512_maskz_loadu_ps(in, xm + i);
                if (scales)
                    a[s] = _mm512_mul_ps(a[s], _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(in, scales + i)));
                const __m512 ab = _mm512_and_ps(a[s], absmask);
                fin &= _mm512_cmp_ps_mask(ab, fmax, _CMP_LE_OQ);
                amaxv = _mm512_max_ps(amaxv, ab);
            }
            float amax = _mm512_reduce_max_ps(amaxv);
            if (fin != 0xffff) amax = NAN;
            float invs, dstep;
            const int ok = kq_step(amax, 127.0f, &invs, &dstep);
            const __m512 inv = _mm512_set1_ps(invs);
            __m512i sum = _mm512_setzero_si512();
            for (int s = 0; s < TCQ_FAST_QB / 16; s++) {
                const int64_t i = i0 + 16 * s;
                const __m512i v = ok ? quant16(a[s], inv, 127) : _mm512_setzero_si512();
                _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(v));
                _mm512_storeu_si512(q4 + i, _mm512_mullo_epi32(_mm512_and_si512(v, _mm512_set1_epi32(0xff)),
                                                               _mm512_set1_epi32(0x01010101)));
                _mm512_storeu_si512(q2 + i, _mm512_mullo_epi32(_mm512_and_si512(v, _mm512_set1_epi32(0xffff)),
                                                               _mm512_set1_epi32(0x00010001)));
                sum = _mm512_add_epi32(sum, v);
            }
            qa->d[m * nblk + blk] = dstep;
            qa->corr[m * nblk + blk] = -510 * _mm512_reduce_add_epi32(sum);
        }
        if (!scales && n % 32 == 0) {
            __m512 amaxv = _mm512_setzero_ps();
            __mmask16 fin = 0xffff;
            for (int64_t i = 0; i < n; i += 16) {
                const __m512 ab = _mm512_and_ps(_mm512_loadu_ps(xm + i), absmask);
                fin &= _mm512_cmp_ps_mask(ab, fmax, _CMP_LE_OQ);
                amaxv = _mm512_max_ps(amaxv, ab);
            }
            float amax = _mm512_reduce_max_ps(amaxv);
            if (fin != 0xffff) amax = NAN;
            float invs, dstep;
            const int ok = kq_step(amax, (float)TCQ_Q16_MAX, &invs, &dstep);
            const __m512 inv = _mm512_set1_ps(invs);
            int16_t *q16 = qa->q16 + m * npad;
            for (int64_t c = 0; c < n; c += 32) {
                /* vpackssdw interleaves 4-element pieces of its two sources per 128-bit lane: the
                 * q16 order (kernels.h) */
                const __m512i lo = ok ? quant16(_mm512_loadu_ps(xm + c), inv, TCQ_Q16_MAX) : _mm512_setzero_si512();
                const __m512i hi = ok ? quant16(_mm512_loadu_ps(xm + c + 16), inv, TCQ_Q16_MAX) : _mm512_setzero_si512();
                _mm512_storeu_si512(q16 + c, _mm512_packs_epi32(lo, hi));
            }
            qa->d16[m] = dstep;
        }
    }
}
