/* tcq_quantize_model: fold, rotate, code, write.  The tensors outside the decoder layers come
 * first, then the layers in order, one at a time (f32 only while in flight).  With a calibration
 * a layer's seven projections are rotated together, its Hessians taken (calib.c) or read, its
 * tensors coded, and (sequential) the calibration stream moved through the coded layer; then
 * all of it is freed.  The outputs go to a spill file beside the artifact as they are made and
 * are copied into the one model.safetensors at the end, so nothing model-sized is resident. */
#include "quant.h"
#include "qla.h"
#include "../io/io.h"
#include "../model/model.h"

#include <errno.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct out_tensor {
    char *name;
    tcq_dtype dt;
    int ndim;
    int64_t shape[3];
    int64_t off;                /* in the spill file */
    size_t nbytes;
} out_tensor;

typedef struct qctx {
    const tcq_quantize_opts *o;
    tcq_block_params p;
    const char *in_dir;
    tcq_st_set *set;
    tcq_hadamard *h;
    tcq_pool *pool;
    tcq_cuda_ctx *gpu;          /* opts->cuda: the GPU encoder's context */
    tcq_qla *qla;               /* opts->cuda with a calibration: Hessians, LDL, LDLQ products there */
    int64_t n;                  /* hidden size: the rotated dimension */
    int tied;                   /* lm_head comes from the embedding */
    int rotate_only;            /* bits 0: fold and rotate, code nothing, keep f32 */
    out_tensor *outs;
    int n_out, cap_out;
    json_t *qobj;
    int n_layers;               /* decoder layers written (the input's, or opts->layers) */
    int *lay;                   /* per sorted tensor: its decoder layer, -1 outside them */
    tcq_quant_calib calib;      /* the calibration's options (reopened after the allocation pass) */
    tcq_quant_cal *cal;         /* the calibration stream (NULL: Hessians from a file, or none) */
    tcq_quant_hfile hin, hout;  /* --hessians / --save-hessians (f NULL: none) */
    tcq_quant_lhess lh;         /* the current layer's Hessians (H NULL: none) */
    float *recon;               /* code_rows leaves the reconstruction here when set */
    FILE *spill;                /* the outputs' bytes until the final write */
    int64_t spill_off;
    char spill_path[4200];
    double t_step;              /* clock at the start of the step being timed */
    const char *cur;            /* the tensor being processed */
    int dry;                    /* the allocation pass: code, measure the KL (sens), keep nothing */
    tcq_quant_sens *sens;       /* the allocation pass's KL of each candidate */
    int dry_slot;               /* the candidate's projection (q, k, v, o, gate, up, down) */
    double dry_kl;
    tcq_quantize_progress pr;
    tcq_quantize_cb cb;
    void *user;
    char note[512];
} qctx;

static tcq_status add_out(qctx *c, const char *name, tcq_dtype dt, int ndim, const int64_t *shape,
                          void *data, size_t nbytes)
{
    if (c->dry) {
        free(data);
        return TCQ_OK;
    }
    if (c->n_out == c->cap_out) {
        int cap = c->cap_out ? 2 * c->cap_out : 64;
        out_tensor *o = realloc(c->outs, (size_t)cap * sizeof *o);
        if (!o) {
            free(data);
            return tcq_fail(TCQ_ERR_NOMEM, "output tensor list");
        }
        c->outs = o;
        c->cap_out = cap;
    }
    out_tensor *t = &c->outs[c->n_out];
    const int ok = !nbytes || fwrite(data, 1, nbytes, c->spill) == nbytes;
    free(data);
    if (!ok) return tcq_fail(TCQ_ERR_IO, "%s: write failed (tensor %s): %s", c->spill_path, name, strerror(errno));
    t->name = strdup(name);
    if (!t->name) return tcq_fail(TCQ_ERR_NOMEM, "output tensor %s", name);
    t->dt = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->off = c->spill_off;
    t->nbytes = nbytes;
    c->spill_off += (int64_t)nbytes;
    c->n_out++;
    return TCQ_OK;
}

/* Dense output: bf16, or f32 when only rotating (so the fold can be checked to f32 precision). */
static tcq_status add_dense(qctx *c, const char *name, const float *x, int ndim, const int64_t *shape)
{
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    const size_t es = c->rotate_only ? 4 : 2;
    void *b = malloc((size_t)(numel ? numel : 1) * es);
    if (!b) return tcq_fail(TCQ_ERR_NOMEM, "tensor %s: dense copy", name);
    if (c->rotate_only) memcpy(b, x, (size_t)numel * 4);
    else
        for (int64_t i = 0; i < numel; i++) ((uint16_t *)b)[i] = tcq_f32_to_bf16(x[i]);
    c->pr.dense_weights += numel;
    return add_out(c, name, c->rotate_only ? TCQ_DTYPE_F32 : TCQ_DTYPE_BF16, ndim, shape, b, (size_t)numel * es);
}

/* Module path of "P.weight". */
static void module_of(const char *name, char *mod, size_t size)
{
    snprintf(mod, size, "%s", name);
    char *dot = strrchr(mod, '.');
    if (dot) *dot = 0;
}

/* Least-squares scales for the chosen codes: scale = <w, v> / <v, v> per row (v the code values),
 * kept only where its fp16 rounding lowers the row's squared error.  The codes were chosen for
 * the RMS scale, so this is one step of alternating minimisation, not the joint optimum.
 * *err becomes the squared error with the final scales. */
tcq_status tcq_quant_refit_scales(tcq_block_params p, const float *rows, int64_t R, int64_t C, const uint32_t *codes,
                                  uint16_t *scales, double *err)
{
    float *v = malloc((size_t)C * sizeof *v);
    if (!v) return tcq_fail(TCQ_ERR_NOMEM, "refit scales: row of %lld", (long long)C);
    const int64_t row_words = C * p.k / 32;
    double total = 0;
    for (int64_t r = 0; r < R; r++) {
        const float *w = rows + r * C;
        for (int64_t b = 0; b < C / p.T; b++)
            tcq_block_decode_f32(p, codes + r * row_words + b * tcq_block_words(p), 1.0f, v + b * p.T);
        double wv = 0, vv = 0;
        for (int64_t t = 0; t < C; t++) wv += (double)w[t] * v[t], vv += (double)v[t] * v[t];
        const uint16_t cand[2] = {scales[r], vv > 0 && wv > 0 ? tcq_f32_to_f16((float)(wv / vv)) : scales[r]};
        double best = INFINITY;
        for (int i = 0; i < 2; i++) {
            const float sc = tcq_f16_to_f32(cand[i]);
            double e = 0;
            for (int64_t t = 0; t < C; t++) {
                const double d = (double)w[t] - (double)(v[t] * sc);
                e += d * d;
            }
            if (e < best) best = e, scales[r] = cand[i];
        }
        total += best;
    }
    free(v);
    if (err) *err = total;
    return TCQ_OK;
}

typedef struct refit_job {
    tcq_block_params p;
    const float *rows;
    int64_t R, C;
    const uint32_t *codes;
    uint16_t *scales;
    double *err;              /* [R] */
    int *failed;              /* [items] */
} refit_job;

static void refit_item(void *arg, int64_t item, int thread)
{
    const refit_job *j = arg;
    const int64_t rw = j->C * j->p.k / 32;
    (void)thread;
    for (int64_t r = item * 64; r < TCQ_MIN(item * 64 + 64, j->R); r++)
        if (tcq_quant_refit_scales(j->p, j->rows + r * j->C, 1, j->C, j->codes + r * rw, j->scales + r, j->err + r) != TCQ_OK)
            j->failed[item] = 1;
}

tcq_status tcq_quant_refit_rows(tcq_pool *pool, tcq_block_params p, const float *rows, int64_t R, int64_t C,
                                const uint32_t *codes, uint16_t *scales, double *err)
{
    if (!pool) return tcq_quant_refit_scales(p, rows, R, C, codes, scales, err);
    const int64_t items = (R + 63) / 64;
    double *e = malloc((size_t)R * sizeof *e);
    int *failed = calloc((size_t)items, sizeof *failed);
    if (!e || !failed) {
        free(e);
        free(failed);
        return tcq_fail(TCQ_ERR_NOMEM, "refit scales of %lld rows", (long long)R);
    }
    refit_job j = {p, rows, R, C, codes, scales, e, failed};
    tcq_pool_run(pool, items, refit_item, &j);
    tcq_status s = TCQ_OK;
    double total = 0;   /* the rows' errors added in row order, as tcq_quant_refit_scales does */
    for (int64_t i = 0; i < items; i++)
        if (failed[i]) s = tcq_fail(TCQ_ERR_NOMEM, "refit scales: row of %lld", (long long)C);
    for (int64_t r = 0; r < R; r++) total += e[r];
    if (s == TCQ_OK && err) *err = total;
    free(e);
    free(failed);
    return s;
}

/* The LDLQ scale search's candidates: 9 by default (tinyqwen eval KL, 8 windows, k = 2 / 3 / 4:
 * 5 gave -2.7 / -3.5 / -10.8 % against 1; k = 3, 32 and 64 windows: 9 another -1.4 %, what meets
 * the issue's -30 %, for 1.5x the CPU time of 5; docs/PERFORMANCE.md, "Quantizer"), 1 in the
 * allocation pass (the candidates' KL is measured without it: 9x the coding of 168 candidates
 * for a ranking). */
/* The default of axis 0's BlockLDLQ group (tcq_quantize_opts.axis0_group; ldlq_axis0.c):
 * tinyqwen KL against 1, 32 windows, k = 2 / 3: 8 +1.00 / +0.52 %, 16 +0.25 / +0.86 %, 32 +2.81 /
 * +0.97 % (o's proxy loss +1.8 / +3.9 / +8 %, down's +0.2 / +0.3 / +0.5 %).  8, not 16: 16 takes
 * k = 3 past the issue's -30 % and saves ~0.4 s of a predicted ~12.7 s of a 14B layer's GPU
 * encodes (docs/PERFORMANCE.md, "On the GPU"). */
#define TCQ_QUANT_AXIS0_GROUP 8

static int scale_search(const qctx *c)
{
    return c->dry ? 1 : c->o->scale_search ? c->o->scale_search : 9;
}

/* Code rows [R, C] as module `mod` (P.weight U32 [R, C*k/32], P.scales F16 [R]). */
static tcq_status code_rows(qctx *c, const char *mod, const float *rows, int64_t R, int64_t C, int axis)
{
    const int64_t words = R * C * c->p.k / 32;
    uint32_t *codes = malloc((size_t)words * 4);
    uint16_t *scales = malloc((size_t)R * 2);
    if (!codes || !scales) {
        free(codes);
        free(scales);
        return tcq_fail(TCQ_ERR_NOMEM, "module %s: codes for [%lld, %lld]", mod, (long long)R, (long long)C);
    }
    double err = 0, ref = 0;
    int64_t hm = 0;
    const double *H = tcq_quant_lhess_for(&c->lh, c->cur, &hm);
    if (H && hm != (axis ? C : R)) {
        free(codes);
        free(scales);
        return tcq_fail(TCQ_ERR_FORMAT, "module %s: Hessian of size %lld for an input of %lld", mod, (long long)hm,
                        (long long)(axis ? C : R));
    }
    float *What = c->recon ? c->recon : H ? malloc((size_t)(R * C) * sizeof *What) : NULL;
    tcq_status s = H && !What ? tcq_fail(TCQ_ERR_NOMEM, "reconstruction") : TCQ_OK;
    /* on a GPU, H goes up once for the tensor: BlockLDLQ's pass, the refit and the proxy's two
     * products read that copy (a 14B down projection's is 2.4 GB: three uploads before) */
    const size_t hbytes = (size_t)(hm * hm) * sizeof *H;
    int mir_h = 0;
    if (s == TCQ_OK && H && c->qla) {
        s = tcq_qla_mirror(c->qla, H, hbytes, 0);
        mir_h = s == TCQ_OK;
    }
    if (s == TCQ_OK && H && c->o->method == TCQ_QMETHOD_LDLQ) {
        const tcq_ldlq_args a = {c->p, &c->o->enc, c->pool, rows, R, C, axis, H, c->o->damp > 0 ? c->o->damp : 0.1,
                                 c->o->refit_scales, codes, scales, What,
                                 c->o->ldlq_passes ? TCQ_MAX(c->o->ldlq_passes, 0) : 1, scale_search(c), c->qla,
                                 c->gpu, c->o->axis0_group ? c->o->axis0_group : TCQ_QUANT_AXIS0_GROUP};
        s = tcq_quant_ldlq(&a);
        for (int64_t i = 0; s == TCQ_OK && i < R * C; i++) err += ((double)rows[i] - What[i]) * ((double)rows[i] - What[i]);
    } else if (s == TCQ_OK) {
        s = c->gpu ? tcq_cuda_encode_rows(c->gpu, c->p, &c->o->enc, rows, NULL, R, C, codes, scales, &err)
                   : tcq_encode_rows(c->p, &c->o->enc, rows, NULL, R, C, codes, scales, c->pool, &err);
        if (s == TCQ_OK && c->o->refit_scales) s = tcq_quant_refit_rows(c->pool, c->p, rows, R, C, codes, scales, &err);
        if (s == TCQ_OK && What) tcq_quant_decode_rows_on(c->pool, c->p, codes, scales, R, C, What);
    }
    c->pr.proxy = c->pr.proxy_ref = -1;
    if (s == TCQ_OK && H && !c->dry)
        s = c->qla ? tcq_quant_proxy_on(c->qla, rows, What, R, C, axis, H, &c->pr.proxy, &c->pr.proxy_ref)
                   : tcq_quant_proxy(rows, What, R, C, axis, H, c->pool, &c->pr.proxy, &c->pr.proxy_ref);
    if (mir_h) tcq_qla_unmirror(c->qla, H);
    if (s == TCQ_OK && c->dry)
        s = What && c->sens ? tcq_quant_sens_kl(c->sens, c->dry_slot, What, R, C, &c->dry_kl)
                            : tcq_fail(TCQ_ERR_INTERNAL, "allocation pass without a Hessian or sensitivity");
    if (What != c->recon) free(What);
    if (s != TCQ_OK || c->dry) {
        free(codes);
        free(scales);
        if (s != TCQ_OK) tcq_error_prefix("module %s", mod);
        return s;
    }
    c->pr.k = c->p.k;
    for (int64_t i = 0; i < R * C; i++) ref += (double)rows[i] * rows[i];
    c->pr.sq_err += err;
    c->pr.sq_ref += ref;
    c->pr.coded_weights += R * C;
    c->pr.done += R * C;
    /* The two-block interleave: [R, C*3/32] -> [C/512, R, 48], same words, other order. */
    const int il = c->o->interleave && c->p.k == 3 && c->p.T == 256 && axis == 0 && C % 512 == 0;
    if (il) {
        uint32_t *ic = malloc((size_t)words * 4);
        s = ic ? tcq_interleave(R, C, codes, ic) : tcq_fail(TCQ_ERR_NOMEM, "module %s: interleave", mod);
        free(codes);
        codes = ic;
        if (s != TCQ_OK) {
            free(codes);
            free(scales);
            return s;
        }
    }
    char name[512];
    const int64_t cshape[3] = {il ? C / 512 : R, il ? R : C * c->p.k / 32, 48}, sshape[1] = {R};
    snprintf(name, sizeof name, "%s.weight", mod);
    s = add_out(c, name, TCQ_DTYPE_U32, il ? 3 : 2, cshape, codes, (size_t)words * 4);
    if (s != TCQ_OK) {
        free(scales);
        return s;
    }
    snprintf(name, sizeof name, "%s.scales", mod);
    TCQ_TRY(add_out(c, name, TCQ_DTYPE_F16, 1, sshape, scales, (size_t)R * 2));
    c->pr.coded_bits += (double)R * C * c->p.k + 16.0 * (double)R;
    json_t *e = tcq_quant_entry(c->p.k, c->p.T, c->p.L, axis, il);
    if (!e || json_object_set_new(c->qobj, mod, e)) return tcq_fail(TCQ_ERR_NOMEM, "module %s: entry", mod);
    return TCQ_OK;
}

static tcq_status load_vector(qctx *c, const char *name, int64_t len, float **out)
{
    *out = NULL;
    const tcq_tensor_info *t = tcq_st_set_find(c->set, name);
    if (!t) return tcq_fail(TCQ_ERR_NOT_FOUND, "%s: tensor %s is missing", c->in_dir, name);
    if (t->ndim != 1 || t->shape[0] != len)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: expected shape [%lld]", t->file, name, (long long)len);
    return tcq_quant_load_f32(t, out);
}

static tcq_status check_2d(const qctx *c, const tcq_tensor_info *t, int dim, const char *what)
{
    if (t->ndim != 2 || t->shape[dim] != c->n || t->shape[1 - dim] <= 0)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: a %s needs shape %s with hidden_size %lld", t->file,
                        t->name, what, dim ? "[out, hidden]" : "[hidden, in]", (long long)c->n);
    return TCQ_OK;
}

/* Reader W [out, n], gain folded and rotated -> coded axis 1 at k (the projections' k, or
 * lm_head_bits for the lm_head) or, k = 0, dense bf16 as `name`. */
static tcq_status emit_reader(qctx *c, const char *name, const float *W, int64_t out, int k)
{
    char mod[512];
    module_of(name, mod, sizeof mod);
    const int64_t shape[2] = {out, c->n};
    if (k && !c->rotate_only && c->n % c->p.T == 0) {
        const tcq_block_params keep = c->p;
        c->p.k = k;
        tcq_status s = code_rows(c, mod, W, out, c->n, 1);
        c->p = keep;
        return s;
    }
    if (k && !c->rotate_only) {
        snprintf(c->note, sizeof c->note, "%s kept dense bf16: row length %lld is not a multiple of %d", name,
                 (long long)c->n, c->p.T);
        json_object_set_new(c->qobj, mod, json_false());
    }
    return add_dense(c, name, W, 2, shape);
}

/* Fold the norm `gain_name` (NULL: none) into W [out, n] and rotate it, in place. */
static tcq_status prep_reader(qctx *c, float *W, int64_t out, const char *gain_name)
{
    float *g = NULL;
    if (gain_name) TCQ_TRY(load_vector(c, gain_name, c->n, &g));
    tcq_status s = tcq_rotate_reader(c->h, W, out, g, c->pool);
    free(g);
    return s;
}

static tcq_status do_reader(qctx *c, const char *name, float *W, int64_t out, const char *gain_name, int k)
{
    TCQ_TRY(prep_reader(c, W, out, gain_name));
    return emit_reader(c, name, W, out, k);
}

/* Writer t rotated and transposed, Wt [in, n] -> coded axis 0, or dense bf16 as [n, in]. */
static tcq_status emit_writer(qctx *c, const tcq_tensor_info *t, const float *Wt)
{
    const int64_t in = t->shape[1];
    char mod[512];
    module_of(t->name, mod, sizeof mod);
    if (!c->rotate_only && c->n % c->p.T == 0) return code_rows(c, mod, Wt, in, c->n, 0);
    if (!c->rotate_only) {
        snprintf(c->note, sizeof c->note, "%s kept dense bf16: row length %lld is not a multiple of %d", t->name,
                 (long long)c->n, c->p.T);
        json_object_set_new(c->qobj, mod, json_false());
    }
    float *R = malloc((size_t)(in * c->n) * sizeof *R);   /* back to [n, in] */
    if (!R) return tcq_fail(TCQ_ERR_NOMEM, "tensor %s: transpose", t->name);
    for (int64_t i = 0; i < in; i++)
        for (int64_t r = 0; r < c->n; r++) R[r * in + i] = Wt[i * c->n + r];
    tcq_status s = add_dense(c, t->name, R, 2, t->shape);
    free(R);
    return s;
}

/* Load t as f32; a projection comes back folded and rotated in its stored layout (reader
 * [out, n], writer [in, n]).  The input's pages are dropped after the conversion (the mapping is
 * read-only and private: they come back from the file if read again), so the resident input is
 * the tensor in flight, not every tensor read so far. */
static tcq_status load_prepped(qctx *c, const tcq_tensor_info *t, qrole role, const char *gain, float **out)
{
    *out = NULL;
    float *x = NULL;
    TCQ_TRY(tcq_quant_load_f32(t, &x));
    const long pg = sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)t->data & ~(uintptr_t)(pg - 1), e = (uintptr_t)t->data + t->nbytes;
    if (t->nbytes >= (size_t)(1 << 20)) madvise((void *)a, (size_t)(e - a), MADV_DONTNEED);
    tcq_status s = TCQ_OK;
    if (role == QR_READER) {
        s = check_2d(c, t, 1, "projection");
        if (s == TCQ_OK) s = prep_reader(c, x, t->shape[0], gain);
    } else if (role == QR_WRITER) {
        s = check_2d(c, t, 0, "output projection");
        float *Wt = s == TCQ_OK ? malloc((size_t)t->numel * sizeof *Wt) : NULL;
        if (s == TCQ_OK && !Wt) s = tcq_fail(TCQ_ERR_NOMEM, "tensor %s: rotation buffer", t->name);
        if (s == TCQ_OK) s = tcq_rotate_writer(c->h, x, t->shape[1], Wt, c->pool);
        free(x);
        x = Wt;
    }
    if (s != TCQ_OK) {
        free(x);
        return s;
    }
    *out = x;
    return TCQ_OK;
}

/* One tensor, any role; k: the projections' k (0: c->p.k). */
static tcq_status process(qctx *c, const tcq_tensor_info *t)
{
    char gain[512];
    const qrole role = tcq_quant_role(t->name, gain, sizeof gain);
    if (role == QR_SKIP) return TCQ_OK;
    if (role == QR_UNKNOWN)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: tensor %s: not part of a llama/qwen3 dense model, cannot "
                        "rotate it", t->file, t->name);
    float *x = NULL;
    TCQ_TRY(load_prepped(c, t, role, gain, &x));
    tcq_status s = TCQ_OK;
    switch (role) {
    case QR_EMBED:
        s = check_2d(c, t, 1, "embedding");
        if (s == TCQ_OK && c->tied) {
            /* Untie: lm_head = E diag(final norm) R differs from the rotated embedding. */
            float *lm = malloc((size_t)t->numel * sizeof *lm);
            if (!lm) s = tcq_fail(TCQ_ERR_NOMEM, "tensor %s: lm_head copy", t->name);
            if (lm) {
                memcpy(lm, x, (size_t)t->numel * sizeof *lm);
                s = do_reader(c, "lm_head.weight", lm, t->shape[0], "model.norm.weight", c->o->lm_head_bits);
                free(lm);
            }
        }
        if (s == TCQ_OK) s = tcq_hadamard_rows(c->h, x, t->shape[0], 0, c->pool);
        if (s == TCQ_OK) s = add_dense(c, t->name, x, 2, t->shape);
        break;
    case QR_LM_HEAD:
        s = check_2d(c, t, 1, "lm_head");
        if (s == TCQ_OK) s = do_reader(c, t->name, x, t->shape[0], "model.norm.weight", c->o->lm_head_bits);
        break;
    case QR_NORM:
        if (t->ndim != 1 || t->shape[0] != c->n) {
            s = tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: a norm needs shape [%lld]", t->file, t->name, (long long)c->n);
            break;
        }
        for (int64_t i = 0; i < c->n; i++) x[i] = 1.0f;
        s = add_dense(c, t->name, x, 1, t->shape);
        break;
    case QR_HEAD_NORM:
    case QR_BIAS_READER:
        s = add_dense(c, t->name, x, t->ndim, t->shape);
        break;
    case QR_BIAS_WRITER:
        if (t->ndim != 1 || t->shape[0] != c->n) {
            s = tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: expected shape [%lld]", t->file, t->name, (long long)c->n);
            break;
        }
        s = tcq_hadamard_rows(c->h, x, 1, 0, c->pool);
        if (s == TCQ_OK) s = add_dense(c, t->name, x, 1, t->shape);
        break;
    case QR_READER:
        s = emit_reader(c, t->name, x, t->shape[0], c->p.k);
        break;
    case QR_WRITER:
        s = emit_writer(c, t, x);
        break;
    default:
        s = tcq_fail(TCQ_ERR_INTERNAL, "tensor %s: role %d", t->name, (int)role);
    }
    free(x);
    return s;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The seven projections of a decoder layer, by name. */
enum { P_Q, P_K, P_V, P_O, P_GATE, P_UP, P_DOWN, P_COUNT };
static const char *const proj_names[P_COUNT] = {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                                "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                                "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};

static int proj_slot(const char *name)
{
    const char *rest = strchr(name + 13, '.');   /* after "model.layers.N" */
    for (int j = 0; rest && j < P_COUNT; j++)
        if (!strcmp(rest + 1, proj_names[j])) return j;
    return -1;
}

/* The layer's weights for the forward, dense f32 [out, in] views: readers their rotated rows,
 * writers fw (R^T W, [n, in]); the attn / ffn norms are 1 (folded), q/k norms the input's. */
static void layer_view(qctx *c, int l, float *const *rows, float *const *fw, const int64_t (*shape)[2],
                       const float *ones, tcq_layer *L)
{
    const tcq_model *m = tcq_quant_cal_model(c->cal);
    *L = m->layers[l];
    L->attn_norm = L->ffn_norm = ones;
    tcq_weight *w[P_COUNT] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
    for (int j = 0; j < P_COUNT; j++) {
        const int writer = j == P_O || j == P_DOWN;
        *w[j] = (tcq_weight){.fmt = TCQ_WF_F32, .out = shape[j][0], .in = shape[j][1], .dense = writer ? fw[j] : rows[j]};
    }
}

static void transpose(const float *a, int64_t R, int64_t C, float *out)   /* a [R, C] -> out [C, R] */
{
    for (int64_t r = 0; r < R; r++)
        for (int64_t k = 0; k < C; k++) out[k * R + r] = a[r * C + k];
}

/* Decoder layer l: its tensors ts[i] with lay[i] == l, projections at plan[i] (0: c->p.k).  In
 * the allocation pass (c->dry) each projection is coded at k = 2, 3, 4 into px[i] (relative proxy
 * losses) and nothing is kept. */
static tcq_status do_layer(qctx *c, int l, const tcq_tensor_info **ts, int64_t count, const int *plan,
                           double (*px)[3])
{
    const int hessians = c->cal || c->hin.f;
    const int sequential = c->cal && c->o->calib_sequential && !c->dry;
    /* asym 2: the statistics retaken inside the layer before o, gate/up and down, the projections
     * before them coded (GPTQ's "true sequential"); the input model's layer kept for its stream */
    const int inlayer = sequential && c->o->asym == 2;
    float *rows[P_COUNT] = {0}, *fw[P_COUNT] = {0}, *ones = NULL, *rfp[P_COUNT] = {0}, *ffp[P_COUNT] = {0};
    int64_t idx[P_COUNT], shape[P_COUNT][2];
    for (int j = 0; j < P_COUNT; j++) idx[j] = -1;
    tcq_status s = TCQ_OK;
    for (int64_t i = 0; i < count; i++) {
        const int j = c->lay[i] == l ? proj_slot(ts[i]->name) : -1;
        if (j >= 0) idx[j] = i;
    }
    if (hessians) {
        /* the layer's projections, rotated, before anything is coded */
        for (int j = 0; s == TCQ_OK && j < P_COUNT; j++) {
            if (idx[j] < 0) {
                if (c->cal) s = tcq_fail(TCQ_ERR_NOT_FOUND, "%s: tensor model.layers.%d.%s is missing", c->in_dir, l,
                                         proj_names[j]);
                continue;
            }
            const tcq_tensor_info *t = ts[idx[j]];
            char gain[512];
            const qrole role = tcq_quant_role(t->name, gain, sizeof gain);
            s = load_prepped(c, t, role, gain, &rows[j]);
            const int writer = role == QR_WRITER;
            shape[j][0] = writer ? c->n : t->shape[0];
            shape[j][1] = writer ? t->shape[1] : c->n;
            if (s == TCQ_OK && c->cal && writer) {
                fw[j] = malloc((size_t)t->numel * sizeof *fw[j]);
                if (!fw[j]) s = tcq_fail(TCQ_ERR_NOMEM, "tensor %s: forward copy", t->name);
                else transpose(rows[j], t->shape[1], c->n, fw[j]);
            }
            float **keep = writer ? &ffp[j] : &rfp[j];
            if (s == TCQ_OK && inlayer && !(*keep = malloc((size_t)t->numel * sizeof **keep)))
                s = tcq_fail(TCQ_ERR_NOMEM, "tensor %s: the input model's copy", t->name);
            if (s == TCQ_OK && inlayer) memcpy(*keep, writer ? fw[j] : rows[j], (size_t)t->numel * sizeof **keep);
        }
        const double t0 = now_s();
        if (s == TCQ_OK && c->hin.f) s = tcq_quant_hfile_get(&c->hin, l, &c->lh);
        else if (s == TCQ_OK) {
            tcq_layer L;
            ones = malloc((size_t)c->n * sizeof *ones);
            if (!ones) s = tcq_fail(TCQ_ERR_NOMEM, "norm of ones");
            for (int64_t i = 0; ones && i < c->n; i++) ones[i] = 1.0f;
            layer_view(c, l, rows, fw, shape, ones, &L);
            /* non-sequential: the unquantized layer moves the stream in the same pass */
            if (s == TCQ_OK && inlayer) s = tcq_quant_cal_layer_asym(c->cal, l, &L, &L, &c->lh, 0, 0);
            else if (s == TCQ_OK) s = tcq_quant_cal_layer(c->cal, l, &L, &c->lh, !sequential);
        }
        if (s == TCQ_OK && c->hout.f && !c->dry) s = tcq_quant_hfile_put(&c->hout, l, &c->lh);
        if (s == TCQ_OK && c->cb && !c->dry) {
            c->pr.phase = "hessians";
            c->pr.seconds = now_s() - t0;
            c->pr.layer = l;
            c->cb(&c->pr, c->user);
            c->pr.phase = NULL;
        }
    }
    /* the order of coding: the tensors' (sorted by name), or with inlayer the projections in the
     * forward's order first */
    int64_t *order = malloc((size_t)(count ? count : 1) * sizeof *order), n_ord = 0;
    if (!order && s == TCQ_OK) s = tcq_fail(TCQ_ERR_NOMEM, "layer %d: order", l);
    for (int j = 0; order && inlayer && j < P_COUNT; j++)
        if (idx[j] >= 0) order[n_ord++] = idx[j];
    for (int64_t i = 0; order && i < count; i++)
        if (c->lay[i] == l && !(inlayer && proj_slot(ts[i]->name) >= 0)) order[n_ord++] = i;
    for (int64_t oi = 0; s == TCQ_OK && oi < n_ord; oi++) {
        const int64_t i = order[oi];
        const int j = proj_slot(ts[i]->name);
        if (inlayer && (j == P_O || j == P_GATE || j == P_DOWN) && rows[j]) {
            /* the statistics of this site again, the projections before it coded; the input
             * model's stream moves on with the last */
            tcq_layer Lfp, L;
            layer_view(c, l, rfp, ffp, shape, ones, &Lfp);
            layer_view(c, l, rows, fw, shape, ones, &L);
            tcq_quant_lhess_free(&c->lh);
            s = tcq_quant_cal_layer_asym(c->cal, l, &Lfp, &L, &c->lh, 0, j == P_DOWN);
            if (s != TCQ_OK) break;
        }
        if (c->dry) {
            if (j < 0 || !plan[i]) continue;
            for (int k = 2; s == TCQ_OK && k <= 4; k++) {
                c->p.k = k;
                c->cur = ts[i]->name;
                c->dry_slot = j;
                s = j == P_O || j == P_DOWN ? emit_writer(c, ts[i], rows[j]) : emit_reader(c, ts[i]->name, rows[j], ts[i]->shape[0], k);
                px[i][k - 2] = c->dry_kl;
                c->pr.alloc_cost[k - 2] = px[i][k - 2];
                c->pr.done += ts[i]->numel;
            }
            c->pr.tensor = ts[i]->name;
            if (s == TCQ_OK && c->cb) c->cb(&c->pr, c->user);
            continue;
        }
        c->note[0] = 0;
        c->pr.tensor = c->cur = ts[i]->name;
        c->pr.k = 0;
        c->pr.proxy = c->pr.proxy_ref = -1;
        c->t_step = now_s();
        const tcq_block_params keep = c->p;
        if (plan[i]) c->p.k = plan[i];
        if (j >= 0 && rows[j]) {
            const int writer = j == P_O || j == P_DOWN;
            if (sequential && !(c->recon = malloc((size_t)ts[i]->numel * sizeof *c->recon)))
                s = tcq_fail(TCQ_ERR_NOMEM, "tensor %s: reconstruction", ts[i]->name);
            int64_t hm = 0;
            const double *H = tcq_quant_lhess_for(&c->lh, ts[i]->name, &hm);
            const double *Cx = tcq_quant_lhess_cross_for(&c->lh, ts[i]->name);
            if (s == TCQ_OK && H && Cx)   /* asym: the target W + alpha W C Hd^-1 (asym.c), in place */
                s = tcq_quant_asym_target(H, Cx, hm, c->o->damp > 0 ? c->o->damp : 0.1,
                                          c->o->asym_alpha > 0 ? c->o->asym_alpha : 0.25, rows[j],
                                          shape[j][writer ? 1 : 0], c->n, writer ? 0 : 1);
            if (s == TCQ_OK) s = writer ? emit_writer(c, ts[i], rows[j]) : emit_reader(c, ts[i]->name, rows[j], ts[i]->shape[0], c->p.k);
            if (s == TCQ_OK && sequential) {   /* the coded weights are the layer's from now on */
                if (writer) transpose(c->recon, ts[i]->shape[1], c->n, fw[j]);
                else memcpy(rows[j], c->recon, (size_t)ts[i]->numel * sizeof *c->recon);
            }
            free(c->recon);
            c->recon = NULL;
            if (!sequential) {
                free(rows[j]);
                free(fw[j]);
                rows[j] = fw[j] = NULL;
            }
        } else {
            s = process(c, ts[i]);
        }
        c->p = keep;
        c->pr.tensor_index++;
        c->pr.seconds = now_s() - c->t_step;
        c->pr.note = c->note[0] ? c->note : NULL;
        if (s == TCQ_OK && c->cb) c->cb(&c->pr, c->user);
        c->pr.note = NULL;
    }
    free(order);
    if (s == TCQ_OK && c->dry && c->sens) s = tcq_quant_sens_advance(c->sens);
    if (s == TCQ_OK && sequential) {
        tcq_layer L;
        layer_view(c, l, rows, fw, shape, ones, &L);
        s = tcq_quant_cal_layer(c->cal, l, &L, NULL, 1);
    }
    for (int j = 0; j < P_COUNT; j++) {
        free(rows[j]);
        free(fw[j]);
        free(rfp[j]);
        free(ffp[j]);
    }
    free(ones);
    tcq_quant_lhess_free(&c->lh);
    return s;
}

/* The allocation pass of bpw: every projection with a Hessian coded at k = 2, 3, 4 (nothing
 * kept), each candidate's cost the input model's mean KL on calibration windows with only that
 * candidate coded (sens.c), then tcq_quant_alloc (alloc.c) picks the k.  Measured KL replaced the
 * relative proxy loss tr(E H E^T) / tr(W H W^T) as the cost: tinyqwen KL 0.118 / 0.058 / 0.031 at
 * 2.5 / 3.0 / 3.5 bpw against 0.141 / 0.071 / 0.037 (docs/PERFORMANCE.md, "Quantizer").  The pass
 * goes layer by layer like the coding pass, with non-sequential Hessians (the input model's
 * stream: the k are not chosen yet), each layer's freed before the next; sens.c adds its windows'
 * stream and reference log-probabilities.  plan[i]: the k of ts[i] (0: not a projection). */
static tcq_status allocate(qctx *c, const tcq_tensor_info **ts, int64_t count, int *plan)
{
    double (*px)[3] = calloc((size_t)(count ? count : 1), sizeof *px);
    int64_t *numel = calloc((size_t)(count ? count : 1), sizeof *numel);
    if (!px || !numel) {
        free(px);
        free(numel);
        return tcq_fail(TCQ_ERR_NOMEM, "allocation table");
    }
    const tcq_quantize_progress keep = c->pr;
    const tcq_block_params kp = c->p;
    tcq_status s = TCQ_OK;
    int64_t n_all = 0;
    for (int64_t i = 0; i < count; i++) {
        const qrole r = tcq_quant_role(ts[i]->name, NULL, 0);
        if ((r == QR_READER || r == QR_WRITER) && c->lay[i] >= 0 && proj_slot(ts[i]->name) >= 0 && c->n % c->p.T == 0)
            plan[i] = 2, n_all += ts[i]->numel, numel[i] = ts[i]->numel;
    }
    const char **names = malloc((size_t)(count ? count : 1) * sizeof *names);
    if (!names) s = tcq_fail(TCQ_ERR_NOMEM, "allocation table");
    for (int64_t i = 0; names && i < count; i++) names[i] = ts[i]->name;
    if (s == TCQ_OK && c->o->alloc_costs_in) {
        s = tcq_quant_alloc_costs_read(c->o->alloc_costs_in, count, names, numel, px);
    } else {
        if (s == TCQ_OK)
            s = tcq_quant_sens_open(c->in_dir, c->o->calib, c->calib.ctx, c->o->alloc_windows > 0 ? c->o->alloc_windows : 4,
                                    c->h, c->o->threads, &c->sens);
        c->dry = 1;
        c->pr.phase = "allocation";
        for (int l = 0; s == TCQ_OK && l < c->n_layers; l++) {
            c->pr.layer = l;
            s = do_layer(c, l, ts, count, plan, px);
        }
        c->dry = 0;
    }
    if (s == TCQ_OK && c->o->alloc_costs_out)
        s = tcq_quant_alloc_costs_write(c->o->alloc_costs_out, "kl", count, names,
                                        numel, (const double (*)[3])px);
    free(names);
    c->p = kp;
    c->pr = keep;
    c->pr.done = 3 * n_all;   /* the bar runs over both passes */
    tcq_quant_sens_free(c->sens);
    c->sens = NULL;
    if (s == TCQ_OK) tcq_quant_alloc(count, numel, (const double (*)[3])px, c->o->bpw, plan);
    free(px);
    free(numel);
    return s;
}

static int cmp_info(const void *a, const void *b)
{
    return strcmp((*(const tcq_tensor_info *const *)a)->name, (*(const tcq_tensor_info *const *)b)->name);
}

/* config.json: model_type, hidden_size, tie_word_embeddings, not already quantized. */
static tcq_status read_config(const char *in_dir, json_t **out, int64_t *hidden, int *tied)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", in_dir);
    json_error_t je;
    json_t *cfg = json_load_file(path, 0, &je);
    if (!cfg) return tcq_fail(TCQ_ERR_FORMAT, "%s: line %d: %s", path, je.line, je.text);
    tcq_status s = TCQ_OK;
    const char *mt = json_string_value(json_object_get(cfg, "model_type"));
    json_t *hs = json_object_get(cfg, "hidden_size"), *tw = json_object_get(cfg, "tie_word_embeddings");
    if (!json_is_object(cfg)) s = tcq_fail(TCQ_ERR_FORMAT, "%s: not a JSON object", path);
    else if (!mt) s = tcq_fail(TCQ_ERR_FORMAT, "%s: model_type is missing", path);
    else if (strcmp(mt, "llama") && strcmp(mt, "qwen3"))
        s = tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: model_type \"%s\": quantize supports llama and qwen3", path, mt);
    else if (!json_is_integer(hs) || json_integer_value(hs) <= 0)
        s = tcq_fail(TCQ_ERR_FORMAT, "%s: hidden_size is missing or not a positive integer", path);
    else if (json_object_get(cfg, "quantization") || json_object_get(cfg, "quantization_config"))
        s = tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: the model is already quantized", path);
    else if (tw && !json_is_boolean(tw))
        s = tcq_fail(TCQ_ERR_FORMAT, "%s: tie_word_embeddings is not a boolean", path);
    if (s != TCQ_OK) {
        json_decref(cfg);
        return s;
    }
    *hidden = json_integer_value(hs);
    *tied = json_is_true(tw);
    *out = cfg;
    return TCQ_OK;
}

static tcq_status make_dir(const char *in_dir, const char *out_dir)
{
    if (mkdir(out_dir, 0777) && errno != EEXIST)
        return tcq_fail(TCQ_ERR_IO, "%s: cannot create: %s", out_dir, strerror(errno));
    struct stat a, b;
    if (stat(out_dir, &b) || !S_ISDIR(b.st_mode)) return tcq_fail(TCQ_ERR_IO, "%s: not a directory", out_dir);
    if (!stat(in_dir, &a) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "%s: output directory is the input directory", out_dir);
    return TCQ_OK;
}

/* The decoder layer of a tensor name ("model.layers.N."), -1 for the rest. */
static int layer_of(const char *name)
{
    int l = -1, n = 0;
    if (sscanf(name, "model.layers.%d.%n", &l, &n) != 1 || n == 0 || l < 0) return -1;
    return l;
}

/* Open the calibration stream or the saved Hessians (and the file to save them to). */
static tcq_status open_hessians(qctx *c, int save)
{
    const tcq_quantize_opts *o = c->o;
    if (o->hessians_in) {
        TCQ_TRY(tcq_quant_hfile_open(o->hessians_in, o->seed, &c->hin));
        if (c->hin.n_layers < c->n_layers)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: Hessians of %d layers, the model has %d", o->hessians_in,
                            c->hin.n_layers, c->n_layers);
    } else if (o->calib) {
        TCQ_TRY(tcq_quant_cal_open(c->in_dir, c->h, &c->calib, c->pool, &c->cal));
        tcq_quant_cal_set_qla(c->cal, c->qla);
        if (save && o->asym) TCQ_TRY(tcq_quant_cal_set_asym(c->cal));
        const tcq_model_config *mc = &tcq_quant_cal_model(c->cal)->cfg;
        if (mc->n_layers < c->n_layers)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: config has %d layers, the tensors %d", c->in_dir, mc->n_layers,
                            c->n_layers);
        if (save && o->hessians_out) {
            c->hout = (tcq_quant_hfile){.n_layers = c->n_layers, .dim = {mc->dim, (int64_t)mc->n_heads * mc->head_dim,
                                                                         mc->dim, mc->hidden_dim},
                                        .tokens = tcq_quant_cal_tokens(c->cal), .seed = o->seed,
                                        .sequential = o->calib_sequential};
            TCQ_TRY(tcq_quant_hfile_create(o->hessians_out, &c->hout));
        }
    }
    return TCQ_OK;
}

static void close_hessians(qctx *c)
{
    tcq_quant_cal_free(c->cal);
    c->cal = NULL;
    tcq_quant_hfile_close(&c->hin);
}

static tcq_status run(qctx *c, const char *out_dir, json_t *cfg)
{
    const int64_t count = tcq_st_set_count(c->set);
    const tcq_tensor_info **ts = malloc((size_t)(count ? count : 1) * sizeof *ts);
    c->lay = malloc((size_t)(count ? count : 1) * sizeof *c->lay);
    if (!ts || !c->lay) {
        free(ts);
        return tcq_fail(TCQ_ERR_NOMEM, "tensor list");
    }
    for (int64_t i = 0; i < count; i++) ts[i] = tcq_st_set_tensor(c->set, i);
    qsort(ts, (size_t)count, sizeof *ts, cmp_info);
    int has_lm = 0, in_layers = 0;
    for (int64_t i = 0; i < count; i++) in_layers = TCQ_MAX(in_layers, layer_of(ts[i]->name) + 1);
    c->n_layers = c->o->layers > 0 ? TCQ_MIN(c->o->layers, in_layers) : in_layers;
    int64_t n_proj = 0;
    for (int64_t i = 0; i < count; i++) {
        c->lay[i] = layer_of(ts[i]->name);
        if (c->lay[i] >= c->n_layers) c->lay[i] = -2;   /* beyond --layers: not written */
        const qrole r = tcq_quant_role(ts[i]->name, NULL, 0);
        if (r == QR_LM_HEAD) has_lm = 1;
        const int lm = r == QR_LM_HEAD || (r == QR_EMBED && c->tied);   /* the (untied) lm_head */
        if ((((r == QR_READER || r == QR_WRITER) && c->lay[i] != -2) || (lm && c->o->lm_head_bits)) && !c->rotate_only &&
            c->n % c->p.T == 0) {
            c->pr.total += ts[i]->numel;
            if (c->lay[i] >= 0 && (r == QR_READER || r == QR_WRITER)) n_proj += ts[i]->numel;
        }
        if (c->lay[i] != -2) c->pr.tensor_count++;
    }
    if (c->o->bpw > 0) c->pr.total += 3 * n_proj;   /* the allocation pass codes each at k = 2, 3, 4 */
    c->pr.layer_count = c->n_layers;
    tcq_status s = TCQ_OK;
    if (!has_lm && !c->tied) s = tcq_fail(TCQ_ERR_NOT_FOUND, "%s: lm_head.weight is missing and "
                                          "tie_word_embeddings is not true", c->in_dir);
    if (!tcq_st_set_find(c->set, "model.embed_tokens.weight"))
        s = tcq_fail(TCQ_ERR_NOT_FOUND, "%s: tensor model.embed_tokens.weight is missing", c->in_dir);
    if (s == TCQ_OK && (c->o->calib || c->o->hessians_in) && c->n % c->p.T)
        s = tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: hidden_size %lld is not a multiple of %d: nothing to code with a "
                     "calibration", c->in_dir, (long long)c->n, c->p.T);
    c->tied = !has_lm;
    c->pr.proxy = c->pr.proxy_ref = -1;
    int *plan = calloc((size_t)(count ? count : 1), sizeof *plan);
    if (!plan) s = tcq_fail(TCQ_ERR_NOMEM, "tensor plan");
    if (s == TCQ_OK && c->o->bpw > 0) {
        s = open_hessians(c, 0);
        if (s == TCQ_OK) s = allocate(c, ts, count, plan);
        close_hessians(c);   /* the stream is at the end: the coding pass starts it again */
    }
    if (s == TCQ_OK) s = open_hessians(c, 1);
    c->pr.layer = -1;
    if (s == TCQ_OK && c->cb) c->cb(&c->pr, c->user);
    /* outside the layers first (embedding, lm_head, final norm), then layer by layer */
    for (int64_t i = 0; s == TCQ_OK && i < count; i++) {
        if (c->lay[i] != -1) continue;
        c->note[0] = 0;
        c->pr.tensor = c->cur = ts[i]->name;
        c->pr.k = 0;
        c->pr.proxy = c->pr.proxy_ref = -1;
        c->t_step = now_s();
        s = process(c, ts[i]);
        c->pr.tensor_index++;
        c->pr.seconds = now_s() - c->t_step;
        c->pr.note = c->note[0] ? c->note : NULL;
        if (s == TCQ_OK && c->cb) c->cb(&c->pr, c->user);
        c->pr.note = NULL;
    }
    for (int l = 0; s == TCQ_OK && l < c->n_layers; l++) {
        c->pr.layer = l;
        s = do_layer(c, l, ts, count, plan, NULL);
    }
    close_hessians(c);
    if (c->hout.f) {
        const tcq_status hs = tcq_quant_hfile_close(&c->hout);
        if (s == TCQ_OK) s = hs;
    }
    free(ts);
    free(plan);
    TCQ_TRY(s);
    if (c->tied && !json_object_get(c->qobj, "lm_head")) json_object_set_new(c->qobj, "lm_head", json_false());
    json_object_set_new(c->qobj, "model.embed_tokens", json_false());

    tcq_st_writer *w = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    TCQ_TRY(tcq_st_writer_create(&w));
    s = tcq_st_writer_metadata(w, "format", "pt");
    if (s == TCQ_OK && fflush(c->spill)) s = tcq_fail(TCQ_ERR_IO, "%s: write failed: %s", c->spill_path, strerror(errno));
    for (int i = 0; s == TCQ_OK && i < c->n_out; i++) {
        const out_tensor *t = &c->outs[i];
        s = tcq_st_writer_add_file(w, t->name, t->dt, t->ndim, t->shape, c->spill, t->off, t->nbytes);
    }
    if (s == TCQ_OK) s = tcq_st_writer_write(w, path);
    tcq_st_writer_free(w);
    TCQ_TRY(s);
    /* The dense tensors' dtype, where the config names one (transformers reads it as the
     * default compute type). */
    static const char *dtype_keys[] = {"dtype", "torch_dtype"};
    for (int i = 0; i < 2; i++)
        if (json_is_string(json_object_get(cfg, dtype_keys[i])))
            json_object_set_new(cfg, dtype_keys[i], json_string(c->rotate_only ? "float32" : "bfloat16"));
    if (c->o->layers > 0 && c->n_layers < in_layers) {
        /* a truncated model: the first n_layers layers, then the final norm and the lm_head */
        json_object_set_new(cfg, "num_hidden_layers", json_integer(c->n_layers));
        json_t *lt = json_object_get(cfg, "layer_types");
        while (json_is_array(lt) && json_array_size(lt) > (size_t)c->n_layers) json_array_remove(lt, json_array_size(lt) - 1);
    }
    snprintf(path, sizeof path, "%s/config.json", out_dir);
    TCQ_TRY(tcq_quant_write_config(cfg, c->rotate_only ? NULL : c->qobj, path));
    return tcq_quant_copy_tokenizer(c->in_dir, out_dir);
}

tcq_status tcq_quantize_model(const char *in_dir, const char *out_dir, const tcq_quantize_opts *opts,
                              tcq_quantize_cb cb, void *user)
{
    if (!in_dir || !out_dir || !opts) return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: NULL argument");
    qctx c = {.o = opts, .in_dir = in_dir, .cb = cb, .user = user};
    c.p = (tcq_block_params){opts->L ? opts->L : 12, opts->bits, opts->T ? opts->T : 256};
    c.rotate_only = opts->bits == 0;
    const int calibrated = opts->calib || opts->hessians_in;
    if (opts->method != TCQ_QMETHOD_RTN && opts->method != TCQ_QMETHOD_LDLQ)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: method %d: rtn (0) or ldlq (1)", opts->method);
    if ((opts->method == TCQ_QMETHOD_LDLQ || opts->bpw != 0) && !calibrated)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: %s needs a calibration (a calibration text or saved Hessians)",
                        opts->bpw != 0 ? "a bits-per-weight budget" : "LDLQ");
    if (opts->bpw != 0 && !(opts->bpw >= 2 && opts->bpw <= 4))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: bits per weight %g outside [2, 4] (k from 2 to 4)", opts->bpw);
    if ((opts->alloc_costs_in || opts->alloc_costs_out) && opts->bpw == 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: allocation costs (a file to read or write) without a "
                        "bits-per-weight budget");
    if (opts->bpw != 0 && !opts->alloc_costs_in && !opts->calib)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: a bits-per-weight budget needs a calibration text (its first "
                        "windows measure every projection's KL, also with saved Hessians) or saved allocation costs");
    if (opts->scale_search < 0 || opts->scale_search > 9)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: scale search %d: 0 to 9 candidates", opts->scale_search);
    if (opts->axis0_group < 0 || opts->axis0_group > 256)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: axis-0 group %d: 0 (the default) or 1 to 256 rows",
                        opts->axis0_group);
    if (opts->alloc_windows < 0 || opts->alloc_windows > 1 << 16)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: allocation windows %d: 0 (4) to 65536", opts->alloc_windows);
    if (calibrated && c.rotate_only) return tcq_fail(TCQ_ERR_UNSUPPORTED, "quantize: calibration needs bits");
    if (opts->asym && (opts->method != TCQ_QMETHOD_LDLQ || !opts->calib || opts->hessians_in ||
                       !opts->calib_sequential || opts->cuda))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: asymmetric targets need LDLQ with a sequential calibration "
                        "from a text (not saved Hessians), on the CPU");
    if (opts->asym < 0 || opts->asym > 2 || (opts->asym == 2 && opts->hessians_out))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: asym %d: 0, 1 or 2 (2: statistics retaken inside each layer, "
                        "so none to save)", opts->asym);
    if (!(opts->asym_alpha >= 0 && opts->asym_alpha <= 2) || (opts->asym_alpha > 0 && !opts->asym))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: asym alpha %g: in [0, 2] (0: 0.25), with asym only",
                        opts->asym_alpha);
    if (opts->damp < 0 || !isfinite(opts->damp))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: damping %g: >= 0", opts->damp);
    if (!c.rotate_only) TCQ_TRY(tcq_block_check(c.p));
    if (opts->lm_head_bits && (opts->lm_head_bits < 2 || opts->lm_head_bits > 4 || c.rotate_only))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantize: lm_head_bits %d: 0 (dense) or 2..4, and only with bits",
                        opts->lm_head_bits);
    if (opts->cuda && !c.rotate_only) {
        /* refused before anything is written: the GPU encoder's limits (tcq_cuda_encode_rows) */
        if (opts->enc.search != TCQ_SEARCH_TWO_PASS)
            return tcq_fail(TCQ_ERR_UNSUPPORTED, "quantize --device cuda: the GPU encoder runs only the default search "
                                                 "(not --search %s)", tcq_search_name(opts->enc.search));
        if (c.p.L > 12)
            return tcq_fail(TCQ_ERR_UNSUPPORTED, "quantize --device cuda: the GPU encoder handles L <= 12 (not --L %d)", c.p.L);
        tcq_status gs = tcq_cuda_ctx_create(0, &c.gpu);
        if (gs == TCQ_OK && calibrated) gs = tcq_qla_create(c.gpu, &c.qla);
        if (gs != TCQ_OK) {
            tcq_cuda_ctx_free(c.gpu);
            tcq_error_prefix("quantize --device cuda");
            return gs;
        }
    }
    json_t *cfg = NULL;
    tcq_status rs = read_config(in_dir, &cfg, &c.n, &c.tied);
    if (rs != TCQ_OK) {
        tcq_qla_free(c.qla);
        tcq_cuda_ctx_free(c.gpu);
        return rs;
    }
    tcq_status s = make_dir(in_dir, out_dir);
    if (s == TCQ_OK) s = tcq_st_set_open(in_dir, &c.set);
    if (s == TCQ_OK) s = tcq_hadamard_create(c.n, 1, opts->seed, &c.h);
    if (s != TCQ_OK && c.set && !c.h) tcq_error_prefix("%s: hidden_size", in_dir);
    if (s == TCQ_OK) s = tcq_pool_create(opts->threads, &c.pool);
    if (s == TCQ_OK && !(c.qobj = json_object())) s = tcq_fail(TCQ_ERR_NOMEM, "quantization object");
    if (s == TCQ_OK) {
        /* unlinked at once: the bytes live as long as the descriptor, even after a crash */
        snprintf(c.spill_path, sizeof c.spill_path, "%s/.tcq-quantize-spill.XXXXXX", out_dir);
        const int fd = mkstemp(c.spill_path);
        if (fd >= 0) unlink(c.spill_path);
        if (fd < 0 || !(c.spill = fdopen(fd, "w+b"))) {
            if (fd >= 0) close(fd);
            s = tcq_fail(TCQ_ERR_IO, "%s: cannot create a spill file: %s", out_dir, strerror(errno));
        }
    }
    c.calib = (tcq_quant_calib){opts->calib, opts->calib_tokens > 0 ? opts->calib_tokens : 32768,
                                opts->calib_ctx > 0 ? opts->calib_ctx : 512, opts->threads};
    if (s == TCQ_OK) s = run(&c, out_dir, cfg);
    for (int i = 0; i < c.n_out; i++) free(c.outs[i].name);
    free(c.outs);
    free(c.lay);
    if (c.spill) fclose(c.spill);
    close_hessians(&c);
    tcq_quant_hfile_close(&c.hout);
    json_decref(c.qobj);
    json_decref(cfg);
    tcq_quant_lhess_free(&c.lh);
    tcq_pool_free(c.pool);
    tcq_qla_free(c.qla);   /* before its context */
    tcq_cuda_ctx_free(c.gpu);
    tcq_hadamard_free(c.h);
    tcq_st_set_close(c.set);
    return s;
}
