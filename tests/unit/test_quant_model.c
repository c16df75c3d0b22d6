/* Quantize -> load -> run on the random transformers models of tests/data (tiny_llama: untied,
 * llama3 RoPE; tiny_qwen3: tied, q/k norms, head_dim 128 != hidden / heads):
 *   - the fold + rotation alone (--rotate-only) gives transformers' logits (max |d| <= 1e-3) and
 *     tcq's own logits of the original model to f32 noise;
 *   - trellis artifacts at k = 4, 3, 2 load, run, and drift from the original monotonically
 *     (mean KL of the next-token distributions grows as bits fall).  Random models drift more than
 *     trained ones (tiny_qwen3 k=2: KL ~1.3, tinyqwen ~0.39), so the bound is only "not garbage". */
#include "test.h"

#include <unistd.h>

static float *run_model(const char *dir, const int32_t *tok, int n, int *vocab)
{
    tcq_model *m = NULL;
    tcq_session *s = NULL;
    tcq_model_opts mo = {.n_threads = 2, .path = TCQ_PATH_EXACT};   /* f32 activations: the 1e-4 checks */
    float *logits = NULL;
    CHECK_OK(tcq_model_load(dir, &mo, &m));
    if (!m) return NULL;
    *vocab = tcq_model_get_config(m)->vocab_size;
    CHECK_OK(tcq_session_create(m, n, TCQ_KV_F32, &s));
    logits = malloc((size_t)n * (size_t)*vocab * sizeof *logits);
    if (s) CHECK_OK(tcq_model_forward(m, s, tok, n, logits));
    tcq_session_free(s);
    tcq_model_free(m);
    return logits;
}

static double mean_kl(const float *ref, const float *q, int n, int V)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const float *a = ref + (size_t)i * V, *b = q + (size_t)i * V;
        double ma = -1e300, mb = -1e300, za = 0, zb = 0, kl = 0;
        for (int j = 0; j < V; j++) ma = fmax(ma, a[j]), mb = fmax(mb, b[j]);
        for (int j = 0; j < V; j++) za += exp(a[j] - ma), zb += exp(b[j] - mb);
        for (int j = 0; j < V; j++) {
            const double la = a[j] - ma - log(za), lb = b[j] - mb - log(zb);
            kl += exp(la) * (la - lb);
        }
        sum += kl;
    }
    return sum / n;
}

static void one(const char *name, const char *tmp)
{
    char src[512], path[600], out[600];
    snprintf(src, sizeof src, "%s/tests/data/%s", TCQ_SOURCE_DIR, name);
    snprintf(path, sizeof path, "%s/ref_logits.safetensors", src);
    tcq_st_file *rf = NULL;
    CHECK_OK(tcq_st_open(path, &rf));
    if (!rf) return;
    const tcq_tensor_info *tt = tcq_st_find(rf, "tokens"), *lt = tcq_st_find(rf, "logits");
    CHECK(tt && lt && tt->dtype == TCQ_DTYPE_I32 && lt->dtype == TCQ_DTYPE_F32, "%s: reference tensors", path);
    if (!tt || !lt) {
        tcq_st_close(rf);
        return;
    }
    const int n = (int)tt->numel;
    const int32_t *tok = tt->data;
    const float *hf = lt->data;
    int V = 0, V2 = 0;
    float *orig = run_model(src, tok, n, &V);

    snprintf(out, sizeof out, "%s/%s_rot", tmp, name);
    tcq_quantize_opts o = {.bits = 0, .seed = 5, .threads = 2};
    CHECK_OK(tcq_quantize_model(src, out, &o, NULL, NULL));
    float *rot = run_model(out, tok, n, &V2);
    if (orig && rot && V == V2 && lt->numel == (int64_t)n * V) {
        double d_hf = 0, d_own = 0;
        for (int64_t i = 0; i < (int64_t)n * V; i++) {
            d_hf = fmax(d_hf, fabs(rot[i] - hf[i]));
            d_own = fmax(d_own, fabs(rot[i] - orig[i]));
        }
        fprintf(stderr, "%s rotated: max |dlogit| %.3g vs transformers, %.3g vs tcq on the original\n", name, d_hf, d_own);
        CHECK(d_hf <= 1e-3, "%s: rotated model vs transformers max |dlogit| %g", name, d_hf);
        CHECK(d_own <= 1e-4, "%s: rotated model vs original max |dlogit| %g", name, d_own);
    } else {
        CHECK(0, "%s: no logits to compare (vocab %d / %d)", name, V, V2);
    }
    free(rot);

    double prev = 0;
    for (int k = 4; k >= 2; k--) {
        snprintf(out, sizeof out, "%s/%s_k%d", tmp, name, k);
        tcq_quantize_opts oq = {.bits = k, .seed = 5, .threads = 2};
        CHECK_OK(tcq_quantize_model(src, out, &oq, NULL, NULL));
        float *q = run_model(out, tok, n, &V2);
        if (q && orig && V2 == V) {
            const double kl = mean_kl(orig, q, n, V);
            fprintf(stderr, "%s k=%d: mean KL to the original %.5f\n", name, k, kl);
            CHECK(isfinite(kl) && kl > prev, "%s k=%d: KL %g not above k=%d's %g", name, k, kl, k + 1, prev);
            CHECK(kl < 2.5, "%s k=%d: KL %g: the quantized model is garbage", name, k, kl);   /* log 512 = 6.2 */
            prev = kl;
        }
        free(q);
    }
    free(orig);
    tcq_st_close(rf);
}

static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        const int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* opts.cuda (tcq quantize --device cuda): options the GPU encoder lacks are refused by name before
 * anything is written; without CUDA or a device, an error saying so; with one, the CPU
 * quantizer's files byte for byte. */
static void gpu_option(const char *tmp)
{
    char src[600], out[600], ref[600], a[700], b[700];
    snprintf(src, sizeof src, "%s/tests/data/tiny_llama", TCQ_SOURCE_DIR);
    snprintf(out, sizeof out, "%s/gpu", tmp);
    tcq_quantize_opts seams = {.bits = 2, .seed = 5, .threads = 2, .enc = {TCQ_SEARCH_SEAMS, 4}, .cuda = 1};
    CHECK(tcq_quantize_model(src, out, &seams, NULL, NULL) == TCQ_ERR_UNSUPPORTED && strstr(tcq_last_error(), "search"),
          "cuda + seams search not refused by name: %s", tcq_last_error());
    CHECK(access(out, F_OK) != 0, "cuda + seams: %s was created", out);
    tcq_quantize_opts l14 = {.bits = 2, .L = 14, .seed = 5, .threads = 2, .cuda = 1};
    CHECK(tcq_quantize_model(src, out, &l14, NULL, NULL) == TCQ_ERR_UNSUPPORTED && strstr(tcq_last_error(), "L <= 12"),
          "cuda + L=14 not refused by name: %s", tcq_last_error());
    CHECK(access(out, F_OK) != 0, "cuda + L=14: %s was created", out);
    tcq_quantize_opts lm5 = {.bits = 2, .seed = 5, .threads = 2, .lm_head_bits = 5};
    CHECK(tcq_quantize_model(src, out, &lm5, NULL, NULL) == TCQ_ERR_INVALID_ARG && strstr(tcq_last_error(), "lm_head_bits"),
          "lm_head_bits 5 not refused by name: %s", tcq_last_error());
    CHECK(access(out, F_OK) != 0, "lm_head_bits 5: %s was created", out);
    tcq_quantize_opts o = {.bits = 2, .seed = 5, .threads = 2, .cuda = 1};
    const tcq_status s = tcq_quantize_model(src, out, &o, NULL, NULL);
    if (!tcq_cuda_available()) {
        CHECK(s != TCQ_OK && strstr(tcq_last_error(), "--device cuda"), "cuda without a device: %s (%s)",
              tcq_status_str(s), tcq_last_error());
        CHECK(access(out, F_OK) != 0, "cuda without a device: %s was created", out);
        return;
    }
    CHECK_OK(s);
    snprintf(ref, sizeof ref, "%s/cpu", tmp);
    o.cuda = 0;
    CHECK_OK(tcq_quantize_model(src, ref, &o, NULL, NULL));
    static const char *files[] = {"model.safetensors", "config.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof a, "%s/%s", ref, files[i]);
        snprintf(b, sizeof b, "%s/%s", out, files[i]);
        CHECK(same_file(a, b), "cuda quantize: %s differs from the CPU quantizer's", files[i]);
    }
}

int main(void)
{
    char tmp[] = "/tmp/tcq_qmodel_XXXXXX";
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    one("tiny_llama", tmp);
    one("tiny_qwen3", tmp);
    gpu_option(tmp);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "cleanup");
    return test_done("test_quant_model");
}
