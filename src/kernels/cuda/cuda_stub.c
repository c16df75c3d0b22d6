/* The CUDA API in a build without CUDA: every call says so. */
#include "../../core/internal.h"
#include "timers.h"
#include "../../encode/encode_cuda.h"

#ifndef TCQ_HAVE_CUDA

#define NO_CUDA return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: this build has no CUDA (configure with -DTCQ_CUDA=ON)", __func__)

int tcq_cuda_available(void) { return 0; }
tcq_status tcq_cuda_ctx_create(int device, tcq_cuda_ctx **out)
{
    (void)device;
    if (out) *out = NULL;
    NO_CUDA;
}
void tcq_cuda_ctx_free(tcq_cuda_ctx *ctx) { (void)ctx; }
tcq_status tcq_cuda_ctx_set_opts(tcq_cuda_ctx *ctx, const tcq_cuda_opts *opts) { (void)ctx; (void)opts; NO_CUDA; }
void *tcq_cuda_ctx_stream(tcq_cuda_ctx *ctx) { (void)ctx; return NULL; }
tcq_status tcq_cuda_sync(tcq_cuda_ctx *ctx) { (void)ctx; NO_CUDA; }
tcq_status tcq_cuda_describe(tcq_cuda_ctx *ctx, char *buf, size_t len) { (void)ctx; (void)buf; (void)len; NO_CUDA; }
tcq_status tcq_cuda_malloc(void **ptr, size_t bytes)
{
    (void)bytes;
    if (ptr) *ptr = NULL;
    NO_CUDA;
}
void tcq_cuda_free(void *ptr) { (void)ptr; }
tcq_status tcq_cuda_copy_to_device(tcq_cuda_ctx *c, void *d, const void *s, size_t n) { (void)c; (void)d; (void)s; (void)n; NO_CUDA; }
tcq_status tcq_cuda_copy_to_host(tcq_cuda_ctx *c, void *d, const void *s, size_t n) { (void)c; (void)d; (void)s; (void)n; NO_CUDA; }
tcq_status tcq_cuda_memset(tcq_cuda_ctx *c, void *d, int b, size_t n) { (void)c; (void)d; (void)b; (void)n; NO_CUDA; }
size_t tcq_cuda_trellis_bytes(const tcq_trellis *h) { (void)h; return 0; }
tcq_status tcq_cuda_trellis_upload(tcq_cuda_ctx *c, const tcq_trellis *h, void *b, size_t n, tcq_trellis *d)
{
    (void)c; (void)h; (void)b; (void)n; (void)d;
    NO_CUDA;
}
tcq_status tcq_cuda_linear(tcq_cuda_ctx *c, const tcq_trellis *w, const float *x, float *y, int64_t M, tcq_kpath p)
{
    (void)c; (void)w; (void)x; (void)y; (void)M; (void)p;
    NO_CUDA;
}
const char *tcq_cuda_linear_kernel(const tcq_cuda_ctx *c, const tcq_trellis *w, int64_t M, tcq_kpath p)
{
    (void)c; (void)w; (void)M; (void)p;
    return NULL;
}
int64_t tcq_cuda_fast_block(const tcq_cuda_ctx *c, const tcq_trellis *w, int64_t M)
{
    (void)c; (void)w; (void)M;
    return 0;
}
tcq_status tcq_cuda_linear_swiglu(tcq_cuda_ctx *c, const tcq_trellis *g, const tcq_trellis *u, const float *x,
                                  float *y, int64_t M, tcq_kpath p)
{
    (void)c; (void)g; (void)u; (void)x; (void)y; (void)M; (void)p;
    NO_CUDA;
}
tcq_status tcq_cuda_trellis_decode_bf16(tcq_cuda_ctx *c, const tcq_trellis *w, uint16_t *W) { (void)c; (void)w; (void)W; NO_CUDA; }
tcq_status tcq_cuda_encode_rows(tcq_cuda_ctx *c, tcq_block_params p, const tcq_encode_opts *o, const float *src,
                                const float *w, int64_t R, int64_t C, uint32_t *codes, uint16_t *scales, double *e)
{
    (void)c; (void)p; (void)o; (void)src; (void)w; (void)R; (void)C; (void)codes; (void)scales; (void)e;
    NO_CUDA;
}
tcq_status tcq_cuda_encode_blocks(tcq_cuda_ctx *c, tcq_block_params p, const tcq_encode_opts *o, const float *x,
                                  const float *w, int64_t n, uint32_t *words, double *e)
{
    (void)c; (void)p; (void)o; (void)x; (void)w; (void)n; (void)words; (void)e;
    NO_CUDA;
}
tcq_status tcq_cuda_encode_blocks_w1(tcq_cuda_ctx *c, tcq_block_params p, const tcq_encode_opts *o, const float *x,
                                     const float *w, int64_t n, uint32_t *words)
{
    (void)c; (void)p; (void)o; (void)x; (void)w; (void)n; (void)words;
    NO_CUDA;
}
tcq_status tcq_cuda_time_linear(tcq_cuda_ctx *c, const tcq_trellis *const *w, int n, const float *x, float *y,
                                int64_t M, tcq_kpath p, int r, int t, double *us)
{
    (void)c; (void)w; (void)n; (void)x; (void)y; (void)M; (void)p; (void)r; (void)t; (void)us;
    NO_CUDA;
}
tcq_status tcq_cuda_time_swiglu(tcq_cuda_ctx *c, const tcq_trellis *const *g, const tcq_trellis *const *u, int n,
                                const float *x, float *y, int64_t M, tcq_kpath p, int r, int t, double *us)
{
    (void)c; (void)g; (void)u; (void)n; (void)x; (void)y; (void)M; (void)p; (void)r; (void)t; (void)us;
    NO_CUDA;
}
tcq_status tcq_cuda_time_dense_bf16(tcq_cuda_ctx *c, int64_t o, int64_t i, int64_t M, int n, int r, int t, double *us)
{
    (void)c; (void)o; (void)i; (void)M; (void)n; (void)r; (void)t; (void)us;
    NO_CUDA;
}
tcq_status tcq_cuda_time_copy(tcq_cuda_ctx *c, size_t b, int r, int t, double *g)
{
    (void)c; (void)b; (void)r; (void)t; (void)g;
    NO_CUDA;
}
tcq_status tcq_cuda_time_encode(tcq_cuda_ctx *c, tcq_block_params p, int64_t R, int64_t C, double *w, double *kw)
{
    (void)c; (void)p; (void)R; (void)C; (void)w; (void)kw;
    NO_CUDA;
}

#else
typedef int tcq_cuda_stub_unused;   /* ISO C: a translation unit is never empty */
#endif
