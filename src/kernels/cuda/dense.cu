/* The dispatcher, the large-M path (decode to bf16 + cuBLAS GEMM), fused gate/up, and the
 * benchmark timers (CUDA graphs of back-to-back calls). */
#include "cuda_internal.h"
#include "tc_common.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <vector>

using namespace tcq_tc;

tcq_status tcq_cuda_linear_tc(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x, float *y,
                              int64_t M);
tcq_status tcq_cuda_swiglu_combine(tcq_cuda_ctx *ctx, const float *g, const float *u, float *y, int64_t n);
/* TCQ_PATH_FAST, M <= 8 (imma.cu's int8 columns, or fast.cu); larger M runs the exact kernels */
tcq_status tcq_cuda_linear_fast(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x, float *y,
                                int64_t M);

namespace {

constexpr int kTcMaxM = 32;   /* the pair-table kernels' limit */
/* Largest M for the pair-table kernels where no wgmma kernel runs; above it decode + cuBLAS.
 * Measured crossovers (H200, 2026-12-03, docs/PERFORMANCE.md): axis 1 the pair table wins to M = 16
 * (k=2: 76 vs 117 us) and loses from M = 24 (192 vs 116); axis 0 it already loses at M = 12
 * (151 vs 119). */
int tc_max_m(const tcq_cuda_ctx *ctx, const tcq_trellis *w)
{
    if (ctx->tc_max_m > 0) return std::min(ctx->tc_max_m, kTcMaxM);
    return w->axis ? 16 : 8;
}
constexpr int kFastMaxM = 8;

/* value(s) exactly as the host LUT: y/d by the refined reciprocal (FORMAT.md). */
__device__ __forceinline__ float code_value(uint32_t s)
{
    const float d = kD, r = 1.0f / kD;
    const float y = code_y(s);
    const float q = __fmul_rn(y, r);
    const float e = __fmaf_rn(-q, d, y);
    return __fmaf_rn(e, r, q);
}

/* One thread per (coded row, 16 positions) of the part rows [r0, r0+nr) x positions [p0, p0+np)
 * (np a multiple of 16), bf16(value * scale), counted from the part's start.  tr = 0 stores the
 * coded layout [nr, np] (axis 1: W [out, in]; axis 0: W^T [in, out], which the GEMM reads
 * untransposed); tr = 1 stores [np, nr] (axis 0 as W [out, in]).  The words of the 16 positions
 * are loaded once (load16, as the tensor-core kernels do) and the states cut from registers;
 * tr = 0 writes the 16 results as two 16-byte stores, tr = 1 lets neighbouring threads take
 * neighbouring rows so each position's stores coalesce (2-byte stores: slower, docs/PERFORMANCE.md). */
template <int K>
__global__ void k_decode_bf16(Geo g, int tr, int64_t r0, int64_t nr, int64_t p0, int64_t np,
                              __nv_bfloat16 *__restrict__ W)
{
    const int64_t regions = np / 16;
    const int64_t n = nr * regions;
    const uint32_t lm = (1u << g.L) - 1u;
    for (int64_t id = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; id < n; id += (int64_t)gridDim.x * blockDim.x) {
        const int64_t rl = tr ? id % nr : id / regions, reg = tr ? id / nr : id % regions;
        const int64_t r = r0 + rl, Pl = reg * 16, P = p0 + Pl, blk = P >> g.log2T;
        const int Pb = (int)(P & (g.T - 1));
        const int b_lo = (g.T - Pb - 16) * K;
        uint32_t w[Dec<K>::NL];
        load16<K>(block_ptr(g, r, blk), g.wpb, b_lo, w);
        constexpr int NR = Dec<K>::NR;
        uint32_t rr[NR];
        if (Dec<K>::ALIGNED) {
#pragma unroll
            for (int j = 0; j < NR; j++) rr[j] = w[j];
        } else {
            const int sh = b_lo & 31;
#pragma unroll
            for (int j = 0; j < NR; j++) rr[j] = __funnelshift_r(w[j], w[j + 1], sh);
        }
        const float sc = __half2float(__ushort_as_half(g.scales[r]));
        uint32_t pk[8];
#pragma unroll
        for (int t = 0; t < 16; t++) {
            const uint32_t st = bits_at<NR>(rr, (15 - t) * K) & lm;
            const __nv_bfloat16 v = __float2bfloat16_rn(__fmul_rn(code_value(st), sc));
            const uint32_t b = (uint32_t)__bfloat16_as_ushort(v);
            if (t & 1) pk[t >> 1] |= b << 16;
            else pk[t >> 1] = b;
            if (tr) W[(Pl + t) * nr + rl] = v;
        }
        if (!tr) {
            uint4 *dst = (uint4 *)(W + rl * np + Pl);
            dst[0] = make_uint4(pk[0], pk[1], pk[2], pk[3]);
            dst[1] = make_uint4(pk[4], pk[5], pk[6], pk[7]);
        }
    }
}

__global__ void k_to_bf16(const float *__restrict__ x, __nv_bfloat16 *__restrict__ xb, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        xb[i] = __float2bfloat16_rn(x[i]);
}

/* Outputs [o0, o0+no) of w in bf16: tr = 0 the coded layout (axis 1: [no, in]; axis 0:
 * [in, no]), tr = 1 always [no, in].  no is a multiple of 16 on axis 0 unless it is all outputs. */
tcq_status decode_part(tcq_cuda_ctx *ctx, cudaStream_t st, const tcq_trellis *w, int64_t o0, int64_t no, int tr,
                       __nv_bfloat16 *W)
{
    const Geo g = geo_of(w);
    const int64_t r0 = w->axis ? o0 : 0, nr = w->axis ? no : g.R;
    const int64_t p0 = w->axis ? 0 : o0, np = w->axis ? g.C : no;
    const int64_t n = nr * (np / 16);
    const int grid = (int)std::min<int64_t>((n + 255) / 256, (int64_t)ctx->n_sm * 16);
    tr = tr && !w->axis;
    switch (w->p.k) {
    case 1: k_decode_bf16<1><<<grid, 256, 0, st>>>(g, tr, r0, nr, p0, np, W); break;
    case 2: k_decode_bf16<2><<<grid, 256, 0, st>>>(g, tr, r0, nr, p0, np, W); break;
    case 3: k_decode_bf16<3><<<grid, 256, 0, st>>>(g, tr, r0, nr, p0, np, W); break;
    default: k_decode_bf16<4><<<grid, 256, 0, st>>>(g, tr, r0, nr, p0, np, W); break;
    }
    CU_LAUNCHED("cuda decode bf16");
    return TCQ_OK;
}

tcq_status decode_into(tcq_cuda_ctx *ctx, const tcq_trellis *w, __nv_bfloat16 *W)
{
    return decode_part(ctx, ctx->stream, w, 0, tcq_trellis_out(w), 1, W);
}

/* y [M, ldy] (columns [0, out) written) = xb [M, in] W^T, W [out, in] (wt = 0) or W^T [in, out]
 * (wt = 1) */
tcq_status gemm_bf16(tcq_cuda_ctx *ctx, const __nv_bfloat16 *W, int wt, const __nv_bfloat16 *xb, void *y, int64_t M,
                     int64_t out, int64_t in, int64_t ldy, cudaDataType_t ytype)
{
    const float one = 1.0f, zero = 0.0f;
    /* column-major view: y^T [out, M] = W [in, out]^T x^T [in, M] */
    cublasStatus_t s = cublasGemmEx(ctx->blas, wt ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)M, (int)in,
                                    &one, W, CUDA_R_16BF, wt ? (int)out : (int)in, xb, CUDA_R_16BF, (int)in, &zero, y, ytype, (int)ldy,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) return tcq_cublas_fail(s, "cuda GEMM");
    return TCQ_OK;
}

tcq_status check_call(tcq_cuda_ctx *ctx, const tcq_trellis *w, const void *x, const void *y, int64_t M, tcq_kpath path)
{
    if (!ctx || !w || !x || !y) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda linear: NULL argument");
    if (M < 1 || M > (1 << 20)) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda linear: M=%lld out of range", (long long)M);
    if (path != TCQ_PATH_AUTO && path != TCQ_PATH_EXACT && path != TCQ_PATH_FAST)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda linear: unknown path %d", (int)path);
    return tcq_cuda_check_weight(w);
}

}  // namespace

/* Decode + cuBLAS (what the other kernels do not take): the weights decoded to bf16, multiplied
 * with a cuBLAS bf16 GEMM.  By default the whole matrix at once.  TCQ_CUDA_GEMM_CHUNK decodes a
 * part of the outputs at a time (scratch: two parts instead of the whole matrix; an L2-sized part
 * is read back from L2, but the narrower GEMMs lost more than that saved: docs/PERFORMANCE.md, session
 * 9); with TCQ_CUDA_GEMM_OVERLAP the decode of part i+1 runs on the side stream while part i
 * multiplies (two buffers; the decode of part i+2 waits for GEMM i). */
static tcq_status linear_large(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M)
{
    const int64_t out = tcq_trellis_out(w), in = tcq_trellis_in(w);
    /* built-in: the whole matrix (parts measured slower at every size, docs/PERFORMANCE.md) */
    int64_t part = ctx->gemm_chunk > 0 ? std::max<int64_t>(16, ctx->gemm_chunk / 16 * 16) : out;
    if (part >= out) part = out;
    const int64_t n_parts = (out + part - 1) / part;
    const bool overlap = n_parts > 1 && ctx->gemm_overlap;
    const size_t pb = tcq_align256((size_t)part * in * 2), xbytes = tcq_align256((size_t)M * in * 2);
    const int n_buf = n_parts > 1 ? 2 : 1;
    void *scr;
    TCQ_TRY(tcq_cuda_scratch(ctx, pb * n_buf + xbytes, &scr));
    __nv_bfloat16 *X = (__nv_bfloat16 *)scr;
    __nv_bfloat16 *buf[2] = {(__nv_bfloat16 *)((char *)scr + xbytes), (__nv_bfloat16 *)((char *)scr + xbytes + pb)};
    const int64_t n = M * in;
    k_to_bf16<<<(int)std::min<int64_t>((n + 255) / 256, (int64_t)ctx->n_sm * 16), 256, 0, ctx->stream>>>(x, X, n);
    CU_LAUNCHED("cuda x to bf16");
    cudaEvent_t fork = ctx->ev[0], *decoded = ctx->ev + 1, *multiplied = ctx->ev + 3;
    if (overlap) {
        CU_TRY(cudaEventRecord(fork, ctx->stream), "cuda large M: fork");
        CU_TRY(cudaStreamWaitEvent(ctx->side, fork, 0), "cuda large M: fork");
    }
    for (int64_t i = 0; i < n_parts; i++) {
        const int64_t o0 = i * part, no = std::min(part, out - o0);
        __nv_bfloat16 *W = buf[i & 1];
        if (overlap) {
            if (i >= 2) CU_TRY(cudaStreamWaitEvent(ctx->side, multiplied[i & 1], 0), "cuda large M: wait GEMM");
            TCQ_TRY(decode_part(ctx, ctx->side, w, o0, no, ctx->decode_tr, W));
            CU_TRY(cudaEventRecord(decoded[i & 1], ctx->side), "cuda large M: decoded");
            CU_TRY(cudaStreamWaitEvent(ctx->stream, decoded[i & 1], 0), "cuda large M: wait decode");
        } else {
            TCQ_TRY(decode_part(ctx, ctx->stream, w, o0, no, ctx->decode_tr, W));
        }
        TCQ_TRY(gemm_bf16(ctx, W, !w->axis && !ctx->decode_tr, X, y + o0, M, no, in, out, CUDA_R_32F));
        if (overlap && i + 2 < n_parts) CU_TRY(cudaEventRecord(multiplied[i & 1], ctx->stream), "cuda large M: multiplied");
    }
    return TCQ_OK;
}

tcq_status tcq_cuda_trellis_decode_bf16(tcq_cuda_ctx *ctx, const tcq_trellis *w, uint16_t *W)
{
    if (!ctx || !W) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda decode: NULL argument");
    TCQ_TRY(tcq_cuda_check_weight(w));
    return decode_into(ctx, w, (__nv_bfloat16 *)W);
}

namespace {
enum Kern { KERN_FAST, KERN_INT8, KERN_INT, KERN_INT16, KERN_PAIR, KERN_WG, KERN_WS, KERN_GEMM };

/* The dispatcher's one decision, shared by the call and tcq_cuda_linear_kernel.  Measured
 * crossovers (docs/PERFORMANCE.md, sessions 10 to 12): on sm_90 the wgmma kernels beat the pair-table
 * ones from M = 9 (axis 1: 58-64 vs 71-103 us at M = 9..16), so the pair tables run only where
 * wgmma does not.  The integer kernels' three limbs of x' need a third n-tile from M = 6, so M =
 * 6..8 put x' in two ("int16", the wgmma kernels' precision): the scatter 51-63 us against
 * wgmma-ss's 69-71 and three limbs' 66-78, the reduce 38-42 against 44-49.  The scatter (since its
 * items fill the SMs in one round) takes the integer kernel at M = 3..5 too (48-58 vs 68-70). */
Kern pick(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M, tcq_kpath path)
{
    /* FAST: the int8 tensor-core kernels wherever they run (M <= 8; axis 1 to 16, where wgmma,
     * exact, would take 57-64 us); the dp4a kernels up to their M elsewhere.  The scatter at M <= 2
     * ran dp4a until the int8 scatter's L2 prefetch (session 13, 5120x17408, k = 2 / 4: M=1 35.3 /
     * 36.4 against dp4a's 38.6 / 40.3 us, M=2 35.9 / 37.2 against 42.7 / 43.6) */
    if (path == TCQ_PATH_FAST) {
        if (!ctx->fast_dp4a && tcq_cuda_im_supports(ctx, w, M, 1)) return KERN_INT8;
        if (M <= kFastMaxM) return KERN_FAST;
    }
    if (ctx->kernel_pin == 1 && M <= tc_max_m(ctx, w)) return KERN_PAIR;   /* TCQ_CUDA_KERNEL=tc */
    if (ctx->ws_pin == 1 && tcq_cuda_ws_supports(ctx, w, M)) return KERN_WS;
    if (M >= 6 && tcq_cuda_im_supports(ctx, w, M, 0)) return KERN_INT16;
    if (tcq_cuda_im_supports(ctx, w, M, 0)) return KERN_INT;
    if (tcq_cuda_wg_supports(ctx, w, M)) return KERN_WG;
    if (tcq_cuda_ws_supports(ctx, w, M)) return KERN_WS;
    if (M <= tc_max_m(ctx, w)) return KERN_PAIR;
    return KERN_GEMM;
}
}  // namespace

const char *tcq_cuda_linear_kernel(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M, tcq_kpath path)
{
    if (!ctx || !w) return NULL;
    static const char *const names[] = {"fast", "int8", "int", "int16", "pair", "wgmma", "wgmma-ss", "bf16-gemm"};
    return names[pick(ctx, w, M, path)];
}

int64_t tcq_cuda_fast_block(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M)
{
    if (!ctx || !w || M < 1) return 0;
    switch (pick(ctx, w, M, TCQ_PATH_FAST)) {
    case KERN_FAST: return TCQ_FAST_QB;
    case KERN_INT8: return tcq_cuda_im_chunk(ctx, w, M);
    default: return 0;
    }
}

tcq_status tcq_cuda_linear(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M, tcq_kpath path)
{
    TCQ_TRY(check_call(ctx, w, x, y, M, path));
    switch (pick(ctx, w, M, path)) {
    case KERN_FAST: return tcq_cuda_linear_fast(ctx, w, NULL, x, y, M);
    case KERN_INT8: return tcq_cuda_linear_im(ctx, w, NULL, x, y, M, 1);
    case KERN_INT: return tcq_cuda_linear_im(ctx, w, NULL, x, y, M, 3);
    case KERN_INT16: return tcq_cuda_linear_im(ctx, w, NULL, x, y, M, 2);
    case KERN_PAIR: return tcq_cuda_linear_tc(ctx, w, NULL, x, y, M);
    case KERN_WG: return tcq_cuda_linear_wg(ctx, w, x, y, M);
    case KERN_WS: return tcq_cuda_linear_ws(ctx, w, x, y, M);
    default: return linear_large(ctx, w, x, y, M);
    }
}

tcq_status tcq_cuda_linear_swiglu(tcq_cuda_ctx *ctx, const tcq_trellis *gate, const tcq_trellis *up, const float *x,
                                  float *y, int64_t M, tcq_kpath path)
{
    TCQ_TRY(check_call(ctx, gate, x, y, M, path));
    TCQ_TRY(check_call(ctx, up, x, y, M, path));
    if (tcq_trellis_out(gate) != tcq_trellis_out(up) || tcq_trellis_in(gate) != tcq_trellis_in(up))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda swiglu: gate [%lld, %lld] and up [%lld, %lld] differ",
                        (long long)tcq_trellis_out(gate), (long long)tcq_trellis_in(gate),
                        (long long)tcq_trellis_out(up), (long long)tcq_trellis_in(up));
    const bool same = gate->axis == 1 && up->axis == 1 && gate->p.L == up->p.L && gate->p.k == up->p.k &&
                      gate->p.T == up->p.T && gate->rows == up->rows && gate->cols == up->cols;
    /* the fast, integer and pair-table kernels take both matrices in one fused launch */
    switch (same ? pick(ctx, gate, M, path) : KERN_GEMM) {
    case KERN_FAST: return tcq_cuda_linear_fast(ctx, gate, up, x, y, M);
    case KERN_INT8: return tcq_cuda_linear_im(ctx, gate, up, x, y, M, 1);
    case KERN_INT: return tcq_cuda_linear_im(ctx, gate, up, x, y, M, 3);
    case KERN_INT16: return tcq_cuda_linear_im(ctx, gate, up, x, y, M, 2);
    case KERN_PAIR: return tcq_cuda_linear_tc(ctx, gate, up, x, y, M);
    default: break;
    }
    /* otherwise: both products into a temporary, then the combine (the linear kernels own the
     * context scratch) */
    const size_t n = (size_t)M * tcq_trellis_out(gate);
    float *tmp = NULL;
    CU_TRY(cudaMallocAsync((void **)&tmp, 2 * n * sizeof(float), ctx->stream), "cuda swiglu: temporaries");
    tcq_status s = tcq_cuda_linear(ctx, gate, x, tmp, M, path);
    if (s == TCQ_OK) s = tcq_cuda_linear(ctx, up, x, tmp + n, M, path);
    if (s == TCQ_OK) s = tcq_cuda_swiglu_combine(ctx, tmp, tmp + n, y, (int64_t)n);
    cudaFreeAsync(tmp, ctx->stream);
    return s;
}

/* ------------------------------------------------------------------------------- timers */
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
        return gemm_bf16(ctx, (const __nv_bfloat16 *)(buf + wb * (i % n_w)), 0, X, Y, M, out, in, out, CUDA_R_16BF);
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
