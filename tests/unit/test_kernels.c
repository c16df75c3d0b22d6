/* Kernels: one table-driven harness over op x format x ISA x path x regime x shape.
 *
 * Every case builds a random weight (random code words are valid tail-biting codes: any bit
 * pattern decodes), fresh random activations, poisons y with NaN, runs the kernel on a 2-thread
 * pool and checks each output against a float64 reference computed from tcq_weight_decode():
 *   exact path: |y - ref| <= (n+4) u sum|w x| per output (u = 2^-24), and ||y-ref||/||ref|| <= 1e-5;
 *   fast path:  the bound derived in docs/PERFORMANCE.md ("Fast path error bound"), per output:
 *               sum_i |v_i| d_i / 2 + (nblk+4) u sum_i |v_i| (|a_i| + d_i) + 2^-21 sum |w x|
 *               (v_i the weight without the activation-side factor, a_i the quantized activation's
 *               source, d_i its block step);
 * and that a 1-thread run gives bit-identical output.  The combination space is sampled: every
 * op x format x ISA x path x regime appears, the other parameters are random per run. */
#include "test.h"
#include "kernels/registry.h"
#include "kernels/kernels.h"   /* tcq_d16_ref_dp, tcq_d16_round_bf16_ref */

#include <float.h>

#define QB TCQ_FAST_QB
#define ISA_AVX2_NOVNNI 99   /* AVX2 with the vpmaddubsw+vpmaddwd dot product on an AVX-VNNI CPU */
#define ISA_AVX512_NOAMX 98  /* AVX-512 without the AMX-INT8 kernels on a CPU that has AMX */
#define TMIN(a, b) ((a) < (b) ? (a) : (b))

typedef struct wbuf {
    tcq_weight w;
    uint32_t *codes, *tmp;
    uint16_t *scales, *h;
    float *f, *sb;   /* dense f32; affine scales/biases as f32 */
    double *W;       /* [out, in] decoded */
} wbuf;

enum { F_TR1, F_TR0, F_TR0I, F_F32, F_F16, F_BF16, F_AF4, F_AF8, F_COUNT };
static const char *const fnames[] = {"trellis-ax1", "trellis-ax0", "trellis-ax0-il", "f32", "f16", "bf16",
                                     "affine4", "affine8"};

static int rnd(uint64_t *st, int lo, int hi) { return lo + (int)(test_rand(st) % (uint64_t)(hi - lo + 1)); }

static void wfree(wbuf *b)
{
    free(b->codes), free(b->tmp), free(b->scales), free(b->h), free(b->f), free(b->sb), free(b->W);
    memset(b, 0, sizeof *b);
}

/* Build a random weight of format f with roughly `out` outputs and `in` inputs (adjusted to what
 * the format needs). */
static void make_weight(uint64_t *st, int f, int out, int in, tcq_block_params p, wbuf *b)
{
    memset(b, 0, sizeof *b);
    tcq_weight *w = &b->w;
    if (f <= F_TR0I) {
        const int axis = f == F_TR1;
        if (f == F_TR0I) p = (tcq_block_params){.L = p.L, .k = 3, .T = 256};
        int64_t R = axis ? out : in, C = axis ? in : out;
        C = ((C + p.T - 1) / p.T) * p.T;
        if (f == F_TR0I) C = ((C + 511) / 512) * 512;
        const int64_t rw = C * p.k / 32;
        b->codes = malloc((size_t)(R * rw) * 4);
        b->scales = malloc((size_t)R * 2);
        for (int64_t i = 0; i < R * rw; i++) b->codes[i] = (uint32_t)test_rand(st);
        for (int64_t r = 0; r < R; r++)
            b->scales[r] = tcq_f32_to_f16((float)(exp2(6 * test_uniform(st) - 3) * 0.05));
        if (f == F_TR0I) {
            b->tmp = malloc((size_t)(R * rw) * 4);
            tcq_interleave(R, C, b->codes, b->tmp);
            uint32_t *t = b->codes;
            b->codes = b->tmp;
            b->tmp = t;
        }
        w->fmt = TCQ_WF_TRELLIS;
        w->tr = (tcq_trellis){.p = p, .axis = axis, .interleaved = f == F_TR0I, .rows = R, .cols = C,
                              .codes = b->codes, .scales = b->scales};
        w->out = axis ? R : C;
        w->in = axis ? C : R;
    } else if (f <= F_BF16) {
        w->fmt = f == F_F32 ? TCQ_WF_F32 : f == F_F16 ? TCQ_WF_F16 : TCQ_WF_BF16;
        w->out = out, w->in = in;
        b->f = malloc((size_t)out * in * 4);
        b->h = malloc((size_t)out * in * 2);
        for (int64_t i = 0; i < (int64_t)out * in; i++) {
            b->f[i] = (float)(0.05 * test_gauss(st));
            b->h[i] = f == F_F16 ? tcq_f32_to_f16(b->f[i]) : tcq_f32_to_bf16(b->f[i]);
        }
        w->dense = f == F_F32 ? (const void *)b->f : (const void *)b->h;
    } else {
        const int bits = f == F_AF4 ? 4 : 8;
        int gs = 32 << rnd(st, 0, 2);
        while (in % gs && in % 32 == 0) gs /= 2;   /* keep a given in (swiglu's up) */
        in = ((in + gs - 1) / gs) * gs;
        const int64_t gpr = in / gs, nw = (int64_t)out * in * bits / 32, ng = (int64_t)out * gpr;
        b->codes = malloc((size_t)nw * 4);
        for (int64_t i = 0; i < nw; i++) b->codes[i] = (uint32_t)test_rand(st);
        const tcq_dtype sd = (tcq_dtype[]){TCQ_DTYPE_F32, TCQ_DTYPE_F16, TCQ_DTYPE_BF16}[rnd(st, 0, 2)];
        b->sb = malloc((size_t)ng * 2 * 4);
        b->h = malloc((size_t)ng * 2 * 2);
        for (int64_t i = 0; i < 2 * ng; i++) {
            b->sb[i] = (float)(0.01 * test_gauss(st));
            b->h[i] = sd == TCQ_DTYPE_F16 ? tcq_f32_to_f16(b->sb[i]) : tcq_f32_to_bf16(b->sb[i]);
        }
        w->fmt = TCQ_WF_AFFINE;
        w->out = out, w->in = in;
        w->af = (tcq_affine){.bits = bits, .group_size = gs, .out = out, .in = in, .w = b->codes, .sdtype = sd,
                             .scales = sd == TCQ_DTYPE_F32 ? (void *)b->sb : (void *)b->h,
                             .biases = sd == TCQ_DTYPE_F32 ? (void *)(b->sb + ng) : (void *)(b->h + ng)};
    }
    float *Wf = malloc((size_t)(w->out * w->in) * 4);
    CHECK_OK(tcq_weight_decode(w, Wf));
    b->W = malloc((size_t)(w->out * w->in) * 8);
    for (int64_t i = 0; i < w->out * w->in; i++) b->W[i] = Wf[i];
    free(Wf);
}

/* Per-output float64 reference and error bound for one weight.  For trellis weights also the
 * fast path's specification evaluated in float64 (spec, tol): q = nearbyintf(a * (127/amax)) and
 * d = amax/127 in f32 as documented for TCQ_FAST_QB blocks, y the integer code value, then
 * sum_blk d * sum y q * scale / 147.8: an implementation that quantizes differently fails it. */
static int g_scalar;     /* dense16 sums sequentially: the scalar ISA, a GEMM regime (reference()'s bound) */
static int g_dp;         /* the bf16-activation GEMM ran: kernels.h's bound for it */

static void reference(const wbuf *b, const float *x, int64_t M, int fast, int q16, double *ref, double *bound,
                      double *spec, double *tol)
{
    const tcq_weight *w = &b->w;
    /* q16: the tile kernel's int16 activations, one step per row, int32 sums of 256 products */
    const int64_t out = w->out, in = w->in, QBx = q16 ? in : QB, nblk = q16 ? (in + 255) / 256 : (in + QB - 1) / QB;
    const double u = 0x1p-24;
    const int tr = w->fmt == TCQ_WF_TRELLIS, axis0 = tr && w->tr.axis == 0;
    double *d = malloc((size_t)nblk * 8), *a = malloc((size_t)in * 8), *sc = malloc((size_t)in * 8);
    double *q = malloc((size_t)in * 8);
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * in;
        /* the activation the fast path quantizes, and its block steps */
        for (int64_t i = 0; i < in; i++) {
            sc[i] = axis0 ? tcq_f16_to_f32(w->tr.scales[i]) : 1.0;
            a[i] = axis0 ? (double)(xm[i] * (float)sc[i]) : xm[i];
        }
        const float qmax = q16 ? 2047.0f : 127.0f;
        for (int64_t k = 0; k * QBx < in; k++) {
            float amax = 0;
            const int64_t i1 = TMIN(in, (k + 1) * QBx);
            for (int64_t i = k * QBx; i < i1; i++) amax = fmaxf(amax, fabsf((float)a[i]));
            d[k] = amax / qmax;
            for (int64_t i = k * QBx; i < i1; i++) q[i] = amax > 0 ? nearbyintf((float)a[i] * (qmax / amax)) : 0;
        }
        /* dense f16/bf16's tiles sum in blocks (kc 1024) of lanes: kc/8 + 4 + K/kc + 1 roundings
         * at most, <= K + 4 (kernels.h) */
        const int d16 = w->fmt == TCQ_WF_BF16 || w->fmt == TCQ_WF_F16;
        const double n16 = d16 && !g_scalar ? TMIN(in + 4, 1024 / 8 + 4 + (in + 1023) / 1024 + 1) : in + 4;
        for (int64_t o = 0; o < out; o++) {
            const double *Wr = b->W + o * in;
            const double so = tr && !axis0 ? tcq_f16_to_f32(w->tr.scales[o]) : 1.0;
            double s = 0, sa = 0, sq = 0, sr = 0, sp = 0, spa = 0, blk = 0, blka = 0;
            for (int64_t i = 0; i < in; i++) {
                const double t = Wr[i] * xm[i];
                s += t;
                sa += fabs(t);
                const double v = fabs(Wr[i]) / sc[i];   /* weight without the activation-side factor */
                sq += v * d[i / QBx] * 0.5;
                sr += v * (fabs(a[i]) + d[i / QBx]);
                if (tr) {
                    /* the integer code value y of this weight: W = f32(y/147.8) * scale */
                    const double y = nearbyint(Wr[i] / (sc[i] * so) * TCQ_RMAD_DIV);
                    blk += y * q[i];
                    blka += fabs(y * q[i]);
                    if (i % QB == QB - 1 || i == in - 1) {
                        sp += blk * d[i / QBx];
                        spa += blka * d[i / QBx];
                        blk = blka = 0;
                    }
                }
            }
            ref[m * out + o] = s;
            bound[m * out + o] = fast ? sq * (1 + 1e-4) + (nblk + 4) * u * sr + 0x1p-21 * sa + 1e-30
                                      : n16 * u * sa + 1e-30;
            if (g_dp) {   /* kernels.h, "bf16 activations": f16 weights rounded to bf16 as well */
                double sw = 0;
                for (int64_t i = 0; i < in; i++) sw += fabs(Wr[i]);
                const double n = (double)(in / 16 + 5), e = 0x1p-8;
                bound[m * out + o] = w->fmt == TCQ_WF_F16
                                         ? (2 * e + e * e) * sa + n * u * (1 + e) * (1 + e) * sa + 0x1p-125 * (1 + e) * sw + 1e-30
                                         : e * sa + n * u * (1 + e) * sa + 0x1p-125 * sw + 1e-30;
            }
            if (spec) {
                spec[m * out + o] = sp * so / TCQ_RMAD_DIV;
                tol[m * out + o] = 4 * (nblk + 8) * u * spa * so / TCQ_RMAD_DIV + 1e-30;
            }
        }
    }
    free(d), free(a), free(sc), free(q);
}

static tcq_pool *g_pool2;
static int g_long;      /* tile and GEMM cases: always a long call; 2: also > 1024 outputs */
static int g_force_k;   /* > 0: L = 12, T = 256 and this k (the block shape of every artifact) */
static int g_force_M;   /* > 0: this M */
static int g_cases, g_isas[TCQ_ISA_COUNT + 2], g_nisa;
static double g_worst_exact, g_worst_fast_rel, g_worst_fast_ratio, g_worst_dp_rel;
static int64_t g_dp_outputs, g_dp_ref_differ;   /* the dp GEMM's outputs checked, and those off the C order's bits */

static tcq_kpath path_of(int p) { return p ? TCQ_PATH_FAST : TCQ_PATH_EXACT; }

/* the registry walk: the entry run_case pins (NULL: isa/path/regime as given), and which entries
 * some case ran */
static const tcq_kernel_info *g_kernel;
static unsigned char g_seen[1024];

/* Every kernel a case ran is a registry entry (an unfused SwiGLU: the linear kernel it ran). */
static void mark_seen(const char *name, const char *label)
{
    const char *k = strncmp(name, "swiglu.unfused.", 15) ? name : name + 15;
    const tcq_kernel_info *e = tcq_kernel_find(k), *whole = tcq_kernel_find(name);
    CHECK(e != NULL, "%s: kernel %s is not in the registry", label, k);
    if (e) g_seen[e - tcq_kernel_get(0)] = 1;
    if (whole) g_seen[whole - tcq_kernel_get(0)] = 1;   /* the unfused SwiGLU's own entry */
}

/* Run one case (swiglu over an interleaved axis-0 pair is skipped: not a real layout). */

static void run_case(uint64_t *st, int swiglu, int f, int isa, int path, tcq_kregime reg)
{
    const int novnni = isa == ISA_AVX2_NOVNNI, noamx = isa == ISA_AVX512_NOAMX;
    const unsigned exclude = novnni ? TCQ_KV_NO_AVXVNNI : noamx ? TCQ_KV_NO_AMX : 0;
    if (novnni) isa = TCQ_ISA_AVX2;
    if (noamx) isa = TCQ_ISA_AVX512;
    tcq_block_params p = {.L = (int[]){8, 12, 16, 10, 13}[rnd(st, 0, 4)], .k = rnd(st, 1, 4),
                          .T = 64 << rnd(st, 0, 2)};
    if (p.T * p.k % 32) p.T = 256;
    if (g_force_k) p = (tcq_block_params){.L = 12, .k = g_force_k, .T = 256};
    int64_t M = reg == TCQ_KR_M1 ? 1 : reg == TCQ_KR_SHARED ? rnd(st, 2, 4) : reg == TCQ_KR_TILE ? rnd(st, 5, 40)
                                   : reg == TCQ_KR_GEMM ? rnd(st, 33, 100) : rnd(st, 1, 40);
    if (reg == TCQ_KR_AUTO && rnd(st, 0, 7) == 0) M = 100;
    /* past 128 rows the tile regime runs in chunks, past 256 a table's own GEMM kernel (linear.c
     * tile_chunks) */
    const int long_tile = (reg == TCQ_KR_TILE || reg == TCQ_KR_GEMM) && (g_long || rnd(st, 0, 5) == 0);
    if (long_tile) M = reg == TCQ_KR_TILE ? rnd(st, 129, 300) : rnd(st, 257, 400);
    if (g_force_M) M = g_force_M;
    if (g_kernel) M = rnd(st, (int)g_kernel->m_min, (int)TMIN(g_kernel->m_max, g_kernel->m_min + 40));
    if (f > F_TR0I && reg == TCQ_KR_AUTO && rnd(st, 0, 1)) M = rnd(st, 1, 4);   /* the direct dense kernels */
    /* now and then a taller axis-1 matrix: its work items (items_plan) are longer than 16 rows,
     * end in shorter ones from 640 rows (one thread) or 1280 (two), and differ between the 1- and
     * 2-thread runs, which must still agree to the bit */
    const int coded_dim = (int)p.T * rnd(st, 1, 3),
              other = g_long == 2                 ? rnd(st, 1100, 1400)
                      : rnd(st, 0, 5) || long_tile ? rnd(st, 1, 150)
                                                   : rnd(st, 500, 2600);
    int out, in;
    if (f == F_TR1 || swiglu) out = other, in = coded_dim;
    else if (f == F_TR0 || f == F_TR0I) out = coded_dim * rnd(st, 1, 2), in = other * rnd(st, 1, 3);
    else out = other, in = rnd(st, 1, 300);
    if ((f == F_F16 || f == F_BF16) && rnd(st, 0, 2) == 0) {
        /* the stored-format kernels: rows over several k blocks (kc 1024) with a tail, and calls
         * of the GEMM regime (M > TCQ_MAX_BATCH) past a 128-row chunk */
        in = rnd(st, 2000, 4500);
        out = rnd(st, 1, 70);
        if (rnd(st, 0, 1) && !g_kernel) M = rnd(st, 12, 200);   /* a pinned entry keeps its own M range */
    }
    if (swiglu && f == F_TR0I) return;
    wbuf g, up;
    make_weight(st, f, out, in, p, &g);
    if (swiglu) {
        tcq_block_params p2 = p;
        p2.k = rnd(st, 1, 4);   /* gate and up may differ in k */
        if (p2.T * p2.k % 32) p2.k = 4;
        make_weight(st, f, out, (int)g.w.in, p2, &up);
    }
    const int64_t O = g.w.out, I = g.w.in;
    float *x = malloc((size_t)(M * I) * 4), *y = malloc((size_t)(M * O) * 4), *y1 = malloc((size_t)(M * O) * 4);
    for (int64_t i = 0; i < M * I; i++) x[i] = (float)test_gauss(st);
    double *ref = malloc((size_t)(M * O) * 8), *bd = malloc((size_t)(M * O) * 8);
    double *ref2 = malloc((size_t)(M * O) * 8), *bd2 = malloc((size_t)(M * O) * 8);
    const int fast = path && f <= F_TR0I;
    tcq_kctx *c2 = NULL, *c1 = NULL;
    CHECK_OK(tcq_kctx_create(g_pool2, path_of(path), &c2));
    CHECK_OK(tcq_kctx_create(NULL, path_of(path), &c1));
    CHECK_OK(tcq_kctx_force(c2, isa, reg));
    CHECK_OK(tcq_kctx_force(c1, isa, reg));
    CHECK_OK(tcq_kctx_exclude(c2, exclude));
    CHECK_OK(tcq_kctx_exclude(c1, exclude));
    if (g_kernel) {
        CHECK_OK(tcq_kctx_force_kernel(c2, g_kernel->name));
        CHECK_OK(tcq_kctx_force_kernel(c1, g_kernel->name));
    }
    for (int64_t j = 0; j < M * O; j++) y[j] = y1[j] = NAN;
    tcq_status s2 = swiglu ? tcq_linear_swiglu(&g.w, &up.w, x, y, M, c2) : tcq_linear(&g.w, x, y, M, c2);
    tcq_status s1 = swiglu ? tcq_linear_swiglu(&g.w, &up.w, x, y1, M, c1) : tcq_linear(&g.w, x, y1, M, c1);
    double *sp = malloc((size_t)(M * O) * 8), *tl = malloc((size_t)(M * O) * 8);
    double *sp2 = malloc((size_t)(M * O) * 8), *tl2 = malloc((size_t)(M * O) * 8);
    const int q16 = strstr(tcq_kctx_last_kernel(c2), ".i16") != NULL;
    const int dp = strstr(tcq_kctx_last_kernel(c2), ".dpbf16.") != NULL;
    const int d16_gemm = strstr(tcq_kctx_last_kernel(c2), ".stored.gemm.") != NULL && !dp;
    g_scalar = isa == TCQ_ISA_SCALAR || d16_gemm;   /* both: one sequential sum over k */
    g_dp = dp;
    reference(&g, x, M, fast, q16, ref, bd, sp, tl);
    if (swiglu) {
        reference(&up, x, M, fast, q16, ref2, bd2, sp2, tl2);
        for (int64_t j = 0; j < M * O; j++) {
            const double dsilu = 1.1;   /* |silu'| <= 1.0999 */
            double gv = ref[j], uv = ref2[j], sg = gv / (1 + exp(-gv));
            ref[j] = sg * uv;
            bd[j] = dsilu * bd[j] * (fabs(uv) + bd2[j]) + fabs(sg) * bd2[j] + 1e-6 * fabs(ref[j]) + 1e-30;
            gv = sp[j], uv = sp2[j], sg = gv / (1 + exp(-gv));
            sp[j] = sg * uv;
            tl[j] = dsilu * tl[j] * (fabs(uv) + tl2[j]) + fabs(sg) * tl2[j] + 1e-6 * fabs(sp[j]) + 1e-30;
        }
    }
    char label[256];
    snprintf(label, sizeof label, "%s %s isa=%s%s path=%s regime=%s kernel=%s L=%d k=%d T=%d M=%lld out=%lld in=%lld",
             swiglu ? "swiglu" : "linear", fnames[f], tcq_isa_name((tcq_isa)isa), novnni ? "-novnni" : noamx ? "-noamx" : "", path ? "fast" : "exact",
             tcq_kregime_name(reg), tcq_kctx_last_kernel(c2), p.L, p.k, p.T, (long long)M, (long long)O,
             (long long)I);
    CHECK(s2 == TCQ_OK && s1 == TCQ_OK, "%s: %s", label, tcq_last_error());
    mark_seen(tcq_kctx_last_kernel(c2), label);
    CHECK(!strcmp(tcq_kctx_last_kernel(c1), tcq_kctx_last_kernel(c2)), "%s: the 1-thread call ran %s", label,
          tcq_kctx_last_kernel(c1));
    if (g_kernel)
        CHECK(!strcmp(tcq_kctx_last_kernel(c2), g_kernel->name), "%s: registry entry %s pinned, another kernel ran",
              label, g_kernel->name);
    if (getenv("TCQ_TEST_VERBOSE")) fprintf(stderr, "%s\n", label);
    double e2 = 0, r2 = 0, worst = 0;
    int bad = 0;
    for (int64_t j = 0; j < M * O; j++) {
        const double e = fabs((double)y[j] - ref[j]);
        if (!(e <= bd[j])) {
            if (bad++ < 3) fprintf(stderr, "  %s: y[%lld]=%.9g ref=%.9g err=%.3g bound=%.3g\n", label,
                                   (long long)j, y[j], ref[j], e, bd[j]);
        }
        worst = fmax(worst, e / bd[j]);
        e2 += e * e;
        r2 += ref[j] * ref[j];
    }
    const double rel = r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
    CHECK(bad == 0, "%s: %d outputs outside the bound", label, bad);
    if (dp) {
        g_worst_dp_rel = fmax(g_worst_dp_rel, rel);
    } else if (!fast) {
        /* the aggregate 1e-5 needs a handful of outputs: with one or two, all of them may sit where
         * the result is ill-conditioned (TCQ_TEST_SEED=13473334221: a SwiGLU of 2 outputs, both with
         * gate ~ -20, where d ln|silu(g)| / dg ~ 1 turns g's f32 rounding, (n+4) 2^-24 sum|w x|,
         * into a relative error of ~3e-5 of the ~-5e-8 outputs, well inside the per-output bound
         * above); the per-output bound holds for every case */
        if (M * O >= 16) CHECK(rel <= 1e-5, "%s: exact relative error %.3g > 1e-5", label, rel);
        g_worst_exact = fmax(g_worst_exact, rel);
    } else {
        g_worst_fast_rel = fmax(g_worst_fast_rel, rel);
        g_worst_fast_ratio = fmax(g_worst_fast_ratio, worst);
    }
    if (fast && strstr(tcq_kctx_last_kernel(c2), "fast")) {
        /* the int8 kernels: the documented quantization, evaluated in float64 */
        int badq = 0;
        for (int64_t j = 0; j < M * O; j++)
            if (!(fabs((double)y[j] - sp[j]) <= tl[j]) && badq++ < 3)
                fprintf(stderr, "  %s: y[%lld]=%.9g spec=%.9g tol=%.3g\n", label, (long long)j, y[j], sp[j], tl[j]);
        CHECK(badq == 0, "%s: %d outputs differ from the fast-path specification", label, badq);
    }
    CHECK(memcmp(y, y1, (size_t)(M * O) * 4) == 0, "%s: 1-thread and 2-thread outputs differ", label);
    if (dp && !swiglu) {
        /* the bf16-activation GEMM: against float64 of its own operands (x rounded to bf16 by
         * tcq_f32_to_bf16, W as stored or, f16, rounded the same way), within the accumulation's
         * rounding alone, so a kernel that rounds x or W otherwise fails; against the order
         * written out in C (ref/dense_ref.c), counted; and a shifted run of rows called alone
         * (other tiles, other M) gives the same bits */
        const int64_t ld = (I + 31) / 32 * 32;
        uint16_t *xb = malloc((size_t)(M * ld) * 2);
        tcq_d16_round_bf16_ref(x, I, 0, M, xb, ld);
        const uint16_t *Wh = g.w.dense;
        int badq = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t o = 0; o < O; o++) {
                double sp = 0, spa = 0, sw = 0;
                for (int64_t i = 0; i < I; i++) {
                    const uint16_t h = Wh[o * I + i];
                    const double wv = tcq_bf16_to_f32(f == F_F16 ? tcq_f32_to_bf16(tcq_f16_to_f32(h)) : h);
                    const double t = wv * tcq_bf16_to_f32(xb[m * ld + i]);
                    sp += t, spa += fabs(t), sw += fabs(wv);
                }
                const double tol = (double)(I / 16 + 5) * 0x1p-24 * spa + 0x1p-125 * sw + 1e-30;
                if (!(fabs((double)y[m * O + o] - sp) <= tol) && badq++ < 3)
                    fprintf(stderr, "  %s: y[%lld][%lld]=%.9g, float64 of the bf16 operands %.9g, tol %.3g\n", label,
                            (long long)m, (long long)o, y[m * O + o], sp, tol);
            }
        CHECK(badq == 0, "%s: %d outputs off the float64 sum of their bf16 operands", label, badq);
        const kd16_args ra = {.w = &g.w, .M = M, .x = x, .y = y1, .ldy = O, .xb = xb, .ldxb = ld};
        tcq_d16_ref_dp(&ra, 0, O);
        for (int64_t j = 0; j < M * O; j++) g_dp_ref_differ += memcmp(&y[j], &y1[j], 4) != 0;
        g_dp_outputs += M * O;
        free(xb);
        if (M > 6 && (M - 6 > TCQ_MAX_BATCH || reg == TCQ_KR_GEMM)) {
            const int64_t a = rnd(st, 1, 5);
            CHECK_OK(tcq_linear(&g.w, x + a * I, y1, M - a, c1));
            CHECK(memcmp(y + a * O, y1, (size_t)((M - a) * O) * 4) == 0, "%s: rows from %lld called alone differ", label,
                  (long long)a);
        }
    }
    if ((f == F_F16 || f == F_BF16) && !swiglu && isa != TCQ_ISA_SCALAR && !dp) {
        /* against the scalar reference (both bounds), and each row on its own: an output depends
         * on its rows of W and x alone (kernels.h), whatever M, chunk or panel the call took */
        tcq_kctx *cr = NULL;
        CHECK_OK(tcq_kctx_create(NULL, TCQ_PATH_AUTO, &cr));
        CHECK_OK(tcq_kctx_force(cr, TCQ_ISA_SCALAR, TCQ_KR_AUTO));
        CHECK_OK(tcq_linear(&g.w, x, y1, M, cr));
        /* bd is n u sum|W a| with reference()'s n for this kernel; the scalar one's n is I + 4 */
        const double n16 = d16_gemm ? I + 4 : TMIN(I + 4, 1024 / 8 + 4 + (I + 1023) / 1024 + 1);
        int badr = 0;
        for (int64_t j = 0; j < M * O; j++) badr += !(fabs((double)y[j] - y1[j]) <= bd[j] * (1 + (I + 4) / n16));
        CHECK(badr == 0, "%s: %d outputs farther from the scalar reference than both bounds", label, badr);
        /* the GEMM is the reference's own sum: fmaf over k from 0 */
        if (d16_gemm) CHECK(memcmp(y, y1, (size_t)(M * O) * 4) == 0, "%s: GEMM differs from the scalar reference", label);
        tcq_kctx_free(cr);
        if (!d16_gemm) {
            const int64_t a = rnd(st, 0, (int)M - 1);
            CHECK_OK(tcq_linear(&g.w, x + a * I, y1, 1, c1));
            CHECK(memcmp(y + a * O, y1, (size_t)O * 4) == 0, "%s: row %lld alone differs from the call of %lld", label,
                  (long long)a, (long long)M);
        }
    }
    if (long_tile && (strstr(tcq_kctx_last_kernel(c2), ".tile.") || strstr(tcq_kctx_last_kernel(c2), ".panel"))) {
        /* every row on its own: any run of rows called alone gives the same bits as in the long
         * call, whichever chunks the two calls cut (not asked of sgemm) */
        const int64_t a = rnd(st, 0, (int)M - 5), n = rnd(st, 5, M - a < 128 ? (int)(M - a) : 128);
        for (int64_t j = 0; j < n * O; j++) y1[j] = NAN;
        tcq_status s = swiglu ? tcq_linear_swiglu(&g.w, &up.w, x + a * I, y1, n, c1)
                              : tcq_linear(&g.w, x + a * I, y1, n, c1);
        CHECK(s == TCQ_OK && memcmp(y + a * O, y1, (size_t)(n * O) * 4) == 0,
              "%s: rows [%lld, %lld) called alone differ from the long call", label, (long long)a,
              (long long)(a + n));
    }
    tcq_kctx_free(c2);
    tcq_kctx_free(c1);
    free(x), free(y), free(y1), free(ref), free(bd), free(ref2), free(bd2), free(sp), free(tl), free(sp2), free(tl2);
    wfree(&g);
    if (swiglu) wfree(&up);
    g_cases++;
    /* the excluded variant did not run (AVX-VNNI's AVX2 table names itself "avx2vnni", AMX's
     * kernels carry the "amx" tag) */
    CHECK(!(novnni && strstr(label, "avx2vnni")) && !(noamx && strstr(label, "amx")),
          "%s: the excluded variant ran", label);
}

/* dense f16/bf16 at M = 1: the row kernel (a table's M = 1 loop order) gives the tiles' bits
 * (tile regime pinned), on 1 and 2 threads, over several k blocks of 1024 and a ragged tail */
static void d16_row_vs_tiles(uint64_t *st)
{
    for (int ii = 0; ii < g_nisa; ii++) {
        if (g_isas[ii] > TCQ_ISA_AVX512) continue;
        for (int f = F_F16; f <= F_BF16; f++) {
            const int O = rnd(st, 1, 70), I = rnd(st, 1, 3) * 1024 + rnd(st, 0, 40);
            wbuf b;
            make_weight(st, f, O, I, (tcq_block_params){.L = 12, .k = 2, .T = 64}, &b);
            float *x = malloc((size_t)I * 4), *y[3];
            for (int i = 0; i < I; i++) x[i] = (float)test_gauss(st);
            tcq_kctx *c[3] = {NULL, NULL, NULL};
            const tcq_kregime reg[3] = {TCQ_KR_AUTO, TCQ_KR_AUTO, TCQ_KR_TILE};
            for (int j = 0; j < 3; j++) {
                y[j] = malloc((size_t)O * 4);
                CHECK_OK(tcq_kctx_create(j == 1 ? NULL : g_pool2, TCQ_PATH_AUTO, &c[j]));
                CHECK_OK(tcq_kctx_force(c[j], g_isas[ii], reg[j]));
                CHECK_OK(tcq_linear(&b.w, x, y[j], 1, c[j]));
            }
            const char *k0 = tcq_kctx_last_kernel(c[0]), *k2 = tcq_kctx_last_kernel(c[2]);
            CHECK(!strstr(k2, ".row"), "%s M = 1, tiles pinned, ran %s", fnames[f], k2);
            CHECK(memcmp(y[0], y[1], (size_t)O * 4) == 0 && memcmp(y[0], y[2], (size_t)O * 4) == 0,
                  "%s %s M = 1 out=%d in=%d: %s (2 threads, 1 thread) and %s differ", fnames[f],
                  tcq_isa_name((tcq_isa)g_isas[ii]), O, I, k0, k2);
            if (strstr(k0, ".row")) mark_seen(k0, "d16_row_vs_tiles");
            for (int j = 0; j < 3; j++) tcq_kctx_free(c[j]), free(y[j]);
            free(x);
            wfree(&b);
        }
    }
}

/* The f16 -> bf16 weight rounding of the bf16-activation GEMM (x/dense16_dp_avx512x.c) is
 * tcq_f32_to_bf16(tcq_f16_to_f32(h)) for all 65536 h (NaN: a NaN), rows of any length with zeros
 * past K */
static void f16_to_bf16_all(void)
{
    if (!tcq_cpu()->avx512bf16) return;
    enum { K = 65536 + 7, LD = (K + 31) / 32 * 32 };
    uint16_t *h = malloc(K * 2), *o = malloc(LD * 2 * 2);
    for (int i = 0; i < K; i++) h[i] = (uint16_t)(i * 40503u);   /* every h once (40503 odd), then 7 again */
    for (int i = 0; i < 2 * LD; i++) o[i] = 0xdead;
    tcq_d16_f16_to_bf16_avx512x(h, K, 0, 1, o, LD);
    int bad = 0, pad = 0;
    for (int i = 0; i < K; i++) {
        const uint16_t want = tcq_f32_to_bf16(tcq_f16_to_f32(h[i]));
        const int nan = isnan(tcq_f16_to_f32(h[i]));
        if (nan ? !isnan(tcq_bf16_to_f32(o[i])) : o[i] != want) {
            if (bad++ < 3) fprintf(stderr, "  f16 %04x -> bf16 %04x, want %04x\n", h[i], o[i], want);
        }
    }
    for (int i = K; i < 2 * LD; i++) pad += o[i] != (i < LD ? 0 : 0xdead);
    CHECK(bad == 0, "f16 -> bf16 rounding: %d of %d values differ from tcq_f32_to_bf16(tcq_f16_to_f32(h))", bad, K);
    CHECK(pad == 0, "f16 -> bf16 rounding: %d values past K not zero or past the row written", pad);
    free(h), free(o);
}

/* test_cuda's CPU fast reference (scalar ISA, tile regime pinned) must run the scalar int8 fast
 * kernel at every M: with the regime left to the table, the scalar table's GEMM regime from M = 5
 * ran the exact path's sums there and failed 161 GPU checks that CI, having no GPU, never ran. */
static void scalar_fast_reference(uint64_t *st)
{
    tcq_block_params p = {.L = 12, .k = 2, .T = 64};
    for (int f = F_TR1; f <= F_TR0; f++) {
        wbuf b;
        make_weight(st, f, 64, 128, p, &b);
        tcq_kctx *c = NULL;
        CHECK_OK(tcq_kctx_create(NULL, TCQ_PATH_FAST, &c));
        CHECK_OK(tcq_kctx_force(c, TCQ_ISA_SCALAR, TCQ_KR_TILE));
        static float x[40 * 128], y[40 * 128];
        for (int i = 0; i < 40 * 128; i++) x[i] = (float)test_gauss(st);
        for (int64_t M = 1; M <= 40; M += 13) {
            CHECK_OK(tcq_linear(&b.w, x, y, M, c));
            const char *k = tcq_kctx_last_kernel(c);
            CHECK(strstr(k, ".fast.") && strstr(k, ".scalar"), "pinned scalar fast reference ran %s at M=%lld", k,
                  (long long)M);
        }
        tcq_kctx_free(c);
        wfree(&b);
    }
}

/* Bad shapes and mismatched buffers return errors, never crash. */
static void bad_inputs(uint64_t *st)
{
    tcq_block_params p = {.L = 12, .k = 2, .T = 64};
    wbuf b;
    make_weight(st, F_TR1, 8, 128, p, &b);
    tcq_kctx *c = NULL;
    CHECK_OK(tcq_kctx_create(NULL, TCQ_PATH_AUTO, &c));
    float x[4 * 256], y[4 * 256];
    memset(x, 0, sizeof x);
    tcq_weight w = b.w;
    CHECK(tcq_linear(&w, x, y, 0, c) == TCQ_ERR_INVALID_ARG, "M=0 accepted");
    CHECK(tcq_linear(&w, NULL, y, 1, c) == TCQ_ERR_INVALID_ARG, "NULL x accepted");
    CHECK(tcq_linear(&w, x, x + 4, 1, c) == TCQ_ERR_INVALID_ARG, "overlapping x/y accepted");
    CHECK(tcq_linear(&w, x, y, 1, NULL) == TCQ_ERR_INVALID_ARG, "NULL ctx accepted");
    w.in = 256;
    CHECK(tcq_linear(&w, x, y, 1, c) == TCQ_ERR_INVALID_ARG, "in mismatch accepted");
    CHECK(strstr(tcq_last_error(), "trellis") != NULL, "message names the trellis: %s", tcq_last_error());
    w = b.w;
    w.tr.axis = 0;
    CHECK(tcq_linear(&w, x, y, 1, c) == TCQ_ERR_INVALID_ARG, "axis flip with wrong shape accepted");
    w = b.w;
    w.tr.axis = 2;
    CHECK(tcq_linear(&w, x, y, 1, c) == TCQ_ERR_INVALID_ARG, "axis 2 accepted");
    w = b.w;
    w.tr.cols = 100;
    CHECK(tcq_linear(&w, x, y, 1, c) == TCQ_ERR_INVALID_ARG, "cols %% T != 0 accepted");
    w = b.w;
    w.tr.interleaved = 1;
    CHECK(tcq_linear(&w, x, y, 1, c) == TCQ_ERR_INVALID_ARG, "interleave on k=2 axis 1 accepted");
    w = b.w;
    w.fmt = TCQ_WF_COUNT;
    CHECK(tcq_linear(&w, x, y, 1, c) == TCQ_ERR_INVALID_ARG, "unknown format accepted");
    w.fmt = TCQ_WF_F32;
    w.dense = NULL;
    CHECK(tcq_linear(&w, x, y, 1, c) == TCQ_ERR_INVALID_ARG, "NULL dense accepted");
    w = b.w;
    w.fmt = TCQ_WF_AFFINE;
    w.af = (tcq_affine){.bits = 3, .group_size = 64, .out = 8, .in = 128, .w = b.codes, .scales = x, .biases = x,
                        .sdtype = TCQ_DTYPE_F32};
    CHECK(tcq_linear(&w, x, y, 1, c) == TCQ_ERR_UNSUPPORTED, "affine bits=3 accepted");
    w.af.bits = 4;
    w.af.in = 100;
    CHECK(tcq_linear(&w, x, y, 1, c) == TCQ_ERR_INVALID_ARG, "affine shape mismatch accepted");
    wbuf b2;
    make_weight(st, F_TR1, 16, 128, p, &b2);
    CHECK(tcq_linear_swiglu(&b.w, &b2.w, x, y, 1, c) == TCQ_ERR_INVALID_ARG, "swiglu out mismatch accepted");
    CHECK(tcq_kctx_force(c, 7, TCQ_KR_AUTO) == TCQ_ERR_INVALID_ARG, "ISA 7 accepted");
    CHECK(tcq_kctx_force(c, -1, TCQ_KR_COUNT) == TCQ_ERR_INVALID_ARG, "regime COUNT accepted");
    CHECK(tcq_kctx_exclude(c, 0x80) == TCQ_ERR_INVALID_ARG, "unknown variant bit accepted");
    CHECK(tcq_kctx_exclude(NULL, 0) == TCQ_ERR_INVALID_ARG, "NULL context accepted");
    tcq_kctx *bad = NULL;
    CHECK(tcq_kctx_create(NULL, (tcq_kpath)9, &bad) == TCQ_ERR_INVALID_ARG && !bad, "path 9 accepted");
    tcq_kctx_free(c);
    wfree(&b);
    wfree(&b2);
}

/* A NaN or Inf activation shows in the outputs of its row on every path and regime (the fast
 * path must not quantize it away), and leaves the other rows finite. */
static void nonfinite(uint64_t *st)
{
    tcq_block_params p = {.L = 12, .k = 3, .T = 256};
    for (int f = F_TR1; f <= F_TR0; f++) {
        wbuf b;
        make_weight(st, f, 512, 512, p, &b);
        const int64_t M = 40, I = b.w.in, O = b.w.out;
        float *x = malloc((size_t)(M * I) * 4), *y = malloc((size_t)(M * O) * 4);
        for (int path = 0; path < 2; path++)
            for (int reg = 0; reg < TCQ_KR_COUNT; reg++)
                for (int ii = 0; ii < g_nisa; ii++) {
                    if (g_isas[ii] == ISA_AVX2_NOVNNI || g_isas[ii] == ISA_AVX512_NOAMX) continue;
                    const int64_t Mr = reg == TCQ_KR_M1 ? 1 : reg == TCQ_KR_SHARED ? 3 : M;
                    for (int64_t i = 0; i < Mr * I; i++) x[i] = (float)test_gauss(st);
                    x[0 * I + 5] = NAN;
                    if (Mr > 1) x[1 * I + 7] = INFINITY;
                    tcq_kctx *c = NULL;
                    CHECK_OK(tcq_kctx_create(NULL, path ? TCQ_PATH_FAST : TCQ_PATH_EXACT, &c));
                    CHECK_OK(tcq_kctx_force(c, g_isas[ii], (tcq_kregime)reg));
                    CHECK_OK(tcq_linear(&b.w, x, y, Mr, c));
                    int nan0 = 0, bad1 = 0, fin2 = 1;
                    for (int64_t o = 0; o < O; o++) {
                        nan0 += isnan(y[o]);
                        if (Mr > 1) bad1 += !isfinite(y[O + o]);
                        if (Mr > 2) fin2 &= isfinite(y[2 * O + o]);
                    }
                    CHECK(nan0 == O && (Mr == 1 || bad1 == O) && fin2,
                          "%s %s isa=%d regime=%s kernel=%s: NaN row %d/%lld non-finite, Inf row %d, others finite %d",
                          fnames[f], path ? "fast" : "exact", g_isas[ii], tcq_kregime_name((tcq_kregime)reg),
                          tcq_kctx_last_kernel(c), nan0, (long long)O, bad1, fin2);
                    tcq_kctx_free(c);
                }
        free(x), free(y);
        wfree(&b);
    }
}

int main(void)
{
    uint64_t st = test_seed();
    CHECK_OK(tcq_pool_create(2, &g_pool2));
    for (int i = 0; i < TCQ_ISA_COUNT; i++) {
        const tcq_isa keep = tcq_isa_active();
        if (tcq_isa_set((tcq_isa)i) == TCQ_OK) g_isas[g_nisa++] = i;
        tcq_isa_set(keep);
    }
    if (g_nisa > TCQ_ISA_AVX2) g_isas[g_nisa++] = ISA_AVX2_NOVNNI;
    if (g_nisa > TCQ_ISA_AVX512 && tcq_cpu()->amx_int8) g_isas[g_nisa++] = ISA_AVX512_NOAMX;
    bad_inputs(&st);
    nonfinite(&st);
    scalar_fast_reference(&st);
    d16_row_vs_tiles(&st);
    f16_to_bf16_all();
    /* every op x format x ISA x path x regime once (regimes and paths only where they differ),
     * plus random extra cases */
    for (int op = 0; op < 2; op++)
        for (int f = 0; f < F_COUNT; f++)
            for (int ii = 0; ii < g_nisa; ii++)
                for (int path = 0; path < 2; path++)
                    for (int reg = 0; reg < TCQ_KR_COUNT; reg++) {
                        if (f > F_TR0I && reg) continue;   /* path and regime do not apply: 2 samples */
                        run_case(&st, op, f, g_isas[ii], path, (tcq_kregime)reg);
                    }
    /* the artifacts' block shape at M = 1..5 on every ISA, fast path, whatever the draws above
     * gave: some kernels have a separate body for it (the AVX-512 asm block loops) */
    for (g_force_k = 2; g_force_k <= 4; g_force_k++)
        for (g_force_M = 1; g_force_M <= 5; g_force_M++)
            for (int ii = 0; ii < g_nisa; ii++)
                for (int op = 0; op < 2; op++)
                    for (int f = 0; f <= F_TR0I; f++)
                        run_case(&st, op, f, g_isas[ii], 1, g_force_M == 1 ? TCQ_KR_M1 : TCQ_KR_SHARED);
    g_force_k = g_force_M = 0;
    /* the bf16-activation GEMM of both formats at M >= 33 (AUTO) and from M = 5 (pinned), more
     * often than the draws above reach it (each case also calls a shifted run of its rows alone) */
    if (tcq_cpu()->avx512bf16)
        for (int i = 0; i < 16; i++) {
            g_force_M = i % 2 ? rnd(&st, 33, 200) : 0;
            run_case(&st, 0, i % 4 < 2 ? F_F16 : F_BF16, TCQ_ISA_AVX512, 1, i % 2 ? TCQ_KR_AUTO : TCQ_KR_GEMM);
        }
    g_force_M = 0;
    /* long calls of the fast tile and GEMM regimes on every ISA (the chunks), then with > 1024
     * outputs: the AVX-512 panel kernel's 64-row asm blocks need work items of >= 64 rows */
    for (g_long = 1; g_long <= 2; g_long++)
        for (int ii = 0; ii < g_nisa; ii++)
            for (int op = 0; op < 2; op++)
                for (int reg = TCQ_KR_TILE; reg <= TCQ_KR_GEMM; reg++)
                    if (g_long == 1 || reg == TCQ_KR_GEMM) run_case(&st, op, F_TR1, g_isas[ii], 1, (tcq_kregime)reg);
    g_long = 0;
    /* the registry: every entry against its reference at M of its range (a scatter entry on the
     * plain or the interleaved axis-0 layout), and every entry run by some case */
    CHECK(tcq_kernel_count() > 0 && tcq_kernel_count() <= (int)sizeof g_seen, "%d registry entries",
          tcq_kernel_count());
    CHECK(tcq_kctx_force_kernel(NULL, "f32.blas") == TCQ_ERR_INVALID_ARG, "NULL context accepted");
    {
        tcq_kctx *c = NULL;
        CHECK_OK(tcq_kctx_create(NULL, TCQ_PATH_AUTO, &c));
        CHECK(tcq_kctx_force_kernel(c, "trellis.reduce.nope") == TCQ_ERR_INVALID_ARG &&
                  strstr(tcq_last_error(), "trellis.reduce.nope"),
              "an unknown kernel name accepted or not named: %s", tcq_last_error());
        tcq_kctx_free(c);
    }
    for (int i = 0; i < tcq_kernel_count(); i++) {
        g_kernel = tcq_kernel_get(i);
        const tcq_wformat fm = g_kernel->fmt;
        const int f = fm == TCQ_WF_TRELLIS ? (g_kernel->axis ? F_TR1 : rnd(&st, 0, 1) ? F_TR0I : F_TR0)
                      : fm == TCQ_WF_F32  ? F_F32
                      : fm == TCQ_WF_F16  ? F_F16
                      : fm == TCQ_WF_BF16 ? F_BF16
                                          : rnd(&st, 0, 1) ? F_AF8 : F_AF4;
        /* the pseudo-ISAs where the excluded variant exists on this CPU (the entry pins it anyway) */
        const int isa = g_kernel->exclude & TCQ_KV_NO_AVXVNNI                        ? ISA_AVX2_NOVNNI
                        : g_kernel->exclude & TCQ_KV_NO_AMX && tcq_cpu()->amx_int8 ? ISA_AVX512_NOAMX
                                                                                   : g_kernel->isa;
        run_case(&st, g_kernel->swiglu, f, isa, g_kernel->path == TCQ_PATH_FAST, g_kernel->regime);
    }
    g_kernel = NULL;
    for (int i = 0; i < tcq_kernel_count(); i++) CHECK(g_seen[i], "registry entry %s ran in no case", tcq_kernel_get(i)->name);
    const char *e = getenv("TCQ_TEST_EXTRA");
    const int extra = e ? atoi(e) : 150;
    for (int i = 0; i < extra; i++)
        run_case(&st, rnd(&st, 0, 3) == 0, rnd(&st, 0, 2), g_isas[rnd(&st, 0, g_nisa - 1)], rnd(&st, 0, 1),
                 (tcq_kregime)rnd(&st, 0, TCQ_KR_COUNT - 1));
    fprintf(stderr, "%d cases; worst exact rel err %.3g; fast: worst rel err %.3g, worst err/bound %.3f\n",
            g_cases, g_worst_exact, g_worst_fast_rel, g_worst_fast_ratio);
    if (g_dp_outputs)
        fprintf(stderr, "bf16-activation GEMM: worst rel err %.3g; %lld of %lld outputs differ from ref/dense_ref.c's order\n",
                g_worst_dp_rel, (long long)g_dp_ref_differ, (long long)g_dp_outputs);
    tcq_pool_free(g_pool2);
    return test_done("test_kernels");
}
