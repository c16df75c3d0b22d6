/* The AVX-512 fast-path kernels for the artifacts' block shape (T = 256, k = 2..4) at M = 1..4,
 * with their inner loops in inline asm: reduce_fast_asm (axis 1) and scatter_fast_mc (axis 0);
 * and the axis-1 int16 tile's passes (any shape) and its T = 256 decode.
 * trellis_{reduce,scatter}_avx512x.c's intrinsics bodies compute the same sums in the same order (the same bits;
 * test_kernels and the bench compare them with the scalar reference) and serve every other shape.
 *
 * Why asm: gcc compiled those bodies for this shape to 0.65-0.69 ns per group of 16 weights on Zen
 * 5 (one thread, L2-resident or not) where the same instruction sequence in a bare loop runs at
 * 0.52 (bench/micro/reduce_loop.c): it reloaded the decode constants from the stack every block,
 * rebuilt activation addresses with lea/shl, kept the groups' qword offsets in stack slots and
 * carried values through vector registers.  Here the constants stay in registers and every
 * address is a base plus an assembler-computed immediate (docs/PERFORMANCE.md, session 17).
 *
 * trellis_reduce_avx512x.c and trellis_scatter_avx512x.c include this (static functions, its dec
 * and QB; marked unused, since each file calls only its axis's). */
#ifndef TCQ_TRELLIS_ASM_AVX512_H
#define TCQ_TRELLIS_ASM_AVX512_H

#include "trellis_dec_avx512.h"

/* ---- the decoder (both axes) ----------------------------------------------------------------
 * dec_x's broadcast decoder for block pointer p into register t.  Offsets are assembler
 * expressions of literals (an "i" operand from BC would not compile at -O0): group g's qword at
 * 30k - 2kg (k = 4: 120 - 8g, lanes 0..3 from 4 bytes further); the wrap group 0's qword is put
 * together with shrd in r0/r1. */
#define RM1_NB_2 "64"
#define RM1_NB_3 "96"
#define RM1_NB_4 "128"
#define RM1_O0_2 "60"
#define RM1_O0_3 "90"
#define RM1_O0_4 "120"
#define RM1_K2_2 "4"
#define RM1_K2_3 "6"
#define RM1_K2_4 "8"
/* The block pointer is operand P ("p" in the kernels below; the axis-0 tile's pair decode reads two
 * rows). */
#define RM1_HIP_2(G, P) ""
#define RM1_HIP_3(G, P) ""
#define RM1_HIP_4(G, P) "vpbroadcastq " RM1_O0_4 "+4-8*" #G "(%[" P "]), %[t]%{%[m3]%}\n\t"
/* k <= 3: group 0's qword = the block's last 8 bytes >> (64 - 16k) | its first 8 << 16k.
 * k = 4: lanes 4..15 from the block's last 8 bytes, lanes 0..3 from its last 4 and first 4. */
#define RM1_WRAPP_K3(K, SHR, P)                                                                    \
    "mov " RM1_NB_##K "-8(%[" P "]), %[r0]\n\t"                                                    \
    "mov (%[" P "]), %[r1]\n\t"                                                                    \
    "shrd $" SHR ", %[r1], %[r0]\n\t"                                                              \
    "vpbroadcastq %[r0], %[t]\n\t"
#define RM1_WRAPP_2(P) RM1_WRAPP_K3(2, "32", P)
#define RM1_WRAPP_3(P) RM1_WRAPP_K3(3, "16", P)
#define RM1_WRAPP_4(P)                                                                             \
    "mov " RM1_NB_4 "-8(%[" P "]), %[r0]\n\t"                                                      \
    "mov (%[" P "]), %[r1]\n\t"                                                                    \
    "vpbroadcastq %[r0], %[t]\n\t"                                                                 \
    "shrd $32, %[r1], %[r0]\n\t"                                                                   \
    "vpbroadcastq %[r0], %[t]%{%[m3]%}\n\t"
#define RM1_WRAP_2 RM1_WRAPP_2("p")
#define RM1_WRAP_3 RM1_WRAPP_3("p")
#define RM1_WRAP_4 RM1_WRAPP_4("p")
#define RM1_DEC                                                                                    \
    "vpmultishiftqb %[t], %[sh], %[t]\n\t"                                                         \
    "vpandd %[t], %[mk], %[t]\n\t"                                                                 \
    "vpmulld %[mul], %[t], %[t]\n\t"                                                               \
    "vpaddd %[ad], %[t], %[t]\n\t"
/* group G's x in t */
#define RM1_XP(K, G, P)                                                                            \
    "vpbroadcastq " RM1_O0_##K "-" RM1_K2_##K "*" #G "(%[" P "]), %[t]\n\t" RM1_HIP_##K(G, P) RM1_DEC
#define RM1_X(K, G) RM1_XP(K, G, "p")
/* group 0 (the wrap) */
#define RM1_X0P(K, P) RM1_WRAPP_##K(P) RM1_DEC

/* ---- axis 1 --------------------------------------------------------------------------------
 * A run of blocks of one coded row, as reduce_fast_body: per group of 16 weights the decoder and
 * one vpdpbusd per activation row, per activation block (4 groups) the fold.
 *   p: the row's codes, 32k bytes a block   q: q4 of activation row 0, 1024 bytes a block
 *   c, dd: row 0's corr and d, 4 activation blocks a coded block   fo: [MC, 16] f32 accumulators,
 *   read and written   pf: bytes from a block to the one RMC_PFR rows below (prefetched)
 * Rows m = 0..MC-1 of the activations: q4 rows qs bytes apart, corr and d rows cs bytes apart
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
static __attribute__((unused)) void reduce_fast_asm(const kr_args *a, const dec *d, int MC, int64_t m0)
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

/* ---- axis 0 -------------------------------------------------------------------------------- */

/* One chunk of stored rows (<= QB, one activation block) of one column block for MC = 1..4
 * activation rows, in scatter_fast_body's passes (MC = 1: one of G = 16 groups, MC = 2: two of
 * G = 8, MC = 3, 4: four of G = 4); the integer accumulator of row m, group g0 + g in
 * zmm(16 + mG + g) over the chunk.  Same bits as scatter_fast_body.  A chunk's first pass
 * prefetches SMC_PF_ROWS rows ahead in the order of the reads (its last rows into the next pass:
 * the next column block, or the next chunk); the later passes find the chunk's rows in L1.
 *   q: q4 of row m0, rows qs bytes apart   cv: the rows' corr (int32 [4]) and d (f32 [4]) of the block
 *   acc: [MC, T] f32 from group g0 */
#define SMC_PF_ROWS 24   /* 8 left k = 3, 4 at 0.72 of the floor (docs/PERFORMANCE.md, session 17) */
#define SMC_STR_(x) #x
#define SMC_STR(x) SMC_STR_(x)
#define SMC_Q0 ""
#define SMC_Q1 ", %[qs], 1"
#define SMC_Q2 ", %[qs], 2"
#define SMC_Q3 ", %[qs3], 1"
#define SMC_DP(m, A) "vpdpbusd %[q" #m "], %[t], %%zmm" #A "\n\t"
#define SMC_G1(K, G, A0) RM1_X(K, G) SMC_DP(0, A0)
#define SMC_G2(K, G, A0, A1) SMC_G1(K, G, A0) SMC_DP(1, A1)
#define SMC_G3(K, G, A0, A1, A2) SMC_G2(K, G, A0, A1) SMC_DP(2, A2)
#define SMC_G4(K, G, A0, A1, A2, A3) SMC_G3(K, G, A0, A1, A2) SMC_DP(3, A3)
#define SMC_W1(K, A0) RM1_WRAP_##K RM1_DEC SMC_DP(0, A0)
#define SMC_W2(K, A0, A1) SMC_W1(K, A0) SMC_DP(1, A1)
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
#define SMC_SEEDS_1 SMC_SEED(0, 16, "17,18,19,20,21,22,23,24,25,26,27,28,29,30,31")
#define SMC_FOLDS_1 SMC_FOLD(0, 16, "17,18,19,20,21,22,23,24,25,26,27,28,29,30,31")
#define SMC_SEEDS_2 SMC_SEED(0, 16, "17,18,19,20,21,22,23") SMC_SEED(1, 24, "25,26,27,28,29,30,31")
#define SMC_FOLDS_2 SMC_FOLD(0, 16, "17,18,19,20,21,22,23") SMC_FOLD(1, 24, "25,26,27,28,29,30,31")
#define SMC_SEEDS_3 SMC_SEED(0, 16, "17,18,19") SMC_SEED(1, 20, "21,22,23") SMC_SEED(2, 24, "25,26,27")
#define SMC_FOLDS_3 SMC_FOLD(0, 16, "17,18,19") SMC_FOLD(1, 20, "21,22,23") SMC_FOLD(2, 24, "25,26,27")
#define SMC_SEEDS_4 SMC_SEEDS_3 SMC_SEED(3, 28, "29,30,31")
#define SMC_FOLDS_4 SMC_FOLDS_3 SMC_FOLD(3, 28, "29,30,31")
#define SMC_GRPS_1_0(K)                                                                            \
    SMC_W1(K, 16) SMC_G1(K, 1, 17) SMC_G1(K, 2, 18) SMC_G1(K, 3, 19) SMC_G1(K, 4, 20)              \
    SMC_G1(K, 5, 21) SMC_G1(K, 6, 22) SMC_G1(K, 7, 23) SMC_G1(K, 8, 24) SMC_G1(K, 9, 25)           \
    SMC_G1(K, 10, 26) SMC_G1(K, 11, 27) SMC_G1(K, 12, 28) SMC_G1(K, 13, 29) SMC_G1(K, 14, 30)      \
    SMC_G1(K, 15, 31)
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
    "cmp $" SMC_STR(SMC_PF_ROWS) ", %[n]\n\t"                                                      \
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
        float *acc = acc0 + (P) * (MC == 1 ? 16 : MC == 2 ? 8 : 4) * 16;                           \
        SMC_ASM(K, MC, P, PF);                                                                     \
    } while (0)
#define SMC_CASE(K)                                                                                \
    case K:                                                                                        \
        if (MC == 1) {                                                                             \
            SMC_PASS(K, 1, 0, SMC_PF);                                                             \
        } else if (MC == 2) {                                                                      \
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

/* rows m0..m0+MC-1 (MC <= 4) of one chunk; next: the next pass's first block (NULL: none known,
 * the prefetch stays in this column) */
static __attribute__((unused)) void scatter_fast_mc(const ks_args *a, const dec *d, const char *next, int MC, int64_t m0)
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
    const char *pp0 = p0 + SMC_PF_ROWS * cs + (n0 < SMC_PF_ROWS ? dl : 0);
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

/* ---- the int16 tile (axis 1, M >= 5): one pass ---------------------------------------------
 * tile16_pass (trellis_reduce_avx512x.c) for RR = 3 or 1 coded rows x 4 activation rows, the same
 * vpdpwssd sequence and fold: y (row h at y + h ys bytes) and q (activation row m at q + m qs
 * bytes) from position v0 on, n > 0 vectors; the 4 RR int sums fold into fa[h][m] at fa_h + 64 m.
 * As intrinsics, gcc kept the twelve accumulators on the stack (2x the time); here they are
 * zmm16..27 (acc[h][m] = zmm(16 + 4h + m)), the three rows' values zmm28..30, the activation zmm31. */
#define T16_DP3(A0, A1, A2, ADDR)                                                               \
    "vmovdqa64 " ADDR ", %%zmm31\n\t"                                                              \
    "vpdpwssd %%zmm31, %%zmm28, %%zmm" A0 "\n\t"                                                   \
    "vpdpwssd %%zmm31, %%zmm29, %%zmm" A1 "\n\t"                                                   \
    "vpdpwssd %%zmm31, %%zmm30, %%zmm" A2 "\n\t"
#define T16_DP1(A0, ADDR) "vpdpwssd " ADDR ", %%zmm28, %%zmm" A0 "\n\t"
#define T16_FOLD(A, OFF, FA)                                                                       \
    "vcvtdq2ps %%zmm" A ", %%zmm" A "\n\t"                                                         \
    "vaddps " OFF "(%[" FA "]), %%zmm" A ", %%zmm" A "\n\t"                                        \
    "vmovaps %%zmm" A ", " OFF "(%[" FA "])\n\t"
#define T16_FOLD4(A0, A1, A2, A3, FA)                                                              \
    T16_FOLD(A0, "0", FA) T16_FOLD(A1, "64", FA) T16_FOLD(A2, "128", FA) T16_FOLD(A3, "192", FA)
#define T16_CLOBBER                                                                                \
    "zmm16", "zmm17", "zmm18", "zmm19", "zmm20", "zmm21", "zmm22", "zmm23", "zmm24", "zmm25",      \
        "zmm26", "zmm27", "zmm28", "zmm29", "zmm30", "zmm31", "cc", "memory"

static __attribute__((unused)) void tile16_pass_asm3(const __m512i *y, int64_t ys, const int16_t *q, int64_t qs, int64_t n, float *fa0,
                             float *fa1, float *fa2)
{
    const int64_t q3 = 3 * qs;
    __asm__ volatile(
        "vpxord %%zmm16, %%zmm16, %%zmm16\n\tvmovdqa64 %%zmm16, %%zmm17\n\tvmovdqa64 %%zmm16, %%zmm18\n\t"
        "vmovdqa64 %%zmm16, %%zmm19\n\tvmovdqa64 %%zmm16, %%zmm20\n\tvmovdqa64 %%zmm16, %%zmm21\n\t"
        "vmovdqa64 %%zmm16, %%zmm22\n\tvmovdqa64 %%zmm16, %%zmm23\n\tvmovdqa64 %%zmm16, %%zmm24\n\t"
        "vmovdqa64 %%zmm16, %%zmm25\n\tvmovdqa64 %%zmm16, %%zmm26\n\tvmovdqa64 %%zmm16, %%zmm27\n\t"
        "1:\n\t"
        "vmovdqa64 (%[y]), %%zmm28\n\t"
        "vmovdqa64 (%[y],%[ys]), %%zmm29\n\t"
        "vmovdqa64 (%[y],%[ys],2), %%zmm30\n\t"
        T16_DP3("16", "20", "24", "(%[q])")
        T16_DP3("17", "21", "25", "(%[q],%[qs])")
        T16_DP3("18", "22", "26", "(%[q],%[qs],2)")
        T16_DP3("19", "23", "27", "(%[q],%[q3])")
        "add $64, %[y]\n\t"
        "add $64, %[q]\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        T16_FOLD4("16", "17", "18", "19", "f0")
        T16_FOLD4("20", "21", "22", "23", "f1")
        T16_FOLD4("24", "25", "26", "27", "f2")
        : [y] "+r"(y), [q] "+r"(q), [n] "+r"(n)
        : [ys] "r"(ys), [qs] "r"(qs), [q3] "r"(q3), [f0] "r"(fa0), [f1] "r"(fa1), [f2] "r"(fa2)
        : T16_CLOBBER);
}

static __attribute__((unused)) void tile16_pass_asm1(const __m512i *y, const int16_t *q, int64_t qs, int64_t n, float *fa0)
{
    const int64_t q3 = 3 * qs;
    __asm__ volatile(
        "vpxord %%zmm16, %%zmm16, %%zmm16\n\tvmovdqa64 %%zmm16, %%zmm17\n\t"
        "vmovdqa64 %%zmm16, %%zmm18\n\tvmovdqa64 %%zmm16, %%zmm19\n\t"
        "1:\n\t"
        "vmovdqa64 (%[y]), %%zmm28\n\t"
        T16_DP1("16", "(%[q])")
        T16_DP1("17", "(%[q],%[qs])")
        T16_DP1("18", "(%[q],%[qs],2)")
        T16_DP1("19", "(%[q],%[q3])")
        "add $64, %[y]\n\t"
        "add $64, %[q]\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        T16_FOLD4("16", "17", "18", "19", "f0")
        : [y] "+r"(y), [q] "+r"(q), [n] "+r"(n)
        : [qs] "r"(qs), [q3] "r"(q3), [f0] "r"(fa0)
        : T16_CLOBBER);
}

/* RR = 3 coded rows x 1 activation row (an M % 4 leftover row): acc[h] = zmm(16 + 4h) */
static __attribute__((unused)) void tile16_pass_asm3x1(const __m512i *y, int64_t ys, const int16_t *q, int64_t n, float *fa0, float *fa1,
                               float *fa2)
{
    __asm__ volatile(
        "vpxord %%zmm16, %%zmm16, %%zmm16\n\tvmovdqa64 %%zmm16, %%zmm20\n\tvmovdqa64 %%zmm16, %%zmm24\n\t"
        "1:\n\t"
        "vmovdqa64 (%[q]), %%zmm31\n\t"
        "vpdpwssd (%[y]), %%zmm31, %%zmm16\n\t"
        "vpdpwssd (%[y],%[ys]), %%zmm31, %%zmm20\n\t"
        "vpdpwssd (%[y],%[ys],2), %%zmm31, %%zmm24\n\t"
        "add $64, %[y]\n\t"
        "add $64, %[q]\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        T16_FOLD("16", "0", "f0") T16_FOLD("20", "0", "f1") T16_FOLD("24", "0", "f2")
        : [y] "+r"(y), [q] "+r"(q), [n] "+r"(n)
        : [ys] "r"(ys), [f0] "r"(fa0), [f1] "r"(fa1), [f2] "r"(fa2)
        : T16_CLOBBER);
}

/* The axis-0 int16 tile's decode at T = 256, k = 2..4 (scatter_fast_tile_): npairs pairs of stored
 * rows, rows p and p + csb bytes, the next pair 2 csb further; per group g, bytesum(row 0) |
 * bytesum(row 1) << 16 into o[16 pair + g]: RM1_XP on either row. */
#define ST16D_SUMS(G)                                                                              \
    "vpslld $16, %[yb], %[yb]\n\t"                                                                 \
    "vpord %[ya], %[yb], %[ya]\n\t"                                                                \
    "vmovdqa64 %[ya], 64*" #G "(%[o])\n\t"
#define ST16D_BS(Y) "vpxord %[" Y "], %[" Y "], %[" Y "]\n\tvpdpbusd %[ones], %[t], %[" Y "]\n\t"
#define ST16D_G(K, G) RM1_XP(K, G, "p") ST16D_BS("ya") RM1_XP(K, G, "p1") ST16D_BS("yb") ST16D_SUMS(G)
#define ST16D_LOOP(K)                                                                              \
    "1:\n\t"                                                                                       \
    "lea (%[p], %[cs]), %[p1]\n\t"                                                                 \
    RM1_X0P(K, "p") ST16D_BS("ya") RM1_X0P(K, "p1") ST16D_BS("yb") ST16D_SUMS(0)                   \
    ST16D_G(K, 1) ST16D_G(K, 2) ST16D_G(K, 3) ST16D_G(K, 4) ST16D_G(K, 5) ST16D_G(K, 6)            \
    ST16D_G(K, 7) ST16D_G(K, 8) ST16D_G(K, 9) ST16D_G(K, 10) ST16D_G(K, 11) ST16D_G(K, 12)         \
    ST16D_G(K, 13) ST16D_G(K, 14) ST16D_G(K, 15)                                                   \
    "lea (%[p], %[cs], 2), %[p]\n\t"                                                               \
    "add $1024, %[o]\n\t"                                                                          \
    "dec %[n]\n\t"                                                                                 \
    "jnz 1b\n\t"
#define ST16D_CASE(K)                                                                              \
    case K:                                                                                        \
        __asm__ volatile(ST16D_LOOP(K)                                                             \
                         : [p] "+r"(p), [o] "+r"(o), [n] "+r"(npairs), [p1] "=&r"(p1), [t] "=&v"(t), \
                           [ya] "=&v"(ya), [yb] "=&v"(yb), [r0] "=&r"(r0), [r1] "=&r"(r1)          \
                         : [sh] "v"(d->shbc), [mk] "v"(d->mask), [mul] "v"(d->mul),                \
                           [ad] "v"(d->add), [m3] "Yk"(m3), [ones] "v"(ones), [cs] "r"(csb)        \
                         : "cc", "memory");                                                        \
        break;

static __attribute__((unused)) void scatter_tile_decode_pairs(const dec *d, const char *p, int64_t csb, int64_t npairs, __m512i *o)
{
    const __m512i ones = _mm512_set1_epi32(0x01010101);
    const __mmask8 m3 = 3;
    const char *p1;
    __m512i t, ya, yb;
    uint64_t r0, r1;
    switch (d->bc) {
        ST16D_CASE(2)
        ST16D_CASE(3)
    default:
        ST16D_CASE(4)
    }
}

/* The int16 tile's decode of one coded row at T = 256, k = 2..4: tile16_decode's values
 * (bytesum - 510, vpackssdw of groups 2i and 2i + 1) for nb blocks of p into o (512 bytes a
 * block).  The generic loop spent 3.5 cycles a group (a runtime group loop, the wrap test,
 * offsets rebuilt each group): a third of the tile's time at M = 32. */
#define T16D_SEED(Y) "vmovdqa64 %[c510], %[" Y "]\n\tvpdpbusd %[ones], %[t], %[" Y "]\n\t"
#define T16D_Y(K, G, Y) RM1_X(K, G) T16D_SEED(Y)
#define T16D_ST(I) "vpackssdw %[yb], %[ya], %[ya]\n\tvmovdqa64 %[ya], 64*" #I "(%[o])\n\t"
#define T16D_PAIR(K, I, G0, G1) T16D_Y(K, G0, "ya") T16D_Y(K, G1, "yb") T16D_ST(I)
#define T16D_LOOP(K)                                                                               \
    "1:\n\t"                                                                                       \
    RM1_X0P(K, "p") T16D_SEED("ya")                                                                \
    T16D_Y(K, 1, "yb") T16D_ST(0)                                                                  \
    T16D_PAIR(K, 1, 2, 3) T16D_PAIR(K, 2, 4, 5) T16D_PAIR(K, 3, 6, 7) T16D_PAIR(K, 4, 8, 9)        \
    T16D_PAIR(K, 5, 10, 11) T16D_PAIR(K, 6, 12, 13) T16D_PAIR(K, 7, 14, 15)                        \
    "add $" RM1_NB_##K ", %[p]\n\t"                                                                \
    "add $512, %[o]\n\t"                                                                           \
    "dec %[n]\n\t"                                                                                 \
    "jnz 1b\n\t"
#define T16D_CASE(K)                                                                               \
    case K:                                                                                        \
        __asm__ volatile(T16D_LOOP(K)                                                              \
                         : [p] "+r"(p), [o] "+r"(o), [n] "+r"(n), [t] "=&v"(t), [ya] "=&v"(ya),    \
                           [yb] "=&v"(yb), [r0] "=&r"(r0), [r1] "=&r"(r1)                          \
                         : [sh] "v"(d->shbc), [mk] "v"(d->mask), [mul] "v"(d->mul),                \
                           [ad] "v"(d->add), [m3] "Yk"(m3), [c510] "v"(c510), [ones] "v"(ones)     \
                         : "cc", "memory");                                                        \
        break;

static __attribute__((unused)) void tile16_decode_asm(const dec *d, const char *p, int64_t n, __m512i *o)
{
    const __m512i c510 = _mm512_set1_epi32(-510), ones = _mm512_set1_epi32(0x01010101);
    const __mmask8 m3 = 3;
    __m512i t, ya, yb;
    uint64_t r0, r1;
    switch (d->bc) {
        T16D_CASE(2)
        T16D_CASE(3)
    default:
        T16D_CASE(4)
    }
}

#endif
