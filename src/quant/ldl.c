/* Block LDL of a damped Hessian, from its Cholesky factor: H = C C^T (C lower) gives
 * H = L D L^T with D_b = C_bb C_bb^T and L_jb = C_jb C_bb^-1 (L unit lower block triangular).
 * Double throughout: H of a calibration set is ill conditioned (the damping is what keeps it
 * positive definite), and f32 loses the small pivots. */
#include "quant.h"

#include <math.h>
#include <string.h>

tcq_status tcq_quant_cholesky(double *A, int64_t m)
{
    for (int64_t j = 0; j < m; j++) {
        double *aj = A + j * m;
        double d = aj[j];
        for (int64_t k = 0; k < j; k++) d -= aj[k] * aj[k];
        if (!(d > 0) || !isfinite(d))
            return tcq_fail(TCQ_ERR_INVALID_ARG, "cholesky: pivot %lld is %g: the matrix is not positive definite",
                            (long long)j, d);
        const double cjj = sqrt(d);
        aj[j] = cjj;
        for (int64_t i = j + 1; i < m; i++) {
            double *ai = A + i * m;
            double s = ai[j];
            for (int64_t k = 0; k < j; k++) s -= ai[k] * aj[k];
            ai[j] = s / cjj;
        }
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = i + 1; j < m; j++) A[i * m + j] = 0;
    return TCQ_OK;
}

tcq_status tcq_quant_block_ldl(const double *H, int64_t m, int b, double *L, double *D)
{
    if (!H || !L || !D || m <= 0 || b <= 0 || m % b)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "block LDL: size %lld, block %d", (long long)m, b);
    memcpy(L, H, (size_t)(m * m) * sizeof *L);
    TCQ_TRY(tcq_quant_cholesky(L, m));
    /* D_b = C_bb C_bb^T; then every block row j >= b of column block b times C_bb^-1, solved
     * row by row (x C_bb = c: forward over the columns of the lower triangle, from the last). */
    double *cbb = malloc((size_t)b * b * sizeof *cbb);
    if (!cbb) return tcq_fail(TCQ_ERR_NOMEM, "block LDL: %d x %d block", b, b);
    for (int64_t b0 = 0; b0 < m; b0 += b) {
        for (int r = 0; r < b; r++)
            for (int c = 0; c < b; c++) cbb[r * b + c] = L[(b0 + r) * m + b0 + c];
        double *Db = D + b0 * b;   /* D [m/b][b][b] */
        for (int r = 0; r < b; r++)
            for (int c = 0; c < b; c++) {
                double s = 0;
                for (int k = 0; k <= TCQ_MIN(r, c); k++) s += cbb[r * b + k] * cbb[c * b + k];
                Db[r * b + c] = s;
            }
        for (int64_t i = b0; i < m; i++) {
            double *x = L + i * m + b0;   /* row i, columns of block b0: x <- x C_bb^-1 */
            for (int c = b - 1; c >= 0; c--) {
                double s = x[c];
                for (int k = c + 1; k < b; k++) s -= x[k] * cbb[k * b + c];
                x[c] = s / cbb[c * b + c];
            }
        }
    }
    free(cbb);
    return TCQ_OK;
}
