/* tcq perplexity MODEL FILE and tcq kl MODEL REF_MODEL FILE. */
#include "cli_text.h"

#include <stdlib.h>
#include <string.h>

static const char *convention =
    "  The file is tokenized as one text (no BOS, no special tokens) and cut into non-overlapping\n"
    "  windows of --ctx tokens (default 512); each window starts from an empty KV cache and the\n"
    "  mean NLL is over tokens 1..ctx-1 of every window given their prefix (ctx-1 predictions per\n"
    "  window, a trailing partial window is dropped), as transformers' loss with labels = input_ids\n"
    "  per window.  --windows N uses the first N windows only (default: all).\n";

typedef struct eval_args {
    const char *model, *ref, *file, *tokp;
    long long ctx, windows, threads;
    int json;
} eval_args;

static int parse(int argc, char **argv, int want_ref, eval_args *e, void (*help)(FILE *))
{
    memset(e, 0, sizeof *e);
    e->ctx = 512;
    const char **pos[3] = {&e->model, want_ref ? &e->ref : &e->file, want_ref ? &e->file : NULL};
    int np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long *li = NULL;
        if (cli_is_help(a)) {
            help(stdout);
            return 1;
        } else if (!strcmp(a, "--json")) e->json = 1;
        else if (!strcmp(a, "--tokenizer") && v) e->tokp = argv[++i];
        else if (!strcmp(a, "--device")) {
            if (cli_parse_device(v)) return 2;
            i++;
        } else if (!strcmp(a, "--kpath")) {
            if (cli_parse_kpath(v)) return 2;
            i++;
        }
        else if (!strcmp(a, "--ctx")) li = &e->ctx;
        else if (!strcmp(a, "--windows")) li = &e->windows;
        else if (!strcmp(a, "--threads")) li = &e->threads;
        else if (a[0] != '-' && np < (want_ref ? 3 : 2)) *pos[np++] = a;
        else {
            fprintf(stderr, "tcq: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
        if (li) {
            if (cli_parse_long(a, v, li)) return 2;
            i++;
        }
    }
    if (np != (want_ref ? 3 : 2) || e->ctx < 2) {
        help(stderr);
        return 2;
    }
    return 0;
}

static int tokenize_file(const eval_args *e, const tcq_model *m, int32_t **ids, size_t *n)
{
    tcq_tokenizer *tok;
    if (cli_tokenizer_load(e->model, e->tokp, m, &tok)) return 1;
    char *text;
    size_t len;
    if (cli_read_file(e->file, &text, &len)) {
        tcq_tokenizer_free(tok);
        return 1;
    }
    double t0 = cli_now();
    tcq_status s = tcq_tokenizer_encode_alloc(tok, text, len, TCQ_TOK_NO_PARSE_SPECIAL, ids, n);
    free(text);
    tcq_tokenizer_free(tok);
    if (s != TCQ_OK) return cli_fail(s, e->file);
    fprintf(stderr, "%s: %zu tokens (%.2f s)\n", e->file, *n, cli_now() - t0);
    return 0;
}

static void help_ppl(FILE *f)
{
    fprintf(f, "usage: tcq perplexity MODEL FILE [--ctx N] [--windows N] [--threads N] [--tokenizer P] [--kpath auto|exact|fast] [--device cpu|cuda|cuda:N|auto] [--json]\n%s",
            convention);
}

int cmd_perplexity(int argc, char **argv)
{
    eval_args e;
    int r = parse(argc, argv, 0, &e, help_ppl);
    if (r) return r == 1 ? 0 : r;
    tcq_model *m;
    if (cli_model_load(e.model, (int)e.threads, &m)) return 1;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = tokenize_file(&e, m, &ids, &n);
    tcq_eval_result res;
    double t0 = cli_now();
    cli_progress_start();
    tcq_status s = rc ? TCQ_OK : tcq_eval_perplexity(m, ids, (int64_t)n, (int)e.ctx, (int)e.windows, &res);
    cli_progress_done();
    double dt = cli_now() - t0;
    if (!rc && s != TCQ_OK) rc = cli_fail(s, "perplexity");
    else if (!rc && e.json)
        printf("{\"model\": \"%s\", \"file\": \"%s\", \"ctx\": %lld, \"windows\": %d, \"predictions\": %lld, "
               "\"mean_nll\": %.8f, \"perplexity\": %.6f, \"seconds\": %.2f}\n",
               e.model, e.file, e.ctx, res.windows, (long long)res.predictions, res.mean_nll, res.perplexity, dt);
    else if (!rc)
        printf("perplexity %.4f (mean NLL %.6f) over %d windows of %lld tokens, %lld predictions; %.1f s, %.0f tok/s\n",
               res.perplexity, res.mean_nll, res.windows, e.ctx, (long long)res.predictions, dt,
               (double)res.windows * e.ctx / dt);
    free(ids);
    tcq_model_free(m);
    return rc;
}

static void help_kl(FILE *f)
{
    fprintf(f,
            "usage: tcq kl MODEL REF_MODEL FILE [--ctx N] [--windows N] [--threads N] [--tokenizer P] [--kpath auto|exact|fast]\n"
            "              [--device cpu|cuda|cuda:N|auto] [--json]\n"
            "  Mean KL(ref || model) of the next-token distributions (nats), its 95th percentile, top-1\n"
            "  agreement and both perplexities; both models run window by window (tokenized with MODEL's\n"
            "  tokenizer).  --kpath is MODEL's path; REF_MODEL always runs the exact path (f32\n"
            "  activations), so the reference does not move with it.\n%s",
            convention);
}

int cmd_kl(int argc, char **argv)
{
    eval_args e;
    int r = parse(argc, argv, 1, &e, help_kl);
    if (r) return r == 1 ? 0 : r;
    tcq_model *m, *ref;
    if (cli_model_load(e.model, (int)e.threads, &m)) return 1;
    if (cli_model_load_kpath(e.ref, (int)e.threads, TCQ_PATH_EXACT, &ref)) {
        tcq_model_free(m);
        return 1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = tokenize_file(&e, m, &ids, &n);
    tcq_eval_result res;
    double t0 = cli_now();
    cli_progress_start();
    tcq_status s = rc ? TCQ_OK : tcq_eval_kl(m, ref, ids, (int64_t)n, (int)e.ctx, (int)e.windows, &res);
    cli_progress_done();
    double dt = cli_now() - t0;
    if (!rc && s != TCQ_OK) rc = cli_fail(s, "kl");
    else if (!rc && e.json)
        printf("{\"model\": \"%s\", \"ref\": \"%s\", \"file\": \"%s\", \"ctx\": %lld, \"windows\": %d, "
               "\"predictions\": %lld, \"mean_kl\": %.8f, \"kl_p95\": %.8f, \"top1_agree\": %.6f, "
               "\"perplexity\": %.6f, \"ref_perplexity\": %.6f, \"seconds\": %.2f}\n",
               e.model, e.ref, e.file, e.ctx, res.windows, (long long)res.predictions, res.mean_kl, res.kl_p95,
               res.top1_agree, res.perplexity, res.ref_perplexity, dt);
    else if (!rc)
        printf("KL(ref || model): mean %.6f, p95 %.6f; top-1 agreement %.4f; perplexity %.4f (ref %.4f); "
               "%d windows of %lld, %.1f s\n",
               res.mean_kl, res.kl_p95, res.top1_agree, res.perplexity, res.ref_perplexity, res.windows, e.ctx, dt);
    free(ids);
    tcq_model_free(m);
    tcq_model_free(ref);
    return rc;
}
