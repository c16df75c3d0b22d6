/* tcq serve MODEL: the OpenAI-compatible server (serve.h). */
#include "cli_text.h"
#include "serve.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: tcq serve MODEL [options]\n"
            "  --host ADDR            address to listen on (default 127.0.0.1)\n"
            "  --port N               port (default 8080; 0: any free port, printed)\n"
            "  --parallel N           slots: requests served at once, each with its KV cache (default 4)\n"
            "  --ctx N                positions per slot (default: the model's, at most 4096)\n"
            "  --kv f32|f16           KV cache dtype (default f32)\n"
            "  --threads N            worker threads (default: all CPUs)\n"
            "  --kpath auto|exact|fast  numerical path (default auto; exact: f32 activations everywhere)\n"
            "  --api-key KEY          require 'Authorization: Bearer KEY' on /v1/* and /metrics\n"
            "  --alias NAME           model id in responses and /v1/models (default: the model path's last part)\n"
            "  --tokenizer PATH       tokenizer.json / directory (default: the model directory's)\n"
            "  --max-batch N          rows per batched decode call, 1..%d (default 32)\n"
            "  --prefill-chunk N      prompt tokens prefilled between decode steps (default %d)\n"
            "  --prefill-batch N      slots whose prompts one prefill call takes, 1..--max-batch (default: --max-batch;\n"
            "                         their last rows share one lm_head call)\n"
            "  --prefill-merge        those slots' prompt rows also go through the layers together: faster for\n"
            "                         short prompts, but a reply then depends (to rounding) on what else was admitted\n"
            "  --cache-ram MIB        prompt cache: a slot's content (prompt and reply) is kept in up to MIB MiB\n"
            "                         when another request takes the slot, for a later request that extends it\n"
            "                         or repeats its prompt (default 2048; 0: off)\n"
            "  --admit-wait MS        after an idle spell, wait up to MS ms for more requests before the first\n"
            "                         step, so that clients sending together prefill together (default 5)\n"
            "  --body-limit BYTES     largest request body (default 4194304)\n"
            "  --device D             cpu (default), cuda, cuda:N or auto: where the model runs\n"
            "  --synthetic LAYERS,BITS  no MODEL: a random Qwen3-14B-geometry model (as tcq bench model; vocab\n"
            "                         151936, BITS 0 = bf16 or 1..4 trellis) for benchmarks; needs --tokenizer\n"
            "  --quiet                no line per request\n"
            "  --trace                a timing line per scheduler step and per request's first token (stderr)\n"
            "  --load-after FILE      load the model only once FILE exists (tests: /health answers 503 until\n"
            "                         then; a test, not a clock, decides when loading starts)\n"
            "Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health,\n"
            "GET /metrics (Prometheus), GET / (a chat page).  Stops on SIGINT / SIGTERM.\n",
            TCQ_MAX_BATCH, TCQ_PREFILL_CHUNK);
}

int cmd_serve(int argc, char **argv)
{
    const char *model = NULL, *host = "127.0.0.1", *api_key = NULL, *alias = NULL;
    long long port = 8080, parallel = 4, max_batch = TCQ_MAX_BATCH, chunk = TCQ_PREFILL_CHUNK, body = 4 << 20,
              pbatch = 0, admit_wait = 5, cache_mib = 2048;
    const char *load_after = NULL;
    int quiet = 0, merge = 0, trace = 0, synth[2] = {0, 0};
    cli_gen_flags g = {.think = -1, .kv = TCQ_KV_F32};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long *li = NULL;
        if (!strcmp(a, "--threads") || !strcmp(a, "--ctx") || !strcmp(a, "--kv") || !strcmp(a, "--kpath") ||
            !strcmp(a, "--tokenizer")) {
            if (cli_gen_flag(&g, argc, argv, &i) != 1) {
                if (!v) fprintf(stderr, "tcq serve: %s needs a value\n", a);
                return 2;
            }
            continue;
        }
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--host") && v) host = argv[++i];
        else if (!strcmp(a, "--api-key") && v) api_key = argv[++i];
        else if (!strcmp(a, "--alias") && v) alias = argv[++i];
        else if (!strcmp(a, "--device") && v) {
            if (cli_parse_device(argv[++i])) return 2;
        }
        else if (!strcmp(a, "--load-after") && v) load_after = argv[++i];
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!strcmp(a, "--prefill-merge")) merge = 1;
        else if (!strcmp(a, "--trace")) trace = 1;
        else if (!strcmp(a, "--synthetic") && v) {
            if (cli_parse_int_list(argv[++i], synth, 2) != 2 || synth[0] < 1 || synth[1] < 0 || synth[1] > 4) {
                fprintf(stderr, "tcq serve: --synthetic needs LAYERS,BITS (BITS 0..4)\n");
                return 2;
            }
            model = "synthetic";
        }
        else if (!strcmp(a, "--port")) li = &port;
        else if (!strcmp(a, "--parallel")) li = &parallel;
        else if (!strcmp(a, "--max-batch")) li = &max_batch;
        else if (!strcmp(a, "--prefill-chunk")) li = &chunk;
        else if (!strcmp(a, "--body-limit")) li = &body;
        else if (!strcmp(a, "--prefill-batch")) li = &pbatch;
        else if (!strcmp(a, "--admit-wait")) li = &admit_wait;
        else if (!strcmp(a, "--cache-ram")) li = &cache_mib;
        else if (a[0] != '-' && !model) model = a;
        else {
            fprintf(stderr, "tcq serve: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
        if (li) {
            if (cli_parse_long(a, v, li)) return 2;
            i++;
        }
    }
    if (!model) {
        help(stderr);
        return 2;
    }
    if (port < 0 || port > 65535 || parallel < 1 || parallel > 1024 || max_batch < 1 || max_batch > TCQ_MAX_BATCH ||
        chunk < 1 || chunk > TCQ_PREFILL_CHUNK || body < 1 || pbatch < 0 || pbatch > max_batch || admit_wait < 0 ||
        admit_wait > 1000 || cache_mib < 0 || cache_mib > (1LL << 30)) {
        fprintf(stderr, "tcq serve: --port 0..65535, --parallel 1..1024, --max-batch 1..%d, --prefill-chunk 1..%d, "
                        "--prefill-batch 1..--max-batch, --body-limit >= 1, --admit-wait 0..1000, --cache-ram >= 0\n",
                TCQ_MAX_BATCH, TCQ_PREFILL_CHUNK);
        return 2;
    }
    if (!alias) {
        const char *p = model + strlen(model);
        while (p > model && p[-1] == '/') p--;
        const char *e = p;
        while (p > model && p[-1] != '/') p--;
        static char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(e - p), p);
        alias = name[0] ? name : "tcq";
    }
    /* SIGINT / SIGTERM are taken by sigwait below; every thread started from here inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    srv_config cfg = {.host = host, .port = (int)port, .api_key = api_key, .alias = alias, .body_limit = (size_t)body,
                      .verbose = !quiet};
    srv_http *h = NULL;
    int bound = 0;
    tcq_status st = srv_http_start(&cfg, &h, &bound);
    if (st != TCQ_OK) return cli_fail(st, "serve");
    /* listening before the model loads: /health says 503 until it is ready */
    printf("tcq serve: listening on http://%s:%d\n", host, bound);
    fflush(stdout);

    tcq_model *m = NULL;
    tcq_tokenizer *tok = NULL;
    srv_sched *sched = NULL;
    int rc = 0;
    if (load_after) {   /* a slow load, as a big model's: /health answers 503 until FILE exists */
        const struct timespec poll = {0, 20 * 1000000L};
        int sig = 0;
        while (access(load_after, F_OK) != 0 && (sig = sigtimedwait(&sigs, NULL, &poll)) <= 0) {}
        if (sig > 0) {   /* stopped before it loaded: nothing to serve */
            fprintf(stderr, "tcq serve: signal %d while waiting for %s, stopping\n", sig, load_after);
            srv_http_stop(h);
            return 0;
        }
    }
    if (synth[0]) {
        tcq_model_config c = {.arch = TCQ_ARCH_QWEN3, .dim = 5120, .hidden_dim = 17408, .n_layers = synth[0],
                              .n_heads = 40, .n_kv_heads = 8, .head_dim = 128, .vocab_size = 151936,
                              .max_seq = 40960, .rope_theta = 1e6, .norm_eps = 1e-6f, .bos_id = -1};
        tcq_model_opts o = {.n_threads = (int)g.threads, .path = cli_kpath, .device = cli_device,
                            .device_index = cli_device_index};
        if (!g.tokenizer) {
            fprintf(stderr, "tcq serve: --synthetic needs --tokenizer\n");
            rc = 2;
        } else if ((st = tcq_model_synthetic(&c, synth[1], 1234, &o, &m)) != TCQ_OK)
            rc = cli_fail(st, "synthetic model");
        else
            fprintf(stderr, "synthetic Qwen3-14B geometry, %d layers: %s\n", synth[0], tcq_model_describe(m));
    } else if (cli_model_load(model, (int)g.threads, &m))
        rc = 1;
    if (!rc && cli_tokenizer_load(model, g.tokenizer, m, &tok)) rc = 1;
    if (!rc && !tcq_tokenizer_chat_template(tok))
        fprintf(stderr, "tcq serve: the tokenizer has no chat template: /v1/chat/completions will answer 400\n");
    long long ctx = g.ctx;
    if (!rc && ctx <= 0) ctx = tcq_model_get_config(m)->max_seq < 4096 ? tcq_model_get_config(m)->max_seq : 4096;
    if (!rc) {
        srv_sched_opts so = {.n_slots = (int)parallel, .ctx = (int)ctx, .kv = g.kv, .max_batch = (int)max_batch,
                             .prefill_chunk = (int)chunk, .prefill_batch = (int)pbatch, .prefill_merge = merge, .admit_wait_ms = (int)admit_wait,
                             .cache_bytes = (size_t)cache_mib << 20, .trace = trace};
        st = srv_sched_create(m, tok, &so, &sched);
        if (st != TCQ_OK) rc = cli_fail(st, "serve");
    }
    if (!rc) {
        char b[32];
        fprintf(stderr, "tcq serve: model '%s' ready: %lld slots of %lld positions (KV %s in all), batch up to %lld\n",
                alias, parallel, ctx, cli_bytes(tcq_model_kv_bytes(m, (int)ctx, g.kv) * (size_t)parallel, b),
                max_batch);
        srv_http_ready(h, tok, sched, (int)ctx);
        int sig = 0;
        sigwait(&sigs, &sig);
        fprintf(stderr, "tcq serve: signal %d, stopping\n", sig);
    }
    srv_sched_stop(sched);   /* running and queued requests end with an error ... */
    srv_http_stop(h);        /* ... so that their connections finish and the daemon can stop */
    srv_sched_free(sched);
    tcq_tokenizer_free(tok);
    tcq_model_free(m);
    return rc;
}
