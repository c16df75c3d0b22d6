/* Linear layers over packed trellis weights on the GPU, M <= 32: the tensor-core kernels.
 *
 * Why this design (the two numbers, docs/PERFORMANCE.md): at k=2 a 17408x5120 matrix is 22.3 MB, 5.5 us
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
#include "tc_kernels.cuh"

using namespace tcq_tc;

namespace {

/* x [M, in] -> B fragments (f16 hi / lo of x * colscale * 2^e); block (m, s) does activation row
 * m over reduction chunk s (rows M..4NTt-1 write zeros).  The exponent is per (chunk, row): each
 * chunk's partial sum is scaled back on its own, and no block waits for a whole-row maximum.
 * One read of x: each thread keeps the values of its (at most kXE) fragment entries. */
constexpr int kXThreads = 256, kXE = 4;
__device__ __forceinline__ float xval(const float *__restrict__ x, int M, int m, int64_t in, const uint16_t *__restrict__ cs,
                                      int64_t i)
{
    if (m >= M || i >= in) return 0.0f;
    float v = x[(int64_t)m * in + i];
    if (cs) v *= __half2float(__ushort_as_half(cs[i]));
    return v;
}

__global__ void __launch_bounds__(kXThreads) k_xprep(const float *__restrict__ x, int M, int64_t in,
                                                     const uint16_t *__restrict__ colscale, int64_t nkt, int NTt, int chunk,
                                                     uint2 *__restrict__ xf, float *__restrict__ rs)
{
    const int m = blockIdx.x, s = blockIdx.y;
    const int64_t kt0 = 4 * (int64_t)s * chunk, kt1 = min(kt0 + 4 * (int64_t)chunk, nkt);
    const int64_t n_ent = (kt1 - kt0) * 8;                  /* (kt, part, q) entries */
    const bool fits = n_ent <= (int64_t)kXE * blockDim.x;
    __shared__ float red[32];
    float v[kXE][4];
    float mx = 0.0f;
#pragma unroll
    for (int e = 0; e < kXE; e++) {
        const int64_t idx = kt0 * 8 + threadIdx.x + (int64_t)e * blockDim.x;
#pragma unroll
        for (int r = 0; r < 4; r++) v[e][r] = 0.0f;
        if (!fits || idx >= kt1 * 8) continue;
        const int64_t kt = idx >> 3;
        const int q = (int)(idx & 3);
        const int64_t ib = 64 * (kt >> 2) + 16 * q + 4 * (kt & 3);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            v[e][r] = xval(x, M, m, in, colscale, ib + r);
            mx = fmaxf(mx, fabsf(v[e][r]));
        }
    }
    if (!fits)   /* long chunks: a separate pass for the maximum */
        for (int64_t i = kt0 * 16 + threadIdx.x; i < min(kt1 * 16, in); i += blockDim.x)
            mx = fmaxf(mx, fabsf(xval(x, M, m, in, colscale, i)));
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
    int e2 = 0;
    if (mx > 0.0f && mx <= 3.0e38f) {
        int ex;
        frexpf(mx, &ex);          /* mx in [2^(ex-1), 2^ex) */
        e2 = 14 - ex;             /* max |x'| < 2^14: f16 holds it, lo parts stay normal */
        e2 = max(-100, min(100, e2));
    }
    const float mul = ldexpf(1.0f, e2);
    if (threadIdx.x == 0) rs[s * 4 * NTt + m] = ldexpf(1.0f, -e2);
    const int nt = m >> 2;
    for (int64_t idx = kt0 * 8 + threadIdx.x, e = 0; idx < kt1 * 8; idx += blockDim.x, e++) {
        const int64_t kt = idx >> 3;
        const int part = (int)((idx >> 2) & 1), q = (int)(idx & 3);
        const int lane = (2 * (m & 3) + part) * 4 + q;
        const int64_t ib = 64 * (kt >> 2) + 16 * q + 4 * (kt & 3);
        uint16_t h[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            float xv = 0.0f;
            if (fits) {
#pragma unroll
                for (int k = 0; k < kXE; k++)
                    if (k == e) xv = v[k][r];
            } else
                xv = xval(x, M, m, in, colscale, ib + r);
            xv *= mul;
            const __half hi = __float2half_rn(xv);
            h[r] = __half_as_ushort(part ? __float2half_rn(xv - __half2float(hi)) : hi);
        }
        xf[(kt * NTt + nt) * 32 + lane] = make_uint2(h[0] | ((uint32_t)h[1] << 16), h[2] | ((uint32_t)h[3] << 16));
    }
}

/* y[m, o] = sum over chunks (in order) of part[s, m, o] / d: four threads per output each add a
 * fixed quarter of the chunks, combined in a fixed order (deterministic, ~4x the loads in flight). */
__global__ void k_finish(const float *__restrict__ part, int S, int64_t n /* M*out */, float *__restrict__ y)
{
    const int64_t id = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t i = id >> 2;
    const int qq = (int)(id & 3);
    const int s0 = (int)((int64_t)S * qq / 4), s1 = (int)((int64_t)S * (qq + 1) / 4);
    float acc = 0.0f;
    if (i < n) {
#pragma unroll 8
        for (int k = s0; k < s1; k++) acc += __ldcg(&part[(int64_t)k * n + i]);
    }
    const float a1 = __shfl_xor_sync(0xffffffffu, acc, 1);
    const float lo = (qq & 1) ? a1 + acc : acc + a1;          /* (q0 + q1), (q2 + q3) */
    const float hi = __shfl_xor_sync(0xffffffffu, lo, 2);
    if (qq == 0 && i < n) y[i] = (lo + hi) / kD;
}

__global__ void k_swiglu(const float *__restrict__ g, const float *__restrict__ u, float *__restrict__ y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float a = g[i];
        y[i] = __fdiv_rn(a, __fadd_rn(1.0f, expf(-a))) * u[i];
    }
}

}  // namespace

/* The M <= 32 path (used by dispatch.cu).  up != NULL: fused SwiGLU with w as gate
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
    const Geo g = geo_of(w);
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
    int *cnt;
    TCQ_TRY(tcq_cuda_counters(ctx, (size_t)o.ntiles + 2, &cnt));
    /* slots 0, 1: the item queue and its exit count (queue_next leaves both at zero), then the
     * tile counters (zero at rest: each tile's last warp resets its own) */
    o.work = cnt;
    o.cnt = cnt + 2;
    k_xprep<<<dim3(4 * nt, o.S), kXThreads, 0, ctx->stream>>>(x, (int)M, in, w->axis ? NULL : w->scales, nkt, nt, o.chunk,
                                                        (uint2 *)o.xf, (float *)o.rs);
    CU_LAUNCHED("cuda linear: activation prep");
    Geo gu = g;
    if (up) {
        gu.codes = up->codes;
        gu.scales = up->scales;
    }
    const int ax = w->axis;
    const bool sw = up != NULL;
    tcq_status st;
    switch (K) {
    case 1: st = launch_k1(ctx, pair, ax, sw, g, gu, o); break;
    case 2: st = launch_k2(ctx, pair, ax, sw, g, gu, o); break;
    case 3: st = launch_k3(ctx, pair, ax, sw, g, gu, o); break;
    default: st = launch_k4(ctx, pair, ax, sw, g, gu, o); break;
    }
    if (st != TCQ_OK || ax == 1 || o.S == 1) return st;
    return tcq_cuda_finish_chunks(ctx, o.part, o.S, M * out, y);
}

tcq_status tcq_cuda_finish_chunks(tcq_cuda_ctx *ctx, const float *part, int S, int64_t n, float *y)
{
    k_finish<<<(int)((4 * n + 255) / 256), 256, 0, ctx->stream>>>(part, S, n, y);
    CU_LAUNCHED("cuda scatter: chunk sums");
    return TCQ_OK;
}

tcq_status tcq_cuda_swiglu_combine(tcq_cuda_ctx *ctx, const float *g, const float *u, float *y, int64_t n)
{
    const int grid = (int)TCQ_MIN((n + 255) / 256, (int64_t)ctx->n_sm * 8);
    k_swiglu<<<grid, 256, 0, ctx->stream>>>(g, u, y, n);
    CU_LAUNCHED("cuda swiglu");
    return TCQ_OK;
}
