/* Row scales under the Hessian: with the codes fixed, the proxy loss tr(E H E^T) is a quadratic
 * in the row scales, so the best ones solve a linear system.  The unweighted least-squares refit
 * (tcq_quant_refit_scales) fits each row to its own target and ignores which input directions
 * matter; this one minimises the loss BlockLDLQ minimises.
 *   axis 1 (rows = outputs, H over the C columns): rows are independent,
 *       s_r = (v_r H w_r^T) / (v_r H v_r^T).
 *   axis 0 (stored rows = inputs, H over the R rows): E = W - diag(s) V couples the rows,
 *       tr(E^T H E) = s^T (H o V V^T) s - 2 s^T diag(H V W^T) + const,
 *   a Schur product of two PSD matrices (positive definite for a damped H), solved by Cholesky.
 * fp16 rounding of the solution can lose against the scales in hand, so the new set is kept only
 * where the loss (with the rounded scales) is lower: per row on axis 1, as a whole on axis 0. */
#include "qla.h"
#include "quant.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

typedef struct unit_job {
    tcq_block_params p;
    const uint32_t *codes;
    int64_t R, C;
    double *V;
    float *v;                 /* [threads][C] */
} unit_job;

static void unit_item(void *arg, int64_t item, int thread)
{
    const unit_job *j = arg;
    const int64_t rw = j->C * j->p.k / 32;
    float *v = j->v + (size_t)thread * j->C;
    for (int64_t r = item * 64; r < TCQ_MIN(item * 64 + 64, j->R); r++) {
        for (int64_t b = 0; b < j->C / j->p.T; b++)
            tcq_block_decode_f32(j->p, j->codes + r * rw + b * tcq_block_words(j->p), 1.0f, v + b * j->p.T);
        for (int64_t t = 0; t < j->C; t++) j->V[r * j->C + t] = v[t];
    }
}

/* V [R, C]: the code values at scale 1, on the pool (rows in items of 64) */
static int decode_unit(tcq_pool *pool, tcq_block_params p, const uint32_t *codes, int64_t R, int64_t C, double *V)
{
    const int threads = pool ? tcq_pool_size(pool) : 1;
    float *v = malloc((size_t)(threads * C) * sizeof *v);
    if (!v) return 0;
    unit_job j = {p, codes, R, C, V, v};
    if (pool) tcq_pool_run(pool, (R + 63) / 64, unit_item, &j);
    else
        for (int64_t i = 0; i < (R + 63) / 64; i++) unit_item(&j, i, 0);
    free(v);
    return 1;
}

/* Row-major C [M, N] = A B (A [M, K]), on qla's backend or CBLAS here */
static tcq_status gemm(tcq_qla *qla, int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *Cm)
{
    if (qla) return tcq_qla_dgemm(qla, 0, 0, M, N, K, 1.0, A, K, B, N, 0.0, Cm, N);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0, A, (int)K, B, (int)N, 0.0, Cm,
                (int)N);
    return TCQ_OK;
}

/* axis 1's rows on the pool, a row an item (rows are independent: any thread count, the same bits) */
typedef struct row_job {
    double *VH;
    const double *V;
    const float *W;
    double lambda;
    int64_t C;
    uint16_t *scales;
} row_job;

static void row_item(void *arg, int64_t r, int thread)
{
    (void)thread;
    const row_job *j = arg;
    const int64_t C = j->C;
    double *vh = j->VH + r * C, num = 0, den = 0;
    const double *v = j->V + r * C;
    const float *w = j->W + r * C;
    for (int64_t t = 0; t < C; t++) vh[t] += j->lambda * v[t];
    for (int64_t t = 0; t < C; t++) num += vh[t] * w[t], den += vh[t] * v[t];
    if (!(den > 0) || !(num > 0)) return;
    const uint16_t cand = tcq_f32_to_f16((float)(num / den));
    const double s0 = tcq_f16_to_f32(j->scales[r]), s1 = tcq_f16_to_f32(cand);
    /* loss(s) = wHw - 2 s num + s^2 den */
    if (s1 * s1 * den - 2 * s1 * num < s0 * s0 * den - 2 * s0 * num) j->scales[r] = cand;
}

static tcq_status hscale_axis1(tcq_qla *qla, tcq_pool *pool, const double *H, double lambda, const float *W, int64_t R,
                               int64_t C, const double *V, uint16_t *scales)
{
    double *VH = malloc((size_t)(R * C) * sizeof *VH);
    if (!VH) return tcq_fail(TCQ_ERR_NOMEM, "H-weighted scales of [%lld, %lld]", (long long)R, (long long)C);
    const tcq_status st = gemm(qla, R, C, C, V, H, VH);
    row_job j = {VH, V, W, lambda, C, scales};
    if (st == TCQ_OK) tcq_pool_run(pool, R, row_item, &j);
    free(VH);
    return st;
}

/* axis 0's m x m host steps on the pool, a row an item (each item writes only its row; the
 * quadratic form's per-row terms are added in row order after): the same bits for any thread
 * count.  A 14B down projection's are 17408^2 doubles each, 2.4 GB a walk. */
typedef struct sys_job {
    const double *H, *s;
    double *A, *F, *b, *q;
    const float *W;
    double *Wd;
    double lambda;
    int64_t R, C;
} sys_job;

/* row i of W in double */
static void wd_item(void *arg, int64_t i, int thread)
{
    (void)thread;
    const sys_job *j = arg;
    for (int64_t t = 0; t < j->C; t++) j->Wd[i * j->C + t] = j->W[i * j->C + t];
}

/* row i: b_i = sum_j H_ij F_ij + lambda F_ii with F = V W^T on entry, then A = (V V^T) o H +
 * lambda diag(V V^T) and its copy into F for the factor (F's row is read before it is written:
 * V W^T needs no buffer of its own) */
static void sys_item(void *arg, int64_t i, int thread)
{
    (void)thread;
    const sys_job *j = arg;
    const int64_t R = j->R;
    double *a = j->A + i * R, *f = j->F + i * R, bi = 0;
    const double *h = j->H + i * R, gd = a[i];
    for (int64_t c = 0; c < R; c++) a[c] *= h[c], bi += h[c] * f[c];
    j->b[i] = bi + j->lambda * f[i];
    a[i] += j->lambda * gd;
    memcpy(f, a, (size_t)R * sizeof *a);
}

/* row i's term of s^T A s - 2 b^T s */
static void quad_item(void *arg, int64_t i, int thread)
{
    (void)thread;
    const sys_job *j = arg;
    const double *a = j->A + i * j->R, *s = j->s;
    double as = 0;
    for (int64_t c = 0; c < j->R; c++) as += a[c] * s[c];
    j->q[i] = s[i] * as - 2 * j->b[i] * s[i];
}

static double quad(tcq_pool *pool, sys_job *j, const double *s)
{
    j->s = s;
    tcq_pool_run(pool, j->R, quad_item, j);
    double q = 0;
    for (int64_t i = 0; i < j->R; i++) q += j->q[i];
    return q;
}

/* s = F^-T F^-1 b rounded to fp16 (cand, and s the rounded values in double), 0 when a scale is
 * not a positive number */
static int round_scales(int64_t R, double *s, uint16_t *cand)
{
    int ok = 1;
    for (int64_t i = 0; i < R; i++) {
        ok &= isfinite(s[i]) && s[i] > 0;
        cand[i] = tcq_f32_to_f16((float)s[i]);
        s[i] = tcq_f16_to_f32(cand[i]);
    }
    return ok;
}

static tcq_status axis0_host(tcq_pool *pool, sys_job *j, const double *V, double *s, double *s0, uint16_t *cand,
                             uint16_t *scales)
{
    const int64_t R = j->R, C = j->C;
    tcq_pool_run(pool, R, wd_item, j);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)R, (int)R, (int)C, 1.0, V, (int)C, V, (int)C, 0.0, j->A,
                (int)R);   /* V V^T */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)R, (int)R, (int)C, 1.0, V, (int)C, j->Wd, (int)C, 0.0,
                j->F, (int)R);   /* V W^T */
    tcq_pool_run(pool, R, sys_item, j);
    /* a singular system (an all-zero code row cannot happen: the 1MAD code has no zero run long
     * enough, but a zero Hessian row can) keeps the scales in hand */
    if (tcq_quant_cholesky(j->F, R) != TCQ_OK) {
        tcq_error_clear();
        return TCQ_OK;
    }
    memcpy(s, j->b, (size_t)R * sizeof *s);
    cblas_dtrsv(CblasRowMajor, CblasLower, CblasNoTrans, CblasNonUnit, (int)R, j->F, (int)R, s, 1);
    cblas_dtrsv(CblasRowMajor, CblasLower, CblasTrans, CblasNonUnit, (int)R, j->F, (int)R, s, 1);
    const int ok = round_scales(R, s, cand);
    for (int64_t i = 0; i < R; i++) s0[i] = tcq_f16_to_f32(scales[i]);
    if (ok && quad(pool, j, s) < quad(pool, j, s0)) memcpy(scales, cand, (size_t)R * sizeof *scales);
    return TCQ_OK;
}

/* The same on a qla: V and W go up, A and F never come down (a 14B down projection's are 2.4 GB
 * each; session 29's device run spent 7 s of that tensor's 17 in this refit's host side), only
 * b, the solution and the two quadratic forms' products (R numbers each) do.  A and F are host
 * addresses that only name the device buffers: never touched here. */
static tcq_status axis0_qla(tcq_qla *qla, tcq_pool *pool, sys_job *j, double *V, double *s, double *s0,
                            uint16_t *cand, uint16_t *scales)
{
    const int64_t R = j->R, C = j->C;
    double *S = malloc((size_t)(4 * R) * sizeof *S);
    if (!S) return tcq_fail(TCQ_ERR_NOMEM, "H-weighted scales of [%lld, %lld]", (long long)R, (long long)C);
    tcq_pool_run(pool, R, wd_item, j);
    const void *mir[4] = {V, j->Wd, j->A, j->F};
    const size_t bytes[4] = {(size_t)(R * C) * 8, (size_t)(R * C) * 8, (size_t)(R * R) * 8, (size_t)(R * R) * 8};
    int nmir = 0;
    tcq_status st = TCQ_OK;
    while (st == TCQ_OK && nmir < 4) {
        st = tcq_qla_mirror(qla, mir[nmir], bytes[nmir], nmir >= 2);
        nmir += st == TCQ_OK;
    }
    if (st == TCQ_OK) st = tcq_qla_dgemm(qla, 0, 1, R, R, C, 1.0, V, C, V, C, 0.0, j->A, R);
    if (st == TCQ_OK) st = tcq_qla_dgemm(qla, 0, 1, R, R, C, 1.0, V, C, j->Wd, C, 0.0, j->F, R);
    if (st == TCQ_OK) st = tcq_qla_schur(qla, j->A, j->F, j->H, R, j->lambda, j->b);
    int solved = 0;
    if (st == TCQ_OK) {
        /* singular: the scales in hand, as on the host */
        solved = tcq_qla_cholesky_mirrored(qla, j->F, R) == TCQ_OK;
        if (!solved) tcq_error_clear();
    }
    if (st == TCQ_OK && solved) {
        memcpy(s, j->b, (size_t)R * sizeof *s);
        st = tcq_qla_trsm_right_lower(qla, 1, 1, R, j->F, R, s, R);   /* s^T F^-T: F^-1 b */
        if (st == TCQ_OK) st = tcq_qla_trsm_right_lower(qla, 0, 1, R, j->F, R, s, R);
    }
    if (st == TCQ_OK && solved && round_scales(R, s, cand)) {
        /* both quadratic forms' A s in one product: rows [s; s0] A = (A s)^T, A symmetric */
        for (int64_t i = 0; i < R; i++) S[i] = s[i], S[R + i] = s0[i] = tcq_f16_to_f32(scales[i]);
        st = tcq_qla_dgemm(qla, 0, 0, 2, R, R, 1.0, S, R, j->A, R, 0.0, S + 2 * R, R);
        double q1 = 0, q0 = 0;
        for (int64_t i = 0; st == TCQ_OK && i < R; i++) {
            q1 += s[i] * S[2 * R + i] - 2 * j->b[i] * s[i];
            q0 += s0[i] * S[3 * R + i] - 2 * j->b[i] * s0[i];
        }
        if (st == TCQ_OK && q1 < q0) memcpy(scales, cand, (size_t)R * sizeof *scales);
    }
    for (int i = 0; i < nmir; i++) tcq_qla_unmirror(qla, mir[i]);
    free(S);
    return st;
}

static tcq_status hscale_axis0(tcq_qla *qla, tcq_pool *pool, const double *H, double lambda, const float *W,
                               int64_t R, int64_t C, double *V, uint16_t *scales)
{
    double *A = malloc((size_t)(R * R) * sizeof *A), *F = malloc((size_t)(R * R) * sizeof *F);
    double *Wd = malloc((size_t)(R * C) * sizeof *Wd), *b = malloc((size_t)R * sizeof *b);
    double *s = malloc((size_t)R * sizeof *s), *s0 = malloc((size_t)R * sizeof *s0);
    double *q = malloc((size_t)R * sizeof *q);
    uint16_t *cand = malloc((size_t)R * sizeof *cand);
    tcq_status st = A && F && Wd && b && s && s0 && q && cand
                        ? TCQ_OK
                        : tcq_fail(TCQ_ERR_NOMEM, "H-weighted scales of [%lld, %lld]", (long long)R, (long long)C);
    sys_job j = {H, NULL, A, F, b, q, W, Wd, lambda, R, C};
    if (st == TCQ_OK)
        st = qla ? axis0_qla(qla, pool, &j, V, s, s0, cand, scales) : axis0_host(pool, &j, V, s, s0, cand, scales);
    free(A);
    free(F);
    free(Wd);
    free(b);
    free(s);
    free(s0);
    free(q);
    free(cand);
    return st;
}

tcq_status tcq_quant_hscale_on(tcq_qla *qla, tcq_pool *pool, tcq_block_params p, const float *W, int64_t R, int64_t C,
                               int axis, const double *H, double lambda, const uint32_t *codes, uint16_t *scales)
{
    double *V = malloc((size_t)(R * C) * sizeof *V);
    if (!V || !decode_unit(pool, p, codes, R, C, V)) {
        free(V);
        return tcq_fail(TCQ_ERR_NOMEM, "H-weighted scales of [%lld, %lld]", (long long)R, (long long)C);
    }
    const tcq_status s = axis ? hscale_axis1(qla, pool, H, lambda, W, R, C, V, scales)
                              : hscale_axis0(qla, pool, H, lambda, W, R, C, V, scales);
    free(V);
    return s;
}

tcq_status tcq_quant_hscale(tcq_block_params p, const float *W, int64_t R, int64_t C, int axis, const double *H,
                            double lambda, const uint32_t *codes, uint16_t *scales)
{
    return tcq_quant_hscale_on(NULL, NULL, p, W, R, C, axis, H, lambda, codes, scales);
}
