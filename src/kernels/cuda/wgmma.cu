/* Large-M axis-1 linear layers (prefill): Hopper wgmma fed with weights decoded straight into
 * registers, so no bf16 copy of the matrix is ever written.
 *
 * Why (docs/PERFORMANCE.md, "Session 9"): the decode-to-bf16 + cuBLAS path spends ~74 us of its
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
 * Block: two warpgroups, 128 outputs (64 each) x NB = 64 / 128 / 256 activation rows; stages of
 * 64 k in a ring of kStages, kStages - 2 in flight; while a k-step decodes, one wgmma (two at
 * NB = 256) is in flight, its A registers in a ring of 2 (4).  Persistent blocks over whole tiles,
 * then stream-K for the rest (Split, wg_common.cuh).  Output y = acc 2^-e scale / 147.8 (the factored
 * contract).
 * sm_90a only: the host takes this path on compute capability 9.0 (tcq_cuda_wg_supports). */
#include "cuda_internal.h"
#include "tc_common.cuh"
#include "wg_mma.cuh"
#include "wg_common.cuh"

#include <cuda_fp16.h>

#include <algorithm>

namespace {
using namespace tcq_tc;
using namespace tcq_wgs;

constexpr int kThreads = 256;   /* two warpgroups */
constexpr int kStages = 5;
constexpr int kT = 256;

struct WgArgs {
    const __half *xp;   /* [Mpad / NB][n_stage][NB * 64]: the stage tiles */
    const float *xe;    /* [Mpad]: 2^-e of each activation row (0 for padding) */
    float *y;           /* [M, out] */
    int M;
    int n_stage;        /* in / 64 */
    int64_t out;
};

template <int K, int NB, int OCC, int DEPTH>
__global__ void __launch_bounds__(kThreads, OCC) k_wg_reduce(Geo g, WgArgs a, Split sp, float *part, uint32_t lbo, uint32_t sbo)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int kSP = kT / 4, W = kSP * K / 32, KS = kSP / 4;   /* span positions, words; k-steps of a T-block */
    constexpr int STAGE_BYTES = NB * kSK * 2;
    extern __shared__ __align__(128) uint8_t smem[];
    const int tid = threadIdx.x, lane = tid & 31, g8 = lane >> 2, q = lane & 3;
    const int src = (lane & ~3) | ((q + 3) & 3);
    const uint32_t lm = (1u << g.L) - 1u;
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
    const uint64_t desc0 = (uint64_t)((sbase >> 4) & 0x3fffu) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
    const int64_t c = blockIdx.x;
    const int64_t n_whole = sp.whole / sp.G;                   /* whole tiles of this block */
    const int64_t u_first = sp.begin(c), u_end = sp.begin(c + 1);
    int64_t u = u_first;
    for (int64_t it = 0; it < n_whole || u < u_end; it++) {
        int64_t t;
        int kb0, kb1;
        bool first;
        sp.segment(c, it, u_first, u_end, u, t, kb0, kb1, first);
        const int mt = (int)(t / sp.n_rt), rt = (int)(t % sp.n_rt);
        /* rows g and g+8 of this warp's 16 (rows past R read row R-1 and are not written) */
        const int64_t r0 = (int64_t)rt * kRows + 64 * (tid >> 7) + 16 * ((tid >> 5) & 3) + g8;
        const uint32_t *rp[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t r = r0 + 8 * h < g.R ? r0 + 8 * h : g.R - 1;
            rp[h] = g.codes + r * g.row_words + (3 - q) * W;
        }
        const __half *xt = a.xp + ((int64_t)mt * a.n_stage + 4 * kb0) * (NB * kSK);
        const int n_st = 4 * (kb1 - kb0);   /* stages of this segment */
        auto issue = [&](int st) {
            if (st < n_st) {
                const uint4 *s4 = (const uint4 *)(xt + (int64_t)st * (NB * kSK));
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
        for (int h = 0; h < 2; h++) load_span<W>(rp[h] + (int64_t)kb0 * g.wpb, wc[h]);
        float acc[NB / 2];
#pragma unroll
        for (int i = 0; i < NB / 2; i++) acc[i] = 0.0f;
        fence_acc(acc);
        constexpr int NA = DEPTH == 1 ? 2 : 4;   /* A buffers: more than the wgmmas in flight, dividing KS */
        uint32_t A[NA][4];
        for (int b = kb0; b < kb1; b++) {
            uint32_t wn[2][W];
            if (b + 1 < kb1) {
#pragma unroll
                for (int h = 0; h < 2; h++) load_span<W>(rp[h] + (int64_t)(b + 1) * g.wpb, wn[h]);
            }
            uint32_t ov[2];
#pragma unroll
            for (int h = 0; h < 2; h++) ov[h] = __shfl_sync(0xffffffffu, wc[h][0], src);
            const int st0 = 4 * (b - kb0);
#pragma unroll
            for (int j = 0; j < KS; j++) {
                const int st = st0 + (j >> 2);
                wg_wait<DEPTH>();   /* at most DEPTH wgmmas in flight: the one that read A[j % NA] is done */
                if ((j & 3) == 0) {
                    /* every thread's wgmma of stage st - 2 is done (the wait above leaves at
                     * most 2 of stage st - 1 in flight, then the barrier), so its buffer takes
                     * stage st + kStages - 2 */
                    cp_async_wait<kStages - 3>();
                    fence_async_smem();
                    __syncthreads();
                    issue(st + kStages - 2);
                }
                uint32_t *Aj = A[j % NA];
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
            if (b + 1 < kb1) {
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int i = 0; i < W; i++) wc[h][i] = wn[h][i];
            }
        }
        wg_wait<0>();
        fence_acc(acc);
        cp_async_wait<0>();
        __syncthreads();   /* the ring is free for the next segment */
        /* acc[4i + 2h + cc]: row g + 8h, activation row 8i + 2q + cc of the tile's NB.  The
         * activation rows' factors are read 8 pairs at a time ahead of their stores, through the
         * read-only path: read between the stores (which may alias them, as far as the compiler
         * knows), each store waited for its own load, 17 % of the stall samples of the M = 512
         * kernel (docs/PERFORMANCE.md, session 14). */
        const bool whole = kb0 == 0 && kb1 == sp.nblk;
        float *pp = whole ? NULL : part_at<NB>(part, c, first ? 0 : 1);
        static_assert(NB % 64 == 0, "the epilogue reads the factors of 8 row pairs at a time");
        float f[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t r = r0 + 8 * h;
            f[h] = r < g.R ? __half2float(__ushort_as_half(__ldg(g.scales + r))) / kD : 0.0f;
        }
#pragma unroll
        for (int i0 = 0; i0 < NB / 8; i0 += 8) {
            float2 xv[8];
#pragma unroll
            for (int ii = 0; ii < 8; ii++) xv[ii] = __ldg((const float2 *)(a.xe + mt * NB + 8 * (i0 + ii) + 2 * q));
#pragma unroll
            for (int ii = 0; ii < 8; ii++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int64_t r = r0 + 8 * h;
                    const int rl = (int)(r - (int64_t)rt * kRows);
#pragma unroll
                    for (int cc = 0; cc < 2; cc++) {
                        const int ml = 8 * (i0 + ii) + 2 * q + cc, m = mt * NB + ml;
                        const float v = acc[4 * (i0 + ii) + 2 * h + cc] * (cc ? xv[ii].y : xv[ii].x) * f[h];
                        if (pp) pp[ml * kRows + rl] = v;
                        else if (r < g.R && m < a.M) a.y[(int64_t)m * a.out + r] = v;
                    }
                }
        }
    }
#else
    (void)g, (void)a, (void)sp, (void)part, (void)lbo, (void)sbo;
#endif
}

template <int K, int NB, int DEPTH>
tcq_status launch(tcq_cuda_ctx *ctx, const Geo &g, const WgArgs &a, int64_t Mpad, float *part, int64_t G_max)
{
    constexpr int OCC = NB <= 128 ? 2 : 1;
    const int smem = kStages * NB * kSK * 2;
    CU_TRY(cudaFuncSetAttribute(k_wg_reduce<K, NB, OCC, DEPTH>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
           "cuda wgmma: shared memory limit");
    const uint32_t lbo = NB * 16, sbo = 128;   /* tile_off: K-neighbour and N-neighbour core matrices */
    const int n_rt = (int)((g.R + kRows - 1) / kRows);
    const int64_t n_tiles = (int64_t)n_rt * (Mpad / NB);
    const int64_t G = std::min<int64_t>(ctx->wg_grid > 0 ? ctx->wg_grid : (int64_t)ctx->n_sm * OCC, G_max);
    const Split sp = split_make(n_tiles, (int)(g.C / kT), n_rt, G);
    k_wg_reduce<K, NB, OCC, DEPTH><<<(unsigned)sp.G, kThreads, smem, ctx->stream>>>(g, a, sp, part, lbo, sbo);
    CU_LAUNCHED("cuda wgmma reduce");
    if (sp.UT > 0) {
        const int64_t n_rest = n_tiles - sp.whole;
        k_wg_fix<NB, 8><<<(unsigned)(n_rest * (kRows * NB / (256 * 8))), 256, 0, ctx->stream>>>(a.y, a.M, a.out, sp, part);
        CU_LAUNCHED("cuda wgmma partial sums");
    }
    return TCQ_OK;
}

template <int NB>
tcq_status run_nb(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M)
{
    const Geo g = geo_of(w);
    const int64_t in = g.C, Mpad = (M + NB - 1) / NB * NB;
    const int64_t G_max = (int64_t)ctx->n_sm * 2;
    const size_t xb = tcq_align256((size_t)Mpad * in * 2), eb = tcq_align256((size_t)Mpad * 4);
    const size_t pb = (size_t)G_max * 2 * kRows * NB * 4, mb = tcq_align256(xprep_scratch(Mpad, in) * 4);
    void *scr;
    TCQ_TRY(tcq_cuda_scratch(ctx, xb + eb + pb + mb, &scr));
    WgArgs a;
    a.xp = (const __half *)scr;
    a.xe = (const float *)((char *)scr + xb);
    a.y = y;
    a.M = (int)M;
    a.n_stage = (int)(in / kSK);
    a.out = g.R;
    float *part = (float *)((char *)scr + xb + eb);
    TCQ_TRY((xprep_launch<NB, true>(ctx, x, (int)M, Mpad, in, NULL, (float *)((char *)scr + xb + eb + pb),
                                      (__half *)a.xp, (float *)a.xe)));
    /* two wgmmas in flight at NB = 256 (3-4 % faster there; one measured 1-4 % slower in session
     * 14); at NB <= 128 the fourth A buffer spills at k=4 and nothing is gained (docs/PERFORMANCE.md,
     * session 9) */
    constexpr int D = NB == 256 ? 2 : 1;
    switch (w->p.k) {
    case 2: return launch<2, NB, D>(ctx, g, a, Mpad, part, G_max);
    case 3: return launch<3, NB, D>(ctx, g, a, Mpad, part, G_max);
    default: return launch<4, NB, D>(ctx, g, a, Mpad, part, G_max);
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
    if (M < 1 || M > (1 << 16)) return 0;   /* int activation-row indices; the f16 copy of x in scratch */
    /* built-in: where it measured faster than decode + cuBLAS (docs/PERFORMANCE.md, session 14, at
     * 17408x5120): every k to M = 256 (106-113 against 137 us); past that it costs by 256-row
     * tiles of x (~75 us a tile at k = 2, ~90 at k = 3 / 4), so only k = 2 with its last tile
     * more than half full, to M = 768 (M = 512: 173 against 190 us; 768: 245 against 258; 384:
     * 172 against 168; 1024: 327 against 302) */
    if (ctx->wg_pin == 1 || M <= 256) return 1;
    const int64_t tail = M % 256;
    return w->p.k == 2 && M <= 768 && (tail == 0 || tail > 128);
}

tcq_status tcq_cuda_linear_wg(tcq_cuda_ctx *ctx, const tcq_trellis *w, const float *x, float *y, int64_t M)
{
    if (M <= 64) return run_nb<64>(ctx, w, x, y, M);
    if (M <= 128) return run_nb<128>(ctx, w, x, y, M);
    return run_nb<256>(ctx, w, x, y, M);
}
