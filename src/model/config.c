/* config.json -> tcq_model_config, for model_type "llama" and "qwen3". */
#include "model/model.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

static tcq_status get_int(json_t *root, const char *label, const char *key, int required, int dflt, int lo,
                          int *out)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) return tcq_fail(TCQ_ERR_FORMAT, "%s: missing field \"%s\"", label, key);
        *out = dflt;
        return TCQ_OK;
    }
    if (!json_is_integer(v)) return tcq_fail(TCQ_ERR_FORMAT, "%s: field \"%s\" is not an integer", label, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > (1 << 30)) return tcq_fail(TCQ_ERR_FORMAT, "%s: field \"%s\" = %lld out of range", label, key, (long long)x);
    *out = (int)x;
    return TCQ_OK;
}

static tcq_status get_num(json_t *obj, const char *label, const char *key, double dflt, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return TCQ_OK;
    }
    if (!json_is_number(v)) return tcq_fail(TCQ_ERR_FORMAT, "%s: field \"%s\" is not a number", label, key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return tcq_fail(TCQ_ERR_FORMAT, "%s: field \"%s\" is not finite", label, key);
    return TCQ_OK;
}

/* rope_scaling (transformers 4) or rope_parameters (transformers 5). */
static tcq_status parse_rope(json_t *root, const char *label, tcq_model_config *c)
{
    double theta = 0;
    TCQ_TRY(get_num(root, label, "rope_theta", 10000.0, &theta));
    json_t *rp = json_object_get(root, "rope_parameters");
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rp && !json_is_null(rp) && !json_is_object(rp))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: \"rope_parameters\" is not an object", label);
    if (rs && !json_is_null(rs) && !json_is_object(rs))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: \"rope_scaling\" is not an object", label);
    if (json_is_object(rp)) TCQ_TRY(get_num(rp, label, "rope_theta", theta, &theta));
    c->rope_theta = theta;
    if (!(theta > 1.0)) return tcq_fail(TCQ_ERR_FORMAT, "%s: rope theta %g must be > 1", label, theta);

    json_t *sc = json_is_object(rs) ? rs : (json_is_object(rp) ? rp : NULL);
    if (!sc) return TCQ_OK;
    json_t *t = json_object_get(sc, "rope_type");
    if (!t) t = json_object_get(sc, "type");
    const char *type = json_is_string(t) ? json_string_value(t) : "default";
    if (strcmp(type, "default") == 0) return TCQ_OK;
    if (strcmp(type, "llama3") != 0)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: rope_type \"%s\" is not supported (default, llama3)", label, type);
    c->rope_llama3 = 1;
    TCQ_TRY(get_num(sc, label, "factor", 8.0, &c->rope_factor));
    TCQ_TRY(get_num(sc, label, "low_freq_factor", 1.0, &c->rope_low_freq_factor));
    TCQ_TRY(get_num(sc, label, "high_freq_factor", 4.0, &c->rope_high_freq_factor));
    double orig = 0;
    TCQ_TRY(get_num(sc, label, "original_max_position_embeddings", 8192, &orig));
    /* range first: converting an out-of-range double to int is undefined */
    if (!(orig >= 1 && orig <= (1 << 30)))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: original_max_position_embeddings %g out of range", label, orig);
    c->rope_orig_max_pos = (int)orig;
    if (!(c->rope_factor > 0) || !(c->rope_high_freq_factor > c->rope_low_freq_factor))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: inconsistent llama3 rope parameters", label);
    return TCQ_OK;
}

/* A special-token id must name a row of the vocabulary. */
static tcq_status check_id(const char *label, const char *key, json_t *v, int vocab, int *out)
{
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= vocab)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: %s %lld is outside the vocabulary (0..%d)", label, key, (long long)x,
                        vocab - 1);
    *out = (int)x;
    return TCQ_OK;
}

static tcq_status parse_ids(json_t *root, const char *label, tcq_model_config *c)
{
    json_t *b = json_object_get(root, "bos_token_id");
    c->bos_id = -1;
    if (json_is_integer(b)) TCQ_TRY(check_id(label, "bos_token_id", b, c->vocab_size, &c->bos_id));
    else if (b && !json_is_null(b)) return tcq_fail(TCQ_ERR_FORMAT, "%s: bos_token_id is not an integer", label);
    json_t *e = json_object_get(root, "eos_token_id");
    c->n_eos = 0;
    if (json_is_integer(e)) {
        TCQ_TRY(check_id(label, "eos_token_id", e, c->vocab_size, &c->eos_ids[c->n_eos++]));
    } else if (json_is_array(e)) {
        size_t i;
        json_t *x;
        json_array_foreach(e, i, x) {
            if (!json_is_integer(x)) return tcq_fail(TCQ_ERR_FORMAT, "%s: eos_token_id[%zu] is not an integer", label, i);
            if (c->n_eos < TCQ_MAX_EOS) TCQ_TRY(check_id(label, "eos_token_id", x, c->vocab_size, &c->eos_ids[c->n_eos++]));
        }
    } else if (e && !json_is_null(e)) {
        return tcq_fail(TCQ_ERR_FORMAT, "%s: eos_token_id is neither an integer nor a list", label);
    }
    return TCQ_OK;
}

static tcq_status parse_root(json_t *root, const char *label, tcq_model_config *c)
{
    if (!json_is_object(root)) return tcq_fail(TCQ_ERR_FORMAT, "%s: not a JSON object", label);
    json_t *mt = json_object_get(root, "model_type");
    if (!json_is_string(mt)) return tcq_fail(TCQ_ERR_FORMAT, "%s: missing string field \"model_type\"", label);
    const char *type = json_string_value(mt);
    if (strcmp(type, "llama") == 0) c->arch = TCQ_ARCH_LLAMA;
    else if (strcmp(type, "qwen3") == 0) c->arch = TCQ_ARCH_QWEN3;
    else return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (llama, qwen3)", label, type);

    TCQ_TRY(get_int(root, label, "hidden_size", 1, 0, 1, &c->dim));
    TCQ_TRY(get_int(root, label, "intermediate_size", 1, 0, 1, &c->hidden_dim));
    TCQ_TRY(get_int(root, label, "num_hidden_layers", 1, 0, 1, &c->n_layers));
    TCQ_TRY(get_int(root, label, "num_attention_heads", 1, 0, 1, &c->n_heads));
    TCQ_TRY(get_int(root, label, "num_key_value_heads", 0, c->n_heads, 1, &c->n_kv_heads));
    TCQ_TRY(get_int(root, label, "head_dim", 0, c->dim / c->n_heads, 2, &c->head_dim));
    TCQ_TRY(get_int(root, label, "vocab_size", 1, 0, 1, &c->vocab_size));
    TCQ_TRY(get_int(root, label, "max_position_embeddings", 0, 2048, 1, &c->max_seq));
    double eps;
    TCQ_TRY(get_num(root, label, "rms_norm_eps", 1e-6, &eps));
    c->norm_eps = (float)eps;
    json_t *tie = json_object_get(root, "tie_word_embeddings");
    if (tie && !json_is_boolean(tie) && !json_is_null(tie))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tie_word_embeddings is not a boolean", label);
    /* Unsaid: the loader ties iff the checkpoint has no lm_head.weight. */
    c->tied_embeddings = json_is_boolean(tie) ? json_is_true(tie) : -1;
    json_t *act = json_object_get(root, "hidden_act");
    if (json_is_string(act) && strcmp(json_string_value(act), "silu") != 0)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: hidden_act \"%s\" is not supported (silu)", label, json_string_value(act));
    /* Variants this forward does not compute: refuse rather than run them wrong. */
    const char *flags[] = {"attention_bias", "mlp_bias", "use_sliding_window"};
    for (int i = 0; i < 3; i++)
        if (json_is_true(json_object_get(root, flags[i])))
            return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: %s true is not supported", label, flags[i]);
    json_t *lt = json_object_get(root, "layer_types");
    if (json_is_array(lt)) {
        size_t i;
        json_t *x;
        json_array_foreach(lt, i, x) {
            if (!json_is_string(x) || strcmp(json_string_value(x), "full_attention") != 0)
                return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: layer_types[%zu] is not \"full_attention\"", label, i);
        }
    }
    double prf;
    TCQ_TRY(get_num(root, label, "partial_rotary_factor", 1.0, &prf));
    if (prf != 1.0) return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: partial_rotary_factor %g is not supported", label, prf);

    if (c->n_heads % c->n_kv_heads)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", label,
                        c->n_heads, c->n_kv_heads);
    /* the default hidden/heads can be 0 (more heads than hidden units) */
    if (c->head_dim < 2)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: head_dim %d (hidden_size %d / num_attention_heads %d) is below 2",
                        label, c->head_dim, c->dim, c->n_heads);
    if (c->head_dim % 2) return tcq_fail(TCQ_ERR_FORMAT, "%s: head_dim %d is odd", label, c->head_dim);
    TCQ_TRY(parse_rope(root, label, c));
    return parse_ids(root, label, c);
}

tcq_status tcq_model_config_parse(const char *json, size_t len, const char *label, tcq_model_config *out)
{
    if (!json || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_model_config_parse: NULL argument");
    if (!label) label = "config.json";
    memset(out, 0, sizeof *out);
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    if (!root) return tcq_fail(TCQ_ERR_FORMAT, "%s: line %d: %s", label, err.line, err.text);
    tcq_status s = parse_root(root, label, out);
    json_decref(root);
    return s;
}
