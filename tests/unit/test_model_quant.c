/* Quantized model directories: tiny_qwen3 with trellis layers (k 2/3/4, axis 0/1, interleaved),
 * MLX affine layers (4/8 bits, groups 32/64/128) and an affine tied embedding, bound through
 * config.json's quantization entries, against the same model with those weights decoded to dense
 * f32.  Random codes: any word pattern is a valid trellis code. */
#include "test.h"

#include <jansson.h>
#include <sys/stat.h>

#define TD TCQ_SOURCE_DIR "/tests/data/"

typedef struct spec {
    const char *suffix;   /* module suffix within a layer ("" for embed) */
    int mode;             /* 1 trellis, 2 affine */
    int bits, axis, inter, group;
} spec;

static const spec specs[] = {
    {"self_attn.q_proj", 1, 3, 0, 1, 256},   /* [512, 256]: axis 0 codes rows of 512 -> interleavable */
    {"self_attn.k_proj", 1, 2, 1, 0, 256},
    {"self_attn.v_proj", 2, 4, 0, 0, 64},
    {"self_attn.o_proj", 1, 4, 0, 0, 256},
    {"mlp.gate_proj", 1, 3, 1, 0, 256},
    {"mlp.up_proj", 2, 8, 0, 0, 128},
    {"mlp.down_proj", 1, 2, 0, 0, 128},
};

static uint64_t rng;
static char tmp[128];

static void add_f32(tcq_st_writer *w, const char *name, float *data, int64_t out, int64_t in)
{
    int64_t sh[2] = {out, in};
    CHECK_OK(tcq_st_writer_add(w, name, TCQ_DTYPE_F32, 2, sh, data, (size_t)(out * in) * 4));
}

/* Random trellis weight for module `mod` [out, in]: writes codes+scales to q, decoded to d. */
static void make_trellis(tcq_st_writer *q, tcq_st_writer *d, const char *mod, const spec *s, int64_t out, int64_t in,
                         json_t *qcfg, void **keep, int *nk)
{
    tcq_trellis t = {{12, s->bits, s->group}, s->axis, s->inter, s->axis ? out : in, s->axis ? in : out, NULL, NULL};
    int64_t words = t.rows * t.cols * s->bits / 32;
    uint32_t *codes = malloc((size_t)words * 4), *stored = codes;
    uint16_t *scales = malloc((size_t)t.rows * 2);
    for (int64_t i = 0; i < words; i++) codes[i] = (uint32_t)test_rand(&rng);
    for (int64_t r = 0; r < t.rows; r++)
        scales[r] = tcq_f32_to_f16((float)((0.7 + 0.6 * test_uniform(&rng)) / sqrt((double)in) / tcq_code_rms(12)));
    if (s->inter) {
        stored = malloc((size_t)words * 4);
        CHECK_OK(tcq_interleave(t.rows, t.cols, codes, stored));
        t.codes = stored;
    } else {
        t.codes = codes;
    }
    t.scales = scales;
    float *W = malloc((size_t)(out * in) * 4);
    CHECK_OK(tcq_trellis_decode(&t, W));
    char name[300];
    snprintf(name, sizeof name, "%s.weight", mod);
    if (s->inter) {
        int64_t sh[3] = {t.cols / 512, t.rows, 48};
        CHECK_OK(tcq_st_writer_add(q, name, TCQ_DTYPE_U32, 3, sh, stored, (size_t)words * 4));
    } else {
        int64_t sh[2] = {t.rows, t.cols * s->bits / 32};
        CHECK_OK(tcq_st_writer_add(q, name, TCQ_DTYPE_U32, 2, sh, codes, (size_t)words * 4));
    }
    add_f32(d, name, W, out, in);
    snprintf(name, sizeof name, "%s.scales", mod);
    int64_t rs = t.rows;
    CHECK_OK(tcq_st_writer_add(q, name, TCQ_DTYPE_F16, 1, &rs, scales, (size_t)t.rows * 2));
    json_t *tr = json_pack("{s:i, s:s, s:i}", "L", 12, "code", "1mad", "axis", s->axis);
    if (s->inter) json_object_set_new(tr, "interleave", json_true());
    json_object_set_new(qcfg, mod, json_pack("{s:i, s:i, s:s, s:o}", "bits", s->bits, "group_size", s->group, "mode",
                                             "trellis", "trellis", tr));
    keep[(*nk)++] = codes;
    keep[(*nk)++] = scales;
    keep[(*nk)++] = W;
    if (stored != codes) keep[(*nk)++] = stored;
}

static void make_affine(tcq_st_writer *q, tcq_st_writer *d, const char *mod, const spec *s, int64_t out, int64_t in,
                        json_t *qcfg, void **keep, int *nk)
{
    const int64_t wpr = in * s->bits / 32, gpr = in / s->group;
    uint32_t *w = malloc((size_t)(out * wpr) * 4);
    uint16_t *sc = malloc((size_t)(out * gpr) * 2), *bi = malloc((size_t)(out * gpr) * 2);
    float *W = malloc((size_t)(out * in) * 4);
    const double amp = 2.0 / sqrt((double)in) / (1 << s->bits);
    for (int64_t i = 0; i < out * wpr; i++) w[i] = (uint32_t)test_rand(&rng);
    for (int64_t i = 0; i < out * gpr; i++) {
        sc[i] = tcq_f32_to_f16((float)(amp * (0.5 + test_uniform(&rng))));
        bi[i] = tcq_f32_to_f16((float)(-amp * (1 << s->bits) / 2 * (0.8 + 0.4 * test_uniform(&rng))));
    }
    for (int64_t r = 0; r < out; r++)
        for (int64_t j = 0; j < in; j++) {
            uint32_t v = (w[r * wpr + j * s->bits / 32] >> ((j * s->bits) % 32)) & ((1u << s->bits) - 1);
            int64_t g = r * gpr + j / s->group;
            W[r * in + j] = fmaf(tcq_f16_to_f32(sc[g]), (float)v, tcq_f16_to_f32(bi[g]));
        }
    char name[300];
    int64_t sh[2] = {out, wpr}, gs[2] = {out, gpr};
    snprintf(name, sizeof name, "%s.weight", mod);
    CHECK_OK(tcq_st_writer_add(q, name, TCQ_DTYPE_U32, 2, sh, w, (size_t)(out * wpr) * 4));
    add_f32(d, name, W, out, in);
    snprintf(name, sizeof name, "%s.scales", mod);
    CHECK_OK(tcq_st_writer_add(q, name, TCQ_DTYPE_F16, 2, gs, sc, (size_t)(out * gpr) * 2));
    snprintf(name, sizeof name, "%s.biases", mod);
    CHECK_OK(tcq_st_writer_add(q, name, TCQ_DTYPE_F16, 2, gs, bi, (size_t)(out * gpr) * 2));
    json_object_set_new(qcfg, mod, json_pack("{s:i, s:i, s:s}", "bits", s->bits, "group_size", s->group, "mode", "affine"));
    keep[(*nk)++] = w;
    keep[(*nk)++] = sc;
    keep[(*nk)++] = bi;
    keep[(*nk)++] = W;
}

static double run(const char *dir, tcq_kpath path, const int32_t *toks, int n, float *lg, char *desc)
{
    tcq_model *m = NULL;
    tcq_model_opts o = {.path = path};
    tcq_status s = tcq_model_load(dir, &o, &m);
    CHECK(s == TCQ_OK, "load %s: %s", dir, tcq_last_error());
    if (!m) return -1;
    if (desc) snprintf(desc, 128, "%s", tcq_model_describe(m));
    tcq_session *ss;
    CHECK_OK(tcq_session_create(m, n, TCQ_KV_F32, &ss));
    CHECK_OK(tcq_model_forward(m, ss, toks, n, lg));
    tcq_session_free(ss);
    tcq_model_free(m);
    return 0;
}

int main(void)
{
    rng = test_seed();
    snprintf(tmp, sizeof tmp, "/tmp/tcq_model_quant_XXXXXX");
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    char qdir[256], ddir[256], p[300];
    snprintf(qdir, sizeof qdir, "%s/q", tmp);
    snprintf(ddir, sizeof ddir, "%s/d", tmp);
    mkdir(qdir, 0755);
    mkdir(ddir, 0755);

    tcq_st_file *src;
    CHECK_OK(tcq_st_open(TD "tiny_qwen3/model.safetensors", &src));
    json_error_t err;
    json_t *cfg = json_load_file(TD "tiny_qwen3/config.json", 0, &err);
    CHECK(cfg && src, "tiny_qwen3 inputs");
    if (!cfg || !src) return test_done("test_model_quant");
    const int64_t layers = json_integer_value(json_object_get(cfg, "num_hidden_layers"));
    tcq_st_writer *qw, *dw;
    CHECK_OK(tcq_st_writer_create(&qw));
    CHECK_OK(tcq_st_writer_create(&dw));
    json_t *qcfg = json_object();
    void *keep[256];
    int nk = 0;
    for (int64_t i = 0; i < tcq_st_count(src); i++) {
        const tcq_tensor_info *t = tcq_st_tensor(src, i);
        const spec *s = NULL;
        static const spec emb = {"", 2, 4, 0, 0, 32};
        if (!strcmp(t->name, "model.embed_tokens.weight")) s = &emb;
        for (size_t k = 0; k < sizeof specs / sizeof specs[0] && !s; k++)
            if (strstr(t->name, specs[k].suffix) && strstr(t->name, ".weight") && !strstr(t->name, "norm"))
                s = &specs[k];
        char mod[200];
        snprintf(mod, sizeof mod, "%.*s", (int)(strlen(t->name) - 7), t->name);
        if (!s) {   /* norms: copied as they are */
            CHECK_OK(tcq_st_writer_add(qw, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes));
            CHECK_OK(tcq_st_writer_add(dw, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes));
        } else if (s->mode == 1) {
            make_trellis(qw, dw, mod, s, t->shape[0], t->shape[1], qcfg, keep, &nk);
        } else {
            make_affine(qw, dw, mod, s, t->shape[0], t->shape[1], qcfg, keep, &nk);
        }
    }
    CHECK(layers == 2 && nk > 40, "built %d buffers", nk);
    snprintf(p, sizeof p, "%s/model.safetensors", qdir);
    CHECK_OK(tcq_st_writer_write(qw, p));
    snprintf(p, sizeof p, "%s/model.safetensors", ddir);
    CHECK_OK(tcq_st_writer_write(dw, p));
    snprintf(p, sizeof p, "%s/config.json", ddir);
    CHECK(json_dump_file(cfg, p, 0) == 0, "write %s", p);
    json_object_set(cfg, "quantization", qcfg);
    json_object_set_new(cfg, "quantization_config", qcfg);
    snprintf(p, sizeof p, "%s/config.json", qdir);
    CHECK(json_dump_file(cfg, p, 0) == 0, "write %s", p);

    enum { N = 24, V = 512 };
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)(test_rand(&rng) % V);
    float *lq = malloc(sizeof(float) * N * V), *ld = malloc(sizeof(float) * N * V);
    char desc[128] = "";
    run(ddir, TCQ_PATH_EXACT, toks, N, ld, NULL);
    run(qdir, TCQ_PATH_EXACT, toks, N, lq, desc);
    CHECK(strstr(desc, "trellis k=2..4") && strstr(desc, "affine"), "describe: %s", desc);
    double md = 0, amax = 0;
    for (int i = 0; i < N * V; i++) {
        md = fmax(md, fabs((double)lq[i] - ld[i]));
        amax = fmax(amax, fabs((double)ld[i]));
    }
    fprintf(stderr, "quantized vs decoded-dense (exact path): max |dlogit| %.3g (|logit| <= %.3g)\n", md, amax);
    CHECK(amax > 0.5 && md <= 1e-3, "exact path: max |dlogit| %g", md);
    run(qdir, TCQ_PATH_AUTO, toks, N, lq, NULL);
    md = 0;
    for (int i = 0; i < N * V; i++) md = fmax(md, fabs((double)lq[i] - ld[i]));
    fprintf(stderr, "quantized vs decoded-dense (auto path): max |dlogit| %.3g\n", md);
    CHECK(md <= 0.05 * amax, "auto path: max |dlogit| %g", md);

    /* an entry whose tensors do not match is rejected naming the module */
    json_object_set_new(qcfg, "model.layers.1.mlp.down_proj",
                        json_pack("{s:i, s:i, s:s, s:{s:i, s:s, s:i}}", "bits", 3, "group_size", 128, "mode", "trellis",
                                  "trellis", "L", 12, "code", "1mad", "axis", 0));
    snprintf(p, sizeof p, "%s/config.json", qdir);
    CHECK(json_dump_file(cfg, p, 0) == 0, "write %s", p);
    tcq_model *m = NULL;
    tcq_status s = tcq_model_load(qdir, NULL, &m);
    CHECK(s != TCQ_OK && strstr(tcq_last_error(), "model.layers.1.mlp.down_proj"), "mismatched entry: %s: %s",
          tcq_status_str(s), tcq_last_error());
    tcq_model_free(m);

    for (int i = 0; i < nk; i++) free(keep[i]);
    free(lq);
    free(ld);
    tcq_st_writer_free(qw);
    tcq_st_writer_free(dw);
    tcq_st_close(src);
    json_decref(cfg);
    snprintf(p, sizeof p, "rm -rf '%s'", tmp);
    CHECK(system(p) == 0, "cleanup");
    return test_done("test_model_quant");
}
