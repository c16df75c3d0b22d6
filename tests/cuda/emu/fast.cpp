/* Host emulation of the CUDA fast-path kernels (src/kernels/cuda/fast_kernels.cuh,
 * fast_quant.cuh): the device code itself, compiled by g++ with the CUDA intrinsics it uses
 * defined below, each warp run as 32 threads that meet at a barrier around every shuffle.
 * Checks on a machine without a GPU what test_cuda checks on one: the activation quantization
 * bit for bit against the CPU's (tcq_kq_prepare), and the outputs against the CPU's fast path
 * (scalar reference) within 2 (nblk + 4) 2^-24 sum |v| (|a| + d) (test_cuda.c says why).
 * Not part of the build: tests/cuda/emu/fast.sh [CPU_BUILD_DIR] compiles and runs it. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <barrier>
#include <thread>
#include <vector>
extern "C" {
#include "kernels/kernels.h"
#include "tcq_kernels.h"
}

#define TCQ_FAST_EMU 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(x)
struct uint4 { uint32_t x, y, z, w; };
struct uint2 { uint32_t x, y; };
struct emu_dim { unsigned x, y, z; };
static thread_local emu_dim threadIdx, blockIdx;
static emu_dim blockDim, gridDim;
template <class T> static inline T __ldg(const T *p) { return *p; }
template <class T> static inline T __ldcg(const T *p) { return *p; }
static inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, int sh) { return (uint32_t)((((uint64_t)hi << 32) | lo) >> (sh & 31)); }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline int __float2int_rn(float a) { return (int)nearbyintf(a); }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline uint16_t __ushort_as_half(uint16_t h) { return h; }
static inline float __half2float(uint16_t h) { return tcq_f16_to_f32(h); }
using std::max;
using std::min;
static inline int64_t min(int64_t a, long long b) { return a < b ? a : (int64_t)b; }
static inline int64_t min(long long a, int64_t b) { return a < b ? (int64_t)a : b; }
static inline int tcq_emu_dp4a_us(uint32_t x, uint32_t q4, int acc)
{
    for (int b = 0; b < 4; b++) acc += (int)((x >> (8 * b)) & 255u) * (int)(int8_t)(uint8_t)(q4 >> (8 * b));
    return acc;
}
static std::barrier<> *emu_bar;
static thread_local int emu_lane;
static uint32_t emu_slot[32];
template <class T> static T __shfl_xor_sync(unsigned, T v, int off)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    emu_slot[emu_lane] = u;
    emu_bar->arrive_and_wait();
    const uint32_t r = emu_slot[emu_lane ^ off];
    emu_bar->arrive_and_wait();
    T o;
    memcpy(&o, &r, 4);
    return o;
}
static int __all_sync(unsigned, int p)
{
    emu_slot[emu_lane] = p != 0;
    emu_bar->arrive_and_wait();
    int all = 1;
    for (int i = 0; i < 32; i++) all &= (int)emu_slot[i];
    emu_bar->arrive_and_wait();
    return all;
}
/* tc_common.cuh's geometry (the part the fast kernels use) */
namespace tcq_tc {
struct Geo {
    const uint32_t *codes;
    const uint16_t *scales;
    int64_t R, C, row_words;
    int wpb, T, log2T, L, interleaved;
};
inline Geo geo_of(const tcq_trellis *w)
{
    return Geo{w->codes, w->scales, w->rows, w->cols, tcq_trellis_row_words(w), tcq_block_words(w->p), w->p.T,
               w->p.T == 64 ? 6 : w->p.T == 128 ? 7 : 8, w->p.L, w->interleaved};
}
inline const uint32_t *block_ptr(const Geo &g, int64_t r, int64_t blk)
{
    if (!g.interleaved) return g.codes + r * g.row_words + blk * g.wpb;
    return g.codes + (blk >> 1) * g.R * 48 + r * 48 + (blk & 1) * 24;
}
}  // namespace tcq_tc

#include "kernels/cuda/fast_quant.cuh"

using namespace tcq_fast;

template <class F> static void launch(unsigned grid, unsigned block, F f)
{
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; b++)
        for (unsigned w = 0; w < block / 32; w++) {
            std::barrier<> br(32);
            emu_bar = &br;
            std::vector<std::thread> th;
            for (int l = 0; l < 32; l++)
                th.emplace_back([&, l] {
                    threadIdx = {w * 32 + l, 0, 0};
                    blockIdx = {b, 0, 0};
                    emu_lane = l;
                    f();
                });
            for (auto &t : th) t.join();
        }
}

static uint64_t rs = 0x5eed1234u;
static uint32_t rnd() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)rs; }
static double gauss() { double u = (rnd() + 1.0) / 4294967297.0, v = (rnd() + 1.0) / 4294967297.0; return sqrt(-2 * log(u)) * cos(6.283185307 * v); }

static float x_scale = 1.0f;   /* 1e-38: blocks whose 127 / amax overflows (q = 0, d = 0 on both sides) */
template <int K, int M> static int run_case(int L, int T, int axis, int il, int64_t out, int64_t in, int sw = 0) {
    tcq_trellis t; memset(&t, 0, sizeof t);
    t.p = (tcq_block_params){L, K, T}; t.axis = axis; t.interleaved = il; t.rows = axis ? out : in; t.cols = axis ? in : out;
    const int64_t nw = t.rows * t.cols * K / 32;
    std::vector<uint32_t> codes(nw), il_codes(nw), codes_u(nw); std::vector<uint16_t> sc(t.rows), sc_u(t.rows);
    for (auto &c : codes) c = rnd();
    for (auto &c : codes_u) c = rnd();
    for (auto &s : sc) s = tcq_f32_to_f16((float)(0.01 + (rnd() & 0xffff) / 65536.0));
    for (auto &s : sc_u) s = tcq_f32_to_f16((float)(0.01 + (rnd() & 0xffff) / 65536.0));
    if (il) { tcq_interleave(t.rows, t.cols, codes.data(), il_codes.data()); codes = il_codes; }
    t.codes = codes.data(); t.scales = sc.data();
    tcq_trellis tu = t; tu.codes = codes_u.data(); tu.scales = sc_u.data();
    std::vector<float> x(M * in), ycpu(M * out), ygpu(M * out, NAN);
    for (auto &v : x) v = (float)gauss() * x_scale;
    if (in >= 128) for (int i = 64; i < 128; i++) x[i] = 0;
    tcq_kctx *kc; tcq_kctx_create(NULL, TCQ_PATH_FAST, &kc); tcq_kctx_force(kc, TCQ_ISA_SCALAR, TCQ_KR_AUTO);
    tcq_weight wt; memset(&wt, 0, sizeof wt); wt.fmt = TCQ_WF_TRELLIS; wt.out = out; wt.in = in; wt.tr = t;
    tcq_weight wu = wt; wu.tr = tu;
    tcq_status st = sw ? tcq_linear_swiglu(&wt, &wu, x.data(), ycpu.data(), M, kc) : tcq_linear(&wt, x.data(), ycpu.data(), M, kc);
    if (st != TCQ_OK) { printf("cpu failed: %s\n", tcq_last_error()); return 1; }
    std::vector<float> gcpu(M * out), ucpu(M * out);   /* swiglu: gate and up alone, for the bound */
    if (sw && (tcq_linear(&wt, x.data(), gcpu.data(), M, kc) != TCQ_OK || tcq_linear(&wu, x.data(), ucpu.data(), M, kc) != TCQ_OK)) return 1;
    tcq_kctx_free(kc);
    /* tcq_cuda_linear_fast's host side */
    const int64_t nblk = (in + 63) / 64, npad = nblk * 64;
    std::vector<uint32_t> q4(M * npad, 0xdeadbeef); std::vector<float> d(M * nblk); std::vector<int> corr(M * nblk);
    Geo g = tcq_tc::geo_of(&t), gu = tcq_tc::geo_of(&tu);
    ScatterSplit sp = {0, 1, nblk, NULL, ygpu.data()};
    std::vector<float> part;
    if (axis == 0) {
        sp.ntiles = (t.cols + kScatterCols - 1) / kScatterCols;
        int64_t S = std::max((int64_t)1, std::min(nblk, (int64_t)(kScatterItems + sp.ntiles - 1) / sp.ntiles));
        sp.G = (nblk + S - 1) / S; sp.S = (nblk + sp.G - 1) / sp.G;
        if (sp.S > 1) { part.assign(sp.S * M * t.cols, NAN); sp.part = part.data(); }
    }
    Act a = {q4.data(), d.data(), corr.data(), npad, nblk};
    const float *xp = x.data(); const uint16_t *scp = axis ? NULL : sc.data();
    launch((unsigned)((M * nblk + 7) / 8), 256, [&] { k_quant(xp, M, in, scp, nblk, npad, q4.data(), d.data(), corr.data()); });
    kq_act qa; memset(&qa, 0, sizeof qa); tcq_kq_prepare(&qa, x.data(), M, in, scp);
    int qbad = 0;
    for (int64_t i = 0; i < M * npad; i++) qbad += q4[i] != qa.q4[i];
    for (int64_t i = 0; i < M * nblk; i++) qbad += (memcmp(&d[i], &qa.d[i], 4) != 0) + (corr[i] != qa.corr[i]);
    tcq_kq_free(&qa);
    if (axis == 0) {
        const int64_t warps = sp.ntiles * sp.S;
        launch((unsigned)((warps + 3) / 4), 128, [&] { k_scatter<K, M>(g, a, sp); });
        if (sp.part) { const float *pp = part.data(); launch((unsigned)((M * t.cols * kFinishLanes + 255) / 256), 256, [&] { k_finish(pp, sp.S, M * t.cols, ygpu.data()); }); }
    } else if (sw) {
        launch((unsigned)((g.R + 7) / 8), 256, [&] { k_reduce<K, M, true>(g, gu, a, ygpu.data()); });
    } else {
        launch((unsigned)((g.R + 7) / 8), 256, [&] { k_reduce<K, M, false>(g, g, a, ygpu.data()); });
    }
    std::vector<float> W(out * in), Wu(out * in);
    tcq_trellis_decode(&t, W.data());
    tcq_trellis_decode(&tu, Wu.data());
    kq_act qb; memset(&qb, 0, sizeof qb); tcq_kq_prepare(&qb, x.data(), M, in, scp);
    double worst = 0; int64_t bad = 0, same = 0;
    for (int64_t j = 0; j < M * out; j++) {
        const int64_t m = j / out, o = j % out;
        double s2 = 0, s2u = 0;
        for (int64_t i = 0; i < in; i++) {
            const double scv = axis ? 1.0 : tcq_f16_to_f32(sc[i]), a = fabs(x[m * in + i]) * scv + qb.d[m * nblk + i / 64];
            s2 += fabs(W[o * in + i]) / scv * a;
            s2u += fabs(Wu[o * in + i]) * a;
        }
        const double bg = 2.0 * (nblk + 4) * 0x1p-24 * s2 + 1e-30, bu = 2.0 * (nblk + 4) * 0x1p-24 * s2u;
        /* swiglu: g and u each within their bound, through silu(g) u (|silu'| <= 1.1), 1e-6 for expf */
        const double gv = gcpu[j], tol = sw ? 1.1 * bg * fabs(ucpu[j]) + fabs(gv / (1 + exp(-gv))) * bu + 1e-6 * fabs(ycpu[j]) + 1e-30 : bg;
        double r = fabs((double)ygpu[j] - ycpu[j]) / tol;
        if (!(r <= 1)) bad++;
        worst = std::max(worst, r); same += ygpu[j] == ycpu[j];
    }
    printf("K=%d M=%d L=%d T=%d axis=%d il=%d sw=%d out=%lld in=%lld S=%lld: quant mismatches %d, outputs off %lld, same %lld/%lld, worst %.3g\n",
           K, M, L, T, axis, il, sw, (long long)out, (long long)in, (long long)sp.S, qbad, (long long)bad, (long long)same, (long long)(M*out), worst);
    return qbad != 0 || bad != 0;
}
template <int K, int M> static int every_shape()
{
    static const int Ls[] = {8, 12, 16}, Ts[] = {64, 128, 256};
    int f = 0;
    for (int axis = 0; axis <= 1; axis++) {
        const int L = Ls[(K + M + axis) % 3];
        int T = Ts[(K + 2 * M + axis) % 3];
        if ((T * K) % 32) T = 256;
        const int64_t out = axis ? 5 + (int64_t)(rnd() % 40) : T * (1 + (int64_t)(rnd() % 2));
        const int64_t in = axis ? T * (1 + (int64_t)(rnd() % 3)) : 20 + (int64_t)(rnd() % 300);
        f += run_case<K, M>(L, T, axis, 0, out, in);
    }
    if (K == 3 && M % 3 == 0) f += run_case<K, M>(12, 256, 0, 1, 512, 30 + 20 * M);   /* interleave */
    if (M % 4 == 1) f += run_case<K, M>(12, 256, 1, 0, 7, 512, 1);                     /* fused swiglu */
    return f;
}
template <int K> static int every_m()
{
    return every_shape<K, 1>() + every_shape<K, 2>() + every_shape<K, 3>() + every_shape<K, 4>() + every_shape<K, 5>() +
           every_shape<K, 6>() + every_shape<K, 7>() + every_shape<K, 8>();
}

int main(int argc, char **argv)
{
    if (argc > 1) rs = strtoull(argv[1], NULL, 0);
    printf("seed %#llx\n", (unsigned long long)rs);
    int f = every_m<1>() + every_m<2>() + every_m<3>() + every_m<4>();
    /* remainders, many blocks (S > 1 partials), long rows (lanes loop) */
    f += run_case<2, 1>(12, 256, 1, 0, 37, 2560);
    f += run_case<3, 3>(12, 256, 1, 0, 21, 2304);
    f += run_case<2, 4>(12, 64, 0, 0, 64, 300);
    f += run_case<3, 7>(10, 128, 0, 0, 384, 64 * 40 + 3);
    f += run_case<2, 3>(12, 256, 0, 0, 256, 64 * 300 + 5);
    x_scale = 1e-38f;
    f += run_case<2, 3>(12, 256, 1, 0, 40, 512);
    f += run_case<4, 2>(12, 256, 0, 0, 256, 300);
    printf("%s\n", f ? "FAILED" : "all ok");
    return f;
}
