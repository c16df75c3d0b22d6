/* Device helpers shared by the tensor-core kernels: the pair table, the 16-position decode, the
 * mma wrapper.  See the design note at the top of linear.cu. */
#ifndef TCQ_TC_COMMON_CUH
#define TCQ_TC_COMMON_CUH

#include "tcq_kernels.h"

#ifndef TCQ_EMU   /* tests/cuda/emu/imma.cpp compiles the integer kernels on the host */
#include <cuda_fp16.h>
#endif
#include <stdint.h>

namespace tcq_tc {

constexpr float kD = 147.800537109375f;

/* Geometry of one device tensor, by value into the kernels. */
struct Geo {
    const uint32_t *codes;
    const uint16_t *scales;
    int64_t R, C;          /* coded rows, coded cols */
    int64_t row_words;     /* C*k/32 */
    int wpb, T, log2T, L;
    int interleaved;
};

/* The Geo of a host-side trellis view (device pointers in codes/scales). */
inline Geo geo_of(const tcq_trellis *w)
{
    Geo g;
    g.codes = w->codes;
    g.scales = w->scales;
    g.R = w->rows;
    g.C = w->cols;
    g.row_words = tcq_trellis_row_words(w);
    g.wpb = tcq_block_words(w->p);
    g.T = w->p.T;
    g.log2T = w->p.T == 64 ? 6 : w->p.T == 128 ? 7 : 8;
    g.L = w->p.L;
    g.interleaved = w->interleaved;
    return g;
}

__device__ __forceinline__ const uint32_t *block_ptr(const Geo &g, int64_t r, int64_t blk)
{
    if (!g.interleaved) return g.codes + r * g.row_words + blk * g.wpb;
    return g.codes + (blk >> 1) * g.R * 48 + r * 48 + (blk & 1) * 24;
}

/* The 1MAD word of state s (FORMAT.md): the code value is its byte sum minus 510. */
__device__ __forceinline__ uint32_t mad1(uint32_t s) { return s * 34038481u + 76625530u; }

/* Byte sum of mad1(s), in [0, 1020]. */
__device__ __forceinline__ uint32_t bytesum(uint32_t s) { return __dp4a(mad1(s), 0x01010101u, 0u); }

/* y = bytesum - 510 as an exact float without I2F (a quarter-rate conversion): the byte sum added
 * to the bits of 2^23 is the float 2^23 + bytesum, and one FADD takes 2^23 + 510 away exactly. */
__device__ __forceinline__ float code_y(uint32_t s)
{
    return __fsub_rn(__int_as_float((int)__dp4a(mad1(s), 0x01010101u, 0x4B000000u)), 8389118.0f);
}

/* Pair table: entry idx (L+K bits) holds half2(y(idx >> K), y(idx & (2^L-1))), y exact in f16.
 * Single table (L+K > 15): entry s holds half y(s).  Built by the whole block. */
template <int K, bool PAIR>
__device__ void build_table(void *smem, int L)
{
    const uint32_t lmask = (1u << L) - 1u;
    if (PAIR) {
        uint32_t *t = (uint32_t *)smem;
        const int n = 1 << (L + K);
        const __half2 off = __halves2half2(__ushort_as_half(0x65feu), __ushort_as_half(0x65feu)); /* 1534 */
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const uint32_t y0 = bytesum((uint32_t)i >> K), y1 = bytesum((uint32_t)i & lmask);
            /* 0x6400 | n is the f16 1024 + n (n < 1024): exact, so 1024 + n - 1534 = n - 510 exactly. */
            const uint32_t h = (y0 | (y1 << 16)) | 0x64006400u;
            __half2 v = __hsub2(*(const __half2 *)&h, off);
            t[i] = *(const uint32_t *)&v;
        }
    } else {
        uint16_t *t = (uint16_t *)smem;
        const int n = 1 << L;
        for (int i = threadIdx.x; i < n; i += blockDim.x)
            t[i] = __half_as_ushort(__int2half_rn((int)bytesum((uint32_t)i) - 510));
    }
}

template <int K> struct Dec {
    static constexpr bool ALIGNED = (K == 2 || K == 4);     /* region start is word aligned */
    static constexpr int NL = (15 * K + 16 + 31) / 32 + (ALIGNED ? 0 : 1);   /* words loaded */
    static constexpr int NR = ALIGNED ? NL : NL - 1;                         /* after shift */
};

/* Load the words holding positions [Pb, Pb+16) of a block (and the L bits above them). */
template <int K>
__device__ __forceinline__ void load16(const uint32_t *__restrict__ blk, int wpb, int b_lo, uint32_t (&w)[Dec<K>::NL])
{
    const int w0 = b_lo >> 5;
#pragma unroll
    for (int j = 0; j < Dec<K>::NL; j++) {
        int idx = w0 + j;
        idx = idx >= wpb ? idx - wpb : idx;
        w[j] = __ldg(blk + idx);
    }
}

template <int NR>
__device__ __forceinline__ uint32_t bits_at(const uint32_t (&r)[NR], int o)
{
    const int wi = o >> 5, sh = o & 31;
    if (sh == 0) return r[wi];
    if (wi + 1 < NR) return __funnelshift_r(r[wi], r[wi + 1], sh);
    return r[wi] >> sh;
}

/* 8 pair registers: out[j] = half2(y(P+2j), y(P+2j+1)) for the region loaded by load16. */
/* Table reads through 32-bit shared-window addresses (ld.shared): a generic pointer costs a
 * 64-bit add and a generic load per pair. */
__device__ __forceinline__ uint32_t lds32(uint32_t a)
{
    uint32_t v;
    asm("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ uint32_t lds16(uint32_t a)
{
    unsigned short v;
    asm("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a));
    return v;
}

template <int K, bool PAIR>
__device__ __forceinline__ void decode16(const uint32_t (&w)[Dec<K>::NL], int b_lo, uint32_t tab, int L,
                                         uint32_t (&out)[8])
{
    constexpr int NR = Dec<K>::NR;
    uint32_t r[NR];
    if (Dec<K>::ALIGNED) {
#pragma unroll
        for (int j = 0; j < NR; j++) r[j] = w[j];
    } else {
        const int sh = b_lo & 31;
#pragma unroll
        for (int j = 0; j < NR; j++) r[j] = __funnelshift_r(w[j], w[j + 1], sh);
    }
    if (PAIR) {
        const uint32_t pm4 = ((1u << (L + K)) - 1u) << 2;   /* byte offsets into the u32 table */
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int o = (14 - 2 * j) * K;
            const uint32_t off = (o >= 2) ? (bits_at<NR>(r, o - 2) & pm4) : ((r[0] << 2) & pm4);
            out[j] = lds32(tab + off);
        }
    } else {
        const uint32_t lm2 = ((1u << L) - 1u) << 1;   /* byte offsets into the u16 table */
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int o0 = (15 - 2 * j) * K, o1 = (14 - 2 * j) * K;
            const uint32_t a0 = (o0 >= 1 ? bits_at<NR>(r, o0 - 1) : (r[0] << 1)) & lm2;
            const uint32_t a1 = (o1 >= 1 ? bits_at<NR>(r, o1 - 1) : (r[0] << 1)) & lm2;
            out[j] = lds16(tab + a0) | (lds16(tab + a1) << 16);
        }
    }
}

/* W consecutive words of one lane's span, as wide loads (the span is 4W-byte aligned). */
template <int W>
__device__ __forceinline__ void load_span(const uint32_t *__restrict__ p, uint32_t (&w)[W])
{
    if constexpr (W % 4 == 0) {
#pragma unroll
        for (int j = 0; j < W / 4; j++) {
            const uint4 v = __ldg((const uint4 *)p + j);
            w[4 * j] = v.x, w[4 * j + 1] = v.y, w[4 * j + 2] = v.z, w[4 * j + 3] = v.w;
        }
    } else if constexpr (W % 2 == 0) {
#pragma unroll
        for (int j = 0; j < W / 2; j++) {
            const uint2 v = __ldg((const uint2 *)p + j);
            w[2 * j] = v.x, w[2 * j + 1] = v.y;
        }
    } else {
#pragma unroll
        for (int j = 0; j < W; j++) w[j] = __ldg(p + j);
    }
}

/* The 32 bits at bit offset o of span words w (ov: the word above the span). */
template <int W>
__device__ __forceinline__ uint32_t span_bits(const uint32_t (&w)[W], uint32_t ov, int o)
{
    const int wi = o >> 5, sh = o & 31;
    const uint32_t hi = wi + 1 < W ? w[wi + 1 < W ? wi + 1 : 0] : ov;
    return sh ? __funnelshift_r(w[wi], hi, sh) : w[wi];
}

/* A kernel's item queue.  work[0] is the queue, work[1] counts warps gone; the last warp out
 * zeroes both, so the counters are zero at rest for whichever kernel runs next (every kernel of
 * the backend that uses the queue goes through here).  Two halves, so a warp can ask for its next
 * item while it works on this one: queue_ask (lane 0's atomic; nothing waits for it) early,
 * queue_take (the broadcast and the exit count) when the answer is needed. */
__device__ __forceinline__ int queue_ask(int *work)
{
    return (threadIdx.x & 31) == 0 ? atomicAdd(&work[0], 1) : 0;
}

__device__ __forceinline__ int queue_take(int *work, int n_items, int asked)
{
    const int item = __shfl_sync(0xffffffffu, asked, 0);
    if (item >= n_items && (threadIdx.x & 31) == 0) {
        __threadfence();
        const int total = gridDim.x * (blockDim.x >> 5);
        if (atomicAdd(&work[1], 1) == total - 1) {
            work[0] = 0;
            work[1] = 0;
        }
    }
    return item;
}

/* Next item for the whole warp, at once. */
__device__ __forceinline__ int queue_next(int *work, int n_items) { return queue_take(work, n_items, queue_ask(work)); }

__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint2 b)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y));
}

}  // namespace tcq_tc

#endif
