/* GPU Viterbi encoder: one thread block per trellis block, every block of a matrix at once.
 * Same two-pass tail-biting and the same arithmetic as tcq_encode_block_ref (tcq.h, Encoder):
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
#include "cuda_internal.h"
#include "tc_common.cuh"

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
    const float y = (float)((int)bytesum(s) - 510);
    const float q = __fmul_rn(y, r);
    const float e = __fmaf_rn(-q, d, y);
    return __fmaf_rn(e, r, q);
}

struct EncArgs {
    const float *x;       /* [nblk][T] targets (already divided by the row scale) */
    const float *w;       /* [nblk][T] or NULL */
    uint32_t *words;      /* [nblk][wpb] */
    int L, T;
};

template <int J>
__device__ __forceinline__ void store_succ(float *dst, const float (&v)[J])
{
    if (J == 2) *(float2 *)dst = make_float2(v[0], v[1]);
    else if (J >= 4) {
#pragma unroll
        for (int b = 0; b < J; b += 4) *(float4 *)(dst + b) = make_float4(v[b], v[b + 1], v[b + 2], v[b + 3]);
    } else {
#pragma unroll
        for (int b = 0; b < J; b++) dst[b] = v[b];
    }
}

/* One Viterbi pass; returns (in shared st) the states from T-1 down to stop. */
template <int K, int GPT>
__device__ void pass(const EncArgs &a, const float *xs, const float *ws, float *D, float *Dn, uint32_t *bp, uint32_t *st,
                     int start_ov, int end_ov, int stop, const float (&vv)[GPT][1 << K], float *redv, uint32_t *reds)
{
    constexpr int J = 1 << K;
    const int L = a.L, T = a.T;
    const int G = 1 << (L - K);
    const int threads = blockDim.x, tid = threadIdx.x, lane = tid & 31;
    const int wps = G >= 32 ? G / 32 : 1;           /* ballot words per bit plane per step */
    const bool active = tid < G / GPT || G / GPT >= threads;
    /* t = 0 */
    if (active)
#pragma unroll
        for (int i = 0; i < GPT; i++) {
            const int g = tid + i * threads;
            float v[J];
#pragma unroll
            for (int b = 0; b < J; b++) {
                const uint32_t s = (uint32_t)g * J + b;
                const float d = __fsub_rn(xs[0], vv[i][b]), e = ws ? __fmul_rn(ws[0], d) : d;
                v[b] = (start_ov < 0 || (int)(s >> K) == start_ov) ? __fmaf_rn(e, d, 0.0f) : INFINITY;
            }
            store_succ<J>(D + g * J, v);
        }
    __syncthreads();
    for (int t = 1; t < T; t++) {
        const float xt = xs[t], wt = ws ? ws[t] : 1.0f;
#pragma unroll
        for (int i = 0; i < GPT; i++) {
            const int g = tid + i * threads;
            float best = INFINITY;
            int bj = 0;
            if (active) {
                best = D[g];
#pragma unroll
                for (int j = 1; j < J; j++) {
                    const float v = D[g + j * G];
                    if (v < best) {
                        best = v;
                        bj = j;
                    }
                }
            }
#pragma unroll
            for (int bit = 0; bit < K; bit++) {
                const uint32_t m = __ballot_sync(0xffffffffu, (bj >> bit) & 1);
                if (lane == 0 && active) bp[((size_t)t * wps + (g >> 5)) * K + bit] = m;
            }
            if (active) {
                float v[J];
#pragma unroll
                for (int b = 0; b < J; b++) {
                    const float d = __fsub_rn(xt, vv[i][b]), e = ws ? __fmul_rn(wt, d) : d;
                    v[b] = __fmaf_rn(e, d, best);
                }
                store_succ<J>(Dn + g * J, v);
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
                const float v = D[s];
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

template <int K, int GPT>
__global__ void __launch_bounds__(256) k_encode(EncArgs a)
{
    constexpr int J = 1 << K;
    extern __shared__ __align__(16) uint8_t smem[];
    const int L = a.L, T = a.T, N = 1 << L, G = 1 << (L - K);
    const int wps = G >= 32 ? G / 32 : 1;
    float *D = (float *)smem, *Dn = D + N;
    float *xs = Dn + N, *xr = xs + T, *wsm = xr + T, *wr = wsm + T;
    uint32_t *st = (uint32_t *)(wr + T);
    float *redv = (float *)(st + T);
    uint32_t *reds = (uint32_t *)(redv + 32);
    uint32_t *bp = reds + 32;
    (void)wps;
    const int64_t blk = blockIdx.x;
    const int half = T / 2;
    for (int t = threadIdx.x; t < T; t += blockDim.x) {
        xs[t] = a.x[blk * T + t];
        xr[t] = a.x[blk * T + (t + half) % T];
        if (a.w) {
            wsm[t] = a.w[blk * T + t];
            wr[t] = a.w[blk * T + (t + half) % T];
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
    pass<K, GPT>(a, xr, a.w ? wr : NULL, D, Dn, bp, st, -1, -1, half, vv, redv, reds);
    const int overlap = (int)(st[half] >> K);
    __syncthreads();
    pass<K, GPT>(a, xs, a.w ? wsm : NULL, D, Dn, bp, st, overlap, overlap, 0, vv, redv, reds);
    const int wpb = T * K / 32;
    for (int wi = threadIdx.x; wi < wpb; wi += blockDim.x) {
        uint32_t word = 0;
        for (int i = 0; i < 32; i++) {
            const int p = 32 * wi + i, t = T - 1 - p / K, bit = p % K;
            word |= ((st[t] >> bit) & 1u) << i;
        }
        a.words[blk * wpb + wi] = word;
    }
}

/* tcq.h: inputs finite, weights finite and >= 0 (else the costs are not a squared error). */
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
    return (size_t)2 * N * 4 + (size_t)5 * T * 4 + 64 * 4 + (size_t)T * wps * K * 4;
}

template <int K, int GPT>
tcq_status launch_enc(tcq_cuda_ctx *ctx, const EncArgs &a, int64_t nblk)
{
    const size_t smem = enc_smem(a.L, K, a.T);
    const int G = 1 << (a.L - K);
    int threads = G / GPT;
    if (threads < 32) threads = 32;
    CU_TRY(cudaFuncSetAttribute(k_encode<K, GPT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "cuda encode");
    for (int64_t b0 = 0; b0 < nblk; b0 += 1 << 30) {
        EncArgs s = a;
        s.x += b0 * a.T;
        if (s.w) s.w += b0 * a.T;
        s.words += b0 * (a.T * K / 32);
        const int n = (int)TCQ_MIN(nblk - b0, (int64_t)1 << 30);
        k_encode<K, GPT><<<n, threads, smem, ctx->stream>>>(s);
        CU_LAUNCHED("cuda encode kernel");
    }
    return TCQ_OK;
}

template <int K>
tcq_status launch_enc_k(tcq_cuda_ctx *ctx, const EncArgs &a, int64_t nblk)
{
    const int G = 1 << (a.L - K);
    /* G <= 2^(12-K): GPT up to 2^(12-K)/256 */
    constexpr int kMax = (1 << (kMaxL - K)) / 256 > 0 ? (1 << (kMaxL - K)) / 256 : 1;
    const int gpt = G >= 2048 ? 8 : G >= 1024 ? 4 : G >= 512 ? 2 : 1;
    if (gpt >= 8) return launch_enc<K, (kMax < 8 ? kMax : 8)>(ctx, a, nblk);
    if (gpt >= 4) return launch_enc<K, (kMax < 4 ? kMax : 4)>(ctx, a, nblk);
    if (gpt >= 2) return launch_enc<K, (kMax < 2 ? kMax : 2)>(ctx, a, nblk);
    return launch_enc<K, 1>(ctx, a, nblk);
}

}  // namespace

tcq_status tcq_cuda_encode_rows(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts, const float *src,
                                const float *w, int64_t R, int64_t C, uint32_t *codes, uint16_t *scales, double *sq_err)
{
    if (!ctx) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode: ctx is NULL");
    TCQ_TRY(tcq_block_check(p));
    if (!src || !codes || !scales) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode: NULL buffer");
    if (R <= 0 || C <= 0 || C % p.T != 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode: shape [%lld, %lld] needs C %% T(=%d) == 0", (long long)R,
                        (long long)C, p.T);
    if (opts && opts->search != TCQ_SEARCH_TWO_PASS)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "cuda encode: search '%s' not available", tcq_search_name(opts->search));
    if (p.L > kMaxL) return tcq_fail(TCQ_ERR_UNSUPPORTED, "cuda encode: L=%d (the GPU encoder handles L <= %d)", p.L, kMaxL);
    if ((int64_t)enc_smem(p.L, p.k, p.T) > ctx->smem_optin)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "cuda encode: L=%d k=%d T=%d needs too much shared memory", p.L, p.k, p.T);
    for (int64_t r = 0; r < R; r++) scales[r] = tcq_scale_for_row(p.L, src + r * C, C);
    const int wpb = tcq_block_words(p);
    const int64_t bpr = C / p.T;
    /* rows in batches of about 32 M weights: bounded device memory, any matrix size */
    const int64_t rows_per = TCQ_MAX((int64_t)1, ((int64_t)32 << 20) / C);
    const int64_t nb = TCQ_MIN(R, rows_per);
    std::vector<float> xh((size_t)(nb * C));
    float *dx = NULL, *dw = NULL;
    uint32_t *dwords = NULL;
    tcq_status s = tcq_cuda_malloc((void **)&dx, (size_t)(nb * C) * 4);
    if (s == TCQ_OK && w) s = tcq_cuda_malloc((void **)&dw, (size_t)(nb * C) * 4);
    if (s == TCQ_OK) s = tcq_cuda_malloc((void **)&dwords, (size_t)(nb * bpr * wpb) * 4);
    cudaEvent_t ev0, ev1;
    cudaEventCreate(&ev0);
    cudaEventCreate(&ev1);
    ctx->encode_kernel_ms = 0;
    for (int64_t r0 = 0; r0 < R && s == TCQ_OK; r0 += nb) {
        const int64_t n = TCQ_MIN(nb, R - r0);
        for (int64_t r = 0; r < n; r++) {
            const float sc = tcq_f16_to_f32(scales[r0 + r]);
            const float *row = src + (r0 + r) * C;
            for (int64_t c = 0; c < C; c++) xh[(size_t)(r * C + c)] = row[c] / sc;
        }
        s = check_inputs(xh.data(), w ? w + r0 * C : NULL, n * C, "cuda encode_rows");
        if (s != TCQ_OK) break;
        s = tcq_cuda_copy_to_device(ctx, dx, xh.data(), (size_t)(n * C) * 4);
        if (s == TCQ_OK && w) s = tcq_cuda_copy_to_device(ctx, dw, w + r0 * C, (size_t)(n * C) * 4);
        if (s != TCQ_OK) break;
        EncArgs a = {dx, w ? dw : NULL, dwords, p.L, p.T};
        cudaEventRecord(ev0, ctx->stream);
        switch (p.k) {
        case 1: s = launch_enc_k<1>(ctx, a, n * bpr); break;
        case 2: s = launch_enc_k<2>(ctx, a, n * bpr); break;
        case 3: s = launch_enc_k<3>(ctx, a, n * bpr); break;
        default: s = launch_enc_k<4>(ctx, a, n * bpr); break;
        }
        cudaEventRecord(ev1, ctx->stream);
        if (s == TCQ_OK) s = tcq_cuda_copy_to_host(ctx, codes + r0 * bpr * wpb, dwords, (size_t)(n * bpr * wpb) * 4);
        float ms = 0;
        if (s == TCQ_OK && cudaEventElapsedTime(&ms, ev0, ev1) == cudaSuccess) ctx->encode_kernel_ms += ms;
    }
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
    tcq_cuda_free(dx);
    tcq_cuda_free(dw);
    tcq_cuda_free(dwords);
    if (s != TCQ_OK) return s;
    if (sq_err) {
        /* the same sum, in the same order, as tcq_encode_rows */
        double e = 0;
        std::vector<uint32_t> st(p.T);
        for (int64_t r = 0; r < R; r++) {
            const float sc = tcq_f16_to_f32(scales[r]);
            for (int64_t b = 0; b < bpr; b++) {
                tcq_block_unpack(p, codes + (r * bpr + b) * wpb, st.data());
                double eb = 0;
                for (int t = 0; t < p.T; t++) {
                    const double d = (double)src[r * C + b * p.T + t] - (double)(tcq_code_value(st[t]) * sc);
                    eb += d * d;
                }
                e += eb;
            }
        }
        *sq_err = e;
    }
    return TCQ_OK;
}

tcq_status tcq_cuda_encode_blocks(tcq_cuda_ctx *ctx, tcq_block_params p, const tcq_encode_opts *opts, const float *x,
                                  const float *w, int64_t n, uint32_t *words, double *sq_err)
{
    if (!ctx) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode_blocks: ctx is NULL");
    TCQ_TRY(tcq_block_check(p));
    if (!x || !words) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode_blocks: NULL buffer");
    if (n <= 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda encode_blocks: %lld blocks", (long long)n);
    if (opts && opts->search != TCQ_SEARCH_TWO_PASS)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "cuda encode_blocks: search '%s' not available", tcq_search_name(opts->search));
    if (p.L > kMaxL) return tcq_fail(TCQ_ERR_UNSUPPORTED, "cuda encode_blocks: L=%d (the GPU encoder handles L <= %d)", p.L, kMaxL);
    if ((int64_t)enc_smem(p.L, p.k, p.T) > ctx->smem_optin)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "cuda encode_blocks: L=%d k=%d T=%d needs too much shared memory", p.L, p.k, p.T);
    TCQ_TRY(check_inputs(x, w, n * p.T, "cuda encode_blocks"));
    const int wpb = tcq_block_words(p);
    const int64_t per = TCQ_MAX((int64_t)1, ((int64_t)32 << 20) / p.T);   /* blocks per batch */
    const int64_t nb = TCQ_MIN(n, per);
    float *dx = NULL, *dw = NULL;
    uint32_t *dwords = NULL;
    tcq_status s = tcq_cuda_malloc((void **)&dx, (size_t)(nb * p.T) * 4);
    if (s == TCQ_OK && w) s = tcq_cuda_malloc((void **)&dw, (size_t)(nb * p.T) * 4);
    if (s == TCQ_OK) s = tcq_cuda_malloc((void **)&dwords, (size_t)(nb * wpb) * 4);
    for (int64_t b0 = 0; b0 < n && s == TCQ_OK; b0 += nb) {
        const int64_t m = TCQ_MIN(nb, n - b0);
        s = tcq_cuda_copy_to_device(ctx, dx, x + b0 * p.T, (size_t)(m * p.T) * 4);
        if (s == TCQ_OK && w) s = tcq_cuda_copy_to_device(ctx, dw, w + b0 * p.T, (size_t)(m * p.T) * 4);
        if (s != TCQ_OK) break;
        EncArgs a = {dx, w ? dw : NULL, dwords, p.L, p.T};
        switch (p.k) {
        case 1: s = launch_enc_k<1>(ctx, a, m); break;
        case 2: s = launch_enc_k<2>(ctx, a, m); break;
        case 3: s = launch_enc_k<3>(ctx, a, m); break;
        default: s = launch_enc_k<4>(ctx, a, m); break;
        }
        if (s == TCQ_OK) s = tcq_cuda_copy_to_host(ctx, words + b0 * wpb, dwords, (size_t)(m * wpb) * 4);
    }
    tcq_cuda_free(dx);
    tcq_cuda_free(dw);
    tcq_cuda_free(dwords);
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
    TCQ_TRY(tcq_cuda_encode_rows(ctx, p, NULL, src.data(), NULL, R, TCQ_MIN(C, (int64_t)p.T * 4), codes.data(),
                                 scales.data(), NULL));   /* warm */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    TCQ_TRY(tcq_cuda_encode_rows(ctx, p, NULL, src.data(), NULL, R, C, codes.data(), scales.data(), NULL));
    clock_gettime(CLOCK_MONOTONIC, &b);
    const double sec = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    *wps = (double)(R * C) / sec;
    if (kernel_wps) *kernel_wps = (double)(R * C) / (ctx->encode_kernel_ms * 1e-3);
    return TCQ_OK;
}
