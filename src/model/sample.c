/* Sampling: repetition penalty, greedy, temperature, top-k, top-p, min-p, seeded draw.
 * The PRNG is xoshiro256** seeded through splitmix64, so a seed gives the same tokens on every
 * machine and thread count. */
#include "model/model.h"

#include <math.h>
#include <string.h>

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct tcq_sampler {
    tcq_sampler_params p;
    int vocab;
    uint64_t rng[4];
    int32_t *hist;            /* ring of the last repeat_last_n tokens */
    int hist_n, hist_head;
    uint32_t *mark;           /* [vocab] stamp for "already penalized" */
    uint32_t stamp;
    float *work;              /* [vocab] */
    cand *c;                  /* [vocab] */
};

tcq_sampler_params tcq_sampler_defaults(void)
{
    tcq_sampler_params p = {0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0};
    return p;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t xoshiro(uint64_t *s)
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

void tcq_sampler_reset(tcq_sampler *s)
{
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix(&x);
    s->hist_n = s->hist_head = 0;
}

tcq_status tcq_sampler_create(const tcq_sampler_params *p, int vocab, tcq_sampler **out)
{
    if (!p || !out || vocab < 1) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_sampler_create: bad arguments");
    if (!(p->temperature == p->temperature) || !(p->repeat_penalty > 0) || !(p->top_p > 0) || p->min_p > 1)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "sampler: temperature must be a number, repeat_penalty > 0, top_p > 0, "
                                             "min_p <= 1");
    *out = NULL;
    tcq_sampler *s = calloc(1, sizeof *s);
    if (!s) return tcq_fail(TCQ_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    if (s->p.repeat_last_n <= 0) s->p.repeat_last_n = 64;
    s->vocab = vocab;
    s->hist = malloc((size_t)s->p.repeat_last_n * sizeof *s->hist);
    s->mark = calloc((size_t)vocab, sizeof *s->mark);
    s->work = malloc((size_t)vocab * sizeof *s->work);
    s->c = malloc((size_t)vocab * sizeof *s->c);
    if (!s->hist || !s->mark || !s->work || !s->c) {
        tcq_sampler_free(s);
        return tcq_fail(TCQ_ERR_NOMEM, "sampler: out of memory");
    }
    tcq_sampler_reset(s);
    *out = s;
    return TCQ_OK;
}

void tcq_sampler_free(tcq_sampler *s)
{
    if (!s) return;
    free(s->hist);
    free(s->mark);
    free(s->work);
    free(s->c);
    free(s);
}

void tcq_sampler_accept(tcq_sampler *s, int32_t token)
{
    if (token < 0 || token >= s->vocab) return;
    s->hist[s->hist_head] = token;
    s->hist_head = (s->hist_head + 1) % s->p.repeat_last_n;
    if (s->hist_n < s->p.repeat_last_n) s->hist_n++;
}

/* Descending logit, then ascending id: a total order, so the result is deterministic. */
static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Keep the k best of c[0..n) in c[0..k), sorted (a bounded insertion; k is small). */
static int keep_top_k(cand *c, int n, int k)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        cand x = c[i];
        if (m == k && cand_cmp(&x, &c[m - 1]) >= 0) continue;
        int j = m < k ? m++ : m - 1;
        while (j > 0 && cand_cmp(&x, &c[j - 1]) < 0) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = x;
    }
    return m;
}

int tcq_sampler_sample(tcq_sampler *s, const float *logits)
{
    const int V = s->vocab;
    float *w = s->work;
    memcpy(w, logits, (size_t)V * sizeof *w);
    if (s->p.repeat_penalty != 1.0f && s->hist_n) {
        if (++s->stamp == 0) {
            memset(s->mark, 0, (size_t)V * sizeof *s->mark);
            s->stamp = 1;
        }
        for (int i = 0; i < s->hist_n; i++) {
            int32_t t = s->hist[i];
            if (s->mark[t] == s->stamp) continue;
            s->mark[t] = s->stamp;
            w[t] = w[t] > 0 ? w[t] / s->p.repeat_penalty : w[t] * s->p.repeat_penalty;
        }
    }
    if (s->p.temperature <= 0) {
        int best = 0;
        for (int i = 1; i < V; i++)
            if (w[i] > w[best]) best = i;
        return best;
    }
    int n = 0;
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) {
        float l = w[i] / s->p.temperature;
        if (l > mx) mx = l;
        s->c[n].logit = l;
        s->c[n].id = i;
        n++;
    }
    if (s->p.top_k > 0 && s->p.top_k < n) {
        n = keep_top_k(s->c, n, s->p.top_k);
    } else {
        /* Before sorting, drop tokens that cannot be in the nucleus (llama2.c's cut): everything
         * below (1 - top_p) / (n - 1) sums to less than 1 - top_p. */
        if (s->p.top_p < 1.0f && n > 1) {
            double all = 0;
            for (int i = 0; i < n; i++) all += exp((double)s->c[i].logit - mx);
            double cut = (1.0 - s->p.top_p) / (n - 1) * all;
            int m = 0;
            for (int i = 0; i < n; i++)
                if (exp((double)s->c[i].logit - mx) >= cut) s->c[m++] = s->c[i];
            n = m;
        }
        qsort(s->c, (size_t)n, sizeof *s->c, cand_cmp);
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)s->c[i].logit - mx);
    if (s->p.top_p < 1.0f) {
        double cum = 0;
        for (int i = 0; i < n; i++) {
            cum += exp((double)s->c[i].logit - mx);
            if (cum >= s->p.top_p * sum) {
                n = i + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0) {   /* relative to the best token, which is c[0] */
        double thr = (double)s->c[0].logit + log((double)s->p.min_p);
        int m = 1;
        while (m < n && (double)s->c[m].logit >= thr) m++;
        n = m;
    }
    sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)s->c[i].logit - mx);
    double u = (double)(xoshiro(s->rng) >> 11) * 0x1.0p-53 * sum, cum = 0;
    for (int i = 0; i < n; i++) {
        cum += exp((double)s->c[i].logit - mx);
        if (u < cum) return s->c[i].id;
    }
    return s->c[n - 1].id;
}
