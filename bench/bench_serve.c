/* tcq bench serve: tcq serve's scheduler (tools/tcq/serve_sched.c, no HTTP) under C concurrent
 * clients on a synthetic Qwen3-14B-geometry model: each client sends one request of --prompt
 * random tokens and takes --gen greedy tokens (end tokens ignored).  Reports the aggregate
 * generated tokens/s of the wave (first request in to last token out, prefill included), the
 * decode rate once every stream runs, and time to first token (median and worst). */
#include "bench.h"
#include "cli_model.h"
#include "serve.h"

#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f, "usage: tcq bench serve [--bits K] [--layers N] [--vocab V] [--clients 1,4,16] [--prompt P] [--gen G]\n"
               "                       [--waves W] [--threads N] [--kpath auto|exact|fast] [--max-batch N]\n"
               "                       [--prefill-chunk N] [--prefill-batch LIST] [--prefill-merge LIST] [--trace] [--json]\n"
               "  synthetic Qwen3-14B geometry (dim 5120, ffn 17408, 40 heads / 8 kv of 128) with --layers (4)\n"
               "  random layers at --bits (2; 0 = bf16) and --vocab (151936) tied bf16 embeddings.  Defaults:\n"
               "  --prompt 64 --gen 32 --waves 1; each client count gets fresh slots; the median wave is shown.\n"
               "  --prefill-batch / --prefill-merge (tcq serve's options): one value, or one per --clients entry\n"
               "  (alternated A/B runs in one process: --clients 4,4,4,4 --prefill-batch 1,32,1,32).\n"
               "  --trace: the scheduler's timing line per step and per first token (tcq serve --trace) on stderr.\n");
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int bench_serve(int argc, char **argv)
{
    long long bits = 2, layers = 4, vocab = 151936, prompt = 64, gen = 32, waves = 1, threads = 0, max_batch = 32,
              chunk = TCQ_PREFILL_CHUNK;
    int clients[16] = {1, 4, 16}, n_clients = 3, json = 0, trace = 0, pbatch[16] = {0}, n_pbatch = 1, pmerge[16] = {0},
        n_pmerge = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long *dst = NULL;
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--trace")) trace = 1;
        else if (!strcmp(a, "--kpath")) {
            if (cli_parse_kpath(v)) return 2;
            i++;
        } else if (!strcmp(a, "--clients")) {
            if ((n_clients = cli_parse_int_list(v, clients, 16)) < 0) {
                fprintf(stderr, "tcq bench serve: --clients needs a list like 1,4,16\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--prefill-batch") || !strcmp(a, "--prefill-merge")) {
            const int pb = !strcmp(a, "--prefill-batch");
            int n = cli_parse_int_list(v, pb ? pbatch : pmerge, 16);
            if (n < 1) {
                fprintf(stderr, "tcq bench serve: %s needs a number or a list like 1,32\n", a);
                return 2;
            }
            *(pb ? &n_pbatch : &n_pmerge) = n;
            i++;
        } else if (!strcmp(a, "--bits")) dst = &bits;
        else if (!strcmp(a, "--layers")) dst = &layers;
        else if (!strcmp(a, "--vocab")) dst = &vocab;
        else if (!strcmp(a, "--prompt")) dst = &prompt;
        else if (!strcmp(a, "--gen")) dst = &gen;
        else if (!strcmp(a, "--waves")) dst = &waves;
        else if (!strcmp(a, "--threads")) dst = &threads;
        else if (!strcmp(a, "--max-batch")) dst = &max_batch;
        else if (!strcmp(a, "--prefill-chunk")) dst = &chunk;
        else {
            help(stderr);
            return 2;
        }
        if (dst) {
            if (cli_parse_long(a, v, dst)) return 2;
            i++;
        }
    }
    int ok = bits >= 0 && bits <= 4 && layers >= 1 && vocab >= 16 && prompt >= 1 && gen >= 2 && waves >= 1 &&
             max_batch >= 1 && max_batch <= TCQ_MAX_BATCH && chunk >= 1 && chunk <= TCQ_PREFILL_CHUNK;
    for (int i = 0; i < n_clients; i++) ok &= clients[i] >= 1 && clients[i] <= 256;
    ok &= (n_pbatch == 1 || n_pbatch == n_clients) && (n_pmerge == 1 || n_pmerge == n_clients);
    for (int i = 0; i < n_pbatch; i++) ok &= pbatch[i] >= 0 && pbatch[i] <= max_batch;
    for (int i = 0; i < n_pmerge; i++) ok &= pmerge[i] == 0 || pmerge[i] == 1;
    if (!ok) {
        help(stderr);
        return 2;
    }
    tcq_model_config c;
    memset(&c, 0, sizeof c);
    c = (tcq_model_config){.arch = TCQ_ARCH_QWEN3, .dim = 5120, .hidden_dim = 17408, .n_layers = (int)layers,
                           .n_heads = 40, .n_kv_heads = 8, .head_dim = 128, .vocab_size = (int)vocab, .max_seq = 40960,
                           .rope_theta = 1e6, .norm_eps = 1e-6f, .bos_id = -1};
    tcq_model_opts o = {.n_threads = (int)threads, .path = cli_kpath};
    tcq_model *m = NULL;
    double t0 = cli_now();
    tcq_status st = tcq_model_synthetic(&c, (int)bits, 1234, &o, &m);
    if (st != TCQ_OK) return cli_fail(st, "synthetic model");
    char b[32];
    fprintf(stderr, "synthetic Qwen3-14B geometry, %lld layers: %s, weights %s (built in %.1f s)\n", layers,
            tcq_model_describe(m), cli_bytes(tcq_model_weight_bytes(m), b), cli_now() - t0);
    const int ctx = (int)(prompt + gen + 8);
    uint64_t rs = 42;
    int rc = 0;
    for (int ci = 0; ci < n_clients && !rc; ci++) {
        const int C = clients[ci];
        srv_sched_opts so = {.n_slots = C, .ctx = ctx, .kv = TCQ_KV_F32, .max_batch = (int)max_batch,
                             .prefill_chunk = (int)chunk, .prefill_batch = pbatch[n_pbatch > 1 ? ci : 0],
                             .prefill_merge = pmerge[n_pmerge > 1 ? ci : 0], .admit_wait_ms = 5, .trace = trace};
        srv_sched *s = NULL;
        if ((st = srv_sched_create(m, NULL, &so, &s)) != TCQ_OK) {
            rc = cli_fail(st, "bench serve");
            break;
        }
        double *agg = calloc((size_t)waves, sizeof *agg), *dec = calloc((size_t)waves, sizeof *dec);
        double *ttft = calloc((size_t)(waves * C), sizeof *ttft);
        srv_job **jobs = calloc((size_t)C, sizeof *jobs);
        int32_t *p = malloc((size_t)prompt * sizeof *p);
        for (int w = -1; w < waves && !rc; w++) {   /* wave -1: warm-up (first touch of the caches) */
            const int n = w < 0 ? 1 : C;
            for (int k = 0; k < n; k++) {
                for (int i = 0; i < prompt; i++) {
                    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
                    p[i] = (int32_t)((rs >> 33) % (uint64_t)vocab);
                }
                jobs[k] = srv_job_create(p, (int)prompt);
                jobs[k]->max_tokens = w < 0 ? 2 : (int)gen;
                jobs[k]->ignore_eos = 1;
                jobs[k]->sp = tcq_sampler_defaults();
                jobs[k]->sp.temperature = 0;
            }
            for (int k = 0; k < n; k++) srv_sched_submit(s, jobs[k]);
            double first_in = 1e300, last_out = 0, last_first = 0;
            for (int k = 0; k < n; k++) {
                srv_job *j = jobs[k];
                pthread_mutex_lock(&j->mu);
                while (!j->done) pthread_cond_wait(&j->cv, &j->mu);
                if (j->error[0]) {
                    fprintf(stderr, "tcq bench serve: %s\n", j->error);
                    rc = 1;
                }
                first_in = j->t_submit < first_in ? j->t_submit : first_in;
                last_out = j->t_done > last_out ? j->t_done : last_out;
                last_first = j->t_first > last_first ? j->t_first : last_first;
                if (w >= 0) ttft[w * C + k] = j->t_first - j->t_submit;
                pthread_mutex_unlock(&j->mu);
                srv_job_unref(j);
            }
            if (w >= 0) {
                agg[w] = (double)C * gen / (last_out - first_in);
                dec[w] = last_out > last_first ? (double)C * (gen - 1) / (last_out - last_first) : 0;
            }
        }
        qsort(agg, (size_t)waves, sizeof *agg, cmp_d);
        qsort(dec, (size_t)waves, sizeof *dec, cmp_d);
        qsort(ttft, (size_t)(waves * C), sizeof *ttft, cmp_d);
        if (!rc) {
            const double a = agg[waves / 2], d = dec[waves / 2], tm = ttft[waves * C / 2], tx = ttft[waves * C - 1];
            if (json)
                printf("{\"clients\": %d, \"bits\": %lld, \"layers\": %lld, \"vocab\": %lld, \"prompt\": %lld, \"gen\": %lld, "
                       "\"prefill_batch\": %d, \"prefill_merge\": %d, "
                       "\"aggregate_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"ttft_median_s\": %.3f, \"ttft_max_s\": %.3f}\n",
                       C, bits, layers, vocab, prompt, gen, so.prefill_batch ? so.prefill_batch : so.max_batch,
                       so.prefill_merge, a, d, tm, tx);
            else
                printf("%3d clients%s: %7.2f tok/s aggregate, %7.2f tok/s decoding, TTFT median %.3f s, max %.3f s\n", C,
                       so.prefill_merge ? " (merged prefill)" : so.prefill_batch == 1 ? " (prefill 1 by 1)" : "", a, d, tm, tx);
            fflush(stdout);
        }
        free(p);
        free(jobs);
        free(agg);
        free(dec);
        free(ttft);
        srv_sched_free(s);
    }
    tcq_model_free(m);
    return rc;
}
