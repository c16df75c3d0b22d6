/* Model loading for the CLI commands. */
#include "cli_model.h"

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

static void progress(void *arg, double frac, const char *what)
{
    (void)arg;
    fprintf(stderr, "\rloading: %3.0f%% %-40.40s", 100 * frac, what);
    fflush(stderr);
}

int cli_model_load(const char *path, int threads, tcq_model **out)
{
    const int tty = isatty(2);
    tcq_model_opts o = {.n_threads = threads, .progress = tty ? progress : NULL, .prefault = 1};
    double t0 = cli_now();
    tcq_status s = tcq_model_load(path, &o, out);
    if (tty) fprintf(stderr, "\r%60s\r", "");
    if (s != TCQ_OK) return cli_fail(s, path);
    const tcq_model_config *c = tcq_model_get_config(*out);
    char b[32];
    fprintf(stderr, "%s: %s, %d layers, dim %d, %d heads (%d kv) of %d, ffn %d, vocab %d; %s, weights %s; %.2f s\n",
            path, c->arch == TCQ_ARCH_QWEN3 ? "qwen3" : "llama", c->n_layers, c->dim, c->n_heads, c->n_kv_heads,
            c->head_dim, c->hidden_dim, c->vocab_size, tcq_model_describe(*out),
            cli_bytes(tcq_model_weight_bytes(*out), b), cli_now() - t0);
    return 0;
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
