/* Axis 0's pass (ldlq_pass.c states the algorithm): the batch step shared by the CPU path
 * (tcq_quant_pass0_cpu, here) and the qla one (ldlq_pass_qla.c), and its host work on the pool.
 *   G = (H + lambda I) E is brought up to date lazily.  A kept row i's change d reaches only
 * the rows still to decide (j < i: a coded row's G is never read again); the rows of its own
 * group at once (the next row's decision reads them), the rows of its batch below the group
 * just before their group is coded, and the rows below the batch at the batch's end (CPU: a
 * loop on the pool; qla: one product on the device).  Each entry of G still takes the kept rows'
 * terms one by one from the last row, as when every kept row updated every row at once: the
 * same bits, for any thread count (every item owns the rows / columns it writes).
 *   Per group: the targets (a row an item), the encoder's one call, then per row the decode of
 * its new codes, d and |d|^2 (an item each), the decisions in row order (each needs the rows
 * kept before it: <d, G_i> and the group's own updates, g^2 C / 2), and the kept rows' copies. */
#include "quant.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* the columns of one item of the lazy updates */
#define PASS0_COLS 512

static void free_all(tcq_quant_pass0 *st)
{
    free(st->E);
    free(st->G);
    free(st->db);
    free(st->kept);
    free(st->dd);
    free(st->failed);
    free(st->tg);
    free(st->x);
    free(st->wh);
    free(st->gs);
    free(st->cw);
}

typedef struct rows_job {
    const tcq_quant_pass0 *st;
    int64_t r0;
} rows_job;

/* Row r0 + item: E = W - What; G += lambda E (the damping's part of G). */
static void e_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const rows_job *j = arg;
    const tcq_quant_pass0 *st = j->st;
    const int64_t C = st->a->C, i = j->r0 + item;
    double *e = st->E + i * C;
    const float *w = st->a->W + i * C, *wh = st->a->What + i * C;
    for (int64_t t = 0; t < C; t++) e[t] = (double)w[t] - (double)wh[t];
}

static void damp_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const rows_job *j = arg;
    const tcq_quant_pass0 *st = j->st;
    const int64_t C = st->a->C, i = j->r0 + item;
    const double *e = st->E + i * C;
    double *g = st->G + i * C;
    for (int64_t t = 0; t < C; t++) g[t] += st->lambda * e[t];
}

tcq_status tcq_quant_pass0_init(tcq_quant_pass0 *st, const tcq_ldlq_args *a, const double *H, double lambda,
                                int64_t batch, int cpu)
{
    const int64_t R = a->R, C = a->C, rw = C * a->p.k / 32, g = tcq_quant_axis0_group(a);
    const int64_t B = TCQ_MAX(batch / g, 1) * g;   /* whole groups, aligned like them on row R */
    *st = (tcq_quant_pass0){.a = a, .H = H, .lambda = lambda, .cpu = cpu};
    st->B = B, st->g = g, st->chunks = (C + PASS0_COLS - 1) / PASS0_COLS;
    st->E = malloc((size_t)(R * C) * sizeof *st->E);
    st->G = malloc((size_t)(R * C) * sizeof *st->G);
    st->db = malloc((size_t)(B * C) * sizeof *st->db);
    st->kept = malloc((size_t)B);
    st->dd = malloc((size_t)g * sizeof *st->dd);
    st->failed = malloc((size_t)g * sizeof *st->failed);
    st->tg = malloc((size_t)(g * C) * sizeof *st->tg);
    st->x = malloc((size_t)(g * C) * sizeof *st->x);
    st->wh = malloc((size_t)(g * C) * sizeof *st->wh);
    st->gs = malloc((size_t)g * sizeof *st->gs);
    st->cw = malloc((size_t)(g * rw) * sizeof *st->cw);
    if (!st->E || !st->G || !st->db || !st->kept || !st->dd || !st->failed || !st->tg || !st->x || !st->wh || !st->gs ||
        !st->cw) {
        free_all(st);
        return tcq_fail(TCQ_ERR_NOMEM, "LDLQ pass buffers for [%lld, %lld]", (long long)R, (long long)C);
    }
    rows_job j = {st, 0};
    tcq_pool_run(a->pool, R, e_item, &j);
    return TCQ_OK;
}

void tcq_quant_pass0_free(tcq_quant_pass0 *st)
{
    free_all(st);
}

void tcq_quant_pass0_damp_rows(tcq_quant_pass0 *st, int64_t lo, int64_t hi)
{
    rows_job j = {st, lo};
    tcq_pool_run(st->a->pool, hi - lo, damp_item, &j);
}

/* G_i += h d_k for the kept rows k of [k0, k1) from the last, i = i0 + item / chunks, columns of
 * chunk item % chunks; h = H_ik (+ 0.0 on the CPU path: its old update of every row added
 * (i == k ? lambda : 0), kept for the bits of a -0.0 entry). */
typedef struct lazy_job {
    const tcq_quant_pass0 *st;
    int64_t i0, k0, k1;
} lazy_job;

static void lazy_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const lazy_job *j = arg;
    const tcq_quant_pass0 *st = j->st;
    const int64_t R = st->a->R, C = st->a->C, i = j->i0 + item / st->chunks;
    const int64_t t0 = item % st->chunks * PASS0_COLS, t1 = TCQ_MIN(C, t0 + PASS0_COLS);
    double *gi = st->G + i * C;
    for (int64_t k = j->k1 - 1; k >= j->k0; k--) {
        if (!st->kept[k - st->lo]) continue;
        const double h = st->cpu ? st->H[i * R + k] + 0.0 : st->H[i * R + k], *d = st->db + (k - st->lo) * C;
        for (int64_t t = t0; t < t1; t++) gi[t] += h * d[t];
    }
}

/* Row gl + item of the group: its target from G as it is at the group's start (g = G_i - H_ii
 * e_i, the other rows' pull; target w + g / H_ii), its RMS scale, the scaled target. */
static void target_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const tcq_quant_pass0 *st = arg;
    const tcq_ldlq_args *a = st->a;
    const int64_t R = a->R, C = a->C, i = st->gl + item;
    const double hii = st->H[i * R + i] + st->lambda, *e = st->E + i * C, *gi = st->G + i * C;
    const float *w = a->W + i * C;
    float *t = st->tg + item * C, *xi = st->x + item * C;
    for (int64_t c = 0; c < C; c++) t[c] = (float)((double)w[c] + (gi[c] - hii * e[c]) / hii);
    st->gs[item] = tcq_scale_for_row(a->p.L, t, C);
    const float sc = tcq_f16_to_f32(st->gs[item]);
    for (int64_t c = 0; c < C; c++) xi[c] = t[c] / sc;
}

/* Row gl + item: its new codes decoded (refit first if asked) and d = e' - e = w^ - w^' into
 * its row of db, |d|^2 into dd. */
static void decode_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    tcq_quant_pass0 *st = arg;
    const tcq_ldlq_args *a = st->a;
    const int64_t C = a->C, rw = C * a->p.k / 32, i = st->gl + item;
    const uint32_t *ci = st->cw + item * rw;
    float *wh = st->wh + item * C;
    double *d = st->db + (i - st->lo) * C, dd = 0;
    st->failed[item] = a->refit && tcq_quant_refit_scales(a->p, st->tg + item * C, 1, C, ci, st->gs + item, NULL) != TCQ_OK;
    if (st->failed[item]) return;
    tcq_quant_decode_rows(a->p, ci, st->gs + item, 1, C, wh);
    for (int64_t t = 0; t < C; t++) {
        d[t] = (double)a->What[i * C + t] - (double)wh[t];
        dd += d[t] * d[t];
    }
    st->dd[item] = dd;
}

/* Row gl + item after the decisions: kept, its codes, scale, What and E take the new codes;
 * else its row of db is zeroed (the batch's product below reads it). */
static void keep_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const tcq_quant_pass0 *st = arg;
    const tcq_ldlq_args *a = st->a;
    const int64_t C = a->C, rw = C * a->p.k / 32, i = st->gl + item;
    double *d = st->db + (i - st->lo) * C, *e = st->E + i * C;
    if (!st->kept[i - st->lo]) {
        memset(d, 0, (size_t)C * sizeof *d);
        return;
    }
    memcpy(a->codes + i * rw, st->cw + item * rw, (size_t)rw * sizeof *st->cw);
    a->scales[i] = st->gs[item];
    memcpy(a->What + i * C, st->wh + item * C, (size_t)C * sizeof *st->wh);
    for (int64_t t = 0; t < C; t++) e[t] += d[t];
}

tcq_status tcq_quant_pass0_batch(tcq_quant_pass0 *st, int64_t lo, int64_t hi)
{
    const tcq_ldlq_args *a = st->a;
    const int64_t R = a->R, C = a->C;
    st->lo = lo, st->hi = hi;
    memset(st->kept, 0, (size_t)st->B);
    for (int64_t gh = hi; gh > lo; gh -= st->g) {
        const int64_t gl = TCQ_MAX(lo, gh - st->g);   /* the group: stored rows gl..gh-1 */
        st->gl = gl, st->gh = gh;
        lazy_job lj = {st, gl, gh, hi};   /* the batch's kept rows above the group */
        tcq_pool_run(a->pool, (gh - gl) * st->chunks, lazy_item, &lj);
        tcq_pool_run(a->pool, gh - gl, target_item, st);
        TCQ_TRY(tcq_quant_encode_blocks(a, st->x, NULL, (gh - gl) * (C / a->p.T), st->cw));
        tcq_pool_run(a->pool, gh - gl, decode_item, st);
        for (int64_t i = 0; i < gh - gl; i++)
            if (st->failed[i]) return tcq_fail(TCQ_ERR_NOMEM, "LDLQ pass: refit of a row of %lld", (long long)C);
        /* row by row, each kept on its exact loss change H_ii |d|^2 + 2 <d, G_i> given the rows
         * kept before it, which reach the group's rows below at once */
        for (int64_t i = gh - 1; i >= gl; i--) {
            const double hii = st->H[i * R + i] + st->lambda, *gi = st->G + i * C, *d = st->db + (i - lo) * C;
            double dg = 0;
            for (int64_t t = 0; t < C; t++) dg += d[t] * gi[t];
            if (hii * st->dd[i - gl] + 2 * dg >= 0) continue;
            st->kept[i - lo] = 1;
            for (int64_t j = gl; j < i; j++) {
                const double h = st->cpu ? st->H[j * R + i] + 0.0 : st->H[j * R + i];
                double *gj = st->G + j * C;
                for (int64_t t = 0; t < C; t++) gj[t] += h * d[t];
            }
        }
        tcq_pool_run(a->pool, gh - gl, keep_item, st);
    }
    return TCQ_OK;
}

tcq_status tcq_quant_pass0_cpu(const tcq_ldlq_args *a, const double *H, double lambda)
{
    const int64_t R = a->R, C = a->C;
    tcq_quant_pass0 st;
    TCQ_TRY(tcq_quant_pass0_init(&st, a, H, lambda, 64, 1));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)C, (int)R, 1.0, H, (int)R, st.E, (int)C, 0.0,
                st.G, (int)C);
    tcq_quant_pass0_damp_rows(&st, 0, R);
    tcq_status s = TCQ_OK;
    for (int64_t hi = R; s == TCQ_OK && hi > 0; hi -= st.B) {
        const int64_t lo = TCQ_MAX(0, hi - st.B);
        s = tcq_quant_pass0_batch(&st, lo, hi);
        lazy_job lj = {&st, 0, lo, hi};   /* the rows below the batch */
        if (s == TCQ_OK && lo > 0) tcq_pool_run(a->pool, lo * st.chunks, lazy_item, &lj);
    }
    tcq_quant_pass0_free(&st);
    return s;
}
