/* tcq_kq_prepare with AVX2: prep_avx512.c's loop in 8-lane halves, for machines without AVX-512
 * (same integers and steps as the scalar definition in prep.c, bit for bit: test_prep). */
#include "../kernels.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>

static inline __m256i quant8(__m256 a, __m256 inv, int lim)
{
    const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(a, inv));
    return _mm256_max_epi32(_mm256_min_epi32(v, _mm256_set1_epi32(lim)), _mm256_set1_epi32(-lim));
}

static inline float hmax_ps(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static inline int32_t hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* 8 floats from p, zeros past n (i: the position of p[0]) */
static inline __m256 load8(const float *p, int64_t i, int64_t n)
{
    if (i + 8 <= n) return _mm256_loadu_ps(p);
    if (i >= n) return _mm256_setzero_ps();
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), lane));
}

static inline __m256 scales8(const uint16_t *s, int64_t i, int64_t n)
{
    uint16_t t[8] = {0};
    if (i + 8 <= n) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)s));
    for (int64_t j = 0; j < 8 && i + j < n; j++) t[j] = s[j];
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
}

void tcq_kq_fill_avx2(kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *scales)
{
    const int64_t nblk = qa->nblk, npad = qa->npad;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), fmax = _mm256_set1_ps(FLT_MAX);
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * n;
        int8_t *q = qa->q + m * npad;
        uint32_t *q4 = qa->q4 + m * npad, *q2 = qa->q2 + m * npad;
        for (int64_t blk = 0; blk < nblk; blk++) {
            const int64_t i0 = blk * TCQ_FAST_QB;
            __m256 a[TCQ_FAST_QB / 8];
            __m256 amaxv = _mm256_setzero_ps();
            int fin = 1;
            for (int s = 0; s < TCQ_FAST_QB / 8; s++) {
                const int64_t i = i0 + 8 * s;
                a[s] = load8(xm + i, i, n);
                if (scales && i < n) a[s] = _mm256_mul_ps(a[s], scales8(scales + i, i, n));
                const __m256 ab = _mm256_and_ps(a[s], absmask);
                fin &= _mm256_movemask_ps(_mm256_cmp_ps(ab, fmax, _CMP_LE_OQ)) == 0xff;
                amaxv = _mm256_max_ps(amaxv, ab);
            }
            float amax = hmax_ps(amaxv);
            if (!fin) amax = NAN;
            float invs, dstep;
            const int ok = kq_step(amax, 127.0f, &invs, &dstep);
            const __m256 inv = _mm256_set1_ps(invs);
            __m256i sum = _mm256_setzero_si256();
            for (int s = 0; s < TCQ_FAST_QB / 8; s++) {
                const int64_t i = i0 + 8 * s;
                const __m256i v = ok ? quant8(a[s], inv, 127) : _mm256_setzero_si256();
                /* int32 -> int8: pack to int16, then to int8 (values fit: no saturation) */
                const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
                _mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(w16, w16));
                _mm256_storeu_si256((__m256i *)(q4 + i), _mm256_mullo_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0xff)),
                                                                            _mm256_set1_epi32(0x01010101)));
                _mm256_storeu_si256((__m256i *)(q2 + i), _mm256_mullo_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)),
                                                                            _mm256_set1_epi32(0x00010001)));
                sum = _mm256_add_epi32(sum, v);
            }
            qa->d[m * nblk + blk] = dstep;
            qa->corr[m * nblk + blk] = -510 * hsum_epi32(sum);
        }
        if (!scales && n % 32 == 0) {
            __m256 amaxv = _mm256_setzero_ps();
            int fin = 1;
            for (int64_t i = 0; i < n; i += 8) {
                const __m256 ab = _mm256_and_ps(_mm256_loadu_ps(xm + i), absmask);
                fin &= _mm256_movemask_ps(_mm256_cmp_ps(ab, fmax, _CMP_LE_OQ)) == 0xff;
                amaxv = _mm256_max_ps(amaxv, ab);
            }
            float amax = hmax_ps(amaxv);
            if (!fin) amax = NAN;
            float invs, dstep;
            const int ok = kq_step(amax, (float)TCQ_Q16_MAX, &invs, &dstep);
            const __m256 inv = _mm256_set1_ps(invs);
            int16_t *q16 = qa->q16 + m * npad;
            for (int64_t c = 0; c < n; c += 32)
                for (int h = 0; h < 2; h++) {
                    /* per 128-bit lane vpackssdw takes 4 of each source: packing positions
                     * c+8h.. with c+16+8h.. gives the q16 order of kernels.h */
                    const int64_t i = c + 8 * h;
                    const __m256i lo = ok ? quant8(_mm256_loadu_ps(xm + i), inv, TCQ_Q16_MAX) : _mm256_setzero_si256();
                    const __m256i hi = ok ? quant8(_mm256_loadu_ps(xm + i + 16), inv, TCQ_Q16_MAX) : _mm256_setzero_si256();
                    _mm256_storeu_si256((__m256i *)(q16 + c + 16 * h), _mm256_packs_epi32(lo, hi));
                }
            qa->d16[m] = dstep;
        }
    }
}
