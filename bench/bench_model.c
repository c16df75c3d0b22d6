/* tcq bench model [MODEL]: prefill and decode speed of a model directory / checkpoint, or of a
 * built-in synthetic model with Qwen3-14B's geometry (few layers, random weights). */
#include "bench.h"
#include "cli_model.h"

#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f, "usage: tcq bench model [MODEL] [--prompt N] [--gen N] [--batch B] [--threads N] [--kv f32|f16]\n"
               "                        [--bits K] [--layers N] [--vocab V] [--kpath auto|exact|fast] [--json]\n"
               "  MODEL: a model directory or llama2.c .bin; without it a synthetic Qwen3-14B-geometry model\n"
               "  (dim 5120, ffn 17408, 40 heads / 8 kv of 128, vocab 151936) with --layers (2) random layers,\n"
               "  --bits 0 (bf16, default; also --bf16), 16 (f16, also --f16) or 1..4 (trellis L=12 T=256,\n"
               "  random codes).\n"
               "  Prefill: --prompt (128) tokens in chunks of %d rows.  Decode: --gen (32) tokens one at a time\n"
               "  (median per-token time), and with --batch B (2..4) B sequences decoded together.\n",
            TCQ_PREFILL_CHUNK);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_model(int argc, char **argv)
{
    const char *path = NULL;
    long long prompt = 128, gen = 32, batch = 0, threads = 0, bits = 0, layers = 2, vocab = 151936;
    int json = 0;
    tcq_kv_dtype kv = TCQ_KV_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long *dst = NULL;
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        }
        if (strcmp(a, "--prompt") == 0) dst = &prompt;
        else if (strcmp(a, "--gen") == 0) dst = &gen;
        else if (strcmp(a, "--batch") == 0) dst = &batch;
        else if (strcmp(a, "--threads") == 0) dst = &threads;
        else if (strcmp(a, "--bits") == 0) dst = &bits;
        else if (strcmp(a, "--layers") == 0) dst = &layers;
        else if (strcmp(a, "--vocab") == 0) dst = &vocab;
        else if (strcmp(a, "--json") == 0) json = 1;
        else if (strcmp(a, "--f16") == 0) bits = 16;
        else if (strcmp(a, "--bf16") == 0) bits = 0;
        else if (strcmp(a, "--kv") == 0) {
            if (cli_parse_kv(v, &kv)) return 2;
            i++;
        } else if (!strcmp(a, "--kpath")) {
            if (cli_parse_kpath(v)) return 2;
            i++;
        } else if (a[0] != '-' && !path) path = a;
        else {
            fprintf(stderr, "tcq bench model: unexpected argument '%s'\n", a);
            return 2;
        }
        if (dst) {
            if (cli_parse_long(a, v, dst)) return 2;
            i++;
        }
    }
    if (prompt < 1 || gen < 1 || batch < 0 || batch > TCQ_MAX_BATCH || bits < 0 || (bits > 4 && bits != 16) || layers < 1 || vocab < 1) {
        help(stderr);
        return 2;
    }
    tcq_model *m;
    if (path) {
        if (cli_model_load(path, (int)threads, &m)) return 1;
    } else {
        tcq_model_config c;
        memset(&c, 0, sizeof c);
        c.arch = TCQ_ARCH_QWEN3;
        c.dim = 5120;
        c.hidden_dim = 17408;
        c.n_layers = (int)layers;
        c.n_heads = 40;
        c.n_kv_heads = 8;
        c.head_dim = 128;
        c.vocab_size = (int)vocab;
        c.max_seq = 40960;
        c.rope_theta = 1e6;
        c.norm_eps = 1e-6f;
        c.bos_id = -1;
        tcq_model_opts o = {.n_threads = (int)threads, .path = cli_kpath};
        double t0 = cli_now();
        tcq_status s = tcq_model_synthetic(&c, (int)bits, 1234, &o, &m);
        if (s != TCQ_OK) return cli_fail(s, "synthetic model");
        char b[32];
        fprintf(stderr, "synthetic Qwen3-14B geometry, %lld layers: %s, weights %s (built in %.1f s)\n", layers,
                tcq_model_describe(m), cli_bytes(tcq_model_weight_bytes(m), b), cli_now() - t0);
    }
    const tcq_model_config *c = tcq_model_get_config(m);
    const int V = c->vocab_size;
    int ctx = (int)(prompt + gen + 1);
    if (ctx > c->max_seq) {
        fprintf(stderr, "tcq bench model: --prompt + --gen exceed the model's context %d\n", c->max_seq);
        tcq_model_free(m);
        return 2;
    }
    int32_t *toks = malloc((size_t)ctx * sizeof *toks);
    float *lg = malloc((size_t)TCQ_MAX_BATCH * V * sizeof *lg);
    double *dt = malloc((size_t)gen * sizeof *dt);
    uint64_t st = 42;
    for (int i = 0; i < ctx; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((st >> 33) % (uint64_t)V);
    }
    tcq_session *s[TCQ_MAX_BATCH] = {0};
    tcq_status rc = TCQ_OK;
    int nb = batch > 1 ? (int)batch : 1;
    for (int b = 0; b < nb && rc == TCQ_OK; b++) rc = tcq_session_create(m, ctx, kv, &s[b]);
    /* Warm-up: the first prefill of a process also pays its buffers' first touch (and, with
     * OpenBLAS's pthread build, the ~0.1 s its idle threads spin after the library loads), which
     * made single prefill timings vary 1.7x between runs; time the second. */
    if (rc == TCQ_OK) rc = tcq_model_prefill(m, s[0], toks, (int)prompt, lg);
    if (rc == TCQ_OK) rc = tcq_session_rewind(s[0], 0);
    double t0 = cli_now(), tp = 0, dmed = 0, bmed = 0;
    if (rc == TCQ_OK) rc = tcq_model_prefill(m, s[0], toks, (int)prompt, lg);
    tp = cli_now() - t0;
    for (int i = 0; rc == TCQ_OK && i < gen; i++) {
        double t1 = cli_now();
        rc = tcq_model_forward(m, s[0], &toks[prompt + i], 1, lg);
        dt[i] = cli_now() - t1;
    }
    if (rc == TCQ_OK) {
        qsort(dt, (size_t)gen, sizeof *dt, cmp_d);
        dmed = dt[gen / 2];
    }
    if (rc == TCQ_OK && nb > 1) {
        for (int b = 1; b < nb && rc == TCQ_OK; b++) rc = tcq_model_prefill(m, s[b], toks + b, 8, NULL);
        if (rc == TCQ_OK) rc = tcq_session_rewind(s[0], 8);
        for (int i = 0; rc == TCQ_OK && i < gen; i++) {
            double t1 = cli_now();
            rc = tcq_model_forward_batch(m, s, toks + i, nb, lg);
            dt[i] = cli_now() - t1;
        }
        if (rc == TCQ_OK) {
            qsort(dt, (size_t)gen, sizeof *dt, cmp_d);
            bmed = dt[gen / 2];
        }
    }
    int ret = 0;
    if (rc != TCQ_OK) ret = cli_fail(rc, "bench model");
    else if (json) {
        printf("{\"model\": \"%s\", \"weights\": \"%s\", \"weight_bytes\": %zu, \"threads\": %lld, \"prompt\": %lld, "
               "\"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"decode_ms\": %.3f, \"batch\": %d, "
               "\"batch_tok_s\": %.3f}\n",
               path ? path : "synthetic", tcq_model_describe(m), tcq_model_weight_bytes(m), threads, prompt,
               prompt / tp, 1 / dmed, 1e3 * dmed, nb, nb > 1 ? nb / bmed : 0.0);
    } else {
        printf("prefill: %lld tokens in %.3f s = %.2f tok/s\n", prompt, tp, prompt / tp);
        printf("decode:  %.2f tok/s (median %.2f ms/token over %lld), %.2f GB/s of weights\n", 1 / dmed, 1e3 * dmed,
               gen, tcq_model_weight_bytes(m) / dmed / 1e9);
        if (nb > 1) printf("batch %d: %.2f tok/s in all (median %.2f ms/step)\n", nb, nb / bmed, 1e3 * bmed);
    }
    for (int b = 0; b < nb; b++) tcq_session_free(s[b]);
    free(toks);
    free(lg);
    free(dt);
    tcq_model_free(m);
    return ret;
}
