/* Jinja subset: Python string and dict methods, iteration, indexing and slicing. */
#include "tokenizer/jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <utf8proc.h>

jv jarg(const jargs *a, int i, const char *name, jv def)
{
    for (int k = 0; name && k < a->nkw; k++)
        if (!strcmp(a->kwn[k], name)) return a->kwv[k];
    return i >= 0 && i < a->npos ? a->pos[i] : def;
}

static jstr need_str(jctx *c, int line, jv v, const char *what)
{
    if (v.t != JV_STR) jfail(c, line, "%s needs a string, got %s", what, jv_type_name(v));
    return v.u.s;
}

/* Byte offsets of the code points of s: off[i] for i in [0, n], off[n] = s.n. */
static size_t *cp_offsets(jctx *c, jstr s, size_t *n)
{
    size_t k = ju_len(s), j = 0;
    size_t *off = ja_alloc(c, (k + 1) * sizeof *off);
    for (size_t i = 0; i < s.n; i++)
        if (((unsigned char)s.p[i] & 0xC0) != 0x80) off[j++] = i;
    off[k] = s.n;
    *n = k;
    return off;
}

jlist *jinja_iter(jctx *c, int line, jv v)
{
    jv l = jv_list(c);
    if (v.t == JV_LIST) return v.u.l;
    if (v.t == JV_DICT) {
        for (size_t i = 0; i < v.u.d->n; i++) jl_push(c, l.u.l, v.u.d->k[i]);
    } else if (v.t == JV_STR) {
        size_t n, *off = cp_offsets(c, v.u.s, &n);
        for (size_t i = 0; i < n; i++) jl_push(c, l.u.l, jv_str(c, v.u.s.p + off[i], off[i + 1] - off[i]));
    } else if (v.t != JV_UNDEF && v.t != JV_NONE) {
        jfail(c, line, "a %s is not iterable", jv_type_name(v));
    } else if (v.t == JV_NONE) {
        jfail(c, line, "None is not iterable");
    }
    return l.u.l;
}

jv jinja_index(jctx *c, int line, jv o, jv idx)
{
    if (o.t == JV_DICT) {
        for (size_t i = 0; i < o.u.d->n; i++)
            if (jv_equal(o.u.d->k[i], idx)) return o.u.d->v[i];
        return jv_undef();
    }
    if (o.t == JV_UNDEF) return jv_undef();
    if ((o.t == JV_LIST || o.t == JV_STR) && (idx.t == JV_INT || idx.t == JV_BOOL)) {
        int64_t i = idx.t == JV_INT ? idx.u.i : idx.u.b;
        if (o.t == JV_LIST) {
            int64_t n = (int64_t)o.u.l->n;
            if (i < 0) i += n;
            return i >= 0 && i < n ? o.u.l->v[i] : jv_undef();
        }
        size_t n, *off = cp_offsets(c, o.u.s, &n);
        if (i < 0) i += (int64_t)n;
        return i >= 0 && i < (int64_t)n ? jv_str(c, o.u.s.p + off[i], off[i + 1] - off[i]) : jv_undef();
    }
    if (o.t == JV_STR || o.t == JV_LIST) jfail(c, line, "indices must be integers, not %s", jv_type_name(idx));
    return jv_undef();
}

jv jinja_slice(jctx *c, int line, jv o, jv a, jv b, jv st)
{
    if (o.t != JV_LIST && o.t != JV_STR) jfail(c, line, "cannot slice a %s", jv_type_name(o));
    size_t n, *off = NULL;
    if (o.t == JV_LIST) n = o.u.l->n;
    else off = cp_offsets(c, o.u.s, &n);
    int64_t len = (int64_t)n, step = st.t == JV_INT ? st.u.i : 1;
    if (step == 0) jfail(c, line, "slice step cannot be zero");
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? len : len - 1;
    int64_t start = step > 0 ? 0 : len - 1, stop = step > 0 ? len : -1;
    if (a.t == JV_INT) {
        start = a.u.i < 0 ? a.u.i + len : a.u.i;
        start = start < lo ? lo : start > hi ? hi : start;
    }
    if (b.t == JV_INT) {
        stop = b.u.i < 0 ? b.u.i + len : b.u.i;
        stop = stop < lo ? lo : stop > hi ? hi : stop;
    }
    jv l = jv_list(c);
    tok_buf sb = {0};
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (o.t == JV_LIST) jl_push(c, l.u.l, o.u.l->v[i]);
        else tok_buf_put(&sb, o.u.s.p + off[i], off[i + 1] - off[i]);
    }
    if (o.t == JV_LIST) return l;
    jv r = jv_str(c, sb.p ? sb.p : "", sb.n);
    tok_buf_free(&sb);
    return r;
}

static int is_space_cp(utf8proc_int32_t cp)
{
    if (cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85) return 1;
    utf8proc_category_t k = utf8proc_category(cp);
    return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

static int strippable(jstr s, const size_t *off, size_t i, jv chars)
{
    const char *p = s.p + off[i];
    size_t n = off[i + 1] - off[i];
    if (chars.t != JV_STR) {
        utf8proc_int32_t cp = -1;
        utf8proc_iterate((const utf8proc_uint8_t *)p, (utf8proc_ssize_t)n, &cp);
        return is_space_cp(cp);
    }
    for (size_t k = 0; k + n <= chars.u.s.n; k++)   /* the character is one of chars */
        if (memcmp(chars.u.s.p + k, p, n) == 0) return 1;
    return 0;
}

/* Python's str.strip/lstrip/rstrip: chars (None: whitespace). */
jv jinja_strip(jctx *c, jstr s, jv chars, int left, int right)
{
    size_t n, *off = cp_offsets(c, s, &n), a = 0, b = n;
    if (left) while (a < b && strippable(s, off, a, chars)) a++;
    if (right) while (b > a && strippable(s, off, b - 1, chars)) b--;
    return jv_str(c, s.p + off[a], off[b] - off[a]);
}

jv jinja_case(jctx *c, jstr s, int mode /* 0 lower, 1 upper, 2 title, 3 capitalize */)
{
    tok_buf b = {0};
    int start = 1;
    for (size_t i = 0; i < s.n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s.p + i, (utf8proc_ssize_t)(s.n - i), &cp);
        if (k <= 0) { tok_buf_putc(&b, s.p[i++]); continue; }
        int up = mode == 1 || ((mode == 2 || mode == 3) && start);
        utf8proc_int32_t m = up ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
        if (mode == 2) start = !(utf8proc_category(cp) >= UTF8PROC_CATEGORY_LU && utf8proc_category(cp) <= UTF8PROC_CATEGORY_LO);
        if (mode == 3) start = 0;
        char enc[4];
        tok_buf_put(&b, enc, tok_utf8_put(enc, (uint32_t)m));
        i += (size_t)k;
    }
    jv r = jv_str(c, b.p ? b.p : "", b.n);
    tok_buf_free(&b);
    return r;
}

jv jinja_replace(jctx *c, jstr s, jstr from, jstr to, int64_t count)
{
    tok_buf b = {0};
    int64_t done = 0;
    for (size_t i = 0; i <= s.n;) {
        if ((count < 0 || done < count) && (from.n ? (i + from.n <= s.n && memcmp(s.p + i, from.p, from.n) == 0) : 1)) {
            tok_buf_put(&b, to.p, to.n);
            done++;
            if (!from.n) {   /* "" matches between every character, as in Python */
                if (i < s.n) tok_buf_putc(&b, s.p[i]);
                i++;
                continue;
            }
            i += from.n;
        } else {
            if (i < s.n) tok_buf_putc(&b, s.p[i]);
            i++;
        }
    }
    jv r = jv_str(c, b.p ? b.p : "", b.n);
    tok_buf_free(&b);
    return r;
}

static jv split(jctx *c, jstr s, jv sep, int64_t maxsplit, int from_right)
{
    jv l = jv_list(c);
    if (sep.t == JV_STR) {
        jstr p = sep.u.s;
        if (!p.n) jfail(c, 0, "split: empty separator");
        if (from_right && maxsplit >= 0) {
            /* rsplit with a limit: split from the end, then restore the order */
            jv parts = jv_list(c);
            size_t end = s.n;
            int64_t k = 0;
            for (size_t i = s.n; i >= p.n && k < maxsplit;) {
                if (memcmp(s.p + i - p.n, p.p, p.n) == 0) {
                    jl_push(c, parts.u.l, jv_str(c, s.p + i, end - i));
                    end = i - p.n;
                    i = end;
                    k++;
                } else i--;
            }
            jl_push(c, parts.u.l, jv_str(c, s.p, end));
            for (size_t i = parts.u.l->n; i-- > 0;) jl_push(c, l.u.l, parts.u.l->v[i]);
            return l;
        }
        size_t a = 0;
        int64_t k = 0;
        for (size_t i = 0; i + p.n <= s.n;) {
            if ((maxsplit < 0 || k < maxsplit) && memcmp(s.p + i, p.p, p.n) == 0) {
                jl_push(c, l.u.l, jv_str(c, s.p + a, i - a));
                i += p.n;
                a = i;
                k++;
            } else i++;
        }
        jl_push(c, l.u.l, jv_str(c, s.p + a, s.n - a));
        return l;
    }
    /* None: runs of whitespace, no empty strings */
    size_t i = 0;
    int64_t k = 0;
    while (i < s.n) {
        while (i < s.n && strchr(" \t\n\r\v\f", s.p[i])) i++;
        if (i >= s.n) break;
        size_t a = i;
        if (maxsplit >= 0 && k >= maxsplit) {
            size_t e = s.n;
            while (e > a && strchr(" \t\n\r\v\f", s.p[e - 1])) e--;
            jl_push(c, l.u.l, jv_str(c, s.p + a, e - a));
            break;
        }
        while (i < s.n && !strchr(" \t\n\r\v\f", s.p[i])) i++;
        jl_push(c, l.u.l, jv_str(c, s.p + a, i - a));
        k++;
    }
    return l;
}

static int affix(jstr s, jv p, int end)
{
    if (p.t == JV_LIST) {
        for (size_t i = 0; i < p.u.l->n; i++)
            if (affix(s, p.u.l->v[i], end)) return 1;
        return 0;
    }
    if (p.t != JV_STR || p.u.s.n > s.n) return 0;
    return memcmp(s.p + (end ? s.n - p.u.s.n : 0), p.u.s.p, p.u.s.n) == 0;
}

static int64_t int_arg(jv v, int64_t def) { return v.t == JV_INT ? v.u.i : v.t == JV_BOOL ? v.u.b : def; }

jv jinja_str_method(jctx *c, int line, const char *name, jstr s, const jargs *a)
{
    jv none = jv_none();
    if (!strcmp(name, "startswith")) return jv_bool(affix(s, jarg(a, 0, NULL, none), 0));
    if (!strcmp(name, "endswith")) return jv_bool(affix(s, jarg(a, 0, NULL, none), 1));
    if (!strcmp(name, "split")) return split(c, s, jarg(a, 0, "sep", none), int_arg(jarg(a, 1, "maxsplit", none), -1), 0);
    if (!strcmp(name, "rsplit")) return split(c, s, jarg(a, 0, "sep", none), int_arg(jarg(a, 1, "maxsplit", none), -1), 1);
    if (!strcmp(name, "strip")) return jinja_strip(c, s, jarg(a, 0, NULL, none), 1, 1);
    if (!strcmp(name, "lstrip")) return jinja_strip(c, s, jarg(a, 0, NULL, none), 1, 0);
    if (!strcmp(name, "rstrip")) return jinja_strip(c, s, jarg(a, 0, NULL, none), 0, 1);
    if (!strcmp(name, "lower")) return jinja_case(c, s, 0);
    if (!strcmp(name, "upper")) return jinja_case(c, s, 1);
    if (!strcmp(name, "title")) return jinja_case(c, s, 2);
    if (!strcmp(name, "capitalize")) {
        jv lo = jinja_case(c, s, 0);
        return jinja_case(c, lo.u.s, 3);
    }
    if (!strcmp(name, "replace"))
        return jinja_replace(c, s, need_str(c, line, jarg(a, 0, NULL, none), "replace"),
                       need_str(c, line, jarg(a, 1, NULL, none), "replace"), int_arg(jarg(a, 2, "count", none), -1));
    if (!strcmp(name, "find") || !strcmp(name, "count")) {
        jstr p = need_str(c, line, jarg(a, 0, NULL, none), name);
        int64_t n = 0;
        for (size_t i = 0; i + p.n <= s.n; i++)
            if (memcmp(s.p + i, p.p, p.n) == 0) {
                if (name[0] == 'f') return jv_int((int64_t)ju_len((jstr){i, s.p}));
                n++;
                if (p.n) i += p.n - 1;
            }
        return jv_int(name[0] == 'f' ? -1 : n);
    }
    if (!strcmp(name, "join")) {
        jlist *l = jinja_iter(c, line, jarg(a, 0, NULL, none));
        tok_buf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i) tok_buf_put(&b, s.p, s.n);
            jv e = jv_stringify(c, l->v[i]);
            tok_buf_put(&b, e.u.s.p, e.u.s.n);
        }
        jv r = jv_str(c, b.p ? b.p : "", b.n);
        tok_buf_free(&b);
        return r;
    }
    if (!strcmp(name, "isdigit") || !strcmp(name, "isspace") || !strcmp(name, "isalpha")) {
        int ok = s.n > 0;
        for (size_t i = 0; i < s.n && ok; i++) {
            unsigned char ch = (unsigned char)s.p[i];
            ok = name[2] == 'd' ? (ch >= '0' && ch <= '9') : name[2] == 's' ? strchr(" \t\n\r\v\f", ch) != NULL
                                                                           : ((ch | 32) >= 'a' && (ch | 32) <= 'z') || ch >= 0x80;
        }
        return jv_bool(ok);
    }
    if (!strcmp(name, "splitlines")) {
        jv l = jv_list(c);
        size_t st = 0;
        for (size_t i = 0; i < s.n; i++)
            if (s.p[i] == '\n' || s.p[i] == '\r') {
                jl_push(c, l.u.l, jv_str(c, s.p + st, i - st));
                if (s.p[i] == '\r' && i + 1 < s.n && s.p[i + 1] == '\n') i++;
                st = i + 1;
            }
        if (st < s.n) jl_push(c, l.u.l, jv_str(c, s.p + st, s.n - st));
        return l;
    }
    jfail(c, line, "unknown string method %s", name);
}

jv jinja_dict_method(jctx *c, int line, const char *name, jdict *d, const jargs *a)
{
    jv l = jv_list(c);
    if (!strcmp(name, "get")) {
        jv k = jarg(a, 0, NULL, jv_undef());
        for (size_t i = 0; i < d->n; i++)
            if (jv_equal(d->k[i], k)) return d->v[i];
        return jarg(a, 1, NULL, jv_none());
    }
    for (size_t i = 0; i < d->n; i++) {
        if (!strcmp(name, "keys")) jl_push(c, l.u.l, d->k[i]);
        else if (!strcmp(name, "values")) jl_push(c, l.u.l, d->v[i]);
        else if (!strcmp(name, "items")) {
            jv p = jv_list(c);
            jl_push(c, p.u.l, d->k[i]);
            jl_push(c, p.u.l, d->v[i]);
            jl_push(c, l.u.l, p);
        } else jfail(c, line, "unknown dict method %s", name);
    }
    return l;
}
