/*
 * tcq.h — trellis-coded quantization for language models: the application API.
 *
 * tcq stores weights in the QTIP-style "bitshift trellis" with the 1MAD code (the packed format
 * of mlx-bun's trellis artifacts, docs/FORMAT.md in the shared folder) and runs Llama / Qwen3
 * models on the packed weights directly, on the CPU or a CUDA GPU.  This header is what a
 * program that loads, runs, evaluates or quantizes models needs; each call says what it does and
 * how it can fail.  The layer underneath (the codec, the encoder, safetensors, the linear
 * kernels and their contexts, CUDA buffers, the thread pool) is tcq_kernels.h, which includes
 * this header; a program that only runs models never needs it.
 *
 * Contents
 *   Status ............ tcq_status, tcq_last_error, tcq_version
 *   Model ............. tcq_model_load / _free / _get_config / _describe / _device / _synthetic
 *   Session ........... one sequence's KV cache: tcq_session_*, tcq_model_forward / _prefill / _batch
 *   Tokenizer ......... tcq_tokenizer_*, the streaming detokenizer tcq_detok_*
 *   Chat .............. chat templates: tcq_chat_render, tcq_tokenizer_apply_chat
 *   Sampling .......... tcq_sampler_*, stop strings tcq_stopper_*
 *   Generation ........ tcq_generate, tcq_generate_batch
 *   Evaluation ........ tcq_eval_perplexity, tcq_eval_kl
 *   Quantize .......... tcq_quantize_model (a bf16/f32 checkpoint to a trellis artifact)
 *
 * Quick start: load a model, generate 64 tokens of a prompt, print them as they come
 * (tests/cli/install.sh builds and runs these lines against an installed tcq):
 *
 *     #include <tcq.h>
 *     #include <stdio.h>
 *     static int show(void *d, int32_t id) {   // called per token; nonzero stops
 *         const char *t; size_t n;
 *         if (tcq_detok_push(d, id, &t, &n) == TCQ_OK) fwrite(t, 1, n, stdout);
 *         return 0;
 *     }
 *     int main(int argc, char **argv) {
 *         tcq_model *m; tcq_tokenizer *tok; tcq_session *s; tcq_sampler *smp; tcq_detok *d;
 *         int32_t ids[512]; size_t n;
 *         tcq_sampler_params sp = tcq_sampler_defaults();
 *         if (argc < 2 || tcq_model_load(argv[1], NULL, &m) || tcq_tokenizer_load(argv[1], &tok) ||
 *             tcq_tokenizer_encode(tok, "Once upon a time", 16, TCQ_TOK_ADD_SPECIAL, ids, 512, &n) ||
 *             tcq_session_create(m, 0, TCQ_KV_F16, &s) ||
 *             tcq_sampler_create(&sp, tcq_model_get_config(m)->vocab_size, &smp) ||
 *             tcq_detok_create(tok, TCQ_DETOK_SKIP_SPECIAL, &d) ||
 *             tcq_generate(m, s, smp, ids, (int)n, 64, show, d, NULL))
 *             return fprintf(stderr, "tcq: %s\n", tcq_last_error()), 1;
 *         puts("");   // a long-lived program frees each object: tcq_detok_free, ...
 *         return 0;
 *     }
 *
 * Build: cc app.c $(pkg-config --cflags --libs tcq).  Run: ./app models/tinyqwen-k2.
 *
 * Conventions
 *   - Every fallible function returns tcq_status.  TCQ_OK is 0.  On failure, tcq_last_error()
 *     returns a message for the calling thread that names the file, tensor or field at fault.
 *     The library never calls exit() or abort() on input it was given.  "Fails" below lists the
 *     statuses a call returns for the causes a caller can act on; any allocating call may also
 *     return TCQ_ERR_NOMEM, any CUDA-model call TCQ_ERR_DEVICE, and a NULL required pointer is
 *     TCQ_ERR_INVALID_ARG.
 *   - Memory is caller-owned where it fits: functions that fill a buffer take the buffer and its
 *     size.  Objects the library allocates have a matching *_free(), which accepts NULL.
 *   - Shapes are written next to pointers, row-major: `float *logits; // [n, vocab]`.
 *   - Results are bit-identical for any thread count.
 *   - The library reads two environment variables: TCQ_ISA (pin the CPU kernels' instruction
 *     set) and TCQ_POOL_SPIN_US (how long idle workers spin); tcq_kernels.h describes both.
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
 * Model: loading, forward, generation, evaluation
 *
 * A model is loaded from a Hugging Face style directory (config.json + safetensors, single or
 * sharded; dense f32/f16/bf16, trellis and MLX affine tensors through the quantization entries)
 * or from a llama2.c checkpoint file (*.bin).  Architectures: "llama" and "qwen3" (dense).
 * Weights stay mmapped; only norm gains are converted (to f32) at load.  Every linear layer goes
 * through tcq_linear / tcq_linear_swiglu (tcq_kernels.h).
 *
 * A session holds one sequence's KV cache and position.  A model may serve several sessions, but
 * the forward functions of one model must not run concurrently (the model owns the scratch).
 * ========================================================================================== */

/* Numerical path (tcq_model_opts.path; the kernels' contracts: tcq_kernels.h, "Linear kernels").
 * Trellis weights: int8 activations on the fast path.  Dense bf16 weights: from M = 33 rows
 * (prefill) the fast path rounds the activations to bf16 for an AVX-512 BF16 GEMM where the CPU
 * has one (src/kernels/kernels.h, "bf16 activations"); exact keeps f32 activations everywhere. */
typedef enum tcq_kpath {
    TCQ_PATH_AUTO = 0,          /* the fast path (the runtime default) */
    TCQ_PATH_EXACT,             /* weight = f32 value(s) * f32(scale), f32 activations and sums */
    TCQ_PATH_FAST,              /* trellis: int8 activations, decode folded into the integer dot
                                 * product; dense bf16 from M = 33: bf16 activations */
} tcq_kpath;

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

/* Parse a config.json text (label names it in messages).  tcq_model_load does this itself; this
 * is for tools that inspect a config.  Fails: TCQ_ERR_FORMAT (not JSON, a field missing, of the
 * wrong type or out of range), TCQ_ERR_UNSUPPORTED (a model_type other than llama / qwen3, an
 * activation, rope type or attention layout tcq does not run). */
TCQ_API tcq_status tcq_model_config_parse(const char *json, size_t len, const char *label, tcq_model_config *out);

typedef enum tcq_device { TCQ_DEVICE_CPU = 0, TCQ_DEVICE_CUDA, TCQ_DEVICE_AUTO } tcq_device;

typedef struct tcq_model_opts {
    int n_threads;            /* <= 0: one per online CPU */
    tcq_kpath path;           /* numerical path (TCQ_PATH_AUTO) */
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

/* Load a model.  path: a model directory, a .safetensors file next to its config.json, or a
 * llama2.c .bin.  opts may be NULL (defaults).  Fails: TCQ_ERR_IO (no such path, unreadable),
 * TCQ_ERR_FORMAT (config.json or a safetensors header malformed, a tensor of the wrong dtype or
 * shape; the message names file and tensor), TCQ_ERR_NOT_FOUND (a tensor the architecture needs
 * is missing), TCQ_ERR_UNSUPPORTED (an architecture or weight format tcq does not run; CUDA asked
 * of a build or machine without it), TCQ_ERR_NOMEM (also: the weights do not fit the device). */
TCQ_API tcq_status tcq_model_load(const char *path, const tcq_model_opts *opts, tcq_model **out);
/* Frees the model and its scratch; sessions are freed with tcq_session_free. */
TCQ_API void tcq_model_free(tcq_model *m);
/* The parsed geometry (dim, layers, vocab_size, max_seq, eos ids, ...), owned by the model. */
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
 * cfg->max_seq / rope_theta / norm_eps <= 0 take defaults (4096, 1e6, 1e-6).  Fails:
 * TCQ_ERR_INVALID_ARG (a geometry that is not positive or not consistent, bits not 0, 1..4 or
 * 16, trellis rows not a multiple of 256). */
TCQ_API tcq_status tcq_model_synthetic(const tcq_model_config *cfg, int bits, uint64_t seed, const tcq_model_opts *opts,
                                       tcq_model **out);

/* ============================================================================================
 * Session: one sequence's KV cache; the forward pass
 * ========================================================================================== */

typedef enum tcq_kv_dtype { TCQ_KV_F32 = 0, TCQ_KV_F16 } tcq_kv_dtype;

/* One sequence: KV cache of ctx positions and the current position. */
typedef struct tcq_session tcq_session;

/* A session of ctx positions (ctx <= 0: the model's max_seq) with its KV cache in kv's precision
 * (f16 halves the cache; attention reads it widened to f32).  Fails: TCQ_ERR_INVALID_ARG (ctx
 * above max_seq), TCQ_ERR_NOMEM (the cache does not fit; tcq_model_kv_bytes says its size). */
TCQ_API tcq_status tcq_session_create(const tcq_model *m, int ctx, tcq_kv_dtype kv, tcq_session **out);
TCQ_API void tcq_session_free(tcq_session *s);
TCQ_API int tcq_session_pos(const tcq_session *s);           /* tokens already in the cache */
TCQ_API int tcq_session_ctx(const tcq_session *s);           /* positions it holds */
TCQ_API size_t tcq_session_kv_bytes(const tcq_session *s);
/* Forget positions >= pos, so the next forward continues from pos (a shared prefix kept, the
 * rest regenerated).  Fails: TCQ_ERR_INVALID_ARG if pos is outside [0, current position]. */
TCQ_API tcq_status tcq_session_rewind(tcq_session *s, int pos);
/* dst takes src's first n positions (keys and values of every layer, bit for bit) and continues
 * from n, as if it had run src's first n tokens itself: a prompt cache keeps a finished
 * sequence's state in a session of just its length and puts it back into a running one.
 * Fails: TCQ_ERR_INVALID_ARG (n outside [0, src's position] or above dst's context, sessions of
 * different models or cache dtypes, dst == src), TCQ_ERR_UNSUPPORTED (a session on a device). */
TCQ_API tcq_status tcq_session_copy(tcq_session *dst, const tcq_session *src, int n);
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
 * largest matrix; a prompt does not need it per row).  Fails as tcq_model_forward. */
TCQ_API tcq_status tcq_model_prefill(tcq_model *m, tcq_session *s, const int32_t *tokens /* [n] */, int n,
                                     float *last_logits /* [vocab] or NULL */);
/* One token for each of nb (1..TCQ_MAX_BATCH) independent sessions, run as nb rows through
 * the same linear calls.  Sessions must be distinct.  The same computation as nb separate
 * forwards; the kernels' M-row paths may round differently from M = 1 (tests allow 1e-3).
 * Likewise a chunk of a prompt (attention through sgemm) and token-by-token decode agree to
 * rounding, not bit for bit; each is bit-identical for any thread count.  Fails:
 * TCQ_ERR_INVALID_ARG (nb outside 1..TCQ_MAX_BATCH, a NULL or repeated session, a token outside
 * the vocabulary), TCQ_ERR_RANGE (a session is full; none is changed). */
#define TCQ_MAX_BATCH 32
TCQ_API tcq_status tcq_model_forward_batch(tcq_model *m, tcq_session *const *sess /* [nb] */,
                                           const int32_t *tokens /* [nb] */, int nb,
                                           float *logits /* [nb, vocab] */);

/* Prompts (or chunks of prompts) of nb (1..TCQ_MAX_BATCH) distinct sessions, as nb
 * tcq_model_prefill calls except that the last rows' logits come from one lm_head call of as many
 * rows (the lm_head is read once, not nb times).  merge_rows 0: every sequence runs through the
 * layers alone, so its rows meet the kernels at the M they would alone; results equal nb
 * tcq_model_prefill calls bit for bit wherever the lm_head's kernel gives a row the same bits at
 * M = 1 and M = (number of last_logits wanted) -- as in a decode batch (docs/PERFORMANCE.md,
 * "Batch composition").  merge_rows 1: the sequences' rows also go through the layers together
 * (up to TCQ_PREFILL_CHUNK rows per forward; each keeps its own attention), so the layers' kernels
 * see M = the rows of all of them: cheaper for short prompts, equal to separate prefills only to
 * the kernels' rounding across M.  Fails, before anything runs: TCQ_ERR_INVALID_ARG (nb outside
 * 1..TCQ_MAX_BATCH, a NULL or repeated session, no tokens, a token outside the vocabulary),
 * TCQ_ERR_RANGE (a sequence overflows its session's context; none is changed). */
typedef struct tcq_prefill_seq {
    tcq_session *sess;
    const int32_t *tokens;    /* [n] appended to sess */
    int n;                    /* >= 1 */
    float *last_logits;       /* [vocab]: the last row's logits, or NULL for none */
} tcq_prefill_seq;
TCQ_API tcq_status tcq_model_prefill_batch(tcq_model *m, const tcq_prefill_seq *seqs /* [nb] */, int nb,
                                           int merge_rows);

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
 * ByteFallback, Fuse, Strip.  Anything else fails with TCQ_ERR_UNSUPPORTED naming it.  Other
 * failures: TCQ_ERR_NOT_FOUND (no such path, or a directory without tokenizer.json or
 * tokenizer.bin), TCQ_ERR_FORMAT (malformed JSON, a merge of pieces not in the vocabulary, a
 * truncated tokenizer.bin; the message names the file and the entry). */
TCQ_API tcq_status tcq_tokenizer_load(const char *path, tcq_tokenizer **out);
/* llama2.c tokenizer.bin: int32 max_token_length, then per token float score, int32 len, bytes.
 * vocab_size <= 0 reads tokens until end of file.  BOS = 1, EOS = 2, add_bos on.  Fails:
 * TCQ_ERR_NOT_FOUND, TCQ_ERR_FORMAT (truncated, or fewer tokens than vocab_size). */
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
 * set to the count needed.  Nothing else fails on any input bytes. */
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
 * *len receives the full length (TCQ_ERR_RANGE if it exceeds cap; TCQ_ERR_INVALID_ARG for an id
 * outside the vocabulary). */
TCQ_API tcq_status tcq_tokenizer_token_bytes(const tcq_tokenizer *tok, int32_t id, char *buf, size_t cap,
                                             size_t *len);
/* Decode ids to a malloc'd NUL-terminated UTF-8 string (invalid sequences become U+FFFD, as HF
 * does); *len (optional) receives its length.  Ids outside the vocabulary fail with
 * TCQ_ERR_INVALID_ARG. */
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
 * valid until the next call on d.  Fails: TCQ_ERR_INVALID_ARG for an id outside the vocabulary. */
TCQ_API tcq_status tcq_detok_push(tcq_detok *d, int32_t id, const char **text, size_t *len);
/* End of stream: held incomplete bytes come out as U+FFFD. */
TCQ_API tcq_status tcq_detok_flush(tcq_detok *d, const char **text, size_t *len);
/* Start a new stream (the leading-space strip applies again). */
TCQ_API void tcq_detok_reset(tcq_detok *d);

/* ============================================================================================
 * Chat templates
 * ========================================================================================== */

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
 * Sampling and stop strings
 * ========================================================================================== */

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

/* A sampler over logits of vocab entries (the model's vocab_size).  Fails: TCQ_ERR_INVALID_ARG
 * (vocab < 1, a NaN temperature, repeat_penalty <= 0, top_p <= 0, ...). */
typedef struct tcq_sampler tcq_sampler;
TCQ_API tcq_status tcq_sampler_create(const tcq_sampler_params *p, int vocab, tcq_sampler **out);
TCQ_API void tcq_sampler_free(tcq_sampler *s);
/* Choose a token from logits [vocab] (read-only) given the history the sampler was told of.
 * Never fails: any logits (NaN included) give an id in [0, vocab). */
TCQ_API int tcq_sampler_sample(tcq_sampler *s, const float *logits /* [vocab] */);
/* Record a token in the history (prompt and generated tokens) for the repetition penalty. */
TCQ_API void tcq_sampler_accept(tcq_sampler *s, int32_t token);
TCQ_API void tcq_sampler_reset(tcq_sampler *s);   /* empty history, PRNG back to its seed */

/* Stop strings over streamed text: text is fed piece by piece; what can be emitted without
 * risking that it starts a stop string is released, the rest held back.  Create fails only on
 * NULL stops with n_stops > 0, or n_stops < 0 (TCQ_ERR_INVALID_ARG). */
typedef struct tcq_stopper tcq_stopper;
TCQ_API tcq_status tcq_stopper_create(const char *const *stops, int n_stops, tcq_stopper **out);
TCQ_API void tcq_stopper_free(tcq_stopper *st);
/* Feed len bytes.  *emit / *emit_len: bytes safe to print now (valid until the next call).
 * Returns 1 when a stop string was completed (emit then ends just before it), else 0. */
TCQ_API int tcq_stopper_feed(tcq_stopper *st, const char *text, size_t len, const char **emit, size_t *emit_len);
/* The held-back tail, at the end of generation. */
TCQ_API void tcq_stopper_flush(tcq_stopper *st, const char **emit, size_t *emit_len);

/* ============================================================================================
 * Generation
 * ========================================================================================== */

/* Generation: prefill the prompt, then sample and decode until EOS, max_new tokens, the
 * callback returning nonzero, or the context filling (TCQ_ERR_RANGE after the tokens that
 * fitted were delivered). */
typedef struct tcq_gen_stats {
    int n_prompt, n_generated;
    double prefill_s, decode_s;   /* wall seconds */
    int stopped_eos;              /* 1 if an EOS token ended it */
} tcq_gen_stats;
typedef int (*tcq_token_fn)(void *arg, int32_t token);
/* Fails: TCQ_ERR_INVALID_ARG (an empty prompt, a prompt token outside the vocabulary),
 * TCQ_ERR_RANGE (the prompt does not fit the session, or the context filled), and what
 * tcq_model_forward fails with.  stats (optional) is filled once the prompt has run, also when
 * the context filled. */
TCQ_API tcq_status tcq_generate(tcq_model *m, tcq_session *s, tcq_sampler *smp, const int32_t *prompt /* [n] */,
                                int n_prompt, int max_new, tcq_token_fn on_token, void *arg, tcq_gen_stats *stats);

/* nb (1..TCQ_MAX_BATCH) independent generations decoded together: each sequence is prefilled on
 * its own, then the live ones advance one token per step through tcq_model_forward_batch.  Each
 * has its own session, sampler, prompt and stats[b]; on_token(arg, b, token) returning nonzero
 * ends sequence b.  Gives the tokens nb separate tcq_generate calls give.  TCQ_ERR_RANGE if a
 * sequence ran out of context (the others still finish); TCQ_ERR_INVALID_ARG for nb outside
 * 1..TCQ_MAX_BATCH, an empty prompt or a repeated session. */
typedef int (*tcq_batch_token_fn)(void *arg, int seq, int32_t token);
TCQ_API tcq_status tcq_generate_batch(tcq_model *m, tcq_session *const *sess /* [nb] */,
                                      tcq_sampler *const *smp /* [nb] */,
                                      const int32_t *const *prompts /* [nb][n_prompt[b]] */,
                                      const int *n_prompt /* [nb] */,
                                      int nb, int max_new, tcq_batch_token_fn on_token, void *arg,
                                      tcq_gen_stats *stats /* [nb] or NULL */);

/* ============================================================================================
 * Evaluation
 * ========================================================================================== */

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

/* Fails: TCQ_ERR_INVALID_ARG (ctx < 2 or above the model's max_seq), TCQ_ERR_RANGE (n tokens do
 * not fill one window), TCQ_ERR_NOMEM. */
TCQ_API tcq_status tcq_eval_perplexity(tcq_model *m, const int32_t *tokens, int64_t n, int ctx, int max_windows,
                                       tcq_eval_result *out);
/* KL(ref || model) position by position; both models run window by window (ref's perplexity
 * also goes into out).  Fails as tcq_eval_perplexity, and with TCQ_ERR_INVALID_ARG when the two
 * vocabularies differ. */
TCQ_API tcq_status tcq_eval_kl(tcq_model *m, tcq_model *ref, const int32_t *tokens, int64_t n, int ctx,
                               int max_windows, tcq_eval_result *out);

/* ============================================================================================
 * Quantize
 * ========================================================================================== */

/* The encoder's search (tcq_kernels.h, "Encoder", describes both). */
typedef enum tcq_search {
    TCQ_SEARCH_TWO_PASS = 0,  /* QTIP Algorithm 4: roll by T/2, free pass, constrained pass */
    TCQ_SEARCH_SEAMS = 1,     /* two-pass plus extra constrained passes over candidate seams */
    TCQ_SEARCH_COUNT
} tcq_search;

TCQ_API const char *tcq_search_name(tcq_search s);   /* "default" (two-pass), "seams" */
/* The inverse of tcq_search_name; TCQ_ERR_INVALID_ARG for any other name. */
TCQ_API tcq_status tcq_search_parse(const char *name, tcq_search *out);

typedef struct tcq_encode_opts {
    tcq_search search;        /* TCQ_SEARCH_TWO_PASS */
    int seams;                /* candidate seams for TCQ_SEARCH_SEAMS (0: the default, 8) */
} tcq_encode_opts;

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
                                 L <= 12 (else an error before anything is written).  With a
                                 calibration (calib / hessians_in) the Hessians' sums, the LDL's
                                 Cholesky factor and BlockLDLQ's / its passes' / the proxy's
                                 products run on the GPU too, in double (cuBLAS; the f32 feedback
                                 of axis 0 in f32 without TF32): the CPU's algorithm in other
                                 summation orders, so close to, not equal to, the CPU's bytes;
                                 the same bytes run to run.  The calibration forward stays on
                                 the CPU. */
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
                                 under this mean k, chosen by measured KL: each projection's cost
                                 at k is the input model's mean KL on alloc_windows windows
                                 (calib_ctx tokens each) from the start of the calibration text
                                 with only that projection coded at k (needs calib, the text, also
                                 with hessians_in; or alloc_costs_in) */
    int calib_sequential;     /* 0: Hessians of the input model (non-sequential, reusable with any
                                 k); 1: sequential, layer i's taken with layers 0..i-1 already
                                 quantized (they depend on the k chosen).  tinyqwen LDLQ KL at
                                 k = 2 / 3 / 4: 0.3029 / 0.0726 / 0.0203 non-sequential, 0.3082 /
                                 0.0734 / 0.0202 sequential (docs/PERFORMANCE.md) */
    int layers;               /* 0: all; N: only decoder layers 0..N-1, written as a truncated
                                 model (num_hidden_layers N), for checks of time and memory */
    int ldlq_passes;          /* LDLQ: block coordinate descent passes after BlockLDLQ, each block
                                 recoded with every other block's error in hand (0: 1, < 0: none) */
    int alloc_windows;        /* bpw: 0: 4 */
    const char *alloc_costs_out; /* bpw: write every projection's cost at k = 2, 3, 4 to this file */
    const char *alloc_costs_in;  /* bpw: the costs from such a file instead of measuring them */
    int scale_search;         /* LDLQ: each row coded at 1, 0.9, 1.1, 0.8, 1.2, 0.95, 1.05, 0.85, 1.15
                                 times its RMS scale (the first scale_search of them, at most 9; 0:
                                 9, 1: the RMS scale only), the best kept per row (tinyqwen k = 3,
                                 CPU time of the whole run: 5 2.1x that of 1, 9 1.5x that of 5) */
    int axis0_group;          /* LDLQ, o/down (coded along axis 0, H over the stored rows): BlockLDLQ's
                                 blocks, and the passes' groups, of this many stored rows, each
                                 group's rows and scale candidates coded in one encoder call (what
                                 a GPU needs: R / g launches, not R x scale_search); 1: row by row
                                 (GPTQ's order, the coder before session 27); 0: the default, 8
                                 (tinyqwen KL +1.0 / +0.5 % against 1 at k = 2 / 3); at most 256 */
    int asym;                 /* LDLQ with a sequential calibration (calib, calib_sequential): GPTAQ's
                                 asymmetric targets, each projection coded against what the input
                                 model computes on its own inputs, ||W X_fp - Wq X||^2, instead of
                                 ||(W - Wq) X||^2 on the partly coded model's X (a second, input-model
                                 stream through the calibration; not with cuda or saved Hessians).
                                 1: a layer's statistics taken once, before it is coded; 2: also
                                 retaken before o, gate/up and down with the projections before
                                 them coded (~4x the calibration forward; no hessians_out) */
    double asym_alpha;        /* asym: the fraction of the correction taken, W + alpha W C Hd^-1
                                 (asym.c), in (0, 2]; 0: 0.25, GPTAQ's published code's (tinyqwen
                                 k = 3 KL against no asym: within -9.9 % at 0.25, -7.2 % at 1;
                                 layer -5.0 % at 0.25, +6.1 % at 1; docs/PERFORMANCE.md) */
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
    const char *phase;        /* NULL; "allocation" while done counts the allocation pass; "hessians"
                                 once per layer when its Hessians are ready */
    double seconds;           /* the time of the step just reported (a tensor; a layer's Hessians) */
    int layer, layer_count;   /* the decoder layer in progress (-1: the tensors outside them), of how many */
    double alloc_cost[3];     /* phase "allocation", after each tensor: its cost at k = 2, 3, 4 */
} tcq_quantize_progress;

/* Called after every tensor (and once at the start with done = 0).  Must not call tcq. */
typedef void (*tcq_quantize_cb)(const tcq_quantize_progress *p, void *user);

/* Quantize the model in in_dir (config.json + bf16/f16/f32 safetensors, llama or qwen3) into a new
 * artifact in out_dir (created; files in it are replaced).  opts may not be NULL: start from a
 * zeroed struct and set bits.  Fails: TCQ_ERR_INVALID_ARG (out_dir is in_dir, an option out of
 * range, LDLQ or bpw without a calibration), TCQ_ERR_IO / TCQ_ERR_FORMAT / TCQ_ERR_NOT_FOUND (the
 * input model, the calibration text or saved Hessians), TCQ_ERR_UNSUPPORTED (a hidden size no
 * Hadamard transform covers, cuda without a device). */
TCQ_API tcq_status tcq_quantize_model(const char *in_dir, const char *out_dir, const tcq_quantize_opts *opts,
                                      tcq_quantize_cb cb, void *user);

#ifdef __cplusplus
}
#endif
#endif /* TCQ_H */
