/* tcq_quant_ldlq_pass (ldlq_pass.c) with its products on a qla backend (qla.h): the same block
 * coordinate descent, arranged so that nothing O(R C m) runs on the host.
 *   axis 1: E and H stay on the device; per block, G = E H[:, b] - E_b H_bb, the two solves by
 *     H_bb's factor and the loss change's per-row sums (the CPU path's T x T loops per row) are
 *     products there (axis1 below); E's block columns go up after each block.
 *   axis 0: G = (H + lambda I) E is kept up to date lazily (GPTQ's batches): a coded row's change
 *     d reaches the rows of its batch at once on the host and the rows below the batch in one
 *     product per batch on the device, where G lives; each batch's rows of G come down before it
 *     is coded (only row i of G is read, when row i is coded, so the order of the sums is all that
 *     differs from the CPU path's row-by-row update).  Groups of g rows as in ldlq_pass.c, the
 *     batch a whole number of them. */
#include "qla.h"
#include "quant.h"

#include <math.h>
#include <string.h>

#define PASS0_BATCH 64

/* Axis 1's per-row host work on the pool, PASS1_ROWS rows an item, each item its own rows (the
 * same bits for any thread count). */
#define PASS1_ROWS 64

typedef struct p1_job {
    const tcq_ldlq_args *a;
    double *E;                /* [R, C] */
    const double *Z;          /* [R, T] the block's targets' feedback, pulled */
    float *x, *WH;            /* [R, T] */
    const uint32_t *words;    /* [R, bw] */
    double *Eo;               /* [R, T] d = What_b - WH */
    const double *dhd, *lin;  /* [R] */
    int64_t c0;
} p1_job;

static void p1_run(tcq_pool *pool, int64_t R, tcq_pool_fn fn, void *arg)
{
    const int64_t items = (R + PASS1_ROWS - 1) / PASS1_ROWS;
    if (pool) tcq_pool_run(pool, items, fn, arg);
    else
        for (int64_t i = 0; i < items; i++) fn(arg, i, 0);
}

#define P1_ROWS_OF(item, R) const int64_t r0 = (item) * PASS1_ROWS, r1 = TCQ_MIN(r0 + PASS1_ROWS, (R))

static void p1_error(void *arg, int64_t item, int thread)
{
    const p1_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    (void)thread;
    P1_ROWS_OF(item, a->R);
    for (int64_t i = r0 * a->C; i < r1 * a->C; i++) j->E[i] = (double)a->W[i] - (double)a->What[i];
}

static void p1_targets(void *arg, int64_t item, int thread)
{
    const p1_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    const int64_t C = a->C, T = a->p.T;
    (void)thread;
    P1_ROWS_OF(item, a->R);
    for (int64_t r = r0; r < r1; r++) {
        const float sc = tcq_f16_to_f32(a->scales[r]);
        for (int64_t t = 0; t < T; t++) j->x[r * T + t] = (float)(((double)a->W[r * C + j->c0 + t] + j->Z[r * T + t]) / sc);
    }
}

static void p1_decode(void *arg, int64_t item, int thread)
{
    const p1_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    const int64_t C = a->C, T = a->p.T, bw = tcq_block_words(a->p);
    (void)thread;
    P1_ROWS_OF(item, a->R);
    for (int64_t r = r0; r < r1; r++) {
        tcq_block_decode_f32(a->p, j->words + r * bw, tcq_f16_to_f32(a->scales[r]), j->WH + r * T);
        for (int64_t t = 0; t < T; t++) j->Eo[r * T + t] = (double)a->What[r * C + j->c0 + t] - (double)j->WH[r * T + t];
    }
}

/* a row's new block is kept where the loss change d H d^T + 2 d (H e^T + g^T) is negative */
static void p1_accept(void *arg, int64_t item, int thread)
{
    const p1_job *j = arg;
    const tcq_ldlq_args *a = j->a;
    const int64_t C = a->C, T = a->p.T, rw = C * a->p.k / 32, bw = tcq_block_words(a->p), c0 = j->c0;
    (void)thread;
    P1_ROWS_OF(item, a->R);
    for (int64_t r = r0; r < r1; r++) {
        if (j->dhd[r] + 2 * j->lin[r] >= 0) continue;
        memcpy(a->codes + r * rw + c0 / T * bw, j->words + r * bw, (size_t)bw * sizeof *j->words);
        for (int64_t t = 0; t < T; t++) {
            a->What[r * C + c0 + t] = j->WH[r * T + t];
            j->E[r * C + c0 + t] = (double)a->W[r * C + c0 + t] - (double)j->WH[r * T + t];
        }
    }
}

/* Per block, on the device (E, H, Z, S, Eo, HD mirrored; T x T operands staged):
 *   Z = E H[:, b] - E_b H_bb, then Z (H_bb + lambda I)^-1 by the factor's two solves: pulled, the
 *     targets' feedback;
 *   S = E H[:, b] + lambda E_b: the loss change's (H + lambda I) e^T + g^T of the CPU path, whose
 *     g = E H[:, b] - E_b H_bb and H_bb e^T term sum to it;
 *   after the encoder and the host's decode, d (Eo) pushed, HD = d (H_bb + lambda I), and the two
 *     per-row sums d HD^T, d S^T come down as 2 R numbers.
 * What crosses the bus per block: Z down, the encoder's x and weights up, d and E's block up. */
static tcq_status axis1(const tcq_ldlq_args *a, const double *H, double lambda)
{
    tcq_qla *q = a->qla;
    const tcq_block_params p = a->p;
    const int64_t R = a->R, C = a->C, T = p.T, nb = C / T, bw = tcq_block_words(p);
    double *E = malloc((size_t)(R * C) * sizeof *E), *Z = malloc((size_t)(R * T) * sizeof *Z);
    double *S = malloc((size_t)(R * T) * sizeof *S), *Eo = malloc((size_t)(R * T) * sizeof *Eo);
    double *HD = malloc((size_t)(R * T) * sizeof *HD), *sums = malloc((size_t)(2 * R) * sizeof *sums);
    double *Hb = malloc((size_t)(T * T) * sizeof *Hb), *U = malloc((size_t)(T * T) * sizeof *U);
    double *Li = calloc((size_t)(T * T), sizeof *Li);
    float *x = malloc((size_t)(R * T) * sizeof *x), *wt = malloc((size_t)(R * T) * sizeof *wt);
    float *wh = malloc((size_t)T * sizeof *wh), *WH = malloc((size_t)(R * T) * sizeof *WH);
    uint32_t *words = malloc((size_t)(R * bw) * sizeof *words);
    tcq_status s = TCQ_OK;
    if (!E || !Z || !S || !Eo || !HD || !sums || !Hb || !U || !Li || !x || !wt || !wh || !WH || !words)
        s = tcq_fail(TCQ_ERR_NOMEM, "LDLQ pass buffers for [%lld, %lld]", (long long)R, (long long)C);
    p1_job j = {a, E, Z, x, WH, words, Eo, sums, sums + R, 0};
    if (s == TCQ_OK) p1_run(a->pool, R, p1_error, &j);
    const void *mir[6] = {E, H, Z, S, Eo, HD};
    const size_t mbytes[6] = {(size_t)(R * C) * 8, (size_t)(C * C) * 8, (size_t)(R * T) * 8, (size_t)(R * T) * 8,
                              (size_t)(R * T) * 8, (size_t)(R * T) * 8};
    if (tcq_qla_mirrored(q, H, mbytes[1])) mir[1] = NULL;   /* the caller's, for the tensor */
    int nmir = 0;   /* mirrors held (a NULL one: nothing to do) */
    while (s == TCQ_OK && nmir < 6) {
        s = mir[nmir] ? tcq_qla_mirror(q, mir[nmir], mbytes[nmir], nmir >= 2) : TCQ_OK;
        nmir += s == TCQ_OK;
    }
    for (int64_t t = 0; t < T; t++) Li[t * T + t] = lambda;
    for (int64_t b = nb - 1; s == TCQ_OK && b >= 0; b--) {
        const int64_t c0 = b * T;
        for (int64_t r = 0; r < T; r++) memcpy(Hb + r * T, H + (c0 + r) * C + c0, (size_t)T * sizeof *Hb);
        s = tcq_qla_dgemm(q, 0, 0, R, T, C, 1.0, E, C, H + c0, C, 0.0, Z, T);
        if (s == TCQ_OK) s = tcq_qla_dgemm(q, 0, 0, R, T, T, -1.0, E + c0, C, Hb, T, 1.0, Z, T);
        if (s == TCQ_OK) s = tcq_qla_dgemm(q, 0, 0, R, T, C, 1.0, E, C, H + c0, C, 0.0, S, T);
        if (s == TCQ_OK) s = tcq_qla_dgemm(q, 0, 0, R, T, T, 1.0, E + c0, C, Li, T, 1.0, S, T);
        if (s != TCQ_OK) break;
        for (int64_t t = 0; t < T; t++) Hb[t * T + t] += lambda;   /* H_bb + lambda I from here on */
        double mean = 0;
        for (int64_t t = 0; t < T; t++) mean += Hb[t * T + t];
        mean /= (double)T;
        for (int64_t t = 0; t < T; t++) wh[t] = (float)(Hb[t * T + t] / mean);   /* the Viterbi's weights */
        /* Z (H_bb + lambda I)^-1: H_bb + lambda I = U U^T, U lower; Z U U^T = G */
        memcpy(U, Hb, (size_t)(T * T) * sizeof *U);
        s = tcq_quant_cholesky(U, T);
        if (s == TCQ_OK) s = tcq_qla_trsm_right_lower(q, 1, R, T, U, T, Z, T);
        if (s == TCQ_OK) s = tcq_qla_trsm_right_lower(q, 0, R, T, U, T, Z, T);
        if (s == TCQ_OK) s = tcq_qla_pull(q, Z, R, T, T, sizeof *Z);
        if (s != TCQ_OK) break;
        j.c0 = c0;
        p1_run(a->pool, R, p1_targets, &j);
        s = tcq_quant_encode_blocks_w1(a, x, wh, wt, R, words);
        if (s != TCQ_OK) break;
        p1_run(a->pool, R, p1_decode, &j);
        s = tcq_qla_push(q, Eo, R, T, T, sizeof *Eo);
        if (s == TCQ_OK) s = tcq_qla_dgemm(q, 0, 0, R, T, T, 1.0, Eo, T, Hb, T, 0.0, HD, T);
        if (s == TCQ_OK) s = tcq_qla_rowdots(q, Eo, HD, R, T, sums);
        if (s == TCQ_OK) s = tcq_qla_rowdots(q, Eo, S, R, T, sums + R);
        if (s != TCQ_OK) break;
        p1_run(a->pool, R, p1_accept, &j);
        s = tcq_qla_push(q, E + c0, R, T, C, sizeof *E);
    }
    for (int i = 0; i < nmir; i++) tcq_qla_unmirror(q, mir[i]);
    free(E);
    free(Z);
    free(S);
    free(Eo);
    free(HD);
    free(sums);
    free(Hb);
    free(U);
    free(Li);
    free(x);
    free(wt);
    free(wh);
    free(WH);
    free(words);
    return s;
}

static tcq_status axis0(const tcq_ldlq_args *a, const double *H, double lambda)
{
    tcq_qla *q = a->qla;
    const int64_t R = a->R, C = a->C;
    tcq_quant_pass0 st;
    TCQ_TRY(tcq_quant_pass0_init(&st, a, H, lambda, PASS0_BATCH, 0));
    double *G = st.G;
    /* H may be mirrored for the whole tensor already (quantize.c: the pass, the refit and the
     * proxy read one copy) */
    int mir_h = 0;
    tcq_status s = tcq_qla_mirror_unless(q, H, (size_t)(R * R) * sizeof *H, 0, &mir_h);
    int mir_g = 0;   /* held only where its own mirror call succeeded */
    if (s == TCQ_OK) {
        s = tcq_qla_mirror(q, G, (size_t)(R * C) * sizeof *G, 1);
        mir_g = s == TCQ_OK;
    }
    if (s == TCQ_OK) s = tcq_qla_dgemm(q, 0, 0, R, C, R, 1.0, H, R, st.E, C, 0.0, G, C);   /* on the device */
    for (int64_t hi = R; s == TCQ_OK && hi > 0; hi -= st.B) {
        const int64_t lo = TCQ_MAX(0, hi - st.B);
        s = tcq_qla_pull(q, G + lo * C, hi - lo, C, C, sizeof *G);
        /* the damping's part of G_i: lambda e_i, e_i as it is until row i is coded */
        if (s == TCQ_OK) tcq_quant_pass0_damp_rows(&st, lo, hi);
        if (s == TCQ_OK) s = tcq_quant_pass0_batch(&st, lo, hi);
        /* the rows below the batch: G[0:lo] += H[0:lo, lo:hi] D_batch, on the device */
        if (s == TCQ_OK && lo > 0) s = tcq_qla_dgemm(q, 0, 0, lo, C, hi - lo, 1.0, H + lo, R, st.db, C, 1.0, G, C);
    }
    if (mir_g) tcq_qla_unmirror(q, G);
    if (mir_h) tcq_qla_unmirror(q, H);
    tcq_quant_pass0_free(&st);
    return s;
}

tcq_status tcq_quant_ldlq_pass_qla(const tcq_ldlq_args *a, const double *H, double lambda)
{
    return a->axis ? axis1(a, H, lambda) : axis0(a, H, lambda);
}
