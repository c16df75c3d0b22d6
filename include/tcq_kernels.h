/*
 * tcq_kernels.h — the kernel-level API of tcq: the layer under the models.
 *
 * tcq.h (included here) is the application API: models, sessions, tokenizer, generation,
 * evaluation, quantization.  This header is for programs that work with packed tensors
 * directly: tests, benchmarks, other runtimes embedding tcq's kernels, tools that read or write
 * artifacts.  The same conventions hold (tcq.h's preamble): tcq_status + tcq_last_error(), no
 * exit() on input, caller-owned buffers, bit-identical results for any thread count.
 *
 * Contents
 *   Core .............. CPU features, instruction-set dispatch (TCQ_ISA), the thread pool
 *   Codec ............. the 1MAD code, block layout, packed tensors (tcq_trellis), interleave
 *   Encoder ........... Viterbi block/row encoders and their arithmetic contract
 *   IO ................ safetensors read/write, config.json quantization entries
 *   Transforms ........ Hadamard rotations (the quantizer's incoherence processing)
 *   Linear kernels .... tcq_weight, tcq_linear(_swiglu), the kernel context tcq_kctx (CPU)
 *   CUDA .............. device context, buffers, tcq_cuda_linear, the GPU encoder
 *
 * How the kernels are built and chosen: src/kernels/README.md (CPU) and src/kernels/cuda/README.md
 * (CUDA); their measured speed: docs/PERFORMANCE.md.
 */
#ifndef TCQ_KERNELS_API_H
#define TCQ_KERNELS_API_H

#include "tcq.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    /* AMX-INT8 tiles, usable: cpuid says AMX-TILE + AMX-INT8, XCR0 has the tile state, and Linux
     * granted this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here).  0
     * otherwise. */
    int amx_int8;
    int avxvnni;                     /* AVX-VNNI: vpdpbusd / vpdpwssd on ymm with a VEX encoding */
} tcq_cpu_features;

/* Features of this CPU (cpuid + xgetbv), detected once. */
TCQ_API const tcq_cpu_features *tcq_cpu(void);

/* The ISA every dispatched function uses.  Chosen once, at first use: the best the CPU and OS
 * support, unless the environment variable TCQ_ISA=scalar|avx2|avx512 pins one (a pin the CPU
 * cannot run falls back to the best supported, with a warning on stderr). */
TCQ_API tcq_isa tcq_isa_active(void);
/* Override the active ISA (tests and benchmarks). Fails if the CPU cannot run it. */
TCQ_API tcq_status tcq_isa_set(tcq_isa isa);
TCQ_API const char *tcq_isa_name(tcq_isa isa);   /* "scalar", "avx2", "avx512" */
/* Parse "scalar"|"avx2"|"avx512". */
TCQ_API tcq_status tcq_isa_parse(const char *name, tcq_isa *out);

/* A fixed-size pool of worker threads.  Work is split into a fixed number of items chosen by the
 * caller, never by the thread count, so results do not depend on how many threads run. */
typedef struct tcq_pool tcq_pool;

/* n_threads <= 0: one per online CPU.  Between runs the workers spin for up to TCQ_POOL_SPIN_US
 * microseconds (environment, read here; default 200, 0 = sleep at once: for machines with more
 * threads than cores) before they sleep, so back-to-back runs do not pay a wake-up each. */
TCQ_API tcq_status tcq_pool_create(int n_threads, tcq_pool **out);
TCQ_API void tcq_pool_free(tcq_pool *pool);
TCQ_API int tcq_pool_size(const tcq_pool *pool);
/* Run fn(arg, item, thread) for item in [0, n_items), spread over the pool; returns when all are
 * done.  thread is in [0, tcq_pool_size()) and is for scratch selection only.  pool may be NULL:
 * then everything runs on the calling thread.  One run at a time per pool: callers on several
 * threads serialize their runs themselves. */
typedef void (*tcq_pool_fn)(void *arg, int64_t item, int thread);
TCQ_API void tcq_pool_run(tcq_pool *pool, int64_t n_items, tcq_pool_fn fn, void *arg);

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
TCQ_API float tcq_code_value(uint32_t s);
/* The canonical value of an integer y in [-510, 510]. */
TCQ_API float tcq_code_value_y(int y);
/* Table of the 1021 canonical values: [y + 510]. */
TCQ_API const float *tcq_code_value_table(void);
/* value(s) computed on the fly by the residual-refined reciprocal of FORMAT.md (what the SIMD
 * kernels do); equal to tcq_code_value(s) for every s. */
TCQ_API float tcq_code_value_computed(uint32_t s);
/* RMS of value(s) over all 2^L states (double precision). L in [8, 16]. */
TCQ_API double tcq_code_rms(int L);

/* Round-to-nearest-even conversions. */
TCQ_API uint16_t tcq_f32_to_bf16(float f);
TCQ_API float tcq_bf16_to_f32(uint16_t h);
TCQ_API uint16_t tcq_f32_to_f16(float f);
TCQ_API float tcq_f16_to_f32(uint16_t h);

/* Block geometry.  A block holds T weights of k bits: T*k/32 little-endian uint32 words. */
typedef struct tcq_block_params {
    int L;   /* state bits, 8..16 */
    int k;   /* bits per weight, 1..4, k < L */
    int T;   /* weights per block: 64, 128 or 256; T*k % 32 == 0 */
} tcq_block_params;

/* Validates L, k, T as above. */
TCQ_API tcq_status tcq_block_check(tcq_block_params p);
static inline int tcq_block_words(tcq_block_params p) { return p.T * p.k / 32; }

/* Pack T states (which must obey the cyclic successor rule) into T*k/32 words: symbol
 * b_t = s_t & (2^k-1) at bit (T-1-t)*k. Only the low k bits of each state are read. */
TCQ_API void tcq_block_pack(tcq_block_params p, const uint32_t *states /* [T] */, uint32_t *words /* [T*k/32] */);
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
TCQ_API void tcq_block_unpack(tcq_block_params p, const uint32_t *words, uint32_t *states /* [T] */);
/* 1 if states obey s_t = ((s_{t-1} << k) | (s_t & (2^k-1))) mod 2^L for all t, cyclically. */
TCQ_API int tcq_block_states_valid(tcq_block_params p, const uint32_t *states /* [T] */);
/* Decode a block: out[t] = value(s_t) * scale. */
TCQ_API void tcq_block_decode_f32(tcq_block_params p, const uint32_t *words, float scale, float *out /* [T] */);

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
TCQ_API tcq_status tcq_trellis_check(const tcq_trellis *w);
static inline int64_t tcq_trellis_out(const tcq_trellis *w) { return w->axis ? w->rows : w->cols; }
static inline int64_t tcq_trellis_in(const tcq_trellis *w) { return w->axis ? w->cols : w->rows; }
/* Words per coded row: C*k/32. */
static inline int64_t tcq_trellis_row_words(const tcq_trellis *w) { return w->cols * w->p.k / 32; }
/* Bits per weight including the fp16 scale per row: k + 16/C. */
TCQ_API double tcq_trellis_bpw(const tcq_trellis *w);
/* Pointer to the words of block `blk` of coded row r (handles the interleave). */
TCQ_API const uint32_t *tcq_trellis_block(const tcq_trellis *w, int64_t r, int64_t blk);
/* Decode coded row r to C values (value * scale[r]), f32 or bf16. */
TCQ_API tcq_status tcq_trellis_decode_row(const tcq_trellis *w, int64_t r, float *out /* [C] */);
TCQ_API tcq_status tcq_trellis_decode_row_bf16(const tcq_trellis *w, int64_t r, uint16_t *out /* [C] */);
/* Decode the whole tensor to the dense W [out, in] (axis 0 is transposed back). */
TCQ_API tcq_status tcq_trellis_decode(const tcq_trellis *w, float *W /* [out, in] */);
TCQ_API tcq_status tcq_trellis_decode_bf16(const tcq_trellis *w, uint16_t *W /* [out, in] */);

/* Two-block interleave of k=3 axis-0 codes: [R, C*3/32] <-> [C/512, R, 48]. Lossless. */
TCQ_API tcq_status tcq_interleave(int64_t R, int64_t C, const uint32_t *src /* [R, C*3/32] */,
                                  uint32_t *dst /* [C/512, R, 48] */);
TCQ_API tcq_status tcq_deinterleave(int64_t R, int64_t C, const uint32_t *src /* [C/512, R, 48] */,
                                    uint32_t *dst /* [R, C*3/32] */);

/* Per-row scale: fp16(RMS(row) / RMS(code)); an all-zero row gets 1. */
TCQ_API uint16_t tcq_scale_for_row(int L, const float *row /* [n] */, int64_t n);

/* ============================================================================================
 * Encoder: Viterbi over the 2^L states with tail-biting (FORMAT.md "Encoder")
 *
 * Arithmetic contract (the reference and every fast path compute exactly this, so their output
 * is bit-identical): with v(s) the canonical f32 value, all in f32,
 *     d_t(s) = x_t - v(s),   e_t(s) = d_t(s)  (or w_t * d_t(s) when weights are given)
 *     D_0(s) = fma(e_0(s), d_0(s), 0)           (or +inf outside the allowed start set)
 *     M_t(g) = min_j D_{t-1}(g + j 2^(L-k))     (j = 0, 1, ... in order; a later j wins only
 *                                                when strictly smaller)
 *     D_t(s) = fma(e_t(s), d_t(s), M_t(s >> k))
 * The backpointer of g at step t is that j; the final state is the smallest s among equal
 * minima of D_{T-1}.  D is the true (weighted) squared error of the path, so costs are >= 0
 * and no constant is dropped.  Inputs must be finite and weights >= 0 (else
 * TCQ_ERR_INVALID_ARG).
 *
 * Searches: TCQ_SEARCH_TWO_PASS is FORMAT.md's.  TCQ_SEARCH_SEAMS runs it, then `seams` more
 * tail-biting passes, each with the seam moved to position r_i (T/2, T/4, 3T/4, T/8, ...: the
 * van der Corput sequence) and held to the overlap the best path so far has there.  Each such
 * pass contains the best path, so it can only find one at least as good; the block keeps the
 * path of least squared error (the earliest on ties).  Cost: 2 + seams passes.
 * ========================================================================================== */

/* Reference encoder of one block, scalar, kept forever as the golden.  x: the T targets (already
 * divided by the row scale); w: optional per-position weights (NULL: all 1).  Writes the T*k/32
 * code words; states (optional) receives the T states; err (optional) the squared error
 * sum_t w_t (x_t - v(s_t))^2 in double. */
TCQ_API tcq_status tcq_encode_block_ref(tcq_block_params p, const tcq_encode_opts *opts,
                                        const float *x /* [T] */, const float *w /* [T] or NULL */,
                                        uint32_t *words /* [T*k/32] */, uint32_t *states /* [T] or NULL */,
                                        double *err);

/* The fast block encoder (best ISA, same output as the reference).  Same contract as
 * tcq_encode_block_ref.  Keeps its scratch per calling thread between calls (2^L-sized tables
 * and T x 2^(L-k) floats: about 1.1 MiB at L=12, k=2), freed when the thread exits. */
TCQ_API tcq_status tcq_encode_block(tcq_block_params p, const tcq_encode_opts *opts, const float *x /* [T] */,
                                    const float *w /* [T] or NULL */, uint32_t *words /* [T*k/32] */,
                                    uint32_t *states /* [T] or NULL */, double *err);

/* Code n consecutive blocks of x as they are (no scale): x [n*T], w [n*T] or NULL, into words
 * [n*T*k/32], on the pool (NULL: calling thread).  sq_err (optional) receives
 * sum w (x - v(s))^2 over all blocks, summed in block order.  What `tcq codec` measures. */
TCQ_API tcq_status tcq_encode_blocks(tcq_block_params p, const tcq_encode_opts *opts, const float *x /* [n*T] */,
                                     const float *w /* [n*T] or NULL */, int64_t n, uint32_t *words /* [n*T*k/32] */,
                                     tcq_pool *pool, double *sq_err);

/* Code a matrix along its rows: src [R, C] (C % T == 0) in f32.  Per-row scales follow FORMAT.md
 * (tcq_scale_for_row); each row is divided by f32(scale) and coded block by block on the pool
 * (NULL: calling thread).  w: optional per-weight importance [R, C].  Writes codes [R, C*k/32]
 * and scales [R]; sq_err (optional) receives sum (src - decoded)^2 over the whole matrix, in
 * the source units, summed in a fixed order. */
TCQ_API tcq_status tcq_encode_rows(tcq_block_params p, const tcq_encode_opts *opts, const float *src /* [R, C] */,
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

TCQ_API size_t tcq_dtype_size(tcq_dtype t);          /* bytes per element */
TCQ_API const char *tcq_dtype_name(tcq_dtype t);     /* safetensors spelling: "F32", "BF16", "U32", ... */
TCQ_API tcq_status tcq_dtype_parse(const char *name, tcq_dtype *out);

/* A whole file into a malloc'd, NUL-terminated buffer (*len, optional, excludes the NUL); free
 * it with free().  TCQ_ERR_NOT_FOUND if it does not exist. */
TCQ_API tcq_status tcq_io_read_file(const char *path, char **out, size_t *len);
/* Write a whole file atomically: to PATH.tmp.XXXXXX in the same folder, then renamed onto PATH. */
TCQ_API tcq_status tcq_io_write_file(const char *path, const void *data, size_t len);

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

/* Check a tensor the caller expects (NULL: TCQ_ERR_NOT_FOUND naming `name`).  dtype: a tcq_dtype,
 * TCQ_TENSOR_ANY_DTYPE or TCQ_TENSOR_ANY_FLOAT (F32/F16/BF16); ndim < 0 skips the shape; a
 * negative shape[d] matches any size.  The message names the file, the tensor, what it has and
 * what was wanted: "model.safetensors: tensor 'x': shape [4, 5], want [4, 6]". */
#define TCQ_TENSOR_ANY_DTYPE (-1)
#define TCQ_TENSOR_ANY_FLOAT (-2)
TCQ_API tcq_status tcq_tensor_check(const tcq_tensor_info *t, const char *name, int dtype, int ndim,
                                    const int64_t *shape);
/* Convert an F32/F16/BF16/F64 tensor to f32: n must equal t->numel. */
TCQ_API tcq_status tcq_tensor_to_f32(const tcq_tensor_info *t, float *out /* [numel] */, int64_t n);

/* A safetensors file, mmapped read-only.  Every header field is validated, and a file that fails
 * is rejected with a message naming the file and the tensor:
 *   - the file holds the 8-byte header length; the header is <= 100 MB and inside the file;
 *   - the header is one JSON object without duplicate keys; "__metadata__" (optional) maps
 *     strings to strings; every other member is a tensor {"dtype", "shape", "data_offsets"} and
 *     nothing else; the name is not empty;
 *   - dtype is one of tcq_dtype (known safetensors dtypes tcq lacks, F8_* etc., give
 *     TCQ_ERR_UNSUPPORTED); shape has <= TCQ_MAX_DIMS non-negative integers; element and byte
 *     counts do not overflow;
 *   - data_offsets [begin, end]: begin <= end <= data section size, end - begin == numel x dtype
 *     size, begin a multiple of the element size and the resulting address aligned for it;
 *   - spans, sorted, do not overlap.
 * Holes (bytes between or after spans) are allowed, since some aligning writers pad between
 * tensors (Hugging Face's reader rejects them; tcq's writer never makes them);
 * tcq_st_hole_bytes() reports their total. */
typedef struct tcq_st_file tcq_st_file;

TCQ_API tcq_status tcq_st_open(const char *path, tcq_st_file **out);
/* Parse a safetensors image held in memory (borrowed; must outlive the object). label names it
 * in messages.  Used by the fuzzer and by tests. */
TCQ_API tcq_status tcq_st_parse(const void *buf, size_t len, const char *label, tcq_st_file **out);
TCQ_API void tcq_st_close(tcq_st_file *f);
TCQ_API int64_t tcq_st_count(const tcq_st_file *f);
/* In data order (ascending data_offsets), which is the file's physical order. */
TCQ_API const tcq_tensor_info *tcq_st_tensor(const tcq_st_file *f, int64_t i);
TCQ_API const tcq_tensor_info *tcq_st_find(const tcq_st_file *f, const char *name); /* NULL if absent; O(log n) */
TCQ_API const char *tcq_st_metadata(const tcq_st_file *f, const char *key);         /* "__metadata__" */
TCQ_API const char *tcq_st_path(const tcq_st_file *f);              /* the path or label it was opened with */
TCQ_API uint64_t tcq_st_hole_bytes(const tcq_st_file *f);           /* data-section bytes no tensor covers */

/* The tensors of a model: one .safetensors file, a directory holding model.safetensors, or a
 * directory sharded through model.safetensors.index.json (the index file itself may also be
 * given).  The index must be exact: every shard opened once and validated, every indexed tensor
 * present in the shard the index names, every tensor of a shard listed for that shard (so no
 * name is in two shards).  Shard names are plain file names in the model directory.  With an
 * index present, model.safetensors is ignored. */
typedef struct tcq_st_set tcq_st_set;

TCQ_API tcq_status tcq_st_set_open(const char *path, tcq_st_set **out);
TCQ_API void tcq_st_set_close(tcq_st_set *s);
TCQ_API int64_t tcq_st_set_count(const tcq_st_set *s);
TCQ_API const tcq_tensor_info *tcq_st_set_tensor(const tcq_st_set *s, int64_t i);
TCQ_API const tcq_tensor_info *tcq_st_set_find(const tcq_st_set *s, const char *name);   /* O(log n) */
/* The model directory (for config.json): the folder given, or the one holding the file. */
TCQ_API const char *tcq_st_set_dir(const tcq_st_set *s);
TCQ_API int tcq_st_set_file_count(const tcq_st_set *s);
TCQ_API const tcq_st_file *tcq_st_set_file(const tcq_st_set *s, int i);                 /* shards by name */

/* Writer: tensors are borrowed until tcq_st_writer_write(), which writes one file in the layout
 * Hugging Face's safetensors requires (its reader rejects holes): header JSON with sorted keys,
 * padded with spaces so the data section starts 8-byte aligned, then the tensors contiguously,
 * grouped by element size, largest first (in the order added within a size), so every tensor
 * starts at a multiple of its element size with no padding.  "__metadata__" holds the pairs given
 * plus {"format": "pt"} unless "format" was set.  The file is written to PATH.tmp.XXXXXX and
 * renamed onto PATH.  Names must be unique (checked at write). */
typedef struct tcq_st_writer tcq_st_writer;

TCQ_API tcq_status tcq_st_writer_create(tcq_st_writer **out);
TCQ_API void tcq_st_writer_free(tcq_st_writer *w);
TCQ_API tcq_status tcq_st_writer_add(tcq_st_writer *w, const char *name, tcq_dtype dtype, int ndim,
                                     const int64_t *shape, const void *data, size_t nbytes);
/* Like _add, but copies the data now (for buffers the caller reuses before the write). */
TCQ_API tcq_status tcq_st_writer_add_copy(tcq_st_writer *w, const char *name, tcq_dtype dtype, int ndim,
                                          const int64_t *shape, const void *data, size_t nbytes);
TCQ_API tcq_status tcq_st_writer_metadata(tcq_st_writer *w, const char *key, const char *value);
TCQ_API tcq_status tcq_st_writer_write(tcq_st_writer *w, const char *path);
TCQ_API int64_t tcq_st_writer_count(const tcq_st_writer *w);
/* Size of the data section the write would produce: the sum of tensor bytes (for sharding). */
TCQ_API uint64_t tcq_st_writer_data_bytes(const tcq_st_writer *w);
/* A model.safetensors.index.json for shards written by these writers (shard_names[i] is the
 * file name, in the index's folder, that shards[i] was written to): {"metadata": {"total_size":
 * sum of tensor bytes}, "weight_map": {name: shard}}.  A name in two shards is an error. */
TCQ_API tcq_status tcq_st_index_write(const char *path, int n_shards, const char *const *shard_names,
                                      const tcq_st_writer *const *shards);

/* Quantization entries of config.json ("quantization", else "quantization_config").  The object
 * maps module paths (no ".weight") to an entry or false:
 *   trellis: {"bits": k, "group_size": T, "mode": "trellis",
 *             "trellis": {"L": 12, "code": "1mad", "axis": 0|1, "interleave": true|false}}
 *            code defaults to "1mad" (the only one), axis to 1, interleave to false.  "interleave":
 *            true (tcq's spelling; FORMAT.md leaves it open) means the codes are stored as
 *            [C/512, R, 48] and needs bits 3, axis 0, group_size 256.  tcq_trellis_from_tensors
 *            also reads a 3-D weight as interleaved when the entry lacks the flag.
 *   affine:  {"bits": 2|3|4|5|6|8, "group_size": 32|64|128[, "mode": "affine"]} (MLX)
 *   false:   not quantized.
 * The object's own "bits"/"group_size"/"mode" are the default for modules without an entry
 * (MLX: applies only where the module's tensors are quantized, see tcq_qconfig_resolve).
 * Other scalar members ("quant_method", ...) are ignored, as are unknown keys inside an entry;
 * known values are checked (trellis bits 1..4, L 8..16, T valid for k, axis 0/1, code "1mad")
 * and a bad one fails the whole parse with a message naming the module. */
typedef enum tcq_qmode { TCQ_QMODE_NONE = 0, TCQ_QMODE_TRELLIS, TCQ_QMODE_AFFINE } tcq_qmode;

typedef struct tcq_qentry {
    tcq_qmode mode;
    int bits;          /* k for trellis; 2,3,4,5,6,8 for affine (the kernels take 4 and 8) */
    int group_size;    /* T for trellis; 32/64/128 for affine */
    int L;             /* trellis: state bits */
    int axis;          /* trellis: 0 or 1 */
    int interleaved;   /* trellis: two-block interleave */
} tcq_qentry;

typedef struct tcq_qconfig tcq_qconfig;

/* Parse the quantization object of a config.json text (either key; absent gives an empty config
 * where every module is dense). label names the file in messages. */
TCQ_API tcq_status tcq_qconfig_parse(const char *json, size_t len, const char *label, tcq_qconfig **out);
TCQ_API void tcq_qconfig_free(tcq_qconfig *q);
/* Read and parse a config.json file. */
TCQ_API tcq_status tcq_qconfig_load(const char *path, tcq_qconfig **out);
/* The entry for a module path such as "model.layers.0.mlp.down_proj" (no ".weight"), trying the
 * other known prefixes ("language_model.") and then the default; mode NONE if unquantized. */
TCQ_API tcq_qentry tcq_qconfig_lookup(const tcq_qconfig *q, const char *module);
/* Like lookup, but the default applies only if the set holds MODULE.scales under either prefix
 * (MLX's rule: norms and other dense tensors are not covered by the default).  Explicit entries
 * always apply. */
TCQ_API tcq_qentry tcq_qconfig_resolve(const tcq_qconfig *q, const tcq_st_set *s, const char *module);
/* Explicit entries, sorted by module path: returns the path (NULL past the end), fills *e. */
TCQ_API int64_t tcq_qconfig_count(const tcq_qconfig *q);
TCQ_API const char *tcq_qconfig_entry(const tcq_qconfig *q, int64_t i, tcq_qentry *e);
/* 1 and *e if the config has a default entry, else 0. */
TCQ_API int tcq_qconfig_default(const tcq_qconfig *q, tcq_qentry *e);

/* Building a quantization object (the quantizer): create an empty config, set entries (mode NONE
 * writes false; a module set twice keeps the last), then serialise.  Values are checked as in
 * the parser (TCQ_ERR_INVALID_ARG).  Output strings are malloc'd; free them with free(). */
TCQ_API tcq_status tcq_qconfig_create(tcq_qconfig **out);
TCQ_API tcq_status tcq_qconfig_set(tcq_qconfig *q, const char *module, const tcq_qentry *e);
TCQ_API tcq_status tcq_qconfig_set_default(tcq_qconfig *q, const tcq_qentry *e);   /* NULL/NONE: none */
/* The quantization object alone, as indented JSON. */
TCQ_API tcq_status tcq_qconfig_to_json(const tcq_qconfig *q, char **out);
/* config_json (a whole config.json text; NULL starts from {}) with both "quantization" and
 * "quantization_config" set to q's object; other members keep their order.  Reals are written
 * with the fewest digits (15..17) at which every one of them reads back exactly. */
TCQ_API tcq_status tcq_qconfig_apply(const char *config_json, size_t len, const tcq_qconfig *q, char **out);
/* Build a trellis tensor view from a module's stored tensors (P.weight U32, P.scales F16) and its
 * entry, checking dtypes and shapes against the entry.  Names the module in errors. */
TCQ_API tcq_status tcq_trellis_from_tensors(const char *module, const tcq_qentry *e, const tcq_tensor_info *weight,
                                            const tcq_tensor_info *scales, tcq_trellis *out);
/* The same from a set: resolves MODULE's entry, finds MODULE.weight and MODULE.scales (under
 * MODULE's prefix, else the other one).  TCQ_ERR_NOT_FOUND if the module has no trellis entry or
 * a tensor is missing. */
TCQ_API tcq_status tcq_trellis_from_set(const tcq_st_set *s, const tcq_qconfig *q, const char *module,
                                        tcq_trellis *out);

/* ============================================================================================
 * Transforms: Hadamard rotations (the quantizer's incoherence processing)
 * ========================================================================================== */

/* Hadamard transforms (incoherence processing, FORMAT.md).  Supported sizes: n = m * 2^a where
 * m = 1 (Sylvester) or m is the order of a Paley matrix (I: m-1 a prime = 3 mod 4, e.g. 12, 20, 44;
 * II: m/2-1 a prime = 1 mod 4, e.g. 28, 36), H = H_m (x) H_{2^a}, the smallest such m taken.
 * Covers 12, 20, 24, 28, 40, 1536, 2560, 3072, 5120, ...; tcq_hadamard_supported() says for sure.
 * The transform is R = diag(signs) * H / sqrt(n), orthogonal; signs are +-1 from a seeded PRNG
 * (splitmix64), or all +1 when unrandomized.  Applied in O(n (log n + m)). */
typedef struct tcq_hadamard tcq_hadamard;

TCQ_API int tcq_hadamard_supported(int64_t n);
/* randomized 0: R = H / sqrt(n). */
TCQ_API tcq_status tcq_hadamard_create(int64_t n, int randomized, uint64_t seed, tcq_hadamard **out);
TCQ_API void tcq_hadamard_free(tcq_hadamard *h);
TCQ_API int64_t tcq_hadamard_size(const tcq_hadamard *h);
/* The m of n = m * 2^a (1 for powers of two). */
TCQ_API int tcq_hadamard_factor(const tcq_hadamard *h);
/* Each row x of X becomes x R (equivalently the column Rt x): X [rows, n] in place.  inverse 1:
 * x R^T instead.  Rows are spread over the pool (NULL: the calling thread); the result does not
 * depend on it. */
TCQ_API tcq_status tcq_hadamard_rows(const tcq_hadamard *h, float *X /* [rows, n] */, int64_t rows,
                                     int inverse, tcq_pool *pool);
/* The explicit R [n, n] (tests; n^2 floats). */
TCQ_API tcq_status tcq_hadamard_dense(const tcq_hadamard *h, float *R /* [n, n] */);
/* The unnormalized +-1 Hadamard matrix of order m (m = 1, a power of two, or a supported Paley
 * order): H [m, m] with H H^T = m I. */
TCQ_API tcq_status tcq_hadamard_matrix(int m, int8_t *H /* [m, m] */);

/* The rotation fold for Llama / Qwen3 dense models (the hidden state h becomes R^T h):
 *   reader (q, k, v, gate, up, lm_head; W [out, n]): W <- W diag(gain) R   (gain NULL: 1)
 *   writer (o, down; W [n, in]):                     Wt [in, n] = (R^T W)^T = W^T R
 *   embedding rows / writer biases (vectors of n):   e <- R^T e  (= tcq_hadamard_rows) */
TCQ_API tcq_status tcq_rotate_reader(const tcq_hadamard *h, float *W /* [out, n] */, int64_t out,
                                     const float *gain /* [n] or NULL */, tcq_pool *pool);
TCQ_API tcq_status tcq_rotate_writer(const tcq_hadamard *h, const float *W /* [n, in] */, int64_t in,
                                     float *Wt /* [in, n] */, tcq_pool *pool);

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

/* Execution context for kernels: the thread pool and the path.  Scratch is allocated inside and
 * reused; one context per thread of the caller. */
typedef struct tcq_kctx tcq_kctx;
TCQ_API tcq_status tcq_kctx_create(tcq_pool *pool /* may be NULL */, tcq_kpath path, tcq_kctx **out);
TCQ_API void tcq_kctx_free(tcq_kctx *ctx);

/* y = x W^T for M rows: x [M, in], y [M, out]. Any format, any M >= 1.  Dense f16/bf16 weights
 * are read in their stored format and widened exactly in registers: f32 activations, one fmaf per
 * term, f32 sums (|error| <= (K + 4) 2^-24 sum |w x|; the same bits for any thread count).  The
 * exception: at M >= 33 on the fast path (TCQ_PATH_FAST or AUTO) where the CPU has AVX-512 BF16,
 * the activations are rounded to bf16 (RNE) for vdpbf16ps, and so are f16 weights, 16 rows at a
 * time into a cache-resident block (most f16 checkpoints are bf16-trained models cast to f16, for
 * which the rounding is exact; otherwise it is bf16's unit roundoff, as on the activations).
 * bf16 weights: |error| <= (2^-8 + (K/16 + 5) 2^-24 (1 + 2^-8)) sum |w x| + 2^-125 sum |w|;
 * f16 weights: |error| <= (2^-7 + 2^-16 + (K/16 + 5) 2^-24 (1 + 2^-8)^2) sum |w x|
 * + 2^-125 (1 + 2^-8) sum |w|; the same bits for any thread count and any M >= 33.
 * TCQ_PATH_EXACT keeps f32 activations and exact weights for every M. */
TCQ_API tcq_status tcq_linear(const tcq_weight *w, const float *x /* [M, in] */, float *y /* [M, out] */,
                              int64_t M, tcq_kctx *ctx);
/* Fused gate/up + SwiGLU: y = silu(x gate^T) * (x up^T), gate and up both [out, in]. */
TCQ_API tcq_status tcq_linear_swiglu(const tcq_weight *gate, const tcq_weight *up, const float *x /* [M, in] */,
                                     float *y /* [M, out] */, int64_t M, tcq_kctx *ctx);

/* Validates a weight view: format, shape, pointers, and that out/in agree with the trellis or
 * affine view inside it. */
TCQ_API tcq_status tcq_weight_check(const tcq_weight *w);
/* Dequantize to the dense W [out, in] in f32: the values the exact path multiplies by (trellis:
 * f32 value(s) * f32 scale, one rounding; affine: fmaf(scale, q, bias) in f32; f16/bf16: widened). */
TCQ_API tcq_status tcq_weight_decode(const tcq_weight *w, float *W /* [out, in] */);

/* Batch regimes of the dispatcher (tcq_kctx_force).  AUTO picks by M from measured crossovers
 * (docs/PERFORMANCE.md): M=1 register kernels; 2..4 one decode shared by all rows; 5..32 decode a block
 * into a cache-resident buffer, reuse it across rows; large M decode tiles to f32 + sgemm. */
typedef enum tcq_kregime {
    TCQ_KR_AUTO = 0, TCQ_KR_M1, TCQ_KR_SHARED, TCQ_KR_TILE, TCQ_KR_GEMM, TCQ_KR_COUNT
} tcq_kregime;

/* Fast path (TCQ_PATH_FAST, also what AUTO runs for trellis weights below the GEMM regime):
 * the activation a (axis 1: x; axis 0: x[i] * scale[i], the stored row's scale folded in) is
 * quantized per block of TCQ_FAST_QB positions along the reduced dimension: d = amax/127 (f32),
 * q = nearbyintf(a * (127/amax)) in [-127, 127].  Per block the integer sum of y(s) * q (y the
 * integer code value) is exact; blocks combine in f32 with d; scale / 147.8 once per output.
 * Error bound per output, against the exact weights (docs/PERFORMANCE.md derives it):
 *     |y_fast - y| <= sum_i |v_i| d_i / 2 (1 + 1e-4) + (nblk + 4) 2^-24 sum_i |v_i| (|a_i| + d_i)
 * with v_i the weight without the activation-side factor (axis 1: value*scale; axis 0: value).
 * For Gaussian activations the relative RMS error is about amax/(127 sqrt(12) sigma) ~ 0.5%.
 * In the GEMM regime both paths multiply the exact f32 weights. */
#define TCQ_FAST_QB 64

/* Pin the ISA and/or the regime for one context (tests, benchmarks).  isa < 0: the active ISA;
 * regime AUTO: by M.  A regime that does not apply to a call (M1 with M > 1, or a non-trellis
 * weight) falls back to AUTO; dense f16/bf16 weights take GEMM as their GEMM regime and any other
 * pinned regime as their tiles.  Fails if the CPU cannot run isa. */
TCQ_API tcq_status tcq_kctx_force(tcq_kctx *ctx, int isa, tcq_kregime regime);
/* Name of the kernel the last call on ctx ran ("trellis.reduce.fast.m1.avx512"...); "" if none. */
TCQ_API const char *tcq_kctx_last_kernel(const tcq_kctx *ctx);
/* Kernel variants a context leaves out (tests, benchmarks; 0 = none, the default): the AVX2
 * kernels' AVX-VNNI form (vpmaddubsw + vpmaddwd in its place) and the AMX-INT8 tile kernels (the
 * AVX-512 ones in their place), where the CPU has them. */
enum { TCQ_KV_NO_AVXVNNI = 1, TCQ_KV_NO_AMX = 2 };
TCQ_API tcq_status tcq_kctx_exclude(tcq_kctx *ctx, unsigned variants);
TCQ_API const char *tcq_kregime_name(tcq_kregime r);

/* ============================================================================================
 * CUDA (built with -DTCQ_CUDA=ON)
 * ========================================================================================== */

/* Always declared; a build without CUDA returns TCQ_ERR_UNSUPPORTED from every function (and
 * tcq_cuda_available() returns 0).  Device pointers are plain CUDA device pointers owned by the
 * caller; every call on a context is asynchronous on that context's stream unless it says it
 * synchronizes.  Failures return TCQ_ERR_DEVICE with the CUDA / cuBLAS error string; an error
 * raised by an earlier asynchronous launch surfaces at the next tcq_cuda_sync().
 *
 * tcq_cuda_linear runs one of these kernel families, chosen from the weight's shape, M and the
 * path (src/kernels/cuda/README.md describes each, docs/PERFORMANCE.md times them); every one
 * computes y = x W^T within the bound given, relative to float64:
 *   "int"        EXACT/AUTO, M <= 8: integer tensor cores, x in three exact byte limbs   ~5e-7
 *   "int16"      the same at M = 6..8 with x in two limbs                                 ~1e-4
 *   "pair"       pair-table f16 tensor-core kernels (M <= 16 axis 1, <= 8 axis 0)          ~1e-6
 *   "wgmma"      axis 1, T = 256, k 2..4, M 9..256 (k = 2: to 768), sm_90: f16 x          ~1e-4
 *   "wgmma-ss"   axis 0, T = 256, k 2..4, M 9..256 (3 past "int"), sm_90: f16 x         ~1e-4
 *   "bf16-gemm"  larger M: decode to bf16, cuBLAS bf16 GEMM (FORMAT.md's bf16 contract)
 *   "int8"       FAST, M <= 8 (axis 1: 16): the CPU fast path's bound (TCQ_FAST_QB) with the
 *                activation block tcq_cuda_fast_block gives
 *   "fast"       FAST, M <= 8 where "int8" does not run: dp4a, the CPU fast path's integer sums
 * FAST with larger M runs the exact kernels. */

/* 1 if this build has CUDA and a device is present. */
TCQ_API int tcq_cuda_available(void);

/* A context: device, stream, cuBLAS handle, scratch (grown on demand, owned by the context).
 * One context per host thread / stream. */
typedef struct tcq_cuda_ctx tcq_cuda_ctx;
TCQ_API tcq_status tcq_cuda_ctx_create(int device, tcq_cuda_ctx **out);
TCQ_API void tcq_cuda_ctx_free(tcq_cuda_ctx *ctx);
/* Kernel choices of a context, for tests and benchmarks; all zero (what tcq_cuda_ctx_create
 * sets) is the built-in dispatcher.  pair_table: 1 runs M <= tc_max_m on the pair-table kernels
 * wherever they take the call.  tc_max_m: the pair-table kernels' largest M (1..32; 0: 16 on axis
 * 1, 8 on axis 0).  fast_dp4a: 1 runs TCQ_PATH_FAST on the "fast" dp4a kernels (M <= 8), not on
 * "int8".  im_chunk: item length of the integer kernels (a multiple of 32 in [64, 1024]; axis 1
 * takes it only where T divides it; 0: from the shape and SM count).  wgmma, wgmma_ss: -1 off, 1
 * at every M the kernel takes (wgmma-ss: first, both axes), 0 built-in.  wg_grid: the wgmma
 * kernels' block count (0: SMs x blocks an SM).  Fails on a value out of range. */
typedef struct tcq_cuda_opts {
    int pair_table, tc_max_m, fast_dp4a, im_chunk, wgmma, wgmma_ss, wg_grid;
} tcq_cuda_opts;
TCQ_API tcq_status tcq_cuda_ctx_set_opts(tcq_cuda_ctx *ctx, const tcq_cuda_opts *opts);
/* The context's cudaStream_t (as void *), for callers mixing in their own kernels. */
TCQ_API void *tcq_cuda_ctx_stream(tcq_cuda_ctx *ctx);
/* Wait for all work queued on the context's stream; reports asynchronous errors. */
TCQ_API tcq_status tcq_cuda_sync(tcq_cuda_ctx *ctx);
/* "NVIDIA H200, 132 SMs, 60 MB L2, cc 9.0" */
TCQ_API tcq_status tcq_cuda_describe(tcq_cuda_ctx *ctx, char *buf, size_t len);

/* Device memory (cudaMalloc / cudaFree) and copies on the context's stream. */
TCQ_API tcq_status tcq_cuda_malloc(void **ptr, size_t bytes);
TCQ_API void tcq_cuda_free(void *ptr);
TCQ_API tcq_status tcq_cuda_copy_to_device(tcq_cuda_ctx *ctx, void *dst, const void *src, size_t bytes);
TCQ_API tcq_status tcq_cuda_copy_to_host(tcq_cuda_ctx *ctx, void *dst, const void *src, size_t bytes); /* syncs */
TCQ_API tcq_status tcq_cuda_memset(tcq_cuda_ctx *ctx, void *dst, int byte, size_t bytes);

/* Upload a packed tensor: dev_buf (caller-owned device memory of at least
 * tcq_cuda_trellis_bytes(host) bytes, 256-byte aligned as cudaMalloc gives) receives the codes
 * then the scales; *dev becomes the same view with device pointers. */
TCQ_API size_t tcq_cuda_trellis_bytes(const tcq_trellis *host);
TCQ_API tcq_status tcq_cuda_trellis_upload(tcq_cuda_ctx *ctx, const tcq_trellis *host, void *dev_buf,
                                           size_t dev_bytes, tcq_trellis *dev);

/* y = x W^T on the device: w a device view (tcq_cuda_trellis_upload), x [M, in] and y [M, out]
 * device f32.  Any M >= 1.  path: AUTO, EXACT or FAST (the int8 kernels for M <= 8, above). */
TCQ_API tcq_status tcq_cuda_linear(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x /* [M, in] */,
                                   float *y /* [M, out] */, int64_t M, tcq_kpath path);
/* Which kernel tcq_cuda_linear runs for (w, M, path): "fast" (the int8 dp4a kernels), "int8"
 * (TCQ_PATH_FAST on the integer tensor cores), "int" (integer tensor cores, exact), "int16" (the
 * same at M = 6..8 with x in two limbs: ~1e-4), "pair" (the pair-table kernels), "wgmma",
 * "wgmma-ss" or "bf16-gemm" (decode to bf16 + cuBLAS: the bf16 contract).  NULL on a NULL
 * argument.  Static strings. */
TCQ_API const char *tcq_cuda_linear_kernel(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M, tcq_kpath path);
/* The activation block (positions along the reduced dimension that share one int8 step) of
 * TCQ_PATH_FAST for (w, M): TCQ_FAST_QB on "fast", the item length on "int8", 0 where FAST runs
 * an exact kernel (and for M < 1 or a NULL argument). */
TCQ_API int64_t tcq_cuda_fast_block(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M);
/* Fused gate/up + SwiGLU: y = silu(x gate^T) * (x up^T); gate and up axis 1, same shape (FAST,
 * M <= 8: one int8 kernel computes both and combines). */
TCQ_API tcq_status tcq_cuda_linear_swiglu(tcq_cuda_ctx *ctx, const tcq_trellis *gate, const tcq_trellis *up,
                                          const float *x /* [M, in] */, float *y /* [M, out] */, int64_t M,
                                          tcq_kpath path);
/* Decode a device tensor to dense bf16 W [out, in] in device memory (the bf16 contract). */
TCQ_API tcq_status tcq_cuda_trellis_decode_bf16(tcq_cuda_ctx *ctx, const tcq_trellis *w, uint16_t *W /* [out, in] */);

/* GPU encoder: the same contract and output as tcq_encode_rows (bit-identical codes, scales and
 * sq_err), host buffers in and out, every block of the matrix coded in parallel on the device.
 * Two-pass search, L <= 12 (the path memory of a block lives in shared memory); weights w
 * optional.  Rows go up in chunks through pinned staging owned by the context, overlapped with
 * the kernels; the row scales (the same double sum, in the same order), the division and the
 * input checks run on the device.  Synchronizes. */
TCQ_API tcq_status tcq_cuda_encode_rows(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts,
                                        const float *src /* [R, C] */, const float *w /* [R, C] or NULL */,
                                        int64_t R, int64_t C, uint32_t *codes /* [R, C*k/32] */,
                                        uint16_t *scales /* [R] */, double *sq_err);

/* GPU twin of tcq_encode_blocks (n blocks of x coded as they are, no scale): same words, same
 * sq_err.  What `tcq codec --device cuda` runs.  Synchronizes. */
TCQ_API tcq_status tcq_cuda_encode_blocks(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts,
                                          const float *x /* [n*T] */, const float *w /* [n*T] or NULL */, int64_t n,
                                          uint32_t *words /* [n*T*k/32] */, double *sq_err);

#ifdef __cplusplus
}
#endif
#endif /* TCQ_KERNELS_API_H */
