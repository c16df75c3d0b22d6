/* The parts of a quantized artifact around its tensors: tensor roles, f32 loading, config.json
 * with the quantization entries, tokenizer files. */
#include "quant.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

qrole tcq_quant_role(const char *name, char *gain, size_t gain_size)
{
    if (gain && gain_size) gain[0] = 0;
    if (!strcmp(name, "model.embed_tokens.weight")) return QR_EMBED;
    if (!strcmp(name, "lm_head.weight")) return QR_LM_HEAD;
    if (!strcmp(name, "model.norm.weight")) return QR_NORM;
    static const char pre[] = "model.layers.";
    if (strncmp(name, pre, sizeof pre - 1)) return QR_UNKNOWN;
    const char *p = name + sizeof pre - 1;
    char *end;
    long layer = strtol(p, &end, 10);
    if (end == p || *end != '.' || layer < 0) return QR_UNKNOWN;
    const char *rest = end + 1;
    if (!strcmp(rest, "input_layernorm.weight") || !strcmp(rest, "post_attention_layernorm.weight"))
        return QR_NORM;
    if (!strcmp(rest, "self_attn.q_norm.weight") || !strcmp(rest, "self_attn.k_norm.weight")) return QR_HEAD_NORM;
    if (!strcmp(rest, "self_attn.rotary_emb.inv_freq")) return QR_SKIP;
    static const struct { const char *mod, *norm; int writer; } lin[] = {
        {"self_attn.q_proj", "input_layernorm", 0},       {"self_attn.k_proj", "input_layernorm", 0},
        {"self_attn.v_proj", "input_layernorm", 0},       {"self_attn.o_proj", NULL, 1},
        {"mlp.gate_proj", "post_attention_layernorm", 0}, {"mlp.up_proj", "post_attention_layernorm", 0},
        {"mlp.down_proj", NULL, 1},
    };
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
        const size_t n = strlen(lin[i].mod);
        if (strncmp(rest, lin[i].mod, n) || rest[n] != '.') continue;
        if (!strcmp(rest + n + 1, "bias")) return lin[i].writer ? QR_BIAS_WRITER : QR_BIAS_READER;
        if (strcmp(rest + n + 1, "weight")) return QR_UNKNOWN;
        if (lin[i].writer) return QR_WRITER;
        if (gain) snprintf(gain, gain_size, "model.layers.%ld.%s.weight", layer, lin[i].norm);
        return QR_READER;
    }
    return QR_UNKNOWN;
}

tcq_status tcq_quant_load_f32(const tcq_tensor_info *t, float **out)
{
    *out = NULL;
    if (t->dtype != TCQ_DTYPE_F32 && t->dtype != TCQ_DTYPE_F16 && t->dtype != TCQ_DTYPE_BF16)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: tensor %s: dtype %s (quantize reads F32, F16, BF16)",
                        t->file, t->name, tcq_dtype_name(t->dtype));
    if ((size_t)t->numel * tcq_dtype_size(t->dtype) != t->nbytes)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: %zu bytes for %lld elements", t->file, t->name,
                        t->nbytes, (long long)t->numel);
    float *f = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *f);
    if (!f) return tcq_fail(TCQ_ERR_NOMEM, "%s: tensor %s: %lld floats", t->file, t->name, (long long)t->numel);
    const unsigned char *src = t->data;   /* the mapping need not be aligned for the dtype */
    for (int64_t i = 0; i < t->numel; i++) {
        if (t->dtype == TCQ_DTYPE_F32) {
            memcpy(&f[i], src + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            f[i] = t->dtype == TCQ_DTYPE_F16 ? tcq_f16_to_f32(h) : tcq_bf16_to_f32(h);
        }
    }
    *out = f;
    return TCQ_OK;
}

json_t *tcq_quant_entry(int k, int T, int L, int axis)
{
    return json_pack("{s:i, s:i, s:s, s:{s:i, s:s, s:i}}", "bits", k, "group_size", T, "mode", "trellis",
                     "trellis", "L", L, "code", "1mad", "axis", axis);
}

tcq_status tcq_quant_write_config(const json_t *in_config, json_t *qobj, const char *path)
{
    json_t *c = json_deep_copy(in_config);
    json_t *mirror = qobj ? json_deep_copy(qobj) : NULL;
    if (!c || (qobj && !mirror) || json_object_set(c, "tie_word_embeddings", json_false()) ||
        (qobj && (json_object_set(c, "quantization", qobj) || json_object_set_new(c, "quantization_config", mirror)))) {
        json_decref(c);
        return tcq_fail(TCQ_ERR_NOMEM, "%s: building the JSON document", path);
    }
    const int rc = json_dump_file(c, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(c);
    if (rc) return tcq_fail(TCQ_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return TCQ_OK;
}

static tcq_status copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    if (!in) return tcq_fail(TCQ_ERR_IO, "%s: cannot open: %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return tcq_fail(TCQ_ERR_IO, "%s: cannot create: %s", to, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    int bad = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) bad = 1;
    if (ferror(in)) bad = 2;
    fclose(in);
    if (fclose(out) || bad)
        return tcq_fail(TCQ_ERR_IO, "%s: copying from %s failed: %s", to, from, strerror(errno));
    return TCQ_OK;
}

tcq_status tcq_quant_copy_tokenizer(const char *in_dir, const char *out_dir)
{
    static const char *files[] = {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                                  "generation_config.json", "special_tokens_map.json", "tokenizer.model",
                                  "vocab.json", "merges.txt", "added_tokens.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char from[4096], to[4096];
        snprintf(from, sizeof from, "%s/%s", in_dir, files[i]);
        snprintf(to, sizeof to, "%s/%s", out_dir, files[i]);
        FILE *f = fopen(from, "rb");
        if (!f) continue;
        fclose(f);
        TCQ_TRY(copy_file(from, to));
    }
    return TCQ_OK;
}
