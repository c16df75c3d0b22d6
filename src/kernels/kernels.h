/* Kernels: internal contracts shared by the dispatcher (linear.c), the scalar reference
 * (ref/) and the per-ISA kernels (x86/).  Not installed. */
#ifndef TCQ_KERNELS_H
#define TCQ_KERNELS_H

#include "../core/internal.h"

#include <float.h>
#include <limits.h>
#include <math.h>

#define TCQ_RMAD_RINV (1.0f / TCQ_RMAD_DIV)

/* Quantized activations for the fast path, M rows over n positions (n padded to a multiple of
 * TCQ_FAST_QB with zeros).  For axis 0 the activation is x[i] * scale[i] (the row scale of stored
 * row i folded in); for axis 1 it is x itself. */
typedef struct kq_act {
    int64_t n, npad, nblk;     /* positions, the row stride, blocks of TCQ_FAST_QB: npad is nblk
                                * TCQ_FAST_QB or one block more (tcq_kq_prepare), zeros past the data */
    int64_t cap, mcap, bcap;   /* allocated M * npad, M (d16) and M * nblk (d, corr): separate, since
                                * a call with more rows of fewer positions fits cap but not mcap */
    int8_t *q;                 /* [M, npad] */
    uint32_t *q4;              /* [M, npad]: q replicated into the 4 bytes (vpdpbusd operand) */
    uint32_t *q2;              /* [M, npad]: q as two int16 (vpmaddwd operand, AVX2 without VNNI) */
    float *d;                  /* [M, nblk] dequantization step amax/127 */
    int32_t *corr;             /* [M, nblk] -510 * sum(q) over the block */
    /* Axis 1 only (scales == NULL): int16 activations with one step per row for the tile regime
     * (vpdpwssd against the decoded int16 code values y): d16 = amax/TCQ_Q16_MAX,
     * q = nearbyintf(x * (TCQ_Q16_MAX/amax)).  Stored per 32 positions in vpackssdw order of a
     * zmm: element e holds position 4*(e/8) + e%4 + 16*((e%8)/4) of the chunk. */
    int16_t *q16;              /* [M, npad] */
    float *d16;                /* [M] */
    /* Axis 1, the AMX kernels' B tiles (tcq_kq_transpose): q4, d and corr of 16 rows side by side,
     * qt[(nt*npad + i)*16 + n] = q4[(16nt + n)*npad + i], zero for rows past M. */
    uint32_t *qt;              /* [ceil(M/16), npad, 16] */
    float *dt;                 /* [ceil(M/16), nblk, 16] */
    int32_t *corrt;            /* [ceil(M/16), nblk, 16] */
    int64_t tcap, tbcap;       /* allocated ceil(M/16) * npad (qt) and * nblk (dt, corrt) */
} kq_act;

/* The step of a block (or, for q16, a row) from its max |a| (NaN when it holds a NaN or Inf):
 * inv = lim/amax and d = amax/lim, lim = 127 or TCQ_Q16_MAX.  Returns whether to quantize; if
 * not, q = 0 and d = 0 (all zeros, or amax below lim/FLT_MAX ~ 4e-37, where lim/amax would
 * overflow and round to garbage) or NaN (a non-finite input, which the outputs then show). */
static inline int kq_step(float amax, float lim, float *inv, float *d)
{
    const float i = lim / amax;
    if (amax > 0 && amax <= FLT_MAX && i <= FLT_MAX) {
        *inv = i;
        *d = amax / lim;
        return 1;
    }
    *inv = 0.0f;
    *d = amax >= 0 ? 0.0f : NAN;
    return 0;
}

/* |y q| <= 510 * 2047 < 2^20: TCQ_Q16_CHUNK of them sum exactly in int32 before the f32 fold */
#define TCQ_Q16_MAX 2047
#define TCQ_Q16_CHUNK 256

/* Argument bundles.  Reduce (axis 1): outputs r in [r0, r1) for all M rows, y[m*ldy + r].
 * Scatter (axis 0): stored rows i in [i0, i1) (a partition, i0 % TCQ_FAST_QB == 0) and column
 * blocks b..b+nbc-1: acc[(cb*M + m)*T + c] = sum_i W[(b+cb)*T + c, i] x[m, i], overwritten.
 * Several columns per call let a kernel read each row's neighbouring blocks together. */
typedef struct kr_args {
    const tcq_trellis *w;
    int64_t M;
    const float *x;            /* exact: [M, in] */
    const kq_act *qa;          /* fast */
    int64_t r0, r1;
    float *y;
    int64_t ldy;
    void *scratch;             /* kernel_private_bytes(w), 64-byte aligned, per thread */
} kr_args;

typedef struct ks_args {
    const tcq_trellis *w;
    int64_t M;
    const float *x;            /* exact: [M, in] */
    const kq_act *qa;          /* fast */
    int64_t i0, i1, b;
    int64_t nbc;               /* column blocks b .. b+nbc-1 (tables say how many a kernel takes) */
    float *acc;                /* [nbc, M, T] */
    void *scratch;
} ks_args;

#define KERNEL_SCRATCH (512 * 1024)
/* Kernel-private scratch: a fixed part plus one decoded coded row (4 bytes per weight); the
 * dispatcher's own per-item buffers (acc, swiglu gate/up) follow it. */
static inline size_t kernel_private_bytes(const tcq_trellis *w)
{
    return KERNEL_SCRATCH / 2 + (((size_t)w->cols * 4 + 63) / 64) * 64;
}

/* tcq_trellis_block() inline, for inner loops (the interleave geometry of trellis.c: two k=3
 * blocks of 24 words per 48-word group, groups first). */
static inline const uint32_t *kblock(const tcq_trellis *w, int64_t r, int64_t blk)
{
    if (!w->interleaved) return w->codes + r * (w->cols * w->p.k / 32) + blk * (w->p.T * w->p.k / 32);
    return w->codes + (blk >> 1) * w->rows * 48 + r * 48 + (blk & 1) * 24;
}

/* Block b of every coded row is base + r * stride (also with the interleave): hoists the
 * address arithmetic out of the scatter kernels' row loops. */
static inline void kblock_col(const tcq_trellis *w, int64_t b, const uint32_t **base, int64_t *stride)
{
    *base = kblock(w, 0, b);
    *stride = w->interleaved ? 48 : w->cols * w->p.k / 32;
}

typedef void (*kr_fn)(const kr_args *a);
typedef void (*ks_fn)(const ks_args *a);
/* Decode blocks [b0, b0+nb) of coded row r to f32 (value * scale, exact contract). */
typedef void (*kd_fn)(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, float *out);

enum { KP_EXACT = 0, KP_FAST = 1, KP_COUNT };
enum { KRG_M1 = 0, KRG_SHARED = 1, KRG_TILE = 2, KRG_COUNT };

/* One ISA's trellis kernels, indexed by path and regime.  NULL entries fall back to the scalar
 * reference.  name strings describe each entry for the bench and tests. */
#define TR_GEMM_NEVER INT_MAX

typedef struct tr_table {
    const char *isa;
    kr_fn reduce[KP_COUNT][KRG_COUNT];
    ks_fn scatter[KP_COUNT][KRG_COUNT];
    kd_fn decode;
    const char *tag[KP_COUNT][KRG_COUNT];   /* appended to reduce kernel names (NULL: none) */
    const char *stag[KP_COUNT][KRG_COUNT];  /* appended to scatter kernel names (NULL: none) */
    int scatter_nbc[KP_COUNT][KRG_COUNT];   /* column blocks a scatter call takes (0 means 1) */
    int qt;                                 /* fast reduce for M >= 2 reads kq_act.qt (AMX) */
    int fast_shared_from;                   /* fast reduce, shared regime: M below this runs the
                                             * M1 entry (it shares a decode among up to 4 rows);
                                             * 0: the shared entry for every M of the regime */
    kr_fn reduce_fast_gemm;                 /* the fast path's axis-1 GEMM regime: a blocked int16
                                             * kernel (NULL: decode + sgemm) */
    int gemm_from[2][2];                    /* first M of the GEMM regime (decode + sgemm) by
                                             * [axis != 0][exact, fast], measured per ISA;
                                             * TR_GEMM_NEVER: the tiles win at every M */
} tr_table;

extern const tr_table tcq_tr_ref;          /* ref/trellis_ref.c */
/* x86/trellis_avx2.c (NULL if the CPU lacks AVX2 + FMA + F16C); vnni: AVX-VNNI where the CPU has
 * it, else vpmaddubsw + vpmaddwd */
const tr_table *tcq_tr_avx2(int vnni);
/* x86/trellis_avx512x.c (kernels in trellis_{reduce,scatter,panel}_avx512x.c): needs VNNI + VBMI;
 * amx: the AMX entries where the CPU has AMX-INT8 */
const tr_table *tcq_tr_avx512(int amx);
void tcq_amx_scatter_fast(const ks_args *a);   /* x86/trellis_scatter_amx.c: tcq_cpu()->amx_int8 only */
void tcq_amx_reduce_fast(const kr_args *a);    /* x86/trellis_reduce_amx.c; needs qa->qt */
void tcq_avx512_reduce_fast_panel(const kr_args *a);   /* x86/trellis_panel_avx512x.c; needs qa->q16 */
/* Its micro-kernel: for 1 <= mr <= 6 rows, o[i][j] = sum over kp < nkp of the int16 pairs at
 * pan + kp ps bytes + 64 j (j < 4) times the pair broadcast from q + i qs + kp (int32 units); o
 * [mr][4] zmm, 64-byte aligned. */
void tcq_avx512_mk6x4(const void *pan, int64_t ps, int64_t nkp, const int32_t *q, int64_t qs, int mr, void *o);
/* Blocks [b0, b0 + nb) of axis-1 coded row r as int16 code values (bytesum - 510) in vpackssdw
 * order, 2 T bytes a block (x86/trellis_reduce_avx512x.c). */
void tcq_avx512_decode_i16(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, void *out);

/* Scalar reference kernels (also used by the SIMD files for edge cases). */
void tcq_ref_reduce_exact(const kr_args *a);
void tcq_ref_reduce_fast(const kr_args *a);
void tcq_ref_scatter_exact(const ks_args *a);
void tcq_ref_scatter_fast(const ks_args *a);
void tcq_ref_decode(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, float *out);

/* Fast-path activation preparation (prep.c). scales: [n] fp16 row scales for axis 0, or NULL. */
tcq_status tcq_kq_prepare(kq_act *qa, const float *x /* [M, n] */, int64_t M, int64_t n,
                          const uint16_t *scales);
/* ... the same, rows split over pool's threads (NULL: the caller's) */
tcq_status tcq_kq_prepare_pool(kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *scales,
                               tcq_pool *pool);
void tcq_kq_free(kq_act *qa);
/* Its arithmetic, on buffers already sized (n, npad, nblk set): the scalar definition and the
 * AVX2 / AVX-512 versions (prep_avx2.c, prep_avx512.c; the active ISA picks), equal bit for bit. */
void tcq_kq_fill_ref(kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *scales);
void tcq_kq_fill_avx2(kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *scales);
void tcq_kq_fill_avx512(kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *scales);
/* After tcq_kq_prepare (axis 1): fill qt, dt, corrt for tables with .qt set. */
tcq_status tcq_kq_transpose(kq_act *qa, int64_t M);

/* Dense f32 and affine kernels (dense.c): y[:, r0:r1] for M rows, f32 accumulation.  isa: the
 * caller's ISA (AVX-512 multiplies affine directly for M <= 4, else widens rows for sgemm).
 * scratch: (r1-r0) * in floats.  (Dense f16/bf16 run tcq_d16_*, below; tcq_dense_decode_rows
 * still widens them for tcq_weight_decode.) */
void tcq_dense_rows(const tcq_weight *w, const float *x, int64_t M, int64_t r0, int64_t r1, float *y,
                    int64_t ldy, float *scratch, int isa);
/* x86/dense_avx512.c: the same values as tcq_dense_decode_rows, 16 at a time. */
void tcq_dense_rows_avx512(const tcq_weight *w, const float *x, int64_t M, int64_t r0, int64_t r1, float *y,
                           int64_t ldy);
void tcq_dense_decode_rows_avx512(const tcq_weight *w, int64_t r0, int64_t r1, float *out);
/* Dequantize rows [r0, r1) of a dense or affine weight to f32 (out [r1-r0, in]). */
void tcq_dense_decode_rows(const tcq_weight *w, int64_t r0, int64_t r1, float *out);

/* ---- dense f16 / bf16 in their stored format (dense16.c drives, ref/ and x86/ compute) -------
 * Contract, y[m, r] = sum_k W[r, k] x[m, k]: the weights widened exactly to f32 in registers
 * (never a copy of the matrix), the activations the caller's f32, each term one fmaf, f32
 * accumulation.  Order:
 *   tiles (M below the table's gemm_from): k in blocks of kc; inside a block each of the ISA's
 *     L lanes (16 AVX-512, 8 AVX2) sums its own k ascending, then a fixed tree; the block sums
 *     are added to y in ascending order.  An output depends on its rows of W and x alone: the
 *     same bits for any M below gemm_from, loop order or thread count.
 *   GEMM and the scalar reference: one sequential fmaf sum over k from 0 (the same bits).
 * Roundings per output: at most kc/8 + log2(L) + K/kc + 1 (tiles) or K (sequential), so
 *     |y - sum_k W x (exact)| <= n 2^-24 sum_k |W x|      (n that count + 4; test_kernels).
 */
typedef struct kd16_args {
    const tcq_weight *w;       /* TCQ_WF_F16 or TCQ_WF_BF16 */
    int64_t M;
    const float *x;            /* [M, in] */
    float *y;
    int64_t ldy;
    const uint16_t *xb;        /* bf16 activations (gemm_dp only): [M, ldxb], zeros past in */
    int64_t ldxb;              /* in rounded up to 32 */
} kd16_args;

/* ---- dense bf16 and f16, bf16 activations (the fast path's GEMM regime) -------------------
 * TCQ_PATH_FAST and AUTO, bf16 or f16 weights, M >= the table's gemm_from, where the CPU has
 * AVX-512 BF16 (elsewhere the exact kernels above run).  Contract: the activations rounded once to
 * bf16 (round to nearest even, tcq_f32_to_bf16); f16 weights rounded to bf16 the same way
 * (tcq_f32_to_bf16(tcq_f16_to_f32(h)), a 16-row block at a time into scratch, kept in cache for
 * every row tile of the call); bf16 x bf16 products (exact in f32) accumulated in f32 by
 * vdpbf16ps (denormal inputs and results flushed to zero).  Order, from (W row, x row) alone: 16
 * lanes, lane l adding the products of k = 32 j + 2 l + 1 and then 32 j + 2 l, for j ascending,
 * one rounding each (the SDM's vdpbf16ps); then d16_hsum4_512's tree.  Bound per output, u =
 * 2^-24, n = K/16 + 5, bf16 weights:
 *     |y - sum_k W x| <= 2^-8 sum_k |W x| + n u (1 + 2^-8) sum_k |W x| + 2^-125 sum_k |W|
 * (2^-8: bf16's unit roundoff on x; the last term: flushed denormals).  f16 weights: the same
 * bound for the rounded weights bf(W), |bf(W) - W| <= 2^-8 |W| (never a bf16 denormal: f16's
 * range sits inside bf16's normal one), so against W itself
 *     |y - sum_k W x| <= (2^-7 + 2^-16) sum_k |W x| + n u (1 + 2^-8)^2 sum_k |W x| + 2^-125 (1 + 2^-8) sum_k |W|.
 * Why rounding f16 weights is acceptable on the fast path: most f16 checkpoints are bf16-trained
 * models cast to f16, where every weight in f16's normal range has at most 8 significant bits and
 * the rounding gives it back exactly; otherwise the weight moves by at most bf16's unit roundoff,
 * the error already accepted for the activations.  The exact path (f32 activations, W widened
 * exactly) stays the reference.  ref/dense_ref.c (tcq_d16_ref_dp) writes the order out in C;
 * test_kernels holds the kernel to the bound. */
typedef void (*kd16_gemm_fn)(const kd16_args *a, int64_t r0, int64_t r1, void *scratch);
/* x/dense16_dp_avx512x.c: the GEMM (outputs [r0, r1), r1 - r0 <= 16, of every row; scratch: f16
 * weights, 16 rows of ldxb bf16, 64-byte aligned; unused for bf16), the rounding of rows [m0, m1)
 * of x [M, K] into xb [M, ldxb], and of f16 weight rows [r0, r1) of W [., K] into wb [r1 - r0, ld] */
kd16_gemm_fn tcq_d16_gemm_dp_avx512x(void);
void tcq_d16_round_bf16_avx512x(const float *x, int64_t K, int64_t m0, int64_t m1, uint16_t *xb, int64_t ldxb);
void tcq_d16_f16_to_bf16_avx512x(const uint16_t *W, int64_t K, int64_t r0, int64_t r1, uint16_t *wb, int64_t ld);
/* ref/dense_ref.c: the same order, scalar (any CPU; the golden of the order above) */
void tcq_d16_round_bf16_ref(const float *x, int64_t K, int64_t m0, int64_t m1, uint16_t *xb, int64_t ldxb);
void tcq_d16_ref_dp(const kd16_args *a, int64_t r0, int64_t r1);

/* One ISA's kernels for one format.  tile: rows [m0, m0+mr) x outputs [n0, n0+nv) (nv <= 4) over
 * k in [k0, k0+kl) (kl <= kc); y = the block's sum if first, else y + it.  pf (NULL: none): the
 * next group of 4 weight rows, which the tile may prefetch linearly as it goes, 4 rows' bytes
 * per k (a hint only: it never changes a result, and a prefetch past the matrix does not fault). */
typedef struct kd16_isa {
    const char *name;
    int mr;                    /* activation rows per tile (and the most the tile takes) */
    int64_t kc, mc;            /* k block (part of the contract), M chunk (cache only) */
    int64_t mg;                /* M up to which the tiles run group by group (dense16.c) */
    void (*tile)(const kd16_args *a, int64_t m0, int mr, int64_t n0, int nv, int64_t k0, int64_t kl, int first,
                 const void *pf);
    /* M = 1 (NULL: the tiles), unless a regime other than m1 is pinned: outputs [r0, r1) one at a
     * time, the tiles' sums bit for bit */
    void (*row)(const kd16_args *a, int64_t r0, int64_t r1);
    const char *row_name;
    /* The GEMM regime from M = gemm_from (NULL: none): outputs [r0, r1), r1 - r0 <= 64, of every
     * row, each one sequential fmaf sum over k from 0.  scratch: a 32 KB panel, 64-byte aligned. */
    void (*gemm)(const kd16_args *a, int64_t r0, int64_t r1, void *scratch);
    const char *gemm_name;
    int64_t gemm_from;
} kd16_isa;

const kd16_isa *tcq_d16_avx512(tcq_wformat fmt);   /* x86/dense16_avx512.c */
const kd16_isa *tcq_d16_avx2(tcq_wformat fmt);     /* x86/dense16_avx2.c (F16C) */
/* Outputs [r0, r1) of every row through one ISA's tiles (dense16.c). */
void tcq_d16_rows(const kd16_isa *k, const kd16_args *a, int64_t r0, int64_t r1);
/* ref/dense_ref.c: the contract as one sequential sum per output (the golden). */
void tcq_d16_ref(const tcq_weight *w, const float *x, int64_t M, int64_t r0, int64_t r1, float *y, int64_t ldy);

#endif
