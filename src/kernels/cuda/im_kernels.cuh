/* The integer tensor-core kernels (M <= 8; design note at the top of imma.cu).  Included by
 * imma_k<K>.cu, one file per k so the instantiations compile in parallel. */
#ifndef TCQ_IM_KERNELS_CUH
#define TCQ_IM_KERNELS_CUH

#ifndef TCQ_EMU   /* tests/cuda/emu/imma.cpp compiles these kernels on the host */
#include "cuda_internal.h"
#define TCQ_DYN_SMEM extern __shared__ __align__(16)
#endif
#include "tc_common.cuh"

#include <utility>

namespace tcq_im {
using tcq_tc::Geo;

constexpr int kThreads = 256;
constexpr int kRedRows = 32;    /* reduce: coded rows of one warp item (two m16 tiles) */
constexpr int kRedChunk = 512;  /* reduce: positions of one item (whole T-blocks, T = 128 or 256), default */
constexpr int kScOut = 128;     /* scatter: outputs of one warp item (8 lane groups x 16) */
constexpr int kScChunk = 128;   /* scatter: inputs (coded rows) of one item: 16 k-steps, default */
constexpr int kMaxM = 8;        /* exact: 2 limbs x 8 rows (M = 6..8; 3 limbs to M = 5) = 16 columns = 2 n-tiles */
constexpr int kMaxM8 = 16;      /* int8 (axis 1): one column a row, 2 n-tiles */

struct IOut {
    const uint4 *xf;     /* [n_kt/2][NT][32]: B fragments of two k-steps (uint2 each) */
    const double *xs;    /* [n_ch][M]: sum of the integers x' over the chunk */
    const float *xe;     /* [n_ch][M]: the chunk's step: 2^-e (exact, x = x' 2^-e) or amax/127 (int8) */
    float *y;            /* [M, out] */
    float *part;         /* [nmat][S][M][out] per-chunk partials (S > 1 or two matrices) */
    int *work;           /* [2]: item queue, warps gone; the last warp out zeroes both */
    int M, S, n_items, ntiles, nmat;
    int limbs;           /* B columns per activation row: 3 (exact: x' < 2^22 in signed bytes), 2 (x' < 2^14), 1 (int8) */
    int chunk;           /* reduced positions of one item (= the x prep's chunk, <= 1024) */
    float inv_ntiles, inv_per_s;   /* 1/ntiles, 1/(ntiles nmat) */
    int pdl;             /* launched as a programmatic dependent of the x prep (wait after the first
                          * weight loads); 0 an ordinary launch */
    int pf;              /* scatter: k-steps ahead of the decode whose code rows are prefetched to L2
                          * (beyond the register ring; 0 none) */
    int64_t out;
    int64_t n_kt;        /* k-steps (8 inputs each) along the reduced dimension, even */
};

/* mma.m16n8k32: D (s32) += A (u8: the four bytes of x = mad1(s), one weight per register)
 * x B (s8: one activation limb replicated four times), so the tensor core adds byte sum x limb. */
__device__ __forceinline__ void imma(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                     uint32_t b1)
{
#ifdef TCQ_EMU
    emu_imma(c, a0, a1, a2, a3, b0, b1);
#else
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

using tcq_tc::mad1;

/* Axis 1: the span position of k-step j's slot pi (0: k-slots 4q.., 1: 16 + 4q..) in a lane's
 * span; the x prep writes B in this order and the reduce reads A in it. */
__host__ __device__ constexpr int span_pos(int j, int pi) { return 2 * j + pi; }

/* Programmatic dependent launch (sm_90): the x prep lets the main kernel start at once, and the
 * main kernel waits for the prep's results only after its first weight loads are in flight. */
#ifdef TCQ_EMU   /* one kernel at a time */
inline void pdl_launch_dependents() {}
inline void pdl_wait() {}
#else
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
#endif

#ifndef TCQ_EMU
/* Launch kern as a programmatic dependent of the previous kernel on the stream (pdl != 0) or as
 * an ordinary launch; the kernel's griddepcontrol.wait makes the dependence safe either way. */
template <typename... P, typename... A>
tcq_status pdl_launch(tcq_cuda_ctx *ctx, int pdl, void (*kern)(P...), dim3 grid, dim3 block, size_t smem, const char *what,
                      A &&...args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = ctx->stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    CU_TRY(cudaLaunchKernelEx(&cfg, kern, std::forward<A>(args)...), what);
    return TCQ_OK;
}
#endif

__device__ __forceinline__ int next_item(const IOut &o) { return tcq_tc::queue_next(o.work, o.n_items); }

/* q, r of a / b for 0 <= a < 2^24 (item indices): float reciprocal plus one correction step. */
__device__ __forceinline__ int div_small(int a, int b, float inv_b, int *r)
{
    int d = __float2int_rz(__int2float_rn(a) * inv_b);
    int m = a - d * b;
    if (m < 0) d--, m += b;
    else if (m >= b) d++, m -= b;
    *r = m;
    return d;
}

tcq_status launch_im1(tcq_cuda_ctx *ctx, int axis, int NT, const Geo &g, const Geo &gu, const IOut &o);
tcq_status launch_im2(tcq_cuda_ctx *ctx, int axis, int NT, const Geo &g, const Geo &gu, const IOut &o);
tcq_status launch_im3(tcq_cuda_ctx *ctx, int axis, int NT, const Geo &g, const Geo &gu, const IOut &o);
tcq_status launch_im4(tcq_cuda_ctx *ctx, int axis, int NT, const Geo &g, const Geo &gu, const IOut &o);
}  // namespace tcq_im

#ifdef TCQ_IM_K
namespace {
using namespace tcq_im;
using tcq_tc::Dec;

using tcq_tc::load_span;
using tcq_tc::span_bits;

/* The chunk partial of one output from its limb columns (exact in double): step (sum_l 256^l
 * acc_l - 510 sum x'), y = bytesum - 510 folded in once per chunk. */
__device__ __forceinline__ float im_partial(const int *cols, const IOut &o, int s, int m)
{
    double v = (double)cols[0];
    if (o.limbs == 3) v += 256.0 * (double)cols[1] + 65536.0 * (double)cols[2];
    else if (o.limbs == 2) v += 256.0 * (double)cols[1];
    v -= 510.0 * o.xs[s * o.M + m];
    return (float)(v * (double)o.xe[s * o.M + m]);
}

/* ------------------------------------------------------------------ axis 1: reduce
 * Item: 32 coded rows x kRedChunk positions.  Lane (g, q) holds rows g, g+8 of both m-tiles and,
 * of each T-block, the span of SP = T/4 positions [q SP, q SP + SP): W = SP k / 32 words, plus
 * the word above the span (the L-k bits of the last windows), which is the first word of lane
 * q-1's span (of lane 3's for q = 0: tail-biting wraps inside the block) — one shuffle.
 * An item is only a few blocks long, so the loads run one block ahead across item boundaries:
 * a warp asks the queue for its next item when it starts one and loads that item's first block
 * while it decodes the last block of this one (no exposed memory latency per item). */
template <int K, int SP, int NT>
__global__ void __launch_bounds__(kThreads, 2) k_im_reduce(Geo g0, Geo g1, IOut o)
{
    constexpr int W = SP * K / 32, KS = SP / 2, MT = kRedRows / 16;
    TCQ_DYN_SMEM int ep_all[];
    pdl_launch_dependents();   /* the chunk sums may take their places (they wait for us) */
    const int lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
    int *ep = ep_all + (threadIdx.x >> 5) * (kRedRows * 8 * NT);
    const int src = (lane & ~3) | ((q + 3) & 3);
    const Geo &g = g0;   /* the geometry both matrices share */
    const uint32_t lm = (1u << g.L) - 1u;
    const int bpc = o.chunk / g.T;
    const int nblk = (int)(g.C / g.T);
    const int per_s = o.ntiles * o.nmat;
    /* an item's chunk s, matrix, row tile, blocks [b0, b1) and the word offsets of its lane's four
     * row spans (32-bit: tcq_cuda_im_supports keeps the tensor under 2^29 words, 2^31 bytes) */
    constexpr bool kPreScale = NT == 1 && K != 4;
    /* the epilogue's factor of a row: its fp16 scale / 147.8 */
    auto row_factor = [&](int mat, int64_t row) {
        return __half2float(__ushort_as_half((mat ? g1.scales : g0.scales)[row])) / tcq_tc::kD;
    };
    struct Place {
        int s, mat, tile, b0, b1;
        uint32_t ro[MT][2];
        float f;   /* the epilogue's row factor scale / 147.8 of row tile 32 + lane (0 past R) */
    };
    auto locate = [&](int item, Place &p) {
        int rem;
        p.s = div_small(item, per_s, o.inv_per_s, &rem);   /* chunk-major: warps in flight share x */
        p.mat = div_small(rem, o.ntiles, o.inv_ntiles, &p.tile);
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                /* rows past R read row R-1: a D row depends only on its own A row, and those
                 * outputs are not written, so the loads need no branches */
                const int r = (int)min((int64_t)p.tile * kRedRows + 16 * mt + gq + 8 * h, g.R - 1);
                p.ro[mt][h] = (uint32_t)r * (uint32_t)g.row_words + (uint32_t)((3 - q) * W);
            }
        p.b0 = p.s * bpc;
        p.b1 = min(p.b0 + bpc, nblk);
        /* loaded here, a whole item before the epilogue needs it (there it was a dependent global
         * load per item): 2-4 % at M = 1 for k = 2, 3.  Not where the kernel sits at the register
         * cap (k = 4, two n-tiles): the extra live register spilled there, 3-13 % slower
         * (docs/PERFORMANCE.md, session 13) */
        if constexpr (kPreScale) {
            const int64_t row = (int64_t)p.tile * kRedRows + lane;
            p.f = row < g.R ? row_factor(p.mat, row) : 0.0f;
        }
    };
    auto load = [&](const Place &p, int b, uint32_t (&w)[MT][2][W]) {
        /* fields, not a reference to one of two parameters (that puts both in local memory) */
        const uint32_t *codes = (p.mat ? g1.codes : g0.codes) + (uint32_t)b * (uint32_t)g.wpb;
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) load_span<W>(codes + p.ro[mt][h], w[mt][h]);
    };
    Place cur;
    {
        const int item = next_item(o);
        if (item >= o.n_items) return;
        locate(item, cur);
    }
    uint32_t wc[MT][2][W];
    load(cur, cur.b0, wc);
    if (o.pdl) pdl_wait();
    for (;;) {
        const int asked = tcq_tc::queue_ask(o.work);
        Place nxt;
        bool last = true;   /* no item after this one */
        /* NT = 1: two accumulator sets (even / odd k-steps), four independent IMMA chains */
        constexpr int NA = NT == 1 ? 2 : 1;
        int acc[NA][MT][NT][4];
#pragma unroll
        for (int a = 0; a < NA; a++)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) acc[a][mt][nt][e] = 0;
        for (int b = cur.b0; b < cur.b1; b++) {
            uint32_t wn[MT][2][W];
            bool more = b + 1 < cur.b1;
            if (more) load(cur, b + 1, wn);
            else {
                const int item = tcq_tc::queue_take(o.work, o.n_items, asked);
                last = item >= o.n_items;
                if (!last) {
                    locate(item, nxt);
                    load(nxt, nxt.b0, wn);
                    more = true;
                }
            }
            uint32_t ov[MT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++) ov[mt][h] = __shfl_sync(0xffffffffu, wc[mt][h][0], src);
            const uint4 *xb = o.xf + (int64_t)b * (KS / 2) * NT * 32 + lane;
#pragma unroll
            for (int jj = 0; jj < KS / 2; jj++) {
                uint4 bb[NT];
#pragma unroll
                for (int nt = 0; nt < NT; nt++) bb[nt] = __ldg(xb + (jj * NT + nt) * 32);
                /* every 8 k-steps: keep the compiler from hoisting all of a block's B loads to
                 * its top (64 registers at SP=64), which caps the warps per SM.  (Loading them one
                 * pair ahead instead measured no faster.) */
                if (jj % 4 == 3) asm volatile("" ::: "memory");
#pragma unroll
                for (int jh = 0; jh < 2; jh++) {
                    const int j = 2 * jj + jh;
                    /* k-step j: positions p0 (k-slots 4q..4q+3) and p1 (16+4q..) of the span
                     * (span_pos); position i's window starts at bit (SP-1-i) k of the span */
                    const int p0 = span_pos(j, 0), p1 = span_pos(j, 1);
                    uint32_t x0[MT][2], x1[MT][2];
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            x0[mt][h] = mad1(span_bits<W>(wc[mt][h], ov[mt][h], (SP - 1 - p0) * K) & lm);
                            x1[mt][h] = mad1(span_bits<W>(wc[mt][h], ov[mt][h], (SP - 1 - p1) * K) & lm);
                        }
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int nt = 0; nt < NT; nt++)
                            imma(acc[jh % NA][mt][nt], x0[mt][0], x0[mt][1], x1[mt][0], x1[mt][1], jh ? bb[nt].z : bb[nt].x,
                                 jh ? bb[nt].w : bb[nt].y);
                }
            }
            if (more) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int h = 0; h < 2; h++)
#pragma unroll
                        for (int j = 0; j < W; j++) wc[mt][h][j] = wn[mt][h][j];
            }
        }
        /* D fragment -> [32 rows][8 NT columns] in this warp's shared slice; column limbs m + l is
         * limb l of activation row m */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    ep[(16 * mt + gq + 8 * (e >> 1)) * (8 * NT) + 8 * nt + 2 * q + (e & 1)] = acc[0][mt][nt][e] + (NA > 1 ? acc[NA - 1][mt][nt][e] : 0);
        __syncwarp();
        const int64_t row = (int64_t)cur.tile * kRedRows + lane;
        const bool rok = lane < kRedRows && row < g.R;
        const bool direct = o.nmat == 1 && o.S == 1;
        float f = 0.0f;
        if constexpr (kPreScale) f = cur.f;
        else if (rok) f = row_factor(cur.mat, row);
        for (int m = 0; m < o.M && rok; m++) {
            const float v = im_partial(ep + lane * 8 * NT + o.limbs * m, o, cur.s, m);
            if (direct) o.y[(int64_t)m * o.out + row] = v * f;
            else o.part[(((int64_t)cur.mat * o.S + cur.s) * o.M + m) * o.out + row] = v;
        }
        __syncwarp();
        /* S > 1 or two matrices: k_im_finish_reduce (imma.cu) adds the chunks in order; no
         * per-item fence and arrival counter in this loop */
        if (last) break;
        cur = nxt;
    }
}

/* ------------------------------------------------------------------ axis 0: scatter
 * Item: kScOut outputs (positions of the coded rows) x kScChunk inputs (coded rows).  A rows are
 * outputs: lane (g, q) owns positions [16g, 16g+16) of the tile; m-tile mt's rows g / g+8 are
 * positions 16g+2mt / +1.  k-step kt covers inputs 8kt..8kt+7, lane q the inputs 8kt+2q (k-slots
 * 4q..) and 8kt+2q+1 (16+4q..).  A depth-D ring of k-steps' words in registers keeps ~4 KB per
 * warp in flight. */
template <int K, int NT>
__global__ void __launch_bounds__(kThreads, 2) k_im_scatter(Geo g, Geo unused, IOut o)
{
    (void)unused;
    /* D: k-steps of code words in flight.  NT = 2 (two n-tiles' accumulators) at D = 4 spilled
     * 20-56 bytes at the 128-register cap; D = 2 spills none.  Kept as measured side by side with
     * D = 4 everywhere (docs/PERFORMANCE.md, session 12): exact M = 3..8 3-4 % faster at k = 2, 9-12 %
     * at k = 3, 1-2 % at k = 4.  These kernels sit at the register cap, and small code changes
     * move them by up to 10 % (a build with D = 2 at every k ran k = 4 12 % faster, k = 3 1 %
     * slower), so re-measure after touching this loop. */
    constexpr int MT = 8, NL = Dec<K>::NL, NR = Dec<K>::NR, D = NT == 2 && K != 3 ? 2 : 4;
    TCQ_DYN_SMEM int ep_all[];
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
    int *ep = ep_all + (threadIdx.x >> 5) * (kScOut * 8 * NT);
    const uint32_t lm = (1u << g.L) - 1u;
    const int rmax = (int)g.R - 1;
    bool waited = !o.pdl;
    for (;;) {
        const int item = next_item(o);
        if (item >= o.n_items) break;
        int tile;
        const int s = div_small(item, o.ntiles, o.inv_ntiles, &tile);
        const int64_t P = (int64_t)tile * kScOut + 16 * gq;
        const bool pok = P < g.C;
        const int64_t blk = pok ? P >> g.log2T : 0;
        const int Pb = (int)(P & (g.T - 1));
        const int b_lo = (g.T - Pb - 16) * K;
        const uint32_t *base = g.interleaved ? g.codes + (blk >> 1) * g.R * 48 + (blk & 1) * 24 : g.codes + blk * g.wpb;
        const int stride = g.interleaved ? 48 : (int)g.row_words;
        const int kt0 = s * (o.chunk / 8), kt1 = (int)min((int64_t)kt0 + o.chunk / 8, o.n_kt);
        /* the words of the 16 positions (and the L bits above), wrapped inside the block:
         * offsets fixed for the item, so a load is one address add */
        uint32_t ofsb[NL];   /* byte offsets: a load is one 32-bit add and one 64-bit add */
#pragma unroll
        for (int j = 0; j < NL; j++) {
            const int idx = (b_lo >> 5) + j;
            ofsb[j] = 4u * (uint32_t)(idx >= g.wpb ? idx - g.wpb : idx);
        }
        const char *base_b = (const char *)base;
        const uint32_t stride_b = 4u * (uint32_t)stride;
        int acc[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[mt][nt][e] = 0;
        uint32_t w[D][2][NL];
        auto issue = [&](uint32_t (&ws)[2][NL], int kt) {
#pragma unroll
            for (int d = 0; d < 2; d++) {
                const uint32_t roff = (uint32_t)min(8 * kt + 2 * q + d, rmax) * stride_b;
#pragma unroll
                for (int j = 0; j < NL; j++) ws[d][j] = __ldg((const uint32_t *)(base_b + (roff + ofsb[j])));
            }
        };
#pragma unroll
        for (int u = 0; u < D; u++)
            if (kt0 + u < kt1) issue(w[u], kt0 + u);
        if (!waited) pdl_wait(), waited = true;
        /* B fragments of k-step pairs in a ring of two, loaded two pairs ahead (from L2 mostly:
         * the warps of an SM rarely share a chunk).  Not at NT = 2: its 8 more registers spill
         * (measured: M=4 1.2-1.4x slower with the ring), so it loads each pair where it is used. */
        constexpr bool RING = NT != 2;
        uint4 bq[2][NT];
#pragma unroll
        for (int sl = 0; sl < 2; sl++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                if (RING) bq[sl][nt] = __ldg(o.xf + (((kt0 >> 1) + sl) * NT + nt) * 32 + lane);
        for (int kt = kt0; kt < kt1; kt += D) {
#pragma unroll
            for (int u = 0; u < D; u++) {
                const int k = kt + u;
                if (k >= kt1) break;
                uint32_t x[2][16];
#pragma unroll
                for (int d = 0; d < 2; d++) {
                    uint32_t r[NR];
                    if (Dec<K>::ALIGNED) {
#pragma unroll
                        for (int j = 0; j < NR; j++) r[j] = w[u][d][j];
                    } else {
                        const int sh = b_lo & 31;
#pragma unroll
                        for (int j = 0; j < NR; j++) r[j] = __funnelshift_r(w[u][d][j], w[u][d][j + 1], sh);
                    }
#pragma unroll
                    for (int t = 0; t < 16; t++) x[d][t] = mad1(tcq_tc::bits_at<NR>(r, (15 - t) * K) & lm);
                }
                if (k + D < kt1) issue(w[u], k + D);
                /* The register ring covers D k-steps (~1 us at M = 1), short of HBM's latency under
                 * load: the loads' waits were 42 % of the warps' stall samples (ncu, session 13).
                 * One L2 prefetch per lane and row pf k-steps ahead needs no registers; the eight
                 * lanes of a row fall in one or two sectors. */
                if (o.pf && k + o.pf < kt1) {
#pragma unroll
                    for (int d = 0; d < 2; d++) {
                        const uint32_t roff = (uint32_t)min(8 * (k + o.pf) + 2 * q + d, rmax) * stride_b;
#ifndef TCQ_EMU
                        asm volatile("prefetch.global.L2 [%0];" ::"l"(base_b + (roff + ofsb[0])));
#else
                        (void)roff;
#endif
                    }
                }
                uint2 bf[NT];
                const int sl = u >> 1;   /* the ring runs at NT = 1, where D = 4 and kt is a multiple of 4: pair k >> 1 sits in slot u >> 1 */
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const uint4 bb = RING ? bq[sl][nt] : __ldg(o.xf + ((k >> 1) * NT + nt) * 32 + lane);
                    bf[nt] = (k & 1) ? make_uint2(bb.z, bb.w) : make_uint2(bb.x, bb.y);
                }
                if (RING && (u & 1) && k + 3 < kt1) {
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) bq[sl][nt] = __ldg(o.xf + (((k >> 1) + 2) * NT + nt) * 32 + lane);
                }
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int nt = 0; nt < NT; nt++)
                        imma(acc[mt][nt], x[0][2 * mt], x[0][2 * mt + 1], x[1][2 * mt], x[1][2 * mt + 1], bf[nt].x, bf[nt].y);
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    ep[(16 * gq + 2 * mt + (e >> 1)) * (8 * NT) + 8 * nt + 2 * q + (e & 1)] = acc[mt][nt][e];
        __syncwarp();
        for (int t = 0; t < kScOut / 32; t++) {
            const int lo = lane + 32 * t;
            const int64_t po = (int64_t)tile * kScOut + lo;
            for (int m = 0; m < o.M; m++) {
                const float v = im_partial(ep + lo * 8 * NT + o.limbs * m, o, s, m);
                if (po >= g.C) continue;
                if (o.S == 1) o.y[(int64_t)m * o.out + po] = v / tcq_tc::kD;
                else o.part[((int64_t)s * o.M + m) * o.out + po] = v;
            }
        }
        __syncwarp();
    }
}

#ifndef TCQ_EMU
template <typename F>
tcq_status im_launch(tcq_cuda_ctx *ctx, F kern, size_t smem, const Geo &g, const Geo &gu, const IOut &o, const char *what)
{
    if (smem > 48 * 1024) CU_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), what);
    int per_sm = 0;
    CU_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kThreads, smem), what);
    if (per_sm < 1) return tcq_fail(TCQ_ERR_DEVICE, "%s: kernel does not fit an SM", what);
    const int want = (o.n_items + kThreads / 32 - 1) / (kThreads / 32);
    const int grid = min(ctx->n_sm * per_sm, want);
    return pdl_launch(ctx, o.pdl, kern, dim3(grid), dim3(kThreads), smem, what, g, gu, o);
}

template <int K, int NT>
tcq_status im_launch_nt(tcq_cuda_ctx *ctx, int axis, const Geo &g, const Geo &gu, const IOut &o)
{
    const size_t warps = kThreads / 32;
    if (axis == 0) {
        const size_t smem = warps * kScOut * 8 * NT * 4;
        return im_launch(ctx, k_im_scatter<K, NT>, smem, g, gu, o, "cuda scatter (int) kernel");
    }
    const size_t smem = warps * 32 * 8 * NT * 4;
    if (g.T == 256) return im_launch(ctx, k_im_reduce<K, 64, NT>, smem, g, gu, o, "cuda reduce (int) kernel");
    return im_launch(ctx, k_im_reduce<K, 32, NT>, smem, g, gu, o, "cuda reduce (int) kernel");
}
#endif
}  // namespace

#ifndef TCQ_EMU
#define TCQ_IM_CAT2(a, b) a##b
#define TCQ_IM_CAT(a, b) TCQ_IM_CAT2(a, b)
tcq_status tcq_im::TCQ_IM_CAT(launch_im, TCQ_IM_K)(tcq_cuda_ctx *ctx, int axis, int NT, const Geo &g, const Geo &gu,
                                                 const IOut &o)
{
    switch (NT) {
    case 1: return im_launch_nt<TCQ_IM_K, 1>(ctx, axis, g, gu, o);
    default: return im_launch_nt<TCQ_IM_K, 2>(ctx, axis, g, gu, o);
    }
}
#endif
#endif

#endif
