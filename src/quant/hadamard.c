/* Hadamard transforms for incoherence processing: Sylvester (powers of two) through the fast
 * Walsh-Hadamard transform, Paley I/II matrices for the other factors, and their Kronecker
 * product H = H_m (x) H_b for n = m * b.  R = diag(signs) H / sqrt(n).
 *
 * With a vector laid out as X [m, b] (index i*b + j), (A (x) B) x is A X B^T, so a transform is
 * an FWHT of each of the m rows of X followed by one dense m x m mix across them.  Sums are in
 * double and rounded to f32 once, which keeps R^T R = I to f32 precision. */
#include "../core/internal.h"

#include <math.h>
#include <string.h>

struct tcq_hadamard {
    int64_t n, b;        /* n = m * b, b a power of two */
    int m;
    int8_t *A;           /* [m, m] the Paley factor (NULL when m == 1) */
    float *signs;        /* [n] +-1 */
};

enum { MAX_FACTOR = 2048 };

static int is_prime(int64_t q)
{
    if (q < 2) return 0;
    for (int64_t d = 2; d * d <= q; d++)
        if (q % d == 0) return 0;
    return 1;
}

/* Quadratic character mod a prime q: 0, 1 or -1. */
static int chi(int64_t a, int64_t q)
{
    a %= q;
    if (a < 0) a += q;
    if (a == 0) return 0;
    /* Euler's criterion: a^((q-1)/2) mod q. */
    int64_t r = 1, base = a, e = (q - 1) / 2;
    while (e) {
        if (e & 1) r = r * base % q;
        base = base * base % q;
        e >>= 1;
    }
    return r == 1 ? 1 : -1;
}

/* 1: Paley I (m-1 prime, = 3 mod 4), 2: Paley II (m/2-1 prime, = 1 mod 4), 0: neither. */
static int paley_kind(int64_t m)
{
    if (m < 4 || m > MAX_FACTOR || m % 4) return 0;
    if (is_prime(m - 1) && (m - 1) % 4 == 3) return 1;
    if (is_prime(m / 2 - 1) && (m / 2 - 1) % 4 == 1) return 2;
    return 0;
}

static int is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

/* The factor m of n (1 for a power of two), or 0 if no construction here covers n. */
static int choose_factor(int64_t n)
{
    if (n <= 0 || n > (1ll << 30)) return 0;
    if (is_pow2(n)) return 1;
    int a = 0;
    while (!((n >> a) & 1)) a++;
    const int64_t o = n >> a;
    for (int j = 2; j <= a; j++) {
        const int64_t m = o << j;
        if (m > MAX_FACTOR) break;
        if (paley_kind(m)) return (int)m;
    }
    return 0;
}

int tcq_hadamard_supported(int64_t n) { return choose_factor(n) != 0; }

static void sylvester(int m, int8_t *H)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) H[i * m + j] = (__builtin_popcount((unsigned)(i & j)) & 1) ? -1 : 1;
}

/* Paley I: H = I + [[0, 1^T], [-1, Q]], Q[i][j] = chi(j - i), order q + 1. */
static void paley1(int m, int8_t *H)
{
    const int q = m - 1;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            int v;
            if (i == 0) v = j == 0 ? 0 : 1;
            else if (j == 0) v = -1;
            else v = chi((int64_t)(j - i), q);
            H[i * m + j] = (int8_t)(v + (i == j));
        }
}

/* Paley II: H = S (x) [[1,-1],[-1,-1]] + I (x) [[1,1],[1,-1]] with S = [[0, 1^T], [1, Q]] the
 * symmetric conference matrix of order q + 1 = m / 2. */
static void paley2(int m, int8_t *H)
{
    const int c = m / 2, q = c - 1;
    static const int P[2][2] = {{1, -1}, {-1, -1}}, E[2][2] = {{1, 1}, {1, -1}};
    for (int i = 0; i < c; i++)
        for (int j = 0; j < c; j++) {
            int s;
            if (i == j) s = 0;
            else if (i == 0 || j == 0) s = 1;
            else s = chi((int64_t)(j - i), q);
            for (int u = 0; u < 2; u++)
                for (int v = 0; v < 2; v++)
                    H[(2 * i + u) * m + 2 * j + v] = (int8_t)(i == j ? E[u][v] : s * P[u][v]);
        }
}

static int check_orthogonal(int m, const int8_t *H)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            int d = 0;
            for (int t = 0; t < m; t++) d += H[i * m + t] * H[j * m + t];
            if (d != (i == j ? m : 0)) return 0;
        }
    return 1;
}

tcq_status tcq_hadamard_matrix(int m, int8_t *H)
{
    if (!H) return tcq_fail(TCQ_ERR_INVALID_ARG, "hadamard_matrix: NULL output");
    if (is_pow2(m) && m <= MAX_FACTOR) sylvester(m, H);
    else if (paley_kind(m) == 1) paley1(m, H);
    else if (paley_kind(m) == 2) paley2(m, H);
    else
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "no Hadamard matrix of order %d here (powers of two up "
                        "to %d and Paley orders only)", m, MAX_FACTOR);
    /* Cheap insurance against a wrong construction: m^3 <= 8e9 only for orders nobody uses. */
    if (m <= 256 && !check_orthogonal(m, H))
        return tcq_fail(TCQ_ERR_INTERNAL, "Hadamard matrix of order %d is not orthogonal", m);
    return TCQ_OK;
}

static uint64_t splitmix(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

tcq_status tcq_hadamard_create(int64_t n, int randomized, uint64_t seed, tcq_hadamard **out)
{
    if (!out) return tcq_fail(TCQ_ERR_INVALID_ARG, "hadamard_create: NULL output");
    *out = NULL;
    const int m = choose_factor(n);
    if (!m)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "no Hadamard transform of size %lld: need m * 2^a with m "
                        "1 or a Paley order (12, 20, 28, 36, 44, ...)", (long long)n);
    tcq_hadamard *h = calloc(1, sizeof *h);
    if (!h) return tcq_fail(TCQ_ERR_NOMEM, "hadamard_create(%lld)", (long long)n);
    h->n = n;
    h->m = m;
    h->b = n / m;
    h->signs = tcq_amalloc((size_t)n * sizeof(float));
    if (m > 1) h->A = malloc((size_t)m * (size_t)m);
    if (!h->signs || (m > 1 && !h->A)) {
        tcq_hadamard_free(h);
        return tcq_fail(TCQ_ERR_NOMEM, "hadamard_create(%lld)", (long long)n);
    }
    if (m > 1) {
        tcq_status s = tcq_hadamard_matrix(m, h->A);
        if (s != TCQ_OK) {
            tcq_hadamard_free(h);
            return s;
        }
    }
    uint64_t st = seed;
    for (int64_t i = 0; i < n; i++) h->signs[i] = (!randomized || (splitmix(&st) >> 63) == 0) ? 1.0f : -1.0f;
    *out = h;
    return TCQ_OK;
}

void tcq_hadamard_free(tcq_hadamard *h)
{
    if (!h) return;
    free(h->A);
    tcq_afree(h->signs);
    free(h);
}

int64_t tcq_hadamard_size(const tcq_hadamard *h) { return h ? h->n : 0; }
int tcq_hadamard_factor(const tcq_hadamard *h) { return h ? h->m : 0; }

static void fwht(double *x, int64_t b)
{
    for (int64_t len = 1; len < b; len <<= 1)
        for (int64_t i = 0; i < b; i += len << 1)
            for (int64_t j = i; j < i + len; j++) {
                const double u = x[j], v = x[j + len];
                x[j] = u + v;
                x[j + len] = u - v;
            }
}

/* x R (inverse 0) or x R^T (inverse 1) of one row; buf holds 2n doubles. */
static void transform_row(const tcq_hadamard *h, float *x, int inverse, double *buf)
{
    const int64_t n = h->n, b = h->b;
    const int m = h->m;
    double *u = buf, *v = buf + n;
    const double norm = 1.0 / sqrt((double)n);
    /* x R = (R^T x^T)^T = H^T (s o x) / sqrt(n);  x R^T = R x = s o (H x) / sqrt(n). */
    for (int64_t i = 0; i < n; i++) u[i] = inverse ? (double)x[i] : (double)x[i] * h->signs[i];
    for (int i = 0; i < m; i++) fwht(u + i * b, b);
    if (m > 1) {
        memset(v, 0, (size_t)n * sizeof *v);
        for (int i = 0; i < m; i++)
            for (int k = 0; k < m; k++) {
                const int a = inverse ? h->A[i * m + k] : h->A[k * m + i];
                double *dst = v + i * b;
                const double *src = u + k * b;
                if (a > 0)
                    for (int64_t j = 0; j < b; j++) dst[j] += src[j];
                else
                    for (int64_t j = 0; j < b; j++) dst[j] -= src[j];
            }
        u = v;
    }
    for (int64_t i = 0; i < n; i++) x[i] = (float)(inverse ? u[i] * norm * h->signs[i] : u[i] * norm);
}

typedef struct rows_job {
    const tcq_hadamard *h;
    float *X;
    int64_t rows;
    int inverse;
    double *scratch;     /* [threads, 2n] */
} rows_job;

enum { ROWS_PER_ITEM = 8 };

static void rows_item(void *arg, int64_t item, int thread)
{
    rows_job *j = arg;
    double *buf = j->scratch + (size_t)thread * 2 * (size_t)j->h->n;
    const int64_t r1 = TCQ_MIN(j->rows, (item + 1) * ROWS_PER_ITEM);
    for (int64_t r = item * ROWS_PER_ITEM; r < r1; r++) transform_row(j->h, j->X + r * j->h->n, j->inverse, buf);
}

tcq_status tcq_hadamard_rows(const tcq_hadamard *h, float *X, int64_t rows, int inverse, tcq_pool *pool)
{
    if (!h || (!X && rows > 0)) return tcq_fail(TCQ_ERR_INVALID_ARG, "hadamard_rows: NULL argument");
    if (rows < 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "hadamard_rows: rows=%lld", (long long)rows);
    if (rows == 0) return TCQ_OK;
    const int nt = tcq_pool_size(pool);
    rows_job j = {h, X, rows, inverse, malloc((size_t)nt * 2 * (size_t)h->n * sizeof(double))};
    if (!j.scratch) return tcq_fail(TCQ_ERR_NOMEM, "hadamard_rows: scratch for %d threads", nt);
    tcq_pool_run(pool, (rows + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM, rows_item, &j);
    free(j.scratch);
    return TCQ_OK;
}

tcq_status tcq_hadamard_dense(const tcq_hadamard *h, float *R)
{
    if (!h || !R) return tcq_fail(TCQ_ERR_INVALID_ARG, "hadamard_dense: NULL argument");
    const int64_t n = h->n, b = h->b;
    const double norm = 1.0 / sqrt((double)n);
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < n; c++) {
            const int a = h->m > 1 ? h->A[(r / b) * h->m + c / b] : 1;
            const int s = (__builtin_popcountll((unsigned long long)((r % b) & (c % b))) & 1) ? -1 : 1;
            R[r * n + c] = (float)(h->signs[r] * a * s * norm);
        }
    return TCQ_OK;
}
