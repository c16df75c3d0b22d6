/* BlockLDLQ along axis 0 (o/down: the stored rows are the inputs, H is over them; ldlq.c has the
 * common parts).  The rows are taken in GPTQ's act-order (the inputs of largest H_ii first; H is
 * factored permuted, the codes land in the stored rows; tinyqwen k = 3: the proxy loss of every
 * o/down projection 1.5-20 % lower than in the natural order, docs/PERFORMANCE.md) and coded in
 * groups of g consecutive rows of that order: the blocks of the block LDL of P H P^T (blocks of
 * g; the first, the last coded, holds R mod g).  A group's targets get the feedback of the groups
 * coded before it only (its own block of L is I), so its g rows and all their candidate scales
 * go to the encoder in one call: on a GPU, R / g launches of g x n_mult x C/T blocks instead of
 * R x n_mult of C/T (a 14B down projection: 17408 rows of 20 blocks).  g = 1 is GPTQ's
 * column-by-column order, the algorithm before groups, bit for bit.
 *   Each row's scale is chosen by its own squared error to its target, as for g = 1: the group's
 * term is sum over columns of (t - w^)^T D_b (t - w^), and D_b's coupling of the group's rows
 * (its off-diagonal) is ignored for that choice, as it is by the codes (each row coded alone). */
#include "qla.h"
#include "quant.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

int64_t tcq_quant_axis0_group(const tcq_ldlq_args *a)
{
    return TCQ_MIN(TCQ_MAX(a->axis0_group, 1), a->R);
}

/* Axis 0's coding order (GPTQ's act-order): the stored rows (inputs) by ascending H_ii, ties by
 * index, so that coding from the last takes the inputs of most energy first, while the most
 * rows are left to absorb their errors.  perm[i] is the stored row at position i of the order. */
typedef struct ao_key {
    double h;
    int64_t i;
} ao_key;

static int ao_cmp(const void *x, const void *y)
{
    const ao_key *a = x, *b = y;
    return a->h < b->h ? -1 : a->h > b->h ? 1 : (a->i > b->i) - (a->i < b->i);
}

tcq_status tcq_quant_act_order(const double *H, int64_t m, int64_t *perm)
{
    ao_key *k = malloc((size_t)m * sizeof *k);
    if (!k) return tcq_fail(TCQ_ERR_NOMEM, "LDLQ order of %lld rows", (long long)m);
    for (int64_t i = 0; i < m; i++) k[i] = (ao_key){H[i * m + i], i};
    qsort(k, (size_t)m, sizeof *k, ao_cmp);
    for (int64_t i = 0; i < m; i++) perm[i] = k[i].i;
    free(k);
    return TCQ_OK;
}

tcq_status tcq_quant_permute_sym(double *A, int64_t m, const int64_t *perm, double *tmp)
{
    char *done = calloc((size_t)m, 1);
    if (!done) return tcq_fail(TCQ_ERR_NOMEM, "LDLQ order of %lld rows", (long long)m);
    for (int64_t i = 0; i < m; i++) {   /* columns of each row */
        double *r = A + i * m;
        for (int64_t j = 0; j < m; j++) tmp[j] = r[perm[j]];
        memcpy(r, tmp, (size_t)m * sizeof *r);
    }
    /* rows: follow the cycles of perm with one row of tmp */
    for (int64_t s0 = 0; s0 < m; s0++) {
        if (done[s0]) continue;
        memcpy(tmp, A + s0 * m, (size_t)m * sizeof *tmp);
        int64_t i = s0;
        for (;;) {
            done[i] = 1;
            const int64_t src = perm[i];
            if (src == s0) {
                memcpy(A + i * m, tmp, (size_t)m * sizeof *tmp);
                break;
            }
            memcpy(A + i * m, A + src * m, (size_t)m * sizeof *A);
            i = src;
        }
    }
    free(done);
    return TCQ_OK;
}

/* P (H + damp mean(diag H) I) P^T straight from H, row by row on the pool: tcq_quant_damp then
 * tcq_quant_permute_sym, the same bits (the diagonal's damping is added to the same entries), in
 * one parallel pass instead of an m x m copy, a gather and the rows' cycles on one thread. */
typedef struct perm_job {
    const double *H;
    const int64_t *perm;
    int64_t m;
    double dm;
    double *out;
} perm_job;

#define PERM_ROWS 16

static void perm_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const perm_job *j = arg;
    const int64_t m = j->m;
    for (int64_t i = item * PERM_ROWS; i < TCQ_MIN(m, (item + 1) * PERM_ROWS); i++) {
        const double *h = j->H + j->perm[i] * m;
        double *o = j->out + i * m;
        for (int64_t c = 0; c < m; c++) o[c] = h[j->perm[c]];
        o[i] += j->dm;
    }
}

tcq_status tcq_quant_damp_permuted(const double *H, int64_t m, double damp, const int64_t *perm, tcq_pool *pool,
                                   double *out)
{
    double mean = 0;   /* tcq_quant_damp's mean, in its order */
    for (int64_t i = 0; i < m; i++) mean += H[i * m + i];
    mean /= (double)m;
    if (!(mean > 0) || !isfinite(mean))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "Hessian of size %lld: mean diagonal %g (no calibration signal)",
                        (long long)m, mean);
    perm_job j = {H, perm, m, damp * mean, out};
    tcq_pool_run(pool, (m + PERM_ROWS - 1) / PERM_ROWS, perm_item, &j);
    return TCQ_OK;
}

/* Groups are coded from the last; a coded group's errors reach the rows of its batch and the
 * rows below the batch in one sgemm (GPTQ's lazy batch: the same sums, grouped).  The batch
 * is a whole number of groups (128 rows for g <= 128), aligned like them from the last row, so
 * no group straddles two.  Within the batch the feedback is lazy too: a group's rows take the
 * errors of every row coded above them in the batch just before they are coded, each entry in
 * the order the eager update gave it (rows from the last: the same bits), on the pool. */
#define AXIS0_BATCH 128
/* the columns of one item of the group's targets (its rows times C / AXIS0_COLS items) */
#define AXIS0_COLS 512

typedef struct ax0_job {
    const tcq_ldlq_args *a;
    const double *Lm;
    const int64_t *perm;
    float *acc, *tg, *eb, *lf;
    const uint32_t *gc;
    const uint16_t *gs;
    int64_t lo, hi, gl, gh, chunks;
} ax0_job;

/* Row gl + item / chunks of the group, columns of chunk item % chunks: the batch's feedback
 * acc_i += L[k][i] e_k for the rows k coded above the group (from the last), then the target
 * w + acc_i. */
static void ax0_target_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const ax0_job *j = arg;
    const int64_t R = j->a->R, C = j->a->C, i = j->gl + item / j->chunks;
    const int64_t t0 = item % j->chunks * AXIS0_COLS, t1 = TCQ_MIN(C, t0 + AXIS0_COLS);
    float *ai = j->acc + i * C;
    for (int64_t k = j->hi - 1; k >= j->gh; k--) {
        const float l = (float)j->Lm[k * R + i], *e = j->eb + (k - j->lo) * C;
        for (int64_t t = t0; t < t1; t++) ai[t] += l * e[t];
    }
    const float *w = j->a->W + j->perm[i] * C;
    float *tg = j->tg + (i - j->gl) * C;
    for (int64_t t = t0; t < t1; t++) tg[t] = w[t] + ai[t];
}

/* Row gl + item of the coded group: its codes and scale into the stored row perm[i], its
 * reconstruction, its error into the batch's eb. */
static void ax0_finish_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const ax0_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    const int64_t C = a->C, rw = C * a->p.k / 32, i = j->gl + item, pi = j->perm[i];
    const float *w = a->W + pi * C;
    float *wh = a->What + pi * C, *e = j->eb + (i - j->lo) * C;
    memcpy(a->codes + pi * rw, j->gc + item * rw, (size_t)rw * sizeof *j->gc);
    a->scales[pi] = j->gs[item];
    tcq_quant_decode_rows(a->p, a->codes + pi * rw, a->scales + pi, 1, C, wh);
    for (int64_t t = 0; t < C; t++) e[t] = w[t] - wh[t];
}

/* Row lo + item of the batch: its L entries to the rows below the batch, in float for the sgemm. */
static void ax0_lf_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const ax0_job *j = arg;
    const int64_t R = j->a->R, i = j->lo + item;
    for (int64_t k = 0; k < j->lo; k++) j->lf[item * j->lo + k] = (float)j->Lm[i * R + k];
}

tcq_status tcq_quant_ldlq_axis0(const tcq_ldlq_args *a, const double *Lm, const int64_t *perm)
{
    const int64_t R = a->R, C = a->C, rw = C * a->p.k / 32, g = tcq_quant_axis0_group(a);
    const int64_t B = TCQ_MAX(AXIS0_BATCH / g, 1) * g;
    const int n_mult = TCQ_MIN(TCQ_MAX(a->scale_search, 1), 9);
    float *acc = calloc((size_t)(R * C), sizeof *acc), *tg = malloc((size_t)(g * C) * sizeof *tg);
    float *eb = malloc((size_t)(B * C) * sizeof *eb), *lf = malloc((size_t)(B * R) * sizeof *lf);
    uint32_t *gc = malloc((size_t)(g * rw) * sizeof *gc);
    uint16_t *gs = malloc((size_t)g * sizeof *gs);
    tcq_quant_cand cand = {0};
    tcq_status s = TCQ_OK;
    if (!acc || !tg || !eb || !lf || !gc || !gs)
        s = tcq_fail(TCQ_ERR_NOMEM, "LDLQ buffers for [%lld, %lld]", (long long)R, (long long)C);
    if (s == TCQ_OK) s = tcq_quant_cand_alloc(a, g, n_mult, &cand);
    /* on a GPU, acc lives there: the batch's products land on the device, each batch's rows come
     * down before it is coded */
    int mir = 0;
    if (s == TCQ_OK && a->qla && R > B) {
        s = tcq_qla_mirror(a->qla, acc, (size_t)(R * C) * sizeof *acc, 1);
        mir = s == TCQ_OK;
    }
    ax0_job j = {a, Lm, perm, acc, tg, eb, lf, gc, gs, 0, 0, 0, 0, (C + AXIS0_COLS - 1) / AXIS0_COLS};
    for (int64_t hi = R; s == TCQ_OK && hi > 0; hi -= B) {
        const int64_t lo = TCQ_MAX(0, hi - B);
        if (mir && hi < R) s = tcq_qla_pull(a->qla, acc + lo * C, hi - lo, C, C, sizeof *acc);
        j.lo = lo, j.hi = hi;
        for (int64_t gh = hi; s == TCQ_OK && gh > lo; gh -= g) {
            const int64_t gl = TCQ_MAX(lo, gh - g);   /* the group: positions gl..gh-1 of the order */
            j.gl = gl, j.gh = gh;                      /* Lm's row i is the stored row perm[i] */
            tcq_pool_run(a->pool, (gh - gl) * j.chunks, ax0_target_item, &j);
            s = tcq_quant_code_candidates(a, &cand, tg, gh - gl, n_mult, gc, gs);
            if (s == TCQ_OK) tcq_pool_run(a->pool, gh - gl, ax0_finish_item, &j);
        }
        if (s != TCQ_OK || lo == 0) continue;
        tcq_pool_run(a->pool, hi - lo, ax0_lf_item, &j);
        if (mir) s = tcq_qla_sgemm(a->qla, 1, 0, lo, C, hi - lo, 1.0f, lf, lo, eb, C, 1.0f, acc, C);
        else
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)lo, (int)C, (int)(hi - lo), 1.0f, lf, (int)lo, eb,
                        (int)C, 1.0f, acc, (int)C);
    }
    if (mir) tcq_qla_unmirror(a->qla, acc);
    tcq_quant_cand_free(&cand);
    free(acc);
    free(tg);
    free(eb);
    free(lf);
    free(gc);
    free(gs);
    return s;
}
