/* The device forward's own kernels: embedding, residual add + RMSNorm, q/k norm + RoPE + cache
 * store, split attention over the f16 cache, dense / affine linear, SwiGLU.  Each follows the
 * CPU forward's (forward.c) arithmetic where that is cheap (RMSNorm's double sum and its
 * rounding steps, RoPE's f32 angle with double cos/sin, the f16 cache's rounding), so the two
 * paths differ by summation order only. */
#include "model_cuda.cuh"

#include <cuda_fp16.h>
#include <math.h>

namespace {

__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ float hf2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ float af_param(const void *p, int dt, size_t i)
{
    if (dt == TCQ_DTYPE_F16) return hf2f(((const uint16_t *)p)[i]);
    if (dt == TCQ_DTYPE_BF16) return bf2f(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

/* W[o, i] of a dense or affine weight (the affine contract: fmaf(scale, q, bias)) */
__device__ __forceinline__ float welem(const tcq_weight &w, int64_t o, int64_t i)
{
    const size_t at = (size_t)o * (size_t)w.in + (size_t)i;
    switch (w.fmt) {
    case TCQ_WF_F32: return ((const float *)w.dense)[at];
    case TCQ_WF_F16: return hf2f(((const uint16_t *)w.dense)[at]);
    case TCQ_WF_BF16: return bf2f(((const uint16_t *)w.dense)[at]);
    case TCQ_WF_AFFINE: {
        const tcq_affine &a = w.af;
        const uint32_t *row = a.w + (size_t)o * (size_t)(w.in * a.bits / 32);
        const uint64_t bit = (uint64_t)i * a.bits;
        const uint32_t q = (row[bit >> 5] >> (bit & 31)) & ((1u << a.bits) - 1u);
        const size_t g = (size_t)o * (size_t)(w.in / a.group_size) + (size_t)(i / a.group_size);
        return fmaf(af_param(a.scales, a.sdtype, g), (float)q, af_param(a.biases, a.sdtype, g));
    }
    default: return 0.0f;
    }
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* sum of v over the block (blockDim a multiple of 32, <= 1024), in every thread */
__device__ double block_sum(double v, double *sh /* [32] */)
{
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[w] = v;
    __syncthreads();
    double t = 0;
    for (int i = 0; i < nw; i++) t += sh[i];
    return t;
}

__global__ void k_embed(tcq_weight emb, const mk_row *rows, float *x)
{
    const int r = blockIdx.x;
    const int64_t d = emb.in, t = rows[r].tok;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) x[(size_t)r * d + j] = welem(emb, t, j);
}

__global__ void k_add_norm(float *x, const float *y, const float *w, float *out, int d, float eps)
{
    __shared__ double sh[32];
    const int r = blockIdx.x;
    float *xr = x + (size_t)r * d;
    double ss = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float v = xr[j];
        if (y) {
            v = v + y[(size_t)r * d + j];
            xr[j] = v;
        }
        ss += (double)v * v;
    }
    ss = block_sum(ss, sh);
    const float inv = (float)(1.0 / sqrt((double)(float)(ss / d) + (double)eps));
    for (int j = threadIdx.x; j < d; j += blockDim.x) out[(size_t)r * d + j] = w[j] * (xr[j] * inv);
}

/* block (row, head): heads [0, nh) of q, then [nh, nh + nkv) of k (those also store k and v) */
__global__ void k_qk_rope_store(float *q, float *k, const float *v, const mk_row *rows, const float *qn,
                                const float *kn, const float *inv_freq, int nh, int nkv, int hd, int interleaved,
                                float eps, int layer)
{
    __shared__ float s[MK_MAX_HD];
    __shared__ double sh[32];
    const int r = blockIdx.x, h = blockIdx.y;
    const bool isk = h >= nh;
    const int kvh = h - nh;
    float *p = isk ? k + ((size_t)r * nkv + kvh) * hd : q + ((size_t)r * nh + h) * hd;
    const float *nw = isk ? kn : qn;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) s[i] = p[i];
    if (nw) {
        double ss = 0;
        for (int i = threadIdx.x; i < hd; i += blockDim.x) ss += (double)s[i] * s[i];
        ss = block_sum(ss, sh);
        const float inv = (float)(1.0 / sqrt((double)(float)(ss / hd) + (double)eps));
        for (int i = threadIdx.x; i < hd; i += blockDim.x) s[i] = nw[i] * (s[i] * inv);
    }
    __syncthreads();
    const mk_row row = rows[r];
    const int half = hd / 2;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const float ang = (float)row.pos * inv_freq[i];
        const float c = (float)cos((double)ang), sn = (float)sin((double)ang);
        const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        const float x0 = s[a], x1 = s[b];
        s[a] = x0 * c - x1 * sn;
        s[b] = x1 * c + x0 * sn;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < hd; i += blockDim.x) p[i] = s[i];
    if (isk) {
        const size_t kvd = (size_t)nkv * hd;
        const size_t off = ((size_t)layer * row.ctx + row.pos) * kvd + (size_t)kvh * hd;
        const float *vr = v + (size_t)r * kvd + (size_t)kvh * hd;
        for (int i = threadIdx.x; i < hd; i += blockDim.x) {
            row.k[off + i] = __half_as_ushort(__float2half_rn(s[i]));
            row.v[off + i] = __half_as_ushort(__float2half_rn(vr[i]));
        }
    }
}

/* Attention, split: block (row, head, split) runs positions [split*MK_ATT_SPLIT, +MK_ATT_SPLIT)
 * of [0, n), one warp per position at a time (lanes over the head dimension), an online softmax
 * per warp; the block's warps combine into part[(r, h, split)] = (max, sum, acc[hd]). */
template <int NPL>
__global__ void __launch_bounds__(128) k_attn_part(const float *q, const mk_row *rows, float *part, int S, int nh,
                                                   int nkv, int hd, int layer, float scale)
{
    __shared__ float sm[4], sl[4], sacc[4][MK_MAX_HD];
    const int r = blockIdx.x, h = blockIdx.y, sp = blockIdx.z;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const mk_row row = rows[r];
    const int n = row.pos + 1, G = nh / nkv, kvh = h / G;
    const size_t kvd = (size_t)nkv * hd;
    const uint16_t *K = row.k + (size_t)layer * row.ctx * kvd + (size_t)kvh * hd;
    const uint16_t *V = row.v + (size_t)layer * row.ctx * kvd + (size_t)kvh * hd;
    float *P = part + (((size_t)r * nh + h) * S + sp) * (hd + 2);
    const int t0 = sp * MK_ATT_SPLIT, t1 = min(n, t0 + MK_ATT_SPLIT);
    if (t0 >= n) {
        if (threadIdx.x == 0) {
            P[0] = -INFINITY;
            P[1] = 0.0f;
        }
        return;
    }
    float qv[NPL], acc[NPL];
#pragma unroll
    for (int e = 0; e < NPL; e++) {
        const int i = lane + 32 * e;
        qv[e] = i < hd ? q[((size_t)r * nh + h) * hd + i] : 0.0f;
        acc[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int t = t0 + w; t < t1; t += 4) {
        const uint16_t *kr = K + (size_t)t * kvd, *vr = V + (size_t)t * kvd;
        float s = 0.0f;
#pragma unroll
        for (int e = 0; e < NPL; e++) {
            const int i = lane + 32 * e;
            if (i < hd) s += qv[e] * hf2f(kr[i]);
        }
        s = warp_sum(s) * scale;
        const float mn = fmaxf(m, s);
        const float corr = expf(m - mn), pr = expf(s - mn);
        l = l * corr + pr;
#pragma unroll
        for (int e = 0; e < NPL; e++) {
            const int i = lane + 32 * e;
            if (i < hd) acc[e] = acc[e] * corr + pr * hf2f(vr[i]);
        }
        m = mn;
    }
    if (lane == 0) {
        sm[w] = m;
        sl[w] = l;
    }
#pragma unroll
    for (int e = 0; e < NPL; e++) {
        const int i = lane + 32 * e;
        if (i < hd) sacc[w][i] = acc[e];
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int j = 0; j < 4; j++) mx = fmaxf(mx, sm[j]);
    float f[4], lt = 0.0f;
    for (int j = 0; j < 4; j++) {
        f[j] = sl[j] > 0.0f ? expf(sm[j] - mx) : 0.0f;
        lt += sl[j] * f[j];
    }
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float a = 0.0f;
        for (int j = 0; j < 4; j++) a += f[j] > 0.0f ? sacc[j][i] * f[j] : 0.0f;
        P[2 + i] = a;
    }
    if (threadIdx.x == 0) {
        P[0] = mx;
        P[1] = lt;
    }
}

__global__ void k_attn_combine(const float *part, float *att, int S, int nh, int hd)
{
    const int r = blockIdx.x, h = blockIdx.y;
    const float *P = part + ((size_t)r * nh + h) * S * (hd + 2);
    float mx = -INFINITY;
    for (int s = 0; s < S; s++) mx = fmaxf(mx, P[(size_t)s * (hd + 2)]);
    float lt = 0.0f;
    for (int s = 0; s < S; s++) {
        const float *p = P + (size_t)s * (hd + 2);
        if (p[1] > 0.0f) lt += p[1] * expf(p[0] - mx);
    }
    const float inv = 1.0f / lt;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float a = 0.0f;
        for (int s = 0; s < S; s++) {
            const float *p = P + (size_t)s * (hd + 2);
            if (p[1] > 0.0f) a += p[2 + i] * expf(p[0] - mx);
        }
        att[((size_t)r * nh + h) * hd + i] = a * inv;
    }
}

#define MK_DENSE_MB 4
/* warp per output; rows in groups of MK_DENSE_MB; a bf16 / f16 row of in % 8 == 0 in 16-byte loads */
__global__ void __launch_bounds__(256) k_dense(tcq_weight w, const float *x, float *y, int M)
{
    const int lane = threadIdx.x & 31;
    const int64_t o = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (o >= w.out) return;
    const int64_t in = w.in;
    const bool vec = (w.fmt == TCQ_WF_BF16 || w.fmt == TCQ_WF_F16) && in % 8 == 0;
    for (int m0 = 0; m0 < M; m0 += MK_DENSE_MB) {
        float acc[MK_DENSE_MB] = {};
        if (vec) {
            const uint4 *wr = (const uint4 *)((const uint16_t *)w.dense + (size_t)o * in);
            for (int64_t c = lane; c < in / 8; c += 32) {
                const uint4 raw = wr[c];
                const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
                float wf[8];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    if (w.fmt == TCQ_WF_BF16) {
                        wf[2 * j] = bf2f((uint16_t)(u[j] & 0xffffu));
                        wf[2 * j + 1] = bf2f((uint16_t)(u[j] >> 16));
                    } else {
                        wf[2 * j] = hf2f((uint16_t)(u[j] & 0xffffu));
                        wf[2 * j + 1] = hf2f((uint16_t)(u[j] >> 16));
                    }
                }
#pragma unroll
                for (int mm = 0; mm < MK_DENSE_MB; mm++) {
                    if (m0 + mm >= M) break;
                    const float4 *xr = (const float4 *)(x + (size_t)(m0 + mm) * in) + 2 * c;
                    const float4 a = xr[0], b = xr[1];
                    acc[mm] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x + wf[5] * b.y +
                               wf[6] * b.z + wf[7] * b.w;
                }
            }
        } else {
            for (int64_t i = lane; i < in; i += 32) {
                const float wv = welem(w, o, i);
#pragma unroll
                for (int mm = 0; mm < MK_DENSE_MB; mm++)
                    if (m0 + mm < M) acc[mm] += wv * x[(size_t)(m0 + mm) * in + i];
            }
        }
#pragma unroll
        for (int mm = 0; mm < MK_DENSE_MB; mm++) {
            const float s = warp_sum(acc[mm]);
            if (lane == 0 && m0 + mm < M) y[(size_t)(m0 + mm) * w.out + o] = s;
        }
    }
}

__global__ void k_swiglu(const float *g, const float *u, float *y, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

} // namespace

void mk_embed(cudaStream_t st, const tcq_weight *emb, const mk_row *rows, float *x, int M)
{
    k_embed<<<M, 256, 0, st>>>(*emb, rows, x);
}

void mk_add_norm(cudaStream_t st, float *x, const float *y, const float *w, float *out, int M, int d, float eps)
{
    k_add_norm<<<M, d >= 1024 ? 512 : 128, 0, st>>>(x, y, w, out, d, eps);
}

void mk_qk_rope_store(cudaStream_t st, float *q, float *k, const float *v, const mk_row *rows, const float *qn,
                      const float *kn, const float *inv_freq, int M, int nh, int nkv, int hd, int interleaved, float eps,
                      int layer)
{
    k_qk_rope_store<<<dim3(M, nh + nkv), 64, 0, st>>>(q, k, v, rows, qn, kn, inv_freq, nh, nkv, hd, interleaved, eps,
                                                      layer);
}

void mk_attention(cudaStream_t st, const float *q, float *att, const mk_row *rows, float *part, int S, int M, int nh,
                  int nkv, int hd, int layer)
{
    const float scale = 1.0f / sqrtf((float)hd);
    const dim3 g(M, nh, S);
    const int npl = (hd + 31) / 32;
    if (npl <= 1) k_attn_part<1><<<g, 128, 0, st>>>(q, rows, part, S, nh, nkv, hd, layer, scale);
    else if (npl <= 2) k_attn_part<2><<<g, 128, 0, st>>>(q, rows, part, S, nh, nkv, hd, layer, scale);
    else if (npl <= 4) k_attn_part<4><<<g, 128, 0, st>>>(q, rows, part, S, nh, nkv, hd, layer, scale);
    else k_attn_part<8><<<g, 128, 0, st>>>(q, rows, part, S, nh, nkv, hd, layer, scale);
    k_attn_combine<<<dim3(M, nh), 128, 0, st>>>(part, att, S, nh, hd);
}

void mk_dense(cudaStream_t st, const tcq_weight *w, const float *x, float *y, int M)
{
    k_dense<<<(unsigned)((w->out + 7) / 8), 256, 0, st>>>(*w, x, y, M);
}

void mk_swiglu(cudaStream_t st, const float *g, const float *u, float *y, int64_t n)
{
    k_swiglu<<<(unsigned)TCQ_MIN((n + 255) / 256, (int64_t)4096), 256, 0, st>>>(g, u, y, n);
}
