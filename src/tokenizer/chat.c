/* tcq_chat_render: the variables transformers' apply_chat_template passes, rendered by the
 * Jinja subset of jinja_*.c. */
#include "tokenizer/jinja.h"

#include <stdlib.h>

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
        jl_push(c, list.u.l, m);
    }
    jinja_set_var(c, "messages", list);
    /* transformers passes tools and documents as None when there are none */
    jinja_set_var(c, "tools", jv_none());
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
