/* The quantizer's dense linear algebra on a GPU (quantize --device cuda with a calibration):
 * the Hessians' rank-M updates, the Cholesky factor behind the block LDL, the feedback products
 * of BlockLDLQ and its passes, the proxy loss.  The algorithms stay in calib.c / ldl.c / ldlq.c /
 * ldlq_pass.c, written against host arrays; a tcq_qla only moves their large products.
 *
 * Mirrors: a host array registered with tcq_qla_mirror has a device copy; an operand of
 * tcq_qla_dgemm / _sgemm that lies inside a mirror is read from (or, the output, written to) that
 * copy, any other operand is staged (copied up; the output copied back).  Host and device copies
 * are kept in step only by tcq_qla_push (host -> device) and tcq_qla_pull (device -> host) of a
 * rectangle: a caller that changes a mirrored array on one side says so.
 *
 * Backends: a CUDA context (cuBLAS on its stream, qla_cuda.cu), or NULL: the same operations on
 * host memory with CBLAS (column-major, cuBLAS' argument order), "device" copies included, so a
 * missing push / pull changes the result on the host as it would on the GPU (the unit test
 * test_quant_qla runs the GPU branches of the algorithms this way).
 *
 * Numerical contract: double products in double (cuBLAS DGEMM / DSYRK / DTRSM: FMA, its own
 * summation order), float ones in float (pedantic math: no TF32); so results match the CPU path
 * to rounding, not bit for bit, and are the same run to run (one stream, no atomics). */
#ifndef TCQ_QLA_H
#define TCQ_QLA_H

#include "../core/internal.h"

typedef struct tcq_qla tcq_qla;

/* ctx NULL: the host emulation. */
tcq_status tcq_qla_create(tcq_cuda_ctx *ctx, tcq_qla **out);
void tcq_qla_free(tcq_qla *q);
/* 1 when the backend is a GPU. */
int tcq_qla_on_gpu(const tcq_qla *q);
/* DGEMM / SGEMM calls so far (tests: which products went to the backend). */
int64_t tcq_qla_gemms(const tcq_qla *q);

/* Register host array h of `bytes` and copy it up (zero: the device copy starts zeroed, nothing
 * is copied).  A second registration of the same h is refused. */
tcq_status tcq_qla_mirror(tcq_qla *q, const void *h, size_t bytes, int zero);
void tcq_qla_unmirror(tcq_qla *q, const void *h);
/* 1 when [h, h + bytes) lies inside a mirror (a caller that mirrors only what is not yet). */
int tcq_qla_mirrored(const tcq_qla *q, const void *h, size_t bytes);
/* tcq_qla_mirror unless [h, h + bytes) lies inside a mirror already (a caller's, held longer);
 * *own: 1 when this call made the mirror (the caller drops it then, and only then). */
tcq_status tcq_qla_mirror_unless(tcq_qla *q, const void *h, size_t bytes, int zero, int *own);
/* Mirrors held (tests: a caller that returns leaves none behind). */
int tcq_qla_mirrors(const tcq_qla *q);
/* Rectangle rows x cols (elements of es bytes, row stride ld elements) at host address h, inside
 * a mirror: host -> device (push), device -> host (pull). */
tcq_status tcq_qla_push(tcq_qla *q, const void *h, int64_t rows, int64_t cols, int64_t ld, size_t es);
tcq_status tcq_qla_pull(tcq_qla *q, void *h, int64_t rows, int64_t cols, int64_t ld, size_t es);

/* Row-major C = alpha op(A) op(B) + beta C, as cblas_dgemm / cblas_sgemm (CblasRowMajor). */
tcq_status tcq_qla_dgemm(tcq_qla *q, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                         int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc);
tcq_status tcq_qla_sgemm(tcq_qla *q, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* Row-major upper triangle of H [d, d] (mirrored) += X^T X, X [M, d] row-major (staged). */
tcq_status tcq_qla_syrk(tcq_qla *q, double *H, int64_t d, const double *X, int64_t M);
/* Row-major B [M, N] := B op(A)^-1, A [N, N] lower triangular (cblas_dtrsm Right, Lower,
 * NonUnit); both staged. */
tcq_status tcq_qla_trsm_right_lower(tcq_qla *q, int trans, int64_t M, int64_t N, const double *A, int64_t lda,
                                    double *B, int64_t ldb);
/* tcq_quant_cholesky's contract (A [m, m] row-major in, its lower factor out, upper zeroed),
 * blocked: diagonal blocks factored on the host, panels and trailing updates as DTRSM / DSYRK. */
tcq_status tcq_qla_cholesky(tcq_qla *q, double *A, int64_t m);
/* The factor stays on the device: A mirrored, its device copy replaced by the factor (the
 * row-major lower triangle; the upper one keeps what was there), the host copy untouched. */
tcq_status tcq_qla_cholesky_mirrored(tcq_qla *q, double *A, int64_t m);
/* hscale's axis-0 system on the device (A, F [m, m] row-major, mirrored; H mirrored or staged):
 * on entry A = V V^T and F = V W^T; on return b[i] = sum_j H_ij F_ij + lambda F_ii (on the host),
 * A = A o H + lambda diag(A) and F a copy of that A (for the factor), in the device copies. */
tcq_status tcq_qla_schur(tcq_qla *q, double *A, double *F, const double *H, int64_t m, double lambda, double *b);
/* E[:, c0 : c0 + n] = W[:, c0 : c0 + n] - Wh for E [R, C] double and W [R, C] float, both
 * mirrored, Wh [R, n] float packed on the host (staged: one contiguous copy of half the bytes of
 * E's columns; NULL: zeros, E = W), in the device copy of E only: the doubles the host's
 * (double) W - (double) Wh gives. */
tcq_status tcq_qla_error_cols(tcq_qla *q, double *E, const float *W, int64_t R, int64_t C, int64_t c0, int64_t n,
                              const float *Wh);
/* sum(E o P), P = E H (axis 1, H [C, C]) or H E (axis 0, H [R, R]): tcq_quant_proxy's sum for
 * E [R, C] (double, staged) in one product; H may be mirrored. */
tcq_status tcq_qla_proxy(tcq_qla *q, const double *E, int64_t R, int64_t C, int axis, const double *H, double *out);
/* out[r] = sum_c A[r, c] B[r, c] for A, B [R, C] row-major (mirrored, else staged): the per-row
 * losses of the scale search with only R numbers coming down. */
tcq_status tcq_qla_rowdots(tcq_qla *q, const double *A, const double *B, int64_t R, int64_t C, double *out);

/* The CUDA backend's column-major primitives (qla_cuda.cu; cuBLAS' argument meanings, its
 * context's stream and handle).  copy2d: `rows` rows of `width` bytes, up: host -> device (the
 * host array may change once it returns), else device -> host (done when it returns). */
tcq_status tcq_qla_cu_copy2d(tcq_cuda_ctx *c, int up, void *dst, size_t dp, const void *src, size_t sp, size_t width,
                             size_t rows);
tcq_status tcq_qla_cu_gemm(tcq_cuda_ctx *c, int dbl, int opa, int opb, int64_t m, int64_t n, int64_t k, double alpha,
                           const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc);
tcq_status tcq_qla_cu_syrk(tcq_cuda_ctx *c, int upper, int trans, int64_t n, int64_t k, double alpha, const double *A,
                           int64_t lda, double beta, double *C, int64_t ldc);
tcq_status tcq_qla_cu_trsm(tcq_cuda_ctx *c, int left, int upper, int trans, int64_t m, int64_t n, const double *A,
                           int64_t lda, double *B, int64_t ldb);
tcq_status tcq_qla_cu_dot(tcq_cuda_ctx *c, int64_t n, const double *x, const double *y, double *out);
tcq_status tcq_qla_cu_schur(tcq_cuda_ctx *c, int64_t m, double lambda, double *A, double *F, const double *H,
                            double *b);
tcq_status tcq_qla_cu_error_cols(tcq_cuda_ctx *c, int64_t R, int64_t n, double *E, int64_t lde, const float *W,
                                 int64_t ldw, const float *Wh);
/* out[i] = x_i . y_i (device, n each) for batch vectors x_i = x + i * stride, y_i likewise. */
tcq_status tcq_qla_cu_dots(tcq_cuda_ctx *c, int64_t n, int64_t batch, const double *x, const double *y, int64_t stride,
                           double *out);

#endif
