/* Axis 0's batched coding (issue 23: a GPU encoder wants many blocks a launch):
 *   - the scale candidates of several rows in one encoder call (tcq_quant_code_candidates) give
 *     the codes and scales of the per-row, per-candidate loop they replaced (kept here as the
 *     reference), with and without the refit, for searches of 1, 5 and 9, with its scratch
 *     allocated per call and reused (one per tensor);
 *   - groups of one (axis0_group 1): BlockLDLQ + a pass + the H-weighted scales give the bits of
 *     the row-by-row algorithm before groups (kept here as the reference: ref_axis0, ref_pass);
 *     H damped and permuted in one pooled pass equals tcq_quant_damp + tcq_quant_permute_sym;
 *   - groups of 16 over 300 rows (the last group 12): the pass never raises the damped proxy loss,
 *     on the CPU and on the qla host emulation; the same bits on 1 and 2 threads and without a
 *     pool, both paths (the lazy in-batch updates and the pooled host steps own their outputs). */
#include "test.h"
#include "quant/qla.h"
#include "quant/quant.h"

#include <cblas.h>

static const double mults[9] = {1.0, 0.9, 1.1, 0.8, 1.2, 0.95, 1.05, 0.85, 1.15};

/* The pre-batching loop of one row: each candidate encoded alone, refit, decoded, compared. */
static void ref_candidates(tcq_block_params p, int refit, const float *tg, int64_t C, int n_mult, uint32_t *cw,
                           uint16_t *scale)
{
    const int64_t rw = C * p.k / 32;
    const tcq_encode_opts enc = {0};
    float *x = malloc((size_t)C * sizeof *x), *e = malloc((size_t)C * sizeof *e);
    uint32_t *cw2 = malloc((size_t)rw * sizeof *cw2);
    const uint16_t rms = tcq_scale_for_row(p.L, tg, C);
    double best = INFINITY;
    for (int m = 0; m < n_mult; m++) {
        uint16_t sh = rms;
        if (mults[m] != 1.0) {
            sh = tcq_f32_to_f16((float)(tcq_f16_to_f32(rms) * mults[m]));
            if (!(sh & 0x7fffu)) sh = 1;
        }
        const float sc = tcq_f16_to_f32(sh);
        for (int64_t t = 0; t < C; t++) x[t] = tg[t] / sc;
        uint32_t *dst = m ? cw2 : cw;
        CHECK_OK(tcq_encode_blocks(p, &enc, x, NULL, C / p.T, dst, NULL, NULL));
        if (refit) CHECK_OK(tcq_quant_refit_scales(p, tg, 1, C, dst, &sh, NULL));
        if (n_mult == 1) {
            *scale = sh;
            break;
        }
        tcq_quant_decode_rows(p, dst, &sh, 1, C, e);
        double err = 0;
        for (int64_t t = 0; t < C; t++) err += ((double)tg[t] - e[t]) * ((double)tg[t] - e[t]);
        if (err < best) {
            best = err;
            *scale = sh;
            if (m) memcpy(cw, cw2, (size_t)rw * sizeof *cw);
        }
    }
    free(x);
    free(e);
    free(cw2);
}

static void check_candidates(uint64_t *st)
{
    const tcq_block_params p = {12, 2, 256};
    const tcq_encode_opts enc = {0};
    const int64_t n = 5, C = 512, rw = C * p.k / 32;
    float *tg = malloc((size_t)(n * C) * sizeof *tg);
    uint32_t *c0 = malloc((size_t)(n * rw) * 4), *c1 = malloc((size_t)(n * rw) * 4);
    uint16_t s0[5], s1[5];
    for (int64_t i = 0; i < n * C; i++) tg[i] = (float)(test_gauss(st) * (1 + i / C));   /* rows of other scales */
    tcq_pool *pool = NULL;
    CHECK_OK(tcq_pool_create(2, &pool));
    tcq_quant_cand sc;
    const tcq_ldlq_args a9 = {p, &enc, pool, NULL, n, C, 0, NULL, 0, 0, NULL, NULL, NULL, 0, 9, NULL, NULL, 1};
    CHECK_OK(tcq_quant_cand_alloc(&a9, n, 9, &sc));
    for (int refit = 0; refit <= 1; refit++)
        for (int n_mult = 1; n_mult <= 9; n_mult += 4) {
            const tcq_ldlq_args a = {p, &enc, pool, NULL, n, C, 0, NULL, 0, refit, NULL, NULL, NULL, 0, n_mult, NULL, NULL, 1};
            CHECK_OK(tcq_quant_code_candidates(&a, NULL, tg, n, n_mult, c1, s1));
            for (int64_t r = 0; r < n; r++) ref_candidates(p, refit, tg + r * C, C, n_mult, c0 + r * rw, s0 + r);
            CHECK(!memcmp(c0, c1, (size_t)(n * rw) * 4) && !memcmp(s0, s1, sizeof s0),
                  "refit %d, %d candidates: %lld rows in one call differ from the per-candidate loop", refit, n_mult,
                  (long long)n);
            /* the scratch of a tensor, reused call after call (here for n rows of 9; the call
             * before left its words and errors in it) */
            memset(c1, 0, (size_t)(n * rw) * 4);
            CHECK_OK(tcq_quant_code_candidates(&a, &sc, tg, n, n_mult, c1, s1));
            CHECK(!memcmp(c0, c1, (size_t)(n * rw) * 4) && !memcmp(s0, s1, sizeof s0),
                  "refit %d, %d candidates: other bits with a reused scratch", refit, n_mult);
        }
    tcq_quant_cand_free(&sc);
    tcq_pool_free(pool);
    free(tg);
    free(c0);
    free(c1);
}

/* Axis 0's BlockLDLQ before groups (its CPU path): row by row from the last, each row's target
 * its weights plus the feedback of every row coded before it, lazy batches of 128. */
static void ref_axis0(tcq_block_params p, int refit, int n_mult, const float *W, int64_t R, int64_t C, const double *Lm,
                      const int64_t *perm, uint32_t *codes, uint16_t *scales, float *What)
{
    const int64_t rw = C * p.k / 32;
    float *acc = calloc((size_t)(R * C), sizeof *acc), *tg = malloc((size_t)C * sizeof *tg);
    float *eb = malloc((size_t)(128 * C) * sizeof *eb), *lf = malloc((size_t)(128 * R) * sizeof *lf);
    for (int64_t hi = R; hi > 0; hi -= 128) {
        const int64_t lo = TCQ_MAX(0, hi - 128);
        for (int64_t i = hi - 1; i >= lo; i--) {
            const int64_t pi = perm[i];
            const float *w = W + pi * C;
            for (int64_t t = 0; t < C; t++) tg[t] = w[t] + acc[i * C + t];
            ref_candidates(p, refit, tg, C, n_mult, codes + pi * rw, scales + pi);
            float *wh = What + pi * C, *e = eb + (i - lo) * C;
            tcq_quant_decode_rows(p, codes + pi * rw, scales + pi, 1, C, wh);
            for (int64_t t = 0; t < C; t++) e[t] = w[t] - wh[t];
            for (int64_t j = lo; j < i; j++) {
                const float l = (float)Lm[i * R + j];
                for (int64_t t = 0; t < C; t++) acc[j * C + t] += l * e[t];
            }
        }
        if (lo == 0) continue;
        for (int64_t i = lo; i < hi; i++)
            for (int64_t j = 0; j < lo; j++) lf[(i - lo) * lo + j] = (float)Lm[i * R + j];
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)lo, (int)C, (int)(hi - lo), 1.0f, lf, (int)lo, eb,
                    (int)C, 1.0f, acc, (int)C);
    }
    free(acc);
    free(tg);
    free(eb);
    free(lf);
}

/* Axis 0's coordinate descent pass before groups (its CPU path): each row recoded from the
 * target of the others' latest errors, kept where the loss drops, G updated at once. */
static void ref_pass(tcq_block_params p, int refit, const float *W, int64_t R, int64_t C, const double *H,
                     double lambda, uint32_t *codes, uint16_t *scales, float *What)
{
    const tcq_encode_opts enc = {0};
    const int64_t rw = C * p.k / 32;
    double *E = malloc((size_t)(R * C) * sizeof *E), *G = malloc((size_t)(R * C) * sizeof *G);
    double *d = malloc((size_t)C * sizeof *d);
    float *tg = malloc((size_t)C * sizeof *tg), *x = malloc((size_t)C * sizeof *x), *wh = malloc((size_t)C * sizeof *wh);
    uint32_t *cw = malloc((size_t)rw * sizeof *cw);
    for (int64_t i = 0; i < R * C; i++) E[i] = (double)W[i] - (double)What[i];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)C, (int)R, 1.0, H, (int)R, E, (int)C, 0.0, G,
                (int)C);
    for (int64_t i = 0; i < R * C; i++) G[i] += lambda * E[i];
    for (int64_t i = R - 1; i >= 0; i--) {
        const double hii = H[i * R + i] + lambda;
        const float *w = W + i * C;
        double *e = E + i * C, *gi = G + i * C;
        for (int64_t t = 0; t < C; t++) tg[t] = (float)((double)w[t] + (gi[t] - hii * e[t]) / hii);
        uint16_t sc16 = tcq_scale_for_row(p.L, tg, C);
        const float sc = tcq_f16_to_f32(sc16);
        for (int64_t t = 0; t < C; t++) x[t] = tg[t] / sc;
        CHECK_OK(tcq_encode_blocks(p, &enc, x, NULL, C / p.T, cw, NULL, NULL));
        if (refit) CHECK_OK(tcq_quant_refit_scales(p, tg, 1, C, cw, &sc16, NULL));
        tcq_quant_decode_rows(p, cw, &sc16, 1, C, wh);
        double dd = 0, dg = 0;
        for (int64_t t = 0; t < C; t++) {
            d[t] = (double)What[i * C + t] - (double)wh[t];
            dd += d[t] * d[t];
            dg += d[t] * gi[t];
        }
        if (hii * dd + 2 * dg >= 0) continue;
        memcpy(codes + i * rw, cw, (size_t)rw * sizeof *cw);
        scales[i] = sc16;
        for (int64_t t = 0; t < C; t++) {
            What[i * C + t] = wh[t];
            e[t] += d[t];
        }
        for (int64_t j = 0; j < R; j++) {
            const double h = H[j * R + i] + (j == i ? lambda : 0);
            for (int64_t t = 0; t < C; t++) G[j * C + t] += h * d[t];
        }
    }
    free(E), free(G), free(d), free(tg), free(x), free(wh), free(cw);
}

typedef struct fixture {
    tcq_block_params p;
    int64_t R, C, rw;
    double damp, lambda;
    double *H, *Hd;
    float *W;
} fixture;

static fixture make_fixture(uint64_t *st)
{
    fixture f = {{12, 2, 256}, 300, 256, 256 * 2 / 32, 0.1, 0, NULL, NULL, NULL};
    const int64_t R = f.R;
    f.H = malloc((size_t)(R * R) * sizeof *f.H), f.Hd = malloc((size_t)(R * R) * sizeof *f.Hd);
    f.W = malloc((size_t)(R * f.C) * sizeof *f.W);
    test_random_spd(st, R, f.H);
    for (int64_t i = 0; i < R * f.C; i++) f.W[i] = (float)test_gauss(st);
    CHECK_OK(tcq_quant_damp(f.H, R, f.damp, f.Hd));
    double mean = 0;   /* tcq_quant_ldlq's damping of the pass */
    for (int64_t i = 0; i < R; i++) mean += f.H[i * R + i];
    f.lambda = f.damp * mean / (double)R;
    return f;
}

static void check_group_of_one(uint64_t *st)
{
    fixture f = make_fixture(st);
    const int64_t R = f.R, C = f.C, rw = f.rw;
    const tcq_encode_opts enc = {0};
    uint32_t *c0 = malloc((size_t)(R * rw) * 4), *c1 = malloc((size_t)(R * rw) * 4);
    uint16_t *s0 = malloc((size_t)R * 2), *s1 = malloc((size_t)R * 2);
    float *w0 = malloc((size_t)(R * C) * sizeof *w0), *w1 = malloc((size_t)(R * C) * sizeof *w1);
    double *Lm = malloc((size_t)(R * R) * sizeof *Lm), *D = malloc((size_t)R * sizeof *D);
    int64_t *perm = malloc((size_t)R * sizeof *perm);
    /* the reference: tcq_quant_ldlq's steps with the old axis-0 loops */
    memcpy(Lm, f.Hd, (size_t)(R * R) * sizeof *Lm);
    CHECK_OK(tcq_quant_act_order(f.H, R, perm));
    CHECK_OK(tcq_quant_permute_sym(Lm, R, perm, D));
    {   /* damped and permuted in one pooled pass from H: the same bits */
        double *Lp = malloc((size_t)(R * R) * sizeof *Lp);
        tcq_pool *p2 = NULL;
        CHECK_OK(tcq_pool_create(2, &p2));
        CHECK_OK(tcq_quant_damp_permuted(f.H, R, f.damp, perm, p2, Lp));
        CHECK(!memcmp(Lp, Lm, (size_t)(R * R) * sizeof *Lp), "tcq_quant_damp_permuted: other bits than damp + permute");
        tcq_pool_free(p2);
        free(Lp);
    }
    CHECK_OK(tcq_quant_block_ldl(Lm, R, 1, Lm, D));
    ref_axis0(f.p, 1, 9, f.W, R, C, Lm, perm, c0, s0, w0);
    ref_pass(f.p, 1, f.W, R, C, f.H, f.lambda, c0, s0, w0);
    CHECK_OK(tcq_quant_hscale(f.p, f.W, R, C, 0, f.H, f.lambda, c0, s0));
    tcq_quant_decode_rows(f.p, c0, s0, R, C, w0);
    tcq_pool *pool = NULL;
    CHECK_OK(tcq_pool_create(2, &pool));
    const tcq_ldlq_args a = {f.p, &enc, pool, f.W, R, C, 0, f.H, f.damp, 1, c1, s1, w1, 1, 9, NULL, NULL, 1};
    CHECK_OK(tcq_quant_ldlq(&a));
    CHECK(!memcmp(c0, c1, (size_t)(R * rw) * 4) && !memcmp(s0, s1, (size_t)R * 2) &&
              !memcmp(w0, w1, (size_t)(R * C) * sizeof *w0),
          "axis-0 group of 1: other bits than the row-by-row algorithm");
    tcq_pool_free(pool);
    free(c0), free(c1), free(s0), free(s1), free(w0), free(w1), free(Lm), free(D), free(perm);
    free(f.H), free(f.Hd), free(f.W);
}

static double damped_loss(const fixture *f, const float *What)
{
    double l = -1;
    CHECK_OK(tcq_quant_proxy(f->W, What, f->R, f->C, 0, f->Hd, NULL, &l, NULL));
    return l;
}

static void check_groups(uint64_t *st)
{
    fixture f = make_fixture(st);
    const int64_t R = f.R, C = f.C, rw = f.rw, g = 16;
    const tcq_encode_opts enc = {0};
    uint32_t *c0 = malloc((size_t)(R * rw) * 4), *c1 = malloc((size_t)(R * rw) * 4);
    uint16_t *s0 = malloc((size_t)R * 2), *s1 = malloc((size_t)R * 2);
    float *w0 = malloc((size_t)(R * C) * sizeof *w0), *w1 = malloc((size_t)(R * C) * sizeof *w1);
    tcq_pool *p1 = NULL, *p2 = NULL;
    CHECK_OK(tcq_pool_create(1, &p1));
    CHECK_OK(tcq_pool_create(2, &p2));
    /* BlockLDLQ alone, then its pass on the CPU and on the emulated GPU path */
    tcq_ldlq_args a = {f.p, &enc, p2, f.W, R, C, 0, f.H, f.damp, 1, c0, s0, w0, 0, 9, NULL, NULL, (int)g};
    CHECK_OK(tcq_quant_ldlq(&a));
    const double l0 = damped_loss(&f, w0);
    tcq_qla *q = NULL;
    CHECK_OK(tcq_qla_create(NULL, &q));
    for (int on_qla = 0; on_qla <= 1; on_qla++) {
        memcpy(c1, c0, (size_t)(R * rw) * 4), memcpy(s1, s0, (size_t)R * 2), memcpy(w1, w0, (size_t)(R * C) * 4);
        tcq_ldlq_args b = a;
        b.codes = c1, b.scales = s1, b.What = w1, b.qla = on_qla ? q : NULL;
        CHECK_OK(tcq_quant_ldlq_pass(&b, f.H, f.lambda));
        const double l1 = damped_loss(&f, w1);
        int64_t changed = 0;
        for (int64_t r = 0; r < R; r++) changed += !!memcmp(c0 + r * rw, c1 + r * rw, (size_t)rw * 4);
        fprintf(stderr, "g %lld%s: damped proxy BlockLDLQ %g, after the pass %g (%.2f%%), %lld rows recoded\n",
                (long long)g, on_qla ? " (qla emulation)" : "", l0, l1, 100 * (l1 / l0 - 1), (long long)changed);
        CHECK(l1 <= l0 * (1 + 1e-12), "g %lld%s: the pass raised the loss %.17g -> %.17g", (long long)g,
              on_qla ? " on qla" : "", l0, l1);
        CHECK(changed > 0, "g %lld: the pass recoded no row", (long long)g);
    }
    /* the whole thing on 1 and on 2 threads (no pool: this thread), CPU and qla: the same bits */
    a.passes = 1;
    for (int on_qla = 0; on_qla <= 1; on_qla++) {
        a.qla = on_qla ? q : NULL;
        a.pool = p1, a.codes = c0, a.scales = s0, a.What = w0;
        CHECK_OK(tcq_quant_ldlq(&a));
        a.pool = p2, a.codes = c1, a.scales = s1, a.What = w1;
        CHECK_OK(tcq_quant_ldlq(&a));
        CHECK(!memcmp(c0, c1, (size_t)(R * rw) * 4) && !memcmp(s0, s1, (size_t)R * 2) &&
                  !memcmp(w0, w1, (size_t)(R * C) * 4),
              "g %lld%s: 1 and 2 threads differ", (long long)g, on_qla ? " on qla" : "");
        a.pool = NULL, a.codes = c1, a.scales = s1, a.What = w1;
        CHECK_OK(tcq_quant_ldlq(&a));
        CHECK(!memcmp(c0, c1, (size_t)(R * rw) * 4) && !memcmp(s0, s1, (size_t)R * 2),
              "g %lld%s: no pool and 1 thread differ", (long long)g, on_qla ? " on qla" : "");
    }
    tcq_qla_free(q);
    tcq_pool_free(p1);
    tcq_pool_free(p2);
    free(c0), free(c1), free(s0), free(s1), free(w0), free(w1);
    free(f.H), free(f.Hd), free(f.W);
}

int main(void)
{
    uint64_t st = test_seed();
    check_candidates(&st);
    check_group_of_one(&st);
    check_groups(&st);
    return test_done("test_quant_ldlq_group");
}
