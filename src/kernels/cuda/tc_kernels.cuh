/* The tensor-core kernels (design note: linear.cu).  Included by linear_k<K>.cu, one file per
 * k so the instantiations compile in parallel. */
#ifndef TCQ_TC_KERNELS_CUH
#define TCQ_TC_KERNELS_CUH

#include "cuda_internal.h"
#include "tc_common.cuh"

namespace tcq_tc {

constexpr int kThreadsR = 640;   /* reduce: 20 warps, 102 registers a thread */
constexpr int kThreadsS = 416;   /* scatter: 8 output tiles x 2 n-tiles of accumulators, 157 registers */
constexpr int kTargetItems = 8192;   /* fixed: the split must not depend on the device */

struct Out {
    const uint2 *xf;      /* [nkt][NTt][32] B fragments */
    int NTt;
    const float *rs;      /* [S][4 NTt] 2^-e per chunk and activation row */
    float *y;             /* [M, out] */
    int M;
    int64_t out;
    float *part;          /* [S][M][out] partial sums (S > 1) */
    int *cnt;             /* [ntiles] */
    int *work;            /* [2] item queue (queue_next): warps take items in order */
    int S, chunk, n_items, ntiles;
    int64_t groups;       /* reduction length in 64s */
};


/* One launch of the M <= 32 kernel for bits k (inst/linear_k<k>.cu). */
tcq_status launch_k1(tcq_cuda_ctx *ctx, bool pair, int axis, bool sw, const Geo &g, const Geo &gu, const Out &o);
tcq_status launch_k2(tcq_cuda_ctx *ctx, bool pair, int axis, bool sw, const Geo &g, const Geo &gu, const Out &o);
tcq_status launch_k3(tcq_cuda_ctx *ctx, bool pair, int axis, bool sw, const Geo &g, const Geo &gu, const Out &o);
tcq_status launch_k4(tcq_cuda_ctx *ctx, bool pair, int axis, bool sw, const Geo &g, const Geo &gu, const Out &o);
}  // namespace tcq_tc

#ifdef TCQ_TC_K
namespace {
using namespace tcq_tc;
/* Store one output value (direct) or its partial: chunk s (up's chunks follow gate's). */
__device__ __forceinline__ void put(const Out &o, bool direct, int s, int m, int64_t oi, float v)
{
    if (direct) o.y[(int64_t)m * o.out + oi] = v;
    else o.part[((int64_t)s * o.M + m) * o.out + oi] = v;
}

/* Called by a whole warp after its put()s: the last chunk of a tile sums the partials in order.
 * fin(m, oi, sum) maps the sum to y. */
__device__ __forceinline__ bool tile_last(const Out &o, int tile, int arrivals)
{
    if (arrivals == 1) return false;
    __threadfence();
    __syncwarp();
    int old = 0;
    if ((threadIdx.x & 31) == 0) old = atomicAdd(&o.cnt[tile], 1);
    old = __shfl_sync(0xffffffffu, old, 0);
    if (old != arrivals - 1) return false;
    __threadfence();
    if ((threadIdx.x & 31) == 0) o.cnt[tile] = 0;   /* ready for the next launch */
    return true;
}

__device__ __forceinline__ float sum_parts(const Out &o, int m, int64_t oi, int first = 0)
{
    float s = 0.0f;
    for (int k = first; k < first + o.S; k++) s += __ldcg(&o.part[((int64_t)k * o.M + m) * o.out + oi]);
    return s;
}

/* ---------------------------------------------------------------- axis 1: reduce, 32 rows/item
 * SW: fused gate/up + SwiGLU: g is gate, gu is up (same geometry); the items of a tile cover
 * both matrices and its last warp writes silu(gate) * up. */
template <int K, bool PAIR, int NT, bool SW>
__global__ void __launch_bounds__(kThreadsR, 1) k_reduce(Geo g0, Geo gu, Out o)
{
    const Geo &g = g0;
    extern __shared__ __align__(16) uint8_t smem[];
    build_table<K, PAIR>(smem, g.L);
    __syncthreads();
    const uint32_t tabs = (uint32_t)__cvta_generic_to_shared(smem);
    const int lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
    const int wpb_ = g.wpb;
    const int nw = gridDim.x * (blockDim.x >> 5);
    const int per = SW ? 2 * o.S : o.S;
    (void)nw;
    for (;;) {
        const int item = queue_next(o.work, o.n_items);
        if (item >= o.n_items) break;
        const int tile = item / per, sw = item % per, s = sw % o.S;
        const Geo &gm = (SW && sw >= o.S) ? gu : g0;
        const int64_t r0 = (int64_t)tile * 32;
        const int64_t c0 = (int64_t)s * o.chunk, c1 = min(c0 + o.chunk, o.groups);
        int64_t row[4];
        bool ok[4];
#pragma unroll
        for (int d = 0; d < 4; d++) {
            row[d] = r0 + 16 * (d >> 1) + gq + 8 * (d & 1);
            ok[d] = row[d] < g.R;
        }
        float acc[2][NT][4];
#pragma unroll
        for (int rt = 0; rt < 2; rt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[rt][nt][e] = 0.0f;
        uint32_t w[4][Dec<K>::NL];
        int b_lo = 0;
        /* Row bases once per item; rows past R read row R-1 (their outputs are not written and
         * an A row only feeds its own D row), so the loads need no branches. */
        const uint32_t *rb[4];
#pragma unroll
        for (int d = 0; d < 4; d++)
            rb[d] = gm.codes + (int64_t)(int)min(row[d], gm.R - 1) * (int)gm.row_words;
        auto issue = [&](int64_t c) {
            const int P = 64 * (int)c + 16 * q;
            const int blk = P >> g.log2T;
            const int Pb = P & (g.T - 1);
            b_lo = (g.T - Pb - 16) * K;
#pragma unroll
            for (int d = 0; d < 4; d++) load16<K>(rb[d] + blk * wpb_, wpb_, b_lo, w[d]);
        };
        if (c0 < c1) issue(c0);
        for (int64_t c = c0; c < c1; c++) {
            uint32_t pr[4][8];
#pragma unroll
            for (int d = 0; d < 4; d++) decode16<K, PAIR>(w[d], b_lo, tabs, g.L, pr[d]);
            if (c + 1 < c1) issue(c + 1);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int64_t kt = 4 * c + j;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const uint2 b = __ldg(&o.xf[(kt * o.NTt + nt) * 32 + lane]);
#pragma unroll
                    for (int rt = 0; rt < 2; rt++)
                        mma16816(acc[rt][nt], pr[2 * rt][2 * j], pr[2 * rt + 1][2 * j], pr[2 * rt][2 * j + 1],
                                 pr[2 * rt + 1][2 * j + 1], b);
                }
            }
        }
        /* lane owns rows row[2rt], row[2rt+1] for m = 4nt + q */
        const bool direct = !SW && o.S == 1;
#pragma unroll
        for (int rt = 0; rt < 2; rt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const int m = 4 * nt + q;
                if (m >= o.M) continue;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int d = 2 * rt + h;
                    if (!ok[d]) continue;
                    float v = (acc[rt][nt][2 * h] + acc[rt][nt][2 * h + 1]) * o.rs[s * 4 * o.NTt + m];
                    if (direct) v *= __half2float(__ushort_as_half(g.scales[row[d]])) / kD;
                    put(o, direct, sw, m, row[d], v);
                }
            }
        if (tile_last(o, tile, direct ? 1 : per)) {
#pragma unroll
            for (int d = 0; d < 4; d++) {
                if (!ok[d]) continue;
                const float f = __half2float(__ushort_as_half(g.scales[row[d]])) / kD;
                const float fu = SW ? __half2float(__ushort_as_half(gu.scales[row[d]])) / kD : 0.0f;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const int m = 4 * nt + q;
                    if (m >= o.M) continue;
                    float v = sum_parts(o, m, row[d]) * f;
                    if (SW) v = __fdiv_rn(v, __fadd_rn(1.0f, expf(-v))) * (sum_parts(o, m, row[d], o.S) * fu);
                    o.y[(int64_t)m * o.out + row[d]] = v;
                }
            }
        }
    }
}

/* --------------------------------------------------------------- axis 0: scatter, 128 outputs/item */
template <int K, bool PAIR, int NTG>
__global__ void __launch_bounds__(kThreadsS, 1) k_scatter(Geo g, Geo unused, Out o)
{
    (void)unused;
    extern __shared__ __align__(16) uint8_t smem[];
    build_table<K, PAIR>(smem, g.L);
    __syncthreads();
    const uint32_t tabs = (uint32_t)__cvta_generic_to_shared(smem);
    const int lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
    const int wpb_ = g.wpb;
    const int nw = gridDim.x * (blockDim.x >> 5);
    const int64_t nkt = o.groups * 4;
    (void)nw;
    for (;;) {
        const int item = queue_next(o.work, o.n_items);
        if (item >= o.n_items) break;
        /* chunk-major: warps running together read whole coded rows (neighbouring output tiles
         * of the same rows), not 32-byte pieces of many rows */
        const int tile = item % o.ntiles, s = item / o.ntiles;
        const int64_t P = (int64_t)tile * 128 + 16 * gq;          /* this lane's 16 outputs */
        const bool pok = P < g.C;
        const int64_t blk = P >> g.log2T;
        const int Pb = (int)(P & (g.T - 1));
        const int b_lo = (g.T - Pb - 16) * K;
        const int64_t k0 = 4 * (int64_t)s * o.chunk, k1 = min(k0 + 4 * (int64_t)o.chunk, nkt);
        for (int ng = 0; ng < o.NTt; ng += NTG) {
            float acc[8][NTG][4];
#pragma unroll
            for (int u = 0; u < 8; u++)
#pragma unroll
                for (int nt = 0; nt < NTG; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) acc[u][nt][e] = 0.0f;
            uint32_t w[4][Dec<K>::NL];
            /* Coded rows past R read row R-1: their B entries are zero (x prep pads) and y is a
             * finite integer, so they add exactly 0; positions past C read block 0 and are not
             * written.  No branches around the loads. */
            const int64_t bq = pok ? blk : 0;
            const uint32_t *base = g.interleaved ? g.codes + (bq >> 1) * g.R * 48 + (bq & 1) * 24 : g.codes + bq * g.wpb;
            const int stride = g.interleaved ? 48 : (int)g.row_words;
            const int rmax = (int)g.R - 1;
            auto issue = [&](int64_t kt) {
                const int i0 = 64 * (int)(kt >> 2) + 16 * q + 4 * (int)(kt & 3);
#pragma unroll
                for (int d = 0; d < 4; d++) load16<K>(base + (int64_t)min(i0 + d, rmax) * stride, wpb_, b_lo, w[d]);
            };
            if (k0 < k1) issue(k0);
            for (int64_t kt = k0; kt < k1; kt++) {
                uint32_t pr[4][8];
#pragma unroll
                for (int d = 0; d < 4; d++) decode16<K, PAIR>(w[d], b_lo, tabs, g.L, pr[d]);
                /* rows past R decode to garbage of zero words: zero them (B is zero there too,
                 * but 0 * NaN would not be 0, and y(0-state) is finite anyway) */
                if (kt + 1 < k1) issue(kt + 1);
#pragma unroll
                for (int nt = 0; nt < NTG; nt++) {
                    const uint2 b = __ldg(&o.xf[(kt * o.NTt + ng + nt) * 32 + lane]);
#pragma unroll
                    for (int u = 0; u < 8; u++)
                        mma16816(acc[u][nt], __byte_perm(pr[0][u], pr[1][u], 0x5410), __byte_perm(pr[0][u], pr[1][u], 0x7632),
                                 __byte_perm(pr[2][u], pr[3][u], 0x5410), __byte_perm(pr[2][u], pr[3][u], 0x7632), b);
                }
            }
            if (pok) {
#pragma unroll
                for (int nt = 0; nt < NTG; nt++) {
                    const int m = 4 * (ng + nt) + q;
                    if (m >= o.M) continue;
#pragma unroll
                    for (int u = 0; u < 8; u++)
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            float v = (acc[u][nt][2 * h] + acc[u][nt][2 * h + 1]) * o.rs[s * 4 * o.NTt + m];
                            if (o.S == 1) v = v / kD;
                            put(o, o.S == 1, s, m, P + 2 * u + h, v);
                        }
                }
            }
        }
        /* S > 1: k_finish (linear.cu) adds the chunks: a last-warp reduction of ~100 chunks per
         * output left the SMs idle for most of the launch (ncu, docs/PERFORMANCE.md) */
    }
}

template <typename F>
tcq_status launch_persistent(tcq_cuda_ctx *ctx, F kern, int threads, size_t smem, const Geo &g, const Geo &gu, const Out &o,
                             const char *what)
{
    if (smem > 48 * 1024) CU_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), what);
    int per_sm = 0;
    CU_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem), what);
    if (per_sm < 1) return tcq_fail(TCQ_ERR_DEVICE, "%s: kernel does not fit an SM (%zu bytes shared)", what, smem);
    const int want = (o.n_items + threads / 32 - 1) / (threads / 32);   /* at most one item per warp more */
    const int grid = min(ctx->n_sm * per_sm, want);
    kern<<<grid, threads, smem, ctx->stream>>>(g, gu, o);
    CU_LAUNCHED(what);
    return TCQ_OK;
}

template <int K, bool PAIR, bool SW>
tcq_status launch_r(tcq_cuda_ctx *ctx, size_t smem, const Geo &g, const Geo &gu, const Out &o)
{
    switch (o.NTt) {
    case 1: return launch_persistent(ctx, k_reduce<K, PAIR, 1, SW>, kThreadsR, smem, g, gu, o, "cuda reduce kernel");
    case 2: return launch_persistent(ctx, k_reduce<K, PAIR, 2, SW>, kThreadsR, smem, g, gu, o, "cuda reduce kernel");
    case 4: return launch_persistent(ctx, k_reduce<K, PAIR, 4, SW>, kThreadsR, smem, g, gu, o, "cuda reduce kernel");
    default: return launch_persistent(ctx, k_reduce<K, PAIR, 8, SW>, kThreadsR, smem, g, gu, o, "cuda reduce kernel");
    }
}

template <int K, bool PAIR>
tcq_status launch_k(tcq_cuda_ctx *ctx, int axis, bool sw, const Geo &g, const Geo &gu, const Out &o)
{
    const size_t smem = PAIR ? ((size_t)4 << (g.L + K)) : ((size_t)2 << g.L);
    if (axis == 1) return sw ? launch_r<K, PAIR, true>(ctx, smem, g, gu, o) : launch_r<K, PAIR, false>(ctx, smem, g, gu, o);
    if (o.NTt == 1) return launch_persistent(ctx, k_scatter<K, PAIR, 1>, kThreadsS, smem, g, gu, o, "cuda scatter kernel");
    return launch_persistent(ctx, k_scatter<K, PAIR, 2>, kThreadsS, smem, g, gu, o, "cuda scatter kernel");
}

}  // namespace

#define TCQ_TC_CAT2(a, b) a##b
#define TCQ_TC_CAT(a, b) TCQ_TC_CAT2(a, b)
tcq_status tcq_tc::TCQ_TC_CAT(launch_k, TCQ_TC_K)(tcq_cuda_ctx *ctx, bool pair, int axis, bool sw, const Geo &g, const Geo &gu,
                                               const Out &o)
{
    return pair ? launch_k<TCQ_TC_K, true>(ctx, axis, sw, g, gu, o) : launch_k<TCQ_TC_K, false>(ctx, axis, sw, g, gu, o);
}
#endif

#endif
