/* Prefill attention: a chunk of M rows of one session (positions p0..p0+M-1) against the cache,
 * per kv head as two single-threaded sgemm calls, S = Q K^T / sqrt(hd) masked causally, row
 * softmax, O = S V.  Every K and V row is read once for the whole chunk instead of once per row,
 * which is what makes long prompts cheap.  Items are the kv heads, so results do not depend on
 * the thread count.  Decode (M = 1) and batches keep the per-row core of attn_impl.h. */
#include "model/model.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* Scratch floats one item needs. */
static size_t need_floats(const tcq_model *m, const tcq_session *s, int M, int n)
{
    const size_t G = (size_t)(m->cfg.n_heads / m->cfg.n_kv_heads), hd = (size_t)m->cfg.head_dim;
    return 2 * (size_t)M * G * hd + (size_t)M * G * n + (s->kv == TCQ_KV_F16 ? 2 * (size_t)n * hd : 0);
}

typedef struct blk_job {
    tcq_model *m;
    const tcq_session *s;
    int p0, M, layer;
    int r0;   /* the rows' first index in m->q and m->att */
} blk_job;

/* Rows per attention block: the scratch grows with rows x positions, so a long prefill chunk
 * (TCQ_PREFILL_CHUNK) takes its attention in blocks of about this many rows. */
enum { ATTN_BLOCK_ROWS = 64 };

static void blk_item(void *arg, int64_t kvh, int thread)
{
    const blk_job *J = arg;
    tcq_model *m = J->m;
    const tcq_model_config *c = &m->cfg;
    const tcq_session *s = J->s;
    const int hd = c->head_dim, G = c->n_heads / c->n_kv_heads, M = J->M, n = J->p0 + M, R = M * G;
    const int qd = c->n_heads * hd;
    float *Q = m->blk_scratch + (size_t)thread * m->blk_cap;   /* [R, hd], row r*G+g */
    float *O = Q + (size_t)R * hd;                              /* [R, hd] */
    float *S = O + (size_t)R * hd;                              /* [R, n] */
    const size_t base = (size_t)J->layer * s->ctx * s->kv_dim + (size_t)kvh * hd;
    const float *K, *V;
    int ld;
    if (s->kv == TCQ_KV_F32) {
        K = (const float *)s->kcache + base;
        V = (const float *)s->vcache + base;
        ld = s->kv_dim;
    } else {
        float *Kf = S + (size_t)R * n, *Vf = Kf + (size_t)n * hd;   /* [n, hd] each */
        for (int t = 0; t < n; t++) {
            const uint16_t *k16 = (const uint16_t *)s->kcache + base + (size_t)t * s->kv_dim;
            const uint16_t *v16 = (const uint16_t *)s->vcache + base + (size_t)t * s->kv_dim;
            for (int i = 0; i < hd; i++) {
                Kf[(size_t)t * hd + i] = tcq_model_h2f(k16[i]);
                Vf[(size_t)t * hd + i] = tcq_model_h2f(v16[i]);
            }
        }
        K = Kf;
        V = Vf;
        ld = hd;
    }
    for (int r = 0; r < M; r++)
        memcpy(Q + (size_t)r * G * hd, m->q + (size_t)(J->r0 + r) * qd + (size_t)kvh * G * hd,
               (size_t)G * hd * sizeof *Q);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, n, hd, 1.0f / sqrtf((float)hd), Q, hd, K, ld, 0.0f, S, n);
    for (int i = 0; i < R; i++) {
        float *p = S + (size_t)i * n;
        const int valid = J->p0 + i / G + 1;   /* causal: positions [0, p0 + r] */
        m->softmax(p, valid);
        for (int t = valid; t < n; t++) p[t] = 0;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, hd, n, 1.0f, S, n, V, ld, 0.0f, O, hd);
    for (int r = 0; r < M; r++)
        memcpy(m->att + (size_t)(J->r0 + r) * qd + (size_t)kvh * G * hd, O + (size_t)r * G * hd,
               (size_t)G * hd * sizeof *O);
}

/* 0 if done; 1 if the chunk is better (or only) served by the per-row core. */
int tcq_attn_block(tcq_model *m, const tcq_session *s, int p0, int M, int layer, int row0)
{
    /* balanced blocks; the last has the most positions, so the largest need */
    const int nb = (M + ATTN_BLOCK_ROWS - 1) / ATTN_BLOCK_ROWS, last = M - M * (nb - 1) / nb;
    const size_t need = need_floats(m, s, last, p0 + M);
    if (M < 5 || need > ((size_t)8 << 20)) return 1;   /* small chunk, or over 32 MiB of scratch per thread */
    if ((size_t)m->blk_cap < need) {
        tcq_afree(m->blk_scratch);
        m->blk_scratch = tcq_amalloc((size_t)tcq_pool_size(m->pool) * need * sizeof(float));
        m->blk_cap = m->blk_scratch ? need : 0;
        if (!m->blk_scratch) return 1;
    }
    for (int i = 0; i < nb; i++) {
        const int r0 = M * i / nb, r1 = M * (i + 1) / nb;
        blk_job J = {m, s, p0 + r0, r1 - r0, layer, row0 + r0};
        tcq_pool_run(m->pool, m->cfg.n_kv_heads, blk_item, &J);
    }
    return 0;
}
