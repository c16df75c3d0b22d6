/* Generation loop and stop strings. */
#include "model/model.h"

#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int is_eos(const tcq_model_config *c, int32_t t)
{
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == t) return 1;
    return 0;
}

tcq_status tcq_generate(tcq_model *m, tcq_session *s, tcq_sampler *smp, const int32_t *prompt, int n_prompt,
                        int max_new, tcq_token_fn on_token, void *arg, tcq_gen_stats *stats)
{
    tcq_gen_stats st;
    memset(&st, 0, sizeof st);
    if (!m || !s || !smp || !prompt || n_prompt < 1)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_generate: needs a model, a session, a sampler and a prompt");
    float *logits = tcq_amalloc((size_t)m->cfg.vocab_size * sizeof *logits);
    if (!logits) return tcq_fail(TCQ_ERR_NOMEM, "generate: out of memory");
    double t0 = now_s();
    tcq_status rc = tcq_model_prefill(m, s, prompt, n_prompt, logits);
    st.n_prompt = n_prompt;
    double t1 = now_s();
    st.prefill_s = t1 - t0;
    if (rc == TCQ_OK)
        for (int i = 0; i < n_prompt; i++) tcq_sampler_accept(smp, prompt[i]);
    while (rc == TCQ_OK && st.n_generated < max_new) {
        int32_t tok = tcq_sampler_sample(smp, logits);
        if (is_eos(&m->cfg, tok)) {
            st.stopped_eos = 1;
            break;
        }
        tcq_sampler_accept(smp, tok);
        st.n_generated++;
        if (on_token && on_token(arg, tok)) break;
        if (st.n_generated == max_new) break;
        if (s->pos >= s->ctx) {
            rc = tcq_fail(TCQ_ERR_RANGE, "context overflow: the context of %d tokens is full after %d generated",
                          s->ctx, st.n_generated);
            break;
        }
        rc = tcq_model_forward(m, s, &tok, 1, logits);
    }
    st.decode_s = now_s() - t1;
    tcq_afree(logits);
    if (stats) *stats = st;
    return rc;
}

tcq_status tcq_generate_batch(tcq_model *m, tcq_session *const *sess, tcq_sampler *const *smp,
                              const int32_t *const *prompts, const int *n_prompt, int nb, int max_new,
                              tcq_batch_token_fn on_token, void *arg, tcq_gen_stats *stats)
{
    if (!m || !sess || !smp || !prompts || !n_prompt || nb < 1 || nb > TCQ_MAX_BATCH)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_generate_batch: bad arguments (nb = %d)", nb);
    const size_t V = (size_t)m->cfg.vocab_size;
    tcq_gen_stats st[TCQ_MAX_BATCH];
    memset(st, 0, sizeof st);
    float *logits = tcq_amalloc((size_t)TCQ_MAX_BATCH * V * sizeof *logits);
    float *step = tcq_amalloc((size_t)TCQ_MAX_BATCH * V * sizeof *step);
    if (!logits || !step) {
        tcq_afree(logits);
        tcq_afree(step);
        return tcq_fail(TCQ_ERR_NOMEM, "generate: out of memory");
    }
    tcq_status rc = TCQ_OK, overflow = TCQ_OK;
    int live[TCQ_MAX_BATCH] = {0};
    double t0 = now_s();
    for (int b = 0; b < nb && rc == TCQ_OK; b++) {
        if (!prompts[b] || n_prompt[b] < 1) rc = tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_generate_batch: prompt %d is empty", b);
        if (rc == TCQ_OK) rc = tcq_model_prefill(m, sess[b], prompts[b], n_prompt[b], logits + b * V);
        for (int i = 0; rc == TCQ_OK && i < n_prompt[b]; i++) tcq_sampler_accept(smp[b], prompts[b][i]);
        st[b].n_prompt = n_prompt[b];
        live[b] = max_new > 0;
    }
    double t1 = now_s();
    while (rc == TCQ_OK) {
        tcq_session *rs[TCQ_MAX_BATCH];
        int32_t tok[TCQ_MAX_BATCH];
        int idx[TCQ_MAX_BATCH], n = 0;
        for (int b = 0; b < nb; b++) {
            if (!live[b]) continue;
            int32_t t = tcq_sampler_sample(smp[b], logits + b * V);
            if (is_eos(&m->cfg, t)) {
                st[b].stopped_eos = 1;
                live[b] = 0;
                continue;
            }
            tcq_sampler_accept(smp[b], t);
            st[b].n_generated++;
            if ((on_token && on_token(arg, b, t)) || st[b].n_generated == max_new) {
                live[b] = 0;
                continue;
            }
            if (sess[b]->pos >= sess[b]->ctx) {
                overflow = tcq_fail(TCQ_ERR_RANGE, "context overflow: sequence %d filled its %d positions", b,
                                    sess[b]->ctx);
                live[b] = 0;
                continue;
            }
            rs[n] = sess[b];
            tok[n] = t;
            idx[n++] = b;
        }
        if (!n) break;
        rc = tcq_model_forward_batch(m, rs, tok, n, step);
        for (int r = 0; rc == TCQ_OK && r < n; r++) memcpy(logits + idx[r] * V, step + r * V, V * sizeof *step);
    }
    double dt = now_s() - t1;
    for (int b = 0; b < nb; b++) {
        st[b].prefill_s = t1 - t0;
        st[b].decode_s = dt;
        if (stats) stats[b] = st[b];
    }
    tcq_afree(logits);
    tcq_afree(step);
    return rc != TCQ_OK ? rc : overflow;
}

struct tcq_stopper {
    char **stops;
    size_t *lens;
    int n;
    char *buf;                /* pending text */
    size_t len, cap;
    char *out;                /* what the last call released */
    size_t out_cap;
};

void tcq_stopper_free(tcq_stopper *st)
{
    if (!st) return;
    for (int i = 0; i < st->n; i++) free(st->stops[i]);
    free(st->stops);
    free(st->lens);
    free(st->buf);
    free(st->out);
    free(st);
}

tcq_status tcq_stopper_create(const char *const *stops, int n_stops, tcq_stopper **out)
{
    if (!out || n_stops < 0 || (n_stops && !stops)) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_stopper_create: bad arguments");
    *out = NULL;
    tcq_stopper *st = calloc(1, sizeof *st);
    if (!st) return tcq_fail(TCQ_ERR_NOMEM, "stopper: out of memory");
    st->stops = calloc((size_t)n_stops + 1, sizeof *st->stops);
    st->lens = calloc((size_t)n_stops + 1, sizeof *st->lens);
    if (!st->stops || !st->lens) {
        tcq_stopper_free(st);
        return tcq_fail(TCQ_ERR_NOMEM, "stopper: out of memory");
    }
    for (int i = 0; i < n_stops; i++) {
        if (!stops[i] || !*stops[i]) continue;   /* an empty stop string would stop at once */
        st->stops[st->n] = strdup(stops[i]);
        if (!st->stops[st->n]) {
            tcq_stopper_free(st);
            return tcq_fail(TCQ_ERR_NOMEM, "stopper: out of memory");
        }
        st->lens[st->n] = strlen(stops[i]);
        st->n++;
    }
    *out = st;
    return TCQ_OK;
}

static int grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *q = realloc(*p, c);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Move the first n pending bytes to out. */
static void release(tcq_stopper *st, size_t n, const char **emit, size_t *emit_len)
{
    if (grow(&st->out, &st->out_cap, n + 1) != 0) n = 0;
    if (n) memcpy(st->out, st->buf, n);
    memmove(st->buf, st->buf + n, st->len - n);
    st->len -= n;
    *emit = st->out ? st->out : "";
    *emit_len = n;
}

int tcq_stopper_feed(tcq_stopper *st, const char *text, size_t len, const char **emit, size_t *emit_len)
{
    if (grow(&st->buf, &st->cap, st->len + len + 1) != 0) len = 0;
    if (len) memcpy(st->buf + st->len, text, len);
    st->len += len;
    /* Earliest complete stop string. */
    size_t best = st->len;
    for (int i = 0; i < st->n; i++)
        for (size_t p = 0; p + st->lens[i] <= st->len && p < best; p++)
            if (memcmp(st->buf + p, st->stops[i], st->lens[i]) == 0) {
                best = p;
                break;
            }
    if (best < st->len) {
        release(st, best, emit, emit_len);
        st->len = 0;
        return 1;
    }
    /* Hold back the longest tail that could still grow into a stop string. */
    size_t hold = 0;
    for (int i = 0; i < st->n; i++)
        for (size_t k = TCQ_MIN(st->lens[i] - 1, st->len); k > hold; k--)
            if (memcmp(st->buf + st->len - k, st->stops[i], k) == 0) {
                hold = k;
                break;
            }
    release(st, st->len - hold, emit, emit_len);
    return 0;
}

void tcq_stopper_flush(tcq_stopper *st, const char **emit, size_t *emit_len) { release(st, st->len, emit, emit_len); }
