/* The kernel dispatcher: validates a call, picks the kernel by format x ISA x path x batch regime,
 * and splits the work into items fixed by the shape (never by the thread count) so the result is
 * bit-identical for any pool size. */
#include "kernels.h"
#include "registry.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Crossovers, measured by `tcq bench kernels` (docs/PERFORMANCE.md, "## CPU kernels"). */
enum {
    SHARED_MAX_M = 4,      /* M in 2..4: one decode shared by every row, in registers */
    REDUCE_ROWS = 16,      /* axis-1 outputs per work item: at least, and the granule (reduce_rows) */
    REDUCE_ROWS_MAX = 256, /* ... and at most */
    TAIL_ROWS = 64,        /* ... and in the last round of a long-item call (items_plan) */
    PARTITIONS = 4,        /* axis-0 input-row partitions, summed in order */
    SCATTER_COLS = 4,      /* axis-0 column blocks per work item */
    GEMM_TILE_BYTES = 4 << 20,   /* f32 weight tile decoded per sgemm call (per thread) */
    GEMM_KC = 512,         /* axis-0 GEMM: stored rows per sgemm call */
    DENSE_ROWS = 64,       /* dense/affine outputs per work item */
    DENSE16_ROWS = 32,     /* dense f16/bf16 outputs per work item (a multiple of the tiles' 4) */
    DENSE16_GROUP_ROWS = 128, /* ... where the tiles run group by group (M >= 2): the item's first
                                 group has no prefetch (kd16_isa.mg) */
    DENSE16_GEMM_ROWS = 64,   /* ... in a table's GEMM regime: one panel of 64 */
    DENSE16_DP_ROWS = 16,     /* ... in the bf16-activation GEMM: 16 weight rows (f16: their bf16 copy)
                                 stay in L2 for every tile */
    TILE_CHUNK_M = 128,    /* the tile regime takes a longer call in chunks of at most this many rows */
    PANEL_CHUNK_M = 256,   /* ... and the tables' own GEMM kernels */
};

struct tcq_kctx {
    tcq_pool *pool;
    tcq_kpath path;
    int force_isa;
    tcq_kregime force_regime;
    unsigned exclude;      /* TCQ_KV_* variants this context leaves out (tcq_kctx_exclude) */
    int nthreads;
    void **scratch;        /* [nthreads] */
    size_t scratch_size;
    kq_act qa;
    float *part;           /* axis-0 partial sums [P, M, out] */
    size_t part_cap;
    float *gu;             /* swiglu fallback [2, M, out] */
    size_t gu_cap;
    uint16_t *xb;          /* bf16 activations of the dense bf16 fast GEMM [M, ldxb] */
    size_t xb_cap;         /* in uint16 */
    char last[96];
};

const char *tcq_kregime_name(tcq_kregime r)
{
    static const char *const n[] = {"auto", "m1", "shared", "tile", "gemm"};
    return (unsigned)r < TCQ_KR_COUNT ? n[r] : "?";
}

tcq_status tcq_kctx_create(tcq_pool *pool, tcq_kpath path, tcq_kctx **out)
{
    if (!out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_kctx_create: out is NULL");
    *out = NULL;
    if (path != TCQ_PATH_AUTO && path != TCQ_PATH_EXACT && path != TCQ_PATH_FAST)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "kernel path %d is not auto, exact or fast", (int)path);
    tcq_kctx *c = calloc(1, sizeof *c);
    if (!c) return tcq_fail(TCQ_ERR_NOMEM, "kernel context");
    c->pool = pool;
    c->path = path;
    c->force_isa = -1;
    c->nthreads = tcq_pool_size(pool);
    c->scratch = calloc((size_t)c->nthreads, sizeof *c->scratch);
    if (!c->scratch) {
        free(c);
        return tcq_fail(TCQ_ERR_NOMEM, "kernel context scratch");
    }
    /* Our pool splits the work; OpenBLAS must not add its own threads underneath (and its result
     * must not depend on how many it has). */
    openblas_set_num_threads(1);
    *out = c;
    return TCQ_OK;
}

void tcq_kctx_free(tcq_kctx *c)
{
    if (!c) return;
    for (int i = 0; i < c->nthreads; i++) tcq_afree(c->scratch[i]);
    free(c->scratch);
    tcq_kq_free(&c->qa);
    tcq_afree(c->part);
    tcq_afree(c->gu);
    tcq_afree(c->xb);
    free(c);
}

tcq_status tcq_kctx_force(tcq_kctx *c, int isa, tcq_kregime regime)
{
    if (!c) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_kctx_force: ctx is NULL");
    if ((unsigned)regime >= TCQ_KR_COUNT) return tcq_fail(TCQ_ERR_INVALID_ARG, "regime %d unknown", (int)regime);
    if (isa >= 0) {
        if (isa >= TCQ_ISA_COUNT) return tcq_fail(TCQ_ERR_INVALID_ARG, "ISA %d unknown", isa);
        /* probe support without changing the process-wide choice */
        const tcq_isa keep = tcq_isa_active();
        TCQ_TRY(tcq_isa_set((tcq_isa)isa));
        tcq_isa_set(keep);
    }
    c->force_isa = isa;
    c->force_regime = regime;
    return TCQ_OK;
}

tcq_status tcq_kctx_exclude(tcq_kctx *c, unsigned variants)
{
    if (!c) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_kctx_exclude: ctx is NULL");
    if (variants & ~(unsigned)(TCQ_KV_NO_AVXVNNI | TCQ_KV_NO_AMX))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_kctx_exclude: unknown variant bits 0x%x", variants);
    c->exclude = variants;
    return TCQ_OK;
}

const char *tcq_kctx_last_kernel(const tcq_kctx *c) { return c ? c->last : ""; }

tcq_status tcq_kctx_force_kernel(tcq_kctx *c, const char *name)
{
    if (!c) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_kctx_force_kernel: ctx is NULL");
    const tcq_kernel_info *k = tcq_kernel_find(name);
    if (!k) return tcq_fail(TCQ_ERR_INVALID_ARG, "kernel '%s' is not in this CPU's registry", name ? name : "(null)");
    TCQ_TRY(tcq_kctx_force(c, k->isa, k->regime));
    c->exclude = k->exclude;
    if (k->path != TCQ_PATH_AUTO) c->path = k->path;
    return TCQ_OK;
}

static tcq_status ensure_scratch(tcq_kctx *c, size_t bytes)
{
    if (bytes < KERNEL_SCRATCH) bytes = KERNEL_SCRATCH;
    if (bytes <= c->scratch_size) return TCQ_OK;
    for (int i = 0; i < c->nthreads; i++) {
        tcq_afree(c->scratch[i]);
        c->scratch[i] = tcq_amalloc(bytes);
        if (!c->scratch[i]) {
            c->scratch_size = 0;
            return tcq_fail(TCQ_ERR_NOMEM, "kernel scratch of %zu bytes", bytes);
        }
    }
    c->scratch_size = bytes;
    return TCQ_OK;
}

static tcq_status ensure_buf(float **buf, size_t *cap, size_t floats, const char *what)
{
    if (floats <= *cap) return TCQ_OK;
    tcq_afree(*buf);
    *buf = tcq_amalloc(floats * 4);
    *cap = *buf ? floats : 0;
    return *buf ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "%s: %zu floats", what, floats);
}

/* ---- validation ------------------------------------------------------------------------- */

tcq_status tcq_weight_check(const tcq_weight *w)
{
    if (!w) return tcq_fail(TCQ_ERR_INVALID_ARG, "weight is NULL");
    if (w->out <= 0 || w->in <= 0 || w->out > INT32_MAX || w->in > INT32_MAX)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "weight shape [%lld, %lld] is empty or too large",
                        (long long)w->out, (long long)w->in);
    switch (w->fmt) {
    case TCQ_WF_F32:
    case TCQ_WF_F16:
    case TCQ_WF_BF16:
        if (!w->dense) return tcq_fail(TCQ_ERR_INVALID_ARG, "dense weight [%lld, %lld] has no data",
                                       (long long)w->out, (long long)w->in);
        return TCQ_OK;
    case TCQ_WF_TRELLIS:
        TCQ_TRY(tcq_trellis_check(&w->tr));
        if (tcq_trellis_out(&w->tr) != w->out || tcq_trellis_in(&w->tr) != w->in)
            return tcq_fail(TCQ_ERR_INVALID_ARG,
                            "trellis weight: axis %d codes [%lld, %lld] give W [%lld, %lld], "
                            "but the weight says [%lld, %lld]",
                            w->tr.axis, (long long)w->tr.rows, (long long)w->tr.cols,
                            (long long)tcq_trellis_out(&w->tr), (long long)tcq_trellis_in(&w->tr),
                            (long long)w->out, (long long)w->in);
        return TCQ_OK;
    case TCQ_WF_AFFINE: {
        const tcq_affine *a = &w->af;
        if (a->bits != 4 && a->bits != 8)
            return tcq_fail(TCQ_ERR_UNSUPPORTED, "affine weight: bits=%d (want 4 or 8)", a->bits);
        if (a->group_size != 32 && a->group_size != 64 && a->group_size != 128)
            return tcq_fail(TCQ_ERR_UNSUPPORTED, "affine weight: group_size=%d (want 32, 64, 128)",
                            a->group_size);
        if (a->out != w->out || a->in != w->in || a->in % a->group_size != 0)
            return tcq_fail(TCQ_ERR_INVALID_ARG,
                            "affine weight: shape [%lld, %lld] vs weight [%lld, %lld], group_size %d",
                            (long long)a->out, (long long)a->in, (long long)w->out, (long long)w->in,
                            a->group_size);
        if (a->sdtype != TCQ_DTYPE_F32 && a->sdtype != TCQ_DTYPE_F16 && a->sdtype != TCQ_DTYPE_BF16)
            return tcq_fail(TCQ_ERR_UNSUPPORTED, "affine weight: scales dtype %d (want F32, F16, BF16)",
                            (int)a->sdtype);
        if (!a->w || !a->scales || !a->biases)
            return tcq_fail(TCQ_ERR_INVALID_ARG, "affine weight: w, scales or biases is NULL");
        return TCQ_OK;
    }
    default: return tcq_fail(TCQ_ERR_INVALID_ARG, "weight format %d unknown", (int)w->fmt);
    }
}

tcq_status tcq_weight_decode(const tcq_weight *w, float *W)
{
    TCQ_TRY(tcq_weight_check(w));
    if (!W) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_weight_decode: output is NULL");
    if (w->fmt == TCQ_WF_TRELLIS) return tcq_trellis_decode(&w->tr, W);
    tcq_dense_decode_rows(w, 0, w->out, W);
    return TCQ_OK;
}

static int overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    const char *pa = a, *pb = b;
    return pa < pb + nb && pb < pa + na;
}

static tcq_status check_call(const tcq_weight *w, const float *x, const float *y, int64_t M, const tcq_kctx *c)
{
    if (!c) return tcq_fail(TCQ_ERR_INVALID_ARG, "kernel context is NULL");
    TCQ_TRY(tcq_weight_check(w));
    if (!x || !y) return tcq_fail(TCQ_ERR_INVALID_ARG, "linear: x or y is NULL");
    if (M < 1 || M > (1 << 24))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "linear: M=%lld is outside [1, 2^24]", (long long)M);
    if (overlaps(x, (size_t)(M * w->in) * 4, y, (size_t)(M * w->out) * 4))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "linear: x [%lld, %lld] and y [%lld, %lld] overlap",
                        (long long)M, (long long)w->in, (long long)M, (long long)w->out);
    return TCQ_OK;
}

/* ---- kernel selection ------------------------------------------------------------------- */

static const tr_table *table_for(int isa, unsigned exclude)
{
    const tr_table *t = NULL;
    if (isa == TCQ_ISA_AVX512) t = tcq_tr_avx512(!(exclude & TCQ_KV_NO_AMX));
    if (!t && isa >= TCQ_ISA_AVX2) t = tcq_tr_avx2(!(exclude & TCQ_KV_NO_AVXVNNI));
    return t ? t : &tcq_tr_ref;
}

static tcq_kregime pick_regime(const tcq_kctx *c, const tr_table *tab, int64_t M, int is_trellis, int axis,
                               int exact)
{
    const int ai = axis != 0, pi = exact ? 0 : 1;
    const int64_t gemm_from = tab->gemm_from[ai][pi];
    tcq_kregime r = c->force_regime;
    if (r == TCQ_KR_M1 && M != 1) r = TCQ_KR_AUTO;
    if (r != TCQ_KR_AUTO && !is_trellis) r = TCQ_KR_AUTO;
    if (r != TCQ_KR_AUTO) return r;
    if (M == 1) return TCQ_KR_M1;
    if (M <= SHARED_MAX_M) return TCQ_KR_SHARED;
    if (M < gemm_from) return TCQ_KR_TILE;
    return TCQ_KR_GEMM;
}

static int kpath_of(const tcq_kctx *c) { return c->path == TCQ_PATH_EXACT ? KP_EXACT : KP_FAST; }

/* the table column an axis-1 call of regime column rg takes (tr_table.fast_shared_from) */
static int reduce_col(const tr_table *tab, int kp, int rg, int64_t M)
{
    return kp == KP_FAST && rg == KRG_SHARED && M < tab->fast_shared_from ? KRG_M1 : rg;
}

/* ---- trellis, reduce / scatter regimes ---------------------------------------------------- */

typedef struct run_ctx {
    tcq_kctx *c;
    const tcq_trellis *w;
    int64_t M;
    const float *x;
    float *y;
    int64_t ldy;
    kr_fn rf;
    ks_fn sf;
    kd_fn df;
    int64_t nparts, part_rows, nb;
    int sf_nbc;
    int64_t rpi;               /* axis 1: outputs per work item (reduce_rows) ... */
    int64_t nbig, rpt;         /* ... for the first nbig items, then rpt (items_plan) */
    const tcq_weight *up;      /* swiglu */
    kr_fn rf_up;
    const tcq_trellis *wu;
} run_ctx;

/* Axis-1 outputs per work item: long runs of consecutive coded rows per thread.  With 2 threads,
 * 16-row items alternating between the threads cost 4-10 % on the reduce and ~14 % on the fused
 * SwiGLU against 256-row ones at M = 1 (each item restarts a hardware prefetch stream;
 * docs/PERFORMANCE.md, "Zen 5, session 12"), and 7-23 % at M = 2..32 once the int16 tile decoded in
 * rounds (session 19); still about 8 items a thread for the balance.  Rows are independent: any
 * split gives the same bits. */
static int64_t reduce_rows(const tcq_kctx *c, int64_t rows)
{
    const int64_t per = rows / (8 * (int64_t)tcq_pool_size(c->pool)) / REDUCE_ROWS * REDUCE_ROWS;
    return TCQ_MAX((int64_t)REDUCE_ROWS, TCQ_MIN((int64_t)REDUCE_ROWS_MAX, per));
}

/* The axis-1 items: long ones (reduce_rows), and for the last round (pool size x rpi rows) items
 * of TAIL_ROWS, so that the threads finish within a short item of each other: with 16 items of
 * 256 rows on 2 threads one item was 6 % of the call (docs/PERFORMANCE.md, session 17).  Returns the
 * item count. */
static int64_t items_plan(run_ctx *r, const tcq_kctx *c, int64_t rows)
{
    r->rpi = r->rpt = reduce_rows(c, rows);
    r->nbig = 0;
    if (r->rpi > TAIL_ROWS) {
        r->rpt = TAIL_ROWS;
        r->nbig = TCQ_MAX(0, rows - (int64_t)tcq_pool_size(c->pool) * r->rpi) / r->rpi;
    }
    return r->nbig + (rows - r->nbig * r->rpi + r->rpt - 1) / r->rpt;
}

static void item_rows(const run_ctx *r, int64_t rows, int64_t item, int64_t *r0, int64_t *r1)
{
    *r0 = item < r->nbig ? item * r->rpi : r->nbig * r->rpi + (item - r->nbig) * r->rpt;
    *r1 = TCQ_MIN(rows, *r0 + (item < r->nbig ? r->rpi : r->rpt));
}

static void reduce_item(void *arg, int64_t item, int thread)
{
    const run_ctx *r = arg;
    int64_t r0, r1;
    item_rows(r, r->w->rows, item, &r0, &r1);
    kr_args a = {.w = r->w, .M = r->M, .x = r->x, .qa = &r->c->qa, .r0 = r0, .r1 = r1,
                 .y = r->y, .ldy = r->ldy, .scratch = r->c->scratch[thread]};
    r->rf(&a);
}

static void scatter_item(void *arg, int64_t item, int thread)
{
    const run_ctx *r = arg;
    /* partition-minor: the threads' items in flight read different input-row ranges of the same
     * output columns, not neighbouring columns of the same rows (2-7 % faster at M = 1..4 with 2
     * threads, docs/PERFORMANCE.md "Zen 5, session 12"); each item owns its partials, so the order
     * does not change the bits */
    const int64_t p = item % r->nparts, b0 = (item / r->nparts) * SCATTER_COLS, T = r->w->p.T, out = r->w->cols;
    const int64_t nbc = TCQ_MIN(SCATTER_COLS, r->nb - b0);
    const int64_t i0 = p * r->part_rows, i1 = TCQ_MIN(r->w->rows, i0 + r->part_rows);
    float *acc = (float *)((char *)r->c->scratch[thread] + kernel_private_bytes(r->w));
    ks_args a = {.w = r->w, .M = r->M, .x = r->x, .qa = &r->c->qa, .i0 = i0, .i1 = i1, .b = b0, .nbc = nbc,
                 .acc = acc, .scratch = r->c->scratch[thread]};
    if (r->sf_nbc >= nbc)
        r->sf(&a);
    else
        /* a kernel that takes one column block per call */
        for (int64_t cb = 0; cb < nbc; cb++) {
            ks_args one = a;
            one.b = b0 + cb;
            one.nbc = 1;
            one.acc = acc + cb * r->M * T;
            r->sf(&one);
        }
    float *dst = r->c->part + p * r->M * out;
    for (int64_t cb = 0; cb < nbc; cb++)
        for (int64_t m = 0; m < r->M; m++)
            memcpy(dst + m * out + (b0 + cb) * T, acc + (cb * r->M + m) * T, (size_t)T * 4);
}

/* y = sum of the partitions, in partition order; columns split in fixed chunks */
static void partsum_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const run_ctx *r = arg;
    const int64_t out = r->w->cols, M = r->M;
    const int64_t j0 = item * 4096, j1 = TCQ_MIN(M * out, j0 + 4096);
    for (int64_t j = j0; j < j1; j++) {
        float s = r->c->part[j];
        for (int64_t p = 1; p < r->nparts; p++) s += r->c->part[p * M * out + j];
        r->y[(j / out) * r->ldy + j % out] = s;
    }
}

/* ---- trellis, GEMM regime: decode tiles to f32, sgemm ------------------------------------ */

static void gemm_reduce_item(void *arg, int64_t item, int thread)
{
    const run_ctx *r = arg;
    const int64_t in = r->w->cols, rows = TCQ_MAX(1, GEMM_TILE_BYTES / (in * 4));
    const int64_t r0 = item * rows, r1 = TCQ_MIN(r->w->rows, r0 + rows);
    float *tile = r->c->scratch[thread];
    for (int64_t rr = r0; rr < r1; rr++) r->df(r->w, rr, 0, in / r->w->p.T, tile + (rr - r0) * in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)r->M, (int)(r1 - r0), (int)in, 1.0f, r->x,
                (int)in, tile, (int)in, 0.0f, r->y + r0, (int)r->ldy);
}

static void gemm_scatter_item(void *arg, int64_t item, int thread)
{
    const run_ctx *r = arg;
    const int64_t T = r->w->p.T, in = r->w->rows, nbt = TCQ_MAX(1, 256 / T), nb = r->w->cols / T;
    const int64_t b0 = item * nbt, b1 = TCQ_MIN(nb, b0 + nbt), ncol = (b1 - b0) * T;
    float *tile = r->c->scratch[thread];
    for (int64_t i0 = 0; i0 < in; i0 += GEMM_KC) {
        const int64_t i1 = TCQ_MIN(in, i0 + GEMM_KC);
        for (int64_t i = i0; i < i1; i++) r->df(r->w, i, b0, b1 - b0, tile + (i - i0) * ncol);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)r->M, (int)ncol, (int)(i1 - i0), 1.0f,
                    r->x + i0, (int)in, tile, (int)ncol, i0 ? 1.0f : 0.0f, r->y + b0 * T, (int)r->ldy);
    }
}

static const char *path_name(int kp) { return kp == KP_EXACT ? "exact" : "fast"; }

/* The table's own kernel for the GEMM regime (the fast path on axis 1), or NULL: decode + sgemm */
static kr_fn own_gemm(const tr_table *tab, int kp, int axis)
{
    return kp == KP_FAST && axis ? tab->reduce_fast_gemm : NULL;
}

/* The name of the kernel a trellis call of op (0 scatter, 1 reduce, 2 fused SwiGLU) runs for this
 * table, path, regime and M: what tcq_kctx_last_kernel reports, and the registry's key (registry.c). */
static void trellis_name(const tr_table *tab, int kp, int op, tcq_kregime reg, int64_t M, char *buf, size_t n)
{
    const char *fam = op == 0 ? "trellis.scatter" : op == 1 ? "trellis.reduce" : "swiglu.fused";
    const kr_fn own = own_gemm(tab, kp, op != 0);
    if (reg == TCQ_KR_GEMM && own) {
        snprintf(buf, n, "%s.fast.gemm.%s.i16.panel", fam, tab->isa);
        return;
    }
    if (reg == TCQ_KR_GEMM) {   /* decode + sgemm; the SwiGLU runs gate and up unfused */
        if (op == 2) {
            char k[64];
            trellis_name(tab, kp, 1, reg, M, k, sizeof k);
            snprintf(buf, n, "swiglu.unfused.%s", k);
        } else
            snprintf(buf, n, "%s.gemm.%s", fam, tab->isa);
        return;
    }
    const int rg = reg == TCQ_KR_M1 ? KRG_M1 : reg == TCQ_KR_SHARED ? KRG_SHARED : KRG_TILE;
    const int col = op ? reduce_col(tab, kp, rg, M) : rg;
    const int has = op ? tab->reduce[kp][col] != NULL : tab->scatter[kp][col] != NULL;
    const char *tag = has ? (op ? tab->tag : tab->stag)[kp][col] : NULL;
    snprintf(buf, n, "%s.%s.%s.%s%s%s", fam, path_name(kp), tcq_kregime_name(reg), has ? tab->isa : "scalar",
             tag ? "." : "", tag ? tag : "");
}

void tcq_trellis_kernel_name(int isa, unsigned exclude, tcq_kpath path, int op, tcq_kregime reg, int64_t M,
                             char *buf, size_t n)
{
    trellis_name(table_for(isa, exclude), path == TCQ_PATH_EXACT ? KP_EXACT : KP_FAST, op, reg, M, buf, n);
}

static tcq_status trellis_rows(tcq_kctx *c, const tcq_weight *wt, const float *x, float *y, int64_t M,
                               tcq_kregime reg)
{
    const tcq_trellis *w = &wt->tr;
    const int isa = c->force_isa >= 0 ? c->force_isa : (int)tcq_isa_active();
    const tr_table *tab = table_for(isa, c->exclude);
    const int kp = kpath_of(c);
    run_ctx r = {.c = c, .w = w, .M = M, .x = x, .y = y, .ldy = wt->out, .df = tab->decode};
    if (!r.df) r.df = tcq_ref_decode;
    const kr_fn own = own_gemm(tab, kp, w->axis);
    if (reg == TCQ_KR_GEMM && !own) {
        trellis_name(tab, kp, w->axis, reg, M, c->last, sizeof c->last);
        if (w->axis) {
            const int64_t rows = TCQ_MAX(1, GEMM_TILE_BYTES / (w->cols * 4));
            TCQ_TRY(ensure_scratch(c, (size_t)(rows * w->cols) * 4));
            tcq_pool_run(c->pool, (w->rows + rows - 1) / rows, gemm_reduce_item, &r);
        } else {
            const int64_t nbt = TCQ_MAX(1, 256 / w->p.T);
            TCQ_TRY(ensure_scratch(c, (size_t)(GEMM_KC * nbt * w->p.T) * 4));
            tcq_pool_run(c->pool, (w->cols / w->p.T + nbt - 1) / nbt, gemm_scatter_item, &r);
        }
        return TCQ_OK;
    }
    const int rg = reg == TCQ_KR_M1 ? KRG_M1 : reg == TCQ_KR_SHARED ? KRG_SHARED : KRG_TILE;
    TCQ_TRY(ensure_scratch(c, kernel_private_bytes(w) + (size_t)(SCATTER_COLS * M * w->p.T) * 4));
    if (kp == KP_FAST) TCQ_TRY(tcq_kq_prepare_pool(&c->qa, x, M, wt->in, w->axis ? NULL : w->scales, c->pool));
    if (reg == TCQ_KR_GEMM) {   /* the table's own kernel (above: decode + sgemm) */
        r.rf = own;
        trellis_name(tab, kp, 1, reg, M, c->last, sizeof c->last);
        tcq_pool_run(c->pool, items_plan(&r, c, w->rows), reduce_item, &r);
        return TCQ_OK;
    }
    if (w->axis) {
        const int rc = reduce_col(tab, kp, rg, M);
        if (kp == KP_FAST && tab->qt && rc != KRG_M1) TCQ_TRY(tcq_kq_transpose(&c->qa, M));
        r.rf = tab->reduce[kp][rc] ? tab->reduce[kp][rc] : tcq_tr_ref.reduce[kp][rc];
        trellis_name(tab, kp, 1, reg, M, c->last, sizeof c->last);
        tcq_pool_run(c->pool, items_plan(&r, c, w->rows), reduce_item, &r);
        return TCQ_OK;
    }
    r.sf = tab->scatter[kp][rg] ? tab->scatter[kp][rg] : tcq_tr_ref.scatter[kp][rg];
    r.sf_nbc = tab->scatter[kp][rg] ? TCQ_MAX(1, tab->scatter_nbc[kp][rg]) : 1;
    trellis_name(tab, kp, 0, reg, M, c->last, sizeof c->last);
    /* partitions: a fixed count, each a whole number of activation blocks */
    const int64_t qbs = (w->rows + TCQ_FAST_QB - 1) / TCQ_FAST_QB;
    r.part_rows = ((qbs + PARTITIONS - 1) / PARTITIONS) * TCQ_FAST_QB;
    r.nparts = (w->rows + r.part_rows - 1) / r.part_rows;
    r.nb = w->cols / w->p.T;
    TCQ_TRY(ensure_buf(&c->part, &c->part_cap, (size_t)(r.nparts * M * w->cols), "axis-0 partial sums"));
    tcq_pool_run(c->pool, r.nparts * ((r.nb + SCATTER_COLS - 1) / SCATTER_COLS), scatter_item, &r);
    tcq_pool_run(c->pool, (M * w->cols + 4095) / 4096, partsum_item, &r);
    return TCQ_OK;
}

/* The tile kernels and the tables' own GEMM kernels compute every activation row on its own
 * (per-row activation scales, exact integer sums, the same fold order whatever the rows around
 * it), so a long call runs as balanced chunks of at most TILE_CHUNK_M (PANEL_CHUNK_M) rows with
 * the same bits: the axis-0 partial sums, the prepared activations and the SwiGLU's gate/up
 * scratch stay at chunk size.  Returns the chunk count; chunk i is rows [M i / n, M (i + 1) / n). */
static int64_t tile_chunks(tcq_kregime reg, int own, int64_t M)
{
    if (reg == TCQ_KR_TILE) return (M + TILE_CHUNK_M - 1) / TILE_CHUNK_M;
    return reg == TCQ_KR_GEMM && own ? (M + PANEL_CHUNK_M - 1) / PANEL_CHUNK_M : 1;
}

static tcq_status trellis_linear(tcq_kctx *c, const tcq_weight *wt, const float *x, float *y, int64_t M)
{
    const int isa = c->force_isa >= 0 ? c->force_isa : (int)tcq_isa_active();
    const tr_table *tab = table_for(isa, c->exclude);
    const tcq_kregime reg = pick_regime(c, tab, M, 1, wt->tr.axis, kpath_of(c) == KP_EXACT);
    const int64_t n = tile_chunks(reg, own_gemm(tab, kpath_of(c), wt->tr.axis) != NULL, M);
    for (int64_t i = 0; i < n; i++) {
        const int64_t m0 = M * i / n, m1 = M * (i + 1) / n;
        TCQ_TRY(trellis_rows(c, wt, x + m0 * wt->in, y + m0 * wt->out, m1 - m0, reg));
    }
    return TCQ_OK;
}

/* ---- dense and affine -------------------------------------------------------------------- */

typedef struct dense_ctx {
    tcq_kctx *c;
    int isa;
    const tcq_weight *w;
    const float *x;
    float *y;
    int64_t M, rows;
} dense_ctx;

static void dense_item(void *arg, int64_t item, int thread)
{
    const dense_ctx *d = arg;
    const int64_t r0 = item * d->rows, r1 = TCQ_MIN(d->w->out, r0 + d->rows);
    tcq_dense_rows(d->w, d->x, d->M, r0, r1, d->y, d->w->out, d->c->scratch[thread], d->isa);
}


/* The ISA's table for a dense f16/bf16 weight; NULL: the scalar reference */
static const kd16_isa *d16_table(int isa, tcq_wformat fmt)
{
    if (isa == TCQ_ISA_AVX512) return tcq_d16_avx512(fmt);
    return isa >= TCQ_ISA_AVX2 ? tcq_d16_avx2(fmt) : NULL;
}

/* f16/bf16: a pinned regime GEMM takes the table's GEMM, the others its tiles (tests, benchmarks) */
static int d16_gemm(const kd16_isa *k, tcq_kregime reg, int64_t M)
{
    return k && k->gemm && (reg == TCQ_KR_AUTO ? M >= k->gemm_from : reg == TCQ_KR_GEMM);
}

/* ... and on the fast path (AUTO included) where the CPU has AVX-512 BF16, that GEMM on bf16
 * activations, f16 weights rounded to bf16 a block at a time (kernels.h, "bf16 activations") */
static int d16_dp(const kd16_isa *k, tcq_wformat fmt, tcq_kpath path, tcq_kregime reg, int64_t M)
{
    return path != TCQ_PATH_EXACT && k && k == tcq_d16_avx512(fmt) && tcq_cpu()->avx512bf16 && d16_gemm(k, reg, M);
}

/* ... and its M = 1 row kernel, unless another regime is pinned (tiles at M = 1: --regime tile) */
static int d16_row(const kd16_isa *k, tcq_kregime reg, int64_t M)
{
    return k && k->row && M == 1 && (reg == TCQ_KR_AUTO || reg == TCQ_KR_M1);
}

void tcq_dense_kernel_name(tcq_wformat fmt, int isa, tcq_kpath path, tcq_kregime reg, int64_t M, char *buf, size_t n)
{
    static const char *const fn[] = {"f32", "f16", "bf16", "trellis", "affine"};
    if (fmt == TCQ_WF_F16 || fmt == TCQ_WF_BF16) {
        const kd16_isa *k = d16_table(isa, fmt);
        snprintf(buf, n, "%s.stored.%s", fn[fmt],
                 d16_dp(k, fmt, path, reg, M) ? "gemm.dpbf16.avx512"
                 : d16_gemm(k, reg, M)        ? k->gemm_name
                 : d16_row(k, reg, M)         ? k->row_name
                 : k                          ? k->name
                                              : "scalar");
        return;
    }
    snprintf(buf, n, "%s.%s", fn[fmt], fmt != TCQ_WF_F32 && isa == TCQ_ISA_AVX512 && M <= TCQ_MAX_BATCH ? "direct.avx512" : "blas");
}

static tcq_status dense_linear(tcq_kctx *c, const tcq_weight *w, const float *x, float *y, int64_t M)
{
    const int isa = c->force_isa >= 0 ? c->force_isa : (int)tcq_isa_active();
    dense_ctx d = {.c = c, .isa = isa, .w = w, .x = x, .y = y, .M = M, .rows = DENSE_ROWS};
    if (w->fmt != TCQ_WF_F32) {
        d.rows = TCQ_MAX(1, TCQ_MIN(DENSE_ROWS, (1 << 20) / (w->in * 4)));
        TCQ_TRY(ensure_scratch(c, (size_t)(d.rows * w->in) * 4));
    }
    tcq_dense_kernel_name(w->fmt, isa, TCQ_PATH_AUTO, TCQ_KR_AUTO, M, c->last, sizeof c->last);
    tcq_pool_run(c->pool, (w->out + d.rows - 1) / d.rows, dense_item, &d);
    return TCQ_OK;
}


/* x [M, K] rounded to bf16 rows of ldxb, split over the pool in 16-row items */
typedef struct d16_round_ctx {
    const float *x;
    int64_t K, M, ldxb;
    uint16_t *xb;
} d16_round_ctx;

static void d16_round_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const d16_round_ctx *r = arg;
    tcq_d16_round_bf16_avx512x(r->x, r->K, item * 16, TCQ_MIN(r->M, item * 16 + 16), r->xb, r->ldxb);
}

static void d16_round_rows(tcq_kctx *c, const float *x, int64_t K, int64_t M, uint16_t *xb, int64_t ldxb)
{
    d16_round_ctx r = {.x = x, .K = K, .M = M, .ldxb = ldxb, .xb = xb};
    tcq_pool_run(c->pool, (M + 15) / 16, d16_round_item, &r);
}

typedef struct d16_ctx {
    tcq_kctx *c;
    const kd16_isa *k;
    kd16_args a;
    int gemm;              /* the table's GEMM regime */
    int row;               /* its M = 1 row kernel */
    kd16_gemm_fn dp;       /* the bf16-activation GEMM (fast path) */
    int64_t rows;          /* outputs per work item */
} d16_ctx;

static void d16_item(void *arg, int64_t item, int thread)
{
    const d16_ctx *d = arg;
    const int64_t r0 = item * d->rows, r1 = TCQ_MIN(d->a.w->out, r0 + d->rows);
    if (d->dp) d->dp(&d->a, r0, r1, d->c->scratch[thread]);
    else if (d->gemm) d->k->gemm(&d->a, r0, r1, d->c->scratch[thread]);
    else if (d->row) d->k->row(&d->a, r0, r1);
    else if (d->k) tcq_d16_rows(d->k, &d->a, r0, r1);
    else tcq_d16_ref(d->a.w, d->a.x, d->a.M, r0, r1, d->a.y, d->a.ldy);
}

static tcq_status dense16_linear(tcq_kctx *c, const tcq_weight *w, const float *x, float *y, int64_t M)
{
    const int isa = c->force_isa >= 0 ? c->force_isa : (int)tcq_isa_active();
    d16_ctx d = {.c = c, .k = d16_table(isa, w->fmt), .a = {.w = w, .M = M, .x = x, .y = y, .ldy = w->out},
                 .rows = DENSE16_ROWS};
    d.gemm = d16_gemm(d.k, c->force_regime, M);
    d.row = d16_row(d.k, c->force_regime, M);
    if (d.k && !d.row && M >= 2 && M <= d.k->mg && d.k->mg > d.k->mr) d.rows = DENSE16_GROUP_ROWS;
    if (d.gemm) {
        d.rows = DENSE16_GEMM_ROWS;
        TCQ_TRY(ensure_scratch(c, KERNEL_SCRATCH));   /* the 32 KB panel */
    }
    if (d16_dp(d.k, w->fmt, c->path, c->force_regime, M)) {
        d.dp = tcq_d16_gemm_dp_avx512x();
        d.rows = DENSE16_DP_ROWS;
        d.a.ldxb = (w->in + 31) / 32 * 32;
        if (w->fmt == TCQ_WF_F16) TCQ_TRY(ensure_scratch(c, (size_t)(DENSE16_DP_ROWS * d.a.ldxb) * 2));
        if ((size_t)(M * d.a.ldxb) > c->xb_cap) {
            tcq_afree(c->xb);
            c->xb = tcq_amalloc((size_t)(M * d.a.ldxb) * 2);
            c->xb_cap = c->xb ? (size_t)(M * d.a.ldxb) : 0;
            if (!c->xb) return tcq_fail(TCQ_ERR_NOMEM, "bf16 activations: %lld x %lld", (long long)M, (long long)d.a.ldxb);
        }
        d.a.xb = c->xb;
        d16_round_rows(c, x, w->in, M, c->xb, d.a.ldxb);
    }
    tcq_dense_kernel_name(w->fmt, isa, c->path, c->force_regime, M, c->last, sizeof c->last);
    tcq_pool_run(c->pool, (w->out + d.rows - 1) / d.rows, d16_item, &d);
    return TCQ_OK;
}

tcq_status tcq_linear(const tcq_weight *w, const float *x, float *y, int64_t M, tcq_kctx *c)
{
    TCQ_TRY(check_call(w, x, y, M, c));
    if (w->fmt == TCQ_WF_TRELLIS) return trellis_linear(c, w, x, y, M);
    if (w->fmt == TCQ_WF_F16 || w->fmt == TCQ_WF_BF16) return dense16_linear(c, w, x, y, M);
    return dense_linear(c, w, x, y, M);
}

/* ---- fused gate/up + SwiGLU ------------------------------------------------------------- */

static inline float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

static void swiglu_item(void *arg, int64_t item, int thread)
{
    const run_ctx *r = arg;
    const int64_t rpi = r->rpi, M = r->M;
    int64_t r0, r1;
    item_rows(r, r->w->rows, item, &r0, &r1);
    float *g = (float *)((char *)r->c->scratch[thread] +
                         TCQ_MAX(kernel_private_bytes(r->w), kernel_private_bytes(r->wu)));
    float *u = g + M * rpi;
    /* y[m * ldy + r] addressing with r absolute: shift the base so row r0 lands at column 0 */
    kr_args a = {.w = r->w, .M = M, .x = r->x, .qa = &r->c->qa, .r0 = r0, .r1 = r1,
                 .y = g - r0, .ldy = rpi, .scratch = r->c->scratch[thread]};
    r->rf(&a);
    a.w = r->wu;
    a.y = u - r0;
    r->rf_up(&a);
    for (int64_t m = 0; m < M; m++)
        for (int64_t o = r0; o < r1; o++)
            r->y[m * r->ldy + o] = silu_mul(g[m * rpi + o - r0], u[m * rpi + o - r0]);
}

static tcq_status swiglu_rows(tcq_kctx *c, const tcq_weight *gate, const tcq_weight *up, const float *x, float *y,
                              int64_t M, tcq_kregime reg)
{
    const int isa = c->force_isa >= 0 ? c->force_isa : (int)tcq_isa_active();
    const tr_table *tab = table_for(isa, c->exclude);
    const int kp = kpath_of(c);
    const int64_t out = gate->out;
    const int rg = reduce_col(tab, kp, reg == TCQ_KR_M1 ? KRG_M1 : reg == TCQ_KR_SHARED ? KRG_SHARED : KRG_TILE, M);
    const kr_fn own = reg == TCQ_KR_GEMM ? own_gemm(tab, kp, 1) : NULL;
    run_ctx r = {.c = c, .w = &gate->tr, .wu = &up->tr, .M = M, .x = x, .y = y, .ldy = out};
    const int64_t nitems = items_plan(&r, c, out);
    /* per thread: the kernels' part, then the item's gate and up outputs (r.rpi, the longest) */
    TCQ_TRY(ensure_scratch(c, TCQ_MAX(kernel_private_bytes(&gate->tr), kernel_private_bytes(&up->tr)) +
                                  (size_t)(2 * M * r.rpi) * 4));
    if (kp == KP_FAST) TCQ_TRY(tcq_kq_prepare_pool(&c->qa, x, M, gate->in, NULL, c->pool));
    if (kp == KP_FAST && tab->qt && rg != KRG_M1 && !own) TCQ_TRY(tcq_kq_transpose(&c->qa, M));
    r.rf = own ? own : tab->reduce[kp][rg] ? tab->reduce[kp][rg] : tcq_tr_ref.reduce[kp][rg];
    r.rf_up = r.rf;
    trellis_name(tab, kp, 2, reg, M, c->last, sizeof c->last);
    tcq_pool_run(c->pool, nitems, swiglu_item, &r);
    return TCQ_OK;
}

tcq_status tcq_linear_swiglu(const tcq_weight *gate, const tcq_weight *up, const float *x, float *y, int64_t M,
                             tcq_kctx *c)
{
    TCQ_TRY(check_call(gate, x, y, M, c));
    TCQ_TRY(check_call(up, x, y, M, c));
    if (gate->out != up->out || gate->in != up->in)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "swiglu: gate [%lld, %lld] and up [%lld, %lld] differ",
                        (long long)gate->out, (long long)gate->in, (long long)up->out, (long long)up->in);
    const int isa = c->force_isa >= 0 ? c->force_isa : (int)tcq_isa_active();
    const tr_table *tab = table_for(isa, c->exclude);
    const tcq_kregime reg = pick_regime(c, tab, M, 1, 1, kpath_of(c) == KP_EXACT);
    const int own = own_gemm(tab, kpath_of(c), 1) != NULL;
    const int fused = gate->fmt == TCQ_WF_TRELLIS && up->fmt == TCQ_WF_TRELLIS && gate->tr.axis == 1 &&
                      up->tr.axis == 1 && (reg != TCQ_KR_GEMM || own);
    const int64_t out = gate->out;
    if (fused) {
        const int64_t n = tile_chunks(reg, own, M);
        for (int64_t i = 0; i < n; i++) {
            const int64_t m0 = M * i / n, m1 = M * (i + 1) / n;
            TCQ_TRY(swiglu_rows(c, gate, up, x + m0 * gate->in, y + m0 * out, m1 - m0, reg));
        }
        return TCQ_OK;
    }
    /* materialized fallback (dense weights, axis 0, the GEMM regime): 2 * M * out floats */
    TCQ_TRY(ensure_buf(&c->gu, &c->gu_cap, (size_t)(2 * M * out), "swiglu gate/up buffer"));
    TCQ_TRY(tcq_linear(gate, x, c->gu, M, c));
    TCQ_TRY(tcq_linear(up, x, c->gu + M * out, M, c));
    for (int64_t j = 0; j < M * out; j++) y[j] = silu_mul(c->gu[j], c->gu[M * out + j]);
    char k[sizeof c->last];
    memcpy(k, c->last, sizeof k);
    snprintf(c->last, sizeof c->last, "swiglu.unfused.%.70s", k);
    return TCQ_OK;
}

