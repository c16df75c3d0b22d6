/* test_cuda's checks of one call: random packed weights, the float64 reference as a kernel
 * family rounds (registry.h's tcq_cuda_ref), linear / SwiGLU / bf16 decode against it, the family
 * a call runs (family_of: a registry entry, the pinned one where pinned), and the context options'
 * errors.  Included by test_cuda.c only (one translation unit: the state below is its). */
#ifndef TCQ_TEST_CUDA_CHECKS_H
#define TCQ_TEST_CUDA_CHECKS_H

#include "test.h"

#include "kernels/cuda/registry.h"

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

static int ref_mode(const tcq_cuda_family *f, int axis)
{
    if (!f) return REF_EXACT;
    if (f->ref == TCQ_CREF_BF16) return REF_BF16;
    if (f->ref == TCQ_CREF_F16X) return axis ? REF_F16X : REF_F16XS;
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


/* ---- families ------------------------------------------------------------------------------ */

static const tcq_cuda_family *pinned;   /* the family the running cases pin (NULL: the dispatcher) */
static int have_wgmma;                  /* the device runs the sm_90a kernels (a wgmma pin takes) */
static int fam_cases[TCQ_CF_COUNT], run_cases[TCQ_CF_COUNT];
static double run_worst[TCQ_CF_COUNT];

static int fam_index(const tcq_cuda_family *f) { return (int)(f - tcq_cuda_family_get(0)); }

/* The family a call of (w, M, path) runs: a registry entry, and the pinned one where a family is
 * pinned (and the device has it). */
static const tcq_cuda_family *family_of(const tcq_trellis *w, int64_t M, tcq_kpath path)
{
    const char *kern = tcq_cuda_linear_kernel(ctx, w, M, path);
    const tcq_cuda_family *f = tcq_cuda_family_find(kern);
    CHECK(f != NULL, "tcq_cuda_linear_kernel: %s is not a registry family", kern ? kern : "NULL");
    if (f && pinned && (have_wgmma || !pinned->sm90))
        CHECK(f == pinned, "pinned %s, the call ran %s (L=%d k=%d T=%d axis=%d M=%lld)", pinned->name, f->name, w->p.L,
              w->p.k, w->p.T, w->axis, (long long)M);
    if (f) fam_cases[fam_index(f)]++, run_cases[fam_index(f)]++;
    return f;
}

static void note_err(const tcq_cuda_family *f, double e)
{
    if (f) run_worst[fam_index(f)] = fmax(run_worst[fam_index(f)], e);
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


static double check_linear_path(int L, int k, int T, int axis, int il, int64_t out, int64_t in, int64_t M, tcq_kpath path)
{
    host_w h;
    make_w(&h, L, k, T, axis, il, out, in);
    float *W = malloc((size_t)(out * in) * 4), *x = malloc((size_t)(M * in) * 4), *y = malloc((size_t)(M * out) * 4);
    double *ref = malloc((size_t)(M * out) * 8);
    CHECK_OK(tcq_trellis_decode(&h.t, W));
    for (int64_t i = 0; i < M * in; i++) x[i] = (float)test_gauss(&rng);
    const tcq_cuda_family *f = family_of(&h.t, M, path);
    const int mode = ref_mode(f, axis);
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
    /* the family's tolerance (registry.c; "int16": x' = rint(x 2^e) < 2^14 per chunk, so |x' 2^-e
     * - x| <= 2^-(e+1) <= chunk max 2^-14 and the relative RMS error is at most 2^-13 / sqrt(12) x
     * (chunk max / RMS of x), ~1.6e-4 for Gaussian chunks of <= 1024 (max / RMS <= 4.5)) */
    const double tol = f ? f->tol : 1e-5;
    CHECK(nf == 0 && e <= tol, "linear L=%d k=%d T=%d axis=%d il=%d out=%lld in=%lld M=%lld (%s): rel err %.3g (tol %g), %d unwritten/non-finite",
          L, k, T, axis, il, (long long)out, (long long)in, (long long)M, f ? f->name : "?", e, tol, nf);
    note_err(f, e);
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
    const tcq_cuda_family *f = family_of(&g.t, M, TCQ_PATH_AUTO);
    const int mode = ref_mode(f, 1);
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
    /* the family's tolerance (registry.c; "int16": gate's and up's x errors, check_linear_path, both
     * reach silu(g) u, scaled by at most 1 + |g silu'(g) / silu(g)| < 2.3: 2.3 x 1.6e-4) */
    const double tol = f ? f->tol_swiglu : 3e-5;
    CHECK(nf == 0 && e <= tol, "swiglu k=%d out=%lld in=%lld M=%lld (%s): rel err %.3g (tol %g), %d non-finite", k,
          (long long)out, (long long)in, (long long)M, f ? f->name : "?", e, tol, nf);
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

#endif
