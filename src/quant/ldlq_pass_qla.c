/* tcq_quant_ldlq_pass (ldlq_pass.c) with its products on a qla backend (qla.h): the same block
 * coordinate descent, arranged so that nothing O(R C m) runs on the host.
 *   axis 1: E and H stay on the device; per block, G = E H[:, b] and E_b H_bb are products there,
 *     as are the two solves by H_bb's factor and the loss change's d H_bb and e H_bb (the CPU
 *     path's per-row T x T loops); E's block columns go up after each block.
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

static tcq_status axis1(const tcq_ldlq_args *a, const double *H, double lambda)
{
    tcq_qla *q = a->qla;
    const tcq_block_params p = a->p;
    const int64_t R = a->R, C = a->C, T = p.T, nb = C / T, rw = C * p.k / 32, bw = tcq_block_words(p);
    double *E = malloc((size_t)(R * C) * sizeof *E), *G = malloc((size_t)(R * T) * sizeof *G);
    double *Hb = malloc((size_t)(T * T) * sizeof *Hb), *Eo = malloc((size_t)(R * T) * sizeof *Eo);
    double *Z = malloc((size_t)(R * T) * sizeof *Z), *HD = malloc((size_t)(R * T) * sizeof *HD);
    double *HE = malloc((size_t)(R * T) * sizeof *HE);
    float *x = malloc((size_t)(R * T) * sizeof *x), *wt = malloc((size_t)(R * T) * sizeof *wt);
    float *wh = malloc((size_t)T * sizeof *wh), *WH = malloc((size_t)(R * T) * sizeof *WH);
    uint32_t *words = malloc((size_t)(R * bw) * sizeof *words);
    tcq_status s = TCQ_OK;
    if (!E || !G || !Hb || !Eo || !Z || !HD || !HE || !x || !wt || !wh || !WH || !words)
        s = tcq_fail(TCQ_ERR_NOMEM, "LDLQ pass buffers for [%lld, %lld]", (long long)R, (long long)C);
    for (int64_t i = 0; s == TCQ_OK && i < R * C; i++) E[i] = (double)a->W[i] - (double)a->What[i];
    int mir_e = 0, mir_h = 0;
    if (s == TCQ_OK) s = tcq_qla_mirror(q, E, (size_t)(R * C) * sizeof *E, 0);
    mir_e = s == TCQ_OK;
    if (s == TCQ_OK) s = tcq_qla_mirror(q, H, (size_t)(C * C) * sizeof *H, 0);
    mir_h = s == TCQ_OK && mir_e;
    for (int64_t b = nb - 1; s == TCQ_OK && b >= 0; b--) {
        const int64_t c0 = b * T;
        /* G = E_rest H_rest,b = E H[:, b] - E_b H_bb */
        s = tcq_qla_dgemm(q, 0, 0, R, T, C, 1.0, E, C, H + c0, C, 0.0, G, T);
        for (int64_t r = 0; r < T; r++) memcpy(Hb + r * T, H + (c0 + r) * C + c0, (size_t)T * sizeof *Hb);
        if (s == TCQ_OK) s = tcq_qla_dgemm(q, 0, 0, R, T, T, 1.0, E + c0, C, Hb, T, 0.0, Eo, T);
        if (s != TCQ_OK) break;
        for (int64_t i = 0; i < R * T; i++) G[i] -= Eo[i];
        for (int64_t t = 0; t < T; t++) Hb[t * T + t] += lambda;
        double mean = 0;
        for (int64_t t = 0; t < T; t++) mean += Hb[t * T + t];
        mean /= (double)T;
        for (int64_t t = 0; t < T; t++) wh[t] = (float)(Hb[t * T + t] / mean);   /* the Viterbi's weights */
        /* Z = G H_bb^-1 (H_bb = U U^T, U lower: Z U U^T = G) */
        memcpy(Z, G, (size_t)(R * T) * sizeof *Z);
        s = tcq_quant_cholesky(Hb, T);
        if (s == TCQ_OK) s = tcq_qla_trsm_right_lower(q, 1, R, T, Hb, T, Z, T);
        if (s == TCQ_OK) s = tcq_qla_trsm_right_lower(q, 0, R, T, Hb, T, Z, T);
        if (s != TCQ_OK) break;
        for (int64_t r = 0; r < R; r++) {
            const float sc = tcq_f16_to_f32(a->scales[r]);
            for (int64_t t = 0; t < T; t++) {
                x[r * T + t] = (float)(((double)a->W[r * C + c0 + t] + Z[r * T + t]) / sc);
                wt[r * T + t] = wh[t];
            }
        }
        s = tcq_quant_encode_blocks(a, x, wt, R, words);
        if (s != TCQ_OK) break;
        /* Hb now holds H_bb's Cholesky factor; the loss change uses H_bb itself */
        for (int64_t r = 0; r < T; r++) memcpy(Hb + r * T, H + (c0 + r) * C + c0, (size_t)T * sizeof *Hb);
        for (int64_t t = 0; t < T; t++) Hb[t * T + t] += lambda;
        /* d = e' - e = w^ - w^' per row (in Eo);  loss change = d H d^T + 2 d (H e^T + g^T) */
        for (int64_t r = 0; r < R; r++) {
            tcq_block_decode_f32(p, words + r * bw, tcq_f16_to_f32(a->scales[r]), WH + r * T);
            for (int64_t t = 0; t < T; t++) Eo[r * T + t] = (double)a->What[r * C + c0 + t] - (double)WH[r * T + t];
        }
        s = tcq_qla_dgemm(q, 0, 0, R, T, T, 1.0, Eo, T, Hb, T, 0.0, HD, T);
        if (s == TCQ_OK) s = tcq_qla_dgemm(q, 0, 0, R, T, T, 1.0, E + c0, C, Hb, T, 0.0, HE, T);
        if (s != TCQ_OK) break;
        for (int64_t r = 0; r < R; r++) {
            const double *d = Eo + r * T, *hd = HD + r * T, *he = HE + r * T, *g = G + r * T;
            double dhd = 0, lin = 0;
            for (int64_t t = 0; t < T; t++) {
                dhd += d[t] * hd[t];
                lin += d[t] * (he[t] + g[t]);
            }
            if (dhd + 2 * lin >= 0) continue;
            memcpy(a->codes + r * rw + b * bw, words + r * bw, (size_t)bw * sizeof *words);
            for (int64_t t = 0; t < T; t++) {
                a->What[r * C + c0 + t] = WH[r * T + t];
                E[r * C + c0 + t] = (double)a->W[r * C + c0 + t] - (double)WH[r * T + t];
            }
        }
        s = tcq_qla_push(q, E + c0, R, T, C, sizeof *E);
    }
    if (mir_e) tcq_qla_unmirror(q, E);
    if (mir_h) tcq_qla_unmirror(q, H);
    free(E);
    free(G);
    free(Hb);
    free(Eo);
    free(Z);
    free(HD);
    free(HE);
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
    tcq_status s = tcq_qla_mirror(q, H, (size_t)(R * R) * sizeof *H, 0);
    const int mir_h = s == TCQ_OK;
    if (s == TCQ_OK) s = tcq_qla_mirror(q, G, (size_t)(R * C) * sizeof *G, 1);
    const int mir_g = s == TCQ_OK && mir_h;
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
