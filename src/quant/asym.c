/* The asymmetric calibration's target (GPTAQ, arXiv 2504.02692).  Sequential calibration gives a
 * projection's Hessian H = sum x x^T of its inputs x in the partly coded model; the input model
 * feeds it x_fp instead.  GPTQ / BlockLDLQ on H minimise ||(W - Wq) X||^2: they reproduce what the
 * unquantized layer would do on the coded model's inputs.  GPTAQ asks for what the input model
 * does on its own: ||W X_fp - Wq X||^2.  With dX = X_fp - X and C = dX X^T = sum (x_fp - x) x^T,
 *   ||W X + W dX - Wq X||^2 = ||(W' - Wq) X||^2 + ||W dX (I - P_X)||^2,  W' = W + W C H^-1,
 * (W' X is W X_fp's projection onto X's rows), so BlockLDLQ on H with the target W' solves it
 * unchanged.  H is damped as BlockLDLQ damps it; the solve is by its Cholesky factor.
 * alpha scales the correction, W + alpha W C Hd^-1: GPTAQ's published code takes 0.25 of it (its
 * `alpha`); the whole of it over-corrects on tinyqwen (k = 3 KL, the layer's statistics taken
 * once: +6 % against no correction at alpha 1, -5 % at 0.25; docs/PERFORMANCE.md). */
#include "quant.h"

#include <cblas.h>

tcq_status tcq_quant_asym_target(const double *H, const double *Cx, int64_t m, double damp, double alpha, float *rows,
                                 int64_t R, int64_t C, int axis)
{
    if ((axis ? C : R) != m) return tcq_fail(TCQ_ERR_INTERNAL, "asymmetric target: H of %lld for %lld inputs",
                                             (long long)m, (long long)(axis ? C : R));
    /* A: the weights input-major [m, n] (axis 0: the stored rows; axis 1: W^T), then
     * A' = A + alpha Hd^-1 C^T A, the transposed W' = W + alpha W C Hd^-1. */
    const int64_t n = axis ? R : C;
    double *L = malloc((size_t)(m * m) * sizeof *L), *A = malloc((size_t)(m * n) * sizeof *A),
           *G = malloc((size_t)(m * n) * sizeof *G);
    tcq_status s = L && A && G ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "asymmetric target of [%lld, %lld]", (long long)R,
                                                   (long long)C);
    if (s == TCQ_OK) s = tcq_quant_damp(H, m, damp, L);
    if (s == TCQ_OK) s = tcq_quant_cholesky(L, m);
    if (s == TCQ_OK) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) A[i * n + j] = axis ? rows[j * C + i] : rows[i * C + j];
        /* G = alpha C^T A, then G <- Hd^-1 G by the two triangular solves of Hd = L L^T */
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)m, alpha, Cx, (int)m, A, (int)n, 0.0, G,
                    (int)n);
        cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (int)m, (int)n, 1.0, L, (int)m, G,
                    (int)n);
        cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (int)m, (int)n, 1.0, L, (int)m, G,
                    (int)n);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                float *w = axis ? &rows[j * C + i] : &rows[i * C + j];
                *w = (float)(A[i * n + j] + G[i * n + j]);
            }
    }
    free(L);
    free(A);
    free(G);
    return s;
}
