/* GPTAQ's asymmetric targets (asym.c, calib.c's second stream; tcq_quantize_opts.asym).
 * 1. tcq_quant_asym_target against a float64 reference W + W C Hd^-1 (Gauss-Jordan inverse) on
 *    small random cases, both axes, and a quarter of the correction at alpha 0.25; C = 0 leaves
 *    the rows bit for bit.
 * 2. Undamped, W' is the least-squares solution: (W' X - W X_fp) X^T = 0.
 * 3. tiny_llama, sequential calibration: with --layers 1 both streams are the embedding, so the
 *    cross terms are zero and asym writes the same bytes as without; on the 2-layer model layer 0
 *    stays identical and layer 1 (whose inputs differ between the streams) changes.  Clear errors
 *    without a sequential calibration from a text.  The default alpha writes what 0.25 does, 1
 *    something else.
 * 4. asym 2 (statistics retaken inside the layer), one layer: q/k/v as without asym (their inputs
 *    are the embedding in both streams), o, gate, up and down changed (their inputs now come
 *    through coded projections). */
#include "test.h"
#include "quant/quant.h"

#include <sys/stat.h>

static char tmp[] = "/tmp/tcq_qasym_XXXXXX";

/* inverse of A [m, m] (Gauss-Jordan with partial pivoting), into inv */
static void invert(const double *A, int64_t m, double *inv)
{
    double *a = malloc((size_t)(m * m) * sizeof *a);
    memcpy(a, A, (size_t)(m * m) * sizeof *a);
    for (int64_t i = 0; i < m * m; i++) inv[i] = 0;
    for (int64_t i = 0; i < m; i++) inv[i * m + i] = 1;
    for (int64_t c = 0; c < m; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < m; r++)
            if (fabs(a[r * m + c]) > fabs(a[p * m + c])) p = r;
        for (int64_t j = 0; j < m; j++) {
            double t = a[c * m + j];
            a[c * m + j] = a[p * m + j], a[p * m + j] = t;
            t = inv[c * m + j];
            inv[c * m + j] = inv[p * m + j], inv[p * m + j] = t;
        }
        const double d = a[c * m + c];
        for (int64_t j = 0; j < m; j++) a[c * m + j] /= d, inv[c * m + j] /= d;
        for (int64_t r = 0; r < m; r++) {
            if (r == c) continue;
            const double f = a[r * m + c];
            for (int64_t j = 0; j < m; j++) a[r * m + j] -= f * a[c * m + j], inv[r * m + j] -= f * inv[c * m + j];
        }
    }
    free(a);
}

/* Part 1: n outputs, m inputs, damping damp. */
static void check_reference(uint64_t *st, int64_t n, int64_t m, double damp)
{
    double *H = malloc((size_t)(m * m) * sizeof *H), *Cx = malloc((size_t)(m * m) * sizeof *Cx),
           *Hd = malloc((size_t)(m * m) * sizeof *Hd), *Hi = malloc((size_t)(m * m) * sizeof *Hi),
           *ref = malloc((size_t)(n * m) * sizeof *ref), *WC = malloc((size_t)(n * m) * sizeof *WC);
    float *W = malloc((size_t)(n * m) * sizeof *W), *r1 = malloc((size_t)(n * m) * sizeof *r1),
          *r0 = malloc((size_t)(n * m) * sizeof *r0);
    test_random_spd(st, m, H);
    for (int64_t i = 0; i < m * m; i++) Cx[i] = 0.3 * test_gauss(st);
    for (int64_t i = 0; i < n * m; i++) W[i] = (float)test_gauss(st);
    double mean = 0;
    for (int64_t i = 0; i < m; i++) mean += H[i * m + i];
    mean /= (double)m;
    memcpy(Hd, H, (size_t)(m * m) * sizeof *Hd);
    for (int64_t i = 0; i < m; i++) Hd[i * m + i] += damp * mean;
    invert(Hd, m, Hi);
    /* ref = W + (W C) Hd^-1 */
    for (int64_t o = 0; o < n; o++)
        for (int64_t j = 0; j < m; j++) {
            double s = 0;
            for (int64_t t = 0; t < m; t++) s += (double)W[o * m + t] * Cx[t * m + j];
            WC[o * m + j] = s;
        }
    for (int64_t o = 0; o < n; o++)
        for (int64_t j = 0; j < m; j++) {
            double s = W[o * m + j];
            for (int64_t t = 0; t < m; t++) s += WC[o * m + t] * Hi[t * m + j];
            ref[o * m + j] = s;
        }
    memcpy(r1, W, (size_t)(n * m) * sizeof *W);   /* axis 1: rows are W [n, m] */
    for (int64_t o = 0; o < n; o++)                 /* axis 0: rows are W^T [m, n] */
        for (int64_t j = 0; j < m; j++) r0[j * n + o] = W[o * m + j];
    CHECK_OK(tcq_quant_asym_target(H, Cx, m, damp, 1.0, r1, n, m, 1));
    CHECK_OK(tcq_quant_asym_target(H, Cx, m, damp, 1.0, r0, m, n, 0));
    double e1 = 0, e0 = 0, nr = 0, moved = 0;
    for (int64_t o = 0; o < n; o++)
        for (int64_t j = 0; j < m; j++) {
            const double r = ref[o * m + j];
            e1 = fmax(e1, fabs(r1[o * m + j] - r));
            e0 = fmax(e0, fabs(r0[j * n + o] - r));
            nr = fmax(nr, fabs(r));
            moved = fmax(moved, fabs(r - W[o * m + j]));
        }
    fprintf(stderr, "n %lld m %lld damp %g: max |W' - ref| axis 1 %.3g, axis 0 %.3g (max |ref| %.3g, "
            "max |W' - W| %.3g)\n", (long long)n, (long long)m, damp, e1, e0, nr, moved);
    CHECK(e1 <= 1e-6 * nr && e0 <= 1e-6 * nr, "W + W C Hd^-1: off by %g / %g (axis 1 / 0) of %g", e1, e0, nr);
    CHECK(moved > 1e-2 * nr, "the correction is too small to test anything (%g of %g)", moved, nr);
    /* alpha 0.25: a quarter of the correction, W + 0.25 (ref - W), both axes */
    memcpy(r1, W, (size_t)(n * m) * sizeof *W);
    for (int64_t o = 0; o < n; o++)
        for (int64_t j = 0; j < m; j++) r0[j * n + o] = W[o * m + j];
    CHECK_OK(tcq_quant_asym_target(H, Cx, m, damp, 0.25, r1, n, m, 1));
    CHECK_OK(tcq_quant_asym_target(H, Cx, m, damp, 0.25, r0, m, n, 0));
    e1 = e0 = 0;
    for (int64_t o = 0; o < n; o++)
        for (int64_t j = 0; j < m; j++) {
            const double r = W[o * m + j] + 0.25 * (ref[o * m + j] - W[o * m + j]);
            e1 = fmax(e1, fabs(r1[o * m + j] - r));
            e0 = fmax(e0, fabs(r0[j * n + o] - r));
        }
    CHECK(e1 <= 1e-6 * nr && e0 <= 1e-6 * nr, "W + 0.25 W C Hd^-1: off by %g / %g (axis 1 / 0) of %g", e1, e0, nr);
    /* C = 0: the same bits */
    for (int64_t i = 0; i < m * m; i++) Cx[i] = 0;
    memcpy(r1, W, (size_t)(n * m) * sizeof *W);
    CHECK_OK(tcq_quant_asym_target(H, Cx, m, damp, 1.0, r1, n, m, 1));
    CHECK(!memcmp(r1, W, (size_t)(n * m) * sizeof *W), "C = 0 changed the weights");
    free(H), free(Cx), free(Hd), free(Hi), free(ref), free(WC), free(W), free(r1), free(r0);
}

/* Part 2: undamped, X [m, N] and X_fp = X + noise: (W' X - W X_fp) X^T vanishes. */
static void check_least_squares(uint64_t *st, int64_t n, int64_t m, int64_t N)
{
    double *X = malloc((size_t)(m * N) * sizeof *X), *Xf = malloc((size_t)(m * N) * sizeof *Xf),
           *H = calloc((size_t)(m * m), sizeof *H), *Cx = calloc((size_t)(m * m), sizeof *Cx);
    float *W = malloc((size_t)(n * m) * sizeof *W), *Wp = malloc((size_t)(n * m) * sizeof *Wp);
    for (int64_t i = 0; i < m * N; i++) X[i] = test_gauss(st), Xf[i] = X[i] + 0.2 * test_gauss(st);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < m; j++)
            for (int64_t t = 0; t < N; t++) {
                H[i * m + j] += X[i * N + t] * X[j * N + t];
                Cx[i * m + j] += (Xf[i * N + t] - X[i * N + t]) * X[j * N + t];
            }
    for (int64_t i = 0; i < n * m; i++) W[i] = Wp[i] = (float)test_gauss(st);
    CHECK_OK(tcq_quant_asym_target(H, Cx, m, 0.0, 1.0, Wp, n, m, 1));
    /* gradient G = (W' X - W X_fp) X^T, against the scale of W X_fp X^T */
    double g = 0, ref = 0;
    for (int64_t o = 0; o < n; o++) {
        double *res = calloc((size_t)N, sizeof *res), *yf = calloc((size_t)N, sizeof *yf);
        for (int64_t t = 0; t < N; t++)
            for (int64_t i = 0; i < m; i++) res[t] += Wp[o * m + i] * X[i * N + t] - W[o * m + i] * Xf[i * N + t],
                                             yf[t] += W[o * m + i] * Xf[i * N + t];
        for (int64_t j = 0; j < m; j++) {
            double a = 0, b = 0;
            for (int64_t t = 0; t < N; t++) a += res[t] * X[j * N + t], b += yf[t] * X[j * N + t];
            g = fmax(g, fabs(a));
            ref = fmax(ref, fabs(b));
        }
        free(res);
        free(yf);
    }
    fprintf(stderr, "least squares: max |(W' X - W X_fp) X^T| %.3g of %.3g\n", g, ref);
    CHECK(g <= 1e-5 * ref, "W' is not the least-squares target: gradient %g of %g", g, ref);
    free(X), free(Xf), free(H), free(Cx), free(W), free(Wp);
}

static void copy_file(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    CHECK(system(cmd) == 0, "%s", cmd);
}

/* the bytes of tensor name in the artifact at dir (malloc'd), *n its size */
static void *tensor_bytes(const char *dir, const char *name, size_t *n)
{
    tcq_st_set *st = NULL;
    *n = 0;
    if (tcq_st_set_open(dir, &st) != TCQ_OK) return NULL;
    const tcq_tensor_info *t = tcq_st_set_find(st, name);
    void *b = t ? malloc(t->nbytes) : NULL;
    if (b) memcpy(b, t->data, t->nbytes), *n = t->nbytes;
    tcq_st_set_close(st);
    return b;
}

/* tensor name identical in artifacts a and b */
static int same_tensor(const char *a, const char *b, const char *name)
{
    size_t na = 0, nb = 0;
    void *x = tensor_bytes(a, name, &na), *y = tensor_bytes(b, name, &nb);
    CHECK(x && y, "tensor %s missing", name);
    const int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static const char *const projs[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                     "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};

int main(void)
{
    uint64_t st = test_seed();
    check_reference(&st, 5, 8, 0.1);
    check_reference(&st, 3, 24, 0.01);
    check_least_squares(&st, 4, 6, 40);

    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    char model[600], calib[600], path[1200], out[4][600];
    snprintf(model, sizeof model, "%s/model", tmp);
    mkdir(model, 0777);
    copy_file(TCQ_SOURCE_DIR "/tests/data/tiny_llama/config.json", model);
    copy_file(TCQ_SOURCE_DIR "/tests/data/tiny_llama/model.safetensors", model);
    snprintf(path, sizeof path, "%s/tokenizer.json", model);
    test_write_char_tokenizer(path);
    snprintf(calib, sizeof calib, "%s/calib.txt", tmp);
    char *text = malloc(6000);
    text[0] = 0;
    for (int i = 0; i < 60; i++) strcat(text, "the quick brown fox jumps over a lazy dog while wizards hex jugs ");
    test_write_file(calib, text);
    free(text);
    /* 0: --layers 1 plain, 1: --layers 1 asym, 2: both layers plain, 3: both layers asym; k = 2, one
     * row scale, no pass (the coding is this test's time; other tests cover both) */
    for (int r = 0; r < 4; r++) {
        snprintf(out[r], sizeof out[r], "%s/q%d", tmp, r);
        const tcq_quantize_opts o = {.bits = 2, .seed = 1, .threads = 2, .method = TCQ_QMETHOD_LDLQ, .calib = calib,
                                     .calib_tokens = 1024, .calib_ctx = 128, .calib_sequential = 1,
                                     .layers = r < 2 ? 1 : 0, .scale_search = 1, .ldlq_passes = -1, .asym = r & 1};
        CHECK_OK(tcq_quantize_model(model, out[r], &o, NULL, NULL));
    }
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/model.safetensors", out[0]);
    snprintf(b, sizeof b, "%s/model.safetensors", out[1]);
    size_t na = 0, nb = 0;
    char *x = test_slurp(a, &na), *y = test_slurp(b, &nb);
    CHECK(x && y && na == nb && !memcmp(x, y, na), "one layer: asym's artifact differs from the plain one (both "
          "streams are the embedding there)");
    free(x);
    free(y);
    int changed = 0;
    for (int l = 0; l < 2; l++)
        for (int j = 0; j < 7; j++) {
            char name[200];
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, projs[j]);
            const int same = same_tensor(out[2], out[3], name);
            if (l == 0) CHECK(same, "layer 0's %s differs with asym", name);
            else changed += !same;
        }
    fprintf(stderr, "layer 1: %d of 7 projections changed by asym\n", changed);
    CHECK(changed == 7, "layer 1: only %d of 7 projections changed by asym", changed);
    /* the default alpha is 0.25: the same bytes as asking for it; alpha 1 moves layer 1 */
    for (int r = 0; r < 2; r++) {
        char qa[700];
        snprintf(qa, sizeof qa, "%s/qa%d", tmp, r);
        const tcq_quantize_opts o = {.bits = 2, .seed = 1, .threads = 2, .method = TCQ_QMETHOD_LDLQ, .calib = calib,
                                     .calib_tokens = 1024, .calib_ctx = 128, .calib_sequential = 1, .scale_search = 1,
                                     .ldlq_passes = -1, .asym = 1, .asym_alpha = r ? 1.0 : 0.25};
        CHECK_OK(tcq_quantize_model(model, qa, &o, NULL, NULL));
        int moved = 0;
        for (int j = 0; j < 7; j++) {
            char name[200];
            snprintf(name, sizeof name, "model.layers.1.%s.weight", projs[j]);
            moved += !same_tensor(out[3], qa, name);
        }
        if (r) CHECK(moved > 0, "asym alpha 1: layer 1 as at the default 0.25");
        else CHECK(moved == 0, "asym alpha 0.25: %d of layer 1's projections differ from the default's", moved);
    }

    /* 4: asym 2, one layer, against out[0] (plain, one layer) */
    char w1[600];
    snprintf(w1, sizeof w1, "%s/qw", tmp);
    {
        const tcq_quantize_opts o = {.bits = 2, .seed = 1, .threads = 2, .method = TCQ_QMETHOD_LDLQ, .calib = calib,
                                     .calib_tokens = 1024, .calib_ctx = 128, .calib_sequential = 1, .layers = 1,
                                     .scale_search = 1, .ldlq_passes = -1, .asym = 2};
        CHECK_OK(tcq_quantize_model(model, w1, &o, NULL, NULL));
    }
    for (int j = 0; j < 7; j++) {
        char name[200];
        snprintf(name, sizeof name, "model.layers.0.%s.weight", projs[j]);
        const int same = same_tensor(out[0], w1, name);
        CHECK(same == (j < 3), "asym 2, one layer: %s %s", name, same ? "unchanged" : "changed");
    }

    /* refused: saved Hessians, an original-mode calibration, RTN, an alpha without asym or above 2 */
    tcq_quantize_opts o = {.bits = 2, .seed = 1, .threads = 2, .method = TCQ_QMETHOD_LDLQ, .calib = calib,
                           .calib_tokens = 1024, .calib_ctx = 128, .asym = 1};
    snprintf(path, sizeof path, "%s/q_bad", tmp);
    CHECK(tcq_quantize_model(model, path, &o, NULL, NULL) == TCQ_ERR_INVALID_ARG &&
          strstr(tcq_last_error(), "sequential"), "asym with original Hessians: %s", tcq_last_error());
    o.calib_sequential = 1;
    o.method = TCQ_QMETHOD_RTN;
    CHECK(tcq_quantize_model(model, path, &o, NULL, NULL) == TCQ_ERR_INVALID_ARG, "asym with rtn: %s", tcq_last_error());
    o.method = TCQ_QMETHOD_LDLQ;
    o.asym = 0;
    o.asym_alpha = 0.25;
    CHECK(tcq_quantize_model(model, path, &o, NULL, NULL) == TCQ_ERR_INVALID_ARG && strstr(tcq_last_error(), "alpha"),
          "asym alpha without asym: %s", tcq_last_error());
    o.asym = 1;
    o.asym_alpha = 3;
    CHECK(tcq_quantize_model(model, path, &o, NULL, NULL) == TCQ_ERR_INVALID_ARG && strstr(tcq_last_error(), "alpha"),
          "asym alpha 3: %s", tcq_last_error());

    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "%s", cmd);
    return test_done("test_quant_asym");
}
