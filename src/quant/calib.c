/* Calibration: the input model runs over windows of the calibration text and every linear
 * layer's input x adds x x^T to its Hessian (double; q/k/v share one, gate/up share one).  The
 * readers' inputs are taken in the quantizer's rotated basis: the tap gets the residual stream
 * before the RMSNorm, which is normalised without its gain (the fold moves the gain into the
 * weights) and rotated (x R, the embedding rows' transform), so H matches the weights the
 * quantizer codes.  o/down inputs are not rotated by the fold. */
#include "quant.h"
#include "../model/model.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct tap_ctx {
    tcq_quant_hess *hs;
    const tcq_hadamard *h;
    tcq_pool *pool;
    float eps;
    float *fbuf;      /* [chunk, max dim] */
    double *dbuf;     /* [chunk, max dim] */
    tcq_status s;
} tap_ctx;

static void tap(void *user, int layer, int site, const float *x, int M)
{
    tap_ctx *c = user;
    if (c->s != TCQ_OK) return;
    const int64_t d = c->hs->dim[site];
    const float *src = x;
    if (site == TCQ_TAP_ATTN || site == TCQ_TAP_FFN) {
        for (int r = 0; r < M; r++) {
            const float *xr = x + (size_t)r * d;
            double ss = 0;
            for (int64_t i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
            const float inv = (float)(1.0 / sqrt((double)(float)(ss / (double)d) + (double)c->eps));
            for (int64_t i = 0; i < d; i++) c->fbuf[r * d + i] = xr[i] * inv;
        }
        c->s = tcq_hadamard_rows(c->h, c->fbuf, M, 0, c->pool);
        src = c->fbuf;
    }
    for (int64_t i = 0; i < (int64_t)M * d; i++) c->dbuf[i] = src[i];
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, M, 1.0, c->dbuf, (int)d, 1.0,
                c->hs->H[layer * TCQ_TAP_SITES + site], (int)d);
}

static tcq_status hess_alloc(tcq_quant_hess *hs)
{
    hs->H = calloc((size_t)hs->n_layers * TCQ_TAP_SITES, sizeof *hs->H);
    if (!hs->H) return tcq_fail(TCQ_ERR_NOMEM, "Hessians of %d layers", hs->n_layers);
    for (int i = 0; i < hs->n_layers * TCQ_TAP_SITES; i++) {
        const int64_t d = hs->dim[i % TCQ_TAP_SITES];
        if (!(hs->H[i] = calloc((size_t)(d * d), sizeof(double))))
            return tcq_fail(TCQ_ERR_NOMEM, "Hessian %d of %lld x %lld", i, (long long)d, (long long)d);
    }
    return TCQ_OK;
}

void tcq_quant_hess_free(tcq_quant_hess *hs)
{
    if (!hs || !hs->H) return;
    for (int i = 0; i < hs->n_layers * TCQ_TAP_SITES; i++) free(hs->H[i]);
    free(hs->H);
    hs->H = NULL;
}

static tcq_status read_text(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tcq_fail(TCQ_ERR_IO, "calibration file %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(b, cap *= 2);
        if (!nb) free(b);
        b = nb;
    }
    const int bad = ferror(f);
    fclose(f);
    if (!b) return tcq_fail(TCQ_ERR_NOMEM, "calibration file %s", path);
    if (bad) {
        free(b);
        return tcq_fail(TCQ_ERR_IO, "calibration file %s: read error", path);
    }
    if (n == 0) {
        free(b);
        return tcq_fail(TCQ_ERR_INVALID_ARG, "calibration file %s is empty", path);
    }
    *text = b;
    *len = n;
    return TCQ_OK;
}

tcq_status tcq_quant_calibrate(const char *in_dir, const tcq_hadamard *h, const tcq_quant_calib *o, tcq_pool *pool,
                               tcq_quant_hess *hs)
{
    memset(hs, 0, sizeof *hs);
    if (o->ctx < 2) return tcq_fail(TCQ_ERR_INVALID_ARG, "calibration context %d: at least 2", o->ctx);
    if (o->tokens < o->ctx)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "calibration tokens %lld: fewer than one window of %d",
                        (long long)o->tokens, o->ctx);
    char *text = NULL;
    size_t len = 0;
    TCQ_TRY(read_text(o->path, &text, &len));
    char tpath[4096];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", in_dir);
    tcq_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    tcq_status s = tcq_tokenizer_load(tpath, &tok);
    if (s == TCQ_OK) s = tcq_tokenizer_encode_alloc(tok, text, len, TCQ_TOK_NO_PARSE_SPECIAL, &ids, &n_ids);
    tcq_tokenizer_free(tok);
    free(text);
    if (s == TCQ_OK && n_ids < (size_t)o->ctx)
        s = tcq_fail(TCQ_ERR_INVALID_ARG, "calibration file %s: %zu tokens, shorter than one window of %d "
                     "(--calib-ctx)", o->path, n_ids, o->ctx);
    tcq_model *m = NULL;
    tcq_session *sess = NULL;
    const tcq_model_opts mo = {.n_threads = o->threads};
    if (s == TCQ_OK) s = tcq_model_load(in_dir, &mo, &m);
    if (s == TCQ_OK) s = tcq_session_create(m, o->ctx, TCQ_KV_F32, &sess);
    tap_ctx tc = {hs, h, pool, 0, NULL, NULL, TCQ_OK};
    if (s == TCQ_OK) {
        const tcq_model_config *cfg = &m->cfg;
        hs->n_layers = cfg->n_layers;
        hs->dim[TCQ_TAP_ATTN] = hs->dim[TCQ_TAP_FFN] = cfg->dim;
        hs->dim[TCQ_TAP_O] = (int64_t)cfg->n_heads * cfg->head_dim;
        hs->dim[TCQ_TAP_DOWN] = cfg->hidden_dim;
        hs->seed = o->seed;
        if (tcq_hadamard_size(h) != cfg->dim)
            s = tcq_fail(TCQ_ERR_FORMAT, "%s: hidden size %d differs from the config's", in_dir, cfg->dim);
        int64_t dmax = 0;
        for (int i = 0; i < TCQ_TAP_SITES; i++) dmax = TCQ_MAX(dmax, hs->dim[i]);
        tc.eps = cfg->norm_eps;
        tc.fbuf = malloc((size_t)(TCQ_PREFILL_CHUNK * dmax) * sizeof *tc.fbuf);
        tc.dbuf = malloc((size_t)(TCQ_PREFILL_CHUNK * dmax) * sizeof *tc.dbuf);
        if (s == TCQ_OK && (!tc.fbuf || !tc.dbuf)) s = tcq_fail(TCQ_ERR_NOMEM, "calibration buffers");
        if (s == TCQ_OK) s = hess_alloc(hs);
    }
    if (s == TCQ_OK) {
        m->tap = tap;
        m->tap_user = &tc;
        const int64_t windows = TCQ_MIN((int64_t)(n_ids / (size_t)o->ctx), (o->tokens + o->ctx - 1) / o->ctx);
        for (int64_t w = 0; s == TCQ_OK && w < windows; w++) {
            s = tcq_session_rewind(sess, 0);
            if (s == TCQ_OK) s = tcq_model_forward(m, sess, ids + w * o->ctx, o->ctx, NULL);
            if (s == TCQ_OK) s = tc.s;
            hs->tokens += o->ctx;
            if (o->progress) o->progress(o->progress_user, (double)(w + 1) / (double)windows);
        }
        m->tap = NULL;
    }
    for (int i = 0; s == TCQ_OK && i < hs->n_layers * TCQ_TAP_SITES; i++) {   /* dsyrk filled the upper half */
        const int64_t d = hs->dim[i % TCQ_TAP_SITES];
        double *H = hs->H[i];
        for (int64_t r = 0; r < d; r++)
            for (int64_t c = r + 1; c < d; c++) H[c * d + r] = H[r * d + c];
    }
    free(tc.fbuf);
    free(tc.dbuf);
    free(ids);
    tcq_session_free(sess);
    tcq_model_free(m);
    if (s != TCQ_OK) tcq_quant_hess_free(hs);
    return s;
}

const double *tcq_quant_hess_for(const tcq_quant_hess *hs, const char *name, int64_t *dim)
{
    int layer = -1, n = 0;
    if (!hs || !hs->H || sscanf(name, "model.layers.%d.%n", &layer, &n) != 1 || n == 0 || layer < 0 ||
        layer >= hs->n_layers)
        return NULL;
    const char *rest = name + n;
    int site = -1;
    if (!strncmp(rest, "self_attn.q_proj.", 17) || !strncmp(rest, "self_attn.k_proj.", 17) ||
        !strncmp(rest, "self_attn.v_proj.", 17))
        site = TCQ_TAP_ATTN;
    else if (!strncmp(rest, "self_attn.o_proj.", 17)) site = TCQ_TAP_O;
    else if (!strncmp(rest, "mlp.gate_proj.", 14) || !strncmp(rest, "mlp.up_proj.", 12)) site = TCQ_TAP_FFN;
    else if (!strncmp(rest, "mlp.down_proj.", 14)) site = TCQ_TAP_DOWN;
    if (site < 0) return NULL;
    *dim = hs->dim[site];
    return hs->H[layer * TCQ_TAP_SITES + site];
}

/* DIR/hessians.bin: "TCQHESS1", int64 n_layers, dims[4], tokens, seed, then every (layer, site)
 * Hessian as dim^2 little-endian doubles. */
static const char magic[8] = {'T', 'C', 'Q', 'H', 'E', 'S', 'S', '1'};

tcq_status tcq_quant_hess_save(const tcq_quant_hess *hs, const char *dir)
{
    char path[4096];
    if (mkdir(dir, 0777) && errno != EEXIST) return tcq_fail(TCQ_ERR_IO, "%s: cannot create: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/hessians.bin", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return tcq_fail(TCQ_ERR_IO, "%s: %s", path, strerror(errno));
    int64_t hdr[7] = {hs->n_layers, hs->dim[0], hs->dim[1], hs->dim[2], hs->dim[3], hs->tokens, (int64_t)hs->seed};
    int ok = fwrite(magic, 8, 1, f) == 1 && fwrite(hdr, sizeof hdr, 1, f) == 1;
    for (int i = 0; ok && i < hs->n_layers * TCQ_TAP_SITES; i++) {
        const int64_t d = hs->dim[i % TCQ_TAP_SITES];
        ok = fwrite(hs->H[i], sizeof(double), (size_t)(d * d), f) == (size_t)(d * d);
    }
    if (fclose(f) || !ok) return tcq_fail(TCQ_ERR_IO, "%s: write failed", path);
    return TCQ_OK;
}

tcq_status tcq_quant_hess_load(const char *dir, uint64_t seed, tcq_quant_hess *hs)
{
    memset(hs, 0, sizeof *hs);
    char path[4096];
    snprintf(path, sizeof path, "%s/hessians.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return tcq_fail(TCQ_ERR_IO, "%s: %s", path, strerror(errno));
    char mg[8];
    int64_t hdr[7];
    tcq_status s = TCQ_OK;
    if (fread(mg, 8, 1, f) != 1 || memcmp(mg, magic, 8) || fread(hdr, sizeof hdr, 1, f) != 1)
        s = tcq_fail(TCQ_ERR_FORMAT, "%s: not a tcq Hessian file", path);
    else if (hdr[0] <= 0 || hdr[0] > 4096 || hdr[1] <= 0 || hdr[2] <= 0 || hdr[3] <= 0 || hdr[4] <= 0 ||
             hdr[1] > 65536 || hdr[2] > 65536 || hdr[3] > 65536 || hdr[4] > 262144)
        s = tcq_fail(TCQ_ERR_FORMAT, "%s: bad header", path);
    else if ((uint64_t)hdr[6] != seed)
        s = tcq_fail(TCQ_ERR_INVALID_ARG, "%s: taken with Hadamard seed %lld, not %llu (--seed)", path,
                     (long long)hdr[6], (unsigned long long)seed);
    if (s == TCQ_OK) {
        hs->n_layers = (int)hdr[0];
        for (int i = 0; i < 4; i++) hs->dim[i] = hdr[1 + i];
        hs->tokens = hdr[5];
        hs->seed = seed;
        s = hess_alloc(hs);
    }
    for (int i = 0; s == TCQ_OK && i < hs->n_layers * TCQ_TAP_SITES; i++) {
        const int64_t d = hs->dim[i % TCQ_TAP_SITES];
        if (fread(hs->H[i], sizeof(double), (size_t)(d * d), f) != (size_t)(d * d))
            s = tcq_fail(TCQ_ERR_FORMAT, "%s: truncated (Hessian %d)", path, i);
    }
    fclose(f);
    if (s != TCQ_OK) tcq_quant_hess_free(hs);
    return s;
}
