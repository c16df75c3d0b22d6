/* Model loading: tinyqwen and the stories260K HF copy load; malformed model directories (bad
 * JSON, unknown model_type, missing tensor, wrong shape, unknown dtype, truncated shard,
 * truncated llama2.c checkpoint) are rejected with messages naming the file and the tensor. */
#include "test.h"

#include <sys/stat.h>
#include <unistd.h>

#define SD TEST_REPO_DATA

static char tmp[256];

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s", path);
    if (!f) return;
    CHECK(fwrite(data, 1, n, f) == n, "write %s", path);
    fclose(f);
}

static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *n = 0;
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* Fresh directory tmp/name holding stories260K/hf's config.json (or the given text). */
static const char *mkcase(const char *name, const char *config)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    mkdir(dir, 0755);
    char p[600];
    size_t n = 0;
    char *cfg = read_all(SD "/stories260K/hf/config.json", &n);
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (config) write_file(p, config, strlen(config));
    else write_file(p, cfg, n);
    free(cfg);
    return dir;
}

/* Rewrite stories260K's model.safetensors into dir: drop `drop`, or give `reshape` a wrong shape. */
static void write_tensors(const char *dir, const char *drop, const char *reshape)
{
    tcq_st_file *f = NULL;
    CHECK_OK(tcq_st_open(SD "/stories260K/hf/model.safetensors", &f));
    if (!f) return;   /* the failed check is reported; without the shared data there is nothing to rewrite */
    tcq_st_writer *w;
    CHECK_OK(tcq_st_writer_create(&w));
    for (int64_t i = 0; i < tcq_st_count(f); i++) {
        const tcq_tensor_info *t = tcq_st_tensor(f, i);
        if (drop && !strcmp(t->name, drop)) continue;
        int64_t shape[TCQ_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        int nd = t->ndim;
        if (reshape && !strcmp(t->name, reshape)) {   /* same bytes, shape [a*b/2, 2] */
            shape[0] = t->numel / 2;
            shape[1] = 2;
            nd = 2;
        }
        CHECK_OK(tcq_st_writer_add(w, t->name, t->dtype, nd, shape, t->data, t->nbytes));
    }
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK_OK(tcq_st_writer_write(w, p));
    tcq_st_writer_free(w);
    tcq_st_close(f);
}

static void expect_fail(const char *path, tcq_status want, const char *n1, const char *n2)
{
    tcq_model *m = NULL;
    tcq_status s = tcq_model_load(path, NULL, &m);
    const char *e = tcq_last_error();
    CHECK(s == want, "%s: got %s (%s), want %s", path, tcq_status_str(s), e, tcq_status_str(want));
    CHECK(m == NULL, "%s: model set on failure", path);
    CHECK(!n1 || strstr(e, n1), "%s: message '%s' lacks '%s'", path, e, n1);
    CHECK(!n2 || strstr(e, n2), "%s: message '%s' lacks '%s'", path, e, n2);
    tcq_model_free(m);
}

static void test_good(void)
{
    tcq_model *m = NULL;
    if (!test_have_data("tinyqwen/model.safetensors.index.json")) return;
    CHECK_OK(tcq_model_load(test_data_path("tinyqwen"), NULL, &m));
    if (m) {
        const tcq_model_config *c = tcq_model_get_config(m);
        CHECK(c->arch == TCQ_ARCH_QWEN3 && c->dim == 512 && c->n_layers == 8 && c->n_kv_heads == 4 &&
                  c->head_dim == 64 && c->vocab_size == 8192 && c->tied_embeddings && c->rope_theta == 1e6 &&
                  c->n_eos == 1 && c->eos_ids[0] == 2 && c->bos_id == -1,
              "tinyqwen config");
        CHECK(strcmp(tcq_model_describe(m), "bf16; embeddings bf16 (tied)") == 0, "describe: %s", tcq_model_describe(m));
        /* embeddings 8192x512 + 8 layers of (4*512*512 + 2*512*256... ) in bf16: ~29.4M params */
        size_t wb = tcq_model_weight_bytes(m);
        CHECK(wb > 58000000 && wb < 60000000, "weight bytes %zu", wb);
        tcq_session *s;
        CHECK_OK(tcq_session_create(m, 100, TCQ_KV_F16, &s));
        CHECK(tcq_session_kv_bytes(s) == 2ull * 8 * 100 * 256 * 2, "kv bytes %zu", tcq_session_kv_bytes(s));
        tcq_session_free(s);
    }
    tcq_model_free(m);
}

static void test_config(void)
{
    tcq_model_config c;
    const char *t5 = "{\"model_type\":\"llama\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
                     "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":300,\"eos_token_id\":[5,7],"
                     "\"bos_token_id\":1,\"rope_parameters\":{\"rope_theta\":500000.0,\"rope_type\":\"llama3\","
                     "\"factor\":32.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                     "\"original_max_position_embeddings\":8192}}";
    CHECK_OK(tcq_model_config_parse(t5, strlen(t5), "t5", &c));
    CHECK(c.head_dim == 64 && c.rope_theta == 500000.0 && c.rope_llama3 && c.rope_factor == 32.0 &&
              c.rope_orig_max_pos == 8192 && c.n_eos == 2 && c.eos_ids[1] == 7 && c.bos_id == 1 && c.tied_embeddings == -1,
          "transformers-5 llama3 config");
    const char *t4 = "{\"model_type\":\"qwen3\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
                     "\"num_attention_heads\":4,\"head_dim\":128,\"vocab_size\":300,\"rope_theta\":1000.0,"
                     "\"rope_scaling\":null}";
    CHECK_OK(tcq_model_config_parse(t4, strlen(t4), "t4", &c));
    CHECK(c.head_dim == 128 && c.n_kv_heads == 4 && c.rope_theta == 1000.0 && !c.rope_llama3 && c.tied_embeddings == -1,
          "qwen3 config with rope_theta at top level");
    const char *bad[] = {
        "{\"model_type\":\"gpt2\"}", "{\"model_type\":\"llama\"}", "[1,2]",
        "{\"model_type\":\"llama\",\"hidden_size\":\"256\",\"intermediate_size\":512,\"num_hidden_layers\":2,"
        "\"num_attention_heads\":4,\"vocab_size\":300}",
        "{\"model_type\":\"llama\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
        "\"num_attention_heads\":4,\"num_key_value_heads\":3,\"vocab_size\":300}",
        "{\"model_type\":\"llama\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
        "\"num_attention_heads\":4,\"vocab_size\":300,\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}",
        "{\"model_type\":\"qwen3\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
        "\"num_attention_heads\":4,\"vocab_size\":300,\"use_sliding_window\":true}",
        "{\"model_type\":\"qwen3\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
        "\"num_attention_heads\":4,\"vocab_size\":300,\"layer_types\":[\"full_attention\",\"sliding_attention\"]}",
        "{\"model_type\":\"llama\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
        "\"num_attention_heads\":4,\"vocab_size\":300,\"mlp_bias\":true}",
        /* found by the fuzzer: a double out of int's range must not be converted */
        "{\"model_type\":\"llama\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
        "\"num_attention_heads\":4,\"vocab_size\":300,\"rope_scaling\":{\"rope_type\":\"llama3\","
        "\"original_max_position_embeddings\":7e13}}",
        "{\"model_type\":\"llama\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
        "\"num_attention_heads\":4,\"vocab_size\":300,\"eos_token_id\":[2,300]}",
        "{\"model_type\":\"llama\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
        "\"num_attention_heads\":4,\"vocab_size\":300,\"bos_token_id\":-4294967295}",
    };
    const char *names[] = {"gpt2", "hidden_size", "not a JSON object", "hidden_size", "num_key_value_heads", "yarn",
                           "use_sliding_window", "layer_types[1]", "mlp_bias", "original_max_position_embeddings",
                           "eos_token_id 300", "bos_token_id"};
    for (int i = 0; i < 12; i++) {
        tcq_status s = tcq_model_config_parse(bad[i], strlen(bad[i]), "cfg.json", &c);
        CHECK(s != TCQ_OK && strstr(tcq_last_error(), names[i]) && strstr(tcq_last_error(), "cfg.json"),
              "bad config %d: %s: %s", i, tcq_status_str(s), tcq_last_error());
    }
}

/* A truncated shard of the sharded bf16 tinyqwen (from $TCQ_TEST_DATA). */
static void malformed_shard(void)
{
    if (!test_have_data("tinyqwen/model.safetensors.index.json")) return;
    char p[700];
    size_t n;
    char *img;
    snprintf(p, sizeof p, "%s/shard", tmp);
    mkdir(p, 0755);
    const char *files[] = {"config.json", "model.safetensors.index.json", "model-00001-of-00005.safetensors",
                           "model-00002-of-00005.safetensors", "model-00004-of-00005.safetensors",
                           "model-00005-of-00005.safetensors"};
    for (int i = 0; i < 6; i++) {
        char src[600], dst[700];
        snprintf(src, sizeof src, "%s/%s", test_data_path("tinyqwen"), files[i]);
        snprintf(dst, sizeof dst, "%s/shard/%s", tmp, files[i]);
        CHECK(symlink(src, dst) == 0 || access(dst, F_OK) == 0, "symlink %s", dst);
    }
    img = read_all(test_data_path("tinyqwen/model-00003-of-00005.safetensors"), &n);
    snprintf(p, sizeof p, "%s/shard/model-00003-of-00005.safetensors", tmp);
    write_file(p, img, n / 2);
    free(img);
    snprintf(p, sizeof p, "%s/shard", tmp);
    expect_fail(p, TCQ_ERR_FORMAT, "model-00003-of-00005.safetensors", NULL);
}

static void test_malformed(void)
{
    char p[700];
    const char *d = mkcase("badjson", "{\"model_type\": \"llama\", \"hidden_size\": 6");
    expect_fail(d, TCQ_ERR_FORMAT, "config.json", NULL);
    d = mkcase("gpt2", "{\"model_type\": \"gpt2\", \"hidden_size\": 64}");
    expect_fail(d, TCQ_ERR_UNSUPPORTED, "config.json", "gpt2");

    d = mkcase("missing", NULL);
    write_tensors(d, "model.layers.3.mlp.up_proj.weight", NULL);
    expect_fail(d, TCQ_ERR_NOT_FOUND, "missing", "model.layers.3.mlp.up_proj.weight");

    d = mkcase("shape", NULL);
    write_tensors(d, NULL, "model.layers.1.self_attn.k_proj.weight");
    expect_fail(d, TCQ_ERR_FORMAT, "shape/model.safetensors", "model.layers.1.self_attn.k_proj.weight");

    /* unknown dtype: patch one "F32" in the header to "Q32" (same length) */
    d = mkcase("dtype", NULL);
    size_t n;
    char *img = read_all(SD "/stories260K/hf/model.safetensors", &n);
    CHECK(img && n >= 8, "read %s", SD "/stories260K/hf/model.safetensors");
    if (!img || n < 8) {
        free(img);
        return;
    }
    uint64_t hl;
    memcpy(&hl, img, 8);
    char *hit = NULL;
    for (char *q = img + 8; q + 5 < img + 8 + hl; q++)
        if (!memcmp(q, "\"F32\"", 5)) {
            hit = q;
            break;
        }
    CHECK(hit != NULL, "F32 in header");
    if (hit) hit[1] = 'Q';
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    write_file(p, img, n);
    expect_fail(d, TCQ_ERR_FORMAT, "dtype/model.safetensors", "Q32");

    /* truncated safetensors and truncated shard of a sharded model */
    d = mkcase("trunc", NULL);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    write_file(p, img, n - 1000);
    expect_fail(d, TCQ_ERR_FORMAT, "trunc/model.safetensors", NULL);
    free(img);

    malformed_shard();

    /* truncated llama2.c checkpoint */
    img = read_all(SD "/stories260K/stories260K.bin", &n);
    snprintf(p, sizeof p, "%s/short.bin", tmp);
    write_file(p, img, n - 4);
    free(img);
    expect_fail(p, TCQ_ERR_FORMAT, "short.bin", "truncated");
    expect_fail(SD "/no/such/dir", TCQ_ERR_IO, "no/such/dir", NULL);
}

/* stories260K/hf rewritten in f16 and in bf16 (every tensor: embeddings, norms, projections)
 * loads and stays close to the f32 model. */
static void test_dtypes(void)
{
    tcq_st_file *f;
    CHECK_OK(tcq_st_open(SD "/stories260K/hf/model.safetensors", &f));
    if (!f) return;
    int32_t toks[24];
    for (int i = 0; i < 24; i++) toks[i] = i ? (int32_t)((i * 131) % 512) : 1;
    float *ref = malloc(sizeof(float) * 24 * 512), *got = malloc(sizeof(float) * 24 * 512);
    tcq_model *m;
    tcq_session *s;
    CHECK_OK(tcq_model_load(SD "/stories260K/hf", NULL, &m));
    CHECK_OK(tcq_session_create(m, 24, TCQ_KV_F32, &s));
    CHECK_OK(tcq_model_forward(m, s, toks, 24, ref));
    tcq_session_free(s);
    tcq_model_free(m);
    for (int half = 0; half < 2; half++) {
        const char *d = mkcase(half ? "bf16" : "f16", NULL);
        tcq_st_writer *w;
        CHECK_OK(tcq_st_writer_create(&w));
        uint16_t *bufs[64];
        int nb = 0;
        for (int64_t i = 0; i < tcq_st_count(f) && nb < 64; i++) {
            const tcq_tensor_info *t = tcq_st_tensor(f, i);
            uint16_t *h = malloc((size_t)t->numel * 2);
            for (int64_t j = 0; j < t->numel; j++) {
                float x;
                memcpy(&x, (const char *)t->data + 4 * j, 4);
                h[j] = half ? tcq_f32_to_bf16(x) : tcq_f32_to_f16(x);
            }
            bufs[nb++] = h;
            CHECK_OK(tcq_st_writer_add(w, t->name, half ? TCQ_DTYPE_BF16 : TCQ_DTYPE_F16, t->ndim, t->shape, h,
                                       (size_t)t->numel * 2));
        }
        char p[700];
        snprintf(p, sizeof p, "%s/model.safetensors", d);
        CHECK_OK(tcq_st_writer_write(w, p));
        tcq_st_writer_free(w);
        for (int i = 0; i < nb; i++) free(bufs[i]);
        m = NULL;
        CHECK_OK(tcq_model_load(d, NULL, &m));
        if (!m) continue;
        CHECK(strstr(tcq_model_describe(m), half ? "bf16" : "f16") == tcq_model_describe(m), "describe %s",
              tcq_model_describe(m));
        CHECK_OK(tcq_session_create(m, 24, TCQ_KV_F32, &s));
        CHECK_OK(tcq_model_forward(m, s, toks, 24, got));
        double md = 0;
        for (int i = 0; i < 24 * 512; i++) md = fmax(md, fabs((double)got[i] - ref[i]));
        fprintf(stderr, "stories260K in %s: max |dlogit| %.3g vs f32\n", half ? "bf16" : "f16", md);
        CHECK(md > 0 && md < (half ? 0.5 : 0.05), "%s: max |dlogit| %g", half ? "bf16" : "f16", md);
        tcq_session_free(s);
        tcq_model_free(m);
    }
    free(ref);
    free(got);
    tcq_st_close(f);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/tcq_model_load_XXXXXX");
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    test_good();
    test_config();
    test_malformed();
    test_dtypes();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "cleanup");
    return test_done("test_model_load");
}
