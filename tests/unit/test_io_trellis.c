/* Trellis tensors through files: encode, write codes + scales + config.json, read back through
 * tcq_st_set + tcq_qconfig + tcq_trellis_from_tensors, decode, compare with the in-memory tensor. */
#include "test.h"

#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static char *tpath(const char *name)
{
    static char buf[4][256];
    static int i;
    i = (i + 1) & 3;
    snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, name);
    return buf[i];
}

/* One coded module: stored rows R, coded length C. */
typedef struct mod {
    const char *path;          /* module path as written in config.json */
    const char *lookup;        /* path the reader asks for (other prefix) */
    int k, axis, interleave;
    int64_t R, C;
    uint32_t *codes;           /* [R, C*k/32] (plain layout, for the in-memory reference) */
    uint32_t *stored;          /* what goes into the file (interleaved or plain) */
    uint16_t *scales;          /* [R] */
} mod;

static void code_module(mod *m, uint64_t *rng)
{
    const tcq_block_params p = {.L = 12, .k = m->k, .T = 256};
    float *src = malloc((size_t)(m->R * m->C) * sizeof *src);
    for (int64_t i = 0; i < m->R * m->C; i++) src[i] = (float)(0.02 * test_gauss(rng));
    const int64_t words = m->R * m->C * m->k / 32;
    m->codes = malloc((size_t)words * 4);
    m->scales = malloc((size_t)m->R * 2);
    CHECK_OK(tcq_encode_rows(p, NULL, src, NULL, m->R, m->C, m->codes, m->scales, NULL, NULL));
    m->stored = malloc((size_t)words * 4);
    if (m->interleave)
        CHECK_OK(tcq_interleave(m->R, m->C, m->codes, m->stored));
    else
        memcpy(m->stored, m->codes, (size_t)words * 4);
    free(src);
}

static void add_module(tcq_st_writer *w, tcq_qconfig *q, const mod *m)
{
    char name[256];
    snprintf(name, sizeof name, "%s.weight", m->path);
    const int64_t plain[2] = {m->R, m->C * m->k / 32}, il[3] = {m->C / 512, m->R, 48};
    const size_t nb = (size_t)(m->R * m->C * m->k / 32) * 4;
    CHECK_OK(tcq_st_writer_add(w, name, TCQ_DTYPE_U32, m->interleave ? 3 : 2, m->interleave ? il : plain, m->stored, nb));
    snprintf(name, sizeof name, "%s.scales", m->path);
    CHECK_OK(tcq_st_writer_add(w, name, TCQ_DTYPE_F16, 1, &m->R, m->scales, (size_t)m->R * 2));
    tcq_qentry e = {.mode = TCQ_QMODE_TRELLIS, .bits = m->k, .group_size = 256, .L = 12, .axis = m->axis,
                    .interleaved = m->interleave};
    CHECK_OK(tcq_qconfig_set(q, m->path, &e));
}

/* Decoding the file's view equals decoding the in-memory tensor, bit for bit. */
static void check_module(const tcq_st_set *s, const tcq_qconfig *q, const mod *m, const char *what)
{
    tcq_qentry e = tcq_qconfig_lookup(q, m->lookup);
    CHECK(e.mode == TCQ_QMODE_TRELLIS && e.bits == m->k && e.group_size == 256 && e.L == 12 && e.axis == m->axis &&
              e.interleaved == m->interleave,
          "%s: %s entry", what, m->lookup);
    tcq_trellis tf;
    char name[256];
    snprintf(name, sizeof name, "%s.weight", m->path);
    const tcq_tensor_info *wt = tcq_st_set_find(s, name);
    snprintf(name, sizeof name, "%s.scales", m->path);
    const tcq_tensor_info *st = tcq_st_set_find(s, name);
    tcq_status rc = tcq_trellis_from_tensors(m->lookup, &e, wt, st, &tf);
    CHECK(rc == TCQ_OK, "%s: %s: %s", what, m->path, tcq_last_error());
    if (rc != TCQ_OK) return;
    CHECK(tf.rows == m->R && tf.cols == m->C && tf.axis == m->axis && tf.interleaved == m->interleave, "%s: geometry",
          what);
    const tcq_trellis mem = {.p = {.L = 12, .k = m->k, .T = 256}, .axis = m->axis, .rows = m->R, .cols = m->C,
                             .codes = m->codes, .scales = m->scales};
    const size_t n = (size_t)(m->R * m->C);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    CHECK_OK(tcq_trellis_decode(&tf, a));
    CHECK_OK(tcq_trellis_decode(&mem, b));
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "%s: %s decodes differently from the in-memory tensor", what, m->path);
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)a[i] * a[i];
    CHECK(ss > 0, "%s: decoded tensor is all zero", what);
    free(a);
    free(b);
    /* tcq_trellis_from_set finds the same view. */
    tcq_trellis t2;
    CHECK_OK(tcq_trellis_from_set(s, q, m->lookup, &t2));
    CHECK(t2.codes == tf.codes && t2.scales == tf.scales, "%s: from_set", what);
}

/* Wraps a quantization object into a config.json text under the given key(s). */
static char *config_with(const tcq_qconfig *q, const char *key)
{
    char *obj = NULL;
    CHECK_OK(tcq_qconfig_to_json(q, &obj));
    size_t n = strlen(obj) + 128;
    char *text = malloc(n);
    snprintf(text, n, "{\"model_type\": \"qwen3\", \"%s\": %s}", key, obj ? obj : "{}");
    free(obj);
    return text;
}

static void test_round_trip(uint64_t *rng)
{
    mod mods[] = {
        {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.gate_proj", 2, 1, 0, 16, 512, 0, 0, 0},
        {"language_model.model.layers.0.mlp.down_proj", "model.layers.0.mlp.down_proj", 3, 0, 1, 8, 1024, 0, 0, 0},
        {"model.layers.0.self_attn.q_proj", "language_model.model.layers.0.self_attn.q_proj", 4, 0, 0, 8, 256, 0, 0, 0},
        {"model.layers.1.mlp.up_proj", "model.layers.1.mlp.up_proj", 3, 1, 0, 4, 768, 0, 0, 0},
        {"model.layers.1.mlp.down_proj", "model.layers.1.mlp.down_proj", 1, 0, 0, 4, 256, 0, 0, 0},
    };
    enum { N = sizeof mods / sizeof mods[0] };
    mkdir(tpath("model"), 0755);
    tcq_st_writer *w = NULL;
    tcq_qconfig *q = NULL;
    CHECK_OK(tcq_st_writer_create(&w));
    CHECK_OK(tcq_qconfig_create(&q));
    for (int i = 0; i < N; i++) {
        code_module(&mods[i], rng);
        add_module(w, q, &mods[i]);
    }
    /* A dense tensor, an affine-by-default module (has .scales), an explicitly dense module. */
    static uint16_t emb[4 * 64], emb_s[4], norm[64];
    const int64_t es[2] = {4, 64 * 4 / 32}, ss[2] = {4, 1}, ns[1] = {64};
    CHECK_OK(tcq_st_writer_add(w, "model.embed_tokens.weight", TCQ_DTYPE_U32, 2, es, emb, 4 * 8 * 4));
    CHECK_OK(tcq_st_writer_add(w, "model.embed_tokens.scales", TCQ_DTYPE_F16, 2, ss, emb_s, sizeof emb_s));
    CHECK_OK(tcq_st_writer_add(w, "model.embed_tokens.biases", TCQ_DTYPE_F16, 2, ss, emb_s, sizeof emb_s));
    CHECK_OK(tcq_st_writer_add(w, "model.norm.weight", TCQ_DTYPE_BF16, 1, ns, norm, sizeof norm));
    const tcq_qentry def = {.mode = TCQ_QMODE_AFFINE, .bits = 4, .group_size = 64};
    CHECK_OK(tcq_qconfig_set_default(q, &def));
    const tcq_qentry none = {0};
    CHECK_OK(tcq_qconfig_set(q, "model.layers.0.self_attn.k_proj", &none));
    CHECK_OK(tcq_st_writer_write(w, tpath("model/model.safetensors")));
    tcq_st_writer_free(w);

    /* config.json through tcq_qconfig_apply (both keys), then each key alone. */
    const char *base = "{\"model_type\": \"qwen3\", \"hidden_size\": 512, \"rms_norm_eps\": 1e-06,\n"
                       " \"quantization\": {\"stale\": false}}";
    char *cfg = NULL;
    CHECK_OK(tcq_qconfig_apply(base, strlen(base), q, &cfg));
    CHECK(cfg && strstr(cfg, "\"quantization_config\"") && strstr(cfg, "\"hidden_size\": 512") && !strstr(cfg, "stale"),
          "apply output: %s", cfg ? cfg : "(null)");
    CHECK(cfg && strstr(cfg, "\"rms_norm_eps\": 1e-6"), "reals keep their short form: %s", cfg ? cfg : "(null)");
    CHECK(cfg && strstr(cfg, "\"model_type\"") < strstr(cfg, "\"hidden_size\""), "member order kept");
    const char *variants[3] = {cfg, NULL, NULL};
    char *v1 = config_with(q, "quantization"), *v2 = config_with(q, "quantization_config");
    variants[1] = v1;
    variants[2] = v2;
    for (int v = 0; v < 3; v++) {
        if (!variants[v]) continue;
        CHECK_OK(tcq_io_write_file(tpath("model/config.json"), variants[v], strlen(variants[v])));
        char *back = NULL;
        size_t blen = 0;
        CHECK_OK(tcq_io_read_file(tpath("model/config.json"), &back, &blen));
        CHECK(back && blen == strlen(variants[v]) && !strcmp(back, variants[v]), "config.json read back");
        free(back);
        char what[32];
        snprintf(what, sizeof what, "variant %d", v);
        tcq_st_set *s = NULL;
        tcq_qconfig *rq = NULL;
        CHECK_OK(tcq_st_set_open(tpath("model"), &s));
        CHECK_OK(tcq_qconfig_load(tpath("model/config.json"), &rq));
        if (!s || !rq) {
            tcq_st_set_close(s);
            tcq_qconfig_free(rq);
            continue;
        }
        for (int i = 0; i < N; i++) check_module(s, rq, &mods[i], what);
        CHECK(tcq_qconfig_count(rq) == N + 1, "%s: %lld entries", what, (long long)tcq_qconfig_count(rq));
        tcq_qentry e = tcq_qconfig_lookup(rq, "model.layers.0.self_attn.k_proj");
        CHECK(e.mode == TCQ_QMODE_NONE, "%s: false entry", what);
        e = tcq_qconfig_resolve(rq, s, "model.layers.0.self_attn.k_proj");
        CHECK(e.mode == TCQ_QMODE_NONE, "%s: false entry beats the default", what);
        e = tcq_qconfig_resolve(rq, s, "model.embed_tokens");
        CHECK(e.mode == TCQ_QMODE_AFFINE && e.bits == 4 && e.group_size == 64, "%s: default for embed", what);
        e = tcq_qconfig_resolve(rq, s, "language_model.model.embed_tokens");
        CHECK(e.mode == TCQ_QMODE_AFFINE, "%s: default for embed under the other prefix", what);
        e = tcq_qconfig_resolve(rq, s, "model.norm");
        CHECK(e.mode == TCQ_QMODE_NONE, "%s: default does not cover dense tensors", what);
        e = tcq_qconfig_lookup(rq, "model.norm");
        CHECK(e.mode == TCQ_QMODE_AFFINE, "%s: plain lookup falls back to the default", what);
        tcq_qentry d;
        CHECK(tcq_qconfig_default(rq, &d) && d.bits == 4, "%s: default", what);
        tcq_trellis t;
        CHECK(tcq_trellis_from_set(s, rq, "model.norm", &t) == TCQ_ERR_NOT_FOUND, "%s: no trellis for norm", what);
        tcq_st_set_close(s);
        tcq_qconfig_free(rq);
    }
    /* apply keeps other members and the parse of its output equals the original object. */
    tcq_qconfig *rq = NULL;
    CHECK_OK(tcq_qconfig_parse(cfg, strlen(cfg), "applied", &rq));
    char *j1 = NULL, *j2 = NULL;
    CHECK_OK(tcq_qconfig_to_json(q, &j1));
    CHECK_OK(tcq_qconfig_to_json(rq, &j2));
    CHECK(j1 && j2 && strcmp(j1, j2) == 0, "re-serialised config differs");
    free(j1);
    free(j2);
    tcq_qconfig_free(rq);
    free(cfg);
    free(v1);
    free(v2);
    tcq_qconfig_free(q);

    /* Shape and dtype mismatches between tensors and entries. */
    tcq_st_set *s = NULL;
    CHECK_OK(tcq_st_set_open(tpath("model"), &s));
    if (s) {
        const tcq_tensor_info *w0 = tcq_st_set_find(s, "model.layers.0.mlp.gate_proj.weight");
        const tcq_tensor_info *s0 = tcq_st_set_find(s, "model.layers.0.mlp.gate_proj.scales");
        const tcq_tensor_info *s1 = tcq_st_set_find(s, "model.layers.1.mlp.up_proj.scales");
        const tcq_tensor_info *nw = tcq_st_set_find(s, "model.norm.weight");
        const tcq_tensor_info *wil = tcq_st_set_find(s, "language_model.model.layers.0.mlp.down_proj.weight");
        tcq_qentry e = {.mode = TCQ_QMODE_TRELLIS, .bits = 2, .group_size = 256, .L = 12, .axis = 1};
        tcq_trellis t;
        CHECK_OK(tcq_trellis_from_tensors("m", &e, w0, s0, &t));
        CHECK(tcq_trellis_from_tensors("mod.a", &e, w0, s1, &t) == TCQ_ERR_FORMAT &&
                  strstr(tcq_last_error(), "mod.a") && strstr(tcq_last_error(), "scales shape [4], want [16]"),
              "scales rows: %s", tcq_last_error());
        CHECK(tcq_trellis_from_tensors("mod.b", &e, nw, s0, &t) == TCQ_ERR_FORMAT && strstr(tcq_last_error(), "BF16"),
              "weight dtype: %s", tcq_last_error());
        CHECK(tcq_trellis_from_tensors("mod.c", &e, w0, w0, &t) == TCQ_ERR_FORMAT && strstr(tcq_last_error(), "F16"),
              "scales dtype: %s", tcq_last_error());
        CHECK(tcq_trellis_from_tensors("mod.d", &e, w0, NULL, &t) == TCQ_ERR_NOT_FOUND &&
                  strstr(tcq_last_error(), "mod.d.scales"),
              "missing scales: %s", tcq_last_error());
        e.bits = 3;   /* 32 words per row of 3-bit weights is not whole */
        CHECK(tcq_trellis_from_tensors("mod.e", &e, w0, s0, &t) == TCQ_ERR_FORMAT && strstr(tcq_last_error(), "mod.e"),
              "k mismatch: %s", tcq_last_error());
        e.bits = 4;   /* 32 words -> C = 256: fine as a geometry, so it is accepted */
        CHECK_OK(tcq_trellis_from_tensors("mod.f", &e, w0, s0, &t));
        CHECK(t.cols == 256, "k=4 view cols %lld", (long long)t.cols);
        e.bits = 2;
        e.group_size = 128;
        CHECK_OK(tcq_trellis_from_tensors("mod.g", &e, w0, s0, &t));
        e.group_size = 256;
        e.interleaved = 1;
        CHECK(tcq_trellis_from_tensors("mod.h", &e, w0, s0, &t) == TCQ_ERR_FORMAT && strstr(tcq_last_error(), "[C/512, R, 48]"),
              "interleaved entry, plain tensor: %s", tcq_last_error());
        tcq_qentry ei = {.mode = TCQ_QMODE_TRELLIS, .bits = 3, .group_size = 256, .L = 12, .axis = 0};
        const tcq_tensor_info *sil = tcq_st_set_find(s, "language_model.model.layers.0.mlp.down_proj.scales");
        CHECK(tcq_trellis_from_tensors("mod.i", &ei, wil, s0, &t) == TCQ_ERR_FORMAT && strstr(tcq_last_error(), "mod.i"),
              "interleaved tensor, wrong scales: %s", tcq_last_error());
        CHECK_OK(tcq_trellis_from_tensors("mod.i", &ei, wil, sil, &t));
        CHECK(t.interleaved == 1 && t.rows == 8 && t.cols == 1024, "3-D weight read as interleaved");
        ei.axis = 1;
        CHECK(tcq_trellis_from_tensors("mod.k", &ei, wil, sil, &t) == TCQ_ERR_INVALID_ARG &&
                  strstr(tcq_last_error(), "mod.k") && strstr(tcq_last_error(), "interleave"),
              "3-D weight with axis 1: %s", tcq_last_error());
        tcq_qentry ea = {.mode = TCQ_QMODE_AFFINE, .bits = 4, .group_size = 64};
        CHECK(tcq_trellis_from_tensors("mod.j", &ea, w0, s0, &t) == TCQ_ERR_INVALID_ARG, "affine entry");
    }
    tcq_st_set_close(s);
    for (int i = 0; i < N; i++) {
        free(mods[i].codes);
        free(mods[i].stored);
        free(mods[i].scales);
    }
}

static void expect_bad(const char *json, tcq_status want, const char *sub)
{
    tcq_qconfig *q = NULL;
    tcq_status s = tcq_qconfig_parse(json, strlen(json), "cfg.json", &q);
    CHECK(s == want && q == NULL && strstr(tcq_last_error(), sub) && strstr(tcq_last_error(), "cfg.json"),
          "%s: %s: %s (want '%s')", json, tcq_status_str(s), tcq_last_error(), sub);
    tcq_qconfig_free(q);
}

#define TR(m, x) "{\"quantization\": {\"" m "\": " x "}}"

static void test_bad_entries(void)
{
    const char *M = "model.layers.3.mlp.down_proj";
    (void)M;
    expect_bad(TR("model.layers.3.mlp.down_proj", "{\"bits\": 5, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 12}}"),
               TCQ_ERR_FORMAT, "module 'model.layers.3.mlp.down_proj': trellis bits 5");
    expect_bad(TR("a.b", "{\"bits\": 0, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 12}}"),
               TCQ_ERR_FORMAT, "'a.b': trellis bits 0");
    expect_bad(TR("a.b", "{\"bits\": 2, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 7}}"),
               TCQ_ERR_FORMAT, "'a.b': trellis L 7");
    expect_bad(TR("a.b", "{\"bits\": 2, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 17}}"),
               TCQ_ERR_FORMAT, "L 17");
    expect_bad(TR("a.b", "{\"bits\": 2, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 12, \"code\": \"3inst\"}}"),
               TCQ_ERR_UNSUPPORTED, "'a.b': trellis code \"3inst\"");
    expect_bad(TR("a.b", "{\"bits\": 2, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 12, \"axis\": 2}}"),
               TCQ_ERR_FORMAT, "'a.b': trellis axis 2");
    expect_bad(TR("a.b", "{\"bits\": 2, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 12, \"axis\": \"0\"}}"),
               TCQ_ERR_FORMAT, "axis is not an integer");
    expect_bad(TR("a.b", "{\"bits\": 2, \"group_size\": 100, \"mode\": \"trellis\", \"trellis\": {\"L\": 12}}"),
               TCQ_ERR_FORMAT, "'a.b': group_size 100");
    expect_bad(TR("a.b", "{\"bits\": 3, \"group_size\": 512, \"mode\": \"trellis\", \"trellis\": {\"L\": 12}}"),
               TCQ_ERR_FORMAT, "group_size 512");
    expect_bad(TR("a.b", "{\"bits\": 2, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 12, \"axis\": 0, \"interleave\": true}}"),
               TCQ_ERR_FORMAT, "interleave needs bits 3");
    expect_bad(TR("a.b", "{\"bits\": 3, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 12, \"axis\": 0, \"interleave\": 1}}"),
               TCQ_ERR_FORMAT, "interleave is not true/false");
    expect_bad(TR("a.b", "{\"bits\": 2, \"group_size\": 256, \"mode\": \"trellis\"}"), TCQ_ERR_FORMAT,
               "without a \"trellis\" object");
    expect_bad(TR("a.b", "{\"bits\": 2, \"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {}}"), TCQ_ERR_FORMAT,
               "L missing");
    expect_bad(TR("a.b", "{\"group_size\": 256, \"mode\": \"trellis\", \"trellis\": {\"L\": 12}}"), TCQ_ERR_FORMAT,
               "'a.b': bits missing");
    expect_bad(TR("a.b", "{\"bits\": 2, \"mode\": \"trellis\", \"trellis\": {\"L\": 12}}"), TCQ_ERR_FORMAT,
               "'a.b': group_size missing");
    expect_bad(TR("a.b", "{\"bits\": 4, \"group_size\": 64, \"mode\": \"mxfp4\"}"), TCQ_ERR_UNSUPPORTED, "'mxfp4'");
    expect_bad(TR("a.b", "{\"bits\": 7, \"group_size\": 64}"), TCQ_ERR_FORMAT, "'a.b': affine bits 7");
    expect_bad(TR("a.b", "{\"bits\": 4, \"group_size\": 48}"), TCQ_ERR_FORMAT, "affine group_size 48");
    expect_bad(TR("a.b", "true"), TCQ_ERR_FORMAT, "'a.b': entry is true");
    expect_bad("{\"quantization\": {\"bits\": 9, \"group_size\": 64}}", TCQ_ERR_FORMAT, "(default)");
    expect_bad("{\"quantization\": [1]}", TCQ_ERR_FORMAT, "not an object");
    expect_bad("{\"quantization\": {}", TCQ_ERR_FORMAT, "not valid JSON");
    expect_bad("[]", TCQ_ERR_FORMAT, "not a JSON object");
    expect_bad("{\"quantization\": {\"a\": false, \"a\": false}}", TCQ_ERR_FORMAT, "duplicate");

    /* Accepted: no quantization (all dense), null, scalar members, defaults for code/axis. */
    tcq_qconfig *q = NULL;
    const char *ok1 = "{\"model_type\": \"llama\"}";
    CHECK_OK(tcq_qconfig_parse(ok1, strlen(ok1), "c", &q));
    CHECK(q && tcq_qconfig_count(q) == 0 && tcq_qconfig_lookup(q, "model.layers.0.mlp.up_proj").mode == TCQ_QMODE_NONE,
          "no quantization");
    tcq_qconfig_free(q);
    q = NULL;
    const char *ok2 = "{\"quantization_config\": {\"quant_method\": \"trellis\", \"model.layers.0.mlp.up_proj\": "
                      "{\"bits\": 2, \"group_size\": 256, \"trellis\": {\"L\": 10, \"future\": 1}}}}";
    CHECK_OK(tcq_qconfig_parse(ok2, strlen(ok2), "c", &q));
    tcq_qentry e = tcq_qconfig_lookup(q, "language_model.model.layers.0.mlp.up_proj");
    CHECK(e.mode == TCQ_QMODE_TRELLIS && e.L == 10 && e.axis == 1 && !e.interleaved, "defaults: mode %d L %d axis %d",
          (int)e.mode, e.L, e.axis);
    CHECK(tcq_qconfig_lookup(q, "model.layers.0.mlp.gate_proj").mode == TCQ_QMODE_NONE, "no default");
    tcq_qconfig_free(q);

    /* The builder checks what it is given. */
    CHECK_OK(tcq_qconfig_create(&q));
    tcq_qentry bad = {.mode = TCQ_QMODE_TRELLIS, .bits = 2, .group_size = 256, .L = 20, .axis = 0};
    CHECK(tcq_qconfig_set(q, "x", &bad) == TCQ_ERR_INVALID_ARG && strstr(tcq_last_error(), "'x'"), "builder L: %s",
          tcq_last_error());
    CHECK(tcq_qconfig_set(q, "bits", &e) == TCQ_ERR_INVALID_ARG, "reserved module name");
    CHECK_OK(tcq_qconfig_set(q, "x", &e));
    e.bits = 3;
    CHECK_OK(tcq_qconfig_set(q, "x", &e));
    CHECK(tcq_qconfig_count(q) == 1 && tcq_qconfig_lookup(q, "x").bits == 3, "set twice keeps the last");
    tcq_qconfig_free(q);
}

int main(void)
{
    uint64_t rng = test_seed();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tcq-iotr-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip(&rng);
    test_bad_entries();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (!test_failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_done("test_io_trellis");
}
