/* The layer-by-layer quantizer (issue 23) on tests/data/tiny_llama (2 layers, dim 256) with a
 * character tokenizer: at most one layer's four Hessians are alive at any time (the API
 * counter), with and without the --bpw allocation pass; sequential and original Hessians agree on
 * layer 0 and differ on layer 1, by less at k = 4 than at k = 2 (the sequential ones approach the
 * original as the coding gets finer); --layers 1 writes a one-layer model that loads and runs;
 * saved Hessians of fewer layers than the model are refused. */
#include "test.h"
#include "quant/quant.h"

#include <math.h>
#include <sys/stat.h>

static char tmp[] = "/tmp/tcq_qstream_XXXXXX";

static void copy_file(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    CHECK(system(cmd) == 0, "%s", cmd);
}

/* Layer `l`'s Hessians saved in dir. */
static int get_layer(const char *dir, int l, tcq_quant_lhess *lh, int *sequential)
{
    tcq_quant_hfile hf;
    if (tcq_quant_hfile_open(dir, 1, &hf) != TCQ_OK) return 0;
    *sequential = hf.sequential;
    const int ok = tcq_quant_hfile_get(&hf, l, lh) == TCQ_OK;
    tcq_quant_hfile_close(&hf);
    return ok;
}

/* max over sites of ||A - B||_F / ||B||_F */
static double hess_dist(const tcq_quant_lhess *a, const tcq_quant_lhess *b)
{
    double worst = 0;
    for (int s = 0; s < 4; s++) {
        double d = 0, n = 0;
        for (int64_t i = 0; i < a->dim[s] * a->dim[s]; i++) {
            d += (a->H[s][i] - b->H[s][i]) * (a->H[s][i] - b->H[s][i]);
            n += b->H[s][i] * b->H[s][i];
        }
        worst = fmax(worst, sqrt(d / n));
    }
    return worst;
}

int main(void)
{
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    char model[600], calib[600], path[1200], out[600], h[4][600];
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

    /* sequential (k = 2, 4) and original Hessians, LDLQ; the counter's peak is one layer's four.
     * One row scale and no coordinate-descent pass (other tests cover both): the coding is most of
     * this test's time, ~10x more with them, and it runs under AddressSanitizer in CI too. */
    const char *modes[4] = {"seq2", "seq4", "orig", "bpw"};
    for (int r = 0; r < 4; r++) {
        snprintf(h[r], sizeof h[r], "%s/h_%s", tmp, modes[r]);
        snprintf(out, sizeof out, "%s/q_%s", tmp, modes[r]);
        tcq_quantize_opts o = {.bits = r == 1 ? 4 : 2, .seed = 1, .threads = 2, .method = TCQ_QMETHOD_LDLQ,
                               .calib = calib, .calib_tokens = 2048, .calib_ctx = 128, .hessians_out = h[r],
                               .calib_sequential = r != 2, .bpw = r == 3 ? 3.0 : 0, .scale_search = 1,
                               .ldlq_passes = -1};
        tcq_quant_hess_count_reset();
        CHECK_OK(tcq_quantize_model(model, out, &o, NULL, NULL));
        int live = -1, peak = -1;
        tcq_quant_hess_count(&live, &peak);
        CHECK(live == 0 && peak == 4, "%s: Hessians alive %d at the end, at most %d (want 0 and one layer's 4)",
              modes[r], live, peak);
    }
    tcq_quant_lhess s2[2] = {0}, s4[2] = {0}, og[2] = {0};
    int seq = -1;
    for (int l = 0; l < 2; l++) {
        CHECK(get_layer(h[0], l, &s2[l], &seq) && seq == 1, "seq2 layer %d (sequential flag %d)", l, seq);
        CHECK(get_layer(h[1], l, &s4[l], &seq) && seq == 1, "seq4 layer %d", l);
        CHECK(get_layer(h[2], l, &og[l], &seq) && seq == 0, "orig layer %d (sequential flag %d)", l, seq);
    }
    if (s2[1].H[0] && s4[1].H[0] && og[1].H[0]) {
        const double d0 = hess_dist(&s2[0], &og[0]), d2 = hess_dist(&s2[1], &og[1]), d4 = hess_dist(&s4[1], &og[1]);
        fprintf(stderr, "layer 0: %.3g; layer 1: sequential k=2 %.4f, k=4 %.4f from the original Hessians\n", d0, d2, d4);
        CHECK(d0 < 1e-9, "layer 0's Hessians differ (%g): the embedding feeds both", d0);
        CHECK(d2 > 1e-3, "layer 1: sequential k=2 equals the original (%g)", d2);
        CHECK(d4 < 0.5 * d2, "layer 1: sequential k=4 (%g) not nearer the original than k=2 (%g)", d4, d2);
    }
    for (int l = 0; l < 2; l++) {
        tcq_quant_lhess_free(&s2[l]);
        tcq_quant_lhess_free(&s4[l]);
        tcq_quant_lhess_free(&og[l]);
    }

    /* --layers 1: a one-layer model that loads and runs */
    snprintf(out, sizeof out, "%s/q_l1", tmp);
    tcq_quantize_opts o = {.bits = 2, .seed = 1, .threads = 2, .method = TCQ_QMETHOD_LDLQ, .calib = calib,
                           .calib_tokens = 1024, .calib_ctx = 128, .layers = 1, .scale_search = 1, .ldlq_passes = -1};
    CHECK_OK(tcq_quantize_model(model, out, &o, NULL, NULL));
    tcq_model *m = NULL;
    tcq_session *sess = NULL;
    const tcq_model_opts mo = {.n_threads = 2};
    CHECK_OK(tcq_model_load(out, &mo, &m));
    if (m) {
        CHECK(tcq_model_get_config(m)->n_layers == 1, "--layers 1 gave %d layers", tcq_model_get_config(m)->n_layers);
        CHECK_OK(tcq_session_create(m, 16, TCQ_KV_F32, &sess));
        const int32_t toks[3] = {3, 4, 5};
        float *logits = malloc((size_t)tcq_model_get_config(m)->vocab_size * 3 * sizeof *logits);
        if (sess) CHECK_OK(tcq_model_forward(m, sess, toks, 3, logits));
        free(logits);
    }
    tcq_session_free(sess);
    tcq_model_free(m);
    tcq_st_set *st = NULL;
    CHECK_OK(tcq_st_set_open(out, &st));
    CHECK(st && tcq_st_set_find(st, "model.layers.0.mlp.down_proj.weight") &&
          !tcq_st_set_find(st, "model.layers.1.mlp.down_proj.weight"), "--layers 1: layer 0 coded, layer 1 absent");
    tcq_st_set_close(st);

    /* Hessians of one layer for a model of two: refused */
    snprintf(out, sizeof out, "%s/h_one", tmp);
    o = (tcq_quantize_opts){.bits = 2, .seed = 1, .threads = 2, .calib = calib, .calib_tokens = 1024, .calib_ctx = 128,
                            .layers = 1, .hessians_out = out};
    snprintf(path, sizeof path, "%s/q_one", tmp);
    CHECK_OK(tcq_quantize_model(model, path, &o, NULL, NULL));
    o = (tcq_quantize_opts){.bits = 2, .seed = 1, .threads = 2, .method = TCQ_QMETHOD_LDLQ, .hessians_in = out};
    snprintf(path, sizeof path, "%s/q_two", tmp);
    CHECK(tcq_quantize_model(model, path, &o, NULL, NULL) == TCQ_ERR_FORMAT &&
          strstr(tcq_last_error(), "Hessians of 1 layers, the model has 2"), "short Hessian file: %s", tcq_last_error());

    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "cleanup");
    return test_done("test_quant_stream");
}
