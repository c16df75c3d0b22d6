/* Linear layers over packed trellis weights on the GPU, M <= 8: the integer tensor-core kernels.
 *
 * Why (docs/PERFORMANCE.md, "CUDA (H200)"): the pair-table kernels (linear.cu) look up every pair of
 * weights in shared memory; a warp's 32 random table addresses collide in the 32 banks (~3.5
 * wavefronts per LDS on average), which caps a 17408x5120 matrix at ~19 us whatever k is, and the
 * HBM floor at k=2 is 5.5 us.  Here no table: the 1MAD arithmetic x = s*34038481 + 76625530 (one
 * IMAD) leaves in x's four bytes exactly what the code's value is the byte sum of, and
 * mma.m16n8k32 (u8 x s8 -> s32) multiplies those bytes by an activation replicated four times,
 * so the tensor core does the byte sum and the multiply-add together.  A register of x is one A
 * fragment register (four consecutive k-elements of one row).  Per weight: a funnel shift and an
 * AND (the state), the IMAD, a quarter of an IMMA per n-tile: ~3.3 instructions, no shared memory
 * in the inner loop.
 *
 * Exactness: x is quantized per chunk (512 or 768 inputs on axis 1, 128..1024 on axis 0:
 * tcq_cuda_im_chunk) and activation row to an integer x' = rint(x 2^e) with |x'| < 2^22, and
 * split into three signed byte limbs (columns 3m..3m+2 of B), so s32 accumulation is exact
 * inside a chunk (chunk * 4 * 255 * 128 < 2^31); the chunk sum sum_l 256^l acc_l - 510 sum x'
 * is formed in double, scaled by 2^-e and kept as an f32 partial.  The only rounding besides
 * f32 partial sums is x's own quantization, 2^-23 of the chunk's largest |x| per element:
 * relative error ~1e-7, the exact path's test tolerance is 1e-5.
 *
 * Work: fixed (output tile, chunk) items taken from an atomic queue; per-chunk partials summed in
 * chunk order by a second small kernel: deterministic, and no fences in the main loop. */
#include "im_kernels.cuh"
#include "pend.cuh"
#ifndef TCQ_EMU
#include "linear_io.h"
#endif

#include <float.h>

using namespace tcq_im;

namespace {

/* Where the prep's activation comes from (tcq_cuda_linear_io): x, rmsnorm(x) * norm (x the
 * residual stream), or a previous call's pending output (pend.part or pend.y set). */
struct XSrc {
    const float *norm;
    float eps;
    tcq_cuda_pend pend;
};

__device__ __forceinline__ float im_xval(const float *__restrict__ x, const XSrc &src, float inv, int64_t in,
                                         const uint16_t *__restrict__ cs, int m, int64_t i)
{
    if (i >= in) return 0.0f;
    float v;
    if (src.pend.part || src.pend.y) v = tcq_pend_value(src.pend, m, i);
    else {
        v = x[(int64_t)m * in + i];
        if (src.norm) v = src.norm[i] * (v * inv);   /* k_add_norm's rounding (model_kernels.cu) */
    }
    if (cs) v *= __half2float(__ushort_as_half(cs[i]));
    return v;
}

/* 1 / rms of row m of x (in), as k_add_norm forms it: a double sum of squares over the block, then
 * 1 / sqrt(f32(mean) + eps) in double.  Every block of the row forms it (in floats from L2: a few
 * loads a thread), so no block waits for another. */
__device__ __forceinline__ float im_row_inv(const float *__restrict__ x, int64_t in, int m, float eps, double *sh)
{
    const int tid = threadIdx.x, nw = blockDim.x >> 5;
    double ss = 0.0;
    /* four loads in flight before their adds (one at a time: 8.3 against 5.9 us for the plain
     * prep, ncu, H100) */
    for (int64_t j0 = tid; j0 < in; j0 += 4 * (int64_t)blockDim.x) {
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int64_t j = j0 + (int64_t)u * blockDim.x;
            v[u] = j < in ? x[(int64_t)m * in + j] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) ss += (double)v[u] * v[u];
    }
    for (int d = 16; d; d >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, d);
    if ((tid & 31) == 0) sh[tid >> 5] = ss;
    __syncthreads();
    double t = 0.0;
    for (int k = 0; k < nw; k++) t += sh[k];
    return (float)(1.0 / sqrt((double)(float)(t / (double)in) + (double)eps));
}

/* Signed base-256 digit l of v (|v| < 2^22), replicated into four bytes. */
__device__ __forceinline__ uint32_t limb4(int v, int l)
{
    int d = 0;
    for (int k = 0; k <= l; k++) {
        d = ((v + 128) & 255) - 128;
        v = (v - d) >> 8;
    }
    return (uint32_t)(uint8_t)(int8_t)d * 0x01010101u;
}

/* e with |x 2^e| < 2^bits for |x| <= mx: bits 22 (three limbs) or 14 (two) */
__device__ __forceinline__ int im_exponent(float mx, int bits)
{
    if (!(mx > 0.0f) || !(mx <= 3.4e38f)) return 0;
    int ex;
    frexpf(mx, &ex);   /* mx in [2^(ex-1), 2^ex) */
    return max(-126, min(126, bits - ex));
}

/* Block (c, m) (ch threads, one position each): chunk [c ch, (c+1) ch) of the reduced dimension
 * for activation row m: the step, sum x', and row m's columns of the B fragments of the chunk's
 * k-steps (an entry's four words hold one column: lane g's).  limbs = 3: x' = rint(x 2^e) < 2^22
 * (exact path; limbs = 2: < 2^14); limbs = 1: the int8 path, x' = nearbyint(x 127 / amax) in
 * [-127, 127] with step amax / 127 (the CPU fast path's arithmetic, over the chunk instead of
 * TCQ_FAST_QB positions: a k-step here holds positions of four spans of a T-block, so only a
 * whole chunk can share one step).  One block a row, not all rows a block: the rows' reductions
 * then run side by side instead of one after another in one block per chunk (10 blocks for a
 * 5120-input reduce).
 * Position of (k-step kt, lane quad slot q, pi): axis 1 (sp = T/4): block kt/(sp/2), span q,
 * span_pos(kt % (sp/2), pi) (im_kernels.cuh); axis 0: 8 kt + 2q + pi.  One read of x, two barriers.  The last row's
 * block also zeroes the columns past limbs M. */
__global__ void __launch_bounds__(1024) k_im_xprep(const float *__restrict__ x, XSrc src, int M, int64_t in,
                                                 const uint16_t *__restrict__ cs, int axis, int T, int NT, int limbs,
                                                 uint4 *__restrict__ xf, double *__restrict__ xs, float *__restrict__ xe)
{
    pdl_launch_dependents();   /* the main kernel may start its weight loads now */
    const int c = blockIdx.x, m = blockIdx.y, ch = blockDim.x, tid = threadIdx.x, wid = tid >> 5, nwarp = ch >> 5;
    const int64_t p0 = (int64_t)c * ch;
    __shared__ int xq[1024];
    __shared__ float rf[32];
    __shared__ int rbad[32];
    __shared__ long long rl[32];
    __shared__ unsigned char spos[64];   /* axis 1: span_pos of a T-block's 2 (T/8) slots */
    const int lsp = __ffs(T) - 3, lks = lsp - 1;   /* log2(T / 4), log2(T / 8) */
    if (axis && tid < (1 << lsp)) spos[tid] = (unsigned char)span_pos(tid >> 1, tid & 1);
    __shared__ double rd[32];
    const float inv = src.norm ? im_row_inv(x, in, m, src.eps, rd) : 1.0f;
    const float v = im_xval(x, src, inv, in, cs, m, p0 + tid);
    float mx = fabsf(v);
    int bad = !isfinite(v);
    for (int d = 16; d; d >>= 1) {
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
        bad |= __shfl_xor_sync(0xffffffffu, bad, d);
    }
    if ((tid & 31) == 0) rf[wid] = mx, rbad[wid] = bad;
    __syncthreads();
    mx = 0.0f;
    for (int k = 0; k < nwarp; k++) mx = fmaxf(mx, rf[k]);
    const int bits = limbs == 3 ? 22 : 14;
    /* int8: a chunk whose 127 / mx overflows (mx below ~3.7e-37) gets x' = 0 and step 0, as the
     * CPU's kq_step (v * inf would be out of int range) */
    const float inv8 = mx > 0.0f ? __fdiv_rn(127.0f, mx) : 0.0f;
    const bool ok8 = inv8 <= FLT_MAX;
    const int xi = limbs >= 2 ? __float2int_rn(v * ldexpf(1.0f, im_exponent(mx, bits))) : ok8 ? __float2int_rn(v * inv8) : 0;
    xq[tid] = xi;
    long long sum = xi;
    for (int d = 16; d; d >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    if ((tid & 31) == 0) rl[wid] = sum;
    __syncthreads();
    if (tid == 0) {
        long long t = 0;
        bad = 0;
        for (int k = 0; k < nwarp; k++) t += rl[k], bad |= rbad[k];
        xs[(int64_t)c * M + m] = bad ? (double)NAN : (double)t;   /* a NaN/inf input poisons its outputs */
        xe[(int64_t)c * M + m] = limbs >= 2 ? ldexpf(1.0f, -im_exponent(mx, bits)) : ok8 ? __fdiv_rn(mx, 127.0f) : 0.0f;
    }
    /* 32-bit arithmetic on chunk-local positions, shifts for the power-of-two span sizes: with
     * int64 division and modulo per position this loop was ~1000 instructions a warp and the
     * kernel ~5 us on 10 SMs, which the main kernel waits for (docs/PERFORMANCE.md, session 13) */
    const int col0 = limbs * m, ncol = (m == M - 1 ? 8 * NT : limbs * (m + 1)) - col0, per = ncol * 4;
    const int n_ent = (ch / 16) * per;
    const int64_t kp0 = p0 / 16;
    for (int id = tid; id < n_ent; id += ch) {
        const int kpl = id / per, rem = id - kpl * per;
        const int col = col0 + (rem >> 2), q = id & 3, nt = col >> 3, lane = 4 * (col & 7) + q, l = col - col0;
        uint32_t r[4];
#pragma unroll
        for (int jh = 0; jh < 2; jh++) {
            const int kt = 2 * kpl + jh;   /* the chunk's k-steps: p0 is a multiple of T */
#pragma unroll
            for (int pi = 0; pi < 2; pi++) {
                const int p = axis ? ((kt >> lks) << (lsp + 2)) + (q << lsp) + spos[2 * (kt & ((1 << lks) - 1)) + pi]
                                   : 8 * kt + 2 * q + pi;
                r[2 * jh + pi] = l < limbs ? limb4(xq[p], l) : 0u;   /* p < ch: xq is 0 past in */
            }
        }
        const int64_t kp = kp0 + kpl;
        xf[(kp * NT + nt) * 32 + lane] = make_uint4(r[0], r[1], r[2], r[3]);
    }
}

/* The chunk sums: y[m, o] = f_o * sum over chunks s (in order) of part[s][m][o], f_o = scale_o /
 * 147.8 (axis 1, sg = the row scales) or 1 / 147.8 (axis 0, sg = NULL); su != NULL: silu(gate) *
 * up with up's partials after gate's.  A block is 32 consecutive outputs x 8 warps: warp w adds
 * the chunks s = w (mod 8) (coalesced rows of partials, 8 in flight per output), then one thread
 * per output adds the 8 warp sums in warp order: deterministic. */
constexpr int kFinWarps = 8;
__device__ __forceinline__ float fin_sum(const float *__restrict__ part, int S, int64_t n, int64_t i, float (*red)[32])
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    float a = 0.0f;
    if (i < n)
        for (int s = w; s < S; s += kFinWarps) a += __ldg(&part[(int64_t)s * n + i]);
    red[w][lane] = a;
    __syncthreads();
    float t = 0.0f;
    if (w == 0)
        for (int k = 0; k < kFinWarps; k++) t += red[k][lane];
    __syncthreads();
    return t;
}

/* y[i] from output i's chunk sums a (and up's u): the row factor, then silu(a) u */
__device__ __forceinline__ float fin_out(float a, float u, int64_t i, int64_t out, const uint16_t *__restrict__ sg,
                                         const uint16_t *__restrict__ su)
{
    const int64_t r = i % out;
    a *= sg ? __half2float(__ushort_as_half(sg[r])) / tcq_tc::kD : 1.0f / tcq_tc::kD;
    if (su) {
        u *= __half2float(__ushort_as_half(su[r])) / tcq_tc::kD;
        a = __fdiv_rn(a, __fadd_rn(1.0f, expf(-a))) * u;
    }
    return a;
}

/* acc: y[i] += the value (the residual add of tcq_cuda_io.accumulate), else y[i] = it */
__global__ void __launch_bounds__(32 * kFinWarps) k_im_finish(const float *__restrict__ part, int S, int M, int64_t out,
                                                              const uint16_t *__restrict__ sg,
                                                              const uint16_t *__restrict__ su, float *__restrict__ y,
                                                              int acc)
{
    __shared__ float red[kFinWarps][32];
    pdl_wait();
    const int64_t n = (int64_t)M * out, i = blockIdx.x * (int64_t)32 + (threadIdx.x & 31);
    float a = fin_sum(part, S, n, i, red);
    float u = su ? fin_sum(part + (int64_t)S * n, S, n, i, red) : 0.0f;
    if (threadIdx.x >= 32 || i >= n) return;
    const float v = fin_out(a, u, i, out, sg, su);
    y[i] = acc ? y[i] + v : v;
}

/* S <= kFinRowS and M >= 2 (the reduce of up to 8192 inputs): one thread an output, its S loads
 * in flight at once, added in chunk order.  The 8-warp blocks above are for the scatter's long S;
 * on the reduce's S = 10 they ran ~4 waves of tiny latency-bound blocks at M = 8 (ncu: 9.6 us for
 * 5.6 MB).  At M = 1 (68 blocks for 17408 outputs) this kernel measured 0.5-0.9 us slower than
 * those, so M = 1 keeps them (docs/PERFORMANCE.md, session 11). */
constexpr int kFinRowS = 16;
__device__ __forceinline__ float fin_row(const float *__restrict__ part, int S, int64_t n, int64_t i)
{
    float v[kFinRowS];
#pragma unroll
    for (int s = 0; s < kFinRowS; s++) v[s] = s < S ? __ldg(&part[(int64_t)s * n + i]) : 0.0f;
    float a = 0.0f;
#pragma unroll
    for (int s = 0; s < kFinRowS; s++)
        if (s < S) a += v[s];
    return a;
}

__global__ void __launch_bounds__(256) k_im_finish_row(const float *__restrict__ part, int S, int M, int64_t out,
                                                       const uint16_t *__restrict__ sg, const uint16_t *__restrict__ su,
                                                       float *__restrict__ y, int acc)
{
    pdl_wait();
    const int64_t n = (int64_t)M * out, i = blockIdx.x * (int64_t)256 + threadIdx.x;
    if (i >= n) return;
    const float a = fin_row(part, S, n, i);
    const float u = su ? fin_row(part + (int64_t)S * n, S, n, i) : 0.0f;
    const float v = fin_out(a, u, i, out, sg, su);
    y[i] = acc ? y[i] + v : v;
}

/* One call's work plan (host side; tests/cuda/emu/imma.cpp uses it too): every IOut field but
 * the buffers, work, pdl and pf, for M rows of limbs columns each, items of ch inputs and nmat
 * matrices (2: fused SwiGLU).  Returns the B
 * fragments' uint4 count (xf) for NT n-tiles. */
size_t im_plan(const tcq_trellis *w, int64_t M, int limbs, int ch, int nmat, IOut *o)
{
    const int64_t in = tcq_trellis_in(w), out = tcq_trellis_out(w);
    o->M = (int)M;
    o->out = out;
    o->nmat = nmat;
    o->chunk = ch;
    o->limbs = limbs;
    o->S = (int)((in + ch - 1) / ch);
    o->n_kt = 2 * ((in + 15) / 16);
    o->ntiles = (int)(w->axis ? (out + kRedRows - 1) / kRedRows : (out + kScOut - 1) / kScOut);
    o->n_items = o->ntiles * o->S * o->nmat;
    o->inv_ntiles = 1.0f / (float)o->ntiles;
    o->inv_per_s = 1.0f / (float)(o->ntiles * o->nmat);
    const int NT = (int)((limbs * M + 7) / 8);
    return (size_t)(o->n_kt / 2 + ch / 16) * NT * 32;
}

}  // namespace

#ifndef TCQ_EMU   /* tests/cuda/emu/imma.cpp runs the kernels above on the host */
/* 1 if the integer kernels take this call on the exact (int8 = 0) or int8 path. */
int tcq_cuda_im_supports(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M, int int8)
{
    if (ctx->kernel_pin == 1 || M > (int8 && w->axis == 1 ? kMaxM8 : kMaxM)) return 0;
    /* 32-bit byte offsets inside the tensor and item indices below 2^24 (div_small) */
    if (w->rows * tcq_trellis_row_words(w) >= ((int64_t)1 << 29) || w->rows * w->cols / 4096 >= ((int64_t)1 << 23)) return 0;
    if (w->axis == 1) return !w->interleaved && (w->p.T == 128 || w->p.T == 256);
    return 1;
}

/* Items' length along the reduced dimension (the s32 sums stay exact up to 1024 inputs:
 * 1024 * 4 * 255 * 128 < 2^31); the int8 path's activation block.  Axis 1: 512 or 768 (whole
 * T-blocks; below).  Axis 0: the item queue's tail decides.  A warp item is 128 outputs x ch
 * inputs; with n items on W resident warps (the kernel's occupancy, 2 blocks of 8 warps an SM)
 * the call lasts about ceil(n / W) items of ch inputs, so ch is the multiple of 32 in [128, 1024]
 * with the least ceil(n / W) ch (the larger on a tie: fewer partials, S x M x out floats).
 * 5120x17408 on an H200 (W = 2112): 352, 50 chunks x 40 tiles = 2000 items, one round; 128 made
 * 5440 items (2.6 rounds, the last a partial one) and 256 2720 (1.3).  It depends on the SM
 * count, so the int8 block of a shape is the device's (tcq_cuda_fast_block says which).
 * tcq_cuda_opts.im_chunk pins it (axis 1: only a multiple of T). */
int tcq_cuda_im_chunk(const tcq_cuda_ctx *ctx, const tcq_trellis *w, int64_t M)
{
    const int64_t in = tcq_trellis_in(w);
    const int64_t ntiles = (tcq_trellis_out(w) + (w->axis ? kRedRows : kScOut) - 1) / (w->axis ? kRedRows : kScOut);
    const int64_t warps = (int64_t)ctx->n_sm * 2 * (kThreads / 32);   /* both kernels: 2 blocks an SM */
    /* inputs a warp works through: ceil(items / warps) items of ch */
    auto cost = [&](int ch) { return (ntiles * ((in + ch - 1) / ch) + warps - 1) / warps * ch; };
    if (w->axis) {
        if (ctx->chunk_pin && ctx->chunk_pin % w->p.T == 0) return ctx->chunk_pin;
        /* 512 or 768 by the same round count; on a tie 768 from M = 2, where its fewer partials
         * and x-prep blocks pay (17408x5120: reduce M=8 45.9 -> 44.6 us, fused SwiGLU M=8 80.1 ->
         * 77.4, fast M=16 43.6 -> 41.8 at k = 2) and 512 at M = 1 (31.5 vs 32.0) */
        const int alt = 3 * kRedChunk / 2;
        if (alt % w->p.T == 0 && (cost(alt) < cost(kRedChunk) || (cost(alt) == cost(kRedChunk) && M > 1))) return alt;
        return kRedChunk;
    }
    if (ctx->chunk_pin) return ctx->chunk_pin;
    int best = kScChunk;
    int64_t best_cost = INT64_MAX;
    for (int ch = kScChunk; ch <= 1024; ch += 32)
        if (cost(ch) <= best_cost) best = ch, best_cost = cost(ch);
    return best;
}

/* up != NULL: fused SwiGLU, w the gate (both axis 1, same geometry: checked by the caller). */
tcq_status tcq_cuda_linear_im(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x, float *y,
                              int64_t M, int limbs)
{
    return tcq_cuda_linear_im_io(ctx, w, up, x, y, M, limbs, NULL);
}

tcq_status tcq_cuda_linear_im_io(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                 float *y, int64_t M, int limbs, const tcq_cuda_io *io)
{
    const int64_t in = tcq_trellis_in(w), out = tcq_trellis_out(w);
    const int NT = (int)((limbs * M + 7) / 8);
    if (NT > 2)   /* the dispatcher sends M = 6..8 as two limbs */
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda linear (int): %d limbs x M=%lld need more than two n-tiles", limbs,
                        (long long)M);
    const Geo g = tcq_tc::geo_of(w);
    IOut o;
    const int ch = tcq_cuda_im_chunk(ctx, w, M);
    const size_t n_xf = im_plan(w, M, limbs, ch, up ? 2 : 1, &o);
    o.y = y;
    const int64_t n_ch = o.S;
    const size_t xf_b = tcq_align256(n_xf * 16);
    const size_t xs_b = tcq_align256((size_t)n_ch * M * 8), xe_b = tcq_align256((size_t)n_ch * M * 4);
    const bool parts = o.nmat == 2 || o.S > 1;
    const size_t part_b = parts ? (size_t)o.nmat * o.S * M * out * 4 : 0;
    if (io && io->accumulate && !parts)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda linear (int): accumulate needs chunk partials (one chunk here)");
    /* a pending source's partials sit in the scratch (the previous call's): this call's buffers
     * go after them, and they move with the scratch if it grows (tcq_cuda_scratch keeps its bytes) */
    XSrc src = {};
    size_t keep = 0, src_off = 0;
    if (io) {
        src.norm = io->norm;
        src.eps = io->eps;
        if (io->src) {
            src.pend = *io->src;
            const char *s0 = (const char *)ctx->scratch, *pp = (const char *)src.pend.part;
            if (pp && s0 && pp >= s0 && pp < s0 + ctx->scratch_bytes) {
                src_off = (size_t)(pp - s0);
                keep = tcq_align256(src_off + (size_t)(src.pend.su ? 2 : 1) * src.pend.S * src.pend.n * 4);
            }
        }
    }
    char *scr;
    TCQ_TRY(tcq_cuda_scratch(ctx, keep + xf_b + xs_b + xe_b + part_b, (void **)&scr));
    if (keep) src.pend.part = (const float *)(scr + src_off);
    scr += keep;
    o.xf = (const uint4 *)scr;
    o.xs = (const double *)(scr + xf_b);
    o.xe = (const float *)(scr + xf_b + xs_b);
    o.part = parts ? (float *)(scr + xf_b + xs_b + xe_b) : NULL;
    int *cnt;
    TCQ_TRY(tcq_cuda_counters(ctx, 2, &cnt));
    o.work = cnt;
    o.pdl = 1;   /* the prep's launch latency hidden: 32.2 against 33.7 us at M = 1 (session 7) */
    /* the scatter's L2 prefetch: 8 k-steps ahead at k = 2 and 4, 8-12 % faster at M = 1..8 on
     * 5120x17408 (16: a little less; 4: nothing); at k = 1 and 3 (unaligned words, whose scatter
     * was already as fast) it measured 0-4 % slower, so off there (docs/PERFORMANCE.md, session 13) */
    o.pf = w->p.k == 2 || w->p.k == 4 ? 8 : 0;
    k_im_xprep<<<dim3((unsigned)n_ch, (unsigned)M), ch, 0, ctx->stream>>>(x, src, (int)M, in, w->axis ? NULL : w->scales, w->axis, w->p.T, NT, limbs,
                                                  (uint4 *)o.xf, (double *)o.xs, (float *)o.xe);
    CU_LAUNCHED("cuda linear (int): activation prep");
    Geo gu = g;
    if (up) {
        gu.codes = up->codes;
        gu.scales = up->scales;
    }
    tcq_status st;
    switch (w->p.k) {
    case 1: st = launch_im1(ctx, w->axis, NT, g, gu, o); break;
    case 2: st = launch_im2(ctx, w->axis, NT, g, gu, o); break;
    case 3: st = launch_im3(ctx, w->axis, NT, g, gu, o); break;
    default: st = launch_im4(ctx, w->axis, NT, g, gu, o); break;
    }
    const int64_t n = M * out;
    const uint16_t *sg = w->axis ? w->scales : NULL, *su = up ? up->scales : NULL;
    if (st == TCQ_OK && io && io->defer)
        *io->defer = parts ? tcq_cuda_pend{o.part, NULL, o.S, n, out, sg, su} : tcq_cuda_pend{NULL, y, 1, n, out, NULL, NULL};
    if (st != TCQ_OK || !parts || (io && io->defer)) return st;
    /* launched as a dependent: its blocks are in place when the main kernel ends */
    const int acc = io && io->accumulate;
    if (o.S <= kFinRowS && M >= 2)
        return pdl_launch(ctx, 1, k_im_finish_row, dim3((unsigned)((n + 255) / 256)), dim3(256), 0,
                          "cuda linear (int): chunk sums", (const float *)o.part, o.S, (int)M, out, sg, su, y, acc);
    return pdl_launch(ctx, 1, k_im_finish, dim3((unsigned)((n + 31) / 32)), dim3(32 * kFinWarps), 0,
                      "cuda linear (int): chunk sums", (const float *)o.part, o.S, (int)M, out, sg, su, y, acc);
}
#endif
