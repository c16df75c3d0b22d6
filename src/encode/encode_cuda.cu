/* GPU Viterbi encoder: one thread block per trellis block, every block of a matrix at once.
 * Same two-pass tail-biting and the same arithmetic as tcq_encode_block_ref (tcq_kernels.h, Encoder):
 * d = x - v(s), e = d (or w d), D = fma(e, d, M) with M the predecessor minimum (0 at t=0),
 * strict < over j ascending (smallest j wins a tie), final state the smallest s among equal
 * minima.  Every multiply and add is written
 * with an explicit rounding intrinsic (and the file builds with --fmad=false), so the codes are
 * bit-identical to the reference.
 *
 * Layout: thread owns GPT predecessor groups g = tid + i*threads; for each it takes the min over
 * the 2^k predecessors (g + j G) of D and writes the 2^k successors (g 2^k + b) of Dn with one
 * vector store.  Backpointers (k bits per group and step) are packed by warp ballots into shared
 * memory: T * 2^(L-k) * k bits, 64 KB at L=12, which is why L <= 12 here. */
#include "../kernels/cuda/cuda_internal.h"
#include "../kernels/cuda/tc_common.cuh"
#include "../kernels/cuda/timers.h"
#include "encode_cuda.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include <vector>

using namespace tcq_tc;

namespace {

constexpr int kMaxL = 12;

__device__ __forceinline__ float code_value_e(uint32_t s)
{
    const float d = kD, r = 1.0f / kD;
    const float y = code_y(s);
    const float q = __fmul_rn(y, r);
    const float e = __fmaf_rn(-q, d, y);
    return __fmaf_rn(e, r, q);
}

struct EncArgs {
    const float *x;            /* [nblk][T]: targets, or raw row values when scales is set */
    const float *w;            /* [nblk][T] or NULL */
    uint32_t *words;           /* [nblk][wpb] */
    const uint16_t *scales;    /* per row, or NULL: x are the targets as they are */
    double *blk_err;           /* [nblk] or NULL: sum_t (x_t - f32(v(s_t) * scale))^2 per block, as
                                  tcq_encode_rows sums it (rows only) */
    unsigned long long *bad;   /* [2] or NULL: smallest index (base + i) of a non-finite target /
                                  of a weight that is not finite and >= 0 (atomicMin) */
    int64_t blk0, bpr, base;   /* first block of the launch, blocks per row, element index of x[0] */
    int L, T;
};

/* Shared-memory layout of D: state s lives at phys(s) = s ^ (((s >> 5) & m) << 2).  A thread
 * writes the 2^k successors of its group as 16-byte stores at a stride of 2^k words; at 2^k >= 8
 * that stride makes a quarter warp hit the same banks 2- (k=3) or 4-way (k=4).  The XOR moves
 * each thread's chunks so a quarter warp covers all 32 banks, and leaves the reads D[g + j G]
 * conflict-free (for G >= 8 * 2^k, the XOR depends on g only: one base address per thread).
 * m = 0 (no swizzle) where that does not hold.  Internal only: the states, costs and ties are
 * unchanged. */
template <int K>
__device__ __forceinline__ int swz_mask(int G)
{
    constexpr int J = 1 << K;
    return (J >= 8 && G >= 8 * J) ? J / 4 - 1 : 0;
}

__device__ __forceinline__ uint32_t phys(uint32_t s, int m) { return s ^ (((s >> 5) & (uint32_t)m) << 2); }

template <int J>
__device__ __forceinline__ void store_succ(float *dst, const float (&v)[J], int r)
{
    if (J == 2) *(float2 *)dst = make_float2(v[0], v[1]);
    else if (J >= 4) {
#pragma unroll
        for (int c = 0; c < J / 4; c++)
            *(float4 *)(dst + 4 * (c ^ r)) = make_float4(v[4 * c], v[4 * c + 1], v[4 * c + 2], v[4 * c + 3]);
    } else {
#pragma unroll
        for (int b = 0; b < J; b++) dst[b] = v[b];
    }
}

/* One Viterbi pass; returns (in shared st) the states from T-1 down to stop.  LC: L as a
 * compile-time constant (0: a.L at run time).  With L fixed, G, the thread count and every
 * shared-memory offset j G are immediates, which takes a good part of the instructions of a step
 * away (the kernel is issue-bound: docs/PERFORMANCE.md); L=12 is the format's default. */
template <int K, int GPT, bool W, int LC>
__device__ void pass(const EncArgs &a, const float *xs, const float *ws, float *D, float *Dn, uint32_t *bp, uint32_t *st,
                     int start_ov, int end_ov, int stop, const float (&vv)[GPT][1 << K], float *redv, uint32_t *reds)
{
    constexpr int J = 1 << K;
    const int L = LC ? LC : a.L, T = a.T;
    const int G = 1 << (L - K);
    const int threads = LC ? G / GPT : (int)blockDim.x, tid = threadIdx.x, lane = tid & 31;
    const int wps = G >= 32 ? G / 32 : 1;           /* ballot words per bit plane per step */
    const bool active = LC ? true : (tid < G / GPT || G / GPT >= threads);
    const int m = swz_mask<K>(G);
    int rbase[GPT], wbase[GPT], wrot[GPT], boff[GPT];
#pragma unroll
    for (int i = 0; i < GPT; i++) {
        const int g = tid + i * threads;
        rbase[i] = (int)phys((uint32_t)g, m);       /* phys(g + j G) = rbase + j G (see phys) */
        wbase[i] = g * J;
        wrot[i] = ((g * J) >> 5) & m;
        boff[i] = (g >> 5) * K;
    }
    /* t = 0 */
    if (active)
#pragma unroll
        for (int i = 0; i < GPT; i++) {
            const int g = tid + i * threads;
            float v[J];
#pragma unroll
            for (int b = 0; b < J; b++) {
                const uint32_t s = (uint32_t)g * J + b;
                const float d = __fsub_rn(xs[0], vv[i][b]);
                const float e = W ? __fmul_rn(ws[0], d) : d;
                v[b] = (start_ov < 0 || (int)(s >> K) == start_ov) ? __fmaf_rn(e, d, 0.0f) : INFINITY;
            }
            store_succ<J>(D + wbase[i], v, wrot[i]);
        }
    __syncthreads();
    for (int t = 1; t < T; t++) {
        const float xt = xs[t];
        const float wt = W ? ws[t] : 1.0f;
        uint32_t *bpt = bp + t * wps * K;   /* < 2^16 words: int */
#pragma unroll
        for (int i = 0; i < GPT; i++) {
            /* min over the 2^k predecessors as a tree: a right subtree (higher j) wins only when
             * strictly smaller, so this is the first j of the minimum, as the sequential scan
             * of the contract (costs are >= 0, never NaN). */
            float mv[J];
            int mj[J];
            if (active) {
#pragma unroll
                for (int j = 0; j < J; j++) {
                    mv[j] = D[rbase[i] + j * G];
                    mj[j] = j;
                }
#pragma unroll
                for (int h = 1; h < J; h *= 2)
#pragma unroll
                    for (int j = 0; j < J; j += 2 * h)
                        if (mv[j + h] < mv[j]) {
                            mv[j] = mv[j + h];
                            mj[j] = mj[j + h];
                        }
            } else {
                mv[0] = INFINITY;
                mj[0] = 0;
            }
            const float best = mv[0];
            const int bj = mj[0];
#pragma unroll
            for (int bit = 0; bit < K; bit++) {
                const uint32_t msk = __ballot_sync(0xffffffffu, (bj >> bit) & 1);
                if (lane == 0 && active) bpt[boff[i] + bit] = msk;
            }
            if (active) {
                float v[J];
#pragma unroll
                for (int b = 0; b < J; b++) {
                    const float d = __fsub_rn(xt, vv[i][b]);
                    const float e = W ? __fmul_rn(wt, d) : d;
                    v[b] = __fmaf_rn(e, d, best);
                }
                store_succ<J>(Dn + wbase[i], v, wrot[i]);
            }
        }
        __syncthreads();
        float *tmp = D;
        D = Dn;
        Dn = tmp;
    }
    /* final state: smallest s among equal minima over the allowed set */
    float bv = INFINITY;
    uint32_t bs = 0xffffffffu;
    if (active)
#pragma unroll
        for (int i = 0; i < GPT; i++)
#pragma unroll
            for (int b = 0; b < J; b++) {
                const uint32_t s = (uint32_t)(tid + i * threads) * J + b;
                if (end_ov >= 0 && (int)(s & (G - 1)) != end_ov) continue;
                const float v = D[phys(s, m)];
                if (bs == 0xffffffffu || v < bv) {
                    bv = v;
                    bs = s;
                }
            }
    for (int d = 16; d; d >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, d);
        const uint32_t os = __shfl_xor_sync(0xffffffffu, bs, d);
        if (os != 0xffffffffu && (bs == 0xffffffffu || ov < bv || (ov == bv && os < bs))) {
            bv = ov;
            bs = os;
        }
    }
    if (lane == 0) {
        redv[tid >> 5] = bv;
        reds[tid >> 5] = bs;
    }
    __syncthreads();
    if (tid == 0) {
        for (int k = 1; k < (threads + 31) / 32; k++) {
            const float ov = redv[k];
            const uint32_t os = reds[k];
            if (os != 0xffffffffu && (bs == 0xffffffffu || ov < bv || (ov == bv && os < bs))) {
                bv = ov;
                bs = os;
            }
        }
        st[T - 1] = bs;
        for (int t = T - 1; t > stop; t--) {
            const uint32_t g = st[t] >> K;
            uint32_t j = 0;
#pragma unroll
            for (int bit = 0; bit < K; bit++) j |= ((bp[((size_t)t * wps + (g >> 5)) * K + bit] >> (g & 31)) & 1u) << bit;
            st[t - 1] = g + j * (uint32_t)G;
        }
    }
    __syncthreads();
}

/* tcq_f32_to_f16 / tcq_f16_to_f32 (src/codec/code.c), bit for bit. */
__device__ uint16_t f32_to_f16(float f)
{
    const uint32_t u = __float_as_uint(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return (uint16_t)sign;
        const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        const int shift = 126 - (int)e;
        uint32_t q = m >> (shift), rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t h = ((a >> 13) - (112u << 10));
    const uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

__device__ float f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f) u = sign | 0x7f800000u | (m << 13);
    else if (e == 0) {
        if (m == 0) u = sign;
        else {
            int sh = 0;
            while (!(m & 0x400u)) {
                m <<= 1;
                sh++;
            }
            u = sign | ((uint32_t)(113 - sh) << 23) | ((m & 0x3ffu) << 13);
        }
    } else u = sign | ((e + 112u) << 23) | (m << 13);
    return __uint_as_float(u);
}

template <int K, int GPT, bool W, int LC>
__global__ void __launch_bounds__(256) k_encode(EncArgs a)
{
    constexpr int J = 1 << K;
    extern __shared__ __align__(16) uint8_t smem[];
    const int L = LC ? LC : a.L, T = a.T, N = 1 << L, G = 1 << (L - K);
    const int wps = G >= 32 ? G / 32 : 1;
    float *D = (float *)smem, *Dn = D + N;
    float *xs = Dn + N, *xr = xs + T, *wsm = xr + T, *wr = wsm + T;
    uint32_t *st = (uint32_t *)(wr + T);
    float *redv = (float *)(st + T);
    uint32_t *reds = (uint32_t *)(redv + 32);
    uint32_t *bp = reds + 32;
    double *ev = (double *)(bp + (size_t)T * wps * K);   /* 8-byte aligned: every count above is even */
    const int64_t blk = a.blk0 + blockIdx.x;
    const int half = T / 2;
    const float sc = a.scales ? f16_to_f32(a.scales[blk / a.bpr]) : 1.0f;
    for (int t = threadIdx.x; t < T; t += blockDim.x) {
        const float raw = a.x[blk * T + t];
        /* the row's division, as tcq_encode_rows does it (x / f32(scale), correctly rounded) */
        const float v = a.scales ? __fdiv_rn(raw, sc) : raw;
        if (a.bad && !isfinite(v)) atomicMin(&a.bad[0], (unsigned long long)(a.base + blk * T + t));
        xs[t] = v;
        xr[(t + T - half) % T] = v;   /* xr[t'] = x[(t' + half) % T] */
        if (W) {
            const float wv = a.w[blk * T + t];
            if (a.bad && !(isfinite(wv) && wv >= 0)) atomicMin(&a.bad[1], (unsigned long long)(a.base + blk * T + t));
            wsm[t] = wv;
            wr[(t + T - half) % T] = wv;
        }
    }
    float vv[GPT][J];
#pragma unroll
    for (int i = 0; i < GPT; i++)
#pragma unroll
        for (int b = 0; b < J; b++) {
            const uint32_t s = (uint32_t)(threadIdx.x + i * blockDim.x) * J + b;
            vv[i][b] = code_value_e(s & (uint32_t)(N - 1));
        }
    __syncthreads();
    pass<K, GPT, W, LC>(a, xr, wr, D, Dn, bp, st, -1, -1, half, vv, redv, reds);
    const int overlap = (int)(st[half] >> K);
    __syncthreads();
    pass<K, GPT, W, LC>(a, xs, wsm, D, Dn, bp, st, overlap, overlap, 0, vv, redv, reds);
    const int wpb = T * K / 32;
    for (int wi = threadIdx.x; wi < wpb; wi += blockDim.x) {
        uint32_t word = 0;
        for (int i = 0; i < 32; i++) {
            const int p = 32 * wi + i, t = T - 1 - p / K, bit = p % K;
            word |= ((st[t] >> bit) & 1u) << i;
        }
        a.words[blk * wpb + wi] = word;
    }
    if (a.blk_err) {
        /* rows_block's error: d = (double)row_t - (double)(v(s_t) * scale) in f32, summed in
         * double over t in order (one thread: the order is the contract) */
        for (int t = threadIdx.x; t < T; t += blockDim.x) {
            const double d = __dsub_rn((double)a.x[blk * T + t], (double)__fmul_rn(code_value_e(st[t]), sc));
            ev[t] = __dmul_rn(d, d);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double e = 0;
            for (int t = 0; t < T; t++) e = __dadd_rn(e, ev[t]);
            a.blk_err[blk] = e;
        }
    }
}

/* tcq_scale_for_row for n rows of C: s2 summed in double over the row in order (the order is the
 * contract, so one thread per row), tiles of 32 rows x 64 columns staged in shared memory so the
 * loads stay coalesced. */
__global__ void __launch_bounds__(256) k_row_scales(const float *x, int64_t n, int64_t C, double rms, uint16_t *out)
{
    __shared__ float tile[32][65];
    const int64_t r0 = (int64_t)blockIdx.x * 32;
    const int tid = threadIdx.x;
    double s2 = 0;
    for (int64_t c0 = 0; c0 < C; c0 += 64) {
        for (int i = tid; i < 32 * 64; i += blockDim.x) {
            const int rr = i / 64, cc = i % 64;
            if (r0 + rr < n && c0 + cc < C) tile[rr][cc] = x[(r0 + rr) * C + c0 + cc];
        }
        __syncthreads();
        if (tid < 32) {
            const int m = (int)TCQ_MIN((int64_t)64, C - c0);
            for (int c = 0; c < m; c++) {
                const double v = (double)tile[tid][c];
                s2 = __dadd_rn(s2, __dmul_rn(v, v));
            }
        }
        __syncthreads();
    }
    if (tid < 32 && r0 + tid < n) {
        uint16_t h;
        if (s2 == 0) h = 0x3c00u;   /* f16 1.0 */
        else {
            h = f32_to_f16(__double2float_rn(__ddiv_rn(__dsqrt_rn(__ddiv_rn(s2, (double)C)), rms)));
            if ((h & 0x7fffu) == 0) h = 1;
        }
        out[r0 + tid] = h;
    }
}

/* tcq_kernels.h: inputs finite, weights finite and >= 0 (else the costs are not a squared error). */
tcq_status check_inputs(const float *x, const float *w, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return tcq_fail(TCQ_ERR_INVALID_ARG, "%s: x[%lld] is not finite", what, (long long)i);
        if (w && !(isfinite(w[i]) && w[i] >= 0))
            return tcq_fail(TCQ_ERR_INVALID_ARG, "%s: weight w[%lld] = %g is not finite and >= 0", what, (long long)i,
                            (double)w[i]);
    }
    return TCQ_OK;
}

size_t enc_smem(int L, int K, int T)
{
    const int N = 1 << L, G = 1 << (L - K), wps = G >= 32 ? G / 32 : 1;
    return (size_t)2 * N * 4 + (size_t)5 * T * 4 + 64 * 4 + (size_t)T * wps * K * 4 + (size_t)T * 8;
}

template <int K, int GPT, bool W, int LC>
tcq_status launch_enc(cudaStream_t stream, const EncArgs &a, int64_t nblk)
{
    const size_t smem = enc_smem(a.L, K, a.T);
    const int G = 1 << (a.L - K);
    int threads = G / GPT;
    if (threads < 32) threads = 32;
    if (LC && (LC != a.L || threads != G / GPT || threads > 256))
        return tcq_fail(TCQ_ERR_INTERNAL, "cuda encode: L=%d kernel for L=%d", LC, a.L);
    CU_TRY(cudaFuncSetAttribute(k_encode<K, GPT, W, LC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
           "cuda encode");
    for (int64_t b0 = 0; b0 < nblk; b0 += 1 << 30) {
        EncArgs s = a;
        s.blk0 = a.blk0 + b0;
        const int n = (int)TCQ_MIN(nblk - b0, (int64_t)1 << 30);
        k_encode<K, GPT, W, LC><<<n, threads, smem, stream>>>(s);
        CU_LAUNCHED("cuda encode kernel");
    }
    return TCQ_OK;
}

template <int K, bool W>
tcq_status launch_enc_kw(cudaStream_t stream, const EncArgs &a, int64_t nblk)
{
    const int G = 1 << (a.L - K);
    /* G <= 2^(12-K): GPT up to 2^(12-K)/256 */
    constexpr int kMax = (1 << (kMaxL - K)) / 256 > 0 ? (1 << (kMaxL - K)) / 256 : 1;
    const int gpt = G >= 2048 ? 8 : G >= 1024 ? 4 : G >= 512 ? 2 : 1;
    /* L=12: G = 2^(12-K) = 256 GPT, GPT = kMax */
    if (a.L == kMaxL) return launch_enc<K, kMax, W, kMaxL>(stream, a, nblk);
    if (gpt >= 8) return launch_enc<K, (kMax < 8 ? kMax : 8), W, 0>(stream, a, nblk);
    if (gpt >= 4) return launch_enc<K, (kMax < 4 ? kMax : 4), W, 0>(stream, a, nblk);
    if (gpt >= 2) return launch_enc<K, (kMax < 2 ? kMax : 2), W, 0>(stream, a, nblk);
    return launch_enc<K, 1, W, 0>(stream, a, nblk);
}

tcq_status launch_encode(cudaStream_t stream, int k, const EncArgs &a, int64_t nblk)
{
    const bool w = a.w != NULL;
    switch (k) {
    case 1: return w ? launch_enc_kw<1, true>(stream, a, nblk) : launch_enc_kw<1, false>(stream, a, nblk);
    case 2: return w ? launch_enc_kw<2, true>(stream, a, nblk) : launch_enc_kw<2, false>(stream, a, nblk);
    case 3: return w ? launch_enc_kw<3, true>(stream, a, nblk) : launch_enc_kw<3, false>(stream, a, nblk);
    default: return w ? launch_enc_kw<4, true>(stream, a, nblk) : launch_enc_kw<4, false>(stream, a, nblk);
    }
}

tcq_status check_params(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts, const char *what)
{
    if (opts && opts->search != TCQ_SEARCH_TWO_PASS)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: search '%s' not available (the GPU encoder runs the default two-pass search)",
                        what, tcq_search_name(opts->search));
    if (p.L > kMaxL) return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: L=%d (the GPU encoder handles L <= %d)", what, p.L, kMaxL);
    if ((int64_t)enc_smem(p.L, p.k, p.T) > ctx->smem_optin)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: L=%d k=%d T=%d needs too much shared memory", what, p.L, p.k, p.T);
    return TCQ_OK;
}

/* Streams and events of one tcq_cuda_encode_rows call, released on every path. */
struct RowsCall {
    cudaStream_t copy = NULL, side = NULL, main = NULL;
    cudaEvent_t start = NULL, h2d[2] = {NULL, NULL}, comp[2] = {NULL, NULL}, t0 = NULL, t1 = NULL;
    ~RowsCall()
    {
        if (copy) cudaStreamSynchronize(copy);
        if (side) cudaStreamSynchronize(side);
        if (main) cudaStreamSynchronize(main);
        if (copy) cudaStreamDestroy(copy);
        if (side) cudaStreamDestroy(side);
        for (cudaEvent_t e : {start, h2d[0], h2d[1], comp[0], comp[1], t0, t1})
            if (e) cudaEventDestroy(e);
    }
};

}  // namespace

/* Pipeline: rows in chunks of about 2 M weights (the first a quarter of that).  Chunk i is copied by the host into pinned
 * staging slot i % 2, sent on a copy stream, and coded on compute stream i % 2 (the context's
 * stream and a second one): row-scales kernel, then the Viterbi kernel, which divides by the
 * scale, checks the inputs and sums each block's error.  The host fills one slot while the GPU
 * codes the other; two compute streams let chunk i+1's blocks start on SMs that chunk i's last
 * wave leaves idle.  Codes, scales and block errors stay on the device until the end (1/8 to 1/4
 * of the input). */
tcq_status tcq_cuda_encode_rows(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts, const float *src,
                                const float *w, int64_t R, int64_t C, uint32_t *codes, uint16_t *scales, double *sq_err)
{
    if (!ctx) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode: ctx is NULL");
    TCQ_TRY(tcq_block_check(p));
    if (!src || !codes || !scales) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode: NULL buffer");
    if (R <= 0 || C <= 0 || C % p.T != 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode: shape [%lld, %lld] needs C %% T(=%d) == 0", (long long)R,
                        (long long)C, p.T);
    TCQ_TRY(check_params(ctx, p, opts, "cuda encode"));
    const int wpb = tcq_block_words(p);
    const int64_t bpr = C / p.T, nblk = R * bpr;
    const int64_t rows_per = TCQ_MAX((int64_t)1, ((int64_t)2 << 20) / C);
    const int64_t nb = TCQ_MIN(R, rows_per);
    /* the first chunk is a quarter: the GPU starts after ~0.5 M weights are staged, not 2 M */
    const int64_t first = TCQ_MAX((int64_t)1, nb / 4);
    const int nbuf = w ? 2 : 1;   /* arrays per staging slot: x (and w) */
    const size_t slot = tcq_align256((size_t)(nb * C) * 4);
    /* device: [2 slots][x, w], codes, scales, block errors, 2 bad indices */
    const size_t o_codes = 2 * nbuf * slot, o_scales = o_codes + tcq_align256((size_t)(nblk * wpb) * 4);
    const size_t o_err = o_scales + tcq_align256((size_t)R * 2), o_bad = o_err + tcq_align256((size_t)nblk * 8);
    uint8_t *dev = NULL, *host = NULL;
    TCQ_TRY(tcq_cuda_scratch(ctx, o_bad + 16, (void **)&dev));
    TCQ_TRY(tcq_cuda_host_stage(ctx, 2 * nbuf * slot, (void **)&host));
    uint32_t *dcodes = (uint32_t *)(dev + o_codes);
    uint16_t *dscales = (uint16_t *)(dev + o_scales);
    double *derr = (double *)(dev + o_err);
    unsigned long long *dbad = (unsigned long long *)(dev + o_bad);
    RowsCall rc;
    rc.main = ctx->stream;
    CU_TRY(cudaStreamCreateWithFlags(&rc.copy, cudaStreamNonBlocking), "cuda encode: copy stream");
    CU_TRY(cudaStreamCreateWithFlags(&rc.side, cudaStreamNonBlocking), "cuda encode: second stream");
    CU_TRY(cudaEventCreateWithFlags(&rc.start, cudaEventDisableTiming), "cuda encode: events");
    for (int i = 0; i < 2; i++) {
        CU_TRY(cudaEventCreateWithFlags(&rc.h2d[i], cudaEventDisableTiming), "cuda encode: events");
        CU_TRY(cudaEventCreateWithFlags(&rc.comp[i], cudaEventDisableTiming), "cuda encode: events");
    }
    CU_TRY(cudaEventCreate(&rc.t0), "cuda encode: events");
    CU_TRY(cudaEventCreate(&rc.t1), "cuda encode: events");
    cudaStream_t cs[2] = {ctx->stream, rc.side};
    /* the scratch may still be read by work queued earlier on the context's stream */
    CU_TRY(cudaMemsetAsync(dbad, 0xff, 16, ctx->stream), "cuda encode: memset");
    CU_TRY(cudaEventRecord(rc.start, ctx->stream), "cuda encode: event");
    CU_TRY(cudaStreamWaitEvent(rc.copy, rc.start, 0), "cuda encode: wait");
    CU_TRY(cudaStreamWaitEvent(rc.side, rc.start, 0), "cuda encode: wait");
    const double rms = tcq_code_rms(p.L);
    for (int64_t ci = 0, r0 = 0; r0 < R; r0 += ci == 0 ? first : nb, ci++) {
        const int b = (int)(ci & 1);
        const int64_t n = TCQ_MIN(ci == 0 ? first : nb, R - r0);
        float *hx = (float *)(host + (size_t)(b * nbuf) * slot), *hw = w ? (float *)(host + (size_t)(b * nbuf + 1) * slot) : NULL;
        float *dx = (float *)(dev + (size_t)(b * nbuf) * slot), *dw = w ? (float *)(dev + (size_t)(b * nbuf + 1) * slot) : NULL;
        if (ci >= 2) CU_TRY(cudaEventSynchronize(rc.h2d[b]), "cuda encode: staging");   /* slot's last upload done */
        memcpy(hx, src + r0 * C, (size_t)(n * C) * 4);
        if (w) memcpy(hw, w + r0 * C, (size_t)(n * C) * 4);
        if (ci >= 2) CU_TRY(cudaStreamWaitEvent(rc.copy, rc.comp[b], 0), "cuda encode: wait");   /* its kernels done */
        CU_TRY(cudaMemcpyAsync(dx, hx, (size_t)(n * C) * 4, cudaMemcpyHostToDevice, rc.copy), "cuda encode: upload");
        if (w) CU_TRY(cudaMemcpyAsync(dw, hw, (size_t)(n * C) * 4, cudaMemcpyHostToDevice, rc.copy), "cuda encode: upload");
        CU_TRY(cudaEventRecord(rc.h2d[b], rc.copy), "cuda encode: event");
        CU_TRY(cudaStreamWaitEvent(cs[b], rc.h2d[b], 0), "cuda encode: wait");
        if (ci == 0) CU_TRY(cudaEventRecord(rc.t0, cs[b]), "cuda encode: event");
        k_row_scales<<<(unsigned)((n + 31) / 32), 256, 0, cs[b]>>>(dx, n, C, rms, dscales + r0);
        CU_LAUNCHED("cuda encode: row scales kernel");
        EncArgs a = {dx, dw, dcodes + r0 * bpr * wpb, dscales + r0, sq_err ? derr + r0 * bpr : NULL, dbad,
                     0, bpr, r0 * C, p.L, p.T};
        TCQ_TRY(launch_encode(cs[b], p.k, a, n * bpr));
        CU_TRY(cudaEventRecord(rc.comp[b], cs[b]), "cuda encode: event");
    }
    /* the context's stream waits for both compute streams; t1 = the last kernel's end */
    CU_TRY(cudaStreamWaitEvent(ctx->stream, rc.comp[1], 0), "cuda encode: wait");   /* unrecorded: no-op */
    CU_TRY(cudaEventRecord(rc.t1, ctx->stream), "cuda encode: event");
    unsigned long long bad[2];
    TCQ_TRY(tcq_cuda_copy_to_host(ctx, bad, dbad, sizeof bad));   /* syncs: reports a failed kernel */
    /* device time from the first chunk's kernels to the last one's end: the uploads behind them,
     * the setup before and the downloads after are not in it */
    float ms = 0;
    ctx->encode_kernel_ms = cudaEventElapsedTime(&ms, rc.t0, rc.t1) == cudaSuccess ? ms : 0;
    if (bad[0] != ~0ull) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode_rows: x[%lld] (row %lld) divided by its scale is not finite",
                                         (long long)bad[0], (long long)(bad[0] / (unsigned long long)C));
    if (bad[1] != ~0ull)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode_rows: weight w[%lld] = %g is not finite and >= 0", (long long)bad[1],
                        (double)w[bad[1]]);
    TCQ_TRY(tcq_cuda_copy_to_host(ctx, codes, dcodes, (size_t)(nblk * wpb) * 4));
    TCQ_TRY(tcq_cuda_copy_to_host(ctx, scales, dscales, (size_t)R * 2));
    if (sq_err) {
        /* tcq_encode_rows' sum: block errors added in block order */
        std::vector<double> be((size_t)nblk);
        TCQ_TRY(tcq_cuda_copy_to_host(ctx, be.data(), derr, (size_t)nblk * 8));
        double e = 0;
        for (int64_t i = 0; i < nblk; i++) e += be[(size_t)i];
        *sq_err = e;
    }
    return TCQ_OK;
}

namespace {

/* dst[b * T + t] = w[t] for b < n: a shared weight vector spread on the device */
__global__ void k_spread(float *dst, const float *w, int T, int64_t total)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) dst[i] = w[i % T];
}

/* tcq_cuda_encode_blocks' body; shared: w holds T weights for every block */
tcq_status encode_blocks(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts, const float *x,
                         const float *w, int shared, int64_t n, uint32_t *words)
{
    if (!ctx) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode_blocks: ctx is NULL");
    TCQ_TRY(tcq_block_check(p));
    if (!x || !words || (shared && !w)) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode_blocks: NULL buffer");
    if (n <= 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode_blocks: %lld blocks", (long long)n);
    TCQ_TRY(check_params(ctx, p, opts, "cuda encode_blocks"));
    /* shared: the targets are checked on the device (the kernel's smallest bad index), not by a
     * host scan of n x T floats per call (~3 ms of a 14B gate block's ~25) */
    if (shared) TCQ_TRY(check_inputs(w, w, p.T, "cuda encode_blocks (shared weights)"));
    else TCQ_TRY(check_inputs(x, w, n * p.T, "cuda encode_blocks"));
    const int wpb = tcq_block_words(p);
    const int64_t per = TCQ_MAX((int64_t)1, ((int64_t)32 << 20) / p.T);   /* blocks per batch */
    const int64_t nb = TCQ_MIN(n, per);
    /* the context's scratch, not a cudaMalloc per call: BlockLDLQ's axis 0 codes one row (a few
     * blocks) per call, tens of thousands of calls per matrix */
    const size_t xb = tcq_align256((size_t)(nb * p.T) * 4), wb = tcq_align256((size_t)p.T * 4);
    uint8_t *dev = NULL;
    const size_t ob = 2 * xb + wb + tcq_align256((size_t)(nb * wpb) * 4);
    tcq_status s = tcq_cuda_scratch(ctx, ob + 16, (void **)&dev);
    float *dx = (float *)dev, *dw = (float *)(dev + xb), *dw1 = (float *)(dev + 2 * xb);
    uint32_t *dwords = (uint32_t *)(dev + 2 * xb + wb);
    unsigned long long *dbad = shared ? (unsigned long long *)(dev + ob) : NULL;
    if (s == TCQ_OK && shared) s = tcq_cuda_copy_to_device(ctx, dw1, w, (size_t)p.T * 4);
    if (s == TCQ_OK && shared && cudaMemsetAsync(dbad, 0xff, 16, ctx->stream) != cudaSuccess)
        s = tcq_fail(TCQ_ERR_INTERNAL, "cuda encode_blocks: memset");
    for (int64_t b0 = 0, spread = 0; b0 < n && s == TCQ_OK; b0 += nb) {
        const int64_t m = TCQ_MIN(nb, n - b0);
        s = tcq_cuda_copy_to_device(ctx, dx, x + b0 * p.T, (size_t)(m * p.T) * 4);
        if (s == TCQ_OK && w && !shared) s = tcq_cuda_copy_to_device(ctx, dw, w + b0 * p.T, (size_t)(m * p.T) * 4);
        if (s == TCQ_OK && shared && m > spread) {   /* dw holds the vector for `spread` blocks already */
            k_spread<<<(unsigned)((m * p.T + 255) / 256), 256, 0, ctx->stream>>>(dw, dw1, p.T, m * p.T);
            s = cudaGetLastError() == cudaSuccess ? TCQ_OK : tcq_fail(TCQ_ERR_INTERNAL, "cuda encode_blocks: spread kernel");
            spread = m;
        }
        if (s != TCQ_OK) break;
        EncArgs a = {dx, w ? dw : NULL, dwords, NULL, NULL, dbad, 0, 1, b0 * p.T, p.L, p.T};
        s = launch_encode(ctx->stream, p.k, a, m);
        if (s == TCQ_OK) s = tcq_cuda_copy_to_host(ctx, words + b0 * wpb, dwords, (size_t)(m * wpb) * 4);
    }
    unsigned long long bad[2] = {~0ull, ~0ull};
    if (s == TCQ_OK && shared) s = tcq_cuda_copy_to_host(ctx, bad, dbad, sizeof bad);
    if (s == TCQ_OK && bad[0] != ~0ull)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode_blocks: x[%lld] is not finite", (long long)bad[0]);
    return s;
}

}  // namespace

tcq_status tcq_cuda_encode_blocks_w1(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts, const float *x,
                                     const float *w, int64_t n, uint32_t *words)
{
    return encode_blocks(ctx, p, opts, x, w, 1, n, words);
}

tcq_status tcq_cuda_encode_blocks(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts, const float *x,
                                  const float *w, int64_t n, uint32_t *words, double *sq_err)
{
    const tcq_status s = encode_blocks(ctx, p, opts, x, w, 0, n, words);
    const int wpb = tcq_block_words(p);
    if (s != TCQ_OK) return s;
    if (sq_err) {
        /* as tcq_encode_blocks: sum_t w_t (x_t - v(s_t))^2 per block, blocks added in order */
        double e = 0;
        std::vector<uint32_t> st(p.T);
        for (int64_t b = 0; b < n; b++) {
            tcq_block_unpack(p, words + b * wpb, st.data());
            double eb = 0;
            for (int t = 0; t < p.T; t++) {
                const double d = (double)x[b * p.T + t] - tcq_code_value(st[t]);
                eb += (w ? w[b * p.T + t] : 1.0) * d * d;
            }
            e += eb;
        }
        *sq_err = e;
    }
    return TCQ_OK;
}

tcq_status tcq_cuda_time_encode(tcq_cuda_ctx *ctx, tcq_block_params p, int64_t R, int64_t C, double *wps,
                                double *kernel_wps)
{
    if (!ctx || !wps || R < 1 || C < 1) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda time encode: bad arguments");
    std::vector<float> src((size_t)(R * C));
    uint64_t st = 0x1234567ull;
    for (auto &v : src) {   /* Gaussian by Box-Muller on a splitmix64 stream */
        st += 0x9e3779b97f4a7c15ull;
        uint64_t z = st;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        const double u1 = ((double)(z >> 11) + 1.0) * 0x1.0p-53, u2 = (double)(z & 0xfffff) / 1048576.0;
        v = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
    std::vector<uint32_t> codes((size_t)(R * C * p.k / 32));
    std::vector<uint16_t> scales((size_t)R);
    /* warm: the same shape, so the context's device scratch and pinned staging are already grown
     * (steady state, as for the second and later matrices of a model) */
    TCQ_TRY(tcq_cuda_encode_rows(ctx, p, NULL, src.data(), NULL, R, C, codes.data(), scales.data(), NULL));
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    TCQ_TRY(tcq_cuda_encode_rows(ctx, p, NULL, src.data(), NULL, R, C, codes.data(), scales.data(), NULL));
    clock_gettime(CLOCK_MONOTONIC, &b);
    const double sec = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    *wps = (double)(R * C) / sec;
    if (kernel_wps) *kernel_wps = (double)(R * C) / (ctx->encode_kernel_ms * 1e-3);
    return TCQ_OK;
}
