/* Internal to the encoder: the forward pass every ISA implements, and the scratch it works in.
 *
 * Each step runs in two phases over one cost array, in place: the group minima M_t (read from
 * D_{t-1}), then D_t(s) = fma(e, d, M_t(s >> k)) with d = x_t - v(s), e = d or w_t d.  The
 * working set is D and the value table (2 x 16 KiB at L = 12) plus one row of M, which fits
 * in L1; a second cost array and a second table did not, and ran three times slower.
 *
 * The fast passes store no backpointers.  They keep, for every step t >= 1, the 2^(L-k) group
 * minima M_t(g) = min_j D_{t-1}(g + j 2^(L-k)) that D_t(s) = M_t(s >> k) + c_t(s) was built
 * from; the traceback recomputes the 2^k candidate costs of the one state it follows with the
 * same float operations, so its argmin is the reference's backpointer bit for bit, and the
 * forward loop spends no compares or blends on argmins. */
#ifndef TCQ_VITERBI_H
#define TCQ_VITERBI_H

#include "../core/internal.h"

typedef struct vit_scratch {
    int tab_L;             /* L the tables a, b hold (0: none) */
    size_t cap_N, cap_M;   /* floats allocated in D0/D1/a/b and in M */
    void *base;            /* one allocation holding v, vr and D */
    float *v;              /* [2^L] the canonical values v(s) */
    float *vr;             /* [2^L] v(rev_L(r)): the table of the time-reversed trellis */
    float *D;              /* [2^L] path costs, updated in place */
    float *M;              /* [T, 2^(L-k)] group minima; row 0 unused */
    float *P;              /* [2^(L-k)] seam proxy costs */
    uint32_t *order;       /* [2^(L-k)] overlaps sorted by proxy cost */
    float xr[256], wr[256];
    uint32_t st[256], best[256];
} vit_scratch;

/* Size scratch for p (keeps buffers that are big enough; rebuilds tables when L changes). */
tcq_status vit_scratch_reserve(vit_scratch *sc, tcq_block_params p);
void vit_scratch_release(vit_scratch *sc);

/* The forward recursion over x[0..T): D_0 (start_ov >= 0 restricts the first state to
 * (s >> k) == start_ov, others get +inf), the rows M[1..T-1], and D_{T-1} left in sc->D, which
 * it returns. */
typedef const float *(*vit_fwd_fn)(tcq_block_params p, vit_scratch *sc, const float *x,
                                   const float *w, int start_ov);
/* One tail-biting or free pass: forward, end state, traceback into states [T]. */
typedef void (*vit_pass_fn)(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov,
                            int end_ov, uint32_t *states);
typedef struct vit_kernel {
    vit_fwd_fn fwd;
    vit_pass_fn pass;
} vit_kernel;
void vit_pass_scalar(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov, int end_ov, uint32_t *states);
void vit_pass_avx2(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov, int end_ov, uint32_t *states);
void vit_pass_avx512(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov, int end_ov, uint32_t *states);
const float *vit_fwd_scalar(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov);
const float *vit_fwd_avx2(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov);
const float *vit_fwd_avx512(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov);

/* Encode one block into sc->best with the search in opts, using kr for the passes. */
tcq_status vit_encode(tcq_block_params p, const tcq_encode_opts *opts, vit_scratch *sc, const vit_kernel *kr,
                      const float *x, const float *w);
/* tcq_encode_block with caller-held scratch (tcq_encode_rows keeps one per pool thread). */
tcq_status vit_encode_block(tcq_block_params p, const tcq_encode_opts *opts, vit_scratch *sc, const float *x,
                            const float *w, uint32_t *words, uint32_t *states, double *err);
/* The kernel of the active ISA. */
const vit_kernel *vit_kernel_active(void);

/* Validation shared by the reference and the fast path. */
tcq_status vit_check_args(tcq_block_params p, const tcq_encode_opts *opts, const float *x,
                          const float *w, const uint32_t *words);

/* Number of extra seam candidates TCQ_SEARCH_SEAMS tries (0 for the two-pass search). */
int vit_seam_count(const tcq_encode_opts *opts);
/* Order the G overlaps by proxy cost P (then by overlap): order[0..G). Shared by both encoders. */
void vit_seam_order(uint32_t G, const float *P, uint32_t *order);
/* L-bit reversal. */
uint32_t vit_rev(uint32_t s, int L);

#endif
