/* Axis 0's batched coding (issue 23: a GPU encoder wants many blocks a launch):
 *   - the scale candidates of several rows in one encoder call (tcq_quant_code_candidates) give
 *     the codes and scales of the per-row, per-candidate loop they replaced (kept here as the
 *     reference), with and without the refit, for searches of 1, 5 and 9. */
#include "test.h"
#include "quant/quant.h"

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
    for (int refit = 0; refit <= 1; refit++)
        for (int n_mult = 1; n_mult <= 9; n_mult += 4) {
            const tcq_ldlq_args a = {p, &enc, pool, NULL, n, C, 0, NULL, 0, refit, NULL, NULL, NULL, 0, n_mult, NULL, NULL};
            CHECK_OK(tcq_quant_code_candidates(&a, tg, n, n_mult, c1, s1));
            for (int64_t r = 0; r < n; r++) ref_candidates(p, refit, tg + r * C, C, n_mult, c0 + r * rw, s0 + r);
            CHECK(!memcmp(c0, c1, (size_t)(n * rw) * 4) && !memcmp(s0, s1, sizeof s0),
                  "refit %d, %d candidates: %lld rows in one call differ from the per-candidate loop", refit, n_mult,
                  (long long)n);
        }
    tcq_pool_free(pool);
    free(tg);
    free(c0);
    free(c1);
}

int main(void)
{
    uint64_t st = test_seed();
    check_candidates(&st);
    return test_done("test_quant_ldlq_group");
}
