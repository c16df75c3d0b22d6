/* Tokenizer loading and streamed output for the model commands. */
#include "cli_text.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cli_read_file(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tcq: %s: cannot open\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n + 1 >= cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        if (!r) break;
        n += r;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        fprintf(stderr, "tcq: %s: read error\n", path);
        return 1;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return 0;
}

int cli_tokenizer_load(const char *model_path, const char *tok_path, const tcq_model *m, tcq_tokenizer **out)
{
    const char *p = tok_path;
    char dir[4096];
    struct stat st;
    if (!p) {
        if (stat(model_path, &st) == 0 && S_ISDIR(st.st_mode)) {
            p = model_path;
        } else {
            size_t n = strlen(model_path);
            if (n > 4 && strcmp(model_path + n - 4, ".bin") == 0) {
                fprintf(stderr, "tcq: %s is a llama2.c checkpoint: give its tokenizer with --tokenizer FILE.bin\n",
                        model_path);
                return 1;
            }
            snprintf(dir, sizeof dir, "%s", model_path);
            char *slash = strrchr(dir, '/');
            if (slash) *slash = 0;
            else snprintf(dir, sizeof dir, ".");
            p = dir;
        }
    }
    tcq_status s = tcq_tokenizer_load(p, out);
    if (s != TCQ_OK) return cli_fail(s, p);
    int32_t tv = tcq_tokenizer_vocab_size(*out), mv = tcq_model_get_config(m)->vocab_size;
    if (tv > mv) {
        fprintf(stderr, "tcq: tokenizer %s has %d tokens, the model only %d\n", p, tv, mv);
        tcq_tokenizer_free(*out);
        return 1;
    }
    return 0;
}

static void keep(cli_stream *s, const char *t, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        size_t c = s->cap ? s->cap : 256;
        while (c < s->len + n + 1) c *= 2;
        char *b = realloc(s->text, c);
        if (!b) return;
        s->text = b;
        s->cap = c;
    }
    memcpy(s->text + s->len, t, n);
    s->len += n;
    s->text[s->len] = 0;
}

tcq_status cli_stream_init(cli_stream *s, const tcq_tokenizer *tok, const char *const *stops, int n_stops, FILE *out)
{
    memset(s, 0, sizeof *s);
    s->tok = tok;
    s->out = out;
    const char *ends[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>"};
    for (int i = 0; i < 3; i++) {
        int32_t id = tcq_tokenizer_find(tok, ends[i]);
        if (id >= 0) s->end_ids[s->n_end++] = id;
    }
    if (tcq_tokenizer_eos(tok) >= 0) s->end_ids[s->n_end++] = tcq_tokenizer_eos(tok);
    tcq_status st = tcq_detok_create(tok, TCQ_DETOK_SKIP_SPECIAL, &s->detok);
    if (st == TCQ_OK) st = tcq_stopper_create(stops, n_stops, &s->stop);
    keep(s, "", 0);
    return st;
}

void cli_stream_free(cli_stream *s)
{
    tcq_detok_free(s->detok);
    tcq_stopper_free(s->stop);
    free(s->text);
    memset(s, 0, sizeof *s);
}

static void emit(cli_stream *s, const char *t, size_t n)
{
    if (!n) return;
    if (s->out) {
        fwrite(t, 1, n, s->out);
        fflush(s->out);
    }
    keep(s, t, n);
}

int cli_stream_token(void *arg, int32_t token)
{
    cli_stream *s = arg;
    for (int i = 0; i < s->n_end; i++)
        if (token == s->end_ids[i]) {
            s->stopped = 1;
            return 1;
        }
    const char *t, *e;
    size_t n, en;
    if (tcq_detok_push(s->detok, token, &t, &n) != TCQ_OK) return 1;
    int hit = tcq_stopper_feed(s->stop, t, n, &e, &en);
    emit(s, e, en);
    if (hit) s->stopped = 1;
    return hit;
}

void cli_stream_finish(cli_stream *s)
{
    const char *t, *e;
    size_t n, en;
    if (!s->stopped) {
        if (tcq_detok_flush(s->detok, &t, &n) == TCQ_OK) {
            if (tcq_stopper_feed(s->stop, t, n, &e, &en)) s->stopped = 1;
            emit(s, e, en);
        }
        if (!s->stopped) {
            tcq_stopper_flush(s->stop, &e, &en);
            emit(s, e, en);
        }
    }
}
