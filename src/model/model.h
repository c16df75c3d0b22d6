/* Model internals shared by the files of src/model. Not installed. */
#ifndef TCQ_MODEL_INTERNAL_H
#define TCQ_MODEL_INTERNAL_H

#include "core/internal.h"
#include <string.h>

/* f16 -> f32 inline (exact, subnormals included: the shifted bits times 2^112 rebias the
 * exponent), so the KV-cache conversion loops vectorize.  Equal to tcq_f16_to_f32. */
static inline float tcq_model_h2f(uint16_t h)
{
    union { uint32_t u; float f; } o;
    o.u = (uint32_t)(h & 0x7fffu) << 13;
    o.f *= 0x1p112f;
    if ((h & 0x7c00u) == 0x7c00u) o.u |= 0x7f800000u;   /* inf / nan keep their payload */
    o.u |= (uint32_t)(h & 0x8000u) << 16;
    return o.f;
}

#ifndef __cplusplus   /* the CUDA files (src/model/cuda) read the structs below, not these helpers */
/* tcq_model_h2f on 16 halves at once (exact, so the same bits on every ISA, which the attention
 * core relies on): widened, then that function's integer and multiply steps lane by lane.
 * Element by element the f16 cache's decode ran at 0.4-0.7x the f32 one's at 1536 positions
 * (docs/PERFORMANCE.md, session 16).  out, not a return value: a 64-byte vector return changes the
 * ABI between the generic and the AVX-512 builds. */
typedef float tcq_model_v16 __attribute__((vector_size(64)));
static inline void tcq_model_h2f16(const uint16_t *p, tcq_model_v16 *out)
{
    typedef uint32_t u16x32 __attribute__((vector_size(64)));
    typedef uint16_t h16x16 __attribute__((vector_size(32)));
    h16x16 h16;
    memcpy(&h16, p, sizeof h16);
    const u16x32 h = __builtin_convertvector(h16, u16x32);
    u16x32 u = (h & 0x7fffu) << 13;
    tcq_model_v16 f;
    memcpy(&f, &u, sizeof f);
    f *= 0x1p112f;
    memcpy(&u, &f, sizeof u);
    u |= (u16x32)((h & 0x7c00u) == 0x7c00u) & 0x7f800000u;   /* inf / nan keep their payload */
    u |= (h & 0x8000u) << 16;
    memcpy(out, &u, sizeof *out);
}
#endif

/* Attention of one (row, kv head): its G query heads over cache positions [0, n). */
typedef struct tcq_attn_args {
    const float *q;           /* [G, hd] */
    float *out;               /* [G, hd] */
    const void *k, *v;        /* cache row 0 of this layer and kv head; row t at + t * kv_dim */
    int kv_f16;               /* cache dtype: f16 (1) or f32 (0) */
    int kv_dim, hd, G, n;
    float *scores;            /* scratch [G, n] */
    float *buf;               /* scratch [hd] */
} tcq_attn_args;
typedef void (*tcq_attn_fn)(const tcq_attn_args *a);
void tcq_attn_generic(const tcq_attn_args *a);
/* The build for an ISA (all give bit-identical results). */
tcq_attn_fn tcq_attn_select(tcq_isa isa);
/* The core's row softmax, p[0, n) in place (the prefill block uses it); same bits on every ISA. */
typedef void (*tcq_softmax_fn)(float *p, int n);
void tcq_attn_generic_softmax(float *p, int n);
tcq_softmax_fn tcq_attn_softmax_select(tcq_isa isa);

typedef struct tcq_layer {
    const float *attn_norm;   /* [dim] */
    const float *ffn_norm;    /* [dim] */
    const float *q_norm, *k_norm; /* [head_dim], Qwen3 only (else NULL) */
    tcq_weight wq;            /* [n_heads*head_dim, dim] */
    tcq_weight wk, wv;        /* [n_kv*head_dim, dim] */
    tcq_weight wo;            /* [dim, n_heads*head_dim] */
    tcq_weight gate, up;      /* [hidden, dim] */
    tcq_weight down;          /* [dim, hidden] */
} tcq_layer;

struct tcq_model {
    tcq_model_config cfg;
    tcq_layer *layers;        /* [n_layers] */
    const float *final_norm;  /* [dim] */
    /* Embedding table [vocab, dim]: dense or MLX affine, rows converted on lookup. */
    tcq_weight emb;
    tcq_weight lm_head;       /* [vocab, dim]; a view of emb when tied */
    float *rope_inv_freq;     /* [head_dim/2] */

    /* Storage the views point into. */
    tcq_st_set *st;           /* HF directory */
    void *map;                /* llama2.c checkpoint mapping */
    size_t map_len;
    void **owned;             /* converted norms etc., freed at the end */
    int n_owned, cap_owned;
    size_t weight_bytes;
    char describe[128];

    tcq_pool *pool;
    tcq_kctx *kctx;
    tcq_model_opts opts;      /* as given to load (progress callback) */

    /* Scratch for up to TCQ_PREFILL_CHUNK rows. */
    float *x, *xb, *q, *k, *v, *att, *hb, *xb2; /* [chunk, ...] */
    tcq_attn_fn attn;         /* chosen at load from tcq_isa_active() */
    tcq_softmax_fn softmax;   /* the same ISA's row softmax */
    float *att_scores;        /* [pool threads, att_cap] */
    int att_cap;
    float *blk_scratch;       /* [pool threads, blk_cap] for tcq_attn_block */
    size_t blk_cap;
    struct tcq_model_cuda *cu; /* the device copy when opts.device chose CUDA (src/model/cuda) */
    char device_name[320];

    /* Calibration tap (the quantizer's Hessians; NULL: none): called with the M rows a layer's
     * linears read, before they read them.  site: TCQ_TAP_ATTN / TCQ_TAP_FFN give the residual
     * stream before the RMSNorm ([M, dim]), TCQ_TAP_O the attention output ([M, n_heads*hd]),
     * TCQ_TAP_DOWN the SwiGLU output ([M, hidden]). */
    void (*tap)(void *user, int layer, int site, const float *x, int M);
    void *tap_user;
    /* Projection hook (the quantizer's calibration forward on a GPU, calib.c; NULL: none): when
     * set, every projection of a decoder layer goes through it instead of tcq_linear:
     * up NULL: y [M, W.out] = x W^T; else (gate / up) y = silu(x W^T) * (x up^T), as
     * tcq_linear_swiglu.  x [M, W.in].  The hook may hand any weight back to tcq_linear. */
    tcq_status (*mm)(void *user, const tcq_weight *W, const tcq_weight *up, const float *x, float *y, int M);
    void *mm_user;
};
enum { TCQ_TAP_ATTN = 0, TCQ_TAP_O, TCQ_TAP_FFN, TCQ_TAP_DOWN, TCQ_TAP_SITES };

struct tcq_session {
    int ctx, pos;
    tcq_kv_dtype kv;
    int n_layers, kv_dim;
    void *kcache, *vcache;    /* [n_layers, ctx, kv_dim] f32 or f16; device memory (f16) for a CUDA model */
    size_t bytes;
    int on_device;            /* the caches are device memory (the model runs on CUDA) */
};

/* The device forward (src/model/cuda; a build without CUDA refuses with TCQ_ERR_UNSUPPORTED).
 * init: after the weights are bound and tcq_model_finish, upload them to opts.device_index after
 * checking the device's free memory; rows: forward_rows of forward.c on the device. */
tcq_status tcq_model_cuda_init(tcq_model *m, const tcq_model_opts *opts);
void tcq_model_cuda_free(tcq_model *m);
tcq_status tcq_model_cuda_rows(tcq_model *m, tcq_session *const *sess, const int *pos, const int32_t *tok, int M,
                               int out_from, float *logits);
/* Device KV caches of s->bytes (s->kcache, s->vcache); free them. */
tcq_status tcq_session_cuda_alloc(const tcq_model *m, tcq_session *s);
void tcq_session_cuda_release(tcq_session *s);
/* 1 when a CUDA device index exists (always 0 without CUDA). */
int tcq_model_cuda_present(int index);

/* Attention of a prefill chunk (M rows of one session at positions p0..p0+M-1, q in m->q rows
 * row0.., out to the same rows of m->att) through sgemm; returns 1 without doing anything when
 * the per-row core should serve it (small M, scratch too large). */
int tcq_attn_block(tcq_model *m, const tcq_session *s, int p0, int M, int layer, int row0);

/* The quantizer's layer-by-layer calibration: one decoder layer with the weights of L (any
 * formats) on x [n, dim] in place, n rows of one sequence at the session's positions (advanced by
 * n), kept in the session's layer-0 cache; m's taps see tap_layer.  m gives the config, rope,
 * scratch and pool; its own layers are not read. */
tcq_status tcq_model_layer_forward(tcq_model *m, tcq_session *s, const tcq_layer *L, int tap_layer, float *x, int n);

/* The quantizer's measured sensitivity: logits [n, V] of residual-stream rows x [n, dim]
 * (n <= TCQ_PREFILL_CHUNK) through the final norm and the lm_head. */
tcq_status tcq_model_head_forward(tcq_model *m, const float *x, int n, float *logits);

/* Register memory the model frees. */
tcq_status tcq_model_own(tcq_model *m, void *p);
/* Load an HF directory / a llama2.c checkpoint into a zeroed model (cfg filled by them). */
tcq_status tcq_model_load_hf(tcq_model *m, const char *path);
tcq_status tcq_model_load_llama2c(tcq_model *m, const char *path);
/* After the weights are bound: rope tables, scratch, pool, kernel context. */
tcq_status tcq_model_finish(tcq_model *m, const tcq_model_opts *opts);
/* Embedding row of token t as f32. */
void tcq_model_embed(const tcq_model *m, int32_t t, float *out /* [dim] */);

#endif
