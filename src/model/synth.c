/* Synthetic models: a given geometry with random weights, for benchmarks and tests.  Dense
 * weights are uniform in [-a, a] with a = sqrt(3/in) (unit-variance outputs); trellis weights
 * have random code words (any word pattern is a valid code) and per-row scales giving the same
 * RMS.  Reader layers (q, k, v, gate, up, lm_head) are coded along their input (axis 1), writers
 * (o, down) along their output (axis 0), as the artifacts are. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint64_t mix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct fill_job {
    uint16_t *bf;   /* bf16 out, or */
    uint32_t *w;    /* raw words */
    int64_t n;
    float a;
    uint64_t seed;
} fill_job;

#define FILL_ITEM 65536
static void fill_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const fill_job *J = arg;
    uint64_t st = J->seed ^ ((uint64_t)item * 0xd1b54a32d192ed03ull);
    int64_t lo = item * FILL_ITEM, hi = TCQ_MIN(J->n, lo + FILL_ITEM);
    for (int64_t i = lo; i < hi; i++) {
        uint64_t r = mix(&st);
        if (J->w) J->w[i] = (uint32_t)r;
        else J->bf[i] = tcq_f32_to_bf16(J->a * (float)((double)(r >> 11) * 0x1.0p-52 - 1.0));
    }
}

/* exact: |a| < 1 and bf16's 8 significant bits fit f16's 11, but for draws below f16's normal range */
static void to_f16_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const fill_job *J = arg;
    for (int64_t i = item * FILL_ITEM; i < TCQ_MIN(J->n, (item + 1) * FILL_ITEM); i++)
        J->bf[i] = tcq_f32_to_f16(tcq_bf16_to_f32(J->bf[i]));
}

static tcq_status fill(tcq_model *m, tcq_pool *pool, uint16_t *bf, uint32_t *w, int64_t n, float a, uint64_t seed)
{
    (void)m;
    fill_job J = {bf, w, n, a, seed};
    tcq_pool_run(pool, (n + FILL_ITEM - 1) / FILL_ITEM, fill_item, &J);
    return TCQ_OK;
}

static tcq_status make_weight(tcq_model *m, tcq_pool *pool, int64_t out, int64_t in, int bits, int axis,
                              uint64_t *seed, tcq_weight *w)
{
    memset(w, 0, sizeof *w);
    w->out = out;
    w->in = in;
    const float a = sqrtf(3.0f / (float)in);
    if (bits == 0 || bits == 16) {
        uint16_t *d = tcq_amalloc((size_t)(out * in) * 2);
        TCQ_TRY(tcq_model_own(m, d));
        TCQ_TRY(fill(m, pool, d, NULL, out * in, a, mix(seed)));
        /* f16: the same bf16 draws, converted (fill_item) */
        fill_job J = {d, NULL, out * in, 0, 0};
        if (bits == 16) tcq_pool_run(pool, (out * in + FILL_ITEM - 1) / FILL_ITEM, to_f16_item, &J);
        w->fmt = bits ? TCQ_WF_F16 : TCQ_WF_BF16;
        w->dense = d;
        m->weight_bytes += (size_t)(out * in) * 2;
        return TCQ_OK;
    }
    tcq_trellis *t = &w->tr;
    t->p.L = 12;
    t->p.k = bits;
    t->p.T = 256;
    t->axis = axis;
    t->rows = axis ? out : in;
    t->cols = axis ? in : out;
    if (t->cols % 256)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "synthetic: coded rows of %lld are not a multiple of 256", (long long)t->cols);
    int64_t words = t->rows * t->cols * bits / 32;
    uint32_t *codes = tcq_amalloc((size_t)words * 4);
    uint16_t *scales = tcq_amalloc((size_t)t->rows * 2);
    TCQ_TRY(tcq_model_own(m, codes));
    TCQ_TRY(tcq_model_own(m, scales));
    TCQ_TRY(fill(m, pool, NULL, codes, words, 0, mix(seed)));
    /* uniform [-a, a] has RMS a/sqrt(3) */
    uint16_t s = tcq_f32_to_f16((float)(a / sqrt(3.0) / tcq_code_rms(12)));
    for (int64_t r = 0; r < t->rows; r++) scales[r] = s;
    t->codes = codes;
    t->scales = scales;
    w->fmt = TCQ_WF_TRELLIS;
    m->weight_bytes += (size_t)words * 4 + (size_t)t->rows * 2;
    return tcq_trellis_check(t);
}

tcq_status tcq_model_synthetic(const tcq_model_config *cfg, int bits, uint64_t seed, const tcq_model_opts *opts,
                               tcq_model **out)
{
    if (!cfg || !out || bits < 0 || (bits > 4 && bits != 16) || cfg->dim < 1 || cfg->n_layers < 1 || cfg->n_heads < 1 ||
        cfg->n_kv_heads < 1 || cfg->n_heads % cfg->n_kv_heads || cfg->head_dim < 2 || cfg->head_dim % 2 ||
        cfg->vocab_size < 1 || cfg->hidden_dim < 1)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_model_synthetic: bad geometry or bits (0 = bf16, 16 = f16, 1..4 = trellis k)");
    *out = NULL;
    tcq_model *m = calloc(1, sizeof *m);
    if (!m) return tcq_fail(TCQ_ERR_NOMEM, "model: out of memory");
    m->cfg = *cfg;
    if (m->cfg.max_seq < 1) m->cfg.max_seq = 4096;
    if (!(m->cfg.rope_theta > 1)) m->cfg.rope_theta = 1e6;
    if (!(m->cfg.norm_eps > 0)) m->cfg.norm_eps = 1e-6f;
    const tcq_model_config *c = &m->cfg;
    const int64_t d = c->dim, hid = c->hidden_dim, qd = (int64_t)c->n_heads * c->head_dim;
    const int64_t kvd = (int64_t)c->n_kv_heads * c->head_dim;
    tcq_status s = tcq_pool_create(opts ? opts->n_threads : 0, &m->pool);
    tcq_pool *pool = m->pool;
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (s == TCQ_OK && !m->layers) s = tcq_fail(TCQ_ERR_NOMEM, "model: out of memory");
    float *ones = s == TCQ_OK ? tcq_amalloc((size_t)TCQ_MAX(d, c->head_dim) * sizeof *ones) : NULL;
    if (s == TCQ_OK) s = tcq_model_own(m, ones);
    for (int64_t i = 0; s == TCQ_OK && i < TCQ_MAX(d, c->head_dim); i++) ones[i] = 1.0f;
    if (s == TCQ_OK) s = make_weight(m, pool, c->vocab_size, d, bits == 16 ? 16 : 0, 1, &seed, &m->emb);
    for (int l = 0; s == TCQ_OK && l < c->n_layers; l++) {
        tcq_layer *L = &m->layers[l];
        L->attn_norm = L->ffn_norm = ones;
        if (c->arch == TCQ_ARCH_QWEN3) L->q_norm = L->k_norm = ones;
        if (s == TCQ_OK) s = make_weight(m, pool, qd, d, bits, 1, &seed, &L->wq);
        if (s == TCQ_OK) s = make_weight(m, pool, kvd, d, bits, 1, &seed, &L->wk);
        if (s == TCQ_OK) s = make_weight(m, pool, kvd, d, bits, 1, &seed, &L->wv);
        if (s == TCQ_OK) s = make_weight(m, pool, d, qd, bits, 0, &seed, &L->wo);
        if (s == TCQ_OK) s = make_weight(m, pool, hid, d, bits, 1, &seed, &L->gate);
        if (s == TCQ_OK) s = make_weight(m, pool, hid, d, bits, 1, &seed, &L->up);
        if (s == TCQ_OK) s = make_weight(m, pool, d, hid, bits, 0, &seed, &L->down);
    }
    m->final_norm = ones;
    m->lm_head = m->emb;
    m->cfg.tied_embeddings = 1;
    if (bits == 16) snprintf(m->describe, sizeof m->describe, "synthetic f16");
    else if (bits) snprintf(m->describe, sizeof m->describe, "synthetic trellis k=%d L=12 T=256 + bf16 embeddings", bits);
    else snprintf(m->describe, sizeof m->describe, "synthetic bf16");
    if (s == TCQ_OK) {
        /* finish() creates the pool itself */
        tcq_pool_free(m->pool);
        m->pool = NULL;
        s = tcq_model_finish(m, opts);
    }
    if (s != TCQ_OK) {
        tcq_model_free(m);
        return s;
    }
    *out = m;
    return TCQ_OK;
}
