/* AVX-512 dense f16 / bf16 and MLX affine kernels: widen 16 weights per instruction or two
 * (vcvtph2ps; vpmovzxwd + vpslld for bf16; nibble/byte unpack + vcvtdq2ps + vfmadd(scale, q,
 * bias) for affine), exactly the values tcq_dense_decode_rows() defines.  Small M multiplies
 * directly (no buffer); large M decodes rows for sgemm. */
#include "../kernels.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))

AI __m512 load_sb(const void *p, tcq_dtype t, int64_t i)
{
    switch (t) {
    case TCQ_DTYPE_F32: return _mm512_set1_ps(((const float *)p)[i]);
    case TCQ_DTYPE_F16: return _mm512_set1_ps(_cvtsh_ss(((const uint16_t *)p)[i]));
    default: {
        const uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return _mm512_set1_ps(f);
    }
    }
}

/* 16 affine codes starting at element j of a row (j % 16 == 0) as f32 */
AI __m512 affine_q16(const uint32_t *wr, int bits, int64_t j)
{
    if (bits == 8) return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)((const uint8_t *)wr + j))));
    /* 4 bits: element 2i is the low nibble of byte i, 2i+1 the high one */
    const __m128i b = _mm_loadl_epi64((const __m128i *)((const uint8_t *)wr + j / 2));
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)));
}

/* weights in [j, j+16) of row r as f32 */
AI __m512 wload(const tcq_weight *w, int64_t r, int64_t j, __m512 s, __m512 b)
{
    switch (w->fmt) {
    case TCQ_WF_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w->dense + r * w->in + j)));
    case TCQ_WF_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w->dense + r * w->in + j))), 16));
    default: {
        const tcq_affine *a = &w->af;
        return _mm512_fmadd_ps(s, affine_q16(a->w + r * (w->in * a->bits / 32), a->bits, j), b);
    }
    }
}

/* scalar tail (in % 16 != 0; dense only: affine rows are whole groups of >= 32) */
static float wscalar(const tcq_weight *w, int64_t r, int64_t j)
{
    const uint16_t h = ((const uint16_t *)w->dense)[r * w->in + j];
    if (w->fmt == TCQ_WF_F16) return _cvtsh_ss(h);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The scale and bias of affine group i, broadcast (zero for the other formats, which ignore them). */
AI void group_sb(const tcq_weight *w, int aff, int64_t i, __m512 *s, __m512 *b)
{
    *s = aff ? load_sb(w->af.scales, w->af.sdtype, i) : _mm512_setzero_ps();
    *b = aff ? load_sb(w->af.biases, w->af.sdtype, i) : _mm512_setzero_ps();
}

AI void rows_direct(const tcq_weight *w, const float *x, const int MC, int64_t m0, int64_t r0, int64_t r1, float *y,
                    int64_t ldy)
{
    const int64_t in = w->in, n16 = in & ~(int64_t)15;
    const int aff = w->fmt == TCQ_WF_AFFINE;
    const int64_t gs = aff ? w->af.group_size : in, gpr = aff ? in / gs : 1;
    for (int64_t r = r0; r < r1; r++) {
        __m512 acc[4];
        for (int m = 0; m < MC; m++) acc[m] = _mm512_setzero_ps();
        for (int64_t g = 0; g < gpr; g++) {
            __m512 s, b;
            group_sb(w, aff, r * gpr + g, &s, &b);
            const int64_t j1 = aff ? (g + 1) * gs : n16;
            for (int64_t j = g * gs; j < j1; j += 16) {
                const __m512 wv = wload(w, r, j, s, b);
                for (int m = 0; m < MC; m++) acc[m] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + (m0 + m) * in + j), acc[m]);
            }
        }
        for (int m = 0; m < MC; m++) {
            float t = _mm512_reduce_add_ps(acc[m]);
            for (int64_t j = n16; j < in && !aff; j++) t = fmaf(wscalar(w, r, j), x[(m0 + m) * in + j], t);
            y[(m0 + m) * ldy + r] = t;
        }
    }
}

void tcq_dense_rows_avx512(const tcq_weight *w, const float *x, int64_t M, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
        switch (TCQ_MIN(4, M - m0)) {
        case 1: rows_direct(w, x, 1, m0, r0, r1, y, ldy); break;
        case 2: rows_direct(w, x, 2, m0, r0, r1, y, ldy); break;
        case 3: rows_direct(w, x, 3, m0, r0, r1, y, ldy); break;
        default: rows_direct(w, x, 4, m0, r0, r1, y, ldy); break;
        }
    }
}

void tcq_dense_decode_rows_avx512(const tcq_weight *w, int64_t r0, int64_t r1, float *out)
{
    const int64_t in = w->in, n16 = in & ~(int64_t)15;
    const int aff = w->fmt == TCQ_WF_AFFINE;
    const int64_t gs = aff ? w->af.group_size : in, gpr = aff ? in / gs : 1;
    for (int64_t r = r0; r < r1; r++) {
        float *o = out + (r - r0) * in;
        for (int64_t g = 0; g < gpr; g++) {
            __m512 s, b;
            group_sb(w, aff, r * gpr + g, &s, &b);
            const int64_t j1 = aff ? (g + 1) * gs : n16;
            for (int64_t j = g * gs; j < j1; j += 16) _mm512_storeu_ps(o + j, wload(w, r, j, s, b));
        }
        for (int64_t j = n16; j < in && !aff; j++) o[j] = wscalar(w, r, j);
    }
}
