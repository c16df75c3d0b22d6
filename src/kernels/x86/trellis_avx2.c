/* AVX2 trellis kernels: the body (trellis_avx2_body.h) built twice, with AVX-VNNI's ymm vpdpbusd
 * where the CPU has it, and with vpmaddubsw (byte pairs against ones) + vpmaddwd (against q in
 * two int16) otherwise.  The fast path has the int16 tiles of the AVX-512 file for M >= 5 (axis 0
 * also at M = 3, 4); otherwise the shared-decode kernels loop over rows of M in chunks of 2 or 4,
 * and the exact path goes to the GEMM regime from M = 8..12 (tr_table.gemm_from). */
#include "../kernels.h"

#include <immintrin.h>
#include <string.h>

/* the int16 tile's pass: coded rows x activation rows (2 x 3: 6 int and 6 float accumulators, 2
 * rows' values and the activation in 15 of the 16 ymm registers) */
#ifndef SC16_RR
#define SC16_RR 2
#endif
#ifndef SC16_MC
#define SC16_MC 3
#endif

/* the axis-0 int16 tile's activation rows per register block (2 groups x 4 rows: 8 accumulators;
 * 6 rows took 1.2-1.5x the time) */
#ifndef SC0_MC
#define SC0_MC 4
#endif

/* without VNNI: bytesum via byte pairs (<= 510, no saturation), then pairs x q as int16 pairs */
#define SFX(n) n##_emu
#define ISA_TAG ""
#define DOT(acc, x, q4, q2)                                                                        \
    _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, _mm256_set1_epi8(1)), q2))
#define DOT16(acc, y, q) _mm256_add_epi32(acc, _mm256_madd_epi16(y, q))
#define YSUM(x)                                                                                    \
    _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(x, _mm256_set1_epi8(1)), _mm256_set1_epi16(1)), \
                     _mm256_set1_epi32(510))
#include "trellis_avx2_body.h"
#undef SFX
#undef ISA_TAG
#undef DOT
#undef DOT16
#undef YSUM

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avxvnni")
#endif
#define SFX(n) n##_vnni
#define ISA_TAG "vnni"
#define DOT(acc, x, q4, q2) _mm256_dpbusd_avx_epi32(acc, x, q4)
#define DOT16(acc, y, q) _mm256_dpwssd_avx_epi32(acc, y, q)
#define YSUM(x) _mm256_dpbusd_avx_epi32(_mm256_set1_epi32(-510), x, _mm256_set1_epi32(0x01010101))
#include "trellis_avx2_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const tr_table *tcq_tr_avx2(int vnni)
{
    const tcq_cpu_features *f = tcq_cpu();
    if (!(f->avx2 && f->fma && f->f16c)) return NULL;
    /* vnni = 0 (tcq_kctx_exclude, TCQ_KV_NO_AVXVNNI) runs the plain-AVX2 equivalent on a CPU that
     * has AVX-VNNI, so tests and the bench reach it there */
    return f->avxvnni && vnni ? &table_vnni : &table_emu;
}
