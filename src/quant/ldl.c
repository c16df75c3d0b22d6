/* Block LDL of a damped Hessian, from its Cholesky factor: H = C C^T (C lower) gives
 * H = L D L^T with D_b = C_bb C_bb^T and L_jb = C_jb C_bb^-1 (L unit lower block triangular).
 * Double throughout: H of a calibration set is ill conditioned (the damping is what keeps it
 * positive definite), and f32 loses the small pivots. */
#include "quant.h"
#include "qla.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* LAPACK's (OpenBLAS, one thread: the kernel context pins it, and results must not depend on
 * a thread count).  A row-major lower factor is a column-major upper one. */
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);

tcq_status tcq_quant_cholesky(double *A, int64_t m)
{
    if (m <= 0 || m > INT32_MAX) return tcq_fail(TCQ_ERR_INVALID_ARG, "cholesky: size %lld", (long long)m);
    openblas_set_num_threads(1);
    const int n = (int)m;
    int info = 0;
    dpotrf_("U", &n, A, &n, &info);
    if (info > 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cholesky: leading minor %d is not positive: the matrix is not "
                        "positive definite", info);
    if (info < 0) return tcq_fail(TCQ_ERR_INTERNAL, "cholesky: dpotrf argument %d", -info);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = i + 1; j < m; j++) A[i * m + j] = 0;
    return TCQ_OK;
}

tcq_status tcq_quant_block_ldl(const double *H, int64_t m, int b, double *L, double *D)
{
    return tcq_quant_block_ldl_on(NULL, NULL, H, m, b, L, D);
}

/* The per-block finish below, on the pool: rows in chunks of LDL_ROWS, each chunk one item that
 * owns its rows (every block's solve on them, then its diagonal block's I).  A row's solve is the
 * same DTRSM as one call over all of a column block's rows would do on it (OpenBLAS solves the
 * rows independently: checked bit for bit on random row splits with its Haswell, SkylakeX,
 * Cooperlake, Sandybridge and Prescott kernels), so any thread count gives the bits of one call
 * per block.  A chunk is a band of whole rows: the walk no longer strides down a column block. */
#define LDL_ROWS 256

typedef struct ldl_job {
    double *L, *diag;
    const double *cb;         /* every block's C_bb, n x n at cb + b0 * b */
    int64_t m, b, n0, chunks; /* n0: the first block's rows (m mod b, or b) */
} ldl_job;

static void ldl_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const ldl_job *j = arg;
    const int64_t m = j->m, c = j->chunks - 1 - item;   /* the longest rows (most blocks) first */
    const int64_t r0 = c * LDL_ROWS, r1 = TCQ_MIN(m, r0 + LDL_ROWS);
    double *L = j->L;
    if (j->diag) {   /* blocks of one: L_ij = C_ij / C_jj */
        for (int64_t i = r0; i < r1; i++) {
            double *Li = L + i * m;
            for (int64_t k = 0; k < i; k++) Li[k] /= j->diag[k];
            Li[i] = 1;
        }
        return;
    }
    for (int64_t b0 = 0, n = j->n0; b0 < r1; b0 += n, n = j->b) {
        const int64_t lo = TCQ_MAX(r0, b0);
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)(r1 - lo), (int)n, 1.0,
                    j->cb + b0 * j->b, (int)n, L + lo * m + b0, (int)m);
        for (int64_t r = lo; r < TCQ_MIN(r1, b0 + n); r++)   /* the diagonal block: exactly I */
            for (int64_t k = 0; k < n; k++) L[r * m + b0 + k] = r - b0 == k;
    }
}

tcq_status tcq_quant_block_ldl_on(tcq_qla *qla, tcq_pool *pool, const double *H, int64_t m, int b, double *L,
                                  double *D)
{
    if (!H || !L || !D || m <= 0 || b <= 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "block LDL: size %lld, block %d", (long long)m, b);
    if (L != H) memcpy(L, H, (size_t)(m * m) * sizeof *L);   /* L == H: in place */
    /* the factor is the O(m^3) part (a 14B down projection: m = 17408, 1.8 Tflop); the per-block
     * finish below is O(m^2 b) */
    TCQ_TRY(qla ? tcq_qla_cholesky(qla, L, m) : tcq_quant_cholesky(L, m));
    ldl_job j = {L, NULL, NULL, m, b, m % b ? m % b : b, (m + LDL_ROWS - 1) / LDL_ROWS};
    if (qla && b == 1) {
        /* blocks of one (axis 0, m up to the FFN width): D_i = C_ii^2, L_ij = C_ij / C_jj, row by
         * row; the blocked finish would walk each column of the m x m factor with stride m */
        double *diag = malloc((size_t)m * sizeof *diag);
        if (!diag) return tcq_fail(TCQ_ERR_NOMEM, "block LDL: %lld pivots", (long long)m);
        for (int64_t i = 0; i < m; i++) {
            diag[i] = L[i * m + i];
            D[i] = diag[i] * diag[i];
        }
        j.diag = diag;
        tcq_pool_run(pool, j.chunks, ldl_item, &j);
        free(diag);
        return TCQ_OK;
    }
    /* per block: D_b = C_bb C_bb^T, then L's column block = C's column block times C_bb^-1; the
     * blocks of b from the last row, the first one of m mod b where b does not divide m */
    double *cb = malloc((size_t)(m * b) * sizeof *cb);
    if (!cb) return tcq_fail(TCQ_ERR_NOMEM, "block LDL: %lld x %d blocks", (long long)m, b);
    for (int64_t b0 = 0, n = j.n0; b0 < m; b0 += n, n = b) {
        double *cbb = cb + b0 * b, *Db = D + b0 * b;   /* n x n each */
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) cbb[r * n + c] = L[(b0 + r) * m + b0 + c];
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) {
                double s = 0;
                for (int64_t k = 0; k <= TCQ_MIN(r, c); k++) s += cbb[r * n + k] * cbb[c * n + k];
                Db[r * n + c] = s;
            }
    }
    j.cb = cb;
    tcq_pool_run(pool, j.chunks, ldl_item, &j);
    free(cb);
    return TCQ_OK;
}
