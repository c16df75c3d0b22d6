/* tcq bench model [MODEL]: prefill and decode speed of a model directory / checkpoint, or of a
 * built-in synthetic model with Qwen3-14B's geometry (few layers, random weights). */
#include "bench.h"
#include "cli_model.h"
#include "kernels/cuda/timers.h"

#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f, "usage: tcq bench model [MODEL] [--prompt N] [--gen N] [--batch B] [--threads N] [--kv f32|f16]\n"
               "                        [--bits K] [--layers N] [--vocab V] [--kpath auto|exact|fast] [--device cpu|cuda|cuda:N|auto] [--json]\n"
               "  MODEL: a model directory or llama2.c .bin; without it a synthetic Qwen3-14B-geometry model\n"
               "  (dim 5120, ffn 17408, 40 heads / 8 kv of 128, vocab 151936) with --layers (2) random layers,\n"
               "  --bits 0 (bf16, default; also --bf16), 16 (f16, also --f16) or 1..4 (trellis L=12 T=256,\n"
               "  random codes).\n"
               "  Prefill: --prompt (128; a list such as 512,4096) tokens in chunks of %d rows, then --gen (32)\n"
               "  tokens decoded one at a time after it (median per-token time); with --batch B (a list, 2..32)\n"
               "  B sequences decoded together.  On a GPU (--device cuda) the decode is also given as a\n"
               "  fraction of the floor: weight bytes per token over the device's copy bandwidth.\n",
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
    int prompts[8] = {128}, batches[8] = {0};
    long long gen = 32, threads = 0, bits = 0, layers = 2, vocab = 151936;
    int n_prompt = 1, n_batch = 1;
    int json = 0;
    tcq_kv_dtype kv = TCQ_KV_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long *dst = NULL;
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        }
        if (strcmp(a, "--prompt") == 0 || strcmp(a, "--batch") == 0) {
            int p = a[2] == 'p';
            int *list = p ? prompts : batches;
            int n = cli_parse_int_list(v, list, 8);
            for (int k = 0; k < n; k++) n = list[k] < (p ? 1 : 0) ? -1 : n;
            if (n < 0) {
                fprintf(stderr, "tcq bench model: %s needs a comma-separated list of up to 8 numbers, got '%s'\n", a,
                        v ? v : "");
                return 2;
            }
            *(p ? &n_prompt : &n_batch) = n;
            i++;
            continue;
        }
        if (strcmp(a, "--gen") == 0) dst = &gen;
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
        } else if (!strcmp(a, "--device")) {
            if (cli_parse_device(v)) return 2;
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
    long long max_prompt = 0;
    int bad = gen < 1 || bits < 0 || (bits > 4 && bits != 16) || layers < 1 || vocab < 1;
    for (int i = 0; i < n_prompt; i++) max_prompt = prompts[i] > max_prompt ? prompts[i] : max_prompt;
    for (int i = 0; i < n_batch; i++) bad |= batches[i] > TCQ_MAX_BATCH;
    if (bad) {
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
        tcq_model_opts o = {.n_threads = (int)threads, .path = cli_kpath, .device = cli_device,
                            .device_index = cli_device_index};
        double t0 = cli_now();
        tcq_status s = tcq_model_synthetic(&c, (int)bits, 1234, &o, &m);
        if (s != TCQ_OK) return cli_fail(s, "synthetic model");
        char b[32];
        fprintf(stderr, "synthetic Qwen3-14B geometry, %lld layers: %s, weights %s (built in %.1f s); device %s\n",
                layers, tcq_model_describe(m), cli_bytes(tcq_model_weight_bytes(m), b), cli_now() - t0,
                tcq_model_device(m));
    }
    const tcq_model_config *c = tcq_model_get_config(m);
    const int V = c->vocab_size;
    int ctx = (int)(max_prompt + gen + 1);
    if (ctx > c->max_seq) {
        fprintf(stderr, "tcq bench model: --prompt + --gen exceed the model's context %d\n", c->max_seq);
        tcq_model_free(m);
        return 2;
    }
    /* the floor: weight bytes read per token over the device's measured read bandwidth (a
     * device-to-device copy, bytes read + written) */
    double bw = 0;
    const int on_gpu = strncmp(tcq_model_device(m), "cuda", 4) == 0;
    if (on_gpu) {
        tcq_cuda_ctx *cc = NULL;
        if (tcq_cuda_ctx_create(cli_device_index, &cc) == TCQ_OK) {
            if (tcq_cuda_time_copy(cc, (size_t)1 << 30, 10, 5, &bw) != TCQ_OK) bw = 0;
            bw *= 1e9;   /* bytes/s */
            tcq_cuda_ctx_free(cc);
        }
    }
    const double wbytes = (double)tcq_model_weight_bytes(m);
    int32_t *toks = malloc((size_t)ctx * sizeof *toks);
    float *lg = malloc((size_t)TCQ_MAX_BATCH * V * sizeof *lg);
    double *dt = malloc((size_t)gen * sizeof *dt);
    uint64_t st = 42;
    for (int i = 0; i < ctx; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((st >> 33) % (uint64_t)V);
    }
    int nb_max = 1;
    for (int i = 0; i < n_batch; i++) nb_max = batches[i] > nb_max ? (int)batches[i] : nb_max;
    tcq_session *s[TCQ_MAX_BATCH] = {0};
    tcq_status rc = TCQ_OK;
    for (int b = 0; b < nb_max && rc == TCQ_OK; b++) rc = tcq_session_create(m, b ? 8 + (int)gen + 1 : ctx, kv, &s[b]);
    char b1[32];
    if (!json)
        printf("%s on %s: weights %s/token%s\n", path ? path : "synthetic", tcq_model_device(m), cli_bytes((size_t)wbytes, b1),
               bw > 0 ? "" : " (no bandwidth floor: CPU)");
    if (bw > 0 && !json) printf("device copy bandwidth %.1f GB/s; decode floor %.2f tok/s\n", bw / 1e9, bw / wbytes);
    for (int pi = 0; pi < n_prompt && rc == TCQ_OK; pi++) {
        const int prompt = (int)prompts[pi];
        /* Warm-up: the first prefill of a process also pays its buffers' first touch (and, with
         * OpenBLAS's pthread build, the ~0.1 s its idle threads spin after the library loads), which
         * made single prefill timings vary 1.7x between runs; time the second. */
        rc = tcq_session_rewind(s[0], 0);
        if (rc == TCQ_OK) rc = tcq_model_prefill(m, s[0], toks, prompt, lg);
        if (rc == TCQ_OK) rc = tcq_session_rewind(s[0], 0);
        double t0 = cli_now(), tp = 0, dmed = 0;
        if (rc == TCQ_OK) rc = tcq_model_prefill(m, s[0], toks, prompt, lg);
        tp = cli_now() - t0;
        for (int i = 0; rc == TCQ_OK && i < gen; i++) {
            double t1 = cli_now();
            rc = tcq_model_forward(m, s[0], &toks[prompt + i], 1, lg);
            dt[i] = cli_now() - t1;
        }
        if (rc != TCQ_OK) break;
        qsort(dt, (size_t)gen, sizeof *dt, cmp_d);
        dmed = dt[gen / 2];
        const double floor_frac = bw > 0 ? (wbytes / dmed) / bw : 0;
        if (json)
            printf("{\"model\": \"%s\", \"device\": \"%s\", \"weights\": \"%s\", \"weight_bytes\": %.0f, \"threads\": %lld, "
                   "\"prompt\": %d, \"prefill_tok_s\": %.3f, \"decode_ctx\": %d, \"decode_tok_s\": %.3f, "
                   "\"decode_ms\": %.4f, \"read_gbps\": %.1f, \"copy_gbps\": %.1f, \"floor_frac\": %.4f}\n",
                   path ? path : "synthetic", tcq_model_device(m), tcq_model_describe(m), wbytes, threads, prompt,
                   prompt / tp, prompt, 1 / dmed, 1e3 * dmed, wbytes / dmed / 1e9, bw / 1e9, floor_frac);
        else {
            printf("prefill %5d: %.3f s = %.2f tok/s\n", prompt, tp, prompt / tp);
            printf("decode at context %d: %.2f tok/s (median %.3f ms/token over %lld), %.1f GB/s of weights", prompt,
                   1 / dmed, 1e3 * dmed, gen, wbytes / dmed / 1e9);
            if (bw > 0) printf(" = %.1f %% of the floor", 100 * floor_frac);
            printf("\n");
        }
    }
    for (int bi = 0; bi < n_batch && rc == TCQ_OK; bi++) {
        const int nb = (int)batches[bi];
        if (nb < 2) continue;
        for (int b = 0; b < nb && rc == TCQ_OK; b++) {
            rc = tcq_session_rewind(s[b], 0);
            if (rc == TCQ_OK) rc = tcq_model_prefill(m, s[b], toks + b, 8, NULL);
        }
        for (int i = 0; rc == TCQ_OK && i < gen; i++) {
            double t1 = cli_now();
            rc = tcq_model_forward_batch(m, s, toks + i, nb, lg);
            dt[i] = cli_now() - t1;
        }
        if (rc != TCQ_OK) break;
        qsort(dt, (size_t)gen, sizeof *dt, cmp_d);
        const double bmed = dt[gen / 2];
        if (json)
            printf("{\"model\": \"%s\", \"device\": \"%s\", \"weights\": \"%s\", \"batch\": %d, \"batch_tok_s\": %.3f, "
                   "\"step_ms\": %.4f}\n",
                   path ? path : "synthetic", tcq_model_device(m), tcq_model_describe(m), nb, nb / bmed, 1e3 * bmed);
        else
            printf("batch %d: %.2f tok/s in all (median %.3f ms/step)\n", nb, nb / bmed, 1e3 * bmed);
    }
    int ret = 0;
    if (rc != TCQ_OK) ret = cli_fail(rc, "bench model");
    for (int b = 0; b < nb_max; b++) tcq_session_free(s[b]);
    free(toks);
    free(lg);
    free(dt);
    tcq_model_free(m);
    return ret;
}
