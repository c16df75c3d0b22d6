/* The reference Viterbi encoder: scalar, plain loops, kept forever as the golden that every fast
 * encoder must match bit for bit.  The arithmetic contract is written in tcq_kernels.h (Encoder). */
#include "viterbi.h"

#include <math.h>
#include <string.h>

typedef struct ref_scratch {
    float *v;          /* [2^L] canonical values */
    float *D, *Dn;     /* [2^L] path costs */
    float *Mmin;       /* [2^(L-k)] best predecessor cost per shared predecessor group */
    uint8_t *bp;       /* [T, 2^(L-k)] argmin j per group */
} ref_scratch;

/* One Viterbi pass over x.  start_ov / end_ov < 0: unconstrained; otherwise the first state
 * must have (s >> k) == start_ov and the last (s & (2^(L-k)-1)) == end_ov.  keep (optional)
 * receives the group minima of step keep_t. */
static void ref_pass(tcq_block_params p, ref_scratch *sc, const float *x, const float *w,
                     int start_ov, int end_ov, uint32_t *states /* [T] */, int keep_t, float *keep)
{
    const uint32_t N = 1u << p.L, G = 1u << (p.L - p.k), J = 1u << p.k;
    float *D = sc->D, *Dn = sc->Dn;
    for (uint32_t s = 0; s < N; s++) {
        const float d = x[0] - sc->v[s], e = w ? w[0] * d : d;
        D[s] = (start_ov < 0 || (int)(s >> p.k) == start_ov) ? fmaf(e, d, 0.0f) : INFINITY;
    }
    for (int t = 1; t < p.T; t++) {
        uint8_t *bp = sc->bp + (size_t)t * G;
        for (uint32_t g = 0; g < G; g++) {
            float best = D[g];
            uint8_t bj = 0;
            for (uint32_t j = 1; j < J; j++) {
                const float v = D[g + j * G];
                if (v < best) {
                    best = v;
                    bj = (uint8_t)j;
                }
            }
            sc->Mmin[g] = best;
            bp[g] = bj;
        }
        if (keep && t == keep_t) memcpy(keep, sc->Mmin, G * sizeof(float));
        for (uint32_t s = 0; s < N; s++) {
            const float d = x[t] - sc->v[s], e = w ? w[t] * d : d;
            Dn[s] = fmaf(e, d, sc->Mmin[s >> p.k]);
        }
        float *tmp = D;
        D = Dn;
        Dn = tmp;
    }
    uint32_t best_s = 0;
    float best = INFINITY;
    int found = 0;
    for (uint32_t s = 0; s < N; s++) {
        if (end_ov >= 0 && (int)(s & (G - 1)) != end_ov) continue;
        if (!found || D[s] < best) {
            best = D[s];
            best_s = s;
            found = 1;
        }
    }
    states[p.T - 1] = best_s;
    for (int t = p.T - 1; t > 0; t--) {
        const uint32_t g = states[t] >> p.k;
        states[t - 1] = g + (uint32_t)sc->bp[(size_t)t * G + g] * G;
    }
}

static double ref_err(int T, const float *x, const float *w, const uint32_t *st)
{
    double e = 0;
    for (int t = 0; t < T; t++) {
        const double d = (double)x[t] - tcq_code_value(st[t]);
        e += (w ? w[t] : 1.0) * d * d;
    }
    return e;
}

/* A pass over the block rolled by r (position r first); start_ov / end_ov as in ref_pass.
 * out receives the states in original order. */
static void ref_rolled_pass(tcq_block_params p, ref_scratch *sc, const float *x, const float *w, int r,
                            int start_ov, int end_ov, float *xr, float *wr, uint32_t *st, uint32_t *out,
                            int keep_t, float *keep)
{
    const int T = p.T;
    for (int i = 0; i < T; i++) {
        xr[i] = x[(i + r) % T];
        if (w) wr[i] = w[(i + r) % T];
    }
    ref_pass(p, sc, xr, w ? wr : NULL, start_ov, end_ov, st, keep_t, keep);
    for (int i = 0; i < T; i++) out[(i + r) % T] = st[i];
}

tcq_status tcq_encode_block_ref(tcq_block_params p, const tcq_encode_opts *opts, const float *x,
                                const float *w, uint32_t *words, uint32_t *states_out, double *err)
{
    TCQ_TRY(vit_check_args(p, opts, x, w, words));
    const uint32_t N = 1u << p.L, G = 1u << (p.L - p.k);
    const int T = p.T, half = p.T / 2;
    ref_scratch sc;
    sc.v = malloc(N * sizeof(float));
    sc.D = malloc(N * sizeof(float));
    sc.Dn = malloc(N * sizeof(float));
    sc.Mmin = malloc(G * sizeof(float));
    sc.bp = malloc((size_t)T * G);
    /* zeroed only so the compiler sees them initialized */
    float *xr = calloc((size_t)T, sizeof(float)), *wr = w ? calloc((size_t)T, sizeof(float)) : NULL;
    uint32_t *st = calloc((size_t)T, sizeof(uint32_t)), *best = calloc((size_t)T, sizeof(uint32_t)),
             *cand = calloc((size_t)T, sizeof(uint32_t));
    float *P = malloc(G * sizeof(float));
    uint32_t *order = malloc(2 * G * sizeof(uint32_t));
    tcq_status rc = TCQ_OK;
    if (!P || !order || !sc.v || !sc.D || !sc.Dn || !sc.Mmin || !sc.bp || !xr || !st || !best || !cand || (w && !wr)) {
        rc = tcq_fail(TCQ_ERR_NOMEM, "encode scratch");
        goto done;
    }
    for (uint32_t s = 0; s < N; s++) sc.v[s] = tcq_code_value(s);
    /* Pass 1: the block rolled by T/2, so original position 0 sits mid-block, away from the
     * free ends; its state's upper bits are the seam both ends of pass 2 must share. */
    const int n = vit_seam_count(opts);
    ref_rolled_pass(p, &sc, x, w, half, -1, -1, xr, wr, st, cand, half, n ? P : NULL);
    const int overlap = (int)(cand[0] >> p.k);
    ref_pass(p, &sc, x, w, overlap, overlap, best, 0, NULL);
    if (n) {
        /* Seams (tcq_kernels.h): P(o) = A(o) + B(o), A the rolled free pass's minima into position 0
         * (kept above), B the best cost out of it, by a backward recursion over the rolled
         * block's second half: beta_t(s) = cost_t(s) + min_b beta_{t+1}(((s << k) | b) mod 2^L). */
        const uint32_t J = 1u << p.k;
        float *beta = sc.D, *nb = sc.Dn;
        for (uint32_t s = 0; s < N; s++) {
            const float d = xr[T - 1] - sc.v[s], e = w ? wr[T - 1] * d : d;
            beta[s] = fmaf(e, d, 0.0f);
        }
        for (int t = T - 2; t >= half; t--) {
            for (uint32_t s = 0; s < N; s++) {
                float m = beta[(s << p.k) & (N - 1)];
                for (uint32_t b = 1; b < J; b++) {
                    const float c = beta[((s << p.k) | b) & (N - 1)];
                    if (c < m) m = c;
                }
                const float d = xr[t] - sc.v[s], e = w ? wr[t] * d : d;
                nb[s] = fmaf(e, d, m);
            }
            float *tmp = beta;
            beta = nb;
            nb = tmp;
        }
        for (uint32_t o = 0; o < G; o++) {
            float m = beta[o * J];
            for (uint32_t b = 1; b < J; b++)
                if (beta[o * J + b] < m) m = beta[o * J + b];
            P[o] += m;
        }
        vit_seam_order(G, P, order, (uint32_t)n + 1);
        double best_err = ref_err(T, x, w, best);
        for (uint32_t i = 0, tried = 0; i < TCQ_MIN(G, (uint32_t)n + 1) && tried < (uint32_t)n; i++) {
            const int o = (int)order[i];
            if (o == overlap) continue;
            tried++;
            ref_pass(p, &sc, x, w, o, o, cand, 0, NULL);
            const double e = ref_err(T, x, w, cand);
            if (e < best_err) {
                best_err = e;
                memcpy(best, cand, (size_t)T * sizeof *cand);
            }
        }
    }
    tcq_block_pack(p, best, words);
    if (states_out) memcpy(states_out, best, (size_t)T * sizeof *best);
    if (err) *err = ref_err(T, x, w, best);
done:
    free(sc.v);
    free(sc.D);
    free(sc.Dn);
    free(sc.Mmin);
    free(sc.bp);
    free(xr);
    free(wr);
    free(st);
    free(best);
    free(cand);
    free(P);
    free(order);
    return rc;
}

const char *tcq_search_name(tcq_search s)
{
    switch (s) {
    case TCQ_SEARCH_TWO_PASS: return "default";
    case TCQ_SEARCH_SEAMS: return "seams";
    default: return "?";
    }
}

tcq_status tcq_search_parse(const char *name, tcq_search *out)
{
    for (int i = 0; i < TCQ_SEARCH_COUNT; i++)
        if (name && strcmp(name, tcq_search_name((tcq_search)i)) == 0) {
            *out = (tcq_search)i;
            return TCQ_OK;
        }
    return tcq_fail(TCQ_ERR_INVALID_ARG, "unknown search '%s' (want default|seams)", name ? name : "(null)");
}
