/* tcq demo: the main job on an embedded default.  Runs the 2-bit tinyqwen kept in the repository
 * (models/tinyqwen-k2, coded by `tcq quantize`): loads it, generates a short text from a fixed
 * prompt and prints bits per weight and tokens/s, and the same prompt's tokens/s at bf16 when a
 * bf16 model is at hand.  `tcq demo --codec` is the codec alone (cmd_demo_codec.c). */
#include "cli_text.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEMO_MODEL "tinyqwen-k2"
#define DEMO_BF16 "tinyqwen-bf16"   /* not shipped (58 MB); used when someone puts it beside */
#define DEMO_PROMPT "The Linux kernel loads a module into memory when"

static void help(FILE *f)
{
    fprintf(f, "usage: tcq demo [--model DIR] [--bf16 DIR] [-n N] [--threads N]\n"
               "       tcq demo --codec [options]   (the codec alone: tcq demo --codec --help)\n"
               "  Runs the 2-bit tinyqwen in models/" DEMO_MODEL " (a 29M-parameter Qwen3 trained on Linux and\n"
               "  Python documentation, coded by tcq quantize): greedy text from a fixed prompt, bits per\n"
               "  weight, prefill and decode tokens/s.\n"
               "  --model DIR   another model directory\n"
               "  --bf16 DIR    the same prompt on a bf16 model for comparison (e.g. ../shared/data/tinyqwen);\n"
               "                default: models/" DEMO_BF16 " beside the demo model, if there\n"
               "  -n N          tokens to generate (default 48)\n");
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The models folder: the source tree's (a build), beside or above the binary (a copied build
 * tree), or the installed share/tcq/models.  Fills `tried` with where it looked. */
static const char *find_models(char *buf, size_t n, char *tried, size_t tn)
{
    char exe[PATH_MAX] = "";
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
    }
    const char *cands[4][2] = {{TCQ_SOURCE_DIR, "/models"},
                               {exe, "/models"},
                               {exe, "/../models"},
                               {exe, "/../share/tcq/models"}};
    tried[0] = 0;
    for (int i = 0; i < 4; i++) {
        if (!cands[i][0][0]) continue;
        snprintf(buf, n, "%s%s/" DEMO_MODEL, cands[i][0], cands[i][1]);
        if (is_dir(buf)) {
            buf[strlen(buf) - strlen("/" DEMO_MODEL)] = 0;
            return buf;
        }
        size_t o = strlen(tried);
        snprintf(tried + o, tn - o, "%s%s", o ? ", " : "", buf);
    }
    return NULL;
}

/* Bits per weight of the trellis-coded projections (codes + fp16 row scales). */
static int coded_bpw(const char *dir, double *bpw, int64_t *n_weights)
{
    tcq_st_set *s = NULL;
    tcq_qconfig *q = NULL;
    char cfg[PATH_MAX + 64];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    tcq_status st = tcq_st_set_open(dir, &s);
    if (st == TCQ_OK) st = tcq_qconfig_load(cfg, &q);
    int64_t w = 0, bits = 0;
    for (int64_t i = 0; st == TCQ_OK && i < tcq_st_set_count(s); i++) {
        const char *name = tcq_st_set_tensor(s, i)->name;
        size_t nl = strlen(name);
        if (nl < 8 || strcmp(name + nl - 7, ".weight")) continue;
        char module[512];
        snprintf(module, sizeof module, "%.*s", (int)(nl - 7), name);
        if (tcq_qconfig_resolve(q, s, module).mode != TCQ_QMODE_TRELLIS) continue;
        tcq_trellis tr;
        st = tcq_trellis_from_set(s, q, module, &tr);
        if (st == TCQ_OK) {
            w += tr.rows * tr.cols;
            bits += tr.rows * tr.cols * tr.p.k + tr.rows * 16;
        }
    }
    tcq_qconfig_free(q);
    tcq_st_set_close(s);
    if (st != TCQ_OK) return cli_fail(st, dir);
    *bpw = w ? (double)bits / (double)w : 16.0;
    *n_weights = w;
    return 0;
}

/* Greedy generation of n tokens after the demo prompt; text to `out` (NULL: not printed). */
static int generate(const char *dir, int threads, int n, FILE *out, tcq_gen_stats *gs)
{
    tcq_model *m = NULL;
    tcq_tokenizer *tok = NULL;
    if (cli_model_load(dir, threads, &m)) return 1;
    if (cli_tokenizer_load(dir, NULL, m, &tok)) {
        tcq_model_free(m);
        return 1;
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    tcq_session *s = NULL;
    tcq_sampler *smp = NULL;
    cli_stream cs;
    memset(&cs, 0, sizeof cs);
    memset(gs, 0, sizeof *gs);
    const tcq_sampler_params sp = {0.0f, 0, 1.0f, 0.0f, 1.0f, 64, 0};   /* greedy */
    tcq_status st = tcq_tokenizer_encode_alloc(tok, DEMO_PROMPT, strlen(DEMO_PROMPT), TCQ_TOK_ADD_SPECIAL, &ids, &n_ids);
    if (st == TCQ_OK) st = tcq_session_create(m, (int)n_ids + n + 1, TCQ_KV_F32, &s);
    if (st == TCQ_OK) st = tcq_sampler_create(&sp, tcq_model_get_config(m)->vocab_size, &smp);
    if (st == TCQ_OK) st = cli_stream_init(&cs, tok, NULL, 0, out);
    if (out && st == TCQ_OK) {
        fprintf(out, "\n%s", DEMO_PROMPT);
        fflush(out);
    }
    if (st == TCQ_OK) st = tcq_generate(m, s, smp, ids, (int)n_ids, n, cli_stream_token, &cs, gs);
    if (cs.detok) cli_stream_finish(&cs);
    if (out) fprintf(out, "\n\n");
    cli_stream_free(&cs);
    tcq_sampler_free(smp);
    tcq_session_free(s);
    free(ids);
    tcq_tokenizer_free(tok);
    tcq_model_free(m);
    return st == TCQ_OK ? 0 : cli_fail(st, dir);
}

static double rate(int n, double s) { return s > 0 ? n / s : 0.0; }

int cmd_demo(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--codec")) {
            for (int j = i; j + 1 < argc; j++) argv[j] = argv[j + 1];
            return cmd_demo_codec(argc - 1, argv);
        }
    const char *model = NULL, *bf16 = NULL;
    long long n = 48, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--model") && v) model = argv[++i];
        else if (!strcmp(a, "--bf16") && v) bf16 = argv[++i];
        else if (!strcmp(a, "-n") && v) {
            if (cli_parse_long(a, argv[++i], &n)) return 2;
        } else if (!strcmp(a, "--threads") && v) {
            if (cli_parse_long(a, argv[++i], &threads)) return 2;
        } else {
            fprintf(stderr, "tcq demo: unknown or incomplete option '%s'\n", a);
            help(stderr);
            return 2;
        }
    }
    if (n < 1 || n > 1024 || threads < 0) {
        fprintf(stderr, "tcq demo: -n must be 1..1024 and --threads >= 0\n");
        return 2;
    }
    char models[PATH_MAX], tried[4 * PATH_MAX], path[PATH_MAX + 32], bpath[PATH_MAX + 32];
    if (!model) {
        if (!find_models(models, sizeof models, tried, sizeof tried)) {
            fprintf(stderr, "tcq demo: the demo model models/" DEMO_MODEL " is not in any of: %s (give one with --model DIR)\n",
                    tried);
            return 1;
        }
        snprintf(path, sizeof path, "%s/" DEMO_MODEL, models);
        model = path;
        snprintf(bpath, sizeof bpath, "%s/" DEMO_BF16, models);
        if (!bf16 && is_dir(bpath)) bf16 = bpath;
    }
    double bpw = 0;
    int64_t nw = 0;
    if (coded_bpw(model, &bpw, &nw)) return 1;
    tcq_gen_stats q, b;
    if (generate(model, (int)threads, (int)n, stdout, &q)) return 1;
    if (bf16 && generate(bf16, (int)threads, (int)n, NULL, &b)) return 1;
    printf("tcq demo: %s, ISA %s\n", model, tcq_isa_name(tcq_isa_active()));
    if (nw)
        printf("  bits/weight  %.3f over %.1fM trellis-coded weights (codes + fp16 row scales)\n", bpw, (double)nw / 1e6);
    else
        printf("  bits/weight  no trellis-coded weights in this model\n");
    printf("  prefill      %d tokens, %.1f tok/s\n", q.n_prompt, rate(q.n_prompt, q.prefill_s));
    printf("  decode       %d tokens, %.1f tok/s\n", q.n_generated, rate(q.n_generated, q.decode_s));
    if (bf16)
        printf("  bf16         %s: prefill %.1f tok/s, decode %.1f tok/s (%d tokens): %.2fx the decode speed at bf16\n",
               bf16, rate(b.n_prompt, b.prefill_s), rate(b.n_generated, b.decode_s), b.n_generated,
               rate(b.n_generated, b.decode_s) > 0 ? rate(q.n_generated, q.decode_s) / rate(b.n_generated, b.decode_s) : 0.0);
    else
        printf("  bf16         not shipped; compare with --bf16 DIR (e.g. ../shared/data/tinyqwen)\n");
    return 0;
}
