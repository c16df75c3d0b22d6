/* Encoding: added tokens are cut out of the raw text first (longest match), every other segment
 * is normalized, pre-tokenized and BPE'd; the post-processor adds BOS/EOS. */
#include "tokenizer/tok_internal.h"

#include <string.h>

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static tcq_status encode_segment(const tcq_tokenizer *t, const char *s, size_t len, int first, tok_buf *ids)
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
    for (size_t i = 0; st == TCQ_OK && i < pcs.n; i++) st = tok_bpe_word(t, pcs.text.p + pcs.start[i], pcs.len[i], ids);
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
    size_t seg = 0, i = 0;
    while (i < len) {
        const tok_added *a = t->n_added ? added_at(t, text, len, i, flags) : NULL;
        if (!a) {
            i++;
            continue;
        }
        size_t end = i;
        if (a->lstrip) while (end > seg && is_space((unsigned char)text[end - 1])) end--;
        TCQ_TRY(encode_segment(t, text + seg, end - seg, seg == 0, ids));
        TCQ_TRY(tok_buf_put(ids, &a->id, sizeof a->id));
        i += a->len;
        if (a->rstrip) while (i < len && is_space((unsigned char)text[i])) i++;
        seg = i;
    }
    TCQ_TRY(encode_segment(t, text + seg, len - seg, seg == 0, ids));
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
