/* The quantizer's linear algebra on a GPU or its host emulation (qla.h).  The backend is a small
 * set of column-major primitives with cuBLAS' arguments (copy of a pitched rectangle, GEMM,
 * DSYRK, DTRSM, DDOT): qla_cuda.cu runs them with cuBLAS, the emulation below with CBLAS on host
 * buffers that stand in for device memory.  Everything above them (mirrors, staging, the
 * row-major to column-major swap, the blocked Cholesky) is this file's, shared by both. */
#include "qla.h"
#include "quant.h"

#include <cblas.h>
#include <string.h>

#define QLA_MIRRORS 16   /* calibration: a layer's 4 Hessians and 7 weights */
#define QLA_STAGES 3
#define QLA_CHOL_NB 512   /* diagonal block of the blocked Cholesky (factored on the host) */

struct tcq_qla {
    tcq_cuda_ctx *ctx;        /* NULL: host emulation */
    struct {
        const char *h;
        char *d;
        size_t bytes;
    } mir[QLA_MIRRORS];
    void *stage[QLA_STAGES];
    size_t stage_bytes[QLA_STAGES];
    int64_t gemms;
};

/* ---- primitives: CUDA (qla_cuda.cu) or host ---- */

static tcq_status p_alloc(tcq_qla *q, size_t bytes, void **out)
{
    if (q->ctx) return tcq_cuda_malloc(out, bytes);
    *out = malloc(bytes ? bytes : 1);
    return *out ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "qla: %zu bytes", bytes);
}

static void p_free(tcq_qla *q, void *d)
{
    if (!d) return;
    if (q->ctx) {
        tcq_cuda_sync(q->ctx);   /* nothing queued may still read it */
        tcq_cuda_free(d);
    } else free(d);
}

static tcq_status p_zero(tcq_qla *q, void *d, size_t bytes)
{
    if (q->ctx) return tcq_cuda_memset(q->ctx, d, 0, bytes);
    memset(d, 0, bytes);
    return TCQ_OK;
}

/* rows of `width` bytes: dst (pitch dp) <- src (pitch sp); up: host -> device */
static tcq_status p_copy2d(tcq_qla *q, int up, void *dst, size_t dp, const void *src, size_t sp, size_t width,
                           size_t rows)
{
    if (!rows || !width) return TCQ_OK;
    if (q->ctx) return tcq_qla_cu_copy2d(q->ctx, up, dst, dp, src, sp, width, rows);
    for (size_t r = 0; r < rows; r++) memcpy((char *)dst + r * dp, (const char *)src + r * sp, width);
    return TCQ_OK;
}

static tcq_status p_gemm(tcq_qla *q, int dbl, int opa, int opb, int64_t m, int64_t n, int64_t k, double alpha,
                         const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc)
{
    if (m <= 0 || n <= 0) return TCQ_OK;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "qla gemm: size beyond 32 bits");
    if (q->ctx) return tcq_qla_cu_gemm(q->ctx, dbl, opa, opb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    const enum CBLAS_TRANSPOSE a = opa ? CblasTrans : CblasNoTrans, b = opb ? CblasTrans : CblasNoTrans;
    if (dbl)
        cblas_dgemm(CblasColMajor, a, b, (int)m, (int)n, (int)k, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
    else
        cblas_sgemm(CblasColMajor, a, b, (int)m, (int)n, (int)k, (float)alpha, A, (int)lda, B, (int)ldb, (float)beta,
                    C, (int)ldc);
    return TCQ_OK;
}

static tcq_status p_syrk(tcq_qla *q, int upper, int trans, int64_t n, int64_t k, double alpha, const double *A,
                         int64_t lda, double beta, double *C, int64_t ldc)
{
    if (n <= 0) return TCQ_OK;
    if (n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldc > INT32_MAX)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "qla syrk: size beyond 32 bits");
    if (q->ctx) return tcq_qla_cu_syrk(q->ctx, upper, trans, n, k, alpha, A, lda, beta, C, ldc);
    cblas_dsyrk(CblasColMajor, upper ? CblasUpper : CblasLower, trans ? CblasTrans : CblasNoTrans, (int)n, (int)k, alpha,
                A, (int)lda, beta, C, (int)ldc);
    return TCQ_OK;
}

static tcq_status p_trsm(tcq_qla *q, int left, int upper, int trans, int64_t m, int64_t n, const double *A,
                         int64_t lda, double *B, int64_t ldb)
{
    if (m <= 0 || n <= 0) return TCQ_OK;
    if (m > INT32_MAX || n > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "qla trsm: size beyond 32 bits");
    if (q->ctx) return tcq_qla_cu_trsm(q->ctx, left, upper, trans, m, n, A, lda, B, ldb);
    cblas_dtrsm(CblasColMajor, left ? CblasLeft : CblasRight, upper ? CblasUpper : CblasLower,
                trans ? CblasTrans : CblasNoTrans, CblasNonUnit, (int)m, (int)n, 1.0, A, (int)lda, B, (int)ldb);
    return TCQ_OK;
}

static tcq_status p_dot(tcq_qla *q, int64_t n, const double *x, const double *y, double *out)
{
    if (n > INT32_MAX) return tcq_fail(TCQ_ERR_UNSUPPORTED, "qla dot: size beyond 32 bits");
    if (q->ctx) return tcq_qla_cu_dot(q->ctx, n, x, y, out);
    *out = cblas_ddot((int)n, x, 1, y, 1);
    return TCQ_OK;
}

static tcq_status p_dots(tcq_qla *q, int64_t n, int64_t batch, const double *x, const double *y, int64_t stride,
                         double *out)
{
    if (batch <= 0) return TCQ_OK;
    if (n > INT32_MAX || batch > INT32_MAX || stride > INT32_MAX)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "qla dots: size beyond 32 bits");
    if (q->ctx) return tcq_qla_cu_dots(q->ctx, n, batch, x, y, stride, out);
    for (int64_t i = 0; i < batch; i++) out[i] = cblas_ddot((int)n, x + i * stride, 1, y + i * stride, 1);
    return TCQ_OK;
}

/* tcq_qla_schur's rows on raw row-major buffers; the CPU path's arithmetic (hscale.c's
 * sys_item), so the emulation's b and A match it bit for bit */
static tcq_status p_schur(tcq_qla *q, int64_t m, double lambda, double *A, double *F, const double *H, double *b)
{
    if (q->ctx) return tcq_qla_cu_schur(q->ctx, m, lambda, A, F, H, b);
    for (int64_t i = 0; i < m; i++) {
        double *a = A + i * m, *f = F + i * m, bi = 0;
        const double *h = H + i * m, gd = a[i];
        for (int64_t c = 0; c < m; c++) a[c] *= h[c], bi += h[c] * f[c];
        b[i] = bi + lambda * f[i];
        a[i] += lambda * gd;
        memcpy(f, a, (size_t)m * sizeof *f);
    }
    return TCQ_OK;
}

/* E [R, n] (row stride lde) = W (row stride ldw) - Wh [R, n] packed */
static tcq_status p_error_cols(tcq_qla *q, int64_t R, int64_t n, double *E, int64_t lde, const float *W, int64_t ldw,
                               const float *Wh)
{
    if (q->ctx) return tcq_qla_cu_error_cols(q->ctx, R, n, E, lde, W, ldw, Wh);
    for (int64_t r = 0; r < R; r++)
        for (int64_t t = 0; t < n; t++) E[r * lde + t] = (double)W[r * ldw + t] - (Wh ? (double)Wh[r * n + t] : 0.0);
    return TCQ_OK;
}

/* ---- mirrors and staging ---- */

tcq_status tcq_qla_create(tcq_cuda_ctx *ctx, tcq_qla **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return tcq_fail(TCQ_ERR_NOMEM, "qla");
    (*out)->ctx = ctx;
    return TCQ_OK;
}

void tcq_qla_free(tcq_qla *q)
{
    if (!q) return;
    for (int i = 0; i < QLA_MIRRORS; i++) p_free(q, q->mir[i].d);
    for (int i = 0; i < QLA_STAGES; i++) p_free(q, q->stage[i]);
    free(q);
}

int tcq_qla_on_gpu(const tcq_qla *q) { return q && q->ctx; }
int64_t tcq_qla_gemms(const tcq_qla *q) { return q ? q->gemms : 0; }

tcq_status tcq_qla_mirror(tcq_qla *q, const void *h, size_t bytes, int zero)
{
    int slot = -1;
    for (int i = 0; i < QLA_MIRRORS; i++) {
        if (q->mir[i].h == h && h) return tcq_fail(TCQ_ERR_INTERNAL, "qla: array mirrored twice");
        if (!q->mir[i].h && slot < 0) slot = i;
    }
    if (slot < 0) return tcq_fail(TCQ_ERR_INTERNAL, "qla: more than %d mirrors", QLA_MIRRORS);
    void *d = NULL;
    TCQ_TRY(p_alloc(q, bytes, &d));
    tcq_status s = zero ? p_zero(q, d, bytes) : p_copy2d(q, 1, d, bytes, h, bytes, bytes, 1);
    if (s != TCQ_OK) {
        p_free(q, d);
        return s;
    }
    q->mir[slot].h = h;
    q->mir[slot].d = d;
    q->mir[slot].bytes = bytes;
    return TCQ_OK;
}

void tcq_qla_unmirror(tcq_qla *q, const void *h)
{
    for (int i = 0; q && i < QLA_MIRRORS; i++)
        if (q->mir[i].h == h && h) {
            p_free(q, q->mir[i].d);
            memset(&q->mir[i], 0, sizeof q->mir[i]);
        }
}

/* The device address of host span [p, p + span) inside a mirror, or NULL. */
static char *mirrored(const tcq_qla *q, const void *p, size_t span)
{
    const char *c = p;
    for (int i = 0; c && i < QLA_MIRRORS; i++)
        if (q->mir[i].h && c >= q->mir[i].h && c + span <= q->mir[i].h + q->mir[i].bytes)
            return q->mir[i].d + (c - q->mir[i].h);
    return NULL;
}

int tcq_qla_mirrored(const tcq_qla *q, const void *h, size_t bytes) { return q && mirrored(q, h, bytes) != NULL; }

tcq_status tcq_qla_mirror_unless(tcq_qla *q, const void *h, size_t bytes, int zero, int *own)
{
    *own = 0;
    if (tcq_qla_mirrored(q, h, bytes)) return TCQ_OK;
    TCQ_TRY(tcq_qla_mirror(q, h, bytes, zero));
    *own = 1;
    return TCQ_OK;
}

int tcq_qla_mirrors(const tcq_qla *q)
{
    int n = 0;
    for (int i = 0; q && i < QLA_MIRRORS; i++) n += q->mir[i].h != NULL;
    return n;
}

static size_t span_of(int64_t rows, int64_t cols, int64_t ld, size_t es)
{
    return rows > 0 && cols > 0 ? ((size_t)(rows - 1) * (size_t)ld + (size_t)cols) * es : 0;
}

static tcq_status rect(tcq_qla *q, int up, const void *h, int64_t rows, int64_t cols, int64_t ld, size_t es)
{
    if (rows <= 0 || cols <= 0) return TCQ_OK;
    char *d = mirrored(q, h, span_of(rows, cols, ld, es));
    if (!d) return tcq_fail(TCQ_ERR_INTERNAL, "qla: %s of an array that is not mirrored", up ? "push" : "pull");
    const size_t pitch = (size_t)ld * es, w = (size_t)cols * es;
    return up ? p_copy2d(q, 1, d, pitch, h, pitch, w, (size_t)rows) : p_copy2d(q, 0, (void *)h, pitch, d, pitch, w, (size_t)rows);
}

tcq_status tcq_qla_push(tcq_qla *q, const void *h, int64_t rows, int64_t cols, int64_t ld, size_t es)
{
    return rect(q, 1, h, rows, cols, ld, es);
}

tcq_status tcq_qla_pull(tcq_qla *q, void *h, int64_t rows, int64_t cols, int64_t ld, size_t es)
{
    return rect(q, 0, h, rows, cols, ld, es);
}

static tcq_status stage(tcq_qla *q, int slot, size_t bytes, void **out)
{
    if (bytes > q->stage_bytes[slot]) {
        p_free(q, q->stage[slot]);
        q->stage[slot] = NULL;
        q->stage_bytes[slot] = 0;
        TCQ_TRY(p_alloc(q, bytes + bytes / 4, &q->stage[slot]));
        q->stage_bytes[slot] = bytes + bytes / 4;
    }
    *out = q->stage[slot];
    return TCQ_OK;
}

/* Operand (rows x cols, row stride ld) on the device: its mirror, or packed (ld = cols) into
 * stage slot `slot`, copied up when `up`. */
typedef struct dop {
    char *d;
    int64_t ld;
    int staged;
} dop;

static tcq_status operand(tcq_qla *q, int slot, const void *h, int64_t rows, int64_t cols, int64_t ld, size_t es,
                          int up, dop *o)
{
    o->d = mirrored(q, h, span_of(rows, cols, ld, es));
    o->ld = ld;
    o->staged = !o->d;
    if (o->d) return TCQ_OK;
    void *d = NULL;
    TCQ_TRY(stage(q, slot, (size_t)(rows > 0 && cols > 0 ? rows * cols : 1) * es, &d));
    o->d = d;
    o->ld = cols > 0 ? cols : 1;
    if (up && rows > 0 && cols > 0)
        TCQ_TRY(p_copy2d(q, 1, d, (size_t)cols * es, h, (size_t)ld * es, (size_t)cols * es, (size_t)rows));
    return TCQ_OK;
}

/* Row-major C [M, N] = alpha op(A) op(B) + beta C is column-major C^T = alpha op(B)^T op(A)^T. */
static tcq_status gemm_rm(tcq_qla *q, int dbl, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha,
                          const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc)
{
    if (M <= 0 || N <= 0) return TCQ_OK;
    q->gemms++;
    const size_t es = dbl ? 8 : 4;
    dop a, b, c;
    TCQ_TRY(operand(q, 0, A, ta ? K : M, ta ? M : K, lda, es, 1, &a));
    TCQ_TRY(operand(q, 1, B, tb ? N : K, tb ? K : N, ldb, es, 1, &b));
    TCQ_TRY(operand(q, 2, C, M, N, ldc, es, beta != 0, &c));
    TCQ_TRY(p_gemm(q, dbl, tb, ta, N, M, K, alpha, b.d, b.ld, a.d, a.ld, beta, c.d, c.ld));
    if (c.staged) TCQ_TRY(p_copy2d(q, 0, C, (size_t)ldc * es, c.d, (size_t)N * es, (size_t)N * es, (size_t)M));
    return TCQ_OK;
}

tcq_status tcq_qla_dgemm(tcq_qla *q, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                         int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc)
{
    return gemm_rm(q, 1, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

tcq_status tcq_qla_sgemm(tcq_qla *q, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    return gemm_rm(q, 0, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

tcq_status tcq_qla_syrk(tcq_qla *q, double *H, int64_t d, const double *X, int64_t M)
{
    char *h = mirrored(q, H, (size_t)(d * d) * 8);
    if (!h) return tcq_fail(TCQ_ERR_INTERNAL, "qla syrk: the Hessian is not mirrored");
    dop x;
    TCQ_TRY(operand(q, 0, X, M, d, d, 8, 1, &x));
    /* X [M, d] row-major is column-major [d, M]: H += X_cm X_cm^T; row-major upper = column-major lower */
    return p_syrk(q, 0, 0, d, M, 1.0, (const double *)x.d, x.ld, 1.0, (double *)h, d);
}

tcq_status tcq_qla_trsm_right_lower(tcq_qla *q, int trans, int64_t M, int64_t N, const double *A, int64_t lda,
                                    double *B, int64_t ldb)
{
    if (M <= 0 || N <= 0) return TCQ_OK;
    dop a, b;
    TCQ_TRY(operand(q, 0, A, N, N, lda, 8, 1, &a));
    TCQ_TRY(operand(q, 1, B, M, N, ldb, 8, 1, &b));
    /* row-major X op(A) = B is column-major op(A)^T X^T = B^T, and A's buffer read column-major
     * is A^T (upper): op(A)^T is that buffer untransposed when trans == 0 */
    TCQ_TRY(p_trsm(q, 1, 1, trans, N, M, (const double *)a.d, a.ld, (double *)b.d, b.ld));
    if (b.staged) TCQ_TRY(p_copy2d(q, 0, B, (size_t)ldb * 8, b.d, (size_t)N * 8, (size_t)N * 8, (size_t)M));
    return TCQ_OK;
}

/* Right-looking blocked Cholesky on the device copy read column-major (a symmetric A is the same
 * matrix either way): the upper factor U (A = U^T U) is, row-major, tcq_quant_cholesky's lower C.
 * Each diagonal block goes to the host for LAPACK's dpotrf (the same routine as the CPU path:
 * a matrix of one block gets the CPU's bits), its panel to the right is solved (DTRSM) and the
 * trailing matrix updated (DSYRK), upper triangles only. */
static tcq_status chol_blocked(tcq_qla *q, double *d, int64_t m)
{
    double *blk = malloc((size_t)QLA_CHOL_NB * QLA_CHOL_NB * sizeof *blk);
    if (!blk) return tcq_fail(TCQ_ERR_NOMEM, "cholesky: diagonal block");
    tcq_status s = TCQ_OK;
    for (int64_t j = 0; s == TCQ_OK && j < m; j += QLA_CHOL_NB) {
        const int64_t jb = TCQ_MIN((int64_t)QLA_CHOL_NB, m - j), rest = m - j - jb;
        double *djj = d + j + j * m;
        s = p_copy2d(q, 0, blk, (size_t)jb * 8, djj, (size_t)m * 8, (size_t)jb * 8, (size_t)jb);
        if (s == TCQ_OK) {
            s = tcq_quant_cholesky(blk, jb);   /* column-major upper, as dpotrf "U" on this buffer */
            if (s != TCQ_OK) tcq_error_prefix("diagonal block at %lld", (long long)j);
        }
        if (s == TCQ_OK) s = p_copy2d(q, 1, djj, (size_t)m * 8, blk, (size_t)jb * 8, (size_t)jb * 8, (size_t)jb);
        if (s == TCQ_OK && rest > 0) s = p_trsm(q, 1, 1, 1, jb, rest, djj, m, djj + jb * m, m);
        if (s == TCQ_OK && rest > 0) s = p_syrk(q, 1, 1, rest, jb, -1.0, djj + jb * m, m, 1.0, djj + jb * m + jb, m);
    }
    free(blk);
    return s;
}

tcq_status tcq_qla_cholesky(tcq_qla *q, double *A, int64_t m)
{
    if (m <= 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "cholesky: size %lld", (long long)m);
    if (m <= QLA_CHOL_NB) return tcq_quant_cholesky(A, m);
    dop a;
    TCQ_TRY(operand(q, 0, A, m, m, m, 8, 1, &a));
    double *d = (double *)a.d;
    tcq_status s = chol_blocked(q, d, m);
    if (s == TCQ_OK) s = p_copy2d(q, 0, A, (size_t)m * 8, d, (size_t)m * 8, (size_t)m * 8, (size_t)m);
    for (int64_t i = 0; s == TCQ_OK && i < m; i++)
        for (int64_t k = i + 1; k < m; k++) A[i * m + k] = 0;
    return s;
}

tcq_status tcq_qla_cholesky_mirrored(tcq_qla *q, double *A, int64_t m)
{
    if (m <= 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "cholesky: size %lld", (long long)m);
    char *d = mirrored(q, A, (size_t)(m * m) * 8);
    if (!d) return tcq_fail(TCQ_ERR_INTERNAL, "qla cholesky: the matrix is not mirrored");
    return chol_blocked(q, (double *)d, m);   /* a single block: the host's dpotrf, the CPU's bits */
}

tcq_status tcq_qla_schur(tcq_qla *q, double *A, double *F, const double *H, int64_t m, double lambda, double *b)
{
    if (m <= 0) return TCQ_OK;
    char *a = mirrored(q, A, (size_t)(m * m) * 8), *f = mirrored(q, F, (size_t)(m * m) * 8);
    if (!a || !f) return tcq_fail(TCQ_ERR_INTERNAL, "qla schur: A and F must be mirrored");
    dop h, o;
    TCQ_TRY(operand(q, 0, H, m, m, m, 8, 1, &h));
    TCQ_TRY(operand(q, 1, NULL, 1, m, m, 8, 0, &o));
    TCQ_TRY(p_schur(q, m, lambda, (double *)a, (double *)f, (const double *)h.d, (double *)o.d));
    return p_copy2d(q, 0, b, (size_t)m * 8, o.d, (size_t)m * 8, (size_t)m * 8, 1);
}

tcq_status tcq_qla_error_cols(tcq_qla *q, double *E, const float *W, int64_t R, int64_t C, int64_t c0, int64_t n,
                              const float *Wh)
{
    if (R <= 0 || n <= 0) return TCQ_OK;
    if (c0 < 0 || c0 + n > C) return tcq_fail(TCQ_ERR_INTERNAL, "qla error columns: [%lld, %lld) of %lld", (long long)c0,
                                              (long long)(c0 + n), (long long)C);
    char *e = mirrored(q, E, (size_t)(R * C) * 8), *w = mirrored(q, W, (size_t)(R * C) * 4);
    if (!e || !w) return tcq_fail(TCQ_ERR_INTERNAL, "qla error columns: E and W must be mirrored");
    dop h = {NULL, n, 0};
    if (Wh) TCQ_TRY(operand(q, 0, Wh, R, n, n, 4, 1, &h));
    return p_error_cols(q, R, n, (double *)e + c0, C, (const float *)w + c0, C, (const float *)h.d);
}

tcq_status tcq_qla_proxy(tcq_qla *q, const double *E, int64_t R, int64_t C, int axis, const double *H, double *out)
{
    const int64_t hm = axis ? C : R;
    dop e, h, p;
    TCQ_TRY(operand(q, 0, E, R, C, C, 8, 1, &e));
    TCQ_TRY(operand(q, 1, H, hm, hm, hm, 8, 1, &h));
    TCQ_TRY(operand(q, 2, NULL, R, C, C, 8, 0, &p));
    /* column-major E^T [C, R]: axis 1 P^T = H E^T (H symmetric), axis 0 P^T = E^T H */
    if (axis) TCQ_TRY(p_gemm(q, 1, 0, 0, C, R, C, 1.0, h.d, h.ld, e.d, e.ld, 0.0, p.d, C));
    else TCQ_TRY(p_gemm(q, 1, 0, 0, C, R, R, 1.0, e.d, e.ld, h.d, h.ld, 0.0, p.d, C));
    return p_dot(q, R * C, (const double *)e.d, (const double *)p.d, out);
}

tcq_status tcq_qla_rowdots(tcq_qla *q, const double *A, const double *B, int64_t R, int64_t C, double *out)
{
    if (R <= 0) return TCQ_OK;
    dop a, b, o;
    TCQ_TRY(operand(q, 0, A, R, C, C, 8, 1, &a));
    TCQ_TRY(operand(q, 1, B, R, C, C, 8, 1, &b));
    if (a.ld != b.ld) return tcq_fail(TCQ_ERR_INTERNAL, "qla rowdots: operands of different strides");
    TCQ_TRY(operand(q, 2, NULL, R, 1, 1, 8, 0, &o));
    TCQ_TRY(p_dots(q, C, R, (const double *)a.d, (const double *)b.d, a.ld, (double *)o.d));
    return p_copy2d(q, 0, out, 8, o.d, 8, 8, (size_t)R);
}

#ifndef TCQ_HAVE_CUDA
/* A build without CUDA has no context to reach these with (tcq_cuda_ctx_create fails). */
#define QLA_NO_CUDA return tcq_fail(TCQ_ERR_UNSUPPORTED, "qla: built without CUDA")
tcq_status tcq_qla_cu_copy2d(tcq_cuda_ctx *c, int up, void *dst, size_t dp, const void *src, size_t sp, size_t w,
                             size_t rows)
{
    (void)c, (void)up, (void)dst, (void)dp, (void)src, (void)sp, (void)w, (void)rows;
    QLA_NO_CUDA;
}
tcq_status tcq_qla_cu_gemm(tcq_cuda_ctx *c, int dbl, int opa, int opb, int64_t m, int64_t n, int64_t k, double alpha,
                           const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc)
{
    (void)c, (void)dbl, (void)opa, (void)opb, (void)m, (void)n, (void)k, (void)alpha, (void)A, (void)lda, (void)B;
    (void)ldb, (void)beta, (void)C, (void)ldc;
    QLA_NO_CUDA;
}
tcq_status tcq_qla_cu_syrk(tcq_cuda_ctx *c, int upper, int trans, int64_t n, int64_t k, double alpha, const double *A,
                           int64_t lda, double beta, double *C, int64_t ldc)
{
    (void)c, (void)upper, (void)trans, (void)n, (void)k, (void)alpha, (void)A, (void)lda, (void)beta, (void)C, (void)ldc;
    QLA_NO_CUDA;
}
tcq_status tcq_qla_cu_trsm(tcq_cuda_ctx *c, int left, int upper, int trans, int64_t m, int64_t n, const double *A,
                           int64_t lda, double *B, int64_t ldb)
{
    (void)c, (void)left, (void)upper, (void)trans, (void)m, (void)n, (void)A, (void)lda, (void)B, (void)ldb;
    QLA_NO_CUDA;
}
tcq_status tcq_qla_cu_dot(tcq_cuda_ctx *c, int64_t n, const double *x, const double *y, double *out)
{
    (void)c, (void)n, (void)x, (void)y, (void)out;
    QLA_NO_CUDA;
}
tcq_status tcq_qla_cu_schur(tcq_cuda_ctx *c, int64_t m, double lambda, double *A, double *F, const double *H,
                            double *b)
{
    (void)c, (void)m, (void)lambda, (void)A, (void)F, (void)H, (void)b;
    QLA_NO_CUDA;
}
tcq_status tcq_qla_cu_error_cols(tcq_cuda_ctx *c, int64_t R, int64_t n, double *E, int64_t lde, const float *W,
                                 int64_t ldw, const float *Wh)
{
    (void)c, (void)R, (void)n, (void)E, (void)lde, (void)W, (void)ldw, (void)Wh;
    QLA_NO_CUDA;
}
tcq_status tcq_qla_cu_dots(tcq_cuda_ctx *c, int64_t n, int64_t batch, const double *x, const double *y, int64_t stride,
                           double *out)
{
    (void)c, (void)n, (void)batch, (void)x, (void)y, (void)stride, (void)out;
    QLA_NO_CUDA;
}
#endif
