/* Jinja subset: filters, tests, method binding and the global functions transformers provides. */
#include "tokenizer/jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static jv method_call(jctx *c, int line, const jfunc *f, const jargs *a)
{
    if (f->self.t == JV_STR) return jinja_str_method(c, line, f->name, f->self.u.s, a);
    return jinja_dict_method(c, line, f->name, f->self.u.d, a);
}

jv jinja_method(jctx *c, jv o, const char *name)
{
    static const char *str_m[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
                                  "upper", "lower", "title", "capitalize", "replace", "find", "count",
                                  "join", "isdigit", "isspace", "isalpha", "splitlines", NULL};
    static const char *dict_m[] = {"items", "keys", "values", "get", NULL};
    const char **m = o.t == JV_STR ? str_m : o.t == JV_DICT ? dict_m : NULL;
    for (int i = 0; m && m[i]; i++)
        if (!strcmp(m[i], name)) return jv_func(c, m[i], method_call, o);
    return jv_undef();
}

static jv g_range(jctx *c, int line, const jfunc *f, const jargs *a)
{
    (void)f;
    int64_t start = 0, stop, step = 1;
    for (int i = 0; i < a->npos; i++)
        if (a->pos[i].t != JV_INT) jfail(c, line, "range() needs integers");
    if (a->npos == 1) stop = a->pos[0].u.i;
    else if (a->npos == 2 || a->npos == 3) {
        start = a->pos[0].u.i;
        stop = a->pos[1].u.i;
        if (a->npos == 3) step = a->pos[2].u.i;
    } else jfail(c, line, "range() takes 1 to 3 arguments");
    if (step == 0) jfail(c, line, "range() step must not be zero");
    if ((stop - start) / step > 100000) jfail(c, line, "range() too long");
    jv l = jv_list(c);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jl_push(c, l.u.l, jv_int(i));
    return l;
}

static jv g_dict(jctx *c, int line, const jfunc *f, const jargs *a)
{
    (void)line;
    jv d = jv_dict(c);
    if (a->npos == 1 && a->pos[0].t == JV_DICT)
        for (size_t i = 0; i < a->pos[0].u.d->n; i++) jd_set(c, d.u.d, a->pos[0].u.d->k[i], a->pos[0].u.d->v[i]);
    for (int i = 0; i < a->nkw; i++) jd_set(c, d.u.d, jv_cstr(c, a->kwn[i]), a->kwv[i]);
    d.u.d->ns = f->name[0] == 'n';   /* namespace(): its attributes may be assigned */
    return d;
}

static jv g_raise(jctx *c, int line, const jfunc *f, const jargs *a)
{
    (void)f;
    jv m = jv_stringify(c, jarg(a, 0, NULL, jv_cstr(c, "")));
    c->status = tcq_fail(TCQ_ERR_INVALID_ARG, "chat template line %d raised: %s", line, m.u.s.p);
    longjmp(c->jb, 1);
}

static jv g_strftime(jctx *c, int line, const jfunc *f, const jargs *a)
{
    (void)f;
    jv fmt = jarg(a, 0, NULL, jv_undef());
    if (fmt.t != JV_STR) jfail(c, line, "strftime_now() needs a format string");
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    char buf[256];
    size_t n = strftime(buf, sizeof buf, fmt.u.s.p, &tmv);
    return jv_str(c, buf, n);
}

jv jinja_global(jctx *c, const char *name)
{
    if (!strcmp(name, "range")) return jv_func(c, "range", g_range, jv_undef());
    if (!strcmp(name, "namespace")) return jv_func(c, "namespace", g_dict, jv_undef());
    if (!strcmp(name, "dict")) return jv_func(c, "dict", g_dict, jv_undef());
    if (!strcmp(name, "raise_exception")) return jv_func(c, "raise_exception", g_raise, jv_undef());
    if (!strcmp(name, "strftime_now")) return jv_func(c, "strftime_now", g_strftime, jv_undef());
    return jv_undef();
}

static jv attr_of(jctx *c, jv v, jv attr)
{
    /* "a.b" paths, as Jinja's attribute= arguments allow */
    if (attr.t != JV_STR) return jinja_index(c, 0, v, attr);
    const char *p = attr.u.s.p;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        jv r;
        if (v.t != JV_DICT || !jd_get(v.u.d, p, n, &r)) return jv_undef();
        v = r;
        if (!dot) return v;
        p = dot + 1;
    }
}

static int cmp_sort(jctx *c, int line, jv a, jv b, int case_sensitive)
{
    if (!case_sensitive && a.t == JV_STR && b.t == JV_STR) {
        a = jinja_case(c, a.u.s, 0);
        b = jinja_case(c, b.u.s, 0);
    }
    return jv_compare(c, line, a, b);
}

static jargs shift_args(const jargs *a, int k)
{
    jargs r = *a;
    r.npos = a->npos > k ? a->npos - k : 0;
    r.pos = a->pos + (a->npos > k ? k : a->npos);
    return r;
}

jv jinja_filter(jctx *c, int line, const char *name, jv v, const jargs *a)
{
    jv none = jv_none();
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv def = jarg(a, 0, "default_value", jv_cstr(c, ""));
        int boolean = jv_truthy(jarg(a, 1, "boolean", jv_bool(0)));
        return v.t == JV_UNDEF || (boolean && !jv_truthy(v)) ? def : v;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        if (v.t == JV_STR) return jv_int((int64_t)ju_len(v.u.s));
        if (v.t == JV_LIST) return jv_int((int64_t)v.u.l->n);
        if (v.t == JV_DICT) return jv_int((int64_t)v.u.d->n);
        if (v.t == JV_UNDEF) return jv_int(0);
        jfail(c, line, "object of type %s has no length", jv_type_name(v));
    }
    if (!strcmp(name, "tojson")) {
        /* transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
        jv ind = jarg(a, 1, "indent", none), seps = jarg(a, 2, "separators", none);
        jjson_opts o = {ind.t == JV_INT ? (int)ind.u.i : -1, jv_truthy(jarg(a, 3, "sort_keys", jv_bool(0))),
                        jv_truthy(jarg(a, 0, "ensure_ascii", jv_bool(0))), NULL, NULL};
        if (seps.t == JV_LIST && seps.u.l->n == 2 && seps.u.l->v[0].t == JV_STR && seps.u.l->v[1].t == JV_STR) {
            o.item_sep = seps.u.l->v[0].u.s.p;
            o.key_sep = seps.u.l->v[1].u.s.p;
        }
        tok_buf b = {0};
        jv_to_json(c, line, v, &b, &o, 0);
        jv r = jv_str(c, b.p ? b.p : "", b.n);
        tok_buf_free(&b);
        return r;
    }
    if (!strcmp(name, "safe")) {
        v = jv_stringify(c, v);
        v.safe = 1;
        return v;
    }
    if (!strcmp(name, "string")) return jv_stringify(c, v);
    if (!strcmp(name, "list")) {
        jv l = jv_list(c);
        jlist *it = jinja_iter(c, line, v);
        for (size_t i = 0; i < it->n; i++) jl_push(c, l.u.l, it->v[i]);
        return l;
    }
    if (!strcmp(name, "items")) {
        if (v.t == JV_UNDEF) return jv_list(c);
        if (v.t != JV_DICT) jfail(c, line, "items needs a mapping");
        return jinja_dict_method(c, line, "items", v.u.d, a);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jlist *it = jinja_iter(c, line, v);
        return it->n ? it->v[name[0] == 'f' ? 0 : it->n - 1] : jv_undef();
    }
    if (!strcmp(name, "reverse")) {
        if (v.t == JV_STR) return jinja_slice(c, line, v, none, none, jv_int(-1));
        jlist *it = jinja_iter(c, line, v);
        jv l = jv_list(c);
        for (size_t i = it->n; i-- > 0;) jl_push(c, l.u.l, it->v[i]);
        return l;
    }
    if (!strcmp(name, "join")) {
        jv sep = jarg(a, 0, "d", jv_cstr(c, "")), attr = jarg(a, 1, "attribute", none);
        jlist *it = jinja_iter(c, line, v);
        jv l = jv_list(c);
        for (size_t i = 0; i < it->n; i++) jl_push(c, l.u.l, attr.t == JV_NONE ? it->v[i] : attr_of(c, it->v[i], attr));
        jargs ja = {&l, 1, NULL, NULL, 0};
        return jinja_str_method(c, line, "join", jv_stringify(c, sep).u.s, &ja);
    }
    if ((v.t == JV_NONE || v.t == JV_UNDEF) && (!strcmp(name, "map") || !strcmp(name, "select") || !strcmp(name, "reject") ||
                                                !strcmp(name, "selectattr") || !strcmp(name, "rejectattr")))
        return jv_list(c);   /* jinja2 skips a falsy sequence here */
    if (!strcmp(name, "map")) {
        jv attr = jarg(a, -1, "attribute", none), def = jarg(a, -1, "default", jv_undef());
        jlist *it = jinja_iter(c, line, v);
        jv l = jv_list(c);
        for (size_t i = 0; i < it->n; i++) {
            jv e;
            if (attr.t != JV_NONE) {
                e = attr_of(c, it->v[i], attr);
                if (e.t == JV_UNDEF) e = def;
            } else {
                jv f = jarg(a, 0, NULL, none);
                if (f.t != JV_STR) jfail(c, line, "map needs a filter name or attribute=");
                jargs rest = shift_args(a, 1);
                e = jinja_filter(c, line, f.u.s.p, it->v[i], &rest);
            }
            jl_push(c, l.u.l, e);
        }
        return l;
    }
    if (!strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) {
        int by_attr = strstr(name, "attr") != NULL, keep = name[0] == 's';
        jv attr = by_attr ? jarg(a, 0, NULL, none) : none;
        jv test = jarg(a, by_attr ? 1 : 0, NULL, none);
        jargs rest = shift_args(a, by_attr ? 2 : 1);
        jlist *it = jinja_iter(c, line, v);
        jv l = jv_list(c);
        for (size_t i = 0; i < it->n; i++) {
            jv e = by_attr ? attr_of(c, it->v[i], attr) : it->v[i];
            int r = test.t == JV_STR ? jinja_test(c, line, test.u.s.p, e, &rest) : jv_truthy(e);
            if (r == keep) jl_push(c, l.u.l, it->v[i]);
        }
        return l;
    }
    if (!strcmp(name, "sort") || !strcmp(name, "unique") || !strcmp(name, "min") || !strcmp(name, "max")) {
        int rev = jv_truthy(jarg(a, name[0] == 's' ? 0 : -1, "reverse", jv_bool(0)));
        int cs = jv_truthy(jarg(a, name[0] == 's' ? 1 : 0, "case_sensitive", jv_bool(0)));
        jv attr = jarg(a, name[0] == 's' ? 2 : 1, "attribute", none);
        jlist *it = jinja_iter(c, line, v);
        jv l = jv_list(c);
        for (size_t i = 0; i < it->n; i++) jl_push(c, l.u.l, it->v[i]);
        jlist *x = l.u.l;
        if (name[0] == 'u') {
            jv u = jv_list(c);
            for (size_t i = 0; i < x->n; i++) {
                int seen = 0;
                jv ki = attr.t == JV_NONE ? x->v[i] : attr_of(c, x->v[i], attr);
                for (size_t j = 0; j < u.u.l->n && !seen; j++) {
                    jv kj = attr.t == JV_NONE ? u.u.l->v[j] : attr_of(c, u.u.l->v[j], attr);
                    seen = ki.t == JV_STR && kj.t == JV_STR && !cs ? cmp_sort(c, line, ki, kj, 0) == 0 : jv_equal(ki, kj);
                }
                if (!seen) jl_push(c, u.u.l, x->v[i]);
            }
            return u;
        }
        for (size_t i = 1; i < x->n; i++)   /* stable insertion sort */
            for (size_t j = i; j > 0; j--) {
                jv p = attr.t == JV_NONE ? x->v[j - 1] : attr_of(c, x->v[j - 1], attr);
                jv q = attr.t == JV_NONE ? x->v[j] : attr_of(c, x->v[j], attr);
                int r = cmp_sort(c, line, p, q, cs);
                if (!(rev ? r < 0 : r > 0)) break;
                jv t = x->v[j]; x->v[j] = x->v[j - 1]; x->v[j - 1] = t;
            }
        if (name[1] == 'i') return x->n ? x->v[0] : jv_undef();
        if (name[1] == 'a') return x->n ? x->v[x->n - 1] : jv_undef();
        return l;
    }
    if (!strcmp(name, "sum")) {
        jv attr = jarg(a, 0, "attribute", none), acc = jarg(a, 1, "start", jv_int(0));
        jlist *it = jinja_iter(c, line, v);
        for (size_t i = 0; i < it->n; i++) {
            jv e = attr.t == JV_NONE ? it->v[i] : attr_of(c, it->v[i], attr);
            if (acc.t == JV_INT && e.t == JV_INT) acc = jv_int(acc.u.i + e.u.i);
            else if ((acc.t == JV_INT || acc.t == JV_FLOAT) && (e.t == JV_INT || e.t == JV_FLOAT))
                acc = jv_float((acc.t == JV_INT ? (double)acc.u.i : acc.u.f) + (e.t == JV_INT ? (double)e.u.i : e.u.f));
            else jfail(c, line, "sum of non-numbers");
        }
        return acc;
    }
    if (!strcmp(name, "abs")) {
        if (v.t == JV_INT) return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.t == JV_FLOAT) return jv_float(fabs(v.u.f));
        jfail(c, line, "abs of %s", jv_type_name(v));
    }
    if (!strcmp(name, "int")) {
        jv def = jarg(a, 0, "default", jv_int(0));
        if (v.t == JV_INT) return v;
        if (v.t == JV_BOOL) return jv_int(v.u.b);
        if (v.t == JV_FLOAT) return jv_int((int64_t)v.u.f);
        if (v.t == JV_STR) {
            char *e;
            long long x = strtoll(v.u.s.p, &e, 10);
            if (e != v.u.s.p && !*e) return jv_int(x);
            double f = strtod(v.u.s.p, &e);
            if (e != v.u.s.p && !*e) return jv_int((int64_t)f);
        }
        return def;
    }
    if (!strcmp(name, "float")) {
        jv def = jarg(a, 0, "default", jv_float(0));
        if (v.t == JV_FLOAT) return v;
        if (v.t == JV_INT || v.t == JV_BOOL) return jv_float(v.t == JV_INT ? (double)v.u.i : v.u.b);
        if (v.t == JV_STR) {
            char *e;
            double f = strtod(v.u.s.p, &e);
            if (e != v.u.s.p && !*e) return jv_float(f);
        }
        return def;
    }
    if (!strcmp(name, "round")) {
        jv pr = jarg(a, 0, "precision", jv_int(0)), meth = jarg(a, 1, "method", jv_cstr(c, "common"));
        double x = v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : 0, m = pow(10, (double)(pr.t == JV_INT ? pr.u.i : 0));
        const char *md = meth.t == JV_STR ? meth.u.s.p : "common";
        double r = !strcmp(md, "floor") ? floor(x * m) / m : !strcmp(md, "ceil") ? ceil(x * m) / m : rint(x * m) / m;   /* Python's round: half to even */
        return jv_float(r);
    }
    if (v.t != JV_STR && (!strcmp(name, "trim") || !strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") ||
                          !strcmp(name, "capitalize") || !strcmp(name, "replace") || !strcmp(name, "indent") ||
                          !strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "wordcount")))
        v = jv_stringify(c, v);
    if (!strcmp(name, "trim")) return jinja_strip(c, v.u.s, jarg(a, 0, "chars", none), 1, 1);
    if (!strcmp(name, "upper")) return jinja_case(c, v.u.s, 1);
    if (!strcmp(name, "lower")) return jinja_case(c, v.u.s, 0);
    if (!strcmp(name, "title")) return jinja_case(c, v.u.s, 2);
    if (!strcmp(name, "capitalize")) return jinja_case(c, jinja_case(c, v.u.s, 0).u.s, 3);
    if (!strcmp(name, "replace")) {
        jv from = jv_stringify(c, jarg(a, 0, "old", jv_cstr(c, ""))), to = jv_stringify(c, jarg(a, 1, "new", jv_cstr(c, "")));
        jv cnt = jarg(a, 2, "count", none);
        return jinja_replace(c, v.u.s, from.u.s, to.u.s, cnt.t == JV_INT ? cnt.u.i : -1);
    }
    if (!strcmp(name, "wordcount")) {
        jargs none_args = {0};
        jv w = jinja_str_method(c, line, "split", v.u.s, &none_args);
        return jv_int((int64_t)w.u.l->n);
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e")) return v.safe ? v : jv_escape(c, v.u.s);
    if (!strcmp(name, "indent")) {
        jv w = jarg(a, 0, "width", jv_int(4));
        int first = jv_truthy(jarg(a, 1, "first", jv_bool(0))), blank = jv_truthy(jarg(a, 2, "blank", jv_bool(0)));
        jv pad = w;
        if (w.t != JV_STR) {
            int64_t k = w.t == JV_INT ? w.u.i : 4;
            char *p = ja_alloc(c, (size_t)(k > 0 ? k : 0) + 1);
            memset(p, ' ', (size_t)(k > 0 ? k : 0));
            pad = jv_str(c, p, (size_t)(k > 0 ? k : 0));
        }
        tok_buf b = {0};
        int line_start = 1, first_line = 1;
        for (size_t i = 0; i < v.u.s.n; i++) {
            if (line_start) {
                int empty = v.u.s.p[i] == '\n';
                if ((!first_line || first) && (!empty || blank)) tok_buf_put(&b, pad.u.s.p, pad.u.s.n);
                line_start = 0;
            }
            tok_buf_putc(&b, v.u.s.p[i]);
            if (v.u.s.p[i] == '\n') {
                line_start = 1;
                first_line = 0;
            }
        }
        if (first && v.u.s.n == 0) tok_buf_put(&b, pad.u.s.p, pad.u.s.n);
        jv r = jv_str(c, b.p ? b.p : "", b.n);
        tok_buf_free(&b);
        return r;
    }
    jfail(c, line, "unknown filter '%s'", name);
}

int jinja_test(jctx *c, int line, const char *name, jv v, const jargs *a)
{
    jv arg = jarg(a, 0, NULL, jv_undef());
    if (!strcmp(name, "defined")) return v.t != JV_UNDEF;
    if (!strcmp(name, "undefined")) return v.t == JV_UNDEF;
    if (!strcmp(name, "none")) return v.t == JV_NONE;
    if (!strcmp(name, "boolean")) return v.t == JV_BOOL;
    if (!strcmp(name, "true")) return v.t == JV_BOOL && v.u.b;
    if (!strcmp(name, "false")) return v.t == JV_BOOL && !v.u.b;
    if (!strcmp(name, "string")) return v.t == JV_STR;
    if (!strcmp(name, "number")) return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
    if (!strcmp(name, "integer")) return v.t == JV_INT;
    if (!strcmp(name, "float")) return v.t == JV_FLOAT;
    if (!strcmp(name, "mapping")) return v.t == JV_DICT;
    if (!strcmp(name, "iterable")) return v.t == JV_LIST || v.t == JV_DICT || v.t == JV_STR;
    if (!strcmp(name, "sequence")) return v.t == JV_LIST || v.t == JV_DICT || v.t == JV_STR;
    if (!strcmp(name, "callable")) return v.t == JV_FUNC;
    if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "==") || !strcmp(name, "sameas")) return jv_equal(v, arg);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !jv_equal(v, arg);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan")) return jv_compare(c, line, v, arg) < 0;
    if (!strcmp(name, "le")) return jv_compare(c, line, v, arg) <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan")) return jv_compare(c, line, v, arg) > 0;
    if (!strcmp(name, "ge")) return jv_compare(c, line, v, arg) >= 0;
    if (!strcmp(name, "in")) {
        if (arg.t == JV_STR && v.t == JV_STR) return strstr(arg.u.s.p, v.u.s.p) != NULL;
        jlist *it = jinja_iter(c, line, arg);
        for (size_t i = 0; i < it->n; i++)
            if (jv_equal(v, it->v[i])) return 1;
        return 0;
    }
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        if (v.t != JV_INT) jfail(c, line, "test %s needs an integer", name);
        if (name[0] == 'o') return (v.u.i & 1) != 0;
        if (name[0] == 'e') return (v.u.i & 1) == 0;
        if (arg.t != JV_INT || arg.u.i == 0) jfail(c, line, "divisibleby needs a non-zero integer");
        return v.u.i % arg.u.i == 0;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (v.t != JV_STR) return 0;
        jv m = jinja_case(c, v.u.s, name[0] == 'u');
        return jv_equal(m, v);
    }
    jfail(c, line, "unknown test '%s'", name);
}
