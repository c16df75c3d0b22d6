/* Jinja subset: a recursive-descent parser from the lexer's chunks and tokens to jnode trees. */
#include "tokenizer/jinja.h"

#include <stdio.h>
#include <stdlib.h>

static tok *peek(parser *ps) { return &ps->tk[ps->ti]; }
static int is_op(const tok *t, const char *op) { return t->k == K_OP && t->n == strlen(op) && memcmp(t->p, op, t->n) == 0; }
static int is_kw(const tok *t, const char *kw) { return t->k == K_NAME && t->n == strlen(kw) && memcmp(t->p, kw, t->n) == 0; }
static int accept_op(parser *ps, const char *op) { if (is_op(peek(ps), op)) { ps->ti++; return 1; } return 0; }
static int accept_kw(parser *ps, const char *kw) { if (is_kw(peek(ps), kw)) { ps->ti++; return 1; } return 0; }
static void expect_op(parser *ps, const char *op)
{
    if (!accept_op(ps, op)) jfail(ps->c, ps->line, "expected '%s' near '%.*s'", op, (int)peek(ps)->n, peek(ps)->p);
}
static const char *name_tok(parser *ps)
{
    tok *t = peek(ps);
    if (t->k != K_NAME) jfail(ps->c, ps->line, "expected a name near '%.*s'", (int)t->n, t->p);
    ps->ti++;
    char *s = ja_alloc(ps->c, t->n + 1);
    memcpy(s, t->p, t->n);
    s[t->n] = 0;
    return s;
}

static jnode *node(parser *ps, jnode_kind k)
{
    jnode *n = ja_alloc(ps->c, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = k;
    n->line = ps->line;
    return n;
}

static void push_node(parser *ps, jnode ***arr, int *n, int *cap, jnode *x)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        jnode **p = ja_alloc(ps->c, (size_t)nc * sizeof *p);
        if (*n) memcpy(p, *arr, (size_t)*n * sizeof *p);
        *arr = p;
        *cap = nc;
    }
    (*arr)[(*n)++] = x;
}

static jnode *parse_expr(parser *ps);
static jnode *parse_or(parser *ps);
static jnode *parse_unary(parser *ps, int with_filter);

/* (args, kw=args) after the '(' */
static void parse_call_args(parser *ps, jnode *n)
{
    int cap = 0, kcap = 0;
    while (!accept_op(ps, ")")) {
        if (n->nargs + n->nkw) expect_op(ps, ",");
        if (accept_op(ps, ")")) break;
        tok *t = peek(ps);
        if (t->k == K_NAME && is_op(&ps->tk[ps->ti + 1], "=")) {
            const char *k = name_tok(ps);
            ps->ti++;
            if (n->nkw == kcap) {
                kcap = kcap ? kcap * 2 : 4;
                const char **kn = ja_alloc(ps->c, (size_t)kcap * sizeof *kn);
                jnode **kv = ja_alloc(ps->c, (size_t)kcap * sizeof *kv);
                if (n->nkw) {
                    memcpy(kn, n->kwn, (size_t)n->nkw * sizeof *kn);
                    memcpy(kv, n->kwv, (size_t)n->nkw * sizeof *kv);
                }
                n->kwn = kn;
                n->kwv = kv;
            }
            n->kwn[n->nkw] = k;
            n->kwv[n->nkw++] = parse_expr(ps);
        } else {
            push_node(ps, &n->args, &n->nargs, &cap, parse_expr(ps));
        }
    }
}

static jnode *parse_primary(parser *ps)
{
    tok *t = peek(ps);
    jnode *n;
    if (t->k == K_NAME) {
        ps->ti++;
        n = node(ps, E_LIT);
        if (is_kw(t, "true") || is_kw(t, "True")) n->lit = jv_bool(1);
        else if (is_kw(t, "false") || is_kw(t, "False")) n->lit = jv_bool(0);
        else if (is_kw(t, "none") || is_kw(t, "None")) n->lit = jv_none();
        else {
            ps->ti--;
            n->kind = E_NAME;
            n->name = name_tok(ps);
        }
        return n;
    }
    if (t->k == K_INT || t->k == K_FLOAT) {
        ps->ti++;
        n = node(ps, E_LIT);
        n->lit = t->k == K_INT ? jv_int(t->i) : jv_float(t->f);
        return n;
    }
    if (t->k == K_STR) {
        ps->ti++;
        n = node(ps, E_LIT);
        n->lit = t->s;
        while (peek(ps)->k == K_STR) {   /* "a" "b" is "ab" */
            jv s2 = peek(ps)->s;
            ps->ti++;
            char *p = ja_alloc(ps->c, n->lit.u.s.n + s2.u.s.n + 1);
            memcpy(p, n->lit.u.s.p, n->lit.u.s.n);
            memcpy(p + n->lit.u.s.n, s2.u.s.p, s2.u.s.n);
            n->lit = jv_str(ps->c, p, n->lit.u.s.n + s2.u.s.n);
        }
        return n;
    }
    if (accept_op(ps, "(")) {
        if (accept_op(ps, ")")) return node(ps, E_LIST);
        jnode *e = parse_expr(ps);
        if (accept_op(ps, ",")) {   /* a tuple: a list here */
            jnode *l = node(ps, E_LIST);
            int cap = 0;
            push_node(ps, &l->args, &l->nargs, &cap, e);
            while (!accept_op(ps, ")")) {
                push_node(ps, &l->args, &l->nargs, &cap, parse_expr(ps));
                if (!accept_op(ps, ",")) { expect_op(ps, ")"); break; }
            }
            return l;
        }
        expect_op(ps, ")");
        return e;
    }
    if (accept_op(ps, "[")) {
        n = node(ps, E_LIST);
        int cap = 0;
        while (!accept_op(ps, "]")) {
            push_node(ps, &n->args, &n->nargs, &cap, parse_expr(ps));
            if (!accept_op(ps, ",")) { expect_op(ps, "]"); break; }
        }
        return n;
    }
    if (accept_op(ps, "{")) {
        n = node(ps, E_DICT);
        int cap = 0, vcap = 0;
        while (!accept_op(ps, "}")) {
            push_node(ps, &n->args, &n->nargs, &cap, parse_expr(ps));
            expect_op(ps, ":");
            push_node(ps, &n->kwv, &n->nkw, &vcap, parse_expr(ps));
            if (!accept_op(ps, ",")) { expect_op(ps, "}"); break; }
        }
        return n;
    }
    jfail(ps->c, ps->line, "unexpected '%.*s'", (int)t->n, t->p);
}

static jnode *parse_postfix(parser *ps, jnode *n)
{
    for (;;) {
        if (accept_op(ps, ".")) {
            jnode *a = node(ps, E_ATTR);
            a->a = n;
            if (peek(ps)->k == K_INT) {   /* x.0 is x[0] */
                a->kind = E_INDEX;
                a->b = node(ps, E_LIT);
                a->b->lit = jv_int(peek(ps)->i);
                ps->ti++;
            } else {
                a->name = name_tok(ps);
            }
            n = a;
        } else if (accept_op(ps, "[")) {
            jnode *parts[3] = {NULL, NULL, NULL};
            int k = 0, slice = 0;
            for (;;) {
                if (is_op(peek(ps), ":")) {
                    ps->ti++;
                    slice = 1;
                    if (++k > 2) jfail(ps->c, ps->line, "bad slice");
                    continue;
                }
                if (accept_op(ps, "]")) break;
                parts[k] = parse_expr(ps);
            }
            jnode *s = node(ps, slice ? E_SLICE : E_INDEX);
            s->a = n;
            s->b = parts[0];
            s->c = parts[1];
            if (slice) {
                s->args = ja_alloc(ps->c, sizeof *s->args);
                s->args[0] = parts[2];
                s->nargs = 1;
            } else if (!parts[0]) {
                jfail(ps->c, ps->line, "empty subscript");
            }
            n = s;
        } else if (accept_op(ps, "(")) {
            jnode *call = node(ps, E_CALL);
            call->a = n;
            parse_call_args(ps, call);
            n = call;
        } else {
            return n;
        }
    }
}

static int starts_test_arg(const tok *t)
{
    static const char *kw[] = {"and", "or", "not", "if", "else", "in", "is", "for", "recursive"};
    if (t->k == K_INT || t->k == K_FLOAT || t->k == K_STR) return 1;
    if (t->k != K_NAME) return is_op(t, "[");
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (is_kw(t, kw[i])) return 0;
    return 1;
}

static jnode *parse_filters(parser *ps, jnode *n)
{
    for (;;) {
        if (accept_op(ps, "|")) {
            jnode *f = node(ps, E_FILTER);
            f->a = n;
            f->name = name_tok(ps);
            if (accept_op(ps, "(")) parse_call_args(ps, f);
            n = f;
        } else if (accept_kw(ps, "is")) {
            jnode *t = node(ps, E_TEST);
            t->a = n;
            t->neg = accept_kw(ps, "not");
            t->name = name_tok(ps);
            if (accept_op(ps, "(")) parse_call_args(ps, t);
            else if (starts_test_arg(peek(ps))) {
                t->args = ja_alloc(ps->c, sizeof *t->args);
                t->args[0] = parse_unary(ps, 0);
                t->nargs = 1;
            }
            n = t;
        } else {
            return n;
        }
    }
}

static jnode *parse_unary(parser *ps, int with_filter)
{
    jnode *n;
    if (ps->c->nest > JINJA_MAX_NEST) jfail(ps->c, ps->line, "nested deeper than %d levels", JINJA_MAX_NEST);
    if (accept_op(ps, "-")) {
        n = node(ps, E_NEG);
        ps->c->nest++;
        n->a = parse_unary(ps, 0);
        ps->c->nest--;
    } else if (accept_op(ps, "+")) {
        ps->c->nest++;
        n = parse_unary(ps, 0);
        ps->c->nest--;
    } else {
        n = parse_postfix(ps, parse_primary(ps));
    }
    return with_filter ? parse_filters(ps, n) : n;
}

static jnode *bin(parser *ps, jop op, jnode *a, jnode *b)
{
    jnode *n = node(ps, E_BIN);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(parser *ps)
{
    jnode *n = parse_unary(ps, 1);
    while (accept_op(ps, "**")) n = bin(ps, OP_POW, n, parse_unary(ps, 1));
    return n;
}

static jnode *parse_math2(parser *ps)
{
    jnode *n = parse_pow(ps);
    for (;;) {
        if (accept_op(ps, "*")) n = bin(ps, OP_MUL, n, parse_pow(ps));
        else if (accept_op(ps, "//")) n = bin(ps, OP_FLOORDIV, n, parse_pow(ps));
        else if (accept_op(ps, "/")) n = bin(ps, OP_DIV, n, parse_pow(ps));
        else if (accept_op(ps, "%")) n = bin(ps, OP_MOD, n, parse_pow(ps));
        else return n;
    }
}

static jnode *parse_concat(parser *ps)
{
    jnode *n = parse_math2(ps);
    while (accept_op(ps, "~")) n = bin(ps, OP_CONCAT, n, parse_math2(ps));
    return n;
}

static jnode *parse_math1(parser *ps)
{
    jnode *n = parse_concat(ps);
    for (;;) {
        if (accept_op(ps, "+")) n = bin(ps, OP_ADD, n, parse_concat(ps));
        else if (accept_op(ps, "-")) n = bin(ps, OP_SUB, n, parse_concat(ps));
        else return n;
    }
}

static jnode *parse_compare(parser *ps)
{
    jnode *n = parse_math1(ps), *last = NULL;   /* last: the latest comparison, for chains */
    for (;;) {
        jop op;
        if (accept_op(ps, "==")) op = OP_EQ;
        else if (accept_op(ps, "!=")) op = OP_NE;
        else if (accept_op(ps, "<=")) op = OP_LE;
        else if (accept_op(ps, ">=")) op = OP_GE;
        else if (accept_op(ps, "<")) op = OP_LT;
        else if (accept_op(ps, ">")) op = OP_GT;
        else if (accept_kw(ps, "in")) op = OP_IN;
        else if (is_kw(peek(ps), "not") && is_kw(&ps->tk[ps->ti + 1], "in")) {
            ps->ti += 2;
            op = OP_NOTIN;
        } else return n;
        if (!last) {
            n = last = bin(ps, op, n, parse_math1(ps));
            continue;
        }
        /* a < b < c is (a < b) and (b < c) */
        jnode *cmp = bin(ps, op, last->b, parse_math1(ps)), *and = node(ps, E_AND);
        and->a = n;
        and->b = cmp;
        n = and;
        last = cmp;
    }
}

static jnode *parse_not(parser *ps)
{
    if (accept_kw(ps, "not")) {
        jnode *n = node(ps, E_NOT);
        if (++ps->c->nest > JINJA_MAX_NEST) jfail(ps->c, ps->line, "nested deeper than %d levels", JINJA_MAX_NEST);
        n->a = parse_not(ps);
        ps->c->nest--;
        return n;
    }
    return parse_compare(ps);
}

static jnode *parse_and(parser *ps)
{
    jnode *n = parse_not(ps);
    while (accept_kw(ps, "and")) {
        jnode *a = node(ps, E_AND);
        a->a = n;
        a->b = parse_not(ps);
        n = a;
    }
    return n;
}

static jnode *parse_or(parser *ps)
{
    jnode *n = parse_and(ps);
    while (accept_kw(ps, "or")) {
        jnode *o = node(ps, E_OR);
        o->a = n;
        o->b = parse_and(ps);
        n = o;
    }
    return n;
}

static jnode *parse_expr(parser *ps)
{
    if (++ps->c->nest > JINJA_MAX_NEST) jfail(ps->c, ps->line, "nested deeper than %d levels", JINJA_MAX_NEST);
    jnode *n = parse_or(ps);
    while (accept_kw(ps, "if")) {
        jnode *c = node(ps, E_COND);
        c->a = parse_or(ps);   /* condition */
        c->b = n;              /* value if true */
        c->c = accept_kw(ps, "else") ? parse_expr(ps) : NULL;
        n = c;
    }
    ps->c->nest--;
    return n;
}

static void expect_end(parser *ps)
{
    if (peek(ps)->k != K_EOF) jfail(ps->c, ps->line, "unexpected '%.*s' at the end of a tag", (int)peek(ps)->n, peek(ps)->p);
}

/* Statements up to one of the end keywords (NULL-terminated list); returns the keyword found,
 * with the parser positioned after it inside that tag. */
static const char *parse_body(parser *ps, const char *const *ends, jnode ***out, int *nout);

static jnode *parse_stmt_in(parser *ps, const char *kw);

static jnode *parse_stmt(parser *ps, const char *kw)
{
    if (++ps->c->nest > JINJA_MAX_NEST) jfail(ps->c, ps->line, "nested deeper than %d levels", JINJA_MAX_NEST);
    jnode *n = parse_stmt_in(ps, kw);
    ps->c->nest--;
    return n;
}

static jnode *parse_stmt_in(parser *ps, const char *kw)
{
    jnode *n;
    if (!strcmp(kw, "if")) {
        n = node(ps, N_IF);
        n->a = parse_expr(ps);
        expect_end(ps);
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        const char *e = parse_body(ps, ends, &n->body, &n->nbody);
        if (!strcmp(e, "elif")) {
            jnode *sub = parse_stmt(ps, "if");   /* the elif chain nests; its endif closes all */
            n->body2 = ja_alloc(ps->c, sizeof *n->body2);
            n->body2[0] = sub;
            n->nbody2 = 1;
        } else if (!strcmp(e, "else")) {
            expect_end(ps);
            static const char *const ends2[] = {"endif", NULL};
            parse_body(ps, ends2, &n->body2, &n->nbody2);
            expect_end(ps);
        } else {
            expect_end(ps);
        }
        return n;
    }
    if (!strcmp(kw, "for")) {
        n = node(ps, N_FOR);
        n->name = name_tok(ps);
        if (accept_op(ps, ",")) n->name2 = name_tok(ps);
        if (!accept_kw(ps, "in")) jfail(ps->c, ps->line, "expected 'in' in for");
        n->a = parse_or(ps);
        if (accept_kw(ps, "if")) n->b = parse_or(ps);
        accept_kw(ps, "recursive");
        expect_end(ps);
        static const char *const ends[] = {"else", "endfor", NULL};
        const char *e = parse_body(ps, ends, &n->body, &n->nbody);
        expect_end(ps);
        if (!strcmp(e, "else")) {
            static const char *const ends2[] = {"endfor", NULL};
            parse_body(ps, ends2, &n->body2, &n->nbody2);
            expect_end(ps);
        }
        return n;
    }
    if (!strcmp(kw, "set")) {
        n = node(ps, N_SET);
        n->name = name_tok(ps);
        if (accept_op(ps, ".")) n->name2 = name_tok(ps);
        if (accept_op(ps, "=")) {
            n->a = parse_expr(ps);
            expect_end(ps);
            return n;
        }
        expect_end(ps);
        n->kind = N_SETBLOCK;
        static const char *const ends[] = {"endset", NULL};
        parse_body(ps, ends, &n->body, &n->nbody);
        expect_end(ps);
        return n;
    }
    if (!strcmp(kw, "macro")) {
        n = node(ps, N_MACRO);
        n->name = name_tok(ps);
        expect_op(ps, "(");
        int cap = 0;
        while (!accept_op(ps, ")")) {
            if (n->nkw) expect_op(ps, ",");
            if (n->nkw == cap) {
                cap = cap ? cap * 2 : 4;
                const char **kn = ja_alloc(ps->c, (size_t)cap * sizeof *kn);
                jnode **dv = ja_alloc(ps->c, (size_t)cap * sizeof *dv);
                if (n->nkw) {
                    memcpy(kn, n->kwn, (size_t)n->nkw * sizeof *kn);
                    memcpy(dv, n->kwv, (size_t)n->nkw * sizeof *dv);
                }
                n->kwn = kn;
                n->kwv = dv;
            }
            n->kwn[n->nkw] = name_tok(ps);
            n->kwv[n->nkw++] = accept_op(ps, "=") ? parse_expr(ps) : NULL;
        }
        expect_end(ps);
        static const char *const ends[] = {"endmacro", NULL};
        parse_body(ps, ends, &n->body, &n->nbody);
        expect_end(ps);
        return n;
    }
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        n = node(ps, kw[0] == 'b' ? N_BREAK : N_CONTINUE);
        expect_end(ps);
        return n;
    }
    if (!strcmp(kw, "generation")) {   /* transformers' assistant-mask marker: renders its body */
        n = node(ps, N_BLOCK);
        expect_end(ps);
        static const char *const ends[] = {"endgeneration", NULL};
        parse_body(ps, ends, &n->body, &n->nbody);
        expect_end(ps);
        return n;
    }
    jfail(ps->c, ps->line, "unsupported tag '%s'", kw);
}

static const char *parse_body(parser *ps, const char *const *ends, jnode ***out, int *nout)
{
    int cap = 0;
    *out = NULL;
    *nout = 0;
    while (ps->ci < ps->nch) {
        chunk *k = &ps->ch[ps->ci++];
        ps->line = k->line;
        if (k->k == C_TEXT) {
            jnode *t = node(ps, N_TEXT);
            t->lit = jv_str(ps->c, k->p, k->n);
            push_node(ps, out, nout, &cap, t);
            continue;
        }
        jinja_lex_expr(ps, k);
        if (k->k == C_OUT) {
            jnode *o = node(ps, N_OUT);
            o->a = parse_expr(ps);
            expect_end(ps);
            push_node(ps, out, nout, &cap, o);
            continue;
        }
        const char *kw = name_tok(ps);
        for (int i = 0; ends && ends[i]; i++)
            if (!strcmp(kw, ends[i])) return ends[i];
        push_node(ps, out, nout, &cap, parse_stmt(ps, kw));
    }
    if (ends) {
        int k = 0;
        while (ends[k + 1]) k++;
        jfail(ps->c, ps->line, "missing {%% %s %%}", ends[k]);
    }
    return NULL;
}

jnode **jinja_parse(jctx *c, const char *src, int *n)
{
    parser ps = {0};
    ps.c = c;
    ps.ch = jinja_lex_template(c, src, &ps.nch);
    jnode **body;
    parse_body(&ps, NULL, &body, n);
    return body;
}
