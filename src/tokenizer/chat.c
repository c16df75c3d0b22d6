/* tcq_chat_render: the variables transformers' apply_chat_template passes, rendered by the
 * Jinja subset of jinja_*.c. */
#include "tokenizer/jinja.h"

#include <jansson.h>
#include <stdlib.h>

static jv from_json(jctx *c, const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jv d = jv_dict(c);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) jd_set(c, d.u.d, jv_cstr(c, k), from_json(c, v));
        return d;
    }
    case JSON_ARRAY: {
        jv l = jv_list(c);
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) jl_push(c, l.u.l, from_json(c, v));
        return l;
    }
    case JSON_STRING: return jv_str(c, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(1);
    case JSON_FALSE: return jv_bool(0);
    default: return jv_none();
    }
}

/* A JSON argument of the caller as a value; want: JSON_OBJECT or JSON_ARRAY. */
static jv parse_arg(jctx *c, const char *text, json_type want, const char *what)
{
    json_error_t err;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &err);
    if (!j || json_typeof(j) != want) {
        c->status = tcq_fail(TCQ_ERR_INVALID_ARG, "chat: %s is not a JSON %s%s%s", what,
                             want == JSON_OBJECT ? "object" : "array", j ? "" : ": ", j ? "" : err.text);
        json_decref(j);
        longjmp(c->jb, 1);
    }
    jv v = from_json(c, j);
    json_decref(j);
    return v;
}

static void render(jctx *c, const char *tmpl, const tcq_chat_message *msgs, size_t n, const tcq_chat_opts *o)
{
    int nb;
    jnode **body = jinja_parse(c, tmpl, &nb);
    jinja_push_root(c);
    jv list = jv_list(c);
    for (size_t i = 0; i < n; i++) {
        jv m = jv_dict(c);
        jd_set(c, m.u.d, jv_cstr(c, "role"), msgs[i].role ? jv_cstr(c, msgs[i].role) : jv_none());
        jd_set(c, m.u.d, jv_cstr(c, "content"), msgs[i].content ? jv_cstr(c, msgs[i].content) : jv_none());
        if (msgs[i].extra_json) {
            jv x = parse_arg(c, msgs[i].extra_json, JSON_OBJECT, "message extra_json");
            for (size_t k = 0; k < x.u.d->n; k++) jd_set(c, m.u.d, x.u.d->k[k], x.u.d->v[k]);
        }
        jl_push(c, list.u.l, m);
    }
    jinja_set_var(c, "messages", list);
    /* transformers passes tools and documents as None when there are none */
    jinja_set_var(c, "tools", o && o->tools_json ? parse_arg(c, o->tools_json, JSON_ARRAY, "tools_json") : jv_none());
    jinja_set_var(c, "documents", jv_none());
    jinja_set_var(c, "add_generation_prompt", jv_bool(o && o->add_generation_prompt));
    if (o && o->enable_thinking >= 0) jinja_set_var(c, "enable_thinking", jv_bool(o->enable_thinking));
    if (o && o->bos_token) jinja_set_var(c, "bos_token", jv_cstr(c, o->bos_token));
    if (o && o->eos_token) jinja_set_var(c, "eos_token", jv_cstr(c, o->eos_token));
    jinja_exec(c, body, nb);
    if (c->loop_ctl) jfail(c, 0, "break or continue outside a loop");
}

tcq_status tcq_chat_render(const char *tmpl, const tcq_chat_message *msgs, size_t n, const tcq_chat_opts *opts, char **out)
{
    if (!tmpl || (!msgs && n) || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_chat_render: NULL argument");
    *out = NULL;
    jctx *c = calloc(1, sizeof *c);
    if (!c) return tcq_fail(TCQ_ERR_NOMEM, "chat template: out of memory");
    tcq_status st = TCQ_OK;
    if (setjmp(c->jb) == 0) {
        render(c, tmpl, msgs, n, opts);
        if (tok_buf_put(&c->out, "", 0) != TCQ_OK) st = TCQ_ERR_NOMEM;
    } else {
        st = c->status ? c->status : TCQ_ERR_INTERNAL;
    }
    ja_free_all(c);
    if (st == TCQ_OK) *out = c->out.p;
    else tok_buf_free(&c->out);
    free(c);
    return st;
}

tcq_status tcq_tokenizer_apply_chat(const tcq_tokenizer *tok, const tcq_chat_message *msgs, size_t n,
                                    const tcq_chat_opts *opts, char **out)
{
    if (!tok || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_tokenizer_apply_chat: NULL argument");
    const char *t = tcq_tokenizer_chat_template(tok);
    if (!t) return tcq_fail(TCQ_ERR_NOT_FOUND, "tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja)");
    tcq_chat_opts o = {0, -1, NULL, NULL, NULL};
    if (opts) o = *opts;
    if (!o.bos_token) o.bos_token = tcq_tokenizer_piece(tok, tcq_tokenizer_bos(tok));
    if (!o.eos_token) o.eos_token = tcq_tokenizer_piece(tok, tcq_tokenizer_eos(tok));
    return tcq_chat_render(t, msgs, n, &o, out);
}
