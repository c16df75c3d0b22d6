/* Normalizers and pre-tokenizers of tokenizer.json, applied to one segment of text. */
#include "tokenizer/tok_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static tcq_status replace_all(const char *s, size_t len, const char *from, const char *to, tok_buf *out)
{
    size_t fl = strlen(from), tl = strlen(to);
    out->n = 0;
    TCQ_TRY(tok_buf_put(out, "", 0));
    for (size_t i = 0; i < len;) {
        if (fl && i + fl <= len && memcmp(s + i, from, fl) == 0) {
            TCQ_TRY(tok_buf_put(out, to, tl));
            i += fl;
        } else {
            TCQ_TRY(tok_buf_put(out, s + i, 1));
            i++;
        }
    }
    return TCQ_OK;
}

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static tcq_status norm_step(const tok_norm *n, const char *s, size_t len, tok_buf *out)
{
    out->n = 0;
    TCQ_TRY(tok_buf_put(out, "", 0));
    switch (n->kind) {
    case NORM_NFC: case NORM_NFD: case NORM_NFKC: case NORM_NFKD: {
        int opt = UTF8PROC_STABLE;
        opt |= (n->kind == NORM_NFC || n->kind == NORM_NFKC) ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
        if (n->kind == NORM_NFKC || n->kind == NORM_NFKD) opt |= UTF8PROC_COMPAT;
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t r = len ? utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst,
                                                (utf8proc_option_t)opt) : 0;
        /* Invalid UTF-8 cannot be normalized: it goes on unchanged (byte-level BPE still
         * encodes every byte). */
        tcq_status st = r > 0 ? tok_buf_put(out, dst, (size_t)r) : tok_buf_put(out, s, len);
        free(dst);
        return st;
    }
    case NORM_LOWER:
        for (size_t i = 0; i < len;) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
            if (k <= 0) {
                TCQ_TRY(tok_buf_put(out, s + i, 1));
                i++;
                continue;
            }
            char enc[4];
            TCQ_TRY(tok_buf_put(out, enc, tok_utf8_put(enc, (uint32_t)utf8proc_tolower(cp))));
            i += (size_t)k;
        }
        return TCQ_OK;
    case NORM_PREPEND:
        if (len) TCQ_TRY(tok_buf_puts(out, n->a));
        return tok_buf_put(out, s, len);
    case NORM_REPLACE:
        return replace_all(s, len, n->a, n->b, out);
    case NORM_STRIP: {
        size_t a = 0, b = len;
        if (n->left) while (a < b && is_ws((unsigned char)s[a])) a++;
        if (n->right) while (b > a && is_ws((unsigned char)s[b - 1])) b--;
        return tok_buf_put(out, s + a, b - a);
    }
    }
    return tcq_fail(TCQ_ERR_INTERNAL, "tokenizer: unknown normalizer step");
}

tcq_status tok_normalize(const tcq_tokenizer *t, const char *s, size_t len, tok_buf *out)
{
    out->n = 0;
    TCQ_TRY(tok_buf_put(out, s, len));
    tok_buf tmp = {0};
    for (int i = 0; i < t->n_norms; i++) {
        tcq_status st = norm_step(&t->norms[i], out->p, out->n, &tmp);
        if (st != TCQ_OK) {
            tok_buf_free(&tmp);
            return st;
        }
        tok_buf sw = *out;
        *out = tmp;
        tmp = sw;
    }
    tok_buf_free(&tmp);
    return TCQ_OK;
}

/* tokenizers runs its patterns through Oniguruma, whose Unicode \w is
 * Letter|Mark|Number|Connector_Punctuation; PCRE2's (UCP) is letters, numbers and "_", so a
 * combining mark would end a word.  Rewrite \w -> [\p{L}\p{M}\p{N}\p{Pc}] and \W -> [^...] (in a
 * class \w expands in place, \W stays).  \s needs nothing: both match White_Space, U+0085 too.
 * Caller frees the result. */
static char *oniguruma_classes(const char *pat)
{
    size_t n = strlen(pat);
    char *o = malloc(n * 28 + 1), *q = o;   /* the longest expansion: 2 bytes to 26 */
    if (!o) return NULL;
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        if (pat[i] == '\\' && i + 1 < n) {
            char e = pat[++i];
            if (e == 'w') q += sprintf(q, in_class ? "\\p{L}\\p{M}\\p{N}\\p{Pc}" : "[\\p{L}\\p{M}\\p{N}\\p{Pc}]");
            else if (e == 'W' && !in_class) q += sprintf(q, "[^\\p{L}\\p{M}\\p{N}\\p{Pc}]");
            else { *q++ = '\\'; *q++ = e; }
            continue;
        }
        if (pat[i] == '[' && !in_class) {
            in_class = 1;
            *q++ = pat[i];
            if (pat[i + 1] == '^') *q++ = pat[++i];
            if (pat[i + 1] == ']') *q++ = pat[++i];   /* a leading ] is literal */
            continue;
        }
        if (pat[i] == ']' && in_class) in_class = 0;
        *q++ = pat[i];
    }
    *q = 0;
    return o;
}

tcq_status tok_pre_compile(tok_pre *p, const char *pattern, int literal, const char *where)
{
    int err;
    PCRE2_SIZE off;
    char *rewritten = NULL;
    if (!literal) {
        if (!(rewritten = oniguruma_classes(pattern))) return tcq_fail(TCQ_ERR_NOMEM, "%s: out of memory", where);
        pattern = rewritten;
    }
    uint32_t opt = literal ? PCRE2_LITERAL : (PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opt, &err, &off, NULL);
    free(rewritten);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return tcq_fail(TCQ_ERR_FORMAT, "%s: regex at offset %zu: %s", where, (size_t)off, (char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);   /* optional: the interpreter is the fallback */
    p->re = re;
    return TCQ_OK;
}

void tok_pre_free(tok_pre *p)
{
    if (p->re) pcre2_code_free((pcre2_code *)p->re);
    p->re = NULL;
}

/* Segments of one piece: regex matches and the gaps between them, in order. */
typedef struct seg { size_t a, b; int m; } seg;

static tcq_status split_piece(const tok_pre *p, const char *s, size_t len, pcre2_match_data *md,
                              tok_pieces *out)
{
    seg *sg = NULL;
    size_t n = 0, cap = 0, pos = 0;
    tcq_status st = TCQ_OK;
#define PUSH_SEG(A, B, M)                                                                          \
    do {                                                                                           \
        if (n == cap) {                                                                            \
            cap = cap ? cap * 2 : 16;                                                              \
            seg *ns_ = realloc(sg, cap * sizeof *sg);                                              \
            if (!ns_) { st = tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory"); goto done; }     \
            sg = ns_;                                                                              \
        }                                                                                          \
        sg[n].a = (A); sg[n].b = (B); sg[n].m = (M); n++;                                          \
    } while (0)
    size_t last = 0;   /* end of the last segment pushed */
    while (pos < len) {
        int rc = pcre2_match((const pcre2_code *)p->re, (PCRE2_SPTR)s, len, pos, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            st = tcq_fail(TCQ_ERR_INTERNAL, "tokenizer: regex match failed (%d)", rc);
            goto done;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (b == a) {   /* empty match: no split here; move on by one character */
            pos = a + (size_t)tok_utf8_len((unsigned char)s[a]);
            continue;
        }
        if (a > last) PUSH_SEG(last, a, 0);
        PUSH_SEG(a, b, 1);
        pos = last = b;
    }
    if (last < len) PUSH_SEG(last, len, 0);
    if (p->invert)
        for (size_t i = 0; i < n; i++) sg[i].m = !sg[i].m;
    /* Combine as tokenizers' SplitDelimiterBehavior does. */
    size_t k = 0;
    int prev = 0;
    switch (p->behavior) {
    case SPLIT_ISOLATED: k = n; break;
    case SPLIT_REMOVED:
        for (size_t i = 0; i < n; i++) if (!sg[i].m) sg[k++] = sg[i];
        break;
    case SPLIT_MERGED_PREV:
        for (size_t i = 0; i < n; i++) {
            if (sg[i].m && !prev && k) sg[k - 1].b = sg[i].b;
            else sg[k++] = sg[i];
            prev = sg[i].m;
        }
        break;
    case SPLIT_MERGED_NEXT:
        /* right to left: a delimiter joins the segment after it */
        for (size_t i = n; i-- > 0;) {
            if (sg[i].m && !prev && k) sg[n - k].a = sg[i].a;
            else { sg[n - 1 - k] = sg[i]; k++; }
            prev = sg[i].m;
        }
        memmove(sg, sg + n - k, k * sizeof *sg);
        break;
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            if (k && sg[i].m == prev) sg[k - 1].b = sg[i].b;
            else sg[k++] = sg[i];
            prev = sg[i].m;
        }
        break;
    }
    for (size_t i = 0; i < k; i++)
        if (sg[i].b > sg[i].a && (st = tok_pieces_add(out, s + sg[i].a, sg[i].b - sg[i].a)) != TCQ_OK) break;
done:
    free(sg);
    return st;
#undef PUSH_SEG
}

static tcq_status byte_map(const char *s, size_t len, tok_pieces *out)
{
    tok_buf b = {0};
    tcq_status st = TCQ_OK;
    for (size_t i = 0; i < len && st == TCQ_OK; i++) {
        char enc[4];
        st = tok_buf_put(&b, enc, tok_utf8_put(enc, tok_byte_to_cp((uint8_t)s[i])));
    }
    if (st == TCQ_OK) st = tok_pieces_add(out, b.p ? b.p : "", b.n);
    tok_buf_free(&b);
    return st;
}

static tcq_status pre_step(const tok_pre *p, const char *s, size_t len, int first, tok_pieces *out)
{
    switch (p->kind) {
    case PRE_SPLIT: case PRE_DIGITS: case PRE_WSPLIT: {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern((const pcre2_code *)p->re, NULL);
        if (!md) return tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
        tcq_status st = split_piece(p, s, len, md, out);
        pcre2_match_data_free(md);
        return st;
    }
    case PRE_BYTELEVEL: {
        tok_buf pre = {0};
        tcq_status st = TCQ_OK;
        if (p->add_prefix_space && (len == 0 || s[0] != ' ')) {
            if ((st = tok_buf_putc(&pre, ' ')) == TCQ_OK) st = tok_buf_put(&pre, s, len);
            s = pre.p;
            len = pre.n;
        }
        if (st == TCQ_OK) {
            if (p->re) {
                tok_pieces parts = {0};
                pcre2_match_data *md = pcre2_match_data_create_from_pattern((const pcre2_code *)p->re, NULL);
                st = md ? split_piece(p, s, len, md, &parts) : tcq_fail(TCQ_ERR_NOMEM, "tokenizer: out of memory");
                if (md) pcre2_match_data_free(md);
                for (size_t i = 0; st == TCQ_OK && i < parts.n; i++)
                    st = byte_map(parts.text.p + parts.start[i], parts.len[i], out);
                tok_pieces_free(&parts);
            } else {
                st = byte_map(s, len, out);
            }
        }
        tok_buf_free(&pre);
        return st;
    }
    case PRE_METASPACE: {
        tok_buf b = {0};
        size_t rl = strlen(p->repl);
        tcq_status st = TCQ_OK;
        if ((p->prepend == 2 || (p->prepend == 1 && first)) && !(len >= rl && memcmp(s, p->repl, rl) == 0))
            st = tok_buf_puts(&b, p->repl);
        for (size_t i = 0; i < len && st == TCQ_OK; i++)
            st = s[i] == ' ' ? tok_buf_puts(&b, p->repl) : tok_buf_put(&b, s + i, 1);
        if (st == TCQ_OK && !p->split) st = tok_pieces_add(out, b.p ? b.p : "", b.n);
        if (st == TCQ_OK && p->split) {
            /* MergedWithNext on the replacement: every word keeps its leading marker */
            size_t a = 0;
            for (size_t i = 1; i <= b.n && st == TCQ_OK; i++)
                if (i == b.n || (i + rl <= b.n && memcmp(b.p + i, p->repl, rl) == 0)) {
                    if (i > a) st = tok_pieces_add(out, b.p + a, i - a);
                    a = i;
                }
        }
        tok_buf_free(&b);
        return st;
    }
    }
    return tcq_fail(TCQ_ERR_INTERNAL, "tokenizer: unknown pre-tokenizer step");
}

tcq_status tok_pretokenize(const tcq_tokenizer *t, const char *s, size_t len, int first, tok_pieces *out)
{
    if (t->n_pres == 0) return len ? tok_pieces_add(out, s, len) : TCQ_OK;
    tok_pieces cur = {0}, nxt = {0};
    tcq_status st = tok_pieces_add(&cur, s, len);
    for (int k = 0; k < t->n_pres && st == TCQ_OK; k++) {
        tok_pieces *dst = (k == t->n_pres - 1) ? out : &nxt;
        for (size_t i = 0; i < cur.n && st == TCQ_OK; i++)
            st = pre_step(&t->pres[k], cur.text.p + cur.start[i], cur.len[i], first && i == 0, dst);
        tok_pieces_free(&cur);
        cur = nxt;
        memset(&nxt, 0, sizeof nxt);
    }
    tok_pieces_free(&cur);
    tok_pieces_free(&nxt);
    return st;
}
