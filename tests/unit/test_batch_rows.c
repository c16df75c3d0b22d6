/* Batch composition (tcq serve decodes a request's row beside any others): each row of
 * tcq_model_forward_batch against the same session decoded alone (M = 1), for M = 1..32, on
 * synthetic models: dense bf16 and trellis k = 2, 3, 4 on the exact and fast paths.
 * On AVX-512 (without AMX) the rows are bit-identical to M = 1 where the kernels' regimes allow:
 *   dense bf16: every M <= 32 (the direct kernel in groups of 4 rows);
 *   trellis exact: M <= 15 (from 16 the axis-1 projections run decode + sgemm, whose blocking
 *     rounds differently: within 1e-5 of the logits' scale);
 *   trellis fast: M <= 3 (M1's int8 activations per row); from M = 4 the shared and tile regimes
 *     quantize activations to int16 instead, a different rounding of the input: within 0.05 of
 *     the logits' scale here (docs/PERFORMANCE.md, "Server").
 * Elsewhere (other ISAs) the same bounds are asserted without the bit-identical parts. */
#include "test.h"

#define NS 32

/* first M whose rows may differ from M = 1, and the bound (relative to max |logit|) past it */
static void run(int bits, tcq_kpath path, const char *name, int exact_to, double rel)
{
    tcq_model_config c = {.arch = TCQ_ARCH_QWEN3, .dim = 256, .hidden_dim = 512, .n_layers = 1, .n_heads = 4,
                          .n_kv_heads = 2, .head_dim = 128, .vocab_size = 512, .max_seq = 64};
    tcq_model_opts o = {.n_threads = 2, .path = path};
    tcq_model *m = NULL;
    CHECK_OK(tcq_model_synthetic(&c, bits, 7, &o, &m));
    if (!m) return;
    tcq_session *a[NS] = {0}, *b[NS] = {0};
    int32_t tok[NS];
    float *la = malloc((size_t)NS * 512 * 4), *lb = malloc((size_t)NS * 512 * 4);
    for (int i = 0; i < NS; i++) {
        int32_t p[5] = {1 + i, 2 + 3 * i, 7, 100 + i, 5 * i};
        CHECK_OK(tcq_session_create(m, 64, TCQ_KV_F32, &a[i]));
        CHECK_OK(tcq_session_create(m, 64, TCQ_KV_F32, &b[i]));
        CHECK_OK(tcq_model_prefill(m, a[i], p, 5, NULL));
        CHECK_OK(tcq_model_prefill(m, b[i], p, 5, NULL));
        tok[i] = (17 * i + 3) % 512;
        CHECK_OK(tcq_model_forward_batch(m, &a[i], &tok[i], 1, la + (size_t)i * 512));   /* alone */
    }
    printf("%-14s", name);
    for (int M = 2; M <= NS; M++) {
        /* rows 0..M-1 together; then rewind b so the next M starts from the same state */
        CHECK_OK(tcq_model_forward_batch(m, b, tok, M, lb));
        double worst = 0, scale = 0;
        for (size_t i = 0; i < (size_t)M * 512; i++) {
            worst = fmax(worst, fabs((double)la[i] - lb[i]));
            scale = fmax(scale, fabs((double)la[i]));
        }
        if (M <= exact_to) CHECK(worst == 0, "%s: M = %d: rows differ from M = 1 by %g", name, M, worst);
        CHECK(worst <= rel * scale, "%s: M = %d: rows differ from M = 1 by %g (logits up to %g)", name, M, worst,
              scale);
        printf(" %d:%s", M, worst == 0 ? "=" : "");
        if (worst) printf("%.1e", worst);
        for (int i = 0; i < M; i++) CHECK_OK(tcq_session_rewind(b[i], 5));
    }
    printf("\n");
    for (int i = 0; i < NS; i++) {
        tcq_session_free(a[i]);
        tcq_session_free(b[i]);
    }
    free(la);
    free(lb);
    tcq_model_free(m);
}

int main(void)
{
    const int avx512 = tcq_isa_active() == TCQ_ISA_AVX512 && !tcq_cpu()->amx_int8;
    run(0, TCQ_PATH_AUTO, "dense bf16", avx512 ? NS : 1, 1e-5);
    for (int k = 2; k <= 4; k++) {
        char n[32];
        snprintf(n, sizeof n, "k=%d exact", k);
        run(k, TCQ_PATH_EXACT, n, avx512 ? 15 : 1, 1e-5);
        snprintf(n, sizeof n, "k=%d fast", k);
        run(k, TCQ_PATH_FAST, n, avx512 ? 3 : 1, 0.05);
    }
    return test_done("test_batch_rows");
}
