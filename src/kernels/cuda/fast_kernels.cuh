/* The fast (int8) path's kernels (design note: fast.cu).  Included by fast_k<K>.cu, one file
 * per k so the instantiations compile in parallel, and by fast_quant.cuh. */
#ifndef TCQ_FAST_KERNELS_CUH
#define TCQ_FAST_KERNELS_CUH

#ifndef TCQ_FAST_EMU   /* tests/cuda/emu_fast.cpp compiles these kernels on the host */
#include "cuda_internal.h"
#include "tc_common.cuh"
#endif

namespace tcq_fast {

using tcq_tc::Geo;

constexpr int kMaxM = 8;               /* activation rows the fast kernels take in one pass */
constexpr int kQB = TCQ_FAST_QB;       /* activation block along the reduced dimension */
static_assert(kQB == 64, "the reduce kernel gives each lane one activation block of 64 positions");
constexpr int kReduceThreads = 256;
constexpr int kScatterThreads = 128;
constexpr int kScatterCols = 128;      /* output columns of one scatter work item */
/* Target items (fixed: the split must not depend on the device).  Fewer: less partial-sum
 * traffic ([S, M, out] floats); more: a shorter tail (5120x17408: 40 column tiles x S = 91
 * groups of 3 blocks = 3640 warps, 24 K weights each; partials 1.9 MB per activation row). */
constexpr int kScatterItems = 4096;
constexpr float kRinv = 1.0f / 147.800537109375f;   /* TCQ_RMAD_RINV, the same f32 constant */

/* Quantized activations (fast.cu's k_quant): q replicated into the four bytes (the dp4a operand),
 * the step d and the -510 sum(q) offset per block of kQB positions. */
struct Act {
    const uint32_t *q4;    /* [M, npad] */
    const float *d;        /* [M, nblk] */
    const int *corr;       /* [M, nblk] */
    int64_t npad, nblk;
};

/* Scatter split: work item = (column tile of kScatterCols, group of G activation blocks).
 * ntiles == 0 marks an axis-1 call. */
struct ScatterSplit {
    int64_t ntiles, S, G;
    float *part;           /* [S, M, C] when S > 1; else NULL and the kernel writes y */
    float *y;              /* [M, C] */
};

/* Words of a window of NP consecutive positions starting at bit b_lo of a block: NP*K bits plus
 * the L-K bits the last state reaches above them (L <= 16). */
template <int K, int NP> struct Win {
    static constexpr int SPAN = NP * K + 16 - K;
    static constexpr bool ALIGNED = (NP * K) % 32 == 0;   /* b_lo is then a multiple of 32 */
    static constexpr int NR = (SPAN + 31) / 32;            /* registers after alignment */
    static constexpr int NW = ALIGNED ? NR : NR + 1;       /* words loaded */
};

/* r[j] = bits [b_lo + 32 j, +32) of the block, wrapping from its last word to its first. */
template <int K, int NP>
__device__ __forceinline__ void load_win(const uint32_t *__restrict__ blk, int wpb, int b_lo,
                                         uint32_t (&r)[Win<K, NP>::NR])
{
    using W = Win<K, NP>;
    uint32_t w[W::NW];
    const int w0 = b_lo >> 5;
#pragma unroll
    for (int j = 0; j < W::NW; j++) {
        int idx = w0 + j;
        idx = idx >= wpb ? idx - wpb : idx;
        idx = idx >= wpb ? idx - wpb : idx;   /* k=1, T=64: a 64-position window wraps twice */
        w[j] = __ldg(blk + idx);
    }
    if (W::ALIGNED) {
#pragma unroll
        for (int j = 0; j < W::NR; j++) r[j] = w[j];
    } else {
        const int sh = b_lo & 31;
#pragma unroll
        for (int j = 0; j < W::NR; j++) r[j] = __funnelshift_r(w[j], w[j + (W::NW > W::NR ? 1 : 0)], sh);
    }
}

/* 32 bits from bit o of the window (o a compile-time constant after unrolling). */
template <int NR>
__device__ __forceinline__ uint32_t wbits(const uint32_t (&r)[NR], int o)
{
    const int wi = o >> 5, sh = o & 31;
    if (sh == 0) return r[wi];
    if (wi + 1 < NR) return __funnelshift_r(r[wi], r[wi + 1], sh);
    return r[wi] >> sh;
}

/* x = s * 34038481 + 76625530 for the state at bit o of the window: its four bytes are the
 * unsigned operand of dp4a. */
template <int NR>
__device__ __forceinline__ uint32_t mad_at(const uint32_t (&r)[NR], int o, uint32_t lm)
{
    return (wbits<NR>(r, o) & lm) * TCQ_RMAD_MUL + TCQ_RMAD_ADD;
}

/* acc + sum over the four bytes b of x: b * q (x unsigned bytes, q4 signed bytes). */
__device__ __forceinline__ int dp4a_us(uint32_t x, uint32_t q4, int acc)
{
#ifdef TCQ_FAST_EMU
    return tcq_emu_dp4a_us(x, q4, acc);
#else
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(q4), "r"(acc));
    return d;
#endif
}

/* ---------------------------------------------------------------- reduce (axis 1)
 * One warp per output row; lane l takes the activation blocks l, l+32, ... of the row (64
 * positions each, so the integer block sum stays in one lane).  f32: a chain per lane over its
 * blocks in order, then a fixed butterfly over the lanes. */
template <int K, int M>
__device__ __forceinline__ void row_dot(const Geo &g, int64_t r, const Act &a, int lane, float (&acc)[M])
{
    constexpr int NR = Win<K, 64>::NR;
    const int64_t nch = g.C / 64;
    const uint32_t lm = (1u << g.L) - 1u;
#pragma unroll
    for (int m = 0; m < M; m++) acc[m] = 0.0f;
    for (int64_t c = lane; c < nch; c += 32) {
        const int64_t P = c * 64, blk = P >> g.log2T;
        const int Pb = (int)(P & (g.T - 1));
        uint32_t rr[NR];
        load_win<K, 64>(tcq_tc::block_ptr(g, r, blk), g.wpb, (g.T - Pb - 64) * K, rr);
        int is[M];
#pragma unroll
        for (int m = 0; m < M; m++) is[m] = __ldg(a.corr + m * a.nblk + c);
        const uint32_t *q = a.q4 + c * 64;
#pragma unroll
        for (int s8 = 0; s8 < 8; s8++) {
            uint32_t xv[8];
#pragma unroll
            for (int j = 0; j < 8; j++) xv[j] = mad_at<NR>(rr, (63 - (8 * s8 + j)) * K, lm);
#pragma unroll
            for (int m = 0; m < M; m++) {
                const uint4 qa = __ldg((const uint4 *)(q + m * a.npad + 8 * s8));
                const uint4 qb = __ldg((const uint4 *)(q + m * a.npad + 8 * s8 + 4));
                int s = is[m];
                s = dp4a_us(xv[0], qa.x, s);
                s = dp4a_us(xv[1], qa.y, s);
                s = dp4a_us(xv[2], qa.z, s);
                s = dp4a_us(xv[3], qa.w, s);
                s = dp4a_us(xv[4], qb.x, s);
                s = dp4a_us(xv[5], qb.y, s);
                s = dp4a_us(xv[6], qb.z, s);
                s = dp4a_us(xv[7], qb.w, s);
                is[m] = s;
            }
        }
#pragma unroll
        for (int m = 0; m < M; m++) acc[m] = __fmaf_rn((float)is[m], __ldg(a.d + m * a.nblk + c), acc[m]);
    }
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int o = 16; o; o >>= 1) acc[m] = __fadd_rn(acc[m], __shfl_xor_sync(0xffffffffu, acc[m], o));
}

/* SW: y = silu(x gate^T) * (x up^T), g the gate and gu the up tensor (same geometry). */
template <int K, int M, bool SW>
__global__ void __launch_bounds__(kReduceThreads) k_reduce(Geo g, Geo gu, Act a, float *__restrict__ y)
{
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < g.R; r += nwarps) {
        float acc[M];
        row_dot<K, M>(g, r, a, lane, acc);
        const float f = __fmul_rn(__half2float(__ushort_as_half(g.scales[r])), kRinv);
        float v = acc[0];
#pragma unroll
        for (int m = 1; m < M; m++)
            if (lane == m) v = acc[m];
        v = __fmul_rn(v, f);
        if (SW) {
            row_dot<K, M>(gu, r, a, lane, acc);
            const float fu = __fmul_rn(__half2float(__ushort_as_half(gu.scales[r])), kRinv);
            float u = acc[0];
#pragma unroll
            for (int m = 1; m < M; m++)
                if (lane == m) u = acc[m];
            u = __fmul_rn(u, fu);
            v = __fmul_rn(__fdiv_rn(v, __fadd_rn(1.0f, expf(-v))), u);
        }
        if (lane < M) y[(int64_t)lane * g.R + r] = v;
    }
}

/* ---------------------------------------------------------------- scatter (axis 0)
 * One warp per item (128 output columns x G activation blocks of 64 stored rows).  Lane
 * (cl, rl) = (lane % CL, lane / CL) decodes NP columns of rows rl*RPL .. +RPL of each block, so
 * one warp load covers RL rows x 128 columns.  Per block the integer sums of the RL row lanes are
 * combined by a reduce-scatter butterfly (exact: integers), which leaves each lane E/RL of the
 * E = M*NP sums; those it scales by d and accumulates in f32 (in block order). */
template <int M> struct SGeo {
    static constexpr int NP = M <= 4 ? 16 : 8;   /* columns per lane: 2*M*NP + NP registers */
    static constexpr int CL = kScatterCols / NP;
    static constexpr int RL = 32 / CL;
    static constexpr int LOG_RL = RL == 4 ? 2 : 1;
    static_assert(RL == 2 || RL == 4, "two or four row lanes");
    static constexpr int RPL = 64 / RL;          /* rows per lane per block */
    static constexpr int RG = M <= 4 ? 4 : 2;    /* rows per vector load of q4 */
    static constexpr int E = M * NP;
    static constexpr int OWN = E / RL;
};

/* One level of the reduce-scatter: the lane keeps half H of is[0, 2H) (the upper one if hi),
 * adding the partner's copy of that half, and stores it in is[0, H). */
template <int H, int N>
__device__ __forceinline__ void rs_level(int (&is)[N], int hi, int off)
{
#pragma unroll
    for (int e = 0; e < H; e++) {
        const int send = hi ? is[e] : is[e + H], keep = hi ? is[e + H] : is[e];
        is[e] = keep + __shfl_xor_sync(0xffffffffu, send, off);
    }
}

template <int K, int M>
__global__ void __launch_bounds__(kScatterThreads) k_scatter(Geo g, Act a, ScatterSplit sp)
{
    using S = SGeo<M>;
    constexpr int NP = S::NP, CL = S::CL, RPL = S::RPL, RG = S::RG, E = S::E, OWN = S::OWN;
    constexpr int NR = Win<K, NP>::NR;
    const int lane = threadIdx.x & 31, cl = lane % CL, rl = lane / CL;
    const int64_t item = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (item >= sp.ntiles * sp.S) return;   /* whole warps */
    const int64_t tile = item % sp.ntiles, s = item / sp.ntiles;
    const int64_t col = tile * kScatterCols + cl * NP;
    const bool active = col < g.C;          /* C is a multiple of 64, NP divides 64 */
    const int64_t colc = active ? col : 0;
    const int64_t blk = colc >> g.log2T;
    const int b_lo = (g.T - (int)(colc & (g.T - 1)) - NP) * K;
    const uint32_t lm = (1u << g.L) - 1u;
    /* the E/RL sums this lane owns after the butterfly start at element `own0` */
    int own0 = 0;
#pragma unroll
    for (int lv = 0; lv < S::LOG_RL; lv++) own0 += ((rl >> lv) & 1) * (E >> (lv + 1));
    float acc[OWN];
#pragma unroll
    for (int j = 0; j < OWN; j++) acc[j] = 0.0f;
    const int64_t qb0 = s * sp.G, qb1 = min(a.nblk, qb0 + sp.G);
    for (int64_t qb = qb0; qb < qb1; qb++) {
        int is[E];
#pragma unroll
        for (int e = 0; e < E; e++) is[e] = 0;
        for (int rg = 0; rg < RPL; rg += RG) {
            const int64_t i0 = qb * 64 + rl * RPL + rg;
            uint32_t qv[M][RG];
#pragma unroll
            for (int m = 0; m < M; m++) {
                const uint32_t *qp = a.q4 + m * a.npad + i0;
                if (RG == 4) {
                    const uint4 v = __ldg((const uint4 *)qp);
                    qv[m][0] = v.x, qv[m][1] = v.y, qv[m][RG > 2 ? 2 : 0] = v.z, qv[m][RG > 3 ? 3 : 0] = v.w;
                } else {
                    const uint2 v = __ldg((const uint2 *)qp);
                    qv[m][0] = v.x, qv[m][1] = v.y;
                }
            }
#pragma unroll
            for (int j = 0; j < RG; j++) {
                /* rows past the tensor have q = 0: decode a valid row instead of branching */
                const int64_t i = min(i0 + j, g.R - 1);
                uint32_t rr[NR];
                load_win<K, NP>(tcq_tc::block_ptr(g, i, blk), g.wpb, b_lo, rr);
#pragma unroll
                for (int p = 0; p < NP; p++) {
                    const uint32_t xv = mad_at<NR>(rr, (NP - 1 - p) * K, lm);
#pragma unroll
                    for (int m = 0; m < M; m++) is[m * NP + p] = dp4a_us(xv, qv[m][j], is[m * NP + p]);
                }
            }
        }
        /* reduce-scatter over the RL row lanes: each level keeps half of the remaining sums */
        rs_level<E / 2>(is, rl & 1, CL);
        if (S::LOG_RL == 2) rs_level<E / 4>(is, (rl >> 1) & 1, 2 * CL);
#pragma unroll
        for (int j = 0; j < OWN; j++) {
            const int m = (own0 + j) / NP;
            const float d = __ldg(a.d + m * a.nblk + qb);
            acc[j] = __fmaf_rn((float)(is[j] + __ldg(a.corr + m * a.nblk + qb)), d, acc[j]);
        }
    }
    if (!active) return;
#pragma unroll
    for (int j = 0; j < OWN; j++) {
        const int m = (own0 + j) / NP, p = (own0 + j) % NP;
        if (sp.part) sp.part[(s * M + m) * g.C + col + p] = acc[j];
        else sp.y[m * g.C + col + p] = __fmul_rn(acc[j], kRinv);
    }
}

/* One launch of the fast kernels for bits k (inst/fast_k<k>.cu).  up != NULL: fused SwiGLU (axis 1). */
tcq_status fast_launch_k1(tcq_cuda_ctx *ctx, const Geo &g, const Geo *up, int M, const Act &a, const ScatterSplit &sp, float *y);
tcq_status fast_launch_k2(tcq_cuda_ctx *ctx, const Geo &g, const Geo *up, int M, const Act &a, const ScatterSplit &sp, float *y);
tcq_status fast_launch_k3(tcq_cuda_ctx *ctx, const Geo &g, const Geo *up, int M, const Act &a, const ScatterSplit &sp, float *y);
tcq_status fast_launch_k4(tcq_cuda_ctx *ctx, const Geo &g, const Geo *up, int M, const Act &a, const ScatterSplit &sp, float *y);

}  // namespace tcq_fast

#ifdef TCQ_FAST_K
namespace tcq_fast {
namespace {
template <int M>
tcq_status launch_m(tcq_cuda_ctx *ctx, const Geo &g, const Geo *up, const Act &a, const ScatterSplit &sp, float *y)
{
    constexpr int K = TCQ_FAST_K;
    if (sp.ntiles > 0) {   /* axis 0 */
        const int64_t warps = sp.ntiles * sp.S, per = kScatterThreads / 32;
        k_scatter<K, M><<<(unsigned)((warps + per - 1) / per), kScatterThreads, 0, ctx->stream>>>(g, a, sp);
        CU_LAUNCHED("cuda fast scatter");
        return TCQ_OK;
    }
    const int per = kReduceThreads / 32;
    const unsigned grid = (unsigned)TCQ_MIN((g.R + per - 1) / per, (int64_t)1 << 20);
    if (up) k_reduce<K, M, true><<<grid, kReduceThreads, 0, ctx->stream>>>(g, *up, a, y);
    else k_reduce<K, M, false><<<grid, kReduceThreads, 0, ctx->stream>>>(g, g, a, y);
    CU_LAUNCHED("cuda fast reduce");
    return TCQ_OK;
}
}  // namespace

#define TCQ_FAST_CAT2(a, b) a##b
#define TCQ_FAST_CAT(a, b) TCQ_FAST_CAT2(a, b)
tcq_status TCQ_FAST_CAT(fast_launch_k, TCQ_FAST_K)(tcq_cuda_ctx *ctx, const Geo &g, const Geo *up, int M, const Act &a,
                                                   const ScatterSplit &sp, float *y)
{
    switch (M) {
    case 1: return launch_m<1>(ctx, g, up, a, sp, y);
    case 2: return launch_m<2>(ctx, g, up, a, sp, y);
    case 3: return launch_m<3>(ctx, g, up, a, sp, y);
    case 4: return launch_m<4>(ctx, g, up, a, sp, y);
    case 5: return launch_m<5>(ctx, g, up, a, sp, y);
    case 6: return launch_m<6>(ctx, g, up, a, sp, y);
    case 7: return launch_m<7>(ctx, g, up, a, sp, y);
    default: return launch_m<8>(ctx, g, up, a, sp, y);
    }
}
}  // namespace tcq_fast
#endif

#endif
