/* qla.h's primitives with cuBLAS on the context's stream and handle (column-major, cuBLAS'
 * argument meanings).  The handle's math mode is set around each call and restored after:
 * pedantic for the SGEMM (no TF32, whatever the rest of the backend asked of the handle), the
 * default for double (true FP64: DMMA is IEEE FMA; FP64 emulation is opt-in). */
#include "../kernels/cuda/cuda_internal.h"
extern "C" {
#include "qla.h"
}

namespace {

struct Pedantic {   /* the handle's math mode for one call: pedantic for float (no TF32), default for double */
    cublasHandle_t h;
    cublasMath_t keep = CUBLAS_DEFAULT_MATH;
    bool ok;
    explicit Pedantic(cublasHandle_t h_, bool dbl = true) : h(h_)
    {
        ok = cublasGetMathMode(h, &keep) == CUBLAS_STATUS_SUCCESS &&
             cublasSetMathMode(h, dbl ? CUBLAS_DEFAULT_MATH : CUBLAS_PEDANTIC_MATH) == CUBLAS_STATUS_SUCCESS;
    }
    ~Pedantic()
    {
        if (ok) cublasSetMathMode(h, keep);
    }
};

cublasOperation_t op(int t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

#define CB_TRY(call, what)                                                                         \
    do {                                                                                           \
        cublasStatus_t cb_e_ = (call);                                                             \
        if (cb_e_ != CUBLAS_STATUS_SUCCESS) return tcq_cublas_fail(cb_e_, what);                   \
    } while (0)

extern "C" tcq_status tcq_qla_cu_copy2d(tcq_cuda_ctx *c, int up, void *dst, size_t dp, const void *src, size_t sp,
                                        size_t width, size_t rows)
{
    const cudaMemcpyKind kind = up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    const char *what = up ? "qla: copy host->device" : "qla: copy device->host";
    /* contiguous: one plain copy (a pitch is bounded by cudaDevAttrMaxPitch, 2^31: a whole
     * 17408^2 Hessian as one pitched row would be refused) */
    if (rows == 1 || (dp == width && sp == width)) CU_TRY(cudaMemcpyAsync(dst, src, width * rows, kind, c->stream), what);
    else CU_TRY(cudaMemcpy2DAsync(dst, dp, src, sp, width, rows, kind, c->stream), what);
    /* a pageable upload returns once the host bytes are staged; a download must have landed */
    if (!up) CU_TRY(cudaStreamSynchronize(c->stream), "qla: copy device->host (an earlier kernel failed?)");
    return TCQ_OK;
}

extern "C" tcq_status tcq_qla_cu_gemm(tcq_cuda_ctx *c, int dbl, int opa, int opb, int64_t m, int64_t n, int64_t k,
                                      double alpha, const void *A, int64_t lda, const void *B, int64_t ldb, double beta,
                                      void *C, int64_t ldc)
{
    Pedantic pm(c->blas, dbl != 0);
    if (dbl) {
        CB_TRY(cublasDgemm(c->blas, op(opa), op(opb), (int)m, (int)n, (int)k, &alpha, (const double *)A, (int)lda,
                           (const double *)B, (int)ldb, &beta, (double *)C, (int)ldc),
               "qla: DGEMM");
    } else {
        const float fa = (float)alpha, fb = (float)beta;
        CB_TRY(cublasSgemm(c->blas, op(opa), op(opb), (int)m, (int)n, (int)k, &fa, (const float *)A, (int)lda,
                           (const float *)B, (int)ldb, &fb, (float *)C, (int)ldc),
               "qla: SGEMM");
    }
    return TCQ_OK;
}

extern "C" tcq_status tcq_qla_cu_syrk(tcq_cuda_ctx *c, int upper, int trans, int64_t n, int64_t k, double alpha,
                                      const double *A, int64_t lda, double beta, double *C, int64_t ldc)
{
    Pedantic pm(c->blas);
    CB_TRY(cublasDsyrk(c->blas, upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER, op(trans), (int)n, (int)k,
                       &alpha, A, (int)lda, &beta, C, (int)ldc),
           "qla: DSYRK");
    return TCQ_OK;
}

extern "C" tcq_status tcq_qla_cu_trsm(tcq_cuda_ctx *c, int left, int upper, int trans, int64_t m, int64_t n,
                                      const double *A, int64_t lda, double *B, int64_t ldb)
{
    Pedantic pm(c->blas);
    const double one = 1.0;
    CB_TRY(cublasDtrsm(c->blas, left ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT,
                       upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER, op(trans), CUBLAS_DIAG_NON_UNIT, (int)m,
                       (int)n, &one, A, (int)lda, B, (int)ldb),
           "qla: DTRSM");
    return TCQ_OK;
}

extern "C" tcq_status tcq_qla_cu_dot(tcq_cuda_ctx *c, int64_t n, const double *x, const double *y, double *out)
{
    Pedantic pm(c->blas);
    cublasPointerMode_t pmode = CUBLAS_POINTER_MODE_HOST;
    CB_TRY(cublasGetPointerMode(c->blas, &pmode), "qla: DDOT");
    CB_TRY(cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST), "qla: DDOT");
    /* host pointer mode: returns with the result (after the stream's earlier work) */
    const cublasStatus_t e = cublasDdot(c->blas, (int)n, x, 1, y, 1, out);
    cublasSetPointerMode(c->blas, pmode);
    if (e != CUBLAS_STATUS_SUCCESS) return tcq_cublas_fail(e, "qla: DDOT");
    return TCQ_OK;
}

extern "C" tcq_status tcq_qla_cu_dots(tcq_cuda_ctx *c, int64_t n, int64_t batch, const double *x, const double *y,
                                      int64_t stride, double *out)
{
    /* batch dot products as 1 x 1 products of a 1 x n row by an n x 1 column, strided batched:
     * cuBLAS' own reduction, the same run to run (one stream) */
    Pedantic pm(c->blas);
    const double one = 1.0, zero = 0.0;
    CB_TRY(cublasDgemmStridedBatched(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, (int)n, &one, x, 1, (long long)stride, y,
                                     (int)n, (long long)stride, &zero, out, 1, 1, (int)batch),
           "qla: batched DDOT");
    return TCQ_OK;
}

namespace {

constexpr int kSchurThreads = 256;

/* Row i of tcq_qla_schur (raw row-major m x m buffers), a block a row: b_i's sum in a fixed tree
 * order (the same bits run to run), then A's row times H's and the copy into F. Every thread
 * reads A_ii and F_ii before the barrier that precedes the first write. */
__global__ void schur_rows(int64_t m, double lambda, double *A, double *F, const double *H, double *b)
{
    __shared__ double red[kSchurThreads];
    const int64_t i = blockIdx.x;
    double *a = A + i * m, *f = F + i * m;
    const double *h = H + i * m;
    const double gd = a[i], fii = f[i];
    double acc = 0;
    for (int64_t c = threadIdx.x; c < m; c += kSchurThreads) acc += h[c] * f[c];
    red[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kSchurThreads / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    for (int64_t c = threadIdx.x; c < m; c += kSchurThreads) {
        double v = a[c] * h[c];
        if (c == i) v += lambda * gd;
        a[c] = v;
        f[c] = v;
    }
    if (threadIdx.x == 0) b[i] = red[0] + lambda * fii;
}

__global__ void error_cols(int64_t R, int64_t n, double *E, int64_t lde, const float *W, int64_t ldw, const float *Wh)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= R * n) return;
    const int64_t r = i / n, t = i % n;
    E[r * lde + t] = (double)W[r * ldw + t] - (Wh ? (double)Wh[i] : 0.0);
}

}  // namespace

extern "C" tcq_status tcq_qla_cu_error_cols(tcq_cuda_ctx *c, int64_t R, int64_t n, double *E, int64_t lde, const float *W,
                                            int64_t ldw, const float *Wh)
{
    const int64_t total = R * n;
    if (total <= 0) return TCQ_OK;
    const int64_t blocks = (total + 255) / 256;
    if (blocks > INT32_MAX) return tcq_fail(TCQ_ERR_UNSUPPORTED, "qla error columns: size beyond 32 bits");
    error_cols<<<(unsigned)blocks, 256, 0, c->stream>>>(R, n, E, lde, W, ldw, Wh);
    CU_LAUNCHED("qla: error columns");
    return TCQ_OK;
}

extern "C" tcq_status tcq_qla_cu_schur(tcq_cuda_ctx *c, int64_t m, double lambda, double *A, double *F, const double *H,
                                       double *b)
{
    if (m <= 0) return TCQ_OK;
    if (m > INT32_MAX) return tcq_fail(TCQ_ERR_UNSUPPORTED, "qla schur: size beyond 32 bits");
    schur_rows<<<(unsigned)m, kSchurThreads, 0, c->stream>>>(m, lambda, A, F, H, b);
    CU_LAUNCHED("qla: schur rows");
    return TCQ_OK;
}
