/* The transformer forward, llama2.c style.  Rows are tokens; each row carries its session and
 * position, so a prefill chunk (one session, consecutive positions) and a decode batch (one row
 * per session) are the same code.  Per layer:
 *   xb = rmsnorm(x) -> q, k, v = xb Wq^T, xb Wk^T, xb Wv^T -> [Qwen3: per-head q/k rmsnorm]
 *   -> rope(q, k) -> cache k, v -> att = softmax(q K^T / sqrt(hd)) V -> x += att Wo^T
 *   xb = rmsnorm(x) -> hb = silu(xb Wg^T) * (xb Wu^T) -> x += hb Wd^T
 * then logits = rmsnorm(x) Wlm^T for the rows that want them. */
#include "model/model.h"

#include <math.h>
#include <string.h>

/* out = w * (x / sqrt(mean(x^2) + eps)), as transformers' RMSNorm in f32 (sum in double). */
static void rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt((double)(float)(ss / n) + (double)eps));
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * inv);
}

static void rope(const tcq_model *m, float *v /* [n_heads, hd] */, int n_heads, int pos)
{
    const int hd = m->cfg.head_dim, half = hd / 2;
    for (int i = 0; i < half; i++) {
        float ang = (float)pos * m->rope_inv_freq[i];
        float c = (float)cos((double)ang), s = (float)sin((double)ang);
        for (int h = 0; h < n_heads; h++) {
            float *p = v + (size_t)h * hd;
            int a = m->cfg.rope_interleaved ? 2 * i : i, b = m->cfg.rope_interleaved ? 2 * i + 1 : i + half;
            float x0 = p[a], x1 = p[b];
            p[a] = x0 * c - x1 * s;
            p[b] = x1 * c + x0 * s;
        }
    }
}

static void kv_store(tcq_session *s, int layer, int pos, const float *k, const float *v /* [kv_dim] */)
{
    size_t off = ((size_t)layer * s->ctx + pos) * s->kv_dim;
    if (s->kv == TCQ_KV_F32) {
        memcpy((float *)s->kcache + off, k, (size_t)s->kv_dim * sizeof(float));
        memcpy((float *)s->vcache + off, v, (size_t)s->kv_dim * sizeof(float));
    } else {
        uint16_t *kc = (uint16_t *)s->kcache + off, *vc = (uint16_t *)s->vcache + off;
        for (int i = 0; i < s->kv_dim; i++) {
            kc[i] = tcq_f32_to_f16(k[i]);
            vc[i] = tcq_f32_to_f16(v[i]);
        }
    }
}

typedef struct att_job {
    tcq_model *m;
    tcq_session *const *sess;   /* [M] */
    const int *pos;             /* [M] */
    const int *rows;            /* the rows the per-row core serves */
    int layer;
} att_job;

/* One (row, kv head) group: the attention core on its cache rows. */
static void att_item(void *arg, int64_t item, int thread)
{
    const att_job *J = arg;
    tcq_model *m = J->m;
    const tcq_model_config *c = &m->cfg;
    const int hd = c->head_dim, G = c->n_heads / c->n_kv_heads;
    const int r = J->rows[item / c->n_kv_heads], kvh = (int)(item % c->n_kv_heads);
    const tcq_session *s = J->sess[r];
    const size_t base = (size_t)J->layer * s->ctx * s->kv_dim + (size_t)kvh * hd, es = s->kv == TCQ_KV_F16 ? 2 : 4;
    tcq_attn_args a;
    a.q = m->q + ((size_t)r * c->n_heads + (size_t)kvh * G) * hd;
    a.out = m->att + ((size_t)r * c->n_heads + (size_t)kvh * G) * hd;
    a.k = (const char *)s->kcache + base * es;
    a.v = (const char *)s->vcache + base * es;
    a.kv_f16 = s->kv == TCQ_KV_F16;
    a.kv_dim = s->kv_dim;
    a.hd = hd;
    a.G = G;
    a.n = J->pos[r] + 1;
    a.scores = m->att_scores + (size_t)thread * m->att_cap;
    a.buf = a.scores + (size_t)G * s->ctx;
    m->attn(&a);
}

static tcq_status ensure_att_scratch(tcq_model *m, int ctx)
{
    int need = ctx * (m->cfg.n_heads / m->cfg.n_kv_heads) + m->cfg.head_dim;
    if (m->att_cap >= need) return TCQ_OK;
    tcq_afree(m->att_scores);
    m->att_scores = tcq_amalloc((size_t)tcq_pool_size(m->pool) * need * sizeof(float));
    m->att_cap = m->att_scores ? need : 0;
    return m->att_scores ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "model: attention scratch of %d positions", ctx);
}

/* A projection of layer_rows: the calibration's hook (model.h's mm) where set, else the kernels. */
static inline tcq_status linear(tcq_model *m, const tcq_weight *w, const float *x, float *y, int M)
{
    return m->mm ? m->mm(m->mm_user, w, NULL, x, y, M) : tcq_linear(w, x, y, M, m->kctx);
}

static inline tcq_status swiglu(tcq_model *m, const tcq_weight *g, const tcq_weight *u, const float *x, float *y, int M)
{
    return m->mm ? m->mm(m->mm_user, g, u, x, y, M) : tcq_linear_swiglu(g, u, x, y, M, m->kctx);
}

/* One decoder layer on x [M, d] in place: L's weights, cache layer `cl` of the sessions, taps
 * report layer `tl`; seg [n_seg + 1]: the rows' segments (see forward_rows).  Only rows [kf, M)
 * leave with their output in x (0: all): the others' keys and values still go to the cache, but
 * their query, attention, output projection and FFN are skipped (the last layer of a prefill whose
 * logits are wanted for the last row alone, as llama.cpp does; rows [0, kf) of x are left stale). */
static tcq_status layer_rows(tcq_model *m, const tcq_layer *L, int cl, int tl, tcq_session *const *sess,
                             const int *pos, int M, const int *seg, int n_seg, float *x, int kf)
{
    const tcq_model_config *c = &m->cfg;
    const int d = c->dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd, n = M - kf;
    if (m->tap) m->tap(m->tap_user, tl, TCQ_TAP_ATTN, x, M);
    for (int r = 0; r < M; r++) rmsnorm(m->xb + (size_t)r * d, x + (size_t)r * d, L->attn_norm, d, c->norm_eps);
    if (n) TCQ_TRY(linear(m, &L->wq, m->xb + (size_t)kf * d, m->q + (size_t)kf * qd, n));   /* q [M, qd] */
    TCQ_TRY(linear(m, &L->wk, m->xb, m->k, M));   /* k [M, kvd] */
    TCQ_TRY(linear(m, &L->wv, m->xb, m->v, M));   /* v [M, kvd] */
    for (int r = 0; r < M; r++) {
        float *q = m->q + (size_t)r * qd, *k = m->k + (size_t)r * kvd;
        if (L->q_norm) {
            if (r >= kf)
                for (int h = 0; h < c->n_heads; h++) rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, c->norm_eps);
            for (int h = 0; h < c->n_kv_heads; h++) rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, c->norm_eps);
        }
        if (r >= kf) rope(m, q, c->n_heads, pos[r]);
        rope(m, k, c->n_kv_heads, pos[r]);
        kv_store(sess[r], cl, pos[r], k, m->v + (size_t)r * kvd);
    }
    if (!n) return TCQ_OK;
    int per_row[TCQ_PREFILL_CHUNK], n_row = 0;
    if (kf)   /* the kept rows through the per-row core, their caches complete above */
        for (int r = kf; r < M; r++) per_row[n_row++] = r;
    else
        for (int g = 0; g < n_seg; g++) {
            const int r0 = seg[g], ns = seg[g + 1] - r0;
            if (ns == 1 || tcq_attn_block(m, sess[r0], pos[r0], ns, cl, r0))
                for (int r = r0; r < r0 + ns; r++) per_row[n_row++] = r;
        }
    if (n_row) {
        att_job J = {m, sess, pos, per_row, cl};
        tcq_pool_run(m->pool, (int64_t)n_row * c->n_kv_heads, att_item, &J);    /* att [M, qd] */
    }
    float *xk = x + (size_t)kf * d;   /* the kept rows */
    if (m->tap) m->tap(m->tap_user, tl, TCQ_TAP_O, m->att, M);
    TCQ_TRY(linear(m, &L->wo, m->att + (size_t)kf * qd, m->xb2, n));          /* xb2 [n, d] */
    for (size_t i = 0; i < (size_t)n * d; i++) xk[i] += m->xb2[i];
    if (m->tap) m->tap(m->tap_user, tl, TCQ_TAP_FFN, x, M);
    for (int r = 0; r < n; r++) rmsnorm(m->xb + (size_t)r * d, xk + (size_t)r * d, L->ffn_norm, d, c->norm_eps);
    TCQ_TRY(swiglu(m, &L->gate, &L->up, m->xb, m->hb, n));   /* hb [n, hidden] */
    if (m->tap) m->tap(m->tap_user, tl, TCQ_TAP_DOWN, m->hb, M);
    TCQ_TRY(linear(m, &L->down, m->hb, m->xb2, n));                /* xb2 [n, d] */
    for (size_t i = 0; i < (size_t)n * d; i++) xk[i] += m->xb2[i];
    return TCQ_OK;
}

/* M rows (M <= TCQ_PREFILL_CHUNK).  Rows [out_from, M) get logits into logits [M-out_from, vocab].
 * Rows [keep_from, M) (keep_from <= out_from) leave their last layer's output in m->x; the others
 * only fill the caches in the last layer (layer_rows' kf; all rows while a tap watches). */
static tcq_status forward_rows(tcq_model *m, tcq_session *const *sess, const int *pos, const int32_t *tok, int M,
                               int out_from, float *logits, int keep_from)
{
    const tcq_model_config *c = &m->cfg;
    const int d = c->dim;
    int max_ctx = 0;
    for (int r = 0; r < M; r++) max_ctx = TCQ_MAX(max_ctx, sess[r]->ctx);
    TCQ_TRY(ensure_att_scratch(m, max_ctx));
    /* Segments: runs of rows of one session at consecutive positions (a prefill chunk, or several
     * sessions' chunks side by side).  Each takes its attention as it would alone: the sgemm block
     * where tcq_attn_block serves it, else the per-row core (a decode batch: every row). */
    int seg[TCQ_PREFILL_CHUNK + 1], n_seg = 0;
    for (int r = 0; r < M; r++)
        if (!r || sess[r] != sess[r - 1] || pos[r] != pos[r - 1] + 1) seg[n_seg++] = r;
    seg[n_seg] = M;

    for (int r = 0; r < M; r++) tcq_model_embed(m, tok[r], m->x + (size_t)r * d);   /* x [M, d] */
    const int kf = m->tap ? 0 : TCQ_MIN(keep_from, out_from);
    for (int l = 0; l < c->n_layers; l++)
        TCQ_TRY(layer_rows(m, &m->layers[l], l, l, sess, pos, M, seg, n_seg, m->x, l == c->n_layers - 1 ? kf : 0));
    if (out_from >= M) return TCQ_OK;
    for (int r = out_from; r < M; r++)
        rmsnorm(m->xb + (size_t)(r - out_from) * d, m->x + (size_t)r * d, m->final_norm, d, c->norm_eps);
    return tcq_linear(&m->lm_head, m->xb, logits, M - out_from, m->kctx);   /* logits [M-out_from, V] */
}

static tcq_status check_tokens(const tcq_model *m, const int32_t *tokens, int n)
{
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.vocab_size)
            return tcq_fail(TCQ_ERR_INVALID_ARG, "token %d at position %d is outside the vocabulary [0, %d)", tokens[i],
                            i, m->cfg.vocab_size);
    return TCQ_OK;
}

/* all: logits of every row into logits [n, V]; else only the last row's into logits [V]. */
static tcq_status run_sequence(tcq_model *m, tcq_session *s, const int32_t *tokens, int n, float *logits, int all)
{
    if (!m || !s || (n > 0 && !tokens) || n < 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "forward: bad arguments");
    if (n > s->ctx - s->pos)
        return tcq_fail(TCQ_ERR_RANGE, "context overflow: %d tokens at position %d exceed the context of %d", n, s->pos,
                        s->ctx);
    TCQ_TRY(check_tokens(m, tokens, n));
    tcq_session *rs[TCQ_PREFILL_CHUNK];
    int pos[TCQ_PREFILL_CHUNK];
    const size_t V = (size_t)m->cfg.vocab_size;
    for (int i = 0; i < n; i += TCQ_PREFILL_CHUNK) {
        int M = TCQ_MIN(TCQ_PREFILL_CHUNK, n - i);
        for (int r = 0; r < M; r++) {
            rs[r] = s;
            pos[r] = s->pos + r;
        }
        int last = i + M == n;
        int from = all ? 0 : (logits && last ? M - 1 : M);
        float *lg = all && logits ? logits + (size_t)i * V : logits;
        tcq_status st = m->cu ? tcq_model_cuda_rows(m, rs, pos, tokens + i, M, from, lg)
                              : forward_rows(m, rs, pos, tokens + i, M, from, lg, from);
        if (st != TCQ_OK) return st;
        s->pos += M;
    }
    return TCQ_OK;
}

tcq_status tcq_model_forward(tcq_model *m, tcq_session *s, const int32_t *tokens, int n, float *logits)
{
    if (!logits) return run_sequence(m, s, tokens, n, NULL, 0);
    return run_sequence(m, s, tokens, n, logits, 1);
}

tcq_status tcq_model_prefill(tcq_model *m, tcq_session *s, const int32_t *tokens, int n, float *last_logits)
{
    return run_sequence(m, s, tokens, n, last_logits, 0);
}

tcq_status tcq_model_forward_batch(tcq_model *m, tcq_session *const *sess, const int32_t *tokens, int nb,
                                   float *logits)
{
    if (!m || !sess || !tokens || !logits || nb < 1 || nb > TCQ_MAX_BATCH)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "forward_batch: bad arguments (nb = %d, at most %d)", nb, TCQ_MAX_BATCH);
    int pos[TCQ_MAX_BATCH];
    for (int b = 0; b < nb; b++) {
        if (!sess[b]) return tcq_fail(TCQ_ERR_INVALID_ARG, "forward_batch: session %d is NULL", b);
        for (int j = 0; j < b; j++)
            if (sess[j] == sess[b]) return tcq_fail(TCQ_ERR_INVALID_ARG, "forward_batch: session %d repeats %d", b, j);
        if (sess[b]->pos >= sess[b]->ctx)
            return tcq_fail(TCQ_ERR_RANGE, "context overflow: session %d is full (%d positions)", b, sess[b]->ctx);
        pos[b] = sess[b]->pos;
    }
    TCQ_TRY(check_tokens(m, tokens, nb));
    TCQ_TRY(m->cu ? tcq_model_cuda_rows(m, sess, pos, tokens, nb, 0, logits) : forward_rows(m, sess, pos, tokens, nb, 0, logits, 0));
    for (int b = 0; b < nb; b++) sess[b]->pos++;
    return TCQ_OK;
}

/* logits [n, V] of the rows x [n, d] (n <= TCQ_PREFILL_CHUNK): final norm, lm_head as one call */
static tcq_status head_rows(tcq_model *m, const float *x, int n, float *logits)
{
    const int d = m->cfg.dim;
    for (int r = 0; r < n; r++) rmsnorm(m->xb + (size_t)r * d, x + (size_t)r * d, m->final_norm, d, m->cfg.norm_eps);
    return tcq_linear(&m->lm_head, m->xb, logits, n, m->kctx);
}

tcq_status tcq_model_head_forward(tcq_model *m, const float *x, int n, float *logits)
{
    if (!m || !x || !logits || n < 1 || n > TCQ_PREFILL_CHUNK)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "head forward: bad arguments (%d rows)", n);
    return head_rows(m, x, n, logits);
}

tcq_status tcq_model_prefill_batch(tcq_model *m, const tcq_prefill_seq *seqs, int nb, int merge_rows)
{
    if (!m || !seqs || nb < 1 || nb > TCQ_MAX_BATCH)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "prefill_batch: bad arguments (nb = %d, at most %d)", nb, TCQ_MAX_BATCH);
    int n_want = 0;
    for (int b = 0; b < nb; b++) {
        const tcq_prefill_seq *q = &seqs[b];
        if (!q->sess || q->n < 1 || !q->tokens)
            return tcq_fail(TCQ_ERR_INVALID_ARG, "prefill_batch: sequence %d has no session or no tokens", b);
        for (int j = 0; j < b; j++)
            if (seqs[j].sess == q->sess)
                return tcq_fail(TCQ_ERR_INVALID_ARG, "prefill_batch: session %d repeats %d", b, j);
        if (q->n > q->sess->ctx - q->sess->pos)
            return tcq_fail(TCQ_ERR_RANGE, "context overflow: sequence %d: %d tokens at position %d exceed the context of %d",
                            b, q->n, q->sess->pos, q->sess->ctx);
        TCQ_TRY(check_tokens(m, q->tokens, q->n));
        n_want += q->last_logits != NULL;
    }
    if (m->cu) {   /* the device forward takes one sequence at a time */
        for (int b = 0; b < nb; b++) TCQ_TRY(tcq_model_prefill(m, seqs[b].sess, seqs[b].tokens, seqs[b].n, seqs[b].last_logits));
        return TCQ_OK;
    }
    const int d = m->cfg.dim;
    const size_t V = (size_t)m->cfg.vocab_size;
    float *last = tcq_amalloc((size_t)(n_want ? n_want : 1) * d * sizeof *last);   /* the wanted last rows' x */
    float *lg = n_want ? tcq_amalloc((size_t)n_want * V * sizeof *lg) : NULL;
    tcq_status st = last && (lg || !n_want) ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "prefill_batch: %d rows of logits", n_want);
    tcq_session *rs[TCQ_PREFILL_CHUNK];
    int pos[TCQ_PREFILL_CHUNK], w = 0;
    int32_t tok[TCQ_PREFILL_CHUNK];
    int b = 0;
    while (st == TCQ_OK && b < nb) {
        /* one forward: a sequence alone, or (merge_rows) as many whole sequences as fit the rows */
        int e = b + 1, M = seqs[b].n;
        if (merge_rows && M <= TCQ_PREFILL_CHUNK)
            while (e < nb && M + seqs[e].n <= TCQ_PREFILL_CHUNK) M += seqs[e++].n;
        if (e == b + 1) {   /* alone: chunked as tcq_model_prefill, the last chunk's rows kept in m->x */
            const tcq_prefill_seq *q = &seqs[b];
            tcq_session *s = q->sess;
            for (int i = 0; i < q->n && st == TCQ_OK; i += TCQ_PREFILL_CHUNK) {
                const int Mi = TCQ_MIN(TCQ_PREFILL_CHUNK, q->n - i);
                for (int r = 0; r < Mi; r++) rs[r] = s, pos[r] = s->pos + r;
                const int keep = i + Mi == q->n && q->last_logits ? Mi - 1 : Mi;   /* the row copied below */
                st = forward_rows(m, rs, pos, q->tokens + i, Mi, Mi, NULL, keep);
                if (st == TCQ_OK) s->pos += Mi;
                if (st == TCQ_OK && i + Mi == q->n && q->last_logits)
                    memcpy(last + (size_t)w++ * d, m->x + (size_t)(Mi - 1) * d, (size_t)d * sizeof *last);
            }
        } else {
            int r = 0;
            for (int j = b; j < e; j++)
                for (int i = 0; i < seqs[j].n; i++, r++) rs[r] = seqs[j].sess, pos[r] = seqs[j].sess->pos + i, tok[r] = seqs[j].tokens[i];
            st = forward_rows(m, rs, pos, tok, M, M, NULL, 0);
            r = 0;
            for (int j = b; j < e && st == TCQ_OK; j++) {
                r += seqs[j].n;
                seqs[j].sess->pos += seqs[j].n;
                if (seqs[j].last_logits) memcpy(last + (size_t)w++ * d, m->x + (size_t)(r - 1) * d, (size_t)d * sizeof *last);
            }
        }
        b = e;
    }
    /* the last rows' logits in one lm_head call of n_want rows */
    if (st == TCQ_OK && n_want) st = head_rows(m, last, n_want, lg);
    for (int j = 0, i = 0; st == TCQ_OK && j < nb; j++)
        if (seqs[j].last_logits) memcpy(seqs[j].last_logits, lg + (size_t)i++ * V, V * sizeof *lg);
    tcq_afree(last);
    tcq_afree(lg);
    return st;
}

tcq_status tcq_model_layer_forward(tcq_model *m, tcq_session *s, const tcq_layer *L, int tap_layer, float *x, int n)
{
    if (!m || !s || !L || !x || n < 0 || n > s->ctx - s->pos)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "layer forward: bad arguments (%d rows at position %d)", n, s ? s->pos : 0);
    TCQ_TRY(ensure_att_scratch(m, s->ctx));
    tcq_session *rs[TCQ_PREFILL_CHUNK];
    int pos[TCQ_PREFILL_CHUNK];
    for (int i = 0; i < n; i += TCQ_PREFILL_CHUNK) {
        const int M = TCQ_MIN(TCQ_PREFILL_CHUNK, n - i);
        for (int r = 0; r < M; r++) rs[r] = s, pos[r] = s->pos + r;
        const int seg[2] = {0, M};
        TCQ_TRY(layer_rows(m, L, 0, tap_layer, rs, pos, M, seg, 1, x + (size_t)i * m->cfg.dim, 0));
        s->pos += M;
    }
    return TCQ_OK;
}
