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
            "  --ctx N                context length (default: the model's)\n"
            "  --kv f32|f16           KV cache dtype (default f32)\n"
            "  --threads N            worker threads (default: all CPUs)\n"
            "  --chat                 wrap the prompt in the model's chat template (one user turn)\n"
            "  --no-think             pass enable_thinking=false to the chat template\n"
            "  --tokenizer PATH       tokenizer.json / directory / llama2.c tokenizer.bin\n"
            "Prints prefill and decode tokens/s to stderr at the end.\n");
}

int cmd_run(int argc, char **argv)
{
    const char *model = NULL, *prompt = "", *tokp = NULL;
    const char *stops[16];
    int n_stops = 0, chat = 0, think = -1;
    long long n = 256, threads = 0, ctx = 0, seed = 0, top_k = 40;
    double temp = 0.8, top_p = 0.95, min_p = 0.05, rep = 1.0;
    tcq_kv_dtype kv = TCQ_KV_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long *li = NULL;
        double *ld = NULL;
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && v) prompt = argv[++i];
        else if (!strcmp(a, "--tokenizer") && v) tokp = argv[++i];
        else if (!strcmp(a, "--stop") && v) {
            if (n_stops < 16) stops[n_stops++] = v;
            i++;
        } else if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "--no-think")) think = 0;
        else if (!strcmp(a, "--kv")) {
            if (cli_parse_kv(v, &kv)) return 2;
            i++;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) li = &n;
        else if (!strcmp(a, "--threads")) li = &threads;
        else if (!strcmp(a, "--ctx")) li = &ctx;
        else if (!strcmp(a, "--seed")) li = &seed;
        else if (!strcmp(a, "--top-k")) li = &top_k;
        else if (!strcmp(a, "--temp")) ld = &temp;
        else if (!strcmp(a, "--top-p")) ld = &top_p;
        else if (!strcmp(a, "--min-p")) ld = &min_p;
        else if (!strcmp(a, "--repeat-penalty")) ld = &rep;
        else if (a[0] != '-' && !model) model = a;
        else {
            fprintf(stderr, "tcq run: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
        if (li || ld) {
            if (li ? cli_parse_long(a, v, li) : cli_parse_double(a, v, ld)) return 2;
            i++;
        }
    }
    if (!model || n < 0) {
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
    const tcq_model_config *c = tcq_model_get_config(m);
    int rc = 0;
    char *rendered = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    tcq_status st = TCQ_OK;
    const char *text = prompt;
    unsigned flags = TCQ_TOK_ADD_SPECIAL;
    if (chat) {
        const char *tpl = tcq_tokenizer_chat_template(tok);
        if (!tpl) st = tcq_fail(TCQ_ERR_NOT_FOUND, "%s: no chat template", model);
        tcq_chat_message msg = {.role = "user", .content = prompt};
        tcq_chat_opts co = {.add_generation_prompt = 1, .enable_thinking = think};
        if (st == TCQ_OK) st = tcq_chat_render(tpl, &msg, 1, &co, &rendered);
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
    tcq_session *s = NULL;
    tcq_sampler *smp = NULL;
    cli_stream out;
    memset(&out, 0, sizeof out);
    tcq_sampler_params sp = {(float)temp, (int)top_k, (float)top_p, (float)min_p, (float)rep, 64, (uint64_t)seed};
    if (st == TCQ_OK) st = tcq_session_create(m, (int)ctx, kv, &s);
    if (st == TCQ_OK) {
        char b[32];
        fprintf(stderr, "KV cache: %s (%d positions, %s)\n", cli_bytes(tcq_session_kv_bytes(s), b), tcq_session_ctx(s),
                kv == TCQ_KV_F16 ? "f16" : "f32");
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
    if (st != TCQ_OK) rc = cli_fail(st, "run");
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
