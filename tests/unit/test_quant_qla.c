/* The quantizer's GPU linear algebra (quant/qla.h) on its host emulation, whose "device" copies
 * are separate buffers, so a missing push / pull shows here as on a GPU:
 *   - row-major DGEMM / SGEMM through mirrors and staging, every transpose, against CBLAS;
 *   - DSYRK into a mirrored Hessian, the two DTRSM forms, the blocked Cholesky (blocks of 512:
 *     m = 1100 is three) against tcq_quant_cholesky, the block LDL on it (blocks of 1 and 256)
 *     against tcq_quant_block_ldl; hscale's axis-0 system on the device (tcq_qla_schur, the factor
 *     left there) against its formula and the CPU's refit; E's columns made there from W's copy
 *     (tcq_qla_error_cols) against the host's doubles; the GPU encoder with one weight vector
 *     for all blocks against the vector spread; the proxy's one product against tcq_quant_proxy, the axis-1
 *     scale search's per-row losses e H e^T (Hd mirrored; then E, Hd and EH mirrored, EH's host
 *     copy untouched: only the R sums come down) against CBLAS to 1e-12;
 *   - BlockLDLQ plus one pass with the products on the emulation against the CPU path, both axes
 *     (axis 0 over several of its batches; also in groups of 16 rows), without and with a scale
 *     search of 3 candidates, and with the refit (hscale's products on the emulation):
 *     the proxy loss within 1 % (other summation orders move a few Viterbi decisions, not the
 *     loss), and the same bits on a second run.
 *   - the calibration forward (calib.c) on tests/data/tiny_llama (2 layers) with its projections
 *     and Hessian sums on the emulation, both passes of a sequential calibration (taps, then the
 *     advance with the weights changed in place, as quantize.c's coded ones): the Hessians and
 *     the residual stream against the CPU path within CAL_BOUND, every projection on qla (its
 *     GEMM count), the same bits run to run and for 1 and 2 threads (the CPU path's too: the
 *     taps' and SwiGLU's per-row host work runs on the pool).  The emulation's SGEMM is
 *     OpenBLAS', as the CPU's dense kernel: there the bits match; cuBLAS sums in another order.
 *     A weight change that did not reach the device copy (a mirror kept across the two passes)
 *     moves the Hessians and the stream by 0.1-0.2 (measured with that bug put in).
 * Where a GPU is present (a CUDA build on the device), all of it again on cuBLAS. */
#include "test.h"
#include "model/model.h"
#include "quant/qla.h"
#include "quant/quant.h"
#include "encode/encode_cuda.h"

#include <cblas.h>
#include <sys/stat.h>
#include <time.h>

static double max_rel(const double *a, const double *b, int64_t n)
{
    double m = 0, s = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i])), s = fmax(s, fabs(b[i]));
    return s > 0 ? m / s : m;
}

static void fill(uint64_t *st, double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = test_gauss(st);
}

static void check_gemm(uint64_t *st, tcq_qla *q)
{
    const int64_t M = 37, N = 29, K = 41, ld = 50;   /* ld > every width: strided operands */
    double *A = malloc(sizeof(double) * 64 * ld), *B = malloc(sizeof(double) * 64 * ld);
    double *C = malloc(sizeof(double) * 64 * ld), *Cr = malloc(sizeof(double) * 64 * ld);
    float *Af = malloc(sizeof(float) * 64 * ld), *Bf = malloc(sizeof(float) * 64 * ld);
    float *Cf = malloc(sizeof(float) * 64 * ld), *Crf = malloc(sizeof(float) * 64 * ld);
    for (int mir = 0; mir < 4; mir++)
        for (int ta = 0; ta <= 1; ta++)
            for (int tb = 0; tb <= 1; tb++) {
                fill(st, A, 64 * ld);
                fill(st, B, 64 * ld);
                fill(st, C, 64 * ld);
                memcpy(Cr, C, sizeof(double) * 64 * ld);
                for (int64_t i = 0; i < 64 * ld; i++) Af[i] = (float)A[i], Bf[i] = (float)B[i], Cf[i] = Crf[i] = (float)C[i];
                /* mir bit 0: A mirrored; bit 1: C mirrored (then its result comes back by a pull) */
                if (mir & 1) CHECK_OK(tcq_qla_mirror(q, A, sizeof(double) * 64 * ld, 0));
                if (mir & 2) CHECK_OK(tcq_qla_mirror(q, C, sizeof(double) * 64 * ld, 0));
                CHECK_OK(tcq_qla_dgemm(q, ta, tb, M, N, K, 0.5, A + 3, ld, B + 1, ld, 1.5, C + 2, ld));
                if (mir & 2) CHECK_OK(tcq_qla_pull(q, C + 2, M, N, ld, sizeof *C));
                tcq_qla_unmirror(q, A);
                tcq_qla_unmirror(q, C);
                cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                            (int)K, 0.5, A + 3, (int)ld, B + 1, (int)ld, 1.5, Cr + 2, (int)ld);
                CHECK(max_rel(C, Cr, 64 * ld) < 1e-13, "dgemm ta %d tb %d mirrors %d: %g", ta, tb, mir,
                      max_rel(C, Cr, 64 * ld));
                CHECK_OK(tcq_qla_sgemm(q, ta, tb, M, N, K, 1.0f, Af, ld, Bf, ld, 1.0f, Cf, ld));
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                            (int)K, 1.0f, Af, (int)ld, Bf, (int)ld, 1.0f, Crf, (int)ld);
                double e = 0;
                for (int64_t i = 0; i < 64 * ld; i++) e = fmax(e, fabs((double)Cf[i] - Crf[i]));
                CHECK(e < 1e-4, "sgemm ta %d tb %d: %g", ta, tb, e);
            }
    /* a pushed rectangle reaches the device copy; an unpushed change does not */
    fill(st, A, 64 * ld);
    fill(st, B, 64 * ld);
    CHECK_OK(tcq_qla_mirror(q, A, sizeof(double) * 64 * ld, 0));
    const double a0 = A[0];
    A[0] = a0 + 1;   /* not pushed */
    CHECK_OK(tcq_qla_dgemm(q, 0, 0, 1, 1, 1, 1.0, A, ld, B, ld, 0.0, C, ld));
    CHECK(C[0] == a0 * B[0], "an unpushed change reached the device copy");
    CHECK_OK(tcq_qla_push(q, A, 1, 1, ld, sizeof *A));
    CHECK_OK(tcq_qla_dgemm(q, 0, 0, 1, 1, 1, 1.0, A, ld, B, ld, 0.0, C, ld));
    CHECK(C[0] == A[0] * B[0], "a pushed change did not reach the device copy");
    CHECK(tcq_qla_mirror(q, A, 8, 0) != TCQ_OK, "a second mirror of one array was taken");
    tcq_qla_unmirror(q, A);
    free(A), free(B), free(C), free(Cr), free(Af), free(Bf), free(Cf), free(Crf);
}

static void check_factor(uint64_t *st, tcq_qla *q)
{
    /* DSYRK into a mirrored H */
    const int64_t d = 70, M = 33;
    double *H = calloc((size_t)(d * d), sizeof *H), *Hr = calloc((size_t)(d * d), sizeof *Hr);
    double *X = malloc(sizeof(double) * (size_t)(M * d));
    fill(st, H, d * d);
    memcpy(Hr, H, sizeof(double) * (size_t)(d * d));
    fill(st, X, M * d);
    CHECK_OK(tcq_qla_mirror(q, H, sizeof(double) * (size_t)(d * d), 0));
    CHECK_OK(tcq_qla_syrk(q, H, d, X, M));
    CHECK_OK(tcq_qla_pull(q, H, d, d, d, sizeof *H));
    tcq_qla_unmirror(q, H);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)M, 1.0, X, (int)d, 1.0, Hr, (int)d);
    double e = 0;
    for (int64_t i = 0; i < d; i++)
        for (int64_t j = i; j < d; j++) e = fmax(e, fabs(H[i * d + j] - Hr[i * d + j]));
    CHECK(e < 1e-12, "syrk: upper triangle off by %g", e);

    /* the blocked Cholesky (m over three blocks) and one of a single block (the CPU's bits) */
    for (int64_t m = 300; m <= 1100; m += 800) {
        double *S = malloc(sizeof(double) * (size_t)(m * m)), *L = malloc(sizeof(double) * (size_t)(m * m));
        double *Lr = malloc(sizeof(double) * (size_t)(m * m));
        test_random_spd(st, m, S);
        memcpy(L, S, sizeof(double) * (size_t)(m * m));
        memcpy(Lr, S, sizeof(double) * (size_t)(m * m));
        CHECK_OK(tcq_qla_cholesky(q, L, m));
        CHECK_OK(tcq_quant_cholesky(Lr, m));
        const double r = max_rel(L, Lr, m * m);
        CHECK(m > 512 ? r < 1e-10 : r == 0, "cholesky m=%lld: %g from the CPU's factor", (long long)m, r);
        /* the two solves by the factor: Z L^T = G, then Z L = G */
        const int64_t R = 45, n = m > 512 ? 256 : 64;
        double *G = malloc(sizeof(double) * (size_t)(R * n)), *Gr = malloc(sizeof(double) * (size_t)(R * n));
        fill(st, G, R * n);
        memcpy(Gr, G, sizeof(double) * (size_t)(R * n));
        for (int t = 1; t >= 0; t--) {
            CHECK_OK(tcq_qla_trsm_right_lower(q, t, R, n, Lr, m, G, n));
            cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, t ? CblasTrans : CblasNoTrans, CblasNonUnit, (int)R,
                        (int)n, 1.0, Lr, (int)m, Gr, (int)n);
        }
        CHECK(max_rel(G, Gr, R * n) < 1e-10, "trsm: %g", max_rel(G, Gr, R * n));
        free(G), free(Gr);
        free(S), free(L), free(Lr);
    }
    /* the block LDL on it: blocks of one (its row-wise finish) and of 256 */
    for (int b = 1; b <= 256; b += 255) {
        const int64_t m = 768;
        double *S = malloc(sizeof(double) * (size_t)(m * m)), *L0 = malloc(sizeof(double) * (size_t)(m * m));
        double *L1 = malloc(sizeof(double) * (size_t)(m * m)), *D0 = malloc(sizeof(double) * (size_t)(m * b));
        double *D1 = malloc(sizeof(double) * (size_t)(m * b));
        test_random_spd(st, m, S);
        CHECK_OK(tcq_quant_block_ldl(S, m, b, L0, D0));
        CHECK_OK(tcq_quant_block_ldl_on(q, NULL, S, m, b, L1, D1));
        CHECK(max_rel(L1, L0, m * m) < 1e-10 && max_rel(D1, D0, m * b) < 1e-10, "block LDL b=%d: L %g, D %g", b,
              max_rel(L1, L0, m * m), max_rel(D1, D0, m * b));
        tcq_pool *pool = NULL;   /* its finish on 2 threads: the same bits */
        CHECK_OK(tcq_pool_create(2, &pool));
        CHECK_OK(tcq_quant_block_ldl_on(q, pool, S, m, b, L0, D0));
        CHECK(!memcmp(L0, L1, sizeof(double) * (size_t)(m * m)) && !memcmp(D0, D1, sizeof(double) * (size_t)(m * b)),
              "block LDL b=%d on qla: 2 threads differ from none", b);
        tcq_pool_free(pool);
        free(S), free(L0), free(L1), free(D0), free(D1);
    }
    double bad[4] = {1, 2, 2, 1};
    CHECK(tcq_qla_cholesky(q, bad, 2) == TCQ_ERR_INVALID_ARG, "indefinite matrix");
    free(H), free(Hr), free(X);
}

/* E's columns made on the device from W's copy and a packed reconstruction: the host's doubles */
static void check_error_cols(uint64_t *st, tcq_qla *q)
{
    const int64_t R = 37, C = 768, c0 = 256, n = 256;
    double *E = malloc(sizeof(double) * (size_t)(R * C)), *Er = malloc(sizeof(double) * (size_t)(R * C));
    float *W = malloc(sizeof(float) * (size_t)(R * C)), *Wh = malloc(sizeof(float) * (size_t)(R * n));
    fill(st, E, R * C);
    memcpy(Er, E, sizeof(double) * (size_t)(R * C));
    for (int64_t i = 0; i < R * C; i++) W[i] = (float)test_gauss(st);
    for (int64_t i = 0; i < R * n; i++) Wh[i] = (float)test_gauss(st);
    for (int64_t r = 0; r < R; r++)
        for (int64_t t = 0; t < n; t++) Er[r * C + c0 + t] = (double)W[r * C + c0 + t] - (double)Wh[r * n + t];
    CHECK_OK(tcq_qla_mirror(q, E, sizeof(double) * (size_t)(R * C), 0));
    CHECK_OK(tcq_qla_mirror(q, W, sizeof(float) * (size_t)(R * C), 0));
    CHECK_OK(tcq_qla_error_cols(q, E, W, R, C, c0, n, Wh));
    CHECK(tcq_qla_error_cols(q, E, W, R, C, 600, n, Wh) == TCQ_ERR_INTERNAL, "error columns past C refused");
    tcq_error_clear();
    CHECK_OK(tcq_qla_pull(q, E, R, C, C, sizeof *E));
    tcq_qla_unmirror(q, E);
    tcq_qla_unmirror(q, W);
    CHECK(!memcmp(E, Er, sizeof(double) * (size_t)(R * C)), "error columns: not the host's doubles");
    free(E), free(Er), free(W), free(Wh);
}

/* hscale's axis-0 system on q: tcq_qla_schur against its formula (the emulation bit for bit),
 * the factor left on the device against tcq_quant_cholesky (three blocks, the host copy
 * untouched), then the whole refit against the CPU path's (R = 1100: a blocked factor) */
static void check_hscale(uint64_t *st, tcq_qla *q)
{
    const int64_t m = 700;
    double *A = malloc(sizeof(double) * (size_t)(m * m)), *F = malloc(sizeof(double) * (size_t)(m * m));
    double *H = malloc(sizeof(double) * (size_t)(m * m)), *Ar = malloc(sizeof(double) * (size_t)(m * m));
    double *b = malloc(sizeof(double) * (size_t)m), *br = malloc(sizeof(double) * (size_t)m);
    const double lambda = 0.3;
    fill(st, A, m * m), fill(st, F, m * m), fill(st, H, m * m);
    for (int64_t i = 0; i < m; i++) {
        double bi = 0;
        for (int64_t c = 0; c < m; c++) Ar[i * m + c] = A[i * m + c] * H[i * m + c], bi += H[i * m + c] * F[i * m + c];
        br[i] = bi + lambda * F[i * m + i];
        Ar[i * m + i] += lambda * A[i * m + i];
    }
    CHECK_OK(tcq_qla_mirror(q, A, sizeof(double) * (size_t)(m * m), 0));
    CHECK_OK(tcq_qla_mirror(q, F, sizeof(double) * (size_t)(m * m), 0));
    CHECK_OK(tcq_qla_schur(q, A, F, H, m, lambda, b));
    CHECK_OK(tcq_qla_pull(q, A, m, m, m, sizeof *A));
    CHECK_OK(tcq_qla_pull(q, F, m, m, m, sizeof *F));
    tcq_qla_unmirror(q, A);
    tcq_qla_unmirror(q, F);
    const double ea = max_rel(A, Ar, m * m), ef = max_rel(F, Ar, m * m), eb = max_rel(b, br, m);
    const double bound = tcq_qla_on_gpu(q) ? 1e-12 : 0;
    CHECK(ea <= bound && ef <= bound && eb <= bound, "schur: A %g, F %g, b %g from the formula", ea, ef, eb);

    const int64_t n = 1100;
    double *S = malloc(sizeof(double) * (size_t)(n * n)), *L = malloc(sizeof(double) * (size_t)(n * n));
    double *Lr = malloc(sizeof(double) * (size_t)(n * n));
    test_random_spd(st, n, S);
    memcpy(L, S, sizeof(double) * (size_t)(n * n));
    memcpy(Lr, S, sizeof(double) * (size_t)(n * n));
    CHECK_OK(tcq_quant_cholesky(Lr, n));
    CHECK_OK(tcq_qla_mirror(q, L, sizeof(double) * (size_t)(n * n), 0));
    CHECK_OK(tcq_qla_cholesky_mirrored(q, L, n));
    CHECK(!memcmp(L, S, sizeof(double) * (size_t)(n * n)), "cholesky on the device: the host copy changed");
    CHECK_OK(tcq_qla_pull(q, L, n, n, n, sizeof *L));
    tcq_qla_unmirror(q, L);
    double el = 0, sl = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k <= i; k++) el = fmax(el, fabs(L[i * n + k] - Lr[i * n + k])), sl = fmax(sl, fabs(Lr[i * n + k]));
    CHECK(el <= 1e-10 * sl, "cholesky on the device: lower triangle %g from the CPU's", el / sl);

    /* the refit: R = 1100 stored rows, C = 256, k = 2 codes of a random W under a random SPD H */
    const tcq_block_params p = {12, 2, 256};
    const tcq_encode_opts enc = {0};
    const int64_t R = n, C = 256, rw = C * p.k / 32;
    float *W = malloc(sizeof(float) * (size_t)(R * C));
    uint32_t *codes = malloc(sizeof(uint32_t) * (size_t)(R * rw));
    uint16_t *s0 = malloc((size_t)R * 2), *s1 = malloc((size_t)R * 2), *s2 = malloc((size_t)R * 2);
    uint16_t *s3 = malloc((size_t)R * 2);
    for (int64_t i = 0; i < R * C; i++) W[i] = (float)test_gauss(st);
    CHECK_OK(tcq_encode_rows(p, &enc, W, NULL, R, C, codes, s0, NULL, NULL));
    memcpy(s1, s0, (size_t)R * 2), memcpy(s2, s0, (size_t)R * 2), memcpy(s3, s0, (size_t)R * 2);
    CHECK_OK(tcq_quant_hscale(p, W, R, C, 0, S, 0.05, codes, s1));
    CHECK_OK(tcq_quant_hscale_on(q, NULL, p, W, R, C, 0, S, 0.05, codes, s2));
    CHECK_OK(tcq_qla_mirror(q, S, sizeof(double) * (size_t)(n * n), 0));   /* H mirrored by the caller */
    CHECK_OK(tcq_quant_hscale_on(q, NULL, p, W, R, C, 0, S, 0.05, codes, s3));
    tcq_qla_unmirror(q, S);
    int64_t moved = 0, same = 0;
    for (int64_t r = 0; r < R; r++) moved += s1[r] != s0[r], same += s2[r] == s1[r];
    fprintf(stderr, "hscale axis 0 on %s: %lld of %lld scales moved by the CPU refit, %lld the same on qla\n",
            tcq_qla_on_gpu(q) ? "the GPU" : "the emulation", (long long)moved, (long long)R, (long long)same);
    CHECK(moved > R / 2, "hscale axis 0: the CPU refit moved only %lld of %lld scales", (long long)moved, (long long)R);
    CHECK(same >= R - R / 100, "hscale axis 0 on qla: %lld of %lld scales as the CPU's", (long long)same, (long long)R);
    CHECK(!memcmp(s2, s3, (size_t)R * 2), "hscale axis 0 on qla: H mirrored by the caller changes the scales");
    free(A), free(F), free(H), free(Ar), free(b), free(br), free(S), free(L), free(Lr);
    free(W), free(codes), free(s0), free(s1), free(s2), free(s3);
}

static void check_proxy(uint64_t *st, tcq_qla *q)
{
    for (int axis = 0; axis <= 1; axis++) {
        const int64_t R = 90, C = 256, m = axis ? C : R;
        double *H = malloc(sizeof(double) * (size_t)(m * m));
        float *W = malloc(sizeof(float) * (size_t)(R * C)), *Wh = malloc(sizeof(float) * (size_t)(R * C));
        test_random_spd(st, m, H);
        for (int64_t i = 0; i < R * C; i++) W[i] = (float)test_gauss(st), Wh[i] = W[i] + 0.1f * (float)test_gauss(st);
        double l0, r0, l1, r1;
        CHECK_OK(tcq_quant_proxy(W, Wh, R, C, axis, H, NULL, &l0, &r0));
        CHECK_OK(tcq_quant_proxy_on(q, W, Wh, R, C, axis, H, &l1, &r1));
        CHECK(fabs(l1 - l0) <= 1e-10 * l0 && fabs(r1 - r0) <= 1e-10 * r0, "proxy axis %d: %.17g %.17g vs %.17g %.17g",
              axis, l1, r1, l0, r0);
        CHECK(tcq_qla_mirrors(q) == 0, "proxy axis %d: %d mirrors left", axis, tcq_qla_mirrors(q));
        CHECK_OK(tcq_qla_mirror(q, W, sizeof(float) * (size_t)(R * C), 0));   /* W mirrored by the caller */
        double l2 = -1, r2 = -1;
        CHECK_OK(tcq_quant_proxy_on(q, W, Wh, R, C, axis, H, &l2, &r2));
        CHECK(tcq_qla_mirrors(q) == 1, "proxy axis %d: the caller's W mirror dropped or others left", axis);
        tcq_qla_unmirror(q, W);
        CHECK(l2 == l1 && r2 == r1, "proxy axis %d, W mirrored: %.17g %.17g vs %.17g %.17g", axis, l2, r2, l1, r1);
        free(H), free(W), free(Wh);
    }
}

static void check_row_losses(uint64_t *st, tcq_qla *q)
{
    const int64_t R = 70, C = 512;
    double *E = malloc(sizeof(double) * (size_t)(R * C)), *H = malloc(sizeof(double) * (size_t)(C * C));
    double *EH = malloc(sizeof(double) * (size_t)(R * C)), *l0 = malloc(sizeof(double) * (size_t)R);
    double *l1 = malloc(sizeof(double) * (size_t)R);
    test_random_spd(st, C, H);
    fill(st, E, R * C);
    CHECK_OK(tcq_quant_row_losses(NULL, E, R, C, H, EH, l0));
    CHECK_OK(tcq_qla_mirror(q, H, sizeof(double) * (size_t)(C * C), 0));
    CHECK_OK(tcq_quant_row_losses(q, E, R, C, H, EH, l1));
    tcq_qla_unmirror(q, H);
    double worst = 0;
    for (int64_t r = 0; r < R; r++) worst = fmax(worst, fabs(l1[r] - l0[r]) / l0[r]);
    CHECK(worst <= 1e-12, "row losses on qla: %g relative from CBLAS's", worst);
    /* as the scale search runs them: E, Hd and EH mirrored, EH never down (its host copy keeps
     * what it held), only the R sums (tcq_qla_rowdots) */
    for (int64_t i = 0; i < R * C; i++) EH[i] = -1.0;
    CHECK_OK(tcq_qla_mirror(q, E, sizeof(double) * (size_t)(R * C), 0));
    CHECK_OK(tcq_qla_mirror(q, H, sizeof(double) * (size_t)(C * C), 0));
    CHECK_OK(tcq_qla_mirror(q, EH, sizeof(double) * (size_t)(R * C), 1));
    CHECK_OK(tcq_quant_row_losses(q, E, R, C, H, EH, l1));
    tcq_qla_unmirror(q, E);
    tcq_qla_unmirror(q, H);
    tcq_qla_unmirror(q, EH);
    worst = 0;
    int64_t touched = 0;
    for (int64_t r = 0; r < R; r++) worst = fmax(worst, fabs(l1[r] - l0[r]) / l0[r]);
    for (int64_t i = 0; i < R * C; i++) touched += EH[i] != -1.0;
    CHECK(worst <= 1e-12, "row losses on mirrors: %g relative from CBLAS's", worst);
    CHECK(touched == 0, "row losses on mirrors: %lld of EH's host entries written", (long long)touched);
    free(E), free(H), free(EH), free(l0), free(l1);
}

static tcq_cuda_ctx *gpu_enc;   /* the GPU run: its encoder codes the blocks */

/* the GPU encoder with one weight vector for every block: the words of the spread weights (n over
 * two of the encoder's batches of 131072 blocks) */
static void check_encode_w1(uint64_t *st)
{
    if (!gpu_enc) return;
    const tcq_block_params p = {12, 2, 256};
    const tcq_encode_opts enc = {0};
    const int64_t n = 131072 + 300, T = p.T, wpb = tcq_block_words(p);
    float *x = malloc(sizeof(float) * (size_t)(n * T)), *wt = malloc(sizeof(float) * (size_t)(n * T));
    float *w1 = malloc(sizeof(float) * (size_t)T);
    uint32_t *a = malloc(sizeof(uint32_t) * (size_t)(n * wpb)), *b = malloc(sizeof(uint32_t) * (size_t)(n * wpb));
    for (int64_t t = 0; t < T; t++) w1[t] = 0.25f + (float)fabs(test_gauss(st));
    for (int64_t i = 0; i < n * T; i++) x[i] = (float)test_gauss(st), wt[i] = w1[i % T];
    CHECK_OK(tcq_cuda_encode_blocks(gpu_enc, p, &enc, x, wt, n, a, NULL));
    CHECK_OK(tcq_cuda_encode_blocks_w1(gpu_enc, p, &enc, x, w1, n, b));
    CHECK(!memcmp(a, b, sizeof(uint32_t) * (size_t)(n * wpb)), "encode with one weight vector: other words");
    x[131072 * T + 5] = NAN;   /* in the second batch: checked on the device */
    CHECK(tcq_cuda_encode_blocks_w1(gpu_enc, p, &enc, x, w1, n, b) == TCQ_ERR_INVALID_ARG &&
              strstr(tcq_last_error(), "x[33554437]"), "a NaN target refused, by its index: %s", tcq_last_error());
    tcq_error_clear();
    x[131072 * T + 5] = 0.5f;
    w1[7] = -1.0f;
    CHECK(tcq_cuda_encode_blocks_w1(gpu_enc, p, &enc, x, w1, n, b) == TCQ_ERR_INVALID_ARG, "a negative weight refused");
    tcq_error_clear();
    free(x), free(wt), free(w1), free(a), free(b);
}

/* BlockLDLQ + one pass of W [R, C] with a scale search of `search` candidates, the products on q
 * (NULL: the CPU path); proxy loss out. */

static double ldlq(tcq_qla *q, int search, int group, int refit, const float *W, int64_t R, int64_t C, int axis,
                   const double *H, uint32_t *codes, uint16_t *scales)
{
    const tcq_block_params p = {12, 2, 256};
    const tcq_encode_opts enc = {0};
    float *What = malloc(sizeof(float) * (size_t)(R * C));
    const tcq_ldlq_args a = {p, &enc, NULL, W, R, C, axis, H, 0.01, refit, codes, scales, What, 1, search, q,
                             q ? gpu_enc : NULL, group};
    /* on q, H mirrored by the caller for the tensor, as quantize.c does: what the algorithms
     * mirror themselves they also drop (a mirror left behind names freed memory, and the next
     * buffer malloc puts there is "mirrored twice") */
    const int64_t m = axis ? C : R;
    if (q) CHECK_OK(tcq_qla_mirror(q, H, sizeof(double) * (size_t)(m * m), 0));
    CHECK_OK(tcq_quant_ldlq(&a));
    if (q) {
        CHECK(tcq_qla_mirrors(q) == 1, "LDLQ (axis %d, search %d, refit %d) left %d mirrors", axis, search, refit,
              tcq_qla_mirrors(q) - 1);
        tcq_qla_unmirror(q, H);
    }
    double l = -1;
    CHECK_OK(tcq_quant_proxy(W, What, R, C, axis, H, NULL, &l, NULL));
    free(What);
    return l;
}

static void check_ldlq(uint64_t *st, tcq_qla *q)
{
    /* search 3: BlockLDLQ's mirrors set up and dropped once per candidate (axis 1), the
     * candidates' encodes through the GPU encoder (axis 0) */
    /* runs 5, 6: with the refit (least squares per candidate, then hscale's products and axis 0's
     * Cholesky on q) */
    for (int run = 0; run < 7; run++) {
        const int search = run / 2 ? 3 : 0, axis = run % 2, group = run == 4 ? 16 : 1, refit = run >= 5;
        /* axis 0: 300 stored rows = 3 BlockLDLQ batches of 128, 5 pass batches of 64 */
        const int64_t R = axis ? 40 : 300, C = axis ? 768 : 256, m = axis ? C : R, rw = C * 2 / 32;
        double *H = malloc(sizeof(double) * (size_t)(m * m));
        float *W = malloc(sizeof(float) * (size_t)(R * C));
        uint32_t *c0 = malloc((size_t)(R * rw) * 4), *c1 = malloc((size_t)(R * rw) * 4), *c2 = malloc((size_t)(R * rw) * 4);
        uint16_t *s0 = malloc((size_t)R * 2), *s1 = malloc((size_t)R * 2), *s2 = malloc((size_t)R * 2);
        test_random_spd(st, m, H);
        for (int64_t i = 0; i < R * C; i++) W[i] = (float)test_gauss(st);
        const double lc = ldlq(NULL, search, group, refit, W, R, C, axis, H, c0, s0);
        const double lq = ldlq(q, search, group, refit, W, R, C, axis, H, c1, s1);
        const double lq2 = ldlq(q, search, group, refit, W, R, C, axis, H, c2, s2);
        int64_t same = 0;
        for (int64_t r = 0; r < R; r++) same += !memcmp(c0 + r * rw, c1 + r * rw, (size_t)rw * 4) && s0[r] == s1[r];
        fprintf(stderr, "search %d, axis %d, group %d%s: proxy CPU %.6g, %s GPU path %.6g (%+.3f%%), rows identical "
                "%lld of %lld\n", search, axis, group, refit ? ", refit" : "", lc, tcq_qla_on_gpu(q) ? "the" : "emulated", lq, 100 * (lq / lc - 1),
                (long long)same, (long long)R);
        CHECK(fabs(lq / lc - 1) < 0.01, "search %d, axis %d: proxy %g vs the CPU's %g", search, axis, lq, lc);
        CHECK(lq2 == lq && !memcmp(c1, c2, (size_t)(R * rw) * 4) && !memcmp(s1, s2, (size_t)R * 2),
              "search %d, axis %d: a second run differs", search, axis);
        free(H), free(W), free(c0), free(c1), free(c2), free(s0), free(s1), free(s2);
    }
}

/* ---- the calibration forward ---- */

/* max over entries |a - b| / max |b|: the f32 products' rounding, relative to the matrix.  With
 * the projections summed exactly (double, then rounded) instead of by OpenBLAS' SGEMM, the
 * largest was 6.5e-7 (the stream after 2 layers; Hessians 1e-7..5.4e-7): another f32 order is
 * that far from OpenBLAS' or twice it, so 1e-5 leaves a margin of ~8 and is far below a stale
 * weight's 0.1. */
#define CAL_BOUND 1e-5

static char cal_dir[] = "/tmp/tcq_qla_cal_XXXXXX";

/* tiny_llama (the source tree's, or data/tiny_llama where the device script unpacked it) with a
 * character-level BPE tokenizer (ids < 512: <unk>, space, a-z) and a text */
static int cal_setup(char *model, char *calib, size_t n)
{
    struct stat sb;
    const char *src = stat(TCQ_SOURCE_DIR "/tests/data/tiny_llama/model.safetensors", &sb) == 0
                          ? TCQ_SOURCE_DIR "/tests/data/tiny_llama" : "data/tiny_llama";
    if (!mkdtemp(cal_dir)) return 0;
    snprintf(model, n, "%s/model", cal_dir);
    snprintf(calib, n, "%s/calib.txt", cal_dir);
    mkdir(model, 0777);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s/config.json' '%s/model.safetensors' '%s'", src, src, model);
    if (system(cmd)) return 0;
    snprintf(cmd, sizeof cmd, "%s/tokenizer.json", model);
    test_write_char_tokenizer(cmd);
    char *text = calloc(1, 8000);
    for (int i = 0; i < 100; i++) strcat(text, i % 3 ? "the quick brown fox jumps over a lazy dog " : "wizards hex jugs ");
    test_write_file(calib, text);
    free(text);
    return 1;
}

typedef struct cal_out {
    tcq_quant_lhess lh[2];
    float *X;
    int64_t n;
} cal_out;

/* w as a dense f32 copy (malloc'd) */
static float *to_f32(const tcq_weight *w)
{
    const int64_t n = w->out * w->in;
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; f && i < n; i++)
        f[i] = w->fmt == TCQ_WF_F32    ? ((const float *)w->dense)[i]
               : w->fmt == TCQ_WF_BF16 ? tcq_bf16_to_f32(((const uint16_t *)w->dense)[i])
                                       : tcq_f16_to_f32(((const uint16_t *)w->dense)[i]);
    return f;
}

/* Both layers as quantize.c's sequential calibration: taps with the layer's weights (dense f32
 * copies), then the same arrays changed in place (every weight scaled by 0.85 .. 1.15, standing in
 * for the coded ones) move the stream. */
static void cal_run(const char *model, const char *calib, tcq_qla *q, int threads, cal_out *r)
{
    memset(r, 0, sizeof *r);
    tcq_hadamard *h = NULL;
    tcq_pool *pool = NULL;
    tcq_quant_cal *c = NULL;
    CHECK_OK(tcq_hadamard_create(256, 1, 7, &h));
    CHECK_OK(tcq_pool_create(threads, &pool));
    const tcq_quant_calib o = {calib, 1024, 128, threads};   /* 8 windows of 128 */
    if (h && pool) CHECK_OK(tcq_quant_cal_open(model, h, &o, pool, &c));
    if (c) {
        tcq_quant_cal_set_qla(c, q);
        tcq_model *m = tcq_quant_cal_model(c);
        for (int l = 0; l < 2; l++) {
            tcq_layer L = m->layers[l];
            tcq_weight *ws[7] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down};
            float *f[7];
            for (int j = 0; j < 7; j++) {
                f[j] = to_f32(ws[j]);
                *ws[j] = (tcq_weight){.fmt = TCQ_WF_F32, .out = ws[j]->out, .in = ws[j]->in, .dense = f[j]};
            }
            CHECK_OK(tcq_quant_cal_layer(c, l, &L, &r->lh[l], 0));
            for (int j = 0; j < 7; j++)
                for (int64_t i = 0; i < ws[j]->out * ws[j]->in; i++) f[j][i] *= 0.85f + 0.05f * (float)(i % 7);
            CHECK_OK(tcq_quant_cal_layer(c, l, &L, NULL, 1));
            for (int j = 0; j < 7; j++) free(f[j]);
        }
        r->n = tcq_quant_cal_tokens(c) * m->cfg.dim;
        r->X = malloc((size_t)r->n * sizeof *r->X);
        memcpy(r->X, tcq_quant_cal_stream(c), (size_t)r->n * sizeof *r->X);
    }
    tcq_quant_cal_free(c);
    tcq_pool_free(pool);
    tcq_hadamard_free(h);
}

static void cal_free(cal_out *r)
{
    for (int l = 0; l < 2; l++) tcq_quant_lhess_free(&r->lh[l]);
    free(r->X);
}

static double rel_f(const float *a, const float *b, int64_t n)
{
    double m = 0, s = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i])), s = fmax(s, fabs((double)b[i]));
    return s > 0 ? m / s : m;
}

static int cal_same(const cal_out *a, const cal_out *b)
{
    if (!a->X || !b->X || a->n != b->n || memcmp(a->X, b->X, (size_t)a->n * sizeof *a->X)) return 0;
    for (int l = 0; l < 2; l++)
        for (int s = 0; s < TCQ_TAP_SITES; s++)
            if (!a->lh[l].H[s] || !b->lh[l].H[s] ||
                memcmp(a->lh[l].H[s], b->lh[l].H[s], (size_t)(a->lh[l].dim[s] * a->lh[l].dim[s]) * sizeof(double)))
                return 0;
    return 1;
}

static void check_cal(tcq_qla *q)
{
    static char model[600], calib[600];
    static int ready = -1;
    if (ready < 0) ready = cal_setup(model, calib, sizeof model);
    CHECK(ready, "calibration test files in %s", cal_dir);
    if (!ready) return;
    cal_out cpu, cpu1, dev, dev2, dev1;
    cal_run(model, calib, NULL, 2, &cpu);
    cal_run(model, calib, NULL, 1, &cpu1);
    CHECK(cal_same(&cpu, &cpu1), "calibration on the CPU: 1 thread differs from 2");
    const int64_t g0 = tcq_qla_gemms(q);
    cal_run(model, calib, q, 2, &dev);
    /* every projection on q: 2 layers x 2 passes x 8 windows of one chunk x 7 */
    CHECK(tcq_qla_gemms(q) - g0 == 224, "calibration: %lld products on qla, want 224", (long long)(tcq_qla_gemms(q) - g0));
    cal_run(model, calib, q, 2, &dev2);
    cal_run(model, calib, q, 1, &dev1);
    if (cpu.X && dev.X) {
        double worst = 0;
        for (int l = 0; l < 2; l++) {
            fprintf(stderr, "calibration, layer %d, Hessians max |dH| / max |H| per site:", l);
            for (int s = 0; s < TCQ_TAP_SITES; s++) {
                const int64_t d = cpu.lh[l].dim[s];
                const double e = cpu.lh[l].H[s] && dev.lh[l].H[s] ? max_rel(dev.lh[l].H[s], cpu.lh[l].H[s], d * d) : 1;
                fprintf(stderr, " %.3g", e);
                worst = fmax(worst, e);
                /* layer 0's q/k/v input is the embedding: no projection before it, the same bits */
                if (l == 0 && s == TCQ_TAP_ATTN) CHECK(e == 0, "layer 0 q/k/v Hessian: %g from the CPU's", e);
            }
            fputc('\n', stderr);
        }
        const double ex = rel_f(dev.X, cpu.X, cpu.n);
        fprintf(stderr, "calibration: the stream after 2 layers max |dx| / max |x| %.3g (bound %g)\n", ex, CAL_BOUND);
        CHECK(worst < CAL_BOUND, "calibration Hessians on qla: %g from the CPU's", worst);
        CHECK(ex < CAL_BOUND, "calibration stream on qla: %g from the CPU's", ex);
    }
    CHECK(cal_same(&dev, &dev2), "calibration on qla: a second run differs");
    CHECK(cal_same(&dev, &dev1), "calibration on qla: 1 thread differs from 2");
    cal_free(&cpu), cal_free(&cpu1), cal_free(&dev), cal_free(&dev2), cal_free(&dev1);
}

static void check_all(uint64_t *st, tcq_cuda_ctx *ctx)
{
    tcq_qla *q = NULL;
    CHECK_OK(tcq_qla_create(ctx, &q));
    CHECK(tcq_qla_on_gpu(q) == (ctx != NULL), "qla on a GPU: %d", tcq_qla_on_gpu(q));
    gpu_enc = ctx;
    check_gemm(st, q);
    check_factor(st, q);
    check_hscale(st, q);
    check_error_cols(st, q);
    check_proxy(st, q);
    check_row_losses(st, q);
    check_encode_w1(st);
    check_ldlq(st, q);
    check_cal(q);
    tcq_qla_free(q);
}

/* ---- perf mode: `test_quant_qla --perf [R C threads]`, not a test: prints seconds ----
 * The GPU quantizer's per-tensor costs at a 14B projection's shape (default R 17408, C 5120:
 * axis 1 = gate / up with H over C, axis 0 = down with H over the R stored rows), the pool of
 * `threads` (default: one per CPU) doing the host work as `tcq quantize` does: the qla's copy
 * rates (a whole E up and down, one block's R x 256 columns up), then tcq_quant_ldlq at scale
 * search 1 / 9 and 0 / 1 passes, the last also with --refit-scales, axis 0 in groups of 8.  H = X^T X / 2048 + 0.05 I, X [2048, m]
 * Gaussian (DSYRK on the backend).  tests/cuda/quantize-ldlq-on-device.sh runs it there
 * (TCQ_QLA_PERF=1); without a GPU it runs the host emulation at the shape given. */
static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void perf_spd(uint64_t *st, tcq_qla *q, int64_t m, double *H)
{
    const int64_t n = 2048;
    double *X = malloc(sizeof(double) * (size_t)(n * m));
    fill(st, X, n * m);
    CHECK_OK(tcq_qla_mirror(q, H, sizeof(double) * (size_t)(m * m), 1));
    CHECK_OK(tcq_qla_syrk(q, H, m, X, n));
    CHECK_OK(tcq_qla_pull(q, H, m, m, m, sizeof *H));
    tcq_qla_unmirror(q, H);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = i; j < m; j++) H[i * m + j] /= (double)n;
        for (int64_t j = 0; j < i; j++) H[i * m + j] = H[j * m + i];
        H[i * m + i] += 0.05;
    }
    free(X);
}

static void perf(int64_t R, int64_t C, int threads)
{
    uint64_t st = 0x5eed;
    tcq_cuda_ctx *ctx = NULL;
    if (tcq_cuda_ctx_create(0, &ctx) != TCQ_OK) {
        fprintf(stderr, "perf: no GPU (%s): the host emulation\n", tcq_last_error());
        tcq_error_clear();
    }
    tcq_qla *q = NULL;
    tcq_pool *pool = NULL;
    CHECK_OK(tcq_qla_create(ctx, &q));
    CHECK_OK(tcq_pool_create(threads, &pool));
    printf("perf: R %lld, C %lld, %d threads, %s\n", (long long)R, (long long)C, tcq_pool_size(pool),
           ctx ? "GPU" : "host emulation");
    {   /* copy rates through the qla's mirrors (pageable host memory) */
        const int64_t T = 256;
        double *E = malloc(sizeof(double) * (size_t)(R * C)), tiny = 0;
        fill(&st, E, R * C);
        CHECK_OK(tcq_qla_mirror(q, E, sizeof(double) * (size_t)(R * C), 1));
        double t0 = now_s();
        CHECK_OK(tcq_qla_push(q, E, R, C, C, 8));
        CHECK_OK(tcq_qla_pull(q, &E[0], 1, 1, 1, 8));   /* a pull waits for the stream */
        double t1 = now_s();
        CHECK_OK(tcq_qla_pull(q, E, R, C, C, 8));
        double t2 = now_s();
        for (int i = 0; i < 4; i++) CHECK_OK(tcq_qla_push(q, E + i * T, R, T, C, 8));
        CHECK_OK(tcq_qla_pull(q, &E[0], 1, 1, 1, 8));
        double t3 = now_s();
        (void)tiny;
        const double gb = 8e-9 * (double)(R * C), gbb = 8e-9 * (double)(R * T);
        for (int i = 0; i < 4; i++) CHECK_OK(tcq_qla_pull(q, E, R, T, T, 8));
        double t4 = now_s();
        printf("perf: copy [R, C] doubles up %.2f GB/s, down %.2f GB/s; [R, 256] columns (pitch C) up %.2f GB/s, "
               "[R, 256] contiguous down %.2f GB/s\n", gb / (t1 - t0), gb / (t2 - t1), 4 * gbb / (t3 - t2),
               4 * gbb / (t4 - t3));
        tcq_qla_unmirror(q, E);
        free(E);
    }
    const tcq_block_params p = {12, 2, 256};
    const tcq_encode_opts enc = {0};
    if (ctx) {   /* one axis-1 block's encoder call (R blocks of 256), with and without the weights */
        const int64_t T = p.T;
        float *x = malloc(sizeof(float) * (size_t)(R * T)), *wt = malloc(sizeof(float) * (size_t)(R * T));
        uint32_t *words = malloc(sizeof(uint32_t) * (size_t)(R * tcq_block_words(p)));
        for (int64_t i = 0; i < R * T; i++) x[i] = (float)test_gauss(&st), wt[i] = 0.5f + (float)(i % T) / (float)T;
        CHECK_OK(tcq_cuda_encode_blocks(ctx, p, &enc, x, wt, R, words, NULL));   /* warm */
        double tw[5], tn[5];
        for (int i = 0; i < 5; i++) {
            double t0 = now_s();
            CHECK_OK(tcq_cuda_encode_blocks(ctx, p, &enc, x, wt, R, words, NULL));
            double t1 = now_s();
            CHECK_OK(tcq_cuda_encode_blocks(ctx, p, &enc, x, NULL, R, words, NULL));
            tw[i] = t1 - t0, tn[i] = now_s() - t1;
        }
        double mw = tw[0], mn = tn[0];   /* the fastest of 5 */
        for (int i = 1; i < 5; i++) mw = fmin(mw, tw[i]), mn = fmin(mn, tn[i]);
        printf("perf: tcq_cuda_encode_blocks of %lld blocks: %.2f ms with weights, %.2f ms without\n", (long long)R,
               1e3 * mw, 1e3 * mn);
        free(x), free(wt), free(words);
    }
    const int64_t rw = C * p.k / 32;
    float *W = malloc(sizeof(float) * (size_t)(R * C)), *What = malloc(sizeof(float) * (size_t)(R * C));
    uint32_t *codes = malloc(sizeof(uint32_t) * (size_t)(R * rw));
    uint16_t *scales = malloc(sizeof(uint16_t) * (size_t)R);
    for (int64_t i = 0; i < R * C; i++) W[i] = (float)test_gauss(&st);
    for (int axis = 1; axis >= 0; axis--) {
        const int64_t m = axis ? C : R;
        double *H = malloc(sizeof(double) * (size_t)(m * m));
        double t0 = now_s();
        perf_spd(&st, q, m, H);
        printf("perf: axis %d, H %lld x %lld made in %.2f s\n", axis, (long long)m, (long long)m, now_s() - t0);
        const int runs[4][3] = {{1, 0, 0}, {9, 0, 0}, {9, 1, 0}, {9, 1, 1}};   /* scale search, passes, refit */
        for (int i = 0; i < 4; i++) {
            const tcq_ldlq_args a = {p, &enc, pool, W, R, C, axis, H, 0.01, runs[i][2], codes, scales, What, runs[i][1],
                                     runs[i][0], q, ctx, 8};
            t0 = now_s();
            CHECK_OK(tcq_quant_ldlq(&a));
            const double t = now_s() - t0;
            double l = -1, ref = -1;
            t0 = now_s();
            CHECK_OK(tcq_quant_proxy_on(q, W, What, R, C, axis, H, &l, &ref));
            printf("perf: axis %d, scale search %d, %d pass(es)%s: %.2f s (the proxy after it %.2f s; relative %.5f)\n",
                   axis, runs[i][0], runs[i][1], runs[i][2] ? ", refit" : "", t, now_s() - t0, l / ref);
            fflush(stdout);
        }
        free(H);
    }
    free(W), free(What), free(codes), free(scales);
    tcq_pool_free(pool);
    tcq_qla_free(q);
    tcq_cuda_ctx_free(ctx);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--perf")) {
        perf(argc > 2 ? atoll(argv[2]) : 17408, argc > 3 ? atoll(argv[3]) : 5120, argc > 4 ? atoi(argv[4]) : 0);
        return test_done("test_quant_qla --perf");
    }
    uint64_t st = test_seed();
    check_all(&st, NULL);
    /* a CUDA build with a device (tests/cuda/quantize-ldlq-on-device.sh runs it there): the same
     * checks on cuBLAS, the LDLQ one with the GPU encoder */
    tcq_cuda_ctx *ctx = NULL;
    if (tcq_cuda_ctx_create(0, &ctx) == TCQ_OK) {
        fprintf(stderr, "the same on the GPU:\n");
        check_all(&st, ctx);
        tcq_cuda_ctx_free(ctx);
    } else {
        fprintf(stderr, "no GPU (%s): the host emulation only\n", tcq_last_error());
        tcq_error_clear();
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cal_dir);
    if (strchr(cal_dir, 'X') == NULL && system(cmd)) fprintf(stderr, "cleanup of %s failed\n", cal_dir);
    return test_done("test_quant_qla");
}
