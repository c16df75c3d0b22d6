/* Quantize round trip: a tiny random Qwen3 model (bf16, sharded, tied) is quantized at k = 2, 3,
 * 4; the artifact is read back through the IO API, every trellis tensor decoded and compared with
 * the rotated f32 weights (relative MSE near the codec's), dense tensors and config entries
 * checked.  A Llama model whose hidden size is not a multiple of 256 stays dense; bad inputs fail
 * with messages that name the file or tensor. */
#include "test.h"

#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

enum { N = 256, NHEAD = 2, NKV = 1, HD = 64, FF = 256, VOCAB = 48, SEED = 11 };

typedef struct tensor {
    char name[128];
    int ndim;
    int64_t shape[2];
    float *f;        /* f32 values (already rounded to the stored dtype) */
} tensor;

typedef struct model {
    int n, ff, tied;
    tensor t[32];
    int count;
} model;

static tensor *add(model *m, const char *name, int64_t r, int64_t c, double sd, double mean, uint64_t *st,
                   tcq_dtype dt)
{
    tensor *t = &m->t[m->count++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = c ? 2 : 1;
    t->shape[0] = r;
    t->shape[1] = c;
    const int64_t n = r * (c ? c : 1);
    t->f = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(mean + sd * (mean != 0 ? test_uniform(st) : test_gauss(st)));
        t->f[i] = dt == TCQ_DTYPE_BF16 ? tcq_bf16_to_f32(tcq_f32_to_bf16(v))
                  : dt == TCQ_DTYPE_F16 ? tcq_f16_to_f32(tcq_f32_to_f16(v)) : v;
    }
    return t;
}

static const tensor *get(const model *m, const char *name)
{
    for (int i = 0; i < m->count; i++)
        if (!strcmp(m->t[i].name, name)) return &m->t[i];
    return NULL;
}

static void build(model *m, int n, int ff, int tied, int qk_norm, tcq_dtype dt, uint64_t *st)
{
    memset(m, 0, sizeof *m);
    m->n = n;
    m->ff = ff;
    m->tied = tied;
    add(m, "model.embed_tokens.weight", VOCAB, n, 1.0, 0, st, dt);
    add(m, "model.norm.weight", n, 0, 1.5, 0.5, st, dt);
    if (!tied) add(m, "lm_head.weight", VOCAB, n, 0.05, 0, st, dt);
    const double sd = 1 / sqrt((double)n);
    add(m, "model.layers.0.input_layernorm.weight", n, 0, 1.5, 0.5, st, dt);
    add(m, "model.layers.0.post_attention_layernorm.weight", n, 0, 1.5, 0.5, st, dt);
    if (qk_norm) {
        add(m, "model.layers.0.self_attn.q_norm.weight", HD, 0, 1, 0.5, st, dt);
        add(m, "model.layers.0.self_attn.k_norm.weight", HD, 0, 1, 0.5, st, dt);
    }
    add(m, "model.layers.0.self_attn.q_proj.weight", NHEAD * HD, n, sd, 0, st, dt);
    add(m, "model.layers.0.self_attn.k_proj.weight", NKV * HD, n, sd, 0, st, dt);
    add(m, "model.layers.0.self_attn.v_proj.weight", NKV * HD, n, sd, 0, st, dt);
    add(m, "model.layers.0.self_attn.o_proj.weight", n, NHEAD * HD, sd, 0, st, dt);
    add(m, "model.layers.0.mlp.gate_proj.weight", ff, n, sd, 0, st, dt);
    add(m, "model.layers.0.mlp.up_proj.weight", ff, n, sd, 0, st, dt);
    add(m, "model.layers.0.mlp.down_proj.weight", n, ff, sd, 0, st, dt);
}

static void put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* Writes dir/config.json + safetensors (sharded in two with an index when shard is set). */
static void save(const model *m, const char *dir, const char *model_type, tcq_dtype dt, int shard)
{
    mkdir(dir, 0777);
    char path[512], cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\": [\"X\"], \"model_type\": \"%s\", \"dtype\": \"bfloat16\", \"hidden_size\": %d, \"intermediate_size\": %d,"
             " \"num_hidden_layers\": 1, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d,"
             " \"vocab_size\": %d, \"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": %s}",
             model_type, m->n, m->ff, NHEAD, NKV, HD, VOCAB, m->tied ? "true" : "false");
    snprintf(path, sizeof path, "%s/config.json", dir);
    put_file(path, cfg);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    put_file(path, "{\"model\": {\"type\": \"BPE\"}}\n");
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    put_file(path, "{{ messages }}\n");
    tcq_st_writer *w[2] = {NULL, NULL};
    void *bufs[32];
    json_t *wm = json_object();
    for (int s = 0; s < 2; s++) CHECK_OK(tcq_st_writer_create(&w[s]));
    for (int i = 0; i < m->count; i++) {
        const tensor *t = &m->t[i];
        const int64_t n = t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
        const size_t es = tcq_dtype_size(dt);
        unsigned char *b = malloc((size_t)n * es);
        for (int64_t j = 0; j < n; j++) {
            if (dt == TCQ_DTYPE_F32) memcpy(b + 4 * j, &t->f[j], 4);
            else {
                uint16_t h = dt == TCQ_DTYPE_F16 ? tcq_f32_to_f16(t->f[j]) : tcq_f32_to_bf16(t->f[j]);
                memcpy(b + 2 * j, &h, 2);
            }
        }
        bufs[i] = b;
        const int s = shard && strstr(t->name, "layers") ? 1 : 0;
        CHECK_OK(tcq_st_writer_add(w[s], t->name, dt, t->ndim, t->shape, b, (size_t)n * es));
        json_object_set_new(wm, t->name, json_string(s ? "model-00002-of-00002.safetensors"
                                                        : "model-00001-of-00002.safetensors"));
    }
    if (shard) {
        for (int s = 0; s < 2; s++) {
            snprintf(path, sizeof path, "%s/model-0000%d-of-00002.safetensors", dir, s + 1);
            CHECK_OK(tcq_st_writer_write(w[s], path));
        }
        json_t *idx = json_pack("{s:{s:i}, s:o}", "metadata", "total_size", 0, "weight_map", wm);
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        json_dump_file(idx, path, JSON_INDENT(1));
        json_decref(idx);
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK_OK(tcq_st_writer_write(w[0], path));
        json_decref(wm);
    }
    for (int s = 0; s < 2; s++) tcq_st_writer_free(w[s]);
    for (int i = 0; i < m->count; i++) free(bufs[i]);
}

/* The weights as the fold should leave them, [out, in] f32: readers W diag(g) R, writers R^T W. */
static float *expected(const model *m, const char *mod, const tcq_hadamard *h)
{
    char name[160];
    snprintf(name, sizeof name, "%s.weight", mod);
    const tensor *t = get(m, !strcmp(mod, "lm_head") && m->tied ? "model.embed_tokens.weight" : name);
    if (!t) return NULL;
    const int64_t R = t->shape[0], C = t->shape[1];
    float *W = malloc((size_t)(R * C) * sizeof *W);
    memcpy(W, t->f, (size_t)(R * C) * sizeof *W);
    if (strstr(mod, "o_proj") || strstr(mod, "down_proj")) {
        float *Wt = malloc((size_t)(R * C) * sizeof *Wt);
        CHECK_OK(tcq_rotate_writer(h, W, C, Wt, NULL));
        for (int64_t i = 0; i < C; i++)
            for (int64_t r = 0; r < R; r++) W[r * C + i] = Wt[i * R + r];
        free(Wt);
    } else if (!strcmp(mod, "model.embed_tokens")) {
        CHECK_OK(tcq_hadamard_rows(h, W, R, 0, NULL));
    } else {
        const char *g = !strcmp(mod, "lm_head") ? "model.norm.weight"
                        : strstr(mod, "mlp") ? "model.layers.0.post_attention_layernorm.weight"
                                             : "model.layers.0.input_layernorm.weight";
        CHECK_OK(tcq_rotate_reader(h, W, R, get(m, g)->f, NULL));
    }
    return W;
}

static const char *modules[] = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                                "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj",
                                "model.layers.0.mlp.gate_proj",    "model.layers.0.mlp.up_proj",
                                "model.layers.0.mlp.down_proj"};
enum { N_MODULES = sizeof modules / sizeof modules[0] };

typedef struct notes { int count; char last[512]; double sq_err; } notes;
static void on_progress(const tcq_quantize_progress *p, void *user)
{
    notes *n = user;
    CHECK(p->done <= p->total && p->tensor_index <= p->tensor_count, "progress %lld/%lld", (long long)p->done,
          (long long)p->total);
    n->sq_err = p->sq_err;
    if (p->note) {
        n->count++;
        snprintf(n->last, sizeof n->last, "%s", p->note);
    }
}

/* Check a quantized artifact against the model; coded 1: projections must be trellis at k. */
static void verify(const model *m, const char *dir, int k, int coded, int il, uint64_t seed)
{
    static const double codec_mse[5] = {0, 0, 0.0745, 0.0199, 0.0055};
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    tcq_qconfig *q = NULL;
    tcq_st_set *s = NULL;
    tcq_hadamard *h = NULL;
    CHECK_OK(tcq_qconfig_load(path, &q));
    CHECK_OK(tcq_st_set_open(dir, &s));
    CHECK_OK(tcq_hadamard_create(m->n, 1, seed, &h));
    if (!q || !s || !h) goto out;
    for (int i = 0; i < N_MODULES; i++) {
        const int writer = strstr(modules[i], "o_proj") || strstr(modules[i], "down_proj");
        const tcq_qentry e = tcq_qconfig_lookup(q, modules[i]);
        float *ref = expected(m, modules[i], h);
        char name[160];
        snprintf(name, sizeof name, "%s.weight", modules[i]);
        const tensor *src = get(m, name);
        const int64_t out = src->shape[0], in = src->shape[1];
        float *W = malloc((size_t)(out * in) * sizeof *W);
        if (coded) {
            const int want_il = il && writer;
            CHECK(e.mode == TCQ_QMODE_TRELLIS && e.bits == k && e.group_size == 256 && e.L == 12 &&
                      e.axis == (writer ? 0 : 1) && e.interleaved == want_il,
                  "%s: entry mode %d bits %d T %d L %d axis %d", modules[i], e.mode, e.bits, e.group_size, e.L, e.axis);
            tcq_trellis tr;
            snprintf(name, sizeof name, "%s.scales", modules[i]);
            const tcq_tensor_info *sc = tcq_st_set_find(s, name);
            snprintf(name, sizeof name, "%s.weight", modules[i]);
            const tcq_tensor_info *wt = tcq_st_set_find(s, name);
            CHECK(wt && sc && wt->dtype == TCQ_DTYPE_U32 && sc->dtype == TCQ_DTYPE_F16, "%s: stored tensors", modules[i]);
            if (!wt || !sc) continue;
            if (want_il)
                CHECK(wt->ndim == 3 && wt->shape[0] == out / 512 && wt->shape[1] == in && wt->shape[2] == 48,
                      "%s: interleaved codes shape", modules[i]);
            else
                CHECK(wt->ndim == 2 && wt->shape[0] == (writer ? in : out) && wt->shape[1] == (writer ? out : in) * k / 32,
                      "%s: codes shape [%lld, %lld]", modules[i], (long long)wt->shape[0], (long long)wt->shape[1]);
            CHECK_OK(tcq_trellis_from_tensors(modules[i], &e, wt, sc, &tr));
            CHECK(tcq_trellis_out(&tr) == out && tcq_trellis_in(&tr) == in, "%s: trellis shape", modules[i]);
            CHECK_OK(tcq_trellis_decode(&tr, W));
        } else {
            CHECK(e.mode == TCQ_QMODE_NONE, "%s: dense module has entry mode %d", modules[i], e.mode);
            const tcq_tensor_info *wt = tcq_st_set_find(s, name);
            CHECK(wt && wt->dtype == TCQ_DTYPE_BF16 && wt->shape[0] == out && wt->shape[1] == in,
                  "%s: dense bf16 [out, in]", name);
            if (!wt) continue;
            for (int64_t j = 0; j < out * in; j++) W[j] = tcq_bf16_to_f32(((const uint16_t *)wt->data)[j]);
        }
        double num = 0, den = 0;
        for (int64_t j = 0; j < out * in; j++) {
            num += (double)(W[j] - ref[j]) * (W[j] - ref[j]);
            den += (double)ref[j] * ref[j];
        }
        const double rel = num / den;
        if (coded) {
            fprintf(stderr, "k=%d %-32s rel MSE %.5f (codec %.4f)\n", k, modules[i], rel, codec_mse[k]);
            CHECK(rel > 0.7 * codec_mse[k] && rel < 1.3 * codec_mse[k], "%s k=%d: relative MSE %.5f vs codec %.4f",
                  modules[i], k, rel, codec_mse[k]);
        } else {
            CHECK(rel < 3e-5, "%s: dense rotated weights off: rel MSE %g", modules[i], rel);
        }
        free(W);
        free(ref);
    }
    /* Dense tensors: embedding rows R^T e, lm_head E diag(g) R (untied), norms 1, q/k norms copied. */
    static const char *dense[] = {"model.embed_tokens", "lm_head"};
    for (int i = 0; i < 2; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s.weight", dense[i]);
        const tcq_tensor_info *t = tcq_st_set_find(s, name);
        CHECK(t && t->dtype == TCQ_DTYPE_BF16 && t->ndim == 2 && t->shape[0] == VOCAB && t->shape[1] == m->n,
              "%s: dense bf16 [vocab, hidden]", name);
        CHECK(tcq_qconfig_lookup(q, dense[i]).mode == TCQ_QMODE_NONE, "%s: has a quantization entry", dense[i]);
        if (!t) continue;
        float *ref = expected(m, dense[i], h);
        double maxd = 0, maxa = 0;
        for (int64_t j = 0; j < VOCAB * m->n; j++) {
            const float v = tcq_bf16_to_f32(((const uint16_t *)t->data)[j]);
            maxd = fmax(maxd, fabs(v - ref[j]) / fmax(fabs(ref[j]), 1e-3));
            maxa = fmax(maxa, fabs(ref[j]));
        }
        CHECK(maxd < 1.0 / 128, "%s: max relative deviation from the rotated f32 %g", name, maxd);
        free(ref);
    }
    for (int i = 0; i < m->count; i++) {
        const tensor *t = &m->t[i];
        if (t->ndim != 1) continue;
        const tcq_tensor_info *o = tcq_st_set_find(s, t->name);
        CHECK(o && o->dtype == TCQ_DTYPE_BF16 && o->numel == t->shape[0], "%s: bf16 norm", t->name);
        if (!o) continue;
        /* q/k norms and reader biases are copied; writer biases live in the residual stream
         * (b -> R^T b); the folded norms become 1. */
        const int copied = strstr(t->name, "q_norm") || strstr(t->name, "k_norm") || strstr(t->name, "q_proj.bias");
        const int rotated = strstr(t->name, "o_proj.bias") != NULL;
        float *want = malloc((size_t)t->shape[0] * sizeof *want);
        for (int64_t j = 0; j < t->shape[0]; j++) want[j] = copied || rotated ? t->f[j] : 1.0f;
        if (rotated) CHECK_OK(tcq_hadamard_rows(h, want, 1, 0, NULL));
        int bad = 0;
        for (int64_t j = 0; j < t->shape[0]; j++)
            bad += tcq_bf16_to_f32(((const uint16_t *)o->data)[j]) != tcq_bf16_to_f32(tcq_f32_to_bf16(want[j]));
        CHECK(bad == 0, "%s: %d values not %s", t->name, bad, rotated ? "R^T b" : copied ? "copied" : "1");
        free(want);
    }
    CHECK(tcq_st_set_count(s) == m->count + (m->tied ? 1 : 0) + (coded ? N_MODULES : 0),
          "artifact holds %lld tensors", (long long)tcq_st_set_count(s));
    /* config.json: the input's members kept, untied, both quantization objects present. */
    size_t len = 0;
    char *txt = test_slurp(path, &len);
    json_t *cfg = txt ? json_loads(txt, 0, NULL) : NULL;
    CHECK(cfg && json_is_false(json_object_get(cfg, "tie_word_embeddings")), "%s: tie_word_embeddings false", path);
    CHECK(cfg && json_equal(json_object_get(cfg, "quantization"), json_object_get(cfg, "quantization_config")),
          "%s: quantization_config mirrors quantization", path);
    CHECK(cfg && json_integer_value(json_object_get(cfg, "hidden_size")) == m->n, "%s: hidden_size kept", path);
    json_decref(cfg);
    free(txt);
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    txt = test_slurp(path, &len);
    CHECK(txt && !strcmp(txt, "{{ messages }}\n"), "chat_template.jinja copied");
    free(txt);
out:
    tcq_hadamard_free(h);
    tcq_st_set_close(s);
    tcq_qconfig_free(q);
}

static void verify_rotated(const model *m, const char *dir, uint64_t seed)
{
    char path[512];
    tcq_st_set *s = NULL;
    tcq_hadamard *h = NULL;
    CHECK_OK(tcq_st_set_open(dir, &s));
    CHECK_OK(tcq_hadamard_create(m->n, 1, seed, &h));
    if (!s || !h) goto out;
    CHECK(tcq_st_set_count(s) == m->count + (m->tied ? 1 : 0), "rotated artifact holds %lld tensors",
          (long long)tcq_st_set_count(s));
    for (int64_t i = 0; i < tcq_st_set_count(s); i++) {
        const tcq_tensor_info *t = tcq_st_set_tensor(s, i);
        CHECK(t->dtype == TCQ_DTYPE_F32, "%s: dtype %s", t->name, tcq_dtype_name(t->dtype));
        if (t->ndim != 2 || t->dtype != TCQ_DTYPE_F32) continue;
        char mod[160];
        snprintf(mod, sizeof mod, "%s", t->name);
        *strrchr(mod, '.') = 0;
        float *ref = expected(m, mod, h);
        CHECK(ref && !memcmp(ref, t->data, t->nbytes), "%s: not the rotated f32 weights", t->name);
        free(ref);
    }
    size_t len = 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *txt = test_slurp(path, &len);
    json_t *cfg = txt ? json_loads(txt, 0, NULL) : NULL;
    const char *dt = cfg ? json_string_value(json_object_get(cfg, "dtype")) : NULL;
    CHECK(dt && !strcmp(dt, "float32"), "%s: dtype %s, not float32", path, dt ? dt : "missing");
    CHECK(cfg && !json_object_get(cfg, "quantization") && !json_object_get(cfg, "quantization_config") &&
              json_is_false(json_object_get(cfg, "tie_word_embeddings")),
          "%s: a plain untied config", path);
    json_decref(cfg);
    free(txt);
out:
    tcq_hadamard_free(h);
    tcq_st_set_close(s);
}

static void expect_fail(const char *in, const char *out, tcq_status want, const char *needle)
{
    tcq_quantize_opts o = {.bits = 2, .seed = 1, .threads = 1};
    tcq_status s = tcq_quantize_model(in, out, &o, NULL, NULL);
    CHECK(s == want && strstr(tcq_last_error(), needle), "%s: got %s '%s', want %s naming '%s'", in,
          tcq_status_str(s), tcq_last_error(), tcq_status_str(want), needle);
}

static void free_model(model *m)
{
    for (int i = 0; i < m->count; i++) free(m->t[i].f);
}

int main(void)
{
    uint64_t st = test_seed();
    char tmp[] = "/tmp/tcq_quant_XXXXXX";
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    char in[256], out[256], out1[256];
    snprintf(in, sizeof in, "%s/qwen", tmp);
    model m;
    build(&m, N, FF, 1, 1, TCQ_DTYPE_BF16, &st);
    save(&m, in, "qwen3", TCQ_DTYPE_BF16, 1);
    for (int k = 2; k <= 4; k++) {
        snprintf(out, sizeof out, "%s/q%d", tmp, k);
        tcq_quantize_opts o = {.bits = k, .L = 12, .seed = SEED, .threads = 2};
        notes n = {0};
        CHECK_OK(tcq_quantize_model(in, out, &o, on_progress, &n));
        CHECK(n.count == 0, "k=%d: unexpected warning '%s'", k, n.last);
        verify(&m, out, k, 1, 0, SEED);
    }
    /* Refitted scales: still a valid artifact, and no more error than the RMS scales. */
    {
        tcq_quantize_opts o = {.bits = 2, .seed = SEED, .threads = 2}, orf = o;
        orf.refit_scales = 1;
        notes a = {0}, b = {0};
        snprintf(out, sizeof out, "%s/q2r", tmp);
        CHECK_OK(tcq_quantize_model(in, out, &orf, on_progress, &b));
        verify(&m, out, 2, 1, 0, SEED);
        snprintf(out, sizeof out, "%s/q2n", tmp);
        CHECK_OK(tcq_quantize_model(in, out, &o, on_progress, &a));
        fprintf(stderr, "refit scales: squared error %.6g -> %.6g\n", a.sq_err, b.sq_err);
        CHECK(b.sq_err < a.sq_err && b.sq_err > 0.95 * a.sq_err, "refit: %g vs %g", b.sq_err, a.sq_err);
    }
    /* One thread gives the same bytes as two. */
    snprintf(out1, sizeof out1, "%s/q2t1", tmp);
    tcq_quantize_opts o1 = {.bits = 2, .seed = SEED, .threads = 1};
    CHECK_OK(tcq_quantize_model(in, out1, &o1, NULL, NULL));
    {
        char a[300], b[300];
        size_t la = 0, lb = 0;
        snprintf(a, sizeof a, "%s/q2/model.safetensors", tmp);
        snprintf(b, sizeof b, "%s/model.safetensors", out1);
        char *x = test_slurp(a, &la), *y = test_slurp(b, &lb);
        CHECK(x && y && la == lb && !memcmp(x, y, la), "threads change the artifact");
        free(x);
        free(y);
    }
    /* Rotate only: a plain f32 model holding exactly the folded, rotated weights. */
    snprintf(out1, sizeof out1, "%s/rot", tmp);
    tcq_quantize_opts o0 = {.bits = 0, .seed = SEED, .threads = 2};
    CHECK_OK(tcq_quantize_model(in, out1, &o0, NULL, NULL));
    verify_rotated(&m, out1, SEED);
    free_model(&m);

    /* Hidden 512, k=3 with the two-block interleave for o/down (C = 512). */
    snprintf(in, sizeof in, "%s/wide", tmp);
    snprintf(out, sizeof out, "%s/w3", tmp);
    build(&m, 512, 256, 1, 1, TCQ_DTYPE_BF16, &st);
    save(&m, in, "qwen3", TCQ_DTYPE_BF16, 0);
    {
        tcq_quantize_opts o = {.bits = 3, .seed = 4, .threads = 2, .interleave = 1};
        CHECK_OK(tcq_quantize_model(in, out, &o, NULL, NULL));
        verify(&m, out, 3, 1, 1, 4);
    }
    free_model(&m);

    /* Llama, f16, untied, hidden 320 = 20 x 16: nothing codable, everything dense and rotated. */
    snprintf(in, sizeof in, "%s/llama", tmp);
    snprintf(out, sizeof out, "%s/l2", tmp);
    build(&m, 320, 64, 0, 0, TCQ_DTYPE_F16, &st);
    add(&m, "model.layers.0.self_attn.q_proj.bias", NHEAD * HD, 0, 0.1, 0, &st, TCQ_DTYPE_F16);
    add(&m, "model.layers.0.self_attn.o_proj.bias", 320, 0, 0.1, 0, &st, TCQ_DTYPE_F16);
    save(&m, in, "llama", TCQ_DTYPE_F16, 0);
    {
        tcq_quantize_opts o = {.bits = 2, .seed = 3, .threads = 2};
        notes n = {0};
        CHECK_OK(tcq_quantize_model(in, out, &o, on_progress, &n));
        CHECK(n.count == N_MODULES && strstr(n.last, "not a multiple of 256"), "%d warnings, last '%s'", n.count, n.last);
        verify(&m, out, 2, 0, 0, 3);
    }
    free_model(&m);

    /* Bad inputs. */
    char path[300], bad[256];
    snprintf(bad, sizeof bad, "%s/bad", tmp);
    snprintf(out, sizeof out, "%s/badout", tmp);
    build(&m, N, FF, 1, 0, TCQ_DTYPE_F32, &st);
    save(&m, bad, "gemma", TCQ_DTYPE_F32, 0);
    expect_fail(bad, out, TCQ_ERR_UNSUPPORTED, "model_type");
    save(&m, bad, "llama", TCQ_DTYPE_F32, 0);
    expect_fail(bad, bad, TCQ_ERR_INVALID_ARG, "is the input directory");
    add(&m, "model.layers.0.mlp.extra.weight", 4, N, 1, 0, &st, TCQ_DTYPE_F32);
    save(&m, bad, "llama", TCQ_DTYPE_F32, 0);
    expect_fail(bad, out, TCQ_ERR_UNSUPPORTED, "model.layers.0.mlp.extra.weight");
    free_model(&m);
    build(&m, N, FF, 1, 0, TCQ_DTYPE_F32, &st);
    for (int i = 0; i < m.count; i++)
        if (strstr(m.t[i].name, "post_attention_layernorm")) {
            free(m.t[i].f);
            m.t[i] = m.t[--m.count];
            break;
        }
    save(&m, bad, "llama", TCQ_DTYPE_F32, 0);
    expect_fail(bad, out, TCQ_ERR_NOT_FOUND, "post_attention_layernorm");
    free_model(&m);
    build(&m, N, FF, 1, 0, TCQ_DTYPE_F32, &st);
    m.t[m.count - 1].shape[0] = 128;   /* down_proj [128, 256]: not [hidden, in] */
    m.t[m.count - 1].shape[1] = 512;
    save(&m, bad, "llama", TCQ_DTYPE_F32, 0);
    expect_fail(bad, out, TCQ_ERR_FORMAT, "model.layers.0.mlp.down_proj.weight");
    free_model(&m);
    snprintf(path, sizeof path, "%s/config.json", bad);
    put_file(path, "{\"model_type\": \"llama\", ");
    expect_fail(bad, out, TCQ_ERR_FORMAT, "config.json");

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "cleanup");
    return test_done("test_quant_roundtrip");
}
