/* tcq chat MODEL: interactive chat through the model's chat template (libedit line editing).
 * Each turn re-renders the whole conversation and reuses the KV cache for the common prefix. */
#include "cli_text.h"

#include <editline/readline.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f, "usage: tcq chat MODEL [--system STR] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
               "                [--repeat-penalty R] [--seed S] [-n N] [--ctx N] [--kv f32|f16] [--threads N]\n"
               "                [--kpath auto|exact|fast] [--device cpu|cuda|cuda:N|auto] [--no-think] [--tokenizer PATH]\n"
               "  Type a message and Enter; /reset starts over, /quit or Ctrl-D ends.\n"
               "  Prints prefill and decode tokens/s of each turn to stderr.\n");
}

enum { MAX_MSG = 512 };

/* Streams a token and records it, so the next turn knows what the KV cache holds. */
typedef struct chat_cb {
    cli_stream *out;
    int32_t *cached;
    int n, cap;
} chat_cb;

static int on_token(void *arg, int32_t t)
{
    chat_cb *c = arg;
    if (c->n < c->cap) c->cached[c->n++] = t;
    return cli_stream_token(c->out, t);
}

int cmd_chat(int argc, char **argv)
{
    const char *model = NULL, *system = NULL;
    cli_gen_flags g = {.think = -1, .n = 1024, .ctx = 4096, .top_k = 40, .temp = 0.7, .top_p = 0.95,
                       .min_p = 0.05, .rep = 1.0, .kv = TCQ_KV_F32};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int shared = cli_gen_flag(&g, argc, argv, &i);
        if (shared < 0) return 2;
        if (shared) continue;
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--system") && v) system = argv[++i];
        else if (a[0] != '-' && !model) model = a;
        else {
            fprintf(stderr, "tcq chat: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
    }
    const char *tokp = g.tokenizer;
    const int think = g.think;
    long long n = g.n, threads = g.threads, ctx = g.ctx, seed = g.seed, top_k = g.top_k;
    const double temp = g.temp, top_p = g.top_p, min_p = g.min_p, rep = g.rep;
    const tcq_kv_dtype kv = g.kv;
    if (!model) {
        help(stderr);
        return 2;
    }
    tcq_model *m = NULL;
    tcq_tokenizer *tok = NULL;
    if (cli_model_load(model, (int)threads, &m)) return 1;
    if (cli_tokenizer_load(model, tokp, m, &tok)) {
        tcq_model_free(m);
        return 1;
    }
    const char *tpl = tcq_tokenizer_chat_template(tok);
    int rc = 0;
    tcq_session *s = NULL;
    tcq_sampler *smp = NULL;
    tcq_sampler_params sp = {(float)temp, (int)top_k, (float)top_p, (float)min_p, (float)rep, 64, (uint64_t)seed};
    tcq_status st = tpl ? TCQ_OK : tcq_fail(TCQ_ERR_NOT_FOUND, "%s: no chat template", model);
    if (st == TCQ_OK) st = tcq_session_create(m, (int)ctx, kv, &s);
    if (st == TCQ_OK) {
        char b[32];
        fprintf(stderr, "KV cache: %s (%d positions, %s)\n", cli_bytes(tcq_session_kv_bytes(s), b), tcq_session_ctx(s),
                kv == TCQ_KV_F16 || strncmp(tcq_model_device(m), "cuda", 4) == 0 ? "f16" : "f32");
    }
    if (st == TCQ_OK) st = tcq_sampler_create(&sp, tcq_model_get_config(m)->vocab_size, &smp);
    if (st != TCQ_OK) {
        rc = cli_fail(st, "chat");
        goto done;
    }
    tcq_chat_message msgs[MAX_MSG];
    int nm = 0;
    if (system) msgs[nm++] = (tcq_chat_message){.role = "system", .content = strdup(system)};
    int32_t *cached = malloc((size_t)tcq_session_ctx(s) * sizeof *cached);   /* tokens in the KV cache */
    int n_cached = 0;
    char *line;
    while ((line = readline("> ")) != NULL) {
        if (!*line) {
            free(line);
            continue;
        }
        add_history(line);
        if (!strcmp(line, "/quit")) {
            free(line);
            break;
        }
        if (!strcmp(line, "/reset") || nm + 2 > MAX_MSG) {
            for (int i = system ? 1 : 0; i < nm; i++) free((char *)msgs[i].content);
            nm = system ? 1 : 0;
            fprintf(stderr, "(conversation reset)\n");
            if (!strcmp(line, "/reset")) {
                free(line);
                continue;
            }
        }
        msgs[nm++] = (tcq_chat_message){.role = "user", .content = line};
        char *text = NULL;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        tcq_chat_opts co = {.add_generation_prompt = 1, .enable_thinking = think};
        st = tcq_tokenizer_apply_chat(tok, msgs, (size_t)nm, &co, &text);
        if (st == TCQ_OK) st = tcq_tokenizer_encode_alloc(tok, text, strlen(text), 0, &ids, &n_ids);
        free(text);
        if (st == TCQ_OK && (int)n_ids >= tcq_session_ctx(s))
            st = tcq_fail(TCQ_ERR_RANGE, "the conversation (%zu tokens) fills the context of %d; /reset", n_ids,
                          tcq_session_ctx(s));
        if (st != TCQ_OK) {
            rc = cli_fail(st, "chat");   /* the session goes on; the exit status tells a turn failed */
            free((char *)msgs[--nm].content);
            free(ids);
            continue;
        }
        int common = 0;
        while (common < n_cached && common < (int)n_ids - 1 && cached[common] == ids[common]) common++;
        tcq_session_rewind(s, common);
        cli_stream out;
        tcq_gen_stats gs;
        memset(&gs, 0, sizeof gs);
        st = cli_stream_init(&out, tok, NULL, 0, stdout);
        memcpy(cached, ids, n_ids * sizeof *ids);
        chat_cb cc = {&out, cached, (int)n_ids, tcq_session_ctx(s)};
        if (st == TCQ_OK) st = tcq_generate(m, s, smp, ids + common, (int)n_ids - common, (int)n, on_token, &cc, &gs);
        cli_stream_finish(&out);
        printf("\n");
        if (st != TCQ_OK) rc = cli_fail(st, "chat");
        else   /* no statistics for a turn that failed */
            fprintf(stderr, "[prefill %d tokens %.1f tok/s (%d reused); decode %d tokens %.1f tok/s]\n", gs.n_prompt,
                    gs.prefill_s > 0 ? gs.n_prompt / gs.prefill_s : 0.0, common, gs.n_generated,
                    gs.decode_s > 0 ? gs.n_generated / gs.decode_s : 0.0);
        /* The cache now holds the first pos tokens of prompt + generated. */
        n_cached = cc.n < tcq_session_pos(s) ? cc.n : tcq_session_pos(s);
        msgs[nm++] = (tcq_chat_message){.role = "assistant", .content = strdup(out.text ? out.text : "")};
        cli_stream_free(&out);
        free(ids);
    }
    for (int i = 0; i < nm; i++) free((char *)msgs[i].content);
    free(cached);
done:
    tcq_sampler_free(smp);
    tcq_session_free(s);
    tcq_tokenizer_free(tok);
    tcq_model_free(m);
    return rc;
}
