/* Tokenizer internals shared by the files of src/tokenizer (not installed). */
#ifndef TCQ_TOK_INTERNAL_H
#define TCQ_TOK_INTERNAL_H

#include "core/internal.h"

#include <stdint.h>
#include <stddef.h>

/* A growable byte buffer. */
typedef struct tok_buf {
    char *p;
    size_t n, cap;
} tok_buf;
tcq_status tok_buf_put(tok_buf *b, const void *s, size_t n);
static inline tcq_status tok_buf_putc(tok_buf *b, char c) { return tok_buf_put(b, &c, 1); }
tcq_status tok_buf_puts(tok_buf *b, const char *s);
void tok_buf_free(tok_buf *b);

/* Open-addressing map from byte strings (borrowed: they must outlive the map) to int32. */
typedef struct tok_strmap {
    uint32_t mask;              /* capacity - 1, capacity a power of two */
    uint32_t count;
    const char **keys;
    uint32_t *lens;
    int32_t *vals;
} tok_strmap;
tcq_status tok_strmap_init(tok_strmap *m, uint32_t expected);
/* Insert or overwrite. */
tcq_status tok_strmap_put(tok_strmap *m, const char *key, uint32_t len, int32_t val);
/* Value or -1. */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, uint32_t len);
void tok_strmap_free(tok_strmap *m);

/* Map from an id pair to (rank, merged id): the BPE merges. */
typedef struct tok_pairmap {
    uint32_t mask, count;
    uint64_t *keys;             /* (a << 32 | b) + 1; 0 = empty */
    int32_t *rank, *merged;
} tok_pairmap;
tcq_status tok_pairmap_init(tok_pairmap *m, uint32_t expected);
tcq_status tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
/* 1 and fills rank/merged if the pair is a merge, else 0. */
int tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged);
void tok_pairmap_free(tok_pairmap *m);

/* Normalizer steps (applied in order to each text segment between added tokens). */
typedef enum { NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_LOWER, NORM_PREPEND, NORM_REPLACE,
               NORM_STRIP } tok_norm_kind;
typedef struct tok_norm {
    tok_norm_kind kind;
    char *a, *b;                /* PREPEND: a; REPLACE: a -> b (literal) */
    int left, right;            /* STRIP */
} tok_norm;

/* Pre-tokenizer steps. */
typedef enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_METASPACE, PRE_DIGITS, PRE_WSPLIT } tok_pre_kind;
typedef enum { SPLIT_ISOLATED, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT,
               SPLIT_CONTIGUOUS } tok_split_behavior;
typedef struct tok_pre {
    tok_pre_kind kind;
    void *re;                   /* pcre2_code_8 * (SPLIT, BYTELEVEL with use_regex) */
    void *md;                   /* pcre2_match_data_8 *: only for compiling; each call makes its own */
    tok_split_behavior behavior;
    int invert;
    int add_prefix_space;       /* BYTELEVEL */
    int prepend;                /* METASPACE: 0 never, 1 first, 2 always */
    int split;                  /* METASPACE: split on the replacement */
    char repl[8];               /* METASPACE replacement, UTF-8 */
    int individual;             /* DIGITS */
} tok_pre;

typedef struct tok_added {
    int32_t id;
    char *content;
    uint32_t len;
    int special, lstrip, rstrip;
} tok_added;

typedef enum { TOK_KIND_HF = 0, TOK_KIND_LLAMA2C = 1 } tok_kind;

#define TOK_MAX_STEPS 8

struct tcq_tokenizer {
    tok_kind kind;
    int32_t n_vocab;            /* largest id + 1 */
    char **pieces;              /* [n_vocab] vocabulary strings (NULL for unused ids) */
    uint32_t *piece_len;        /* [n_vocab] */
    float *scores;              /* [n_vocab] llama2.c merge scores, else NULL */
    unsigned char *special;     /* [n_vocab] */
    tok_strmap vocab;           /* piece -> id, model vocabulary and added tokens */
    tok_pairmap merges;
    /* Adjacent code point pairs found inside vocabulary pieces, built where words are long (no
     * pre-tokenizer): BPE cannot merge across a boundary whose pair is absent, so long words are
     * cut there first, which changes nothing but the cost. */
    tok_pairmap adjacent;

    tok_added *added;           /* sorted longest first (longest match wins) */
    int n_added;
    unsigned char added_first[256]; /* bytes an added token may start with */

    tok_norm norms[TOK_MAX_STEPS];
    int n_norms;
    tok_pre pres[TOK_MAX_STEPS];
    int n_pres;

    int byte_fallback, fuse_unk, ignore_merges;
    int32_t unk;                /* -1: none */
    int32_t byte_id[256];       /* <0xAB> tokens, -1 where missing */

    int32_t prefix[4], suffix[4];   /* ids the post-processor adds around a single sequence */
    int n_prefix, n_suffix;
    int32_t bos, eos;

    /* Decoded bytes of every token (decoder applied per token), and the stream-start strip. */
    char **dec;
    uint32_t *dec_len;
    int strip_start;            /* leading copies of strip_char removed at the stream start */
    char strip_char;

    char *chat_template;
};

/* GPT-2 byte <-> unicode mapping: the code point a byte is written as, and back (-1: none). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);
/* Length of the UTF-8 sequence starting with byte c (1 for invalid lead bytes). */
static inline int tok_utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}
size_t tok_utf8_put(char *out, uint32_t cp);

/* A list of text pieces: spans of one buffer. */
typedef struct tok_pieces {
    tok_buf text;
    size_t *start, *len;
    size_t n, cap;
} tok_pieces;
tcq_status tok_pieces_add(tok_pieces *p, const char *s, size_t len);
void tok_pieces_free(tok_pieces *p);

/* Normalize one segment (steps in order) into out (cleared first). first: the segment is the
 * start of the text. */
tcq_status tok_normalize(const tcq_tokenizer *t, const char *s, size_t len, tok_buf *out);
/* Pre-tokenize a normalized segment into pieces (appended to out). */
tcq_status tok_pretokenize(const tcq_tokenizer *t, const char *s, size_t len, int first, tok_pieces *out);
void tok_pre_free(tok_pre *p);
/* Compile a PCRE2 pattern (literal=1: a plain string) for a Split step. */
tcq_status tok_pre_compile(tok_pre *p, const char *pattern, int literal, const char *where);

/* BPE of one pre-tokenized word: appends ids to out (an int32 tok_buf). */
tcq_status tok_bpe_word(const tcq_tokenizer *t, const char *w, size_t len, tok_buf *out);

/* Build dec/dec_len for the HF decoder description (called by the loaders). */
typedef struct tok_decoder_desc {
    int byte_level, byte_fallback;
    int n_replace;
    char *rep_from[4], *rep_to[4];
    int strip_start;
    char strip_char;
} tok_decoder_desc;
tcq_status tok_build_decoded(tcq_tokenizer *t, const tok_decoder_desc *d);

/* Shared tail of both loaders: added-token index, byte ids, the adjacency set. */
tcq_status tok_finish(tcq_tokenizer *t);

/* tokenizer.json into t (tok_load.c); tokenizer_config.json on top of it. */
tcq_status tok_load_json(tcq_tokenizer *t, const char *path);
tcq_status tok_load_config(tcq_tokenizer *t, const char *path);

/* Read a whole file (NUL-terminated); *len optional. */
tcq_status tok_read_file(const char *path, char **data, size_t *len);

#endif
