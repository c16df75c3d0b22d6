/* tcq run MODEL -p PROMPT: generate and stream text. */
#include "cli_text.h"

#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: tcq run MODEL [-p PROMPT] [-n N] [options]\n"
            "  -p, --prompt STR       prompt text (default empty: generation starts from BOS)\n"
            "  -n, --max-tokens N     tokens to generate (default 256)\n"
            "  --temp T               temperature (default 0.8; 0 = greedy)\n"
            "  --top-k K --top-p P --min-p P   filters (defaults 40, 0.95, 0.05; 0 / 1 / 0 turn off)\n"
            "  --repeat-penalty R     (default 1 = off) over the last 64 tokens\n"
            "  --seed S               sampler seed (default 0)\n"
            "  --stop STR             stop string (repeatable)\n"
            "  --ctx N                context length (default: the model's, at most 4096)\n"
            "  --kv f32|f16           KV cache dtype (default f32)\n"
            "  --threads N            worker threads (default: all CPUs)\n"
            "  --kpath auto|exact|fast  numerical path (default auto; exact: f32 activations everywhere)\n"
            "  --device cpu|cuda|cuda:N|auto  where the model runs (default cpu; auto: the GPU if present)\n"
            "  --parallel N           N (2..4) samples with seeds S..S+N-1, decoded together as one batch;\n"
            "                         printed one after another at the end\n"
            "  --chat                 wrap the prompt in the model's chat template (one user turn)\n"
            "  --no-think             pass enable_thinking=false to the chat template\n"
            "  --tokenizer PATH       tokenizer.json / directory / llama2.c tokenizer.bin\n"
            "Prints prefill and decode tokens/s to stderr at the end.\n");
}

static tcq_sampler_params sp_of(double temp, long long top_k, double top_p, double min_p, double rep, long long seed)
{
    tcq_sampler_params p = {(float)temp, (int)top_k, (float)top_p, (float)min_p, (float)rep, 64, (uint64_t)seed};
    return p;
}

static int par_token(void *arg, int seq, int32_t t) { return cli_stream_token((cli_stream *)arg + seq, t); }

/* --parallel: nb samples of one prompt through tcq_generate_batch. */
static int run_parallel(tcq_model *m, const tcq_tokenizer *tok, const int32_t *ids, int n_ids, int nb, int n, int ctx,
                        tcq_kv_dtype kv, tcq_sampler_params sp, const char *const *stops, int n_stops, const char *echo)
{
    tcq_session *s[TCQ_MAX_BATCH] = {0};
    tcq_sampler *smp[TCQ_MAX_BATCH] = {0};
    cli_stream out[TCQ_MAX_BATCH];
    const int32_t *prompts[TCQ_MAX_BATCH];
    int np[TCQ_MAX_BATCH];
    tcq_gen_stats gs[TCQ_MAX_BATCH];
    memset(out, 0, sizeof out);
    memset(gs, 0, sizeof gs);
    tcq_status st = TCQ_OK;
    for (int b = 0; b < nb && st == TCQ_OK; b++) {
        tcq_sampler_params p = sp;
        p.seed = sp.seed + (uint64_t)b;
        prompts[b] = ids;
        np[b] = n_ids;
        st = tcq_session_create(m, ctx, kv, &s[b]);
        if (st == TCQ_OK) st = tcq_sampler_create(&p, tcq_model_get_config(m)->vocab_size, &smp[b]);
        if (st == TCQ_OK) st = cli_stream_init(&out[b], tok, stops, n_stops, NULL);
        for (int i = 0; st == TCQ_OK && i < n_ids; i++) {
            const char *t;
            size_t tn;
            st = tcq_detok_push(out[b].detok, ids[i], &t, &tn);
        }
    }
    if (st == TCQ_OK) st = tcq_generate_batch(m, s, smp, prompts, np, nb, n, par_token, out, gs);
    int total = 0;
    for (int b = 0; b < nb; b++) {
        if (out[b].detok) cli_stream_finish(&out[b]);
        printf("--- sample %d (seed %llu) ---\n%s%s\n", b, (unsigned long long)(sp.seed + (uint64_t)b), echo ? echo : "",
               out[b].text ? out[b].text : "");
        total += gs[b].n_generated;
    }
    int rc = st != TCQ_OK ? cli_fail(st, "run") : 0;
    if (st == TCQ_OK)   /* no statistics for work that was not done */
        fprintf(stderr, "prefill: %d x %d tokens, %.2f tok/s; decode: %d tokens in all, %.2f tok/s (batch of %d)\n",
                nb, n_ids, gs[0].prefill_s > 0 ? nb * n_ids / gs[0].prefill_s : 0.0, total,
                gs[0].decode_s > 0 ? total / gs[0].decode_s : 0.0, nb);
    for (int b = 0; b < nb; b++) {
        cli_stream_free(&out[b]);
        tcq_sampler_free(smp[b]);
        tcq_session_free(s[b]);
    }
    return rc;
}

int cmd_run(int argc, char **argv)
{
    const char *model = NULL, *prompt = "";
    const char *stops[16];
    int n_stops = 0, chat = 0;
    long long parallel = 1;
    cli_gen_flags g = {.think = -1, .n = 256, .top_k = 40, .temp = 0.8, .top_p = 0.95, .min_p = 0.05,
                       .rep = 1.0, .kv = TCQ_KV_F32};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int shared = cli_gen_flag(&g, argc, argv, &i);
        if (shared < 0) return 2;
        if (shared) continue;
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && v) prompt = argv[++i];
        else if (!strcmp(a, "--stop") && v) {
            if (n_stops < 16) stops[n_stops++] = v;
            i++;
        } else if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "--parallel")) {
            if (cli_parse_long(a, v, &parallel)) return 2;
            i++;
        } else if (a[0] != '-' && !model) model = a;
        else {
            fprintf(stderr, "tcq run: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
    }
    const char *tokp = g.tokenizer;
    const int think = g.think;
    long long n = g.n, threads = g.threads, ctx = g.ctx, seed = g.seed, top_k = g.top_k;
    const double temp = g.temp, top_p = g.top_p, min_p = g.min_p, rep = g.rep;
    const tcq_kv_dtype kv = g.kv;
    if (!model || n < 0 || parallel < 1 || parallel > TCQ_MAX_BATCH) {
        help(stderr);
        return 2;
    }
    tcq_model *m = NULL;
    tcq_tokenizer *tok = NULL;
    if (cli_model_load(model, (int)threads, &m)) return 1;
    if (ctx <= 0) ctx = tcq_model_get_config(m)->max_seq < 4096 ? tcq_model_get_config(m)->max_seq : 4096;
    if (cli_tokenizer_load(model, tokp, m, &tok)) {
        tcq_model_free(m);
        return 1;
    }
    const tcq_model_config *c = tcq_model_get_config(m);
    int rc = 0;
    char *rendered = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    tcq_status st = TCQ_OK;
    const char *text = prompt;
    unsigned flags = TCQ_TOK_ADD_SPECIAL;
    if (chat) {
        tcq_chat_message msg = {.role = "user", .content = prompt};
        tcq_chat_opts co = {.add_generation_prompt = 1, .enable_thinking = think};
        st = tcq_tokenizer_apply_chat(tok, &msg, 1, &co, &rendered);
        text = rendered;
        flags = 0;   /* the template writes its own special tokens */
    }
    if (st == TCQ_OK) st = tcq_tokenizer_encode_alloc(tok, text, strlen(text), flags, &ids, &n_ids);
    if (st == TCQ_OK && n_ids == 0) {
        int32_t bos = tcq_tokenizer_bos(tok) >= 0 ? tcq_tokenizer_bos(tok) : c->bos_id;
        if (bos < 0) st = tcq_fail(TCQ_ERR_INVALID_ARG, "empty prompt and the model has no BOS token");
        else {
            free(ids);
            ids = malloc(sizeof *ids);
            ids[0] = bos;
            n_ids = 1;
        }
    }
    if (st == TCQ_OK && parallel > 1) {
        rc = run_parallel(m, tok, ids, (int)n_ids, (int)parallel, (int)n, (int)ctx, kv, sp_of(temp, top_k, top_p, min_p, rep, seed),
                          stops, n_stops, chat ? NULL : prompt);
        free(ids);
        free(rendered);
        tcq_tokenizer_free(tok);
        tcq_model_free(m);
        return rc;
    }
    tcq_session *s = NULL;
    tcq_sampler *smp = NULL;
    cli_stream out;
    memset(&out, 0, sizeof out);
    tcq_sampler_params sp = {(float)temp, (int)top_k, (float)top_p, (float)min_p, (float)rep, 64, (uint64_t)seed};
    if (st == TCQ_OK) st = tcq_session_create(m, (int)ctx, kv, &s);
    if (st == TCQ_OK && n_ids > (size_t)tcq_session_ctx(s))   /* before the prompt is echoed */
        st = tcq_fail(TCQ_ERR_RANGE, "the prompt (%zu tokens) does not fit the context of %d positions (--ctx)", n_ids,
                      tcq_session_ctx(s));
    if (st == TCQ_OK) {
        char b[32];
        fprintf(stderr, "KV cache: %s (%d positions, %s)\n", cli_bytes(tcq_session_kv_bytes(s), b), tcq_session_ctx(s),
                kv == TCQ_KV_F16 || strncmp(tcq_model_device(m), "cuda", 4) == 0 ? "f16" : "f32");
    }
    if (st == TCQ_OK) st = tcq_sampler_create(&sp, c->vocab_size, &smp);
    if (st == TCQ_OK) st = cli_stream_init(&out, tok, stops, n_stops, stdout);
    tcq_gen_stats gs;
    memset(&gs, 0, sizeof gs);
    /* The prompt goes through the detokenizer first, so its stream state (Llama's leading-space
     * strip, partial UTF-8) is that of the whole sequence; a plain prompt is echoed from it. */
    for (size_t i = 0; st == TCQ_OK && i < n_ids; i++) {
        const char *t;
        size_t tn;
        st = tcq_detok_push(out.detok, ids[i], &t, &tn);
        if (st == TCQ_OK && !chat) fwrite(t, 1, tn, stdout);
    }
    fflush(stdout);
    if (st == TCQ_OK) st = tcq_generate(m, s, smp, ids, (int)n_ids, (int)n, cli_stream_token, &out, &gs);
    if (out.detok) cli_stream_finish(&out);
    printf("\n");
    fflush(stdout);   /* before the stderr statistics, so a shared terminal shows them on their own line */
    if (st != TCQ_OK) rc = cli_fail(st, "run");
    else   /* no statistics for work that was not done (a failed prefill left gs half filled) */
        fprintf(stderr, "prefill: %d tokens, %.2f tok/s; decode: %d tokens, %.2f tok/s\n", gs.n_prompt,
                gs.prefill_s > 0 ? gs.n_prompt / gs.prefill_s : 0.0, gs.n_generated,
                gs.decode_s > 0 ? gs.n_generated / gs.decode_s : 0.0);
    cli_stream_free(&out);
    tcq_sampler_free(smp);
    tcq_session_free(s);
    free(ids);
    free(rendered);
    tcq_tokenizer_free(tok);
    tcq_model_free(m);
    return rc;
}
