/* The whole forward on one CUDA device: the weights uploaded once at load (after checking the
 * device's free memory against what the model needs), KV caches in device memory, the layer
 * loop of forward.c as kernels on the context's stream (trellis layers through
 * tcq_cuda_linear / tcq_cuda_linear_swiglu, the rest through model_kernels.cu), and decode
 * steps of up to TCQ_MAX_BATCH rows replayed as CUDA graphs: the rows' tokens, positions and
 * caches live in device memory, so one graph per row count serves every step. */
#include "model_cuda.cuh"

extern "C" {
#include "model/model.h"
}

#include <stdio.h>
#include <string.h>

namespace {

struct dev_layer {
    float *attn_norm, *ffn_norm, *q_norm, *k_norm;
    tcq_weight wq, wk, wv, wo, gate, up, down;
    int fused_qkv;            /* wqkv holds wq, wk, wv stacked (one launch instead of three) */
    tcq_weight wqkv;
};

} // namespace

struct tcq_model_cuda {
    tcq_cuda_ctx *ctx;
    cudaStream_t st;
    int device;
    tcq_kpath path;
    int no_graphs;
    void **allocs;
    int n_allocs, cap_allocs;
    size_t weight_bytes;
    dev_layer *L;
    tcq_weight emb, lm_head;
    float *final_norm, *inv_freq;
    int R;                                   /* rows of the activation buffers */
    float *x, *xb, *xb2, *qkv, *q, *k, *v, *att, *hb, *hb2, *logits;
    mk_row *d_rows, *h_rows;                 /* [R]; h_rows pinned */
    float *part;                             /* attention partials */
    size_t part_cap;                         /* floats */
    cudaGraphExec_t graph[2][TCQ_MAX_BATCH + 1];   /* [logits wanted][M] */
    int graph_S[2][TCQ_MAX_BATCH + 1];
    int warm[2][TCQ_MAX_BATCH + 1];          /* ran once eagerly (the kernels' scratch is grown) */
    void *snap_scratch;                      /* the context's scratch when the graphs were captured */
    int *snap_counters;
};

namespace {

tcq_status dalloc(tcq_model_cuda *mc, size_t bytes, void **out)
{
    *out = NULL;
    if (mc->n_allocs == mc->cap_allocs) {
        int cap = mc->cap_allocs ? 2 * mc->cap_allocs : 64;
        void **a = (void **)realloc(mc->allocs, (size_t)cap * sizeof *a);
        if (!a) return tcq_fail(TCQ_ERR_NOMEM, "device model: out of host memory");
        mc->allocs = a;
        mc->cap_allocs = cap;
    }
    CU_TRY(cudaMalloc(out, bytes ? bytes : 1), "device model: cudaMalloc");
    mc->allocs[mc->n_allocs++] = *out;
    return TCQ_OK;
}

size_t dtype_size(tcq_dtype t) { return t == TCQ_DTYPE_F32 ? 4 : 2; }

/* Device bytes of one weight (sizing and upload agree). */
size_t weight_dev_bytes(const tcq_weight *w)
{
    switch (w->fmt) {
    case TCQ_WF_F32: return (size_t)(w->out * w->in) * 4;
    case TCQ_WF_F16:
    case TCQ_WF_BF16: return (size_t)(w->out * w->in) * 2;
    case TCQ_WF_TRELLIS: return tcq_cuda_trellis_bytes(&w->tr);
    case TCQ_WF_AFFINE:
        return tcq_align256((size_t)(w->out * w->in * w->af.bits / 32) * 4) +
               2 * tcq_align256((size_t)(w->out * (w->in / w->af.group_size)) * dtype_size(w->af.sdtype));
    default: return 0;
    }
}

tcq_status upload(tcq_model_cuda *mc, const void *src, size_t bytes, void **out)
{
    TCQ_TRY(dalloc(mc, bytes, out));
    CU_TRY(cudaMemcpy(*out, src, bytes, cudaMemcpyHostToDevice), "device model: upload");
    mc->weight_bytes += bytes;
    return TCQ_OK;
}

tcq_status upload_weight(tcq_model_cuda *mc, const tcq_weight *h, tcq_weight *d, const char *what, int layer)
{
    *d = *h;
    void *p;
    switch (h->fmt) {
    case TCQ_WF_F32:
    case TCQ_WF_F16:
    case TCQ_WF_BF16:
        TCQ_TRY(upload(mc, h->dense, weight_dev_bytes(h), &p));
        d->dense = p;
        return TCQ_OK;
    case TCQ_WF_TRELLIS: {
        tcq_status s = tcq_cuda_check_weight(&h->tr);
        if (s != TCQ_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", tcq_last_error());
            return tcq_fail(s, "device model: layer %d %s: the CUDA kernels do not take this trellis tensor: %s", layer,
                            what, why);
        }
        const size_t n = tcq_cuda_trellis_bytes(&h->tr);
        TCQ_TRY(dalloc(mc, n, &p));
        TCQ_TRY(tcq_cuda_trellis_upload(mc->ctx, &h->tr, p, n, &d->tr));
        mc->weight_bytes += n;
        return TCQ_OK;
    }
    case TCQ_WF_AFFINE: {
        const tcq_affine *a = &h->af;
        const size_t groups = (size_t)(h->out * (h->in / a->group_size)) * dtype_size(a->sdtype);
        TCQ_TRY(upload(mc, a->w, (size_t)(h->out * h->in * a->bits / 32) * 4, &p));
        d->af.w = (const uint32_t *)p;
        TCQ_TRY(upload(mc, a->scales, groups, &p));
        d->af.scales = p;
        TCQ_TRY(upload(mc, a->biases, groups, &p));
        d->af.biases = p;
        return TCQ_OK;
    }
    default: return tcq_fail(TCQ_ERR_UNSUPPORTED, "device model: layer %d %s: weight format %d", layer, what, (int)h->fmt);
    }
}

tcq_status upload_f32(tcq_model_cuda *mc, const float *h, size_t n, float **out)
{
    *out = NULL;
    if (!h) return TCQ_OK;
    void *p;
    TCQ_TRY(upload(mc, h, n * sizeof(float), &p));
    *out = (float *)p;
    return TCQ_OK;
}

int trellis_of(const tcq_weight *w) { return w->fmt == TCQ_WF_TRELLIS; }

/* Whether q, k, v can be stacked into one matrix [qd + 2 kvd, in]: the same dense format, or
 * trellis coded along the input (rows = outputs, so stacking is concatenation) with the same
 * parameters. */
bool qkv_stackable(const tcq_weight *q, const tcq_weight *k, const tcq_weight *v)
{
    if (q->fmt != k->fmt || q->fmt != v->fmt || q->in != k->in || q->in != v->in) return false;
    if (q->fmt == TCQ_WF_F32 || q->fmt == TCQ_WF_F16 || q->fmt == TCQ_WF_BF16) return true;
    if (q->fmt != TCQ_WF_TRELLIS) return false;
    const tcq_weight *w[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        if (w[i]->tr.axis != 1 || w[i]->tr.interleaved || w[i]->tr.p.L != q->tr.p.L || w[i]->tr.p.k != q->tr.p.k ||
            w[i]->tr.p.T != q->tr.p.T || w[i]->tr.cols != q->tr.cols)
            return false;
    return true;
}

/* The stacked host weight (its arrays malloc'ed into *hold: free after the upload). */
tcq_status qkv_stack(const tcq_weight *q, const tcq_weight *k, const tcq_weight *v, tcq_weight *out, void **hold)
{
    const tcq_weight *w[3] = {q, k, v};
    *out = *q;
    out->out = q->out + k->out + v->out;
    if (q->fmt != TCQ_WF_TRELLIS) {
        const size_t es = q->fmt == TCQ_WF_F32 ? 4 : 2, row = (size_t)q->in * es;
        char *d = (char *)malloc((size_t)out->out * row);
        if (!d) return tcq_fail(TCQ_ERR_NOMEM, "device model: stacking q, k, v");
        size_t at = 0;
        for (int i = 0; i < 3; i++) {
            memcpy(d + at, w[i]->dense, (size_t)w[i]->out * row);
            at += (size_t)w[i]->out * row;
        }
        out->dense = d;
        hold[0] = d;
        return TCQ_OK;
    }
    const size_t rw = (size_t)tcq_trellis_row_words(&q->tr);
    uint32_t *codes = (uint32_t *)malloc((size_t)out->out * rw * 4);
    uint16_t *scales = (uint16_t *)malloc((size_t)out->out * 2);
    hold[0] = codes;
    hold[1] = scales;
    if (!codes || !scales) return tcq_fail(TCQ_ERR_NOMEM, "device model: stacking q, k, v");
    size_t r0 = 0;
    for (int i = 0; i < 3; i++) {
        memcpy(codes + r0 * rw, w[i]->tr.codes, (size_t)w[i]->tr.rows * rw * 4);
        memcpy(scales + r0, w[i]->tr.scales, (size_t)w[i]->tr.rows * 2);
        r0 += (size_t)w[i]->tr.rows;
    }
    out->tr.rows = out->out;
    out->tr.codes = codes;
    out->tr.scales = scales;
    return TCQ_OK;
}

tcq_status lin(tcq_model_cuda *mc, const tcq_weight *w, const float *x, float *y, int M)
{
    if (trellis_of(w)) return tcq_cuda_linear(mc->ctx, &w->tr, x, y, M, mc->path);
    mk_dense(mc->st, w, x, y, M);
    CU_LAUNCHED("device model: dense linear");
    return TCQ_OK;
}

void drop_graphs(tcq_model_cuda *mc)
{
    for (int a = 0; a < 2; a++)
        for (int b = 0; b <= TCQ_MAX_BATCH; b++) {
            if (mc->graph[a][b]) cudaGraphExecDestroy(mc->graph[a][b]);
            mc->graph[a][b] = NULL;
        }
}

/* Whether layer L runs fused at M rows (the integer kernels' prep and chunk sums folded into the
 * neighbouring launches, linear_io.h): every projection trellis on those kernels, q/k/v stacked,
 * o and down with more than one chunk (their chunk-sum launch does the residual add). */
bool layer_fused(const tcq_model_cuda *mc, const dev_layer *L, int M)
{
    if (!L->fused_qkv || !trellis_of(&L->wqkv) || !trellis_of(&L->wo) || !trellis_of(&L->gate) ||
        !trellis_of(&L->up) || !trellis_of(&L->down))
        return false;
    return tcq_cuda_linear_io_ok(mc->ctx, &L->wqkv.tr, NULL, M, mc->path, 0) &&
           tcq_cuda_linear_io_ok(mc->ctx, &L->wo.tr, NULL, M, mc->path, 1) &&
           tcq_cuda_linear_io_ok(mc->ctx, &L->gate.tr, &L->up.tr, M, mc->path, 0) &&
           tcq_cuda_linear_io_ok(mc->ctx, &L->down.tr, NULL, M, mc->path, 1);
}

/* One layer, fused: 13 launches at M = 1 where the plain sequence takes 17 (ncu, docs/PERFORMANCE.md:
 * 43 us a layer of prep and chunk-sum launches).  x is the residual stream before and after. */
tcq_status layer_fused_enqueue(tcq_model *m, const dev_layer *L, int l, int M, int S)
{
    tcq_model_cuda *mc = m->cu;
    const tcq_model_config *c = &m->cfg;
    const int hd = c->head_dim;
    tcq_cuda_pend qkv, gu;
    tcq_cuda_io io = {};
    io.norm = L->attn_norm;
    io.eps = c->norm_eps;
    io.defer = &qkv;
    TCQ_TRY(tcq_cuda_linear_io(mc->ctx, &L->wqkv.tr, NULL, mc->x, mc->qkv, M, mc->path, &io));
    mk_qk_rope_store_pend(mc->st, qkv, mc->q, mc->d_rows, L->q_norm, L->k_norm, mc->inv_freq, M, c->n_heads,
                          c->n_kv_heads, hd, c->rope_interleaved, c->norm_eps, l);
    mk_attention(mc->st, mc->q, mc->att, mc->d_rows, mc->part, S, M, c->n_heads, c->n_kv_heads, hd, l);
    CU_LAUNCHED("device model: attention");
    io = tcq_cuda_io{};
    io.accumulate = 1;
    TCQ_TRY(tcq_cuda_linear_io(mc->ctx, &L->wo.tr, NULL, mc->att, mc->x, M, mc->path, &io));
    io = tcq_cuda_io{};
    io.norm = L->ffn_norm;
    io.eps = c->norm_eps;
    io.defer = &gu;
    TCQ_TRY(tcq_cuda_linear_io(mc->ctx, &L->gate.tr, &L->up.tr, mc->x, mc->hb, M, mc->path, &io));
    io = tcq_cuda_io{};
    io.src = &gu;
    io.accumulate = 1;
    return tcq_cuda_linear_io(mc->ctx, &L->down.tr, NULL, NULL, mc->x, M, mc->path, &io);
}

/* The forward of M rows whose metadata is in mc->d_rows, logits of rows [out_from, M) into
 * mc->logits; all on mc->st (capturable). */
tcq_status enqueue(tcq_model *m, int M, int out_from, int S)
{
    tcq_model_cuda *mc = m->cu;
    const tcq_model_config *c = &m->cfg;
    const int d = c->dim, hd = c->head_dim;
    const float eps = c->norm_eps;
    mk_embed(mc->st, &mc->emb, mc->d_rows, mc->x, M);
    CU_LAUNCHED("device model: embedding");
    bool normed = false;   /* xb holds rmsnorm(x) for the next consumer (a fused layer norms in its prep) */
    for (int l = 0; l < c->n_layers; l++) {
        const dev_layer *L = &mc->L[l];
        const int qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
        if (layer_fused(mc, L, M)) {
            TCQ_TRY(layer_fused_enqueue(m, L, l, M, S));
            normed = false;
            continue;
        }
        if (!normed) mk_add_norm(mc->st, mc->x, NULL, L->attn_norm, mc->xb, M, d, eps);
        if (L->fused_qkv) {
            TCQ_TRY(lin(mc, &L->wqkv, mc->xb, mc->qkv, M));
            const int w = qd + 2 * kvd;
            mk_qk_rope_store(mc->st, mc->qkv, w, mc->qkv + qd, w, mc->qkv + qd + kvd, w, mc->q, mc->d_rows, L->q_norm,
                             L->k_norm, mc->inv_freq, M, c->n_heads, c->n_kv_heads, hd, c->rope_interleaved, eps, l);
        } else {
            TCQ_TRY(lin(mc, &L->wq, mc->xb, mc->qkv, M));
            TCQ_TRY(lin(mc, &L->wk, mc->xb, mc->k, M));
            TCQ_TRY(lin(mc, &L->wv, mc->xb, mc->v, M));
            mk_qk_rope_store(mc->st, mc->qkv, qd, mc->k, kvd, mc->v, kvd, mc->q, mc->d_rows, L->q_norm, L->k_norm,
                             mc->inv_freq, M, c->n_heads, c->n_kv_heads, hd, c->rope_interleaved, eps, l);
        }
        mk_attention(mc->st, mc->q, mc->att, mc->d_rows, mc->part, S, M, c->n_heads, c->n_kv_heads, hd, l);
        CU_LAUNCHED("device model: attention");
        TCQ_TRY(lin(mc, &L->wo, mc->att, mc->xb2, M));
        mk_add_norm(mc->st, mc->x, mc->xb2, L->ffn_norm, mc->xb, M, d, eps);
        if (trellis_of(&L->gate) && trellis_of(&L->up)) {
            TCQ_TRY(tcq_cuda_linear_swiglu(mc->ctx, &L->gate.tr, &L->up.tr, mc->xb, mc->hb, M, mc->path));
        } else {
            TCQ_TRY(lin(mc, &L->gate, mc->xb, mc->hb2, M));
            TCQ_TRY(lin(mc, &L->up, mc->xb, mc->hb, M));
            mk_swiglu(mc->st, mc->hb2, mc->hb, mc->hb, (int64_t)M * c->hidden_dim);
        }
        TCQ_TRY(lin(mc, &L->down, mc->hb, mc->xb2, M));
        const float *next = l + 1 < c->n_layers ? mc->L[l + 1].attn_norm : mc->final_norm;
        mk_add_norm(mc->st, mc->x, mc->xb2, next, mc->xb, M, d, eps);
        normed = true;
        CU_LAUNCHED("device model: layer");
    }
    if (!normed) mk_add_norm(mc->st, mc->x, NULL, mc->final_norm, mc->xb, M, d, eps);
    if (out_from < M) TCQ_TRY(lin(mc, &mc->lm_head, mc->xb + (size_t)out_from * d, mc->logits, M - out_from));
    return TCQ_OK;
}

} // namespace

extern "C" int tcq_model_cuda_present(int index)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return index >= 0 && index < n;
}

extern "C" void tcq_model_cuda_free(tcq_model *m)
{
    tcq_model_cuda *mc = m->cu;
    if (!mc) return;
    cudaSetDevice(mc->device);
    if (mc->st) cudaStreamSynchronize(mc->st);
    drop_graphs(mc);
    for (int i = 0; i < mc->n_allocs; i++) cudaFree(mc->allocs[i]);
    free(mc->allocs);
    if (mc->h_rows) cudaFreeHost(mc->h_rows);
    free(mc->L);
    tcq_cuda_ctx_free(mc->ctx);
    free(mc);
    m->cu = NULL;
}

extern "C" tcq_status tcq_model_cuda_init(tcq_model *m, const tcq_model_opts *opts)
{
    const tcq_model_config *c = &m->cfg;
    const int idx = opts ? opts->device_index : 0;
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess) {
        cudaGetLastError();
        n_dev = 0;
    }
    if (idx < 0 || idx >= n_dev)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "device cuda:%d: this machine has %d CUDA device%s", idx, n_dev,
                        n_dev == 1 ? "" : "s");
    if (c->head_dim > MK_MAX_HD || c->head_dim % 8 || c->n_heads / c->n_kv_heads > MK_MAX_G)
        return tcq_fail(TCQ_ERR_UNSUPPORTED,
                        "device cuda: head_dim %d, %d query heads per kv head (the device attention takes multiples of 8 "
                        "up to %d, up to %d)",
                        c->head_dim, c->n_heads / c->n_kv_heads, MK_MAX_HD, MK_MAX_G);
    /* what the model needs: weights, activations of R rows, logits of R rows, the kernels'
     * largest scratch (a trellis matrix decoded to bf16 for the GEMM regime; the SwiGLU's two
     * temporaries), attention partials for R rows at the model's context, and a margin for the
     * CUDA context and cuBLAS */
    const int R = TCQ_PREFILL_CHUNK;
    const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    const size_t wide = TCQ_MAX((size_t)c->dim, qd);
    size_t wbytes = 0, gemm = 0;
    for (int l = 0; l < c->n_layers; l++) {
        const tcq_layer *L = &m->layers[l];
        const tcq_weight *all[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
        for (int i = 0; i < 7; i++) {
            wbytes += weight_dev_bytes(all[i]);
            if (trellis_of(all[i])) gemm = TCQ_MAX(gemm, (size_t)(all[i]->out * all[i]->in) * 2);
        }
        wbytes += 4 * (2 * (size_t)c->dim + (L->q_norm ? 2 * (size_t)c->head_dim : 0));
    }
    const bool tied = m->lm_head.fmt == m->emb.fmt && m->lm_head.dense == m->emb.dense && m->emb.fmt != TCQ_WF_TRELLIS &&
                      m->emb.fmt != TCQ_WF_AFFINE;
    wbytes += weight_dev_bytes(&m->emb) + (tied ? 0 : weight_dev_bytes(&m->lm_head));
    if (trellis_of(&m->lm_head)) gemm = TCQ_MAX(gemm, (size_t)(m->lm_head.out * m->lm_head.in) * 2);
    gemm += 2 * (size_t)R * TCQ_MAX((size_t)c->hidden_dim, (size_t)c->vocab_size) * 4;
    const size_t act = (size_t)R * 4 * ((size_t)c->dim + 2 * wide + 3 * qd + 4 * kvd + 2 * (size_t)c->hidden_dim);
    const size_t logits = (size_t)R * c->vocab_size * 4;
    const size_t S = ((size_t)c->max_seq + MK_ATT_SPLIT - 1) / MK_ATT_SPLIT;
    const size_t part = (size_t)R * c->n_heads * S * (c->head_dim + 2) * 4;
    const size_t margin = (size_t)512 << 20;
    const size_t need = wbytes + act + logits + gemm + part + margin;
    CU_TRY(cudaSetDevice(idx), "device model: cudaSetDevice");
    size_t free_b = 0, total_b = 0;
    CU_TRY(cudaMemGetInfo(&free_b, &total_b), "device model: cudaMemGetInfo");
    if (need > free_b)
        return tcq_fail(TCQ_ERR_NOMEM,
                        "device cuda:%d: the model needs %.2f GB of device memory (weights %.2f GB, scratch %.2f GB), "
                        "the device has %.2f GB free of %.2f GB",
                        idx, need / 1e9, wbytes / 1e9, (need - wbytes) / 1e9, free_b / 1e9, total_b / 1e9);

    tcq_model_cuda *mc = (tcq_model_cuda *)calloc(1, sizeof *mc);
    if (!mc) return tcq_fail(TCQ_ERR_NOMEM, "device model: out of memory");
    m->cu = mc;
    mc->device = idx;
    mc->path = opts ? opts->path : TCQ_PATH_AUTO;
    mc->no_graphs = opts ? opts->cuda_no_graphs : 0;
    mc->R = R;
    tcq_status s = tcq_cuda_ctx_create(idx, &mc->ctx);
    if (s != TCQ_OK) {
        tcq_model_cuda_free(m);
        return s;
    }
    mc->st = (cudaStream_t)tcq_cuda_ctx_stream(mc->ctx);
    mc->L = (dev_layer *)calloc((size_t)c->n_layers, sizeof *mc->L);
    if (!mc->L) s = tcq_fail(TCQ_ERR_NOMEM, "device model: out of memory");
    static const char *names[7] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    for (int l = 0; s == TCQ_OK && l < c->n_layers; l++) {
        const tcq_layer *H = &m->layers[l];
        dev_layer *D = &mc->L[l];
        const tcq_weight *hw[7] = {&H->wq, &H->wk, &H->wv, &H->wo, &H->gate, &H->up, &H->down};
        tcq_weight *dw[7] = {&D->wq, &D->wk, &D->wv, &D->wo, &D->gate, &D->up, &D->down};
        D->fused_qkv = qkv_stackable(&H->wq, &H->wk, &H->wv);
        if (D->fused_qkv) {
            tcq_weight st;
            void *hold[2] = {NULL, NULL};
            s = qkv_stack(&H->wq, &H->wk, &H->wv, &st, hold);
            if (s == TCQ_OK) s = upload_weight(mc, &st, &D->wqkv, "q/k/v_proj", l);
            free(hold[0]);
            free(hold[1]);
        }
        for (int i = D->fused_qkv ? 3 : 0; s == TCQ_OK && i < 7; i++) s = upload_weight(mc, hw[i], dw[i], names[i], l);
        if (s == TCQ_OK) s = upload_f32(mc, H->attn_norm, (size_t)c->dim, &D->attn_norm);
        if (s == TCQ_OK) s = upload_f32(mc, H->ffn_norm, (size_t)c->dim, &D->ffn_norm);
        if (s == TCQ_OK) s = upload_f32(mc, H->q_norm, (size_t)c->head_dim, &D->q_norm);
        if (s == TCQ_OK) s = upload_f32(mc, H->k_norm, (size_t)c->head_dim, &D->k_norm);
        if (s == TCQ_OK && m->opts.progress)
            m->opts.progress(m->opts.progress_arg, (double)(l + 1) / c->n_layers, "uploading weights");
    }
    if (s == TCQ_OK) s = upload_weight(mc, &m->emb, &mc->emb, "embed_tokens", -1);
    if (s == TCQ_OK && tied) mc->lm_head = mc->emb;
    else if (s == TCQ_OK) s = upload_weight(mc, &m->lm_head, &mc->lm_head, "lm_head", -1);
    if (s == TCQ_OK) s = upload_f32(mc, m->final_norm, (size_t)c->dim, &mc->final_norm);
    if (s == TCQ_OK) s = upload_f32(mc, m->rope_inv_freq, (size_t)c->head_dim / 2, &mc->inv_freq);
    float **bufs[] = {&mc->x, &mc->xb, &mc->xb2, &mc->qkv, &mc->q, &mc->k, &mc->v, &mc->att, &mc->hb, &mc->hb2, &mc->logits};
    const size_t sizes[] = {(size_t)c->dim, wide, wide, qd + 2 * kvd, qd, kvd, kvd, qd, (size_t)c->hidden_dim,
                            (size_t)c->hidden_dim, (size_t)c->vocab_size};
    for (int i = 0; s == TCQ_OK && i < 11; i++) {
        void *p;
        s = dalloc(mc, (size_t)R * sizes[i] * sizeof(float), &p);
        *bufs[i] = (float *)p;
    }
    if (s == TCQ_OK) {
        void *p;
        s = dalloc(mc, (size_t)R * sizeof(mk_row), &p);
        mc->d_rows = (mk_row *)p;
    }
    if (s == TCQ_OK) {
        cudaError_t e = cudaHostAlloc((void **)&mc->h_rows, (size_t)R * sizeof(mk_row), cudaHostAllocDefault);
        if (e != cudaSuccess) s = tcq_cuda_fail(e, "device model: pinned rows");
    }
    if (s != TCQ_OK) {
        tcq_model_cuda_free(m);
        return s;
    }
    char desc[256] = "";
    tcq_cuda_describe(mc->ctx, desc, sizeof desc);
    snprintf(m->device_name, sizeof m->device_name, "cuda:%d (%s)", idx, desc);
    return TCQ_OK;
}

extern "C" tcq_status tcq_session_cuda_alloc(const tcq_model *m, tcq_session *s)
{
    tcq_model_cuda *mc = m->cu;
    CU_TRY(cudaSetDevice(mc->device), "device session: cudaSetDevice");
    size_t free_b = 0, total_b = 0;
    CU_TRY(cudaMemGetInfo(&free_b, &total_b), "device session: cudaMemGetInfo");
    if (s->bytes + ((size_t)64 << 20) > free_b)
        return tcq_fail(TCQ_ERR_NOMEM, "device cuda:%d: a KV cache of %d positions needs %.3f GB, the device has %.3f GB free",
                        mc->device, s->ctx, s->bytes / 1e9, free_b / 1e9);
    s->kcache = s->vcache = NULL;
    cudaError_t e = cudaMalloc(&s->kcache, s->bytes / 2);
    if (e == cudaSuccess) e = cudaMalloc(&s->vcache, s->bytes / 2);
    if (e != cudaSuccess) {
        if (s->kcache) cudaFree(s->kcache);
        cudaGetLastError();
        return tcq_fail(TCQ_ERR_NOMEM, "device cuda:%d: KV cache of %.3f GB: %s", mc->device, s->bytes / 1e9,
                        cudaGetErrorString(e));
    }
    s->on_device = 1;
    return TCQ_OK;
}

extern "C" void tcq_session_cuda_release(tcq_session *s)
{
    if (s->kcache) cudaFree(s->kcache);
    if (s->vcache) cudaFree(s->vcache);
    s->kcache = s->vcache = NULL;
}

extern "C" tcq_status tcq_model_cuda_rows(tcq_model *m, tcq_session *const *sess, const int *pos, const int32_t *tok,
                                          int M, int out_from, float *logits)
{
    tcq_model_cuda *mc = m->cu;
    const tcq_model_config *c = &m->cfg;
    if (M < 1 || M > mc->R) return tcq_fail(TCQ_ERR_INVALID_ARG, "device model: %d rows (1..%d)", M, mc->R);
    CU_TRY(cudaSetDevice(mc->device), "device model: cudaSetDevice");
    int max_ctx = 1;
    for (int r = 0; r < M; r++) {
        if (!sess[r]->on_device)
            return tcq_fail(TCQ_ERR_INVALID_ARG, "device model: session %d was not created for this CUDA model", r);
        mc->h_rows[r] = mk_row{tok[r], pos[r], sess[r]->ctx, 0, (uint16_t *)sess[r]->kcache, (uint16_t *)sess[r]->vcache};
        max_ctx = TCQ_MAX(max_ctx, sess[r]->ctx);
    }
    const int S = (max_ctx + MK_ATT_SPLIT - 1) / MK_ATT_SPLIT;
    const size_t part = (size_t)M * c->n_heads * S * (c->head_dim + 2);
    if (part > mc->part_cap) {
        /* graphs hold the old buffer: drop them with it */
        CU_TRY(cudaStreamSynchronize(mc->st), "device model: sync");
        drop_graphs(mc);
        const size_t cap = TCQ_MAX(part, (size_t)TCQ_MAX_BATCH * c->n_heads * S * (c->head_dim + 2));
        if (mc->part) cudaFree(mc->part);
        mc->part = NULL;
        mc->part_cap = 0;
        CU_TRY(cudaMalloc((void **)&mc->part, cap * sizeof(float)), "device model: attention scratch");
        mc->part_cap = cap;
    }
    CU_TRY(cudaMemcpyAsync(mc->d_rows, mc->h_rows, (size_t)M * sizeof(mk_row), cudaMemcpyHostToDevice, mc->st),
           "device model: rows");
    const int want = out_from < M;
    const bool graphable = !mc->no_graphs && M <= TCQ_MAX_BATCH && (out_from == 0 || out_from == M);
    if (graphable && (mc->snap_scratch != mc->ctx->scratch || mc->snap_counters != mc->ctx->counters)) drop_graphs(mc);
    if (graphable && mc->graph[want][M] && mc->graph_S[want][M] == S) {
        CU_TRY(cudaGraphLaunch(mc->graph[want][M], mc->st), "device model: graph launch");
    } else if (graphable && mc->warm[want][M]) {
        if (mc->graph[want][M]) cudaGraphExecDestroy(mc->graph[want][M]);
        mc->graph[want][M] = NULL;
        CU_TRY(cudaStreamBeginCapture(mc->st, cudaStreamCaptureModeRelaxed), "device model: capture");
        tcq_status s = enqueue(m, M, out_from, S);
        cudaGraph_t g = NULL;
        cudaError_t e = cudaStreamEndCapture(mc->st, &g);
        if (s != TCQ_OK) {
            if (g) cudaGraphDestroy(g);
            return s;
        }
        if (e != cudaSuccess) return tcq_cuda_fail(e, "device model: capture");
        e = cudaGraphInstantiate(&mc->graph[want][M], g, 0);
        cudaGraphDestroy(g);
        if (e != cudaSuccess) {
            mc->graph[want][M] = NULL;
            return tcq_cuda_fail(e, "device model: graph instantiate");
        }
        mc->graph_S[want][M] = S;
        mc->snap_scratch = mc->ctx->scratch;
        mc->snap_counters = mc->ctx->counters;
        CU_TRY(cudaGraphLaunch(mc->graph[want][M], mc->st), "device model: graph launch");
    } else {
        TCQ_TRY(enqueue(m, M, out_from, S));
        if (graphable) mc->warm[want][M] = 1;
    }
    if (want && logits)
        return tcq_cuda_copy_to_host(mc->ctx, logits, mc->logits, (size_t)(M - out_from) * c->vocab_size * sizeof(float));
    return tcq_cuda_sync(mc->ctx);
}
