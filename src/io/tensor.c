/* Helpers over one stored tensor: shape checks with messages, conversion to f32. */
#include "io.h"

#include <stdio.h>
#include <string.h>

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

tcq_status tcq_tensor_check(const tcq_tensor_info *t, const char *name, int dtype, int ndim, const int64_t *shape)
{
    if (!t) return tcq_fail(TCQ_ERR_NOT_FOUND, "tensor '%s' is missing", name ? name : "?");
    const char *file = t->file ? t->file : "?";
    if (dtype >= 0 && t->dtype != (tcq_dtype)dtype)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': dtype %s, want %s", file, t->name, tcq_dtype_name(t->dtype),
                        tcq_dtype_name((tcq_dtype)dtype));
    if (dtype == TCQ_TENSOR_ANY_FLOAT && t->dtype != TCQ_DTYPE_F32 && t->dtype != TCQ_DTYPE_F16 &&
        t->dtype != TCQ_DTYPE_BF16)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': dtype %s, want F32, F16 or BF16", file, t->name,
                        tcq_dtype_name(t->dtype));
    int ok = ndim < 0 || t->ndim == ndim;
    for (int d = 0; ok && ndim > 0 && d < ndim; d++) ok = shape[d] < 0 || shape[d] == t->shape[d];
    if (!ok) {
        char have[256], want[256] = "";
        shape_str(t->ndim, t->shape, have, sizeof have);
        if (ndim >= 0) {
            size_t o = (size_t)snprintf(want, sizeof want, "[");
            for (int d = 0; d < ndim && o < sizeof want; d++) {
                if (shape[d] < 0)
                    o += (size_t)snprintf(want + o, sizeof want - o, "%s*", d ? ", " : "");
                else
                    o += (size_t)snprintf(want + o, sizeof want - o, "%s%lld", d ? ", " : "", (long long)shape[d]);
            }
            if (o < sizeof want) snprintf(want + o, sizeof want - o, "]");
        }
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': shape %s, want %s", file, t->name, have, want);
    }
    return TCQ_OK;
}

tcq_status tcq_tensor_to_f32(const tcq_tensor_info *t, float *out, int64_t n)
{
    if (!t || (!out && n)) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_tensor_to_f32: NULL argument");
    const char *file = t->file ? t->file : "?";
    if (n != t->numel)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "%s: tensor '%s': %lld elements, buffer holds %lld", file, t->name,
                        (long long)t->numel, (long long)n);
    if (t->nbytes != (size_t)t->numel * tcq_dtype_size(t->dtype) || (t->numel && !t->data))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "%s: tensor '%s': data does not match its shape", file, t->name);
    switch (t->dtype) {
    case TCQ_DTYPE_F32: memcpy(out, t->data, (size_t)n * 4); return TCQ_OK;
    case TCQ_DTYPE_F16: {
        const uint16_t *h = t->data;
        for (int64_t i = 0; i < n; i++) out[i] = tcq_f16_to_f32(h[i]);
        return TCQ_OK;
    }
    case TCQ_DTYPE_BF16: {
        const uint16_t *h = t->data;
        for (int64_t i = 0; i < n; i++) out[i] = tcq_bf16_to_f32(h[i]);
        return TCQ_OK;
    }
    case TCQ_DTYPE_F64: {
        const double *d = t->data;
        for (int64_t i = 0; i < n; i++) out[i] = (float)d[i];
        return TCQ_OK;
    }
    default:
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not a float type", file, t->name,
                        tcq_dtype_name(t->dtype));
    }
}
