/* What the two wgmma kernels (wgmma.cu: decode into A registers; wgss.cu: decode into shared
 * memory) share, and bench/micro/wgmma_ceiling.cu with them: the x prep into shared-memory tile
 * order, the wgmma fences, the stage rings' copies and mbarriers, the exact f16 pair of a decode,
 * the work split and the fix-up that adds the partial sums of tiles cut between blocks.  A tile
 * is kRows outputs x NB activation rows; its units are equal slices of the reduced dimension
 * (256-position blocks in wgmma.cu, 64-k stages in wgss.cu); partials are [block][2][NB][kRows]
 * f32. */
#ifndef TCQ_WG_COMMON_CUH
#define TCQ_WG_COMMON_CUH

#include "cuda_internal.h"
#include "tc_common.cuh"

#include <cuda_fp16.h>

#include <stdint.h>

namespace tcq_wgs {

constexpr int kRows = 128;   /* outputs of a tile */
constexpr int kSK = 64;      /* k of a shared-memory stage of x */

/* Element offset of (activation row n, logical k) inside a stage tile: 8x8 core matrices of 128
 * bytes, [k / 8][n / 8][n % 8][k % 8].  The wgmma descriptor's strides follow from it: 128 bytes
 * between neighbouring core matrices along N, NB * 16 along K. */
template <int NB>
__host__ __device__ constexpr int tile_off(int n, int k)
{
    return (((k >> 3) * (NB / 8) + (n >> 3)) << 6) + ((n & 7) << 3) + (k & 7);
}

/* x in f16 at its tile places, after a power-of-two scale per activation row (zeros for padding
 * rows), in two kernels over (row, 2048-value slice) blocks: the slices' maxima, then each block
 * takes its row's maximum from them and converts its slice.  (One block per row, as before,
 * left most SMs idle at small M: 8-9 us for 64 x 17408, docs/PERFORMANCE.md session 10.)  PERM: the
 * k order of wgmma.cu (below); otherwise natural.  ks (NULL: none): an f16 factor per input
 * multiplied into x first, in f32 (wgss.cu's axis 0 folds its per-input scales into x). */
constexpr int kXprepSlice = 2048;

__device__ __forceinline__ float xval(const float *__restrict__ x, const uint16_t *__restrict__ ks, int64_t i)
{
    return ks ? x[i] * __half2float(__ushort_as_half(ks[i])) : x[i];
}

static __device__ __forceinline__ float block_max256(float mx)
{
    __shared__ float red[8];
    for (int d = 16; d; d >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
    __syncthreads();
    mx = 0.0f;
    for (int k = 0; k < 8; k++) mx = fmaxf(mx, red[k]);
    return mx;
}

/* pmax[m][s] = max |x| over slice s of row m (0 for padding rows) */
static __global__ void __launch_bounds__(256) k_wg_xmax(const float *__restrict__ x, int M, int64_t in,
                                                 const uint16_t *__restrict__ ks, float *__restrict__ pmax)
{
    const int m = blockIdx.x, sl = blockIdx.y;
    float mx = 0.0f;
    if (m < M) {
        const float *xr = x + (int64_t)m * in;
        const int64_t i1 = min(in, (int64_t)(sl + 1) * kXprepSlice);
#pragma unroll 8
        for (int64_t i = (int64_t)sl * kXprepSlice + threadIdx.x; i < i1; i += 256) mx = fmaxf(mx, fabsf(xval(xr, ks, i)));
    }
    mx = block_max256(mx);
    if (threadIdx.x == 0) pmax[(int64_t)m * gridDim.y + sl] = mx;
}

template <int NB, bool PERM>
__global__ void __launch_bounds__(256) k_wg_xconv(const float *__restrict__ x, int M, int64_t in,
                                                  const uint16_t *__restrict__ ks, const float *__restrict__ pmax,
                                                  __half *__restrict__ xp, float *__restrict__ xe)
{
    const int m = blockIdx.x, sl = blockIdx.y;
    const bool real = m < M;
    float mx = 0.0f;
    for (int k = threadIdx.x; k < (int)gridDim.y; k += 256) mx = fmaxf(mx, pmax[(int64_t)m * gridDim.y + k]);
    mx = block_max256(mx);
    int e = 0;
    if (mx > 0.0f && mx <= 3.4e38f) {
        int ex;
        frexpf(mx, &ex);   /* mx in [2^(ex-1), 2^ex) */
        e = max(-125, min(125, 15 - ex));
    }
    if (threadIdx.x == 0 && sl == 0) xe[m] = real ? ldexpf(1.0f, -e) : 0.0f;
    const float sc = ldexpf(1.0f, e);   /* x * 2^e: exact, or rounded as ldexpf would */
    const float *xr = x + (int64_t)m * in;
    const int n = m % NB;
    __half *row = xp + (int64_t)(m / NB) * (in / kSK) * (NB * kSK);
    /* a thread per 8 consecutive logical k (one 16-byte store).  PERM: logical t = 8h + i of
     * k-step j is position 64 (i >> 1) + 4j + 2h + (i & 1) of its 256-block, i.e. four pairs of
     * neighbouring floats */
    const int64_t gi = (int64_t)sl * (kXprepSlice / 8) + threadIdx.x;
    if (gi >= in / 8) return;
    const int64_t lk0 = gi * 8;
    const int lb0 = (int)(lk0 % 256), j = lb0 >> 4, h = (lb0 >> 3) & 1;
    const int64_t p = PERM ? (lk0 / 256) * 256 + 4 * j + 2 * h : lk0;
    uint32_t hv[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const int64_t i0 = PERM ? p + 64 * q : p + 2 * q;
        const float v0 = real ? xval(xr, ks, i0) * sc : 0.0f, v1 = real ? xval(xr, ks, i0 + 1) * sc : 0.0f;
        hv[q] = (uint32_t)__half_as_ushort(__float2half_rn(v0)) | ((uint32_t)__half_as_ushort(__float2half_rn(v1)) << 16);
    }
    *(uint4 *)(row + (lk0 / kSK) * (NB * kSK) + tile_off<NB>(n, (int)(lk0 % kSK))) = make_uint4(hv[0], hv[1], hv[2], hv[3]);
}

/* Scratch floats xprep_launch needs for Mpad rows of in values */
inline size_t xprep_scratch(int64_t Mpad, int64_t in) { return (size_t)Mpad * (size_t)((in + kXprepSlice - 1) / kXprepSlice); }

/* x [M, in] -> xp (Mpad / NB tile sets) and xe [Mpad]; pmax: xprep_scratch floats */
template <int NB, bool PERM>
tcq_status xprep_launch(tcq_cuda_ctx *ctx, const float *x, int M, int64_t Mpad, int64_t in, const uint16_t *ks,
                        float *pmax, __half *xp, float *xe)
{
    const dim3 grid((unsigned)Mpad, (unsigned)((in + kXprepSlice - 1) / kXprepSlice));
    k_wg_xmax<<<grid, 256, 0, ctx->stream>>>(x, M, in, ks, pmax);
    CU_LAUNCHED("cuda wgmma x maxima");
    k_wg_xconv<NB, PERM><<<grid, 256, 0, ctx->stream>>>(x, M, in, ks, pmax, xp, xe);
    CU_LAUNCHED("cuda wgmma x prep");
    return TCQ_OK;
}

/* sm_90a device code only (the other targets' passes see empty kernel bodies) */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* cp.async writes through the generic proxy, wgmma reads through the async one */
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
/* keep the compiler from moving accumulator accesses across the asynchronous wgmma */
template <int N>
__device__ __forceinline__ void fence_acc(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* wgmma.cu's x ring: every thread's 16-byte copies */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
/* wgss.cu's stage ring: mbarriers and the bulk copy */
__device__ __forceinline__ void mbar_init(uint32_t a, uint32_t n)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t a)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(a) : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint32_t a, uint32_t tx)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "r"(tx) : "memory");
}
__device__ __forceinline__ uint32_t mbar_try(uint32_t a, uint32_t parity)
{
    uint32_t ok;
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(ok)
        : "r"(a), "r"(parity), "r"(0x989680u)
        : "memory");
    return ok;
}
/* until the phase of parity `parity` has completed (the hint lets a waiting warp sleep instead of
 * spinning: the first version's consumers spent ~10 % of the issue slots polling) */
__device__ __forceinline__ void mbar_wait(uint32_t a, uint32_t parity)
{
    while (!mbar_try(a, parity)) {
    }
}
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
/* f16 bits of 1024 + bytesum(s) */
__device__ __forceinline__ uint32_t y16(uint32_t s) { return __dp4a(tcq_tc::mad1(s), 0x01010101u, 0x6400u); }

/* (y(s0), y(s1)) as f16x2, exact: (1024 + b0, 1024 + b1) - 1534 */
__device__ __forceinline__ uint32_t ypair(uint32_t s0, uint32_t s1)
{
    const uint32_t h = __byte_perm(y16(s0), y16(s1), 0x5410);
    const __half2 v = __hsub2(*(const __half2 *)&h, __halves2half2(__ushort_as_half(0x65feu), __ushort_as_half(0x65feu)));
    return *(const uint32_t *)&v;
}

#endif

/* Work split: a tile is 128 outputs x NB activation rows, its units slices of the reduced dimension.
 * Whole tiles first, in waves of G (block c takes tiles c, c + G, ...); the tiles left after the
 * last whole wave (fewer than G) are split as units (stream-K): block c takes the contiguous
 * units [c UT / G, (c+1) UT / G) of them, so every SM gets the same work whatever the tile count
 * (136 tiles on 132 SMs would otherwise take two rounds).  A block's tail range is shorter than
 * a tile, so it cuts at most two tiles: its first segment goes to part[c][0], a second to
 * part[c][1], and k_wg_fix adds a cut tile's partials in block order.  The split depends on the
 * shape and G only: deterministic. */
struct Split {
    int64_t G;       /* blocks */
    int64_t whole;   /* tiles done whole: a multiple of G */
    int64_t UT;      /* units of the remaining tiles */
    int nblk, n_rt;  /* blocks of a row, row tiles */
    __host__ __device__ int64_t begin(int64_t c) const { return c * UT / G; }   /* tail units */
    /* Segment it of block c, whose tail range is [u_first, u_end) (the caller loops while
     * it < whole / G or u < u_end, u starting at u_first): tile t, its units [kb0, kb1), and
     * whether it is the block's first tail segment (partials slot 0).  Whole tiles first, then
     * the tail range from u, which advances. */
    __device__ __forceinline__ void segment(int64_t c, int64_t it, int64_t u_first, int64_t u_end, int64_t &u, int64_t &t,
                                            int &kb0, int &kb1, bool &first) const
    {
        first = false;
        if (it < whole / G) {
            t = c + it * G;
            kb0 = 0, kb1 = nblk;
        } else {
            t = whole + u / nblk;
            kb0 = (int)(u % nblk);
            kb1 = (int)min((int64_t)nblk, kb0 + (u_end - u));
            first = u == u_first;
            u += kb1 - kb0;
        }
    }
};

template <int NB>
__device__ __forceinline__ float *part_at(float *part, int64_t c, int slot)
{
    return part + (c * 2 + slot) * (int64_t)(kRows * NB);
}

/* A tile cut between blocks gets the sum of its partials in block order.  Block (tile, slice):
 * kFixEpt elements a thread, the covering blocks' partials added in the outer loop (the slot
 * arithmetic once per covering block, not per element).  8 for wgmma.cu (its few cut tiles);
 * 2 for wgss.cu, whose scatter cuts every tile. */
template <int NB, int kFixEpt>
__global__ void __launch_bounds__(256) k_wg_fix(float *__restrict__ y, int M, int64_t out, Split sp, const float *__restrict__ part)
{
    constexpr int S = kRows * NB / (256 * kFixEpt);   /* slices of a tile */
    __shared__ int64_t cfl[2];
    __shared__ int pidx[256];   /* partial tile of covering block cf + c0 + i, -1: none */
    const int tid = threadIdx.x;
    const int64_t tt = blockIdx.x / S, t = sp.whole + tt;   /* a tile of the split rest */
    const int sl = blockIdx.x % S;
    if (tid < 2) {   /* the blocks whose ranges hold the tile's first and last unit */
        const int64_t uu = tt * sp.nblk + (tid ? sp.nblk - 1 : 0);
        int64_t c = (uu * sp.G) / sp.UT;
        while (c + 1 < sp.G && sp.begin(c + 1) <= uu) c++;
        while (c > 0 && sp.begin(c) > uu) c--;
        cfl[tid] = c;
    }
    __syncthreads();
    const int64_t cf = cfl[0], cl = cfl[1];
    if (cf == cl) return;   /* one block did the whole tile and wrote y */
    const int e0 = sl * 256 * kFixEpt + tid;
    float v[kFixEpt];
#pragma unroll
    for (int e = 0; e < kFixEpt; e++) v[e] = 0.0f;
    /* the covering blocks' partial slots, 256 at a time, worked out once per block (64-bit
     * divisions per thread and block were most of this kernel's time) */
    for (int64_t c0 = cf; c0 <= cl; c0 += 256) {
        const int64_t c = c0 + tid;
        if (c <= cl) {
            const int64_t b0 = sp.begin(c), b1 = sp.begin(c + 1);
            /* no units (UT < G): no partials; else the tile is c's first segment or its second */
            pidx[tid] = b0 == b1 ? -1 : (int)(c * 2 + (b0 / sp.nblk == tt ? 0 : 1));
        }
        __syncthreads();
        const int n = (int)min((int64_t)256, cl - c0 + 1);
        for (int i = 0; i < n; i++) {
            const int pi = pidx[i];
            if (pi < 0) continue;
            const float *p = part + (int64_t)pi * (kRows * NB) + e0;
#pragma unroll
            for (int e = 0; e < kFixEpt; e++) v[e] += p[e * 256];
        }
        __syncthreads();
    }
    const int mt = (int)(t / sp.n_rt), rt = (int)(t % sp.n_rt);
#pragma unroll
    for (int e = 0; e < kFixEpt; e++) {
        const int idx = e0 + e * 256, ml = idx / kRows, rl = idx % kRows;
        const int64_t r = (int64_t)rt * kRows + rl;
        const int m = mt * NB + ml;
        if (r < out && m < M) y[(int64_t)m * out + r] = v[e];
    }
}

/* Split for n_tiles tiles of nblk units on at most G_max blocks (fewer when there are fewer
 * units): whole tiles in waves of G, stream-K for the rest. */
inline Split split_make(int64_t n_tiles, int nblk, int n_rt, int64_t G)
{
    Split sp;
    sp.nblk = nblk;
    sp.n_rt = n_rt;
    sp.G = G < n_tiles * nblk ? G : n_tiles * nblk;
    sp.whole = n_tiles / sp.G * sp.G;
    sp.UT = (n_tiles - sp.whole) * nblk;
    return sp;
}

}  // namespace tcq_wgs

#endif
