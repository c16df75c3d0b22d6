/* Measured sensitivity for the --bpw allocation: the input model's mean KL against
 * itself on a few calibration windows when one projection is replaced by a coded candidate and
 * every other weight is the input's.  The candidate comes in the quantizer's rotated, gain-folded
 * basis and is taken back to the input's (W R^T, the gain divided out) so the rest of the model
 * runs as loaded (bf16, mapped): what changes is that one tensor's coding error, exactly.
 *
 * The windows' residual stream X is kept at the input of the layer being allocated (the
 * allocation pass goes layer by layer); a candidate of layer l runs layers l..N-1 from X and the
 * head, so a candidate costs (N - l) / N of a forward over the windows plus the head's logits.
 * The reference log-probabilities [windows * (ctx - 1), V] are computed once by the same path
 * (so an unchanged tensor measures 0 exactly).  Memory: X, one window's copy, the reference
 * (for tinyqwen's 4 windows of 512 and V = 8192: 67 MB; a 152k vocabulary makes it 1.2 GB). */
#include "quant.h"
#include "../model/model.h"

#include <math.h>
#include <string.h>

struct tcq_quant_sens {
    tcq_model *m;
    tcq_session *sess;        /* one layer's cache: layers run one after the other per window */
    const tcq_hadamard *h;
    int ctx, windows, layer;
    int64_t dim, V;
    float *X;                 /* [windows * ctx, dim]: the input model's stream at `layer`'s input */
    float *Y;                 /* [ctx, dim] */
    float *ref;               /* [windows * (ctx - 1), V] log-probabilities of the input model */
    float *lg;                /* [TCQ_PREFILL_CHUNK, V] */
};

void tcq_quant_sens_free(tcq_quant_sens *s)
{
    if (!s) return;
    tcq_session_free(s->sess);
    tcq_model_free(s->m);
    free(s->X);
    free(s->Y);
    free(s->ref);
    free(s->lg);
    free(s);
}

static double row_lse(const float *l, int64_t V)
{
    float mx = l[0];
    for (int64_t i = 1; i < V; i++) mx = l[i] > mx ? l[i] : mx;
    double t = 0;
    for (int64_t i = 0; i < V; i++) t += exp((double)l[i] - mx);
    return mx + log(t);
}

/* Window w from X through layers [from, N) with layer `from` as Lf (NULL: the model's), then the
 * head: store 1 keeps its log-probabilities as the reference, else *kl gets the sum over the
 * window's positions of KL(reference || this). */
static tcq_status run_window(tcq_quant_sens *s, int64_t w, int from, const tcq_layer *Lf, int store, double *kl)
{
    tcq_model *m = s->m;
    memcpy(s->Y, s->X + w * s->ctx * s->dim, (size_t)(s->ctx * s->dim) * sizeof *s->Y);
    for (int l = from; l < m->cfg.n_layers; l++) {
        TCQ_TRY(tcq_session_rewind(s->sess, 0));
        TCQ_TRY(tcq_model_layer_forward(m, s->sess, l == from && Lf ? Lf : &m->layers[l], l, s->Y, s->ctx));
    }
    const int64_t V = s->V;
    for (int i = 0; i < s->ctx - 1; i += TCQ_PREFILL_CHUNK) {   /* positions 0..ctx-2 predict 1..ctx-1 */
        const int M = TCQ_MIN(TCQ_PREFILL_CHUNK, s->ctx - 1 - i);
        TCQ_TRY(tcq_model_head_forward(m, s->Y + (int64_t)i * s->dim, M, s->lg));
        for (int r = 0; r < M; r++) {
            const float *a = s->lg + (int64_t)r * V;
            float *b = s->ref + (w * (s->ctx - 1) + i + r) * V;
            const double lse = row_lse(a, V);
            if (store) {
                for (int64_t v = 0; v < V; v++) b[v] = (float)((double)a[v] - lse);
                continue;
            }
            double k = 0;
            for (int64_t v = 0; v < V; v++) k += exp((double)b[v]) * ((double)b[v] - ((double)a[v] - lse));
            *kl += k > 0 ? k : 0;   /* rounding */
        }
    }
    return TCQ_OK;
}

tcq_status tcq_quant_sens_open(const char *in_dir, const char *calib, int ctx, int windows, const tcq_hadamard *h,
                               int threads, tcq_quant_sens **out)
{
    *out = NULL;
    if (ctx < 2) return tcq_fail(TCQ_ERR_INVALID_ARG, "calibration context %d: at least 2", ctx);
    if (windows < 1) return tcq_fail(TCQ_ERR_INVALID_ARG, "allocation windows %d: at least 1", windows);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    TCQ_TRY(tcq_quant_calib_ids(in_dir, calib, ctx, &ids, &n_ids));
    tcq_status st = TCQ_OK;
    if (n_ids / (size_t)ctx < (size_t)windows)
        st = tcq_fail(TCQ_ERR_INVALID_ARG, "calibration file %s: %zu windows of %d tokens, the allocation asks %d "
                      "(--alloc-windows)", calib, n_ids / (size_t)ctx, ctx, windows);
    tcq_quant_sens *s = st == TCQ_OK ? calloc(1, sizeof *s) : NULL;
    if (st == TCQ_OK && !s) st = tcq_fail(TCQ_ERR_NOMEM, "sensitivity state");
    /* the exact path (f32 activations), as calibration pins it: under AUTO the bf16 fast GEMM
     * rounds the mapped bf16 layers' activations from M = 33 but not an f32 candidate's, so an
     * unchanged tensor would no longer measure 0 */
    const tcq_model_opts mo = {.n_threads = threads, .path = TCQ_PATH_EXACT};
    if (st == TCQ_OK) st = tcq_model_load(in_dir, &mo, &s->m);
    if (st == TCQ_OK) {
        const int keep = s->m->cfg.n_layers;   /* one layer's cache, as calib.c's */
        s->m->cfg.n_layers = 1;
        st = tcq_session_create(s->m, ctx, TCQ_KV_F32, &s->sess);
        s->m->cfg.n_layers = keep;
    }
    if (st == TCQ_OK) {
        s->h = h;
        s->ctx = ctx;
        s->windows = windows;
        s->dim = s->m->cfg.dim;
        s->V = s->m->cfg.vocab_size;
        if (tcq_hadamard_size(h) != s->dim)
            st = tcq_fail(TCQ_ERR_FORMAT, "%s: hidden size %lld differs from the rotation's", in_dir, (long long)s->dim);
        s->X = malloc((size_t)((int64_t)windows * ctx * s->dim) * sizeof *s->X);
        s->Y = malloc((size_t)((int64_t)ctx * s->dim) * sizeof *s->Y);
        s->ref = malloc((size_t)((int64_t)windows * (ctx - 1) * s->V) * sizeof *s->ref);
        s->lg = malloc((size_t)((int64_t)TCQ_PREFILL_CHUNK * s->V) * sizeof *s->lg);
        if (st == TCQ_OK && (!s->X || !s->Y || !s->ref || !s->lg))
            st = tcq_fail(TCQ_ERR_NOMEM, "allocation windows: %d of %d tokens and their reference log-probabilities",
                          windows, ctx);
    }
    for (int64_t t = 0; st == TCQ_OK && t < (int64_t)windows * ctx; t++) {
        if (ids[t] < 0 || ids[t] >= s->V)
            st = tcq_fail(TCQ_ERR_FORMAT, "calibration token %d outside the vocabulary of %lld", ids[t], (long long)s->V);
        else tcq_model_embed(s->m, ids[t], s->X + t * s->dim);
    }
    free(ids);
    for (int64_t w = 0; st == TCQ_OK && w < windows; w++) st = run_window(s, w, 0, NULL, 1, NULL);
    if (st != TCQ_OK) {
        tcq_quant_sens_free(s);
        return st;
    }
    *out = s;
    return TCQ_OK;
}

tcq_status tcq_quant_sens_advance(tcq_quant_sens *s)
{
    tcq_model *m = s->m;
    if (s->layer >= m->cfg.n_layers) return tcq_fail(TCQ_ERR_INTERNAL, "sensitivity: past the last layer");
    for (int64_t w = 0; w < s->windows; w++) {
        TCQ_TRY(tcq_session_rewind(s->sess, 0));
        TCQ_TRY(tcq_model_layer_forward(m, s->sess, &m->layers[s->layer], s->layer, s->X + w * s->ctx * s->dim, s->ctx));
    }
    s->layer++;
    return TCQ_OK;
}

int tcq_quant_sens_layer(const tcq_quant_sens *s) { return s->layer; }

tcq_status tcq_quant_sens_kl(tcq_quant_sens *s, int slot, const float *What, int64_t R, int64_t C, double *kl)
{
    *kl = -1;
    tcq_model *m = s->m;
    if (s->layer >= m->cfg.n_layers || slot < 0 || slot > 6 || C != s->dim)
        return tcq_fail(TCQ_ERR_INTERNAL, "sensitivity: slot %d of layer %d, rows of %lld", slot, s->layer, (long long)C);
    tcq_layer L = m->layers[s->layer];
    tcq_weight *w[7] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down};
    const int writer = slot == 3 || slot == 6;
    const int64_t out = writer ? C : R, in = writer ? R : C;
    if (w[slot]->out != out || w[slot]->in != in)
        return tcq_fail(TCQ_ERR_INTERNAL, "sensitivity: slot %d is [%lld, %lld], the candidate [%lld, %lld]", slot,
                        (long long)w[slot]->out, (long long)w[slot]->in, (long long)out, (long long)in);
    float *B = malloc((size_t)(R * C) * sizeof *B), *W = writer ? malloc((size_t)(R * C) * sizeof *W) : B;
    tcq_status st = B && W ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "sensitivity: candidate of [%lld, %lld]", (long long)R,
                                                (long long)C);
    if (st == TCQ_OK) {
        memcpy(B, What, (size_t)(R * C) * sizeof *B);
        st = tcq_hadamard_rows(s->h, B, R, 1, NULL);   /* rows times R^T: the input's basis */
    }
    if (st == TCQ_OK && writer) {
        for (int64_t i = 0; i < R; i++)   /* Wt [in, n] -> W [n, in] */
            for (int64_t r = 0; r < C; r++) W[r * R + i] = B[i * C + r];
    } else if (st == TCQ_OK) {
        /* the folded gain out again: the model multiplies it back (a zero gain: that input is
         * multiplied by 0 either way) */
        const float *g = slot == 4 || slot == 5 ? L.ffn_norm : L.attn_norm;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) W[r * C + c] = g[c] != 0 ? W[r * C + c] / g[c] : 0.0f;
    }
    *w[slot] = (tcq_weight){.fmt = TCQ_WF_F32, .out = out, .in = in, .dense = W};
    double sum = 0;
    for (int64_t i = 0; st == TCQ_OK && i < s->windows; i++) st = run_window(s, i, s->layer, &L, 0, &sum);
    if (st == TCQ_OK) *kl = sum / ((double)s->windows * (s->ctx - 1));
    if (W != B) free(W);
    free(B);
    return st;
}
