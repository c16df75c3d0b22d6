/* What the tensor pipe gives wgmma.cu's design on this GPU, without the rest of the kernel:
 * one block of two warpgroups an SM, each warpgroup issuing wgmma.m64n256k16 with A from
 * registers and B (256 activation rows x 16 k, f16) from shared memory, as k_wg_reduce<K, 256>
 * does at M > 128.  Variants (the run list in main): B laid out as wgmma.cu lays it (8x8 core
 * matrices, no swizzle) or with the 128-byte swizzle; 1 or 2 wgmmas in flight; with or without
 * the real decode of the A registers (span_bits + ypair, 8 weights a thread a k-step, k = 2);
 * wgmma.cu's block barrier every 4 k-steps; the code words read from global memory; and B fed
 * from an L2-resident x tile by wgmma.cu's cp.async ring, by a bulk-copy ring (thread 0, a
 * producer warpgroup, a 2-CTA multicast).  Prints TFLOPS per variant (dense f16 peak of an H200
 * ~990).  Built with the CUDA backend (-DTCQ_CUDA=ON: target wgmma_ceiling, sm_90a), run on the
 * GPU with no arguments.
 * Results and what they decided: docs/PERFORMANCE.md, "CUDA (H200)" > "Session 14". */
#include "tc_common.cuh"
#include "wg_common.cuh"
#include "wg_mma.cuh"

#include <cuda_fp16.h>
#include <stdint.h>
#include <stdio.h>

namespace {
using namespace tcq_wgs;   /* the rings' helpers, wgmma fences, ypair: the kernels' own */

constexpr int kStageBytes = 256 * 64 * 2;   /* B stage: 256 rows x 64 k of f16 */
constexpr int kStages = 4;

/* SWZ: 0 = no swizzle (wgmma.cu's tile_off layout: LBO = 256 * 16 between K-neighbour core
 * matrices, SBO = 128 between N-neighbours); 1 = 128-byte swizzle, K-major (a row of 64 k is
 * 128 bytes, 8-row atoms of 1024 bytes: SBO = 1024, the k16 step moves the start by 32 bytes).
 * XR: where B comes from: 0 = fixed shared memory; 1 = wgmma.cu's ring (kRing stages of x read
 * from global (L2) by every thread's 16-byte cp.async, kRing - 2 in flight, a block barrier a
 * stage); 2 = a ring fed by one cp.async.bulk a stage (NSPLIT copies; MC = 2: each CTA of a
 * cluster pair copies half and multicasts it), full / empty mbarriers, thread 0 waiting for each
 * slot; 3 = the same copies issued by a producer warpgroup (setmaxnreg), the consumers never
 * waiting for a refill.  LD: the code words read from global memory a 256-block ahead, as
 * wgmma.cu reads them. */
constexpr int kXStages = 80;   /* stages of the global x tile: 5120 k */

template <int SWZ, int DEPTH, bool DEC, bool BAR, int XR, bool LD, int kRing, int NSPLIT, int MC>
__global__ void __launch_bounds__(XR == 3 ? 384 : 256, 1) k_ceiling(const uint4 *src, const uint32_t *codes, int iters, float *sink)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)   /* as the kernels' (wg_common.cuh's helpers are sm_90a only) */
    extern __shared__ __align__(1024) uint8_t smem[];
    __shared__ __align__(8) uint64_t bars[2 * 8];
    const int tid = threadIdx.x;
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t full = (uint32_t)__cvta_generic_to_shared(bars), empty = full + 8 * kRing;
    if (XR == 0) {
        for (int i = tid; i < kStages * kStageBytes / 16; i += 256) ((uint4 *)smem)[i] = src[i];
        fence_async_smem();
    }
    if (XR >= 2 && tid == 0) {
        for (int s = 0; s < kRing; s++) mbar_init(full + 8 * s, 1), mbar_init(empty + 8 * s, 8 * MC);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    uint32_t rank = 0, peer_empty = 0;
    if (MC == 2) {
        asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(peer_empty) : "r"(empty), "r"(rank ^ 1u));
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    }
    auto issue = [&](int gs) {   /* global stage gs into its ring slot */
        if (gs >= 4 * iters) {
            if (XR == 1) cp_async_commit();   /* empty groups keep the count uniform */
            return;
        }
        const uint4 *s4 = src + (size_t)(gs % kXStages) * (kStageBytes / 16);
        const uint32_t slot = gs % kRing;
        if (XR == 1) {
#pragma unroll
            for (int i = tid; i < kStageBytes / 16; i += 256) cp_async16(sbase + slot * kStageBytes + 16 * i, s4 + i);
            cp_async_commit();
        } else if (XR == 2 && tid == 0) {
            if (gs >= kRing) mbar_wait(empty + 8 * slot, ((gs / kRing) & 1) ^ 1);
            mbar_arrive_tx(full + 8 * slot, kStageBytes);
            if (MC == 2) {   /* this CTA's half of the stage, to both CTAs of the cluster */
                constexpr uint32_t hb = kStageBytes / 2;
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
                             ::"r"(sbase + slot * kStageBytes + rank * hb), "l"((const char *)s4 + rank * hb), "r"(hb),
                               "r"(full + 8 * slot), "h"((uint16_t)3)
                             : "memory");
            } else {
#pragma unroll
                for (int q = 0; q < NSPLIT; q++)
                    bulk_g2s(sbase + slot * kStageBytes + q * (kStageBytes / NSPLIT), (const char *)s4 + q * (kStageBytes / NSPLIT),
                             kStageBytes / NSPLIT, full + 8 * slot);
            }
        }
    };
    if (XR == 3) {   /* a producer warpgroup (one thread issues): consumers never wait for a stage's refill */
        if (tid >= 256) {
            asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");
            for (int gs = 0; gs < 4 * iters; gs++) {
                const uint32_t slot = gs % kRing;
                if (gs >= kRing) mbar_wait(empty + 8 * slot, ((gs / kRing) & 1) ^ 1);
                if (tid == 256) {
                    mbar_arrive_tx(full + 8 * slot, kStageBytes);
                    bulk_g2s(sbase + slot * kStageBytes, src + (size_t)(gs % kXStages) * (kStageBytes / 16), kStageBytes, full + 8 * slot);
                }
            }
            return;
        }
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");
    } else if (XR != 0) {
        for (int gs = 0; gs < kRing - 2; gs++) issue(gs);
    }
    uint64_t desc0;
    if (SWZ == 0)
        desc0 = (uint64_t)((sbase >> 4) & 0x3fffu) | ((uint64_t)((256 * 16) >> 4) << 16) | ((uint64_t)(128 >> 4) << 32);
    else
        desc0 = (uint64_t)((sbase >> 4) & 0x3fffu) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
    constexpr int W = 64 * 2 / 32;   /* K = 2: a lane's 64-position span is 4 words */
    /* LD: a thread's two rows of a 17408 x 5120 k = 2 matrix (640 words a row) */
    const uint32_t *rp[2];
#pragma unroll
    for (int h = 0; h < 2; h++) rp[h] = codes + (size_t)((blockIdx.x * 128 + tid / 4 * 2 + h) % 17408) * 640 + (tid & 3) * W;
    uint32_t wc[2][W];
#pragma unroll
    for (int h = 0; h < 2; h++) tcq_tc::load_span<W>(rp[h], wc[h]);
    const uint32_t lm = 0xfffu;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; i++) acc[i] = 0.0f;
    fence_acc(acc);
    constexpr int NA = DEPTH == 1 ? 2 : 4;
    uint32_t A[NA][4];
#pragma unroll
    for (int b = 0; b < NA; b++)
#pragma unroll
        for (int i = 0; i < 4; i++) A[b][i] = 0x3c003c00u ^ (tid << 3) ^ b;
    for (int it = 0; it < iters; it++) {
        uint32_t wn[2][W];
        if (LD) {
#pragma unroll
            for (int h = 0; h < 2; h++) tcq_tc::load_span<W>(rp[h] + ((it + 1) % 20) * 32, wn[h]);
        }
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int gs = it * 4 + (j >> 2);
            wg_wait<DEPTH>();
            if ((j & 3) == 0) {
                if (XR == 1) {
                    cp_async_wait<kRing - 3>();
                    fence_async_smem();
                    __syncthreads();
                    issue(gs + kRing - 2);
                } else if (XR == 3) {
                    if (gs >= 2 && (tid & 31) == 0) mbar_arrive(empty + 8 * ((gs - 2) % kRing));
                    mbar_wait(full + 8 * (gs % kRing), (gs / kRing) & 1);
                } else if (XR == 2) {
                    /* the wait above leaves at most 2 wgmmas of stage gs - 1: stage gs - 2 is read */
                    if (gs >= 2 && (tid & 31) == 0) {
                        mbar_arrive(empty + 8 * ((gs - 2) % kRing));
                        if (MC == 2)
                            asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(peer_empty + 8 * ((gs - 2) % kRing))
                                         : "memory");
                    }
                    issue(gs + kRing - 2);
                    mbar_wait(full + 8 * (gs % kRing), (gs / kRing) & 1);
                } else if (BAR) {
                    __syncthreads();   /* wgmma.cu's stage barrier */
                }
            }
            uint32_t *Aj = A[j % NA];
            if (DEC) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    uint32_t s[4];
#pragma unroll
                    for (int i = 0; i < 4; i++) s[i] = tcq_tc::span_bits<W>(wc[h], wc[h][0] ^ it, (63 - (4 * j + i)) * 2) & lm;
                    Aj[h] = ypair(s[0], s[1]);
                    Aj[2 + h] = ypair(s[2], s[3]);
                }
            }
            wg_fence();
            const int st = XR == 0 ? gs % kStages : gs % kRing;   /* XR = 3 can use all kRing slots: the refill waits only for stage gs - 2 */
            uint32_t off = SWZ == 0 ? st * kStageBytes + (j & 3) * 256 * 32 : st * kStageBytes + (j & 3) * 32;
            tcq_wg::Mma<256>::run(acc, Aj[0], Aj[1], Aj[2], Aj[3], desc0 + (off >> 4));
            wg_commit();
        }
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int i = 0; i < W; i++) wc[h][i] = LD ? wn[h][i] : wc[h][i] + 0x9e3779b9u;
    }
    wg_wait<0>();
    fence_acc(acc);
    if (XR == 1) cp_async_wait<0>();
    if (MC == 2) asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 128; i++) s += acc[i];
    if (s == 12345.0f) sink[tid] = s;
#else
    (void)src, (void)codes, (void)iters, (void)sink;
#endif
}

template <int SWZ, int DEPTH, bool DEC, bool BAR = false, int XR = 0, bool LD = false, int kRing = 5, int NSPLIT = 1, int MC = 1>
void run(const char *name, const uint4 *src, const uint32_t *codes, float *sink, int n_sm)
{
    auto k = k_ceiling<SWZ, DEPTH, DEC, BAR, XR, LD, kRing, NSPLIT, MC>;
    const int smem = (XR == 0 ? kStages : kRing) * kStageBytes + 1024;
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int iters = 4000;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float best = 1e30f;
    for (int r = 0; r < 6; r++) {
        cudaEventRecord(e0);
        if (MC == 1) {
            k<<<n_sm, XR == 3 ? 384 : 256, smem>>>(src, codes, iters, sink);
        } else {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(n_sm / MC * MC);
            cfg.blockDim = dim3(XR == 3 ? 384 : 256);
            cfg.dynamicSmemBytes = smem;
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = MC, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
            cfg.attrs = at;
            cfg.numAttrs = 1;
            cudaLaunchKernelEx(&cfg, k, src, codes, iters, sink);
        }
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r > 0 && ms < best) best = ms;
    }
    const cudaError_t err = cudaGetLastError();
    const double flop = (double)(n_sm / MC * MC) * 2 * iters * 16 * (64.0 * 256 * 16 * 2);
    printf("%-44s %8.3f ms  %6.1f TFLOPS  %s\n", name, best, flop / (best * 1e-3) / 1e12, cudaGetErrorString(err));
}

}  // namespace

int main()
{
    int n_sm = 0;
    cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0);
    const size_t nb = (size_t)kXStages * kStageBytes;   /* the global x tile (2.6 MB) */
    const size_t ncb = (size_t)17408 * 640 * 4;          /* a k = 2 17408 x 5120 matrix's codes */
    uint16_t *h = (uint16_t *)malloc(nb);
    uint32_t seed = 1;
    for (size_t i = 0; i < nb / 2; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = __half_as_ushort(__float2half((float)((int)(seed >> 20) - 2048) / 256.0f));
    }
    uint4 *src;
    uint32_t *codes;
    float *sink;
    cudaMalloc(&src, nb);
    cudaMalloc(&codes, ncb);
    cudaMemset(codes, 0x5a, ncb);
    cudaMalloc(&sink, 256 * 4);
    cudaMemcpy(src, h, nb, cudaMemcpyHostToDevice);
        printf("%d SMs; m64n256k16, A in registers, 2 warpgroups a block, 1 block an SM\n", n_sm);
    run<0, 1, false>("no swizzle, 1 in flight", src, codes, sink, n_sm);
    run<0, 2, false>("no swizzle, 2 in flight", src, codes, sink, n_sm);
    run<1, 1, false>("128B swizzle, 1 in flight", src, codes, sink, n_sm);
    run<1, 2, false>("128B swizzle, 2 in flight", src, codes, sink, n_sm);
    run<0, 1, true>("no swizzle, 1 in flight, decode", src, codes, sink, n_sm);
    run<0, 2, true>("no swizzle, 2 in flight, decode", src, codes, sink, n_sm);
    run<1, 1, true>("128B swizzle, 1 in flight, decode", src, codes, sink, n_sm);
    run<1, 2, true>("128B swizzle, 2 in flight, decode", src, codes, sink, n_sm);
    run<0, 2, true, true>("no swizzle, 2, decode, barrier", src, codes, sink, n_sm);
    run<1, 2, true, true>("128B swizzle, 2, decode, barrier", src, codes, sink, n_sm);
    run<0, 1, true, false, 1>("x ring cp.async, 1, decode", src, codes, sink, n_sm);
    run<0, 2, true, false, 1>("x ring cp.async, 2, decode", src, codes, sink, n_sm);
    run<0, 1, true, false, 1, true>("x ring cp.async, 1, decode, codes", src, codes, sink, n_sm);
    run<0, 2, true, false, 1, true>("x ring cp.async, 2, decode, codes", src, codes, sink, n_sm);
    run<0, 1, true, false, 2>("x ring bulk+mbarrier, 1, decode", src, codes, sink, n_sm);
    run<0, 2, true, false, 2>("x ring bulk+mbarrier, 2, decode", src, codes, sink, n_sm);
    run<0, 1, true, false, 2, true>("x ring bulk+mbarrier, 1, decode, codes", src, codes, sink, n_sm);
    run<0, 2, true, false, 2, true>("x ring bulk+mbarrier, 2, decode, codes", src, codes, sink, n_sm);
    run<0, 1, true, false, 2, true, 6>("bulk ring 6 (4 ahead), 1, codes", src, codes, sink, n_sm);
    run<0, 1, true, false, 2, true, 7>("bulk ring 7 (5 ahead), 1, codes", src, codes, sink, n_sm);
    run<0, 1, true, false, 2, true, 5, 4>("bulk 4 x 8 KB a stage, 1, codes", src, codes, sink, n_sm);
    run<0, 1, true, false, 2, true, 5, 1, 2>("bulk multicast x2, 1, codes", src, codes, sink, n_sm);
    run<0, 2, true, false, 2, true, 5, 1, 2>("bulk multicast x2, 2, codes", src, codes, sink, n_sm);
    run<0, 1, true, false, 2, true, 7, 1, 2>("bulk multicast x2, ring 7, 1, codes", src, codes, sink, n_sm);
    run<0, 1, false, false, 2, true, 5, 1, 2>("bulk multicast x2, 1, no decode", src, codes, sink, n_sm);
    run<0, 1, false, false, 2, false, 7, 1, 1>("bulk ring 7, 1, no decode", src, codes, sink, n_sm);
    run<0, 1, true, false, 3, true, 5>("producer warp, ring 5, 1, codes", src, codes, sink, n_sm);
    run<0, 2, true, false, 3, true, 5>("producer warp, ring 5, 2, codes", src, codes, sink, n_sm);
    run<0, 1, true, false, 3, true, 6>("producer warp, ring 6, 1, codes", src, codes, sink, n_sm);
    run<0, 1, true, false, 3, false, 5>("producer warp, ring 5, 1", src, codes, sink, n_sm);
    run<0, 1, true, false, 0, true>("static, 1, decode, codes", src, codes, sink, n_sm);
    free(h);
    return 0;
}
