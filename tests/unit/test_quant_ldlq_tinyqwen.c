/* tinyqwen at k = 2: BlockLDLQ's proxy loss tr((W-W^) H (W-W^)^T) is below rounding's on every
 * projection (the same Hessians: rounding's run measures them on the first 2048 tokens of
 * valid.txt and saves them, LDLQ's run loads them), and the LDLQ artifact loads and runs. */
#include "test.h"


#define MAXT 128

typedef struct rec {
    int n;
    char name[MAXT][96];
    double proxy[MAXT];
} rec;

static void cb(const tcq_quantize_progress *p, void *user)
{
    rec *r = user;
    if (p->phase || !p->k || p->proxy < 0 || r->n >= MAXT) return;
    snprintf(r->name[r->n], sizeof r->name[0], "%s", p->tensor);
    r->proxy[r->n++] = p->proxy;
}

int main(void)
{
    TEST_REQUIRE_DATA("tinyqwen/model.safetensors.index.json");
    const char *model = test_data_path("tinyqwen"), *calib = test_data_path("tinyqwen/valid.txt");
    char tmp[] = "/tmp/tcq_ldlq_XXXXXX", out[512], hdir[512];
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    snprintf(hdir, sizeof hdir, "%s/h", tmp);
    rec rtn = {0}, ldlq = {0};
    tcq_quantize_opts o = {.bits = 2, .seed = 1, .threads = 2, .calib = calib, .calib_tokens = 2048, .calib_ctx = 256,
                           .hessians_out = hdir};
    snprintf(out, sizeof out, "%s/rtn", tmp);
    CHECK_OK(tcq_quantize_model(model, out, &o, cb, &rtn));
    o = (tcq_quantize_opts){.bits = 2, .seed = 1, .threads = 2, .method = TCQ_QMETHOD_LDLQ, .hessians_in = hdir};
    snprintf(out, sizeof out, "%s/ldlq", tmp);
    CHECK_OK(tcq_quantize_model(model, out, &o, cb, &ldlq));
    CHECK(rtn.n == 56 && ldlq.n == 56, "proxy losses of %d and %d projections (want 56)", rtn.n, ldlq.n);
    double worst = 0;
    for (int i = 0; i < rtn.n && i < ldlq.n; i++) {
        CHECK(!strcmp(rtn.name[i], ldlq.name[i]), "tensor order %s / %s", rtn.name[i], ldlq.name[i]);
        CHECK(ldlq.proxy[i] < rtn.proxy[i], "%s: LDLQ proxy %g not below rounding's %g", rtn.name[i], ldlq.proxy[i],
              rtn.proxy[i]);
        worst = fmax(worst, ldlq.proxy[i] / rtn.proxy[i]);
    }
    fprintf(stderr, "worst LDLQ / rounding proxy ratio %.3f\n", worst);
    tcq_model *m = NULL;
    tcq_session *s = NULL;
    const tcq_model_opts mo = {.n_threads = 2};
    CHECK_OK(tcq_model_load(out, &mo, &m));
    if (m) CHECK_OK(tcq_session_create(m, 16, TCQ_KV_F32, &s));
    const int32_t toks[4] = {10, 20, 30, 40};
    float *logits = m ? malloc((size_t)tcq_model_get_config(m)->vocab_size * 4 * sizeof *logits) : NULL;
    if (s) CHECK_OK(tcq_model_forward(m, s, toks, 4, logits));
    int finite = logits != NULL;
    for (int i = 0; finite && i < tcq_model_get_config(m)->vocab_size * 4; i++) finite = isfinite(logits[i]);
    CHECK(finite, "LDLQ artifact: logits not finite");
    free(logits);
    tcq_session_free(s);
    tcq_model_free(m);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "cleanup");
    return test_done("test_quant_ldlq_tinyqwen");
}
