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
    return tcq_quant_block_ldl_on(NULL, H, m, b, L, D);
}

tcq_status tcq_quant_block_ldl_on(tcq_qla *qla, const double *H, int64_t m, int b, double *L, double *D)
{
    if (!H || !L || !D || m <= 0 || b <= 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "block LDL: size %lld, block %d", (long long)m, b);
    if (L != H) memcpy(L, H, (size_t)(m * m) * sizeof *L);   /* L == H: in place */
    /* the factor is the O(m^3) part (a 14B down projection: m = 17408, 1.8 Tflop); the per-block
     * finish below is O(m^2 b) */
    TCQ_TRY(qla ? tcq_qla_cholesky(qla, L, m) : tcq_quant_cholesky(L, m));
    if (qla && b == 1) {
        /* blocks of one (axis 0, m up to the FFN width): D_i = C_ii^2, L_ij = C_ij / C_jj, row by
         * row; the loop below would walk each column of the m x m factor with stride m */
        for (int64_t i = 0; i < m; i++) D[i] = L[i * m + i] * L[i * m + i];
        for (int64_t i = 0; i < m; i++) {
            double *Li = L + i * m;
            for (int64_t j = 0; j < i; j++) Li[j] /= L[j * m + j];
        }
        for (int64_t i = 0; i < m; i++) L[i * m + i] = 1;
        return TCQ_OK;
    }
    /* per block: D_b = C_bb C_bb^T, then L's column block = C's column block times C_bb^-1; the
     * blocks of b from the last row, the first one of m mod b where b does not divide m */
    double *cbb = malloc((size_t)b * b * sizeof *cbb);
    if (!cbb) return tcq_fail(TCQ_ERR_NOMEM, "block LDL: %d x %d block", b, b);
    for (int64_t b0 = 0, n = m % b ? m % b : b; b0 < m; b0 += n, n = b) {
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) cbb[r * n + c] = L[(b0 + r) * m + b0 + c];
        double *Db = D + b0 * b;   /* n x n */
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) {
                double s = 0;
                for (int64_t k = 0; k <= TCQ_MIN(r, c); k++) s += cbb[r * n + k] * cbb[c * n + k];
                Db[r * n + c] = s;
            }
        /* rows b0.. of column block b0 times C_bb^-1 (its diagonal block becomes exactly I) */
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)(m - b0), (int)n, 1.0, cbb,
                    (int)n, L + b0 * m + b0, (int)m);
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) L[(b0 + r) * m + b0 + c] = r == c;
    }
    free(cbb);
    return TCQ_OK;
}
