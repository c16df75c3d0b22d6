/* CUDA backend against the CPU, as cases x kernel families: the families are the CUDA kernel
 * registry's (src/kernels/cuda/registry.h: name, path, regime, the context options that pin it,
 * its reference and tolerance); each suite below runs its cases on the dispatcher's own choice
 * and/or on families pinned from the registry, and every call checks that the family it ran is a
 * registry entry (the pinned one where a family is pinned) and holds to that entry's reference:
 * float64 products of the decoded weights (tcq_trellis_decode) with what the family's contract
 * rounds first, or for the fast path the per-output bound of tcq_kernels.h over the family's
 * activation blocks (tcq_cuda_fast_block), and where those are the CPU's also the CPU's fast path
 * (the scalar reference kernels).  Also remainder shapes, poisoned outputs, determinism, the bf16
 * decode and the GPU encoder bit for bit against tcq_encode_rows; at the end, every family ran.
 * Needs a GPU (exit 77 = skipped without one).  TCQ_CUDA_TEST_BIG=0 skips the full Qwen3-14B MLP
 * shapes; TCQ_CUDA_TEST_QUICK=1 runs the small set (for compute-sanitizer). */
#include "cuda_checks.h"
#include "encode_checks.h"
#include "fast_checks.h"

/* ---- cases x families ----------------------------------------------------------------------
 * A case is one call's shape and what it checks; a run is where the cases go: a family pinned
 * from the registry (its tcq_cuda_opts) or the built-in dispatcher (fam NULL), with the tuning a
 * suite sets on top (tcq_cuda_opts.im_chunk, wg_grid).  A suite runs each case on each run. */
typedef enum case_op {
    LINEAR,            /* tcq_cuda_linear, TCQ_PATH_EXACT, against float64 as the family rounds */
    LINEAR_FASTPATH,   /* the same with TCQ_PATH_FAST past the fast kernels' M (the exact kernels run) */
    SWIGLU,            /* tcq_cuda_linear_swiglu, TCQ_PATH_AUTO (axis 1) */
    FAST,              /* TCQ_PATH_FAST against its float64 bound, and the CPU's where the blocks are */
    FAST_SWIGLU,       /* the fused fast SwiGLU against the CPU's (or float64's) within the bound */
    FAST_NONFINITE,    /* an Inf in one activation row poisons that row only (axis) */
    FAST_TINY,         /* activations ~1e-38 give exact zeros, as on the CPU (axis, M) */
    DECODE_BF16,       /* tcq_cuda_trellis_decode_bf16 bit for bit against the CPU's */
} case_op;

typedef struct tcase {
    case_op op;
    int L, k, T, axis, il;
    int64_t out, in, M;
    int x_off;   /* x this many floats into its device buffer (1: not 16-byte aligned) */
} tcase;

#define LIN(L, k, T, a, il, o, i, M) {LINEAR, L, k, T, a, il, o, i, M, 0}
#define LIN_X1(L, k, T, a, o, i, M) {LINEAR, L, k, T, a, 0, o, i, M, 1}
#define LIN_FP(L, k, T, a, o, i, M) {LINEAR_FASTPATH, L, k, T, a, 0, o, i, M, 0}
#define SWI(L, k, T, o, i, M) {SWIGLU, L, k, T, 1, 0, o, i, M, 0}
#define FST(L, k, T, a, il, o, i, M) {FAST, L, k, T, a, il, o, i, M, 0}
#define FSW(L, k, T, o, i, M) {FAST_SWIGLU, L, k, T, 1, 0, o, i, M, 0}
#define NONFIN(a) {FAST_NONFINITE, 12, 2, 256, a, 0, 0, 0, 3, 0}
#define TINY(a, M) {FAST_TINY, 12, 2, 256, a, 0, 0, 0, M, 0}
#define DEC(L, k, T, a, il, o, i) {DECODE_BF16, L, k, T, a, il, o, i, 0, 0}

static void run_case(const tcase *c)
{
    switch (c->op) {
    case LINEAR:
        x_offset = c->x_off;
        check_linear_path(c->L, c->k, c->T, c->axis, c->il, c->out, c->in, c->M, TCQ_PATH_EXACT);
        x_offset = 0;
        break;
    case LINEAR_FASTPATH:
        check_linear_path(c->L, c->k, c->T, c->axis, c->il, c->out, c->in, c->M, TCQ_PATH_FAST);
        break;
    case SWIGLU: check_swiglu(c->L, c->k, c->T, c->out, c->in, c->M); break;
    case FAST: check_fast(c->L, c->k, c->T, c->axis, c->il, c->out, c->in, c->M); break;
    case FAST_SWIGLU: check_swiglu_fast(c->L, c->k, c->T, c->out, c->in, c->M); break;
    case FAST_NONFINITE: check_fast_nonfinite(c->axis); break;
    case FAST_TINY: check_fast_tiny(c->axis, c->M); break;
    case DECODE_BF16: check_decode_bf16(c->L, c->k, c->T, c->axis, c->il, c->out, c->in); break;
    }
}

typedef struct trun {
    const char *fam;   /* registry family to pin, NULL: the dispatcher */
    int chunk, grid;   /* tcq_cuda_opts.im_chunk, wg_grid (0: built-in) */
} trun;

enum { QUICK = 1, FULL = 2, BIG = 4 };   /* BIG: full runs unless TCQ_CUDA_TEST_BIG=0 */
#define MAX_CASES 256

typedef struct suite {
    const char *what;
    int when;
    trun runs[2];
    int n_runs;
    const tcase *cases;
    int n_cases;
    int (*gen)(tcase *out);   /* more cases, drawn when the suite starts (random shapes); NULL: none */
} suite;
#define CASES(a) a, (int)(sizeof a / sizeof a[0])

/* every k, L in {8, 12, 16}, T, axis; odd row counts; M across the kernel classes */
static const int Ls[] = {8, 12, 16}, Ts[] = {64, 128, 256};
static const int64_t Ms[] = {1, 2, 3, 4, 5, 8, 13, 32, 33};

static int gen_linear_sweep(tcase *o)
{
    int n = 0;
    for (int k = 1; k <= 4; k++)
        for (int li = 0; li < 3; li++)
            for (int ti = 0; ti < 3; ti++)
                for (int axis = 0; axis <= 1; axis++) {
                    const int L = Ls[li], T = Ts[ti];
                    if (k >= L || (T * k) % 32) continue;
                    const int64_t out = axis ? 37 + 16 * (int64_t)(test_rand(&rng) % 8) : T * (1 + (int64_t)(test_rand(&rng) % 3));
                    const int64_t in = axis ? T * (1 + (int64_t)(test_rand(&rng) % 3)) : 45 + (int64_t)(test_rand(&rng) % 80);
                    o[n++] = (tcase)LIN(L, k, T, axis, 0, out, in, Ms[(k + li + ti + axis) % 9]);
                }
    for (int mi = 0; mi < 9; mi++) {   /* every M class on both axes at the artifact geometry */
        o[n++] = (tcase)LIN(12, 2 + mi % 3, 256, 1, 0, 300, 1024, Ms[mi]);
        o[n++] = (tcase)LIN(12, 2 + mi % 3, 256, 0, 0, 512, 333, Ms[mi]);
    }
    return n;
}

/* the fast path: every k, L, T, axis, M = 1..8; remainder shapes (axis 1: odd row counts; axis 0:
 * input rows not a multiple of 64, fewer output columns than a 128-column item) */
static int gen_fast_sweep(tcase *o)
{
    int n = 0;
    for (int k = 1; k <= 4; k++)
        for (int li = 0; li < 3; li++)
            for (int ti = 0; ti < 3; ti++)
                for (int axis = 0; axis <= 1; axis++) {
                    const int L = Ls[li], T = Ts[ti];
                    if (k >= L || (T * k) % 32) continue;
                    const int64_t out = axis ? 37 + 16 * (int64_t)(test_rand(&rng) % 8) : T * (1 + (int64_t)(test_rand(&rng) % 3));
                    const int64_t in = axis ? T * (1 + (int64_t)(test_rand(&rng) % 5)) : 45 + (int64_t)(test_rand(&rng) % 300);
                    o[n++] = (tcase)FST(L, k, T, axis, 0, out, in, 1 + (k + 3 * li + ti + axis) % 8);
                }
    for (int M = 1; M <= 8; M++) {   /* every M on both axes at the artifact geometry */
        const int k = 1 + M % 4;
        o[n++] = (tcase)FST(12, k, 256, 1, 0, 300, 2048 + 256 * (M & 1), M);   /* > 32 blocks a row: lanes loop */
        o[n++] = (tcase)FST(12, k, 256, 0, 0, 512 + 256 * (M & 1), 333 + 64 * M, M);
        o[n++] = (tcase)FST(12, 3, 256, 0, 1, 1024, 77 + 50 * M, M);           /* two-block interleave */
    }
    return n;
}

/* int8 on axis 1 to M = 16: two n-tiles, two x prep block rows */
static int gen_int8_wide(tcase *o)
{
    int n = 0;
    for (int M = 9; M <= 16; M += 7) {
        o[n++] = (tcase)FST(12, 2 + M % 3, 256, 1, 0, 300, 1024 + 512 * (M & 1), M);
        o[n++] = (tcase)FSW(12, 2 + M % 3, 256, 100, 512, M);
    }
    return n;
}

static int gen_decode(tcase *o)
{
    int n = 0;
    for (int k = 1; k <= 4; k++) o[n++] = (tcase)DEC(12, k, 256, k & 1, 0, k & 1 ? 200 : 512, k & 1 ? 512 : 200);
    return n;
}

static const tcase quick_dispatch[] = {
    LIN(12, 2, 256, 1, 0, 100, 512, 1),
    LIN(12, 3, 256, 0, 0, 512, 100, 6),
    LIN(12, 4, 256, 1, 0, 40, 256, 13),
    LIN(8, 1, 64, 0, 0, 128, 70, 33),
    LIN(12, 2, 256, 1, 0, 300, 512, 40),    /* wgmma on sm_90 */
    LIN(12, 2, 256, 1, 0, 200, 512, 150),   /* wgmma at NB = 256 (M > 128), under the sanitizers */
    LIN(12, 3, 256, 0, 0, 512, 128, 20),    /* wgmma-ss on sm_90 */
    DEC(12, 3, 256, 0, 1, 512, 30),
    SWI(12, 2, 256, 64, 256, 3),
    FST(12, 2, 256, 1, 0, 100, 512, 3),
    FST(12, 3, 256, 0, 1, 512, 200, 6),
    FST(8, 1, 64, 0, 0, 64, 70, 8),
    FSW(12, 2, 256, 64, 256, 2),
    FST(12, 3, 256, 1, 0, 40, 768, 12),     /* int8, two n-tiles */
};
static const tcase quick_pair[] = {LIN(12, 4, 256, 1, 0, 40, 256, 5), LIN(12, 2, 256, 0, 0, 256, 100, 3)};
static const tcase quick_dp4a[] = {FST(12, 2, 256, 1, 0, 100, 512, 3), FST(12, 3, 256, 0, 1, 512, 200, 6),
                                   FSW(12, 2, 256, 64, 256, 2)};
/* a pinned item length that is not a power of two, int8 at M = 1 */
static const tcase quick_chunk[] = {FST(12, 3, 256, 0, 0, 512, 777, 1), LIN(12, 2, 256, 0, 0, 512, 1000, 2)};

static const tcase linear_misc[] = {
    LIN(12, 3, 256, 0, 1, 1024, 200, 1),   /* two-block interleave */
    LIN(12, 3, 256, 0, 1, 1536, 77, 6),
    LIN(12, 3, 256, 0, 1, 512, 100, 40),
    LIN(12, 2, 256, 1, 0, 100, 512, 100),
    LIN(12, 2, 256, 1, 0, 300, 512, 700),   /* k = 2 past M = 256: wgmma, 3 tiles of x */
    LIN(12, 3, 256, 1, 0, 70, 9216, 3),     /* 18 chunk sums: the 8-warp finish */
};
static const tcase linear_big[] = {
    LIN(12, 2, 256, 1, 0, 17408, 5120, 1), LIN(12, 2, 256, 0, 0, 5120, 17408, 1),
    LIN(12, 3, 256, 1, 0, 17408, 5120, 1), LIN(12, 3, 256, 0, 1, 5120, 17408, 1),
    LIN(12, 4, 256, 1, 0, 17408, 5120, 1), LIN(12, 4, 256, 0, 0, 5120, 17408, 1),
    LIN(12, 2, 256, 1, 0, 17408, 5120, 8), LIN(12, 3, 256, 0, 0, 5120, 17408, 16),
};
static const tcase fast_misc[] = {
    FST(12, 2, 256, 0, 0, 256, 64 * 300 + 5, 2),   /* many activation blocks: S > 1 partials */
    FST(12, 4, 256, 1, 0, 50, 9216, 5),            /* axis 1, 18 chunk sums */
    FST(12, 2, 64, 0, 0, 64, 1000, 8),             /* one column block, half an item */
    NONFIN(0), NONFIN(1), TINY(0, 1), TINY(0, 3), TINY(1, 1), TINY(1, 3),
    FSW(12, 2, 256, 300, 512, 1), FSW(12, 3, 256, 200, 768, 5), FSW(12, 4, 256, 64, 256, 8),
};
static const tcase fast_big[] = {
    FST(12, 2, 256, 1, 0, 17408, 5120, 1),
    FST(12, 3, 256, 0, 1, 5120, 17408, 2),
    FST(12, 4, 256, 0, 0, 5120, 17408, 8),   /* the scatter's chunk by the SM count */
    FST(12, 3, 256, 1, 0, 17408, 5120, 4),   /* axis 1 on 768-position chunks */
};
/* pinned item lengths with int8 wherever it runs: 352 (axis 0 only, not a power of two, the chunk
 * the scatter picks at 5120x17408 on an H200) and 384 (also axis 1 at T = 128: three blocks an
 * item); the last chunk of every case is a partial one */
static const tcase chunk_cases[] = {
    LIN(12, 2, 256, 0, 0, 512, 1000, 1),
    LIN(12, 3, 256, 0, 1, 1024, 900, 2),   /* two-block interleave */
    LIN(12, 4, 128, 1, 0, 100, 1152, 2), LIN(12, 4, 128, 1, 0, 100, 1280, 2),
    FST(12, 2, 256, 0, 0, 768, 1000, 8),
    FST(12, 3, 256, 0, 0, 512, 777, 1),
    FST(12, 4, 128, 1, 0, 100, 1152, 5), FST(12, 4, 128, 1, 0, 100, 1280, 5),
    FSW(12, 2, 128, 64, 1152, 3),
};
/* FAST above the fast kernels' M (8; int8 on axis 1: 16): the exact kernels */
static const tcase fastpath_exact[] = {LIN_FP(12, 2, 256, 1, 100, 512, 17), LIN_FP(12, 3, 256, 0, 512, 300, 9)};
static const tcase decode_swiglu[] = {
    DEC(12, 3, 256, 0, 1, 1024, 100), DEC(8, 2, 64, 0, 0, 192, 45),
    SWI(12, 2, 256, 300, 512, 1), SWI(12, 3, 256, 200, 768, 7), SWI(12, 4, 256, 64, 256, 50),
};
/* decode + cuBLAS at M = 33..100 with the wgmma kernels off: both axes, the interleave, SwiGLU */
static const tcase gemm_cases[] = {
    LIN(12, 2, 256, 1, 0, 300, 512, 40), LIN(12, 3, 256, 0, 0, 512, 200, 33),
    LIN(12, 3, 256, 0, 1, 1024, 100, 64), LIN(8, 1, 64, 1, 0, 37, 128, 100),
    SWI(12, 3, 256, 200, 768, 35),
};
/* the wgmma kernel at every M it takes, on odd block counts (segments cut tiles anywhere: partial
 * sums) and on the default count */
static const tcase wgmma_cases[] = {
    LIN(12, 2, 256, 1, 0, 300, 1024, 17), LIN(12, 3, 256, 1, 0, 129, 768, 64),
    LIN(12, 4, 256, 1, 0, 200, 2560, 100),
    LIN(10, 2, 256, 1, 0, 260, 512, 300),     /* two 256-row tiles of x */
    LIN(12, 3, 256, 1, 0, 1100, 1536, 512),   /* two x tiles, several segments a block */
    /* 8 tiles on 7 blocks: one whole wave, then 1 tile's 2 units over 7 blocks, most of them with
     * none (their partials slots must not be read) */
    LIN(12, 2, 256, 1, 0, 1000, 512, 17),
    SWI(12, 3, 256, 256, 512, 40),
};
/* the shared-memory wgmma kernel on both axes, odd and default block counts, M > 128 in 256-row
 * tiles; axis 0 with and without the interleave */
static const tcase wgss_cases[] = {
    LIN(12, 2, 256, 0, 0, 512, 320, 17), LIN(12, 3, 256, 0, 1, 1024, 192, 64),
    LIN(12, 4, 256, 0, 0, 256, 640, 100), LIN(16, 2, 256, 0, 0, 768, 128, 200),
    LIN(12, 3, 256, 0, 0, 512, 256, 600),   /* three 256-row tiles of x */
    LIN(12, 2, 256, 1, 0, 300, 1024, 17), LIN(12, 3, 256, 1, 0, 129, 768, 64),
    LIN(12, 4, 256, 1, 0, 200, 2560, 130),
    LIN_X1(12, 2, 256, 0, 256, 192, 33),    /* x 4 bytes into its buffer (a caller's sub-view) */
    LIN_X1(12, 3, 256, 1, 100, 512, 40),
    SWI(12, 3, 256, 256, 512, 40),
};
/* the pair-table kernels up to their limit (on sm_90 the wgmma kernels take M > 8 from them) */
static const tcase pair_cases[] = {
    LIN(12, 2, 256, 1, 0, 300, 1024, 24), LIN(12, 3, 256, 0, 0, 512, 333, 32),
    LIN(12, 4, 256, 0, 0, 256, 100, 12), SWI(12, 2, 256, 200, 512, 20),
};

#define DISPATCH {{NULL, 0, 0}}, 1
static const suite suites[] = {
    {"quick: the dispatcher", QUICK, DISPATCH, CASES(quick_dispatch), NULL},
    {"quick: pair-table", QUICK, {{"pair", 0, 0}}, 1, CASES(quick_pair), NULL},
    {"quick: dp4a", QUICK, {{"fast", 0, 0}}, 1, CASES(quick_dp4a), NULL},
    {"quick: item length 352", QUICK, {{NULL, 352, 0}}, 1, CASES(quick_chunk), NULL},
    {"linear: every k, L, T, axis, M class", FULL, DISPATCH, NULL, 0, gen_linear_sweep},
    {"linear: interleave, wide, many chunks", FULL, DISPATCH, CASES(linear_misc), NULL},
    {"linear: Qwen3-14B MLP", BIG, DISPATCH, CASES(linear_big), NULL},
    {"fast path", FULL, {{NULL, 0, 0}, {"fast", 0, 0}}, 2, CASES(fast_misc), gen_fast_sweep},
    {"fast path: int8 to M = 16", FULL, DISPATCH, NULL, 0, gen_int8_wide},
    {"fast path: Qwen3-14B MLP", BIG, DISPATCH, CASES(fast_big), NULL},
    {"pinned item lengths", FULL, {{NULL, 352, 0}, {NULL, 384, 0}}, 2, CASES(chunk_cases), NULL},
    {"FAST past the fast kernels", FULL, DISPATCH, CASES(fastpath_exact), NULL},
    {"bf16 decode, SwiGLU", FULL, DISPATCH, CASES(decode_swiglu), gen_decode},
    {"decode + cuBLAS at M = 33..100", FULL, {{"bf16-gemm", 0, 0}}, 1, CASES(gemm_cases), NULL},
    {"wgmma", FULL, {{"wgmma", 0, 7}, {"wgmma", 0, 0}}, 2, CASES(wgmma_cases), NULL},
    {"wgmma-ss", FULL, {{"wgmma-ss", 0, 7}, {"wgmma-ss", 0, 0}}, 2, CASES(wgss_cases), NULL},
    {"pair-table to M = 32", FULL, {{"pair", 0, 0}}, 1, CASES(pair_cases), NULL},
};

/* Run one suite: its generated cases first (in the order the old hand-written calls had them:
 * drawn, then the fixed ones), on each run's context. */
static void run_suite(const suite *s)
{
    static tcase gen[MAX_CASES];
    const int n_gen = s->gen ? s->gen(gen) : 0;
    tcq_cuda_ctx *main_ctx = ctx;
    for (int r = 0; r < s->n_runs; r++) {
        const trun *run = &s->runs[r];
        const tcq_cuda_family *f = run->fam ? tcq_cuda_family_find(run->fam) : NULL;
        CHECK(!run->fam || f, "suite %s: %s is not a registry family", s->what, run->fam);
        if (run->fam && !f) continue;
        tcq_cuda_opts o = f ? f->pin : (tcq_cuda_opts){0};
        if (run->chunk) o.im_chunk = run->chunk;
        if (run->grid) o.wg_grid = run->grid;
        tcq_cuda_ctx *c = NULL;
        CHECK_OK(tcq_cuda_ctx_create(0, &c));
        if (!c) continue;
        if (tcq_cuda_ctx_set_opts(c, &o) != TCQ_OK) {
            CHECK(0, "suite %s: tcq_cuda_ctx_set_opts: %s", s->what, tcq_last_error());
            tcq_cuda_ctx_free(c);
            continue;
        }
        ctx = c;
        pinned = f;
        memset(run_cases, 0, sizeof run_cases);
        memset(run_worst, 0, sizeof run_worst);
        for (int i = 0; i < n_gen; i++) run_case(&gen[i]);
        for (int i = 0; i < s->n_cases; i++) run_case(&s->cases[i]);
        char on[96];
        snprintf(on, sizeof on, "%s%s", run->fam ? run->fam : "dispatcher", run->chunk || run->grid ? ", " : "");
        if (run->chunk) snprintf(on + strlen(on), sizeof on - strlen(on), "item %d", run->chunk);
        if (run->grid) snprintf(on + strlen(on), sizeof on - strlen(on), "grid %d", run->grid);
        for (int i = 0; i < TCQ_CF_COUNT; i++)
            if (run_cases[i])
                fprintf(stderr, "%s (%s): %s %d calls, worst relative error %.3g\n", s->what, on,
                        tcq_cuda_family_get(i)->name, run_cases[i], run_worst[i]);
        fast_print("  fast (dp4a)", &fst);
        fast_print("  fast (int8)", &fst8);
        memset(&fst, 0, sizeof fst);
        memset(&fst8, 0, sizeof fst8);
        pinned = NULL;
        ctx = main_ctx;
        tcq_cuda_ctx_free(c);
    }
}

/* Whether the sm_90a kernels run here: a wgmma pin takes an axis-1 call it can run. */
static int probe_wgmma(void)
{
    const tcq_cuda_family *f = tcq_cuda_family_get(TCQ_CF_WGMMA);
    tcq_cuda_ctx *c = NULL;
    if (tcq_cuda_ctx_create(0, &c) != TCQ_OK) return 0;
    int ok = tcq_cuda_ctx_set_opts(c, &f->pin) == TCQ_OK;
    tcq_trellis t = {{12, 2, 256}, 1, 0, 256, 512, NULL, NULL};
    ok = ok && !strcmp(tcq_cuda_linear_kernel(c, &t, 17, TCQ_PATH_EXACT), f->name);
    tcq_cuda_ctx_free(c);
    return ok;
}

/* The GPU encoder (not a linear family): bit for bit against tcq_encode_rows / _blocks. */
static void encoder_suite(int quick, int big)
{
    if (quick) {
        check_encoder(8, 2, 64, 2, 128, 1);
        check_encoder(12, 2, 256, 1, 256, 0);
        check_encoder_ex(12, 4, 256, 7, 512, 1, 1);
        check_encoder_ex(8, 2, 64, 130, 4096, 1, 0);   /* two chunks (128 + 2 rows; L=8: cheap under the sanitizers) */
        return;
    }
    check_encoder(12, 2, 256, 6, 1024, 0);
    check_encoder(12, 3, 256, 4, 768, 1);
    check_encoder(12, 4, 256, 4, 512, 0);
    check_encoder(12, 1, 256, 3, 512, 0);
    check_encoder(8, 2, 64, 5, 320, 1);
    check_encoder(10, 3, 128, 3, 384, 0);
    check_encoder(9, 4, 64, 2, 256, 0);
    check_encode_blocks(12, 2, 256, 24, 0);
    check_encode_blocks(12, 3, 256, 8, 1);
    check_encode_blocks(11, 1, 128, 8, 0);
    /* the L=12 kernels (L a constant, swizzled D at k=3/4) weighted and not, every T */
    for (int k = 1; k <= 4; k++) {
        check_encoder(12, k, 256, 5, 768, 1);
        check_encoder(12, k, 128, 3, 512, k & 1);
        check_encoder(12, k, 64, 7, 192, !(k & 1));
        check_encode_blocks(12, k, 256, 40, k & 1);
    }
    check_encoder(11, 4, 128, 3, 256, 1);   /* swizzle at the smallest G it takes: G = 8 * 2^k */
    check_encoder(9, 3, 64, 4, 128, 0);
    check_encoder(10, 4, 256, 2, 512, 0);   /* k=4, no swizzle */
    /* row scales on the GPU: zero rows, underflowing rows, large rows, one-entry rows */
    for (int k = 2; k <= 4; k++) check_encoder_ex(12, k, 256, 21, 1024, k == 3, 1);
    check_encoder_ex(8, 2, 64, 14, 320, 0, 1);
    /* the pipeline: several 2 M-weight chunks (both staging slots reused), a chunk boundary that
     * does not divide the rows, a row longer than a chunk */
    check_encoder_ex(12, 2, 256, 1100, 4096, 0, 1);
    check_encoder_ex(12, 4, 256, 1600, 2816, 0, 0);
    check_encoder_ex(12, 3, 256, 300, 8192, 1, 0);
    if (big) check_encoder_ex(12, 3, 256, 3, ((int64_t)1 << 21) + 256, 0, 0);
    check_encoder_bad_inputs();
}

int main(void)
{
    rng = test_seed();
    if (!tcq_cuda_available()) {
        fprintf(stderr, "test_cuda: no CUDA device, skipped\n");
        return 77;
    }
    CHECK_OK(tcq_cuda_ctx_create(0, &ctx));
    if (!ctx) return test_done("test_cuda");
    char desc[256];
    CHECK_OK(tcq_cuda_describe(ctx, desc, sizeof desc));
    have_wgmma = probe_wgmma();
    fprintf(stderr, "device: %s; wgmma kernels %s\n", desc, have_wgmma ? "run" : "do not run (pins fall through)");
    CHECK_OK(tcq_pool_create(0, &pool));
    check_errors();
    const char *q = getenv("TCQ_CUDA_TEST_QUICK"), *b = getenv("TCQ_CUDA_TEST_BIG");
    const int quick = q && strcmp(q, "0") != 0, big = !b || strcmp(b, "0") != 0;
    const int when = quick ? QUICK : FULL | (big ? BIG : 0);
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        if (suites[i].when & when) run_suite(&suites[i]);
    encoder_suite(quick, big);
    /* every family of the registry ran (the wgmma ones where the device has them) */
    for (int i = 0; i < TCQ_CF_COUNT; i++) {
        const tcq_cuda_family *f = tcq_cuda_family_get(i);
        CHECK(fam_cases[i] > 0 || (f->sm90 && !have_wgmma), "registry family %s ran no case", f->name);
    }
    tcq_pool_free(pool);
    tcq_cuda_ctx_free(ctx);
    return test_done(quick ? "test_cuda (quick)" : "test_cuda");
}
