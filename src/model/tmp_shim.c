/* TEMPORARY: dense-only stand-ins for the kernels API (and the HF loader, which needs the io
 * module) until those land on main.  Delete this file when merging them. */
#include "model/model.h"

#include <math.h>

struct tcq_kctx {
    tcq_pool *pool;
};

tcq_status tcq_kctx_create(tcq_pool *pool, tcq_kpath path, tcq_kctx **out)
{
    (void)path;
    *out = calloc(1, sizeof **out);
    if (!*out) return tcq_fail(TCQ_ERR_NOMEM, "kctx");
    (*out)->pool = pool;
    return TCQ_OK;
}
void tcq_kctx_free(tcq_kctx *ctx) { free(ctx); }

static float wval(const tcq_weight *w, int64_t i)
{
    switch (w->fmt) {
    case TCQ_WF_F32: return ((const float *)w->dense)[i];
    case TCQ_WF_F16: return tcq_f16_to_f32(((const uint16_t *)w->dense)[i]);
    default: return tcq_bf16_to_f32(((const uint16_t *)w->dense)[i]);
    }
}

tcq_status tcq_linear(const tcq_weight *w, const float *x, float *y, int64_t M, tcq_kctx *ctx)
{
    (void)ctx;
    if (w->fmt > TCQ_WF_BF16) return tcq_fail(TCQ_ERR_UNSUPPORTED, "shim: dense only");
    for (int64_t r = 0; r < M; r++)
        for (int64_t o = 0; o < w->out; o++) {
            double acc = 0;
            for (int64_t i = 0; i < w->in; i++) acc += (double)wval(w, o * w->in + i) * x[r * w->in + i];
            y[r * w->out + o] = (float)acc;
        }
    return TCQ_OK;
}

tcq_status tcq_linear_swiglu(const tcq_weight *gate, const tcq_weight *up, const float *x, float *y, int64_t M,
                             tcq_kctx *ctx)
{
    float *u = malloc((size_t)(M * up->out) * sizeof *u);
    if (!u) return tcq_fail(TCQ_ERR_NOMEM, "shim");
    tcq_status s = tcq_linear(gate, x, y, M, ctx);
    if (s == TCQ_OK) s = tcq_linear(up, x, u, M, ctx);
    for (int64_t i = 0; s == TCQ_OK && i < M * up->out; i++) y[i] = y[i] / (1.0f + expf(-y[i])) * u[i];
    free(u);
    return s;
}

/* io stand-ins: HF directories fail until the io module lands. */
tcq_status tcq_st_set_open(const char *path, tcq_st_set **out)
{
    *out = NULL;
    return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: safetensors needs the io module", path);
}
void tcq_st_set_close(tcq_st_set *s) { (void)s; }
const tcq_tensor_info *tcq_st_set_find(const tcq_st_set *s, const char *name)
{
    (void)s;
    (void)name;
    return NULL;
}
tcq_status tcq_qconfig_parse(const char *json, size_t len, const char *label, tcq_qconfig **out)
{
    (void)json;
    (void)len;
    (void)label;
    *out = NULL;
    return TCQ_OK;
}
void tcq_qconfig_free(tcq_qconfig *q) { (void)q; }
tcq_qentry tcq_qconfig_lookup(const tcq_qconfig *q, const char *module)
{
    (void)q;
    (void)module;
    tcq_qentry e = {0};
    return e;
}
tcq_status tcq_trellis_from_tensors(const char *module, const tcq_qentry *e, const tcq_tensor_info *weight,
                                    const tcq_tensor_info *scales, tcq_trellis *out)
{
    (void)e;
    (void)weight;
    (void)scales;
    (void)out;
    return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: needs the io module", module);
}
const char *tcq_dtype_name(tcq_dtype t)
{
    (void)t;
    return "?";
}
tcq_status tcq_st_writer_create(tcq_st_writer **out)
{
    *out = NULL;
    return tcq_fail(TCQ_ERR_UNSUPPORTED, "safetensors writer needs the io module");
}
void tcq_st_writer_free(tcq_st_writer *w) { (void)w; }
tcq_status tcq_st_writer_add(tcq_st_writer *w, const char *name, tcq_dtype dtype, int ndim, const int64_t *shape,
                             const void *data, size_t nbytes)
{
    (void)w, (void)name, (void)dtype, (void)ndim, (void)shape, (void)data, (void)nbytes;
    return TCQ_ERR_UNSUPPORTED;
}
tcq_status tcq_st_writer_write(tcq_st_writer *w, const char *path)
{
    (void)w, (void)path;
    return TCQ_ERR_UNSUPPORTED;
}
