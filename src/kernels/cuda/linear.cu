/* Linear layers over packed trellis weights on the GPU, M <= 32: the tensor-core kernels.
 *
 * Why this design (the two numbers, bench/NOTES.md): at k=2 a 17408x5120 matrix is 22.3 MB, 5.5 us
 * at 4.09 TB/s, i.e. ~63 weights per clock per SM.  An SM issues 128 lane-instructions per clock,
 * so the whole decode + multiply must cost about 2 instructions per weight; the 1MAD arithmetic
 * (extract, IMAD, byte sum, convert, FMA) is 5-6.  Here each lane extracts the (L+k)-bit window
 * of a PAIR of neighbouring positions (one funnel shift + one AND), and one shared-memory load
 * returns both weights as an f16x2 of the exact integers y = bytesum - 510: that register is
 * already an A fragment of mma.m16n8k16 (two consecutive k-elements of one row).  The tensor
 * cores do the multiply-add against x split in f16 hi + lo columns (x' = x 2^e per row), f32
 * accumulation.  ~1.5 instructions and half a shared load per weight.
 *
 * Fragment bookkeeping.  The k order inside an mma is free as long as A and B agree: lane
 * (g = lane/4, q = lane%4) of k-tile kt = 4c + j covers inputs 64c + 16q + 4j + {0..3}.
 *   axis 1 (reduce): A rows = coded rows (outputs), a lane decodes 16 consecutive positions
 *     [64c+16q, +16) of rows g and g+8 of two 16-row tiles: 8 pair registers each.
 *   axis 0 (scatter): A rows = outputs.  A lane decodes positions [oB+16g, +16) of the 4 coded
 *     rows 64c+16q+4j+{0..3}; byte_perm pairs them up ((row i, row i+1) at one position), and
 *     A row g / g+8 of output tile u is output oB+16g+2u / +1.
 * D: c0+c1 (hi + lo column) is row g for activation row m = 4nt + q; c2+c3 row g+8.
 *
 * Work: items (output tile, reduction chunk), a fixed split that depends on the shape only;
 * warps of a persistent grid take items in order.  Partial sums go to scratch; the last warp to
 * finish a tile (atomic counter) sums the chunks in index order, so results are deterministic. */
#include "cuda_internal.h"
#include "tc_common.cuh"

using namespace tcq_tc;

namespace {

constexpr int kThreadsR = 512;   /* reduce: 128 registers a thread */
constexpr int kThreadsS = 384;   /* scatter: 8 output tiles x 2 n-tiles of accumulators, 168 registers */
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
    int S, chunk, n_items, ntiles;
    int64_t groups;       /* reduction length in 64s */
};

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
    const int lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
    const int wpb_ = g.wpb;
    const int nw = gridDim.x * (blockDim.x >> 5);
    const int per = SW ? 2 * o.S : o.S;
    for (int item = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); item < o.n_items; item += nw) {
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
        auto issue = [&](int64_t c) {
            const int64_t P = 64 * c + 16 * q;
            const int64_t blk = P >> g.log2T;
            const int Pb = (int)(P & (g.T - 1));
            b_lo = (g.T - Pb - 16) * K;
#pragma unroll
            for (int d = 0; d < 4; d++) {
                if (ok[d]) load16<K>(block_ptr(gm, row[d], blk), wpb_, b_lo, w[d]);
                else
#pragma unroll
                    for (int j = 0; j < Dec<K>::NL; j++) w[d][j] = 0;
            }
        };
        if (c0 < c1) issue(c0);
        for (int64_t c = c0; c < c1; c++) {
            uint32_t pr[4][8];
#pragma unroll
            for (int d = 0; d < 4; d++) decode16<K, PAIR>(w[d], b_lo, smem, g.L, pr[d]);
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
    const int lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
    const int wpb_ = g.wpb;
    const int nw = gridDim.x * (blockDim.x >> 5);
    const int64_t nkt = o.groups * 4;
    for (int item = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); item < o.n_items; item += nw) {
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
            auto issue = [&](int64_t kt) {
                const int64_t i0 = 64 * (kt >> 2) + 16 * q + 4 * (kt & 3);
#pragma unroll
                for (int d = 0; d < 4; d++) {
                    if (pok && i0 + d < g.R) load16<K>(block_ptr(g, i0 + d, blk), wpb_, b_lo, w[d]);
                    else
#pragma unroll
                        for (int j = 0; j < Dec<K>::NL; j++) w[d][j] = 0;
                }
            };
            if (k0 < k1) issue(k0);
            for (int64_t kt = k0; kt < k1; kt++) {
                uint32_t pr[4][8];
#pragma unroll
                for (int d = 0; d < 4; d++) decode16<K, PAIR>(w[d], b_lo, smem, g.L, pr[d]);
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
        if (tile_last(o, tile, o.S) && pok) {
            for (int m = q; m < o.M; m += 4)
#pragma unroll
                for (int e = 0; e < 16; e++) o.y[(int64_t)m * o.out + P + e] = sum_parts(o, m, P + e) / kD;
        }
    }
}

/* x [M, in] -> B fragments (f16 hi / lo of x * colscale * 2^e); block (m, s) does activation row
 * m over reduction chunk s (rows M..4NTt-1 write zeros).  The exponent is per (chunk, row): each
 * chunk's partial sum is scaled back on its own, and no block waits for a whole-row maximum. */
__global__ void k_xprep(const float *__restrict__ x, int M, int64_t in, const uint16_t *__restrict__ colscale,
                        int64_t nkt, int NTt, int chunk, uint2 *__restrict__ xf, float *__restrict__ rs)
{
    const int m = blockIdx.x, s = blockIdx.y;
    const int64_t kt0 = 4 * (int64_t)s * chunk, kt1 = min(kt0 + 4 * (int64_t)chunk, nkt);
    const int64_t i0 = kt0 * 16, i1 = min(kt1 * 16, in);
    __shared__ float red[32];
    float mx = 0.0f;
    if (m < M)
        for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
            float v = x[(int64_t)m * in + i];
            if (colscale) v *= __half2float(__ushort_as_half(colscale[i]));
            mx = fmaxf(mx, fabsf(v));
        }
    for (int d = 16; d; d >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x < 32) {
        mx = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.0f;
        for (int d = 16; d; d >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
        if (threadIdx.x == 0) red[0] = mx;
    }
    __syncthreads();
    mx = red[0];
    int e = 0;
    if (mx > 0.0f && mx <= 3.0e38f) {
        int ex;
        frexpf(mx, &ex);          /* mx in [2^(ex-1), 2^ex) */
        e = 14 - ex;              /* max |x'| < 2^14: f16 holds it, lo parts stay normal */
        e = max(-100, min(100, e));
    }
    const float mul = ldexpf(1.0f, e);
    if (threadIdx.x == 0) rs[s * 4 * NTt + m] = ldexpf(1.0f, -e);
    const int nt = m >> 2;
    for (int64_t idx = kt0 * 8 + threadIdx.x; idx < kt1 * 8; idx += blockDim.x) {
        const int64_t kt = idx >> 3;
        const int part = (int)((idx >> 2) & 1), q = (int)(idx & 3);
        const int lane = (2 * (m & 3) + part) * 4 + q;
        const int64_t ib = 64 * (kt >> 2) + 16 * q + 4 * (kt & 3);
        uint16_t h[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int64_t i = ib + r;
            float v = 0.0f;
            if (m < M && i < in) {
                v = x[(int64_t)m * in + i];
                if (colscale) v *= __half2float(__ushort_as_half(colscale[i]));
                v *= mul;
            }
            const __half hi = __float2half_rn(v);
            h[r] = __half_as_ushort(part ? __float2half_rn(v - __half2float(hi)) : hi);
        }
        xf[(kt * NTt + nt) * 32 + lane] = make_uint2(h[0] | ((uint32_t)h[1] << 16), h[2] | ((uint32_t)h[3] << 16));
    }
}

__global__ void k_swiglu(const float *__restrict__ g, const float *__restrict__ u, float *__restrict__ y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float a = g[i];
        y[i] = __fdiv_rn(a, __fadd_rn(1.0f, expf(-a))) * u[i];
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
    const int want = (o.n_items + threads / 32 - 1) / (threads / 32);
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

/* The M <= 32 path (used by dense.cu's dispatcher).  up != NULL: fused SwiGLU with w as gate
 * (both axis 1, same parameters and shape: checked by the caller). */
tcq_status tcq_cuda_linear_tc(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x, float *y,
                              int64_t M)
{
    const int K = w->p.k, L = w->p.L;
    const bool pair = L + K <= 15;
    const size_t smem = pair ? ((size_t)4 << (L + K)) : ((size_t)2 << L);
    if ((int64_t)smem > ctx->smem_optin)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "cuda linear: L=%d k=%d needs %zu bytes of shared memory", L, K, smem);
    const int64_t in = tcq_trellis_in(w), out = tcq_trellis_out(w);
    Geo g;
    g.codes = w->codes;
    g.scales = w->scales;
    g.R = w->rows;
    g.C = w->cols;
    g.row_words = tcq_trellis_row_words(w);
    g.wpb = tcq_block_words(w->p);
    g.T = w->p.T;
    g.log2T = w->p.T == 64 ? 6 : w->p.T == 128 ? 7 : 8;
    g.L = L;
    g.interleaved = w->interleaved;
    Out o;
    int nt = (int)((M + 3) / 4);
    if (w->axis == 1) nt = nt <= 1 ? 1 : nt <= 2 ? 2 : nt <= 4 ? 4 : 8;
    else nt = nt <= 1 ? 1 : (nt + 1) & ~1;
    o.NTt = nt;
    o.M = (int)M;
    o.out = out;
    o.y = y;
    const int64_t groups = (in + 63) / 64, nkt = groups * 4;
    o.groups = groups;
    o.ntiles = (int)(w->axis ? (out + 31) / 32 : (out + 127) / 128);
    int S = (int)TCQ_MIN((int64_t)((kTargetItems + o.ntiles - 1) / o.ntiles), groups);
    if (S < 1) S = 1;
    o.chunk = (int)((groups + S - 1) / S);
    o.S = (int)((groups + o.chunk - 1) / o.chunk);
    o.n_items = o.ntiles * o.S * (up ? 2 : 1);
    const size_t xf_bytes = tcq_align256((size_t)nkt * nt * 32 * 8), rs_bytes = tcq_align256((size_t)o.S * 4 * nt * 4);
    const bool parts = up || o.S > 1;
    const size_t part_bytes = parts ? (size_t)o.S * (up ? 2 : 1) * M * out * 4 : 0;
    void *scr;
    TCQ_TRY(tcq_cuda_scratch(ctx, xf_bytes + rs_bytes + part_bytes, &scr));
    o.xf = (const uint2 *)scr;
    o.rs = (const float *)((char *)scr + xf_bytes);
    o.part = parts ? (float *)((char *)scr + xf_bytes + rs_bytes) : NULL;
    o.cnt = NULL;
    if (parts) TCQ_TRY(tcq_cuda_counters(ctx, (size_t)o.ntiles, &o.cnt));
    k_xprep<<<dim3(4 * nt, o.S), 128, 0, ctx->stream>>>(x, (int)M, in, w->axis ? NULL : w->scales, nkt, nt, o.chunk,
                                                        (uint2 *)o.xf, (float *)o.rs);
    CU_LAUNCHED("cuda linear: activation prep");
    Geo gu = g;
    if (up) {
        gu.codes = up->codes;
        gu.scales = up->scales;
    }
    const int ax = w->axis;
    const bool sw = up != NULL;
    switch (K) {
    case 1: return pair ? launch_k<1, true>(ctx, ax, sw, g, gu, o) : launch_k<1, false>(ctx, ax, sw, g, gu, o);
    case 2: return pair ? launch_k<2, true>(ctx, ax, sw, g, gu, o) : launch_k<2, false>(ctx, ax, sw, g, gu, o);
    case 3: return pair ? launch_k<3, true>(ctx, ax, sw, g, gu, o) : launch_k<3, false>(ctx, ax, sw, g, gu, o);
    default: return pair ? launch_k<4, true>(ctx, ax, sw, g, gu, o) : launch_k<4, false>(ctx, ax, sw, g, gu, o);
    }
}

tcq_status tcq_cuda_swiglu_combine(tcq_cuda_ctx *ctx, const float *g, const float *u, float *y, int64_t n)
{
    const int grid = (int)TCQ_MIN((n + 255) / 256, (int64_t)ctx->n_sm * 8);
    k_swiglu<<<grid, 256, 0, ctx->stream>>>(g, u, y, n);
    CU_LAUNCHED("cuda swiglu");
    return TCQ_OK;
}
