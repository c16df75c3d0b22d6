/* The --bpw allocation (alloc.c) and its measured costs (sens.c, --alloc kl).
 * tcq_quant_alloc: the budget is respected and the returned mean k is the plan's; a tensor whose
 * costs are a larger multiple of another's (same size) never gets a smaller k; a non-convex tensor
 * takes the jump 2 -> 4 where one bit at a time would starve it; 2 and 4 give uniform plans.
 * tcq_quant_sens on tests/data/tiny_llama: a candidate equal to the input's weight (rotated,
 * gain folded, as the quantizer hands it) measures KL ~ 0 for a reader and a writer, in layer 0
 * and, after _advance, layer 1 (so the basis change back and the stream are right); noise
 * measures more KL the larger it is.  quantize with --alloc kl writes a mixed artifact within the
 * budget, and refuses it without a text or a budget. */
#include "test.h"
#include "quant/quant.h"

#include <math.h>
#include <sys/stat.h>

static char tmp[] = "/tmp/tcq_qalloc_XXXXXX";

static double mean_k(int64_t n, const int64_t *numel, const int *k)
{
    double b = 0, t = 0;
    for (int64_t i = 0; i < n; i++) b += (double)k[i] * (double)numel[i], t += (double)numel[i];
    return b / t;
}

static void test_alloc(void)
{
    /* two tensors of one size, A's costs 10 x B's: at 3 bpw A gets 4, B 2 */
    {
        const int64_t numel[2] = {1000, 1000};
        const double cost[2][3] = {{1.0, 0.3, 0.08}, {0.1, 0.03, 0.008}};
        int k[2];
        const double got = tcq_quant_alloc(2, numel, cost, 3.0, k);
        CHECK(k[0] == 4 && k[1] == 2 && got == 3.0, "A/B: k %d %d, mean %g (want 4 2, 3)", k[0], k[1], got);
    }
    /* non-convex: A gains nothing from 3 and everything from 4; one bit at a time would give B
     * both bits (total cost 1.05), the jump gives A 4 (total 0.3) */
    {
        const int64_t numel[2] = {500, 500};
        const double cost[2][3] = {{1.0, 0.99, 0.0}, {0.3, 0.1, 0.05}};
        int k[2];
        tcq_quant_alloc(2, numel, cost, 3.0, k);
        CHECK(k[0] == 4 && k[1] == 2, "non-convex: k %d %d (want 4 2)", k[0], k[1]);
    }
    /* random: sizes, convex costs with a sensitivity factor per tensor; budget, mean and order */
    uint64_t st = test_seed() ^ 0xa11c;
    for (int rep = 0; rep < 200; rep++) {
        enum { N = 24 };
        int64_t numel[N];
        double cost[N][3], sens[N];
        int k[N];
        const int64_t sizes[3] = {4096, 16384, 65536};
        for (int i = 0; i < N; i++) {
            numel[i] = rep % 3 == 0 ? 8192 : sizes[test_rand(&st) % 3];
            sens[i] = exp(4 * test_uniform(&st));
            const double r = 0.15 + 0.2 * test_uniform(&st);   /* the same shape for all: costs scale */
            cost[i][0] = sens[i], cost[i][1] = sens[i] * 4 * r * r, cost[i][2] = sens[i] * 16 * r * r * r * r;
            if (rep % 3 == 0) cost[i][1] = sens[i] * 0.25, cost[i][2] = sens[i] * 0.0625;
        }
        numel[N - 1] = rep % 5 == 0 ? 0 : numel[N - 1];   /* not a projection */
        const double bpw = 2 + 2 * test_uniform(&st);
        const double got = tcq_quant_alloc(N, numel, (const double (*)[3])cost, bpw, k);
        int64_t total = 0;
        for (int i = 0; i < N; i++) total += numel[i];
        const double mk = mean_k(N, numel, k);
        CHECK(got <= bpw + 1e-12 && fabs(got - mk) < 1e-12, "rep %d: mean k %g (plan %g) over budget %g", rep, got, mk, bpw);
        for (int i = 0; i < N; i++)
            CHECK(numel[i] ? k[i] >= 2 && k[i] <= 4 : k[i] == 0, "rep %d: tensor %d (numel %lld) k %d", rep, i,
                  (long long)numel[i], k[i]);
        /* nothing left that would fit: no tensor below 4 has a step within what is left */
        int room = 0;
        for (int i = 0; i < N; i++) room |= numel[i] && k[i] < 4 && mk * (double)total + (double)numel[i] <= bpw * (double)total - 1e-6;
        CHECK(!room, "rep %d: budget %g left unspent at %g", rep, bpw, mk);
        if (rep % 3 == 0) {   /* one size, costs proportional: the more sensitive never gets less */
            for (int i = 0; i < N; i++)
                for (int j = 0; j < N; j++)
                    if (numel[i] && numel[j] && sens[i] > sens[j])
                        CHECK(k[i] >= k[j], "rep %d: tensor %d (sensitivity %g) k %d < tensor %d (%g) k %d", rep, i,
                              sens[i], k[i], j, sens[j], k[j]);
        }
    }
    {
        const int64_t numel[3] = {100, 200, 300};
        const double cost[3][3] = {{1, 0.5, 0.2}, {2, 1, 0.4}, {3, 1, 0.1}};
        int k[3];
        CHECK(tcq_quant_alloc(3, numel, cost, 2.0, k) == 2.0 && k[0] == 2 && k[1] == 2 && k[2] == 2, "bpw 2: uniform 2");
        CHECK(tcq_quant_alloc(3, numel, cost, 4.0, k) == 4.0 && k[0] == 4 && k[1] == 4 && k[2] == 4, "bpw 4: uniform 4");
    }
}

/* tiny_llama's tensor `name` as f32 (malloc'd). */
static float *load(tcq_st_set *set, const char *name, int64_t *numel)
{
    const tcq_tensor_info *t = tcq_st_set_find(set, name);
    CHECK(t != NULL, "tensor %s", name);
    float *x = NULL;
    if (t) CHECK_OK(tcq_quant_load_f32(t, &x));
    if (t) *numel = t->numel;
    return x;
}

static void test_sens(const char *model, const char *calib)
{
    tcq_hadamard *h = NULL;
    tcq_st_set *set = NULL;
    tcq_quant_sens *s = NULL;
    CHECK_OK(tcq_hadamard_create(256, 1, 1, &h));
    CHECK_OK(tcq_st_set_open(model, &set));
    CHECK(tcq_quant_sens_open(model, calib, 128, 400, h, 2, &s) == TCQ_ERR_INVALID_ARG &&
          strstr(tcq_last_error(), "the allocation asks 400"), "too many windows: %s", tcq_last_error());
    CHECK_OK(tcq_quant_sens_open(model, calib, 128, 3, h, 2, &s));
    if (!h || !set || !s) goto done;
    for (int l = 0; l < 2; l++) {
        char name[128];
        int64_t nq = 0, nd = 0, ng = 0;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.weight", l);
        float *q = load(set, name, &nq);
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        float *g = load(set, name, &ng);
        snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", l);
        float *d = load(set, name, &nd);
        float *dt = malloc((size_t)nd * sizeof *dt);
        if (!q || !g || !d || !dt) {
            free(q), free(g), free(d), free(dt);
            goto done;
        }
        const int64_t qo = nq / 256, hid = nd / 256;
        CHECK_OK(tcq_rotate_reader(h, q, qo, g, NULL));
        CHECK_OK(tcq_rotate_writer(h, d, hid, dt, NULL));
        double kq = -1, kd = -1;
        CHECK_OK(tcq_quant_sens_kl(s, 0, q, qo, 256, &kq));
        CHECK_OK(tcq_quant_sens_kl(s, 6, dt, hid, 256, &kd));
        fprintf(stderr, "layer %d: the input's own q_proj KL %.3g, down_proj %.3g\n", l, kq, kd);
        CHECK(kq >= 0 && kq < 1e-7 && kd >= 0 && kd < 1e-7, "layer %d: the unchanged weight measures KL %g (q) %g (down)",
              l, kq, kd);
        /* noise on down_proj: more noise, more KL */
        double rms = 0;
        for (int64_t i = 0; i < nd; i++) rms += (double)dt[i] * dt[i];
        rms = sqrt(rms / (double)nd);
        uint64_t st = 42;
        float *noise = malloc((size_t)nd * sizeof *noise), *w = malloc((size_t)nd * sizeof *w);
        for (int64_t i = 0; noise && i < nd; i++) noise[i] = (float)test_gauss(&st);
        double kl[2] = {-1, -1};
        for (int a = 0; noise && w && a < 2; a++) {
            for (int64_t i = 0; i < nd; i++) w[i] = dt[i] + (float)((a ? 0.4 : 0.1) * rms) * noise[i];
            CHECK_OK(tcq_quant_sens_kl(s, 6, w, hid, 256, &kl[a]));
        }
        fprintf(stderr, "layer %d: down_proj with noise 0.1 / 0.4 x rms: KL %.4g / %.4g\n", l, kl[0], kl[1]);
        CHECK(kl[0] > 1e-6 && kl[1] > 4 * kl[0], "layer %d: noise KL %g, %g (want > 1e-6 and growing)", l, kl[0], kl[1]);
        CHECK(tcq_quant_sens_kl(s, 6, w, hid, 128, &kl[0]) != TCQ_OK, "layer %d: a candidate of the wrong shape", l);
        free(noise), free(w), free(q), free(g), free(d), free(dt);
        CHECK(tcq_quant_sens_layer(s) == l, "at layer %d", tcq_quant_sens_layer(s));
        CHECK_OK(tcq_quant_sens_advance(s));
    }
    CHECK(tcq_quant_sens_advance(s) != TCQ_OK, "advance past the last layer");
done:
    tcq_quant_sens_free(s);
    tcq_st_set_close(set);
    tcq_hadamard_free(h);
}

int main(void)
{
    test_alloc();
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    char model[600], calib[600], path[1200], out[600], cmd[2200];
    snprintf(model, sizeof model, "%s/model", tmp);
    mkdir(model, 0777);
    snprintf(cmd, sizeof cmd, "cp '%s/tests/data/tiny_llama/config.json' '%s/tests/data/tiny_llama/model.safetensors' '%s'",
             TCQ_SOURCE_DIR, TCQ_SOURCE_DIR, model);
    CHECK(system(cmd) == 0, "%s", cmd);
    snprintf(path, sizeof path, "%s/tokenizer.json", model);
    test_write_char_tokenizer(path);
    snprintf(calib, sizeof calib, "%s/calib.txt", tmp);
    char *text = malloc(6000);
    text[0] = 0;
    for (int i = 0; i < 60; i++) strcat(text, "the quick brown fox jumps over a lazy dog while wizards hex jugs ");
    test_write_file(calib, text);
    free(text);
    test_sens(model, calib);

    /* quantize --bpw 3 --alloc kl: a mix within the budget */
    snprintf(out, sizeof out, "%s/q_kl", tmp);
    char costs[700];
    snprintf(costs, sizeof costs, "%s/costs.txt", tmp);
    tcq_quantize_opts o = {.bits = 2, .seed = 1, .threads = 2, .method = TCQ_QMETHOD_LDLQ, .calib = calib,
                           .calib_tokens = 1024, .calib_ctx = 128, .bpw = 3.0, .alloc_windows = 2,
                           .alloc_costs_out = costs, .scale_search = 1, .ldlq_passes = -1};
    /* one row scale, no coordinate-descent pass (other tests cover both): the coding is most of this
     * test's time, and it runs under AddressSanitizer in CI too */
    CHECK_OK(tcq_quantize_model(model, out, &o, NULL, NULL));
    snprintf(path, sizeof path, "%s/config.json", out);
    size_t len = 0, len2 = 0;
    char *cfg = test_slurp(path, &len);
    /* the saved costs give the same plan without measuring (no text needed) */
    snprintf(path, sizeof path, "%s/q_kl2", tmp);
    o.alloc_costs_out = NULL;
    o.alloc_costs_in = costs;
    CHECK_OK(tcq_quantize_model(model, path, &o, NULL, NULL));
    strcat(path, "/config.json");
    char *cfg2 = test_slurp(path, &len2);
    CHECK(cfg && cfg2 && len == len2 && !memcmp(cfg, cfg2, len), "--alloc-costs: another config than the measured run's");
    free(cfg2);
    /* a costs file without one of the tensors */
    snprintf(cmd, sizeof cmd, "grep -v 'layers.1.mlp.up_proj' '%s' > '%s.cut'", costs, costs);
    CHECK(system(cmd) == 0, "%s", cmd);
    strcat(costs, ".cut");
    snprintf(path, sizeof path, "%s/q_cut", tmp);
    CHECK(tcq_quantize_model(model, path, &o, NULL, NULL) == TCQ_ERR_FORMAT &&
          strstr(tcq_last_error(), "no costs for tensor model.layers.1.mlp.up_proj.weight"), "cut costs: %s",
          tcq_last_error());
    o.alloc_costs_in = NULL;
    int nk[5] = {0};
    for (const char *p = cfg; p && (p = strstr(p, "\"bits\":")); p += 7) {
        const int k = atoi(p + 7 + (p[7] == ' '));
        if (k >= 2 && k <= 4) nk[k]++;
    }
    free(cfg);
    /* tiny_llama: 14 projections, all of one size per kind; the budget's mean k is <= 3 */
    fprintf(stderr, "--alloc kl at 3 bpw: k=2 %d, k=3 %d, k=4 %d entries\n", nk[2], nk[3], nk[4]);
    CHECK(nk[2] + nk[3] + nk[4] >= 14 && (nk[3] || nk[4]), "kl allocation: k mix %d %d %d", nk[2], nk[3], nk[4]);

    o.calib = NULL;
    o.hessians_in = tmp;   /* no hessians.bin there: the missing text is refused first */
    CHECK(tcq_quantize_model(model, out, &o, NULL, NULL) == TCQ_ERR_INVALID_ARG &&
          strstr(tcq_last_error(), "budget needs a calibration text"), "bpw without a text: %s", tcq_last_error());
    o = (tcq_quantize_opts){.bits = 2, .seed = 1, .method = TCQ_QMETHOD_LDLQ, .calib = calib, .alloc_costs_in = costs};
    CHECK(tcq_quantize_model(model, out, &o, NULL, NULL) == TCQ_ERR_INVALID_ARG &&
          strstr(tcq_last_error(), "allocation costs (a file to read or write) without a bits-per-weight budget"),
          "costs without --bpw: %s", tcq_last_error());
    o.alloc_costs_in = NULL;
    o.bpw = 3;
    o.alloc_windows = -1;
    CHECK(tcq_quantize_model(model, out, &o, NULL, NULL) == TCQ_ERR_INVALID_ARG &&
          strstr(tcq_last_error(), "allocation windows -1"), "alloc windows -1: %s", tcq_last_error());

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "cleanup");
    return test_done("test_quant_alloc");
}
