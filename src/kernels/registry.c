/* The kernel registry (registry.h), built from the dispatcher's own naming: for each ISA variant,
 * family, path and regime it asks linear.c which kernel a call of a few sample M would run, and
 * lists each distinct name once (the first setting that reaches it) with the M range it runs for.
 * A new op family is one row of families[]; a new kernel inside a family (a tr_table slot, a dense
 * kernel) appears by itself, since its name comes from the dispatcher. */
#include "registry.h"

#include "../core/internal.h"

#include <pthread.h>
#include <string.h>

/* name of the kernel for this family x variant x path x regime x M */
typedef void (*kname_fn)(int fam_arg, int isa, unsigned exclude, tcq_kpath path, tcq_kregime reg, int64_t M,
                         char *buf, size_t n);

static void trellis_fam(int op, int isa, unsigned exclude, tcq_kpath path, tcq_kregime reg, int64_t M, char *buf,
                        size_t n)
{
    tcq_trellis_kernel_name(isa, exclude, path, op, reg, M, buf, n);
}

static void dense_fam(int fmt, int isa, unsigned exclude, tcq_kpath path, tcq_kregime reg, int64_t M, char *buf,
                      size_t n)
{
    (void)exclude;
    tcq_dense_kernel_name((tcq_wformat)fmt, isa, path, reg, M, buf, n);
}

static const struct family {
    const char *op;
    kname_fn name;
    int arg;              /* trellis: op (0 scatter, 1 reduce, 2 SwiGLU); dense: the tcq_wformat */
    tcq_wformat fmt;
    int axis, swiglu;
    int regimes;          /* 1: paths x regimes apply (trellis); 0: AUTO only */
    const char *reference;
} families[] = {
    {"trellis.reduce", trellis_fam, 1, TCQ_WF_TRELLIS, 1, 0, 1,
     "float64 x W of tcq_weight_decode; fast: the documented int8 quantization in float64"},
    {"trellis.scatter", trellis_fam, 0, TCQ_WF_TRELLIS, 0, 0, 1,
     "float64 x W of tcq_weight_decode; fast: the documented int8 quantization in float64"},
    {"swiglu", trellis_fam, 2, TCQ_WF_TRELLIS, 1, 1, 1, "silu(float64 gate) * float64 up, as above"},
    {"f32", dense_fam, TCQ_WF_F32, TCQ_WF_F32, 0, 0, 0, "float64 x W"},
    /* regimes: the GEMM regime pins their GEMM, the others their tiles (the path is ignored) */
    {"f16", dense_fam, TCQ_WF_F16, TCQ_WF_F16, 0, 0, 1, "float64 x widened W; GEMM: also the scalar sum, bit for bit"},
    {"bf16", dense_fam, TCQ_WF_BF16, TCQ_WF_BF16, 0, 0, 1,
     "float64 x widened W; GEMM: also the scalar sum, bit for bit; dpbf16 (fast): float64 within kernels.h's bf16 bound"},
    {"affine", dense_fam, TCQ_WF_AFFINE, TCQ_WF_AFFINE, 0, 0, 0, "float64 x fmaf(scale, q, bias)"},
};
enum { N_FAMILIES = sizeof families / sizeof families[0] };

static const struct variant {
    const char *name;
    int isa;
    unsigned exclude;
} variants[] = {
    {"scalar", TCQ_ISA_SCALAR, 0},
    {"avx2", TCQ_ISA_AVX2, TCQ_KV_NO_AVXVNNI},
    {"avx2vnni", TCQ_ISA_AVX2, 0},
    {"avx512", TCQ_ISA_AVX512, TCQ_KV_NO_AMX},
    {"avx512amx", TCQ_ISA_AVX512, 0},
};

#define MAX_KERNELS 512
#define M_TOP ((int64_t)1 << 24)
#define SAMPLE_SPAN (2 * TCQ_MAX_BATCH)   /* past every crossover the dispatcher has */

static tcq_kernel_info g_k[MAX_KERNELS];
static int g_n;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int isa_runs(int isa)
{
    const tcq_isa keep = tcq_isa_active();
    const int ok = tcq_isa_set((tcq_isa)isa) == TCQ_OK;
    tcq_isa_set(keep);
    return ok;
}

static void build(void)
{
    /* the M a forced regime accepts: m1 one row, shared 2..4, tile and gemm any M from 5 */
    static const int64_t lo[TCQ_KR_COUNT] = {1, 1, 2, 5, 5}, hi[TCQ_KR_COUNT] = {M_TOP, 1, 4, M_TOP, M_TOP};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        if (!isa_runs(variants[v].isa)) continue;
        for (int f = 0; f < N_FAMILIES; f++) {
            const struct family *F = &families[f];
            for (int p = 0; p < (F->regimes ? 2 : 1); p++)
                for (int r = F->regimes ? TCQ_KR_M1 : TCQ_KR_AUTO; r < (F->regimes ? TCQ_KR_COUNT : 1); r++) {
                    const tcq_kpath path = F->regimes ? (p ? TCQ_PATH_FAST : TCQ_PATH_EXACT) : TCQ_PATH_AUTO;
                    /* sample every M = lo .. lo+SAMPLE_SPAN: the names change inside a regime only
                     * at small M (tr_table.fast_shared_from, the exact path's sgemm from 16, the
                     * dense direct kernels up to TCQ_MAX_BATCH, the f16/bf16 GEMM from 33); the
                     * last sample's kernel runs to hi.  test_kernels checks the name at random M
                     * of each range. */
                    int prev = -1;
                    const int64_t top = lo[r] + SAMPLE_SPAN;
                    for (int64_t M = lo[r]; M <= hi[r] && M <= top; M++) {
                        char nm[96];
                        F->name(F->arg, variants[v].isa, variants[v].exclude, path, (tcq_kregime)r, M, nm, sizeof nm);
                        if (prev >= 0 && !strcmp(g_k[prev].name, nm)) {
                            g_k[prev].m_max = M == top ? hi[r] : M;
                            continue;
                        }
                        prev = -1;
                        int dup = 0;
                        for (int i = 0; i < g_n && !dup; i++) dup = !strcmp(g_k[i].name, nm);
                        if (dup || g_n == MAX_KERNELS) continue;
                        tcq_kernel_info *k = &g_k[g_n];
                        memset(k, 0, sizeof *k);
                        memcpy(k->name, nm, sizeof k->name);
                        k->op = F->op, k->family = f, k->fmt = F->fmt, k->axis = F->axis, k->swiglu = F->swiglu;
                        k->path = path, k->regime = (tcq_kregime)r, k->isa = variants[v].isa;
                        k->exclude = variants[v].exclude, k->variant = variants[v].name;
                        k->m_min = M, k->m_max = M == top ? hi[r] : M;
                        k->reference = F->reference;
                        prev = g_n++;
                    }
                }
        }
    }
}

int tcq_kernel_count(void)
{
    pthread_once(&g_once, build);
    return g_n;
}

const tcq_kernel_info *tcq_kernel_get(int i) { return i >= 0 && i < tcq_kernel_count() ? &g_k[i] : NULL; }

const tcq_kernel_info *tcq_kernel_find(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < tcq_kernel_count(); i++)
        if (!strcmp(g_k[i].name, name)) return &g_k[i];
    return NULL;
}
