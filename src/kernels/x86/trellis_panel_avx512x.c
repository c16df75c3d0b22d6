/* The fast path's axis-1 GEMM regime on AVX-512 VNNI: a blocked int16 kernel in the outer-product
 * form of a BLAS micro-kernel.
 *
 * The int16 tile (trellis_reduce_avx512x.c) multiplies along the coded row: its lanes are 16 positions of
 * one row, so every activation vector is a load, and every output ends in a horizontal sum.  Here
 * the lanes are 16 coded rows (outputs): 64 rows' int16 code values are decoded a chunk of
 * PANEL_KC positions at a time and transposed into a panel whose entry kp holds, for each row, the
 * int16 pair at positions 2kp, 2kp + 1 (the order of tile16_decode and of kq_act.q16, vpackssdw
 * order within 32 positions, which both sides share).  The micro-kernel keeps 6 activation rows x
 * 4 zmm of rows = 24 int32 accumulators; per pair of positions it loads 4 panel vectors and
 * broadcasts one int16 pair of each activation row into vpdpwssd: 24 vpdpwssd for 4 loads and 6
 * broadcasts, against the tile's 12 for 7 loads.
 *
 * Numbers: |y q| <= 510 * 2047 < 2^20 and a lane adds 2 of them per position pair, so a chunk of
 * PANEL_KC <= 2048 positions sums exactly in int32; each chunk folds as y += (float)isum * f * d16
 * (f = row scale / TCQ_RMAD_DIV, d16 the activation row's step), chunks in order.  Items split the
 * coded rows only, so the bits do not depend on the thread count. */
#include "../kernels.h"

#include <immintrin.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))

/* acc += in place: with the intrinsic gcc rotated every accumulator through one register and the
 * stack (the same as trellis_dec_avx512.h's dpwssd_rr) */
AI void dpwssd_ip(__m512i *acc, __m512i b, __m512i a)
{
    __asm__("vpdpwssd %2, %1, %0" : "+v"(*acc) : "v"(b), "v"(a));
}

enum {
    PANEL_KC = 1024,  /* positions per chunk: a multiple of every T; the panel, 64 rows x 2 KB, sits
                       * in L2 (0.88-0.97x the time of 512, 256: 1.05-1.14x; "The panel kernel") */
    PANEL_MR = 6,     /* activation rows per micro-kernel call */
    PANEL_NJ = 4,     /* zmm of coded rows (16 each) per panel */
};
_Static_assert(PANEL_KC % 256 == 0 && PANEL_KC <= 2048, "a chunk is whole blocks and sums exactly in int32");
_Static_assert(PANEL_KC / 2 * PANEL_NJ * 64 + 16 * PANEL_KC * 2 <= KERNEL_SCRATCH / 2,
               "the panel and 16 decoded rows fit the kernel's private scratch");

/* 16 x 16 dwords: r[i] lane c -> r[c] lane i */
AI void tr16x16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* r[4a + c], 128-bit lane q: rows 4a..4a+3 at column 4q + c */
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        const __m512i ab0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44);
        const __m512i ab1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xee);
        const __m512i cd0 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44);
        const __m512i cd1 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xee);
        t[c] = _mm512_shuffle_i32x4(ab0, cd0, 0x88);
        t[4 + c] = _mm512_shuffle_i32x4(ab0, cd0, 0xdd);
        t[8 + c] = _mm512_shuffle_i32x4(ab1, cd1, 0x88);
        t[12 + c] = _mm512_shuffle_i32x4(ab1, cd1, 0xdd);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* Rows [n0, n0 + 16 nj) (those past r1 as zeros), positions [k0, k0 + kc), into
 * pan [kc/2][nj] zmm; tmp: 16 rows of PANEL_KC int16. */
static void panel_fill(const tcq_trellis *w, int64_t n0, int64_t r1, int nj, int64_t k0, int64_t kc, __m512i *pan,
                       __m512i *tmp)
{
    const int64_t T = w->p.T, rs = PANEL_KC / 32;   /* tmp row stride in zmm */
    for (int j = 0; j < nj; j++) {
        for (int l = 0; l < 16; l++) {
            const int64_t row = n0 + 16 * j + l;
            if (row < r1) tcq_avx512_decode_i16(w, row, k0 / T, kc / T, tmp + l * rs);
            else
                for (int64_t v = 0; v < kc / 32; v++) tmp[l * rs + v] = _mm512_setzero_si512();
        }
        for (int64_t kp0 = 0; kp0 < kc / 2; kp0 += 16) {
            __m512i v[16];
            for (int l = 0; l < 16; l++) v[l] = _mm512_load_si512(tmp + l * rs + kp0 / 16);
            tr16x16(v);
            for (int c = 0; c < 16; c++) _mm512_store_si512(pan + (kp0 + c) * nj + j, v[c]);
        }
    }
}

/* o[4 i + j] = int32 sums of MR activation rows x NJ zmm of coded rows over nkp position pairs;
 * q: activation row i's int16 pairs at q + i qs.  (NJ = 4 runs the asm below.) */
AI void panel_mk(const __m512i *pan, int64_t nkp, const int32_t *q, int64_t qs, __m512i *o, const int MR,
                 const int NJ)
{
    __m512i acc[PANEL_MR][PANEL_NJ];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NJ; j++) acc[i][j] = _mm512_setzero_si512();
    for (int64_t kp = 0; kp < nkp; kp++) {
        __m512i b[PANEL_NJ];
        for (int j = 0; j < NJ; j++) b[j] = _mm512_load_si512(pan + kp * NJ + j);
        for (int i = 0; i < MR; i++) {
            const __m512i a = _mm512_set1_epi32(q[i * qs + kp]);
            for (int j = 0; j < NJ; j++) dpwssd_ip(&acc[i][j], b[j], a);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NJ; j++) o[4 * i + j] = acc[i][j];
}

/* The 4-zmm case in asm (gcc kept the 24 accumulators on the stack, 2x slower): MR rows of
 * int32 sums over nkp position pairs into o [MR][4] zmm; pair kp's 4 vectors at pan + kp ps bytes
 * (the axis-0 tile passes its own layout).  Row i's broadcast is q + i s; rows 3..5 address from
 * q3 = q + 3 s. */
#define PZ(r) "vpxord %%zmm" #r ", %%zmm" #r ", %%zmm" #r "\n\t"
#define PZR(a, b, c, d) PZ(a) PZ(b) PZ(c) PZ(d)
#define PD(t, j, r) "vpdpwssd %%zmm" #t ", %%zmm" #j ", %%zmm" #r "\n\t"
#define PC(A, t, a, b, c, d) "vpbroadcastd " A ", %%zmm" #t "\n\t" PD(t, 0, a) PD(t, 1, b) PD(t, 2, c) PD(t, 3, d)
#define PS1(r, off) "vmovdqa64 %%zmm" #r ", " #off "(%[o])\n\t"
#define PLD "vmovdqa64 (%[p]), %%zmm0\n\tvmovdqa64 64(%[p]), %%zmm1\n\t"                            \
            "vmovdqa64 128(%[p]), %%zmm2\n\tvmovdqa64 192(%[p]), %%zmm3\n\t"
#define PADV "add %[ps], %[p]\n\tadd $4, %[q]\n\tadd $4, %[q3]\n\tdec %[n]\n\tjnz 1b\n\t"
#define R0 PC("(%[q])", 4, 8, 9, 10, 11)
#define R1 PC("(%[q],%[s],1)", 5, 12, 13, 14, 15)
#define R2 PC("(%[q],%[s],2)", 6, 16, 17, 18, 19)
#define R3 PC("(%[q3])", 7, 20, 21, 22, 23)
#define R4 PC("(%[q3],%[s],1)", 4, 24, 25, 26, 27)
#define R5 PC("(%[q3],%[s],2)", 5, 28, 29, 30, 31)
#define Z0 PZR(8, 9, 10, 11)
#define Z1 PZR(12, 13, 14, 15)
#define Z2 PZR(16, 17, 18, 19)
#define Z3 PZR(20, 21, 22, 23)
#define Z4 PZR(24, 25, 26, 27)
#define Z5 PZR(28, 29, 30, 31)
/* offsets in bytes of o[i][j] = 256 i + 64 j, spelled as literals for the assembler */
#define S0 PS1(8, 0) PS1(9, 64) PS1(10, 128) PS1(11, 192)
#define S1 PS1(12, 256) PS1(13, 320) PS1(14, 384) PS1(15, 448)
#define S2 PS1(16, 512) PS1(17, 576) PS1(18, 640) PS1(19, 704)
#define S3 PS1(20, 768) PS1(21, 832) PS1(22, 896) PS1(23, 960)
#define S4 PS1(24, 1024) PS1(25, 1088) PS1(26, 1152) PS1(27, 1216)
#define S5 PS1(28, 1280) PS1(29, 1344) PS1(30, 1408) PS1(31, 1472)
#define PMK(ZZ, RR, SS)                                                                            \
    __asm__ volatile(ZZ "1:\n\t" PLD RR PADV SS                                                    \
                     : [p] "+r"(pan), [q] "+r"(q), [q3] "+r"(q3), [n] "+r"(nkp)                     \
                     : [s] "r"(s), [o] "r"(o), [ps] "r"(ps)                                         \
                     : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", \
                       "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", \
                       "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", \
                       "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31")

void tcq_avx512_mk6x4(const void *pan, int64_t ps, int64_t nkp, const int32_t *q, int64_t qs, int mr, void *o)
{
    if (nkp < 1) {   /* the loop runs at least once */
        memset(o, 0, (size_t)mr * 256);
        return;
    }
    const int64_t s = qs * 4;
    const int32_t *q3 = q + 3 * qs;
    switch (mr) {
    case 1: PMK(Z0, R0, S0); break;
    case 2: PMK(Z0 Z1, R0 R1, S0 S1); break;
    case 3: PMK(Z0 Z1 Z2, R0 R1 R2, S0 S1 S2); break;
    case 4: PMK(Z0 Z1 Z2 Z3, R0 R1 R2 R3, S0 S1 S2 S3); break;
    case 5: PMK(Z0 Z1 Z2 Z3 Z4, R0 R1 R2 R3 R4, S0 S1 S2 S3 S4); break;
    default: PMK(Z0 Z1 Z2 Z3 Z4 Z5, R0 R1 R2 R3 R4 R5, S0 S1 S2 S3 S4 S5); break;
    }
}

/* y[i][16j + l] (+)= isum * f[j] * d16[i]: the chunk's sums folded (stores masked past the rows) */
static void panel_fold(const __m512i *o, int mr, int nj, float *y, int64_t ldy, const __m512 *f, const float *d16,
                       int first, __mmask16 lm)
{
    for (int i = 0; i < mr; i++) {
        const __m512 d = _mm512_set1_ps(d16[i]);
        for (int j = 0; j < nj; j++) {
            const __mmask16 mk = j == nj - 1 ? lm : (__mmask16)0xffff;
            float *yp = y + i * ldy + 16 * j;
            const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(o[4 * i + j]), f[j]);
            const __m512 v = first ? _mm512_mul_ps(t, d) : _mm512_fmadd_ps(t, d, _mm512_maskz_loadu_ps(mk, yp));
            _mm512_mask_storeu_ps(yp, mk, v);
        }
    }
}

#define PANEL_MK_NJ(MR)                                                                            \
    switch (nj) {                                                                                  \
    case 1: panel_mk(pan, nkp, q, qs, o, MR, 1); break;                                            \
    case 2: panel_mk(pan, nkp, q, qs, o, MR, 2); break;                                            \
    default: panel_mk(pan, nkp, q, qs, o, MR, 3); break;                                           \
    }

void tcq_avx512_reduce_fast_panel(const kr_args *a)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const int64_t K = w->cols, qs = qa->npad / 2;
    /* scratch: the panel, then 16 rows of decoded values */
    __m512i *pan = a->scratch, *tmp = pan + PANEL_KC / 2 * PANEL_NJ;
    for (int64_t n0 = a->r0; n0 < a->r1; n0 += 16 * PANEL_NJ) {
        const int64_t nr = TCQ_MIN(16 * PANEL_NJ, a->r1 - n0);
        const int nj = (int)((nr + 15) / 16);
        const __mmask16 lm = (__mmask16)(nr % 16 ? (1u << (nr % 16)) - 1 : 0xffffu);
        __m512 f[PANEL_NJ];
        for (int j = 0; j < nj; j++) {
            float s[16];
            for (int l = 0; l < 16; l++)
                s[l] = 16 * j + l < nr ? _cvtsh_ss(w->scales[n0 + 16 * j + l]) * TCQ_RMAD_RINV : 0.0f;
            f[j] = _mm512_loadu_ps(s);
        }
        for (int64_t k0 = 0; k0 < K; k0 += PANEL_KC) {
            const int64_t kc = TCQ_MIN(PANEL_KC, K - k0), nkp = kc / 2;
            const int first = k0 == 0;
            panel_fill(w, n0, a->r1, nj, k0, kc, pan, tmp);
            for (int64_t m0 = 0; m0 < a->M; m0 += PANEL_MR) {
                const int64_t mr = TCQ_MIN(PANEL_MR, a->M - m0);
                const int32_t *q = (const int32_t *)(qa->q16 + m0 * qa->npad + k0);
                const float *d16 = qa->d16 + m0;
                float *yp = a->y + m0 * a->ldy + n0;
                __m512i o[PANEL_MR * PANEL_NJ];
                if (nj == PANEL_NJ) tcq_avx512_mk6x4(pan, 4 * 64, nkp, q, qs, (int)mr, o);
                else
                    switch (mr) {
                    case 1: PANEL_MK_NJ(1) break;
                    case 2: PANEL_MK_NJ(2) break;
                    case 3: PANEL_MK_NJ(3) break;
                    case 4: PANEL_MK_NJ(4) break;
                    case 5: PANEL_MK_NJ(5) break;
                    default: PANEL_MK_NJ(6) break;
                    }
                panel_fold(o, (int)mr, nj, yp, a->ldy, f, d16, first, lm);
            }
        }
    }
}
