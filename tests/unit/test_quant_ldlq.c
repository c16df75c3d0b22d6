/* BlockLDLQ pieces against float64 references on small random SPD matrices:
 *   - block LDL: L D L^T = H, L unit lower block triangular, for blocks of 1, 4, 16 and 5 (the
 *     first block then the shorter: 13 = 3 + 2 x 5); its per-block finish on the pool (rows in
 *     chunks) gives the bits of one DTRSM per block (the loop before, kept here) on 0, 1, 2 threads;
 *   - the feedback: every block's codes are what the encoder gives for the target
 *     w_b + sum_{j>b} e_j L_jb computed here in double from the final errors (axis 1: the trellis
 *     blocks with the row scale, weighted by diag(D_b); axis 0: each stored row with its own scale,
 *     in act-order: by ascending H_ii, coded from the last; in groups of g = 1, 8 and 48 rows of
 *     that order, whose targets see only the groups coded before, with the block LDL of g);
 *   - H = I (any damping): LDLQ's codes and scales equal tcq_encode_rows' bit for bit, both axes;
 *   - a correlated H: the proxy loss is lower than rounding's;
 *   - errors: a matrix that is not positive definite, a Hessian without signal. */
#include "test.h"
#include "quant/quant.h"

#include <cblas.h>

/* The per-block finish as one thread did it (ldl.c before the pool), from the Cholesky factor
 * F: D_b = C_bb C_bb^T and one DTRSM over each column block's rows. */
static void ref_finish(double *F, int64_t m, int b, double *D)
{
    double *cbb = malloc((size_t)b * b * sizeof *cbb);
    for (int64_t b0 = 0, n = m % b ? m % b : b; b0 < m; b0 += n, n = b) {
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) cbb[r * n + c] = F[(b0 + r) * m + b0 + c];
        double *Db = D + b0 * b;
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) {
                double s = 0;
                for (int64_t k = 0; k <= TCQ_MIN(r, c); k++) s += cbb[r * n + k] * cbb[c * n + k];
                Db[r * n + c] = s;
            }
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)(m - b0), (int)n, 1.0, cbb,
                    (int)n, F + b0 * m + b0, (int)m);
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) F[(b0 + r) * m + b0 + c] = r == c;
    }
    free(cbb);
}

/* The pooled finish (rows in chunks, each chunk every block's solve): the bits of ref_finish
 * for no pool, 1 and 2 threads; m = 700 is three chunks of rows, b = 8 leaves a first block of 4. */
static void check_ldl_pool(uint64_t *st)
{
    const int64_t m = 700;
    const int bs[] = {1, 8, 256};
    double *H = malloc((size_t)(m * m) * sizeof *H), *F = malloc((size_t)(m * m) * sizeof *F);
    double *L = malloc((size_t)(m * m) * sizeof *L), *D0 = malloc((size_t)(m * 256) * sizeof *D0);
    double *D = malloc((size_t)(m * 256) * sizeof *D);
    tcq_pool *pools[3] = {NULL, NULL, NULL};
    CHECK_OK(tcq_pool_create(1, &pools[1]));
    CHECK_OK(tcq_pool_create(2, &pools[2]));
    test_random_spd(st, m, H);
    for (int k = 0; k < 3; k++) {
        const int b = bs[k];
        memcpy(F, H, (size_t)(m * m) * sizeof *F);
        CHECK_OK(tcq_quant_cholesky(F, m));
        ref_finish(F, m, b, D0);
        for (int t = 0; t < 3; t++) {
            CHECK_OK(tcq_quant_block_ldl_on(NULL, pools[t], H, m, b, L, D));
            CHECK(!memcmp(L, F, (size_t)(m * m) * sizeof *L) && !memcmp(D, D0, (size_t)(m * b) * sizeof *D),
                  "block LDL b=%d on %d threads: other bits than one DTRSM per block", b, t);
        }
    }
    tcq_pool_free(pools[1]);
    tcq_pool_free(pools[2]);
    free(H), free(F), free(L), free(D0), free(D);
}

static void check_ldl(uint64_t *st, int64_t m, int b)
{
    double *H = malloc((size_t)(m * m) * sizeof *H), *L = malloc((size_t)(m * m) * sizeof *L);
    double *D = malloc((size_t)(m * b) * sizeof *D);
    test_random_spd(st, m, H);
    CHECK_OK(tcq_quant_block_ldl(H, m, b, L, D));
    /* blocks of b, the first one of m mod b where b does not divide m */
    const int64_t r0 = m % b ? m % b : b;
    double worst = 0, struct_bad = 0, hmax = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < m; j++) {
            hmax = fmax(hmax, fabs(H[i * m + j]));
            const int64_t bi = i < r0 ? 0 : 1 + (i - r0) / b, bj = j < r0 ? 0 : 1 + (j - r0) / b;
            if (bi < bj) struct_bad = fmax(struct_bad, fabs(L[i * m + j]));
            if (bi == bj) struct_bad = fmax(struct_bad, fabs(L[i * m + j] - (i == j)));
            /* (L D L^T)_ij = sum over blocks c <= min: L_i,c D_c L_j,c^T (D_c: n x n at D + c0 * b) */
            long double s = 0;
            for (int64_t c = 0; c <= TCQ_MIN(bi, bj); c++) {
                const int64_t c0 = c ? r0 + (c - 1) * b : 0, n = c ? b : r0;
                for (int64_t r = 0; r < n; r++)
                    for (int64_t q = 0; q < n; q++)
                        s += (long double)L[i * m + c0 + r] * D[c0 * b + r * n + q] * L[j * m + c0 + q];
            }
            worst = fmax(worst, fabs((double)s - H[i * m + j]));
        }
    CHECK(worst <= 1e-10 * hmax, "block LDL m=%lld b=%d: |L D L^T - H| = %g (max |H| %g)", (long long)m, b, worst, hmax);
    CHECK(struct_bad <= 1e-12, "block LDL m=%lld b=%d: L is not unit lower block triangular (%g)", (long long)m, b,
          struct_bad);
    free(H);
    free(L);
    free(D);
}

static double proxy(const float *W, const float *What, int64_t R, int64_t C, int axis, const double *H)
{
    double l = -1;
    CHECK_OK(tcq_quant_proxy(W, What, R, C, axis, H, NULL, &l, NULL));
    return l;
}

/* LDLQ of W [R, C] under H; checks the feedback against a float64 target, returns the proxy loss
 * (and the rtn one in *rtn_loss). */
static double check_feedback(uint64_t *st, int64_t R, int64_t C, int axis, const double *H, double damp, int g,
                             double *rtn_loss, int *identical_to_rtn)
{
    const tcq_block_params p = {12, 2, 256};
    const tcq_encode_opts enc = {0};
    const int64_t m = axis ? C : R, rw = C * p.k / 32, bw = tcq_block_words(p);
    float *W = malloc((size_t)(R * C) * sizeof *W), *What = malloc((size_t)(R * C) * sizeof *What);
    float *Wr = malloc((size_t)(R * C) * sizeof *Wr);
    uint32_t *codes = malloc((size_t)(R * rw) * 4), *rcodes = malloc((size_t)(R * rw) * 4);
    uint16_t *scales = malloc((size_t)R * 2), *rscales = malloc((size_t)R * 2);
    for (int64_t i = 0; i < R * C; i++) W[i] = (float)test_gauss(st);
    tcq_pool *pool = NULL;
    CHECK_OK(tcq_pool_create(2, &pool));
    const tcq_ldlq_args a = {p, &enc, pool, W, R, C, axis, H, damp, 0, codes, scales, What, 0, 0, NULL, NULL, g};
    CHECK_OK(tcq_quant_ldlq(&a));
    CHECK_OK(tcq_encode_rows(p, &enc, W, NULL, R, C, rcodes, rscales, pool, NULL));
    tcq_quant_decode_rows(p, rcodes, rscales, R, C, Wr);
    *identical_to_rtn = !memcmp(codes, rcodes, (size_t)(R * rw) * 4) && !memcmp(scales, rscales, (size_t)R * 2);
    *rtn_loss = proxy(W, Wr, R, C, axis, H);

    /* float64 reference of the targets from the final errors and the same damped LDL */
    double *Hd = malloc((size_t)(m * m) * sizeof *Hd), *L = malloc((size_t)(m * m) * sizeof *L);
    const int b = axis ? p.T : g;
    double *D = malloc((size_t)(m * b) * sizeof *D);
    CHECK_OK(tcq_quant_damp(H, m, damp, Hd));
    /* axis 0 codes the stored rows in act-order: by ascending H_ii (ties by index), from the
     * last, so the reference factors P Hd P^T; axis 1 keeps the natural order (perm = identity) */
    int64_t *perm = malloc((size_t)m * sizeof *perm);
    for (int64_t i = 0; i < m; i++) perm[i] = i;
    for (int64_t i = 1; !axis && i < m; i++)   /* insertion sort: stable, so ties stay by index */
        for (int64_t j = i; j > 0 && Hd[perm[j - 1] * m + perm[j - 1]] > Hd[perm[j] * m + perm[j]]; j--) {
            const int64_t t = perm[j];
            perm[j] = perm[j - 1], perm[j - 1] = t;
        }
    double *Hp = malloc((size_t)(m * m) * sizeof *Hp);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < m; j++) Hp[i * m + j] = Hd[perm[i] * m + perm[j]];
    CHECK_OK(tcq_quant_block_ldl(Hp, m, b, L, D));
    free(Hp);
    int64_t units = 0, same = 0;
    float x[256], tg[4096];
    uint32_t words[64];
    if (axis) {
        for (int64_t r = 0; r < R; r++) {
            const float sc = tcq_f16_to_f32(scales[r]);
            CHECK(scales[r] == tcq_scale_for_row(p.L, W + r * C, C), "axis 1 row %lld: scale from the row", (long long)r);
            for (int64_t c0 = 0; c0 < C; c0 += p.T) {
                for (int t = 0; t < p.T; t++) {
                    double v = W[r * C + c0 + t];
                    for (int64_t j = c0 + p.T; j < C; j++)
                        v += ((double)W[r * C + j] - What[r * C + j]) * L[j * m + c0 + t];
                    x[t] = (float)v / sc;
                }
                float wt[256];   /* the Viterbi's weights: diag(D_b), mean 1 */
                double mean = 0;
                for (int t = 0; t < p.T; t++) mean += D[(c0 + t) * p.T + t];
                mean /= p.T;
                for (int t = 0; t < p.T; t++) wt[t] = (float)(D[(c0 + t) * p.T + t] / mean);
                CHECK_OK(tcq_encode_blocks(p, &enc, x, wt, 1, words, NULL, NULL));
                same += !memcmp(words, codes + r * rw + c0 / p.T * bw, (size_t)bw * 4);
                units++;
            }
        }
    } else {
        for (int64_t i = 0; i < R; i++) {   /* position i of the order: stored row perm[i] */
            const int64_t pi = perm[i], gh = R - (R - 1 - i) / g * g;   /* its group ends at gh */
            for (int64_t t = 0; t < C; t++) {
                double v = W[pi * C + t];
                for (int64_t j = gh; j < R; j++)
                    v += ((double)W[perm[j] * C + t] - What[perm[j] * C + t]) * L[j * m + i];
                tg[t] = (float)v;
            }
            uint16_t sc;
            uint32_t rowc[4096 * 2 / 32];
            CHECK_OK(tcq_encode_rows(p, &enc, tg, NULL, 1, C, rowc, &sc, NULL, NULL));
            same += sc == scales[pi] && !memcmp(rowc, codes + pi * rw, (size_t)rw * 4);
            units++;
        }
    }
    /* float rounding of the running corrections may flip a rare Viterbi tie: most units agree */
    CHECK(same >= units * 9 / 10, "axis %d, g %d feedback: %lld of %lld coded units match the float64 targets' codes",
          axis, g, (long long)same, (long long)units);
    const double l = proxy(W, What, R, C, axis, H);
    double lp = -1, rp = -1, l1 = -2, r1 = -2;   /* on the pool: the same bits (fixed chunks, summed in order) */
    CHECK_OK(tcq_quant_proxy(W, What, R, C, axis, H, pool, &lp, &rp));
    CHECK_OK(tcq_quant_proxy(W, What, R, C, axis, H, NULL, &l1, &r1));
    CHECK(lp == l && l1 == l && rp == r1, "axis %d proxy on the pool: %.17g / %.17g, alone %.17g / %.17g", axis, lp,
          rp, l, r1);
    free(Hd);
    free(perm);
    free(L);
    free(D);
    free(W);
    free(What);
    free(Wr);
    free(codes);
    free(rcodes);
    free(scales);
    free(rscales);
    tcq_pool_free(pool);
    return l;
}

int main(void)
{
    uint64_t st = test_seed();
    check_ldl(&st, 12, 1);
    check_ldl(&st, 16, 4);
    check_ldl(&st, 64, 16);
    check_ldl(&st, 13, 5);

    /* axis 0: 300 rows = 3 batches (of 128; of 96 for g = 48), the last group of 300 mod g rows */
    for (int run = 0; run < 4; run++) {
        const int axis = run == 3, g = run == 1 ? 8 : run == 2 ? 48 : 1;
        const int64_t R = axis ? 24 : 300, C = axis ? 768 : 256, m = axis ? C : R;
        double *H = calloc((size_t)(m * m), sizeof *H);
        for (int64_t i = 0; i < m; i++) H[i * m + i] = 1;
        double rl;
        int ident = 0;
        check_feedback(&st, R, C, axis, H, 0.01, g, &rl, &ident);
        CHECK(ident, "axis %d, g %d: H = I gives other codes or scales than rounding", axis, g);
        test_random_spd(&st, m, H);
        const double l = check_feedback(&st, R, C, axis, H, 0.01, g, &rl, &ident);
        CHECK(l < rl, "axis %d, g %d: LDLQ proxy %g not below rounding's %g", axis, g, l, rl);
        fprintf(stderr, "axis %d, g %d: proxy LDLQ %g, rounding %g (%.1f%%)\n", axis, g, l, rl, 100 * (l / rl - 1));
        free(H);
    }

    /* errors: not positive definite; no signal */
    double bad[4] = {1, 2, 2, 1}, L[4], D[4], zero[4] = {0};
    CHECK(tcq_quant_block_ldl(bad, 2, 1, L, D) == TCQ_ERR_INVALID_ARG && strstr(tcq_last_error(), "positive definite"),
          "indefinite matrix: %s", tcq_last_error());
    CHECK(tcq_quant_block_ldl(bad, 2, 0, L, D) == TCQ_ERR_INVALID_ARG, "a block of 0");
    CHECK(tcq_quant_damp(zero, 2, 0.01, D) == TCQ_ERR_INVALID_ARG && strstr(tcq_last_error(), "no calibration signal"),
          "zero Hessian: %s", tcq_last_error());
    check_ldl_pool(&st);
    return test_done("test_quant_ldlq");
}
