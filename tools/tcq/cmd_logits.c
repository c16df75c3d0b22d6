/* tcq logits MODEL --tokens 1,2,3 --out FILE.safetensors: f32 logits of every position. */
#include "cli_model.h"

#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f, "usage: tcq logits MODEL --tokens ID,ID,... --out FILE.safetensors [--threads N] [--kv f32|f16]\n"
               "                  [--kpath auto|exact|fast] [--device cpu|cuda|cuda:N|auto]\n"
               "  Runs the tokens as one sequence from position 0 (no BOS is added) and writes the logits\n"
               "  of every position as tensor \"logits\", F32 [n, vocab].\n");
}

int cmd_logits(int argc, char **argv)
{
    const char *model = NULL, *toks = NULL, *outp = NULL;
    long long threads = 0;
    tcq_kv_dtype kv = TCQ_KV_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        } else if (strcmp(a, "--tokens") == 0 && v) toks = argv[++i];
        else if (strcmp(a, "--out") == 0 && v) outp = argv[++i];
        else if (strcmp(a, "--threads") == 0) {
            if (cli_parse_long(a, v, &threads)) return 2;
            i++;
        } else if (strcmp(a, "--kv") == 0) {
            if (cli_parse_kv(v, &kv)) return 2;
            i++;
        } else if (!strcmp(a, "--device")) {
            if (cli_parse_device(v)) return 2;
            i++;
        } else if (!strcmp(a, "--kpath")) {
            if (cli_parse_kpath(v)) return 2;
            i++;
        } else if (a[0] != '-' && !model) model = a;
        else {
            fprintf(stderr, "tcq logits: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
    }
    if (!model || !toks || !outp) {
        help(stderr);
        return 2;
    }
    enum { MAX_TOKENS = 1 << 16 };
    int32_t *ids = malloc(MAX_TOKENS * sizeof *ids);
    int n = ids ? cli_parse_int_list(toks, ids, MAX_TOKENS) : -1;
    if (n < 1) {
        fprintf(stderr, "tcq logits: --tokens needs a comma-separated list of ids\n");
        free(ids);
        return 2;
    }
    tcq_model *m;
    if (cli_model_load(model, (int)threads, &m)) {
        free(ids);
        return 1;
    }
    const int V = tcq_model_get_config(m)->vocab_size;
    float *lg = malloc((size_t)n * V * sizeof *lg);
    tcq_session *s = NULL;
    tcq_st_writer *w = NULL;
    int rc = 0;
    tcq_status st = lg ? tcq_session_create(m, n, kv, &s) : TCQ_ERR_NOMEM;
    if (st == TCQ_OK) st = tcq_model_forward(m, s, ids, n, lg);
    if (st == TCQ_OK) st = tcq_st_writer_create(&w);
    int64_t shape[2] = {n, V};
    if (st == TCQ_OK) st = tcq_st_writer_add(w, "logits", TCQ_DTYPE_F32, 2, shape, lg, (size_t)n * V * sizeof *lg);
    if (st == TCQ_OK) st = tcq_st_writer_write(w, outp);
    if (st != TCQ_OK) rc = cli_fail(st, "logits");
    else fprintf(stderr, "wrote %s: logits [%d, %d]\n", outp, n, V);
    tcq_st_writer_free(w);
    tcq_session_free(s);
    tcq_model_free(m);
    free(lg);
    free(ids);
    return rc;
}
