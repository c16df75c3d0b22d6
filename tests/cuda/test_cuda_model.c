/* The whole model on the GPU against the CPU forward: synthetic Qwen3 / Llama (llama3 RoPE)
 * models at bits 0 (bf16) and trellis k = 2, 3, 4, and any model directories given as arguments
 * (tests/cuda/run-on-device.sh passes tinyqwen bf16 / k = 3, stories260K, the tiny Llama).
 * Logits of a prompt (every position, the prefill kernels; past one attention split and, for the
 * model directories, one prefill chunk) and of decode steps (M = 1) within
 * a bound from the kernels' contracts; decode as CUDA graphs bit-identical to the same steps
 * launched kernel by kernel; batched decode against one sequence at a time; bad input (a device
 * that does not exist, a model too large for the card, context overflow, foreign sessions) gives
 * errors.  Both sides run TCQ_PATH_EXACT with f16 caches.  Needs a GPU (exit 77 without one).
 *
 * Bound: the loosest kernel contract on the path is f16 activations (wgmma / wgmma-ss at
 * 9 <= M <= 256: x rounded to 2^-11 relative) against the CPU's f32; each of the 7 linears of a
 * layer and the output projection adds at most about that relative error to the residual
 * stream, and the f16 cache can round a perturbed k or v one f16 ulp (2^-11) the other way, so
 * max |dlogit| <= (7 n_layers + 2) 2^-11 max |logit|. */
#include "test.h"

static const int32_t *prompt_tokens(int vocab, int n)
{
    static int32_t t[512];
    uint64_t st = 99;
    for (int i = 0; i < n; i++) t[i] = (int32_t)(test_rand(&st) % (uint64_t)vocab);
    return t;
}

typedef struct cmp_stat {
    double max_diff, max_ref;
} cmp_stat;

static void cmp(cmp_stat *c, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= c->max_diff)) c->max_diff = d;   /* NaN sticks */
        c->max_ref = fmax(c->max_ref, fabs((double)a[i]));
    }
}

/* CPU and GPU models of the same weights: a prompt of np tokens (all logits), then nd decode steps. */
static void compare(const char *label, tcq_model *cpu, tcq_model *gpu, int np, int nd)
{
    const tcq_model_config *c = tcq_model_get_config(cpu);
    const size_t V = (size_t)c->vocab_size;
    const int32_t *tok = prompt_tokens(c->vocab_size, np + nd);
    tcq_session *sc = NULL, *sg = NULL;
    /* 1000 positions: the device attention splits them over 8 blocks per head (MK_ATT_SPLIT) */
    CHECK_OK(tcq_session_create(cpu, 1000, TCQ_KV_F16, &sc));
    CHECK_OK(tcq_session_create(gpu, 1000, TCQ_KV_F16, &sg));
    if (!sc || !sg) return;
    float *a = malloc((size_t)np * V * sizeof *a), *b = malloc((size_t)np * V * sizeof *b);
    for (size_t i = 0; i < (size_t)np * V; i++) b[i] = NAN;   /* poison: every logit must be written */
    cmp_stat pre = {0, 0}, dec = {0, 0};
    CHECK_OK(tcq_model_forward(cpu, sc, tok, np, a));
    CHECK_OK(tcq_model_forward(gpu, sg, tok, np, b));
    cmp(&pre, a, b, (size_t)np * V);
    for (int i = 0; i < nd; i++) {
        b[0] = NAN;
        CHECK_OK(tcq_model_forward(cpu, sc, tok + np + i, 1, a));
        CHECK_OK(tcq_model_forward(gpu, sg, tok + np + i, 1, b));
        cmp(&dec, a, b, V);
    }
    const double bound = (7.0 * c->n_layers + 2) * 0x1p-11;
    fprintf(stderr, "%-28s prefill %d: max|dlogit| %.3g (%.2e of max|logit| %.3g); decode %d: %.3g (%.2e); bound %.2e\n",
            label, np, pre.max_diff, pre.max_diff / pre.max_ref, pre.max_ref, nd, dec.max_diff,
            dec.max_diff / dec.max_ref, bound);
    CHECK(pre.max_diff <= bound * pre.max_ref, "%s: prefill logits differ by %g (max %g)", label, pre.max_diff,
          pre.max_ref);
    CHECK(dec.max_diff <= bound * dec.max_ref, "%s: decode logits differ by %g (max %g)", label, dec.max_diff,
          dec.max_ref);
    CHECK(tcq_session_pos(sg) == np + nd, "%s: position %d", label, tcq_session_pos(sg));
    tcq_session_free(sc);
    tcq_session_free(sg);
    free(a);
    free(b);
}

/* Graph replay vs direct launches (bit for bit), and nb sequences decoded together vs alone. */
static void graphs_and_batch(tcq_model *g, tcq_model *direct)
{
    const tcq_model_config *c = tcq_model_get_config(g);
    const size_t V = (size_t)c->vocab_size;
    enum { NB = 5, STEPS = 6 };
    const int32_t *tok = prompt_tokens(c->vocab_size, 64);
    tcq_session *s[NB], *d = NULL, *one = NULL;
    float *lb = malloc(NB * V * sizeof *lb), *l1 = malloc(V * sizeof *l1), *l2 = malloc(V * sizeof *l2);
    CHECK_OK(tcq_session_create(direct, 64, TCQ_KV_F16, &d));
    CHECK_OK(tcq_session_create(g, 64, TCQ_KV_F16, &one));
    for (int b = 0; b < NB; b++) {
        CHECK_OK(tcq_session_create(g, 64, TCQ_KV_F16, &s[b]));
        CHECK_OK(tcq_model_prefill(g, s[b], tok + 3 * b, 5 + b, NULL));
    }
    CHECK_OK(tcq_model_prefill(direct, d, tok, 5, NULL));
    CHECK_OK(tcq_model_prefill(g, one, tok, 5, NULL));
    int same = 1;
    cmp_stat bs = {0, 0};
    for (int i = 0; i < STEPS; i++) {
        int32_t t[NB];
        for (int b = 0; b < NB; b++) t[b] = tok[20 + i + b];
        CHECK_OK(tcq_model_forward(g, one, &t[0], 1, l1));
        CHECK_OK(tcq_model_forward(direct, d, &t[0], 1, l2));
        same &= memcmp(l1, l2, V * sizeof *l1) == 0;
        CHECK_OK(tcq_model_forward_batch(g, s, t, NB, lb));
        if (i == 0) {
            /* row 0 of the batch is the sequence `one` runs alone only at step 0's positions: s[0]
             * was prefilled with the same 5 tokens */
            cmp(&bs, l1, lb, V);
        }
    }
    fprintf(stderr, "graphs vs direct launches: %s; batch of %d row 0 vs alone: max|d| %.3g of %.3g\n",
            same ? "bit-identical" : "DIFFER", NB, bs.max_diff, bs.max_ref);
    CHECK(same, "decode steps as graphs differ from direct launches");
    CHECK(bs.max_diff <= 1e-4 * bs.max_ref, "batched decode differs from one sequence by %g", bs.max_diff);
    for (int b = 0; b < NB; b++) tcq_session_free(s[b]);
    tcq_session_free(d);
    tcq_session_free(one);
    free(lb);
    free(l1);
    free(l2);
}

static tcq_model_config geometry(tcq_arch arch)
{
    tcq_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = arch;
    c.dim = 512;
    c.hidden_dim = 1536;
    c.n_layers = 2;
    c.n_heads = 8;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    c.vocab_size = 1000;
    c.max_seq = 1024;
    c.rope_theta = 5e5;
    c.norm_eps = 1e-5f;
    c.bos_id = -1;
    if (arch == TCQ_ARCH_LLAMA) {
        c.rope_llama3 = 1;
        c.rope_factor = 8;
        c.rope_low_freq_factor = 1;
        c.rope_high_freq_factor = 4;
        c.rope_orig_max_pos = 64;
    }
    return c;
}

static void bad_inputs(void)
{
    tcq_model_config c = geometry(TCQ_ARCH_QWEN3);
    tcq_model *m = NULL;
    tcq_model_opts o = {.path = TCQ_PATH_EXACT, .device = TCQ_DEVICE_CUDA, .device_index = 99};
    tcq_status s = tcq_model_synthetic(&c, 2, 1, &o, &m);
    fprintf(stderr, "device 99: %s: %s\n", tcq_status_str(s), tcq_last_error());
    CHECK(s != TCQ_OK && !m && strstr(tcq_last_error(), "cuda:99"), "device 99 accepted");
    /* too large for any card: the attention scratch of a 2^30-position context */
    c.max_seq = 1 << 30;
    o.device_index = 0;
    s = tcq_model_synthetic(&c, 2, 1, &o, &m);
    fprintf(stderr, "too large: %s: %s\n", tcq_status_str(s), tcq_last_error());
    CHECK(s == TCQ_ERR_NOMEM && !m && strstr(tcq_last_error(), "free"), "a model too large for the card loaded");
    c.max_seq = 1024;
    CHECK_OK(tcq_model_synthetic(&c, 2, 1, &o, &m));
    if (!m) return;
    tcq_session *se = NULL;
    CHECK_OK(tcq_session_create(m, 16, TCQ_KV_F16, &se));
    const int32_t *tok = prompt_tokens(c.vocab_size, 17);
    s = tcq_model_forward(m, se, tok, 17, NULL);
    CHECK(s == TCQ_ERR_RANGE && tcq_session_pos(se) == 0, "17 tokens into a 16-position cache: %s", tcq_status_str(s));
    int32_t badtok = c.vocab_size;
    s = tcq_model_forward(m, se, &badtok, 1, NULL);
    CHECK(s == TCQ_ERR_INVALID_ARG, "token outside the vocabulary: %s", tcq_status_str(s));
    /* a session far too large for the card */
    tcq_session *huge = NULL;
    s = tcq_session_create(m, 1 << 24, TCQ_KV_F16, &huge);
    CHECK(s == TCQ_OK || s == TCQ_ERR_NOMEM, "huge session: %s", tcq_status_str(s));
    tcq_session_free(huge);
    /* the model still works after the errors */
    float *l = malloc((size_t)c.vocab_size * sizeof *l);
    CHECK_OK(tcq_model_forward(m, se, tok, 16, NULL));
    CHECK_OK(tcq_session_rewind(se, 15));
    CHECK_OK(tcq_model_forward(m, se, tok, 1, l));
    CHECK(isfinite(l[0]), "logit %g", l[0]);
    free(l);
    tcq_session_free(se);
    tcq_model_free(m);
}

int main(int argc, char **argv)
{
    if (!tcq_cuda_available()) {
        fprintf(stderr, "test_cuda_model: no CUDA device, skipped\n");
        return 77;
    }
    const tcq_model_opts oc = {.path = TCQ_PATH_EXACT};
    const tcq_model_opts og = {.path = TCQ_PATH_EXACT, .device = TCQ_DEVICE_CUDA};
    const tcq_model_opts od = {.path = TCQ_PATH_EXACT, .device = TCQ_DEVICE_CUDA, .cuda_no_graphs = 1};
    for (int arch = 0; arch < 2; arch++)
        for (int bits = 0; bits <= 4; bits++) {
            if (bits == 1) continue;
            tcq_model_config c = geometry(arch ? TCQ_ARCH_LLAMA : TCQ_ARCH_QWEN3);
            tcq_model *cpu = NULL, *gpu = NULL;
            CHECK_OK(tcq_model_synthetic(&c, bits, 7 + bits, &oc, &cpu));
            CHECK_OK(tcq_model_synthetic(&c, bits, 7 + bits, &og, &gpu));
            if (cpu && gpu) {
                char label[64];
                snprintf(label, sizeof label, "synthetic %s bits %d", arch ? "llama3" : "qwen3", bits);
                compare(label, cpu, gpu, 140, 8);
                if (bits == 3 && !arch) {
                    tcq_model *direct = NULL;
                    CHECK_OK(tcq_model_synthetic(&c, bits, 7 + bits, &od, &direct));
                    if (direct) graphs_and_batch(gpu, direct);
                    tcq_model_free(direct);
                }
            }
            tcq_model_free(cpu);
            tcq_model_free(gpu);
        }
    /* dim 1024: the stacked q/k/v projection has two chunks, so decode's RoPE kernel adds their
     * partials itself (the fused layer, linear_io.h); at dim 512 one chunk leaves finished values */
    for (int bits = 2; bits <= 4; bits += 2) {
        tcq_model_config c = geometry(TCQ_ARCH_QWEN3);
        c.dim = 1024;
        c.n_heads = 16;
        c.hidden_dim = 2048;
        tcq_model *cpu = NULL, *gpu = NULL;
        CHECK_OK(tcq_model_synthetic(&c, bits, 17 + bits, &oc, &cpu));
        CHECK_OK(tcq_model_synthetic(&c, bits, 17 + bits, &og, &gpu));
        if (cpu && gpu) {
            char label[64];
            snprintf(label, sizeof label, "synthetic qwen3 dim 1024 bits %d", bits);
            compare(label, cpu, gpu, 140, 8);
        }
        tcq_model_free(cpu);
        tcq_model_free(gpu);
    }
    for (int i = 1; i < argc; i++) {
        tcq_model *cpu = NULL, *gpu = NULL;
        CHECK_OK(tcq_model_load(argv[i], &oc, &cpu));
        CHECK_OK(tcq_model_load(argv[i], &og, &gpu));
        if (cpu && gpu) {
            fprintf(stderr, "%s: %s on %s\n", argv[i], tcq_model_describe(gpu), tcq_model_device(gpu));
            compare(argv[i], cpu, gpu, 300, 16);   /* two prefill chunks */
        }
        tcq_model_free(cpu);
        tcq_model_free(gpu);
    }
    bad_inputs();
    return test_done("test_cuda_model");
}
