/* tcq bench kernels: the CPU kernels at Qwen3-14B's MLP geometry, beside the machine's floors.
 *
 * In one run: streaming-read bandwidth (pool threads), the issue rate of the decode's instruction
 * mix (a register-only microbenchmark), dense f32 matvec/GEMM (and bf16 GEMM) through OpenBLAS
 * at the same shapes, and every requested op x k x M x path.  Two floors for each kernel call:
 * weight bytes / bandwidth, and (instructions per 16 weights, counted in the disassembly of the
 * inner loop, docs/PERFORMANCE.md) x weights/16 / issue rate.  frac_floor is against the binding
 * (slower) of the two. */
#include "bench_kernels.h"
#include "kernels/registry.h"

#include <cblas.h>
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

#define BK_MAX(a, b) ((a) > (b) ? (a) : (b))

typedef struct bk_opts {
    int ops[6], nops;        /* 0 reduce (gate/up), 1 scatter (down), 2 swiglu (gate+up fused),
                              * 3 bf16, 4 affine4, 5 f16: dense bf16 / MLX affine 4-bit (gs 64) / dense
                              * f16 at gate's shape */
    int ks[4], nk;
    int Ms[16], nM;
    int threads;
    int paths[2], npaths;    /* TCQ_PATH_EXACT, TCQ_PATH_FAST */
    int json, encode, dense, reps;
    tcq_kregime regime;      /* --regime: pin the dispatcher's batch regime */
    unsigned exclude;        /* --exclude: TCQ_KV_* variants left out (tcq_kctx_exclude) */
    int64_t out, in;         /* gate/up shape [out, in]; down is [in, out] */
    const tcq_kernel_info *kernel;   /* --kernel: one registry entry (its op, path, regime, ISA) */
} bk_opts;

static const char *const op_names[] = {"reduce", "scatter", "swiglu", "bf16", "affine4", "f16"};
enum { N_OPS = 6 };

static uint64_t bk_rand(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float bk_gauss(uint64_t *st)
{
    double u = ((double)(bk_rand(st) >> 11) + 0.5) * 0x1.0p-53, v = (double)(bk_rand(st) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* Process CPU seconds: on a shared machine wall time measures the neighbours too; CPU time over
 * the thread count is what the work itself took ("cpu_us" in the output). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- floors -------------------------------------------------------------------------- */

typedef struct bw_arg { const uint64_t *buf; int64_t n; uint64_t sink[64]; } bw_arg;

__attribute__((target("avx512f"))) static void bw_item(void *arg, int64_t item, int thread)
{
    bw_arg *a = arg;
    const int64_t chunk = a->n / 64;
    const __m512i *p = (const __m512i *)(a->buf + item * chunk);
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < chunk / 8; i += 4) {
        s0 = _mm512_xor_si512(s0, _mm512_load_si512(p + i));
        s1 = _mm512_xor_si512(s1, _mm512_load_si512(p + i + 1));
        s2 = _mm512_xor_si512(s2, _mm512_load_si512(p + i + 2));
        s3 = _mm512_xor_si512(s3, _mm512_load_si512(p + i + 3));
    }
    s0 = _mm512_xor_si512(_mm512_xor_si512(s0, s1), _mm512_xor_si512(s2, s3));
    a->sink[thread & 63] ^= (uint64_t)_mm512_reduce_add_epi64(s0);
}

/* the same read with ymm loads, and with scalar ones: the AVX-512 loop would fault on a CPU
 * without it (the bench runs on the active ISA) */
__attribute__((target("avx2"))) static void bw_item_avx2(void *arg, int64_t item, int thread)
{
    bw_arg *a = arg;
    const int64_t chunk = a->n / 64;
    const __m256i *p = (const __m256i *)(a->buf + item * chunk);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < chunk / 4; i += 4) {
        s0 = _mm256_xor_si256(s0, _mm256_load_si256(p + i));
        s1 = _mm256_xor_si256(s1, _mm256_load_si256(p + i + 1));
        s2 = _mm256_xor_si256(s2, _mm256_load_si256(p + i + 2));
        s3 = _mm256_xor_si256(s3, _mm256_load_si256(p + i + 3));
    }
    s0 = _mm256_xor_si256(_mm256_xor_si256(s0, s1), _mm256_xor_si256(s2, s3));
    a->sink[thread & 63] ^= (uint64_t)_mm256_extract_epi64(s0, 0) ^ (uint64_t)_mm256_extract_epi64(s0, 3);
}

static void bw_item_scalar(void *arg, int64_t item, int thread)
{
    bw_arg *a = arg;
    const int64_t chunk = a->n / 64;
    const uint64_t *p = a->buf + item * chunk;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t i = 0; i < chunk; i += 4) {
        s0 ^= p[i];
        s1 ^= p[i + 1];
        s2 ^= p[i + 2];
        s3 ^= p[i + 3];
    }
    a->sink[thread & 63] ^= s0 ^ s1 ^ s2 ^ s3;
}

static double bench_bandwidth(tcq_pool *pool, double *cpu_gbps)
{
    const tcq_isa isa = tcq_isa_active();
    void (*item)(void *, int64_t, int) = isa == TCQ_ISA_AVX512 ? bw_item : isa == TCQ_ISA_AVX2 ? bw_item_avx2 : bw_item_scalar;
    const int64_t n = (int64_t)1 << 26;   /* 512 MiB */
    uint64_t *buf = aligned_alloc(64, (size_t)n * 8);
    if (!buf) return *cpu_gbps = 1, 1;
    for (int64_t i = 0; i < n; i++) buf[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
    bw_arg a = {.buf = buf, .n = n};
    double t[7], c[7];
    for (int r = 0; r < 7; r++) {
        const double t0 = cli_now(), c0 = cpu_now();
        tcq_pool_run(pool, 64, item, &a);
        t[r] = cli_now() - t0;
        c[r] = (cpu_now() - c0) / tcq_pool_size(pool);
    }
    qsort(t, 7, sizeof *t, cmp_double);
    qsort(c, 7, sizeof *c, cmp_double);
    free(buf);
    *cpu_gbps = (double)n * 8 / c[3] / 1e9;
    return (double)n * 8 / t[3] / 1e9;
}

/* The fast path's inner-loop mix (the broadcast decoder: vpmultishiftqb of a qword broadcast
 * from memory, vpandd, vpmulld, vpaddd, vpdpbusd) over 8 independent chains: vector
 * instructions per second, summed over threads.  Written in asm so that the broadcast is a load
 * (vpbroadcastq m64) as in the kernels: compiled from intrinsics with a volatile scalar load, gcc
 * broadcast from a general register and copied the accumulators every iteration, which on Zen 5
 * cost 0.64x of the kernels' own rate (the floor was then below the measured kernels). */
typedef struct ir_arg { int64_t iters; uint64_t sink[64]; } ir_arg;
static uint64_t ir_src[256] __attribute__((aligned(64)));   /* the qwords the decode mix broadcasts (L1-resident) */

#define IR_G(j, acc, off)                                                                          \
    "vpbroadcastq " #off "(%[p]), %%zmm" #j "\n\t"                                                \
    "vpmultishiftqb %%zmm" #j ", %[sh], %%zmm" #j "\n\t"                                          \
    "vpandd %[mask], %%zmm" #j ", %%zmm" #j "\n\t"                                                \
    "vpmulld %[mul], %%zmm" #j ", %%zmm" #j "\n\t"                                                \
    "vpaddd %[add], %%zmm" #j ", %%zmm" #j "\n\t"                                                 \
    "vpdpbusd %[q], %%zmm" #j ", %%zmm" #acc "\n\t"

__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni"))) static void ir_item(void *arg, int64_t item,
                                                                                     int thread)
{
    (void)item;
    ir_arg *a = arg;
    const __m512i sh = _mm512_set1_epi32(0x18100800), mask = _mm512_set1_epi32(0xfff),
                  mul = _mm512_set1_epi32(34038481), add = _mm512_set1_epi32(76625530), q = _mm512_set1_epi32(0x01010101);
    __m512i s;
    int64_t n = a->iters, off = 0;
    const uint64_t *pp;
    /* 8 chains (zmm1..8) into 8 accumulators (zmm9..16); the address varies (no hoisting) */
    __asm__ volatile("vpxord %%zmm9, %%zmm9, %%zmm9\n\tvmovdqa64 %%zmm9, %%zmm10\n\tvmovdqa64 %%zmm9, %%zmm11\n\t"
                     "vmovdqa64 %%zmm9, %%zmm12\n\tvmovdqa64 %%zmm9, %%zmm13\n\tvmovdqa64 %%zmm9, %%zmm14\n\t"
                     "vmovdqa64 %%zmm9, %%zmm15\n\tvmovdqa64 %%zmm9, %%zmm16\n\t"
                     "1:\n\t"
                     "lea (%[src], %[off]), %[p]\n\t"
                     IR_G(1, 9, 0) IR_G(2, 10, 8) IR_G(3, 11, 16) IR_G(4, 12, 24)
                     IR_G(5, 13, 32) IR_G(6, 14, 40) IR_G(7, 15, 48) IR_G(8, 16, 56)
                     "add $64, %[off]\n\tand $1984, %[off]\n\t"
                     "dec %[n]\n\tjnz 1b\n\t"
                     "vpaddd %%zmm9, %%zmm16, %[s]\n\t"
                     : [n] "+r"(n), [off] "+r"(off), [p] "=&r"(pp), [s] "=v"(s)
                     : [src] "r"(ir_src), [sh] "v"(sh), [mask] "v"(mask), [mul] "v"(mul), [add] "v"(add), [q] "v"(q)
                     : "memory", "cc", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                       "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16");
    a->sink[thread & 63] ^= (uint64_t)_mm512_reduce_add_epi64(s);
}

/* The exact path's mix: the same decode, then bytesum - 510 (vpdpbusd), the refined reciprocal
 * (vcvtdq2ps, vmulps, vfnmadd, vfmadd), the scale (vmulps) and the accumulation (vfmadd). */
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni"))) static void ir_item_exact(void *arg, int64_t item,
                                                                                           int thread)
{
    (void)item;
    ir_arg *a = arg;
    __m512i sh = _mm512_set1_epi32(0x18100800), mask = _mm512_set1_epi32(0xfff), mul = _mm512_set1_epi32(34038481);
    __m512i add = _mm512_set1_epi32(76625530), ones = _mm512_set1_epi32(0x01010101), c510 = _mm512_set1_epi32(-510);
    const __m512 r = _mm512_set1_ps(1.0f / 147.800537109375f), dv = _mm512_set1_ps(147.800537109375f);
    const __m512 sc = _mm512_set1_ps(0.02f), xv = _mm512_set1_ps(0.5f);
    __m512 acc[8];
    __m512i v[8];
    for (int j = 0; j < 8; j++) acc[j] = _mm512_set1_ps((float)j);
    for (int64_t i = 0; i < a->iters; i++) {
        for (int j = 0; j < 8; j++) {
            const uint64_t u = *(volatile const uint64_t *)&ir_src[(i * 8 + j) & 255];
            v[j] = _mm512_multishift_epi64_epi8(sh, _mm512_set1_epi64((long long)u));
            v[j] = _mm512_and_si512(v[j], mask);
            v[j] = _mm512_add_epi32(_mm512_mullo_epi32(v[j], mul), add);
            const __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c510, v[j], ones));
            __m512 q = _mm512_mul_ps(f, r);
            q = _mm512_fmadd_ps(_mm512_fnmadd_ps(q, dv, f), r, q);
            acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(q, sc), xv, acc[j]);
        }
    }
    __m512 s = acc[0];
    for (int j = 1; j < 8; j++) s = _mm512_add_ps(s, acc[j]);
    a->sink[thread & 63] ^= (uint64_t)_mm512_reduce_add_ps(s);
}

/* The AVX2 kernels' fast-path mix per group of 8 weights (trellis_avx2_body.h): vpbroadcastq from
 * memory, vpshufb, vpsrlvd, vpand, vpmulld, vpaddd, then vpdpbusd (AVX-VNNI) or vpmaddubsw +
 * vpmaddwd + vpaddd; 4 chains into 4 accumulators (ymm0..7), 8 groups an iteration. */
#define IR2_DEC(j, off)                                                                            \
    "vpbroadcastq " #off "(%[p]), %%ymm" #j "\n\t"                                                \
    "vpshufb %[shuf], %%ymm" #j ", %%ymm" #j "\n\t"                                               \
    "vpsrlvd %[shift], %%ymm" #j ", %%ymm" #j "\n\t"                                              \
    "vpand %[mask], %%ymm" #j ", %%ymm" #j "\n\t"                                                 \
    "vpmulld %[mul], %%ymm" #j ", %%ymm" #j "\n\t"                                                \
    "vpaddd %[add], %%ymm" #j ", %%ymm" #j "\n\t"
#define IR2_VNNI(j, acc, off) IR2_DEC(j, off) "%{vex%} vpdpbusd %[q], %%ymm" #j ", %%ymm" #acc "\n\t"
#define IR2_EMU(j, acc, off)                                                                       \
    IR2_DEC(j, off) "vpmaddubsw %[ones], %%ymm" #j ", %%ymm" #j "\n\t"                            \
    "vpmaddwd %[q], %%ymm" #j ", %%ymm" #j "\n\t"                                                 \
    "vpaddd %%ymm" #j ", %%ymm" #acc ", %%ymm" #acc "\n\t"
#define IR2_LOOP(G)                                                                                \
    __asm__ volatile("vpxor %%ymm4, %%ymm4, %%ymm4\n\tvmovdqa %%ymm4, %%ymm5\n\t"                  \
                     "vmovdqa %%ymm4, %%ymm6\n\tvmovdqa %%ymm4, %%ymm7\n\t"                         \
                     "1:\n\t"                                                                      \
                     "lea (%[src], %[off]), %[p]\n\t"                                              \
                     G(0, 4, 0) G(1, 5, 8) G(2, 6, 16) G(3, 7, 24)                                 \
                     G(0, 4, 32) G(1, 5, 40) G(2, 6, 48) G(3, 7, 56)                               \
                     "add $64, %[off]\n\tand $1984, %[off]\n\t"                                     \
                     "dec %[n]\n\tjnz 1b\n\t"                                                       \
                     "vpaddd %%ymm4, %%ymm7, %[s]\n\t"                                              \
                     : [n] "+r"(n), [off] "+r"(off), [p] "=&r"(pp), [s] "=x"(s)                    \
                     : [src] "r"(ir_src), [shuf] "x"(shuf), [shift] "x"(shift), [mask] "x"(mask),  \
                       [mul] "x"(mul), [add] "x"(add), [q] "x"(q), [ones] "x"(ones)                \
                     : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7")
#define IR2_BODY(G)                                                                                \
    ir_arg *a = arg;                                                                               \
    (void)item;                                                                                    \
    const __m256i shuf = _mm256_set1_epi32(0x03020100), shift = _mm256_set1_epi32(3),             \
                  mask = _mm256_set1_epi32(0xfff), mul = _mm256_set1_epi32(34038481),              \
                  add = _mm256_set1_epi32(76625530), q = _mm256_set1_epi32(0x01010101),            \
                  ones = _mm256_set1_epi8(1);                                                      \
    __m256i s;                                                                                     \
    int64_t n = a->iters, off = 0;                                                                 \
    const uint64_t *pp;                                                                            \
    IR2_LOOP(G);                                                                                   \
    a->sink[thread & 63] ^= (uint64_t)_mm256_extract_epi64(s, 0);

__attribute__((target("avx2,avxvnni"))) static void ir_item_avx2vnni(void *arg, int64_t item, int thread)
{
    IR2_BODY(IR2_VNNI)
}

__attribute__((target("avx2"))) static void ir_item_avx2(void *arg, int64_t item, int thread)
{
    IR2_BODY(IR2_EMU)
}

/* vector ALU instructions per group of ir_item / ir_item_exact / ir_item_avx2vnni / ir_item_avx2
 * (the broadcast is a load) */
#define IR_INSTR_PER_GROUP 5
#define IR_INSTR_PER_GROUP_EXACT 11
#define IR_INSTR_PER_GROUP_AVX2VNNI 6
#define IR_INSTR_PER_GROUP_AVX2 8

/* The issue rate of the active ISA's decode mix, vector instructions a second (0: no mix, so no
 * instruction floor: the scalar path, and AVX2's exact path) */
static double bench_issue_rate(tcq_pool *pool, int exact, unsigned exclude, double *cpu_rate)
{
    ir_arg a = {.iters = exact ? 1000000 : 2000000};
    const int n = tcq_pool_size(pool);
    const tcq_isa isa = tcq_isa_active();
    const int vnni = tcq_cpu()->avxvnni && !(exclude & TCQ_KV_NO_AVXVNNI);   /* the AVX2 kernels' choice */
    void (*item)(void *, int64_t, int) = NULL;
    int ipg = 0;
    /* the AVX-512 trellis kernels need VNNI and VBMI too (tcq_tr_avx512); without them the AVX2
     * ones run, and so does their mix */
    if (isa == TCQ_ISA_AVX512 && tcq_cpu()->avx512vnni && tcq_cpu()->avx512vbmi)
        item = exact ? ir_item_exact : ir_item, ipg = exact ? IR_INSTR_PER_GROUP_EXACT : IR_INSTR_PER_GROUP;
    else if (isa >= TCQ_ISA_AVX2 && !exact)
        item = vnni ? ir_item_avx2vnni : ir_item_avx2, ipg = vnni ? IR_INSTR_PER_GROUP_AVX2VNNI : IR_INSTR_PER_GROUP_AVX2;
    if (!item) return *cpu_rate = 0, 0;
    const double per = 8.0 * ipg;
    double t[5], c[5];
    for (int r = 0; r < 5; r++) {
        const double t0 = cli_now(), c0 = cpu_now();
        tcq_pool_run(pool, n, item, &a);
        t[r] = cli_now() - t0;
        c[r] = (cpu_now() - c0) / n;
    }
    qsort(t, 5, sizeof *t, cmp_double);
    qsort(c, 5, sizeof *c, cmp_double);
    *cpu_rate = (double)n * a.iters * per / c[2];
    return (double)n * a.iters * per / t[2];
}

/* Vector ALU instructions per 16 weights in each kernel's inner loop, counted in the objdump of
 * trellis_{reduce,scatter}_avx512x.c (docs/PERFORMANCE.md has the count): the broadcast decoder is 4
 * (k <= 3; vpmultishiftqb, vpandd, vpmulld, vpaddd) or 5 (k = 4: one merge-masked broadcast
 * more), then one vpdpbusd (fast) or one vfmadd (exact) per row.  Tile (also the int16 one
 * that runs M=2..4 on axis 1), GEMM and AMX kernels: no instruction floor (0). */
static double instr_per16(int op, int path, int64_t M, int k, const char *kernel)
{
    if (M > 4 || strstr(kernel, "amx") || strstr(kernel, ".i16") || strstr(kernel, ".scalar")) return 0;
    /* trellis_avx2_body.h: 5 per 8 weights at every k (vpshufb, vpsrlvd, vpand, vpmulld, vpaddd),
     * then per row vpdpbusd (AVX-VNNI) or vpmaddubsw + vpmaddwd + vpaddd; exact: no mix */
    if (strstr(kernel, ".avx2"))
        return path == TCQ_PATH_FAST ? 10.0 + M * (strstr(kernel, ".avx2vnni") ? 2.0 : 6.0) : 0;
    const double dec = k == 4 ? 5.0 : 4.0;
    if (path == TCQ_PATH_FAST) return op == 1 ? dec + M : dec + M * 1.75;
    return dec + 6.0 + M;
}

/* ---- weights ----------------------------------------------------------------------------- */

typedef struct bk_weight {
    tcq_weight w;
    uint32_t *codes;
    uint16_t *scales;
} bk_weight;

static const char *cache_dir(char *buf, size_t n)
{
    const char *e = getenv("TCQ_CACHE");
    if (e && *e) return e;
    const char *h = getenv("HOME");
    snprintf(buf, n, "%s/.cache/tcq", h ? h : "/tmp");
    return buf;
}

/* Code buffers: 2 MiB aligned and, with TCQ_BENCH_THP=1, madvise(MADV_HUGEPAGE) (a model loader
 * can do the same for its copies; an mmapped file gets 4 KiB pages). */
static void *bk_alloc(size_t bytes)
{
    const size_t a = (size_t)2 << 20;
    void *p = aligned_alloc(a, (bytes + a - 1) / a * a);
    const char *e = getenv("TCQ_BENCH_THP");
    if (p && e && *e == '1') madvise(p, (bytes + a - 1) / a * a, MADV_HUGEPAGE);
    return p;
}

/* Code rows [R, C] of N(0,1) weights; random code words unless encode (then cached on disk). */
static int make_trellis(int64_t R, int64_t C, int k, int axis, int encode, tcq_pool *pool, bk_weight *bw)
{
    const tcq_block_params p = {.L = 12, .k = k, .T = 256};
    const int64_t nw = R * C * k / 32;
    bw->codes = bk_alloc((size_t)nw * 4);
    bw->scales = malloc((size_t)R * 2);
    if (!bw->codes || !bw->scales) return -1;
    uint64_t st = 0x5eed0000u + (uint64_t)k * 131 + (uint64_t)axis;
    if (!encode) {
        for (int64_t i = 0; i < nw; i++) bw->codes[i] = (uint32_t)bk_rand(&st);
        for (int64_t r = 0; r < R; r++) bw->scales[r] = tcq_f32_to_f16(0.02f);
    } else {
        char dir[512], path[700];
        const char *d = cache_dir(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/bench_%lldx%lld_k%d_L12_T256.bin", d, (long long)R, (long long)C, k);
        FILE *f = fopen(path, "rb");
        int ok = f && fread(bw->codes, 4, (size_t)nw, f) == (size_t)nw && fread(bw->scales, 2, (size_t)R, f) == (size_t)R;
        if (f) fclose(f);
        if (!ok) {
            fprintf(stderr, "tcq bench: encoding [%lld, %lld] k=%d (cached in %s)...\n", (long long)R, (long long)C, k,
                    path);
            float *src = malloc((size_t)(R * C) * 4);
            if (!src) return -1;
            for (int64_t i = 0; i < R * C; i++) src[i] = 0.02f * bk_gauss(&st);
            tcq_status s = tcq_encode_rows(p, NULL, src, NULL, R, C, bw->codes, bw->scales, pool, NULL);
            free(src);
            if (s != TCQ_OK) return cli_fail(s, "bench encode"), -1;
            char cmd[600];
            snprintf(cmd, sizeof cmd, "%s", d);
            for (char *c = cmd + 1; *c; c++)
                if (*c == '/') {
                    *c = 0;
                    mkdir(cmd, 0755);
                    *c = '/';
                }
            mkdir(cmd, 0755);
            f = fopen(path, "wb");
            if (f) {
                fwrite(bw->codes, 4, (size_t)nw, f);
                fwrite(bw->scales, 2, (size_t)R, f);
                fclose(f);
            }
        }
    }
    bw->w.fmt = TCQ_WF_TRELLIS;
    bw->w.tr = (tcq_trellis){.p = p, .axis = axis, .rows = R, .cols = C, .codes = bw->codes, .scales = bw->scales};
    bw->w.out = axis ? R : C;
    bw->w.in = axis ? C : R;
    return 0;
}

/* ---- timing ------------------------------------------------------------------------------ */

typedef int (*bk_fn)(void *arg);

static double g_cpu_med;   /* CPU seconds / threads of the last time_median */
static int g_nth = 1;

static double time_median(bk_fn fn, void *arg, int reps)
{
    double t[64], c[64];
    if (fn(arg)) return -1;   /* warm-up */
    const double t0 = cli_now();
    int n = 0;
    while (n < 64 && (n < reps || (n < 3 * reps && cli_now() - t0 < 0.3))) {
        const double a = cli_now(), ca = cpu_now();
        if (fn(arg)) return -1;
        t[n] = cli_now() - a;
        c[n++] = (cpu_now() - ca) / g_nth;
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    g_cpu_med = c[n / 2];
    return t[n / 2];
}

typedef struct call_arg {
    const tcq_weight *w, *w2;
    const float *x;
    float *y;
    int64_t M;
    tcq_kctx *c;
    /* dense */
    const float *Wd;
    int64_t out, in;
} call_arg;

static int call_linear(void *arg)
{
    call_arg *a = arg;
    tcq_status s = a->w2 ? tcq_linear_swiglu(a->w, a->w2, a->x, a->y, a->M, a->c) : tcq_linear(a->w, a->x, a->y, a->M, a->c);
    return s == TCQ_OK ? 0 : cli_fail(s, "bench kernels");
}

static int call_sgemm(void *arg)
{
    call_arg *a = arg;
    if (a->M == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)a->out, (int)a->in, 1.0f, a->Wd, (int)a->in, a->x, 1, 0.0f, a->y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->M, (int)a->out, (int)a->in, 1.0f, a->x, (int)a->in,
                    a->Wd, (int)a->in, 0.0f, a->y, (int)a->out);
    return 0;
}

/* ---- the run ----------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tcq bench kernels [--ops reduce,scatter,swiglu,bf16,affine4,f16] [--k 2,3,4]\n"
            "                         [--M 1,2,3,4,8,16,32,128,512]\n"
            "                         [--threads N] [--path exact|fast|both] [--json] [--encode] [--no-dense]\n"
            "                         [--shape OUTxIN] [--reps N] [--regime auto|m1|shared|tile|gemm]\n"
            "                         [--exclude avxvnni,amx] [--kernel NAME] [--list]\n"
            "  Qwen3-14B MLP geometry by default: gate/up 17408x5120 (axis 1, 'reduce'), down 5120x17408\n"
            "  (axis 0, 'scatter'); L=12, T=256.  Weights are random code words (valid codes: speed is\n"
            "  data-independent) unless --encode, which codes N(0,1) weights with tcq_encode_rows and caches\n"
            "  them under $TCQ_CACHE (default ~/.cache/tcq).  TCQ_ISA pins the ISA; TCQ_BENCH_THP=1 asks for\n"
            "  huge pages for the code buffers.\n"
            "  --exclude leaves kernel variants out where the CPU has them: the AVX2 kernels' AVX-VNNI form,\n"
            "  the AMX-INT8 tiles.\n"
            "  --list prints the kernel registry of this CPU (name, variant, M range); --kernel NAME times that\n"
            "  entry alone: its op, path, regime and ISA, at the --M values (default: those of its range).\n");
}

static int parse(int argc, char **argv, bk_opts *o)
{
    *o = (bk_opts){.ops = {0, 1, 2}, .nops = 3, .ks = {2, 3, 4}, .nk = 3, .Ms = {1, 2, 3, 4, 8, 16, 32, 128, 512},
                   .nM = 9, .threads = 0, .paths = {TCQ_PATH_EXACT, TCQ_PATH_FAST}, .npaths = 2, .dense = 1,
                   .reps = 5, .out = 17408, .in = 5120};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) return usage(stdout), 1;
        if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--encode")) o->encode = 1;
        else if (!strcmp(a, "--no-dense")) o->dense = 0;
        else if (!strcmp(a, "--list")) {
            printf("%-48s %-10s %-6s %-7s %s\n", "kernel", "variant", "path", "regime", "M");
            for (int j = 0; j < tcq_kernel_count(); j++) {
                const tcq_kernel_info *k = tcq_kernel_get(j);
                printf("%-48s %-10s %-6s %-7s %lld..%lld\n", k->name, k->variant,
                       k->path == TCQ_PATH_EXACT ? "exact" : k->path == TCQ_PATH_FAST ? "fast" : "-",
                       tcq_kregime_name(k->regime), (long long)k->m_min, (long long)k->m_max);
            }
            return 1;
        }
        else if (!v) {
            fprintf(stderr, "tcq bench kernels: unknown or incomplete option '%s'\n", a);
            return usage(stderr), 2;
        } else if (!strcmp(a, "--ops")) {
            o->nops = 0;
            for (const char *p = v; *p && o->nops < N_OPS;) {
                int j = 0;
                while (j < N_OPS && strncmp(p, op_names[j], strlen(op_names[j]))) j++;
                if (j == N_OPS)
                    return fprintf(stderr, "tcq bench kernels: --ops takes reduce,scatter,swiglu,bf16,affine4,f16\n"), 2;
                o->ops[o->nops++] = j;
                p += strlen(op_names[j]);
                if (*p == ',') p++;
            }
            i++;
        } else if (!strcmp(a, "--k")) {
            if ((o->nk = cli_parse_int_list(v, o->ks, 4)) < 0) return fprintf(stderr, "tcq bench kernels: bad --k\n"), 2;
            i++;
        } else if (!strcmp(a, "--M")) {
            if ((o->nM = cli_parse_int_list(v, o->Ms, 16)) < 0) return fprintf(stderr, "tcq bench kernels: bad --M\n"), 2;
            i++;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "--reps")) {
            long long t;
            if (cli_parse_long(a, v, &t) || t < 0 || t > 1024) return 2;
            if (a[2] == 't') o->threads = (int)t;
            else o->reps = t > 0 ? (int)t : 1;
            i++;
        } else if (!strcmp(a, "--regime")) {
            int j = 0;
            while (j < TCQ_KR_COUNT && strcmp(v, tcq_kregime_name((tcq_kregime)j))) j++;
            if (j == TCQ_KR_COUNT) return fprintf(stderr, "tcq bench kernels: --regime auto|m1|shared|tile|gemm\n"), 2;
            o->regime = (tcq_kregime)j;
            i++;
        } else if (!strcmp(a, "--exclude")) {
            o->exclude = 0;
            for (const char *p = v; *p;) {
                const size_t n = strcspn(p, ",");
                if (n == 7 && !strncmp(p, "avxvnni", 7)) o->exclude |= TCQ_KV_NO_AVXVNNI;
                else if (n == 3 && !strncmp(p, "amx", 3)) o->exclude |= TCQ_KV_NO_AMX;
                else return fprintf(stderr, "tcq bench kernels: --exclude takes avxvnni,amx\n"), 2;
                p += n;
                if (*p == ',') p++;
            }
            i++;
        } else if (!strcmp(a, "--kernel")) {
            if (!(o->kernel = tcq_kernel_find(v)))
                return fprintf(stderr, "tcq bench kernels: no kernel '%s' on this CPU (--list names them)\n", v), 2;
            i++;
        } else if (!strcmp(a, "--path")) {
            if (!strcmp(v, "exact")) o->paths[0] = TCQ_PATH_EXACT, o->npaths = 1;
            else if (!strcmp(v, "fast")) o->paths[0] = TCQ_PATH_FAST, o->npaths = 1;
            else if (strcmp(v, "both")) return fprintf(stderr, "tcq bench kernels: --path exact|fast|both\n"), 2;
            i++;
        } else if (!strcmp(a, "--shape")) {
            long long r, c;
            if (cli_parse_shape(a, v, &r, &c)) return 2;
            o->out = r, o->in = c;
            i++;
        } else {
            fprintf(stderr, "tcq bench kernels: unknown option '%s'\n", a);
            return usage(stderr), 2;
        }
    }
    for (int i = 0; i < o->nk; i++)
        if (o->ks[i] < 1 || o->ks[i] > 4) return fprintf(stderr, "tcq bench kernels: k must be 1..4\n"), 2;
    if (o->kernel) {   /* the entry's op and path; the M of its range */
        static const char *const bench_op[] = {"trellis.reduce", "trellis.scatter", "swiglu", "bf16", "affine", "f16"};
        const tcq_kernel_info *k = o->kernel;
        o->nops = 0;
        for (int j = 0; j < N_OPS; j++)
            if (!strcmp(k->op, bench_op[j])) o->ops[0] = j, o->nops = 1;
        if (!o->nops)
            return fprintf(stderr, "tcq bench kernels: %s: the bench times reduce, scatter, swiglu, bf16 and affine, "
                                   "not %s\n", k->name, k->op), 2;
        o->paths[0] = k->path == TCQ_PATH_AUTO ? TCQ_PATH_EXACT : k->path, o->npaths = 1;
        int n = 0;
        for (int i = 0; i < o->nM; i++)
            if (o->Ms[i] >= k->m_min && o->Ms[i] <= k->m_max) o->Ms[n++] = o->Ms[i];
        if (!n) o->Ms[n++] = (int)k->m_min;
        o->nM = n;
    }
    for (int i = 0; i < o->nM; i++)
        if (o->Ms[i] < 1 || o->Ms[i] > 4096) return fprintf(stderr, "tcq bench kernels: M must be 1..4096\n"), 2;
    return 0;
}

int bench_kernels(int argc, char **argv)
{
    bk_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    tcq_pool *pool = NULL;
    tcq_status s = tcq_pool_create(o.threads, &pool);
    if (s != TCQ_OK) return cli_fail(s, "bench kernels");
    const int nth = tcq_pool_size(pool);
    const char *isa = tcq_isa_name(tcq_isa_active());
    g_nth = nth;
    double bw_cpu = 1, irc[2] = {1, 1};
    const double bw = bench_bandwidth(pool, &bw_cpu);
    const double irw[2] = {bench_issue_rate(pool, 0, o.exclude, &irc[0]),
                           bench_issue_rate(pool, 1, o.exclude, &irc[1])};
    /* OpenBLAS's kernel set decides the dense baselines and the large-M path: on this project's
     * Zen 5 VM the environment pinned OPENBLAS_CORETYPE=Haswell (AVX2), half its AVX-512 speed
     * (docs/PERFORMANCE.md, session 16), so every run names it */
    const char *blas_core = openblas_get_corename();
    if (o.json) {
        printf("{\"op\":\"bandwidth\",\"gbps\":%.2f,\"cpu_gbps\":%.2f,\"threads\":%d}\n", bw, bw_cpu, nth);
        printf("{\"op\":\"blas\",\"lib\":\"OpenBLAS\",\"core\":\"%s\"}\n", blas_core ? blas_core : "?");
        for (int e = 0; e < 2; e++)
            printf("{\"op\":\"issue_rate\",\"mix\":\"%s\",\"isa\":\"%s\",\"ginstr_per_s\":%.2f,\"cpu_ginstr_per_s\":%.2f,"
                   "\"threads\":%d}\n",
                   e ? "exact" : "fast", isa, irw[e] / 1e9, irc[e] / 1e9, nth);
    } else {
        printf("tcq bench kernels: isa %s, %d threads, codes %s; OpenBLAS core %s\n", isa, nth,
               o.encode ? "encoded N(0,1) (cached)" : "random words (valid codes; speed is data-independent)",
               blas_core ? blas_core : "?");
        printf("streaming read %.1f GB/s (%.1f per CPU-second); issue rate of the fast / exact decode mix %.2f / "
               "%.2f G vector instr/s (%.2f / %.2f per CPU-second)\n",
               bw, bw_cpu, irw[0] / 1e9, irw[1] / 1e9, irc[0] / 1e9, irc[1] / 1e9);
        printf("%-8s %4s %2s %5s %-6s %10s %8s %7s %7s %8s %8s %7s %10s %7s %8s  %s\n", "op", "axis", "k", "M", "path", "us",
               "GB/s", "frac_bw", "frac_fl", "mem_us", "ins_us", "GFLOP/s", "cpu_us", "fl_cpu", "fast_err", "kernel");
    }
    const int64_t NO = o.out, NI = o.in;
    int64_t maxM = 1;
    for (int i = 0; i < o.nM; i++) maxM = BK_MAX(maxM, o.Ms[i]);
    const int64_t xlen = maxM * BK_MAX(NO, NI);
    float *x = malloc((size_t)xlen * 4), *y = malloc((size_t)xlen * 4), *y2 = malloc((size_t)xlen * 4);
    uint64_t st = 42;
    if (!x || !y) return fprintf(stderr, "tcq bench kernels: out of memory\n"), 1;
    for (int64_t i = 0; i < xlen; i++) x[i] = bk_gauss(&st);

    /* dense baselines: f32 matvec/GEMM and bf16 GEMM, OpenBLAS with the same thread count */
    if (o.dense) {
        float *Wd = malloc((size_t)(NO * NI) * 4);
        if (!Wd) return fprintf(stderr, "tcq bench kernels: out of memory (dense)\n"), 1;
        for (int64_t i = 0; i < NO * NI; i++) Wd[i] = 0.02f * bk_gauss(&st);
        openblas_set_num_threads(nth);
        for (int sh = 0; sh < 2; sh++) {
            const int64_t out = sh ? NI : NO, in = sh ? NO : NI;
            for (int mi = 0; mi < o.nM; mi++) {
                call_arg a = {.Wd = Wd, .x = x, .y = y, .M = o.Ms[mi], .out = out, .in = in};
                for (int bf = 0; bf < 1; bf++) {   /* bf16: Debian's OpenBLAS has no sbgemm */
                    const double t = time_median(call_sgemm, &a, o.reps);
                    const double bytes = (double)out * in * (bf ? 2 : 4), fl = 2.0 * out * in * o.Ms[mi];
                    if (o.json)
                        printf("{\"op\":\"dense\",\"dtype\":\"%s\",\"out\":%lld,\"in\":%lld,\"M\":%d,\"threads\":%d,"
                               "\"us\":%.1f,\"weight_gbps\":%.2f,\"frac_bw\":%.3f,\"gflops\":%.1f,\"cpu_us\":%.1f}\n",
                               bf ? "bf16" : "f32", (long long)out, (long long)in, o.Ms[mi], nth, t * 1e6, bytes / t / 1e9,
                               bytes / bw / 1e9 / t, fl / t / 1e9, g_cpu_med * 1e6);
                    else
                        printf("%-8s %4s %2s %5d %-6s %10.1f %8.2f %7.3f %7s %8.1f %8s %7.1f %10.1f %7s %8s  %s %lldx%lld\n",
                               "dense", "-", "-", o.Ms[mi], "f32", t * 1e6, bytes / t / 1e9, bytes / bw / 1e9 / t, "-",
                               bytes / bw / 1e3, "-", fl / t / 1e9, g_cpu_med * 1e6, "-", "-", "cblas_sgemm/v",
                               (long long)out, (long long)in);
                    fflush(stdout);
                }
            }
        }
        openblas_set_num_threads(1);
        free(Wd);
    }

    for (int ki = 0; ki < o.nk; ki++) {
        const int k = o.ks[ki];
        bk_weight gate = {0}, up = {0}, down = {0};
        int need_gate = 0, need_down = 0, need_up = 0;
        for (int i = 0; i < o.nops; i++)
            need_gate |= o.ops[i] == 0 || o.ops[i] == 2, need_down |= o.ops[i] == 1, need_up |= o.ops[i] == 2;
        if ((need_gate && make_trellis(NO, NI, k, 1, o.encode, pool, &gate)) ||
            (need_up && make_trellis(NO, NI, k, 1, o.encode, pool, &up)) ||
            (need_down && make_trellis(NO, NI, k, 0, o.encode, pool, &down)))
            return fprintf(stderr, "tcq bench kernels: could not build the k=%d weights\n", k), 1;
        for (int oi = 0; oi < o.nops; oi++) {
            const int op = o.ops[oi];
            if (op > 2) continue;
            const tcq_weight *w = op == 1 ? &down.w : &gate.w, *w2 = op == 2 ? &up.w : NULL;
            const double nweights = (double)NO * NI * (op == 2 ? 2 : 1);
            const double bytes = nweights * k / 8 + (double)NO * 2 * (op == 2 ? 2 : 1);   /* + fp16 scales */
            for (int pi = 0; pi < o.npaths; pi++)
                for (int mi = 0; mi < o.nM; mi++) {
                    tcq_kctx *c = NULL;
                    if ((s = tcq_kctx_create(pool, (tcq_kpath)o.paths[pi], &c)) != TCQ_OK ||
                        (s = tcq_kctx_force(c, -1, o.regime)) != TCQ_OK ||
                        (s = tcq_kctx_exclude(c, o.exclude)) != TCQ_OK)
                        return cli_fail(s, "bench kernels");
                    if (o.kernel && (s = tcq_kctx_force_kernel(c, o.kernel->name)) != TCQ_OK)
                        return cli_fail(s, "bench kernels");
                    call_arg a = {.w = w, .w2 = w2, .x = x, .y = y, .M = o.Ms[mi], .c = c};
                    const double t = time_median(call_linear, &a, o.reps);
                    if (t < 0) return 1;
                    if (o.kernel && strcmp(tcq_kctx_last_kernel(c), o.kernel->name))
                        return fprintf(stderr, "tcq bench kernels: %s pinned, %s ran\n", o.kernel->name,
                                       tcq_kctx_last_kernel(c)), 1;
                    const double tcpu = g_cpu_med;
                    /* the fast path's error against the exact path on the same input */
                    double ferr = -1;
                    if (o.paths[pi] == TCQ_PATH_FAST && y2) {
                        tcq_kctx *ce = NULL;
                        if ((s = tcq_kctx_create(pool, TCQ_PATH_EXACT, &ce)) != TCQ_OK) return cli_fail(s, "bench kernels");
                        call_arg ae = a;
                        ae.c = ce;
                        ae.y = y2;
                        if (call_linear(&ae)) return 1;
                        const int64_t ny = o.Ms[mi] * w->out;
                        double e2 = 0, r2 = 0;
                        for (int64_t j = 0; j < ny; j++) {
                            const double dlt = (double)y[j] - y2[j];
                            e2 += dlt * dlt;
                            r2 += (double)y2[j] * y2[j];
                        }
                        ferr = r2 > 0 ? sqrt(e2 / r2) : 0;
                        tcq_kctx_free(ce);
                    }
                    const double mem = bytes / (bw * 1e9);
                    const double i16 = instr_per16(op, o.paths[pi], o.Ms[mi], k, tcq_kctx_last_kernel(c));
                    const int ex = o.paths[pi] == TCQ_PATH_EXACT;
                    const double ir = irw[ex], ir_cpu = irc[ex];
                    const double ins = i16 > 0 && ir > 0 ? nweights / 16 * i16 / ir : 0;
                    const double floor = BK_MAX(mem, ins);
                    /* the same floors per CPU-second, against the CPU time the call took */
                    const double ct = tcpu, cmem = bytes / (bw_cpu * 1e9), cins = i16 > 0 && ir_cpu > 0 ? nweights / 16 * i16 / ir_cpu : 0;
                    const double cfloor = BK_MAX(cmem, cins);
                    const double fl = 2.0 * nweights * o.Ms[mi];
                    const char *path = o.paths[pi] == TCQ_PATH_EXACT ? "exact" : "fast";
                    if (o.json)
                        printf("{\"op\":\"%s\",\"axis\":%d,\"k\":%d,\"M\":%d,\"path\":\"%s\",\"isa\":\"%s\",\"threads\":%d,"
                               "\"us\":%.1f,\"weight_gbps\":%.2f,\"frac_bw\":%.3f,\"frac_floor\":%.3f,\"gflops\":%.1f,"
                               "\"mem_floor_us\":%.1f,\"instr_floor_us\":%.1f,\"cpu_us\":%.1f,\"frac_floor_cpu\":%.3f,"
                               "\"fast_rel_err\":%.3g,\"kernel\":\"%s\",\"codes\":\"%s\"}\n",
                               op_names[op], op == 1 ? 0 : 1, k, o.Ms[mi], path, isa, nth, t * 1e6, bytes / t / 1e9,
                               mem / t, floor / t, fl / t / 1e9, mem * 1e6, ins * 1e6, ct * 1e6, cfloor / ct, ferr,
                               tcq_kctx_last_kernel(c), o.encode ? "encoded" : "random");
                    else
                        printf("%-8s %4d %2d %5d %-6s %10.1f %8.2f %7.3f %7.3f %8.1f %8.1f %7.1f %10.1f %7.3f %8.2g  %s\n",
                               op_names[op], op == 1 ? 0 : 1, k, o.Ms[mi], path, t * 1e6, bytes / t / 1e9, mem / t,
                               floor / t, mem * 1e6, ins * 1e6, fl / t / 1e9, ct * 1e6, cfloor / ct, ferr,
                               tcq_kctx_last_kernel(c));
                    fflush(stdout);
                    tcq_kctx_free(c);
                }
        }
        free(gate.codes), free(gate.scales), free(up.codes), free(up.scales), free(down.codes), free(down.scales);
    }
    /* the runtime's other weight formats at gate's shape (no k, no path) */
    for (int oi = 0; oi < o.nops; oi++) {
        const int op = o.ops[oi];
        if (op < 3) continue;
        tcq_weight w = {.out = NO, .in = NI};
        uint16_t *h = NULL, *sb = NULL;
        uint32_t *q = NULL;
        double bytes;
        if (op == 3 || op == 5) {
            h = malloc((size_t)(NO * NI) * 2);
            if (!h) return fprintf(stderr, "tcq bench kernels: out of memory\n"), 1;
            for (int64_t i = 0; i < NO * NI; i++)
                h[i] = op == 3 ? tcq_f32_to_bf16(0.02f * bk_gauss(&st)) : tcq_f32_to_f16(0.02f * bk_gauss(&st));
            w.fmt = op == 3 ? TCQ_WF_BF16 : TCQ_WF_F16;
            w.dense = h;
            bytes = (double)NO * NI * 2;
        } else {
            const int64_t ng = NO * (NI / 64);
            q = malloc((size_t)(NO * NI / 8) * 4);
            sb = malloc((size_t)ng * 4);
            if (!q || !sb) return fprintf(stderr, "tcq bench kernels: out of memory\n"), 1;
            for (int64_t i = 0; i < NO * NI / 8; i++) q[i] = (uint32_t)bk_rand(&st);
            for (int64_t i = 0; i < 2 * ng; i++) sb[i] = tcq_f32_to_bf16(0.002f * bk_gauss(&st));
            w.fmt = TCQ_WF_AFFINE;
            w.af = (tcq_affine){.bits = 4, .group_size = 64, .out = NO, .in = NI, .w = q, .scales = sb,
                                .biases = sb + ng, .sdtype = TCQ_DTYPE_BF16};
            bytes = (double)NO * NI / 2 + (double)ng * 4;
        }
        for (int mi = 0; mi < o.nM; mi++) {
            tcq_kctx *c = NULL;
            if ((s = tcq_kctx_create(pool, TCQ_PATH_AUTO, &c)) != TCQ_OK) return cli_fail(s, "bench kernels");
            if ((s = tcq_kctx_force(c, -1, o.regime)) != TCQ_OK ||
                (o.kernel && (s = tcq_kctx_force_kernel(c, o.kernel->name)) != TCQ_OK))
                return cli_fail(s, "bench kernels");
            call_arg a = {.w = &w, .x = x, .y = y, .M = o.Ms[mi], .c = c};
            const double t = time_median(call_linear, &a, o.reps);
            if (t < 0) return 1;
            if (o.kernel && strcmp(tcq_kctx_last_kernel(c), o.kernel->name))
                return fprintf(stderr, "tcq bench kernels: %s pinned, %s ran\n", o.kernel->name,
                               tcq_kctx_last_kernel(c)), 1;
            const double fl = 2.0 * NO * NI * o.Ms[mi];
            if (o.json)
                printf("{\"op\":\"%s\",\"M\":%d,\"isa\":\"%s\",\"threads\":%d,\"us\":%.1f,\"weight_gbps\":%.2f,"
                       "\"frac_bw\":%.3f,\"gflops\":%.1f,\"cpu_us\":%.1f,\"mem_floor_cpu_us\":%.1f,\"kernel\":\"%s\"}\n",
                       op_names[op], o.Ms[mi], isa, nth, t * 1e6, bytes / t / 1e9, bytes / (bw * 1e9) / t, fl / t / 1e9,
                       g_cpu_med * 1e6, bytes / (bw_cpu * 1e9) * 1e6, tcq_kctx_last_kernel(c));
            else
                printf("%-8s %4s %2s %5d %-6s %10.1f %8.2f %7.3f %7s %8.1f %8s %7.1f %10.1f %7s %8s  %s\n", op_names[op], "-",
                       "-", o.Ms[mi], "-", t * 1e6, bytes / t / 1e9, bytes / (bw * 1e9) / t, "-", bytes / (bw * 1e9) * 1e6,
                       "-", fl / t / 1e9, g_cpu_med * 1e6, "-", "-", tcq_kctx_last_kernel(c));
            fflush(stdout);
            tcq_kctx_free(c);
        }
        free(h), free(q), free(sb);
    }
    free(x), free(y), free(y2);
    tcq_pool_free(pool);
    return 0;
}
