/* Model loading for the CLI commands. */
#include "cli_model.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cli_bytes(size_t n, char *buf)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(buf, 32, i ? "%.1f %s" : "%.0f %s", v, u[i]);
    return buf;
}

static double progress_t0;   /* progress is reported on the main thread only */

void cli_progress_start(void) { progress_t0 = cli_now(); }

static void progress(void *arg, double frac, const char *what)
{
    (void)arg;
    double el = cli_now() - progress_t0;
    if (frac > 0.02 && frac < 1) fprintf(stderr, "\r%3.0f%% %-28.28s ETA %4.0f s ", 100 * frac, what, el / frac - el);
    else fprintf(stderr, "\r%3.0f%% %-28.28s          ", 100 * frac, what);
    fflush(stderr);
}

void cli_progress_done(void)
{
    if (isatty(2)) fprintf(stderr, "\r%60s\r", "");
}

int cli_model_load(const char *path, int threads, tcq_model **out) { return cli_model_load_kpath(path, threads, cli_kpath, out); }

int cli_model_load_kpath(const char *path, int threads, tcq_kpath kp, tcq_model **out)
{
    cli_progress_start();
    const double t0 = progress_t0;
    tcq_model_opts o = {.n_threads = threads, .path = kp, .progress = isatty(2) ? progress : NULL, .prefault = 1,
                        .device = cli_device, .device_index = cli_device_index};
    tcq_status s = tcq_model_load(path, &o, out);
    cli_progress_done();
    if (s != TCQ_OK) return cli_fail(s, path);
    const tcq_model_config *c = tcq_model_get_config(*out);
    char b[32];
    fprintf(stderr, "%s: %s, %d layers, dim %d, %d heads (%d kv) of %d, ffn %d, vocab %d; %s, weights %s; %.2f s\n",
            path, c->arch == TCQ_ARCH_QWEN3 ? "qwen3" : "llama", c->n_layers, c->dim, c->n_heads, c->n_kv_heads,
            c->head_dim, c->hidden_dim, c->vocab_size, tcq_model_describe(*out),
            cli_bytes(tcq_model_weight_bytes(*out), b), cli_now() - t0);
    if (strcmp(tcq_model_device(*out), "cpu")) fprintf(stderr, "device: %s\n", tcq_model_device(*out));
    return 0;
}

tcq_device cli_device = TCQ_DEVICE_CPU;
int cli_device_index = 0;

int cli_parse_device(const char *s)
{
    char *end = NULL;
    if (s && !strcmp(s, "cpu")) cli_device = TCQ_DEVICE_CPU;
    else if (s && !strcmp(s, "auto")) cli_device = TCQ_DEVICE_AUTO;
    else if (s && !strcmp(s, "cuda")) {
        cli_device = TCQ_DEVICE_CUDA;
        cli_device_index = 0;
    } else if (s && !strncmp(s, "cuda:", 5) && s[5] >= '0' && s[5] <= '9' && (cli_device_index = (int)strtol(s + 5, &end, 10), !*end))
        cli_device = TCQ_DEVICE_CUDA;
    else {
        fprintf(stderr, "tcq: --device needs cpu, cuda, cuda:N or auto, got '%s'\n", s ? s : "");
        return -1;
    }
    return 0;
}

tcq_kpath cli_kpath = TCQ_PATH_AUTO;

int cli_parse_kpath(const char *s)
{
    if (s && !strcmp(s, "auto")) cli_kpath = TCQ_PATH_AUTO;
    else if (s && !strcmp(s, "exact")) cli_kpath = TCQ_PATH_EXACT;
    else if (s && !strcmp(s, "fast")) cli_kpath = TCQ_PATH_FAST;
    else {
        fprintf(stderr, "tcq: --kpath needs auto, exact or fast, got '%s'\n", s ? s : "");
        return -1;
    }
    return 0;
}

int cli_gen_flag(cli_gen_flags *g, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long long *li = NULL;
    double *ld = NULL;
    if (!strcmp(a, "--tokenizer") && v) g->tokenizer = v;
    else if (!strcmp(a, "--no-think")) {
        g->think = 0;
        return 1;
    } else if (!strcmp(a, "--kv")) {
        if (cli_parse_kv(v, &g->kv)) return -1;
    } else if (!strcmp(a, "--kpath")) {
        if (cli_parse_kpath(v)) return -1;
    } else if (!strcmp(a, "--device")) {
        if (cli_parse_device(v)) return -1;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) li = &g->n;
    else if (!strcmp(a, "--threads")) li = &g->threads;
    else if (!strcmp(a, "--ctx")) li = &g->ctx;
    else if (!strcmp(a, "--seed")) li = &g->seed;
    else if (!strcmp(a, "--top-k")) li = &g->top_k;
    else if (!strcmp(a, "--temp")) ld = &g->temp;
    else if (!strcmp(a, "--top-p")) ld = &g->top_p;
    else if (!strcmp(a, "--min-p")) ld = &g->min_p;
    else if (!strcmp(a, "--repeat-penalty")) ld = &g->rep;
    else return 0;
    if ((li && cli_parse_long(a, v, li)) || (ld && cli_parse_double(a, v, ld))) return -1;
    (*i)++;
    return 1;
}

int cli_parse_kv(const char *s, tcq_kv_dtype *out)
{
    if (s && strcmp(s, "f32") == 0) *out = TCQ_KV_F32;
    else if (s && strcmp(s, "f16") == 0) *out = TCQ_KV_F16;
    else {
        fprintf(stderr, "tcq: --kv needs f32 or f16, got '%s'\n", s ? s : "");
        return -1;
    }
    return 0;
}
