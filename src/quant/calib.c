/* Calibration, one decoder layer at a time.  The calibration windows' residual stream X
 * [tokens, dim] (f32, in the quantizer's rotated basis: embedding rows times R, as the artifact's
 * embedding) is the only state kept across layers.  For layer i the driver hands in i's weights
 * (rotated, gains folded, norms 1); running them over every window with taps gives i's Hessians
 * H = sum x x^T (double; q/k/v share one, gate/up share one, o and down their own), and running
 * them again in place moves X to layer i+1's input.  With the quantized reconstruction as i's
 * weights, i+1's Hessians are taken with 0..i already quantized (sequential, as GPTQ/QTIP do).
 * So the memory is X, one layer's weights and one layer's four Hessians, never the model's.
 * The readers' taps see the residual stream before the RMSNorm: normalised without a gain (the
 * fold moved it into the weights), already rotated.
 *
 * On a GPU (tcq_quant_cal_set_qla): the Hessians' rank-M updates run there (tcq_qla_syrk), and so
 * do the forward's projections: each call mirrors the layer's dense f32 weights (one push of the
 * seven, ~1.3 GB f32 for a 14B layer; dropped when it returns, so the next call's weights, e.g.
 * the coded ones changed in place, are pushed afresh) and the model's projection hook (model.h's
 * mm) sends every projection to cuBLAS SGEMM, the rows staged up and the outputs down; SwiGLU's
 * silu(g) * u stays on the host, with tcq_linear_swiglu's formula.  Attention, norms, rope and
 * the taps' normalisation and widening stay on the host.  Numerical contract (qla.h): the same
 * products in f32 (no TF32), another summation order than the CPU kernels, so the stream and the
 * Hessians match the CPU path to rounding (test_quant_qla measures it), not bit for bit; the same
 * run to run and for any thread count (one stream, no atomics; the host parts are the CPU path's).
 *
 * Asymmetric calibration (tcq_quant_cal_set_asym; asym.c says what it is for): a second stream
 * Xfp, the input model's, goes window by window through each layer's unquantized weights just
 * before the coded stream's window, its taps kept for that window (rec); the coded stream's taps
 * then add (x_fp - x) x^T to the site's cross term beside x x^T to its Hessian.  Both streams run
 * the same code on the same weights, so where they agree (layer 0: both are the embedding) the
 * cross terms are exactly zero. */
#include "quant.h"
#include "qla.h"
#include "../model/model.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Hessian matrices alive (the memory bound's test reads it). */
static int hess_live, hess_peak;

void tcq_quant_hess_count(int *live, int *peak)
{
    if (live) *live = __atomic_load_n(&hess_live, __ATOMIC_RELAXED);
    if (peak) *peak = __atomic_load_n(&hess_peak, __ATOMIC_RELAXED);
}

void tcq_quant_hess_count_reset(void) { __atomic_store_n(&hess_peak, __atomic_load_n(&hess_live, __ATOMIC_RELAXED), __ATOMIC_RELAXED); }

tcq_status tcq_quant_lhess_alloc(tcq_quant_lhess *lh)
{
    for (int s = 0; s < TCQ_TAP_SITES; s++) {
        if (lh->H[s]) continue;
        const int64_t d = lh->dim[s];
        if (d <= 0 || !(lh->H[s] = calloc((size_t)(d * d), sizeof(double)))) {
            tcq_quant_lhess_free(lh);
            return tcq_fail(TCQ_ERR_NOMEM, "Hessian of %lld x %lld", (long long)d, (long long)d);
        }
        const int n = __atomic_add_fetch(&hess_live, 1, __ATOMIC_RELAXED);
        int p = __atomic_load_n(&hess_peak, __ATOMIC_RELAXED);
        while (n > p && !__atomic_compare_exchange_n(&hess_peak, &p, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    }
    return TCQ_OK;
}

void tcq_quant_lhess_free(tcq_quant_lhess *lh)
{
    for (int s = 0; s < TCQ_TAP_SITES; s++) {
        if (lh->H[s]) {
            free(lh->H[s]);
            lh->H[s] = NULL;
            __atomic_sub_fetch(&hess_live, 1, __ATOMIC_RELAXED);
        }
        free(lh->C[s]);
        lh->C[s] = NULL;
    }
}

/* The tap site of a projection's tensor name (-1: none). */
static int site_of(const char *name)
{
    const char *rest = strstr(name, ".self_attn.");
    int site = -1;
    if (rest) {
        rest += 11;
        if (!strncmp(rest, "q_proj.", 7) || !strncmp(rest, "k_proj.", 7) || !strncmp(rest, "v_proj.", 7))
            site = TCQ_TAP_ATTN;
        else if (!strncmp(rest, "o_proj.", 7)) site = TCQ_TAP_O;
    } else if ((rest = strstr(name, ".mlp."))) {
        rest += 5;
        if (!strncmp(rest, "gate_proj.", 10) || !strncmp(rest, "up_proj.", 8)) site = TCQ_TAP_FFN;
        else if (!strncmp(rest, "down_proj.", 10)) site = TCQ_TAP_DOWN;
    }
    return strncmp(name, "model.layers.", 13) ? -1 : site;
}

const double *tcq_quant_lhess_for(const tcq_quant_lhess *lh, const char *name, int64_t *dim)
{
    const int site = site_of(name);
    if (!lh || site < 0 || !lh->H[site]) return NULL;
    *dim = lh->dim[site];
    return lh->H[site];
}

const double *tcq_quant_lhess_cross_for(const tcq_quant_lhess *lh, const char *name)
{
    const int site = site_of(name);
    return lh && site >= 0 ? lh->C[site] : NULL;
}

struct tcq_quant_cal {
    tcq_model *m;
    tcq_session *sess;
    tcq_pool *pool;
    int ctx;
    int64_t windows, dim;
    float *X;                 /* [windows * ctx, dim] */
    float *win;               /* [ctx, dim]: a window's copy when X stays */
    /* the taps */
    tcq_quant_lhess *lh;
    double *dbuf;             /* [chunk, max dim] */
    tcq_qla *qla;             /* set: the Hessians accumulate and the projections run on its device */
    /* asymmetric calibration (set_asym) */
    float *Xfp;               /* [windows * ctx, dim]: the input model's stream (NULL: off) */
    double *rec[TCQ_TAP_SITES]; /* [ctx, dim of the site]: the current window's input-model taps */
    int64_t row[TCQ_TAP_SITES]; /* rows tapped so far in the current window, per site */
    int recording;            /* 1: taps go to rec (the input-model pass of a window) */
    const void *wdev[7];      /* the current layer's weights mirrored on qla (dense f32) */
    int n_wdev;
    float *ubuf;              /* [chunk, hidden]: up's output beside gate's (the hook's SwiGLU) */
    tcq_status s;
};

void tcq_quant_cal_set_qla(tcq_quant_cal *c, tcq_qla *qla) { c->qla = qla; }

/* The host's per-row work on the model's pool, items of TAP_ROWS rows: each row's result depends
 * on that row alone, so the bits do not depend on the thread count. */
#define TAP_ROWS 8

typedef struct tap_job {
    const float *x;
    double *out;
    int64_t d, M;
    int norm;                 /* the RMSNorm without its (folded) gain first */
    float eps;
} tap_job;

static void tap_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const tap_job *J = arg;
    const int64_t d = J->d;
    for (int64_t r = item * TAP_ROWS; r < TCQ_MIN(J->M, (item + 1) * TAP_ROWS); r++) {
        const float *xr = J->x + r * d;
        double *o = J->out + r * d;
        if (!J->norm) {
            for (int64_t i = 0; i < d; i++) o[i] = xr[i];
            continue;
        }
        double ss = 0;
        for (int64_t i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
        const float inv = (float)(1.0 / sqrt((double)(float)(ss / (double)d) + (double)J->eps));
        for (int64_t i = 0; i < d; i++) o[i] = (double)(xr[i] * inv);   /* rounded to f32 as the forward's */
    }
}

static void tap(void *user, int layer, int site, const float *x, int M)
{
    (void)layer;
    tcq_quant_cal *c = user;
    if (c->s != TCQ_OK || !c->lh) return;
    const int64_t d = c->lh->dim[site];
    const int64_t r0 = c->row[site];
    if (c->Xfp && r0 + M > c->ctx) {
        c->s = tcq_fail(TCQ_ERR_INTERNAL, "calibration tap: %lld rows in a window of %d", (long long)(r0 + M), c->ctx);
        return;
    }
    c->row[site] += M;
    tap_job J = {x, c->recording ? c->rec[site] + r0 * d : c->dbuf, d, M, site == TCQ_TAP_ATTN || site == TCQ_TAP_FFN,
                 c->m->cfg.norm_eps};
    tcq_pool_run(c->m->pool, (M + TAP_ROWS - 1) / TAP_ROWS, tap_item, &J);
    if (c->recording) return;
    if (c->Xfp) {   /* C += (x_fp - x)^T x over the chunk's rows; rec's rows are not needed again */
        double *dx = c->rec[site] + r0 * d;
        for (int64_t i = 0; i < M * d; i++) dx[i] -= c->dbuf[i];
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d, (int)d, M, 1.0, dx, (int)d, c->dbuf, (int)d, 1.0,
                    c->lh->C[site], (int)d);
    }
    if (c->qla) {   /* the same x x^T in double, summed on the device */
        c->s = tcq_qla_syrk(c->qla, c->lh->H[site], d, c->dbuf, M);
        return;
    }
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, M, 1.0, c->dbuf, (int)d, 1.0, c->lh->H[site], (int)d);
}

/* w's weights are one of the layer's mirrors. */
static int on_device(const tcq_quant_cal *c, const tcq_weight *w)
{
    for (int i = 0; w->fmt == TCQ_WF_F32 && i < c->n_wdev; i++)
        if (w->dense == c->wdev[i]) return 1;
    return 0;
}

/* tcq_linear_swiglu's silu(g) * u (src/kernels/linear.c), g in y and u in ubuf, a row an item */
static inline float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

typedef struct silu_job {
    float *y;
    const float *u;
    int64_t N;
} silu_job;

static void silu_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const silu_job *J = arg;
    float *y = J->y + item * J->N;
    const float *u = J->u + item * J->N;
    for (int64_t j = 0; j < J->N; j++) y[j] = silu_mul(y[j], u[j]);
}

/* The projection hook (model.h's mm) while the layer's weights are mirrored: y = x W^T as one
 * SGEMM on qla (x staged up, y down, W its mirror); anything not mirrored goes to the kernels. */
static tcq_status mm(void *user, const tcq_weight *W, const tcq_weight *up, const float *x, float *y, int M)
{
    tcq_quant_cal *c = user;
    tcq_kctx *k = c->m->kctx;
    if (!on_device(c, W) || (up && (!on_device(c, up) || up->out != W->out || up->in != W->in ||
                                    up->out > c->m->cfg.hidden_dim)))
        return up ? tcq_linear_swiglu(W, up, x, y, M, k) : tcq_linear(W, x, y, M, k);
    const int64_t N = W->out, K = W->in;
    TCQ_TRY(tcq_qla_sgemm(c->qla, 0, 1, M, N, K, 1.0f, x, K, W->dense, K, 0.0f, y, N));
    if (!up) return TCQ_OK;
    TCQ_TRY(tcq_qla_sgemm(c->qla, 0, 1, M, N, K, 1.0f, x, K, up->dense, K, 0.0f, c->ubuf, N));
    silu_job J = {y, c->ubuf, N};
    tcq_pool_run(c->m->pool, M, silu_item, &J);
    return TCQ_OK;
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

tcq_status tcq_quant_calib_ids(const char *in_dir, const char *path, int ctx, int32_t **ids, size_t *n_ids)
{
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    size_t len = 0;
    TCQ_TRY(read_text(path, &text, &len));
    char tpath[4096];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", in_dir);
    tcq_tokenizer *tok = NULL;
    tcq_status s = tcq_tokenizer_load(tpath, &tok);
    if (s == TCQ_OK) s = tcq_tokenizer_encode_alloc(tok, text, len, TCQ_TOK_NO_PARSE_SPECIAL, ids, n_ids);
    tcq_tokenizer_free(tok);
    free(text);
    if (s == TCQ_OK && *n_ids < (size_t)ctx)
        s = tcq_fail(TCQ_ERR_INVALID_ARG, "calibration file %s: %zu tokens, shorter than one window of %d "
                     "(--calib-ctx)", path, *n_ids, ctx);
    if (s != TCQ_OK) {
        free(*ids);
        *ids = NULL;
        *n_ids = 0;
    }
    return s;
}

void tcq_quant_cal_free(tcq_quant_cal *c)
{
    if (!c) return;
    tcq_session_free(c->sess);
    tcq_model_free(c->m);
    free(c->X);
    free(c->Xfp);
    for (int i = 0; i < TCQ_TAP_SITES; i++) free(c->rec[i]);
    free(c->win);
    free(c->dbuf);
    free(c->ubuf);
    free(c);
}

tcq_status tcq_quant_cal_open(const char *in_dir, const tcq_hadamard *h, const tcq_quant_calib *o, tcq_pool *pool,
                              tcq_quant_cal **out)
{
    *out = NULL;
    if (o->ctx < 2) return tcq_fail(TCQ_ERR_INVALID_ARG, "calibration context %d: at least 2", o->ctx);
    if (o->tokens < o->ctx)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "calibration tokens %lld: fewer than one window of %d",
                        (long long)o->tokens, o->ctx);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    tcq_status s = tcq_quant_calib_ids(in_dir, o->path, o->ctx, &ids, &n_ids);
    tcq_quant_cal *c = calloc(1, sizeof *c);
    if (s == TCQ_OK && !c) s = tcq_fail(TCQ_ERR_NOMEM, "calibration state");
    /* The input model gives the config, rope tables, q/k norms, embedding rows and the forward's
     * scratch; its weights stay mapped, untouched (the driver hands each layer's in). */
    /* the exact path: calibration statistics from f32 activations, as before the bf16 fast GEMM
     * (AUTO would round the bf16 layers' activations to bf16 from M = 33) */
    const tcq_model_opts mo = {.n_threads = o->threads, .path = TCQ_PATH_EXACT};
    if (s == TCQ_OK) s = tcq_model_load(in_dir, &mo, &c->m);
    if (s == TCQ_OK) {
        /* the session's cache: one layer (tcq_model_layer_forward keeps every layer in layer 0) */
        const int keep = c->m->cfg.n_layers;
        c->m->cfg.n_layers = 1;
        s = tcq_session_create(c->m, o->ctx, TCQ_KV_F32, &c->sess);
        c->m->cfg.n_layers = keep;
    }
    if (s == TCQ_OK) {
        const tcq_model_config *cfg = &c->m->cfg;
        c->pool = pool;
        c->ctx = o->ctx;
        c->dim = cfg->dim;
        c->windows = TCQ_MIN((int64_t)(n_ids / (size_t)o->ctx), (o->tokens + o->ctx - 1) / o->ctx);
        const int64_t dmax = TCQ_MAX(TCQ_MAX((int64_t)cfg->dim, (int64_t)cfg->n_heads * cfg->head_dim), cfg->hidden_dim);
        if (tcq_hadamard_size(h) != cfg->dim)
            s = tcq_fail(TCQ_ERR_FORMAT, "%s: hidden size %d differs from the config's", in_dir, cfg->dim);
        c->X = malloc((size_t)(c->windows * o->ctx * c->dim) * sizeof *c->X);
        c->win = malloc((size_t)(o->ctx * c->dim) * sizeof *c->win);
        c->dbuf = malloc((size_t)(TCQ_PREFILL_CHUNK * dmax) * sizeof *c->dbuf);
        if (s == TCQ_OK && (!c->X || !c->win || !c->dbuf))
            s = tcq_fail(TCQ_ERR_NOMEM, "calibration activations of %lld tokens", (long long)(c->windows * o->ctx));
    }
    const int64_t N = s == TCQ_OK ? c->windows * o->ctx : 0;
    for (int64_t t = 0; s == TCQ_OK && t < N; t++) {
        if (ids[t] < 0 || ids[t] >= c->m->cfg.vocab_size)
            s = tcq_fail(TCQ_ERR_FORMAT, "calibration token %d outside the vocabulary of %d", ids[t], c->m->cfg.vocab_size);
        else tcq_model_embed(c->m, ids[t], c->X + t * c->dim);
    }
    /* the artifact's embedding: rotated, then rounded to bf16 */
    if (s == TCQ_OK) s = tcq_hadamard_rows(h, c->X, N, 0, pool);
    for (int64_t i = 0; s == TCQ_OK && i < N * c->dim; i++) c->X[i] = tcq_bf16_to_f32(tcq_f32_to_bf16(c->X[i]));
    free(ids);
    if (s != TCQ_OK) {
        tcq_quant_cal_free(c);
        return s;
    }
    *out = c;
    return TCQ_OK;
}

/* H's lower triangle from its upper one (DSYRK filled the upper), in 64 x 64 tiles (a row at a
 * time the writes stride by d: 2.8-3.0 s against 1.4-1.5 s for d = 17408 on one thread here), a
 * tile row an item. */
#define SYM_TILE 64

typedef struct sym_job {
    double *H;
    int64_t d;
} sym_job;

static void sym_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const sym_job *J = arg;
    double *H = J->H;
    const int64_t d = J->d, r0 = item * SYM_TILE, r1 = TCQ_MIN(d, r0 + SYM_TILE);
    for (int64_t k0 = r0; k0 < d; k0 += SYM_TILE)
        for (int64_t r = r0; r < r1; r++)
            for (int64_t k = TCQ_MAX(k0, r + 1); k < TCQ_MIN(d, k0 + SYM_TILE); k++) H[k * d + r] = H[r * d + k];
}

int64_t tcq_quant_cal_tokens(const tcq_quant_cal *c) { return c->windows * c->ctx; }
tcq_model *tcq_quant_cal_model(tcq_quant_cal *c) { return c->m; }
const float *tcq_quant_cal_stream(const tcq_quant_cal *c) { return c->X; }

tcq_status tcq_quant_cal_set_asym(tcq_quant_cal *c)
{
    if (c->qla) return tcq_fail(TCQ_ERR_UNSUPPORTED, "asymmetric calibration: not on the GPU path");
    if (c->Xfp) return TCQ_OK;
    const tcq_model_config *cfg = &c->m->cfg;
    const int64_t dims[TCQ_TAP_SITES] = {cfg->dim, (int64_t)cfg->n_heads * cfg->head_dim, cfg->dim, cfg->hidden_dim};
    const size_t n = (size_t)(c->windows * c->ctx * c->dim);
    c->Xfp = malloc(n * sizeof *c->Xfp);
    for (int i = 0; i < TCQ_TAP_SITES; i++) c->rec[i] = malloc((size_t)(c->ctx * dims[i]) * sizeof *c->rec[i]);
    if (!c->Xfp || !c->rec[0] || !c->rec[1] || !c->rec[2] || !c->rec[3]) {
        free(c->Xfp);
        c->Xfp = NULL;
        return tcq_fail(TCQ_ERR_NOMEM, "asymmetric calibration: a second stream of %lld tokens",
                        (long long)(c->windows * c->ctx));
    }
    memcpy(c->Xfp, c->X, n * sizeof *c->Xfp);
    return TCQ_OK;
}

tcq_status tcq_quant_cal_layer(tcq_quant_cal *c, int layer, const tcq_layer *L, tcq_quant_lhess *lh, int advance)
{
    return tcq_quant_cal_layer_asym(c, layer, L, L, lh, advance, 1);
}

tcq_status tcq_quant_cal_layer_asym(tcq_quant_cal *c, int layer, const tcq_layer *Lfp, const tcq_layer *L,
                                    tcq_quant_lhess *lh, int advance, int fp_advance)
{
    tcq_model *m = c->m;
    int fresh[TCQ_TAP_SITES] = {0};   /* allocated here: zeros, so the device copy starts zeroed (no push) */
    if (lh) {
        const tcq_model_config *cfg = &m->cfg;
        lh->dim[TCQ_TAP_ATTN] = lh->dim[TCQ_TAP_FFN] = cfg->dim;
        lh->dim[TCQ_TAP_O] = (int64_t)cfg->n_heads * cfg->head_dim;
        lh->dim[TCQ_TAP_DOWN] = cfg->hidden_dim;
        for (int i = 0; i < TCQ_TAP_SITES; i++) fresh[i] = !lh->H[i];
        TCQ_TRY(tcq_quant_lhess_alloc(lh));
        for (int i = 0; c->Xfp && i < TCQ_TAP_SITES; i++)
            if (!lh->C[i] && !(lh->C[i] = calloc((size_t)(lh->dim[i] * lh->dim[i]), sizeof(double)))) {
                tcq_quant_lhess_free(lh);
                return tcq_fail(TCQ_ERR_NOMEM, "cross term of %lld x %lld", (long long)lh->dim[i], (long long)lh->dim[i]);
            }
    }
    c->lh = lh;
    c->s = TCQ_OK;
    m->tap = lh ? tap : NULL;
    m->tap_user = c;
    tcq_status s = TCQ_OK;
    int mirrored = 0;   /* sites whose Hessian lives on the device for this layer */
    for (; lh && c->qla && s == TCQ_OK && mirrored < TCQ_TAP_SITES; mirrored++)
        s = tcq_qla_mirror(c->qla, lh->H[mirrored], (size_t)(lh->dim[mirrored] * lh->dim[mirrored]) * sizeof(double),
                           fresh[mirrored]);
    if (s != TCQ_OK) mirrored--;
    /* the projections on the device: the layer's dense f32 weights mirrored (each array once) */
    const tcq_weight *const ws[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
    c->n_wdev = 0;
    if (c->qla && s == TCQ_OK && !c->ubuf &&
        !(c->ubuf = malloc((size_t)TCQ_PREFILL_CHUNK * (size_t)m->cfg.hidden_dim * sizeof *c->ubuf)))
        s = tcq_fail(TCQ_ERR_NOMEM, "calibration: SwiGLU buffer");
    for (int j = 0; c->qla && s == TCQ_OK && j < 7; j++) {
        const tcq_weight *w = ws[j];
        if (w->fmt != TCQ_WF_F32 || !w->dense || on_device(c, w)) continue;
        s = tcq_qla_mirror(c->qla, w->dense, (size_t)(w->out * w->in) * sizeof(float), 0);
        if (s == TCQ_OK) c->wdev[c->n_wdev++] = w->dense;
        else tcq_error_prefix("layer %d: weights to the device", layer);
    }
    m->mm = c->n_wdev ? mm : NULL;
    m->mm_user = c;
    for (int64_t w = 0; s == TCQ_OK && w < c->windows; w++) {
        for (int pass = c->Xfp && lh ? 0 : 1; s == TCQ_OK && pass < 2; pass++) {
            /* pass 0 (asymmetric): the input model's window through Lfp, its taps kept, moved on in
             * place where fp_advance */
            c->recording = pass == 0;
            for (int i = 0; i < TCQ_TAP_SITES; i++) c->row[i] = 0;
            float *x = (pass ? c->X : c->Xfp) + w * c->ctx * c->dim;
            if (pass ? !advance : !fp_advance) x = memcpy(c->win, x, (size_t)(c->ctx * c->dim) * sizeof *x);
            s = tcq_session_rewind(c->sess, 0);
            if (s == TCQ_OK) s = tcq_model_layer_forward(m, c->sess, pass ? L : Lfp, layer, x, c->ctx);
            if (s == TCQ_OK) s = c->s;
        }
    }
    c->recording = 0;
    m->tap = NULL;
    m->mm = NULL;
    c->lh = NULL;
    for (int j = 0; j < c->n_wdev; j++) tcq_qla_unmirror(c->qla, c->wdev[j]);
    c->n_wdev = 0;
    for (int i = 0; i < mirrored; i++) {
        const int64_t d = lh->dim[i];
        if (s == TCQ_OK) s = tcq_qla_pull(c->qla, lh->H[i], d, d, d, sizeof(double));
        tcq_qla_unmirror(c->qla, lh->H[i]);
    }
    for (int i = 0; s == TCQ_OK && lh && i < TCQ_TAP_SITES; i++) {
        sym_job J = {lh->H[i], lh->dim[i]};
        tcq_pool_run(m->pool, (J.d + SYM_TILE - 1) / SYM_TILE, sym_item, &J);
    }
    if (s != TCQ_OK && lh) tcq_quant_lhess_free(lh);
    return s;
}

/* DIR/hessians.bin: "TCQHESS2", int64 n_layers, dims[4], tokens, seed, flags (bit 0: sequential),
 * then every (layer, site) Hessian as dim^2 little-endian doubles, layer-major, so one layer is
 * written or read at its offset.  "TCQHESS1" files (no flags: non-sequential) still load. */
static const char magic1[8] = {'T', 'C', 'Q', 'H', 'E', 'S', 'S', '1'}, magic2[8] = {'T', 'C', 'Q', 'H', 'E', 'S', 'S', '2'};

static int64_t layer_bytes(const tcq_quant_hfile *hf)
{
    int64_t n = 0;
    for (int i = 0; i < TCQ_TAP_SITES; i++) n += hf->dim[i] * hf->dim[i] * (int64_t)sizeof(double);
    return n;
}

tcq_status tcq_quant_hfile_create(const char *dir, tcq_quant_hfile *hf)
{
    char path[4096];
    if (mkdir(dir, 0777) && errno != EEXIST) return tcq_fail(TCQ_ERR_IO, "%s: cannot create: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/hessians.bin", dir);
    hf->f = fopen(path, "wb");
    if (!hf->f) return tcq_fail(TCQ_ERR_IO, "%s: %s", path, strerror(errno));
    const int64_t hdr[8] = {hf->n_layers, hf->dim[0], hf->dim[1], hf->dim[2], hf->dim[3], hf->tokens,
                            (int64_t)hf->seed, hf->sequential ? 1 : 0};
    hf->hdr_bytes = 8 + sizeof hdr;
    if (fwrite(magic2, 8, 1, hf->f) != 1 || fwrite(hdr, sizeof hdr, 1, hf->f) != 1) {
        fclose(hf->f);
        hf->f = NULL;
        return tcq_fail(TCQ_ERR_IO, "%s: write failed", path);
    }
    return TCQ_OK;
}

tcq_status tcq_quant_hfile_put(tcq_quant_hfile *hf, int layer, const tcq_quant_lhess *lh)
{
    int ok = fseeko(hf->f, (off_t)(hf->hdr_bytes + layer * layer_bytes(hf)), SEEK_SET) == 0;
    for (int i = 0; ok && i < TCQ_TAP_SITES; i++) {
        const size_t n = (size_t)(hf->dim[i] * hf->dim[i]);
        ok = lh->dim[i] == hf->dim[i] && fwrite(lh->H[i], sizeof(double), n, hf->f) == n;
    }
    return ok ? TCQ_OK : tcq_fail(TCQ_ERR_IO, "Hessian file: writing layer %d failed", layer);
}

tcq_status tcq_quant_hfile_open(const char *dir, uint64_t seed, tcq_quant_hfile *hf)
{
    memset(hf, 0, sizeof *hf);
    char path[4096];
    snprintf(path, sizeof path, "%s/hessians.bin", dir);
    hf->f = fopen(path, "rb");
    if (!hf->f) return tcq_fail(TCQ_ERR_IO, "%s: %s", path, strerror(errno));
    char mg[8];
    int64_t hdr[8] = {0};
    tcq_status s = TCQ_OK;
    const int v2 = fread(mg, 8, 1, hf->f) == 1 && !memcmp(mg, magic2, 8);
    if ((!v2 && memcmp(mg, magic1, 8)) || fread(hdr, sizeof(int64_t), v2 ? 8 : 7, hf->f) != (v2 ? 8u : 7u))
        s = tcq_fail(TCQ_ERR_FORMAT, "%s: not a tcq Hessian file", path);
    else if (hdr[0] <= 0 || hdr[0] > 4096 || hdr[1] <= 0 || hdr[2] <= 0 || hdr[3] <= 0 || hdr[4] <= 0 ||
             hdr[1] > 65536 || hdr[2] > 65536 || hdr[3] > 65536 || hdr[4] > 262144)
        s = tcq_fail(TCQ_ERR_FORMAT, "%s: bad header", path);
    else if ((uint64_t)hdr[6] != seed)
        s = tcq_fail(TCQ_ERR_INVALID_ARG, "%s: taken with Hadamard seed %lld, not %llu (--seed)", path,
                     (long long)hdr[6], (unsigned long long)seed);
    if (s == TCQ_OK) {
        hf->n_layers = (int)hdr[0];
        for (int i = 0; i < 4; i++) hf->dim[i] = hdr[1 + i];
        hf->tokens = hdr[5];
        hf->seed = seed;
        hf->sequential = (int)(hdr[7] & 1);
        hf->hdr_bytes = 8 + (v2 ? 8 : 7) * (int64_t)sizeof(int64_t);
        struct stat st;
        if (fstat(fileno(hf->f), &st) || st.st_size < hf->hdr_bytes + hf->n_layers * layer_bytes(hf))
            s = tcq_fail(TCQ_ERR_FORMAT, "%s: truncated (%d layers of Hessians announced)", path, hf->n_layers);
    }
    if (s != TCQ_OK) tcq_quant_hfile_close(hf);
    return s;
}

tcq_status tcq_quant_hfile_get(tcq_quant_hfile *hf, int layer, tcq_quant_lhess *lh)
{
    if (layer >= hf->n_layers)
        return tcq_fail(TCQ_ERR_FORMAT, "Hessian file: layer %d of %d", layer, hf->n_layers);
    for (int i = 0; i < TCQ_TAP_SITES; i++) lh->dim[i] = hf->dim[i];
    TCQ_TRY(tcq_quant_lhess_alloc(lh));
    int ok = fseeko(hf->f, (off_t)(hf->hdr_bytes + layer * layer_bytes(hf)), SEEK_SET) == 0;
    for (int i = 0; ok && i < TCQ_TAP_SITES; i++) {
        const size_t n = (size_t)(hf->dim[i] * hf->dim[i]);
        ok = fread(lh->H[i], sizeof(double), n, hf->f) == n;
    }
    if (ok) return TCQ_OK;
    tcq_quant_lhess_free(lh);
    return tcq_fail(TCQ_ERR_FORMAT, "Hessian file: truncated (layer %d)", layer);
}

tcq_status tcq_quant_hfile_close(tcq_quant_hfile *hf)
{
    if (!hf->f) return TCQ_OK;
    const int bad = fclose(hf->f);
    hf->f = NULL;
    return bad ? tcq_fail(TCQ_ERR_IO, "Hessian file: close failed") : TCQ_OK;
}
