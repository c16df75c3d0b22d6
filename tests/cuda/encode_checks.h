/* test_cuda's checks of the GPU encoder: codes, scales and squared error bit for bit against
 * tcq_encode_rows / tcq_encode_blocks, bad inputs refused.  Included by test_cuda.c after
 * cuda_checks.h. */
#ifndef TCQ_TEST_CUDA_ENCODE_CHECKS_H
#define TCQ_TEST_CUDA_ENCODE_CHECKS_H

#include "cuda_checks.h"

static tcq_pool *pool;   /* the CPU reference encoder's threads (the codes do not depend on them) */

/* Row kinds beyond N(0, 0.02^2) for the GPU's row scales: special != 0 makes row r % 7 ==
 * 0: all zero (scale 1), 1: RMS far below the smallest fp16 (scale clamps to 1 = 2^-24),
 * 2: large (|x| ~ 1e3), 3: one nonzero entry, 4: N(0,1) with a row-dependent gain (scales that
 * land on many fp16 roundings), others: the default. */
static void fill_rows(float *src, int64_t R, int64_t C, int special)
{
    for (int64_t r = 0; r < R; r++) {
        float *row = src + r * C;
        const int kind = special ? (int)(r % 7) : 6;
        const double gain = kind == 2 ? 1e3 : kind == 4 ? 0.001 * (double)(1 + r) : 0.02;
        for (int64_t c = 0; c < C; c++) {
            double v = test_gauss(&rng) * gain;
            if (kind == 0) v = 0;
            if (kind == 1) v = test_gauss(&rng) * 1e-13;
            if (kind == 3) v = c == C / 3 ? 0.5 : 0;
            row[c] = (float)v;
        }
    }
}

static void check_encoder_ex(int L, int k, int T, int64_t R, int64_t C, int weighted, int special)
{
    const tcq_block_params p = {L, k, T};
    float *src = malloc((size_t)(R * C) * 4), *w = weighted ? malloc((size_t)(R * C) * 4) : NULL;
    fill_rows(src, R, C, special);
    if (w)
        for (int64_t i = 0; i < R * C; i++) w[i] = (float)(0.1 + test_uniform(&rng));
    const int64_t nw = R * C * k / 32;
    uint32_t *cc = malloc((size_t)nw * 4), *gc = malloc((size_t)nw * 4);
    uint16_t *cs = malloc((size_t)R * 2), *gs = malloc((size_t)R * 2);
    double ce = 0, ge = 0;
    CHECK_OK(tcq_encode_rows(p, NULL, src, w, R, C, cc, cs, pool, &ce));
    memset(gc, 0xab, (size_t)nw * 4);
    memset(gs, 0xcd, (size_t)R * 2);
    CHECK_OK(tcq_cuda_encode_rows(ctx, p, NULL, src, w, R, C, gc, gs, &ge));
    int64_t bad = 0, bad_s = 0;
    for (int64_t i = 0; i < nw; i++) bad += cc[i] != gc[i];
    for (int64_t r = 0; r < R; r++) bad_s += cs[r] != gs[r];
    CHECK(bad == 0 && bad_s == 0 && ce == ge,
          "GPU encoder L=%d k=%d T=%d [%lld, %lld] w=%d special=%d: %lld of %lld words, %lld of %lld scales differ, "
          "err cpu %.17g gpu %.17g", L, k, T, (long long)R, (long long)C, weighted, special, (long long)bad, (long long)nw,
          (long long)bad_s, (long long)R, ce, ge);
    /* sq_err NULL takes the path without the block errors: the same codes */
    memset(gc, 0xab, (size_t)nw * 4);
    CHECK_OK(tcq_cuda_encode_rows(ctx, p, NULL, src, w, R, C, gc, gs, NULL));
    CHECK(memcmp(cc, gc, (size_t)nw * 4) == 0 && memcmp(cs, gs, (size_t)R * 2) == 0,
          "GPU encoder L=%d k=%d [%lld, %lld]: codes differ without sq_err", L, k, (long long)R, (long long)C);
    free(src);
    free(w);
    free(cc);
    free(gc);
    free(cs);
    free(gs);
}

static void check_encoder(int L, int k, int T, int64_t R, int64_t C, int weighted)
{
    check_encoder_ex(L, k, T, R, C, weighted, 0);
}

/* Bad inputs: the CPU and the GPU encoder both refuse them (TCQ_ERR_INVALID_ARG, a message),
 * wherever they sit in the matrix (first chunk, a later one). */
static void check_encoder_bad_inputs(void)
{
    const tcq_block_params p = {12, 2, 256};
    const int64_t R = 1100, C = 4096;   /* 3 chunks of the GPU pipeline */
    float *src = malloc((size_t)(R * C) * 4), *w = malloc((size_t)(R * C) * 4);
    uint32_t *codes = malloc((size_t)(R * C * p.k / 32) * 4);
    uint16_t *sc = malloc((size_t)R * 2);
    fill_rows(src, R, C, 0);
    for (int64_t i = 0; i < R * C; i++) w[i] = 1.0f;
    static const int64_t at[] = {5, 1050 * 4096 + 17};
    for (int i = 0; i < 2; i++) {
        const float keep = src[at[i]];
        src[at[i]] = i ? INFINITY : NAN;
        CHECK(tcq_encode_rows(p, NULL, src, NULL, R, C, codes, sc, pool, NULL) == TCQ_ERR_INVALID_ARG, "CPU: non-finite x");
        const tcq_status s = tcq_cuda_encode_rows(ctx, p, NULL, src, NULL, R, C, codes, sc, NULL);
        CHECK(s == TCQ_ERR_INVALID_ARG && *tcq_last_error() != 0, "GPU encoder: non-finite x at %lld -> %s",
              (long long)at[i], tcq_status_str(s));
        src[at[i]] = keep;
        w[at[i]] = -1.0f;
        CHECK(tcq_cuda_encode_rows(ctx, p, NULL, src, w, R, C, codes, sc, NULL) == TCQ_ERR_INVALID_ARG,
              "GPU encoder: negative weight at %lld accepted", (long long)at[i]);
        w[at[i]] = 1.0f;
    }
    CHECK_OK(tcq_cuda_encode_rows(ctx, p, NULL, src, w, R, C, codes, sc, NULL));   /* the context still works */
    tcq_encode_opts seams = {TCQ_SEARCH_SEAMS, 4};
    CHECK(tcq_cuda_encode_rows(ctx, p, &seams, src, NULL, 2, C, codes, sc, NULL) == TCQ_ERR_UNSUPPORTED,
          "GPU encoder claimed the seams search");
    free(src);
    free(w);
    free(codes);
    free(sc);
}

static void check_encode_blocks(int L, int k, int T, int64_t n, int weighted)
{
    const tcq_block_params p = {L, k, T};
    float *x = malloc((size_t)(n * T) * 4), *w = weighted ? malloc((size_t)(n * T) * 4) : NULL;
    for (int64_t i = 0; i < n * T; i++) x[i] = (float)test_gauss(&rng);
    if (w)
        for (int64_t i = 0; i < n * T; i++) w[i] = (float)(0.1 + test_uniform(&rng));
    const int64_t nw = n * T * k / 32;
    uint32_t *cc = malloc((size_t)nw * 4), *gc = malloc((size_t)nw * 4);
    double ce = 0, ge = 0;
    CHECK_OK(tcq_encode_blocks(p, NULL, x, w, n, cc, NULL, &ce));
    memset(gc, 0x5a, (size_t)nw * 4);
    CHECK_OK(tcq_cuda_encode_blocks(ctx, p, NULL, x, w, n, gc, &ge));
    CHECK(memcmp(cc, gc, (size_t)nw * 4) == 0 && ce == ge, "GPU encode_blocks L=%d k=%d T=%d w=%d differs (err %.9g vs %.9g)",
          L, k, T, weighted, ce, ge);
    free(x);
    free(w);
    free(cc);
    free(gc);
}

#endif
