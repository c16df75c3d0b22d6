/* test_cuda's checks of the fast path (TCQ_PATH_FAST): per output against float64 within the
 * bound of tcq_kernels.h, and where the family's activation blocks are the CPU's against the CPU's
 * fast path; non-finite and tiny activations; the fused SwiGLU.  Included by test_cuda.c after
 * cuda_checks.h. */
#ifndef TCQ_TEST_CUDA_FAST_CHECKS_H
#define TCQ_TEST_CUDA_FAST_CHECKS_H

#include "cuda_checks.h"
#include "kernels/kernels.h"   /* tcq_kq_prepare: the CPU's activation blocks, for the bounds */

/* ---- fast path ---------------------------------------------------------------------------
 * Bounds, per output (m, o), with v_i the weight without the activation-side factor (axis 1:
 * W[o, i]; axis 0: W[o, i] / scale_i = value), a_i the activation (axis 1: x; axis 0: x * scale)
 * and d_i the step of i's activation block (tcq_kq_prepare, the CPU's quantization; on the int8
 * kernels the same arithmetic over their own, longer blocks):
 *   vs float64 (tcq_kernels.h): sum |v_i| d_i / 2 (1 + 1e-4) + (nblk + 4) 2^-24 sum |v_i| (|a_i| + d_i)
 *   vs the CPU fast path (dp4a kernels only): 2 (nblk + 4) 2^-24 sum |v_i| (|a_i| + d_i).
 * The second because both sides add the same exact integer block sums isum_b times the same d_b,
 * only in a different order (GPU: lanes then a butterfly, or items then their partials; CPU: one
 * chain, or four partitions): each side is within (nblk + 4) roundings of the exact sum of
 * sum_b |isum_b d_b| * |f| <= sum_i |v_i| (|a_i| + d_i), hence twice that between them. */
typedef struct fast_stats {
    double worst_rel;       /* relative RMS error vs float64, the worst case */
    double worst_exact;     /* max |gpu - f64| / bound */
    double worst_cpu;       /* max |gpu - cpu fast| / bound */
    int64_t same, total;    /* outputs bit-identical to the CPU fast path */
    int n;
} fast_stats;
static fast_stats fst, fst8;   /* the "fast" (dp4a) kernels, the "int8" ones */

/* qb: the activation block; TCQ_FAST_QB takes the CPU's steps (tcq_kq_prepare), any other (the
 * "int8" kernels' item length) works them out the same way, d = amax / 127 in f32. */
static void fast_bounds(const host_w *h, const float *W, const float *x, int64_t M, int64_t qb, double *b_exact,
                        double *b_cpu)
{
    const int64_t out = tcq_trellis_out(&h->t), in = tcq_trellis_in(&h->t), nblk = (in + qb - 1) / qb;
    kq_act qa;
    memset(&qa, 0, sizeof qa);
    float *dq = NULL;
    if (qb == TCQ_FAST_QB) CHECK_OK(tcq_kq_prepare(&qa, x, M, in, h->t.axis ? NULL : h->scales));
    else {
        dq = calloc((size_t)(M * nblk), sizeof *dq);
        for (int64_t m = 0; m < M; m++)
            for (int64_t i = 0; i < in; i++) {
                const float a = h->t.axis ? x[m * in + i] : x[m * in + i] * tcq_f16_to_f32(h->scales[i]);
                dq[m * nblk + i / qb] = fmaxf(dq[m * nblk + i / qb], fabsf(a));
            }
        for (int64_t j = 0; j < M * nblk; j++) dq[j] /= 127.0f;
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t o = 0; o < out; o++) {
            double s1 = 0, s2 = 0;
            for (int64_t i = 0; i < in; i++) {
                const double sc = h->t.axis ? 1.0 : tcq_f16_to_f32(h->scales[i]);
                const double v = fabs((double)W[o * in + i]) / sc, a = fabs((double)x[m * in + i]) * sc;
                const double d = dq ? dq[m * nblk + i / qb] : qa.d[m * nblk + i / TCQ_FAST_QB];
                s1 += v * d / 2;
                s2 += v * (a + d);
            }
            b_exact[m * out + o] = s1 * (1 + 1e-4) + (double)(nblk + 4) * 0x1p-24 * s2 + 1e-30;
            b_cpu[m * out + o] = 2.0 * (double)(nblk + 4) * 0x1p-24 * s2 + 1e-30;
        }
    if (dq) free(dq);
    else tcq_kq_free(&qa);
}

static tcq_kctx *cpu_fast_ctx(void)
{
    tcq_kctx *kc = NULL;
    CHECK_OK(tcq_kctx_create(NULL, TCQ_PATH_FAST, &kc));
    /* the scalar reference: int8 blocks for every M (an ISA's tile regime may use int16).  The
     * regime is pinned too: on its own the scalar table sends M >= 5 to decode + sgemm, the
     * exact path's sums (tr_table.gemm_from), and every scalar fast regime is the same kernel. */
    if (kc) CHECK_OK(tcq_kctx_force(kc, TCQ_ISA_SCALAR, TCQ_KR_TILE));
    return kc;
}

/* One fast case: GPU TCQ_PATH_FAST vs the CPU's fast path and vs float64. */
static void check_fast(int L, int k, int T, int axis, int il, int64_t out, int64_t in, int64_t M)
{
    host_w h;
    make_w(&h, L, k, T, axis, il, out, in);
    const int64_t n = M * out;
    float *W = malloc((size_t)(out * in) * 4), *x = malloc((size_t)(M * in) * 4), *y = malloc((size_t)n * 4);
    float *yc = malloc((size_t)n * 4), *y2 = malloc((size_t)n * 4);
    double *ref = malloc((size_t)n * 8), *be = malloc((size_t)n * 8), *bc = malloc((size_t)n * 8);
    CHECK_OK(tcq_trellis_decode(&h.t, W));
    for (int64_t i = 0; i < M * in; i++) x[i] = (float)test_gauss(&rng);
    if (in >= 128)   /* an all-zero activation block: d = 0 */
        for (int64_t i = 64; i < 128; i++) x[i] = 0.0f;
    ref_linear(W, x, ref, M, out, in, REF_EXACT, NULL);
    /* "fast" (dp4a): the CPU's blocks and integer sums, so also within bc of the CPU; "int8":
     * its own blocks, checked against float64 only */
    const tcq_cuda_family *f = family_of(&h.t, M, TCQ_PATH_FAST);
    const char *kern = f ? f->name : "?";
    const int64_t qb = tcq_cuda_fast_block(ctx, &h.t, M);
    const int cpu_blocks = qb == TCQ_FAST_QB;
    CHECK(f && f->ref == TCQ_CREF_FAST && qb > 0, "fast M=%lld runs %s, block %lld", (long long)M, kern,
          (long long)qb);
    fast_bounds(&h, W, x, M, qb > 0 ? qb : TCQ_FAST_QB, be, bc);
    tcq_kctx *kc = cpu_fast_ctx();
    const tcq_weight wt = {.fmt = TCQ_WF_TRELLIS, .out = out, .in = in, .tr = h.t};
    CHECK_OK(tcq_linear(&wt, x, yc, M, kc));
    CHECK(strstr(tcq_kctx_last_kernel(kc), "fast") && strstr(tcq_kctx_last_kernel(kc), "scalar"),
          "CPU fast reference ran %s", tcq_kctx_last_kernel(kc));
    tcq_kctx_free(kc);

    const size_t wb = tcq_cuda_trellis_bytes(&h.t);
    void *dwb = dev_alloc(wb);
    float *dx = dev_alloc((size_t)(M * in) * 4), *dy = dev_alloc((size_t)n * 4);
    tcq_trellis dw;
    CHECK_OK(tcq_cuda_trellis_upload(ctx, &h.t, dwb, wb, &dw));
    CHECK_OK(tcq_cuda_copy_to_device(ctx, dx, x, (size_t)(M * in) * 4));
    CHECK_OK(tcq_cuda_memset(ctx, dy, 0xff, (size_t)n * 4));   /* NaN poison */
    CHECK_OK(tcq_cuda_linear(ctx, &dw, dx, dy, M, TCQ_PATH_FAST));
    CHECK_OK(tcq_cuda_sync(ctx));
    CHECK_OK(tcq_cuda_copy_to_host(ctx, y, dy, (size_t)n * 4));
    int nf;
    const double e = rel_err(y, ref, n, &nf);
    double we = 0, wc = 0;
    int64_t bad_e = 0, bad_c = 0, same = 0;
    for (int64_t j = 0; j < n; j++) {
        const double re = fabs((double)y[j] - ref[j]) / be[j], rc = fabs((double)y[j] - (double)yc[j]) / bc[j];
        bad_e += !(re <= 1.0);
        we = fmax(we, re);
        if (!cpu_blocks) continue;
        bad_c += !(rc <= 1.0);
        wc = fmax(wc, rc);
        same += memcmp(&y[j], &yc[j], 4) == 0;
    }
    CHECK(nf == 0 && bad_e == 0 && bad_c == 0 && e <= 0.02,
          "fast (%s) L=%d k=%d T=%d axis=%d il=%d out=%lld in=%lld M=%lld: %d non-finite, %lld outside the float64 bound "
          "(worst %.3g of it), %lld outside the CPU bound (worst %.3g), rel err %.3g",
          kern, L, k, T, axis, il, (long long)out, (long long)in, (long long)M, nf, (long long)bad_e, we, (long long)bad_c, wc, e);
    CHECK_OK(tcq_cuda_memset(ctx, dy, 0xff, (size_t)n * 4));
    CHECK_OK(tcq_cuda_linear(ctx, &dw, dx, dy, M, TCQ_PATH_FAST));
    CHECK_OK(tcq_cuda_copy_to_host(ctx, y2, dy, (size_t)n * 4));
    CHECK(memcmp(y, y2, (size_t)n * 4) == 0, "fast path not deterministic (L=%d k=%d axis=%d M=%lld)", L, k, axis, (long long)M);
    note_err(f, e);
    fast_stats *st = cpu_blocks ? &fst : &fst8;
    st->worst_rel = fmax(st->worst_rel, e);
    st->worst_exact = fmax(st->worst_exact, we);
    st->worst_cpu = fmax(st->worst_cpu, wc);
    st->same += same;
    st->total += n;
    st->n++;
    tcq_cuda_free(dwb);
    tcq_cuda_free(dx);
    tcq_cuda_free(dy);
    free(W);
    free(x);
    free(y);
    free(yc);
    free(y2);
    free(ref);
    free(be);
    free(bc);
    free_w(&h);
}

/* y [M, out] = the GPU's fast path on h's weights and x [M, in], y's device buffer poisoned
 * with NaN first (one call on fresh device buffers). */
static void gpu_fast(const host_w *h, const float *x, int64_t M, int64_t in, int64_t out, float *y)
{
    family_of(&h->t, M, TCQ_PATH_FAST);
    const size_t wb = tcq_cuda_trellis_bytes(&h->t);
    void *dwb = dev_alloc(wb);
    float *dx = dev_alloc((size_t)(M * in) * 4), *dy = dev_alloc((size_t)(M * out) * 4);
    tcq_trellis dw;
    CHECK_OK(tcq_cuda_trellis_upload(ctx, &h->t, dwb, wb, &dw));
    CHECK_OK(tcq_cuda_copy_to_device(ctx, dx, x, (size_t)(M * in) * 4));
    CHECK_OK(tcq_cuda_memset(ctx, dy, 0xff, (size_t)(M * out) * 4));
    CHECK_OK(tcq_cuda_linear(ctx, &dw, dx, dy, M, TCQ_PATH_FAST));
    CHECK_OK(tcq_cuda_copy_to_host(ctx, y, dy, (size_t)(M * out) * 4));
    tcq_cuda_free(dwb);
    tcq_cuda_free(dx);
    tcq_cuda_free(dy);
}

/* A NaN or Inf in an activation block poisons the outputs of that activation row (d = NaN), on
 * the GPU as on the CPU; the other rows stay finite. */
static void check_fast_nonfinite(int axis)
{
    const int64_t out = axis ? 40 : 256, in = axis ? 256 : 100, M = 3;
    host_w h;
    make_w(&h, 12, 2, 256, axis, 0, out, in);
    float *x = malloc((size_t)(M * in) * 4), *y = malloc((size_t)(M * out) * 4);
    for (int64_t i = 0; i < M * in; i++) x[i] = (float)test_gauss(&rng);
    x[1 * in + 70] = INFINITY;
    gpu_fast(&h, x, M, in, out, y);
    int64_t fin[3] = {0, 0, 0};
    for (int64_t m = 0; m < M; m++)
        for (int64_t o = 0; o < out; o++) fin[m] += isfinite(y[m * out + o]) != 0;
    CHECK(fin[0] == out && fin[1] == 0 && fin[2] == out, "fast axis=%d with an Inf in row 1: finite outputs %lld %lld %lld of %lld",
          axis, (long long)fin[0], (long long)fin[1], (long long)fin[2], (long long)out);
    free(x);
    free(y);
    free_w(&h);
}

/* Activations so small that 127 / amax overflows (|x| < ~3.7e-37, subnormal or nearly): the
 * CPU's fast path quantizes such a block to q = 0, d = 0 (kq_step), so its outputs are 0; the
 * GPU's must be the same exact zeros (before, v * inf saturated every q, zeros to -127, or went
 * out of int range on the int8 kernels).  Row 1 is ordinary: finite, not all zero. */
static void check_fast_tiny(int axis, int64_t M)
{
    const int64_t out = axis ? 40 : 256, in = axis ? 512 : 300;
    host_w h;
    make_w(&h, 12, 2, 256, axis, 0, out, in);
    float *x = malloc((size_t)(M * in) * 4), *y = malloc((size_t)(M * out) * 4), *yc = malloc((size_t)(M * out) * 4);
    for (int64_t m = 0; m < M; m++)
        for (int64_t i = 0; i < in; i++)
            x[m * in + i] = m == 1 ? (float)test_gauss(&rng) : i % 3 ? (float)test_gauss(&rng) * 1e-38f : 0.0f;
    tcq_kctx *kc = cpu_fast_ctx();
    const tcq_weight wt = {.fmt = TCQ_WF_TRELLIS, .out = out, .in = in, .tr = h.t};
    CHECK_OK(tcq_linear(&wt, x, yc, M, kc));
    tcq_kctx_free(kc);
    gpu_fast(&h, x, M, in, out, y);
    const char *kern = tcq_cuda_linear_kernel(ctx, &h.t, M, TCQ_PATH_FAST);
    int64_t nonzero = 0, cpu_nonzero = 0, row1_ok = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t o = 0; o < out; o++) {
            const float v = y[m * out + o];
            if (m == 1) row1_ok += isfinite(v) && v != 0.0f;
            else nonzero += v != 0.0f, cpu_nonzero += yc[m * out + o] != 0.0f;
        }
    CHECK(nonzero == 0 && cpu_nonzero == 0 && (M < 2 || row1_ok > 0),
          "fast (%s) axis=%d M=%lld, activations ~1e-38: %lld outputs not 0 (CPU: %lld); ordinary row: %lld finite non-zero of %lld",
          kern ? kern : "?", axis, (long long)M, (long long)nonzero, (long long)cpu_nonzero, (long long)row1_ok, (long long)out);
    free(x);
    free(y);
    free(yc);
    free_w(&h);
}

/* Fused gate/up on the fast path against the CPU's fused fast path: g and u each within their
 * CPU bound, propagated through silu(g) u (|silu'| <= 1.1), plus 1e-6 relative for expf. */
static void check_swiglu_fast(int L, int k, int T, int64_t out, int64_t in, int64_t M)
{
    host_w g, u;
    make_w(&g, L, k, T, 1, 0, out, in);
    make_w(&u, L, k, T, 1, 0, out, in);
    const int64_t n = M * out;
    float *Wg = malloc((size_t)(out * in) * 4), *Wu = malloc((size_t)(out * in) * 4), *x = malloc((size_t)(M * in) * 4);
    float *y = malloc((size_t)n * 4), *yc = malloc((size_t)n * 4), *gc = malloc((size_t)n * 4), *uc = malloc((size_t)n * 4);
    double *be = malloc((size_t)n * 8), *bg = malloc((size_t)n * 8), *bu = malloc((size_t)n * 8);
    CHECK_OK(tcq_trellis_decode(&g.t, Wg));
    CHECK_OK(tcq_trellis_decode(&u.t, Wu));
    for (int64_t i = 0; i < M * in; i++) x[i] = (float)test_gauss(&rng);
    /* "int8" (its own activation blocks): against float64 gate and up, each within its float64
     * bound; "fast": against the CPU's, within the CPU bound */
    const tcq_cuda_family *f = family_of(&g.t, M, TCQ_PATH_FAST);
    const int64_t qb = tcq_cuda_fast_block(ctx, &g.t, M);
    const int cpu_blocks = qb == TCQ_FAST_QB;
    CHECK(qb > 0 && f && f->ref == TCQ_CREF_FAST, "fast swiglu M=%lld: no fast kernel", (long long)M);
    fast_bounds(&g, Wg, x, M, qb > 0 ? qb : TCQ_FAST_QB, cpu_blocks ? be : bg, cpu_blocks ? bg : be);
    fast_bounds(&u, Wu, x, M, qb > 0 ? qb : TCQ_FAST_QB, cpu_blocks ? be : bu, cpu_blocks ? bu : be);
    tcq_kctx *kc = cpu_fast_ctx();
    const tcq_weight wg = {.fmt = TCQ_WF_TRELLIS, .out = out, .in = in, .tr = g.t};
    const tcq_weight wu = {.fmt = TCQ_WF_TRELLIS, .out = out, .in = in, .tr = u.t};
    CHECK_OK(tcq_linear_swiglu(&wg, &wu, x, yc, M, kc));
    CHECK_OK(tcq_linear(&wg, x, gc, M, kc));
    CHECK_OK(tcq_linear(&wu, x, uc, M, kc));
    tcq_kctx_free(kc);
    if (!cpu_blocks) {
        double *r = malloc((size_t)n * 8);
        ref_linear(Wg, x, r, M, out, in, REF_EXACT, NULL);
        for (int64_t j = 0; j < n; j++) gc[j] = (float)r[j];
        ref_linear(Wu, x, r, M, out, in, REF_EXACT, NULL);
        for (int64_t j = 0; j < n; j++) {
            uc[j] = (float)r[j];
            const double gv = gc[j];
            yc[j] = (float)(gv / (1 + exp(-gv)) * r[j]);
        }
        free(r);
    }
    const size_t wb = tcq_cuda_trellis_bytes(&g.t);
    void *dgb = dev_alloc(wb), *dub = dev_alloc(wb);
    float *dx = dev_alloc((size_t)(M * in) * 4), *dy = dev_alloc((size_t)n * 4);
    tcq_trellis dg, du;
    CHECK_OK(tcq_cuda_trellis_upload(ctx, &g.t, dgb, wb, &dg));
    CHECK_OK(tcq_cuda_trellis_upload(ctx, &u.t, dub, wb, &du));
    CHECK_OK(tcq_cuda_copy_to_device(ctx, dx, x, (size_t)(M * in) * 4));
    CHECK_OK(tcq_cuda_memset(ctx, dy, 0xff, (size_t)n * 4));
    CHECK_OK(tcq_cuda_linear_swiglu(ctx, &dg, &du, dx, dy, M, TCQ_PATH_FAST));
    CHECK_OK(tcq_cuda_copy_to_host(ctx, y, dy, (size_t)n * 4));
    int64_t bad = 0;
    double worst = 0;
    for (int64_t j = 0; j < n; j++) {
        const double gv = gc[j], sg = gv / (1 + exp(-gv));
        const double tol = 1.1 * bg[j] * (fabs((double)uc[j]) + bu[j]) + fabs(sg) * bu[j] + 1e-6 * fabs((double)yc[j]) + 1e-30;
        const double r = fabs((double)y[j] - (double)yc[j]) / tol;
        bad += !(r <= 1.0);
        worst = fmax(worst, r);
    }
    CHECK(bad == 0, "fast swiglu (%s) k=%d out=%lld in=%lld M=%lld: %lld outputs outside the bound (worst %.3g of it)",
          cpu_blocks ? "fast" : "int8", k, (long long)out, (long long)in, (long long)M, (long long)bad, worst);
    tcq_cuda_free(dgb);
    tcq_cuda_free(dub);
    tcq_cuda_free(dx);
    tcq_cuda_free(dy);
    free(Wg);
    free(Wu);
    free(x);
    free(y);
    free(yc);
    free(gc);
    free(uc);
    free(be);
    free(bg);
    free(bu);
    free_w(&g);
    free_w(&u);
}

static void fast_print(const char *what, const fast_stats *st)
{
    if (!st->n) return;
    if (st == &fst8) {   /* its own activation blocks: nothing to compare with the CPU's */
        fprintf(stderr, "%s: %d cases, worst relative error vs float64 %.3g; worst |gpu - f64| %.3g of the tcq_kernels.h bound\n",
                what, st->n, st->worst_rel, st->worst_exact);
        return;
    }
    fprintf(stderr,
            "%s: %d cases, worst relative error vs float64 %.3g; worst |gpu - f64| %.3g of the tcq_kernels.h bound, "
            "|gpu - cpu fast| %.3g of its bound; %.1f%% of outputs bit-identical to the CPU\n",
            what, st->n, st->worst_rel, st->worst_exact, st->worst_cpu, 100.0 * (double)st->same / (double)(st->total ? st->total : 1));
}


#endif
