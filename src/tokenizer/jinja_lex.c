/* Jinja subset: the template lexer (text / {{ }} / {% %} / {# #} with -, +, trim_blocks and
 * lstrip_blocks as transformers sets them) and the expression tokenizer. */
#include "tokenizer/jinja.h"

#include <stdio.h>
#include <stdlib.h>

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* End of a tag body: the closing delimiter outside string literals and, for "}}", outside the
 * braces of dict literals ({{ {'a': {'b': 1}} }}). */
static const char *tag_end(const char *p, char close)
{
    int depth = 0;
    for (char q = 0; *p; p++) {
        if (q) {
            if (*p == '\\' && p[1]) p++;
            else if (*p == q) q = 0;
        } else if (*p == '\'' || *p == '"') {
            q = *p;
        } else if (close == '}' && *p == '{') {
            depth++;
        } else if (*p == close && p[1] == '}' && depth == 0) {
            return p;
        } else if (close == '}' && *p == '}') {
            depth--;
        }
    }
    return NULL;
}

static int count_lines(const char *a, const char *b)
{
    int n = 0;
    for (; a < b; a++) n += *a == '\n';
    return n;
}

static void add_chunk(jctx *c, chunk **ch, int *n, int *cap, chunk x)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        chunk *p = ja_alloc(c, (size_t)nc * sizeof *p);
        if (*n) memcpy(p, *ch, (size_t)*n * sizeof *p);
        *ch = p;
        *cap = nc;
    }
    (*ch)[(*n)++] = x;
}

/* As Jinja does before lexing: every \r\n and \r becomes \n, and one trailing newline goes
 * (keep_trailing_newline is off). */
static const char *normalize_newlines(jctx *c, const char *src)
{
    size_t n = strlen(src), k = 0;
    char *o = ja_alloc(c, n + 1);
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            o[k++] = '\n';
            if (src[i + 1] == '\n') i++;
        } else {
            o[k++] = src[i];
        }
    }
    if (k && o[k - 1] == '\n') k--;
    o[k] = 0;
    return o;
}

chunk *jinja_lex_template(jctx *c, const char *src, int *nout)
{
    src = normalize_newlines(c, src);
    chunk *ch = NULL;
    int n = 0, cap = 0, line = 1;
    const char *p = src, *text = src;
    int strip_lead = 0;   /* 0 none, 1 one newline (trim_blocks), 2 all whitespace ("-") */
    for (;;) {
        const char *o = p;
        while (*o && !(o[0] == '{' && (o[1] == '{' || o[1] == '%' || o[1] == '#'))) o++;
        const char *ts = text, *te = o;
        char kind = *o ? o[1] : 0;
        char mod = *o ? o[2] : 0;
        if (strip_lead == 2) while (ts < te && is_ws(*ts)) ts++;
        else if (strip_lead == 1 && ts < te && *ts == '\n') ts++;
        if (kind && mod == '-') {
            while (te > ts && is_ws(te[-1])) te--;
        } else if ((kind == '%' || kind == '#') && mod != '+') {
            /* lstrip_blocks: blanks between the start of the line and a block tag go */
            const char *b = te;
            while (b > ts && (b[-1] == ' ' || b[-1] == '\t')) b--;
            if (b == src || b[-1] == '\n') te = b;
        }
        if (te > ts) add_chunk(c, &ch, &n, &cap, (chunk){C_TEXT, ts, (size_t)(te - ts), line + count_lines(text, ts)});
        line += count_lines(text, o);
        if (!kind) break;
        char close = kind == '{' ? '}' : kind;
        const char *body = o + 2 + (mod == '-' || mod == '+');
        const char *e;
        if (kind == '#') {
            e = strstr(body, "#}");
        } else {
            e = tag_end(body, close);
        }
        if (!e) jfail(c, line, "unclosed %c%c tag", '{', kind);
        const char *be = e;
        int dash = e > body && e[-1] == '-', plus = e > body && e[-1] == '+';
        if (dash || plus) be--;
        if (kind != '#') {
            /* {% raw %} ... {% endraw %}: the text between goes out as it is */
            const char *a = body, *z = be;
            while (a < z && is_ws(*a)) a++;
            while (z > a && is_ws(z[-1])) z--;
            if (kind == '%' && z - a == 3 && memcmp(a, "raw", 3) == 0) {
                const char *r = e + 2, *q = r;
                for (;; q++) {
                    q = strstr(q, "{%");
                    if (!q) jfail(c, line, "raw without endraw");
                    const char *k = q + 2 + (q[2] == '-' || q[2] == '+');
                    while (is_ws(*k)) k++;
                    if (strncmp(k, "endraw", 6) == 0) break;
                }
                if (q > r) add_chunk(c, &ch, &n, &cap, (chunk){C_TEXT, r, (size_t)(q - r), line});
                e = tag_end(q + 2, '%');
                if (!e) jfail(c, line, "unclosed endraw");
                line += count_lines(o, e);
                p = text = e + 2;
                strip_lead = 1;
                continue;
            }
            add_chunk(c, &ch, &n, &cap, (chunk){kind == '{' ? C_OUT : C_STMT, body, (size_t)(be - body), line});
        }
        line += count_lines(o, e);
        strip_lead = dash ? 2 : (kind != '{' && !plus) ? 1 : 0;
        p = text = e + 2;
    }
    *nout = n;
    return ch;
}

/* ---- expression tokens ---- */

void jinja_lex_expr(parser *ps, const chunk *k)
{
    jctx *c = ps->c;
    int cap = 16;
    ps->tk = ja_alloc(c, (size_t)cap * sizeof *ps->tk);
    ps->ntk = 0;
    ps->ti = 0;
    ps->line = k->line;
    const char *p = k->p, *end = k->p + k->n;
    for (;;) {
        while (p < end && is_ws(*p)) p++;
        if (ps->ntk + 1 >= cap) {
            tok *nt = ja_alloc(c, (size_t)cap * 2 * sizeof *nt);
            memcpy(nt, ps->tk, (size_t)ps->ntk * sizeof *nt);
            ps->tk = nt;
            cap *= 2;
        }
        tok *t = &ps->tk[ps->ntk++];
        memset(t, 0, sizeof *t);
        t->p = p;
        if (p >= end) { t->k = K_EOF; break; }
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_') {
            while (p < end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || (*p >= '0' && *p <= '9'))) p++;
            t->k = K_NAME;
        } else if (*p >= '0' && *p <= '9') {
            const char *q = p;
            while (q < end && ((*q >= '0' && *q <= '9') || *q == '_')) q++;
            int fl = q + 1 < end && *q == '.' && q[1] >= '0' && q[1] <= '9';
            if (fl || (q < end && (*q == 'e' || *q == 'E'))) {
                char *e2;
                t->k = K_FLOAT;
                t->f = strtod(p, &e2);
                q = e2;
            } else {
                t->k = K_INT;
                t->i = strtoll(p, NULL, 10);
            }
            p = q;
        } else if (*p == '\'' || *p == '"') {
            char qc = *p++;
            tok_buf b = {0};
            while (p < end && *p != qc) {
                char ch = *p++;
                if (ch == '\\' && p < end) {
                    char e3 = *p++;
                    switch (e3) {
                    case 'n': ch = '\n'; break;
                    case 't': ch = '\t'; break;
                    case 'r': ch = '\r'; break;
                    case '0': ch = 0; break;
                    case 'u': case 'x': case 'U': {
                        int nd = e3 == 'x' ? 2 : e3 == 'u' ? 4 : 8;
                        char hex[9] = {0};
                        for (int i = 0; i < nd && p < end; i++) hex[i] = *p++;
                        char enc[4];
                        tok_buf_put(&b, enc, tok_utf8_put(enc, (uint32_t)strtoul(hex, NULL, 16)));
                        continue;
                    }
                    default: ch = e3 == '\\' || e3 == '\'' || e3 == '"' ? e3 : (tok_buf_putc(&b, '\\'), e3);
                    }
                }
                tok_buf_putc(&b, ch);
            }
            if (p >= end) {
                tok_buf_free(&b);
                jfail(c, ps->line, "unterminated string");
            }
            p++;
            t->k = K_STR;
            t->s = jv_str(c, b.p ? b.p : "", b.n);
            tok_buf_free(&b);
        } else {
            static const char *two[] = {"==", "!=", "<=", ">=", "//", "**"};
            t->k = K_OP;
            size_t len = 1;
            for (int i = 0; i < 6; i++)
                if (p + 1 < end && p[0] == two[i][0] && p[1] == two[i][1]) len = 2;
            if (len == 1 && !strchr("+-*/%~|.,:()[]{}<>=", *p)) jfail(c, ps->line, "unexpected character '%c'", *p);
            p += len;
        }
        t->n = (size_t)(p - t->p);
    }
}

