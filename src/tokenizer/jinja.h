/* A Jinja subset for chat templates (tcq_chat_render): the internals shared by jinja_*.c.
 * Everything of one render lives in one arena, freed at the end; errors unwind by longjmp to
 * the render call, so no partial state needs cleaning up. */
#ifndef TCQ_JINJA_H
#define TCQ_JINJA_H

#include "tokenizer/tok_internal.h"

#include <setjmp.h>
#include <string.h>
#include <stdint.h>

typedef struct jctx jctx;
typedef struct jnode jnode;

typedef enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC } jv_type;

typedef struct jstr { size_t n; const char *p; } jstr;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;

typedef struct jv {
    jv_type t;
    int safe;                   /* a string marked |safe (Markup): "+" escapes its plain operand */
    union {
        int b;
        int64_t i;
        double f;
        jstr s;
        jlist *l;
        jdict *d;
        jfunc *fn;
    } u;
} jv;

struct jlist { jv *v; size_t n, cap; };
struct jdict { jv *k, *v; size_t n, cap; int ns; /* a namespace(): attributes may be set */ };

/* Call arguments: positional, then keyword. */
typedef struct jargs {
    jv *pos;
    int npos;
    const char **kwn;
    jv *kwv;
    int nkw;
} jargs;

typedef jv (*jbuiltin)(jctx *c, int line, const jfunc *f, const jargs *a);
struct jfunc {
    const char *name;
    jbuiltin fn;                /* builtin or bound method (of self, by name), NULL for a macro */
    jv self;
    const jnode *macro;
};

/* AST.  Statements and expressions share the node type. */
typedef enum {
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_BREAK, N_CONTINUE, N_BLOCK,
    E_LIT, E_NAME, E_ATTR, E_INDEX, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NOT, E_NEG, E_BIN, E_AND,
    E_OR, E_COND, E_LIST, E_DICT
} jnode_kind;

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT, OP_EQ, OP_NE,
               OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN } jop;

struct jnode {
    jnode_kind kind;
    int line;
    jop op;
    int neg;                    /* E_TEST: "is not" */
    jv lit;                     /* E_LIT; N_TEXT (string) */
    const char *name, *name2;   /* names: variable, attribute, filter, test; for/set targets */
    jnode *a, *b, *c;           /* operands; E_SLICE: a[b:c:d] with d in args[0] */
    jnode **args;               /* call/filter/test arguments, list items, dict keys, macro defaults */
    int nargs;
    const char **kwn;           /* keyword argument names; macro parameter names */
    jnode **kwv;                /* keyword argument values; dict values */
    int nkw;
    jnode **body, **body2;      /* block statements; else branch */
    int nbody, nbody2;
};

struct jctx {
    jmp_buf jb;
    struct jblock *arena;
    tok_buf out;
    struct jframe *frame, *root;
    const char *src;
    int loop_ctl;               /* 1 break, 2 continue */
    tcq_status status;          /* of the failure that unwound */
    int depth;                  /* macro calls */
    int nest;                   /* parser and value recursion, bounded so no input overflows the stack */
    size_t arena_bytes;         /* bounded by JINJA_MAX_ARENA */
};

/* Recursion bound of the parser and of str()/tojson()/comparisons of nested values. */
#define JINJA_MAX_NEST 200
/* A chat template's values and its rendered text are a few KB; these bounds turn a template that
 * asks for far more (a repetition in a loop, say) into an error instead of gigabytes. */
#define JINJA_MAX_ARENA ((size_t)256 << 20)
#define JINJA_MAX_OUT ((size_t)16 << 20)

/* Arena and errors. */
void *ja_alloc(jctx *c, size_t n);
void ja_free_all(jctx *c);
_Noreturn void jfail(jctx *c, int line, const char *fmt, ...) TCQ_PRINTF(3, 4);

/* Lexer output (jinja_lex.c) for the parser (jinja_parse.c). */
typedef enum { C_TEXT, C_OUT, C_STMT } ckind;
typedef struct chunk { ckind k; const char *p; size_t n; int line; } chunk;

typedef enum { K_EOF, K_NAME, K_INT, K_FLOAT, K_STR, K_OP } tkind;
typedef struct tok { tkind k; const char *p; size_t n; int64_t i; double f; jv s; } tok;

typedef struct parser {
    jctx *c;
    chunk *ch;
    int nch, ci;
    tok *tk;
    int ntk, ti, line;
} parser;

chunk *jinja_lex_template(jctx *c, const char *src, int *n);
/* Tokens of one {{ }} or {% %} chunk into ps->tk (ending with K_EOF). */
void jinja_lex_expr(parser *ps, const chunk *k);

/* Parse a template into its statement list. */
jnode **jinja_parse(jctx *c, const char *src, int *n);

/* Values. */
jv jv_str(jctx *c, const char *p, size_t n);
static inline jv jv_cstr(jctx *c, const char *s) { return jv_str(c, s, strlen(s)); }
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_bool(int b);
jv jv_none(void);
jv jv_undef(void);
jv jv_list(jctx *c);
jv jv_dict(jctx *c);
jv jv_func(jctx *c, const char *name, jbuiltin fn, jv self);
void jl_push(jctx *c, jlist *l, jv v);
void jd_set(jctx *c, jdict *d, jv k, jv v);
int jd_get(const jdict *d, const char *k, size_t n, jv *out);
int jv_truthy(jv v);
int jv_equal(jv a, jv b);
/* -1, 0, 1; fails on values that do not order. */
int jv_compare(jctx *c, int line, jv a, jv b);
/* str(v) as Python prints it, appended to b; repr: quote strings (inside lists). */
void jv_to_str(jctx *c, jv v, tok_buf *b, int repr);
jv jv_stringify(jctx *c, jv v);
/* json.dumps(v, ensure_ascii, indent (< 0: none), separators (NULL: Python's defaults), sort_keys). */
typedef struct jjson_opts {
    int indent, sort_keys, ensure_ascii;
    const char *item_sep, *key_sep;
} jjson_opts;
void jv_to_json(jctx *c, int line, jv v, tok_buf *b, const jjson_opts *o, int level);
const char *jv_type_name(jv v);
/* HTML escape as markupsafe.escape does. */
jv jv_escape(jctx *c, jstr s);
/* Length in code points of a string. */
size_t ju_len(jstr s);

/* Builtins (jinja_builtins.c). */
jv jinja_filter(jctx *c, int line, const char *name, jv v, const jargs *a);
int jinja_test(jctx *c, int line, const char *name, jv v, const jargs *a);
/* A.name for non-dict values (string/list/dict methods), or undefined. */
jv jinja_method(jctx *c, jv obj, const char *name);
/* A global function by name (range, namespace, raise_exception, dict, strftime_now), or undef. */
jv jinja_global(jctx *c, const char *name);
/* Iterate: the items of a list, the keys of a dict, the characters of a string. */
jlist *jinja_iter(jctx *c, int line, jv v);
/* Python's s[i], s[a:b:step] for strings and lists. */
jv jinja_index(jctx *c, int line, jv obj, jv idx);
jv jinja_slice(jctx *c, int line, jv obj, jv a, jv b, jv step);
/* A keyword argument by name, else positional index i, else def. */
jv jarg(const jargs *a, int i, const char *name, jv def);

/* Methods and string helpers (jinja_str.c). */
jv jinja_str_method(jctx *c, int line, const char *name, jstr s, const jargs *a);
jv jinja_dict_method(jctx *c, int line, const char *name, jdict *d, const jargs *a);
jv jinja_strip(jctx *c, jstr s, jv chars, int left, int right);
jv jinja_case(jctx *c, jstr s, int mode /* 0 lower, 1 upper, 2 title, 3 capitalize */);
jv jinja_replace(jctx *c, jstr s, jstr from, jstr to, int64_t count);

/* Evaluate statements (jinja_eval.c). */
void jinja_exec(jctx *c, jnode **body, int n);
jv jinja_eval(jctx *c, const jnode *e);
void jinja_set_var(jctx *c, const char *name, jv v);
/* The template's global scope (before the variables are set). */
void jinja_push_root(jctx *c);

#endif
