/* tcq inspect PATH: the tensors of a safetensors file or model directory, how each is stored
 * (dense, trellis, MLX affine) according to config.json, and totals. */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void inspect_usage(FILE *f)
{
    fprintf(f, "usage: tcq inspect PATH [--json]\n\n"
               "PATH is a .safetensors file, a model.safetensors.index.json, or a model directory\n"
               "(model.safetensors or shards with an index; config.json next to them gives the\n"
               "quantization entries).  Lists every tensor with dtype and shape; trellis tensors\n"
               "with L, k, T, axis, interleave and bits per weight; MLX affine tensors with bits and\n"
               "group size; then totals.  Exit status 1 if a quantized module does not match its entry.\n"
               "  --json   one JSON document instead of the table\n");
}

typedef struct totals {
    int64_t tensors, bytes, params;
    int64_t dense_params, dense_bytes;
    int64_t tr_modules, tr_weights, tr_bits;      /* bits include the scales */
    int64_t af_modules, af_weights, af_bits;      /* bits include scales and biases */
    int64_t tr_k_modules[5], tr_k_weights[5];     /* the k mix (mixed bit widths, --bpw) */
    int errors;
} totals;

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a > b && strcmp(s + a - b, suf) == 0;
}

/* "name" minus suffix into buf. */
static const char *module_of(const char *name, size_t suflen, char *buf, size_t n)
{
    size_t m = strlen(name) - suflen;
    if (m >= n) m = n - 1;
    memcpy(buf, name, m);
    buf[m] = 0;
    return buf;
}

static const tcq_tensor_info *sibling(const tcq_st_set *s, const char *module, const char *suffix)
{
    char name[1024];
    snprintf(name, sizeof name, "%s%s", module, suffix);
    return tcq_st_set_find(s, name);
}

static json_t *shape_json(const tcq_tensor_info *t)
{
    json_t *a = json_array();
    for (int d = 0; d < t->ndim; d++) json_array_append_new(a, json_integer(t->shape[d]));
    return a;
}

static void shape_text(const tcq_tensor_info *t, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* Describes one tensor: fills desc (text) and q (JSON, may stay NULL), updates totals. */
static void describe(const tcq_st_set *s, const tcq_qconfig *qc, const tcq_tensor_info *t, totals *tot, char *desc,
                     size_t dn, json_t **q)
{
    char module[512];
    desc[0] = 0;
    *q = NULL;
    tot->tensors++;
    tot->bytes += (int64_t)t->nbytes;
    if (has_suffix(t->name, ".scales") || has_suffix(t->name, ".biases")) {
        module_of(t->name, 7, module, sizeof module);
        tcq_qentry e = tcq_qconfig_resolve(qc, s, module);
        if (e.mode != TCQ_QMODE_NONE && sibling(s, module, ".weight")) {
            snprintf(desc, dn, "(%s of %s)", has_suffix(t->name, ".scales") ? "scales" : "biases", module);
            *q = json_pack("{s:s,s:s}", "part", has_suffix(t->name, ".scales") ? "scales" : "biases", "module", module);
            return;   /* counted with the module's weight */
        }
    }
    if (has_suffix(t->name, ".weight")) {
        module_of(t->name, 7, module, sizeof module);
        tcq_qentry e = tcq_qconfig_resolve(qc, s, module);
        if (e.mode == TCQ_QMODE_TRELLIS) {
            tcq_trellis tr;
            if (tcq_trellis_from_set(s, qc, module, &tr) != TCQ_OK) {
                snprintf(desc, dn, "INVALID trellis: %s", tcq_last_error());
                *q = json_pack("{s:s,s:s}", "mode", "trellis", "error", tcq_last_error());
                tot->errors++;
                return;
            }
            const int64_t n = tr.rows * tr.cols;
            const double bpw = tcq_trellis_bpw(&tr);
            snprintf(desc, dn, "trellis L=%d k=%d T=%d axis=%d interleave=%d  W [%lld, %lld]  %.4f bpw", tr.p.L, tr.p.k,
                     tr.p.T, tr.axis, tr.interleaved, (long long)tcq_trellis_out(&tr), (long long)tcq_trellis_in(&tr),
                     bpw);
            *q = json_pack("{s:s,s:i,s:i,s:i,s:i,s:b,s:I,s:I,s:f}", "mode", "trellis", "L", tr.p.L, "k", tr.p.k, "T",
                           tr.p.T, "axis", tr.axis, "interleave", tr.interleaved, "out",
                           (json_int_t)tcq_trellis_out(&tr), "in", (json_int_t)tcq_trellis_in(&tr), "bpw", bpw);
            tot->tr_modules++;
            tot->tr_weights += n;
            tot->tr_bits += n * tr.p.k + tr.rows * 16;
            if (tr.p.k >= 1 && tr.p.k <= 4) tot->tr_k_modules[tr.p.k]++, tot->tr_k_weights[tr.p.k] += n;
            tot->params += n;
            return;
        }
        if (e.mode == TCQ_QMODE_AFFINE) {
            const tcq_tensor_info *sc = sibling(s, module, ".scales"), *bi = sibling(s, module, ".biases");
            if (t->dtype != TCQ_DTYPE_U32 || t->ndim != 2 || !sc || (t->shape[1] * 32) % e.bits) {
                snprintf(desc, dn, "INVALID affine: %s needs U32 [out, in*%d/32] and %s.scales", module, e.bits, module);
                *q = json_pack("{s:s,s:s}", "mode", "affine", "error", desc);
                tot->errors++;
                return;
            }
            const int64_t out = t->shape[0], in = t->shape[1] * 32 / e.bits, n = out * in;
            const int64_t bits = 8 * (int64_t)(t->nbytes + sc->nbytes + (bi ? bi->nbytes : 0));
            const double bpw = n ? (double)bits / (double)n : 0;
            snprintf(desc, dn, "affine bits=%d group=%d  W [%lld, %lld]  %.4f bpw", e.bits, e.group_size,
                     (long long)out, (long long)in, bpw);
            *q = json_pack("{s:s,s:i,s:i,s:I,s:I,s:f}", "mode", "affine", "bits", e.bits, "group_size", e.group_size,
                           "out", (json_int_t)out, "in", (json_int_t)in, "bpw", bpw);
            tot->af_modules++;
            tot->af_weights += n;
            tot->af_bits += bits;
            tot->params += n;
            return;
        }
    }
    tot->params += t->numel;
    tot->dense_params += t->numel;
    tot->dense_bytes += (int64_t)t->nbytes;
}

static tcq_status load_config(const tcq_st_set *s, tcq_qconfig **q, char *cfg_path, size_t n)
{
    snprintf(cfg_path, n, "%s/config.json", tcq_st_set_dir(s));
    struct stat st;
    if (stat(cfg_path, &st) == 0) return tcq_qconfig_load(cfg_path, q);
    cfg_path[0] = 0;
    return tcq_qconfig_parse("{}", 2, "(no config.json)", q);
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            inspect_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json"))
            as_json = 1;
        else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "tcq inspect: unexpected argument '%s'\n", argv[i]);
            inspect_usage(stderr);
            return 2;
        } else
            path = argv[i];
    }
    if (!path) {
        inspect_usage(stderr);
        return 2;
    }
    tcq_st_set *s = NULL;
    tcq_status st = tcq_st_set_open(path, &s);
    if (st != TCQ_OK) return cli_fail(st, "inspect");
    tcq_qconfig *qc = NULL;
    char cfg[4096];
    st = load_config(s, &qc, cfg, sizeof cfg);
    if (st != TCQ_OK) {
        tcq_st_set_close(s);
        return cli_fail(st, "inspect");
    }

    totals tot = {0};
    json_t *root = as_json ? json_object() : NULL, *arr = as_json ? json_array() : NULL;
    tcq_qentry def;
    const int64_t n_entries = tcq_qconfig_count(qc) + tcq_qconfig_default(qc, &def);
    if (!as_json) {
        printf("%s: %lld tensors in %d file(s)", path, (long long)tcq_st_set_count(s), tcq_st_set_file_count(s));
        if (cfg[0]) printf("; %s: %lld quantization entries%s", cfg, (long long)tcq_qconfig_count(qc),
                           n_entries > tcq_qconfig_count(qc) ? " and a default" : "");
        printf("\n");
    }
    for (int64_t i = 0; i < tcq_st_set_count(s); i++) {
        const tcq_tensor_info *t = tcq_st_set_tensor(s, i);
        char desc[2048], sh[256];
        json_t *q;
        describe(s, qc, t, &tot, desc, sizeof desc, &q);
        if (as_json) {
            json_t *o = json_pack("{s:s,s:s,s:o,s:I,s:s}", "name", t->name, "dtype", tcq_dtype_name(t->dtype), "shape",
                                  shape_json(t), "bytes", (json_int_t)t->nbytes, "file", t->file);
            if (q) json_object_set_new(o, "quant", q);
            json_array_append_new(arr, o);
        } else {
            shape_text(t, sh, sizeof sh);
            if (desc[0])
                printf("  %-56s %-4s %-18s %s\n", t->name, tcq_dtype_name(t->dtype), sh, desc);
            else
                printf("  %-56s %-4s %s\n", t->name, tcq_dtype_name(t->dtype), sh);
            json_decref(q);
        }
    }
    uint64_t holes = 0;
    for (int i = 0; i < tcq_st_set_file_count(s); i++) holes += tcq_st_hole_bytes(tcq_st_set_file(s, i));
    const int64_t qw = tot.tr_weights + tot.af_weights, qbits = tot.tr_bits + tot.af_bits;
    const double tr_bpw = tot.tr_weights ? (double)tot.tr_bits / (double)tot.tr_weights : 0;
    const double af_bpw = tot.af_weights ? (double)tot.af_bits / (double)tot.af_weights : 0;
    const double q_bpw = qw ? (double)qbits / (double)qw : 0;
    if (as_json) {
        json_t *tj = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:I,s:I,s:f,s:f,s:I,s:i}", "tensors",
                               (json_int_t)tot.tensors, "bytes", (json_int_t)tot.bytes, "params",
                               (json_int_t)tot.params, "dense_params", (json_int_t)tot.dense_params, "trellis_modules",
                               (json_int_t)tot.tr_modules, "trellis_weights", (json_int_t)tot.tr_weights,
                               "affine_modules", (json_int_t)tot.af_modules, "trellis_bpw", tr_bpw, "affine_weights",
                               (json_int_t)tot.af_weights, "files", (json_int_t)tcq_st_set_file_count(s), "affine_bpw",
                               af_bpw, "quantized_bpw", q_bpw, "hole_bytes", (json_int_t)holes, "errors", tot.errors);
        json_object_set_new(root, "path", json_string(path));
        json_object_set_new(root, "config", cfg[0] ? json_string(cfg) : json_null());
        json_object_set_new(root, "tensors", arr);
        json_object_set_new(root, "totals", tj);
        char *text = json_dumps(root, JSON_INDENT(1));
        if (text) puts(text);
        free(text);
        json_decref(root);
    } else {
        printf("totals: %lld tensors, %lld bytes (%.2f MiB), %lld parameters (%lld dense)\n", (long long)tot.tensors,
               (long long)tot.bytes, (double)tot.bytes / 1048576.0, (long long)tot.params,
               (long long)tot.dense_params);
        if (tot.tr_modules)
            printf("  trellis: %lld modules, %lld weights, %.4f bits per weight (with scales)\n",
                   (long long)tot.tr_modules, (long long)tot.tr_weights, tr_bpw);
        if (tot.tr_modules) {
            printf("  trellis k mix:");
            for (int k = 1; k <= 4; k++)
                if (tot.tr_k_modules[k])
                    printf(" k=%d %lld modules (%.1f%% of the weights)", k, (long long)tot.tr_k_modules[k],
                           100.0 * (double)tot.tr_k_weights[k] / (double)tot.tr_weights);
            printf("\n");
        }
        if (tot.af_modules)
            printf("  affine:  %lld modules, %lld weights, %.4f bits per weight (with scales, biases)\n",
                   (long long)tot.af_modules, (long long)tot.af_weights, af_bpw);
        if (qw) printf("  quantized layers: %.4f bits per weight on average\n", q_bpw);
        if (holes) printf("  %llu padding bytes between tensors\n", (unsigned long long)holes);
        if (tot.errors) printf("  %d module(s) do not match their quantization entry\n", tot.errors);
    }
    tcq_qconfig_free(qc);
    tcq_st_set_close(s);
    return tot.errors ? 1 : 0;
}
