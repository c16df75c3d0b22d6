/* The scheduler: N slots (a session, sampler, detokenizer and stop matcher each) and one loop
 * that owns the model.  A step admits queued jobs into free slots, prefills about prefill_chunk
 * prompt tokens (whole chunks, slot by slot), then decodes every slot that has a token to feed
 * as one batch (tcq_model_forward_batch, max_batch rows per call).  So a long prompt costs the
 * running streams one chunk per step, not its whole prefill.
 *
 * A slot's prompt is always prefilled in chunks counted from where its prefill starts, never
 * cut by what other slots do, and through the layers alone (unless --prefill-merge): a request's
 * prefill is the same computation alone or beside others.  Its prompt's last row (the lm_head)
 * and its decode rows run beside other slots' rows; docs/PERFORMANCE.md, "Server" says where the
 * kernels make that bit-identical to running alone.  A prompt with one token left to run (its
 * prefix reused) is a decode row from the start.
 *
 * Admission: after an idle spell the loop waits up to admit_wait_ms for the slots to fill, and
 * jobs that arrive during a step's prefill join it while its budget lasts, so clients that send
 * together start together.  Prefix reuse: a free slot whose last request is a prefix of the new
 * prompt keeps that part of its cache; with cache_bytes, a slot's content that a new request
 * would overwrite moves to a prompt cache first (a session of just its length), where a later
 * request that extends or repeats it finds it. */
#include "serve.h"
#include "cli.h"
#include "core/internal.h"   /* tcq_fail, TCQ_TRY, TCQ_MIN */

#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    j->c_arrive = srv_cpu_now();
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
    uint64_t pf_step;         /* the step that last prefilled a chunk of it (one chunk a step) */
} slot;

/* The prompt cache: what a slot held (a finished request's prompt and reply, keys and values
 * included) before a request that shares none of it took the slot, in a session of just its
 * length, up to cache_bytes in all, least recently used out first. */
typedef struct pc_entry {
    tcq_session *sess;
    int32_t *tokens;          /* [n] */
    int n, n_prompt;          /* positions held; how many of them were the request's prompt */
    size_t bytes;
    uint64_t last_used;
} pc_entry;

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
    uint64_t step;            /* scheduler steps so far, from 1 */
    pc_entry *pc;
    int pc_n, pc_cap;
    size_t pc_bytes;
    /* --trace: this step's work */
    struct {
        int admitted, pf_calls, pf_slots, pf_rows, dec_calls, dec_rows;
        double pf_s, dec_s, smp_s;
    } tr;
    double t_start;           /* the first step's cli_now() (--trace times count from it) */
};

/* CPU seconds of the whole process (the pool's threads too): a step's wall time beyond it was
 * spent waiting (other processes on the cores, or a thread pool's wakeups) */
double srv_cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

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
    if (!j->n_generated) {
        j->t_first = cli_now();
        if (s->o.trace)
            fprintf(stderr, "trace job %llu first token: prompt %d, arrived +%.4f s, http %.1f ms, queued %.1f ms, admitted->first %.1f ms, "
                    "+%.3f s, %.1f cpu ms since it arrived\n",
                    j->id, j->n_prompt, (j->t_arrive > 0 ? j->t_arrive : j->t_submit) - s->t_start,
                    j->t_arrive > 0 ? 1e3 * (j->t_submit - j->t_arrive) : 0.0,
                    1e3 * (j->t_admit - j->t_submit), 1e3 * (j->t_first - j->t_admit), j->t_first - s->t_start,
                    1e3 * (srv_cpu_now() - j->c_arrive));
    }
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
 * its cache is reused), else the least recently used.  *entry: a prompt cache entry that matches
 * longer than any free slot (it is copied into that slot), else -1. */
static slot *pick_slot(srv_sched *s, srv_job *j, int *reuse, int *entry)
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
    *entry = -1;
    for (int i = 0; lru && i < s->pc_n; i++) {   /* the same rule: the entry's prompt is a prefix of j's */
        const pc_entry *e = &s->pc[i];
        const int n = lcp(e->tokens, e->n, j->prompt, j->n_prompt);
        if (n >= e->n_prompt && n > best_n) {
            *entry = i;
            best = NULL;
            best_n = n;
        }
    }
    /* at least the last prompt token is run again: its logits give the first token */
    *reuse = best || *entry >= 0 ? (best_n < j->n_prompt ? best_n : j->n_prompt - 1) : 0;
    return best ? best : lru;
}

static void pc_publish(srv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->st.cache_entries = s->pc_n;
    s->st.cache_bytes = s->pc_bytes;
    pthread_mutex_unlock(&s->mu);
}

/* Entry i out of the cache (its session and tokens are the caller's now) */
static pc_entry pc_take(srv_sched *s, int i)
{
    pc_entry e = s->pc[i];
    s->pc[i] = s->pc[--s->pc_n];
    s->pc_bytes -= e.bytes;
    return e;
}

static void pc_free(pc_entry *e)
{
    tcq_session_free(e->sess);
    free(e->tokens);
}

/* Keep slot sl's cache before a request that shares none of it overwrites it.  Best effort: a
 * copy that does not fit or fails is simply not kept. */
static void pc_save(srv_sched *s, slot *sl)
{
    const int n = sl->n_cache;
    /* a prompt cut short (its request cancelled or failed mid-prefill) could never match */
    if (!s->o.cache_bytes || sl->n_prev_prompt <= 0 || n < sl->n_prev_prompt) return;
    const size_t bytes = tcq_model_kv_bytes(s->m, n, s->o.kv) + (size_t)n * sizeof(int32_t);
    if (bytes > s->o.cache_bytes) return;
    for (int i = 0; i < s->pc_n;) {
        pc_entry *e = &s->pc[i];
        const int c = lcp(e->tokens, e->n, sl->cache, n);
        if (c == n && e->n_prompt <= sl->n_prev_prompt) {   /* held already, and matched as often */
            e->last_used = ++s->clock;
            return;
        }
        if (c == e->n && e->n_prompt >= sl->n_prev_prompt) {   /* this one extends it: it goes */
            pc_entry d = pc_take(s, i);
            pc_free(&d);
            continue;
        }
        i++;
    }
    while (s->pc_n && s->pc_bytes + bytes > s->o.cache_bytes) {
        int lru = 0;
        for (int i = 1; i < s->pc_n; i++)
            if (s->pc[i].last_used < s->pc[lru].last_used) lru = i;
        pc_entry d = pc_take(s, lru);
        pc_free(&d);
    }
    if (s->pc_n == s->pc_cap) {
        const int cap = s->pc_cap ? 2 * s->pc_cap : 16;
        pc_entry *a = realloc(s->pc, (size_t)cap * sizeof *a);
        if (!a) return;
        s->pc = a;
        s->pc_cap = cap;
    }
    pc_entry e = {.n = n, .n_prompt = sl->n_prev_prompt, .bytes = bytes, .last_used = ++s->clock};
    e.tokens = malloc((size_t)n * sizeof *e.tokens);
    if (!e.tokens || tcq_session_create(s->m, n, s->o.kv, &e.sess) != TCQ_OK || tcq_session_copy(e.sess, sl->sess, n) != TCQ_OK) {
        pc_free(&e);
        return;
    }
    memcpy(e.tokens, sl->cache, (size_t)n * sizeof *e.tokens);
    s->pc[s->pc_n++] = e;
    s->pc_bytes += bytes;
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
    j->t_admit = cli_now();
    s->tr.admitted++;
    sl->state = SLOT_PREFILL;
    sl->prefill_at = reuse;
    if (j->n_prompt - reuse == 1) {
        /* one token left to run (a reused prefix, a prompt of one token): that is a decode row, and
         * joins the step's decode batch instead of a forward of its own.  Alone it is the same
         * computation as a one-row prefill (M = 1, then the lm_head at M = 1). */
        sl->state = SLOT_DECODE;
        sl->next = j->prompt[reuse];
        sl->prefill_at = j->n_prompt;
    }
    sl->n_prev_prompt = j->n_prompt;
    j->n_reused = reuse;
    return TCQ_OK;
}

static void admit(srv_sched *s)
{
    for (;;) {
        pthread_mutex_lock(&s->mu);
        srv_job *j = s->q_len ? s->queue[s->q_head] : NULL;
        int reuse = 0, entry = -1;
        slot *sl = j ? pick_slot(s, j, &reuse, &entry) : NULL;
        if (sl) {
            s->q_head = (s->q_head + 1) % s->q_cap;
            s->q_len--;
            s->st.prompt_tokens += (uint64_t)j->n_prompt;
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
        if (entry >= 0) {   /* the slot's own content to the cache, then the entry's into the slot */
            pc_entry e = pc_take(s, entry);
            pc_save(s, sl);
            if (tcq_session_copy(sl->sess, e.sess, reuse) == TCQ_OK) {
                memcpy(sl->cache, e.tokens, (size_t)reuse * sizeof *sl->cache);
                sl->n_cache = reuse;
            } else {
                reuse = 0;
                sl->n_cache = sl->n_prev_prompt = 0;
            }
            pc_free(&e);
        } else if (!reuse)
            pc_save(s, sl);
        if (s->o.cache_bytes) pc_publish(s);
        pthread_mutex_lock(&s->mu);
        s->st.reused_tokens += (uint64_t)reuse;
        s->st.cache_hits += entry >= 0 && reuse > 0;
        pthread_mutex_unlock(&s->mu);
        tcq_status st = slot_start(s, sl, j, reuse);
        if (st != TCQ_OK) {
            sl->job = j;
            slot_release(s, sl, NULL, tcq_last_error(), 0);
            sl->n_cache = sl->n_prev_prompt = 0;
        }
    }
}

/* Whole chunks of prompts, slot by slot, until about prefill_chunk tokens ran this step: up to
 * prefill_batch slots' chunks in one tcq_model_prefill_batch call, so the lm_head (the largest
 * matrix) runs once for all the prompts that end here.  Each chunk goes through the layers alone
 * unless prefill_merge, so a request's prefill is the same computation alone or beside others.
 * Jobs that arrive while a call runs are admitted before the next one and take what is left of
 * the step's budget: clients that send together but land a few milliseconds apart get their
 * first tokens from this step, not after the next step's decode (the budget still bounds how
 * long the running streams wait). */
static void prefill_step(srv_sched *s)
{
    int budget = s->o.prefill_chunk;
    while (budget > 0) {
        admit(s);
        tcq_prefill_seq q[TCQ_MAX_BATCH];
        slot *who[TCQ_MAX_BATCH];
        int nq = 0;
        for (int i = 0; i < s->o.n_slots && budget > 0 && nq < s->o.prefill_batch; i++) {
            slot *sl = &s->slots[i];
            if (sl->state != SLOT_PREFILL || sl->pf_step == s->step) continue;   /* one chunk a step */
            srv_job *j = sl->job;
            const int n = TCQ_MIN(s->o.prefill_chunk, j->n_prompt - sl->prefill_at);
            const int last = sl->prefill_at + n == j->n_prompt;
            q[nq] = (tcq_prefill_seq){sl->sess, j->prompt + sl->prefill_at, n, last ? s->logits + (size_t)nq * s->vocab : NULL};
            sl->pf_step = s->step;
            who[nq++] = sl;
            budget -= n;
        }
        if (!nq) break;
        const double t0 = cli_now();
        tcq_status st = tcq_model_prefill_batch(s->m, q, nq, s->o.prefill_merge);
        const double t1 = cli_now();
        s->tr.pf_calls++;
        s->tr.pf_slots += nq;
        for (int b = 0; b < nq; b++) s->tr.pf_rows += q[b].n;
        s->tr.pf_s += t1 - t0;
        for (int b = 0; b < nq; b++) {
            slot *sl = who[b];
            if (st != TCQ_OK) {
                slot_release(s, sl, NULL, tcq_last_error(), 0);
                sl->n_cache = sl->n_prev_prompt = 0;
                continue;
            }
            memcpy(sl->cache + sl->n_cache, q[b].tokens, (size_t)q[b].n * sizeof *sl->cache);
            sl->n_cache += q[b].n;
            sl->prefill_at += q[b].n;
            if (q[b].last_logits) {
                sl->state = SLOT_DECODE;
                slot_token(s, sl, tcq_sampler_sample(sl->smp, q[b].last_logits));
            }
        }
        s->tr.smp_s += cli_now() - t1;
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
        const double t0 = cli_now();
        tcq_status st = tcq_model_forward_batch(s->m, sess, toks, nb, s->logits);
        const double t1 = cli_now();
        s->tr.dec_calls++;
        s->tr.dec_rows += nb;
        s->tr.dec_s += t1 - t0;
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
        s->tr.smp_s += cli_now() - t1;
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
        if (!s->st.busy_slots && s->o.admit_wait_ms > 0) {
            /* Idle until this request: clients that send together reach the queue a few ms apart
             * (connections, parsing, tokenizing), and a step started on the first one alone would
             * keep the others out until after its prefill and decode.  Wait a little for them,
             * until every slot has a job. */
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            const long long ns = dl.tv_nsec + (long long)s->o.admit_wait_ms * 1000000;
            dl.tv_sec += (time_t)(ns / 1000000000);
            dl.tv_nsec = (long)(ns % 1000000000);
            while (!s->stopping && s->q_len < s->o.n_slots && pthread_cond_timedwait(&s->cv, &s->mu, &dl) == 0) {}
        }
        const int stop = s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        s->step++;
        const double t0 = cli_now(), c0 = s->o.trace ? srv_cpu_now() : 0;
        if (!s->t_start) s->t_start = t0;
        drop_cancelled(s);
        admit(s);
        const double t_admit = cli_now();
        prefill_step(s);
        decode_step(s);
        const double t1 = cli_now();
        if (s->o.trace) {
            fprintf(stderr, "trace step %llu +%.3f s: admit %d (%.1f ms) | prefill %d calls %d slots %d rows %.1f ms | "
                            "decode %d calls %d rows %.1f ms | sample+emit %.1f ms | step %.1f ms, cpu %.1f ms\n",
                    (unsigned long long)s->step, t0 - s->t_start, s->tr.admitted, 1e3 * (t_admit - t0), s->tr.pf_calls,
                    s->tr.pf_slots, s->tr.pf_rows, 1e3 * s->tr.pf_s, s->tr.dec_calls, s->tr.dec_rows, 1e3 * s->tr.dec_s,
                    1e3 * s->tr.smp_s, 1e3 * (t1 - t0), 1e3 * (srv_cpu_now() - c0));
        }
        memset(&s->tr, 0, sizeof s->tr);
        pthread_mutex_lock(&s->mu);
        s->st.busy_s += t1 - t0;
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
    if (o->n_slots < 1 || o->max_batch < 1 || o->max_batch > TCQ_MAX_BATCH || o->prefill_chunk < 1 || o->ctx < 2 ||
        o->prefill_batch < 0 || o->prefill_batch > o->max_batch || o->admit_wait_ms < 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "serve: bad scheduler options");
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) return tcq_fail(TCQ_ERR_NOMEM, "serve: scheduler");
    s->m = m;
    s->tok = tok;
    s->o = *o;
    if (!s->o.prefill_batch) s->o.prefill_batch = o->max_batch;
    s->vocab = tcq_model_get_config(m)->vocab_size;
    if (strcmp(tcq_model_device(m), "cpu") != 0) s->o.cache_bytes = 0;   /* tcq_session_copy: host sessions only */
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
    for (int i = 0; i < s->pc_n; i++) pc_free(&s->pc[i]);
    free(s->pc);
    free(s->slots);
    free(s->queue);
    free(s->logits);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
