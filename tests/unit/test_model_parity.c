/* Logit parity with Hugging Face transformers (tests/data, made by tests/ref/gen_reference.py):
 * random Llama (llama3 RoPE, untied, transformers-4 config) and Qwen3 (head_dim != hidden/heads,
 * tied, q/k norms), tinyqwen, stories260K (HF copy and the llama2.c checkpoint).  Every logit
 * within 1e-3 of the f32 reference, for a whole-sequence forward (chunked prefill) and for
 * token-by-token decode.  tinyqwen perplexity windows against transformers'. */
#include "test.h"

#include <jansson.h>

#define TD TCQ_SOURCE_DIR "/tests/data/"
#define SD TEST_REPO_DATA "/"

static double maxdiff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void parity(const char *model, const char *ref, tcq_kv_dtype kv, double tol)
{
    tcq_st_file *f = NULL;
    tcq_model *m = NULL;
    CHECK_OK(tcq_st_open(ref, &f));
    /* the exact path: f32 activations (AUTO's bf16 GEMM for prefill rounds them to bf16, max
     * |dlogit| 0.03-0.06 on the random tiny models; test_kernels bounds it) */
    const tcq_model_opts ex = {.path = TCQ_PATH_EXACT};
    tcq_status s = tcq_model_load(model, &ex, &m);
    CHECK(s == TCQ_OK, "%s: %s", model, tcq_last_error());
    if (!f || !m) goto out;
    const tcq_tensor_info *tt = tcq_st_find(f, "tokens"), *lt = tcq_st_find(f, "logits");
    CHECK(tt && lt && tt->dtype == TCQ_DTYPE_I32 && lt->dtype == TCQ_DTYPE_F32, "%s: tensors", ref);
    if (!tt || !lt) goto out;
    const int n = (int)tt->numel, V = tcq_model_get_config(m)->vocab_size;
    CHECK(lt->ndim == 2 && lt->shape[0] == n && lt->shape[1] == V, "%s: logits shape", ref);
    const int32_t *toks = tt->data;
    const float *want = lt->data;
    float *got = malloc(sizeof(float) * (size_t)n * V);
    tcq_session *ss;
    CHECK_OK(tcq_session_create(m, n, kv, &ss));
    CHECK_OK(tcq_model_forward(m, ss, toks, n, got));
    double d1 = maxdiff(got, want, (size_t)n * V);
    CHECK_OK(tcq_session_rewind(ss, 0));
    for (int i = 0; i < n; i++) CHECK_OK(tcq_model_forward(m, ss, toks + i, 1, got + (size_t)i * V));
    double d2 = maxdiff(got, want, (size_t)n * V);
    fprintf(stderr, "%-50s kv %s: %d tokens, max |dlogit| %.3g (sequence) %.3g (decode)\n", model,
            kv == TCQ_KV_F16 ? "f16" : "f32", n, d1, d2);
    CHECK(d1 <= tol && d2 <= tol, "%s: max |dlogit| %g / %g > %g", model, d1, d2, tol);
    tcq_session_free(ss);
    free(got);
out:
    tcq_model_free(m);
    tcq_st_close(f);
}

/* The first `windows` of transformers' 64 perplexity windows of tinyqwen/valid.txt. */
static void perplexity(int windows)
{
    json_error_t err;
    json_t *j = json_load_file(TD "tinyqwen_ref/ppl.json", 0, &err);
    CHECK(j != NULL, "ppl.json: %s", err.text);
    tcq_st_file *f = NULL;
    tcq_model *m = NULL;
    CHECK_OK(tcq_st_open(TD "tinyqwen_ref/ppl_tokens.safetensors", &f));
    const tcq_model_opts ex = {.path = TCQ_PATH_EXACT};   /* AUTO's bf16 GEMM: mean NLL 2.5e-4 off */
    CHECK_OK(tcq_model_load(test_data_path("tinyqwen"), &ex, &m));
    const tcq_tensor_info *t = f ? tcq_st_find(f, "tokens") : NULL;
    json_t *w = json_object_get(json_object_get(j, "f32_cpu_eager"), "window_mean_nll");
    if (j && t && m && json_is_array(w)) {
        double ref = 0;
        for (int i = 0; i < windows; i++) ref += json_number_value(json_array_get(w, (size_t)i));
        ref /= windows;
        tcq_eval_result r;
        CHECK_OK(tcq_eval_perplexity(m, t->data, t->numel, 512, windows, &r));
        fprintf(stderr, "tinyqwen: %d windows: perplexity %.6f, transformers %.6f (mean NLL %.7f vs %.7f)\n", windows,
                r.perplexity, exp(ref), r.mean_nll, ref);
        CHECK(r.windows == windows && r.predictions == 511LL * windows, "windows %d predictions %lld", r.windows,
              (long long)r.predictions);
        CHECK(fabs(r.perplexity / exp(ref) - 1) < 0.01, "perplexity %.6f vs %.6f", r.perplexity, exp(ref));
        CHECK(fabs(r.mean_nll - ref) < 1e-4, "mean NLL %.7f vs %.7f", r.mean_nll, ref);
    }
    tcq_model_free(m);
    tcq_st_close(f);
    json_decref(j);
}

/* Same logits, bit for bit, with 1 and 2 threads. */
static void threads_identical(const char *model)
{
    tcq_model *a = NULL, *b = NULL;
    tcq_model_opts o1 = {.n_threads = 1}, o2 = {.n_threads = 2, .prefault = 1};
    CHECK_OK(tcq_model_load(model, &o1, &a));
    CHECK_OK(tcq_model_load(model, &o2, &b));
    if (!a || !b) goto out;
    enum { N = 70 };
    const int V = tcq_model_get_config(a)->vocab_size;
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (i * 7919) % V;
    float *la = malloc(sizeof(float) * N * V), *lb = malloc(sizeof(float) * N * V);
    tcq_session *sa, *sb;
    CHECK_OK(tcq_session_create(a, N, TCQ_KV_F32, &sa));
    CHECK_OK(tcq_session_create(b, N, TCQ_KV_F32, &sb));
    CHECK_OK(tcq_model_forward(a, sa, toks, N, la));
    CHECK_OK(tcq_model_forward(b, sb, toks, N, lb));
    CHECK(memcmp(la, lb, sizeof(float) * N * V) == 0, "%s: 1 and 2 threads differ", model);
    tcq_session_free(sa);
    tcq_session_free(sb);
    free(la);
    free(lb);
out:
    tcq_model_free(a);
    tcq_model_free(b);
}

int main(void)
{
    parity(TD "tiny_llama", TD "tiny_llama/ref_logits.safetensors", TCQ_KV_F32, 1e-3);
    parity(TD "tiny_qwen3", TD "tiny_qwen3/ref_logits.safetensors", TCQ_KV_F32, 1e-3);
    parity(SD "stories260K/hf", TD "stories260K_ref/ref_logits.safetensors", TCQ_KV_F32, 1e-3);
    parity(SD "stories260K/stories260K.bin", TD "stories260K_ref/ref_logits.safetensors", TCQ_KV_F32, 1e-3);
    /* an f16 KV cache rounds K and V to 11 bits: close, not within 1e-3 */
    parity(TD "tiny_qwen3", TD "tiny_qwen3/ref_logits.safetensors", TCQ_KV_F16, 3e-2);
    threads_identical(SD "stories260K/hf");
    /* the bf16 tinyqwen model is not in the repository */
    if (test_have_data("tinyqwen/model.safetensors.index.json")) {
        parity(test_data_path("tinyqwen"), TD "tinyqwen_ref/ref_logits.safetensors", TCQ_KV_F32, 1e-3);
        threads_identical(test_data_path("tinyqwen"));
        perplexity(4);
    }
    return test_done("test_model_parity");
}
