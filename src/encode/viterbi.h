/* Internal to the encoder: the passes every ISA implements and the scratch they work in.
 *
 * The vector passes never store the costs D_t: for each vector of groups of step t+1 they
 * build the 2^k predecessor cost vectors D_t(g + j 2^(L-k)) = fma(e, d, M_t(.)) in registers
 * (d = x_t - v(s), e = d or w_t d) and reduce them into M_{t+1}, the only store; only D_{T-1}
 * is written, for the end-state choice.  The working set is the value table (16 KiB at
 * L = 12) and two rows of M.  The generic pass keeps a two-phase form in plain loops.
 *
 * No pass stores backpointers.  The rows M_t (t >= 1) are kept, and the traceback recomputes
 * the 2^k candidate costs of the one state it follows with the same float operations, so its
 * argmin is the reference's backpointer bit for bit and the forward loop spends no compares or
 * blends on argmins. */
#ifndef TCQ_VITERBI_H
#define TCQ_VITERBI_H

#include "../core/internal.h"

typedef struct vit_scratch {
    int tab_L;             /* L the tables v, vr, rev hold (0: none) */
    size_t cap_N, cap_M;   /* entries allocated per 2^L table, and in M */
    void *base;            /* one allocation holding v, vr and D */
    float *v;              /* [2^L] the canonical values v(s) */
    float *vr;             /* [2^L] v(rev_L(r)): the table of the time-reversed trellis */
    float *vp;             /* [2^L] v in a vector pass's lane order (built by that pass) */
    int vp_key;            /* what vp holds (0: nothing) ... */
    const float *vp_src;   /* ... and from which table */
    float *D;              /* [2^L] path costs (the vector passes: D_{T-1} only) */
    float *M;              /* [T, 2^(L-k)] group minima; row 0 unused */
    float *P;              /* [2^(L-k)] seam proxy costs (allocated [2^L]) */
    uint32_t *order;       /* [2 * 2^(L-k)] overlaps by proxy cost, and merge space ([2^L]) */
    uint32_t *rev;         /* [2^L] L-bit reversal */
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
/* One tail-biting or free pass: forward, end state, traceback into states[t_stop..T-1]
 * (t_stop 0: all; the two-pass search's first pass needs only states[T/2]). */
typedef void (*vit_pass_fn)(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov,
                            int end_ov, uint32_t *states, int t_stop);
typedef struct vit_kernel {
    vit_fwd_fn fwd;
    vit_pass_fn pass;
} vit_kernel;
void vit_pass_scalar(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov, int end_ov,
                   uint32_t *states, int t_stop);
void vit_pass_avx2(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov, int end_ov,
                   uint32_t *states, int t_stop);
void vit_pass_avx512(tcq_block_params p, vit_scratch *sc, const float *x, const float *w, int start_ov, int end_ov,
                   uint32_t *states, int t_stop);
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
/* The m first of the G overlaps ordered by proxy cost P, then by overlap, into order[0..m)
 * (order has room for 2G).  Shared by both encoders. */
void vit_seam_order(uint32_t G, const float *P, uint32_t *order, uint32_t m);
/* L-bit reversal. */
uint32_t vit_rev(uint32_t s, int L);

#endif
