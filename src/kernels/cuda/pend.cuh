/* A linear's output left unfinished for the kernel that consumes it (the device model's fusions,
 * tcq_cuda_linear_io): the integer kernels leave per-chunk partials, and instead of a launch that
 * adds them up, the consumer (the next linear's activation prep, the RoPE kernel) adds the few it
 * needs where it reads the value.  Included by the integer kernels (host emulation too) and the
 * device model. */
#ifndef TCQ_PEND_CUH
#define TCQ_PEND_CUH

#include <stdint.h>
#ifndef TCQ_EMU   /* tests/cuda/emu/imma.cpp defines what it uses */
#include <cuda_fp16.h>
#endif

/* Output (m, o) of M rows of `out`: f_o * sum over s < S (in chunk order) of part[s n + m out + o],
 * n = M out, f_o = sg[o] / 147.8 (sg NULL: 1 / 147.8); with su (a fused SwiGLU, gate's partials
 * first, up's S n floats on): silu(gate) * up, up's factor su[o] / 147.8; part NULL: y[m out + o]
 * is the finished value (a call that had a single chunk). */
struct tcq_cuda_pend {
    const float *part, *y;
    int S;
    int64_t n, out;
    const uint16_t *sg, *su;
};

/* The chunk sum of flat index i, in chunk order (k_im_finish_row's arithmetic).  Up to 16 chunks
 * all loads are in flight before the first add: the consumers are small latency-bound launches
 * (a loop with its adds between the loads made the RoPE kernel 17 instead of 7 us a layer, ncu,
 * H100, 2026-12-06). */
__device__ __forceinline__ float tcq_pend_sum(const float *__restrict__ part, int S, int64_t n, int64_t i)
{
    constexpr int kR = 16;
    float v[kR];
#pragma unroll
    for (int s = 0; s < kR; s++) v[s] = s < S ? __ldg(&part[(int64_t)s * n + i]) : 0.0f;
    float a = 0.0f;
#pragma unroll
    for (int s = 0; s < kR; s++)
        if (s < S) a += v[s];
    for (int s = kR; s < S; s++) a += __ldg(&part[(int64_t)s * n + i]);
    return a;
}

/* Value (m, o), as k_im_finish's fin_out forms it from the sums. */
__device__ __forceinline__ float tcq_pend_value(const tcq_cuda_pend &p, int m, int64_t o)
{
    const int64_t i = (int64_t)m * p.out + o;
    if (!p.part) return p.y[i];
    const float kD = 147.800537109375f;
    float a = tcq_pend_sum(p.part, p.S, p.n, i);
    a *= p.sg ? __half2float(__ushort_as_half(p.sg[o])) / kD : 1.0f / kD;
    if (p.su) {
        float u = tcq_pend_sum(p.part + (int64_t)p.S * p.n, p.S, p.n, i);
        u *= __half2float(__ushort_as_half(p.su[o])) / kD;
        a = __fdiv_rn(a, __fadd_rn(1.0f, expf(-a))) * u;
    }
    return a;
}

#endif
