/* Jinja subset: the arena, errors, values and their Python-compatible str() and json.dumps(). */
#include "tokenizer/jinja.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct jblock { struct jblock *next; size_t used, cap; max_align_t data[]; };

void *ja_alloc(jctx *c, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct jblock *b = c->arena;
    if (!b || b->used + n > b->cap) {
        size_t cap = n > 65536 ? n : 65536;
        if (cap > JINJA_MAX_ARENA - c->arena_bytes || c->arena_bytes > JINJA_MAX_ARENA)
            jfail(c, 0, "the template's values need more than %zu MiB", JINJA_MAX_ARENA >> 20);
        c->arena_bytes += cap;
        b = malloc(sizeof *b + cap);
        if (!b) {
            c->status = tcq_fail(TCQ_ERR_NOMEM, "chat template: out of memory");
            longjmp(c->jb, 1);
        }
        b->next = c->arena;
        b->used = 0;
        b->cap = cap;
        c->arena = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void ja_free_all(jctx *c)
{
    while (c->arena) {
        struct jblock *n = c->arena->next;
        free(c->arena);
        c->arena = n;
    }
}

void jfail(jctx *c, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->status = tcq_fail(TCQ_ERR_FORMAT, "chat template line %d: %s", line, msg);
    longjmp(c->jb, 1);
}

static void nest_in(jctx *c)
{
    if (++c->nest > JINJA_MAX_NEST) jfail(c, 0, "a value nested deeper than %d levels", JINJA_MAX_NEST);
}

jv jv_str(jctx *c, const char *p, size_t n)
{
    char *s = ja_alloc(c, n + 1);
    if (n) memcpy(s, p, n);
    s[n] = 0;
    jv v = {JV_STR, 0, {0}};
    v.u.s.p = s;
    v.u.s.n = n;
    return v;
}
jv jv_int(int64_t i) { jv v = {JV_INT, 0, {0}}; v.u.i = i; return v; }
jv jv_float(double f) { jv v = {JV_FLOAT, 0, {0}}; v.u.f = f; return v; }
jv jv_bool(int b) { jv v = {JV_BOOL, 0, {0}}; v.u.b = !!b; return v; }
jv jv_none(void) { jv v = {JV_NONE, 0, {0}}; return v; }
jv jv_undef(void) { jv v = {JV_UNDEF, 0, {0}}; return v; }

jv jv_list(jctx *c)
{
    jv v = {JV_LIST, 0, {0}};
    v.u.l = ja_alloc(c, sizeof *v.u.l);
    memset(v.u.l, 0, sizeof *v.u.l);
    return v;
}

jv jv_dict(jctx *c)
{
    jv v = {JV_DICT, 0, {0}};
    v.u.d = ja_alloc(c, sizeof *v.u.d);
    memset(v.u.d, 0, sizeof *v.u.d);
    return v;
}

jv jv_func(jctx *c, const char *name, jbuiltin fn, jv self)
{
    jv v = {JV_FUNC, 0, {0}};
    v.u.fn = ja_alloc(c, sizeof *v.u.fn);
    memset(v.u.fn, 0, sizeof *v.u.fn);
    v.u.fn->name = name;
    v.u.fn->fn = fn;
    v.u.fn->self = self;
    return v;
}

void jl_push(jctx *c, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jv *p = ja_alloc(c, cap * sizeof *p);
        if (l->n) memcpy(p, l->v, l->n * sizeof *p);
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

void jd_set(jctx *c, jdict *d, jv k, jv v)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], k)) {
            d->v[i] = v;
            return;
        }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jv *nk = ja_alloc(c, cap * sizeof *nk), *nv = ja_alloc(c, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

int jd_get(const jdict *d, const char *k, size_t n, jv *out)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s.n == n && memcmp(d->k[i].u.s.p, k, n) == 0) {
            *out = d->v[i];
            return 1;
        }
    return 0;
}

int jv_truthy(jv v)
{
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s.n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    case JV_FUNC: return 1;
    }
    return 0;
}

static int is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b; }

static int equal_at(jv a, jv b, int depth);

int jv_equal(jv a, jv b) { return equal_at(a, b, 0); }

/* Deeper than JINJA_MAX_NEST, values compare unequal rather than overflow the stack. */
static int equal_at(jv a, jv b, int depth)
{
    if (depth > JINJA_MAX_NEST) return 0;
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return (a.t == JV_INT ? a.u.i : a.u.b) == (b.t == JV_INT ? b.u.i : b.u.b);
        return num(a) == num(b);
    }
    if (a.t != b.t) return (a.t == JV_UNDEF || a.t == JV_NONE) && a.t == b.t;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_at(a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            int found = 0;
            for (size_t j = 0; j < b.u.d->n && !found; j++)
                found = equal_at(a.u.d->k[i], b.u.d->k[j], depth + 1) && equal_at(a.u.d->v[i], b.u.d->v[j], depth + 1);
            if (!found) return 0;
        }
        return 1;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return 0;
    }
}

int jv_compare(jctx *c, int line, jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        double x = num(a), y = num(b);
        if (a.t == JV_INT && b.t == JV_INT) return a.u.i < b.u.i ? -1 : a.u.i > b.u.i;
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int r = memcmp(a.u.s.p, b.u.s.p, n);   /* UTF-8 byte order is code point order */
        return r ? (r < 0 ? -1 : 1) : (a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n);
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        nest_in(c);
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            int r = jv_compare(c, line, a.u.l->v[i], b.u.l->v[i]);
            if (r) { c->nest--; return r; }
        }
        c->nest--;
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    jfail(c, line, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
}

const char *jv_type_name(jv v)
{
    static const char *names[] = {"undefined", "none", "bool", "int", "float", "str", "list", "dict", "function"};
    return names[v.t];
}

jv jv_escape(jctx *c, jstr s)
{
    tok_buf b = {0};
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        if (ch == '&') tok_buf_puts(&b, "&amp;");
        else if (ch == '<') tok_buf_puts(&b, "&lt;");
        else if (ch == '>') tok_buf_puts(&b, "&gt;");
        else if (ch == '"') tok_buf_puts(&b, "&#34;");
        else if (ch == '\'') tok_buf_puts(&b, "&#39;");
        else tok_buf_putc(&b, ch);
    }
    jv r = jv_str(c, b.p ? b.p : "", b.n);
    tok_buf_free(&b);
    r.safe = 1;
    return r;
}

size_t ju_len(jstr s)
{
    size_t n = 0;
    for (size_t i = 0; i < s.n; i++) n += ((unsigned char)s.p[i] & 0xC0) != 0x80;
    return n;
}

/* Python's repr(float): the shortest digits that read back the same, positional for decimal
 * exponents in [-4, 16), else scientific. */
static void float_repr(double f, tok_buf *b)
{
    char s[64];
    if (isnan(f)) { tok_buf_puts(b, "nan"); return; }
    if (isinf(f)) { tok_buf_puts(b, f < 0 ? "-inf" : "inf"); return; }
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(s, sizeof s, "%.*e", prec - 1, f);
        if (strtod(s, NULL) == f) break;
    }
    snprintf(s, sizeof s, "%.*e", prec - 1, f);
    int x = atoi(strchr(s, 'e') + 1);
    if (x >= -4 && x < 16) {
        int dec = prec - 1 - x;
        snprintf(s, sizeof s, "%.*f", dec > 0 ? dec : 0, f);
        if (!strchr(s, '.')) strcat(s, ".0");
    }
    tok_buf_puts(b, s);
}

static void str_repr(jstr s, tok_buf *b)
{
    int has_sq = memchr(s.p, '\'', s.n) != NULL, has_dq = memchr(s.p, '"', s.n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    tok_buf_putc(b, q);
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ch == '\\') tok_buf_puts(b, "\\\\");
        else if (ch == (unsigned char)q) { tok_buf_putc(b, '\\'); tok_buf_putc(b, q); }
        else if (ch == '\n') tok_buf_puts(b, "\\n");
        else if (ch == '\t') tok_buf_puts(b, "\\t");
        else if (ch == '\r') tok_buf_puts(b, "\\r");
        else if (ch < 0x20 || ch == 0x7f) {
            char e[8];
            snprintf(e, sizeof e, "\\x%02x", ch);
            tok_buf_puts(b, e);
        } else tok_buf_putc(b, (char)ch);
    }
    tok_buf_putc(b, q);
}

void jv_to_str(jctx *c, jv v, tok_buf *b, int repr)
{
    char s[32];
    if (v.t == JV_LIST || v.t == JV_DICT) nest_in(c);
    switch (v.t) {
    case JV_UNDEF: break;
    case JV_NONE: tok_buf_puts(b, "None"); break;
    case JV_BOOL: tok_buf_puts(b, v.u.b ? "True" : "False"); break;
    case JV_INT: snprintf(s, sizeof s, "%lld", (long long)v.u.i); tok_buf_puts(b, s); break;
    case JV_FLOAT: float_repr(v.u.f, b); break;
    case JV_STR:
        if (repr) str_repr(v.u.s, b);
        else tok_buf_put(b, v.u.s.p, v.u.s.n);
        break;
    case JV_LIST:
        tok_buf_putc(b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) tok_buf_puts(b, ", ");
            jv_to_str(c, v.u.l->v[i], b, 1);
        }
        tok_buf_putc(b, ']');
        break;
    case JV_DICT:
        tok_buf_putc(b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) tok_buf_puts(b, ", ");
            jv_to_str(c, v.u.d->k[i], b, 1);
            tok_buf_puts(b, ": ");
            jv_to_str(c, v.u.d->v[i], b, 1);
        }
        tok_buf_putc(b, '}');
        break;
    case JV_FUNC: tok_buf_puts(b, "<function "); tok_buf_puts(b, v.u.fn->name); tok_buf_putc(b, '>'); break;
    }
    if (v.t == JV_LIST || v.t == JV_DICT) c->nest--;
}

jv jv_stringify(jctx *c, jv v)
{
    if (v.t == JV_STR) return v;
    tok_buf b = {0};
    jv_to_str(c, v, &b, 0);
    jv r = jv_str(c, b.p ? b.p : "", b.n);
    tok_buf_free(&b);
    return r;
}

static void json_string(jstr s, tok_buf *b, int ensure_ascii)
{
    tok_buf_putc(b, '"');
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ensure_ascii && ch >= 0x80) {   /* \uXXXX, surrogate pairs above U+FFFF, as Python */
            int len = tok_utf8_len(ch);
            uint32_t cp = len > 1 && i + (size_t)len <= s.n ? ch & (0x7Fu >> len) : 0xFFFD;
            for (int k = 1; k < len && i + (size_t)len <= s.n; k++) cp = (cp << 6) | ((unsigned char)s.p[i + k] & 63u);
            char e[16];
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                snprintf(e, sizeof e, "\\u%04x", cp);
            }
            tok_buf_puts(b, e);
            i += (size_t)(len > 1 ? len : 1) - 1;
            continue;
        }
        switch (ch) {
        case '"': tok_buf_puts(b, "\\\""); break;
        case '\\': tok_buf_puts(b, "\\\\"); break;
        case '\n': tok_buf_puts(b, "\\n"); break;
        case '\r': tok_buf_puts(b, "\\r"); break;
        case '\t': tok_buf_puts(b, "\\t"); break;
        case '\b': tok_buf_puts(b, "\\b"); break;
        case '\f': tok_buf_puts(b, "\\f"); break;
        default:
            if (ch < 0x20 || ch == 0x7f) {
                char e[8];
                snprintf(e, sizeof e, "\\u%04x", ch);
                tok_buf_puts(b, e);
            } else tok_buf_putc(b, (char)ch);
        }
    }
    tok_buf_putc(b, '"');
}

static void json_newline(tok_buf *b, int indent, int level)
{
    tok_buf_putc(b, '\n');
    for (int i = 0; i < indent * level; i++) tok_buf_putc(b, ' ');
}

void jv_to_json(jctx *c, int line, jv v, tok_buf *b, const jjson_opts *o, int level)
{
    int indent = o->indent;
    /* Python's defaults: ", " and ": ", or "," and ": " with an indent */
    const char *isep = o->item_sep ? o->item_sep : indent >= 0 ? "," : ", ", *ksep = o->key_sep ? o->key_sep : ": ";
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: tok_buf_puts(b, "null"); return;
    case JV_BOOL: tok_buf_puts(b, v.u.b ? "true" : "false"); return;
    case JV_INT: case JV_FLOAT:
        if (v.t == JV_FLOAT && isnan(v.u.f)) tok_buf_puts(b, "NaN");
        else if (v.t == JV_FLOAT && isinf(v.u.f)) tok_buf_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else jv_to_str(c, v, b, 0);
        return;
    case JV_STR: json_string(v.u.s, b, o->ensure_ascii); return;
    case JV_LIST:
        if (!v.u.l->n) { tok_buf_puts(b, "[]"); return; }
        nest_in(c);
        tok_buf_putc(b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) tok_buf_puts(b, isep);
            if (indent >= 0) json_newline(b, indent, level + 1);
            jv_to_json(c, line, v.u.l->v[i], b, o, level + 1);
        }
        if (indent >= 0) json_newline(b, indent, level);
        tok_buf_putc(b, ']');
        c->nest--;
        return;
    case JV_DICT: {
        jdict *d = v.u.d;
        if (!d->n) { tok_buf_puts(b, "{}"); return; }
        nest_in(c);
        size_t *ord = ja_alloc(c, d->n * sizeof *ord);
        for (size_t i = 0; i < d->n; i++) ord[i] = i;
        if (o->sort_keys)   /* insertion sort: dicts of a template are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && jv_compare(c, line, d->k[ord[j - 1]], d->k[ord[j]]) > 0; j--) {
                    size_t t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t;
                }
        tok_buf_putc(b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) tok_buf_puts(b, isep);
            if (indent >= 0) json_newline(b, indent, level + 1);
            jv k = d->k[ord[i]];
            if (k.t == JV_STR) json_string(k.u.s, b, o->ensure_ascii);
            else {   /* Python writes non-string keys as strings */
                jjson_opts plain = {-1, 0, 0, NULL, NULL};
                tok_buf_putc(b, '"');
                jv_to_json(c, line, k, b, &plain, 0);
                tok_buf_putc(b, '"');
            }
            tok_buf_puts(b, ksep);
            jv_to_json(c, line, d->v[ord[i]], b, o, level + 1);
        }
        if (indent >= 0) json_newline(b, indent, level);
        tok_buf_putc(b, '}');
        c->nest--;
        return;
    }
    case JV_FUNC: jfail(c, line, "tojson: a function is not JSON serializable");
    }
}
