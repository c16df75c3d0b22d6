/* Host emulation of the integer tensor-core kernels (src/kernels/cuda/imma.cu, im_kernels.cuh):
 * the device code itself, compiled by g++ with the CUDA built-ins it uses defined below.  A block
 * runs as blockDim std::threads; warp collectives (shuffles, mma.m16n8k32) meet at a per-warp
 * barrier, __syncthreads at a block barrier; mma is computed from its PTX fragment layout.
 * Checks on a machine without a GPU what test_cuda checks on one for these kernels: the outputs
 * against float64 (exact path: relative RMS error <= 1e-5, "int16" <= 3e-4, int8 <= 3e-2).  It says nothing about speed, occupancy, or races the barriers hide.
 * Not part of the library build: tests/cuda/emu/imma.sh [CPU_BUILD_DIR] compiles and runs it. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>
extern "C" {
#include "tcq_kernels.h"
}

/* ---- the CUDA dialect, on the host --------------------------------------------------------- */
#define TCQ_EMU 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)
#define TCQ_DYN_SMEM extern   /* ep_all below is 16-byte aligned */
struct uint4 { uint32_t x, y, z, w; };
struct uint2 { uint32_t x, y; };
struct __half2 { uint16_t x, y; };
static inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return uint4{x, y, z, w}; }
static inline uint2 make_uint2(uint32_t x, uint32_t y) { return uint2{x, y}; }
struct emu_dim { unsigned x, y, z; };
static thread_local emu_dim threadIdx, blockIdx;
static emu_dim blockDim, gridDim;

/* One warp's meeting place; one block's barrier. */
struct EmuWarp {
    std::barrier<> bar{32};
    uint64_t slot[32];
    uint32_t a[32][4], b[32][2];
};
static thread_local EmuWarp *emu_warp;
static thread_local int emu_lane;
static std::barrier<> *emu_block_bar;

template <class T> static inline T __ldg(const T *p) { return *p; }
template <class T> static inline T emu_shfl(T v, int src)
{
    static_assert(sizeof(T) <= 8, "shuffle of at most 64 bits");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    emu_warp->slot[emu_lane] = u;
    emu_warp->bar.arrive_and_wait();
    const uint64_t r = emu_warp->slot[src & 31];
    emu_warp->bar.arrive_and_wait();
    T o;
    memcpy(&o, &r, sizeof o);
    return o;
}
template <class T> static inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src); }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int m) { return emu_shfl(v, emu_lane ^ m); }
static inline void __syncwarp() { emu_warp->bar.arrive_and_wait(); }
static inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline int atomicAdd(int *p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
static inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, int sh) { return (uint32_t)((((uint64_t)hi << 32) | lo) >> (sh & 31)); }
static inline int __ffs(int v) { return __builtin_ffs(v); }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline int __float2int_rn(float a) { return (int)nearbyintf(a); }
static inline int __float2int_rz(float a) { return (int)a; }
static inline float __int2float_rn(int a) { return (float)a; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline uint16_t __ushort_as_half(uint16_t h) { return h; }
static inline uint16_t __half_as_ushort(uint16_t h) { return h; }
static inline float __half2float(uint16_t h) { return tcq_f16_to_f32(h); }
static inline uint32_t __dp4a(uint32_t a, uint32_t b, uint32_t c)
{
    for (int i = 0; i < 4; i++) c += (a >> (8 * i) & 255u) * (b >> (8 * i) & 255u);
    return c;
}
/* declared for tc_common.cuh's pair-table helpers, which these kernels do not use */
__half2 __halves2half2(uint16_t, uint16_t);
__half2 __hsub2(__half2, __half2);
uint16_t __int2half_rn(int);
using std::max;
using std::min;

/* mma.sync.m16n8k32.row.col.s32.u8.s8.s32 from the PTX ISA's fragment layout: lane (g, q) =
 * (lane >> 2, lane & 3) holds A rows g (a0, a2) and g + 8 (a1, a3), k-bytes 4q.. (a0, a1) and
 * 16 + 4q.. (a2, a3); B column g, k-bytes 4q.. (b0) and 16 + 4q.. (b1); D rows g, g + 8 (c0 c1 /
 * c2 c3), columns 2q, 2q + 1. */
static void emu_imma(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
    EmuWarp &w = *emu_warp;
    const int l = emu_lane;
    w.a[l][0] = a0, w.a[l][1] = a1, w.a[l][2] = a2, w.a[l][3] = a3;
    w.b[l][0] = b0, w.b[l][1] = b1;
    w.bar.arrive_and_wait();
    const int g = l >> 2, q = l & 3;
    int d[4];
    for (int e = 0; e < 4; e++) {
        const int row = g + 8 * (e >> 1), col = 2 * q + (e & 1);
        int s = 0;
        for (int k = 0; k < 32; k++) {
            const int hi = k >= 16, qa = (k & 15) >> 2, by = k & 3;
            const uint32_t ar = w.a[(row & 7) * 4 + qa][2 * hi + (row >= 8)];
            const uint32_t br = w.b[col * 4 + qa][hi];
            s += (int)(ar >> (8 * by) & 255u) * (int)(int8_t)(uint8_t)(br >> (8 * by));
        }
        d[e] = s;
    }
    w.bar.arrive_and_wait();
    for (int e = 0; e < 4; e++) c[e] += d[e];
}

/* dynamic shared memory of the block being run (blocks run one at a time) */
namespace {
alignas(16) int ep_all[1 << 16];
}

#define TCQ_IM_K 2   /* compiles the kernels (templates on k; the launcher it names is not built here) */
#include "kernels/cuda/imma.cu"

template <class F> static void launch(emu_dim grid, unsigned block, F f)
{
    gridDim = grid;
    blockDim = {block, 1, 1};
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            std::barrier<> bb((ptrdiff_t)block);
            emu_block_bar = &bb;
            std::vector<std::unique_ptr<EmuWarp>> warps;
            for (unsigned w = 0; w < block / 32; w++) warps.emplace_back(new EmuWarp);
            std::vector<std::thread> th;
            for (unsigned t = 0; t < block; t++)
                th.emplace_back([&, t] {
                    threadIdx = {t, 0, 0};
                    blockIdx = {bx, by, 0};
                    emu_warp = warps[t / 32].get();
                    emu_lane = (int)(t & 31);
                    f();
                });
            for (auto &t : th) t.join();
        }
}

static uint64_t rs = 0x1a2b3c4du;
static uint32_t rnd() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)rs; }
static double gauss() { double u = (rnd() + 1.0) / 4294967297.0, v = (rnd() + 1.0) / 4294967297.0; return sqrt(-2 * log(u)) * cos(6.283185307 * v); }

struct Case {
    int k, T, axis, sw;   /* sw: fused SwiGLU (axis 1), gate and up */
    int64_t out, in, M;
    int limbs, chunk;     /* 3 exact, 2 "int16", 1 int8; item length along the reduced dimension */
    int L = 12;
};

/* tcq_cuda_linear_im's host side (its plan from im_plan), the kernel chosen as im_launch_nt does */
static std::vector<float> run_im(const Case &c, const tcq_trellis &t, const tcq_trellis &tu, const std::vector<float> &x)
{
    const int K = c.k, M = (int)c.M;
    const int64_t in = c.in, out = c.out, ch = c.chunk;
    const int NT = (int)((c.limbs * M + 7) / 8);
    const Geo g = tcq_tc::geo_of(&t);
    Geo gu = g;
    if (c.sw) gu.codes = tu.codes, gu.scales = tu.scales;
    IOut o;
    memset(&o, 0, sizeof o);
    const size_t n_xf = im_plan(&t, M, c.limbs, (int)ch, c.sw ? 2 : 1, &o);
    const int64_t n_ch = o.S;
    std::vector<uint4> xf(n_xf, uint4{0xdeadbeefu, 0xdeadbeefu, 0xdeadbeefu, 0xdeadbeefu});
    std::vector<double> xs((size_t)n_ch * M, NAN);
    std::vector<float> xe((size_t)n_ch * M, NAN), y((size_t)(M * out), NAN);
    const bool parts = o.nmat == 2 || o.S > 1;
    std::vector<float> part(parts ? (size_t)o.nmat * o.S * M * out : 1, NAN);
    int work[2] = {0, 0};
    o.xf = xf.data();
    o.xs = xs.data();
    o.xe = xe.data();
    o.y = y.data();
    o.part = parts ? part.data() : NULL;
    o.work = work;
    o.pf = (K == 2 || K == 4) ? 8 : 0;
    const float *xp = x.data();
    const uint16_t *cs = c.axis ? NULL : t.scales;
    const int axis = c.axis, T = t.p.T, limbs = c.limbs;
    launch({(unsigned)n_ch, (unsigned)M, 1}, (unsigned)ch,
           [&] { k_im_xprep(xp, M, in, cs, axis, T, NT, limbs, xf.data(), xs.data(), xe.data()); });
    const unsigned grid = (unsigned)std::min<int64_t>(2, (o.n_items + 7) / 8);   /* 16 warps at most */
    auto go = [&](auto kern) { launch({grid, 1, 1}, kThreads, [&] { kern(g, gu, o); }); };
#define EMU_NT(NTV)                                                                                   \
    do {                                                                                              \
        if (axis == 0) {                                                                              \
            if (K == 2) go(k_im_scatter<2, NTV>);                                                     \
            else if (K == 3) go(k_im_scatter<3, NTV>);                                                \
            else go(k_im_scatter<4, NTV>);                                                            \
        } else if (T == 256) {                                                                        \
            if (K == 2) go(k_im_reduce<2, 64, NTV>);                                                  \
            else if (K == 3) go(k_im_reduce<3, 64, NTV>);                                             \
            else go(k_im_reduce<4, 64, NTV>);                                                         \
        } else {                                                                                      \
            if (K == 2) go(k_im_reduce<2, 32, NTV>);                                                  \
            else if (K == 3) go(k_im_reduce<3, 32, NTV>);                                             \
            else go(k_im_reduce<4, 32, NTV>);                                                         \
        }                                                                                             \
    } while (0)
    if (NT == 1) EMU_NT(1);
    else EMU_NT(2);
#undef EMU_NT
    if (parts) {
        const int64_t n = (int64_t)M * out;
        const uint16_t *sg = c.axis ? t.scales : NULL, *su = c.sw ? tu.scales : NULL;
        const float *pt = part.data();
        const int S = o.S;
        float *yp = y.data();
        if (o.S <= kFinRowS && M >= 2)
            launch({(unsigned)((n + 255) / 256), 1, 1}, 256, [&] { k_im_finish_row(pt, S, M, out, sg, su, yp); });
        else
            launch({(unsigned)((n + 31) / 32), 1, 1}, 32 * kFinWarps, [&] { k_im_finish(pt, S, M, out, sg, su, yp); });
    }
    if (work[0] || work[1]) printf("  queue counters not zero after the call: %d %d\n", work[0], work[1]);
    return y;
}

static int run_case(const Case &c)
{
    tcq_trellis t, tu;
    memset(&t, 0, sizeof t);
    t.p = (tcq_block_params){c.L, c.k, c.T};
    t.axis = c.axis;
    t.rows = c.axis ? c.out : c.in;
    t.cols = c.axis ? c.in : c.out;
    const int64_t nw = t.rows * t.cols * c.k / 32;
    std::vector<uint32_t> codes(nw), codes_u(nw);
    std::vector<uint16_t> sc(t.rows), sc_u(t.rows);
    for (auto &v : codes) v = rnd();
    for (auto &v : codes_u) v = rnd();
    for (auto &s : sc) s = tcq_f32_to_f16((float)(0.01 + (rnd() & 0xffff) / 65536.0));
    for (auto &s : sc_u) s = tcq_f32_to_f16((float)(0.01 + (rnd() & 0xffff) / 65536.0));
    t.codes = codes.data();
    t.scales = sc.data();
    tu = t;
    tu.codes = codes_u.data();
    tu.scales = sc_u.data();
    std::vector<float> x((size_t)(c.M * c.in));
    for (auto &v : x) v = (float)gauss();
    const std::vector<float> y0 = run_im(c, t, tu, x);
    /* float64 reference from the decoded weights */
    std::vector<float> W((size_t)(c.out * c.in)), Wu(c.sw ? W.size() : 0);
    tcq_trellis_decode(&t, W.data());
    if (c.sw) tcq_trellis_decode(&tu, Wu.data());
    double num = 0, den = 0;
    int64_t nonfin = 0;
    for (int64_t m = 0; m < c.M; m++)
        for (int64_t o = 0; o < c.out; o++) {
            double s = 0, su = 0;
            for (int64_t i = 0; i < c.in; i++) {
                s += (double)W[o * c.in + i] * x[m * c.in + i];
                if (c.sw) su += (double)Wu[o * c.in + i] * x[m * c.in + i];
            }
            if (c.sw) s = s / (1 + exp(-s)) * su;
            const int64_t j = m * c.out + o;
            num += (y0[j] - s) * (y0[j] - s);
            den += s * s;
            nonfin += !std::isfinite(y0[j]);
        }
    const double e = sqrt(num / den), tol = c.limbs == 3 ? 1e-5 : c.limbs == 2 ? 3e-4 : 3e-2;
    const bool ok = nonfin == 0 && e <= tol;
    printf("L=%d k=%d T=%d axis=%d sw=%d out=%lld in=%lld M=%lld limbs=%d chunk=%d: rel err %.3g (tol %g), %lld non-finite%s\n",
           c.L, c.k, c.T, c.axis, c.sw, (long long)c.out, (long long)c.in, (long long)c.M, c.limbs, c.chunk, e, tol,
           (long long)nonfin, ok ? "" : "  FAILED");
    return !ok;
}

/* int8 activations so small that 127 / amax overflows: x' = 0 and step 0 (the CPU's kq_step), so
 * every output is exactly 0 (v * inf once went out of int range) */
static int run_tiny(int k, int axis)
{
    const Case c = {k, 256, axis, 0, axis ? 40 : 256, axis ? 512 : 300, 2, 1, axis ? 512 : 128};
    tcq_trellis t;
    memset(&t, 0, sizeof t);
    t.p = (tcq_block_params){12, k, 256};
    t.axis = axis;
    t.rows = axis ? c.out : c.in;
    t.cols = axis ? c.in : c.out;
    std::vector<uint32_t> codes(t.rows * t.cols * k / 32);
    std::vector<uint16_t> sc(t.rows, tcq_f32_to_f16(0.5f));
    for (auto &v : codes) v = rnd();
    t.codes = codes.data();
    t.scales = sc.data();
    std::vector<float> x((size_t)(c.M * c.in));
    for (size_t i = 0; i < x.size(); i++) x[i] = i % 3 ? (float)gauss() * 1e-38f : 0.0f;
    const std::vector<float> y = run_im(c, t, t, x);
    int64_t nz = 0;
    for (float v : y) nz += v != 0.0f;
    printf("k=%d axis=%d int8, activations ~1e-38: %lld of %zu outputs not 0%s\n", k, axis, (long long)nz, y.size(), nz ? "  FAILED" : "");
    return nz != 0;
}

/* imma [quick] [SEED]: quick (ctest's run) takes k = 2, 4 at T = 256 and one T = 128 case each */
int main(int argc, char **argv)
{
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "quick")) quick = 1;
        else rs = strtoull(argv[i], NULL, 0);
    }
    printf("seed %#llx%s\n", (unsigned long long)rs, quick ? ", quick" : "");
    int f = 0;
    /* both axes, k = 2, 3, 4, spans of 32 and 64 positions (T = 128, 256), one and
     * two n-tiles, all three limb counts, partials (several chunks, two matrices), remainders */
    for (int k = 2; k <= 4; k += quick ? 2 : 1)
        for (int T = 128; T <= 256; T *= 2) {
            f += run_case({k, T, 1, 0, 37, 2 * T + 512, 1, 3, 512});
            if (quick && T == 128) continue;
            f += run_case({k, T, 1, 0, 70, 512, 3, 1, 512});
            f += run_case({k, T, 0, 0, T, 300, 1, 3, 128});
            f += run_case({k, T, 0, 0, 2 * T, 200, 4, 1, 160});
        }
    f += run_case({2, 256, 1, 0, 40, 1024, 8, 2, 512});    /* "int16", two n-tiles */
    f += run_case({4, 256, 1, 0, 33, 512, 3, 3, 256});     /* three limbs x 3 rows: two n-tiles */
    f += run_case({2, 128, 1, 0, 50, 768, 12, 1, 384});    /* int8 to M = 16: two n-tiles */
    f += run_case({4, 256, 0, 0, 512, 150, 8, 2, 128});    /* axis 0 "int16", two n-tiles */
    f += run_case({2, 256, 1, 1, 45, 512, 2, 3, 512});     /* fused SwiGLU */
    f += run_case({4, 128, 1, 1, 30, 1024, 1, 1, 512});
    f += run_case({2, 256, 1, 0, 40, 512, 2, 3, 512, 8});   /* L = 8 and 16 */
    f += run_case({4, 128, 0, 0, 256, 200, 3, 1, 128, 16});
    f += run_tiny(2, 1) + run_tiny(4, 0);
    printf("%s\n", f ? "FAILED" : "all ok");
    return f;
}
