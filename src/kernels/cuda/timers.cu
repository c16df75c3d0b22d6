/* Benchmark timers (tcq cuda-bench): CUDA graphs of back-to-back calls, replayed and timed by
 * events; the copy bandwidth and cuBLAS bf16 baselines. */
#include "cuda_internal.h"
#include "timers.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <vector>

namespace {

template <typename F>
tcq_status time_graph(tcq_cuda_ctx *ctx, int reps, int trials, F body, double *us)
{
    if (reps < 1 || trials < 1) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda timer: reps and trials must be >= 1");
    TCQ_TRY(body(0));   /* warm: scratch grown, modules loaded, cuBLAS workspace chosen */
    CU_TRY(cudaStreamSynchronize(ctx->stream), "cuda timer: warm-up");
    cudaGraph_t graph;
    CU_TRY(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeRelaxed), "cuda timer: capture");
    tcq_status s = TCQ_OK;
    for (int i = 0; i < reps && s == TCQ_OK; i++) s = body(i);
    cudaError_t e = cudaStreamEndCapture(ctx->stream, &graph);
    if (s != TCQ_OK) {
        if (e == cudaSuccess) cudaGraphDestroy(graph);
        return s;
    }
    CU_TRY(e, "cuda timer: end capture");
    cudaGraphExec_t exec;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    CU_TRY(e, "cuda timer: instantiate");
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<double> t;
    e = cudaGraphLaunch(exec, ctx->stream);   /* warm replay */
    for (int k = 0; k < trials && e == cudaSuccess; k++) {
        cudaEventRecord(a, ctx->stream);
        e = cudaGraphLaunch(exec, ctx->stream);
        cudaEventRecord(b, ctx->stream);
        if (e == cudaSuccess) e = cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(1000.0 * ms / reps);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx->stream);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaGraphExecDestroy(exec);
    CU_TRY(e, "cuda timer: replay");
    std::sort(t.begin(), t.end());
    *us = t[t.size() / 2];
    return TCQ_OK;
}

}  // namespace

tcq_status tcq_cuda_time_linear(tcq_cuda_ctx *ctx, const tcq_trellis *const *w, int n_w, const float *x, float *y,
                                int64_t M, tcq_kpath path, int reps, int trials, double *us)
{
    if (!ctx || !w || n_w < 1 || !us) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda time linear: bad arguments");
    return time_graph(ctx, reps, trials, [&](int i) { return tcq_cuda_linear(ctx, w[i % n_w], x, y, M, path); }, us);
}

tcq_status tcq_cuda_time_swiglu(tcq_cuda_ctx *ctx, const tcq_trellis *const *gate, const tcq_trellis *const *up,
                                int n_w, const float *x, float *y, int64_t M, tcq_kpath path, int reps, int trials,
                                double *us)
{
    if (!ctx || !gate || !up || n_w < 1 || !us) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda time swiglu: bad arguments");
    return time_graph(ctx, reps, trials,
                      [&](int i) { return tcq_cuda_linear_swiglu(ctx, gate[i % n_w], up[i % n_w], x, y, M, path); }, us);
}

namespace {
__global__ void k_fill_bf16(__nv_bfloat16 *p, int64_t n, uint32_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = __float2bfloat16_rn(((float)(h & 0xffff) - 32768.0f) * (1.0f / 32768.0f));
    }
}
}  // namespace

tcq_status tcq_cuda_time_dense_bf16(tcq_cuda_ctx *ctx, int64_t out, int64_t in, int64_t M, int n_w, int reps, int trials,
                                    double *us)
{
    if (!ctx || out < 1 || in < 1 || M < 1 || n_w < 1 || !us) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda time dense: bad arguments");
    const size_t wn = (size_t)out * in, wb = tcq_align256(wn * 2);
    char *buf = NULL;
    const size_t total = wb * n_w + tcq_align256((size_t)M * in * 2) + tcq_align256((size_t)M * out * 2);
    CU_TRY(cudaMalloc((void **)&buf, total), "cuda time dense: buffers");
    k_fill_bf16<<<ctx->n_sm * 8, 256, 0, ctx->stream>>>((__nv_bfloat16 *)buf, (int64_t)(total / 2), 12345u);
    const __nv_bfloat16 *X = (const __nv_bfloat16 *)(buf + wb * n_w);
    void *Y = buf + wb * n_w + tcq_align256((size_t)M * in * 2);
    tcq_status s = time_graph(ctx, reps, trials, [&](int i) {
        return tcq_cuda_gemm_bf16(ctx, (const __nv_bfloat16 *)(buf + wb * (i % n_w)), 0, X, Y, M, out, in, out, CUDA_R_16BF);
    }, us);
    cudaStreamSynchronize(ctx->stream);
    cudaFree(buf);
    return s;
}

namespace {
__global__ void k_copy(const int4 *__restrict__ src, int4 *__restrict__ dst, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __ldcs(src + i);
}
}  // namespace

tcq_status tcq_cuda_time_copy(tcq_cuda_ctx *ctx, size_t bytes, int reps, int trials, double *gbps)
{
    if (!ctx || bytes < 1024 || !gbps) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda time copy: bad arguments");
    char *a = NULL;
    CU_TRY(cudaMalloc((void **)&a, 2 * bytes), "cuda time copy: buffers");
    cudaMemsetAsync(a, 1, 2 * bytes, ctx->stream);
    double us = 0;
    /* an SM copy kernel (16-byte accesses): what a kernel can stream, unlike graph memcpy nodes
     * that may go to the copy engines */
    bytes &= ~(size_t)15;
    tcq_status s = time_graph(ctx, reps, trials, [&](int i) -> tcq_status {
        const int4 *src = (const int4 *)(a + (i & 1 ? bytes : 0));
        int4 *dst = (int4 *)(a + (i & 1 ? 0 : bytes));
        k_copy<<<ctx->n_sm * 8, 512, 0, ctx->stream>>>(src, dst, (int64_t)(bytes / 16));
        CU_LAUNCHED("cuda copy kernel");
        return TCQ_OK;
    }, &us);
    cudaStreamSynchronize(ctx->stream);
    cudaFree(a);
    if (s == TCQ_OK) *gbps = 2.0 * (double)bytes / (us * 1e3);
    return s;
}
