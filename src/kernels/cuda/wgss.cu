/* Large-M linear layers on Hopper, both axes: producer warps decode the weights into shared
 * memory, consumer warpgroups multiply them with wgmma, both operands from shared memory.
 *
 * Why (docs/PERFORMANCE.md, "Session 10"): the scatter (axis 0) had no tensor-core kernel past M = 8
 * but decode + cuBLAS (118-134 us at M = 17..192 for 5120x17408, twice the reduce's wgmma
 * kernel), because wgmma.cu's trick -- a thread decodes (y_t, y_t+1) of one coded row straight
 * into an A register -- needs two consecutive k in one row, and on axis 0 consecutive k are two
 * coded rows.  In shared memory the layout is free: a producer thread decodes 8 positions of 8
 * (or 4) coded rows and writes each position's 8 k as one 16-byte row of a core matrix.  The
 * same kernel does axis 1 (a thread decodes 64 or 32 consecutive positions of one coded row, so
 * its 16-byte rows are 8 consecutive k as they come).
 *
 * Per stage (64 k): B = 128 outputs x 64 k of decoded weights (16 KB, f16, exact y = bytesum -
 * 510), A = BM = 64 NW MT activation rows x 64 k of x (f16 after a power-of-two scale per row,
 * written in tile order by xprep_launch<BM, false>; axis 0 first multiplies x by its per-input
 * scale, since there the scale runs along k), copied by one cp.async.bulk.  NW consumer
 * warpgroups of MT m64 tiles each: BM = 64 (M <= 64), 128, or 256 (M > 128).  A ring of kStages
 * stages with two mbarriers each: full (the producers' arrivals plus the bulk copy's bytes) and
 * empty (one arrival per consumer warp once the wgmmas that read the stage are done), so the
 * decode of stage s + 3 overlaps the wgmmas of stage s and no block-wide barrier is needed.
 * Layout: 8x8 core matrices, K-major, no swizzle (LBO = K-neighbour, SBO = 128 = M/N-neighbour,
 * as in wgmma.cu).  Bank conflicts: on axis 0 the eight lanes of a 16-byte store phase hold
 * eight different position groups, so lane pg stores its j-th position as (j + pg) & 7 (the 8
 * lanes hit 8 different 16-byte columns); axis 1 lanes are consecutive rows (conflict-free).
 *
 * Work split: tiles of 128 outputs x BM activation rows, 64-k stages as units, whole tiles then
 * stream-K (wg_common.cuh).  Output: y = acc 2^-e (axis 1: x scale / 147.8; axis 0: / 147.8).
 * Contract: y exact, x (times the axis-0 scale, in f32) rounded to f16 after its row scale, f32
 * accumulation.  sm_90a only (wgmma, cp.async.bulk): the host takes it where wgmma.cu's probe
 * says the sm_90a code runs. */
#include "cuda_internal.h"
#include "tc_common.cuh"
#include "wg_common.cuh"
#include "wg_mma.cuh"

#include <cuda_fp16.h>

#include <algorithm>

namespace {
using namespace tcq_tc;
using namespace tcq_wgs;

constexpr int kT = 256;
constexpr int kStages = 4;
constexpr int kBBytes = kRows * kSK * 2;   /* the B tile of a stage: 16 KB */

struct WsArgs {
    const __half *xp;   /* [Mpad / BM][n_stage][BM * 64]: the A stage tiles */
    const float *xe;    /* [Mpad]: 2^-e of each activation row (0 for padding) */
    float *y;           /* [M, out] */
    int M;
    int n_stage;        /* in / 64 */
    int64_t out;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void sts128(uint32_t a, const uint32_t (&v)[4])
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
}
__device__ __forceinline__ void sts64(uint32_t a, const uint32_t (&v)[2])
{
    asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(a), "r"(v[0]), "r"(v[1]) : "memory");
}
/* K-major, no swizzle: LBO between K-neighbour core matrices, SBO between M/N-neighbour ones */
__device__ __forceinline__ uint64_t mdesc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr >> 4) & 0x3fffu) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
}

/* A producer thread's words of one stage: axis 1, NWD consecutive words of its row (the last one
 * wrapping to the block's first word); axis 0, two words of each of its RK coded rows. */
template <int AXIS, int K, int NP> struct Words {
    static constexpr int NPOS = 64 / NP, NWD = NPOS * K / 32 + 1, RK = 8 / NP;
    uint32_t w[AXIS == 1 ? NWD : 2 * RK];
    const __half *xs;   /* the stage's x tile (its bulk copy's source) */
};

/* The stages of a block's segments in order, as the producer thread pt loads them: everything
 * that depends on the tile (row pointers, word offsets, the x tile) is worked out when a segment
 * starts; a stage is then a few adds (64-bit divisions and row products per stage cost ~6
 * instructions per weight in the first version: docs/PERFORMANCE.md, session 10). */
template <int AXIS, int K, int NP, int BM> struct Stages {
    static constexpr int WPB = kT * K / 32;
    const Geo &g;
    const Split &sp;
    const WsArgs &a;
    int pt;
    int64_t c, it, u, u_first, u_end, n_whole;
    int st, kb1;
    const uint32_t *base;   /* axis 1: the row's block 0; axis 0: row 8 kg + RK kh of stage 0 */
    int64_t rs;             /* axis 0: words between neighbouring coded rows */
    int wlo, wnx;           /* axis 1: first word of the thread's span in a block; axis 0: word offsets */
    const __half *xs0;      /* stage 0 of the segment's x tiles */
    __device__ Stages(const Geo &g_, const Split &sp_, const WsArgs &a_, int pt_) : g(g_), sp(sp_), a(a_), pt(pt_)
    {
        c = blockIdx.x;
        it = 0;
        n_whole = sp.whole / sp.G;
        u = u_first = sp.begin(c);
        u_end = sp.begin(c + 1);
        st = kb1 = 0;
    }
    __device__ __forceinline__ void segment(int64_t t)
    {
        const int64_t nt = t % sp.n_rt, mt = t / sp.n_rt;
        xs0 = a.xp + mt * a.n_stage * (BM * kSK);
        if constexpr (AXIS == 1) {
            int64_t r = nt * kRows + (pt & 127);
            if (r >= g.R) r = g.R - 1;   /* rows past R: decoded, never written */
            base = g.codes + r * g.row_words;
            wlo = (64 - (64 / NP) * (NP == 1 ? 1 : (pt >> 7) + 1)) * K / 32;
        } else {
            const int pg = NP == 1 ? pt & 15 : (pt >> 1) & 15, kg = NP == 1 ? pt >> 4 : pt >> 5, kh = NP == 1 ? 0 : pt & 1;
            const int P = (int)((nt * kRows) & (kT - 1)) + 8 * pg;
            wlo = ((kT - P - 8) * K) >> 5;
            wnx = wlo + 1 >= WPB ? wlo + 1 - WPB : wlo + 1;
            base = block_ptr(g, 8 * kg + (8 / NP) * kh, (nt * kRows) / kT);
            rs = g.interleaved ? 48 : g.row_words;
        }
    }
    /* the next stage's words into e; false at the end */
    __device__ __forceinline__ bool next(Words<AXIS, K, NP> &e)
    {
        if (st >= kb1) {
            if (it >= n_whole && u >= u_end) return false;
            int64_t t;
            bool first;
            sp.segment(c, it++, u_first, u_end, u, t, st, kb1, first);
            segment(t);
        }
        const int s = st++;
        e.xs = xs0 + (int64_t)s * (BM * kSK);
        if constexpr (AXIS == 1) {
            const uint32_t *bp = base + (int64_t)(s >> 2) * WPB;
            const int lo = (3 - (s & 3)) * 2 * K + wlo;
            constexpr int NWD = Words<1, K, NP>::NWD;
#pragma unroll
            for (int j = 0; j < NWD - 1; j++) e.w[j] = __ldg(bp + lo + j);
            const int last = lo + NWD - 1;
            e.w[NWD - 1] = __ldg(bp + (last >= WPB ? last - WPB : last));
        } else {
            const uint32_t *p = base + (int64_t)s * 64 * rs;
#pragma unroll
            for (int i = 0; i < 8 / NP; i++, p += rs) {
                e.w[2 * i] = __ldg(p + wlo);
                e.w[2 * i + 1] = __ldg(p + wnx);
            }
        }
        return true;
    }
};

/* Axis 1: coded rows are outputs, positions are k.  Producer thread pt decodes row
 * nt 128 + (pt & 127), positions [NPOS h, NPOS (h+1)) of the stage's 64 (h = pt >> 7), from
 * the NWD words that hold them and the L bits above (positions run downwards in the bit stream);
 * each 8 positions are one 16-byte row of a core matrix (lanes: consecutive rows, no conflicts). */
template <int K, int NP>
__device__ __forceinline__ void store1(const Words<1, K, NP> &e, uint32_t sB, int pt, uint32_t lm)
{
    constexpr int NPOS = Words<1, K, NP>::NPOS, NWD = Words<1, K, NP>::NWD;
    const int h = NP == 1 ? 0 : pt >> 7, p = pt & 127;
#pragma unroll
    for (int gg = 0; gg < NPOS / 8; gg++) {
        uint32_t v[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = 8 * gg + 2 * i;
            v[i] = ypair(bits_at<NWD>(e.w, (NPOS - 1 - u) * K) & lm, bits_at<NWD>(e.w, (NPOS - 2 - u) * K) & lm);
        }
        sts128(sB + (uint32_t)((h * NPOS / 8 + gg) * 2048 + p * 16), v);
    }
}

/* Axis 0: coded rows are k, positions are outputs.  Producer thread pt decodes positions
 * [8 pg, 8 pg + 8) of the tile of RK coded rows 64 st + 8 kg + RK kh + i: two words per row hold
 * all eight windows (8 positions and L bits span at most 24 + 7k + L <= 64 bits from a word
 * boundary).  ofs[jj]: where position (jj + pg) & 7 goes (see the top); sh[jj]: its window's
 * bit offset from the first word's bit 0. */
template <int K, int NP>
__device__ __forceinline__ void store0(const Words<0, K, NP> &e, uint32_t sB, uint32_t lm, const int (&sh)[8],
                                       const uint32_t (&ofs)[8])
{
    constexpr int RK = Words<0, K, NP>::RK;
#pragma unroll
    for (int jj = 0; jj < 8; jj++) {
        uint32_t v[RK / 2];
#pragma unroll
        for (int i = 0; i < RK / 2; i++) {
            const uint64_t x0 = ((uint64_t)e.w[4 * i + 1] << 32) | e.w[4 * i];
            const uint64_t x1 = ((uint64_t)e.w[4 * i + 3] << 32) | e.w[4 * i + 2];
            v[i] = ypair((uint32_t)(x0 >> sh[jj]) & lm, (uint32_t)(x1 >> sh[jj]) & lm);
        }
        if constexpr (RK == 8) sts128(sB + ofs[jj], v);
        else sts64(sB + ofs[jj], v);
    }
}
#endif

template <int AXIS, int K, int NW, int MT, int NP>
__global__ void __launch_bounds__(128 * (NW + NP), 1) k_ws(Geo g, WsArgs a, Split sp, float *part)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BM = 64 * NW * MT, ABYTES = BM * kSK * 2, STAGE = kBBytes + ABYTES;
    constexpr int kAhead = 2 * NP;   /* stages of codes a producer has in flight (NP = 1: twice the work a stage) */
    extern __shared__ __align__(128) uint8_t smem[];
    const int tid = threadIdx.x;
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t full = sbase + kStages * STAGE, empty = full + 8 * kStages;
    if (tid == 0) {
        for (int s = 0; s < kStages; s++) {
            mbar_init(full + 8 * s, NP * 128 + 1);   /* the producers and the bulk copy's expect_tx */
            mbar_init(empty + 8 * s, NW * 4);        /* one arrival per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const int64_t c = blockIdx.x;
    const int64_t n_whole = sp.whole / sp.G;
    const int64_t u_first = sp.begin(c), u_end = sp.begin(c + 1);

    /* MT = 2 (384 threads: 168 registers each at launch): the consumers' 128 accumulators need
     * more, the producers fewer (setmaxnreg moves them per warpgroup; without it both spill) */
    constexpr bool kRebal = MT == 2;
    if (tid >= NW * 128) {
        /* ---------------------------------------------------------------- producers */
        if constexpr (kRebal) asm volatile("setmaxnreg.dec.sync.aligned.u32 96;" ::: "memory");
        const int pt = tid - NW * 128;
        const uint32_t lm = (1u << g.L) - 1u;
        int sh[8];
        uint32_t ofs[8];
        if constexpr (AXIS == 0) {
            const int pg = NP == 1 ? pt & 15 : (pt >> 1) & 15, kg = NP == 1 ? pt >> 4 : pt >> 5, kh = NP == 1 ? 0 : pt & 1;
            /* P differs between the two tiles of a 256-block by 128 positions = 128 K bits (a
             * multiple of 32): the in-word offset is the same for every tile */
            const int o0 = ((kT - 8 * pg - 8) * K) & 31;
#pragma unroll
            for (int jj = 0; jj < 8; jj++) {
                sh[jj] = o0 + (7 - ((jj + pg) & 7)) * K;
                ofs[jj] = (uint32_t)(kg * 2048 + kh * 8 + (8 * pg + ((jj + pg) & 7)) * 16);
            }
        }
        Stages<AXIS, K, NP, BM> gen(g, sp, a, pt);
        /* a ring of kAhead stages' words in registers: the loads of stage n + kAhead go out
         * when stage n is decoded (one stage ahead left most of an HBM latency exposed) */
        Words<AXIS, K, NP> buf[kAhead];
        bool bv[kAhead];
#pragma unroll
        for (int d = 0; d < kAhead; d++) bv[d] = gen.next(buf[d]);
        uint32_t gs = 0;
        for (bool more = bv[0]; more;) {
#pragma unroll
            for (int d = 0; d < kAhead; d++) {
                if (!bv[d]) {
                    more = false;
                    break;
                }
                const uint32_t slot = gs % kStages, sB = sbase + slot * STAGE;
                mbar_wait(empty + 8 * slot, ((gs / kStages) & 1) ^ 1);
                if (pt == 0) {
                    mbar_arrive_tx(full + 8 * slot, ABYTES);
                    bulk_g2s(sB + kBBytes, buf[d].xs, ABYTES, full + 8 * slot);
                }
                if constexpr (AXIS == 1) store1<K, NP>(buf[d], sB, pt, lm);
                else store0<K, NP>(buf[d], sB, lm, sh, ofs);
                fence_async_smem();   /* generic-proxy stores, read by wgmma's async proxy */
                mbar_arrive(full + 8 * slot);
                gs++;
                bv[d] = gen.next(buf[d]);
            }
        }
        return;
    }

    /* -------------------------------------------------------------------- consumers */
    if constexpr (kRebal) asm volatile("setmaxnreg.inc.sync.aligned.u32 200;" ::: "memory");
    const int wg = tid >> 7, lane = tid & 31, g8 = lane >> 2, q = lane & 3;
    uint32_t gs = 0;
    for (int64_t it = 0, u = u_first; it < n_whole || u < u_end; it++) {
        int64_t t;
        int kb0, kb1;
        bool first;
        sp.segment(c, it, u_first, u_end, u, t, kb0, kb1, first);
        const int mt = (int)(t / sp.n_rt);
        const int64_t nt = t % sp.n_rt;
        float acc[MT][64];
#pragma unroll
        for (int t2 = 0; t2 < MT; t2++) {
#pragma unroll
            for (int i = 0; i < 64; i++) acc[t2][i] = 0.0f;
            fence_acc(acc[t2]);
        }
        uint32_t prev = 0;
        for (int s = kb0; s < kb1; s++, gs++) {
            const uint32_t slot = gs % kStages, sB = sbase + slot * STAGE;
            mbar_wait(full + 8 * slot, (gs / kStages) & 1);
            wg_fence();
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint64_t db = mdesc(sB + j * (kRows * 32), kRows * 16, 128);
#pragma unroll
                for (int t2 = 0; t2 < MT; t2++) {
                    /* this warpgroup's m64 tile t2: rows 64 (MT wg + t2) of the stage's BM */
                    const uint64_t da = mdesc(sB + kBBytes + 1024 * (MT * wg + t2) + j * (BM * 32), BM * 16, 128);
                    tcq_wg::MmaSS128::run(acc[t2], da, db, 1u);
                }
            }
            wg_commit();
            if (s > kb0) {
                wg_wait<1>();   /* the previous stage's wgmmas are done: its slot is free */
                if (lane == 0) mbar_arrive(empty + 8 * prev);
            }
            prev = slot;
        }
        wg_wait<0>();
#pragma unroll
        for (int t2 = 0; t2 < MT; t2++) fence_acc(acc[t2]);
        if (lane == 0) mbar_arrive(empty + 8 * prev);
        /* acc[t2][4i + 2h + cc]: activation row 16 warp + g8 + 8h of the m64 tile, output 8i + 2q + cc */
        const bool whole = kb0 == 0 && kb1 == sp.nblk;
        float *pp = whole ? NULL : part_at<BM>(part, c, first ? 0 : 1);
#pragma unroll
        for (int hh = 0; hh < 2 * MT; hh++) {
            const int t2 = hh >> 1, h = hh & 1;
            const int ml = 64 * (MT * wg + t2) + 16 * ((tid >> 5) & 3) + g8 + 8 * h, m = mt * BM + ml;
            const float xe = a.xe[m];
#pragma unroll
            for (int i = 0; i < 16; i++)
#pragma unroll
                for (int cc = 0; cc < 2; cc++) {
                    const int ol = 8 * i + 2 * q + cc;
                    const int64_t o = nt * kRows + ol;
                    float f = 1.0f / kD;
                    if (AXIS == 1) f = o < g.R ? __half2float(__ushort_as_half(g.scales[o])) / kD : 0.0f;
                    const float v = acc[t2][4 * i + 2 * h + cc] * xe * f;
                    if (pp) pp[ml * kRows + ol] = v;
                    else if (o < a.out && m < a.M) a.y[(int64_t)m * a.out + o] = v;
                }
        }
    }
#else
    (void)g, (void)a, (void)sp, (void)part;
#endif
}

template <int AXIS, int K, int NW, int MT, int NP>
tcq_status launch(tcq_cuda_ctx *ctx, const Geo &g, const WsArgs &a, int64_t Mpad, float *part, int64_t G_max)
{
    constexpr int BM = 64 * NW * MT;
    const int smem = kStages * (kBBytes + BM * kSK * 2) + 16 * kStages;
    CU_TRY(cudaFuncSetAttribute(k_ws<AXIS, K, NW, MT, NP>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
           "cuda wgmma (shared): shared memory limit");
    const int n_rt = (int)((a.out + kRows - 1) / kRows);
    const int64_t n_tiles = (int64_t)n_rt * (Mpad / BM);
    const int64_t G = std::min<int64_t>(ctx->wg_grid > 0 ? ctx->wg_grid : ctx->n_sm, G_max);
    const Split sp = split_make(n_tiles, a.n_stage, n_rt, G);
    k_ws<AXIS, K, NW, MT, NP><<<(unsigned)sp.G, 128 * (NW + NP), smem, ctx->stream>>>(g, a, sp, part);
    CU_LAUNCHED("cuda wgmma (shared) kernel");
    if (sp.UT > 0) {
        const int64_t n_rest = n_tiles - sp.whole;
        k_wg_fix<BM, 2><<<(unsigned)(n_rest * (kRows * BM / (256 * 2))), 256, 0, ctx->stream>>>(a.y, a.M, a.out, sp, part);
        CU_LAUNCHED("cuda wgmma (shared) partial sums");
    }
    return TCQ_OK;
}

template <int AXIS, int NW, int MT, int NP>
tcq_status run_k(tcq_cuda_ctx *ctx, const Geo &g, const WsArgs &a, int k, int64_t Mpad, float *part, int64_t G_max)
{
    switch (k) {
    case 2: return launch<AXIS, 2, NW, MT, NP>(ctx, g, a, Mpad, part, G_max);
    case 3: return launch<AXIS, 3, NW, MT, NP>(ctx, g, a, Mpad, part, G_max);
    default: return launch<AXIS, 4, NW, MT, NP>(ctx, g, a, Mpad, part, G_max);
    }
}

/* BM = 64 NW MT activation rows a tile: NW consumer warpgroups of MT m64 tiles each */
template <int NW, int MT>
tcq_status run_bm(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M)
{
    constexpr int BM = 64 * NW * MT;
    const Geo g = geo_of(w);
    const bool ax1 = w->axis == 1;
    const int64_t in = ax1 ? g.C : g.R, out = ax1 ? g.R : g.C, Mpad = (M + BM - 1) / BM * BM;
    const int64_t G_max = ctx->n_sm;
    const size_t xb = tcq_align256((size_t)Mpad * in * 2), eb = tcq_align256((size_t)Mpad * 4);
    const size_t pb = (size_t)G_max * 2 * kRows * BM * 4, mb = tcq_align256(xprep_scratch(Mpad, in) * 4);
    void *scr;
    TCQ_TRY(tcq_cuda_scratch(ctx, xb + eb + pb + mb, &scr));
    WsArgs a;
    a.xp = (const __half *)scr;
    a.xe = (const float *)((char *)scr + xb);
    a.y = y;
    a.M = (int)M;
    a.n_stage = (int)(in / kSK);
    a.out = out;
    float *part = (float *)((char *)scr + xb + eb);
    /* axis 0: the scale runs along k, so it goes into x (one f32 product before the f16 rounding) */
    TCQ_TRY((xprep_launch<BM, false>(ctx, x, (int)M, Mpad, in, ax1 ? NULL : g.scales, (float *)((char *)scr + xb + eb + pb),
                                      (__half *)a.xp, (float *)a.xe)));
    /* two producer warpgroups (one measured 15-20 % slower in the first version); MT = 2 has 128
     * accumulators a consumer thread, so one (384 threads, 168 registers) */
    constexpr int NP = MT == 2 ? 1 : 2;
    if (ax1) return run_k<1, NW, MT, NP>(ctx, g, a, w->p.k, Mpad, part, G_max);
    return run_k<0, NW, MT, NP>(ctx, g, a, w->p.k, Mpad, part, G_max);
}

}  // namespace

int tcq_cuda_ws_supports(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M)
{
    if (!ctx->wg_ok || ctx->ws_pin == 0) return 0;
    if (w->p.T != kT || w->p.k < 2 || w->p.k > 4) return 0;
    if (w->axis == 1 ? w->interleaved : w->rows % kSK != 0) return 0;   /* axis 0: whole 64-k stages */
    if (M < 1 || M > (1 << 16)) return 0;
    if (ctx->ws_pin == 1) return 1;
    /* built-in: the scatter from M = 3 to 256 (the dispatcher prefers the integer kernel at M =
     * 3..5 where that runs: dispatch.cu, pick(); its own time hardly depends on M below 64), 1.7x
     * faster than decode + cuBLAS at M = 9..64, 1.3x at 128, equal at 160-192, 1.1x at 256,
     * slower at 512 (docs/PERFORMANCE.md, sessions 10 and 11) */
    return w->axis == 0 && M >= 3 && M <= 256;
}

tcq_status tcq_cuda_linear_ws(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M)
{
    if (M <= 64) return run_bm<1, 1>(ctx, w, x, y, M);
    /* past 128 rows, tiles of 256 (two m64 tiles a consumer warpgroup): 128-row tiles measured
     * 1.2x slower at M = 256..512 (session 10) */
    if (M <= 128) return run_bm<2, 1>(ctx, w, x, y, M);
    return run_bm<2, 2>(ctx, w, x, y, M);
}
