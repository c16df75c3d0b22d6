/* Axis 0's host work in tcq_quant_ldlq (o/down projections; issue 23's GPU quantizer spends it on
 * the host): a random R x C tensor and a random positive definite H over its R rows through the
 * steps of tcq_quant_ldlq one by one (damp, act-order, permute, block LDL, BlockLDLQ, one pass),
 * each timed (process CPU seconds), with the products on qla's host emulation (what the GPU path calls)
 * or on CBLAS (the CPU path).  The encoder is the CPU one at a small L (8 by default) so that
 * the host work around it shows; on a GPU the encoder is the device's.  Prints a hash of the
 * codes and scales: the same for any thread count, and before / after a change that keeps the
 * bits.  Not part of the build:
 *   gcc -O2 -std=c11 -D_DEFAULT_SOURCE -ffp-contract=off -Isrc -Iinclude -I/usr/include/openblas \
 *       -o /tmp/ldlq_axis0 bench/micro/ldlq_axis0.c build/libtcq.a \
 *       $(pkg-config --libs openblas jansson libpcre2-8 libutf8proc) -lm -lpthread
 *   /tmp/ldlq_axis0 [R C threads qla(1|0) g n_mult passes L]   (default 4352 1280 2 1 8 9 1 8)
 *   /tmp/ldlq_axis0 steps [m g threads]   (the m x m steps alone; default 4352 8 1; g 0: no LDL)
 * -DBEFORE: the API before the pooled steps (to time the library before them).
 * Results: docs/PERFORMANCE.md, "On the GPU". */
#include "quant/qla.h"
#include "quant/quant.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* CPU seconds of the process (all threads, system time included: page faults count), not wall:
 * the shared machine's runs may be paused (SIGSTOP) or crowded; with one thread it is the work
 * on that thread. */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static double gauss(void)
{
    double s = 0;   /* Irwin-Hall: enough for a benchmark */
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        s += (double)(rng >> 11) / 9007199254740992.0 - 0.5;
    }
    return s * 1.7320508;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        tcq_status s_ = (x);                                                                                           \
        if (s_ != TCQ_OK) {                                                                                            \
            fprintf(stderr, "%s: %s\n", #x, tcq_last_error());                                                        \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

/* `steps m g threads`: the m x m steps alone (no W): damp + act-order permute, then the block LDL
 * with its Cholesky factor timed apart (tcq_quant_cholesky on a copy: the finish is the rest). */
static int steps(int64_t m, int g, int threads)
{
    double *H = malloc(sizeof(double) * m * m), *Lm = malloc(sizeof(double) * m * m);
    double *D = malloc(sizeof(double) * m * TCQ_MAX(g, 1));
    int64_t *perm = malloc(sizeof(int64_t) * m);
    const int64_t NB = 32;
    double *B = malloc(sizeof(double) * m * NB);
    for (int64_t i = 0; i < m * NB; i++) B[i] = gauss();
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, (int)m, (int)NB, 1.0, B, (int)NB, 0.0, H, (int)m);
    for (int64_t i = 0; i < m; i++) {
        H[i * m + i] += 1 + 3.0 * (double)((i * 7919) % m) / (double)m;
        for (int64_t j = 0; j < i; j++) H[j * m + i] = H[i * m + j];
    }
    tcq_pool *pool = NULL;
    CHECK(tcq_pool_create(threads, &pool));
    double t0 = now(), w0 = wall();
    CHECK(tcq_quant_act_order(H, m, perm));
#ifdef BEFORE
    CHECK(tcq_quant_damp(H, m, 0.1, Lm));
    CHECK(tcq_quant_permute_sym(Lm, m, perm, D));
#else
    CHECK(tcq_quant_damp_permuted(H, m, 0.1, perm, pool, Lm));
#endif
    double t1 = now(), w1 = wall();
    if (g <= 0) {   /* the permute alone */
        printf("m %lld threads %d: damp+order+permute %.3f s CPU, %.3f s wall, hash %016llx\n", (long long)m, threads,
               t1 - t0, w1 - w0, (unsigned long long)fnv(1469598103934665603ull, Lm, sizeof(double) * m * m));
        return 0;
    }
    memcpy(H, Lm, sizeof(double) * m * m);   /* H: the copy to factor alone */
    double t2 = now();
    CHECK(tcq_quant_cholesky(H, m));
    double t3 = now();
#ifdef BEFORE
    CHECK(tcq_quant_block_ldl_on(NULL, Lm, m, g, Lm, D));
#else
    CHECK(tcq_quant_block_ldl_on(NULL, pool, Lm, m, g, Lm, D));
#endif
    double t4 = now();
    /* the finish before the pool (ldl.c at 6fc4eb8), on the factored copy, alone */
    double *cbb = malloc(sizeof(double) * g * g), *D2 = malloc(sizeof(double) * m * g);
    for (int64_t b0 = 0, n = m % g ? m % g : g; b0 < m; b0 += n, n = g) {
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) cbb[r * n + c] = H[(b0 + r) * m + b0 + c];
        double *Db = D2 + b0 * g;
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) {
                double s = 0;
                for (int64_t k = 0; k <= TCQ_MIN(r, c); k++) s += cbb[r * n + k] * cbb[c * n + k];
                Db[r * n + c] = s;
            }
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)(m - b0), (int)n, 1.0, cbb,
                    (int)n, H + b0 * m + b0, (int)m);
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) H[(b0 + r) * m + b0 + c] = r == c;
    }
    double t5 = now();
    printf("the finish as one thread did it: %.3f s (%s)\n", t5 - t4,
           memcmp(H, Lm, sizeof(double) * m * m) || memcmp(D, D2, sizeof(double) * m * g) ? "other bits" : "same bits");
    uint64_t h = fnv(1469598103934665603ull, Lm, sizeof(double) * m * m);
    h = fnv(h, D, sizeof(double) * m * g);
    printf("m %lld g %d threads %d: damp+order+permute %.3f s, cholesky %.3f s, block LDL %.3f s (finish %.3f s), "
           "hash %016llx\n", (long long)m, g, threads, t1 - t0, t3 - t2, t4 - t3, (t4 - t3) - (t3 - t2),
           (unsigned long long)h);
    tcq_pool_free(pool);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "steps"))
        return steps(argc > 2 ? atoll(argv[2]) : 4352, argc > 3 ? atoi(argv[3]) : 8, argc > 4 ? atoi(argv[4]) : 1);
    const int64_t R = argc > 1 ? atoll(argv[1]) : 4352, C = argc > 2 ? atoll(argv[2]) : 1280;
    const int threads = argc > 3 ? atoi(argv[3]) : 2, use_qla = argc > 4 ? atoi(argv[4]) : 1;
    const int g = argc > 5 ? atoi(argv[5]) : 8, n_mult = argc > 6 ? atoi(argv[6]) : 9;
    const int passes = argc > 7 ? atoi(argv[7]) : 1, L = argc > 8 ? atoi(argv[8]) : 8;
    const int64_t NB = 32;   /* H = B B^T + diag(d): B [R, NB] */
    const tcq_block_params p = {L, 2, 256};
    const tcq_encode_opts enc = {TCQ_SEARCH_TWO_PASS, 0};
    float *W = malloc(sizeof(float) * R * C), *What = malloc(sizeof(float) * R * C);
    double *H = malloc(sizeof(double) * R * R), *B = malloc(sizeof(double) * R * NB);
    uint32_t *codes = malloc(sizeof(uint32_t) * R * C * p.k / 32);
    uint16_t *scales = malloc(sizeof(uint16_t) * R);
    for (int64_t i = 0; i < R * C; i++) W[i] = (float)(0.02 * gauss());
    for (int64_t i = 0; i < R * NB; i++) B[i] = gauss();
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j <= i; j++) {
            double s = 0;
            for (int64_t k = 0; k < NB; k++) s += B[i * NB + k] * B[j * NB + k];
            if (i == j) s += 1 + 3.0 * (double)((i * 7919) % R) / (double)R;
            H[i * R + j] = H[j * R + i] = s;
        }
    tcq_pool *pool = NULL;
    tcq_qla *qla = NULL;
    CHECK(tcq_pool_create(threads, &pool));
    if (use_qla) CHECK(tcq_qla_create(NULL, &qla));
    const tcq_ldlq_args a = {p, &enc, pool, W, R, C, 0, H, 0.1, 0, codes, scales, What, passes, n_mult, qla, NULL, g};
    /* tcq_quant_ldlq's axis-0 steps, as it takes them */
    double t[8];
    double *Lm = malloc(sizeof(double) * R * R), *D = malloc(sizeof(double) * R * g);
    int64_t *perm = malloc(sizeof(int64_t) * R);
    t[0] = now();
#ifdef BEFORE   /* the API before the pooled steps (-DBEFORE against that library) */
    CHECK(tcq_quant_damp(H, R, 0.1, Lm));
    t[1] = now();
    CHECK(tcq_quant_act_order(H, R, perm));
    CHECK(tcq_quant_permute_sym(Lm, R, perm, D));
    t[2] = now();
    CHECK(tcq_quant_block_ldl_on(qla, Lm, R, g, Lm, D));
#else
    t[1] = now();
    CHECK(tcq_quant_act_order(H, R, perm));
    CHECK(tcq_quant_damp_permuted(H, R, 0.1, perm, pool, Lm));
    t[2] = now();
    CHECK(tcq_quant_block_ldl_on(qla, pool, Lm, R, g, Lm, D));
#endif
    t[3] = now();
    CHECK(tcq_quant_ldlq_axis0(&a, Lm, perm));
    t[4] = now();
    double mean = 0;
    for (int64_t i = 0; i < R; i++) mean += H[i * R + i];
    for (int i = 0; i < passes; i++) CHECK(tcq_quant_ldlq_pass(&a, H, 0.1 * mean / (double)R));
    t[5] = now();
    double loss = 0, ref = 0;
    CHECK(qla ? tcq_quant_proxy_on(qla, W, What, R, C, 0, H, &loss, &ref)
              : tcq_quant_proxy(W, What, R, C, 0, H, pool, &loss, &ref));
    t[6] = now();
    uint64_t h = fnv(1469598103934665603ull, codes, sizeof(uint32_t) * R * C * p.k / 32);
    h = fnv(h, scales, sizeof(uint16_t) * R);
    printf("R %lld C %lld threads %d %s g %d n_mult %d passes %d L %d\n", (long long)R, (long long)C, threads,
           qla ? "qla-host" : "cpu", g, n_mult, passes, L);
    printf("damp %.3f  order+permute %.3f  block_ldl %.3f  blockldlq %.3f  pass %.3f  proxy %.3f  total %.3f s\n",
           t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3], t[5] - t[4], t[6] - t[5], t[6] - t[0]);
    printf("relative proxy %.6e  hash %016llx\n", loss / ref, (unsigned long long)h);
    tcq_qla_free(qla);
    tcq_pool_free(pool);
    return 0;
}
