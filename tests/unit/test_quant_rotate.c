/* The rotation fold preserves the function: a tiny random Llama/Qwen3-shaped model (tied
 * embeddings, GQA, q/k norms, SwiGLU, 3 tokens of causal attention) gives the same logits before
 * and after folding the norm gains and rotating the residual stream with a randomized R. */
#include "test.h"

enum { NL = 2, NH = 4, NKV = 2, HD = 8, FF = 40, V = 30, NT = 3 };

typedef struct model {
    int n;                                     /* hidden */
    float *embed, *lm_head;                    /* [V, n] */
    float *gf;                                 /* [n] final norm */
    float *g1[NL], *g2[NL];                    /* [n] */
    float *qn[NL], *kn[NL];                    /* [HD] */
    float *q[NL], *k[NL], *v[NL];              /* [NH*HD | NKV*HD, n] */
    float *o[NL];                              /* [n, NH*HD] */
    float *gate[NL], *up[NL];                  /* [FF, n] */
    float *down[NL];                           /* [n, FF] */
} model;

static float *rnd(int64_t count, double sd, uint64_t *st)
{
    float *p = malloc((size_t)count * sizeof *p);
    for (int64_t i = 0; i < count; i++) p[i] = (float)(sd * test_gauss(st));
    return p;
}
static float *gains(int64_t count, uint64_t *st)
{
    float *p = malloc((size_t)count * sizeof *p);
    for (int64_t i = 0; i < count; i++) p[i] = (float)(0.5 + test_uniform(st) * 1.5);
    return p;
}

static void rmsnorm(const double *x, const float *g, int n, double *y)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const double r = 1.0 / sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * (g ? g[i] : 1.0);
}
static void matvec(const float *W, const double *x, int out, int in, double *y)
{
    for (int o = 0; o < out; o++) {
        double a = 0;
        for (int i = 0; i < in; i++) a += (double)W[o * in + i] * x[i];
        y[o] = a;
    }
}

/* logits [NT, V] of tokens toks, in double. */
static void forward(const model *m, const int *toks, double *logits)
{
    const int n = m->n;
    double h[NT][64], x[64], q[NT][NH * HD], k[NT][NKV * HD], v[NT][NKV * HD], att[NH * HD], t[64];
    double g[FF], u[FF];
    for (int p = 0; p < NT; p++)
        for (int i = 0; i < n; i++) h[p][i] = m->embed[toks[p] * n + i];
    for (int l = 0; l < NL; l++) {
        for (int p = 0; p < NT; p++) {
            rmsnorm(h[p], m->g1[l], n, x);
            matvec(m->q[l], x, NH * HD, n, q[p]);
            matvec(m->k[l], x, NKV * HD, n, k[p]);
            matvec(m->v[l], x, NKV * HD, n, v[p]);
            for (int hh = 0; hh < NH; hh++) rmsnorm(q[p] + hh * HD, m->qn[l], HD, q[p] + hh * HD);
            for (int hh = 0; hh < NKV; hh++) rmsnorm(k[p] + hh * HD, m->kn[l], HD, k[p] + hh * HD);
        }
        for (int p = 0; p < NT; p++) {
            for (int hh = 0; hh < NH; hh++) {
                const int kv = hh / (NH / NKV);
                double s[NT], mx = -1e300, den = 0;
                for (int j = 0; j <= p; j++) {
                    s[j] = 0;
                    for (int d = 0; d < HD; d++) s[j] += q[p][hh * HD + d] * k[j][kv * HD + d];
                    s[j] /= sqrt((double)HD);
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j <= p; j++) den += (s[j] = exp(s[j] - mx));
                for (int d = 0; d < HD; d++) {
                    double a = 0;
                    for (int j = 0; j <= p; j++) a += s[j] / den * v[j][kv * HD + d];
                    att[hh * HD + d] = a;
                }
            }
            matvec(m->o[l], att, n, NH * HD, t);
            for (int i = 0; i < n; i++) h[p][i] += t[i];
        }
        for (int p = 0; p < NT; p++) {
            rmsnorm(h[p], m->g2[l], n, x);
            matvec(m->gate[l], x, FF, n, g);
            matvec(m->up[l], x, FF, n, u);
            for (int i = 0; i < FF; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(m->down[l], g, n, FF, t);
            for (int i = 0; i < n; i++) h[p][i] += t[i];
        }
    }
    for (int p = 0; p < NT; p++) {
        rmsnorm(h[p], m->gf, n, x);
        matvec(m->lm_head, x, V, n, logits + p * V);
    }
}

static void ones(float *g, int n)
{
    for (int i = 0; i < n; i++) g[i] = 1;
}

/* writer W [n, in] -> R^T W in the same layout, through tcq_rotate_writer's transposed output. */
static void rotate_writer_inplace(const tcq_hadamard *h, float *W, int n, int in, tcq_pool *pool)
{
    float *Wt = malloc((size_t)n * in * sizeof *Wt);
    CHECK_OK(tcq_rotate_writer(h, W, in, Wt, pool));
    for (int r = 0; r < n; r++)
        for (int c = 0; c < in; c++) W[r * in + c] = Wt[c * n + r];
    free(Wt);
}

static void run(int n, uint64_t *st, tcq_pool *pool)
{
    model m = {.n = n};
    m.embed = rnd((int64_t)V * n, 1.0, st);
    m.lm_head = malloc((size_t)V * n * sizeof(float));
    memcpy(m.lm_head, m.embed, (size_t)V * n * sizeof(float));   /* tied */
    m.gf = gains(n, st);
    const double sd = 1.0 / sqrt((double)n);
    for (int l = 0; l < NL; l++) {
        m.g1[l] = gains(n, st);
        m.g2[l] = gains(n, st);
        m.qn[l] = gains(HD, st);
        m.kn[l] = gains(HD, st);
        m.q[l] = rnd((int64_t)NH * HD * n, sd, st);
        m.k[l] = rnd((int64_t)NKV * HD * n, sd, st);
        m.v[l] = rnd((int64_t)NKV * HD * n, sd, st);
        m.o[l] = rnd((int64_t)n * NH * HD, 0.3, st);
        m.gate[l] = rnd((int64_t)FF * n, sd, st);
        m.up[l] = rnd((int64_t)FF * n, sd, st);
        m.down[l] = rnd((int64_t)n * FF, 0.3, st);
    }
    const int toks[NT] = {3, 17, 3};
    double ref[NT * V], got[NT * V];
    forward(&m, toks, ref);

    tcq_hadamard *h = NULL;
    CHECK_OK(tcq_hadamard_create(n, 1, test_rand(st), &h));
    if (!h) return;
    /* The fold, as tcq_quantize_model does it: readers take their norm's gain, then the norms
     * become 1; lm_head is the (untied) embedding with the final norm folded in. */
    CHECK_OK(tcq_hadamard_rows(h, m.embed, V, 0, pool));
    CHECK_OK(tcq_rotate_reader(h, m.lm_head, V, m.gf, pool));
    ones(m.gf, n);
    for (int l = 0; l < NL; l++) {
        CHECK_OK(tcq_rotate_reader(h, m.q[l], NH * HD, m.g1[l], pool));
        CHECK_OK(tcq_rotate_reader(h, m.k[l], NKV * HD, m.g1[l], pool));
        CHECK_OK(tcq_rotate_reader(h, m.v[l], NKV * HD, m.g1[l], pool));
        CHECK_OK(tcq_rotate_reader(h, m.gate[l], FF, m.g2[l], pool));
        CHECK_OK(tcq_rotate_reader(h, m.up[l], FF, m.g2[l], pool));
        ones(m.g1[l], n);
        ones(m.g2[l], n);
        rotate_writer_inplace(h, m.o[l], n, NH * HD, pool);
        rotate_writer_inplace(h, m.down[l], n, FF, pool);
    }
    forward(&m, toks, got);
    double maxd = 0, maxr = 0;
    for (int i = 0; i < NT * V; i++) {
        maxd = fmax(maxd, fabs(got[i] - ref[i]));
        maxr = fmax(maxr, fabs(ref[i]));
    }
    fprintf(stderr, "n=%d (factor %d): max |logit| %.3f, max |diff| %.3g\n", n, tcq_hadamard_factor(h), maxr, maxd);
    CHECK(maxr > 0.5, "n=%d: degenerate logits", n);
    CHECK(maxd < 1e-5 * fmax(1, maxr), "n=%d: fold+rotation changed logits by %g", n, maxd);
    tcq_hadamard_free(h);
    free(m.embed);
    free(m.lm_head);
    free(m.gf);
    for (int l = 0; l < NL; l++) {
        free(m.g1[l]); free(m.g2[l]); free(m.qn[l]); free(m.kn[l]);
        free(m.q[l]); free(m.k[l]); free(m.v[l]); free(m.o[l]);
        free(m.gate[l]); free(m.up[l]); free(m.down[l]);
    }
}

int main(void)
{
    uint64_t st = test_seed();
    tcq_pool *pool = NULL;
    CHECK_OK(tcq_pool_create(2, &pool));
    run(64, &st, pool);
    run(48, &st, NULL);   /* 12 x 4: a Kronecker size */
    run(40, &st, pool);   /* 20 x 2 */
    tcq_pool_free(pool);

    /* A writer checked entry by entry: Wt = (R^T W)^T with the dense R. */
    tcq_hadamard *h = NULL;
    CHECK_OK(tcq_hadamard_create(24, 1, 5, &h));
    if (h) {
        const int n = 24, in = 7;
        float *W = rnd(n * in, 1, &st), Wt[7 * 24], R[24 * 24];
        CHECK_OK(tcq_rotate_writer(h, W, in, Wt, NULL));
        CHECK_OK(tcq_hadamard_dense(h, R));
        double maxd = 0, moved = 0;
        for (int c = 0; c < in; c++)
            for (int r = 0; r < n; r++) {
                double ref = 0;
                for (int t = 0; t < n; t++) ref += (double)R[t * n + r] * W[t * in + c];
                maxd = fmax(maxd, fabs(ref - Wt[c * n + r]));
                moved = fmax(moved, fabs(W[r * in + c] - Wt[c * n + r]));
            }
        CHECK(maxd < 1e-5, "writer vs dense R^T W: %g", maxd);
        CHECK(moved > 0.1, "writer did not rotate");
        free(W);
        tcq_hadamard_free(h);
    }
    CHECK(tcq_rotate_writer(NULL, NULL, 1, NULL, NULL) == TCQ_ERR_INVALID_ARG, "NULL writer args");
    return test_done("test_quant_rotate");
}
