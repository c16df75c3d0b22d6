/* tokenizer.json (Hugging Face tokenizers) and tokenizer_config.json. */
#include "tokenizer/tok_internal.h"

#include <jansson.h>
#include <string.h>

#define FAIL(S, ...) return tcq_fail(S, __VA_ARGS__)

static const char *jstr(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int jbool(const json_t *o, const char *key, int def)
{
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

static char *xstrdup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

/* pattern: {"String": s} or {"Regex": r}. */
static int jpattern(const json_t *o, const char **s)
{
    const json_t *p = json_object_get(o, "pattern");
    if ((*s = jstr(p, "String"))) return 1;
    if ((*s = jstr(p, "Regex"))) return 0;
    return -1;
}

static tcq_status load_vocab(tcq_tokenizer *t, const json_t *model, const json_t *added, const char *f)
{
    const json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab)) FAIL(TCQ_ERR_FORMAT, "%s: model.vocab is missing or not an object", f);
    int64_t max_id = -1;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (1 << 30))
            FAIL(TCQ_ERR_FORMAT, "%s: model.vocab[\"%s\"] is not a valid id", f, key);
        if (json_integer_value(v) > max_id) max_id = json_integer_value(v);
    }
    size_t i;
    json_array_foreach(added, i, v) {
        const json_t *id = json_object_get(v, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 30) ||
            !jstr(v, "content"))
            FAIL(TCQ_ERR_FORMAT, "%s: added_tokens[%zu] needs an integer id and a content string", f, i);
        if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
    }
    if (max_id < 0) FAIL(TCQ_ERR_FORMAT, "%s: empty vocabulary", f);
    t->n_vocab = (int32_t)(max_id + 1);
    t->pieces = calloc((size_t)t->n_vocab, sizeof *t->pieces);
    t->piece_len = calloc((size_t)t->n_vocab, sizeof *t->piece_len);
    t->special = calloc((size_t)t->n_vocab, 1);
    if (!t->pieces || !t->piece_len || !t->special) FAIL(TCQ_ERR_NOMEM, "%s: out of memory", f);
    TCQ_TRY(tok_strmap_init(&t->vocab, (uint32_t)json_object_size(vocab) + (uint32_t)json_array_size(added)));
    json_object_foreach((json_t *)vocab, key, v) {
        int32_t id = (int32_t)json_integer_value(v);
        size_t n = strlen(key);
        if (t->pieces[id]) FAIL(TCQ_ERR_FORMAT, "%s: model.vocab: id %d appears twice", f, (int)id);
        if (!(t->pieces[id] = xstrdup(key, n))) FAIL(TCQ_ERR_NOMEM, "%s: out of memory", f);
        t->piece_len[id] = (uint32_t)n;
        TCQ_TRY(tok_strmap_put(&t->vocab, t->pieces[id], (uint32_t)n, id));
    }
    t->n_added = (int)json_array_size(added);
    t->added = calloc((size_t)t->n_added + 1, sizeof *t->added);
    if (!t->added) FAIL(TCQ_ERR_NOMEM, "%s: out of memory", f);
    json_array_foreach(added, i, v) {
        tok_added *a = &t->added[i];
        const char *c = jstr(v, "content");
        a->id = (int32_t)json_integer_value(json_object_get(v, "id"));
        a->len = (uint32_t)strlen(c);
        if (a->len == 0) FAIL(TCQ_ERR_FORMAT, "%s: added_tokens[%zu]: empty content", f, i);
        if (!(a->content = xstrdup(c, a->len))) FAIL(TCQ_ERR_NOMEM, "%s: out of memory", f);
        a->special = jbool(v, "special", 0);
        a->lstrip = jbool(v, "lstrip", 0);
        a->rstrip = jbool(v, "rstrip", 0);
        t->special[a->id] = (unsigned char)a->special;
        if (!t->pieces[a->id]) {
            if (!(t->pieces[a->id] = xstrdup(c, a->len))) FAIL(TCQ_ERR_NOMEM, "%s: out of memory", f);
            t->piece_len[a->id] = a->len;
        }
        TCQ_TRY(tok_strmap_put(&t->vocab, a->content, a->len, a->id));
    }
    return TCQ_OK;
}

static tcq_status load_merges(tcq_tokenizer *t, const json_t *model, const char *f)
{
    const json_t *merges = json_object_get(model, "merges");
    if (!merges) return TCQ_OK;
    if (!json_is_array(merges)) FAIL(TCQ_ERR_FORMAT, "%s: model.merges is not an array", f);
    TCQ_TRY(tok_pairmap_init(&t->merges, (uint32_t)json_array_size(merges)));
    tok_buf cat = {0};
    size_t i;
    const json_t *m;
    tcq_status st = TCQ_OK;
    json_array_foreach(merges, i, m) {
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(m)) {   /* "a b" (older files) */
            a = json_string_value(m);
            const char *sp = strchr(a, ' ');
            if (!sp || sp == a || !sp[1] || strchr(sp + 1, ' ')) {
                st = tcq_fail(TCQ_ERR_FORMAT, "%s: model.merges[%zu] \"%s\" is not two pieces", f, i, a);
                break;
            }
            la = (size_t)(sp - a);
            b = sp + 1;
            lb = strlen(b);
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            la = strlen(a);
            lb = strlen(b);
        } else {
            st = tcq_fail(TCQ_ERR_FORMAT, "%s: model.merges[%zu] is neither \"a b\" nor [a, b]", f, i);
            break;
        }
        cat.n = 0;
        if ((st = tok_buf_put(&cat, a, la)) != TCQ_OK || (st = tok_buf_put(&cat, b, lb)) != TCQ_OK) break;
        int32_t ia = tok_strmap_get(&t->vocab, a, (uint32_t)la), ib = tok_strmap_get(&t->vocab, b, (uint32_t)lb);
        int32_t im = tok_strmap_get(&t->vocab, cat.p, (uint32_t)cat.n);
        if (ia < 0 || ib < 0 || im < 0) {
            st = tcq_fail(TCQ_ERR_FORMAT, "%s: model.merges[%zu]: \"%.*s\" + \"%.*s\" not in the vocabulary", f, i,
                          (int)la, a, (int)lb, b);
            break;
        }
        if ((st = tok_pairmap_put(&t->merges, ia, ib, (int32_t)i, im)) != TCQ_OK) break;
    }
    tok_buf_free(&cat);
    return st;
}

static tcq_status add_norm(tcq_tokenizer *t, const json_t *n, const char *f)
{
    if (!n || json_is_null(n)) return TCQ_OK;
    const char *type = jstr(n, "type");
    if (!type) FAIL(TCQ_ERR_FORMAT, "%s: normalizer without a type", f);
    if (strcmp(type, "Sequence") == 0) {
        size_t i;
        const json_t *c;
        json_array_foreach(json_object_get(n, "normalizers"), i, c) TCQ_TRY(add_norm(t, c, f));
        return TCQ_OK;
    }
    if (t->n_norms == TOK_MAX_STEPS) FAIL(TCQ_ERR_UNSUPPORTED, "%s: more than %d normalizers", f, TOK_MAX_STEPS);
    tok_norm *s = &t->norms[t->n_norms];
    memset(s, 0, sizeof *s);
    const char *a = NULL, *b = NULL;
    if (!strcmp(type, "NFC")) s->kind = NORM_NFC;
    else if (!strcmp(type, "NFD")) s->kind = NORM_NFD;
    else if (!strcmp(type, "NFKC")) s->kind = NORM_NFKC;
    else if (!strcmp(type, "NFKD")) s->kind = NORM_NFKD;
    else if (!strcmp(type, "Lowercase")) s->kind = NORM_LOWER;
    else if (!strcmp(type, "Strip")) {
        s->kind = NORM_STRIP;
        s->left = jbool(n, "strip_left", 1);
        s->right = jbool(n, "strip_right", 1);
    } else if (!strcmp(type, "Prepend")) {
        s->kind = NORM_PREPEND;
        if (!(a = jstr(n, "prepend"))) FAIL(TCQ_ERR_FORMAT, "%s: normalizer Prepend without \"prepend\"", f);
    } else if (!strcmp(type, "Replace")) {
        s->kind = NORM_REPLACE;
        if (jpattern(n, &a) != 1 || !(b = jstr(n, "content")))
            FAIL(TCQ_ERR_UNSUPPORTED, "%s: normalizer Replace: only a String pattern with content is supported", f);
    } else {
        FAIL(TCQ_ERR_UNSUPPORTED, "%s: normalizer type \"%s\" is not supported", f, type);
    }
    if ((a && !(s->a = xstrdup(a, strlen(a)))) || (b && !(s->b = xstrdup(b, strlen(b)))))
        FAIL(TCQ_ERR_NOMEM, "%s: out of memory", f);
    t->n_norms++;
    return TCQ_OK;
}

static const char *GPT2_RE = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static tcq_status add_pre(tcq_tokenizer *t, const json_t *p, const char *f)
{
    if (!p || json_is_null(p)) return TCQ_OK;
    const char *type = jstr(p, "type");
    if (!type) FAIL(TCQ_ERR_FORMAT, "%s: pre_tokenizer without a type", f);
    if (strcmp(type, "Sequence") == 0) {
        size_t i;
        const json_t *c;
        json_array_foreach(json_object_get(p, "pretokenizers"), i, c) TCQ_TRY(add_pre(t, c, f));
        return TCQ_OK;
    }
    if (t->n_pres == TOK_MAX_STEPS) FAIL(TCQ_ERR_UNSUPPORTED, "%s: more than %d pre-tokenizers", f, TOK_MAX_STEPS);
    tok_pre *s = &t->pres[t->n_pres];
    memset(s, 0, sizeof *s);
    char where[256];
    snprintf(where, sizeof where, "%s: pre_tokenizer %s", f, type);
    if (!strcmp(type, "ByteLevel")) {
        s->kind = PRE_BYTELEVEL;
        s->add_prefix_space = jbool(p, "add_prefix_space", 1);
        if (jbool(p, "use_regex", 1)) TCQ_TRY(tok_pre_compile(s, GPT2_RE, 0, where));
        s->behavior = SPLIT_ISOLATED;
    } else if (!strcmp(type, "Split")) {
        const char *pat, *beh = jstr(p, "behavior");
        int lit = jpattern(p, &pat);
        if (lit < 0) FAIL(TCQ_ERR_FORMAT, "%s: pattern missing", where);
        s->kind = PRE_SPLIT;
        s->invert = jbool(p, "invert", 0);
        if (!beh || !strcmp(beh, "Isolated")) s->behavior = SPLIT_ISOLATED;
        else if (!strcmp(beh, "Removed")) s->behavior = SPLIT_REMOVED;
        else if (!strcmp(beh, "MergedWithPrevious")) s->behavior = SPLIT_MERGED_PREV;
        else if (!strcmp(beh, "MergedWithNext")) s->behavior = SPLIT_MERGED_NEXT;
        else if (!strcmp(beh, "Contiguous")) s->behavior = SPLIT_CONTIGUOUS;
        else FAIL(TCQ_ERR_UNSUPPORTED, "%s: behavior \"%s\"", where, beh);
        TCQ_TRY(tok_pre_compile(s, pat, lit, where));
    } else if (!strcmp(type, "Metaspace")) {
        const char *r = jstr(p, "replacement"), *ps = jstr(p, "prepend_scheme");
        s->kind = PRE_METASPACE;
        snprintf(s->repl, sizeof s->repl, "%s", r ? r : "\xE2\x96\x81");
        s->prepend = ps ? (!strcmp(ps, "always") ? 2 : !strcmp(ps, "first") ? 1 : 0) : jbool(p, "add_prefix_space", 1) * 2;
        s->split = jbool(p, "split", 1);
    } else if (!strcmp(type, "Digits")) {
        s->kind = PRE_DIGITS;
        s->behavior = SPLIT_ISOLATED;
        TCQ_TRY(tok_pre_compile(s, jbool(p, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+", 0, where));
    } else if (!strcmp(type, "WhitespaceSplit")) {
        s->kind = PRE_WSPLIT;
        s->behavior = SPLIT_REMOVED;
        TCQ_TRY(tok_pre_compile(s, "\\s+", 0, where));
    } else if (!strcmp(type, "Whitespace")) {
        s->kind = PRE_SPLIT;
        s->behavior = SPLIT_REMOVED;
        s->invert = 1;
        TCQ_TRY(tok_pre_compile(s, "\\w+|[^\\w\\s]+", 0, where));
    } else {
        FAIL(TCQ_ERR_UNSUPPORTED, "%s: pre_tokenizer type \"%s\" is not supported", f, type);
    }
    t->n_pres++;
    return TCQ_OK;
}

static tcq_status add_dec(tok_decoder_desc *d, const json_t *p, const char *f)
{
    if (!p || json_is_null(p)) return TCQ_OK;
    const char *type = jstr(p, "type");
    if (!type) FAIL(TCQ_ERR_FORMAT, "%s: decoder without a type", f);
    if (!strcmp(type, "Sequence")) {
        size_t i;
        const json_t *c;
        json_array_foreach(json_object_get(p, "decoders"), i, c) TCQ_TRY(add_dec(d, c, f));
    } else if (!strcmp(type, "ByteLevel")) {
        d->byte_level = 1;
    } else if (!strcmp(type, "ByteFallback")) {
        d->byte_fallback = 1;
    } else if (!strcmp(type, "Fuse")) {
        /* decoding concatenates anyway */
    } else if (!strcmp(type, "Strip")) {
        const char *c = jstr(p, "content");
        json_int_t stop = json_integer_value(json_object_get(p, "stop"));
        if (!c || strlen(c) != 1 || stop != 0) FAIL(TCQ_ERR_UNSUPPORTED, "%s: decoder Strip: only a one-byte content with stop 0", f);
        d->strip_char = c[0];
        d->strip_start = (int)json_integer_value(json_object_get(p, "start"));
    } else if (!strcmp(type, "Replace") || !strcmp(type, "Metaspace")) {
        const char *from, *to = " ";
        if (!strcmp(type, "Replace")) {
            if (jpattern(p, &from) != 1 || !(to = jstr(p, "content")))
                FAIL(TCQ_ERR_UNSUPPORTED, "%s: decoder Replace: only a String pattern with content", f);
        } else {
            const char *ps = jstr(p, "prepend_scheme");
            from = jstr(p, "replacement");
            if (!from) from = "\xE2\x96\x81";
            if (ps ? strcmp(ps, "never") != 0 : jbool(p, "add_prefix_space", 1)) {
                d->strip_char = ' ';
                d->strip_start = 1;
            }
        }
        if (d->n_replace == 4) FAIL(TCQ_ERR_UNSUPPORTED, "%s: more than 4 Replace decoders", f);
        d->rep_from[d->n_replace] = xstrdup(from, strlen(from));
        d->rep_to[d->n_replace] = xstrdup(to, strlen(to));
        if (!d->rep_from[d->n_replace] || !d->rep_to[d->n_replace]) FAIL(TCQ_ERR_NOMEM, "%s: out of memory", f);
        d->n_replace++;
    } else {
        FAIL(TCQ_ERR_UNSUPPORTED, "%s: decoder type \"%s\" is not supported", f, type);
    }
    return TCQ_OK;
}

/* The ids a TemplateProcessing "single" template puts before and after the sequence. */
static tcq_status add_post(tcq_tokenizer *t, const json_t *p, const char *f)
{
    if (!p || json_is_null(p)) return TCQ_OK;
    const char *type = jstr(p, "type");
    if (!type) FAIL(TCQ_ERR_FORMAT, "%s: post_processor without a type", f);
    if (!strcmp(type, "Sequence")) {
        size_t i;
        const json_t *c;
        json_array_foreach(json_object_get(p, "processors"), i, c) TCQ_TRY(add_post(t, c, f));
        return TCQ_OK;
    }
    if (!strcmp(type, "ByteLevel")) return TCQ_OK;   /* offsets only */
    if (strcmp(type, "TemplateProcessing") != 0)
        FAIL(TCQ_ERR_UNSUPPORTED, "%s: post_processor type \"%s\" is not supported", f, type);
    int after = 0;
    size_t i;
    const json_t *item;
    json_array_foreach(json_object_get(p, "single"), i, item) {
        if (json_object_get(item, "Sequence")) {
            after = 1;
            continue;
        }
        const char *name = jstr(json_object_get(item, "SpecialToken"), "id");
        const json_t *ids = json_object_get(json_object_get(json_object_get(p, "special_tokens"), name ? name : ""), "ids");
        if (!name || !json_is_array(ids))
            FAIL(TCQ_ERR_FORMAT, "%s: post_processor.single[%zu]: unknown special token", f, i);
        size_t k;
        const json_t *id;
        json_array_foreach(ids, k, id) {
            int32_t v = (int32_t)json_integer_value(id);
            if (v < 0 || v >= t->n_vocab) FAIL(TCQ_ERR_FORMAT, "%s: post_processor: id %d out of range", f, (int)v);
            if ((after ? t->n_suffix : t->n_prefix) == 4) FAIL(TCQ_ERR_UNSUPPORTED, "%s: post_processor: over 4 ids", f);
            if (after) t->suffix[t->n_suffix++] = v;
            else t->prefix[t->n_prefix++] = v;
        }
    }
    return TCQ_OK;
}

/* A token named by tokenizer_config.json: "<s>" or {"content": "<s>", ...}. */
static int32_t config_token(const tcq_tokenizer *t, const json_t *v)
{
    const char *s = json_is_string(v) ? json_string_value(v) : jstr(v, "content");
    return s ? tcq_tokenizer_find(t, s) : -1;
}

tcq_status tok_load_config(tcq_tokenizer *t, const char *path)
{
    json_error_t err;
    /* reals: model_max_length is often 1e30, past what a JSON integer holds */
    json_t *c = json_load_file(path, JSON_DECODE_INT_AS_REAL, &err);
    if (!c) FAIL(TCQ_ERR_FORMAT, "%s: line %d: %s", path, err.line, err.text);
    tcq_status st = TCQ_OK;
    int32_t bos = config_token(t, json_object_get(c, "bos_token"));
    int32_t eos = config_token(t, json_object_get(c, "eos_token"));
    if (bos >= 0) t->bos = bos;
    if (eos >= 0) t->eos = eos;
    /* transformers rebuilds the Llama post-processor from add_bos_token / add_eos_token */
    const json_t *ab = json_object_get(c, "add_bos_token"), *ae = json_object_get(c, "add_eos_token");
    if (json_is_boolean(ab) && t->bos >= 0) {
        t->n_prefix = 0;
        if (json_is_true(ab)) t->prefix[t->n_prefix++] = t->bos;
    }
    if (json_is_boolean(ae) && t->eos >= 0) {
        t->n_suffix = 0;
        if (json_is_true(ae)) t->suffix[t->n_suffix++] = t->eos;
    }
    const json_t *ct = json_object_get(c, "chat_template");
    const char *tmpl = json_is_string(ct) ? json_string_value(ct) : NULL;
    if (json_is_array(ct)) {   /* [{"name": "default", "template": ...}, ...] */
        size_t i;
        const json_t *e;
        json_array_foreach(ct, i, e) {
            const char *name = jstr(e, "name");
            if (name && !strcmp(name, "default")) tmpl = jstr(e, "template");
        }
    }
    if (tmpl && !t->chat_template && !(t->chat_template = xstrdup(tmpl, strlen(tmpl))))
        st = tcq_fail(TCQ_ERR_NOMEM, "%s: out of memory", path);
    json_decref(c);
    return st;
}

tcq_status tok_load_json(tcq_tokenizer *t, const char *f)
{
    char *data;
    size_t len;
    TCQ_TRY(tok_read_file(f, &data, &len));
    json_error_t err;
    json_t *root = json_loadb(data, len, 0, &err);
    free(data);
    if (!root) FAIL(TCQ_ERR_FORMAT, "%s: line %d column %d: %s", f, err.line, err.column, err.text);
    tcq_status st = TCQ_OK;
    const json_t *model = json_object_get(root, "model");
    const json_t *added = json_object_get(root, "added_tokens");
    const char *mtype = jstr(model, "type");
    tok_decoder_desc dd = {0};
    if (!json_is_object(root) || !json_is_object(model)) st = tcq_fail(TCQ_ERR_FORMAT, "%s: no \"model\" object", f);
    else if (mtype && strcmp(mtype, "BPE") != 0)
        st = tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: model.type \"%s\" (only BPE is supported)", f, mtype);
    else if (added && !json_is_array(added)) st = tcq_fail(TCQ_ERR_FORMAT, "%s: added_tokens is not an array", f);
    else if ((jstr(model, "continuing_subword_prefix") && *jstr(model, "continuing_subword_prefix")) ||
             (jstr(model, "end_of_word_suffix") && *jstr(model, "end_of_word_suffix")))
        st = tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: BPE subword prefix/suffix is not supported", f);
    if (st == TCQ_OK) st = load_vocab(t, model, added, f);
    if (st == TCQ_OK) st = load_merges(t, model, f);
    if (st == TCQ_OK) {
        const char *unk = jstr(model, "unk_token");
        t->unk = unk ? tcq_tokenizer_find(t, unk) : -1;
        t->byte_fallback = jbool(model, "byte_fallback", 0);
        t->fuse_unk = jbool(model, "fuse_unk", 0);
        t->ignore_merges = jbool(model, "ignore_merges", 0);
        st = add_norm(t, json_object_get(root, "normalizer"), f);
    }
    if (st == TCQ_OK) st = add_pre(t, json_object_get(root, "pre_tokenizer"), f);
    if (st == TCQ_OK) st = add_post(t, json_object_get(root, "post_processor"), f);
    if (st == TCQ_OK) st = add_dec(&dd, json_object_get(root, "decoder"), f);
    if (st == TCQ_OK) st = tok_build_decoded(t, &dd);
    for (int i = 0; i < dd.n_replace; i++) {
        free(dd.rep_from[i]);
        free(dd.rep_to[i]);
    }
    if (st == TCQ_OK && t->n_prefix) t->bos = t->prefix[0];
    json_decref(root);
    return st;
}
