/* tcq_model_prefill_batch (tcq serve prefills the prompts admitted in one step together) against
 * each sequence prefilled alone with tcq_model_prefill, on synthetic models (dense bf16 and f16,
 * trellis k = 2 exact and fast; the lm_head is the tied bf16 or f16 embedding).  Prompt lengths 1..40 mix the
 * per-row attention (< 5 rows) and the sgemm block.
 *   merge_rows 0: every sequence runs through the layers alone, so the caches are the same bits
 *     (the next token's logits, decoded alone, are equal on any ISA); the last rows' logits come
 *     from one lm_head call of nb rows: on AVX-512 without AMX bit-identical to M = 1 (the dense
 *     direct kernel's rows do not depend on M <= 32), elsewhere within 1e-5 of the logits' scale.
 *   merge_rows 1: the layers see all sequences' rows at once (M = 75), so rows round as at that
 *     M: within 1e-5 of the logits' scale on dense/exact weights, 0.05 on the fast path (its
 *     regimes quantize activations differently; test_batch_rows) and on dense bf16 and f16 under
 *     AUTO (from M = 33 the GEMM rounds activations, and f16 weights, to bf16).
 * Bad arguments fail before anything runs and leave the sessions where they were. */
#include "test.h"

#define NB 6
#define V 512
static const int len[NB] = {1, 3, 5, 9, 17, 40};

static double maxdiff(const float *a, const float *b, size_t n, double *scale)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        w = fmax(w, fabs((double)a[i] - b[i]));
        *scale = fmax(*scale, fabs((double)a[i]));
    }
    return w;
}

/* The test model: a 2-layer synthetic Qwen3 of `bits` (0 bf16, 16 f16, 1..4 trellis), 2 threads. */
static tcq_model *synth(int bits, tcq_kpath path)
{
    const tcq_model_config c = {.arch = TCQ_ARCH_QWEN3, .dim = 256, .hidden_dim = 512, .n_layers = 2, .n_heads = 4,
                                .n_kv_heads = 2, .head_dim = 128, .vocab_size = V, .max_seq = 64};
    const tcq_model_opts o = {.n_threads = 2, .path = path};
    tcq_model *m = NULL;
    CHECK_OK(tcq_model_synthetic(&c, bits, 11, &o, &m));
    return m;
}

static void run(int bits, tcq_kpath path, const char *name, double rel_merged, int head_exact)
{
    tcq_model *m = synth(bits, path);
    if (!m) return;
    tcq_session *a[NB] = {0}, *b[NB] = {0};
    int32_t tok[NB][40];
    float *la = malloc((size_t)NB * V * 4), *lb = malloc((size_t)NB * V * 4), *na = malloc(V * 4), *nb_ = malloc(V * 4);
    for (int i = 0; i < NB; i++) {
        for (int t = 0; t < len[i]; t++) tok[i][t] = (int32_t)((37 * i + 11 * t + 5) % V);
        CHECK_OK(tcq_session_create(m, 64, TCQ_KV_F32, &a[i]));
        CHECK_OK(tcq_session_create(m, 64, TCQ_KV_F32, &b[i]));
        CHECK_OK(tcq_model_prefill(m, a[i], tok[i], len[i], la + (size_t)i * V));   /* alone */
    }
    printf("%-12s", name);
    for (int merge = 0; merge <= 1; merge++) {
        tcq_prefill_seq q[NB];
        for (int i = 0; i < NB; i++) {
            CHECK_OK(tcq_session_rewind(b[i], 0));
            /* every other sequence wants its logits: the head's rows are those that do */
            q[i] = (tcq_prefill_seq){b[i], tok[i], len[i], i % 2 ? NULL : lb + (size_t)i * V};
        }
        CHECK_OK(tcq_model_prefill_batch(m, q, NB, merge));
        double head = 0, next = 0, scale = 0;
        for (int i = 0; i < NB; i++) {
            CHECK(tcq_session_pos(b[i]) == len[i], "%s merge %d: sequence %d at %d, want %d", name, merge, i,
                  tcq_session_pos(b[i]), len[i]);
            if (!(i % 2)) head = fmax(head, maxdiff(la + (size_t)i * V, lb + (size_t)i * V, V, &scale));
            /* the cache: the next token decoded alone on both sides */
            int32_t t = (int32_t)(3 * i + 1);
            CHECK_OK(tcq_model_forward(m, a[i], &t, 1, na));
            CHECK_OK(tcq_model_forward(m, b[i], &t, 1, nb_));
            next = fmax(next, maxdiff(na, nb_, V, &scale));
            CHECK_OK(tcq_session_rewind(a[i], len[i]));
        }
        if (!merge) {
            CHECK(next == 0, "%s: separate layers, the caches differ (next logits by %g)", name, next);
            if (head_exact) CHECK(head == 0, "%s: the batched lm_head rows differ from M = 1 by %g", name, head);
        }
        const double bound = merge ? rel_merged : 1e-5;
        CHECK(head <= bound * scale && next <= bound * scale, "%s merge %d: last logits off by %g, next by %g (scale %g)",
              name, merge, head, next, scale);
        printf("  merge %d: last %s%.1e next %s%.1e", merge, head ? "" : "=", head, next ? "" : "=", next);
    }
    printf("\n");

    /* bad arguments: nothing runs */
    for (int i = 0; i < NB; i++) CHECK_OK(tcq_session_rewind(b[i], 0));
    tcq_prefill_seq bad[2] = {{b[0], tok[5], 40, NULL}, {b[0], tok[4], 17, NULL}};
    CHECK(tcq_model_prefill_batch(m, bad, 2, 1) == TCQ_ERR_INVALID_ARG, "a repeated session is refused");
    bad[1].sess = b[1];
    bad[1].n = 30;   /* 40 + ... fits; now overflow the second */
    CHECK_OK(tcq_model_prefill(m, b[1], tok[5], 40, NULL));
    CHECK(tcq_model_prefill_batch(m, bad, 2, 0) == TCQ_ERR_RANGE, "a context overflow is refused");
    CHECK(tcq_session_pos(b[0]) == 0 && tcq_session_pos(b[1]) == 40, "a refused batch left the sessions alone");
    bad[1].tokens = NULL;
    CHECK(tcq_model_prefill_batch(m, bad, 2, 0) == TCQ_ERR_INVALID_ARG, "no tokens is refused");
    CHECK(tcq_model_prefill_batch(m, bad, 0, 0) == TCQ_ERR_INVALID_ARG, "nb = 0 is refused");
    CHECK(tcq_model_prefill_batch(m, bad, TCQ_MAX_BATCH + 1, 0) == TCQ_ERR_INVALID_ARG, "nb > TCQ_MAX_BATCH is refused");
    for (int i = 0; i < NB; i++) {
        tcq_session_free(a[i]);
        tcq_session_free(b[i]);
    }
    free(la);
    free(lb);
    free(na);
    free(nb_);
    tcq_model_free(m);
}

/* tcq_model_prefill skips the last layer's query, attention, output projection and FFN for the
 * rows whose logits nobody wants (forward.c, layer_rows' kf): the last row's logits match those of
 * a forward that keeps every row to f32 noise, and the caches match to the bit (the next token's
 * logits). */
static void pruned_last_layer(int bits, tcq_kpath path, const char *name)
{
    tcq_model *m = synth(bits, path);
    if (!m) return;
    enum { N = 40 };
    int32_t tok[N + 1];
    for (int t = 0; t <= N; t++) tok[t] = (int32_t)((7 * t + 3) % V);
    float *all = malloc((size_t)N * V * 4), *last = malloc(V * 4), *na = malloc(V * 4), *nb_ = malloc(V * 4);
    tcq_session *a = NULL, *b = NULL;
    CHECK_OK(tcq_session_create(m, 64, TCQ_KV_F32, &a));
    CHECK_OK(tcq_session_create(m, 64, TCQ_KV_F32, &b));
    CHECK_OK(tcq_model_forward(m, a, tok, N, all));    /* every row through every layer */
    CHECK_OK(tcq_model_prefill(m, b, tok, N, last));   /* the last layer for the last row alone */
    double scale = 0, d = maxdiff(all + (size_t)(N - 1) * V, last, V, &scale);
    CHECK(d <= 1e-5 * scale, "%s: pruned prefill's last logits off by %g (scale %g)", name, d, scale);
    CHECK_OK(tcq_model_forward(m, a, tok + N, 1, na));
    CHECK_OK(tcq_model_forward(m, b, tok + N, 1, nb_));
    CHECK(memcmp(na, nb_, V * 4) == 0, "%s: the caches after a pruned prefill differ", name);
    printf("%-12s pruned last layer: last logits %.1e of %.1f, next =\n", name, d, scale);
    tcq_session_free(a);
    tcq_session_free(b);
    free(all), free(last), free(na), free(nb_);
    tcq_model_free(m);
}

int main(void)
{
    const int avx512 = tcq_isa_active() == TCQ_ISA_AVX512 && !tcq_cpu()->amx_int8;
    run(0, TCQ_PATH_EXACT, "dense bf16", 1e-5, avx512);
    run(0, TCQ_PATH_AUTO, "bf16 auto", 0.05, avx512);   /* M = 75: the bf16-activation GEMM */
    run(16, TCQ_PATH_EXACT, "dense f16", 1e-5, avx512);
    run(16, TCQ_PATH_AUTO, "f16 auto", 0.05, avx512);   /* ... f16 weights rounded to bf16 as well */
    run(2, TCQ_PATH_EXACT, "k=2 exact", 1e-5, avx512);
    run(2, TCQ_PATH_FAST, "k=2 fast", 0.05, avx512);
    pruned_last_layer(0, TCQ_PATH_EXACT, "dense bf16");
    pruned_last_layer(2, TCQ_PATH_EXACT, "k=2 exact");
    return test_done("test_prefill_batch");
}
