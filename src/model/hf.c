/* Hugging Face model directories: config.json + safetensors (via the io module).  Tensors are
 * bound as views into the mappings; norm gains are converted to f32 once. */
#include "model/model.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static tcq_status read_text(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tcq_fail(TCQ_ERR_IO, "%s: cannot open", path);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 > cap) {
            cap = cap ? 2 * cap : 65536;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return tcq_fail(TCQ_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return tcq_fail(TCQ_ERR_IO, "%s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return TCQ_OK;
}

typedef struct hf_ctx {
    tcq_model *m;
    const char *dir;          /* for messages */
    tcq_qconfig *q;
} hf_ctx;

static const tcq_tensor_info *find(hf_ctx *h, const char *name)
{
    const tcq_tensor_info *t = tcq_st_set_find(h->m->st, name);
    if (!t) {
        char alt[640];
        snprintf(alt, sizeof alt, "language_model.%s", name);
        t = tcq_st_set_find(h->m->st, alt);
    }
    return t;
}

static tcq_status need(hf_ctx *h, const char *name, const tcq_tensor_info **out)
{
    *out = find(h, name);
    if (!*out) return tcq_fail(TCQ_ERR_NOT_FOUND, "%s: tensor %s not found", h->dir, name);
    return TCQ_OK;
}

static tcq_status check_shape(const tcq_tensor_info *t, int64_t a, int64_t b /* -1: 1-D */)
{
    int ok = b < 0 ? (t->ndim == 1 && t->shape[0] == a) : (t->ndim == 2 && t->shape[0] == a && t->shape[1] == b);
    if (ok) return TCQ_OK;
    char got[96] = "", *p = got;
    for (int i = 0; i < t->ndim && p < got + sizeof got - 24; i++) p += sprintf(p, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (b < 0) return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: shape [%s], expected [%lld]", t->file, t->name, got, (long long)a);
    return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: shape [%s], expected [%lld, %lld]", t->file, t->name, got,
                    (long long)a, (long long)b);
}

static int is_float(tcq_dtype d) { return d == TCQ_DTYPE_F32 || d == TCQ_DTYPE_F16 || d == TCQ_DTYPE_BF16; }

/* A norm gain [n] in f32 (converted copy; the model owns it). */
static tcq_status bind_norm(hf_ctx *h, const char *name, int64_t n, const float **out)
{
    const tcq_tensor_info *t;
    TCQ_TRY(need(h, name, &t));
    if (!is_float(t->dtype))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: dtype %s, expected F32, F16 or BF16", t->file, t->name,
                        tcq_dtype_name(t->dtype));
    TCQ_TRY(check_shape(t, n, -1));
    float *f = tcq_amalloc((size_t)n * sizeof *f);
    TCQ_TRY(tcq_model_own(h->m, f));
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == TCQ_DTYPE_F32) memcpy(&f[i], (const char *)t->data + 4 * i, 4);
        else {
            uint16_t u;
            memcpy(&u, (const char *)t->data + 2 * i, 2);
            f[i] = t->dtype == TCQ_DTYPE_F16 ? tcq_f16_to_f32(u) : tcq_bf16_to_f32(u);
        }
    }
    h->m->weight_bytes += t->nbytes;
    *out = f;
    return TCQ_OK;
}

static tcq_status bind_affine(hf_ctx *h, const char *module, const tcq_qentry *e, const tcq_tensor_info *wt,
                              int64_t out, int64_t in, tcq_weight *w)
{
    char name[512];
    const tcq_tensor_info *sc, *bi;
    snprintf(name, sizeof name, "%s.scales", module);
    TCQ_TRY(need(h, name, &sc));
    snprintf(name, sizeof name, "%s.biases", module);
    TCQ_TRY(need(h, name, &bi));
    if (e->bits != 4 && e->bits != 8)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: module %s: affine bits %d (4 or 8)", h->dir, module, e->bits);
    if (e->group_size != 32 && e->group_size != 64 && e->group_size != 128)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: module %s: affine group_size %d (32, 64, 128)", h->dir, module,
                        e->group_size);
    if (in % e->group_size)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: module %s: in %lld not a multiple of group_size %d", h->dir, module,
                        (long long)in, e->group_size);
    if (wt->dtype != TCQ_DTYPE_U32)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: dtype %s, expected U32", wt->file, wt->name, tcq_dtype_name(wt->dtype));
    TCQ_TRY(check_shape(wt, out, in * e->bits / 32));
    for (int i = 0; i < 2; i++) {
        const tcq_tensor_info *t = i ? bi : sc;
        if (!is_float(t->dtype) || t->dtype != sc->dtype)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: dtype %s (scales and biases: one float dtype)", t->file,
                            t->name, tcq_dtype_name(t->dtype));
        TCQ_TRY(check_shape(t, out, in / e->group_size));
    }
    w->fmt = TCQ_WF_AFFINE;
    w->af.bits = e->bits;
    w->af.group_size = e->group_size;
    w->af.out = out;
    w->af.in = in;
    w->af.w = wt->data;
    w->af.scales = sc->data;
    w->af.biases = bi->data;
    w->af.sdtype = sc->dtype;
    h->m->weight_bytes += wt->nbytes + sc->nbytes + bi->nbytes;
    return TCQ_OK;
}

/* A linear layer (or the embedding table) module -> tcq_weight [out, in] in whatever format the
 * quantization entry says. */
static tcq_status bind_linear(hf_ctx *h, const char *module, int64_t out, int64_t in, tcq_weight *w)
{
    char name[512];
    const tcq_tensor_info *wt;
    snprintf(name, sizeof name, "%s.weight", module);
    TCQ_TRY(need(h, name, &wt));
    memset(w, 0, sizeof *w);
    w->out = out;
    w->in = in;
    tcq_qentry e = tcq_qconfig_lookup(h->q, module);
    /* An unquantized module stored densely even if a default entry exists. */
    if (e.mode != TCQ_QMODE_NONE && is_float(wt->dtype)) e.mode = TCQ_QMODE_NONE;
    switch (e.mode) {
    case TCQ_QMODE_NONE:
        if (!is_float(wt->dtype))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: dtype %s, expected F32, F16 or BF16 (no quantization entry)",
                            wt->file, wt->name, tcq_dtype_name(wt->dtype));
        TCQ_TRY(check_shape(wt, out, in));
        w->fmt = wt->dtype == TCQ_DTYPE_F32 ? TCQ_WF_F32 : wt->dtype == TCQ_DTYPE_F16 ? TCQ_WF_F16 : TCQ_WF_BF16;
        w->dense = wt->data;
        h->m->weight_bytes += wt->nbytes;
        return TCQ_OK;
    case TCQ_QMODE_TRELLIS: {
        const tcq_tensor_info *sc;
        snprintf(name, sizeof name, "%s.scales", module);
        TCQ_TRY(need(h, name, &sc));
        TCQ_TRY(tcq_trellis_from_tensors(module, &e, wt, sc, &w->tr));
        if (tcq_trellis_out(&w->tr) != out || tcq_trellis_in(&w->tr) != in)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module %s: trellis is [%lld, %lld], expected [%lld, %lld]", wt->file,
                            module, (long long)tcq_trellis_out(&w->tr), (long long)tcq_trellis_in(&w->tr),
                            (long long)out, (long long)in);
        w->fmt = TCQ_WF_TRELLIS;
        h->m->weight_bytes += wt->nbytes + sc->nbytes;
        return TCQ_OK;
    }
    case TCQ_QMODE_AFFINE: return bind_affine(h, module, &e, wt, out, in, w);
    }
    return tcq_fail(TCQ_ERR_INTERNAL, "%s: module %s: unknown quantization mode", h->dir, module);
}

static tcq_status bind_all(hf_ctx *h)
{
    tcq_model *m = h->m;
    const tcq_model_config *c = &m->cfg;
    const int64_t d = c->dim, hid = c->hidden_dim, qd = (int64_t)c->n_heads * c->head_dim;
    const int64_t kvd = (int64_t)c->n_kv_heads * c->head_dim;
    char p[256];
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return tcq_fail(TCQ_ERR_NOMEM, "model: out of memory");
    TCQ_TRY(bind_linear(h, "model.embed_tokens", c->vocab_size, d, &m->emb));
    if (m->emb.fmt == TCQ_WF_TRELLIS)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: model.embed_tokens: trellis embeddings are not supported", h->dir);
    for (int l = 0; l < c->n_layers; l++) {
        tcq_layer *L = &m->layers[l];
        if (m->opts.progress) {
            snprintf(p, sizeof p, "layer %d of %d", l + 1, c->n_layers);
            m->opts.progress(m->opts.progress_arg, (double)l / c->n_layers, p);
        }
#define MOD(s) (snprintf(p, sizeof p, "model.layers.%d.%s", l, s), p)
        TCQ_TRY(bind_norm(h, MOD("input_layernorm.weight"), d, &L->attn_norm));
        TCQ_TRY(bind_norm(h, MOD("post_attention_layernorm.weight"), d, &L->ffn_norm));
        TCQ_TRY(bind_linear(h, MOD("self_attn.q_proj"), qd, d, &L->wq));
        TCQ_TRY(bind_linear(h, MOD("self_attn.k_proj"), kvd, d, &L->wk));
        TCQ_TRY(bind_linear(h, MOD("self_attn.v_proj"), kvd, d, &L->wv));
        TCQ_TRY(bind_linear(h, MOD("self_attn.o_proj"), d, qd, &L->wo));
        TCQ_TRY(bind_linear(h, MOD("mlp.gate_proj"), hid, d, &L->gate));
        TCQ_TRY(bind_linear(h, MOD("mlp.up_proj"), hid, d, &L->up));
        TCQ_TRY(bind_linear(h, MOD("mlp.down_proj"), d, hid, &L->down));
        if (c->arch == TCQ_ARCH_QWEN3) {
            TCQ_TRY(bind_norm(h, MOD("self_attn.q_norm.weight"), c->head_dim, &L->q_norm));
            TCQ_TRY(bind_norm(h, MOD("self_attn.k_norm.weight"), c->head_dim, &L->k_norm));
        }
#undef MOD
    }
    TCQ_TRY(bind_norm(h, "model.norm.weight", d, &m->final_norm));
    if (m->opts.progress) m->opts.progress(m->opts.progress_arg, 1.0, "done");
    if (m->cfg.tied_embeddings < 0) m->cfg.tied_embeddings = find(h, "lm_head.weight") == NULL;
    /* Tied, unless the artifact stores a quantized lm_head of its own (then it is the one the
     * quantizer meant to be used). */
    int own = !c->tied_embeddings ||
              (find(h, "lm_head.weight") && tcq_qconfig_lookup(h->q, "lm_head").mode != TCQ_QMODE_NONE);
    if (own) TCQ_TRY(bind_linear(h, "lm_head", c->vocab_size, d, &m->lm_head));
    else m->lm_head = m->emb;
    return TCQ_OK;
}

static void describe(tcq_model *m)
{
    int counts[TCQ_WF_COUNT] = {0}, kmin = 99, kmax = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const tcq_weight *ws[] = {&m->layers[l].wq, &m->layers[l].wk, &m->layers[l].wv, &m->layers[l].wo,
                                  &m->layers[l].gate, &m->layers[l].up, &m->layers[l].down};
        for (int i = 0; i < 7; i++) {
            counts[ws[i]->fmt]++;
            if (ws[i]->fmt == TCQ_WF_TRELLIS) {
                kmin = TCQ_MIN(kmin, ws[i]->tr.p.k);
                kmax = TCQ_MAX(kmax, ws[i]->tr.p.k);
            }
        }
    }
    static const char *names[] = {"f32", "f16", "bf16", "trellis", "affine"};
    char *p = m->describe, *end = m->describe + sizeof m->describe;
    *p = 0;
    for (int f = 0; f < TCQ_WF_COUNT; f++) {
        if (!counts[f]) continue;
        p += snprintf(p, (size_t)(end - p), "%s%s", p == m->describe ? "" : " + ", names[f]);
        if (f == TCQ_WF_TRELLIS && p < end) {
            if (kmin == kmax) p += snprintf(p, (size_t)(end - p), " k=%d", kmin);
            else p += snprintf(p, (size_t)(end - p), " k=%d..%d", kmin, kmax);
        }
        if (p >= end) break;
    }
    if (p < end)
        snprintf(p, (size_t)(end - p), "; embeddings %s%s", names[m->emb.fmt], m->cfg.tied_embeddings ? " (tied)" : "");
}

tcq_status tcq_model_load_hf(tcq_model *m, const char *path)
{
    char dir[4096], cfgpath[4200];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
    } else {
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, ".");
    }
    snprintf(cfgpath, sizeof cfgpath, "%s/config.json", dir);
    char *json = NULL;
    size_t len = 0;
    TCQ_TRY(read_text(cfgpath, &json, &len));
    tcq_status s = tcq_model_config_parse(json, len, cfgpath, &m->cfg);
    hf_ctx h = {m, dir, NULL};
    if (s == TCQ_OK) s = tcq_qconfig_parse(json, len, cfgpath, &h.q);
    free(json);
    if (s == TCQ_OK) s = tcq_st_set_open(path, &m->st);
    if (s == TCQ_OK) s = bind_all(&h);
    tcq_qconfig_free(h.q);
    if (s == TCQ_OK) describe(m);
    return s;
}
