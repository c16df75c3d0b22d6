/* The scheduler: N slots (a session, sampler, detokenizer and stop matcher each) and one loop
 * that owns the model.  A step admits queued jobs into free slots, prefills about prefill_chunk
 * prompt tokens (whole chunks, slot by slot), then decodes every slot that has a token to feed
 * as one batch (tcq_model_forward_batch, max_batch rows per call).  So a long prompt costs the
 * running streams one chunk per step, not its whole prefill.
 *
 * A slot's prompt is always prefilled in chunks counted from where its prefill starts, never
 * cut by what other slots do: a request's prefill is the same computation alone or beside
 * others.  Its decode rows run beside other slots' rows; docs/PERFORMANCE.md, "Server" says where the
 * kernels make that bit-identical to running alone. */
#include "serve.h"
#include "cli.h"
#include "core/internal.h"   /* tcq_fail, TCQ_TRY, TCQ_MIN */

#include <stdlib.h>
#include <string.h>

/* ---- jobs ---------------------------------------------------------------------------------- */

srv_job *srv_job_create(const int32_t *prompt, int n_prompt)
{
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->prompt = malloc((size_t)(n_prompt > 0 ? n_prompt : 1) * sizeof *j->prompt);
    if (!j->prompt) {
        free(j);
        return NULL;
    }
    if (n_prompt > 0) memcpy(j->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
    j->n_prompt = n_prompt;
    j->refs = 1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->t_submit = cli_now();
    return j;
}

void srv_job_unref(srv_job *j)
{
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    const int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->prompt);
    free(j->text);
    free(j);
}

void srv_job_emit(srv_job *j, const char *t, size_t n)
{
    pthread_mutex_lock(&j->mu);
    if (j->len + n + 1 > j->cap) {
        size_t c = j->cap ? j->cap : 256;
        while (c < j->len + n + 1) c *= 2;
        char *b = realloc(j->text, c);
        if (!b) {
            pthread_mutex_unlock(&j->mu);
            return;
        }
        j->text = b;
        j->cap = c;
    }
    /* U+0000 is left out: a random or broken model can sample the NUL byte, and a client's
     * next turn could not send it back (C strings through the template and the tokenizer) */
    for (size_t i = 0; i < n; i++)
        if (t[i]) j->text[j->len++] = t[i];
    j->text[j->len] = 0;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void srv_job_finish(srv_job *j, const char *finish_reason, const char *error)
{
    srv_job_emit(j, "", 0);   /* text is never NULL once done */
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    j->finish_reason = finish_reason;
    if (error) snprintf(j->error, sizeof j->error, "%s", error);
    j->t_done = cli_now();
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void srv_job_cancel(srv_job *j)
{
    pthread_mutex_lock(&j->mu);
    j->cancelled = 1;
    pthread_mutex_unlock(&j->mu);
}

static int job_cancelled(srv_job *j)
{
    pthread_mutex_lock(&j->mu);
    const int c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

/* ---- slots --------------------------------------------------------------------------------- */

enum { SLOT_FREE = 0, SLOT_PREFILL, SLOT_DECODE };

typedef struct slot {
    int state;
    srv_job *job;
    tcq_session *sess;
    tcq_sampler *smp;
    tcq_detok *detok;
    tcq_stopper *stop;
    int32_t *cache;           /* the tokens in the session's KV cache, in order [ctx] */
    int n_cache;
    int n_prev_prompt;        /* prompt length of the slot's last request (prefix reuse) */
    int prefill_at;           /* next prompt token to prefill */
    int32_t next;             /* sampled, not yet in the cache: fed at the next decode step */
    uint64_t last_used;
} slot;

struct srv_sched {
    tcq_model *m;
    const tcq_tokenizer *tok;
    srv_sched_opts o;
    int vocab;
    int32_t end_ids[4 + TCQ_MAX_EOS];
    int n_end;
    slot *slots;
    float *logits;            /* [max_batch, vocab] */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;       /* queue, stop flag, stats */
    pthread_cond_t cv;
    srv_job **queue;
    int q_head, q_len, q_cap;
    int stopping;
    srv_stats st;
    uint64_t clock;
};

static void stats_add(srv_sched *s, int field_generated, int n)
{
    pthread_mutex_lock(&s->mu);
    if (field_generated) s->st.generated_tokens += (uint64_t)n;
    pthread_mutex_unlock(&s->mu);
}

/* The slot's job is over (finished, failed or cancelled): the slot keeps its cache. */
static void slot_release(srv_sched *s, slot *sl, const char *finish, const char *error, int flush)
{
    srv_job *j = sl->job;
    if (!j) return;
    if (flush && s->tok) {
        /* the held-back text: an incomplete character and a partial stop string that never completed */
        const char *t, *e;
        size_t n, en;
        if (tcq_detok_flush(sl->detok, &t, &n) == TCQ_OK) {
            int hit = tcq_stopper_feed(sl->stop, t, n, &e, &en);
            srv_job_emit(j, e, en);
            if (!hit) {
                tcq_stopper_flush(sl->stop, &e, &en);
                srv_job_emit(j, e, en);
            }
        }
    }
    /* the slot counts as free before the client can see the end (metrics read right after) */
    pthread_mutex_lock(&s->mu);
    s->st.busy_slots--;
    if (job_cancelled(j)) s->st.cancelled++;
    else if (error) s->st.failed++;
    pthread_mutex_unlock(&s->mu);
    srv_job_finish(j, finish, error);
    srv_job_unref(j);
    sl->job = NULL;
    sl->state = SLOT_FREE;
    sl->last_used = ++s->clock;
}

/* Take a sampled token: end token, stop string, length.  Returns 1 when the job ended. */
static int slot_token(srv_sched *s, slot *sl, int32_t tok)
{
    srv_job *j = sl->job;
    for (int i = 0; i < s->n_end && !j->ignore_eos; i++)
        if (tok == s->end_ids[i]) {
            slot_release(s, sl, "stop", NULL, 1);
            return 1;
        }
    pthread_mutex_lock(&j->mu);
    if (!j->n_generated) j->t_first = cli_now();
    j->n_generated++;
    const int n_gen = j->n_generated;
    pthread_mutex_unlock(&j->mu);
    stats_add(s, 1, 1);
    tcq_sampler_accept(sl->smp, tok);
    sl->next = tok;
    const char *t, *e;
    size_t n, en;
    if (!s->tok) {   /* token counts only (tcq bench serve) */
        if (n_gen < j->max_tokens && sl->n_cache < tcq_session_ctx(sl->sess)) return 0;
        slot_release(s, sl, "length", NULL, 0);
        return 1;
    }
    /* A model's vocabulary is often padded past its tokenizer's (Qwen3: 151936 rows, 151669
     * tokens); an id without a piece is a token with no text, not a failed request (a random or
     * undertrained model samples them; failing there cost the stream its usage chunk). */
    if (!tcq_tokenizer_piece(s->tok, tok)) {
        t = "";
        n = 0;
    } else if (tcq_detok_push(sl->detok, tok, &t, &n) != TCQ_OK) {
        slot_release(s, sl, NULL, "detokenizer failed", 0);
        return 1;
    }
    const int hit = tcq_stopper_feed(sl->stop, t, n, &e, &en);
    srv_job_emit(j, e, en);
    if (hit) {
        /* the stop string and what follows are not part of the reply */
        slot_release(s, sl, "stop", NULL, 0);
        return 1;
    }
    if (n_gen >= j->max_tokens || sl->n_cache >= tcq_session_ctx(sl->sess)) {
        slot_release(s, sl, "length", NULL, 1);
        return 1;
    }
    return 0;
}

static int lcp(const int32_t *a, int na, const int32_t *b, int nb)
{
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* A free slot for j: one whose last request is a prefix of j's prompt (a conversation going on:
 * its cache is reused), else the least recently used. */
static slot *pick_slot(srv_sched *s, srv_job *j, int *reuse)
{
    slot *best = NULL, *lru = NULL;
    int best_n = 0;
    for (int i = 0; i < s->o.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != SLOT_FREE) continue;
        if (!lru || sl->last_used < lru->last_used) lru = sl;
        if (sl->n_prev_prompt <= 0) continue;
        int n = lcp(sl->cache, sl->n_cache, j->prompt, j->n_prompt);
        if (n >= sl->n_prev_prompt && n > best_n) {
            best = sl;
            best_n = n;
        }
    }
    /* at least the last prompt token is run again: its logits give the first token */
    *reuse = best ? (best_n < j->n_prompt ? best_n : j->n_prompt - 1) : 0;
    return best ? best : lru;
}

static tcq_status slot_start(srv_sched *s, slot *sl, srv_job *j, int reuse)
{
    TCQ_TRY(tcq_session_rewind(sl->sess, reuse));
    sl->n_cache = reuse;
    tcq_sampler_free(sl->smp);
    sl->smp = NULL;
    TCQ_TRY(tcq_sampler_create(&j->sp, s->vocab, &sl->smp));
    tcq_stopper_free(sl->stop);
    sl->stop = NULL;
    TCQ_TRY(tcq_stopper_create((const char *const *)j->stop, j->n_stop, &sl->stop));
    if (sl->detok) tcq_detok_reset(sl->detok);
    /* the prompt through the detokenizer first: its stream state (leading-space strip, partial
     * UTF-8) is that of the whole sequence; its text is not emitted */
    for (int i = 0; i < j->n_prompt; i++) {
        const char *t;
        size_t n;
        if (sl->detok) TCQ_TRY(tcq_detok_push(sl->detok, j->prompt[i], &t, &n));
        tcq_sampler_accept(sl->smp, j->prompt[i]);
    }
    sl->job = j;
    sl->state = SLOT_PREFILL;
    sl->prefill_at = reuse;
    sl->n_prev_prompt = j->n_prompt;
    j->n_reused = reuse;
    return TCQ_OK;
}

static void admit(srv_sched *s)
{
    for (;;) {
        pthread_mutex_lock(&s->mu);
        srv_job *j = s->q_len ? s->queue[s->q_head] : NULL;
        int reuse = 0;
        slot *sl = j ? pick_slot(s, j, &reuse) : NULL;
        if (sl) {
            s->q_head = (s->q_head + 1) % s->q_cap;
            s->q_len--;
            s->st.prompt_tokens += (uint64_t)j->n_prompt;
            s->st.reused_tokens += (uint64_t)reuse;
            s->st.busy_slots++;
        }
        pthread_mutex_unlock(&s->mu);
        if (!sl) return;
        if (job_cancelled(j)) {
            pthread_mutex_lock(&s->mu);
            s->st.cancelled++;
            s->st.busy_slots--;
            pthread_mutex_unlock(&s->mu);
            srv_job_finish(j, NULL, "cancelled");
            srv_job_unref(j);
            continue;
        }
        tcq_status st = slot_start(s, sl, j, reuse);
        if (st != TCQ_OK) {
            sl->job = j;
            slot_release(s, sl, NULL, tcq_last_error(), 0);
            sl->n_cache = sl->n_prev_prompt = 0;
        }
    }
}

/* Whole chunks of prompts, slot by slot, until about prefill_chunk tokens ran this step. */
static void prefill_step(srv_sched *s)
{
    int budget = s->o.prefill_chunk;
    for (int i = 0; i < s->o.n_slots && budget > 0; i++) {
        slot *sl = &s->slots[i];
        while (sl->state == SLOT_PREFILL && budget > 0) {
            srv_job *j = sl->job;
            const int n = TCQ_MIN(s->o.prefill_chunk, j->n_prompt - sl->prefill_at);
            const int last = sl->prefill_at + n == j->n_prompt;
            tcq_status st = tcq_model_prefill(s->m, sl->sess, j->prompt + sl->prefill_at, n, last ? s->logits : NULL);
            if (st != TCQ_OK) {
                slot_release(s, sl, NULL, tcq_last_error(), 0);
                sl->n_cache = sl->n_prev_prompt = 0;
                break;
            }
            memcpy(sl->cache + sl->n_cache, j->prompt + sl->prefill_at, (size_t)n * sizeof *sl->cache);
            sl->n_cache += n;
            sl->prefill_at += n;
            budget -= n;
            if (last) {
                sl->state = SLOT_DECODE;
                slot_token(s, sl, tcq_sampler_sample(sl->smp, s->logits));
            }
        }
    }
}

static void decode_step(srv_sched *s)
{
    slot *rows[TCQ_MAX_BATCH];
    tcq_session *sess[TCQ_MAX_BATCH];
    int32_t toks[TCQ_MAX_BATCH];
    int i = 0;
    while (i < s->o.n_slots) {
        int nb = 0;
        for (; i < s->o.n_slots && nb < s->o.max_batch; i++) {
            slot *sl = &s->slots[i];
            if (sl->state != SLOT_DECODE) continue;
            rows[nb] = sl;
            sess[nb] = sl->sess;
            toks[nb] = sl->next;
            nb++;
        }
        if (!nb) break;
        tcq_status st = tcq_model_forward_batch(s->m, sess, toks, nb, s->logits);
        for (int b = 0; b < nb; b++) {
            slot *sl = rows[b];
            if (st != TCQ_OK) {
                slot_release(s, sl, NULL, tcq_last_error(), 0);
                sl->n_cache = sl->n_prev_prompt = 0;
                continue;
            }
            sl->cache[sl->n_cache++] = toks[b];
            slot_token(s, sl, tcq_sampler_sample(sl->smp, s->logits + (size_t)b * s->vocab));
        }
    }
}

static void drop_cancelled(srv_sched *s)
{
    for (int i = 0; i < s->o.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->job && job_cancelled(sl->job)) slot_release(s, sl, NULL, "cancelled", 0);
    }
}

static void *loop(void *arg)
{
    srv_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !s->q_len && !s->st.busy_slots) pthread_cond_wait(&s->cv, &s->mu);
        const int stop = s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        const double t0 = cli_now();
        drop_cancelled(s);
        admit(s);
        prefill_step(s);
        decode_step(s);
        pthread_mutex_lock(&s->mu);
        s->st.busy_s += cli_now() - t0;
        s->st.decode_steps += 1;
        pthread_mutex_unlock(&s->mu);
    }
    for (int i = 0; i < s->o.n_slots; i++) slot_release(s, &s->slots[i], NULL, "the server is shutting down", 0);
    pthread_mutex_lock(&s->mu);
    while (s->q_len) {
        srv_job *j = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_len--;
        srv_job_finish(j, NULL, "the server is shutting down");
        srv_job_unref(j);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

tcq_status srv_sched_create(tcq_model *m, const tcq_tokenizer *tok, const srv_sched_opts *o, srv_sched **out)
{
    *out = NULL;
    if (o->n_slots < 1 || o->max_batch < 1 || o->max_batch > TCQ_MAX_BATCH || o->prefill_chunk < 1 || o->ctx < 2)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "serve: bad scheduler options");
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) return tcq_fail(TCQ_ERR_NOMEM, "serve: scheduler");
    s->m = m;
    s->tok = tok;
    s->o = *o;
    s->vocab = tcq_model_get_config(m)->vocab_size;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    /* what ends a reply: the chat end tokens the vocabulary has, its EOS, the model's EOS ids */
    const char *ends[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>"};
    for (int i = 0; tok && i < 4; i++) {
        int32_t id = tcq_tokenizer_find(tok, ends[i]);
        if (id >= 0) s->end_ids[s->n_end++] = id;
    }
    if (tok && tcq_tokenizer_eos(tok) >= 0) s->end_ids[s->n_end++] = tcq_tokenizer_eos(tok);
    const tcq_model_config *c = tcq_model_get_config(m);
    for (int i = 0; i < c->n_eos && s->n_end < (int)(sizeof s->end_ids / sizeof *s->end_ids); i++)
        s->end_ids[s->n_end++] = c->eos_ids[i];
    s->st.n_slots = o->n_slots;
    s->q_cap = 1024;
    s->queue = calloc((size_t)s->q_cap, sizeof *s->queue);
    s->slots = calloc((size_t)o->n_slots, sizeof *s->slots);
    s->logits = malloc((size_t)o->max_batch * s->vocab * sizeof *s->logits);
    tcq_status st = s->queue && s->slots && s->logits ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "serve: scheduler");
    for (int i = 0; st == TCQ_OK && i < o->n_slots; i++) {
        slot *sl = &s->slots[i];
        st = tcq_session_create(m, o->ctx, o->kv, &sl->sess);
        if (st == TCQ_OK && tok) st = tcq_detok_create(tok, TCQ_DETOK_SKIP_SPECIAL, &sl->detok);
        if (st == TCQ_OK && !(sl->cache = malloc((size_t)o->ctx * sizeof *sl->cache)))
            st = tcq_fail(TCQ_ERR_NOMEM, "serve: slot cache");
    }
    if (st == TCQ_OK && pthread_create(&s->thread, NULL, loop, s) != 0)
        st = tcq_fail(TCQ_ERR_NOMEM, "serve: cannot start the scheduler thread");
    if (st != TCQ_OK) {
        srv_sched_free(s);
        return st;
    }
    s->started = 1;
    *out = s;
    return TCQ_OK;
}

int srv_sched_submit(srv_sched *s, srv_job *j)
{
    pthread_mutex_lock(&s->mu);
    if (s->stopping || s->q_len == s->q_cap) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    s->queue[(s->q_head + s->q_len++) % s->q_cap] = j;
    s->st.requests++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void srv_sched_stats(srv_sched *s, srv_stats *st)
{
    pthread_mutex_lock(&s->mu);
    *st = s->st;
    st->queued = s->q_len;
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_stop(srv_sched *s)
{
    if (!s || !s->started) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->started = 0;
}

void srv_sched_free(srv_sched *s)
{
    if (!s) return;
    srv_sched_stop(s);
    for (int i = 0; s->slots && i < s->o.n_slots; i++) {
        slot *sl = &s->slots[i];
        tcq_session_free(sl->sess);
        tcq_sampler_free(sl->smp);
        tcq_detok_free(sl->detok);
        tcq_stopper_free(sl->stop);
        free(sl->cache);
    }
    free(s->slots);
    free(s->queue);
    free(s->logits);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
