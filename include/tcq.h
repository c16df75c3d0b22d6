/*
 * tcq.h — trellis-coded quantization for language models.  The one public header.
 *
 * tcq stores weights in the QTIP-style "bitshift trellis" with the 1MAD code (the packed format
 * of mlx-bun's trellis artifacts, docs/FORMAT.md in the shared folder) and computes with the
 * packed weights directly.  This header is the manual: every public type and function is here,
 * grouped by module, each with its contract.
 *
 * Conventions
 *   - Every fallible function returns tcq_status.  TCQ_OK is 0.  On failure, tcq_last_error()
 *     returns a message for the calling thread that names the file, tensor or field at fault.
 *     The library never calls exit() or abort() on input it was given.
 *   - Memory is caller-owned where it fits: functions that fill a buffer take the buffer and its
 *     size.  Objects the library allocates have a matching *_free().
 *   - Shapes are written next to pointers, row-major: `float *y; // [M, out]`.
 *   - Results are bit-identical for any thread count.
 */
#ifndef TCQ_H
#define TCQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================================
 * Status
 * ========================================================================================== */

typedef enum tcq_status {
    TCQ_OK = 0,
    TCQ_ERR_INVALID_ARG,   /* a parameter is out of range or inconsistent (shape, L, k, T...) */
    TCQ_ERR_NOMEM,         /* an allocation failed */
    TCQ_ERR_IO,            /* open/read/write/mmap failed */
    TCQ_ERR_FORMAT,        /* a file or JSON document is malformed */
    TCQ_ERR_UNSUPPORTED,   /* valid input that this build does not handle (dtype, model_type) */
    TCQ_ERR_NOT_FOUND,     /* a tensor, key or file that must exist does not */
    TCQ_ERR_RANGE,         /* a size limit was hit (context overflow, buffer too small) */
    TCQ_ERR_DEVICE,        /* an accelerator call failed (message carries the driver's string) */
    TCQ_ERR_INTERNAL,      /* a bug in tcq: please report */
    TCQ_STATUS_COUNT
} tcq_status;

/* A short fixed description of a status ("invalid argument", ...). Never NULL. */
const char *tcq_status_str(tcq_status s);

/* The calling thread's message for the most recent failure (or "" if none). Valid until the next
 * failing call on this thread. */
const char *tcq_last_error(void);

/* Library version as "MAJOR.MINOR.PATCH". */
const char *tcq_version(void);

/* ============================================================================================
 * Core: CPU features, instruction-set dispatch, threads
 * ========================================================================================== */

typedef enum tcq_isa {
    TCQ_ISA_SCALAR = 0,    /* the generic path, always built: the reference */
    TCQ_ISA_AVX2 = 1,      /* AVX2 + FMA + F16C */
    TCQ_ISA_AVX512 = 2,    /* AVX-512 F/BW/DQ/VL (+VNNI, VBMI, BF16 where present) */
    TCQ_ISA_COUNT
} tcq_isa;

typedef struct tcq_cpu_features {
    int avx2, fma, f16c;             /* AVX2 path requires all three */
    int avx512f, avx512bw, avx512dq, avx512vl;
    int avx512vnni, avx512vbmi, avx512vbmi2, avx512bf16, avx512fp16;
    int os_avx, os_avx512;           /* XCR0 says the OS saves the YMM / ZMM state */
} tcq_cpu_features;

/* Features of this CPU (cpuid + xgetbv), detected once. */
const tcq_cpu_features *tcq_cpu(void);

/* The ISA every dispatched function uses.  Chosen once, at first use: the best the CPU and OS
 * support, unless the environment variable TCQ_ISA=scalar|avx2|avx512 pins one (a pin the CPU
 * cannot run falls back to the best supported, with a warning on stderr). */
tcq_isa tcq_isa_active(void);
/* Override the active ISA (tests and benchmarks). Fails if the CPU cannot run it. */
tcq_status tcq_isa_set(tcq_isa isa);
const char *tcq_isa_name(tcq_isa isa);   /* "scalar", "avx2", "avx512" */
/* Parse "scalar"|"avx2"|"avx512". */
tcq_status tcq_isa_parse(const char *name, tcq_isa *out);

/* A fixed-size pool of worker threads.  Work is split into a fixed number of items chosen by the
 * caller, never by the thread count, so results do not depend on how many threads run. */
typedef struct tcq_pool tcq_pool;

/* n_threads <= 0: one per online CPU. */
tcq_status tcq_pool_create(int n_threads, tcq_pool **out);
void tcq_pool_free(tcq_pool *pool);
int tcq_pool_size(const tcq_pool *pool);
/* Run fn(arg, item, thread) for item in [0, n_items), spread over the pool; returns when all are
 * done.  thread is in [0, tcq_pool_size()) and is for scratch selection only.  pool may be NULL:
 * then everything runs on the calling thread. */
typedef void (*tcq_pool_fn)(void *arg, int64_t item, int thread);
void tcq_pool_run(tcq_pool *pool, int64_t n_items, tcq_pool_fn fn, void *arg);

/* ============================================================================================
 * Codec: the 1MAD code, the block layout, scales (FORMAT.md)
 * ========================================================================================== */

#define TCQ_L_MIN 8
#define TCQ_L_MAX 16
#define TCQ_K_MAX 4
#define TCQ_RMAD_MUL 34038481u
#define TCQ_RMAD_ADD 76625530u
#define TCQ_RMAD_DIV 147.800537109375f   /* exact in f32: 605391 / 4096 */

/* Integer 1MAD value of a state: the byte sum of s*34038481 + 76625530 (mod 2^32) minus 510,
 * in [-510, 510]. */
static inline int tcq_code_y(uint32_t s)
{
    uint32_t x = s * TCQ_RMAD_MUL + TCQ_RMAD_ADD;
    return (int)((x & 255u) + ((x >> 8) & 255u) + ((x >> 16) & 255u) + (x >> 24)) - 510;
}

/* Canonical f32 value of a state: y / 147.800537109375 correctly rounded (the "host LUT"). */
float tcq_code_value(uint32_t s);
/* The canonical value of an integer y in [-510, 510]. */
float tcq_code_value_y(int y);
/* Table of the 1021 canonical values: [y + 510]. */
const float *tcq_code_value_table(void);
/* value(s) computed on the fly by the residual-refined reciprocal of FORMAT.md (what the SIMD
 * kernels do); equal to tcq_code_value(s) for every s. */
float tcq_code_value_computed(uint32_t s);
/* RMS of value(s) over all 2^L states (double precision). L in [8, 16]. */
double tcq_code_rms(int L);

/* Round-to-nearest-even conversions. */
uint16_t tcq_f32_to_bf16(float f);
float tcq_bf16_to_f32(uint16_t h);
uint16_t tcq_f32_to_f16(float f);
float tcq_f16_to_f32(uint16_t h);

/* Block geometry.  A block holds T weights of k bits: T*k/32 little-endian uint32 words. */
typedef struct tcq_block_params {
    int L;   /* state bits, 8..16 */
    int k;   /* bits per weight, 1..4, k < L */
    int T;   /* weights per block: 64, 128 or 256; T*k % 32 == 0 */
} tcq_block_params;

/* Validates L, k, T as above. */
tcq_status tcq_block_check(tcq_block_params p);
static inline int tcq_block_words(tcq_block_params p) { return p.T * p.k / 32; }

/* Pack T states (which must obey the cyclic successor rule) into T*k/32 words: symbol
 * b_t = s_t & (2^k-1) at bit (T-1-t)*k. Only the low k bits of each state are read. */
void tcq_block_pack(tcq_block_params p, const uint32_t *states /* [T] */, uint32_t *words /* [T*k/32] */);
/* The state at position t: the L-bit window at bit (T-1-t)*k, wrapping. O(1). */
static inline uint32_t tcq_block_state(tcq_block_params p, const uint32_t *words, int t)
{
    const int wpb = p.T * p.k / 32;
    const int pos = (p.T - 1 - t) * p.k, wi = pos >> 5, off = pos & 31;
    uint64_t win = words[wi] >> off;
    if (off + p.L > 32) win |= (uint64_t)words[(wi + 1 == wpb) ? 0 : wi + 1] << (32 - off);
    return (uint32_t)win & ((1u << p.L) - 1u);
}
/* All T states of a block. */
void tcq_block_unpack(tcq_block_params p, const uint32_t *words, uint32_t *states /* [T] */);
/* 1 if states obey s_t = ((s_{t-1} << k) | (s_t & (2^k-1))) mod 2^L for all t, cyclically. */
int tcq_block_states_valid(tcq_block_params p, const uint32_t *states /* [T] */);
/* Decode a block: out[t] = value(s_t) * scale. */
void tcq_block_decode_f32(tcq_block_params p, const uint32_t *words, float scale, float *out /* [T] */);

/* A packed trellis tensor (FORMAT.md "Axis").  Coded rows: R rows of C weights, C % T == 0.
 *   axis 1: W [out, in] is stored as is: R = out, C = in.
 *   axis 0: W is stored transposed:      R = in,  C = out.
 * codes: [R, C*k/32] words, or for interleaved (k=3, axis 0, C % 512 == 0) [C/512, R, 48].
 * scales: [R] IEEE fp16 bits. Pointers are borrowed, never freed by tcq. */
typedef struct tcq_trellis {
    tcq_block_params p;
    int axis;                 /* 0 or 1 */
    int interleaved;          /* 0 or 1 (k=3, axis 0 only) */
    int64_t rows;             /* R */
    int64_t cols;             /* C */
    const uint32_t *codes;
    const uint16_t *scales;
} tcq_trellis;

/* Validates parameters, shape and pointers. */
tcq_status tcq_trellis_check(const tcq_trellis *w);
static inline int64_t tcq_trellis_out(const tcq_trellis *w) { return w->axis ? w->rows : w->cols; }
static inline int64_t tcq_trellis_in(const tcq_trellis *w) { return w->axis ? w->cols : w->rows; }
/* Words per coded row: C*k/32. */
static inline int64_t tcq_trellis_row_words(const tcq_trellis *w) { return w->cols * w->p.k / 32; }
/* Bits per weight including the fp16 scale per row: k + 16/C. */
double tcq_trellis_bpw(const tcq_trellis *w);
/* Pointer to the words of block `blk` of coded row r (handles the interleave). */
const uint32_t *tcq_trellis_block(const tcq_trellis *w, int64_t r, int64_t blk);
/* Decode coded row r to C values (value * scale[r]), f32 or bf16. */
tcq_status tcq_trellis_decode_row(const tcq_trellis *w, int64_t r, float *out /* [C] */);
tcq_status tcq_trellis_decode_row_bf16(const tcq_trellis *w, int64_t r, uint16_t *out /* [C] */);
/* Decode the whole tensor to the dense W [out, in] (axis 0 is transposed back). */
tcq_status tcq_trellis_decode(const tcq_trellis *w, float *W /* [out, in] */);
tcq_status tcq_trellis_decode_bf16(const tcq_trellis *w, uint16_t *W /* [out, in] */);

/* Two-block interleave of k=3 axis-0 codes: [R, C*3/32] <-> [C/512, R, 48]. Lossless. */
tcq_status tcq_interleave(int64_t R, int64_t C, const uint32_t *src /* [R, C*3/32] */,
                          uint32_t *dst /* [C/512, R, 48] */);
tcq_status tcq_deinterleave(int64_t R, int64_t C, const uint32_t *src /* [C/512, R, 48] */,
                            uint32_t *dst /* [R, C*3/32] */);

/* Per-row scale: fp16(RMS(row) / RMS(code)); an all-zero row gets 1. */
uint16_t tcq_scale_for_row(int L, const float *row /* [n] */, int64_t n);

/* ============================================================================================
 * Encoder: Viterbi over the 2^L states with tail-biting (FORMAT.md "Encoder")
 *
 * Arithmetic contract (the reference and every fast path compute exactly this, so their output
 * is bit-identical): with a(s) = -2 v(s) and b(s) = v(s)^2 in f32 (v the canonical value),
 *     c_t(s) = fmaf(x_t, a(s), b(s))            [* w_t when weights are given]
 *     D_0(s) = c_0(s) (or +inf outside the allowed start set)
 *     D_t(s) = min_j D_{t-1}((s >> k) + j 2^(L-k)) + c_t(s)
 * (x_t^2 is constant per position and dropped.)  The min takes the smallest j among equal
 * values; the final state is the smallest s among equal minima.
 * ========================================================================================== */

typedef enum tcq_search {
    TCQ_SEARCH_TWO_PASS = 0,  /* QTIP Algorithm 4: roll by T/2, free pass, constrained pass */
    TCQ_SEARCH_SEAMS = 1,     /* two-pass plus extra constrained passes over candidate seams */
    TCQ_SEARCH_COUNT
} tcq_search;

const char *tcq_search_name(tcq_search s);   /* "default" (two-pass), "seams" */
tcq_status tcq_search_parse(const char *name, tcq_search *out);

typedef struct tcq_encode_opts {
    tcq_search search;        /* TCQ_SEARCH_TWO_PASS */
    int seams;                /* candidate seams for TCQ_SEARCH_SEAMS (0: the default, 8) */
} tcq_encode_opts;

/* Reference encoder of one block, scalar, kept forever as the golden.  x: the T targets (already
 * divided by the row scale); w: optional per-position weights (NULL: all 1).  Writes the T*k/32
 * code words; states (optional) receives the T states; err (optional) the squared error
 * sum_t w_t (x_t - v(s_t))^2 in double. */
tcq_status tcq_encode_block_ref(tcq_block_params p, const tcq_encode_opts *opts,
                                const float *x /* [T] */, const float *w /* [T] or NULL */,
                                uint32_t *words /* [T*k/32] */, uint32_t *states /* [T] or NULL */,
                                double *err);

/* The fast block encoder (best ISA, same output as the reference).  Same contract as
 * tcq_encode_block_ref. */
tcq_status tcq_encode_block(tcq_block_params p, const tcq_encode_opts *opts, const float *x /* [T] */,
                            const float *w /* [T] or NULL */, uint32_t *words /* [T*k/32] */,
                            uint32_t *states /* [T] or NULL */, double *err);

/* Code a matrix along its rows: src [R, C] (C % T == 0) in f32.  Per-row scales follow FORMAT.md
 * (tcq_scale_for_row); each row is divided by f32(scale) and coded block by block on the pool
 * (NULL: calling thread).  w: optional per-weight importance [R, C].  Writes codes [R, C*k/32]
 * and scales [R]; sq_err (optional) receives sum (src - decoded)^2 over the whole matrix, in
 * the source units, summed in a fixed order. */
tcq_status tcq_encode_rows(tcq_block_params p, const tcq_encode_opts *opts, const float *src /* [R, C] */,
                           const float *w /* [R, C] or NULL */, int64_t R, int64_t C,
                           uint32_t *codes /* [R, C*k/32] */, uint16_t *scales /* [R] */,
                           tcq_pool *pool, double *sq_err);

/* ============================================================================================
 * IO: safetensors, model-directory config, quantization entries
 * ========================================================================================== */

typedef enum tcq_dtype {
    TCQ_DTYPE_F32, TCQ_DTYPE_F16, TCQ_DTYPE_BF16, TCQ_DTYPE_F64,
    TCQ_DTYPE_U8, TCQ_DTYPE_I8, TCQ_DTYPE_U16, TCQ_DTYPE_I16,
    TCQ_DTYPE_U32, TCQ_DTYPE_I32, TCQ_DTYPE_U64, TCQ_DTYPE_I64, TCQ_DTYPE_BOOL,
    TCQ_DTYPE_COUNT
} tcq_dtype;

size_t tcq_dtype_size(tcq_dtype t);          /* bytes per element */
const char *tcq_dtype_name(tcq_dtype t);     /* safetensors spelling: "F32", "BF16", "U32", ... */
tcq_status tcq_dtype_parse(const char *name, tcq_dtype *out);

#define TCQ_MAX_DIMS 8

/* One tensor of a safetensors file.  data points into the file's mapping. */
typedef struct tcq_tensor_info {
    const char *name;
    tcq_dtype dtype;
    int ndim;
    int64_t shape[TCQ_MAX_DIMS];
    int64_t numel;
    const void *data;
    size_t nbytes;
    const char *file;                        /* path of the file holding it (for messages) */
} tcq_tensor_info;

/* A safetensors file, mmapped read-only.  Every header field is validated: the JSON is
 * well-formed, dtypes known, shape x dtype size == byte span, spans inside the data section,
 * sorted spans neither overlapping nor leaving holes, header size sane. */
typedef struct tcq_st_file tcq_st_file;

tcq_status tcq_st_open(const char *path, tcq_st_file **out);
/* Parse a safetensors image held in memory (borrowed; must outlive the object). label names it
 * in messages.  Used by the fuzzer and by tests. */
tcq_status tcq_st_parse(const void *buf, size_t len, const char *label, tcq_st_file **out);
void tcq_st_close(tcq_st_file *f);
int64_t tcq_st_count(const tcq_st_file *f);
const tcq_tensor_info *tcq_st_tensor(const tcq_st_file *f, int64_t i);      /* in file order */
const tcq_tensor_info *tcq_st_find(const tcq_st_file *f, const char *name); /* NULL if absent */
const char *tcq_st_metadata(const tcq_st_file *f, const char *key);         /* "__metadata__" */

/* The tensors of a model: one .safetensors file, a directory holding model.safetensors, or a
 * directory sharded through model.safetensors.index.json (every shard validated, every indexed
 * tensor present in the shard the index names, no name in two shards). */
typedef struct tcq_st_set tcq_st_set;

tcq_status tcq_st_set_open(const char *path, tcq_st_set **out);
void tcq_st_set_close(tcq_st_set *s);
int64_t tcq_st_set_count(const tcq_st_set *s);
const tcq_tensor_info *tcq_st_set_tensor(const tcq_st_set *s, int64_t i);
const tcq_tensor_info *tcq_st_set_find(const tcq_st_set *s, const char *name);

/* Writer: tensors are borrowed until tcq_st_writer_write(), which writes one file (8-byte aligned
 * data, header padded with spaces). */
typedef struct tcq_st_writer tcq_st_writer;

tcq_status tcq_st_writer_create(tcq_st_writer **out);
void tcq_st_writer_free(tcq_st_writer *w);
tcq_status tcq_st_writer_add(tcq_st_writer *w, const char *name, tcq_dtype dtype, int ndim,
                             const int64_t *shape, const void *data, size_t nbytes);
tcq_status tcq_st_writer_metadata(tcq_st_writer *w, const char *key, const char *value);
tcq_status tcq_st_writer_write(tcq_st_writer *w, const char *path);

/* Quantization entries of config.json ("quantization" or "quantization_config"). */
typedef enum tcq_qmode { TCQ_QMODE_NONE = 0, TCQ_QMODE_TRELLIS, TCQ_QMODE_AFFINE } tcq_qmode;

typedef struct tcq_qentry {
    tcq_qmode mode;
    int bits;          /* k for trellis; 4 or 8 for affine */
    int group_size;    /* T for trellis; 32/64/128 for affine */
    int L;             /* trellis: state bits */
    int axis;          /* trellis: 0 or 1 */
    int interleaved;   /* trellis: two-block interleave */
} tcq_qentry;

typedef struct tcq_qconfig tcq_qconfig;

/* Parse the quantization object of a config.json text (either key; absent gives an empty config
 * where every module is dense). label names the file in messages. */
tcq_status tcq_qconfig_parse(const char *json, size_t len, const char *label, tcq_qconfig **out);
void tcq_qconfig_free(tcq_qconfig *q);
/* The entry for a module path such as "model.layers.0.mlp.down_proj" (no ".weight"), trying the
 * other known prefixes ("language_model.") and then the default; mode NONE if unquantized. */
tcq_qentry tcq_qconfig_lookup(const tcq_qconfig *q, const char *module);
/* Build a trellis tensor view from a module's stored tensors (P.weight U32, P.scales F16) and its
 * entry, checking dtypes and shapes against the entry.  Names the module in errors. */
tcq_status tcq_trellis_from_tensors(const char *module, const tcq_qentry *e, const tcq_tensor_info *weight,
                                    const tcq_tensor_info *scales, tcq_trellis *out);

/* ============================================================================================
 * Kernels: linear layers over packed weights (CPU)
 * ========================================================================================== */

/* MLX affine quantized weight: w [out, in*bits/32] U32 (little-endian, element j of a row at bits
 * (j*bits) % 32 of word (j*bits)/32), scales and biases [out, in/group_size] in f16/bf16/f32;
 * weight = scale * q + bias. */
typedef struct tcq_affine {
    int bits;                   /* 4 or 8 */
    int group_size;             /* 32, 64 or 128 */
    int64_t out, in;
    const uint32_t *w;
    const void *scales, *biases;
    tcq_dtype sdtype;           /* dtype of scales and biases */
} tcq_affine;

typedef enum tcq_wformat {
    TCQ_WF_F32, TCQ_WF_F16, TCQ_WF_BF16,   /* dense W [out, in] */
    TCQ_WF_TRELLIS,                        /* packed trellis (any axis / interleave) */
    TCQ_WF_AFFINE,                         /* MLX affine */
    TCQ_WF_COUNT
} tcq_wformat;

/* A linear layer's weight in any format: y = W x with W [out, in].  Views only; the pointers are
 * borrowed (typically into a mapped safetensors file). */
typedef struct tcq_weight {
    tcq_wformat fmt;
    int64_t out, in;
    const void *dense;          /* TCQ_WF_F32/F16/BF16: [out, in] */
    tcq_trellis tr;             /* TCQ_WF_TRELLIS */
    tcq_affine af;              /* TCQ_WF_AFFINE */
} tcq_weight;

/* Numerical path for trellis weights. */
typedef enum tcq_kpath {
    TCQ_PATH_AUTO = 0,          /* whichever is faster at equal quality (the runtime default) */
    TCQ_PATH_EXACT,             /* weight = f32 value(s) * f32(scale), f32 accumulation */
    TCQ_PATH_FAST,              /* int8 activations, decode folded into the integer dot product */
} tcq_kpath;

/* Execution context for kernels: the thread pool and the path.  Scratch is allocated inside and
 * reused; one context per thread of the caller. */
typedef struct tcq_kctx tcq_kctx;
tcq_status tcq_kctx_create(tcq_pool *pool /* may be NULL */, tcq_kpath path, tcq_kctx **out);
void tcq_kctx_free(tcq_kctx *ctx);

/* y = x W^T for M rows: x [M, in], y [M, out]. Any format, any M >= 1. */
tcq_status tcq_linear(const tcq_weight *w, const float *x /* [M, in] */, float *y /* [M, out] */,
                      int64_t M, tcq_kctx *ctx);
/* Fused gate/up + SwiGLU: y = silu(x gate^T) * (x up^T), gate and up both [out, in]. */
tcq_status tcq_linear_swiglu(const tcq_weight *gate, const tcq_weight *up, const float *x /* [M, in] */,
                             float *y /* [M, out] */, int64_t M, tcq_kctx *ctx);

/* ============================================================================================
 * Tokenizer
 * ========================================================================================== */

/* ============================================================================================
 * Model: loading, forward, generation, evaluation
 * ========================================================================================== */

/* ============================================================================================
 * Quantize
 * ========================================================================================== */

/* ============================================================================================
 * CUDA (built with -DTCQ_CUDA=ON)
 * ========================================================================================== */

/* Always declared; a build without CUDA returns TCQ_ERR_UNSUPPORTED from every function (and
 * tcq_cuda_available() returns 0).  Device pointers are plain CUDA device pointers owned by the
 * caller; every call on a context is asynchronous on that context's stream unless it says it
 * synchronizes.  Failures return TCQ_ERR_DEVICE with the CUDA / cuBLAS error string; an error
 * raised by an earlier asynchronous launch surfaces at the next tcq_cuda_sync().
 *
 * Kernels (docs in bench/NOTES.md, "CUDA (H200)"):
 *   M <= 32: tensor-core kernel.  Pairs of states are looked up in a shared-memory table of
 *     (y_t, y_t+1) as two exact f16 integers (y the 1MAD byte sum minus 510), fed to
 *     mma.m16n8k16 against the activations split into f16 hi + lo parts (x' = x*2^e, e per row
 *     so x' fits f16), accumulated in f32; y = acc * 2^-e * scale / 147.800537109375.  The
 *     factored contract of FORMAT.md; relative error against float64 ~1e-6.
 *   M > 32: the tensor decoded to bf16 (FORMAT.md's bf16 contract) into context scratch, then a
 *     cuBLAS bf16 GEMM with f32 accumulation (x rounded to bf16).                             */

/* 1 if this build has CUDA and a device is present. */
int tcq_cuda_available(void);

/* A context: device, stream, cuBLAS handle, scratch (grown on demand, owned by the context).
 * One context per host thread / stream. */
typedef struct tcq_cuda_ctx tcq_cuda_ctx;
tcq_status tcq_cuda_ctx_create(int device, tcq_cuda_ctx **out);
void tcq_cuda_ctx_free(tcq_cuda_ctx *ctx);
/* The context's cudaStream_t (as void *), for callers mixing in their own kernels. */
void *tcq_cuda_ctx_stream(tcq_cuda_ctx *ctx);
/* Wait for all work queued on the context's stream; reports asynchronous errors. */
tcq_status tcq_cuda_sync(tcq_cuda_ctx *ctx);
/* "NVIDIA H200, 132 SMs, 60 MB L2, cc 9.0" */
tcq_status tcq_cuda_describe(tcq_cuda_ctx *ctx, char *buf, size_t len);

/* Device memory (cudaMalloc / cudaFree) and copies on the context's stream. */
tcq_status tcq_cuda_malloc(void **ptr, size_t bytes);
void tcq_cuda_free(void *ptr);
tcq_status tcq_cuda_copy_to_device(tcq_cuda_ctx *ctx, void *dst, const void *src, size_t bytes);
tcq_status tcq_cuda_copy_to_host(tcq_cuda_ctx *ctx, void *dst, const void *src, size_t bytes); /* syncs */
tcq_status tcq_cuda_memset(tcq_cuda_ctx *ctx, void *dst, int byte, size_t bytes);

/* Upload a packed tensor: dev_buf (caller-owned device memory of at least
 * tcq_cuda_trellis_bytes(host) bytes, 256-byte aligned as cudaMalloc gives) receives the codes
 * then the scales; *dev becomes the same view with device pointers. */
size_t tcq_cuda_trellis_bytes(const tcq_trellis *host);
tcq_status tcq_cuda_trellis_upload(tcq_cuda_ctx *ctx, const tcq_trellis *host, void *dev_buf,
                                   size_t dev_bytes, tcq_trellis *dev);

/* y = x W^T on the device: w a device view (tcq_cuda_trellis_upload), x [M, in] and y [M, out]
 * device f32.  Any M >= 1.  path: AUTO or EXACT (FAST: not built yet, returns UNSUPPORTED). */
tcq_status tcq_cuda_linear(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x /* [M, in] */,
                           float *y /* [M, out] */, int64_t M, tcq_kpath path);
/* Fused gate/up + SwiGLU: y = silu(x gate^T) * (x up^T); gate and up axis 1, same shape. */
tcq_status tcq_cuda_linear_swiglu(tcq_cuda_ctx *ctx, const tcq_trellis *gate, const tcq_trellis *up,
                                  const float *x /* [M, in] */, float *y /* [M, out] */, int64_t M,
                                  tcq_kpath path);
/* Decode a device tensor to dense bf16 W [out, in] in device memory (the bf16 contract). */
tcq_status tcq_cuda_trellis_decode_bf16(tcq_cuda_ctx *ctx, const tcq_trellis *w, uint16_t *W /* [out, in] */);

/* GPU encoder: the same contract and output as tcq_encode_rows (bit-identical codes and
 * scales), host buffers in and out, every block of the matrix coded in parallel on the device.
 * Two-pass search, L <= 12 (the path memory of a block lives in shared memory); weights w
 * optional.  Synchronizes. */
tcq_status tcq_cuda_encode_rows(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts,
                                const float *src /* [R, C] */, const float *w /* [R, C] or NULL */,
                                int64_t R, int64_t C, uint32_t *codes /* [R, C*k/32] */,
                                uint16_t *scales /* [R] */, double *sq_err);

/* Benchmark helpers (used by bench/bench_kernels_cuda.c): median microseconds per call of a
 * CUDA graph of `reps` back-to-back calls, cycling through n_w weights (so the bytes read exceed
 * the L2), repeated `trials` times. */
tcq_status tcq_cuda_time_linear(tcq_cuda_ctx *ctx, const tcq_trellis *const *w, int n_w, const float *x,
                                float *y, int64_t M, tcq_kpath path, int reps, int trials, double *us);
tcq_status tcq_cuda_time_swiglu(tcq_cuda_ctx *ctx, const tcq_trellis *const *gate, const tcq_trellis *const *up,
                                int n_w, const float *x, float *y, int64_t M, int reps, int trials, double *us);
/* cuBLAS bf16 GEMM y[M,out] = x[M,in] W^T (f32 accumulate, bf16 out), n_w weight copies. */
tcq_status tcq_cuda_time_dense_bf16(tcq_cuda_ctx *ctx, int64_t out, int64_t in, int64_t M, int n_w,
                                    int reps, int trials, double *us);
/* Device-to-device copy of `bytes`: GB/s counting bytes read plus written. */
tcq_status tcq_cuda_time_copy(tcq_cuda_ctx *ctx, size_t bytes, int reps, int trials, double *gbps);
/* GPU encoder throughput on R x C Gaussian rows, weights per second: the whole call (host scales
 * and division, transfers) and the kernels alone (kernel_wps may be NULL). */
tcq_status tcq_cuda_time_encode(tcq_cuda_ctx *ctx, tcq_block_params p, int64_t R, int64_t C, double *wps,
                                double *kernel_wps);

#ifdef __cplusplus
}
#endif
#endif /* TCQ_H */
