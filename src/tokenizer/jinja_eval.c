/* Jinja subset: the evaluator (scopes, statements, expressions, operators, macros). */
#include "tokenizer/jinja.h"

#include <math.h>
#include <stdlib.h>

/* Each for-loop iteration and each macro call opens a scope; {% set %} writes the innermost
 * one, which is why templates carry state out of loops with namespace(). */
typedef struct jframe {
    struct jframe *parent;
    jdict vars;
} jframe;

static void push_frame(jctx *c, jframe *parent)
{
    jframe *f = ja_alloc(c, sizeof *f);
    memset(f, 0, sizeof *f);
    f->parent = parent;
    c->frame = f;
}

void jinja_push_root(jctx *c)
{
    push_frame(c, NULL);
    c->root = c->frame;
}

void jinja_set_var(jctx *c, const char *name, jv v)
{
    jd_set(c, &c->frame->vars, jv_cstr(c, name), v);
}

static jv lookup(jctx *c, const char *name)
{
    jv v;
    for (jframe *f = c->frame; f; f = f->parent)
        if (jd_get(&f->vars, name, strlen(name), &v)) return v;
    return jinja_global(c, name);
}

static void emit(jctx *c, jv v)
{
    if (v.t == JV_STR) {
        if (v.u.s.n > JINJA_MAX_OUT - c->out.n) jfail(c, 0, "the rendered text exceeds %zu MiB", JINJA_MAX_OUT >> 20);
        tok_buf_put(&c->out, v.u.s.p, v.u.s.n);
    } else jv_to_str(c, v, &c->out, 0);
    if (c->out.n > JINJA_MAX_OUT) jfail(c, 0, "the rendered text exceeds %zu MiB", JINJA_MAX_OUT >> 20);
}

/* Render body into a string (for {% set %}...{% endset %} and macros). */
static jv capture(jctx *c, jnode **body, int n)
{
    size_t mark = c->out.n;
    jinja_exec(c, body, n);
    jv s = jv_str(c, c->out.p ? c->out.p + mark : "", c->out.n - mark);
    c->out.n = mark;
    return s;
}

static jv call_macro(jctx *c, int line, const jnode *m, const jargs *a)
{
    if (++c->depth > 64) jfail(c, line, "macro recursion deeper than 64");
    if (a->npos > m->nkw) jfail(c, line, "macro %s takes %d arguments, %d given", m->name, m->nkw, a->npos);
    /* parameters: positional, then by keyword, then the default (evaluated in the caller's scope) */
    jv *vals = ja_alloc(c, (size_t)(m->nkw + 1) * sizeof *vals);
    for (int i = 0; i < m->nkw; i++) {
        int have = i < a->npos;
        vals[i] = have ? a->pos[i] : jv_undef();
        for (int k = 0; k < a->nkw; k++)
            if (!strcmp(a->kwn[k], m->kwn[i])) { vals[i] = a->kwv[k]; have = 1; }
        if (!have && m->kwv[i]) vals[i] = jinja_eval(c, m->kwv[i]);
    }
    jframe *saved = c->frame;
    push_frame(c, c->root);   /* a macro sees the template's globals, not the caller's locals */
    for (int i = 0; i < m->nkw; i++) jinja_set_var(c, m->kwn[i], vals[i]);
    jv r = capture(c, m->body, m->nbody);
    c->frame = saved;
    c->depth--;
    return r;
}

static int64_t as_int(jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }
static int is_intlike(jv v) { return v.t == JV_INT || v.t == JV_BOOL; }
static int is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)as_int(v); }

/* A template cannot ask for more than this many bytes (or list items) from one repetition: a
 * huge count must be an error, not an overflowed size. */
enum { REPEAT_MAX = 1 << 20 };

static jv repeat(jctx *c, int line, jv s, int64_t k)
{
    const size_t len = s.t == JV_STR ? s.u.s.n : s.u.l->n;
    if (k > 0 && len > 0 && (uint64_t)k > REPEAT_MAX / len)
        jfail(c, line, "repetition of a %zu-long %s %lld times is too large", len, jv_type_name(s), (long long)k);
    if (len == 0) k = 0;   /* nothing to repeat: no loop over a huge count */
    if (s.t == JV_STR) {
        size_t n = k > 0 ? (size_t)k * s.u.s.n : 0;
        char *p = ja_alloc(c, n + 1);
        for (int64_t i = 0; i < k; i++) memcpy(p + (size_t)i * s.u.s.n, s.u.s.p, s.u.s.n);
        return jv_str(c, p, n);
    }
    jv l = jv_list(c);
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < s.u.l->n; j++) jl_push(c, l.u.l, s.u.l->v[j]);
    return l;
}

static jv binop(jctx *c, int line, jop op, jv a, jv b)
{
    static const char *names[] = {"+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
    switch (op) {
    case OP_EQ: return jv_bool(jv_equal(a, b));
    case OP_NE: return jv_bool(!jv_equal(a, b));
    case OP_LT: return jv_bool(jv_compare(c, line, a, b) < 0);
    case OP_LE: return jv_bool(jv_compare(c, line, a, b) <= 0);
    case OP_GT: return jv_bool(jv_compare(c, line, a, b) > 0);
    case OP_GE: return jv_bool(jv_compare(c, line, a, b) >= 0);
    case OP_IN: case OP_NOTIN: {
        int r = 0;
        if (b.t == JV_STR) {
            if (a.t != JV_STR) jfail(c, line, "'in <string>' needs a string on the left, not %s", jv_type_name(a));
            r = a.u.s.n == 0;
            for (size_t i = 0; !r && i + a.u.s.n <= b.u.s.n; i++) r = memcmp(b.u.s.p + i, a.u.s.p, a.u.s.n) == 0;
        } else if (b.t == JV_LIST) {
            for (size_t i = 0; !r && i < b.u.l->n; i++) r = jv_equal(a, b.u.l->v[i]);
        } else if (b.t == JV_DICT) {
            for (size_t i = 0; !r && i < b.u.d->n; i++) r = jv_equal(a, b.u.d->k[i]);
        } else {
            jfail(c, line, "argument of type %s is not iterable", jv_type_name(b));
        }
        return jv_bool(op == OP_IN ? r : !r);
    }
    case OP_CONCAT: {
        jv x = jv_stringify(c, a), y = jv_stringify(c, b);
        char *p = ja_alloc(c, x.u.s.n + y.u.s.n + 1);
        memcpy(p, x.u.s.p, x.u.s.n);
        memcpy(p + x.u.s.n, y.u.s.p, y.u.s.n);
        return jv_str(c, p, x.u.s.n + y.u.s.n);
    }
    default: break;
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        /* Markup + str escapes the str, as markupsafe does */
        int safe = a.safe || b.safe;
        if (safe && !a.safe) a = jv_escape(c, a.u.s);
        if (safe && !b.safe) b = jv_escape(c, b.u.s);
        jv r = binop(c, line, OP_CONCAT, a, b);
        r.safe = safe;
        return r;
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST) {
        jv l = jv_list(c);
        for (size_t i = 0; i < a.u.l->n; i++) jl_push(c, l.u.l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++) jl_push(c, l.u.l, b.u.l->v[i]);
        return l;
    }
    if (op == OP_MUL && (a.t == JV_STR || a.t == JV_LIST) && is_intlike(b)) return repeat(c, line, a, as_int(b));
    if (op == OP_MUL && (b.t == JV_STR || b.t == JV_LIST) && is_intlike(a)) return repeat(c, line, b, as_int(a));
    if (!is_num(a) || !is_num(b))
        jfail(c, line, "unsupported operand types for %s: %s and %s", names[op], jv_type_name(a), jv_type_name(b));
    if (is_intlike(a) && is_intlike(b) && op != OP_DIV) {
        int64_t x = as_int(a), y = as_int(b);
        switch (op) {
        case OP_ADD: return jv_int((int64_t)((uint64_t)x + (uint64_t)y));
        case OP_SUB: return jv_int((int64_t)((uint64_t)x - (uint64_t)y));
        case OP_MUL: return jv_int((int64_t)((uint64_t)x * (uint64_t)y));
        case OP_FLOORDIV: case OP_MOD: {
            if (y == 0) jfail(c, line, "integer division or modulo by zero");
            int64_t q = x / y, r = x % y;
            if (r && ((r < 0) != (y < 0))) { q--; r += y; }   /* Python floors */
            return jv_int(op == OP_MOD ? r : q);
        }
        case OP_POW:
            if (y >= 0) {
                int64_t r = 1;
                for (int64_t i = 0; i < y && i < 64; i++) r = (int64_t)((uint64_t)r * (uint64_t)x);
                return jv_int(r);
            }
            return jv_float(pow((double)x, (double)y));
        default: break;
        }
    }
    double x = num(a), y = num(b);
    switch (op) {
    case OP_ADD: return jv_float(x + y);
    case OP_SUB: return jv_float(x - y);
    case OP_MUL: return jv_float(x * y);
    case OP_DIV:
        if (y == 0) jfail(c, line, "division by zero");
        return jv_float(x / y);
    case OP_FLOORDIV:
        if (y == 0) jfail(c, line, "division by zero");
        return jv_float(floor(x / y));
    case OP_MOD: {
        if (y == 0) jfail(c, line, "modulo by zero");
        double r = fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return jv_float(r);
    }
    case OP_POW: return jv_float(pow(x, y));
    default: jfail(c, line, "bad operator");
    }
}

static void eval_args(jctx *c, const jnode *n, jargs *a)
{
    a->npos = n->nargs;
    a->nkw = n->nkw;
    a->pos = ja_alloc(c, (size_t)(n->nargs + 1) * sizeof *a->pos);
    a->kwv = ja_alloc(c, (size_t)(n->nkw + 1) * sizeof *a->kwv);
    a->kwn = n->kwn;
    for (int i = 0; i < n->nargs; i++) a->pos[i] = n->args[i] ? jinja_eval(c, n->args[i]) : jv_undef();
    for (int i = 0; i < n->nkw; i++) a->kwv[i] = jinja_eval(c, n->kwv[i]);
}

jv jinja_eval(jctx *c, const jnode *e)
{
    jargs a;
    switch (e->kind) {
    case E_LIT: return e->lit;
    case E_NAME: return lookup(c, e->name);
    case E_ATTR: {
        jv o = jinja_eval(c, e->a), v;
        if (o.t == JV_DICT && jd_get(o.u.d, e->name, strlen(e->name), &v)) return v;
        return jinja_method(c, o, e->name);
    }
    case E_INDEX: return jinja_index(c, e->line, jinja_eval(c, e->a), jinja_eval(c, e->b));
    case E_SLICE:
        return jinja_slice(c, e->line, jinja_eval(c, e->a), e->b ? jinja_eval(c, e->b) : jv_none(),
                           e->c ? jinja_eval(c, e->c) : jv_none(), e->args[0] ? jinja_eval(c, e->args[0]) : jv_none());
    case E_CALL: {
        jv f = jinja_eval(c, e->a);
        eval_args(c, e, &a);
        if (f.t != JV_FUNC) {
            if (e->a->kind == E_NAME) jfail(c, e->line, "'%s' is undefined or not callable", e->a->name);
            jfail(c, e->line, "a %s is not callable", jv_type_name(f));
        }
        if (f.u.fn->macro) return call_macro(c, e->line, f.u.fn->macro, &a);
        return f.u.fn->fn(c, e->line, f.u.fn, &a);
    }
    case E_FILTER: {
        jv v = jinja_eval(c, e->a);
        eval_args(c, e, &a);
        return jinja_filter(c, e->line, e->name, v, &a);
    }
    case E_TEST: {
        jv v = jinja_eval(c, e->a);
        eval_args(c, e, &a);
        int r = jinja_test(c, e->line, e->name, v, &a);
        return jv_bool(e->neg ? !r : r);
    }
    case E_NOT: return jv_bool(!jv_truthy(jinja_eval(c, e->a)));
    case E_NEG: {
        jv v = jinja_eval(c, e->a);
        if (is_intlike(v)) return jv_int(-as_int(v));
        if (v.t == JV_FLOAT) return jv_float(-v.u.f);
        jfail(c, e->line, "bad operand type for unary -: %s", jv_type_name(v));
    }
    case E_AND: {
        jv l = jinja_eval(c, e->a);
        return jv_truthy(l) ? jinja_eval(c, e->b) : l;
    }
    case E_OR: {
        jv l = jinja_eval(c, e->a);
        return jv_truthy(l) ? l : jinja_eval(c, e->b);
    }
    case E_COND:
        if (jv_truthy(jinja_eval(c, e->a))) return jinja_eval(c, e->b);
        return e->c ? jinja_eval(c, e->c) : jv_undef();
    case E_BIN: return binop(c, e->line, e->op, jinja_eval(c, e->a), jinja_eval(c, e->b));
    case E_LIST: {
        jv l = jv_list(c);
        for (int i = 0; i < e->nargs; i++) jl_push(c, l.u.l, jinja_eval(c, e->args[i]));
        return l;
    }
    case E_DICT: {
        jv d = jv_dict(c);
        for (int i = 0; i < e->nargs; i++) jd_set(c, d.u.d, jinja_eval(c, e->args[i]), jinja_eval(c, e->kwv[i]));
        return d;
    }
    default: jfail(c, e->line, "statement used as an expression");
    }
}

static void bind_targets(jctx *c, const jnode *n, jv item)
{
    if (!n->name2) {
        jinja_set_var(c, n->name, item);
        return;
    }
    if (item.t != JV_LIST || item.u.l->n != 2) jfail(c, n->line, "cannot unpack %s into 2 names", jv_type_name(item));
    jinja_set_var(c, n->name, item.u.l->v[0]);
    jinja_set_var(c, n->name2, item.u.l->v[1]);
}

static void exec_for(jctx *c, const jnode *n)
{
    jlist *all = jinja_iter(c, n->line, jinja_eval(c, n->a));
    jlist *items = all;
    jframe *outer = c->frame;
    if (n->b) {   /* {% for x in xs if cond %}: loop.* counts only the kept items */
        items = jv_list(c).u.l;
        for (size_t i = 0; i < all->n; i++) {
            push_frame(c, outer);
            bind_targets(c, n, all->v[i]);
            if (jv_truthy(jinja_eval(c, n->b))) jl_push(c, items, all->v[i]);
            c->frame = outer;
        }
    }
    for (size_t i = 0; i < items->n; i++) {
        push_frame(c, outer);
        bind_targets(c, n, items->v[i]);
        jv loop = jv_dict(c);
        jdict *d = loop.u.d;
        int64_t len = (int64_t)items->n, k = (int64_t)i;
        jd_set(c, d, jv_cstr(c, "index0"), jv_int(k));
        jd_set(c, d, jv_cstr(c, "index"), jv_int(k + 1));
        jd_set(c, d, jv_cstr(c, "revindex0"), jv_int(len - k - 1));
        jd_set(c, d, jv_cstr(c, "revindex"), jv_int(len - k));
        jd_set(c, d, jv_cstr(c, "first"), jv_bool(k == 0));
        jd_set(c, d, jv_cstr(c, "last"), jv_bool(k == len - 1));
        jd_set(c, d, jv_cstr(c, "length"), jv_int(len));
        jd_set(c, d, jv_cstr(c, "previtem"), k > 0 ? items->v[k - 1] : jv_undef());
        jd_set(c, d, jv_cstr(c, "nextitem"), k + 1 < len ? items->v[k + 1] : jv_undef());
        jinja_set_var(c, "loop", loop);
        jinja_exec(c, n->body, n->nbody);
        c->frame = outer;
        int ctl = c->loop_ctl;
        c->loop_ctl = 0;
        if (ctl == 1) break;
    }
    if (items->n == 0 && n->nbody2) jinja_exec(c, n->body2, n->nbody2);
}

void jinja_exec(jctx *c, jnode **body, int nb)
{
    for (int i = 0; i < nb && !c->loop_ctl; i++) {
        const jnode *n = body[i];
        switch (n->kind) {
        case N_TEXT: emit(c, n->lit); break;
        case N_OUT: emit(c, jinja_eval(c, n->a)); break;
        case N_IF:
            if (jv_truthy(jinja_eval(c, n->a))) jinja_exec(c, n->body, n->nbody);
            else jinja_exec(c, n->body2, n->nbody2);
            break;
        case N_FOR: exec_for(c, n); break;
        case N_SET:
            if (n->name2) {
                jv ns = lookup(c, n->name);
                if (ns.t != JV_DICT || !ns.u.d->ns) jfail(c, n->line, "cannot set an attribute of '%s' (not a namespace)", n->name);
                jd_set(c, ns.u.d, jv_cstr(c, n->name2), jinja_eval(c, n->a));
            } else {
                jinja_set_var(c, n->name, jinja_eval(c, n->a));
            }
            break;
        case N_SETBLOCK: jinja_set_var(c, n->name, capture(c, n->body, n->nbody)); break;
        case N_MACRO: {
            jv f = jv_func(c, n->name, NULL, jv_undef());
            f.u.fn->macro = n;
            jinja_set_var(c, n->name, f);
            break;
        }
        case N_BREAK: c->loop_ctl = 1; break;
        case N_CONTINUE: c->loop_ctl = 2; break;
        case N_BLOCK: jinja_exec(c, n->body, n->nbody); break;
        default: jfail(c, n->line, "expression used as a statement");
        }
    }
}
