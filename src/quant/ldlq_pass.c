/* A further pass over a BlockLDLQ result: block coordinate descent on the proxy loss
 * tr(E H E^T).  BlockLDLQ codes each block once, the first ones without knowing the errors of
 * the blocks coded after them; here every block is coded again with all the other blocks'
 * errors in hand.  With e the errors of the other blocks fixed, a block's part of the loss is
 *     (t_b - w^_b) H_bb (t_b - w^_b)^T + const,   t_b = w_b + (e_rest H_rest,b) H_bb^-1,
 * so the block's new Viterbi target is t_b (weights diag(H_bb), the trellis' reach), and the new
 * codes are kept only where they lower the exact loss: the pass never makes it worse.  H is the
 * undamped Hessian and lambda the damping (H + lambda I is the loss), as no damped copy is kept.
 *   axis 1 (rows = outputs, H over the C columns): the rows are independent; blocks of T.
 *   axis 0 (stored rows = inputs, H over the R rows): blocks of one stored row, whose scale is
 *     taken from its new target (as in BlockLDLQ); G = H E is kept up to date row by row
 *     (Gauss-Seidel), so each row is kept or not on the others' latest errors.  The rows are
 *     coded in groups of g (a->axis0_group, as BlockLDLQ's), one encoder call each, from targets
 *     taken at the group's start; each row's change is still exact (G is updated after every row
 *     kept), so the pass never raises the loss; g = 1: each target sees the latest errors
 *     (ldlq_pass0.c). */
#include "quant.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

static tcq_status pass_axis1(const tcq_ldlq_args *a, const double *H, double lambda)
{
    const tcq_block_params p = a->p;
    const int64_t R = a->R, C = a->C, T = p.T, nb = C / T, rw = C * p.k / 32, bw = tcq_block_words(p);
    double *E = malloc((size_t)(R * C) * sizeof *E), *G = malloc((size_t)(R * T) * sizeof *G);
    double *Hb = malloc((size_t)(T * T) * sizeof *Hb), *Eo = malloc((size_t)(R * T) * sizeof *Eo);
    double *Z = malloc((size_t)(R * T) * sizeof *Z);
    float *x = malloc((size_t)(R * T) * sizeof *x), *wt = malloc((size_t)(R * T) * sizeof *wt);
    float *wh = malloc((size_t)T * sizeof *wh);
    uint32_t *words = malloc((size_t)(R * bw) * sizeof *words);
    tcq_status s = TCQ_OK;
    if (!E || !G || !Hb || !Eo || !Z || !x || !wt || !wh || !words)
        s = tcq_fail(TCQ_ERR_NOMEM, "LDLQ pass buffers for [%lld, %lld]", (long long)R, (long long)C);
    for (int64_t i = 0; s == TCQ_OK && i < R * C; i++) E[i] = (double)a->W[i] - (double)a->What[i];
    for (int64_t b = nb - 1; s == TCQ_OK && b >= 0; b--) {
        const int64_t c0 = b * T;
        /* G = E_rest H_rest,b = E H[:, b] - E_b H_bb */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)T, (int)C, 1.0, E, (int)C, H + c0, (int)C,
                    0.0, G, (int)T);
        for (int64_t r = 0; r < T; r++) memcpy(Hb + r * T, H + (c0 + r) * C + c0, (size_t)T * sizeof *Hb);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)T, (int)T, 1.0, E + c0, (int)C, Hb,
                    (int)T, 0.0, Eo, (int)T);
        for (int64_t i = 0; i < R * T; i++) G[i] -= Eo[i];
        for (int64_t t = 0; t < T; t++) Hb[t * T + t] += lambda;
        double mean = 0;
        for (int64_t t = 0; t < T; t++) mean += Hb[t * T + t];
        mean /= (double)T;
        for (int64_t t = 0; t < T; t++) wh[t] = (float)(Hb[t * T + t] / mean);   /* the Viterbi's weights */
        /* Z = G H_bb^-1 (H_bb = U U^T, U lower: Z U U^T = G) */
        memcpy(Z, G, (size_t)(R * T) * sizeof *Z);
        s = tcq_quant_cholesky(Hb, T);
        if (s != TCQ_OK) break;
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)R, (int)T, 1.0, Hb, (int)T, Z,
                    (int)T);
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)R, (int)T, 1.0, Hb, (int)T,
                    Z, (int)T);
        for (int64_t r = 0; r < R; r++) {
            const float sc = tcq_f16_to_f32(a->scales[r]);
            for (int64_t t = 0; t < T; t++) {
                x[r * T + t] = (float)(((double)a->W[r * C + c0 + t] + Z[r * T + t]) / sc);
                wt[r * T + t] = wh[t];
            }
        }
        s = tcq_quant_encode_blocks(a, x, wt, R, words);
        /* Hb now holds H_bb's Cholesky factor; the loss change uses H_bb itself */
        for (int64_t r = 0; r < T; r++) memcpy(Hb + r * T, H + (c0 + r) * C + c0, (size_t)T * sizeof *Hb);
        for (int64_t t = 0; t < T; t++) Hb[t * T + t] += lambda;
        for (int64_t r = 0; s == TCQ_OK && r < R; r++) {
            tcq_block_decode_f32(p, words + r * bw, tcq_f16_to_f32(a->scales[r]), wh);
            /* d = e' - e = w^ - w^';  loss change = e' H e'^T - e H e^T + 2 d g^T
             *                                     = d H d^T + 2 d (H e^T + g^T) */
            double *d = Eo + r * T, dhd = 0, lin = 0;
            const double *e = E + r * C + c0, *g = G + r * T;
            for (int64_t t = 0; t < T; t++) d[t] = (double)a->What[r * C + c0 + t] - (double)wh[t];
            for (int64_t i = 0; i < T; i++) {
                double hd = 0, he = 0;
                for (int64_t j = 0; j < T; j++) hd += Hb[i * T + j] * d[j], he += Hb[i * T + j] * e[j];
                dhd += d[i] * hd;
                lin += d[i] * (he + g[i]);
            }
            if (dhd + 2 * lin >= 0) continue;
            memcpy(a->codes + r * rw + b * bw, words + r * bw, (size_t)bw * sizeof *words);
            for (int64_t t = 0; t < T; t++) {
                a->What[r * C + c0 + t] = wh[t];
                E[r * C + c0 + t] = (double)a->W[r * C + c0 + t] - (double)wh[t];
            }
        }
    }
    free(E);
    free(G);
    free(Hb);
    free(Eo);
    free(Z);
    free(x);
    free(wt);
    free(wh);
    free(words);
    return s;
}

tcq_status tcq_quant_ldlq_pass(const tcq_ldlq_args *a, const double *H, double lambda)
{
    if (a->qla) return tcq_quant_ldlq_pass_qla(a, H, lambda);
    return a->axis ? pass_axis1(a, H, lambda) : tcq_quant_pass0_cpu(a, H, lambda);
}
