/* AVX-512 trellis kernels (F/BW/VL + VNNI + VBMI).
 *
 * Decoding 16 consecutive weights of a block (one "group", lanes j = 0..15, t = 16g + j), in
 * trellis_dec_avx512.h: the group's 16 windows lie in one qword of the block (k <= 3; k = 4: two
 * qwords), broadcast from memory into vpmultishiftqb, which shifts each lane's window to bit 0;
 * vpandd keeps L bits; vpmulld/vpaddd give x = s*34038481 + 76625530.  (The first decoder held the
 * block in two registers and gathered each lane's 4 bytes with vpermi2b: 2 cycles of port 5.)
 * Fast path: vpdpbusd(acc, x, q replicated 4x) adds bytesum(x) * q; the -510 sum(q) offset seeds
 * the accumulator of each activation block, which is converted to f32 and scaled once.
 * Exact path: bytesum - 510 is one vpdpbusd against ones seeded with -510; value = refined
 * reciprocal (cvt, mul, fnmadd, fmadd, as tcq_code_value_computed); weight = value * scale. */
#include "trellis_dec_avx512.h"

#ifndef TCQ_RPF
#define TCQ_RPF 4
#endif


AI void decode_rows_(const tcq_trellis *w, const dec *d, int64_t r, int64_t b0, int64_t nb, float *out, const int BC)
{
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(w->scales[r]));
    for (int64_t b = 0; b < nb; b++) {
        const blk bl = blk_load(d, kblock(w, r, b0 + b), BC);
        for (int g = 0; g < d->ng; g++) _mm512_storeu_ps(out + b * w->p.T + g * 16, dec_w(d, bl, g, scale, BC));
    }
}

static void decode_rows(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, float *out)
{
    dec d;
    dec_init(&d, w->p);
    BC_CALL(&d, decode_rows_(w, &d, r, b0, nb, out, BC));
}

/* ---- axis 1 (reduce) --------------------------------------------------------------------- */

/* one activation block (QB positions) of a coded block, rows m0..m0+MC */
AI void reduce_fast_qb(const dec *d, blk bl, int64_t kb, int qb, const int MC, const uint32_t *const *q4m,
                       const int32_t *const *corrm, const float *const *dm, __m512 *facc, const int BC)
{
    __m512i iacc[4];
    for (int m = 0; m < MC; m++) iacc[m] = _mm512_maskz_loadu_epi32(1, corrm[m] + kb);   /* lane 0 */
    const int64_t pos = kb * QB;
    for (int gg = 0; gg < GPQ; gg++) {
        const __m512i x = dec_x(d, bl, qb * GPQ + gg, BC);
        for (int m = 0; m < MC; m++) iacc[m] = _mm512_dpbusd_epi32(iacc[m], x, _mm512_loadu_si512(q4m[m] + pos + gg * 16));
    }
    for (int m = 0; m < MC; m++)
        facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[m]), _mm512_set1_ps(dm[m][kb]), facc[m]);
}

/* fast, rows m0..m0+MC share each decoded group */
AI void reduce_fast_body(const kr_args *a, const dec *d, const int MC, int64_t m0, const int BC)
{
    const tcq_trellis *w = a->w;
    const int64_t wpb = w->p.T * w->p.k / 32;
    const kq_act *qa = a->qa;
    const int T = w->p.T;
    const int64_t nb = w->cols / T;
    /* per-row base pointers: each vpdpbusd then addresses its activations as base + one shared
     * offset + displacement (gcc otherwise spent a lea per row and group) */
    const uint32_t *q4m[4];
    const int32_t *corrm[4];
    const float *dm[4];
    for (int m = 0; m < MC; m++) {
        q4m[m] = qa->q4 + (m0 + m) * qa->npad;
        corrm[m] = qa->corr + (m0 + m) * qa->nblk;
        dm[m] = qa->d + (m0 + m) * qa->nblk;
    }
    for (int64_t r = a->r0; r < a->r1; r++) {
        const uint32_t *rb = w->codes + r * (w->cols * w->p.k / 32);
        __m512 facc[4];
        for (int m = 0; m < MC; m++) facc[m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const blk bl = blk_load(d, (rb + b * wpb), BC);
            if (TCQ_RPF && b + TCQ_RPF < nb) {
                /* the row's stream, 4 blocks ahead (the wrap load of each block stalled on its
                 * first line otherwise) */
                _mm_prefetch((const char *)(rb + (b + TCQ_RPF) * wpb), _MM_HINT_T0);
                _mm_prefetch((const char *)(rb + (b + TCQ_RPF) * wpb) + 64, _MM_HINT_T0);
            }
            /* T = 256: the 4 activation blocks unrolled.  As a 4-trip inner loop, on Zen 5 the
             * kernel ran at 0.66-0.70 ns per group in some processes and 1.0-1.1 in others
             * (bimodal by run, so by code/data placement; the loop alone: 0.63); unrolled,
             * 0.68-0.70 in every run (bench/NOTES.md "Zen 5") */
            if (T == 256) {
#pragma GCC unroll 4
                for (int qb = 0; qb < 4; qb++) reduce_fast_qb(d, bl, b * 4 + qb, qb, MC, q4m, corrm, dm, facc, BC);
            } else
                for (int qb = 0; qb < T / QB; qb++)
                    reduce_fast_qb(d, bl, b * (T / QB) + qb, qb, MC, q4m, corrm, dm, facc, BC);
        }
        const float f = _cvtsh_ss(w->scales[r]) * TCQ_RMAD_RINV;
        for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = _mm512_reduce_add_ps(facc[m]) * f;
    }
}

AI void reduce_exact_body(const kr_args *a, const dec *d, const int MC, int64_t m0, const int BC)
{
    const tcq_trellis *w = a->w;
    const int64_t wpb = w->p.T * w->p.k / 32;
    const int T = w->p.T;
    const int64_t nb = w->cols / T, C = w->cols;
    for (int64_t r = a->r0; r < a->r1; r++) {
        const uint32_t *rb = w->codes + r * (w->cols * w->p.k / 32);
        const __m512 scale = _mm512_set1_ps(_cvtsh_ss(w->scales[r]));
        __m512 facc[4];
        for (int m = 0; m < MC; m++) facc[m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const blk bl = blk_load(d, (rb + b * wpb), BC);
            for (int g = 0; g < d->ng; g++) {
                const __m512 wv = dec_w(d, bl, g, scale, BC);
                for (int m = 0; m < MC; m++)
                    facc[m] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(a->x + (m0 + m) * C + b * T + g * 16), facc[m]);
            }
        }
        for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = _mm512_reduce_add_ps(facc[m]);
    }
}

/* Fast, M = 1, T = 256, k = 2..4: one coded row's block loop in asm.  The intrinsics body above
 * ran at 0.65-0.69 ns per group of 16 weights (Zen 5, one thread, L2-resident or not), the same
 * instruction sequence in a bare loop at 0.52 (bench/micro/reduce_loop.c): gcc reloaded the
 * decode constants from the stack every block, rebuilt each activation address with lea/shl and
 * carried some through vector registers.  Here the constants stay in registers and each address
 * is a base plus an immediate.  Same instructions, and every integer and float sum in the same
 * order, as reduce_fast_body(MC = 1): the same bits.  Offsets are assembler expressions of
 * literals (an "i" operand from BC would not compile at -O0): group g's qword at 30k - 2kg
 * (k = 4: 120 - 8g, lanes 0..3 from 4 bytes further), its activations at 64g; the wrap group 0's
 * qword is put together with shrd.
 *   p: the row's codes, 32k bytes a block   q: q4 of the row's positions, 1024 bytes a block
 *   c, dd: corr and d, 4 activation blocks a coded block   f: the f32 accumulator [16] */
#define RM1_NB_2 "64"
#define RM1_NB_3 "96"
#define RM1_NB_4 "128"
#define RM1_O0_2 "60"
#define RM1_O0_3 "90"
#define RM1_O0_4 "120"
#define RM1_K2_2 "4"
#define RM1_K2_3 "6"
#define RM1_K2_4 "8"
#define RM1_HI_2(G) ""
#define RM1_HI_3(G) ""
#define RM1_HI_4(G) "vpbroadcastq " RM1_O0_4 "+4-8*" #G "(%[p]), %[t]%{%[m3]%}\n\t"
/* k <= 3: group 0's qword = the block's last 8 bytes >> (64 - 16k) | its first 8 << 16k.
 * k = 4: lanes 4..15 from the block's last 8 bytes, lanes 0..3 from its last 4 and first 4. */
#define RM1_WRAP_K3(K, SHR)                                                                        \
    "mov " RM1_NB_##K "-8(%[p]), %[r0]\n\t"                                                        \
    "mov (%[p]), %[r1]\n\t"                                                                        \
    "shrd $" SHR ", %[r1], %[r0]\n\t"                                                              \
    "vpbroadcastq %[r0], %[t]\n\t"
#define RM1_WRAP_2 RM1_WRAP_K3(2, "32")
#define RM1_WRAP_3 RM1_WRAP_K3(3, "16")
#define RM1_WRAP_4                                                                                 \
    "mov " RM1_NB_4 "-8(%[p]), %[r0]\n\t"                                                          \
    "mov (%[p]), %[r1]\n\t"                                                                        \
    "vpbroadcastq %[r0], %[t]\n\t"                                                                 \
    "shrd $32, %[r1], %[r0]\n\t"                                                                   \
    "vpbroadcastq %[r0], %[t]%{%[m3]%}\n\t"
#define RM1_DEC                                                                                    \
    "vpmultishiftqb %[t], %[sh], %[t]\n\t"                                                         \
    "vpandd %[t], %[mk], %[t]\n\t"                                                                 \
    "vpmulld %[mul], %[t], %[t]\n\t"                                                               \
    "vpaddd %[ad], %[t], %[t]\n\t"
/* group G's x in t */
#define RM1_X(K, G) "vpbroadcastq " RM1_O0_##K "-" RM1_K2_##K "*" #G "(%[p]), %[t]\n\t" RM1_HI_##K(G) RM1_DEC
/* Rows m = 0..MC-1 of the activations: q4 rows qs bytes apart, corr and d rows cs bytes apart
 * (index registers; row 3 through qs3 = 3 qs and cs3 = 3 cs) */
#define RMC_Q0 ""
#define RMC_Q1 ", %[qs], 1"
#define RMC_Q2 ", %[qs], 2"
#define RMC_Q3 ", %[qs3], 1"
#define RMC_C0 ""
#define RMC_C1 ", %[cs], 1"
#define RMC_C2 ", %[cs], 2"
#define RMC_C3 ", %[cs3], 1"
/* row m's integer accumulator zmm(16+m), its float one zmm(20+m) (fixed registers: the asm
 * would need more than gcc's 30 operands otherwise) */
#define RMC_A0 "%%zmm16"
#define RMC_A1 "%%zmm17"
#define RMC_A2 "%%zmm18"
#define RMC_A3 "%%zmm19"
#define RMC_F0 "%%zmm20"
#define RMC_F1 "%%zmm21"
#define RMC_F2 "%%zmm22"
#define RMC_F3 "%%zmm23"
#define RMC_DP(m, G) "vpdpbusd 64*" #G "(%[q]" RMC_Q##m "), %[t], " RMC_A##m "\n\t"
#define RMC_SEED(m, QB) "vmovdqu32 4*" #QB "(%[c]" RMC_C##m "), " RMC_A##m "%{%[m1]%}%{z%}\n\t"
#define RMC_FOLD(m, QB)                                                                            \
    "vcvtdq2ps " RMC_A##m ", " RMC_A##m "\n\t"                                                     \
    "vfmadd231ps 4*" #QB "(%[dd]" RMC_C##m ")%{1to16%}, " RMC_A##m ", " RMC_F##m "\n\t"
#define RMC_LOAD(m, i) "vmovups 64*" #m "(%[fo]), " RMC_F##m "\n\t"
#define RMC_STORE(m, i) "vmovups " RMC_F##m ", 64*" #m "(%[fo])\n\t"
#define RMC_EACH_1(X, i) X(0, i)
#define RMC_EACH_2(X, i) X(0, i) X(1, i)
#define RMC_EACH_3(X, i) X(0, i) X(1, i) X(2, i)
#define RMC_EACH_4(X, i) X(0, i) X(1, i) X(2, i) X(3, i)
#define RMC_GRP(K, MC, G) RM1_X(K, G) RMC_EACH_##MC(RMC_DP, G)
#define RMC_QBLK(K, MC, QB, G0, G1, G2, G3)                                                        \
    RMC_EACH_##MC(RMC_SEED, QB) RMC_GRP(K, MC, G0) RMC_GRP(K, MC, G1) RMC_GRP(K, MC, G2)           \
    RMC_GRP(K, MC, G3) RMC_EACH_##MC(RMC_FOLD, QB)
#define RMC_LOOP(K, MC)                                                                            \
    RMC_EACH_##MC(RMC_LOAD, 0)                                                                     \
    "1:\n\t"                                                                                       \
    "prefetcht0 (%[p], %[pf])\n\t"                                                                 \
    "prefetcht0 " RM1_NB_##K "-1(%[p], %[pf])\n\t"                                                \
    RMC_EACH_##MC(RMC_SEED, 0) RM1_WRAP_##K RM1_DEC RMC_EACH_##MC(RMC_DP, 0)                       \
    RMC_GRP(K, MC, 1) RMC_GRP(K, MC, 2) RMC_GRP(K, MC, 3) RMC_EACH_##MC(RMC_FOLD, 0)               \
    RMC_QBLK(K, MC, 1, 4, 5, 6, 7) RMC_QBLK(K, MC, 2, 8, 9, 10, 11)                                \
    RMC_QBLK(K, MC, 3, 12, 13, 14, 15)                                                             \
    "add $" RM1_NB_##K ", %[p]\n\t"                                                                \
    "add $1024, %[q]\n\t"                                                                          \
    "add $16, %[c]\n\t"                                                                            \
    "add $16, %[dd]\n\t"                                                                           \
    "dec %[n]\n\t"                                                                                 \
    "jnz 1b\n\t"                                                                                   \
    RMC_EACH_##MC(RMC_STORE, 0)
#define RMC_ASM(K, MC)                                                                             \
    __asm__ volatile(RMC_LOOP(K, MC)                                                               \
                     : [p] "+r"(p), [q] "+r"(q), [c] "+r"(c), [dd] "+r"(dd), [n] "+r"(n),           \
                       [t] "=&v"(t), [r0] "=&r"(r0), [r1] "=&r"(r1)                                \
                     : [sh] "v"(d->shbc), [mk] "v"(d->mask), [mul] "v"(d->mul), [ad] "v"(d->add),  \
                       [m1] "Yk"(m1), [m3] "Yk"(m3), [qs] "r"(qs), [qs3] "r"(3 * qs), [cs] "r"(cs), \
                       [cs3] "r"(3 * cs), [fo] "r"(fr), [pf] "r"(pf)                               \
                     : "cc", "memory", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21",       \
                       "xmm22", "xmm23")
#define RMC_CASE(K)                                                                                \
    case K:                                                                                        \
        switch (MC) {                                                                              \
        case 1: RMC_ASM(K, 1); break;                                                              \
        case 2: RMC_ASM(K, 2); break;                                                              \
        case 3: RMC_ASM(K, 3); break;                                                              \
        default: RMC_ASM(K, 4); break;                                                             \
        }                                                                                          \
        break;

#ifndef RMC_SEG
#define RMC_SEG 8    /* blocks */
#endif
#ifndef RMC_PFR
#define RMC_PFR 4    /* rows */
#endif
#define RMC_ROWS 16

/* Rows m0..m0+MC-1 (MC <= 4) of the activations against coded rows r0..r1, in segments of
 * RMC_SEG blocks: 16 coded rows take a segment in turn, so the MC rows' activations of the
 * segment (MC KB a block) stay in L1; each row's float accumulators wait in fo between
 * segments and add the blocks in the same order as one pass would (the same bits). */
static void reduce_fast_asm(const kr_args *a, const dec *d, int MC, int64_t m0)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const int64_t rowbytes = w->cols * w->p.k / 8, qs = qa->npad * 4, cs = qa->nblk * 4, nb = w->cols / 256;
    const int64_t pf = RMC_PFR * rowbytes, nbb = 32 * w->p.k, seg = MC == 1 ? nb : RMC_SEG;
    const __mmask16 m1 = 1;
    const __mmask8 m3 = 3;
    __m512 fo[RMC_ROWS][4];   /* [row, m]: the float accumulators */
    for (int64_t rc = a->r0; rc < a->r1; rc += RMC_ROWS) {
        const int64_t re = TCQ_MIN(a->r1, rc + RMC_ROWS);
        for (int64_t r = rc; r < re; r++)
            for (int m = 0; m < MC; m++) fo[r - rc][m] = _mm512_setzero_ps();
        for (int64_t s0 = 0; s0 < nb; s0 += seg)
            for (int64_t r = rc; r < re; r++) {
                const char *p = (const char *)w->codes + r * rowbytes + s0 * nbb;
                const uint32_t *q = qa->q4 + m0 * qa->npad + s0 * 256;
                const int32_t *c = qa->corr + m0 * qa->nblk + s0 * 4;
                const float *dd = qa->d + m0 * qa->nblk + s0 * 4;
                int64_t n = TCQ_MIN(seg, nb - s0);
                __m512 *fr = fo[r - rc];
                __m512i t;
                uint64_t r0, r1;
                switch (d->bc) {
                    RMC_CASE(2)
                    RMC_CASE(3)
                default:
                    RMC_CASE(4)
                }
            }
        for (int64_t r = rc; r < re; r++) {
            const float sc = _cvtsh_ss(w->scales[r]) * TCQ_RMAD_RINV;
            for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = _mm512_reduce_add_ps(fo[r - rc][m]) * sc;
        }
    }
}

#define MC_SWITCH_(body, a, d, mc, m0, BC)                                                         \
    switch (mc) {                                                                                  \
    case 1: body(a, d, 1, m0, BC); break;                                                          \
    case 2: body(a, d, 2, m0, BC); break;                                                          \
    case 3: body(a, d, 3, m0, BC); break;                                                          \
    default: body(a, d, 4, m0, BC); break;                                                         \
    }
#define MC_SWITCH(body, a, d, mc, m0) BC_CALL(d, MC_SWITCH_(body, a, d, mc, m0, BC))

static void reduce_fast_shared(const kr_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    if (a->w->p.T == 256 && a->w->p.k >= 2 && !a->w->interleaved) {
        for (int64_t m0 = 0; m0 < a->M; m0 += 4) reduce_fast_asm(a, &d, (int)TCQ_MIN(4, a->M - m0), m0);
        return;
    }
    for (int64_t m0 = 0; m0 < a->M; m0 += 4) MC_SWITCH(reduce_fast_body, a, &d, TCQ_MIN(4, a->M - m0), m0);
}

static void reduce_exact_shared(const kr_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    for (int64_t m0 = 0; m0 < a->M; m0 += 4) MC_SWITCH(reduce_exact_body, a, &d, TCQ_MIN(4, a->M - m0), m0);
}

#ifndef TCQ_TILE_RR
/* Coded rows and activation rows per pass of the int16 tile (each <= 4): 3 x 4 holds 12 int and
 * 12 float accumulators, 3 rows' values and the activation in 28 of the 32 zmm registers; it
 * measured 4-9 % faster than 2 x 4, and 4 x 2 or 4 x 3 slower (bench/NOTES.md, session 16). */
#define TCQ_TILE_RR 3
#define TCQ_TILE_MC 4
#endif

/* tile, int16: decode a coded row once to int16 code values y (vpdpbusd against ones seeded
 * with -510, vpackssdw of two groups), then each activation row costs one vpdpwssd per 32
 * weights (two products per lane instead of vpdpbusd's one useful byte sum) and a fold every
 * TCQ_Q16_CHUNK weights; one f32 step per activation row (kq_act.q16).
 * A pass: RR coded rows (yr: their int16 values, row r + h at yr + h nv) against MC activation rows:
 * each activation vector, loaded once, feeds all RR rows' vpdpwssd.  With one coded row against
 * 8 activation rows the activations (8 x 2 bytes x cols: 80 KB at 5120) streamed from L2 once per
 * coded row.  Per output the same vpdpwssd sequence and fold whatever RR and MC are, so the same
 * bits. */
AI void reduce_fast_tile16_rowsN(const kr_args *a, const __m512i *yr, int64_t nv, int64_t r, const int RR, const int MC,
                                 int64_t m0)
{
    const kq_act *qa = a->qa;
    const int64_t per = TCQ_Q16_CHUNK / 32;
    __m512 facc[4][4];
    for (int h = 0; h < RR; h++)
        for (int m = 0; m < MC; m++) facc[h][m] = _mm512_setzero_ps();
    for (int64_t v0 = 0; v0 < nv; v0 += per) {
        __m512i iacc[4][4];
        for (int h = 0; h < RR; h++)
            for (int m = 0; m < MC; m++) iacc[h][m] = _mm512_setzero_si512();
        const int64_t v1 = TCQ_MIN(nv, v0 + per);
        for (int64_t v = v0; v < v1; v++) {
            __m512i y[4];
            for (int h = 0; h < RR; h++) y[h] = _mm512_load_si512(yr + h * nv + v);
            for (int m = 0; m < MC; m++) {
                const __m512i q = _mm512_load_si512(qa->q16 + (m0 + m) * qa->npad + v * 32);
                for (int h = 0; h < RR; h++) dpwssd_rr(&iacc[h][m], y[h], q);
            }
        }
        for (int h = 0; h < RR; h++)
            for (int m = 0; m < MC; m++) facc[h][m] = _mm512_add_ps(facc[h][m], _mm512_cvtepi32_ps(iacc[h][m]));
    }
    for (int h = 0; h < RR; h++) {
        const float f = _cvtsh_ss(a->w->scales[r + h]) * TCQ_RMAD_RINV;
        for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r + h] = _mm512_reduce_add_ps(facc[h][m]) * (qa->d16[m0 + m] * f);
    }
}

/* One coded row's int16 code values y = bytesum - 510 into yr [C/32] (vpackssdw order). */
AI void tile16_decode(const dec *d, const uint32_t *rb, int64_t nb, int64_t wpb, __m512i *yr, const int BC)
{
    const __m512i c510 = _mm512_set1_epi32(-510), ones = _mm512_set1_epi32(0x01010101);
    for (int64_t b = 0; b < nb; b++) {
        const blk bl = blk_load(d, (rb + b * wpb), BC);
        for (int g = 0; g < d->ng; g += 2) {
            const __m512i ya = _mm512_dpbusd_epi32(c510, dec_x(d, bl, g, BC), ones);
            const __m512i yb = _mm512_dpbusd_epi32(c510, dec_x(d, bl, g + 1, BC), ones);
            _mm512_store_si512(yr + (b * d->ng + g) / 2, _mm512_packs_epi32(ya, yb));
        }
    }
}

AI void reduce_fast_tile16_(const kr_args *a, const dec *dp, const int BC)
{
    const tcq_trellis *w = a->w;
    const int64_t wpb = w->p.T * w->p.k / 32, rw = w->cols * w->p.k / 32;
    const dec d = *dp;
    __m512i *yr = a->scratch;   /* [RR][C/32] int16 code values in vpackssdw order */
    const int64_t nb = w->cols / w->p.T, nv = w->cols / 32;
    /* TCQ_TILE_RR coded rows at a time where their values fit the kernel's scratch */
    const int RR = (size_t)TCQ_TILE_RR * nv * 64 <= kernel_private_bytes(w) ? TCQ_TILE_RR : 1;
    for (int64_t r = a->r0, rr; r < a->r1; r += rr) {
        rr = r + RR <= a->r1 ? RR : 1;
        for (int h = 0; h < rr; h++) tile16_decode(&d, w->codes + (r + h) * rw, nb, wpb, yr + h * nv, BC);
        /* rr is a constant in each call, so each instance keeps its accumulators in registers */
        for (int64_t m0 = 0; m0 < a->M; m0 += TCQ_TILE_MC) {
            const int mc = (int)TCQ_MIN(TCQ_TILE_MC, a->M - m0);
            if (mc == TCQ_TILE_MC) {
                if (rr > 1) reduce_fast_tile16_rowsN(a, yr, nv, r, TCQ_TILE_RR, TCQ_TILE_MC, m0);
                else reduce_fast_tile16_rowsN(a, yr, nv, r, 1, TCQ_TILE_MC, m0);
            } else
                for (int64_t m = m0; m < m0 + mc; m++) {
                    if (rr > 1) reduce_fast_tile16_rowsN(a, yr, nv, r, TCQ_TILE_RR, 1, m);
                    else reduce_fast_tile16_rowsN(a, yr, nv, r, 1, 1, m);
                }
        }
    }
}

static void reduce_fast_tile16(const kr_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    BC_CALL(&d, reduce_fast_tile16_(a, &d, BC));
}

AI void reduce_exact_tile_rows(const kr_args *a, const float *wr, int64_t r, const int MC, int64_t m0)
{
    const int64_t C = a->w->cols;
    __m512 facc[8];
    for (int m = 0; m < MC; m++) facc[m] = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
        const __m512 wv = _mm512_load_ps(wr + c);
        for (int m = 0; m < MC; m++) facc[m] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(a->x + (m0 + m) * C + c), facc[m]);
    }
    for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = _mm512_reduce_add_ps(facc[m]);
}

static void reduce_exact_tile(const kr_args *a)
{
    const tcq_trellis *w = a->w;
    float *wr = a->scratch;
    for (int64_t r = a->r0; r < a->r1; r++) {
        decode_rows(w, r, 0, w->cols / w->p.T, wr);
        for (int64_t m0 = 0; m0 < a->M; m0 += 8) {
            const int mc = (int)TCQ_MIN(8, a->M - m0);
            if (mc == 8) reduce_exact_tile_rows(a, wr, r, 8, m0);
            else if (mc >= 4) {
                reduce_exact_tile_rows(a, wr, r, 4, m0);
                for (int64_t m = m0 + 4; m < m0 + mc; m++) reduce_exact_tile_rows(a, wr, r, 1, m);
            } else
                for (int64_t m = m0; m < m0 + mc; m++) reduce_exact_tile_rows(a, wr, r, 1, m);
        }
    }
}

/* ---- axis 0 (scatter) -------------------------------------------------------------------- */

/* fast: MC activation rows x G groups (from g0) of integer accumulators live in registers over
 * one activation block of stored rows, then fold into acc (f32, in memory). */
AI void scatter_fast_body(const ks_args *a, const dec *d, const int MC, const int G, int64_t m0, int g0, const int BC)
{
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const kq_act *qa = a->qa;
    const int T = w->p.T;
    for (int64_t ic = a->i0; ic < a->i1; ic += QB) {
        const int64_t kb = ic / QB, ie = TCQ_MIN(a->i1, ic + QB);
        __m512i iacc[16];
        for (int m = 0; m < MC; m++)
            for (int g = 0; g < G; g++) iacc[m * G + g] = _mm512_set1_epi32(qa->corr[(m0 + m) * qa->nblk + kb]);
        for (int64_t i = ic; i < ie; i++) {
            const blk bl = blk_load(d, (cb + i * cs), BC);
            if (i + 8 < ie) {
                const char *pf = (const char *)(cb + (i + 8) * cs);
                _mm_prefetch(pf, _MM_HINT_T0);
                _mm_prefetch(pf + 64, _MM_HINT_T0);
            }
            __m512i qv[4];
            for (int m = 0; m < MC; m++) qv[m] = _mm512_set1_epi32((int)qa->q4[(m0 + m) * qa->npad + i]);
#pragma GCC unroll 16
            for (int g = 0; g < G; g++) {
                const __m512i x = dec_x(d, bl, g0 + g, BC);
                for (int m = 0; m < MC; m++) dpbusd_ip(&iacc[m * G + g], x, qv[m]);
            }
        }
        for (int m = 0; m < MC; m++) {
            const __m512 dv = _mm512_set1_ps(qa->d[(m0 + m) * qa->nblk + kb]);
            float *acc = a->acc + (m0 + m) * T + g0 * 16;
            for (int g = 0; g < G; g++)
                _mm512_storeu_ps(acc + g * 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[m * G + g]), dv,
                                                               _mm512_loadu_ps(acc + g * 16)));
        }
    }
}

AI void scatter_exact_body(const ks_args *a, const dec *d, const int MC, const int G, int64_t m0, int g0, const int BC)
{
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const int T = w->p.T;
    const int64_t in = w->rows;
    __m512 facc[16];
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < G; g++) facc[m * G + g] = _mm512_loadu_ps(a->acc + (m0 + m) * T + (g0 + g) * 16);
    for (int64_t i = a->i0; i < a->i1; i++) {
        const blk bl = blk_load(d, (cb + i * cs), BC);
        if (i + 8 < a->i1) {
            const char *pf = (const char *)(cb + (i + 8) * cs);
            _mm_prefetch(pf, _MM_HINT_T0);
            _mm_prefetch(pf + 64, _MM_HINT_T0);
        }
        const __m512 scale = _mm512_set1_ps(_cvtsh_ss(w->scales[i]));
        __m512 xv[4];
        for (int m = 0; m < MC; m++) xv[m] = _mm512_set1_ps(a->x[(m0 + m) * in + i]);
#pragma GCC unroll 16
        for (int g = 0; g < G; g++) {
            const __m512 wv = dec_w(d, bl, g0 + g, scale, BC);
            for (int m = 0; m < MC; m++) facc[m * G + g] = _mm512_fmadd_ps(wv, xv[m], facc[m * G + g]);
        }
    }
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < G; g++) _mm512_storeu_ps(a->acc + (m0 + m) * T + (g0 + g) * 16, facc[m * G + g]);
}

/* groups per pass so that MC * G accumulators fit the register file */
#define SC_DISPATCH_(body, a, d, mc, m0, BC)                                                       \
    do {                                                                                           \
        const int ng_ = (d)->ng;                                                                   \
        switch (mc) {                                                                              \
        case 1:                                                                                    \
            if (BC != 0 && ng_ >= 16) {                                                            \
                /* no block registers: 16 accumulators, each row's block read in one pass */       \
                for (int g0_ = 0; g0_ < ng_; g0_ += 16) body(a, d, 1, 16, m0, g0_, BC);            \
                break;                                                                             \
            }                                                                                      \
            /* 8 accumulators + the 8 group indices stay in registers; 16 spilled */              \
            for (int g0_ = 0; g0_ < ng_; g0_ += 8) {                                               \
                if (ng_ >= 8) body(a, d, 1, 8, m0, g0_, BC);                                       \
                else body(a, d, 1, 4, m0, g0_, BC);                                                \
            }                                                                                      \
            break;                                                                                 \
        case 2:                                                                                    \
            for (int g0_ = 0; g0_ < ng_; g0_ += 8) {                                               \
                if (ng_ >= 8) body(a, d, 2, 8, m0, g0_, BC);                                       \
                else body(a, d, 2, 4, m0, g0_, BC);                                                \
            }                                                                                      \
            break;                                                                                 \
        case 3:                                                                                    \
            for (int g0_ = 0; g0_ < ng_; g0_ += 4) body(a, d, 3, 4, m0, g0_, BC);                  \
            break;                                                                                 \
        default:                                                                                   \
            for (int g0_ = 0; g0_ < ng_; g0_ += 4) body(a, d, 4, 4, m0, g0_, BC);                  \
            break;                                                                                 \
        }                                                                                          \
    } while (0)
#define SC_DISPATCH(body, a, d, mc, m0) BC_CALL(d, SC_DISPATCH_(body, a, d, mc, m0, BC))

/* Row chunks outermost, then the column blocks: each chunk of rows is read column block after
 * column block while it is still in L1/L2 (better line and TLB use than one block column over
 * the whole partition). */
#define SCATTER_CHUNK_FAST QB
#define SCATTER_CHUNK_EXACT (4 * QB)

/* Fast, M = 1, T = 256, k = 2..4: one chunk of stored rows (<= QB, one activation block) in
 * asm, for the reason of reduce_fast_m1 (gcc kept the 16 groups' qword offsets in stack slots and
 * reloaded them every row).  The 16 groups' integer accumulators live in zmm16..31 over the
 * chunk; seed, vpdpbusd sequence and fold as scatter_fast_body(MC = 1, G = 16): the same bits.
 *   p: the chunk's first stored row's block (32k bytes, rows cs bytes apart)
 *   q: q4 of the chunk's rows   corr, dv: the activation block's   acc [T]: f32, read and written */
#define SM1_PF_ROWS 24   /* 8 left k = 3, 4 at 0.72 of the floor (bench/NOTES.md, session 17) */
#define SM1_STR_(x) #x
#define SM1_STR(x) SM1_STR_(x)
#define SM1_PF SM1_STR(SM1_PF_ROWS)
#define SM1_GRP(K, G, N) RM1_X(K, G) "vpdpbusd %[qv], %[t], %%zmm" #N "\n\t"
#define SM1_FOLD(N, OFF)                                                                           \
    "vcvtdq2ps %%zmm" #N ", %%zmm" #N "\n\t"                                                       \
    "vfmadd213ps " #OFF "(%[acc]), %[dv], %%zmm" #N "\n\t"                                         \
    "vmovups %%zmm" #N ", " #OFF "(%[acc])\n\t"
#define SM1_LOOP(K)                                                                                \
    "vpbroadcastd (%[corr]), %%zmm16\n\t"                                                          \
    "vmovdqa32 %%zmm16, %%zmm17\n\t vmovdqa32 %%zmm16, %%zmm18\n\t vmovdqa32 %%zmm16, %%zmm19\n\t" \
    "vmovdqa32 %%zmm16, %%zmm20\n\t vmovdqa32 %%zmm16, %%zmm21\n\t vmovdqa32 %%zmm16, %%zmm22\n\t" \
    "vmovdqa32 %%zmm16, %%zmm23\n\t vmovdqa32 %%zmm16, %%zmm24\n\t vmovdqa32 %%zmm16, %%zmm25\n\t" \
    "vmovdqa32 %%zmm16, %%zmm26\n\t vmovdqa32 %%zmm16, %%zmm27\n\t vmovdqa32 %%zmm16, %%zmm28\n\t" \
    "vmovdqa32 %%zmm16, %%zmm29\n\t vmovdqa32 %%zmm16, %%zmm30\n\t vmovdqa32 %%zmm16, %%zmm31\n\t" \
    "1:\n\t"                                                                                       \
    "lea (%[pp], %[dl]), %[r0]\n\t"                                                                 \
    "cmp $" SM1_PF ", %[n]\n\t"                                                                     \
    "cmove %[r0], %[pp]\n\t"                                                                        \
    "prefetcht0 (%[pp])\n\t"                                                                        \
    "prefetcht0 " RM1_NB_##K "-1(%[pp])\n\t"                                                       \
    "add %[cs], %[pp]\n\t"                                                                          \
    "vpbroadcastd (%[q]), %[qv]\n\t"                                                               \
    RM1_WRAP_##K RM1_DEC "vpdpbusd %[qv], %[t], %%zmm16\n\t"                                       \
    SM1_GRP(K, 1, 17) SM1_GRP(K, 2, 18) SM1_GRP(K, 3, 19) SM1_GRP(K, 4, 20) SM1_GRP(K, 5, 21)      \
    SM1_GRP(K, 6, 22) SM1_GRP(K, 7, 23) SM1_GRP(K, 8, 24) SM1_GRP(K, 9, 25) SM1_GRP(K, 10, 26)     \
    SM1_GRP(K, 11, 27) SM1_GRP(K, 12, 28) SM1_GRP(K, 13, 29) SM1_GRP(K, 14, 30) SM1_GRP(K, 15, 31) \
    "add %[cs], %[p]\n\t"                                                                          \
    "add $4, %[q]\n\t"                                                                             \
    "dec %[n]\n\t"                                                                                 \
    "jnz 1b\n\t"                                                                                   \
    SM1_FOLD(16, 0) SM1_FOLD(17, 64) SM1_FOLD(18, 128) SM1_FOLD(19, 192) SM1_FOLD(20, 256)         \
    SM1_FOLD(21, 320) SM1_FOLD(22, 384) SM1_FOLD(23, 448) SM1_FOLD(24, 512) SM1_FOLD(25, 576)      \
    SM1_FOLD(26, 640) SM1_FOLD(27, 704) SM1_FOLD(28, 768) SM1_FOLD(29, 832) SM1_FOLD(30, 896)      \
    SM1_FOLD(31, 960)
#define SM1_ASM(K)                                                                                 \
    __asm__ volatile(SM1_LOOP(K)                                                                   \
                     : [p] "+r"(p), [q] "+r"(q), [n] "+r"(n), [pp] "+r"(pp), [t] "=&v"(t),          \
                       [qv] "=&v"(qv), [r0] "=&r"(r0), [r1] "=&r"(r1)                              \
                     : [sh] "v"(d->shbc), [mk] "v"(d->mask), [mul] "v"(d->mul), [ad] "v"(d->add),  \
                       [m3] "Yk"(m3), [cs] "r"(cs), [dl] "r"(dl), [corr] "r"(corr), [dv] "v"(dv),  \
                       [acc] "r"(acc)                                                              \
                     : "cc", "memory", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", \
                       "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31")

static void scatter_fast_m1(const ks_args *a, const dec *d, const char *next)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const uint32_t *cb;
    int64_t csw;
    kblock_col(w, a->b, &cb, &csw);
    const int64_t cs = csw * 4, kb = a->i0 / QB;
    const char *p = (const char *)(cb + a->i0 * csw);
    const uint32_t *q = qa->q4 + a->i0;
    const int32_t *corr = qa->corr + kb;
    const __m512 dv = _mm512_set1_ps(qa->d[kb]);
    float *acc = a->acc;
    int64_t n = a->i1 - a->i0;
    /* the prefetch runs SM1_PF rows ahead in the order of the reads: into the next pass (next,
     * NULL: none known, stay in this column) for this pass's last SM1_PF rows */
    const int64_t dl = next ? next - (p + n * cs) : 0;
    const char *pp = p + SM1_PF_ROWS * cs + (n < SM1_PF_ROWS ? dl : 0);
    const __mmask8 m3 = 3;
    __m512i t, qv;
    uint64_t r0, r1;
    if (d->bc == 2) SM1_ASM(2);
    else if (d->bc == 3) SM1_ASM(3);
    else SM1_ASM(4);
}

/* Fast, M = 2..4, T = 256, k = 2..4: the same for MC activation rows, in scatter_fast_body's
 * passes (MC = 2: two of G = 8 groups, MC = 3, 4: four of G = 4); the accumulator of row m, group
 * g0 + g in zmm(16 + mG + g).  Only a chunk's first pass prefetches (as scatter_fast_m1), the
 * later ones find the chunk's rows in L1.  Same bits as scatter_fast_body.
 *   q: q4 of row m0, rows qs bytes apart   cv: the rows' corr (int32 [4]) and d (f32 [4]) of the block
 *   acc: [MC, T] f32 from group g0 */
#define SMC_Q0 ""
#define SMC_Q1 ", %[qs], 1"
#define SMC_Q2 ", %[qs], 2"
#define SMC_Q3 ", %[qs3], 1"
#define SMC_DP(m, A) "vpdpbusd %[q" #m "], %[t], %%zmm" #A "\n\t"
#define SMC_G2(K, G, A0, A1) RM1_X(K, G) SMC_DP(0, A0) SMC_DP(1, A1)
#define SMC_G3(K, G, A0, A1, A2) SMC_G2(K, G, A0, A1) SMC_DP(2, A2)
#define SMC_G4(K, G, A0, A1, A2, A3) SMC_G3(K, G, A0, A1, A2) SMC_DP(3, A3)
#define SMC_W2(K, A0, A1) RM1_WRAP_##K RM1_DEC SMC_DP(0, A0) SMC_DP(1, A1)
#define SMC_W3(K, A0, A1, A2) SMC_W2(K, A0, A1) SMC_DP(2, A2)
#define SMC_W4(K, A0, A1, A2, A3) SMC_W3(K, A0, A1, A2) SMC_DP(3, A3)
/* row m's accumulators A0 and the registers LIST after it: seeded with its corr; folded into
 * acc + m T (.irp: the assembler repeats the lines for each register number r) */
#define SMC_SEED(m, A0, LIST)                                                                      \
    "vpbroadcastd 4*" #m "(%[cv]), %%zmm" #A0 "\n\t"                                              \
    ".irp r," LIST "\n\tvmovdqa32 %%zmm" #A0 ", %%zmm\\r\n\t.endr\n\t"
#define SMC_FOLD(m, A0, LIST)                                                                      \
    "vbroadcastss 16+4*" #m "(%[cv]), %[t]\n\t"                                                   \
    ".irp r," #A0 "," LIST "\n\t"                                                                  \
    "vcvtdq2ps %%zmm\\r, %%zmm\\r\n\t"                                                             \
    "vfmadd213ps " #m "*1024+(\\r-" #A0 ")*64(%[acc]), %[t], %%zmm\\r\n\t"                        \
    "vmovups %%zmm\\r, " #m "*1024+(\\r-" #A0 ")*64(%[acc])\n\t.endr\n\t"
#define SMC_SEEDS_2 SMC_SEED(0, 16, "17,18,19,20,21,22,23") SMC_SEED(1, 24, "25,26,27,28,29,30,31")
#define SMC_FOLDS_2 SMC_FOLD(0, 16, "17,18,19,20,21,22,23") SMC_FOLD(1, 24, "25,26,27,28,29,30,31")
#define SMC_SEEDS_3 SMC_SEED(0, 16, "17,18,19") SMC_SEED(1, 20, "21,22,23") SMC_SEED(2, 24, "25,26,27")
#define SMC_FOLDS_3 SMC_FOLD(0, 16, "17,18,19") SMC_FOLD(1, 20, "21,22,23") SMC_FOLD(2, 24, "25,26,27")
#define SMC_SEEDS_4 SMC_SEEDS_3 SMC_SEED(3, 28, "29,30,31")
#define SMC_FOLDS_4 SMC_FOLDS_3 SMC_FOLD(3, 28, "29,30,31")
#define SMC_GRPS_2_0(K)                                                                            \
    SMC_W2(K, 16, 24) SMC_G2(K, 1, 17, 25) SMC_G2(K, 2, 18, 26) SMC_G2(K, 3, 19, 27)               \
    SMC_G2(K, 4, 20, 28) SMC_G2(K, 5, 21, 29) SMC_G2(K, 6, 22, 30) SMC_G2(K, 7, 23, 31)
#define SMC_GRPS_2_1(K)                                                                            \
    SMC_G2(K, 8, 16, 24) SMC_G2(K, 9, 17, 25) SMC_G2(K, 10, 18, 26) SMC_G2(K, 11, 19, 27)          \
    SMC_G2(K, 12, 20, 28) SMC_G2(K, 13, 21, 29) SMC_G2(K, 14, 22, 30) SMC_G2(K, 15, 23, 31)
#define SMC_GRPS_3_0(K)                                                                            \
    SMC_W3(K, 16, 20, 24) SMC_G3(K, 1, 17, 21, 25) SMC_G3(K, 2, 18, 22, 26)                        \
    SMC_G3(K, 3, 19, 23, 27)
#define SMC_GRPS_3_1(K)                                                                            \
    SMC_G3(K, 4, 16, 20, 24) SMC_G3(K, 5, 17, 21, 25) SMC_G3(K, 6, 18, 22, 26)                     \
    SMC_G3(K, 7, 19, 23, 27)
#define SMC_GRPS_3_2(K)                                                                            \
    SMC_G3(K, 8, 16, 20, 24) SMC_G3(K, 9, 17, 21, 25) SMC_G3(K, 10, 18, 22, 26)                    \
    SMC_G3(K, 11, 19, 23, 27)
#define SMC_GRPS_3_3(K)                                                                            \
    SMC_G3(K, 12, 16, 20, 24) SMC_G3(K, 13, 17, 21, 25) SMC_G3(K, 14, 18, 22, 26)                  \
    SMC_G3(K, 15, 19, 23, 27)
#define SMC_GRPS_4_0(K)                                                                            \
    SMC_W4(K, 16, 20, 24, 28) SMC_G4(K, 1, 17, 21, 25, 29) SMC_G4(K, 2, 18, 22, 26, 30)            \
    SMC_G4(K, 3, 19, 23, 27, 31)
#define SMC_GRPS_4_1(K)                                                                            \
    SMC_G4(K, 4, 16, 20, 24, 28) SMC_G4(K, 5, 17, 21, 25, 29) SMC_G4(K, 6, 18, 22, 26, 30)         \
    SMC_G4(K, 7, 19, 23, 27, 31)
#define SMC_GRPS_4_2(K)                                                                            \
    SMC_G4(K, 8, 16, 20, 24, 28) SMC_G4(K, 9, 17, 21, 25, 29) SMC_G4(K, 10, 18, 22, 26, 30)        \
    SMC_G4(K, 11, 19, 23, 27, 31)
#define SMC_GRPS_4_3(K)                                                                            \
    SMC_G4(K, 12, 16, 20, 24, 28) SMC_G4(K, 13, 17, 21, 25, 29) SMC_G4(K, 14, 18, 22, 26, 30)      \
    SMC_G4(K, 15, 19, 23, 27, 31)
#define SMC_BC(m, i) "vpbroadcastd (%[q]" SMC_Q##m "), %[q" #m "]\n\t"
#define SMC_PF(K)                                                                                  \
    "lea (%[pp], %[dl]), %[r0]\n\t"                                                                \
    "cmp $" SM1_PF ", %[n]\n\t"                                                                    \
    "cmove %[r0], %[pp]\n\t"                                                                       \
    "prefetcht0 (%[pp])\n\t"                                                                       \
    "prefetcht0 " RM1_NB_##K "-1(%[pp])\n\t"                                                       \
    "add %[cs], %[pp]\n\t"
#define SMC_NOPF(K) ""
#define SMC_ASM(K, MC, P, PF)                                                                      \
    __asm__ volatile(SMC_SEEDS_##MC "1:\n\t" PF(K) RMC_EACH_##MC(SMC_BC, 0) SMC_GRPS_##MC##_##P(K) \
                     "add %[cs], %[p]\n\t"                                                         \
                     "add $4, %[q]\n\t"                                                            \
                     "dec %[n]\n\t"                                                                \
                     "jnz 1b\n\t" SMC_FOLDS_##MC                                                   \
                     : [p] "+r"(p), [q] "+r"(q), [n] "+r"(n), [pp] "+r"(pp), [t] "=&v"(t),          \
                       [q0] "=&v"(qv[0]), [q1] "=&v"(qv[1]), [q2] "=&v"(qv[2]), [q3] "=&v"(qv[3]), \
                       [r0] "=&r"(r0), [r1] "=&r"(r1)                                              \
                     : [sh] "v"(d->shbc), [mk] "v"(d->mask), [mul] "v"(d->mul), [ad] "v"(d->add),  \
                       [m3] "Yk"(m3), [cs] "r"(cs), [dl] "r"(dl), [cv] "r"(&cv), [acc] "r"(acc),   \
                       [qs] "r"(qs), [qs3] "r"(3 * qs)                                             \
                     : "cc", "memory", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", \
                       "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31")
/* pass P: groups P G .. P G + G - 1 */
#define SMC_PASS(K, MC, P, PF)                                                                     \
    do {                                                                                           \
        const char *p = p0, *pp = pp0;                                                             \
        const uint32_t *q = q0;                                                                    \
        int64_t n = n0;                                                                            \
        float *acc = acc0 + (P) * (MC == 2 ? 8 : 4) * 16;                                          \
        SMC_ASM(K, MC, P, PF);                                                                     \
    } while (0)
#define SMC_CASE(K)                                                                                \
    case K:                                                                                        \
        if (MC == 2) {                                                                             \
            SMC_PASS(K, 2, 0, SMC_PF);                                                             \
            SMC_PASS(K, 2, 1, SMC_NOPF);                                                           \
        } else if (MC == 3) {                                                                      \
            SMC_PASS(K, 3, 0, SMC_PF);                                                             \
            SMC_PASS(K, 3, 1, SMC_NOPF);                                                           \
            SMC_PASS(K, 3, 2, SMC_NOPF);                                                           \
            SMC_PASS(K, 3, 3, SMC_NOPF);                                                           \
        } else {                                                                                   \
            SMC_PASS(K, 4, 0, SMC_PF);                                                             \
            SMC_PASS(K, 4, 1, SMC_NOPF);                                                           \
            SMC_PASS(K, 4, 2, SMC_NOPF);                                                           \
            SMC_PASS(K, 4, 3, SMC_NOPF);                                                           \
        }                                                                                          \
        break;

/* rows m0..m0+MC-1 (2 <= MC <= 4) of one chunk (<= QB stored rows, one activation block) */
static void scatter_fast_mc(const ks_args *a, const dec *d, const char *next, int MC, int64_t m0)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const uint32_t *cb;
    int64_t csw;
    kblock_col(w, a->b, &cb, &csw);
    const int64_t cs = csw * 4, kb = a->i0 / QB, qs = qa->npad * 4;
    const char *p0 = (const char *)(cb + a->i0 * csw);
    const uint32_t *q0 = qa->q4 + m0 * qa->npad + a->i0;
    struct { int32_t corr[4]; float d[4]; } cv;
    for (int m = 0; m < MC; m++) {
        cv.corr[m] = qa->corr[(m0 + m) * qa->nblk + kb];
        cv.d[m] = qa->d[(m0 + m) * qa->nblk + kb];
    }
    float *acc0 = a->acc + m0 * 256;
    const int64_t n0 = a->i1 - a->i0;
    const int64_t dl = next ? next - (p0 + n0 * cs) : 0;
    const char *pp0 = p0 + SM1_PF_ROWS * cs + (n0 < SM1_PF_ROWS ? dl : 0);
    const __mmask8 m3 = 3;
    __m512i t, qv[4];
    uint64_t r0, r1;
    switch (d->bc) {
        SMC_CASE(2)
        SMC_CASE(3)
    default:
        SMC_CASE(4)
    }
}

static void scatter_fast_shared(const ks_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    const int T = a->w->p.T;
    for (int64_t j = 0; j < a->nbc * a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += SCATTER_CHUNK_FAST)
        for (int64_t cb = 0; cb < a->nbc; cb++) {
            ks_args s = *a;
            s.i0 = ic;
            s.i1 = TCQ_MIN(a->i1, ic + SCATTER_CHUNK_FAST);
            s.b = a->b + cb;
            s.acc = a->acc + cb * a->M * T;
            if (a->M == 1 && T == 256 && d.bc >= 2) {
                /* the pass after this one: the next column block, or the next chunk's first */
                const int64_t nic = cb + 1 < a->nbc ? ic : ic + SCATTER_CHUNK_FAST, ncb = cb + 1 < a->nbc ? cb + 1 : 0;
                const char *next = nic < a->i1 ? (const char *)kblock(a->w, nic, a->b + ncb) : NULL;
                scatter_fast_m1(&s, &d, next);
            } else if (T == 256 && d.bc >= 2) {
                const int64_t nic = cb + 1 < a->nbc ? ic : ic + SCATTER_CHUNK_FAST, ncb = cb + 1 < a->nbc ? cb + 1 : 0;
                const char *next = nic < a->i1 ? (const char *)kblock(a->w, nic, a->b + ncb) : NULL;
                for (int64_t m0 = 0; m0 < a->M; m0 += 4) {
                    const int mc = (int)TCQ_MIN(4, a->M - m0);
                    if (mc == 1) scatter_fast_m1(&s, &d, next);   /* M = 5, 9, ...: never in practice */
                    else scatter_fast_mc(&s, &d, next, mc, m0);
                }
            } else
                for (int64_t m0 = 0; m0 < a->M; m0 += 4)
                    SC_DISPATCH(scatter_fast_body, &s, &d, (int)TCQ_MIN(4, a->M - m0), m0);
        }
    const __m512 ri = _mm512_set1_ps(TCQ_RMAD_RINV);
    for (int64_t j = 0; j < a->nbc * a->M * T; j += 16)
        _mm512_storeu_ps(a->acc + j, _mm512_mul_ps(_mm512_loadu_ps(a->acc + j), ri));
}

static void scatter_exact_shared(const ks_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    const int T = a->w->p.T;
    for (int64_t j = 0; j < a->nbc * a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += SCATTER_CHUNK_EXACT)
        for (int64_t cb = 0; cb < a->nbc; cb++) {
            ks_args s = *a;
            s.i0 = ic;
            s.i1 = TCQ_MIN(a->i1, ic + SCATTER_CHUNK_EXACT);
            s.b = a->b + cb;
            s.acc = a->acc + cb * a->M * T;
            for (int64_t m0 = 0; m0 < a->M; m0 += 4) SC_DISPATCH(scatter_exact_body, &s, &d, (int)TCQ_MIN(4, a->M - m0), m0);
        }
}

/* tile: decode an activation block of stored rows (<= 64 rows x T) once into the scratch buffer
 * as byte sums bs = bytesum(x) in [0, 1020] (the code value is bs - 510, the -510 sum(q) seed
 * covers the offset), two stored rows per dword (row 2p in the low int16, 2p+1 in the high), then
 * run every (8 rows of M) x (2 groups) register block over it: one vpdpwssd, with the activation
 * pair (q[2p], q[2p+1]) as an embedded broadcast, adds two rows' products for 16 columns, where
 * vpdpbusd added one (its byte sum wastes 3 of 4 products).  The int32 sums are the same integers
 * as sum_i bs_i q_i + corr, exact, so the result is the same as the shared kernel's. */
AI void dpwssd_bc_ip(__m512i *acc, __m512i x, const int32_t *q)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(*acc) : "v"(x), "m"(*q));
}

AI void scatter_fast_tile_blk(const ks_args *a, const __m512i *xb, int ng, int64_t ic, int np, const int32_t *qp,
                              const int MC, int64_t m0, int g0)
{
    const kq_act *qa = a->qa;
    const int64_t kb = ic / QB;
    __m512i iacc[16];
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < 2; g++) iacc[m * 2 + g] = _mm512_set1_epi32(qa->corr[(m0 + m) * qa->nblk + kb]);
    for (int p = 0; p < np; p++) {
        const __m512i x0 = _mm512_load_si512(xb + p * ng + g0), x1 = _mm512_load_si512(xb + p * ng + g0 + 1);
        for (int m = 0; m < MC; m++) {
            dpwssd_bc_ip(&iacc[m * 2], x0, qp + m * (QB / 2) + p);
            dpwssd_bc_ip(&iacc[m * 2 + 1], x1, qp + m * (QB / 2) + p);
        }
    }
    for (int m = 0; m < MC; m++) {
        const __m512 dv = _mm512_set1_ps(qa->d[(m0 + m) * qa->nblk + kb]);
        float *acc = a->acc + (m0 + m) * a->w->p.T + g0 * 16;
        for (int g = 0; g < 2; g++)
            _mm512_storeu_ps(acc + g * 16,
                             _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[m * 2 + g]), dv, _mm512_loadu_ps(acc + g * 16)));
    }
}

AI void scatter_fast_tile_(const ks_args *a, const dec *dp, const int BC)
{
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const dec d = *dp;
    const int T = w->p.T;
    const kq_act *qa = a->qa;
    __m512i *xb = a->scratch;                           /* [QB/2 row pairs, ng] */
    int32_t *qp = (int32_t *)(xb + (QB / 2) * d.ng);    /* [8, QB/2] (q[2p], q[2p+1]) as int16 */
    const __m512i ones = _mm512_set1_epi32(0x01010101), zero = _mm512_setzero_si512();
    for (int64_t j = 0; j < a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += QB) {
        const int64_t n = TCQ_MIN(a->i1, ic + QB) - ic;
        const int np = (int)((n + 1) / 2);
        for (int p = 0; p < np; p++) {
            const int64_t i = ic + 2 * p;
            const int has1 = 2 * p + 1 < n;
            const blk b0 = blk_load(&d, (cb + i * cs), BC), b1 = has1 ? blk_load(&d, (cb + (i + 1) * cs), BC) : b0;
            for (int g = 0; g < d.ng; g++) {
                const __m512i s0 = _mm512_dpbusd_epi32(zero, dec_x(&d, b0, g, BC), ones);
                const __m512i s1 = has1 ? _mm512_dpbusd_epi32(zero, dec_x(&d, b1, g, BC), ones) : zero;
                _mm512_store_si512(xb + p * d.ng + g, _mm512_or_si512(s0, _mm512_slli_epi32(s1, 16)));
            }
        }
        for (int64_t m0 = 0; m0 < a->M; m0 += 8) {
            const int mc = (int)TCQ_MIN(8, a->M - m0);
            /* q of rows ic..ic+QB (zero-padded past n) widened to int16: dword p is the pair */
            for (int m = 0; m < mc; m++) {
                const __m512i q8 = _mm512_loadu_si512(qa->q + (m0 + m) * qa->npad + ic);
                _mm512_store_si512(qp + m * (QB / 2), _mm512_cvtepi8_epi16(_mm512_castsi512_si256(q8)));
                _mm512_store_si512(qp + m * (QB / 2) + 16, _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(q8, 1)));
            }
            for (int g0 = 0; g0 < d.ng; g0 += 2) switch (mc) {
                case 1: scatter_fast_tile_blk(a, xb, d.ng, ic, np, qp, 1, m0, g0); break;
                case 2: scatter_fast_tile_blk(a, xb, d.ng, ic, np, qp, 2, m0, g0); break;
                case 3: scatter_fast_tile_blk(a, xb, d.ng, ic, np, qp, 3, m0, g0); break;
                case 4: scatter_fast_tile_blk(a, xb, d.ng, ic, np, qp, 4, m0, g0); break;
                case 5: scatter_fast_tile_blk(a, xb, d.ng, ic, np, qp, 5, m0, g0); break;
                case 6: scatter_fast_tile_blk(a, xb, d.ng, ic, np, qp, 6, m0, g0); break;
                case 7: scatter_fast_tile_blk(a, xb, d.ng, ic, np, qp, 7, m0, g0); break;
                default: scatter_fast_tile_blk(a, xb, d.ng, ic, np, qp, 8, m0, g0); break;
                }
        }
    }
    const __m512 ri = _mm512_set1_ps(TCQ_RMAD_RINV);
    for (int64_t j = 0; j < a->M * T; j += 16) _mm512_storeu_ps(a->acc + j, _mm512_mul_ps(_mm512_loadu_ps(a->acc + j), ri));
}

static void scatter_fast_tile(const ks_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    BC_CALL(&d, scatter_fast_tile_(a, &d, BC));
}

AI void scatter_exact_tile_blk(const ks_args *a, const float *wb, int T, int64_t ic, int64_t n, const int MC,
                               int64_t m0, int g0)
{
    const int64_t in = a->w->rows;
    __m512 facc[16];
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < 4; g++) facc[m * 4 + g] = _mm512_loadu_ps(a->acc + (m0 + m) * T + (g0 + g) * 16);
    for (int64_t i = 0; i < n; i++) {
        __m512 xv[4];
        for (int m = 0; m < MC; m++) xv[m] = _mm512_set1_ps(a->x[(m0 + m) * in + ic + i]);
        for (int g = 0; g < 4; g++) {
            const __m512 wv = _mm512_load_ps(wb + i * T + (g0 + g) * 16);
            for (int m = 0; m < MC; m++) facc[m * 4 + g] = _mm512_fmadd_ps(wv, xv[m], facc[m * 4 + g]);
        }
    }
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < 4; g++) _mm512_storeu_ps(a->acc + (m0 + m) * T + (g0 + g) * 16, facc[m * 4 + g]);
}

static void scatter_exact_tile(const ks_args *a)
{
    const tcq_trellis *w = a->w;
    const int T = w->p.T;
    float *wb = a->scratch;   /* [QB rows, T] */
    for (int64_t j = 0; j < a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += QB) {
        const int64_t n = TCQ_MIN(a->i1, ic + QB) - ic;
        for (int64_t i = 0; i < n; i++) decode_rows(w, ic + i, a->b, 1, wb + i * T);
        for (int64_t m0 = 0; m0 < a->M; m0 += 4) {
            const int mc = (int)TCQ_MIN(4, a->M - m0);
            for (int g0 = 0; g0 < T / 16; g0 += 4) {
                if (mc == 4) scatter_exact_tile_blk(a, wb, T, ic, n, 4, m0, g0);
                else
                    for (int m = 0; m < mc; m++) scatter_exact_tile_blk(a, wb, T, ic, n, 1, m0 + m, g0);
            }
        }
    }
}

/* Fast axis 1, M = 2..4: the int16 tile kernel (one decode stored as int16 code values, half a
 * vpdpwssd per 16 weights per row) against the shared int8 kernel (one vpdpbusd per row), side by
 * side.  Sapphire Rapids: 0.72-0.75x at M=4, 0.90-1.02x at M=3, 1.01-1.08x at M=2 ("Broadcast
 * decoder and AMX tiles"); Zen 5: int8 0.80-0.85x of int16 at M=2, 0.81-0.93x at M=3,
 * 1.06-1.31x at M=4 (bench/NOTES.md "Zen 5"), hence int8 (the M1 entry) below M=4 here; the
 * AMX table (Sapphire Rapids) keeps int16 from M=2. */
static const tr_table table = {
    .isa = "avx512",
    .reduce = {{reduce_exact_shared, reduce_exact_shared, reduce_exact_tile},
               {reduce_fast_shared, reduce_fast_tile16, reduce_fast_tile16}},
    .scatter = {{scatter_exact_shared, scatter_exact_shared, scatter_exact_tile},
                {scatter_fast_shared, scatter_fast_shared, scatter_fast_tile}},
    .decode = decode_rows,
    .tag = {{NULL, NULL, NULL}, {NULL, "i16", "i16"}},
    .scatter_nbc = {{4, 4, 1}, {4, 4, 1}},
    .fast_shared_from = 4,
};

/* AMX-INT8: the fast tile-regime kernels (M = 5..; trellis_*_amx.c).  M = 2..4 keep the register
 * kernels: side by side (bench/NOTES.md) they beat the tile unit there, whose vector stores ->
 * tile loads -> TDPBUSD -> tile stores -> vector loads round trip costs about one M=1 pass. */
static const tr_table table_amx = {
    .isa = "avx512",
    .reduce = {{reduce_exact_shared, reduce_exact_shared, reduce_exact_tile},
               {reduce_fast_shared, reduce_fast_tile16, tcq_amx_reduce_fast}},
    .scatter = {{scatter_exact_shared, scatter_exact_shared, scatter_exact_tile},
                {scatter_fast_shared, scatter_fast_shared, tcq_amx_scatter_fast}},
    .decode = decode_rows,
    .tag = {{NULL, NULL, NULL}, {NULL, "i16", "amx"}},
    .stag = {{NULL, NULL, NULL}, {NULL, NULL, "amx"}},
    .scatter_nbc = {{4, 4, 1}, {4, 4, 4}},
    .qt = 1,
};

const tr_table *tcq_tr_avx512(void)
{
    const tcq_cpu_features *f = tcq_cpu();
    if (!(f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni && f->avx512vbmi)) return NULL;
    /* TCQ_NO_AMX=1 (read per call: the tests switch it) keeps the AVX-512 kernels */
    const char *e = getenv("TCQ_NO_AMX");
    return f->amx_int8 && !(e && *e == '1') ? &table_amx : &table;
}
