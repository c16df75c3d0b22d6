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

/* block (row, head): heads [0, nh) of q (normed, rotated, into qout [M, nh*hd]), then
 * [nh, nh + nkv) of k (normed, rotated, into the cache with v).  q, k, v rows at strides sq, sk, sv
 * (one fused projection's output or three separate ones). */
__global__ void k_qk_rope_store(const float *qs, int sq, const float *ks, int sk, const float *vs, int sv,
                                tcq_cuda_pend pd, float *qout, const mk_row *rows, const float *qn, const float *kn,
                                const float *inv_freq, int nh, int nkv, int hd, int interleaved, float eps, int layer)
{
    __shared__ float s[MK_MAX_HD];
    __shared__ double sh[32];
    const int r = blockIdx.x, h = blockIdx.y;
    const bool isk = h >= nh;
    const int kvh = h - nh;
    const float *p = isk ? ks + (size_t)r * sk + (size_t)kvh * hd : qs + (size_t)r * sq + (size_t)h * hd;
    const float *nw = isk ? kn : qn;
    /* pd.part: q, k, v are columns [0, nh hd), [nh hd, +nkv hd), [+nkv hd, +nkv hd) of the pending output */
    const int col = isk ? nh * hd + kvh * hd : h * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) s[i] = pd.part ? tcq_pend_value(pd, r, col + i) : p[i];
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
    if (!isk) {
        for (int i = threadIdx.x; i < hd; i += blockDim.x) qout[((size_t)r * nh + h) * hd + i] = s[i];
        return;
    }
    const size_t kvd = (size_t)nkv * hd;
    const size_t off = ((size_t)layer * row.ctx + row.pos) * kvd + (size_t)kvh * hd;
    const float *vr = vs + (size_t)r * sv + (size_t)kvh * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        const float vv = pd.part ? tcq_pend_value(pd, r, (nh + nkv) * hd + kvh * hd + i) : vr[i];
        row.k[off + i] = __half_as_ushort(__float2half_rn(s[i]));
        row.v[off + i] = __half_as_ushort(__float2half_rn(vv));
    }
}

/* Attention, split: block (row, kv head, split) runs positions [split*MK_ATT_SPLIT, +MK_ATT_SPLIT)
 * of [0, n) for the G query heads that share the kv head, so each cache row is read once per
 * group: a thread per position forms its G scores (the k row in 16-byte loads, q from shared
 * memory), the block takes each head's max and exponentials, then the block sums the v rows for
 * all G heads (below); part[(r, h, split)] = (max,
 * sum, acc[hd]) for k_attn_combine. */
__global__ void __launch_bounds__(MK_ATT_SPLIT) k_attn_part(const float *q, const mk_row *rows, float *part, int S,
                                                            int nh, int nkv, int hd, int layer, float scale)
{
    __shared__ float qs[MK_MAX_G * MK_MAX_HD];
    __shared__ float sc[MK_MAX_G][MK_ATT_SPLIT];
    __shared__ float smax[MK_MAX_G], ssum[MK_MAX_G];
    __shared__ float red[MK_ATT_SPLIT * 8 * MK_MAX_G];   /* [PG][G][hd]: PG * hd = 8 * MK_ATT_SPLIT */
    const int r = blockIdx.x, kvh = blockIdx.y, sp = blockIdx.z;
    const int G = nh / nkv, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const mk_row row = rows[r];
    const int n = row.pos + 1;
    const size_t kvd = (size_t)nkv * hd;
    const int t0 = sp * MK_ATT_SPLIT, t1 = min(n, t0 + MK_ATT_SPLIT);
    if (t0 >= n) {
        for (int g = threadIdx.x; g < G; g += blockDim.x) {
            float *P = part + (((size_t)r * nh + (size_t)kvh * G + g) * S + sp) * (hd + 2);
            P[0] = -INFINITY;
            P[1] = 0.0f;
        }
        return;
    }
    const float *qg = q + ((size_t)r * nh + (size_t)kvh * G) * hd;   /* the group's G heads, contiguous */
    for (int i = threadIdx.x; i < G * hd; i += blockDim.x) qs[i] = qg[i];
    __syncthreads();
    const uint16_t *K = row.k + (size_t)layer * row.ctx * kvd + (size_t)kvh * hd;
    const uint16_t *V = row.v + (size_t)layer * row.ctx * kvd + (size_t)kvh * hd;
    {
        const int t = t0 + threadIdx.x;
        float dot[MK_MAX_G];
#pragma unroll
        for (int g = 0; g < MK_MAX_G; g++) dot[g] = 0.0f;
        if (t < t1) {
            const uint4 *kr = (const uint4 *)(K + (size_t)t * kvd);
            for (int c = 0; c < hd / 8; c++) {
                const uint4 raw = kr[c];
                const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float k0 = hf2f((uint16_t)(u[j] & 0xffffu)), k1 = hf2f((uint16_t)(u[j] >> 16));
#pragma unroll
                    for (int g = 0; g < MK_MAX_G; g++)
                        if (g < G) dot[g] += qs[g * hd + 8 * c + 2 * j] * k0 + qs[g * hd + 8 * c + 2 * j + 1] * k1;
                }
            }
        }
#pragma unroll
        for (int g = 0; g < MK_MAX_G; g++)
            if (g < G) sc[g][threadIdx.x] = t < t1 ? dot[g] * scale : -INFINITY;
    }
    __syncthreads();
    for (int g = w; g < G; g += MK_ATT_SPLIT / 32) {
        float mx = -INFINITY;
        for (int j = lane; j < MK_ATT_SPLIT; j += 32) mx = fmaxf(mx, sc[g][j]);
        for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        float sum = 0.0f;
        for (int j = lane; j < MK_ATT_SPLIT; j += 32) {
            const float e = j < t1 - t0 ? expf(sc[g][j] - mx) : 0.0f;
            sc[g][j] = e;
            sum += e;
        }
        sum = warp_sum(sum);
        if (lane == 0) {
            smax[g] = mx;
            ssum[g] = sum;
        }
    }
    __syncthreads();
    /* the weighted sum of v rows: thread (position group p, 8 dimensions c) takes positions
     * p, p + PG, ... in 16-byte loads (a thread per dimension walking all 128 positions kept
     * too few loads in flight), then the PG partial sums are added in order of p */
    const int nc = hd / 8, PG = MK_ATT_SPLIT / nc, c8 = threadIdx.x % nc, p = threadIdx.x / nc;
    const int nt = t1 - t0;
    float acc[MK_MAX_G][8];
#pragma unroll
    for (int g = 0; g < MK_MAX_G; g++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[g][j] = 0.0f;
    if (p < PG)
        for (int t = p; t < nt; t += PG) {
            const uint4 raw = *(const uint4 *)(V + (size_t)(t0 + t) * kvd + 8 * c8);
            const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
            float x[8];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                x[2 * j] = hf2f((uint16_t)(u[j] & 0xffffu));
                x[2 * j + 1] = hf2f((uint16_t)(u[j] >> 16));
            }
#pragma unroll
            for (int g = 0; g < MK_MAX_G; g++)
                if (g < G) {
                    const float wt = sc[g][t];
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[g][j] += wt * x[j];
                }
        }
    if (p < PG)
#pragma unroll
        for (int g = 0; g < MK_MAX_G; g++)
            if (g < G)
#pragma unroll
                for (int j = 0; j < 8; j++) red[(size_t)p * G * hd + g * hd + 8 * c8 + j] = acc[g][j];
    __syncthreads();
    for (int o = threadIdx.x; o < G * hd; o += blockDim.x) {
        float a = 0.0f;
        for (int q2 = 0; q2 < PG; q2++) a += red[(size_t)q2 * G * hd + o];
        const int g = o / hd, i = o % hd;
        part[(((size_t)r * nh + (size_t)kvh * G + g) * S + sp) * (hd + 2) + 2 + i] = a;
    }
    for (int g = threadIdx.x; g < G; g += blockDim.x) {
        float *P = part + (((size_t)r * nh + (size_t)kvh * G + g) * S + sp) * (hd + 2);
        P[0] = smax[g];
        P[1] = ssum[g];
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
    k_add_norm<<<M, d >= 2048 ? 1024 : d >= 512 ? 256 : 64, 0, st>>>(x, y, w, out, d, eps);
}

void mk_qk_rope_store(cudaStream_t st, const float *q, int sq, const float *k, int sk, const float *v, int sv,
                      float *qout, const mk_row *rows, const float *qn, const float *kn, const float *inv_freq, int M,
                      int nh, int nkv, int hd, int interleaved, float eps, int layer)
{
    k_qk_rope_store<<<dim3(M, nh + nkv), 64, 0, st>>>(q, sq, k, sk, v, sv, tcq_cuda_pend{}, qout, rows, qn, kn,
                                                      inv_freq, nh, nkv, hd, interleaved, eps, layer);
}

void mk_qk_rope_store_pend(cudaStream_t st, const tcq_cuda_pend &qkv, float *qout, const mk_row *rows, const float *qn,
                           const float *kn, const float *inv_freq, int M, int nh, int nkv, int hd, int interleaved,
                           float eps, int layer)
{
    /* a single-chunk call left finished values in qkv.y: the plain kernel over them */
    const int w = (nh + 2 * nkv) * hd;
    const float *y = qkv.part ? NULL : qkv.y;
    /* a thread a dimension: each adds its partials (tcq_pend_sum), all loads in flight */
    k_qk_rope_store<<<dim3(M, nh + nkv), hd, 0, st>>>(y, w, y ? y + nh * hd : NULL, w, y ? y + (nh + nkv) * hd : NULL, w,
                                                      qkv, qout, rows, qn, kn, inv_freq, nh, nkv, hd, interleaved, eps,
                                                      layer);
}

void mk_attention(cudaStream_t st, const float *q, float *att, const mk_row *rows, float *part, int S, int M, int nh,
                  int nkv, int hd, int layer)
{
    const float scale = 1.0f / sqrtf((float)hd);
    k_attn_part<<<dim3(M, nkv, S), MK_ATT_SPLIT, 0, st>>>(q, rows, part, S, nh, nkv, hd, layer, scale);
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
