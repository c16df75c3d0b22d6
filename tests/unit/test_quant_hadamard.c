/* Hadamard transforms: matrices are orthogonal, the fast transform equals the explicit dense
 * matrix, R^T R = I on random vectors at the sizes models use, Kronecker factors, errors. */
#include "test.h"

static void test_matrices(void)
{
    static const int orders[] = {1, 2, 4, 8, 12, 20, 24, 28, 36, 44, 60, 64, 68, 76, 84, 108};
    for (size_t oi = 0; oi < sizeof orders / sizeof orders[0]; oi++) {
        const int m = orders[oi];
        int8_t *H = malloc((size_t)m * m);
        tcq_status s = tcq_hadamard_matrix(m, H);
        CHECK(s == TCQ_OK, "order %d: %s", m, tcq_last_error());
        if (s == TCQ_OK) {
            int bad = 0;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < m; j++) {
                    int d = 0;
                    for (int t = 0; t < m; t++) {
                        if (H[i * m + t] != 1 && H[i * m + t] != -1) bad++;
                        d += H[i * m + t] * H[j * m + t];
                    }
                    if (d != (i == j ? m : 0)) bad++;
                }
            CHECK(bad == 0, "order %d: H H^T != m I (%d bad entries)", m, bad);
        }
        free(H);
    }
    int8_t H[52 * 52];
    CHECK(tcq_hadamard_matrix(52, H) == TCQ_ERR_UNSUPPORTED, "52 has no Paley construction");
    CHECK(tcq_hadamard_matrix(6, H) == TCQ_ERR_UNSUPPORTED, "no Hadamard matrix of order 6");
}

/* Fast transform vs x R with the explicit R, both directions, in double. */
static void test_dense(int64_t n, int randomized, uint64_t *st)
{
    tcq_hadamard *h = NULL;
    CHECK_OK(tcq_hadamard_create(n, randomized, test_rand(st), &h));
    if (!h) return;
    float *R = malloc((size_t)(n * n) * sizeof *R);
    CHECK_OK(tcq_hadamard_dense(h, R));
    /* R^T R = I exactly in double up to the f32 rounding of the entries. */
    double maxo = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double d = 0;
            for (int64_t t = 0; t < n; t++) d += (double)R[t * n + i] * R[t * n + j];
            maxo = fmax(maxo, fabs(d - (i == j)));
        }
    CHECK(maxo < 1e-6, "n=%lld: dense R^T R - I max %g", (long long)n, maxo);
    const int rows = 5;
    float *X = malloc((size_t)(rows * n) * sizeof *X), *Y = malloc((size_t)(rows * n) * sizeof *Y);
    for (int64_t i = 0; i < rows * n; i++) X[i] = (float)test_gauss(st);
    for (int inv = 0; inv < 2; inv++) {
        memcpy(Y, X, (size_t)(rows * n) * sizeof *X);
        CHECK_OK(tcq_hadamard_rows(h, Y, rows, inv, NULL));
        double maxd = 0;
        for (int r = 0; r < rows; r++)
            for (int64_t c = 0; c < n; c++) {
                double ref = 0;
                for (int64_t t = 0; t < n; t++)
                    ref += (double)X[r * n + t] * (inv ? R[c * n + t] : R[t * n + c]);
                maxd = fmax(maxd, fabs(ref - Y[r * n + c]));
            }
        CHECK(maxd < 2e-6, "n=%lld inverse=%d: fast vs dense max |diff| %g", (long long)n, inv, maxd);
    }
    free(X);
    free(Y);
    free(R);
    tcq_hadamard_free(h);
}

/* Large sizes: norms preserved, R^T R x = x, thread count does not change the bits. */
static void test_orthogonal(int64_t n, int expect_m, uint64_t *st, tcq_pool *pool)
{
    tcq_hadamard *h = NULL;
    CHECK_OK(tcq_hadamard_create(n, 1, test_rand(st), &h));
    if (!h) return;
    CHECK(tcq_hadamard_factor(h) == expect_m, "n=%lld: factor %d, expected %d", (long long)n,
          tcq_hadamard_factor(h), expect_m);
    const int rows = 20;
    float *X = malloc((size_t)(rows * n) * sizeof *X), *Y = malloc((size_t)(rows * n) * sizeof *Y);
    float *Z = malloc((size_t)(rows * n) * sizeof *Z);
    for (int64_t i = 0; i < rows * n; i++) X[i] = (float)test_gauss(st);
    memcpy(Y, X, (size_t)(rows * n) * sizeof *X);
    memcpy(Z, X, (size_t)(rows * n) * sizeof *X);
    CHECK_OK(tcq_hadamard_rows(h, Y, rows, 0, NULL));
    CHECK_OK(tcq_hadamard_rows(h, Z, rows, 0, pool));
    CHECK(memcmp(Y, Z, (size_t)(rows * n) * sizeof *X) == 0, "n=%lld: pool changes the result", (long long)n);
    double maxn = 0, maxr = 0, maxabs = 0;
    for (int r = 0; r < rows; r++) {
        double a = 0, b = 0;
        for (int64_t c = 0; c < n; c++) {
            a += (double)X[r * n + c] * X[r * n + c];
            b += (double)Y[r * n + c] * Y[r * n + c];
            maxabs = fmax(maxabs, fabs(Y[r * n + c]));
        }
        maxn = fmax(maxn, fabs(sqrt(b / a) - 1));
    }
    CHECK_OK(tcq_hadamard_rows(h, Y, rows, 1, pool));
    for (int64_t i = 0; i < rows * n; i++) maxr = fmax(maxr, fabs(Y[i] - X[i]));
    CHECK(maxn < 1e-6, "n=%lld: norm ratio off by %g", (long long)n, maxn);
    CHECK(maxr < 1e-5, "n=%lld: R R^T x - x max %g", (long long)n, maxr);
    /* Gaussian input stays Gaussian-sized (no blow-up from a wrong normalization). */
    CHECK(maxabs < 7, "n=%lld: max |x R| %g", (long long)n, maxabs);
    free(X);
    free(Y);
    free(Z);
    tcq_hadamard_free(h);
}

/* Kronecker: the m*b transform of a vector equals H_m (x) H_b built from the factor matrices. */
static void test_kronecker(int m, int b, uint64_t *st)
{
    const int n = m * b;
    tcq_hadamard *h = NULL;
    CHECK_OK(tcq_hadamard_create(n, 0, 0, &h));
    if (!h) return;
    CHECK(tcq_hadamard_factor(h) == m, "n=%d factor %d", n, tcq_hadamard_factor(h));
    int8_t *A = malloc((size_t)m * m), *B = malloc((size_t)b * b);
    CHECK_OK(tcq_hadamard_matrix(m, A));
    CHECK_OK(tcq_hadamard_matrix(b, B));
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int i = 0; i < n; i++) x[i] = (float)test_gauss(st);
    memcpy(y, x, (size_t)n * sizeof *x);
    CHECK_OK(tcq_hadamard_rows(h, y, 1, 1, NULL));   /* unrandomized inverse: H x / sqrt(n) */
    double maxd = 0;
    for (int r = 0; r < n; r++) {
        double ref = 0;
        for (int c = 0; c < n; c++) ref += (double)A[(r / b) * m + c / b] * B[(r % b) * b + c % b] * x[c];
        maxd = fmax(maxd, fabs(ref / sqrt((double)n) - y[r]));
    }
    CHECK(maxd < 2e-6, "kron %d x %d: max diff %g", m, b, maxd);
    free(A);
    free(B);
    free(x);
    free(y);
    tcq_hadamard_free(h);
}

int main(void)
{
    uint64_t st = test_seed();
    test_matrices();
    static const int64_t small[] = {1, 2, 8, 12, 20, 24, 28, 40, 48, 64, 80};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        test_dense(small[i], 1, &st);
        test_dense(small[i], 0, &st);
    }
    tcq_pool *pool = NULL;
    CHECK_OK(tcq_pool_create(3, &pool));
    test_orthogonal(512, 1, &st, pool);
    test_orthogonal(1536, 12, &st, pool);
    test_orthogonal(2560, 20, &st, pool);
    test_orthogonal(3072, 12, &st, pool);
    test_orthogonal(5120, 20, &st, pool);
    test_orthogonal(4096, 1, &st, pool);
    test_orthogonal(3584, 28, &st, pool);   /* 7 * 512: Paley II of order 28 */
    tcq_pool_free(pool);
    test_kronecker(12, 16, &st);
    test_kronecker(20, 8, &st);
    test_kronecker(28, 4, &st);
    /* Same seed, same signs; different seed, different signs. */
    tcq_hadamard *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tcq_hadamard_create(256, 1, 7, &a));
    CHECK_OK(tcq_hadamard_create(256, 1, 7, &b));
    CHECK_OK(tcq_hadamard_create(256, 1, 8, &c));
    if (a && b && c) {
        /* A dense input: x R depends on every sign. */
        float rx[256], rb[256], rc[256];
        for (int i = 0; i < 256; i++) rx[i] = rb[i] = rc[i] = (float)test_gauss(&st);
        CHECK_OK(tcq_hadamard_rows(a, rx, 1, 0, NULL));
        CHECK_OK(tcq_hadamard_rows(b, rb, 1, 0, NULL));
        CHECK_OK(tcq_hadamard_rows(c, rc, 1, 0, NULL));
        CHECK(memcmp(rx, rb, sizeof rx) == 0, "same seed gives different transforms");
        CHECK(memcmp(rx, rc, sizeof rx) != 0, "different seeds give the same transform");
    }
    tcq_hadamard_free(a);
    tcq_hadamard_free(b);
    tcq_hadamard_free(c);
    /* Unsupported sizes fail with a message, never crash. */
    static const int64_t bad[] = {0, -4, 3, 6, 10, 52, 100, 1ll << 31};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tcq_hadamard *h = (tcq_hadamard *)&st;
        tcq_status s = tcq_hadamard_create(bad[i], 1, 1, &h);
        CHECK(s == TCQ_ERR_UNSUPPORTED && h == NULL && *tcq_last_error(), "n=%lld: %s",
              (long long)bad[i], tcq_status_str(s));
        CHECK(!tcq_hadamard_supported(bad[i]), "n=%lld claimed supported", (long long)bad[i]);
    }
    CHECK(tcq_hadamard_supported(5120) && tcq_hadamard_supported(1536) && tcq_hadamard_supported(896),
          "common model sizes");
    return test_done("test_quant_hadamard");
}
