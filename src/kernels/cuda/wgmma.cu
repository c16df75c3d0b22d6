/* Large-M axis-1 linear layers (prefill): Hopper wgmma fed with weights decoded straight into
 * registers, so no bf16 copy of the matrix is ever written.
 *
 * Why (bench/NOTES.md, "Session 9"): the decode-to-bf16 + cuBLAS path spends ~74 us of its
 * ~195 us (17408x5120, M=512) writing and re-reading 178 MB of bf16 weights, and splitting it
 * into L2-sized parts made cuBLAS slower than what the parts saved.  Here the decode is the A
 * operand of the tensor cores: wgmma.m64nNk16 takes A from registers, and a register of A is two
 * consecutive k of one row in f16, i.e. (y_t, y_t+1) of a coded row with y = bytesum - 510 exact
 * in f16.  Per weight: a funnel shift and an AND (the state), the 1MAD IMAD, a dp4a byte sum onto
 * the bits of f16 1024 (0x6400 + bytesum is the f16 1024 + bytesum, exact below 2048), and per
 * pair one PRMT and one HSUB2 (- 1534): y exact.
 *
 * The x operand (B, N = the activation rows) comes from shared memory.  Because the dot product
 * does not care in which order k runs, the k order inside a T-block is permuted so that each
 * thread decodes a contiguous span of its row (the im kernels' span layout: lane quad slot q
 * owns positions [64q, 64q+64) of the 256): logical k-step j, slot t of a 16-k step is position
 * 64 ((t & 7) >> 1) + 4j + 2 (t >> 3) + (t & 1).  k_wg_xprep writes x in that order, in f16
 * after a power-of-two scale per activation row (max |x 2^e| in [2^14, 2^15): no overflow; the
 * rounding is f16's, 2^-11 relative per element, finer than the bf16 contract's 2^-8), already
 * laid out as the shared-memory tiles (8x8 core matrices, K-major, no swizzle), so each stage is
 * one contiguous 16-byte-per-thread cp.async copy.
 *
 * Block: two warpgroups, 128 outputs (64 each) x NB activation rows; stages of 64 k in a ring of
 * kStages, kStages - 2 in flight; the A registers double-buffered, one wgmma in flight while the
 * next k-step decodes.  Output y = acc 2^-e scale / 147.8 (the factored contract).
 * sm_90a only: the host takes this path on compute capability 9.0 (tcq_cuda_wg_supports). */
#include "cuda_internal.h"
#include "tc_common.cuh"
#include "wg_mma.cuh"

#include <cuda_fp16.h>

#include <algorithm>

namespace {
using namespace tcq_tc;

constexpr int kThreads = 256;   /* two warpgroups */
constexpr int kRows = 128;      /* outputs of a block */
constexpr int kStageK = 64;     /* logical k per shared-memory stage: 4 k-steps */
constexpr int kStages = 5;
constexpr int kT = 256, kSP = kT / 4;
constexpr uint32_t kMul = 34038481u, kAdd = 76625530u;

struct WgArgs {
    const __half *xp;   /* [Mpad / NB][n_stage][NB * 64]: the stage tiles */
    const float *xe;    /* [Mpad]: 2^-e of each activation row (0 for padding) */
    float *y;           /* [M, out] */
    int M;
    int n_stage;        /* in / 64 */
    int64_t out;
};

/* Element offset of (activation row n, logical k) inside a stage tile: 8x8 core matrices of 128
 * bytes, [k / 8][n / 8][n % 8][k % 8].  The wgmma descriptor's strides follow from it: 128 bytes
 * between neighbouring core matrices along N, NB * 16 along K. */
template <int NB>
__host__ __device__ constexpr int tile_off(int n, int k)
{
    return (((k >> 3) * (NB / 8) + (n >> 3)) << 6) + ((n & 7) << 3) + (k & 7);
}

/* Physical position inside a T=256 block of logical k (see the top). */
__device__ __forceinline__ int wg_perm(int lk)
{
    const int j = lk >> 4, t = lk & 15;
    return 64 * ((t & 7) >> 1) + 4 * j + 2 * (t >> 3) + (t & 1);
}

/* One block per activation row m of the padded tile set: the row's exponent, then its in values
 * in f16 at their tile places (zeros for padding rows). */
template <int NB>
__global__ void __launch_bounds__(256) k_wg_xprep(const float *__restrict__ x, int M, int64_t in,
                                                  __half *__restrict__ xp, float *__restrict__ xe)
{
    __shared__ float red[8];
    const int m = blockIdx.x, tid = threadIdx.x;
    const bool real = m < M;
    float mx = 0.0f;
    if (real)
        for (int64_t i = tid; i < in; i += 256) mx = fmaxf(mx, fabsf(x[(int64_t)m * in + i]));
    for (int d = 16; d; d >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
    if ((tid & 31) == 0) red[tid >> 5] = mx;
    __syncthreads();
    mx = 0.0f;
    for (int k = 0; k < 8; k++) mx = fmaxf(mx, red[k]);
    int e = 0;
    if (mx > 0.0f && mx <= 3.4e38f) {
        int ex;
        frexpf(mx, &ex);   /* mx in [2^(ex-1), 2^ex) */
        e = max(-125, min(125, 15 - ex));
    }
    if (tid == 0) xe[m] = real ? ldexpf(1.0f, -e) : 0.0f;
    const int n = m % NB;
    __half *row = xp + (int64_t)(m / NB) * (in / kStageK) * (NB * kStageK);
    for (int64_t lk = tid; lk < in; lk += 256) {
        const int64_t b = lk / kT;
        const int lb = (int)(lk % kT);
        const float v = real ? ldexpf(x[(int64_t)m * in + b * kT + wg_perm(lb)], e) : 0.0f;
        row[(lk / kStageK) * (NB * kStageK) + tile_off<NB>(n, (int)(lk % kStageK))] = __float2half_rn(v);
    }
}

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
#endif

/* f16 bits of 1024 + bytesum(s) */
__device__ __forceinline__ uint32_t y16(uint32_t s) { return __dp4a(s * kMul + kAdd, 0x01010101u, 0x6400u); }

/* (y(s0), y(s1)) as f16x2, exact: (1024 + b0, 1024 + b1) - 1534 */
__device__ __forceinline__ uint32_t ypair(uint32_t s0, uint32_t s1)
{
    const uint32_t h = __byte_perm(y16(s0), y16(s1), 0x5410);
    const __half2 v = __hsub2(*(const __half2 *)&h, __halves2half2(__ushort_as_half(0x65feu), __ushort_as_half(0x65feu)));
    return *(const uint32_t *)&v;
}

template <int K, int NB>
__global__ void __launch_bounds__(kThreads, 1) k_wg_reduce(Geo g, WgArgs a, uint32_t lbo, uint32_t sbo)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int W = kSP * K / 32, KS = kSP / 4;   /* span words; k-steps of a T-block (16) */
    constexpr int STAGE_BYTES = NB * kStageK * 2;
    extern __shared__ __align__(128) uint8_t smem[];
    const int tid = threadIdx.x, lane = tid & 31, g8 = lane >> 2, q = lane & 3;
    const int src = (lane & ~3) | ((q + 3) & 3);
    const uint32_t lm = (1u << g.L) - 1u;
    /* rows g and g+8 of this warp's 16 (rows past R read row R-1 and are not written) */
    const int64_t r0 = (int64_t)blockIdx.x * kRows + 64 * (tid >> 7) + 16 * ((tid >> 5) & 3) + g8;
    const uint32_t *rp[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t r = r0 + 8 * h < g.R ? r0 + 8 * h : g.R - 1;
        rp[h] = g.codes + r * g.row_words + (3 - q) * W;
    }
    const int nblk = (int)(g.C / kT);
    const __half *xt = a.xp + (int64_t)blockIdx.y * a.n_stage * (NB * kStageK);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
    auto issue = [&](int st) {
        if (st < a.n_stage) {
            const uint4 *s4 = (const uint4 *)(xt + (int64_t)st * (NB * kStageK));
            const uint32_t dst = sbase + (uint32_t)((st % kStages) * STAGE_BYTES);
#pragma unroll
            for (int i = tid; i < STAGE_BYTES / 16; i += kThreads) cp_async16(dst + 16 * i, s4 + i);
        }
        cp_async_commit();   /* empty groups keep the count uniform */
    };
#pragma unroll
    for (int st = 0; st < kStages - 2; st++) issue(st);
    uint32_t wc[2][W];
#pragma unroll
    for (int h = 0; h < 2; h++) load_span<W>(rp[h], wc[h]);
    float acc[NB / 2];
#pragma unroll
    for (int i = 0; i < NB / 2; i++) acc[i] = 0.0f;
    fence_acc(acc);
    const uint64_t desc0 = (uint64_t)((sbase >> 4) & 0x3fffu) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
    uint32_t A[2][4];
    for (int b = 0; b < nblk; b++) {
        uint32_t wn[2][W];
        if (b + 1 < nblk) {
#pragma unroll
            for (int h = 0; h < 2; h++) load_span<W>(rp[h] + (int64_t)(b + 1) * g.wpb, wn[h]);
        }
        uint32_t ov[2];
#pragma unroll
        for (int h = 0; h < 2; h++) ov[h] = __shfl_sync(0xffffffffu, wc[h][0], src);
        const int st0 = 4 * b;
#pragma unroll
        for (int j = 0; j < KS; j++) {
            const int st = st0 + (j >> 2);
            if ((j & 3) == 0) {
                /* every thread's wgmma of stage st - 2 is done (wait_group 1 below, then the
                 * barrier), so its buffer takes stage st + kStages - 2 */
                wg_wait<1>();
                cp_async_wait<kStages - 3>();
                fence_async_smem();
                __syncthreads();
                issue(st + kStages - 2);
            } else {
                wg_wait<1>();   /* the wgmma that read A[j & 1] two steps ago is done */
            }
            uint32_t *Aj = A[j & 1];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t s[4];
#pragma unroll
                for (int i = 0; i < 4; i++) s[i] = span_bits<W>(wc[h], ov[h], (kSP - 1 - (4 * j + i)) * K) & lm;
                Aj[h] = ypair(s[0], s[1]);       /* a0: row g, a1: row g+8; k 2q, 2q+1 */
                Aj[2 + h] = ypair(s[2], s[3]);   /* a2, a3: k 2q+8, 2q+9 */
            }
            wg_fence();
            const uint64_t desc = desc0 + (uint64_t)(((st % kStages) * STAGE_BYTES + (j & 3) * NB * 32) >> 4);
            tcq_wg::Mma<NB>::run(acc, Aj[0], Aj[1], Aj[2], Aj[3], desc);
            wg_commit();
        }
        if (b + 1 < nblk) {
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int i = 0; i < W; i++) wc[h][i] = wn[h][i];
        }
    }
    wg_wait<0>();
    fence_acc(acc);
    /* acc[4i + 2h + c]: row g + 8h, activation row 8i + 2q + c of this block's NB */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t r = r0 + 8 * h;
        if (r >= g.R) continue;
        const float f = __half2float(__ushort_as_half(g.scales[r])) / kD;
#pragma unroll
        for (int i = 0; i < NB / 8; i++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const int m = blockIdx.y * NB + 8 * i + 2 * q + c;
                if (m < a.M) a.y[(int64_t)m * a.out + r] = acc[4 * i + 2 * h + c] * a.xe[m] * f;
            }
    }
#else
    (void)g, (void)a, (void)lbo, (void)sbo;
#endif
}

template <int K, int NB>
tcq_status launch(tcq_cuda_ctx *ctx, const Geo &g, const WgArgs &a, int64_t Mpad)
{
    const int smem = kStages * NB * kStageK * 2;
    CU_TRY(cudaFuncSetAttribute(k_wg_reduce<K, NB>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
           "cuda wgmma: shared memory limit");
    uint32_t lbo = NB * 16, sbo = 128;
    if (ctx->wg_swap) std::swap(lbo, sbo);
    const dim3 grid((unsigned)((g.R + kRows - 1) / kRows), (unsigned)(Mpad / NB));
    k_wg_reduce<K, NB><<<grid, kThreads, smem, ctx->stream>>>(g, a, lbo, sbo);
    CU_LAUNCHED("cuda wgmma reduce");
    return TCQ_OK;
}

template <int NB>
tcq_status run_nb(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M)
{
    const Geo g = geo_of(w);
    const int64_t in = g.C, Mpad = (M + NB - 1) / NB * NB;
    const size_t xb = tcq_align256((size_t)Mpad * in * 2);
    void *scr;
    TCQ_TRY(tcq_cuda_scratch(ctx, xb + (size_t)Mpad * 4, &scr));
    WgArgs a;
    a.xp = (const __half *)scr;
    a.xe = (const float *)((char *)scr + xb);
    a.y = y;
    a.M = (int)M;
    a.n_stage = (int)(in / kStageK);
    a.out = g.R;
    k_wg_xprep<NB><<<(unsigned)Mpad, 256, 0, ctx->stream>>>(x, (int)M, in, (__half *)a.xp, (float *)a.xe);
    CU_LAUNCHED("cuda wgmma x prep");
    switch (w->p.k) {
    case 2: return launch<2, NB>(ctx, g, a, Mpad);
    case 3: return launch<3, NB>(ctx, g, a, Mpad);
    default: return launch<4, NB>(ctx, g, a, Mpad);
    }
}

__global__ void k_wg_probe(int *ok)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *ok = 1;
#else
    *ok = 0;
#endif
}

}  // namespace

/* Whether the sm_90a code of this file is what runs on the context's device (a build without the
 * 90a target, or another GPU, runs the empty bodies: the dispatcher must not pick them). */
tcq_status tcq_cuda_wg_probe(tcq_cuda_ctx *ctx)
{
    ctx->wg_ok = 0;
    int *d = NULL, h = 0;
    CU_TRY(cudaMalloc((void **)&d, sizeof(int)), "cuda wgmma probe");
    k_wg_probe<<<1, 1, 0, ctx->stream>>>(d);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpyAsync(&h, d, sizeof(int), cudaMemcpyDeviceToHost, ctx->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx->stream);
    cudaFree(d);
    if (e == cudaErrorNoKernelImageForDevice) {
        cudaGetLastError();
        return TCQ_OK;
    }
    CU_TRY(e, "cuda wgmma probe");
    ctx->wg_ok = h;
    return TCQ_OK;
}

int tcq_cuda_wg_supports(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M)
{
    if (!ctx->wg_ok || ctx->wg_pin == 0) return 0;
    if (w->axis != 1 || w->interleaved || w->p.T != kT || w->p.k < 2 || w->p.k > 4) return 0;
    if (M < 1 || M > (1 << 16)) return 0;   /* grid.y <= 65535 blocks of >= 64 rows: generous */
    /* built-in: where it measured faster than decode + cuBLAS (bench/NOTES.md, session 9) */
    return ctx->wg_pin == 1 || M <= 128;
}

tcq_status tcq_cuda_linear_wg(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M)
{
    if (M <= 64) return run_nb<64>(ctx, w, x, y, M);
    if (M <= 128) return run_nb<128>(ctx, w, x, y, M);
    return run_nb<256>(ctx, w, x, y, M);
}
