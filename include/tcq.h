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

/* TCQ_API marks what libtcq exports: the library is built with -fvisibility=hidden, so a program
 * linking libtcq.so sees exactly the functions this header declares. */
#if defined(__GNUC__) || defined(__clang__)
#define TCQ_API __attribute__((visibility("default")))
#else
#define TCQ_API
#endif

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
TCQ_API const char *tcq_status_str(tcq_status s);

/* The calling thread's message for the most recent failure (or "" if none). Valid until the next
 * failing call on this thread. */
TCQ_API const char *tcq_last_error(void);

/* Library version as "MAJOR.MINOR.PATCH". */
TCQ_API const char *tcq_version(void);

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

typedef enum tcq_search {
    TCQ_SEARCH_TWO_PASS = 0,  /* QTIP Algorithm 4: roll by T/2, free pass, constrained pass */
    TCQ_SEARCH_SEAMS = 1,     /* two-pass plus extra constrained passes over candidate seams */
    TCQ_SEARCH_COUNT
} tcq_search;

TCQ_API const char *tcq_search_name(tcq_search s);   /* "default" (two-pass), "seams" */
TCQ_API tcq_status tcq_search_parse(const char *name, tcq_search *out);

typedef struct tcq_encode_opts {
    tcq_search search;        /* TCQ_SEARCH_TWO_PASS */
    int seams;                /* candidate seams for TCQ_SEARCH_SEAMS (0: the default, 8) */
} tcq_encode_opts;

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
TCQ_API tcq_status tcq_kctx_create(tcq_pool *pool /* may be NULL */, tcq_kpath path, tcq_kctx **out);
TCQ_API void tcq_kctx_free(tcq_kctx *ctx);

/* y = x W^T for M rows: x [M, in], y [M, out]. Any format, any M >= 1.  Dense f16/bf16 weights
 * are read in their stored format and widened exactly in registers: f32 activations, one fmaf per
 * term, f32 sums (|error| <= (K + 4) 2^-24 sum |w x|; the same bits for any thread count). */
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
 * Tokenizer
 *
 * Hugging Face tokenizer.json (BPE: byte-level GPT-2/Qwen style and SentencePiece style with
 * byte fallback, Llama 2), and llama2.c's tokenizer.bin.  Token ids are int32_t.  A tokenizer is
 * immutable after loading: any number of threads may encode/decode with one concurrently.
 * ========================================================================================== */

typedef struct tcq_tokenizer tcq_tokenizer;

/* path: a model directory (reads tokenizer.json, and if present tokenizer_config.json for
 * bos/eos, add_bos_token/add_eos_token (which override the post-processor, as transformers'
 * Llama tokenizer does) and the chat template, and chat_template.jinja, which wins over the
 * config's; a directory with no tokenizer.json but a tokenizer.bin loads that as llama2.c's),
 * a tokenizer.json file (the same files beside it are read), or a llama2.c
 * tokenizer.bin (a name ending in ".bin": vocabulary size read to end of file).
 * tokenizer.json support: model BPE (merges as "a b" or ["a", "b"], byte_fallback, unk/fuse_unk,
 * ignore_merges); normalizers NFC/NFD/NFKC/NFKD, Lowercase, Strip, Prepend, Replace (string),
 * Sequence; pre-tokenizers ByteLevel, Split (regex through PCRE2 with Unicode properties, or
 * string; all behaviors, invert), Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence;
 * post-processor TemplateProcessing/ByteLevel; decoders ByteLevel, Metaspace, Replace,
 * ByteFallback, Fuse, Strip.  Anything else fails with TCQ_ERR_UNSUPPORTED naming it. */
TCQ_API tcq_status tcq_tokenizer_load(const char *path, tcq_tokenizer **out);
/* llama2.c tokenizer.bin: int32 max_token_length, then per token float score, int32 len, bytes.
 * vocab_size <= 0 reads tokens until end of file.  BOS = 1, EOS = 2, add_bos on. */
TCQ_API tcq_status tcq_tokenizer_load_llama2c(const char *path, int32_t vocab_size, tcq_tokenizer **out);
TCQ_API void tcq_tokenizer_free(tcq_tokenizer *tok);

/* Largest id + 1 (vocabulary and added tokens). */
TCQ_API int32_t tcq_tokenizer_vocab_size(const tcq_tokenizer *tok);
/* Special ids, -1 where the tokenizer has none.  bos/eos come from tokenizer_config.json
 * (bos_token/eos_token), else from the post-processor (bos) / llama2.c's fixed ids. */
TCQ_API int32_t tcq_tokenizer_bos(const tcq_tokenizer *tok);
TCQ_API int32_t tcq_tokenizer_eos(const tcq_tokenizer *tok);
/* 1 if encoding with TCQ_TOK_ADD_SPECIAL puts BOS in front (post-processor/add_bos_token). */
TCQ_API int tcq_tokenizer_adds_bos(const tcq_tokenizer *tok);
/* Id of a token by its exact vocabulary string (added tokens first: "<|im_end|>", "<s>"), or -1. */
TCQ_API int32_t tcq_tokenizer_find(const tcq_tokenizer *tok, const char *piece);
/* The vocabulary string of an id as stored ("Ġhello", "▁the", "<0x0A>"), or NULL if out of range. */
TCQ_API const char *tcq_tokenizer_piece(const tcq_tokenizer *tok, int32_t id);
/* 1 for added tokens marked special (control tokens), 0 otherwise. */
TCQ_API int tcq_tokenizer_is_special(const tcq_tokenizer *tok, int32_t id);
/* The chat template text (tokenizer_config.json "chat_template", or chat_template.jinja of the
 * directory), or NULL. Owned by the tokenizer. */
TCQ_API const char *tcq_tokenizer_chat_template(const tcq_tokenizer *tok);

enum {
    TCQ_TOK_ADD_SPECIAL = 1,    /* add BOS/EOS as the post-processor says (HF add_special_tokens) */
    TCQ_TOK_NO_PARSE_SPECIAL = 2, /* do not match special added tokens in the text (as plain text) */
};

/* Encode len bytes of UTF-8 text (invalid UTF-8 is encoded byte for byte by byte-level and
 * byte-fallback vocabularies).  Added tokens are matched in the raw text, longest first, before
 * normalization (also those marked "normalized").  *n_ids receives the number of tokens; when
 * cap is too small (ids NULL and cap 0 asks for the count), returns TCQ_ERR_RANGE with *n_ids
 * set to the count needed. */
TCQ_API tcq_status tcq_tokenizer_encode(const tcq_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                        int32_t *ids /* [cap] */, size_t cap, size_t *n_ids);
/* As tcq_tokenizer_encode, into a malloc'd array (release it with free). */
TCQ_API tcq_status tcq_tokenizer_encode_alloc(const tcq_tokenizer *tok, const char *text, size_t len,
                                              unsigned flags, int32_t **ids, size_t *n_ids);

enum {
    TCQ_DETOK_SKIP_SPECIAL = 1, /* special tokens produce no text */
};

/* The bytes one token stands for (byte-level mapped back, ▁ -> space, <0xAB> -> byte), without
 * the decoder's leading-space strip.  May be a partial UTF-8 sequence.  Writes at most cap bytes;
 * *len receives the full length (TCQ_ERR_RANGE if it exceeds cap). */
TCQ_API tcq_status tcq_tokenizer_token_bytes(const tcq_tokenizer *tok, int32_t id, char *buf, size_t cap,
                                             size_t *len);
/* Decode ids to a malloc'd NUL-terminated UTF-8 string (invalid sequences become U+FFFD, as HF
 * does); *len (optional) receives its length. */
TCQ_API tcq_status tcq_tokenizer_decode(const tcq_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags,
                                        char **text, size_t *len);

/* Streaming decoder: text comes out only as complete UTF-8 characters; a character split across
 * tokens is held until its last byte arrives.  The leading-space strip of SentencePiece-style
 * decoders (Llama's "Strip", Metaspace, llama2.c) applies to the first text of the stream: with
 * TCQ_DETOK_SKIP_SPECIAL a leading BOS produces nothing and " Once" comes out as "Once".
 * Concatenating a stream's outputs equals tcq_tokenizer_decode of the same ids. */
typedef struct tcq_detok tcq_detok;
TCQ_API tcq_status tcq_detok_create(const tcq_tokenizer *tok, unsigned flags, tcq_detok **out);
TCQ_API void tcq_detok_free(tcq_detok *d);
/* Feed one token; *text and *len receive the newly complete text (not NUL-terminated, may be empty),
 * valid until the next call on d. */
TCQ_API tcq_status tcq_detok_push(tcq_detok *d, int32_t id, const char **text, size_t *len);
/* End of stream: held incomplete bytes come out as U+FFFD. */
TCQ_API tcq_status tcq_detok_flush(tcq_detok *d, const char **text, size_t *len);
/* Start a new stream (the leading-space strip applies again). */
TCQ_API void tcq_detok_reset(tcq_detok *d);

/* Chat templates: a Jinja subset interpreter rendering as transformers' apply_chat_template
 * (jinja2 sandbox, trim_blocks, lstrip_blocks, loop controls): {{ }}, {% if/elif/else %},
 * {% for %} with loop.* and else, {% set %} (also blocks and namespace() attributes), macros,
 * {% raw %}, filters (trim, tojson, length, default, join, map, select(attr), sort, ...), tests,
 * Python string and dict methods, slicing, ~ and +, |safe Markup semantics.  Variables: messages,
 * tools, documents (None), add_generation_prompt, enable_thinking (when given), bos_token,
 * eos_token; functions raise_exception, namespace, range, dict, strftime_now.  Not supported:
 * include/import/extends/block, filters outside that list (an error names them). */
typedef struct tcq_chat_message {
    const char *role;           /* "system", "user", "assistant", "tool" */
    const char *content;        /* NULL: None */
    const char *extra_json;     /* NULL, or a JSON object of more fields ("tool_calls",
                                 * "reasoning_content", ...) merged into the message */
} tcq_chat_message;

typedef struct tcq_chat_opts {
    int add_generation_prompt;  /* 1: end with the assistant header */
    int enable_thinking;        /* -1: not passed (template default), 0: false, 1: true */
    const char *bos_token;      /* bos_token / eos_token variables (NULL: undefined) */
    const char *eos_token;
    const char *tools_json;     /* NULL (tools = None), or a JSON array of tool schemas */
} tcq_chat_opts;

/* Render template_text with messages[n] into a malloc'd NUL-terminated string.  opts may be
 * NULL (no generation prompt, enable_thinking not passed).  A syntax error or an unsupported
 * construct fails with TCQ_ERR_FORMAT naming the template line; raise_exception() in the
 * template (a conversation the template rejects) with TCQ_ERR_INVALID_ARG and its message. */
TCQ_API tcq_status tcq_chat_render(const char *template_text, const tcq_chat_message *messages, size_t n,
                                   const tcq_chat_opts *opts, char **out);
/* tcq_chat_render with the tokenizer's template, and its BOS/EOS strings where opts leaves them
 * NULL.  TCQ_ERR_NOT_FOUND if the tokenizer has no chat template. */
TCQ_API tcq_status tcq_tokenizer_apply_chat(const tcq_tokenizer *tok, const tcq_chat_message *messages, size_t n,
                                            const tcq_chat_opts *opts, char **out);

/* ============================================================================================
 * Model: loading, forward, generation, evaluation
 *
 * A model is loaded from a Hugging Face style directory (config.json + safetensors, single or
 * sharded; dense f32/f16/bf16, trellis and MLX affine tensors through the quantization entries)
 * or from a llama2.c checkpoint file (*.bin).  Architectures: "llama" and "qwen3" (dense).
 * Weights stay mmapped; only norm gains are converted (to f32) at load.  Every linear layer goes
 * through tcq_linear / tcq_linear_swiglu.
 *
 * A session holds one sequence's KV cache and position.  A model may serve several sessions, but
 * the forward functions of one model must not run concurrently (the model owns the scratch).
 * ========================================================================================== */

typedef enum tcq_arch { TCQ_ARCH_LLAMA = 0, TCQ_ARCH_QWEN3, TCQ_ARCH_COUNT } tcq_arch;

#define TCQ_MAX_EOS 8

typedef struct tcq_model_config {
    tcq_arch arch;
    int dim;                  /* hidden_size */
    int hidden_dim;           /* intermediate_size */
    int n_layers, n_heads, n_kv_heads, head_dim;
    int vocab_size;
    int max_seq;              /* max_position_embeddings */
    float norm_eps;           /* rms_norm_eps */
    double rope_theta;
    int rope_interleaved;     /* 1: llama2.c pairs (2i, 2i+1); 0: HF rotate-half (i, i+d/2) */
    int rope_llama3;          /* rope_type "llama3" with the four parameters below */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_orig_max_pos;
    int tied_embeddings;      /* lm_head is the embedding table; from config_parse -1 when
                               * config.json does not say (a loaded model has 0 or 1: tied iff
                               * the checkpoint has no lm_head.weight) */
    int bos_id;               /* -1 if none */
    int n_eos;
    int eos_ids[TCQ_MAX_EOS];
} tcq_model_config;

/* Parse a config.json text (label names it in messages). Rejects unknown model_type. */
TCQ_API tcq_status tcq_model_config_parse(const char *json, size_t len, const char *label, tcq_model_config *out);

typedef enum tcq_device { TCQ_DEVICE_CPU = 0, TCQ_DEVICE_CUDA, TCQ_DEVICE_AUTO } tcq_device;

typedef struct tcq_model_opts {
    int n_threads;            /* <= 0: one per online CPU */
    tcq_kpath path;           /* trellis numerical path (TCQ_PATH_AUTO) */
    /* Optional progress of loading and of tcq_eval_* (per window): frac in [0, 1], what names
     * the current step. */
    void (*progress)(void *arg, double frac, const char *what);
    void *progress_arg;
    /* 1: read every mapped weight page once at load (with progress), so the first forward does
     * not pay the page faults.  0: pages come in on first use. */
    int prefault;
    /* Where the forward runs: TCQ_DEVICE_CPU (0, the default); TCQ_DEVICE_CUDA: the whole forward
     * on CUDA device device_index (weights uploaded at load, KV caches in device memory; the load
     * fails, naming both numbers, when weights + caches' scratch exceed the device's free memory,
     * and with TCQ_ERR_UNSUPPORTED on a build without CUDA or a machine without the device);
     * TCQ_DEVICE_AUTO: CUDA device device_index when present, else the CPU. */
    tcq_device device;
    int device_index;
    int cuda_no_graphs;       /* 1: decode steps launched kernel by kernel, not as CUDA graphs (tests) */
} tcq_model_opts;

typedef struct tcq_model tcq_model;

/* path: a model directory, a .safetensors file next to its config.json, or a llama2.c .bin.
 * opts may be NULL (defaults). */
TCQ_API tcq_status tcq_model_load(const char *path, const tcq_model_opts *opts, tcq_model **out);
TCQ_API void tcq_model_free(tcq_model *m);
TCQ_API const tcq_model_config *tcq_model_get_config(const tcq_model *m);
/* Bytes of weight data the model reads (mapped tensors + converted norms). */
TCQ_API size_t tcq_model_weight_bytes(const tcq_model *m);
/* Human-readable weight format summary, e.g. "bf16; embeddings bf16 (tied)" or
 * "trellis k=3; embeddings bf16 (tied)" (storage owned by the model). */
TCQ_API const char *tcq_model_describe(const tcq_model *m);
/* Where the model runs: "cpu" or e.g. "cuda:0 (NVIDIA H100 80GB HBM3, 132 SMs, ...)"; owned by the
 * model.  Sessions of a CUDA model hold their KV cache in device memory. */
TCQ_API const char *tcq_model_device(const tcq_model *m);

/* A model of the given geometry with random weights (benchmarks, tests): bits 0 gives dense bf16
 * layers, 16 dense f16 layers and embeddings, 1..4 trellis layers (L=12, T=256, random codes);
 * embeddings are bf16 (f16 with bits 16) and tied.
 * cfg->max_seq / rope_theta / norm_eps <= 0 take defaults (4096, 1e6, 1e-6). */
TCQ_API tcq_status tcq_model_synthetic(const tcq_model_config *cfg, int bits, uint64_t seed, const tcq_model_opts *opts,
                                       tcq_model **out);

typedef enum tcq_kv_dtype { TCQ_KV_F32 = 0, TCQ_KV_F16 } tcq_kv_dtype;

/* One sequence: KV cache of ctx positions and the current position. */
typedef struct tcq_session tcq_session;

/* ctx <= 0: the model's max_seq. */
TCQ_API tcq_status tcq_session_create(const tcq_model *m, int ctx, tcq_kv_dtype kv, tcq_session **out);
TCQ_API void tcq_session_free(tcq_session *s);
TCQ_API int tcq_session_pos(const tcq_session *s);           /* tokens already in the cache */
TCQ_API int tcq_session_ctx(const tcq_session *s);
TCQ_API size_t tcq_session_kv_bytes(const tcq_session *s);
/* Forget positions >= pos (pos <= current position). */
TCQ_API tcq_status tcq_session_rewind(tcq_session *s, int pos);
/* KV cache bytes for a session of ctx positions (for reporting before allocating). */
TCQ_API size_t tcq_model_kv_bytes(const tcq_model *m, int ctx, tcq_kv_dtype kv);

/* Rows per prefill chunk: the prompt is processed in chunks of up to this many rows.  256: four
 * Qwen3-14B-geometry layers prefilled 512 tokens 1.13x faster than with 64 (the fast path's
 * panel kernel gains with rows); the model's activation scratch is 256 rows (47 MB at that
 * geometry), and perplexity/KL runs hold 256 rows of logits per model. */
#define TCQ_PREFILL_CHUNK 256

/* Append n tokens to the session and run them.  logits [n, vocab] receives every position's
 * logits, or NULL for none.  TCQ_ERR_RANGE (session unchanged) if pos + n > ctx; tokens outside
 * [0, vocab) are TCQ_ERR_INVALID_ARG. */
TCQ_API tcq_status tcq_model_forward(tcq_model *m, tcq_session *s, const int32_t *tokens /* [n] */, int n,
                                     float *logits /* [n, vocab] or NULL */);
/* As tcq_model_forward but computes only the last position's logits (the lm_head is the
 * largest matrix; a prompt does not need it per row). */
TCQ_API tcq_status tcq_model_prefill(tcq_model *m, tcq_session *s, const int32_t *tokens /* [n] */, int n,
                                     float *last_logits /* [vocab] or NULL */);
/* One token for each of nb (1..TCQ_MAX_BATCH) independent sessions, run as nb rows through
 * the same linear calls.  Sessions must be distinct.  The same computation as nb separate
 * forwards; the kernels' M-row paths may round differently from M = 1 (tests allow 1e-3).
 * Likewise a chunk of a prompt (attention through sgemm) and token-by-token decode agree to
 * rounding, not bit for bit; each is bit-identical for any thread count. */
#define TCQ_MAX_BATCH 32
TCQ_API tcq_status tcq_model_forward_batch(tcq_model *m, tcq_session *const *sess /* [nb] */,
                                           const int32_t *tokens /* [nb] */, int nb,
                                           float *logits /* [nb, vocab] */);

/* Sampling.  Order: repetition penalty, then greedy if temperature <= 0, else temperature,
 * top-k, top-p, min-p, and a draw from the deterministic PRNG (xoshiro256** seeded by
 * splitmix64(seed)). */
typedef struct tcq_sampler_params {
    float temperature;        /* <= 0: greedy (argmax, lowest id among ties) */
    int top_k;                /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float repeat_penalty;     /* 1: off; llama.cpp rule: logit > 0 ? l / r : l * r */
    int repeat_last_n;        /* window of recent tokens the penalty looks at (0: 64) */
    uint64_t seed;
} tcq_sampler_params;

/* Defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, no penalty, seed 0. */
TCQ_API tcq_sampler_params tcq_sampler_defaults(void);

typedef struct tcq_sampler tcq_sampler;
TCQ_API tcq_status tcq_sampler_create(const tcq_sampler_params *p, int vocab, tcq_sampler **out);
TCQ_API void tcq_sampler_free(tcq_sampler *s);
/* Choose a token from logits [vocab] (read-only) given the history the sampler was told of. */
TCQ_API int tcq_sampler_sample(tcq_sampler *s, const float *logits /* [vocab] */);
/* Record a token in the history (prompt and generated tokens) for the repetition penalty. */
TCQ_API void tcq_sampler_accept(tcq_sampler *s, int32_t token);
TCQ_API void tcq_sampler_reset(tcq_sampler *s);

/* Stop strings over streamed text: text is fed piece by piece; what can be emitted without
 * risking that it starts a stop string is released, the rest held back. */
typedef struct tcq_stopper tcq_stopper;
TCQ_API tcq_status tcq_stopper_create(const char *const *stops, int n_stops, tcq_stopper **out);
TCQ_API void tcq_stopper_free(tcq_stopper *st);
/* Feed len bytes.  *emit / *emit_len: bytes safe to print now (valid until the next call).
 * Returns 1 when a stop string was completed (emit then ends just before it), else 0. */
TCQ_API int tcq_stopper_feed(tcq_stopper *st, const char *text, size_t len, const char **emit, size_t *emit_len);
/* The held-back tail, at the end of generation. */
TCQ_API void tcq_stopper_flush(tcq_stopper *st, const char **emit, size_t *emit_len);

/* Generation: prefill the prompt, then sample and decode until EOS, max_new tokens, the
 * callback returning nonzero, or the context filling (TCQ_ERR_RANGE after the tokens that
 * fitted were delivered). */
typedef struct tcq_gen_stats {
    int n_prompt, n_generated;
    double prefill_s, decode_s;   /* wall seconds */
    int stopped_eos;              /* 1 if an EOS token ended it */
} tcq_gen_stats;
typedef int (*tcq_token_fn)(void *arg, int32_t token);
TCQ_API tcq_status tcq_generate(tcq_model *m, tcq_session *s, tcq_sampler *smp, const int32_t *prompt /* [n] */,
                                int n_prompt, int max_new, tcq_token_fn on_token, void *arg, tcq_gen_stats *stats);

/* nb (1..TCQ_MAX_BATCH) independent generations decoded together: each sequence is prefilled on
 * its own, then the live ones advance one token per step through tcq_model_forward_batch.  Each
 * has its own session, sampler, prompt and stats[b]; on_token(arg, b, token) returning nonzero
 * ends sequence b.  Gives the tokens nb separate tcq_generate calls give.  TCQ_ERR_RANGE if a
 * sequence ran out of context (the others still finish). */
typedef int (*tcq_batch_token_fn)(void *arg, int seq, int32_t token);
TCQ_API tcq_status tcq_generate_batch(tcq_model *m, tcq_session *const *sess /* [nb] */,
                                      tcq_sampler *const *smp /* [nb] */,
                                      const int32_t *const *prompts /* [nb][n_prompt[b]] */,
                                      const int *n_prompt /* [nb] */,
                                      int nb, int max_new, tcq_batch_token_fn on_token, void *arg,
                                      tcq_gen_stats *stats /* [nb] or NULL */);

/* Evaluation over a token stream cut into non-overlapping windows of ctx tokens (a fresh KV
 * cache each); in each window the NLL of tokens 1..ctx-1 given their prefix is scored (ctx-1
 * predictions per window; the last partial window is dropped).  max_windows <= 0: all. */
typedef struct tcq_eval_result {
    int windows;
    int64_t predictions;
    double mean_nll;          /* perplexity = exp(mean_nll) */
    double perplexity;
    /* KL only: */
    double mean_kl;           /* mean KL(ref || model) in nats */
    double kl_p95;            /* 95th percentile of per-position KL */
    double top1_agree;        /* fraction where argmax agrees */
    double ref_mean_nll, ref_perplexity;
} tcq_eval_result;

TCQ_API tcq_status tcq_eval_perplexity(tcq_model *m, const int32_t *tokens, int64_t n, int ctx, int max_windows,
                                       tcq_eval_result *out);
/* KL(ref || model) position by position; both models run window by window. */
TCQ_API tcq_status tcq_eval_kl(tcq_model *m, tcq_model *ref, const int32_t *tokens, int64_t n, int ctx,
                               int max_windows, tcq_eval_result *out);

/* ============================================================================================
 * Quantize
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

/* tcq_quantize_model: fold RMSNorm gains, rotate the residual stream, code every attention and MLP
 * projection along its rotated axis (q/k/v/gate/up axis 1; o/down axis 0, stored transposed) with
 * per-row scales, keep embeddings, lm_head and norms dense bf16, and write a FORMAT.md artifact
 * (config.json with "quantization" + "quantization_config", model.safetensors, tokenizer files). */
typedef struct tcq_quantize_opts {
    int bits;                 /* k: 2, 3 or 4; 0: fold and rotate only, every tensor dense f32
                                 and no quantization object (a plain model, for checking) */
    int L;                    /* state bits (0: 12) */
    int T;                    /* block size (0: 256) */
    uint64_t seed;            /* Hadamard sign seed */
    int threads;              /* <= 0: one per CPU */
    tcq_encode_opts enc;      /* search options */
    int interleave;           /* k=3: store axis-0 codes as the two-block interleave [C/512, R, 48]
                                 (entry "interleave": true) where C % 512 == 0 */
    int refit_scales;         /* after coding, replace each row's RMS scale by the least-squares
                                 one where that lowers the error (same format, decoders unchanged) */
    int cuda;                 /* 1: code the matrices with the GPU encoder (tcq_cuda_encode_rows on
                                 device 0): the same codes and scales, so the same artifact, byte
                                 for byte.  Needs a CUDA build and device, the default search and
                                 L <= 12 (else TCQ_ERR_UNSUPPORTED before anything is written). */
    int lm_head_bits;         /* 0: the lm_head (output projection; the untied copy of a tied
                                 embedding) stays dense bf16; 2..4: coded along its input like the
                                 projections, with this k (its own entry in the quantization
                                 object).  The input embedding stays bf16 either way. */
    /* Hessian-aware coding (issue 23).  calib: a text file; the input model runs over windows of
     * calib_ctx tokens of it (calib_tokens in all) and every projection's input gives its
     * Hessian H = sum x x^T.  With method LDLQ the projections are coded by BlockLDLQ on
     * H + damp * mean(diag H) I; with RTN and a calibration the proxy losses are reported. */
    int method;               /* TCQ_QMETHOD_RTN (0) or TCQ_QMETHOD_LDLQ */
    const char *calib;        /* calibration text (NULL: none) */
    int64_t calib_tokens;     /* 0: 32768 */
    int calib_ctx;            /* 0: 512 */
    double damp;              /* 0: 0.1 */
    const char *hessians_in;  /* a directory saved by hessians_out: its Hessians instead of calib */
    const char *hessians_out; /* write the Hessians to DIR/hessians.bin */
    double bpw;               /* 0: every projection at bits; else k in {2, 3, 4} per projection
                                 chosen by proxy loss under this mean k (needs a calibration) */
    int ldlq_passes;          /* LDLQ: block coordinate descent passes after BlockLDLQ, each block
                                 recoded with every other block's error in hand (0: 1, < 0: none) */
} tcq_quantize_opts;
enum { TCQ_QMETHOD_RTN = 0, TCQ_QMETHOD_LDLQ = 1 };

typedef struct tcq_quantize_progress {
    const char *tensor;       /* the tensor being processed */
    int64_t done, total;      /* weights coded so far / to code (what the time goes into) */
    int64_t coded_weights, dense_weights;
    double sq_err, sq_ref;    /* running sums over coded tensors (rotated units) */
    int tensor_index, tensor_count;
    const char *note;         /* a warning about this tensor (kept dense, ...) or NULL */
    int k;                    /* the k this tensor was coded at (0: not coded) */
    double coded_bits;        /* running sum over coded tensors: k per weight + 16 per row scale */
    double proxy, proxy_ref;  /* its tr(E H E^T) and tr(W H W^T); proxy < 0: no Hessian */
    const char *phase;        /* NULL, or "calibration" / "allocation" while done counts them */
} tcq_quantize_progress;

/* Called after every tensor (and once at the start with done = 0).  Must not call tcq. */
typedef void (*tcq_quantize_cb)(const tcq_quantize_progress *p, void *user);

TCQ_API tcq_status tcq_quantize_model(const char *in_dir, const char *out_dir, const tcq_quantize_opts *opts,
                                      tcq_quantize_cb cb, void *user);

/* ============================================================================================
 * CUDA (built with -DTCQ_CUDA=ON)
 * ========================================================================================== */

/* Always declared; a build without CUDA returns TCQ_ERR_UNSUPPORTED from every function (and
 * tcq_cuda_available() returns 0).  Device pointers are plain CUDA device pointers owned by the
 * caller; every call on a context is asynchronous on that context's stream unless it says it
 * synchronizes.  Failures return TCQ_ERR_DEVICE with the CUDA / cuBLAS error string; an error
 * raised by an earlier asynchronous launch surfaces at the next tcq_cuda_sync().
 *
 * Kernels (docs in docs/PERFORMANCE.md, "CUDA (H200)"), in the dispatcher's order:
 *   M <= 8 (axis 1 with T = 128 or 256; axis 0 any T): integer tensor-core kernels.  The four
 *     bytes of x = s*34038481 + 76625530 (one IMAD per weight) are the u8 A operand of
 *     mma.m16n8k32 against the activation replicated four times: the tensor core forms
 *     byte sum x activation.  x is an exact integer x' = rint(x 2^e) per 512 or 768 (axis 1)
 *     or 128..1024 (axis 0) inputs (by the shape and SM count), |x'| < 2^22, split in three
 *     signed byte limbs (B columns), so the s32 sums are exact; each chunk's sum is finished in
 *     double and kept in f32, chunks added in order.  Relative error against float64 ~5e-7
 *     (x's quantization, 2^-23 of its chunk max).  M = 6..8 ("int16"): x' < 2^14 in two
 *     limbs, so the 16 columns of 8 rows fit two n-tiles instead of three; relative error against float64 ~1e-4 (2^-15 of the chunk max per
 *     element), the wgmma kernels' order (their f16 x).
 *   where no wgmma kernel below runs, M <= 16 on axis 1 (M <= 8 on axis 0): pair-table kernel.  Pairs of states are
 *     looked up in a shared-memory table of (y_t, y_t+1) as two exact f16 integers (y the 1MAD byte sum minus 510), fed to
 *     mma.m16n8k16 against the activations split into f16 hi + lo parts (x' = x*2^e, e per row
 *     so x' fits f16), accumulated in f32; y = acc * 2^-e * scale / 147.800537109375.  The
 *     factored contract of FORMAT.md; relative error against float64 ~1e-6.
 *   9 <= M <= 256 (k = 2: also to 768 where the last 256-row tile is over half full), axis 1,
 *     T = 256, k = 2..4, on sm_90 (compute capability 9.0): wgmma kernel.
 *     Each thread decodes (y_t, y_t+1) of its rows in f16 (exact) straight into the A registers
 *     of wgmma.m64nNk16; x (B, from shared memory) in f16 after a power-of-two scale per
 *     activation row (largest |x 2^e| in [2^14, 2^15)); f32 accumulation; y = acc * 2^-e *
 *     scale / 147.800537109375.  Relative error against float64 ~1e-4 (x's f16 rounding, finer
 *     than the bf16 contract below).
 *   9 <= M <= 256 (3 where the integer kernel does not run), axis 0, T = 256, k = 2..4, in
 *     (coded rows) a multiple of 64, on sm_90:
 *     wgmma-ss kernel.  Producer warps decode 64-k stages of the weights (y exact in f16) into
 *     shared memory; consumer warpgroups multiply them with wgmma against x, also from shared
 *     memory: x times its per-input scale (one f32 product) in f16 after a power-of-two scale
 *     per activation row (largest |x s 2^e| in [2^14, 2^15)); f32 accumulation; y = acc *
 *     2^-e / 147.800537109375.  The same kernel runs axis 1 under tcq_cuda_opts.wgmma_ss (scale then
 *     in the output factor, as for wgmma).  Relative error against float64 ~1e-4.
 *   larger M otherwise: the tensor decoded to bf16 (FORMAT.md's bf16 contract) into context scratch (the
 *     whole matrix, in its coded layout: axis 0 as W^T), then a cuBLAS bf16 GEMM with f32
 *     accumulation (x rounded to bf16).  tcq_cuda_linear_kernel says which one runs.
 *   TCQ_PATH_FAST, M <= 8 (axis 1: M <= 16), where the integer kernels run ("int8"): the exact
 *     path's integer tensor-core kernel with one signed-byte column per activation row instead
 *     of three: the activation (axis 0: times its scale, one f32 product) quantized per
 *     item-length block along the reduced dimension
 *     (tcq_cuda_fast_block: 512 or 768 on axis 1, 128..1024 on axis 0, chosen from the shape,
 *     M and the device's SM count so the work items fill the SMs in whole rounds) with the
 *     CPU fast path's arithmetic (d = amax/127, q = nearbyintf(a * (127/amax))); exact integer
 *     block sums, each turned into d (isum - 510 sum q) in double, rounded to f32 and added in
 *     block order; the tcq.h bound of the CPU fast path (TCQ_FAST_QB above) with these blocks.
 *     M = 1..8 cost about the same: all rows fit one n8 tile (M = 9..16 two).
 *   TCQ_PATH_FAST, M <= 8, elsewhere ("fast"): the CPU's fast-path contract (TCQ_FAST_QB above): the activation
 *     quantized per 64 positions exactly as the CPU does, the decode folded into dp4a (the four
 *     bytes of s*34038481 + 76625530 against q replicated four times), exact integer block sums
 *     (the CPU's to the bit), blocks combined in f32 in a different fixed order; within the
 *     bound above of float64, and within 2 (nblk + 4) 2^-24 sum_i |v_i| (|a_i| + d_i) of the
 *     CPU's int8 fast path (its scalar reference; the AVX-512 axis-1 tile regime, M >= 5, uses
 *     int16 activations instead).  FAST with M > 8 (axis 1: > 16) runs the exact kernels; AUTO the exact ones. */

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

/* Benchmark helpers (used by bench/bench_kernels_cuda.c): median microseconds per call of a
 * CUDA graph of `reps` back-to-back calls, cycling through n_w weights (so the bytes read exceed
 * the L2), repeated `trials` times. */
TCQ_API tcq_status tcq_cuda_time_linear(tcq_cuda_ctx *ctx, const tcq_trellis *const *w, int n_w, const float *x,
                                        float *y, int64_t M, tcq_kpath path, int reps, int trials, double *us);
TCQ_API tcq_status tcq_cuda_time_swiglu(tcq_cuda_ctx *ctx, const tcq_trellis *const *gate, const tcq_trellis *const *up,
                                        int n_w, const float *x, float *y, int64_t M, tcq_kpath path, int reps,
                                        int trials,
                                        double *us);
/* cuBLAS bf16 GEMM y[M,out] = x[M,in] W^T (f32 accumulate, bf16 out), n_w weight copies. */
TCQ_API tcq_status tcq_cuda_time_dense_bf16(tcq_cuda_ctx *ctx, int64_t out, int64_t in, int64_t M, int n_w,
                                            int reps, int trials, double *us);
/* Device-to-device copy of `bytes`: GB/s counting bytes read plus written. */
TCQ_API tcq_status tcq_cuda_time_copy(tcq_cuda_ctx *ctx, size_t bytes, int reps, int trials, double *gbps);
/* GPU encoder throughput on R x C Gaussian rows, weights per second: one whole
 * tcq_cuda_encode_rows call after a warm-up call of the same shape (so the context's buffers are
 * grown: the steady state of a quantizer run) and its kernels alone (device time from the first
 * chunk's kernels to the last one's end; kernel_wps may be NULL). */
TCQ_API tcq_status tcq_cuda_time_encode(tcq_cuda_ctx *ctx, tcq_block_params p, int64_t R, int64_t C, double *wps,
                                        double *kernel_wps);

#ifdef __cplusplus
}
#endif
#endif /* TCQ_H */
