/* A trellis tensor view from a module's stored tensors and its config entry. */
#include "io.h"

#include <stdio.h>
#include <string.h>

static void shape_str(const tcq_tensor_info *t, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

static int info_ok(const tcq_tensor_info *t, size_t esize)
{
    return t->data && t->numel >= 0 && t->nbytes == (size_t)t->numel * esize && (uintptr_t)t->data % esize == 0;
}

tcq_status tcq_trellis_from_tensors(const char *module, const tcq_qentry *e, const tcq_tensor_info *weight,
                                    const tcq_tensor_info *scales, tcq_trellis *out)
{
    if (!module) module = "?";
    if (!e || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "module '%s': entry or output is NULL", module);
    if (e->mode != TCQ_QMODE_TRELLIS)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "module '%s': the quantization entry is not a trellis entry", module);
    if (!weight) return tcq_fail(TCQ_ERR_NOT_FOUND, "module '%s': tensor '%s.weight' is missing", module, module);
    if (!scales) return tcq_fail(TCQ_ERR_NOT_FOUND, "module '%s': tensor '%s.scales' is missing", module, module);
    const char *wf = weight->file ? weight->file : "?", *sf = scales->file ? scales->file : "?";
    if (weight->dtype != TCQ_DTYPE_U32)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': weight dtype %s, trellis codes are U32", wf, module,
                        tcq_dtype_name(weight->dtype));
    if (scales->dtype != TCQ_DTYPE_F16)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': scales dtype %s, trellis scales are F16", sf, module,
                        tcq_dtype_name(scales->dtype));
    if (!info_ok(weight, 4) || !info_ok(scales, 2))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "module '%s': weight or scales data missing, misaligned or mis-sized", module);

    tcq_trellis w = {.p = {.L = e->L, .k = e->bits, .T = e->group_size}, .axis = e->axis, .interleaved = e->interleaved};
    char sh[256];
    shape_str(weight, sh, sizeof sh);
    const int k = e->bits;
    if (k < 1 || k > TCQ_K_MAX) return tcq_fail(TCQ_ERR_INVALID_ARG, "module '%s': bits %d outside 1..%d", module, k, TCQ_K_MAX);
    /* A 3-D weight can only be the two-block interleave, so it is read as one even when the entry
     * does not say so (FORMAT.md leaves the signal open); tcq_trellis_check then insists on
     * k=3, axis 0, T=256. */
    if (e->interleaved || weight->ndim == 3) {
        w.interleaved = 1;
        /* [C/512, R, 48] */
        if (weight->ndim != 3 || weight->shape[2] != 48 || weight->shape[0] <= 0 || weight->shape[1] <= 0)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': interleaved weight shape %s is not [C/512, R, 48]", wf,
                            module, sh);
        w.rows = weight->shape[1];
        w.cols = weight->shape[0] * 512;
    } else {
        /* [R, C*k/32] */
        if (weight->ndim != 2 || weight->shape[0] <= 0 || weight->shape[1] <= 0)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': weight shape %s is not [R, C*%d/32]", wf, module, sh, k);
        if (weight->shape[1] > INT64_MAX / 32 || (weight->shape[1] * 32) % k)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': weight shape %s: %lld words per row do not hold whole "
                            "%d-bit weights", wf, module, sh, (long long)weight->shape[1], k);
        w.rows = weight->shape[0];
        w.cols = weight->shape[1] * 32 / k;
    }
    if (scales->ndim != 1 || scales->shape[0] != w.rows) {
        char ss[256];
        shape_str(scales, ss, sizeof ss);
        return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': scales shape %s, want [%lld] (one per coded row of %s)", sf,
                        module, ss, (long long)w.rows, sh);
    }
    w.codes = weight->data;
    w.scales = scales->data;
    tcq_status s = tcq_trellis_check(&w);
    if (s != TCQ_OK) {
        tcq_error_prefix("%s: module '%s' (weight %s)", wf, module, sh);
        return s;
    }
    *out = w;
    return TCQ_OK;
}

tcq_status tcq_trellis_from_set(const tcq_st_set *s, const tcq_qconfig *q, const char *module, tcq_trellis *out)
{
    if (!s || !q || !module || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_trellis_from_set: NULL argument");
    tcq_qentry e = tcq_qconfig_resolve(q, s, module);
    if (e.mode != TCQ_QMODE_TRELLIS)
        return tcq_fail(TCQ_ERR_NOT_FOUND, "module '%s': no trellis quantization entry", module);
    /* The tensors may be stored under the other prefix than the one asked for. */
    static const char lm[] = "language_model.";
    const size_t pl = sizeof lm - 1, ml = strlen(module);
    char *name = malloc(ml + pl + 8);
    if (!name) return tcq_fail(TCQ_ERR_NOMEM, "module '%s'", module);
    const tcq_tensor_info *w = NULL, *sc = NULL;
    for (int alt = 0; alt < 2 && !w; alt++) {
        if (!alt)
            memcpy(name, module, ml + 1);
        else if (strncmp(module, lm, pl) == 0)
            memcpy(name, module + pl, ml - pl + 1);
        else {
            memcpy(name, lm, pl);
            memcpy(name + pl, module, ml + 1);
        }
        const size_t nl = strlen(name);
        memcpy(name + nl, ".weight", 8);
        w = tcq_st_set_find(s, name);
        memcpy(name + nl, ".scales", 8);
        sc = tcq_st_set_find(s, name);
    }
    free(name);
    return tcq_trellis_from_tensors(module, &e, w, sc, out);
}
