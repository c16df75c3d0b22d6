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

tcq_status tcq_quant_proxy_on(tcq_qla *qla, const float *W, const float *What, int64_t R, int64_t C, int axis,
                              const double *H, double *loss, double *ref)
{
    double *E = malloc((size_t)(R * C) * sizeof *E);
    if (!E) return tcq_fail(TCQ_ERR_NOMEM, "proxy loss of [%lld, %lld]", (long long)R, (long long)C);
    tcq_status s = TCQ_OK;
    for (int pass = 0; s == TCQ_OK && pass < 2; pass++) {
        if (pass == 1 && !ref) break;
        for (int64_t i = 0; i < R * C; i++) E[i] = pass ? (double)W[i] : (double)W[i] - (double)What[i];
        s = tcq_qla_proxy(qla, E, R, C, axis, H, pass ? ref : loss);
    }
    free(E);
    return s;
}

static tcq_status ldlq_axis1(const tcq_ldlq_args *a, const double *Lm, const double *D, double mult)
{
    const tcq_block_params p = a->p;
    const int64_t R = a->R, C = a->C, T = p.T, nb = C / T, rw = C * p.k / 32, bw = tcq_block_words(p);
    double *E = calloc((size_t)(R * C), sizeof *E), *corr = malloc((size_t)(R * T) * sizeof *corr);
    float *tg = malloc((size_t)(R * C) * sizeof *tg), *x = malloc((size_t)(R * T) * sizeof *x);
    float *wt = malloc((size_t)(R * T) * sizeof *wt);
    uint32_t *words = malloc((size_t)(R * bw) * sizeof *words);
    tcq_status s = TCQ_OK;
    if (!E || !corr || !tg || !x || !words || !wt)
        s = tcq_fail(TCQ_ERR_NOMEM, "LDLQ buffers for [%lld, %lld]", (long long)R, (long long)C);
    for (int64_t r = 0; s == TCQ_OK && r < R; r++) a->scales[r] = scaled(tcq_scale_for_row(p.L, a->W + r * C, C), mult);
    /* on a GPU, E and L stay there: only each coded block's columns of E go up */
    int mir_e = 0, mir_l = 0;
    if (s == TCQ_OK && a->qla && nb > 1) {
        s = tcq_qla_mirror(a->qla, E, (size_t)(R * C) * sizeof *E, 1);
        mir_e = s == TCQ_OK;
        if (s == TCQ_OK) s = tcq_qla_mirror(a->qla, Lm, (size_t)(C * C) * sizeof *Lm, 0);
        mir_l = s == TCQ_OK && mir_e;
    }
    for (int64_t b = nb - 1; s == TCQ_OK && b >= 0; b--) {
        const int64_t c0 = b * T, rest = C - c0 - T;
        if (rest > 0 && a->qla)   /* corr = E[:, c0+T:] L[c0+T:, c0:c0+T] */
            s = tcq_qla_dgemm(a->qla, 0, 0, R, T, rest, 1.0, E + c0 + T, C, Lm + (c0 + T) * C + c0, C, 0.0, corr, T);
        else if (rest > 0)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)T, (int)rest, 1.0, E + c0 + T, (int)C,
                        Lm + (c0 + T) * C + c0, (int)C, 0.0, corr, (int)T);
        if (s != TCQ_OK) break;
        for (int64_t r = 0; r < R; r++) {
            const float sc = tcq_f16_to_f32(a->scales[r]);
            for (int64_t t = 0; t < T; t++) {
                const float v = rest > 0 ? (float)((double)a->W[r * C + c0 + t] + corr[r * T + t]) : a->W[r * C + c0 + t];
                tg[r * C + c0 + t] = v;
                x[r * T + t] = v / sc;
            }
        }
        {
            /* The block's term is (t - w^) D_b (t - w^)^T; the Viterbi takes D_b's diagonal as
             * per-position weights (mean 1).  Against unweighted, tinyqwen k = 2: the summed
             * q/k/v/gate/up proxy loss 0.8 % lower, lower on 35 of 40 (docs/PERFORMANCE.md, "Quantizer"). */
            const double *Db = D + c0 * T;
            double mean = 0;
            for (int64_t t = 0; t < T; t++) mean += Db[t * T + t];
            mean /= (double)T;
            for (int64_t r = 0; r < R; r++)
                for (int64_t t = 0; t < T; t++) wt[r * T + t] = (float)(Db[t * T + t] / mean);
        }
        s = tcq_quant_encode_blocks(a, x, wt, R, words);
        for (int64_t r = 0; s == TCQ_OK && r < R; r++) {
            uint32_t *dst = a->codes + r * rw + b * bw;
            memcpy(dst, words + r * bw, (size_t)bw * sizeof *dst);
            tcq_block_decode_f32(p, dst, tcq_f16_to_f32(a->scales[r]), a->What + r * C + c0);
            for (int64_t t = 0; t < T; t++)
                E[r * C + c0 + t] = (double)a->W[r * C + c0 + t] - (double)a->What[r * C + c0 + t];
        }
        if (s == TCQ_OK && mir_e) s = tcq_qla_push(a->qla, E + c0, R, T, C, sizeof *E);
    }
    if (mir_e) tcq_qla_unmirror(a->qla, E);
    if (mir_l) tcq_qla_unmirror(a->qla, Lm);
    if (s == TCQ_OK && a->refit) {
        s = tcq_quant_refit_scales(p, tg, R, C, a->codes, a->scales, NULL);
        if (s == TCQ_OK) tcq_quant_decode_rows(p, a->codes, a->scales, R, C, a->What);
    }
    free(E);
    free(corr);
    free(tg);
    free(x);
    free(wt);
    free(words);
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
    if (qla) TCQ_TRY(tcq_qla_dgemm(qla, 0, 0, R, C, C, 1.0, E, C, Hd, C, 0.0, EH, C));
    else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)C, (int)C, 1.0, E, (int)C, Hd, (int)C, 0.0,
                    EH, (int)C);
    for (int64_t r = 0; r < R; r++) {
        double l = 0;
        for (int64_t c = 0; c < C; c++) l += E[r * C + c] * EH[r * C + c];
        loss[r] = l;
    }
    return TCQ_OK;
}

/* Axis 1 with the scale search: BlockLDLQ once per candidate multiplier of every row's RMS
 * scale (the rows are independent: each row's loss e H e^T is its own), each row keeping the
 * candidate of the lowest loss under the damped H (what BlockLDLQ minimises). */
static tcq_status search_axis1(const tcq_ldlq_args *a, const double *Lm, const double *D)
{
    const int n_mult = TCQ_MIN(TCQ_MAX(a->scale_search, 1), 9);
    if (n_mult == 1) return ldlq_axis1(a, Lm, D, 1.0);
    const int64_t R = a->R, C = a->C, rw = C * a->p.k / 32;
    uint32_t *codes = malloc((size_t)(R * rw) * sizeof *codes);
    uint16_t *scales = malloc((size_t)R * sizeof *scales);
    float *What = malloc((size_t)(R * C) * sizeof *What);
    double *E = malloc((size_t)(R * C) * sizeof *E), *EH = malloc((size_t)(R * C) * sizeof *EH);
    double *best = malloc((size_t)R * sizeof *best), *Hd = malloc((size_t)(C * C) * sizeof *Hd);
    double *loss = malloc((size_t)R * sizeof *loss);
    tcq_status s = codes && scales && What && E && EH && best && Hd && loss ? TCQ_OK
                 : tcq_fail(TCQ_ERR_NOMEM, "LDLQ scale search for [%lld, %lld]", (long long)R, (long long)C);
    if (s == TCQ_OK) s = tcq_quant_damp(a->H, C, a->damp, Hd);
    /* on a GPU the candidates' products E Hd run there (a 14B gate/up: 17408 x 5120 x 5120, ~1
     * Tflop in double each), Hd up once for the tensor, each E staged */
    int mir = 0;
    if (s == TCQ_OK && a->qla) {
        s = tcq_qla_mirror(a->qla, Hd, (size_t)(C * C) * sizeof *Hd, 0);
        mir = s == TCQ_OK;
    }
    tcq_ldlq_args b = *a;
    b.codes = codes, b.scales = scales, b.What = What;
    for (int m = 0; s == TCQ_OK && m < n_mult; m++) {
        s = ldlq_axis1(m ? &b : a, Lm, D, scale_mult[m]);
        const float *wh = m ? What : a->What;
        for (int64_t i = 0; s == TCQ_OK && i < R * C; i++) E[i] = (double)a->W[i] - (double)wh[i];
        if (s == TCQ_OK) s = tcq_quant_row_losses(a->qla, E, R, C, Hd, EH, loss);
        for (int64_t r = 0; s == TCQ_OK && r < R; r++) {
            const double l = loss[r];
            if (m == 0 || l < best[r]) {
                best[r] = l;
                if (m) {
                    memcpy(a->codes + r * rw, codes + r * rw, (size_t)rw * sizeof *codes);
                    a->scales[r] = scales[r];
                    memcpy(a->What + r * C, What + r * C, (size_t)C * sizeof *What);
                }
            }
        }
    }
    free(codes);
    free(scales);
    free(What);
    free(E);
    free(EH);
    if (mir) tcq_qla_unmirror(a->qla, Hd);
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
        s = tcq_quant_hscale(a->p, a->W, a->R, a->C, a->axis, a->H, lambda, a->codes, a->scales);
        if (s == TCQ_OK) tcq_quant_decode_rows(a->p, a->codes, a->scales, a->R, a->C, a->What);
    }
    free(Lm);
    free(D);
    free(perm);
    return s;
}
