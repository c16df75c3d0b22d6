/* Decoding: every token's bytes are precomputed at load (the decoder applied per token), so
 * decoding is concatenation, the stream-start strip, and UTF-8 repair.  The streaming decoder
 * holds an incomplete UTF-8 tail between tokens. */
#include "tokenizer/tok_internal.h"

#include <string.h>

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "<0xAB>" -> 0xAB, else -1. */
static int byte_token(const char *p, size_t n)
{
    if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
    int h = hexval(p[3]), l = hexval(p[4]);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
}

static tcq_status decode_piece(const tok_decoder_desc *d, const char *p, size_t n, tok_buf *out, tok_buf *tmp)
{
    out->n = 0;
    TCQ_TRY(tok_buf_put(out, "", 0));
    int mapped = 0;
    if (d->byte_level) {
        /* tokenizers: a token with a character outside the byte alphabet is kept as it is */
        mapped = 1;
        for (size_t i = 0; i < n && mapped;) {
            int cl = tok_utf8_len((unsigned char)p[i]);
            uint32_t cp = (unsigned char)p[i];
            if (cl == 2 && i + 1 < n) cp = ((cp & 31u) << 6) | ((unsigned char)p[i + 1] & 63u);
            int b = (cl <= 2 && i + (size_t)cl <= n) ? tok_cp_to_byte(cp) : -1;
            if (b < 0) mapped = 0;
            else TCQ_TRY(tok_buf_putc(out, (char)b));
            i += (size_t)cl;
        }
    }
    if (!mapped) {
        out->n = 0;
        TCQ_TRY(tok_buf_put(out, p, n));
    }
    for (int r = 0; r < d->n_replace; r++) {
        size_t fl = strlen(d->rep_from[r]);
        tmp->n = 0;
        TCQ_TRY(tok_buf_put(tmp, "", 0));
        for (size_t i = 0; i < out->n;) {
            if (fl && i + fl <= out->n && memcmp(out->p + i, d->rep_from[r], fl) == 0) {
                TCQ_TRY(tok_buf_puts(tmp, d->rep_to[r]));
                i += fl;
            } else {
                TCQ_TRY(tok_buf_putc(tmp, out->p[i++]));
            }
        }
        tok_buf sw = *out;
        *out = *tmp;
        *tmp = sw;
    }
    if (d->byte_fallback) {
        int b = byte_token(out->p, out->n);
        if (b >= 0) {
            out->n = 0;
            TCQ_TRY(tok_buf_putc(out, (char)b));
        }
    }
    return TCQ_OK;
}

tcq_status tok_build_decoded(tcq_tokenizer *t, const tok_decoder_desc *d)
{
    t->dec = calloc((size_t)t->n_vocab, sizeof *t->dec);
    t->dec_len = calloc((size_t)t->n_vocab, sizeof *t->dec_len);
    if (!t->dec || !t->dec_len) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
    tok_buf out = {0}, tmp = {0};
    tcq_status st = TCQ_OK;
    for (int32_t id = 0; id < t->n_vocab && st == TCQ_OK; id++) {
        if (!t->pieces[id]) continue;
        st = decode_piece(d, t->pieces[id], t->piece_len[id], &out, &tmp);
        if (st != TCQ_OK) break;
        t->dec[id] = malloc(out.n + 1);
        if (!t->dec[id]) { st = tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory"); break; }
        memcpy(t->dec[id], out.p, out.n + 1);
        t->dec_len[id] = (uint32_t)out.n;
    }
    tok_buf_free(&out);
    tok_buf_free(&tmp);
    t->strip_start = d->strip_start;
    t->strip_char = d->strip_char;
    return st;
}

tcq_status tcq_tokenizer_token_bytes(const tcq_tokenizer *tok, int32_t id, char *buf, size_t cap, size_t *len)
{
    if (!tok || id < 0 || id >= tok->n_vocab || !tok->dec[id])
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tokenizer: token id %d out of range [0, %d)", (int)id,
                        tok ? (int)tok->n_vocab : 0);
    size_t n = tok->dec_len[id];
    if (len) *len = n;
    if (buf) memcpy(buf, tok->dec[id], n < cap ? n : cap);
    if (n > cap) return tcq_fail(TCQ_ERR_RANGE, "tokenizer: token %d has %zu bytes, buffer %zu", (int)id, n, cap);
    return TCQ_OK;
}

/* Length of the valid UTF-8 character at s[0..n): > 0 valid, 0 incomplete but valid so far,
 * < 0 invalid (-k: drop k bytes as one U+FFFD, the maximal invalid subpart). */
static int utf8_check(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return -1;
    for (int k = 1; k < len; k++) {
        if ((size_t)k >= n) return 0;
        unsigned b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return -k;
    }
    return len;
}

/* Move the complete part of in[0..n) to out (invalid bytes -> U+FFFD); returns bytes consumed.
 * final: an incomplete tail is invalid too. */
static tcq_status utf8_repair(const char *in, size_t n, int final, tok_buf *out, size_t *used)
{
    size_t i = 0;
    while (i < n) {
        int r = utf8_check((const unsigned char *)in + i, n - i);
        if (r > 0) {
            TCQ_TRY(tok_buf_put(out, in + i, (size_t)r));
            i += (size_t)r;
        } else if (r == 0 && !final) {
            break;
        } else {
            TCQ_TRY(tok_buf_put(out, "\xEF\xBF\xBD", 3));
            i += r < 0 ? (size_t)-r : n - i;
        }
    }
    *used = i;
    return TCQ_OK;
}

struct tcq_detok {
    const tcq_tokenizer *tok;
    unsigned flags;
    int strip_left;
    char hold[8];               /* incomplete UTF-8 tail */
    size_t n_hold;
    tok_buf raw, out;
};

tcq_status tcq_detok_create(const tcq_tokenizer *tok, unsigned flags, tcq_detok **out)
{
    if (!tok || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_detok_create: NULL argument");
    tcq_detok *d = calloc(1, sizeof *d);
    if (!d) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
    d->tok = tok;
    d->flags = flags;
    d->strip_left = tok->strip_start;
    *out = d;
    return TCQ_OK;
}

void tcq_detok_free(tcq_detok *d)
{
    if (!d) return;
    tok_buf_free(&d->raw);
    tok_buf_free(&d->out);
    free(d);
}

void tcq_detok_reset(tcq_detok *d)
{
    d->strip_left = d->tok->strip_start;
    d->n_hold = 0;
}

static tcq_status detok_feed(tcq_detok *d, int32_t id, int final)
{
    const tcq_tokenizer *t = d->tok;
    d->raw.n = 0;
    TCQ_TRY(tok_buf_put(&d->raw, d->hold, d->n_hold));
    if (id >= 0) {
        if (id >= t->n_vocab || !t->dec[id])
            return tcq_fail(TCQ_ERR_INVALID_ARG, "tokenizer: token id %d out of range [0, %d)", (int)id, (int)t->n_vocab);
        if (!((d->flags & TCQ_DETOK_SKIP_SPECIAL) && t->special[id])) {
            const char *p = t->dec[id];
            size_t n = t->dec_len[id], k = 0;
            while (d->strip_left > 0 && k < n) {
                if (p[k] == t->strip_char) { k++; d->strip_left--; }
                else d->strip_left = 0;
            }
            if (k < n) d->strip_left = 0;
            TCQ_TRY(tok_buf_put(&d->raw, p + k, n - k));
        }
    }
    size_t used;
    d->out.n = 0;
    TCQ_TRY(tok_buf_put(&d->out, "", 0));
    TCQ_TRY(utf8_repair(d->raw.p, d->raw.n, final, &d->out, &used));
    d->n_hold = d->raw.n - used;   /* < 4: only an incomplete character is held */
    memcpy(d->hold, d->raw.p + used, d->n_hold);
    return TCQ_OK;
}

tcq_status tcq_detok_push(tcq_detok *d, int32_t id, const char **text, size_t *len)
{
    if (!d || id < 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_detok_push: bad argument (id %d)", (int)id);
    TCQ_TRY(detok_feed(d, id, 0));
    *text = d->out.p;
    *len = d->out.n;
    return TCQ_OK;
}

tcq_status tcq_detok_flush(tcq_detok *d, const char **text, size_t *len)
{
    if (!d) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_detok_flush: NULL argument");
    TCQ_TRY(detok_feed(d, -1, 1));
    *text = d->out.p;
    *len = d->out.n;
    return TCQ_OK;
}

tcq_status tcq_tokenizer_decode(const tcq_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags,
                                char **text, size_t *len)
{
    if (!tok || (!ids && n) || !text) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_tokenizer_decode: NULL argument");
    tcq_detok *d;
    TCQ_TRY(tcq_detok_create(tok, flags, &d));
    tok_buf all = {0};
    tcq_status st = tok_buf_put(&all, "", 0);
    const char *p;
    size_t k;
    for (size_t i = 0; i < n && st == TCQ_OK; i++)
        if ((st = tcq_detok_push(d, ids[i], &p, &k)) == TCQ_OK) st = tok_buf_put(&all, p, k);
    if (st == TCQ_OK && (st = tcq_detok_flush(d, &p, &k)) == TCQ_OK) st = tok_buf_put(&all, p, k);
    tcq_detok_free(d);
    if (st != TCQ_OK) {
        tok_buf_free(&all);
        return st;
    }
    *text = all.p;
    if (len) *len = all.n;
    return TCQ_OK;
}
