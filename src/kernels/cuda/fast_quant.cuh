/* The fast path's activation quantization and the axis-0 partial sums (host side: fast.cu).
 * Also compiled on the host by tests/cuda/emu_fast.cpp. */
#ifndef TCQ_FAST_QUANT_CUH
#define TCQ_FAST_QUANT_CUH

#include "fast_kernels.cuh"

#include <float.h>

namespace tcq_fast {
namespace {

/* One warp per (activation row m, block): prep.c's arithmetic, lane l holding positions l and
 * l + 32 of the block.  The maximum and the integer sum are order-free, so they match. */
__global__ void k_quant(const float *__restrict__ x, int M, int64_t n, const uint16_t *__restrict__ scales,
                        int64_t nblk, int64_t npad, uint32_t *__restrict__ q4, float *__restrict__ d, int *__restrict__ corr)
{
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t id = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; id < (int64_t)M * nblk; id += nwarps) {
        const int64_t m = id / nblk, blk = id % nblk;
        float v[2];
        bool finite = true;
        float amax = 0.0f;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t i = blk * kQB + lane + 32 * h;
            v[h] = 0.0f;
            if (i < n) {
                v[h] = x[m * n + i];
                if (scales) v[h] = __fmul_rn(v[h], __half2float(__ushort_as_half(scales[i])));
            }
            finite = finite && fabsf(v[h]) <= FLT_MAX;
            amax = fmaxf(amax, fabsf(v[h]));
        }
        for (int o = 16; o; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        finite = __all_sync(0xffffffffu, finite);
        if (!finite) amax = __int_as_float(0x7fc00000);
        /* as kq_step (kernels.h): a block whose 127 / amax overflows (amax below ~3.7e-37)
         * quantizes to q = 0, d = 0; v * inf would saturate every q, a zero to -127 */
        const float inv0 = amax > 0.0f && amax <= FLT_MAX ? __fdiv_rn(127.0f, amax) : 0.0f;
        const bool ok = inv0 > 0.0f && inv0 <= FLT_MAX;
        const float inv = ok ? inv0 : 0.0f;
        int sum = 0;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t i = blk * kQB + lane + 32 * h;
            int q = 0;
            if (i < n && ok) q = max(-127, min(127, __float2int_rn(__fmul_rn(v[h], inv))));
            q4[m * npad + i] = (uint32_t)(uint8_t)(int8_t)q * 0x01010101u;
            sum += q;
        }
        for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) {
            d[m * nblk + blk] = ok ? __fdiv_rn(amax, 127.0f) : (amax <= FLT_MAX ? 0.0f : __int_as_float(0x7fc00000));
            corr[m * nblk + blk] = -510 * sum;
        }
    }
}

/* y[m, c] = (sum of the S partials part[s, m, c]) / 147.8.  kFinishLanes threads per output:
 * thread q adds the fixed range [S q / 8, S (q+1) / 8) in order, then a butterfly over the 8
 * (each pair adds the same two values, so every lane ends with the same sum): a fixed order, and
 * 8x the loads in flight of one thread per output. */
constexpr int kFinishLanes = 8;
__global__ void k_finish(const float *__restrict__ part, int64_t S, int64_t n /* M*C */, float *__restrict__ y)
{
    const int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t i = id / kFinishLanes;
    const int q = (int)(id % kFinishLanes);
    float acc = 0.0f;
    if (i < n) {
        const int64_t s0 = S * q / kFinishLanes, s1 = S * (q + 1) / kFinishLanes;
#pragma unroll 4
        for (int64_t s = s0; s < s1; s++) acc = __fadd_rn(acc, __ldcg(part + s * n + i));
    }
#pragma unroll
    for (int o = 1; o < kFinishLanes; o <<= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, o));
    if (q == 0 && i < n) y[i] = __fmul_rn(acc, kRinv);
}

}  // namespace
}  // namespace tcq_fast

#endif
