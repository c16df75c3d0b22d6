/* Shared by the x86 dense f16 / bf16 tables: the fixed reduction of 4 accumulators (one tile
 * row) and the y update, so every table ends a k block the same way. */
#ifndef TCQ_DENSE16_X86_H
#define TCQ_DENSE16_X86_H

#include "../kernels.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

/* y[j] = s[j] (first) or y[j] + s[j], j < nv */
AI void d16_store(float *y, __m128 s, int nv, int first)
{
    float t[4];
    _mm_storeu_ps(t, s);
    for (int j = 0; j < nv; j++) y[j] = first ? t[j] : y[j] + t[j];
}

#ifdef __AVX512F__
/* lanes of a, b, c, d summed: halves, then quarters, then the fixed pair tree of each quarter */
AI __m128 d16_hsum4_512(__m512 a, __m512 b, __m512 c, __m512 d)
{
    const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
    __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xdd));
    s = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4e));
    s = _mm512_add_ps(s, _mm512_permute_ps(s, 0xb1));
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), s));
}

#endif

#endif
