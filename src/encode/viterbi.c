/* The fast encoder's shared parts: scratch, the end-state choice and the traceback that
 * recomputes backpointers, and the tail-biting searches (two-pass, seams) over any ISA's
 * forward pass.  viterbi_ref.c holds the independent golden these must match. */
#include "viterbi.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>

/* The rows of M (1 MiB at L=12, k=2) are written forward and read back one row per step
 * during the traceback, a new 4 KiB page nearly every step, so they go on 2 MiB pages (a
 * hint; without them this is a plain allocation).  Measured: a small gain in the traceback. */
static float *vit_alloc_rows(size_t n)
{
    const size_t huge = (size_t)2 << 20, bytes = (n * sizeof(float) + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

static void vit_free_rows(float *p, size_t n)
{
    (void)n;
    free(p);
}

tcq_status vit_scratch_reserve(vit_scratch *sc, tcq_block_params p)
{
    const size_t N = (size_t)1 << p.L, Mn = (size_t)p.T << (p.L - p.k);
    if (N > sc->cap_N) {
        tcq_afree(sc->base);
        tcq_afree(sc->P);
        tcq_afree(sc->order);
        tcq_afree(sc->rev);
        tcq_afree(sc->vp);
        const size_t tab = N * sizeof(float);
        sc->base = tcq_amalloc(3 * tab);
        sc->v = sc->base ? (float *)sc->base : NULL;
        sc->vr = sc->base ? sc->v + N : NULL;
        sc->D = sc->base ? sc->v + 2 * N : NULL;
        sc->P = tcq_amalloc(N * sizeof(float));
        sc->order = tcq_amalloc(N * sizeof(uint32_t));
        sc->rev = tcq_amalloc(N * sizeof(uint32_t));
        sc->vp = tcq_amalloc(N * sizeof(float));
        sc->vp_key = 0;
        sc->cap_N = N;
        sc->tab_L = 0;
    }
    if (Mn > sc->cap_M) {
        vit_free_rows(sc->M, sc->cap_M);
        sc->M = vit_alloc_rows(Mn);
        sc->cap_M = Mn;
    }
    if (!sc->v || !sc->vr || !sc->D || !sc->P || !sc->order || !sc->rev || !sc->vp || !sc->M) {
        vit_scratch_release(sc);
        return tcq_fail(TCQ_ERR_NOMEM, "encode: scratch for L=%d k=%d T=%d", p.L, p.k, p.T);
    }
    if (sc->tab_L != p.L) {
        sc->vp_key = 0;
        for (uint32_t s = 0; s < (uint32_t)N; s++) sc->v[s] = tcq_code_value(s);
        for (uint32_t s = 0; s < (uint32_t)N; s++) {
            sc->rev[s] = vit_rev(s, p.L);
            sc->vr[s] = sc->v[sc->rev[s]];
        }
        sc->tab_L = p.L;
    }
    return TCQ_OK;
}

void vit_scratch_release(vit_scratch *sc)
{
    tcq_afree(sc->base);
    tcq_afree(sc->P);
    tcq_afree(sc->order);
    tcq_afree(sc->rev);
    tcq_afree(sc->vp);
    vit_free_rows(sc->M, sc->cap_M);
    sc->v = sc->vr = sc->D = sc->P = sc->M = NULL;
    sc->base = NULL;
    sc->order = sc->rev = NULL;
    sc->vp = NULL;
    sc->vp_key = 0;
    sc->cap_N = sc->cap_M = 0;
    sc->tab_L = 0;
}

tcq_status vit_check_args(tcq_block_params p, const tcq_encode_opts *opts, const float *x,
                          const float *w, const uint32_t *words)
{
    TCQ_TRY(tcq_block_check(p));
    if (!x || !words) return tcq_fail(TCQ_ERR_INVALID_ARG, "encode: x or words is NULL");
    if (opts && ((unsigned)opts->search >= TCQ_SEARCH_COUNT))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "encode: search %d is not a tcq_search", (int)opts->search);
    if (opts && opts->search == TCQ_SEARCH_SEAMS && (opts->seams < 0 || opts->seams >= (1 << (p.L - p.k))))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "encode: seams %d outside [0, 2^(L-k) - 1 = %d]", opts->seams,
                        (1 << (p.L - p.k)) - 1);
    for (int t = 0; t < p.T; t++) {
        if (!isfinite(x[t])) return tcq_fail(TCQ_ERR_INVALID_ARG, "encode: x[%d] is not finite", t);
        if (w && !(isfinite(w[t]) && w[t] >= 0))
            return tcq_fail(TCQ_ERR_INVALID_ARG, "encode: weight w[%d] = %g is not finite and >= 0", t, (double)w[t]);
    }
    return TCQ_OK;
}

int vit_seam_count(const tcq_encode_opts *opts)
{
    if (!opts || opts->search != TCQ_SEARCH_SEAMS) return 0;
    return opts->seams > 0 ? opts->seams : 8;
}

uint32_t vit_rev(uint32_t s, int L)
{
    uint32_t r = 0;
    for (int i = 0; i < L; i++) r |= ((s >> i) & 1u) << (L - 1 - i);
    return r;
}

static int seam_before(const float *P, uint32_t a, uint32_t b) { return P[a] < P[b] || (P[a] == P[b] && a < b); }

void vit_seam_order(uint32_t G, const float *P, uint32_t *order, uint32_t m)
{
    if (m > G) m = G;
    if (m <= 64) {
        /* the m first by (P, overlap), kept sorted by insertion: O(G m), m is small */
        uint32_t n = 0;
        for (uint32_t o = 0; o < G; o++) {
            if (n == m && !seam_before(P, o, order[n - 1])) continue;
            uint32_t i = n < m ? n++ : n - 1;
            while (i > 0 && seam_before(P, o, order[i - 1])) {
                order[i] = order[i - 1];
                i--;
            }
            order[i] = o;
        }
        return;
    }
    /* bottom-up merge sort by (P, overlap): a total order, so the result is unique */
    for (uint32_t i = 0; i < G; i++) order[i] = i;
    uint32_t *tmp = order + G;   /* the caller provides [2G] */
    for (uint32_t width = 1; width < G; width *= 2) {
        for (uint32_t lo = 0; lo < G; lo += 2 * width) {
            uint32_t mid = TCQ_MIN(lo + width, G), hi = TCQ_MIN(lo + 2 * width, G), i = lo, j = mid, o = lo;
            while (i < mid && j < hi) tmp[o++] = seam_before(P, order[j], order[i]) ? order[j++] : order[i++];
            while (i < mid) tmp[o++] = order[i++];
            while (j < hi) tmp[o++] = order[j++];
        }
        for (uint32_t i = 0; i < G; i++) order[i] = tmp[i];
    }
}

static double vit_err(int T, const float *x, const float *w, const uint32_t *st)
{
    double e = 0;
    for (int t = 0; t < T; t++) {
        const double d = (double)x[t] - tcq_code_value(st[t]);
        e += (w ? w[t] : 1.0) * d * d;
    }
    return e;
}

tcq_status vit_encode(tcq_block_params p, const tcq_encode_opts *opts, vit_scratch *sc, const vit_kernel *kr,
                      const float *x, const float *w)
{
    TCQ_TRY(vit_scratch_reserve(sc, p));
    const int T = p.T, half = T / 2;
    /* Two-pass (QTIP Algorithm 4): a free pass over the block rolled by T/2 puts position 0
     * mid-block, away from the free ends; its overlap there seeds the constrained pass. */
    for (int i = 0; i < T; i++) {
        sc->xr[i] = x[(i + half) % T];
        if (w) sc->wr[i] = w[(i + half) % T];
    }
    kr->pass(p, sc, sc->xr, w ? sc->wr : NULL, -1, -1, sc->st, half);
    const int ov = (int)(sc->st[half] >> p.k);
    if (vit_seam_count(opts)) /* A(o) for the seams search below, before pass 2 reuses M */
        memcpy(sc->P, sc->M + (size_t)half * ((size_t)1 << (p.L - p.k)), sizeof(float) << (p.L - p.k));
    kr->pass(p, sc, x, w, ov, ov, sc->best, 0);
    const int n = vit_seam_count(opts);
    if (n == 0) return TCQ_OK;
    /* Seams.  Rank every overlap o at position 0 by the best free-ended path of the rolled
     * block through it: A(o) = M_half(o) of the free pass (best cost into the seam) plus
     * B(o) = min_b beta_half(o 2^k + b), the best cost out of it, from a backward pass over the
     * rolled block's second half (the forward kernel on the time-reversed trellis: states
     * bit-reversed, table vr).  Then run the tail-biting pass for the n best overlaps after
     * the two-pass one and keep the least squared error. */
    const uint32_t G = 1u << (p.L - p.k), J = 1u << p.k;
    const tcq_block_params pb = {p.L, p.k, T - half};
    float xb[256], wb[256];
    for (int u = 0; u < T - half; u++) {
        xb[u] = sc->xr[T - 1 - u];
        if (w) wb[u] = sc->wr[T - 1 - u];
    }
    float *v = sc->v;
    sc->v = sc->vr;
    const float *Db = kr->fwd(pb, sc, xb, w ? wb : NULL, -1);
    sc->v = v;
    for (uint32_t o = 0; o < G; o++) {
        float b = Db[sc->rev[o * J]];
        for (uint32_t i = 1; i < J; i++) {
            const float c = Db[sc->rev[o * J + i]];
            b = c < b ? c : b;
        }
        sc->P[o] += b;
    }
    vit_seam_order(G, sc->P, sc->order, (uint32_t)n + 1);
    double best_err = vit_err(T, x, w, sc->best);
    uint32_t cand[256];
    for (uint32_t i = 0, tried = 0; i < TCQ_MIN(G, (uint32_t)n + 1) && tried < (uint32_t)n; i++) {
        const int o = (int)sc->order[i];
        if (o == ov) continue;
        tried++;
        kr->pass(p, sc, x, w, o, o, cand, 0);
        const double e = vit_err(T, x, w, cand);
        if (e < best_err) {
            best_err = e;
            memcpy(sc->best, cand, (size_t)T * sizeof *cand);
        }
    }
    return TCQ_OK;
}
