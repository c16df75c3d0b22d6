/* Model lifetime: load dispatch, rope tables, scratch, embedding lookup, free. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

tcq_status tcq_model_own(tcq_model *m, void *p)
{
    if (!p) return tcq_fail(TCQ_ERR_NOMEM, "model: out of memory");
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 32;
        void **o = realloc(m->owned, (size_t)cap * sizeof *o);
        if (!o) {
            tcq_afree(p);
            return tcq_fail(TCQ_ERR_NOMEM, "model: out of memory");
        }
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return TCQ_OK;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* inv_freq[i] = theta^(-2i/d), computed in f32 as transformers does, then llama3 scaling. */
static tcq_status rope_tables(tcq_model *m)
{
    const tcq_model_config *c = &m->cfg;
    int half = c->head_dim / 2;
    float *f = tcq_amalloc((size_t)half * sizeof *f);
    TCQ_TRY(tcq_model_own(m, f));
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)c->head_dim;
        f[i] = 1.0f / powf((float)c->rope_theta, e);
        if (c->rope_llama3) {
            double lo_wl = c->rope_orig_max_pos / c->rope_low_freq_factor;
            double hi_wl = c->rope_orig_max_pos / c->rope_high_freq_factor;
            double wl = 2.0 * 3.141592653589793 / f[i];
            double fr = f[i];
            if (wl > lo_wl) {
                fr = fr / c->rope_factor;
            } else if (wl >= hi_wl) {
                double sm = (c->rope_orig_max_pos / wl - c->rope_low_freq_factor) /
                            (c->rope_high_freq_factor - c->rope_low_freq_factor);
                fr = (1.0 - sm) * fr / c->rope_factor + sm * fr;
            }
            f[i] = (float)fr;
        }
    }
    m->rope_inv_freq = f;
    return TCQ_OK;
}

tcq_status tcq_model_finish(tcq_model *m, const tcq_model_opts *opts)
{
    const tcq_model_config *c = &m->cfg;
    TCQ_TRY(rope_tables(m));
    m->attn = tcq_attn_select(tcq_isa_active());
    m->softmax = tcq_attn_softmax_select(tcq_isa_active());
    TCQ_TRY(tcq_pool_create(opts ? opts->n_threads : 0, &m->pool));
    TCQ_TRY(tcq_kctx_create(m->pool, opts ? opts->path : TCQ_PATH_AUTO, &m->kctx));
    size_t R = TCQ_PREFILL_CHUNK;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t wide = (size_t)TCQ_MAX(c->dim, (int)qd);
    float **bufs[] = {&m->x, &m->xb, &m->xb2, &m->q, &m->k, &m->v, &m->att, &m->hb};
    size_t sizes[] = {c->dim, wide, wide, qd, kvd, kvd, qd, c->hidden_dim};
    for (int i = 0; i < 8; i++) {
        *bufs[i] = tcq_amalloc(R * sizes[i] * sizeof(float));
        TCQ_TRY(tcq_model_own(m, *bufs[i]));
    }
    snprintf(m->device_name, sizeof m->device_name, "cpu");
    tcq_device dev = opts ? opts->device : TCQ_DEVICE_CPU;
    const int idx = opts ? opts->device_index : 0;
    if (dev == TCQ_DEVICE_AUTO) dev = tcq_model_cuda_present(idx) ? TCQ_DEVICE_CUDA : TCQ_DEVICE_CPU;
    if (dev == TCQ_DEVICE_CUDA) return tcq_model_cuda_init(m, opts);
    if (dev != TCQ_DEVICE_CPU) return tcq_fail(TCQ_ERR_INVALID_ARG, "model: unknown device %d", (int)dev);
    return TCQ_OK;
}

/* Touch one byte per page of every mapped tensor (the sum keeps the reads). */
static void prefault(tcq_model *m)
{
    size_t total = m->map ? m->map_len : 0, done = 0, next = 0;
    int64_t n = m->st ? tcq_st_set_count(m->st) : 0;
    for (int64_t i = 0; i < n; i++) total += tcq_st_set_tensor(m->st, i)->nbytes;
    volatile unsigned char sink = 0;
    for (int64_t i = -1; i < n; i++) {
        const unsigned char *p;
        size_t len;
        if (i < 0) {
            p = m->map;
            len = m->map ? m->map_len : 0;
        } else {
            p = tcq_st_set_tensor(m->st, i)->data;
            len = tcq_st_set_tensor(m->st, i)->nbytes;
        }
        for (size_t o = 0; o < len; o += 4096) {
            sink ^= p[o];
            if (m->opts.progress && done + o >= next) {
                m->opts.progress(m->opts.progress_arg, total ? (double)(done + o) / total : 1.0, "reading weights");
                next += total / 100 + 1;
            }
        }
        done += len;
    }
    (void)sink;
    if (m->opts.progress) m->opts.progress(m->opts.progress_arg, 1.0, "reading weights");
}

tcq_status tcq_model_load(const char *path, const tcq_model_opts *opts, tcq_model **out)
{
    if (!path || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_model_load: NULL argument");
    *out = NULL;
    tcq_model *m = calloc(1, sizeof *m);
    if (!m) return tcq_fail(TCQ_ERR_NOMEM, "model: out of memory");
    if (opts) m->opts = *opts;
    struct stat st;
    tcq_status s;
    if (stat(path, &st) != 0) s = tcq_fail(TCQ_ERR_IO, "%s: no such file or directory", path);
    else if (!S_ISDIR(st.st_mode) && ends_with(path, ".bin")) s = tcq_model_load_llama2c(m, path);
    else s = tcq_model_load_hf(m, path);
    if (s == TCQ_OK) s = tcq_model_finish(m, opts);
    if (s == TCQ_OK && m->opts.prefault) prefault(m);
    if (s != TCQ_OK) {
        tcq_model_free(m);
        return s;
    }
    *out = m;
    return TCQ_OK;
}

void tcq_model_free(tcq_model *m)
{
    if (!m) return;
    if (m->cu) tcq_model_cuda_free(m);
    tcq_kctx_free(m->kctx);
    tcq_afree(m->att_scores);
    tcq_afree(m->blk_scratch);
    tcq_pool_free(m->pool);
    for (int i = 0; i < m->n_owned; i++) tcq_afree(m->owned[i]);
    free(m->owned);
    free(m->layers);
    if (m->st) tcq_st_set_close(m->st);
    if (m->map) munmap(m->map, m->map_len);
    free(m);
}

const tcq_model_config *tcq_model_get_config(const tcq_model *m) { return &m->cfg; }
size_t tcq_model_weight_bytes(const tcq_model *m) { return m->weight_bytes; }
const char *tcq_model_describe(const tcq_model *m) { return m->describe; }
const char *tcq_model_device(const tcq_model *m) { return m->device_name[0] ? m->device_name : "cpu"; }

static float af_param(const tcq_affine *a, size_t i)
{
    switch (a->sdtype) {
    case TCQ_DTYPE_F16: return tcq_f16_to_f32(((const uint16_t *)a->scales)[i]);
    case TCQ_DTYPE_BF16: return tcq_bf16_to_f32(((const uint16_t *)a->scales)[i]);
    default: return ((const float *)a->scales)[i];
    }
}
static float af_bias(const tcq_affine *a, size_t i)
{
    switch (a->sdtype) {
    case TCQ_DTYPE_F16: return tcq_f16_to_f32(((const uint16_t *)a->biases)[i]);
    case TCQ_DTYPE_BF16: return tcq_bf16_to_f32(((const uint16_t *)a->biases)[i]);
    default: return ((const float *)a->biases)[i];
    }
}

void tcq_model_embed(const tcq_model *m, int32_t t, float *out)
{
    const tcq_weight *e = &m->emb;
    const int64_t d = e->in;
    switch (e->fmt) {
    case TCQ_WF_F32: memcpy(out, (const float *)e->dense + (size_t)t * d, (size_t)d * sizeof *out); break;
    case TCQ_WF_F16:
        for (int64_t j = 0; j < d; j++) out[j] = tcq_f16_to_f32(((const uint16_t *)e->dense)[(size_t)t * d + j]);
        break;
    case TCQ_WF_BF16:
        for (int64_t j = 0; j < d; j++) out[j] = tcq_bf16_to_f32(((const uint16_t *)e->dense)[(size_t)t * d + j]);
        break;
    case TCQ_WF_AFFINE: {
        const tcq_affine *a = &e->af;
        const uint32_t *row = a->w + (size_t)t * (size_t)(d * a->bits / 32);
        const size_t groups = (size_t)(d / a->group_size);
        for (int64_t j = 0; j < d; j++) {
            uint64_t bit = (uint64_t)j * a->bits;
            uint32_t q = (row[bit >> 5] >> (bit & 31)) & ((1u << a->bits) - 1u);
            size_t g = (size_t)t * groups + (size_t)(j / a->group_size);
            out[j] = fmaf(af_param(a, g), (float)q, af_bias(a, g));   /* the kernels' contract */
        }
        break;
    }
    default: memset(out, 0, (size_t)d * sizeof *out); break;
    }
}
