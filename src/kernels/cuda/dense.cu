/* The large-M path: the trellis tensor decoded to bf16 (FORMAT.md's bf16 contract), then a cuBLAS
 * bf16 GEMM; also the public bf16 decode.  The dispatcher (dispatch.cu) sends here what no
 * tensor-core kernel takes. */
#include "cuda_internal.h"
#include "tc_common.cuh"

#include <cuda_bf16.h>

#include <algorithm>

using namespace tcq_tc;

namespace {

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

}  // namespace

tcq_status tcq_cuda_gemm_bf16(tcq_cuda_ctx *ctx, const __nv_bfloat16 *W, int wt, const __nv_bfloat16 *xb, void *y,
                              int64_t M, int64_t out, int64_t in, int64_t ldy, cudaDataType_t ytype)
{
    const float one = 1.0f, zero = 0.0f;
    /* column-major view: y^T [out, M] = W [in, out]^T x^T [in, M] */
    cublasStatus_t s = cublasGemmEx(ctx->blas, wt ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)M, (int)in,
                                    &one, W, CUDA_R_16BF, wt ? (int)out : (int)in, xb, CUDA_R_16BF, (int)in, &zero, y, ytype, (int)ldy,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) return tcq_cublas_fail(s, "cuda GEMM");
    return TCQ_OK;
}

/* Decode + cuBLAS (what the other kernels do not take): the weights decoded to bf16 in their
 * coded layout (axis 0 as W^T, which the GEMM reads untransposed: 10-26 % faster than transposed
 * stores), multiplied with a cuBLAS bf16 GEMM.  The whole matrix at once: decoding parts small
 * enough to stay in L2, overlapped or not, measured slower at every size (docs/PERFORMANCE.md). */
tcq_status tcq_cuda_linear_gemm(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M)
{
    const int64_t out = tcq_trellis_out(w), in = tcq_trellis_in(w);
    const size_t wbytes = tcq_align256((size_t)out * in * 2), xbytes = tcq_align256((size_t)M * in * 2);
    void *scr;
    TCQ_TRY(tcq_cuda_scratch(ctx, wbytes + xbytes, &scr));
    __nv_bfloat16 *X = (__nv_bfloat16 *)scr, *W = (__nv_bfloat16 *)((char *)scr + xbytes);
    const int64_t n = M * in;
    k_to_bf16<<<(int)std::min<int64_t>((n + 255) / 256, (int64_t)ctx->n_sm * 16), 256, 0, ctx->stream>>>(x, X, n);
    CU_LAUNCHED("cuda x to bf16");
    TCQ_TRY(decode_part(ctx, ctx->stream, w, 0, out, 0, W));
    return tcq_cuda_gemm_bf16(ctx, W, !w->axis, X, y, M, out, in, out, CUDA_R_32F);
}

tcq_status tcq_cuda_trellis_decode_bf16(tcq_cuda_ctx *ctx, const tcq_trellis *w, uint16_t *W)
{
    if (!ctx || !W) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda decode: NULL argument");
    TCQ_TRY(tcq_cuda_check_weight(w));
    return decode_into(ctx, w, (__nv_bfloat16 *)W);
}
