/* Encoding: added tokens are cut out of the raw text first (longest match), every other segment
 * is normalized, pre-tokenized and BPE'd; the post-processor adds BOS/EOS. */
#include "tokenizer/tok_internal.h"

#include <string.h>

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* A per-call cache of pre-tokenized words and their ids: natural text repeats its words, and a
 * tokenizer is shared by threads, so the cache lives in the call.  Keys are copied into blocks
 * that never move; the map holds at most CACHE_MAX words. */
enum { CACHE_MAX = 1 << 16, KEY_BLOCK = 1 << 16 };
typedef struct key_block { struct key_block *next; size_t used; char data[KEY_BLOCK]; } key_block;
typedef struct word_cache {
    tok_strmap map;             /* word -> entry index */
    tok_buf spans;              /* [entry] (offset, count) into ids, as two uint32 */
    tok_buf ids;                /* int32 ids of all cached words */
    key_block *keys;
} word_cache;

static void cache_free(word_cache *c)
{
    tok_strmap_free(&c->map);
    tok_buf_free(&c->spans);
    tok_buf_free(&c->ids);
    while (c->keys) {
        key_block *n = c->keys->next;
        free(c->keys);
        c->keys = n;
    }
}

static tcq_status bpe_cached(const tcq_tokenizer *t, word_cache *c, const char *w, size_t len, tok_buf *out)
{
    if (len > 256) return tok_bpe_word(t, w, len, out);   /* long words rarely repeat */
    int32_t e = c->map.keys ? tok_strmap_get(&c->map, w, (uint32_t)len) : -1;
    if (e >= 0) {
        uint32_t sp[2];
        memcpy(sp, c->spans.p + (size_t)e * sizeof sp, sizeof sp);
        return tok_buf_put(out, c->ids.p + (size_t)sp[0] * sizeof(int32_t), (size_t)sp[1] * sizeof(int32_t));
    }
    size_t before = out->n;
    TCQ_TRY(tok_bpe_word(t, w, len, out));
    if (c->map.count >= CACHE_MAX) return TCQ_OK;
    if (!c->map.keys) TCQ_TRY(tok_strmap_init(&c->map, 1024));
    if (!c->keys || c->keys->used + len > KEY_BLOCK) {
        key_block *b = malloc(sizeof *b);
        if (!b) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
        b->next = c->keys;
        b->used = 0;
        c->keys = b;
    }
    char *key = c->keys->data + c->keys->used;
    memcpy(key, w, len);
    c->keys->used += len;
    uint32_t sp[2] = {(uint32_t)(c->ids.n / sizeof(int32_t)), (uint32_t)((out->n - before) / sizeof(int32_t))};
    TCQ_TRY(tok_buf_put(&c->ids, out->p + before, out->n - before));
    TCQ_TRY(tok_buf_put(&c->spans, sp, sizeof sp));
    return tok_strmap_put(&c->map, key, (uint32_t)len, (int32_t)(c->spans.n / sizeof sp - 1));
}

static tcq_status encode_segment(const tcq_tokenizer *t, word_cache *cache, const char *s, size_t len, int first,
                                 tok_buf *ids)
{
    if (len == 0) return TCQ_OK;
    if (t->kind == TOK_KIND_LLAMA2C) {
        /* llama2.c: a dummy-prefix space, then score-driven merges over the whole text */
        tok_buf w = {0};
        tcq_status st = tok_buf_putc(&w, ' ');
        if (st == TCQ_OK) st = tok_buf_put(&w, s, len);
        if (st == TCQ_OK) st = tok_bpe_word(t, w.p, w.n, ids);
        tok_buf_free(&w);
        return st;
    }
    tok_buf norm = {0};
    tok_pieces pcs = {0};
    tcq_status st = tok_normalize(t, s, len, &norm);
    if (st == TCQ_OK) st = tok_pretokenize(t, norm.p, norm.n, first, &pcs);
    for (size_t i = 0; st == TCQ_OK && i < pcs.n; i++) st = bpe_cached(t, cache, pcs.text.p + pcs.start[i], pcs.len[i], ids);
    tok_pieces_free(&pcs);
    tok_buf_free(&norm);
    return st;
}

/* The added token starting at text[i], longest first, or NULL. */
static const tok_added *added_at(const tcq_tokenizer *t, const char *text, size_t len, size_t i, unsigned flags)
{
    if (!t->added_first[(unsigned char)text[i]]) return NULL;
    for (int k = 0; k < t->n_added; k++) {
        const tok_added *a = &t->added[k];
        if (a->special && (flags & TCQ_TOK_NO_PARSE_SPECIAL)) continue;
        if (a->len <= len - i && memcmp(text + i, a->content, a->len) == 0) return a;
    }
    return NULL;
}

static tcq_status encode_all(const tcq_tokenizer *t, const char *text, size_t len, unsigned flags, tok_buf *ids)
{
    if (!t || (!text && len)) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_tokenizer_encode: NULL argument");
    if (flags & TCQ_TOK_ADD_SPECIAL) TCQ_TRY(tok_buf_put(ids, t->prefix, (size_t)t->n_prefix * sizeof(int32_t)));
    word_cache cache = {0};
    tcq_status st = TCQ_OK;
    size_t seg = 0, i = 0;
    while (i < len && st == TCQ_OK) {
        const tok_added *a = t->n_added ? added_at(t, text, len, i, flags) : NULL;
        if (!a) {
            i++;
            continue;
        }
        size_t end = i;
        if (a->lstrip) while (end > seg && is_space((unsigned char)text[end - 1])) end--;
        st = encode_segment(t, &cache, text + seg, end - seg, seg == 0, ids);
        if (st == TCQ_OK) st = tok_buf_put(ids, &a->id, sizeof a->id);
        i += a->len;
        if (a->rstrip) while (i < len && is_space((unsigned char)text[i])) i++;
        seg = i;
    }
    if (st == TCQ_OK) st = encode_segment(t, &cache, text + seg, len - seg, seg == 0, ids);
    cache_free(&cache);
    TCQ_TRY(st);
    if (flags & TCQ_TOK_ADD_SPECIAL) TCQ_TRY(tok_buf_put(ids, t->suffix, (size_t)t->n_suffix * sizeof(int32_t)));
    return TCQ_OK;
}

tcq_status tcq_tokenizer_encode(const tcq_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                int32_t *ids, size_t cap, size_t *n_ids)
{
    tok_buf b = {0};
    tcq_status st = encode_all(tok, text, len, flags, &b);
    if (st == TCQ_OK) {
        size_t n = b.n / sizeof(int32_t);
        if (n_ids) *n_ids = n;
        if (n > cap || (n && !ids))
            st = tcq_fail(TCQ_ERR_RANGE, "tcq_tokenizer_encode: %zu tokens do not fit in %zu", n, ids ? cap : 0);
        else if (n)
            memcpy(ids, b.p, n * sizeof(int32_t));
    }
    tok_buf_free(&b);
    return st;
}

tcq_status tcq_tokenizer_encode_alloc(const tcq_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                      int32_t **ids, size_t *n_ids)
{
    tok_buf b = {0};
    tcq_status st = encode_all(tok, text, len, flags, &b);
    if (st == TCQ_OK && !b.p) st = tok_buf_put(&b, "", 0);
    if (st != TCQ_OK) {
        tok_buf_free(&b);
        return st;
    }
    *ids = (int32_t *)(void *)b.p;   /* malloc'd by tok_buf; int32-aligned as any malloc block */
    *n_ids = b.n / sizeof(int32_t);
    return TCQ_OK;
}
