/* Axis 0's host work in tcq_quant_ldlq (o/down projections; issue 23's GPU quantizer spends it on
 * the host): a random R x C tensor and a random positive definite H over its R rows through the
 * steps of tcq_quant_ldlq one by one (damp, act-order, permute, block LDL, BlockLDLQ, one pass),
 * each timed (wall clock), with the products on qla's host emulation (what the GPU path calls)
 * or on CBLAS (the CPU path).  The encoder is the CPU one at a small L (8 by default) so that
 * the host work around it shows; on a GPU the encoder is the device's.  Prints a hash of the
 * codes and scales: the same for any thread count, and before / after a change that keeps the
 * bits.  Not part of the build:
 *   gcc -O2 -std=c11 -D_DEFAULT_SOURCE -ffp-contract=off -Isrc -Iinclude -I/usr/include/openblas \
 *       -o /tmp/ldlq_axis0 bench/micro/ldlq_axis0.c build/libtcq.a \
 *       $(pkg-config --libs openblas jansson libpcre2-8 libutf8proc) -lm -lpthread
 *   /tmp/ldlq_axis0 [R C threads qla(1|0) g n_mult passes L]   (default 4352 1280 2 1 8 9 1 8)
 * Results: docs/PERFORMANCE.md, "On the GPU". */
#include "quant/qla.h"
#include "quant/quant.h"

#include <stdio.h>
#include <time.h>

static double now(void)
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

int main(int argc, char **argv)
{
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
