/* Internal pieces of the quantize driver. */
#ifndef TCQ_QUANT_H
#define TCQ_QUANT_H

#include "../core/internal.h"

#include <jansson.h>
#include <stdio.h>

/* What the fold does with a tensor of a Llama / Qwen3 checkpoint. */
typedef enum qrole {
    QR_UNKNOWN = 0,
    QR_EMBED,          /* model.embed_tokens.weight: rows R^T e */
    QR_LM_HEAD,        /* lm_head.weight: final norm folded, W R */
    QR_NORM,           /* input / post-attention / final RMSNorm: folded away, becomes 1 */
    QR_HEAD_NORM,      /* q_norm / k_norm: in head space, copied */
    QR_READER,         /* q/k/v/gate/up: gain folded, W R, coded axis 1 */
    QR_WRITER,         /* o/down: R^T W, coded axis 0 (stored transposed) */
    QR_BIAS_READER,    /* bias of a reader: in its output space, copied */
    QR_BIAS_WRITER,    /* bias of a writer: lives in the residual stream, R^T b */
    QR_SKIP,           /* rotary_emb.inv_freq of old checkpoints: recomputed by runtimes */
} qrole;

/* Role of a tensor name; for readers, gain receives the name of the norm folded into it. */
qrole tcq_quant_role(const char *name, char *gain, size_t gain_size);

/* Load a F32/F16/BF16 tensor as f32 (malloc'd). Names the file and tensor on failure. */
tcq_status tcq_quant_load_f32(const tcq_tensor_info *t, float **out);

/* out_dir/config.json: the input config with tie_word_embeddings false and the quantization
 * object (mirrored as quantization_config; qobj NULL: neither, a plain dense model). */
tcq_status tcq_quant_write_config(const json_t *in_config, json_t *qobj, const char *path);
/* A trellis entry {"bits":k,"group_size":T,"mode":"trellis","trellis":{"L":L,"code":"1mad","axis":a}}
 * (plus "interleave": true in "trellis" when interleave is set). */
json_t *tcq_quant_entry(int k, int T, int L, int axis, int interleave);
/* Copy the tokenizer files that exist in in_dir to out_dir. */
tcq_status tcq_quant_copy_tokenizer(const char *in_dir, const char *out_dir);

/* Least-squares row scales for the chosen codes where their fp16 rounding lowers the row's
 * error against rows [R, C]; *err (optional): the squared error with the final scales. */
tcq_status tcq_quant_refit_scales(tcq_block_params p, const float *rows, int64_t R, int64_t C, const uint32_t *codes,
                                  uint16_t *scales, double *err);
/* The same on the pool, rows in items of 64 (NULL: this thread; the same bits either way). */
tcq_status tcq_quant_refit_rows(tcq_pool *pool, tcq_block_params p, const float *rows, int64_t R, int64_t C,
                                const uint32_t *codes, uint16_t *scales, double *err);
/* Reconstruction out [R, C] of coded rows; _on: on the pool, rows in items of 64 (NULL: this thread). */
void tcq_quant_decode_rows(tcq_block_params p, const uint32_t *codes, const uint16_t *scales, int64_t R, int64_t C,
                           float *out);
void tcq_quant_decode_rows_on(tcq_pool *pool, tcq_block_params p, const uint32_t *codes, const uint16_t *scales,
                              int64_t R, int64_t C, float *out);

/* In-place Cholesky A = C C^T of a symmetric positive definite A [m, m] (lower C, upper zeroed). */
tcq_status tcq_quant_cholesky(double *A, int64_t m);
/* H [m, m] = L D L^T with L [m, m] unit lower block triangular, blocks of b (where b does not
 * divide m, the first block is the shorter one, of m mod b: axis 0's groups are aligned on the
 * last row); D_k of the block at b0 of n rows is n x n at D + b0 * b (D [m/b][b][b] when b divides
 * m).  L may be H (factored in place). */
tcq_status tcq_quant_block_ldl(const double *H, int64_t m, int b, double *L, double *D);
/* The same with the Cholesky factor from qla (NULL: tcq_quant_cholesky) and the per-block finish
 * on pool's threads (NULL: this one; the same bits for any count). */
struct tcq_qla;
tcq_status tcq_quant_block_ldl_on(struct tcq_qla *qla, tcq_pool *pool, const double *H, int64_t m, int b, double *L,
                                  double *D);
/* out = H + damp * mean(diag H) I; fails when the diagonal carries nothing. */
tcq_status tcq_quant_damp(const double *H, int64_t m, double damp, double *out);
/* Proxy loss tr(E H E^T) of E = W - What for the stored layout: axis 1 rows are outputs and H is
 * over the C columns; axis 0 stored rows are the inputs and H is over the R rows.  ref
 * (optional): the same of W itself. */
tcq_status tcq_quant_proxy(const float *W, const float *What, int64_t R, int64_t C, int axis, const double *H,
                           tcq_pool *pool /* NULL: this thread */, double *loss, double *ref);
/* The same sums as one product each on qla's backend (other summation order); E made there. */
tcq_status tcq_quant_proxy_on(struct tcq_qla *qla, const float *W, const float *What, int64_t R, int64_t C, int axis,
                              const double *H, double *loss, double *ref);

/* Calibration (calib.c), one decoder layer at a time.  A layer's Hessians, one per input site
 * in the order of model.h's TCQ_TAP_* (q/k/v input, o input, gate/up input, down input), the
 * readers' in the rotated basis of the Hadamard seed. */
typedef struct tcq_quant_lhess {
    int64_t dim[4];
    double *H[4];             /* dim^2 each, full symmetric (NULL: not allocated) */
    double *C[4];             /* asymmetric calibration (tcq_quant_cal_set_asym): the cross terms
                                 sum (x_fp - x) x^T [dim, dim] of the input model's taps x_fp and
                                 the partly coded stream's x, row-major (NULL: none) */
} tcq_quant_lhess;
/* Allocate (zeroed) the missing ones of dim[]; free them. */
tcq_status tcq_quant_lhess_alloc(tcq_quant_lhess *lh);
void tcq_quant_lhess_free(tcq_quant_lhess *lh);
/* The Hessian of a projection's tensor name of lh's layer (NULL: none, e.g. a norm); *dim its size. */
const double *tcq_quant_lhess_for(const tcq_quant_lhess *lh, const char *name, int64_t *dim);
/* The same site's cross term C (NULL: none). */
const double *tcq_quant_lhess_cross_for(const tcq_quant_lhess *lh, const char *name);
/* Hessian matrices alive now and at most since the last reset (the memory bound's test). */
void tcq_quant_hess_count(int *live, int *peak);
void tcq_quant_hess_count_reset(void);

typedef struct tcq_quant_calib {
    const char *path;
    int64_t tokens;
    int ctx;
    int threads;
} tcq_quant_calib;
/* The calibration windows' residual stream (rotated, [tokens, dim] f32) and what moves it. */
typedef struct tcq_quant_cal tcq_quant_cal;
tcq_status tcq_quant_cal_open(const char *in_dir, const tcq_hadamard *h, const tcq_quant_calib *o, tcq_pool *pool,
                              tcq_quant_cal **out);
void tcq_quant_cal_free(tcq_quant_cal *c);
int64_t tcq_quant_cal_tokens(const tcq_quant_cal *c);
/* Run the calibration's products on qla (qla.h; NULL: CBLAS and the CPU kernels here): the
 * Hessians' sums of x x^T in double and the forward's projections in f32, another order. */
struct tcq_qla;
void tcq_quant_cal_set_qla(tcq_quant_cal *c, struct tcq_qla *qla);
/* Asymmetric calibration (GPTAQ, arXiv 2504.02692): keep a second stream, the input model's
 * (moved by every tcq_quant_cal_layer call with lh, through the weights it is given, which must be
 * the unquantized layer's), and with lh also accumulate lh->C, the cross terms of its taps against
 * the stream's.  Call before the first layer; the stream must be sequential (each call with lh
 * does not advance; the coded layer then advances with lh NULL).  Not on qla. */
tcq_status tcq_quant_cal_set_asym(tcq_quant_cal *c);
/* The residual stream [tokens, dim] (tests compare it between paths). */
const float *tcq_quant_cal_stream(const tcq_quant_cal *c);
/* The input model (mapped, its projection weights never read): config, q/k norms. */
struct tcq_model *tcq_quant_cal_model(tcq_quant_cal *c);
/* Layer `layer` with weights L (rotated, gains folded, attn/ffn norms 1) over every window:
 * lh (NULL: none) gets its Hessians (dims set, allocated, accumulated); advance: the stream becomes
 * the layer's output (else it stays). */
struct tcq_layer;
tcq_status tcq_quant_cal_layer(tcq_quant_cal *c, int layer, const struct tcq_layer *L, tcq_quant_lhess *lh,
                               int advance);
/* The same with asymmetric calibration on: the input model's stream through Lfp (the unquantized
 * layer; moved on only where fp_advance), the coded stream through L (a layer partly coded, for
 * statistics taken within the layer).  tcq_quant_cal_layer is this with Lfp = L, fp_advance 1. */
tcq_status tcq_quant_cal_layer_asym(tcq_quant_cal *c, int layer, const struct tcq_layer *Lfp, const struct tcq_layer *L,
                                    tcq_quant_lhess *lh, int advance, int fp_advance);

/* The token ids of a calibration text (malloc'd), with clear errors for a missing or empty file
 * and one shorter than a window of ctx tokens. */
tcq_status tcq_quant_calib_ids(const char *in_dir, const char *path, int ctx, int32_t **ids, size_t *n_ids);

/* Measured sensitivity (sens.c): the input model over `windows` windows of ctx tokens from the
 * start of the calibration text, the mean KL against its own log-probabilities when one
 * projection of the current layer (from 0, moved on by _advance) is replaced by a candidate.
 * The candidate What [R, C] is in the quantizer's stored layout and rotated basis (h); slot 0..6
 * in the order q, k, v, o, gate, up, down. */
typedef struct tcq_quant_sens tcq_quant_sens;
tcq_status tcq_quant_sens_open(const char *in_dir, const char *calib, int ctx, int windows, const tcq_hadamard *h,
                               int threads, tcq_quant_sens **out);
void tcq_quant_sens_free(tcq_quant_sens *s);
tcq_status tcq_quant_sens_kl(tcq_quant_sens *s, int slot, const float *What, int64_t R, int64_t C, double *kl);
tcq_status tcq_quant_sens_advance(tcq_quant_sens *s);
int tcq_quant_sens_layer(const tcq_quant_sens *s);

/* k[i] in {2, 3, 4} for the n tensors of numel[i] weights (numel 0: no k, k[i] = 0) with mean k
 * at most bpw, greedy on cost[i][k - 2]'s drop per added bit (alloc.c); returns the mean k. */
double tcq_quant_alloc(int64_t n, const int64_t *numel, const double (*cost)[3], double bpw, int *k);
/* The costs of the tensors with numel > 0 to a text file and back (every such tensor must be in it). */
tcq_status tcq_quant_alloc_costs_write(const char *path, const char *mode, int64_t n, const char *const *names,
                                       const int64_t *numel, const double (*cost)[3]);
tcq_status tcq_quant_alloc_costs_read(const char *path, int64_t n, const char *const *names, const int64_t *numel,
                                      double (*cost)[3]);

/* DIR/hessians.bin, written and read one layer at a time. */
typedef struct tcq_quant_hfile {
    FILE *f;
    int n_layers;
    int64_t dim[4];
    int64_t tokens;
    uint64_t seed;
    int sequential;           /* taken with the earlier layers quantized (depends on their k) */
    int64_t hdr_bytes;
} tcq_quant_hfile;
/* create: from n_layers, dim, tokens, seed, sequential set by the caller. */
tcq_status tcq_quant_hfile_create(const char *dir, tcq_quant_hfile *hf);
tcq_status tcq_quant_hfile_put(tcq_quant_hfile *hf, int layer, const tcq_quant_lhess *lh);
tcq_status tcq_quant_hfile_open(const char *dir, uint64_t seed, tcq_quant_hfile *hf);
tcq_status tcq_quant_hfile_get(tcq_quant_hfile *hf, int layer, tcq_quant_lhess *lh);
tcq_status tcq_quant_hfile_close(tcq_quant_hfile *hf);

/* The asymmetric target (asym.c): with Hd = H + damp * mean(diag H) I and C = sum (x_fp - x) x^T,
 * the W' that makes ||W X_fp - Wq X||^2 = ||(W' - Wq) X||^2 + const (damped) for every Wq:
 * W' = W + W C Hd^-1 (W [out, m] as a reader's rows; axis 1: W is rows [R, C = m]; axis 0: rows is
 * W^T [R = m, C], the stored layout, rows' = rows + Hd^-1 C^T rows); alpha scales the correction
 * (1: all of it).  In place, in double. */
tcq_status tcq_quant_asym_target(const double *H, const double *Cx, int64_t m, double damp, double alpha, float *rows,
                                 int64_t R, int64_t C, int axis);

/* Row scales minimising tr(E (H + lambda I) E^T) for fixed codes (hscale.c; H [m, m] as
 * tcq_quant_proxy's), kept where they lower it against the scales in hand. */
tcq_status tcq_quant_hscale(tcq_block_params p, const float *W, int64_t R, int64_t C, int axis, const double *H,
                            double lambda, const uint32_t *codes, uint16_t *scales);
/* The same with its products (and axis 0's Cholesky) on qla's backend and the code decode on the
 * pool (either NULL: here, this thread): the same algorithm, the products in other orders. */
tcq_status tcq_quant_hscale_on(struct tcq_qla *qla, tcq_pool *pool, tcq_block_params p, const float *W, int64_t R,
                               int64_t C, int axis, const double *H, double lambda, const uint32_t *codes,
                               uint16_t *scales);

/* One matrix through BlockLDLQ (ldlq.c). */
typedef struct tcq_ldlq_args {
    tcq_block_params p;
    const tcq_encode_opts *enc;
    tcq_pool *pool;
    const float *W;           /* [R, C] as stored */
    int64_t R, C;
    int axis;                 /* 1: H over the C columns (blocks of T); 0: H over the R rows */
    const double *H;          /* undamped Hessian [m, m] */
    double damp;              /* relative to the mean diagonal */
    int refit;                /* least-squares scales against each row's target, then the
                                 scales minimising the proxy loss (hscale.c) */
    uint32_t *codes;          /* out [R, C*k/32] */
    uint16_t *scales;         /* out [R] */
    float *What;              /* out [R, C]: the reconstruction */
    int passes;               /* tcq_quant_ldlq_pass runs after BlockLDLQ */
    int scale_search;         /* <= 1: every row at its RMS scale; 2..9: also 0.9, 1.1, 0.8, 1.2, 0.95,
                                 1.05, 0.85, 1.15 times it (that many in all), each row keeping its
                                 best */
    struct tcq_qla *qla;      /* NULL: the products with CBLAS here; else on its backend (qla.h):
                                 the same algorithm, other summation orders */
    tcq_cuda_ctx *gpu;        /* NULL: the CPU encoder; else the GPU one (the same codes) */
    int axis0_group;          /* axis 0: BlockLDLQ's blocks (and the passes' groups) of this many
                                 stored rows (<= 1: one, row by row; at most R) */
} tcq_ldlq_args;
/* Code n blocks of T targets x (weights w or NULL) with the encoder a names (ldlq.c). */
tcq_status tcq_quant_encode_blocks(const tcq_ldlq_args *a, const float *x, const float *w, int64_t n, uint32_t *words);
/* The same with one weight vector w1 [T] for all n blocks: on the GPU encoder only T floats go
 * up; on the CPU it is spread into wt [n, T] first (the same words either way). */
tcq_status tcq_quant_encode_blocks_w1(const tcq_ldlq_args *a, const float *x, const float *w1, float *wt, int64_t n,
                                      uint32_t *words);
/* loss[r] = e_r Hd e_r^T for the rows of E [R, C] (Hd [C, C]), through EH [R, C] = E Hd: on qla's
 * backend when qla is set (each of E, Hd, EH mirrored or staged; the per-row sums there too, only
 * the R losses come down), else CBLAS here. */
struct tcq_qla;
tcq_status tcq_quant_row_losses(struct tcq_qla *qla, const double *E, int64_t R, int64_t C, const double *Hd,
                                double *EH, double *loss);
/* The scratch of tcq_quant_code_candidates for up to n rows of n_mult candidates, allocated once
 * per tensor by its caller (not per group: a 14B down projection is 2176 groups of 8 rows). */
typedef struct tcq_quant_cand {
    int64_t n;
    int n_mult;
    float *x, *dec;
    uint32_t *words;
    uint16_t *sh;
    double *err;
    int *failed;
} tcq_quant_cand;
tcq_status tcq_quant_cand_alloc(const tcq_ldlq_args *a, int64_t n, int n_mult, tcq_quant_cand *sc);
void tcq_quant_cand_free(tcq_quant_cand *sc);
/* Code n rows of targets tg [n, C] each at the first n_mult of its candidate scales (its RMS
 * scale times 1, 0.9, 1.1, 0.8, 1.2, 0.95, 1.05, 0.85, 1.15) in ONE encoder call of
 * n * n_mult * C/T blocks, then per row: the refit (a->refit) and the candidate of least squared
 * error to the row's target kept (the first of equal ones; n_mult 1: no comparison).  codes
 * [n, C*k/32], scales [n]; scratch from tcq_quant_cand_alloc (NULL or too small: allocated here). */
tcq_status tcq_quant_code_candidates(const tcq_ldlq_args *a, struct tcq_quant_cand *scratch, const float *tg, int64_t n,
                                     int n_mult, uint32_t *codes, uint16_t *scales);
tcq_status tcq_quant_ldlq(const tcq_ldlq_args *a);
/* Axis 0 (ldlq_axis0.c): g, the group of a (clamped to [1, R]); the act-order of H [m, m] (perm[i]:
 * the stored row at position i); A <- P A P^T in place (tmp: m doubles); BlockLDLQ on Lm, the
 * block LDL (blocks of g) of the damped P H P^T. */
int64_t tcq_quant_axis0_group(const tcq_ldlq_args *a);
tcq_status tcq_quant_act_order(const double *H, int64_t m, int64_t *perm);
tcq_status tcq_quant_permute_sym(double *A, int64_t m, const int64_t *perm, double *tmp);
/* out [m, m] = P (H + damp mean(diag H) I) P^T (tcq_quant_damp, then tcq_quant_permute_sym: the
 * same bits) in one pass on pool's threads. */
tcq_status tcq_quant_damp_permuted(const double *H, int64_t m, double damp, const int64_t *perm, tcq_pool *pool,
                                   double *out);
tcq_status tcq_quant_ldlq_axis0(const tcq_ldlq_args *a, const double *Lm, const int64_t *perm);
/* One block coordinate descent pass over a BlockLDLQ result (ldlq_pass.c) on H + lambda I: codes,
 * scales (axis 0) and What updated where that loss drops. */
tcq_status tcq_quant_ldlq_pass(const tcq_ldlq_args *a, const double *H, double lambda);
/* Axis 0's pass (ldlq_pass0.c): the state and batch step shared by the CPU path and the qla one.
 * init: E = W - What (on the pool), G allocated (the caller fills it: (H + lambda I) E for the rows
 * of a batch before the batch's step), batches of `batch` rows rounded to whole groups; cpu: the
 * CPU path's bits.  damp_rows: G += lambda E for rows [lo, hi).  batch: the batch [lo, hi) coded
 * group by group, codes / scales / What / E updated where the loss drops; after it, db [hi - lo,
 * C] holds the kept rows' changes d = e' - e (0 elsewhere) and G's rows below lo have not taken
 * them. */
typedef struct tcq_quant_pass0 {
    const tcq_ldlq_args *a;
    const double *H;
    double lambda;
    int cpu;
    double *E, *G;            /* [R, C] */
    double *db;               /* [B, C] */
    unsigned char *kept;      /* [B] */
    double *dd;               /* [g] */
    int *failed;              /* [g] */
    float *tg, *x, *wh;       /* [g, C] */
    uint16_t *gs;             /* [g] */
    uint32_t *cw;             /* [g, C*k/32] */
    int64_t B, g, chunks, lo, hi, gl, gh;
} tcq_quant_pass0;
tcq_status tcq_quant_pass0_init(tcq_quant_pass0 *st, const tcq_ldlq_args *a, const double *H, double lambda,
                                int64_t batch, int cpu);
void tcq_quant_pass0_free(tcq_quant_pass0 *st);
void tcq_quant_pass0_damp_rows(tcq_quant_pass0 *st, int64_t lo, int64_t hi);
tcq_status tcq_quant_pass0_batch(tcq_quant_pass0 *st, int64_t lo, int64_t hi);
/* The CPU path's axis-0 pass (G = H E by CBLAS here). */
tcq_status tcq_quant_pass0_cpu(const tcq_ldlq_args *a, const double *H, double lambda);
/* The same pass when a->qla is set (ldlq_pass_qla.c). */
tcq_status tcq_quant_ldlq_pass_qla(const tcq_ldlq_args *a, const double *H, double lambda);

#endif
