/* Sessions: one sequence's KV cache [n_layers, ctx, kv_dim] (f32 or f16) and its position. */
#include "model/model.h"

#include <string.h>

size_t tcq_model_kv_bytes(const tcq_model *m, int ctx, tcq_kv_dtype kv)
{
    if (ctx <= 0) ctx = m->cfg.max_seq;
    return 2 * (size_t)m->cfg.n_layers * ctx * m->cfg.n_kv_heads * m->cfg.head_dim * (kv == TCQ_KV_F16 ? 2 : 4);
}

tcq_status tcq_session_create(const tcq_model *m, int ctx, tcq_kv_dtype kv, tcq_session **out)
{
    if (!m || !out || (kv != TCQ_KV_F32 && kv != TCQ_KV_F16))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_session_create: bad arguments");
    *out = NULL;
    if (ctx <= 0) ctx = m->cfg.max_seq;
    if (ctx > (1 << 24)) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_session_create: context %d is too large", ctx);
    tcq_session *s = calloc(1, sizeof *s);
    if (!s) return tcq_fail(TCQ_ERR_NOMEM, "session: out of memory");
    s->ctx = ctx;
    if (m->cu) kv = TCQ_KV_F16;   /* the device attention reads f16 caches */
    s->kv = kv;
    s->n_layers = m->cfg.n_layers;
    s->kv_dim = m->cfg.n_kv_heads * m->cfg.head_dim;
    s->bytes = tcq_model_kv_bytes(m, ctx, kv);
    if (m->cu) {
        tcq_status st = tcq_session_cuda_alloc(m, s);
        if (st != TCQ_OK) {
            free(s);
            return st;
        }
        *out = s;
        return TCQ_OK;
    }
    s->kcache = tcq_amalloc(s->bytes / 2);
    s->vcache = tcq_amalloc(s->bytes / 2);
    if (!s->kcache || !s->vcache) {
        tcq_session_free(s);
        return tcq_fail(TCQ_ERR_NOMEM, "session: KV cache of %zu bytes", s->bytes);
    }
    *out = s;
    return TCQ_OK;
}

void tcq_session_free(tcq_session *s)
{
    if (!s) return;
    if (s->on_device) {
        tcq_session_cuda_release(s);
        free(s);
        return;
    }
    tcq_afree(s->kcache);
    tcq_afree(s->vcache);
    free(s);
}

int tcq_session_pos(const tcq_session *s) { return s->pos; }
int tcq_session_ctx(const tcq_session *s) { return s->ctx; }
size_t tcq_session_kv_bytes(const tcq_session *s) { return s->bytes; }

tcq_status tcq_session_rewind(tcq_session *s, int pos)
{
    if (!s || pos < 0 || pos > s->pos)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_session_rewind: position %d outside [0, %d]", pos, s ? s->pos : 0);
    s->pos = pos;
    return TCQ_OK;
}

tcq_status tcq_session_copy(tcq_session *dst, const tcq_session *src, int n)
{
    if (!dst || !src || dst == src)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_session_copy: two distinct sessions are needed");
    if (dst->on_device || src->on_device)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "tcq_session_copy: sessions on a device are not copied");
    if (dst->kv != src->kv || dst->n_layers != src->n_layers || dst->kv_dim != src->kv_dim)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_session_copy: the sessions' caches differ (dtype or geometry)");
    if (n < 0 || n > src->pos || n > dst->ctx)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_session_copy: %d positions, the source holds %d, the destination %d",
                        n, src->pos, dst->ctx);
    /* [n_layers, ctx, kv_dim] each: a layer's first n positions are contiguous */
    const size_t es = src->kv == TCQ_KV_F16 ? 2 : 4, row = (size_t)src->kv_dim * es, len = (size_t)n * row;
    for (int l = 0; l < src->n_layers && len; l++) {
        memcpy((char *)dst->kcache + (size_t)l * dst->ctx * row, (const char *)src->kcache + (size_t)l * src->ctx * row, len);
        memcpy((char *)dst->vcache + (size_t)l * dst->ctx * row, (const char *)src->vcache + (size_t)l * src->ctx * row, len);
    }
    dst->pos = n;
    return TCQ_OK;
}
