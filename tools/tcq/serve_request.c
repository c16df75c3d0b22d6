/* JSON body -> srv_request.  Pure: no I/O, no model, so the fuzz target runs it alone.  Every
 * rejection names the field, as OpenAI's "param". */
#include "serve.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct perr {
    char *err, *param;
    size_t err_cap, param_cap;
} perr;

static int fail(perr *e, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, e->err_cap, fmt, ap);
    va_end(ap);
    snprintf(e->param, e->param_cap, "%s", param);
    return -1;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* a JSON string (embedded NULs rejected: the tokenizer and the template take C strings) */
static int get_string(perr *e, const char *param, json_t *v, char **out)
{
    if (!json_is_string(v)) return fail(e, param, "'%s' must be a string", param);
    const size_t n = json_string_length(v);
    if (memchr(json_string_value(v), 0, n)) return fail(e, param, "'%s' contains a NUL character", param);
    *out = dup_n(json_string_value(v), n);
    return *out ? 0 : fail(e, param, "out of memory");
}

static int get_number(perr *e, const char *param, json_t *v, double lo, double hi, double *out)
{
    if (!json_is_number(v)) return fail(e, param, "'%s' must be a number", param);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return fail(e, param, "'%s' must be in [%g, %g], got %g", param, lo, hi, d);
    *out = d;
    return 0;
}

static int get_int(perr *e, const char *param, json_t *v, long long lo, long long hi, long long *out)
{
    if (!json_is_integer(v)) return fail(e, param, "'%s' must be an integer", param);
    long long i = json_integer_value(v);
    if (i < lo || i > hi) return fail(e, param, "'%s' must be in [%lld, %lld], got %lld", param, lo, hi, i);
    *out = i;
    return 0;
}

static int get_bool(perr *e, const char *param, json_t *v, int *out)
{
    if (!json_is_boolean(v)) return fail(e, param, "'%s' must be a boolean", param);
    *out = json_is_true(v);
    return 0;
}

/* content: a string, null, or an array of {"type": "text", "text": ...} parts (joined) */
static int get_content(perr *e, const char *param, json_t *v, char **out)
{
    if (json_is_null(v) || !v) {
        *out = dup_n("", 0);
        return *out ? 0 : fail(e, param, "out of memory");
    }
    if (json_is_string(v)) return get_string(e, param, v, out);
    if (!json_is_array(v)) return fail(e, param, "'%s' must be a string or an array of text parts", param);
    size_t total = 0, i;
    json_t *p;
    char sub[96];
    json_array_foreach(v, i, p) {
        snprintf(sub, sizeof sub, "%s[%zu]", param, i);
        json_t *type = json_object_get(p, "type"), *text = json_object_get(p, "text");
        if (!json_is_object(p) || !json_is_string(type) || strcmp(json_string_value(type), "text") != 0)
            return fail(e, sub, "'%s' must be a part of type \"text\" (only text is supported)", sub);
        snprintf(sub, sizeof sub, "%s[%zu].text", param, i);
        if (!json_is_string(text)) return fail(e, sub, "'%s' must be a string", sub);
        if (memchr(json_string_value(text), 0, json_string_length(text)))
            return fail(e, sub, "'%s' contains a NUL character", sub);
        total += json_string_length(text);
    }
    char *s = malloc(total + 1);
    if (!s) return fail(e, param, "out of memory");
    size_t at = 0;
    json_array_foreach(v, i, p) {
        json_t *text = json_object_get(p, "text");
        memcpy(s + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    s[at] = 0;
    *out = s;
    return 0;
}

static int parse_messages(perr *e, json_t *v, srv_request *r)
{
    if (!json_is_array(v)) return fail(e, "messages", "'messages' must be an array");
    const size_t n = json_array_size(v);
    if (n == 0) return fail(e, "messages", "'messages' must not be empty");
    if (n > SRV_MAX_MESSAGES) return fail(e, "messages", "'messages' has %zu entries, at most %d", n, SRV_MAX_MESSAGES);
    r->msgs = calloc(n, sizeof *r->msgs);
    if (!r->msgs) return fail(e, "messages", "out of memory");
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    char param[64];
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(v, i);
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) return fail(e, param, "'%s' must be an object", param);
        snprintf(param, sizeof param, "messages[%zu].role", i);
        json_t *role = json_object_get(m, "role");
        if (!role) return fail(e, param, "'%s' is missing", param);
        char *rs = NULL;
        if (get_string(e, param, role, &rs)) return -1;
        r->msgs[i].role = rs;
        r->n_msgs = (int)i + 1;
        int known = 0;
        for (size_t k = 0; k < sizeof roles / sizeof *roles; k++) known |= strcmp(rs, roles[k]) == 0;
        if (!known) return fail(e, param, "'%s' must be system, developer, user, assistant or tool", param);
        if (!strcmp(rs, "developer")) {   /* OpenAI's newer name for the system turn */
            free(rs);
            r->msgs[i].role = dup_n("system", 6);
            if (!r->msgs[i].role) return fail(e, param, "out of memory");
        }
        snprintf(param, sizeof param, "messages[%zu].content", i);
        if (get_content(e, param, json_object_get(m, "content"), &r->msgs[i].content)) return -1;
    }
    return 0;
}

static int parse_stop(perr *e, json_t *v, srv_request *r)
{
    if (json_is_null(v)) return 0;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0) return 0;
        if (get_string(e, "stop", v, &r->stop[0])) return -1;
        r->n_stop = 1;
        return 0;
    }
    if (!json_is_array(v)) return fail(e, "stop", "'stop' must be a string or an array of strings");
    if (json_array_size(v) > SRV_MAX_STOP)
        return fail(e, "stop", "'stop' has %zu entries, at most %d", json_array_size(v), SRV_MAX_STOP);
    size_t i;
    json_t *s;
    char param[32];
    json_array_foreach(v, i, s) {
        snprintf(param, sizeof param, "stop[%zu]", i);
        if (!json_is_string(s)) return fail(e, param, "'%s' must be a string", param);
        if (json_string_length(s) == 0) continue;
        if (get_string(e, param, s, &r->stop[r->n_stop])) return -1;
        r->n_stop++;
    }
    return 0;
}

static int parse_object(perr *e, json_t *root, srv_kind kind, srv_request *r)
{
    if (!json_is_object(root)) return fail(e, "", "the request body must be a JSON object");
    json_t *v;
    if ((v = json_object_get(root, "model")) && !json_is_null(v) && get_string(e, "model", v, &r->model)) return -1;
    if (kind == SRV_CHAT) {
        if (!(v = json_object_get(root, "messages"))) return fail(e, "messages", "'messages' is missing");
        if (parse_messages(e, v, r)) return -1;
    } else {
        if (!(v = json_object_get(root, "prompt"))) return fail(e, "prompt", "'prompt' is missing");
        if (json_is_array(v)) {   /* a list of one prompt is the same request */
            if (json_array_size(v) != 1)
                return fail(e, "prompt", "'prompt' must be a string (or a list of one string)");
            v = json_array_get(v, 0);
        }
        if (get_string(e, "prompt", v, &r->prompt)) return -1;
    }
    if ((v = json_object_get(root, "stream")) && !json_is_null(v) && get_bool(e, "stream", v, &r->stream)) return -1;
    if ((v = json_object_get(root, "stream_options")) && !json_is_null(v)) {
        if (!json_is_object(v)) return fail(e, "stream_options", "'stream_options' must be an object");
        json_t *u = json_object_get(v, "include_usage");
        if (u && !json_is_null(u) && get_bool(e, "stream_options.include_usage", u, &r->include_usage)) return -1;
    }
    long long li = 0;
    const char *mt = kind == SRV_CHAT && json_object_get(root, "max_completion_tokens") ? "max_completion_tokens"
                                                                                        : "max_tokens";
    if ((v = json_object_get(root, mt)) && !json_is_null(v)) {
        if (get_int(e, mt, v, 1, 1 << 30, &li)) return -1;
        r->max_tokens = (int)li;
    }
    if ((v = json_object_get(root, "temperature")) && !json_is_null(v) &&
        get_number(e, "temperature", v, 0, 2, &r->temperature))
        return -1;
    if ((v = json_object_get(root, "top_p")) && !json_is_null(v) && get_number(e, "top_p", v, 0, 1, &r->top_p))
        return -1;
    if ((v = json_object_get(root, "min_p")) && !json_is_null(v) && get_number(e, "min_p", v, 0, 1, &r->min_p))
        return -1;
    if ((v = json_object_get(root, "top_k")) && !json_is_null(v)) {
        if (get_int(e, "top_k", v, 0, 1 << 30, &li)) return -1;
        r->top_k = (int)li;
    }
    if ((v = json_object_get(root, "seed")) && !json_is_null(v)) {
        if (!json_is_integer(v)) return fail(e, "seed", "'seed' must be an integer");
        r->seed = (uint64_t)json_integer_value(v);
    }
    if ((v = json_object_get(root, "n")) && !json_is_null(v)) {
        if (get_int(e, "n", v, 1, 1, &li)) return -1;
    }
    if ((v = json_object_get(root, "stop")) && parse_stop(e, v, r)) return -1;
    if ((v = json_object_get(root, "ignore_eos")) && !json_is_null(v) && get_bool(e, "ignore_eos", v, &r->ignore_eos))
        return -1;
    if ((v = json_object_get(root, "chat_template_kwargs")) && !json_is_null(v)) {
        if (!json_is_object(v)) return fail(e, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        json_t *t = json_object_get(v, "enable_thinking");
        if (t && !json_is_null(t) && get_bool(e, "chat_template_kwargs.enable_thinking", t, &r->enable_thinking))
            return -1;
    }
    return 0;
}

int srv_request_parse(const char *body, size_t len, srv_kind kind, srv_request *out, char *err, size_t err_cap,
                      char *param, size_t param_cap)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->max_tokens = -1;
    out->temperature = 1.0;
    out->top_p = 1.0;
    out->enable_thinking = -1;
    perr e = {err, param, err_cap, param_cap};
    if (err_cap) err[0] = 0;
    if (param_cap) param[0] = 0;
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &je);   /* a NUL is named by its field below */
    if (!root) return fail(&e, "", "malformed JSON at line %d, column %d: %s", je.line, je.column, je.text);
    int rc = parse_object(&e, root, kind, out);
    json_decref(root);
    return rc;
}

void srv_request_free(srv_request *r)
{
    if (!r) return;
    free(r->model);
    for (int i = 0; i < r->n_msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
    }
    free(r->msgs);
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    memset(r, 0, sizeof *r);
}
