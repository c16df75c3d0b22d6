/* The reference Viterbi encoder: scalar, plain loops, kept forever as the golden that every fast
 * encoder must match bit for bit.  The arithmetic contract is written in tcq.h (Encoder). */
#include "../core/internal.h"

#include <math.h>
#include <string.h>

typedef struct ref_scratch {
    float *a, *b;      /* [2^L] cost tables: -2 v(s), v(s)^2 */
    float *D, *Dn;     /* [2^L] path costs */
    float *Mmin;       /* [2^(L-k)] best predecessor cost per shared predecessor group */
    uint8_t *bp;       /* [T, 2^(L-k)] argmin j per group */
} ref_scratch;

/* One Viterbi pass over x.  start_ov / end_ov < 0: unconstrained; otherwise the first state
 * must have (s >> k) == start_ov and the last (s & (2^(L-k)-1)) == end_ov. */
static void ref_pass(tcq_block_params p, ref_scratch *sc, const float *x, const float *w,
                     int start_ov, int end_ov, uint32_t *states /* [T] */)
{
    const uint32_t N = 1u << p.L, G = 1u << (p.L - p.k), J = 1u << p.k;
    float *D = sc->D, *Dn = sc->Dn;
    for (uint32_t s = 0; s < N; s++) {
        float c = fmaf(x[0], sc->a[s], sc->b[s]);
        if (w) c *= w[0];
        D[s] = (start_ov < 0 || (int)(s >> p.k) == start_ov) ? c : INFINITY;
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
        for (uint32_t s = 0; s < N; s++) {
            float c = fmaf(x[t], sc->a[s], sc->b[s]);
            if (w) c *= w[t];
            Dn[s] = sc->Mmin[s >> p.k] + c;
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

tcq_status tcq_encode_block_ref(tcq_block_params p, const tcq_encode_opts *opts, const float *x,
                                const float *w, uint32_t *words, uint32_t *states_out, double *err)
{
    TCQ_TRY(tcq_block_check(p));
    if (!x || !words) return tcq_fail(TCQ_ERR_INVALID_ARG, "encode: x or words is NULL");
    const tcq_search search = opts ? opts->search : TCQ_SEARCH_TWO_PASS;
    if (search != TCQ_SEARCH_TWO_PASS)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "reference encoder: search '%s' not available",
                        tcq_search_name(search));
    const uint32_t N = 1u << p.L, G = 1u << (p.L - p.k);
    const int T = p.T, half = p.T / 2;
    ref_scratch sc;
    sc.a = malloc(N * sizeof(float));
    sc.b = malloc(N * sizeof(float));
    sc.D = malloc(N * sizeof(float));
    sc.Dn = malloc(N * sizeof(float));
    sc.Mmin = malloc(G * sizeof(float));
    sc.bp = malloc((size_t)T * G);
    float *xr = malloc((size_t)T * sizeof(float)), *wr = w ? malloc((size_t)T * sizeof(float)) : NULL;
    uint32_t *st = malloc((size_t)T * sizeof(uint32_t));
    tcq_status rc = TCQ_OK;
    if (!sc.a || !sc.b || !sc.D || !sc.Dn || !sc.Mmin || !sc.bp || !xr || !st || (w && !wr)) {
        rc = tcq_fail(TCQ_ERR_NOMEM, "encode scratch");
        goto done;
    }
    for (uint32_t s = 0; s < N; s++) {
        const float v = tcq_code_value(s);
        sc.a[s] = -2.0f * v;
        sc.b[s] = v * v;
    }
    /* Pass 1: the block rolled by T/2, so original position 0 sits mid-block, away from the
     * free ends; its state's upper bits are the seam both ends of pass 2 must share. */
    for (int i = 0; i < T; i++) {
        xr[i] = x[(i + half) % T];
        if (w) wr[i] = w[(i + half) % T];
    }
    ref_pass(p, &sc, xr, wr, -1, -1, st);
    const int overlap = (int)(st[half] >> p.k);
    ref_pass(p, &sc, x, w, overlap, overlap, st);
    tcq_block_pack(p, st, words);
    if (states_out) memcpy(states_out, st, (size_t)T * sizeof *st);
    if (err) {
        double e = 0;
        for (int t = 0; t < T; t++) {
            const double d = (double)x[t] - tcq_code_value(st[t]);
            e += (w ? w[t] : 1.0) * d * d;
        }
        *err = e;
    }
done:
    free(sc.a);
    free(sc.b);
    free(sc.D);
    free(sc.Dn);
    free(sc.Mmin);
    free(sc.bp);
    free(xr);
    free(wr);
    free(st);
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
