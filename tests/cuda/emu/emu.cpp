// Host emulation of src/encode/encode_cuda.cu's kernels (tests/cuda/emu/run.sh builds and runs it): one
// std::thread per CUDA thread, barriers for __syncthreads / warp collectives; checked against libtcq.
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <thread>
#include <vector>
#include <mutex>
extern "C" {
#include "tcq_kernels.h"
}
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(x)
#define TCQ_MIN(a, b) ((a) < (b) ? (a) : (b))
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
static inline float2 make_float2(float a, float b) { return {a, b}; }
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct d3 { unsigned x; };
thread_local d3 threadIdx, blockIdx;
static d3 blockDim;
static uint8_t *g_smem;
static pthread_barrier_t g_bar;
static pthread_barrier_t g_wbar[64];
static uint64_t g_wslot[64][32];
static std::mutex g_mu;
static inline void __syncthreads() { pthread_barrier_wait(&g_bar); }
template <class V> static V warp_x(V v, int srclane_xor, int mode /*0 shfl 1 ballot*/, uint32_t *ballot)
{
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    g_wslot[w][l] = u;
    pthread_barrier_wait(&g_wbar[w]);
    V r;
    if (mode == 0) {
        uint64_t o = g_wslot[w][l ^ srclane_xor];
        memcpy(&r, &o, sizeof r);
    } else {
        uint32_t m = 0;
        for (int i = 0; i < 32; i++) m |= (g_wslot[w][i] ? 1u : 0u) << i;
        *ballot = m;
        r = v;
    }
    pthread_barrier_wait(&g_wbar[w]);
    return r;
}
static inline uint32_t __ballot_sync(uint32_t, int p) { uint32_t m; warp_x<int>(p ? 1 : 0, 0, 1, &m); return m; }
template <class V> static inline V __shfl_xor_sync(uint32_t, V v, int d) { return warp_x<V>(v, d, 0, NULL); }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline float __double2float_rn(double a) { return (float)a; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v)
{
    std::lock_guard<std::mutex> g(g_mu);
    unsigned long long o = *p;
    if (v < o) *p = v;
    return o;
}
constexpr float kD = 147.800537109375f;
static inline uint32_t bytesum(uint32_t s)
{
    uint32_t v = s * 34038481u + 76625530u;
    return (v & 255) + ((v >> 8) & 255) + ((v >> 16) & 255) + (v >> 24);
}
#include "kern.inc"

template <class F> static void run_block(int threads, size_t smem, int64_t bx, F f)
{
    std::vector<uint8_t> sm(smem + 64);
    g_smem = sm.data();
    memset(g_smem, 0x7f, smem);
    blockDim.x = threads;
    pthread_barrier_init(&g_bar, NULL, threads);
    for (int w = 0; w < threads / 32; w++) pthread_barrier_init(&g_wbar[w], NULL, 32);
    std::vector<std::thread> th;
    for (int t = 0; t < threads; t++)
        th.emplace_back([=] { threadIdx.x = t; blockIdx.x = (unsigned)bx; f(); });
    for (auto &t : th) t.join();
    pthread_barrier_destroy(&g_bar);
    for (int w = 0; w < threads / 32; w++) pthread_barrier_destroy(&g_wbar[w]);
}

template <int K, int GPT, bool W, int LC>
static void launch(const EncArgs &a, int64_t nblk)
{
    const int G = 1 << (a.L - K);
    int threads = G / GPT;
    if (threads < 32) threads = 32;
    for (int64_t b = 0; b < nblk; b++) run_block(threads, enc_smem(a.L, K, a.T), b, [&] { k_encode<K, GPT, W, LC>(a); });
}

template <int K, bool W> static void launch_kw(const EncArgs &a, int64_t nblk)
{
    const int G = 1 << (a.L - K);
    constexpr int kMax = (1 << (kMaxL - K)) / 256 > 0 ? (1 << (kMaxL - K)) / 256 : 1;
    const int gpt = G >= 2048 ? 8 : G >= 1024 ? 4 : G >= 512 ? 2 : 1;
    if (a.L == kMaxL) return launch<K, kMax, W, kMaxL>(a, nblk);
    if (gpt >= 8) return launch<K, (kMax < 8 ? kMax : 8), W, 0>(a, nblk);
    if (gpt >= 4) return launch<K, (kMax < 4 ? kMax : 4), W, 0>(a, nblk);
    if (gpt >= 2) return launch<K, (kMax < 2 ? kMax : 2), W, 0>(a, nblk);
    return launch<K, 1, W, 0>(a, nblk);
}
static void launch_any(int k, const EncArgs &a, int64_t n)
{
    const bool w = a.w != NULL;
    switch (k) {
    case 1: return w ? launch_kw<1, true>(a, n) : launch_kw<1, false>(a, n);
    case 2: return w ? launch_kw<2, true>(a, n) : launch_kw<2, false>(a, n);
    case 3: return w ? launch_kw<3, true>(a, n) : launch_kw<3, false>(a, n);
    default: return w ? launch_kw<4, true>(a, n) : launch_kw<4, false>(a, n);
    }
}

static uint64_t rs = 88172645463325252ull;
static double gauss()
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    double u1 = ((rs >> 11) + 1.0) * 0x1.0p-53;
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    double u2 = (rs >> 11) * 0x1.0p-53;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static int fails = 0;
static void check(int L, int k, int T, int64_t R, int64_t C, int weighted, int special)
{
    tcq_block_params p = {L, k, T};
    std::vector<float> src(R * C), w(weighted ? R * C : 0);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            int kind = special ? (int)(r % 5) : 4;
            double v = gauss() * 0.02;
            if (kind == 0) v = 0;
            if (kind == 1) v = gauss() * 1e-13;
            if (kind == 2) v = gauss() * 1e3;
            if (kind == 3) v = c == C / 3 ? 0.5 : 0;
            src[r * C + c] = (float)v;
        }
    for (auto &x : w) x = (float)(0.1 + fabs(gauss()));
    const int wpb = T * k / 32;
    const int64_t bpr = C / T, nblk = R * bpr;
    std::vector<uint32_t> cc(nblk * wpb), gc(nblk * wpb, 0xabababab);
    std::vector<uint16_t> cs(R), gs(R, 0xcdcd);
    double ce = 0;
    if (tcq_encode_rows(p, NULL, src.data(), weighted ? w.data() : NULL, R, C, cc.data(), cs.data(), NULL, &ce) != TCQ_OK) {
        printf("cpu failed\n");
        exit(1);
    }
    // rows kernel
    for (int64_t b = 0; b < (R + 31) / 32; b++)
        run_block(256, 32 * 65 * 4, b, [&] { k_row_scales(src.data(), R, C, tcq_code_rms(L), gs.data()); });
    std::vector<double> be(nblk);
    unsigned long long bad[2] = {~0ull, ~0ull};
    EncArgs a = {src.data(), weighted ? w.data() : NULL, gc.data(), gs.data(), be.data(), bad, 0, bpr, 0, L, T};
    launch_any(k, a, nblk);
    double ge = 0;
    for (auto e : be) ge += e;
    int64_t bw = 0, bs = 0;
    for (size_t i = 0; i < cc.size(); i++) bw += cc[i] != gc[i];
    for (int64_t r = 0; r < R; r++) bs += cs[r] != gs[r];
    const bool ok = bw == 0 && bs == 0 && ce == ge && bad[0] == ~0ull && bad[1] == ~0ull;
    printf("%s L=%d k=%d T=%d [%lld,%lld] w=%d special=%d: %lld/%zu words, %lld/%lld scales differ, err %.17g vs %.17g\n",
           ok ? "ok  " : "FAIL", L, k, T, (long long)R, (long long)C, weighted, special, (long long)bw, cc.size(),
           (long long)bs, (long long)R, ce, ge);
    fflush(stdout);
    fails += !ok;
    // encode_blocks path: x as is, no scales
    std::vector<uint32_t> cb(nblk * wpb), gb(nblk * wpb);
    double eb = 0;
    tcq_encode_blocks(p, NULL, src.data(), weighted ? w.data() : NULL, nblk, cb.data(), NULL, &eb);
    for (auto &x : src) x *= 50;   // keep the blocks path off zeros
    tcq_encode_blocks(p, NULL, src.data(), weighted ? w.data() : NULL, nblk, cb.data(), NULL, &eb);
    EncArgs b2 = {src.data(), weighted ? w.data() : NULL, gb.data(), NULL, NULL, NULL, 0, 1, 0, L, T};
    launch_any(k, b2, nblk);
    bool okb = memcmp(cb.data(), gb.data(), cb.size() * 4) == 0;
    printf("%s   blocks path L=%d k=%d T=%d\n", okb ? "ok  " : "FAIL", L, k, T);
    fails += !okb;
}

int main(int argc, char **argv)
{
    int quick = argc > 1;
    for (int k = 1; k <= 4; k++) check(12, k, 64, 2, 128, k & 1, 0);
    check(12, 4, 256, 5, 256, 1, 1);
    check(12, 3, 256, 5, 256, 0, 1);
    if (!quick) {
        check(12, 2, 256, 3, 256, 0, 1);
        check(11, 4, 128, 2, 256, 1, 0);
        check(9, 3, 64, 3, 128, 0, 1);
        check(10, 4, 64, 2, 128, 0, 0);
        check(8, 2, 64, 5, 128, 1, 1);
        check(12, 1, 128, 2, 256, 0, 1);
    }
    printf("emu: %d failed\n", fails);
    return fails != 0;
}
