/* BlockLDLQ (QTIP's Algorithm, with the trellis as the block quantizer).  With the damped
 * Hessian H = L D L^T (L unit lower block triangular) and e = w - w^ a row's error,
 *     e H e^T = sum_b (eL)_b D_b (eL)_b^T,   (eL)_b = e_b + sum_{j>b} e_j L_jb,
 * so coding the blocks from the last to the first, block b aims at w_b + sum_{j>b} e_j L_jb:
 * its term is then exactly the block's own weighted coding error.
 *   axis 1 (q/k/v/gate/up, rows = outputs): the blocks are the trellis blocks of T input
 *     positions, all rows of a column block coded at once; the row scales come from the
 *     unrotated... from the rows as given, before any feedback.
 *   axis 0 (o/down, stored rows = input columns): H is over the stored rows, blocks of g rows
 *     (ldlq_axis0.c; g = 1: GPTQ's column-by-column order), in GPTQ's act-order. */
#include "quant.h"
#include "qla.h"
#include "../encode/encode_cuda.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

static void decode_row(tcq_block_params p, const uint32_t *words, uint16_t scale, int64_t C, float *out)
{
    const float s = tcq_f16_to_f32(scale);
    for (int64_t b = 0; b < C / p.T; b++) tcq_block_decode_f32(p, words + b * tcq_block_words(p), s, out + b * p.T);
}

void tcq_quant_decode_rows(tcq_block_params p, const uint32_t *codes, const uint16_t *scales, int64_t R, int64_t C,
                           float *out)
{
    const int64_t rw = C * p.k / 32;
    for (int64_t r = 0; r < R; r++) decode_row(p, codes + r * rw, scales[r], C, out + r * C);
}

typedef struct dec_job {
    tcq_block_params p;
    const uint32_t *codes;
    const uint16_t *scales;
    int64_t R, C;
    float *out;
} dec_job;

static void dec_item(void *arg, int64_t item, int thread)
{
    const dec_job *j = arg;
    const int64_t r0 = item * 64, n = TCQ_MIN(64, j->R - r0), rw = j->C * j->p.k / 32;
    (void)thread;
    tcq_quant_decode_rows(j->p, j->codes + r0 * rw, j->scales + r0, n, j->C, j->out + r0 * j->C);
}

void tcq_quant_decode_rows_on(tcq_pool *pool, tcq_block_params p, const uint32_t *codes, const uint16_t *scales,
                              int64_t R, int64_t C, float *out)
{
    dec_job j = {p, codes, scales, R, C, out};
    if (pool) tcq_pool_run(pool, (R + 63) / 64, dec_item, &j);
    else tcq_quant_decode_rows(p, codes, scales, R, C, out);
}

/* The proxy's sum(E o P) in fixed chunks of PROXY_ROWS rows (P = E H for axis 1, H E for
 * axis 0), one dgemm each on the pool's threads, partial sums added in chunk order: the same
 * bits for any thread count.  For a 14B down projection the two products (loss and reference)
 * are 6e12 flops, the largest single cost of coding it. */
#define PROXY_ROWS 64

typedef struct proxy_job {
    const double *E, *H;
    int64_t R, C;
    int axis;
    double *part;             /* [chunks] */
    double *scratch;          /* [threads][PROXY_ROWS * C] */
} proxy_job;

static void proxy_item(void *arg, int64_t item, int thread)
{
    const proxy_job *j = arg;
    const int64_t r0 = item * PROXY_ROWS, n = TCQ_MIN(PROXY_ROWS, j->R - r0), C = j->C;
    double *P = j->scratch + (size_t)thread * PROXY_ROWS * C;
    if (j->axis) /* rows r0.. of E H */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)C, (int)C, 1.0, j->E + r0 * C, (int)C, j->H,
                    (int)C, 0.0, P, (int)C);
    else /* rows r0.. of H E */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)C, (int)j->R, 1.0, j->H + r0 * j->R, (int)j->R,
                    j->E, (int)C, 0.0, P, (int)C);
    double s = 0;
    for (int64_t i = 0; i < n * C; i++) s += j->E[r0 * C + i] * P[i];
    j->part[item] = s;
}

tcq_status tcq_quant_proxy(const float *W, const float *What, int64_t R, int64_t C, int axis, const double *H,
                           tcq_pool *pool, double *loss, double *ref)
{
    const int64_t n = R * C, chunks = (R + PROXY_ROWS - 1) / PROXY_ROWS, threads = pool ? tcq_pool_size(pool) : 1;
    double *E = malloc((size_t)n * sizeof *E), *part = malloc((size_t)chunks * sizeof *part);
    double *scratch = malloc((size_t)(threads * PROXY_ROWS * C) * sizeof *scratch);
    if (!E || !part || !scratch) {
        free(E);
        free(part);
        free(scratch);
        return tcq_fail(TCQ_ERR_NOMEM, "proxy loss of [%lld, %lld]", (long long)R, (long long)C);
    }
    proxy_job j = {E, H, R, C, axis, part, scratch};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && !ref) break;
        for (int64_t i = 0; i < n; i++) E[i] = pass ? (double)W[i] : (double)W[i] - (double)What[i];
        if (pool) tcq_pool_run(pool, chunks, proxy_item, &j);
        else
            for (int64_t i = 0; i < chunks; i++) proxy_item(&j, i, 0);
        double s = 0;
        for (int64_t i = 0; i < chunks; i++) s += part[i];
        *(pass ? ref : loss) = s;
    }
    free(E);
    free(part);
    free(scratch);
    return TCQ_OK;
}

/* The row scales' candidates of the scale search: the RMS scale times these (the first is the
 * RMS scale itself, so a search of 1 is no search). */
static const double scale_mult[9] = {1.0, 0.9, 1.1, 0.8, 1.2, 0.95, 1.05, 0.85, 1.15};

static uint16_t scaled(uint16_t h, double m)
{
    if (m == 1.0) return h;
    uint16_t r = tcq_f32_to_f16((float)(tcq_f16_to_f32(h) * m));
    return (r & 0x7fffu) ? r : 1;
}

tcq_status tcq_quant_encode_blocks(const tcq_ldlq_args *a, const float *x, const float *w, int64_t n, uint32_t *words)
{
    return a->gpu ? tcq_cuda_encode_blocks(a->gpu, a->p, a->enc, x, w, n, words, NULL)
                  : tcq_encode_blocks(a->p, a->enc, x, w, n, words, a->pool, NULL);
}

tcq_status tcq_quant_encode_blocks_w1(const tcq_ldlq_args *a, const float *x, const float *w1, float *wt, int64_t n,
                                      uint32_t *words)
{
    if (a->gpu) return tcq_cuda_encode_blocks_w1(a->gpu, a->p, a->enc, x, w1, n, words);
    for (int64_t b = 0; b < n; b++) memcpy(wt + b * a->p.T, w1, (size_t)a->p.T * sizeof *wt);
    return tcq_encode_blocks(a->p, a->enc, x, wt, n, words, a->pool, NULL);
}

/* One (row, candidate) of tcq_quant_code_candidates after the encoder: its refit scale and its
 * squared error to the row's target, on the pool (each item its own outputs: any thread count
 * gives the same); on a GPU this host work is what is left per candidate. */
typedef struct cand_job {
    tcq_block_params p;
    int refit, n_mult;
    int64_t C;
    const float *tg;          /* [n, C] */
    const uint32_t *words;    /* [n * n_mult, C*k/32] */
    uint16_t *sh;             /* [n * n_mult]: the candidate scales, refit in place */
    double *err;              /* [n * n_mult] */
    float *dec;               /* [threads][C] */
    int *failed;              /* [n * n_mult] */
} cand_job;

static void cand_item(void *arg, int64_t item, int thread)
{
    const cand_job *j = arg;
    const float *t = j->tg + item / j->n_mult * j->C;
    const uint32_t *wm = j->words + item * (j->C * j->p.k / 32);
    if (j->refit && tcq_quant_refit_scales(j->p, t, 1, j->C, wm, j->sh + item, NULL) != TCQ_OK) {
        j->failed[item] = 1;
        return;
    }
    if (j->n_mult == 1) return;
    float *dec = j->dec + (size_t)thread * j->C;
    decode_row(j->p, wm, j->sh[item], j->C, dec);
    double err = 0;
    for (int64_t c = 0; c < j->C; c++) err += ((double)t[c] - dec[c]) * ((double)t[c] - dec[c]);
    j->err[item] = err;
}

/* One (row, candidate) of tcq_quant_code_candidates before the encoder: the row divided by its
 * candidate scale (sh, set by the caller). */
typedef struct cand_x_job {
    int n_mult;
    int64_t C;
    const float *tg;          /* [n, C] */
    const uint16_t *sh;       /* [n * n_mult] */
    float *x;                 /* [n * n_mult, C] */
} cand_x_job;

static void cand_x_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const cand_x_job *j = arg;
    const float *t = j->tg + item / j->n_mult * j->C;
    const float sc = tcq_f16_to_f32(j->sh[item]);
    float *xm = j->x + item * j->C;
    for (int64_t c = 0; c < j->C; c++) xm[c] = t[c] / sc;
}

tcq_status tcq_quant_cand_alloc(const tcq_ldlq_args *a, int64_t n, int n_mult, tcq_quant_cand *sc)
{
    const int64_t C = a->C, rw = C * a->p.k / 32, items = n * n_mult, threads = a->pool ? tcq_pool_size(a->pool) : 1;
    *sc = (tcq_quant_cand){n, n_mult, malloc((size_t)(items * C) * sizeof *sc->x),
                           malloc((size_t)(threads * C) * sizeof *sc->dec), malloc((size_t)(items * rw) * sizeof *sc->words),
                           malloc((size_t)items * sizeof *sc->sh), malloc((size_t)items * sizeof *sc->err),
                           malloc((size_t)items * sizeof *sc->failed)};
    if (sc->x && sc->dec && sc->words && sc->sh && sc->err && sc->failed) return TCQ_OK;
    tcq_quant_cand_free(sc);
    return tcq_fail(TCQ_ERR_NOMEM, "LDLQ scale candidates: %lld rows of %lld", (long long)n, (long long)C);
}

void tcq_quant_cand_free(tcq_quant_cand *sc)
{
    free(sc->x);
    free(sc->dec);
    free(sc->words);
    free(sc->sh);
    free(sc->err);
    free(sc->failed);
    *sc = (tcq_quant_cand){0};
}

tcq_status tcq_quant_code_candidates(const tcq_ldlq_args *a, tcq_quant_cand *scratch, const float *tg, int64_t n,
                                     int n_mult, uint32_t *codes, uint16_t *scales)
{
    const tcq_block_params p = a->p;
    const int64_t C = a->C, rw = C * p.k / 32, items = n * n_mult;
    tcq_quant_cand own = {0}, *sc = scratch;
    if (!sc || sc->n * sc->n_mult < items) {
        TCQ_TRY(tcq_quant_cand_alloc(a, n, n_mult, &own));
        sc = &own;
    }
    memset(sc->failed, 0, (size_t)items * sizeof *sc->failed);
    for (int64_t r = 0; r < n; r++) {
        const uint16_t rms = tcq_scale_for_row(p.L, tg + r * C, C);
        for (int m = 0; m < n_mult; m++) sc->sh[r * n_mult + m] = scaled(rms, scale_mult[m]);
    }
    cand_x_job xj = {n_mult, C, tg, sc->sh, sc->x};
    tcq_pool_run(a->pool, items, cand_x_item, &xj);
    /* every trellis block is coded on its own: one call for all rows and candidates gives the
     * words of one call per candidate (on a GPU: one launch instead of n x n_mult of C/T blocks) */
    tcq_status s = tcq_quant_encode_blocks(a, sc->x, NULL, items * (C / p.T), sc->words);
    if (s == TCQ_OK) {
        cand_job j = {p, a->refit, n_mult, C, tg, sc->words, sc->sh, sc->err, sc->dec, sc->failed};
        tcq_pool_run(a->pool, items, cand_item, &j);
        for (int64_t i = 0; i < items; i++)
            if (sc->failed[i]) s = tcq_fail(TCQ_ERR_NOMEM, "LDLQ scale candidates: refit of a row of %lld", (long long)C);
    }
    for (int64_t r = 0; s == TCQ_OK && r < n; r++) {
        const double *e = sc->err + r * n_mult;
        int pick = 0;
        for (int m = 1; m < n_mult; m++)   /* the first of equal errors is kept */
            if (e[m] < e[pick] || isnan(e[pick])) pick = m;
        scales[r] = sc->sh[r * n_mult + pick];
        memcpy(codes + r * rw, sc->words + (r * n_mult + pick) * rw, (size_t)rw * sizeof *codes);
    }
    if (sc == &own) tcq_quant_cand_free(&own);
    return s;
}

/* E = W - What (then W alone, the reference) made on the device from W's copy and What's floats
 * (tcq_qla_error_cols): a float [R, C] goes up instead of two double ones, and the host fills
 * nothing.  E's host array only names the device buffer.  The same doubles as the host's
 * (double) W - (double) What, so the same sums as staging them. */
tcq_status tcq_quant_proxy_on(tcq_qla *qla, const float *W, const float *What, int64_t R, int64_t C, int axis,
                              const double *H, double *loss, double *ref)
{
    double *E = malloc((size_t)(R * C) * sizeof *E);
    if (!E) return tcq_fail(TCQ_ERR_NOMEM, "proxy loss of [%lld, %lld]", (long long)R, (long long)C);
    int mir_w = 0;
    tcq_status s = tcq_qla_mirror_unless(qla, W, (size_t)(R * C) * sizeof *W, 0, &mir_w);
    if (s == TCQ_OK) s = tcq_qla_mirror(qla, E, (size_t)(R * C) * sizeof *E, 1);
    const int mir_e = s == TCQ_OK;
    for (int pass = 0; s == TCQ_OK && pass < 2; pass++) {
        if (pass == 1 && !ref) break;
        s = tcq_qla_error_cols(qla, E, W, R, C, 0, C, pass ? NULL : What);
        if (s == TCQ_OK) s = tcq_qla_proxy(qla, E, R, C, axis, H, pass ? ref : loss);
    }
    if (mir_e) tcq_qla_unmirror(qla, E);
    if (mir_w) tcq_qla_unmirror(qla, W);
    free(E);
    return s;
}

/* Axis 1's working set, allocated once per tensor and shared by the scale search's runs (up to 9
 * BlockLDLQ runs of the whole matrix: a 14B gate's E alone is 713 MB, and buffers that size freed
 * and taken again fault every page back in -- 25 M minor faults, 48 s of system time in a
 * 2-layer device run of session 28).  On a qla, E and L are mirrored once for the tensor. */
typedef struct ax1_ws {
    double *E;                /* [R, C] W - What of the run (on a qla: only names the device copy, the
                                 feedback's operand there; the host array is not written) */
    double *corr;             /* [R, T] a block's feedback */
    float *tg;                /* [R, C] the targets (the refit's) */
    float *x, *wt;            /* [R, T] a block's scaled targets; the Viterbi's weights spread (CPU encoder) */
    float *dw;                /* [T] D_b's diagonal over its mean */
    uint32_t *words;          /* [R, bw] */
    float *whb;               /* [R, T] on a qla: a block's reconstruction packed (E's columns are made there) */
    const float *W;           /* on a qla: W where this working set mirrored it (dropped with it) */
    int mir_e, mir_l;
} ax1_ws;

/* The per-row host work between the products runs on the pool in items of AX1_ROWS rows, each
 * item its own rows: the same bits for any thread count (on a 16-core device host this was one
 * thread's 89 M-element loops per block pass of a 14B gate, the GPU idle meanwhile). */
#define AX1_ROWS 64

typedef struct ax1_job {
    const tcq_ldlq_args *a;
    ax1_ws *w;
    double mult;
    int64_t c0, rest;
    int *failed;              /* [items] ax1_refit's: a refit's row buffer not allocated */
} ax1_job;

static void rows_run(tcq_pool *pool, int64_t R, tcq_pool_fn fn, void *arg)
{
    const int64_t items = (R + AX1_ROWS - 1) / AX1_ROWS;
    if (pool) tcq_pool_run(pool, items, fn, arg);
    else
        for (int64_t i = 0; i < items; i++) fn(arg, i, 0);
}

#define AX1_ROWS_OF(item, R) \
    const int64_t r0 = (item) * AX1_ROWS, r1 = TCQ_MIN(r0 + AX1_ROWS, (R))

static void ax1_scales(void *arg, int64_t item, int thread)
{
    const ax1_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    (void)thread;
    AX1_ROWS_OF(item, a->R);
    for (int64_t r = r0; r < r1; r++) a->scales[r] = scaled(tcq_scale_for_row(a->p.L, a->W + r * a->C, a->C), j->mult);
}

/* block c0's targets: the weights plus their feedback, and the encoder's inputs */
static void ax1_targets(void *arg, int64_t item, int thread)
{
    const ax1_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    const ax1_ws *w = j->w;
    const int64_t C = a->C, T = a->p.T, c0 = j->c0;
    (void)thread;
    AX1_ROWS_OF(item, a->R);
    for (int64_t r = r0; r < r1; r++) {
        const float sc = tcq_f16_to_f32(a->scales[r]);
        for (int64_t t = 0; t < T; t++) {
            const float v = j->rest > 0 ? (float)((double)a->W[r * C + c0 + t] + w->corr[r * T + t]) : a->W[r * C + c0 + t];
            w->tg[r * C + c0 + t] = v;
            w->x[r * T + t] = v / sc;
        }
    }
}

/* block c0's codes in place, its reconstruction and error */
static void ax1_decode(void *arg, int64_t item, int thread)
{
    const ax1_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    const ax1_ws *w = j->w;
    const tcq_block_params p = a->p;
    const int64_t C = a->C, T = p.T, c0 = j->c0, rw = C * p.k / 32, bw = tcq_block_words(p);
    (void)thread;
    AX1_ROWS_OF(item, a->R);
    for (int64_t r = r0; r < r1; r++) {
        uint32_t *dst = a->codes + r * rw + c0 / T * bw;
        memcpy(dst, w->words + r * bw, (size_t)bw * sizeof *dst);
        tcq_block_decode_f32(p, dst, tcq_f16_to_f32(a->scales[r]), a->What + r * C + c0);
        if (w->whb) memcpy(w->whb + r * T, a->What + r * C + c0, (size_t)T * sizeof *w->whb);
        else
            for (int64_t t = 0; t < T; t++) w->E[r * C + c0 + t] = (double)a->W[r * C + c0 + t] - (double)a->What[r * C + c0 + t];
    }
}

/* The run's least-squares refit, row by row: the row's scale (tcq_quant_refit_rows' per-row
 * call), its reconstruction (tcq_quant_decode_rows') and E = W - What, in one walk over the row
 * (were three pool passes over R x C, each a 14B gate's 89 M weights, 9 times a tensor) */
static void ax1_refit(void *arg, int64_t item, int thread)
{
    const ax1_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    const int64_t C = a->C, rw = C * a->p.k / 32;
    (void)thread;
    AX1_ROWS_OF(item, a->R);
    for (int64_t r = r0; r < r1; r++) {
        if (tcq_quant_refit_scales(a->p, j->w->tg + r * C, 1, C, a->codes + r * rw, a->scales + r, NULL) != TCQ_OK) {
            j->failed[item] = 1;
            return;
        }
        tcq_quant_decode_rows(a->p, a->codes + r * rw, a->scales + r, 1, C, a->What + r * C);
        if (!j->w->mir_e)   /* on a qla E is made there (tcq_qla_error_cols) */
            for (int64_t t = 0; t < C; t++) j->w->E[r * C + t] = (double)a->W[r * C + t] - (double)a->What[r * C + t];
    }
}

static void ax1_free(tcq_qla *qla, ax1_ws *w, const double *Lm)
{
    if (w->mir_e) tcq_qla_unmirror(qla, w->E);
    if (w->mir_l) tcq_qla_unmirror(qla, Lm);
    if (w->W) tcq_qla_unmirror(qla, w->W);
    free(w->whb);
    free(w->E);
    free(w->corr);
    free(w->tg);
    free(w->x);
    free(w->wt);
    free(w->dw);
    free(w->words);
}

static tcq_status ax1_alloc(const tcq_ldlq_args *a, const double *Lm, ax1_ws *w)
{
    const int64_t R = a->R, C = a->C, T = a->p.T;
    memset(w, 0, sizeof *w);
    w->E = malloc((size_t)(R * C) * sizeof *w->E);
    w->corr = malloc((size_t)(R * T) * sizeof *w->corr);
    w->tg = malloc((size_t)(R * C) * sizeof *w->tg);
    w->x = malloc((size_t)(R * T) * sizeof *w->x);
    w->wt = malloc((size_t)(R * T) * sizeof *w->wt);
    w->dw = malloc((size_t)T * sizeof *w->dw);
    w->words = malloc((size_t)(R * tcq_block_words(a->p)) * sizeof *w->words);
    tcq_status s = w->E && w->corr && w->tg && w->x && w->wt && w->dw && w->words ? TCQ_OK
                 : tcq_fail(TCQ_ERR_NOMEM, "LDLQ buffers for [%lld, %lld]", (long long)R, (long long)C);
    /* on a GPU, E and L stay there: only each coded block's reconstruction goes up, E's columns
     * made there from W's copy (E's device copy needs no start: a block's feedback reads only
     * the blocks coded before it in the run).  A float block packed is a quarter of the bytes of
     * E's double columns at E's row pitch, which pageable 2D copies move at ~5 GB/s. */
    if (s == TCQ_OK && a->qla) {
        w->whb = malloc((size_t)(R * T) * sizeof *w->whb);
        int own_w = 0;
        s = w->whb ? tcq_qla_mirror_unless(a->qla, a->W, (size_t)(R * C) * sizeof *a->W, 0, &own_w)
                   : tcq_fail(TCQ_ERR_NOMEM, "LDLQ buffers for [%lld, %lld]", (long long)R, (long long)C);
        if (own_w) w->W = a->W;
        if (s == TCQ_OK) s = tcq_qla_mirror(a->qla, w->E, (size_t)(R * C) * sizeof *w->E, 1);
        w->mir_e = s == TCQ_OK;
        if (s == TCQ_OK && C > T) {
            s = tcq_qla_mirror(a->qla, Lm, (size_t)(C * C) * sizeof *Lm, 0);
            w->mir_l = s == TCQ_OK;
        }
    }
    if (s != TCQ_OK) ax1_free(a->qla, w, Lm);
    return s;
}

/* One BlockLDLQ run with every row at its RMS scale times mult; on return w->E (and its mirror)
 * is W - What. */
static tcq_status ldlq_axis1(const tcq_ldlq_args *a, const double *Lm, const double *D, double mult, ax1_ws *w)
{
    const tcq_block_params p = a->p;
    const int64_t R = a->R, C = a->C, T = p.T, nb = C / T;
    ax1_job j = {a, w, mult, 0, 0, NULL};
    rows_run(a->pool, R, ax1_scales, &j);
    tcq_status s = TCQ_OK;
    for (int64_t b = nb - 1; s == TCQ_OK && b >= 0; b--) {
        const int64_t c0 = b * T, rest = C - c0 - T;
        if (rest > 0 && a->qla)   /* corr = E[:, c0+T:] L[c0+T:, c0:c0+T] */
            s = tcq_qla_dgemm(a->qla, 0, 0, R, T, rest, 1.0, w->E + c0 + T, C, Lm + (c0 + T) * C + c0, C, 0.0, w->corr, T);
        else if (rest > 0)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)T, (int)rest, 1.0, w->E + c0 + T, (int)C,
                        Lm + (c0 + T) * C + c0, (int)C, 0.0, w->corr, (int)T);
        if (s != TCQ_OK) break;
        {
            /* The block's term is (t - w^) D_b (t - w^)^T; the Viterbi takes D_b's diagonal as
             * per-position weights (mean 1).  Against unweighted, tinyqwen k = 2: the summed
             * q/k/v/gate/up proxy loss 0.8 % lower, lower on 35 of 40 (docs/PERFORMANCE.md, "Quantizer"). */
            const double *Db = D + c0 * T;
            double mean = 0;
            for (int64_t t = 0; t < T; t++) mean += Db[t * T + t];
            mean /= (double)T;
            for (int64_t t = 0; t < T; t++) w->dw[t] = (float)(Db[t * T + t] / mean);
        }
        j.c0 = c0, j.rest = rest;
        rows_run(a->pool, R, ax1_targets, &j);
        s = tcq_quant_encode_blocks_w1(a, w->x, w->dw, w->wt, R, w->words);
        if (s != TCQ_OK) break;
        rows_run(a->pool, R, ax1_decode, &j);
        if (w->mir_e) s = tcq_qla_error_cols(a->qla, w->E, a->W, R, C, c0, T, w->whb);
    }
    if (s == TCQ_OK && a->refit) {
        const int64_t items = (R + AX1_ROWS - 1) / AX1_ROWS;
        j.failed = calloc((size_t)items, sizeof *j.failed);
        if (!j.failed) s = tcq_fail(TCQ_ERR_NOMEM, "LDLQ refit of %lld rows", (long long)R);
        if (s == TCQ_OK) rows_run(a->pool, R, ax1_refit, &j);
        for (int64_t i = 0; s == TCQ_OK && i < items; i++)
            if (j.failed[i]) s = tcq_fail(TCQ_ERR_NOMEM, "LDLQ refit: row of %lld", (long long)C);
        free(j.failed);
        if (s == TCQ_OK && w->mir_e) s = tcq_qla_error_cols(a->qla, w->E, a->W, R, C, 0, C, a->What);
    }
    return s;
}

tcq_status tcq_quant_damp(const double *H, int64_t m, double damp, double *out)
{
    double mean = 0;
    for (int64_t i = 0; i < m; i++) mean += H[i * m + i];
    mean /= (double)m;
    if (!(mean > 0) || !isfinite(mean))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "Hessian of size %lld: mean diagonal %g (no calibration signal)",
                        (long long)m, mean);
    memcpy(out, H, (size_t)(m * m) * sizeof *out);
    for (int64_t i = 0; i < m; i++) out[i * m + i] += damp * mean;
    return TCQ_OK;
}

tcq_status tcq_quant_row_losses(tcq_qla *qla, const double *E, int64_t R, int64_t C, const double *Hd, double *EH,
                                double *loss)
{
    if (qla) {
        TCQ_TRY(tcq_qla_dgemm(qla, 0, 0, R, C, C, 1.0, E, C, Hd, C, 0.0, EH, C));
        return tcq_qla_rowdots(qla, E, EH, R, C, loss);
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)C, (int)C, 1.0, E, (int)C, Hd, (int)C, 0.0,
                EH, (int)C);
    for (int64_t r = 0; r < R; r++) {
        double l = 0;
        for (int64_t c = 0; c < C; c++) l += E[r * C + c] * EH[r * C + c];
        loss[r] = l;
    }
    return TCQ_OK;
}

/* A candidate run's rows that beat the best so far replace it (the first of equal losses kept) */
typedef struct keep_job {
    const tcq_ldlq_args *a, *b;   /* the result, the candidate run */
    const double *loss;
    double *best;
    int first;
} keep_job;

static void keep_rows(void *arg, int64_t item, int thread)
{
    const keep_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    const int64_t C = a->C, rw = C * a->p.k / 32;
    (void)thread;
    AX1_ROWS_OF(item, a->R);
    for (int64_t r = r0; r < r1; r++) {
        if (!j->first && !(j->loss[r] < j->best[r])) continue;
        j->best[r] = j->loss[r];
        if (j->first) continue;
        memcpy(a->codes + r * rw, j->b->codes + r * rw, (size_t)rw * sizeof *a->codes);
        a->scales[r] = j->b->scales[r];
        memcpy(a->What + r * C, j->b->What + r * C, (size_t)C * sizeof *a->What);
    }
}

/* Axis 1 with the scale search: BlockLDLQ once per candidate multiplier of every row's RMS
 * scale (the rows are independent: each row's loss e H e^T is its own), each row keeping the
 * candidate of the lowest loss under the damped H (what BlockLDLQ minimises).  On a qla the
 * losses stay there but for R numbers: E from the run's mirror, E Hd into a device-only EH. */
static tcq_status search_axis1(const tcq_ldlq_args *a, const double *Lm, const double *D)
{
    const int n_mult = TCQ_MIN(TCQ_MAX(a->scale_search, 1), 9);
    const int64_t R = a->R, C = a->C, rw = C * a->p.k / 32;
    ax1_ws w;
    TCQ_TRY(ax1_alloc(a, Lm, &w));
    if (n_mult == 1) {
        tcq_status s = ldlq_axis1(a, Lm, D, 1.0, &w);
        ax1_free(a->qla, &w, Lm);
        return s;
    }
    uint32_t *codes = malloc((size_t)(R * rw) * sizeof *codes);
    uint16_t *scales = malloc((size_t)R * sizeof *scales);
    float *What = malloc((size_t)(R * C) * sizeof *What);
    double *EH = malloc((size_t)(R * C) * sizeof *EH), *best = malloc((size_t)R * sizeof *best);
    double *Hd = malloc((size_t)(C * C) * sizeof *Hd), *loss = malloc((size_t)R * sizeof *loss);
    tcq_status s = codes && scales && What && EH && best && Hd && loss ? TCQ_OK
                 : tcq_fail(TCQ_ERR_NOMEM, "LDLQ scale search for [%lld, %lld]", (long long)R, (long long)C);
    if (s == TCQ_OK) s = tcq_quant_damp(a->H, C, a->damp, Hd);
    /* on a GPU the candidates' products E Hd run there (a 14B gate/up: 17408 x 5120 x 5120, ~1
     * Tflop in double each): Hd up once for the tensor, EH never down */
    int mir_h = 0, mir_eh = 0;
    if (s == TCQ_OK && a->qla) {
        s = tcq_qla_mirror(a->qla, Hd, (size_t)(C * C) * sizeof *Hd, 0);
        mir_h = s == TCQ_OK;
        if (s == TCQ_OK) s = tcq_qla_mirror(a->qla, EH, (size_t)(R * C) * sizeof *EH, 1);
        mir_eh = s == TCQ_OK;
    }
    tcq_ldlq_args b = *a;
    b.codes = codes, b.scales = scales, b.What = What;
    for (int m = 0; s == TCQ_OK && m < n_mult; m++) {
        s = ldlq_axis1(m ? &b : a, Lm, D, scale_mult[m], &w);
        if (s == TCQ_OK) s = tcq_quant_row_losses(a->qla, w.E, R, C, Hd, EH, loss);
        keep_job kj = {a, &b, loss, best, m == 0};
        if (s == TCQ_OK) rows_run(a->pool, R, keep_rows, &kj);
    }
    if (mir_h) tcq_qla_unmirror(a->qla, Hd);
    if (mir_eh) tcq_qla_unmirror(a->qla, EH);
    ax1_free(a->qla, &w, Lm);
    free(codes);
    free(scales);
    free(What);
    free(EH);
    free(best);
    free(Hd);
    free(loss);
    return s;
}

tcq_status tcq_quant_ldlq(const tcq_ldlq_args *a)
{
    const int64_t m = a->axis ? a->C : a->R;
    const int b = a->axis ? a->p.T : (int)tcq_quant_axis0_group(a);
    if (!a->W || !a->H || !a->codes || !a->scales || !a->What || a->R <= 0 || a->C <= 0 || a->C % a->p.T)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "LDLQ: bad arguments (shape [%lld, %lld])", (long long)a->R,
                        (long long)a->C);
    /* damped into the factor's buffer and factored in place: one m x m copy beside H, not two
     * (for a 14B model's down projection, m = 17408: 2.4 GB less at the quantizer's peak) */
    double *Lm = malloc((size_t)(m * m) * sizeof *Lm), *D = malloc((size_t)(m * b) * sizeof *D);
    int64_t *perm = a->axis ? NULL : malloc((size_t)m * sizeof *perm);
    tcq_status s = Lm && D && (a->axis || perm) ? TCQ_OK
                 : tcq_fail(TCQ_ERR_NOMEM, "LDLQ: Hessian of size %lld", (long long)m);
    if (s == TCQ_OK && a->axis) s = tcq_quant_damp(a->H, m, a->damp, Lm);
    else if (s == TCQ_OK) {   /* axis 0: damped and permuted in one pass on the pool */
        s = tcq_quant_act_order(a->H, m, perm);
        if (s == TCQ_OK) s = tcq_quant_damp_permuted(a->H, m, a->damp, perm, a->pool, Lm);
    }
    if (s == TCQ_OK) s = tcq_quant_block_ldl_on(a->qla, a->pool, Lm, m, b, Lm, D);
    if (s == TCQ_OK) s = a->axis ? search_axis1(a, Lm, D) : tcq_quant_ldlq_axis0(a, Lm, perm);
    /* tinyqwen k = 2, eval KL 8 windows: BlockLDLQ 0.2800, + H-weighted scales 0.2748, + one
     * coordinate descent pass 0.2586, three passes 0.2557 (docs/PERFORMANCE.md, "Quantizer") */
    double mean = 0;   /* the damped H is H + lambda I, without another m x m copy */
    for (int64_t i = 0; i < m; i++) mean += a->H[i * m + i];
    const double lambda = a->damp * mean / (double)m;
    for (int i = 0; s == TCQ_OK && i < a->passes; i++) s = tcq_quant_ldlq_pass(a, a->H, lambda);
    if (s == TCQ_OK && a->refit) {
        s = tcq_quant_hscale_on(a->qla, a->pool, a->p, a->W, a->R, a->C, a->axis, a->H, lambda, a->codes, a->scales);
        if (s == TCQ_OK) tcq_quant_decode_rows_on(a->pool, a->p, a->codes, a->scales, a->R, a->C, a->What);
    }
    free(Lm);
    free(D);
    free(perm);
    return s;
}
