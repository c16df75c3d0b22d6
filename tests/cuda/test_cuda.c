/* CUDA backend against the CPU: every kernel vs a float64 reference computed from the decoded
 * weights (tcq_trellis_decode), remainder shapes, poisoned outputs, determinism, and the GPU
 * encoder bit for bit against tcq_encode_rows.  The fast path against float64 within tcq.h's
 * bound over the blocks its kernel uses (tcq_cuda_fast_block), and where those are the CPU's (the
 * dp4a kernels) also against the CPU's fast path (the scalar reference kernels).  Needs a GPU (exit 77
 * = skipped without one).  TCQ_CUDA_TEST_BIG=0 skips the full Qwen3-14B MLP shapes. */
#include "test.h"

#include "kernels/kernels.h"   /* tcq_kq_prepare: the CPU's activation blocks, for the bounds */

#include <stdint.h>

static uint64_t rng;
static tcq_cuda_ctx *ctx;

typedef struct host_w {
    tcq_trellis t;         /* host view */
    uint32_t *codes;
    uint16_t *scales;
} host_w;

/* Random codes are valid codes: every bit pattern of a block is a tail-biting state sequence. */
static void make_w(host_w *h, int L, int k, int T, int axis, int interleaved, int64_t out, int64_t in)
{
    memset(h, 0, sizeof *h);
    h->t.p = (tcq_block_params){L, k, T};
    h->t.axis = axis;
    h->t.interleaved = interleaved;
    h->t.rows = axis ? out : in;
    h->t.cols = axis ? in : out;
    const int64_t nw = h->t.rows * h->t.cols * k / 32;
    h->codes = malloc((size_t)nw * 4);
    h->scales = malloc((size_t)h->t.rows * 2);
    for (int64_t i = 0; i < nw; i++) h->codes[i] = (uint32_t)test_rand(&rng);
    for (int64_t r = 0; r < h->t.rows; r++) h->scales[r] = tcq_f32_to_f16((float)(0.01 + test_uniform(&rng)));
    if (interleaved) {
        uint32_t *il = malloc((size_t)nw * 4);
        CHECK_OK(tcq_interleave(h->t.rows, h->t.cols, h->codes, il));
        free(h->codes);
        h->codes = il;
    }
    h->t.codes = h->codes;
    h->t.scales = h->scales;
}

static void free_w(host_w *h)
{
    free(h->codes);
    free(h->scales);
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    CHECK_OK(tcq_cuda_malloc(&p, bytes));
    return p;
}

/* What a kernel's contract rounds before the f32/f64 products: nothing (REF_EXACT), W and x to
 * bf16 (REF_BF16: decode + cuBLAS), x to f16 after a power-of-two scale per activation row with
 * its largest |x| in [2^14, 2^15) (REF_F16X: the wgmma kernels), the same for x times the
 * per-input scale in f32 (REF_F16XS: wgmma-ss on axis 0; ref_linear then takes the unscaled
 * values as W and the scales as ks). */
enum { REF_EXACT, REF_BF16, REF_F16X, REF_F16XS };

static int ref_mode(const char *kern, int axis)
{
    if (!kern) return REF_EXACT;
    if (!strcmp(kern, "bf16-gemm")) return REF_BF16;
    if (!strcmp(kern, "wgmma")) return REF_F16X;
    if (!strcmp(kern, "wgmma-ss")) return axis ? REF_F16X : REF_F16XS;
    return REF_EXACT;
}

/* W [out, in] of h without its scales (each f16 1): the values a REF_F16XS reference takes */
static float *decode_unscaled(const host_w *h)
{
    const int64_t n = h->t.rows * h->t.cols;
    uint16_t *ones = malloc((size_t)h->t.rows * 2);
    for (int64_t r = 0; r < h->t.rows; r++) ones[r] = 0x3c00;
    tcq_trellis t = h->t;
    t.scales = ones;
    float *W = malloc((size_t)n * 4);
    CHECK_OK(tcq_trellis_decode(&t, W));
    free(ones);
    return W;
}

/* y_ref [M, out] in double from W [out, in] and x [M, in], rounded as `mode` says (ks: REF_F16XS's
 * per-input scales, else NULL). */
static void ref_linear(const float *W, const float *x, double *y, int64_t M, int64_t out, int64_t in, int mode,
                       const uint16_t *ks)
{
    double *xr = malloc((size_t)in * sizeof(double));
    float *xs = malloc((size_t)in * sizeof(float));
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * in;
        if (mode == REF_F16XS) {
            for (int64_t i = 0; i < in; i++) xs[i] = xm[i] * tcq_f16_to_f32(ks[i]);
            xm = xs;
        }
        int e = 0;
        if (mode == REF_F16X || mode == REF_F16XS) {
            float mx = 0;
            for (int64_t i = 0; i < in; i++) mx = fmaxf(mx, fabsf(xm[i]));
            if (mx > 0) {
                int ex;
                frexpf(mx, &ex);
                e = 15 - ex < -125 ? -125 : 15 - ex > 125 ? 125 : 15 - ex;
            }
        }
        for (int64_t i = 0; i < in; i++)
            xr[i] = mode == REF_BF16 ? tcq_bf16_to_f32(tcq_f32_to_bf16(xm[i]))
                  : mode >= REF_F16X ? ldexp(tcq_f16_to_f32(tcq_f32_to_f16(ldexpf(xm[i], e))), -e)
                                     : xm[i];
        for (int64_t o = 0; o < out; o++) {
            double s = 0;
            const float *wr = W + o * in;
            for (int64_t i = 0; i < in; i++) s += (mode == REF_BF16 ? tcq_bf16_to_f32(tcq_f32_to_bf16(wr[i])) : wr[i]) * xr[i];
            y[m * out + o] = s;
        }
    }
    free(xr);
    free(xs);
}

/* A context with the kernel choices opts.  NULL (and a failed check) if it fails. */
static tcq_cuda_ctx *ctx_with(const tcq_cuda_opts *opts)
{
    tcq_cuda_ctx *c = NULL;
    CHECK_OK(tcq_cuda_ctx_create(0, &c));
    if (c && tcq_cuda_ctx_set_opts(c, opts) != TCQ_OK) {
        CHECK(0, "tcq_cuda_ctx_set_opts: %s", tcq_last_error());
        tcq_cuda_ctx_free(c);
        return NULL;
    }
    return c;
}

/* The cases between ctx_push(opts) (1 if that context was made) and ctx_pop() run on a context
 * made with the kernel choices opts (ctx_with); ctx_pop() frees it and returns to the main one. */
static tcq_cuda_ctx *ctx_main;
static int ctx_push(tcq_cuda_opts opts)
{
    tcq_cuda_ctx *c = ctx_with(&opts);
    if (!c) return 0;
    ctx_main = ctx;
    ctx = c;
    return 1;
}

static void ctx_pop(void)
{
    tcq_cuda_ctx_free(ctx);
    ctx = ctx_main;
}

static double rel_err(const float *y, const double *ref, int64_t n, int *nonfinite)
{
    double num = 0, den = 0;
    *nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(y[i])) (*nonfinite)++;
        const double d = (double)y[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* x starts this many floats into its device buffer (1: not 16-byte aligned) */
static int x_offset = 0;

/* One linear case: returns the relative error (and checks it). */
static double check_linear_path(int L, int k, int T, int axis, int il, int64_t out, int64_t in, int64_t M, tcq_kpath path)
{
    host_w h;
    make_w(&h, L, k, T, axis, il, out, in);
    float *W = malloc((size_t)(out * in) * 4), *x = malloc((size_t)(M * in) * 4), *y = malloc((size_t)(M * out) * 4);
    double *ref = malloc((size_t)(M * out) * 8);
    CHECK_OK(tcq_trellis_decode(&h.t, W));
    for (int64_t i = 0; i < M * in; i++) x[i] = (float)test_gauss(&rng);
    const char *kern = tcq_cuda_linear_kernel(ctx, &h.t, M, path);
    CHECK(kern != NULL, "tcq_cuda_linear_kernel: NULL");
    const int mode = ref_mode(kern, axis), big = mode == REF_BF16;
    if (mode == REF_F16XS) {
        float *W1 = decode_unscaled(&h);
        ref_linear(W1, x, ref, M, out, in, mode, h.t.scales);
        free(W1);
    } else {
        ref_linear(W, x, ref, M, out, in, mode, NULL);
    }
    const size_t wb = tcq_cuda_trellis_bytes(&h.t);
    void *dwb = dev_alloc(wb);
    float *dx0 = dev_alloc((size_t)(M * in + x_offset) * 4), *dy = dev_alloc((size_t)(M * out) * 4);
    float *dx = dx0 + x_offset;
    tcq_trellis dw;
    CHECK_OK(tcq_cuda_trellis_upload(ctx, &h.t, dwb, wb, &dw));
    CHECK_OK(tcq_cuda_copy_to_device(ctx, dx, x, (size_t)(M * in) * 4));
    CHECK_OK(tcq_cuda_memset(ctx, dy, 0xff, (size_t)(M * out) * 4));   /* NaN poison */
    CHECK_OK(tcq_cuda_linear(ctx, &dw, dx, dy, M, path));
    CHECK_OK(tcq_cuda_sync(ctx));
    CHECK_OK(tcq_cuda_copy_to_host(ctx, y, dy, (size_t)(M * out) * 4));
    int nf;
    const double e = rel_err(y, ref, M * out, &nf);
    /* "int16" (the exact path at M = 6..8): x' = rint(x 2^e) < 2^14 per chunk, so |x' 2^-e -
     * x| <= 2^-(e+1) <= chunk max 2^-14 and the relative RMS error is at most 2^-13 / sqrt(12) x
     * (chunk max / RMS of x), ~1.6e-4 for Gaussian chunks of <= 1024 (max / RMS <= 4.5) */
    const double tol = big ? 2e-5 : kern && !strcmp(kern, "int16") ? 3e-4 : 1e-5;
    CHECK(nf == 0 && e <= tol, "linear L=%d k=%d T=%d axis=%d il=%d out=%lld in=%lld M=%lld (%s): rel err %.3g (tol %g), %d unwritten/non-finite",
          L, k, T, axis, il, (long long)out, (long long)in, (long long)M, kern ? kern : "?", e, tol, nf);
    /* determinism: a second call gives the same bits */
    float *y2 = malloc((size_t)(M * out) * 4);
    CHECK_OK(tcq_cuda_memset(ctx, dy, 0xff, (size_t)(M * out) * 4));
    CHECK_OK(tcq_cuda_linear(ctx, &dw, dx, dy, M, TCQ_PATH_AUTO));
    CHECK_OK(tcq_cuda_copy_to_host(ctx, y2, dy, (size_t)(M * out) * 4));
    CHECK(memcmp(y, y2, (size_t)(M * out) * 4) == 0, "linear not deterministic (L=%d k=%d axis=%d M=%lld)", L, k, axis, (long long)M);
    free(y2);
    tcq_cuda_free(dwb);
    tcq_cuda_free(dx0);
    tcq_cuda_free(dy);
    free(W);
    free(x);
    free(y);
    free(ref);
    free_w(&h);
    return e;
}

static double check_linear(int L, int k, int T, int axis, int il, int64_t out, int64_t in, int64_t M)
{
    return check_linear_path(L, k, T, axis, il, out, in, M, TCQ_PATH_EXACT);
}

static void check_decode_bf16(int L, int k, int T, int axis, int il, int64_t out, int64_t in)
{
    host_w h;
    make_w(&h, L, k, T, axis, il, out, in);
    uint16_t *Wc = malloc((size_t)(out * in) * 2), *Wg = malloc((size_t)(out * in) * 2);
    CHECK_OK(tcq_trellis_decode_bf16(&h.t, Wc));
    const size_t wb = tcq_cuda_trellis_bytes(&h.t);
    void *dwb = dev_alloc(wb);
    uint16_t *dW = dev_alloc((size_t)(out * in) * 2);
    tcq_trellis dw;
    CHECK_OK(tcq_cuda_trellis_upload(ctx, &h.t, dwb, wb, &dw));
    CHECK_OK(tcq_cuda_memset(ctx, dW, 0xff, (size_t)(out * in) * 2));
    CHECK_OK(tcq_cuda_trellis_decode_bf16(ctx, &dw, dW));
    CHECK_OK(tcq_cuda_copy_to_host(ctx, Wg, dW, (size_t)(out * in) * 2));
    CHECK(memcmp(Wc, Wg, (size_t)(out * in) * 2) == 0, "decode bf16 differs from the CPU (L=%d k=%d T=%d axis=%d il=%d)", L, k, T, axis, il);
    tcq_cuda_free(dwb);
    tcq_cuda_free(dW);
    free(Wc);
    free(Wg);
    free_w(&h);
}

static void check_swiglu(int L, int k, int T, int64_t out, int64_t in, int64_t M)
{
    host_w g, u;
    make_w(&g, L, k, T, 1, 0, out, in);
    make_w(&u, L, k, T, 1, 0, out, in);
    float *Wg = malloc((size_t)(out * in) * 4), *Wu = malloc((size_t)(out * in) * 4), *x = malloc((size_t)(M * in) * 4);
    float *y = malloc((size_t)(M * out) * 4);
    double *rg = malloc((size_t)(M * out) * 8), *ru = malloc((size_t)(M * out) * 8);
    CHECK_OK(tcq_trellis_decode(&g.t, Wg));
    CHECK_OK(tcq_trellis_decode(&u.t, Wu));
    for (int64_t i = 0; i < M * in; i++) x[i] = (float)test_gauss(&rng);
    const char *kern = tcq_cuda_linear_kernel(ctx, &g.t, M, TCQ_PATH_AUTO);
    const int mode = ref_mode(kern, 1);
    ref_linear(Wg, x, rg, M, out, in, mode, NULL);
    ref_linear(Wu, x, ru, M, out, in, mode, NULL);
    for (int64_t i = 0; i < M * out; i++) rg[i] = rg[i] / (1.0 + exp(-rg[i])) * ru[i];
    const size_t wb = tcq_cuda_trellis_bytes(&g.t);
    void *dgb = dev_alloc(wb), *dub = dev_alloc(wb);
    float *dx = dev_alloc((size_t)(M * in) * 4), *dy = dev_alloc((size_t)(M * out) * 4);
    tcq_trellis dg, du;
    CHECK_OK(tcq_cuda_trellis_upload(ctx, &g.t, dgb, wb, &dg));
    CHECK_OK(tcq_cuda_trellis_upload(ctx, &u.t, dub, wb, &du));
    CHECK_OK(tcq_cuda_copy_to_device(ctx, dx, x, (size_t)(M * in) * 4));
    CHECK_OK(tcq_cuda_memset(ctx, dy, 0xff, (size_t)(M * out) * 4));
    CHECK_OK(tcq_cuda_linear_swiglu(ctx, &dg, &du, dx, dy, M, TCQ_PATH_AUTO));
    CHECK_OK(tcq_cuda_copy_to_host(ctx, y, dy, (size_t)(M * out) * 4));
    int nf;
    const double e = rel_err(y, rg, M * out, &nf);
    /* "int16": gate's and up's x errors (check_linear_path) both reach silu(g) u, scaled by at most
     * 1 + |g silu'(g) / silu(g)| < 2.3: 2.3 x 1.6e-4 */
    const double tol = kern && !strcmp(kern, "int16") ? 6e-4 : 3e-5;
    CHECK(nf == 0 && e <= tol, "swiglu k=%d out=%lld in=%lld M=%lld (%s): rel err %.3g (tol %g), %d non-finite", k,
          (long long)out, (long long)in, (long long)M, kern ? kern : "?", e, tol, nf);
    tcq_cuda_free(dgb);
    tcq_cuda_free(dub);
    tcq_cuda_free(dx);
    tcq_cuda_free(dy);
    free(Wg);
    free(Wu);
    free(x);
    free(y);
    free(rg);
    free(ru);
    free_w(&g);
    free_w(&u);
}

/* ---- fast path ---------------------------------------------------------------------------
 * Bounds, per output (m, o), with v_i the weight without the activation-side factor (axis 1:
 * W[o, i]; axis 0: W[o, i] / scale_i = value), a_i the activation (axis 1: x; axis 0: x * scale)
 * and d_i the step of i's activation block (tcq_kq_prepare, the CPU's quantization; on the int8
 * kernels the same arithmetic over their own, longer blocks):
 *   vs float64 (tcq.h):  sum |v_i| d_i / 2 (1 + 1e-4) + (nblk + 4) 2^-24 sum |v_i| (|a_i| + d_i)
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
    const char *kern = tcq_cuda_linear_kernel(ctx, &h.t, M, TCQ_PATH_FAST);
    const int64_t qb = tcq_cuda_fast_block(ctx, &h.t, M);
    const int cpu_blocks = qb == TCQ_FAST_QB;
    CHECK(kern && (!strcmp(kern, "fast") || !strcmp(kern, "int8")) && qb > 0, "fast M=%lld runs %s, block %lld",
          (long long)M, kern ? kern : "(null)", (long long)qb);
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
    const int64_t qb = tcq_cuda_fast_block(ctx, &g.t, M);
    const int cpu_blocks = qb == TCQ_FAST_QB;
    CHECK(qb > 0, "fast swiglu M=%lld: no fast kernel", (long long)M);
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
        fprintf(stderr, "%s: %d cases, worst relative error vs float64 %.3g; worst |gpu - f64| %.3g of the tcq.h bound\n",
                what, st->n, st->worst_rel, st->worst_exact);
        return;
    }
    fprintf(stderr,
            "%s: %d cases, worst relative error vs float64 %.3g; worst |gpu - f64| %.3g of the tcq.h bound, "
            "|gpu - cpu fast| %.3g of its bound; %.1f%% of outputs bit-identical to the CPU\n",
            what, st->n, st->worst_rel, st->worst_exact, st->worst_cpu, 100.0 * (double)st->same / (double)(st->total ? st->total : 1));
}

/* int8: the context runs the int8 kernels (not tcq_cuda_opts.fast_dp4a), which take M <= 16 on axis 1 */
static void fast_suite(int big, int int8)
{
    /* every k, L in {8, 12, 16}, T, axis, M = 1..8; remainder shapes (axis 1: odd row counts;
     * axis 0: input rows not a multiple of 64, fewer output columns than a 128-column item) */
    static const int Ls[] = {8, 12, 16}, Ts[] = {64, 128, 256};
    for (int k = 1; k <= 4; k++)
        for (int li = 0; li < 3; li++)
            for (int ti = 0; ti < 3; ti++)
                for (int axis = 0; axis <= 1; axis++) {
                    const int L = Ls[li], T = Ts[ti];
                    if (k >= L || (T * k) % 32) continue;
                    const int64_t out = axis ? 37 + 16 * (int64_t)(test_rand(&rng) % 8) : T * (1 + (int64_t)(test_rand(&rng) % 3));
                    const int64_t in = axis ? T * (1 + (int64_t)(test_rand(&rng) % 5)) : 45 + (int64_t)(test_rand(&rng) % 300);
                    check_fast(L, k, T, axis, 0, out, in, 1 + (k + 3 * li + ti + axis) % 8);
                }
    for (int M = 9; M <= 16 && int8; M += 7) {   /* int8 on axis 1 to M = 16: two n-tiles, two x prep block rows */
        check_fast(12, 2 + M % 3, 256, 1, 0, 300, 1024 + 512 * (M & 1), M);
        check_swiglu_fast(12, 2 + M % 3, 256, 100, 512, M);
    }
    for (int M = 1; M <= 8; M++) {   /* every M on both axes at the artifact geometry */
        const int k = 1 + M % 4;
        check_fast(12, k, 256, 1, 0, 300, 2048 + 256 * (M & 1), M);   /* > 32 blocks a row: lanes loop */
        check_fast(12, k, 256, 0, 0, 512 + 256 * (M & 1), 333 + 64 * M, M);
        check_fast(12, 3, 256, 0, 1, 1024, 77 + 50 * M, M);           /* two-block interleave */
    }
    check_fast(12, 2, 256, 0, 0, 256, 64 * 300 + 5, 2);   /* many activation blocks: S > 1 partials */
    check_fast(12, 4, 256, 1, 0, 50, 9216, 5);            /* axis 1, 18 chunk sums */
    check_fast(12, 2, 64, 0, 0, 64, 1000, 8);             /* one column block, half an item */
    check_fast_nonfinite(0);
    check_fast_nonfinite(1);
    for (int axis = 0; axis <= 1; axis++) check_fast_tiny(axis, 1), check_fast_tiny(axis, 3);
    check_swiglu_fast(12, 2, 256, 300, 512, 1);
    check_swiglu_fast(12, 3, 256, 200, 768, 5);
    check_swiglu_fast(12, 4, 256, 64, 256, 8);
    if (big) {
        check_fast(12, 2, 256, 1, 0, 17408, 5120, 1);
        check_fast(12, 3, 256, 0, 1, 5120, 17408, 2);
        check_fast(12, 4, 256, 0, 0, 5120, 17408, 8);   /* the scatter's chunk by the SM count */
        check_fast(12, 3, 256, 1, 0, 17408, 5120, 4);   /* axis 1 on 768-position chunks */
    }
    fast_print("fast", &fst);
    fast_print("fast int8", &fst8);
    memset(&fst, 0, sizeof fst);
    memset(&fst8, 0, sizeof fst8);
}

static tcq_pool *pool;   /* the CPU reference encoder's threads (the codes do not depend on them) */

/* Row kinds beyond N(0, 0.02^2) for the GPU's row scales: special != 0 makes row r % 7 ==
 * 0: all zero (scale 1), 1: RMS far below the smallest fp16 (scale clamps to 1 = 2^-24),
 * 2: large (|x| ~ 1e3), 3: one nonzero entry, 4: N(0,1) with a row-dependent gain (scales that
 * land on many fp16 roundings), others: the default. */
static void fill_rows(float *src, int64_t R, int64_t C, int special)
{
    for (int64_t r = 0; r < R; r++) {
        float *row = src + r * C;
        const int kind = special ? (int)(r % 7) : 6;
        const double gain = kind == 2 ? 1e3 : kind == 4 ? 0.001 * (double)(1 + r) : 0.02;
        for (int64_t c = 0; c < C; c++) {
            double v = test_gauss(&rng) * gain;
            if (kind == 0) v = 0;
            if (kind == 1) v = test_gauss(&rng) * 1e-13;
            if (kind == 3) v = c == C / 3 ? 0.5 : 0;
            row[c] = (float)v;
        }
    }
}

static void check_encoder_ex(int L, int k, int T, int64_t R, int64_t C, int weighted, int special)
{
    const tcq_block_params p = {L, k, T};
    float *src = malloc((size_t)(R * C) * 4), *w = weighted ? malloc((size_t)(R * C) * 4) : NULL;
    fill_rows(src, R, C, special);
    if (w)
        for (int64_t i = 0; i < R * C; i++) w[i] = (float)(0.1 + test_uniform(&rng));
    const int64_t nw = R * C * k / 32;
    uint32_t *cc = malloc((size_t)nw * 4), *gc = malloc((size_t)nw * 4);
    uint16_t *cs = malloc((size_t)R * 2), *gs = malloc((size_t)R * 2);
    double ce = 0, ge = 0;
    CHECK_OK(tcq_encode_rows(p, NULL, src, w, R, C, cc, cs, pool, &ce));
    memset(gc, 0xab, (size_t)nw * 4);
    memset(gs, 0xcd, (size_t)R * 2);
    CHECK_OK(tcq_cuda_encode_rows(ctx, p, NULL, src, w, R, C, gc, gs, &ge));
    int64_t bad = 0, bad_s = 0;
    for (int64_t i = 0; i < nw; i++) bad += cc[i] != gc[i];
    for (int64_t r = 0; r < R; r++) bad_s += cs[r] != gs[r];
    CHECK(bad == 0 && bad_s == 0 && ce == ge,
          "GPU encoder L=%d k=%d T=%d [%lld, %lld] w=%d special=%d: %lld of %lld words, %lld of %lld scales differ, "
          "err cpu %.17g gpu %.17g", L, k, T, (long long)R, (long long)C, weighted, special, (long long)bad, (long long)nw,
          (long long)bad_s, (long long)R, ce, ge);
    /* sq_err NULL takes the path without the block errors: the same codes */
    memset(gc, 0xab, (size_t)nw * 4);
    CHECK_OK(tcq_cuda_encode_rows(ctx, p, NULL, src, w, R, C, gc, gs, NULL));
    CHECK(memcmp(cc, gc, (size_t)nw * 4) == 0 && memcmp(cs, gs, (size_t)R * 2) == 0,
          "GPU encoder L=%d k=%d [%lld, %lld]: codes differ without sq_err", L, k, (long long)R, (long long)C);
    free(src);
    free(w);
    free(cc);
    free(gc);
    free(cs);
    free(gs);
}

static void check_encoder(int L, int k, int T, int64_t R, int64_t C, int weighted)
{
    check_encoder_ex(L, k, T, R, C, weighted, 0);
}

/* Bad inputs: the CPU and the GPU encoder both refuse them (TCQ_ERR_INVALID_ARG, a message),
 * wherever they sit in the matrix (first chunk, a later one). */
static void check_encoder_bad_inputs(void)
{
    const tcq_block_params p = {12, 2, 256};
    const int64_t R = 1100, C = 4096;   /* 3 chunks of the GPU pipeline */
    float *src = malloc((size_t)(R * C) * 4), *w = malloc((size_t)(R * C) * 4);
    uint32_t *codes = malloc((size_t)(R * C * p.k / 32) * 4);
    uint16_t *sc = malloc((size_t)R * 2);
    fill_rows(src, R, C, 0);
    for (int64_t i = 0; i < R * C; i++) w[i] = 1.0f;
    static const int64_t at[] = {5, 1050 * 4096 + 17};
    for (int i = 0; i < 2; i++) {
        const float keep = src[at[i]];
        src[at[i]] = i ? INFINITY : NAN;
        CHECK(tcq_encode_rows(p, NULL, src, NULL, R, C, codes, sc, pool, NULL) == TCQ_ERR_INVALID_ARG, "CPU: non-finite x");
        const tcq_status s = tcq_cuda_encode_rows(ctx, p, NULL, src, NULL, R, C, codes, sc, NULL);
        CHECK(s == TCQ_ERR_INVALID_ARG && *tcq_last_error() != 0, "GPU encoder: non-finite x at %lld -> %s",
              (long long)at[i], tcq_status_str(s));
        src[at[i]] = keep;
        w[at[i]] = -1.0f;
        CHECK(tcq_cuda_encode_rows(ctx, p, NULL, src, w, R, C, codes, sc, NULL) == TCQ_ERR_INVALID_ARG,
              "GPU encoder: negative weight at %lld accepted", (long long)at[i]);
        w[at[i]] = 1.0f;
    }
    CHECK_OK(tcq_cuda_encode_rows(ctx, p, NULL, src, w, R, C, codes, sc, NULL));   /* the context still works */
    tcq_encode_opts seams = {TCQ_SEARCH_SEAMS, 4};
    CHECK(tcq_cuda_encode_rows(ctx, p, &seams, src, NULL, 2, C, codes, sc, NULL) == TCQ_ERR_UNSUPPORTED,
          "GPU encoder claimed the seams search");
    free(src);
    free(w);
    free(codes);
    free(sc);
}

static void check_encode_blocks(int L, int k, int T, int64_t n, int weighted)
{
    const tcq_block_params p = {L, k, T};
    float *x = malloc((size_t)(n * T) * 4), *w = weighted ? malloc((size_t)(n * T) * 4) : NULL;
    for (int64_t i = 0; i < n * T; i++) x[i] = (float)test_gauss(&rng);
    if (w)
        for (int64_t i = 0; i < n * T; i++) w[i] = (float)(0.1 + test_uniform(&rng));
    const int64_t nw = n * T * k / 32;
    uint32_t *cc = malloc((size_t)nw * 4), *gc = malloc((size_t)nw * 4);
    double ce = 0, ge = 0;
    CHECK_OK(tcq_encode_blocks(p, NULL, x, w, n, cc, NULL, &ce));
    memset(gc, 0x5a, (size_t)nw * 4);
    CHECK_OK(tcq_cuda_encode_blocks(ctx, p, NULL, x, w, n, gc, &ge));
    CHECK(memcmp(cc, gc, (size_t)nw * 4) == 0 && ce == ge, "GPU encode_blocks L=%d k=%d T=%d w=%d differs (err %.9g vs %.9g)",
          L, k, T, weighted, ce, ge);
    free(x);
    free(w);
    free(cc);
    free(gc);
}

static void check_errors(void)
{
    /* kernel choices out of range are refused, and leave the context as it was */
    CHECK(tcq_cuda_ctx_set_opts(ctx, &(tcq_cuda_opts){.im_chunk = 100}) == TCQ_ERR_INVALID_ARG, "im_chunk 100 accepted");
    CHECK(tcq_cuda_ctx_set_opts(ctx, &(tcq_cuda_opts){.tc_max_m = 33}) == TCQ_ERR_INVALID_ARG, "tc_max_m 33 accepted");
    CHECK(tcq_cuda_ctx_set_opts(ctx, &(tcq_cuda_opts){.wgmma = 2}) == TCQ_ERR_INVALID_ARG, "wgmma 2 accepted");
    CHECK(tcq_cuda_ctx_set_opts(ctx, NULL) == TCQ_ERR_INVALID_ARG, "NULL options accepted");
    host_w h;
    make_w(&h, 12, 2, 256, 1, 0, 64, 256);
    const size_t wb = tcq_cuda_trellis_bytes(&h.t);
    void *dwb = dev_alloc(wb);
    float *dx = dev_alloc(256 * 4), *dy = dev_alloc(64 * 4);
    tcq_trellis dw;
    CHECK(tcq_cuda_trellis_upload(ctx, &h.t, dwb, wb - 1, &dw) == TCQ_ERR_RANGE, "short device buffer accepted");
    CHECK_OK(tcq_cuda_trellis_upload(ctx, &h.t, dwb, wb, &dw));
    CHECK(tcq_cuda_linear(ctx, &dw, dx, dy, 0, TCQ_PATH_AUTO) == TCQ_ERR_INVALID_ARG, "M=0 accepted");
    CHECK(tcq_cuda_linear(ctx, &dw, NULL, dy, 1, TCQ_PATH_AUTO) == TCQ_ERR_INVALID_ARG, "NULL x accepted");
    CHECK_OK(tcq_cuda_linear(ctx, &dw, dx, dy, 1, TCQ_PATH_FAST));
    CHECK(tcq_cuda_linear(ctx, &dw, dx, dy, 1, (tcq_kpath)7) == TCQ_ERR_INVALID_ARG, "unknown path accepted");
    tcq_trellis bad = dw;
    bad.cols = 300;
    CHECK(tcq_cuda_linear(ctx, &bad, dx, dy, 1, TCQ_PATH_AUTO) == TCQ_ERR_INVALID_ARG, "C %% T != 0 accepted");
    CHECK(*tcq_last_error() != 0, "no message for a bad shape");
    float src[256] = {0};
    uint32_t codes[16];
    uint16_t sc[1];
    CHECK(tcq_cuda_encode_rows(ctx, (tcq_block_params){14, 2, 256}, NULL, src, NULL, 1, 256, codes, sc, NULL) == TCQ_ERR_UNSUPPORTED,
          "L=14 GPU encode claimed");
    CHECK_OK(tcq_cuda_sync(ctx));
    tcq_cuda_free(dwb);
    tcq_cuda_free(dx);
    tcq_cuda_free(dy);
    free_w(&h);
}

int main(void)
{
    rng = test_seed();
    if (!tcq_cuda_available()) {
        fprintf(stderr, "test_cuda: no CUDA device, skipped\n");
        return 77;
    }
    CHECK_OK(tcq_cuda_ctx_create(0, &ctx));
    if (!ctx) return test_done("test_cuda");
    char desc[256];
    CHECK_OK(tcq_cuda_describe(ctx, desc, sizeof desc));
    fprintf(stderr, "device: %s\n", desc);
    CHECK_OK(tcq_pool_create(0, &pool));
    check_errors();
    const char *quick = getenv("TCQ_CUDA_TEST_QUICK");
    if (quick && strcmp(quick, "0") != 0) {   /* a small run for compute-sanitizer */
        check_linear(12, 2, 256, 1, 0, 100, 512, 1);
        check_linear(12, 3, 256, 0, 0, 512, 100, 6);
        check_linear(12, 4, 256, 1, 0, 40, 256, 13);
        check_linear(8, 1, 64, 0, 0, 128, 70, 33);
        check_linear(12, 2, 256, 1, 0, 300, 512, 40);   /* wgmma on sm_90 */
        check_linear(12, 2, 256, 1, 0, 200, 512, 150);  /* wgmma at NB = 256 (M > 128), under the sanitizers */
        check_linear(12, 3, 256, 0, 0, 512, 128, 20);   /* wgmma-ss on sm_90 */
        {   /* the pair-table kernels (on sm_90 the wgmma ones take M > 8) */
            if (ctx_push((tcq_cuda_opts){.pair_table = 1})) {
                check_linear(12, 4, 256, 1, 0, 40, 256, 5);
                check_linear(12, 2, 256, 0, 0, 256, 100, 3);
                ctx_pop();
            }
        }
        check_decode_bf16(12, 3, 256, 0, 1, 512, 30);
        check_swiglu(12, 2, 256, 64, 256, 3);
        check_fast(12, 2, 256, 1, 0, 100, 512, 3);
        check_fast(12, 3, 256, 0, 1, 512, 200, 6);
        check_fast(8, 1, 64, 0, 0, 64, 70, 8);
        check_swiglu_fast(12, 2, 256, 64, 256, 2);
        check_fast(12, 3, 256, 1, 0, 40, 768, 12);   /* int8, two n-tiles */
        {   /* the dp4a kernels (int8 took the cases above where it runs) */
            if (ctx_push((tcq_cuda_opts){.fast_dp4a = 1})) {
                check_fast(12, 2, 256, 1, 0, 100, 512, 3);
                check_fast(12, 3, 256, 0, 1, 512, 200, 6);
                check_swiglu_fast(12, 2, 256, 64, 256, 2);
                ctx_pop();
            }
        }
        {   /* a pinned item length that is not a power of two, int8 at M = 1 */
            if (ctx_push((tcq_cuda_opts){.im_chunk = 352})) {
                check_fast(12, 3, 256, 0, 0, 512, 777, 1);
                check_linear(12, 2, 256, 0, 0, 512, 1000, 2);
                ctx_pop();
            }
        }
        check_encoder(8, 2, 64, 2, 128, 1);
        check_encoder(12, 2, 256, 1, 256, 0);
        check_encoder_ex(12, 4, 256, 7, 512, 1, 1);
        check_encoder_ex(8, 2, 64, 130, 4096, 1, 0);   /* two chunks (128 + 2 rows; L=8: cheap under the sanitizers) */
        tcq_pool_free(pool);
        tcq_cuda_ctx_free(ctx);
        return test_done("test_cuda (quick)");
    }

    /* every k, L in {8, 12, 16}, T, axis; odd row counts; M across the kernel classes */
    static const int Ls[] = {8, 12, 16}, Ts[] = {64, 128, 256};
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 8, 13, 32, 33};
    double worst = 0;
    int n = 0;
    for (int k = 1; k <= 4; k++)
        for (int li = 0; li < 3; li++)
            for (int ti = 0; ti < 3; ti++)
                for (int axis = 0; axis <= 1; axis++) {
                    const int L = Ls[li], T = Ts[ti];
                    if (k >= L || (T * k) % 32) continue;
                    const int64_t out = axis ? 37 + 16 * (int64_t)(test_rand(&rng) % 8) : T * (1 + (int64_t)(test_rand(&rng) % 3));
                    const int64_t in = axis ? T * (1 + (int64_t)(test_rand(&rng) % 3)) : 45 + (int64_t)(test_rand(&rng) % 80);
                    const int64_t M = Ms[(k + li + ti + axis) % 9];
                    const double e = check_linear(L, k, T, axis, 0, out, in, M);
                    worst = e > worst ? e : worst;
                    n++;
                }
    for (int mi = 0; mi < 9; mi++) {   /* every M class on both axes at the artifact geometry */
        double e = check_linear(12, 2 + mi % 3, 256, 1, 0, 300, 1024, Ms[mi]);
        worst = e > worst ? e : worst;
        e = check_linear(12, 2 + mi % 3, 256, 0, 0, 512, 333, Ms[mi]);
        worst = e > worst ? e : worst;
        n += 2;
    }
    worst = fmax(worst, check_linear(12, 3, 256, 0, 1, 1024, 200, 1));    /* two-block interleave */
    worst = fmax(worst, check_linear(12, 3, 256, 0, 1, 1536, 77, 6));
    worst = fmax(worst, check_linear(12, 3, 256, 0, 1, 512, 100, 40));
    worst = fmax(worst, check_linear(12, 2, 256, 1, 0, 100, 512, 100));
    worst = fmax(worst, check_linear(12, 2, 256, 1, 0, 300, 512, 700));   /* k = 2 past M = 256: wgmma, 3 tiles of x */
    worst = fmax(worst, check_linear(12, 3, 256, 1, 0, 70, 9216, 3));   /* 18 chunk sums: the 8-warp finish */
    n += 6;
    const char *big = getenv("TCQ_CUDA_TEST_BIG");
    if (!big || strcmp(big, "0") != 0) {
        for (int k = 2; k <= 4; k++) {
            worst = fmax(worst, check_linear(12, k, 256, 1, 0, 17408, 5120, 1));
            worst = fmax(worst, check_linear(12, k, 256, 0, k == 3, 5120, 17408, 1));
            n += 2;
        }
        worst = fmax(worst, check_linear(12, 2, 256, 1, 0, 17408, 5120, 8));
        worst = fmax(worst, check_linear(12, 3, 256, 0, 0, 5120, 17408, 16));
        n += 2;
    }
    fprintf(stderr, "linear: %d cases, worst relative error %.3g\n", n, worst);
    fast_suite(!big || strcmp(big, "0") != 0, 1);
    {   /* again with the dp4a kernels wherever they run (the int8 ones took most cases above) */
        if (ctx_push((tcq_cuda_opts){.fast_dp4a = 1})) {
            fast_suite(0, 0);
            ctx_pop();
        }
    }
    /* pinned item lengths (tcq_cuda_opts.im_chunk) with int8 wherever it runs: 352 (axis 0 only, not a
     * power of two, the chunk the scatter picks at 5120x17408 on an H200) and 384 (also axis 1 at
     * T = 128: three blocks an item); the last chunk of every case is a partial one */
    for (int ci = 0; ci < 2; ci++) {
        if (!ctx_push((tcq_cuda_opts){.im_chunk = ci ? 384 : 352})) break;
        double e = check_linear(12, 2, 256, 0, 0, 512, 1000, 1);
        e = fmax(e, check_linear(12, 3, 256, 0, 1, 1024, 900, 2));   /* two-block interleave */
        e = fmax(e, check_linear(12, 4, 128, 1, 0, 100, 1152 + 128 * ci, 2));
        check_fast(12, 2, 256, 0, 0, 768, 1000, 8);
        check_fast(12, 3, 256, 0, 0, 512, 777, 1);
        check_fast(12, 4, 128, 1, 0, 100, 1152 + 128 * ci, 5);
        check_swiglu_fast(12, 2, 128, 64, 1152, 3);
        fprintf(stderr, "pinned chunk %d: worst relative error %.3g\n", ci ? 384 : 352, e);
        ctx_pop();
    }
    /* FAST above the fast kernels' M (8; int8 on axis 1: 16): the exact kernels (tcq.h) */
    check_linear_path(12, 2, 256, 1, 0, 100, 512, 17, TCQ_PATH_FAST);
    check_linear_path(12, 3, 256, 0, 0, 512, 300, 9, TCQ_PATH_FAST);

    for (int k = 1; k <= 4; k++) check_decode_bf16(12, k, 256, k & 1, 0, k & 1 ? 200 : 512, k & 1 ? 512 : 200);
    check_decode_bf16(12, 3, 256, 0, 1, 1024, 100);
    check_decode_bf16(8, 2, 64, 0, 0, 192, 45);
    check_swiglu(12, 2, 256, 300, 512, 1);
    check_swiglu(12, 3, 256, 200, 768, 7);
    check_swiglu(12, 4, 256, 64, 256, 50);
    {   /* decode + cuBLAS at M = 33..100 with the wgmma kernels off: both axes, the interleave,
         * fused gate/up */
        if (ctx_push((tcq_cuda_opts){.wgmma = -1, .wgmma_ss = -1})) {
            double e = check_linear(12, 2, 256, 1, 0, 300, 512, 40);
            e = fmax(e, check_linear(12, 3, 256, 0, 0, 512, 200, 33));
            e = fmax(e, check_linear(12, 3, 256, 0, 1, 1024, 100, 64));
            e = fmax(e, check_linear(8, 1, 64, 1, 0, 37, 128, 100));
            check_swiglu(12, 3, 256, 200, 768, 35);
            fprintf(stderr, "decode + cuBLAS at M = 33..100: worst relative error %.3g\n", e);
            ctx_pop();
        }
        /* the wgmma kernels at every M they take, on odd block counts (segments cut tiles
         * anywhere: partial sums) and on the default count */
        for (int gi = 0; gi < 2; gi++) {
            if (!ctx_push((tcq_cuda_opts){.wgmma = 1, .wg_grid = gi == 0 ? 7 : 0})) break;
            double e = check_linear(12, 2, 256, 1, 0, 300, 1024, 17);
            e = fmax(e, check_linear(12, 3, 256, 1, 0, 129, 768, 64));
            e = fmax(e, check_linear(12, 4, 256, 1, 0, 200, 2560, 100));
            e = fmax(e, check_linear(10, 2, 256, 1, 0, 260, 512, 300));   /* two 256-row tiles of x */
            e = fmax(e, check_linear(12, 3, 256, 1, 0, 1100, 1536, 512));   /* two x tiles, several segments a block */
            /* 8 tiles on 7 blocks: one whole wave, then 1 tile's 2 units over 7 blocks, most of
             * them with none (their partials slots must not be read) */
            e = fmax(e, check_linear(12, 2, 256, 1, 0, 1000, 512, 17));
            check_swiglu(12, 3, 256, 256, 512, 40);
            fprintf(stderr, "wgmma kernels (grid %s): worst relative error %.3g\n", gi ? "default" : "7", e);
            ctx_pop();
        }
        /* the shared-memory wgmma kernel on both axes, odd and default block counts, M > 128 in
         * 256-row tiles; axis 0 with and without the interleave */
        for (int vi = 0; vi < 2; vi++) {
            if (!ctx_push((tcq_cuda_opts){.wgmma_ss = 1, .wg_grid = vi == 0 ? 7 : 0})) break;
            double e = check_linear(12, 2, 256, 0, 0, 512, 320, 17);
            e = fmax(e, check_linear(12, 3, 256, 0, 1, 1024, 192, 64));
            e = fmax(e, check_linear(12, 4, 256, 0, 0, 256, 640, 100));
            e = fmax(e, check_linear(16, 2, 256, 0, 0, 768, 128, 200));
            e = fmax(e, check_linear(12, 3, 256, 0, 0, 512, 256, 600));   /* three 256-row tiles of x */
            e = fmax(e, check_linear(12, 2, 256, 1, 0, 300, 1024, 17));
            e = fmax(e, check_linear(12, 3, 256, 1, 0, 129, 768, 64));
            e = fmax(e, check_linear(12, 4, 256, 1, 0, 200, 2560, 130));
            x_offset = 1;   /* x 4 bytes into its buffer (a caller's sub-view): no 16-byte alignment */
            e = fmax(e, check_linear(12, 2, 256, 0, 0, 256, 192, 33));
            e = fmax(e, check_linear(12, 3, 256, 1, 0, 100, 512, 40));
            x_offset = 0;
            check_swiglu(12, 3, 256, 256, 512, 40);
            fprintf(stderr, "wgmma-ss (grid %s): worst relative error %.3g\n", vi == 0 ? "7" : "default", e);
            ctx_pop();
        }
        /* the pair-table kernels up to their limit (on sm_90 the wgmma kernels take M > 8 from
         * them, so those are off here) */
        if (ctx_push((tcq_cuda_opts){.tc_max_m = 32, .wgmma = -1, .wgmma_ss = -1})) {
            double e = check_linear(12, 2, 256, 1, 0, 300, 1024, 24);
            e = fmax(e, check_linear(12, 3, 256, 0, 0, 512, 333, 32));
            e = fmax(e, check_linear(12, 4, 256, 0, 0, 256, 100, 12));
            check_swiglu(12, 2, 256, 200, 512, 20);
            fprintf(stderr, "pair-table kernels at M = 12..32: worst relative error %.3g\n", e);
            ctx_pop();
        }
    }

    check_encoder(12, 2, 256, 6, 1024, 0);
    check_encoder(12, 3, 256, 4, 768, 1);
    check_encoder(12, 4, 256, 4, 512, 0);
    check_encoder(12, 1, 256, 3, 512, 0);
    check_encoder(8, 2, 64, 5, 320, 1);
    check_encoder(10, 3, 128, 3, 384, 0);
    check_encoder(9, 4, 64, 2, 256, 0);
    check_encode_blocks(12, 2, 256, 24, 0);
    check_encode_blocks(12, 3, 256, 8, 1);
    check_encode_blocks(11, 1, 128, 8, 0);
    /* the L=12 kernels (L a constant, swizzled D at k=3/4) weighted and not, every T */
    for (int k = 1; k <= 4; k++) {
        check_encoder(12, k, 256, 5, 768, 1);
        check_encoder(12, k, 128, 3, 512, k & 1);
        check_encoder(12, k, 64, 7, 192, !(k & 1));
        check_encode_blocks(12, k, 256, 40, k & 1);
    }
    check_encoder(11, 4, 128, 3, 256, 1);   /* swizzle at the smallest G it takes: G = 8 * 2^k */
    check_encoder(9, 3, 64, 4, 128, 0);
    check_encoder(10, 4, 256, 2, 512, 0);   /* k=4, no swizzle */
    /* row scales on the GPU: zero rows, underflowing rows, large rows, one-entry rows */
    for (int k = 2; k <= 4; k++) check_encoder_ex(12, k, 256, 21, 1024, k == 3, 1);
    check_encoder_ex(8, 2, 64, 14, 320, 0, 1);
    /* the pipeline: several 2 M-weight chunks (both staging slots reused), a chunk boundary that
     * does not divide the rows, a row longer than a chunk */
    check_encoder_ex(12, 2, 256, 1100, 4096, 0, 1);
    check_encoder_ex(12, 4, 256, 1600, 2816, 0, 0);
    check_encoder_ex(12, 3, 256, 300, 8192, 1, 0);
    if (!big || strcmp(big, "0") != 0) check_encoder_ex(12, 3, 256, 3, ((int64_t)1 << 21) + 256, 0, 0);
    check_encoder_bad_inputs();

    tcq_pool_free(pool);
    tcq_cuda_ctx_free(ctx);
    return test_done("test_cuda");
}
