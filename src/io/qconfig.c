/* config.json quantization entries: parse, look up by module path, build, write back.
 *
 * The object (under "quantization", else "quantization_config") maps module paths to an entry
 * or false; its top-level "bits"/"group_size"/"mode" are the default (MLX's convention).  Other
 * scalar members (e.g. "quant_method") are ignored; values are checked strictly, unknown keys
 * inside an entry are ignored so newer writers stay readable. */
#include "io.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LM_PREFIX "language_model."

typedef struct qitem {
    char *key;
    tcq_qentry e;
} qitem;

struct tcq_qconfig {
    qitem *items;                /* sorted by key */
    int64_t n, cap;
    int has_default;
    tcq_qentry def;
};

static int qitem_cmp(const void *a, const void *b) { return strcmp(((const qitem *)a)->key, ((const qitem *)b)->key); }

tcq_status tcq_qconfig_create(tcq_qconfig **out)
{
    if (!out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_qconfig_create: out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "quantization config");
}

void tcq_qconfig_free(tcq_qconfig *q)
{
    if (!q) return;
    for (int64_t i = 0; i < q->n; i++) free(q->items[i].key);
    free(q->items);
    free(q);
}

/* Validates an entry; module names it in the message. */
static tcq_status entry_check(const char *label, const char *module, const tcq_qentry *e)
{
    switch (e->mode) {
    case TCQ_QMODE_NONE: return TCQ_OK;
    case TCQ_QMODE_TRELLIS:
        if (e->bits < 1 || e->bits > TCQ_K_MAX)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': trellis bits %d outside 1..%d", label, module, e->bits,
                            TCQ_K_MAX);
        if (e->L < TCQ_L_MIN || e->L > TCQ_L_MAX)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': trellis L %d outside %d..%d", label, module, e->L,
                            TCQ_L_MIN, TCQ_L_MAX);
        if (e->axis != 0 && e->axis != 1)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': trellis axis %d is not 0 or 1", label, module, e->axis);
        if (tcq_block_check((tcq_block_params){.L = e->L, .k = e->bits, .T = e->group_size}) != TCQ_OK) {
            tcq_error_prefix("%s: module '%s': group_size %d", label, module, e->group_size);
            return TCQ_ERR_FORMAT;
        }
        if (e->interleaved && (e->bits != 3 || e->axis != 0 || e->group_size != 256))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': interleave needs bits 3, axis 0, group_size 256", label,
                            module);
        return TCQ_OK;
    case TCQ_QMODE_AFFINE:
        if (e->bits != 2 && e->bits != 3 && e->bits != 4 && e->bits != 5 && e->bits != 6 && e->bits != 8)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': affine bits %d not in {2,3,4,5,6,8}", label, module,
                            e->bits);
        if (e->group_size != 32 && e->group_size != 64 && e->group_size != 128)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': affine group_size %d not in {32,64,128}", label, module,
                            e->group_size);
        return TCQ_OK;
    }
    return tcq_fail(TCQ_ERR_INVALID_ARG, "%s: module '%s': bad mode %d", label, module, (int)e->mode);
}

static int get_int(json_t *o, const char *key, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < -1000000 || json_integer_value(v) > 1000000) return 0;
    *out = (int)json_integer_value(v);
    return 1;
}

/* Parses an entry object (or the default: the object itself with module "(default)"). */
static tcq_status entry_parse(const char *label, const char *module, json_t *v, tcq_qentry *e)
{
    memset(e, 0, sizeof *e);
    if (json_is_false(v)) return TCQ_OK;
    if (!json_is_object(v))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': entry is neither an object nor false", label, module);
    json_t *jm = json_object_get(v, "mode"), *jt = json_object_get(v, "trellis");
    const char *mode = jm ? json_string_value(jm) : (json_is_object(jt) ? "trellis" : "affine");
    if (!mode) return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': mode is not a string", label, module);
    if (!get_int(v, "bits", &e->bits))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': bits missing or not an integer", label, module);
    if (!get_int(v, "group_size", &e->group_size))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': group_size missing or not an integer", label, module);
    if (strcmp(mode, "affine") == 0) {
        e->mode = TCQ_QMODE_AFFINE;
    } else if (strcmp(mode, "trellis") == 0) {
        e->mode = TCQ_QMODE_TRELLIS;
        if (!json_is_object(jt))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': mode trellis without a \"trellis\" object", label, module);
        if (!get_int(jt, "L", &e->L))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': trellis L missing or not an integer", label, module);
        json_t *jc = json_object_get(jt, "code");
        if (jc && (!json_is_string(jc) || strcmp(json_string_value(jc), "1mad") != 0))
            return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: module '%s': trellis code %s%.32s%s is not \"1mad\"", label,
                            module, json_is_string(jc) ? "\"" : "", json_is_string(jc) ? json_string_value(jc) : "(not a string)",
                            json_is_string(jc) ? "\"" : "");
        e->axis = 1;
        if (json_object_get(jt, "axis") && !get_int(jt, "axis", &e->axis))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': trellis axis is not an integer", label, module);
        json_t *ji = json_object_get(jt, "interleave");
        if (ji && !json_is_boolean(ji))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': trellis interleave is not true/false", label, module);
        e->interleaved = json_is_true(ji);
    } else {
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: module '%s': quantization mode '%.32s' is not supported", label,
                        module, mode);
    }
    return entry_check(label, module, e);
}

/* Insert or replace, keeping items sorted. */
static tcq_status qset(tcq_qconfig *q, const char *module, const tcq_qentry *e)
{
    qitem key = {.key = (char *)module};
    int64_t lo = 0, hi = q->n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        int c = qitem_cmp(&q->items[mid], &key);
        if (c == 0) {
            q->items[mid].e = *e;
            return TCQ_OK;
        }
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    if (q->n == q->cap) {
        int64_t cap = q->cap ? 2 * q->cap : 64;
        qitem *ni = realloc(q->items, (size_t)cap * sizeof *ni);
        if (!ni) return tcq_fail(TCQ_ERR_NOMEM, "quantization config");
        q->items = ni;
        q->cap = cap;
    }
    char *k = strdup(module);
    if (!k) return tcq_fail(TCQ_ERR_NOMEM, "quantization config");
    memmove(&q->items[lo + 1], &q->items[lo], (size_t)(q->n - lo) * sizeof *q->items);
    q->items[lo] = (qitem){.key = k, .e = *e};
    q->n++;
    return TCQ_OK;
}

static tcq_status parse_object(tcq_qconfig *q, const char *label, json_t *obj)
{
    if (!json_is_object(obj)) return tcq_fail(TCQ_ERR_FORMAT, "%s: the quantization member is not an object", label);
    if (json_object_get(obj, "bits") || json_object_get(obj, "group_size")) {
        TCQ_TRY(entry_parse(label, "(default)", obj, &q->def));
        q->has_default = q->def.mode != TCQ_QMODE_NONE;
    }
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        if (!strcmp(key, "bits") || !strcmp(key, "group_size") || !strcmp(key, "mode")) continue;
        if (!strcmp(key, "trellis") && q->has_default && q->def.mode == TCQ_QMODE_TRELLIS) continue;
        if (json_is_true(v))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: module '%s': entry is true (want an object or false)", label, key);
        if (!json_is_object(v) && !json_is_false(v)) continue; /* scalar metadata such as quant_method */
        tcq_qentry e;
        TCQ_TRY(entry_parse(label, key, v, &e));
        TCQ_TRY(qset(q, key, &e));
    }
    return TCQ_OK;
}

tcq_status tcq_qconfig_parse(const char *json, size_t len, const char *label, tcq_qconfig **out)
{
    if (!out || (!json && len)) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_qconfig_parse: NULL argument");
    *out = NULL;
    if (!label) label = "config.json";
    json_error_t jerr;
    json_t *root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", label, jerr.text, jerr.line,
                        jerr.column);
    tcq_qconfig *q = NULL;
    tcq_status s = tcq_qconfig_create(&q);
    if (s == TCQ_OK && !json_is_object(root)) s = tcq_fail(TCQ_ERR_FORMAT, "%s: not a JSON object", label);
    if (s == TCQ_OK) {
        json_t *obj = json_object_get(root, "quantization");
        if (!obj) obj = json_object_get(root, "quantization_config");
        if (obj && !json_is_null(obj)) s = parse_object(q, label, obj);
    }
    json_decref(root);
    if (s != TCQ_OK) {
        tcq_qconfig_free(q);
        return s;
    }
    *out = q;
    return TCQ_OK;
}

tcq_status tcq_qconfig_load(const char *path, tcq_qconfig **out)
{
    if (!path || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_qconfig_load: NULL argument");
    char *text;
    size_t len;
    TCQ_TRY(tcq_io_read_file(path, &text, &len));
    tcq_status s = tcq_qconfig_parse(text, len, path, out);
    free(text);
    return s;
}

static const qitem *qfind(const tcq_qconfig *q, const char *module)
{
    if (!q->n) return NULL;
    qitem key = {.key = (char *)module};
    return bsearch(&key, q->items, (size_t)q->n, sizeof *q->items, qitem_cmp);
}

/* The explicit entry of module under either prefix, or NULL. */
static const qitem *qfind_any(const tcq_qconfig *q, const char *module)
{
    const qitem *it = qfind(q, module);
    if (it) return it;
    const size_t pl = strlen(LM_PREFIX);
    if (strncmp(module, LM_PREFIX, pl) == 0) return qfind(q, module + pl);
    size_t ml = strlen(module);
    char buf[512], *alt = ml + pl < sizeof buf ? buf : malloc(ml + pl + 1);
    if (!alt) return NULL;
    memcpy(alt, LM_PREFIX, pl);
    memcpy(alt + pl, module, ml + 1);
    it = qfind(q, alt);
    if (alt != buf) free(alt);
    return it;
}

tcq_qentry tcq_qconfig_lookup(const tcq_qconfig *q, const char *module)
{
    tcq_qentry none = {0};
    if (!q || !module) return none;
    const qitem *it = qfind_any(q, module);
    if (it) return it->e;
    return q->has_default ? q->def : none;
}

tcq_qentry tcq_qconfig_resolve(const tcq_qconfig *q, const tcq_st_set *s, const char *module)
{
    tcq_qentry none = {0};
    if (!q || !module) return none;
    const qitem *it = qfind_any(q, module);
    if (it) return it->e;
    if (!q->has_default || !s) return q->has_default ? q->def : none;
    const size_t pl = strlen(LM_PREFIX), ml = strlen(module);
    char *name = malloc(ml + pl + 8);
    if (!name) return none;
    int quantized = 0;
    for (int alt = 0; alt < 2 && !quantized; alt++) {
        if (!alt)
            memcpy(name, module, ml + 1);
        else if (strncmp(module, LM_PREFIX, pl) == 0)
            memcpy(name, module + pl, ml - pl + 1);
        else {
            memcpy(name, LM_PREFIX, pl);
            memcpy(name + pl, module, ml + 1);
        }
        strcat(name, ".scales");
        quantized = tcq_st_set_find(s, name) != NULL;
    }
    free(name);
    return quantized ? q->def : none;
}

int64_t tcq_qconfig_count(const tcq_qconfig *q) { return q ? q->n : 0; }

const char *tcq_qconfig_entry(const tcq_qconfig *q, int64_t i, tcq_qentry *e)
{
    if (!q || i < 0 || i >= q->n) return NULL;
    if (e) *e = q->items[i].e;
    return q->items[i].key;
}

int tcq_qconfig_default(const tcq_qconfig *q, tcq_qentry *e)
{
    if (!q || !q->has_default) return 0;
    if (e) *e = q->def;
    return 1;
}

tcq_status tcq_qconfig_set(tcq_qconfig *q, const char *module, const tcq_qentry *e)
{
    if (!q || !module || !*module || !e) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_qconfig_set: NULL argument");
    if (!strcmp(module, "bits") || !strcmp(module, "group_size") || !strcmp(module, "mode"))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "quantization config: '%s' is not a module path", module);
    tcq_status s = entry_check("quantization config", module, e);
    if (s != TCQ_OK) return s == TCQ_ERR_FORMAT ? TCQ_ERR_INVALID_ARG : s;
    return qset(q, module, e);
}

tcq_status tcq_qconfig_set_default(tcq_qconfig *q, const tcq_qentry *e)
{
    if (!q) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_qconfig_set_default: q is NULL");
    if (!e || e->mode == TCQ_QMODE_NONE) {
        q->has_default = 0;
        return TCQ_OK;
    }
    tcq_status s = entry_check("quantization config", "(default)", e);
    if (s != TCQ_OK) return s == TCQ_ERR_FORMAT ? TCQ_ERR_INVALID_ARG : s;
    q->def = *e;
    q->has_default = 1;
    return TCQ_OK;
}

/* Adds the members of one entry to o (an entry object, or the top-level object for the default). */
static int entry_fill(json_t *o, const tcq_qentry *e)
{
    int ok = json_object_set_new(o, "bits", json_integer(e->bits)) == 0 &&
             json_object_set_new(o, "group_size", json_integer(e->group_size)) == 0 &&
             json_object_set_new(o, "mode", json_string(e->mode == TCQ_QMODE_TRELLIS ? "trellis" : "affine")) == 0;
    if (ok && e->mode == TCQ_QMODE_TRELLIS) {
        json_t *t = json_object();
        ok = t && json_object_set_new(t, "L", json_integer(e->L)) == 0 &&
             json_object_set_new(t, "code", json_string("1mad")) == 0 &&
             json_object_set_new(t, "axis", json_integer(e->axis)) == 0 &&
             (!e->interleaved || json_object_set_new(t, "interleave", json_true()) == 0);
        ok = ok && json_object_set(o, "trellis", t) == 0;
        json_decref(t);
    }
    return ok;
}

static json_t *qconfig_json(const tcq_qconfig *q)
{
    json_t *o = json_object();
    int ok = o != NULL;
    if (ok && q->has_default) ok = entry_fill(o, &q->def);
    for (int64_t i = 0; ok && i < q->n; i++) {
        json_t *v = q->items[i].e.mode == TCQ_QMODE_NONE ? json_false() : json_object();
        ok = v && (q->items[i].e.mode == TCQ_QMODE_NONE || entry_fill(v, &q->items[i].e)) &&
             json_object_set(o, q->items[i].key, v) == 0;
        json_decref(v);
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

tcq_status tcq_qconfig_to_json(const tcq_qconfig *q, char **out)
{
    if (!q || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_qconfig_to_json: NULL argument");
    json_t *o = qconfig_json(q);
    *out = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    return *out ? TCQ_OK : tcq_fail(TCQ_ERR_INVALID_ARG, "quantization config: cannot serialise (module name not UTF-8?)");
}

/* Least significant-digit count (15..17) at which every real of v reads back exactly, so
 * 1e-06 stays 1e-06 instead of jansson's default 9.9999999999999995e-07. */
static int real_precision(json_t *v, int p)
{
    if (json_is_real(v)) {
        const double x = json_real_value(v);
        char buf[64];
        while (p < 17) {
            snprintf(buf, sizeof buf, "%.*g", p, x);
            if (strtod(buf, NULL) == x) break;
            p++;
        }
        return p;
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach(v, k, m) p = real_precision(m, p);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m) p = real_precision(m, p);
    }
    return p;
}

tcq_status tcq_qconfig_apply(const char *config_json, size_t len, const tcq_qconfig *q, char **out)
{
    if (!q || !out || (!config_json && len)) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_qconfig_apply: NULL argument");
    *out = NULL;
    json_error_t jerr;
    json_t *root = config_json ? json_loadb(config_json, len, JSON_REJECT_DUPLICATES, &jerr) : json_object();
    if (!root)
        return tcq_fail(TCQ_ERR_FORMAT, "config.json: not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                        jerr.column);
    if (!json_is_object(root)) {
        json_decref(root);
        return tcq_fail(TCQ_ERR_FORMAT, "config.json: not a JSON object");
    }
    json_t *o = qconfig_json(q);
    int ok = o && json_object_set(root, "quantization", o) == 0 &&
             json_object_set_new(root, "quantization_config", json_deep_copy(o)) == 0;
    json_decref(o);
    char *text = ok ? json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(real_precision(root, 15))) : NULL;
    json_decref(root);
    if (!text) return tcq_fail(TCQ_ERR_NOMEM, "config.json: cannot serialise");
    size_t n = strlen(text);
    *out = malloc(n + 2);   /* with a final newline, as editors and HF write it */
    if (*out) {
        memcpy(*out, text, n);
        (*out)[n] = '\n';
        (*out)[n + 1] = 0;
    }
    free(text);
    return *out ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "config.json");
}
