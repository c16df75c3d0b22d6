/* tcq demo --codec: the codec alone.  Codes a synthetic N(0, sigma) matrix with the trellis,
 * decodes it, and prints the error against the rate-distortion bound and the speed. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void demo_usage(FILE *f)
{
    fprintf(f, "usage: tcq demo --codec [--rows R] [--cols C] [--k K] [--L L] [--threads N] [--seed S]\n"
               "  Codes a random Gaussian matrix [R, C] (default 256 x 4096) at k bits per weight\n"
               "  (default 2, L 12, T 256), decodes it, and prints MSE and throughput.\n");
}

static uint64_t demo_rand(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int cmd_demo_codec(int argc, char **argv)
{
    long long R = 256, C = 4096, k = 2, L = 12, threads = 0, seed = 1;
    for (int i = 1; i < argc; i++) {
        long long *dst = NULL;
        if (cli_is_help(argv[i])) {
            demo_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--rows")) dst = &R;
        else if (!strcmp(argv[i], "--cols")) dst = &C;
        else if (!strcmp(argv[i], "--k")) dst = &k;
        else if (!strcmp(argv[i], "--L")) dst = &L;
        else if (!strcmp(argv[i], "--threads")) dst = &threads;
        else if (!strcmp(argv[i], "--seed")) dst = &seed;
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "tcq demo: unknown or incomplete option '%s'\n", argv[i]);
            demo_usage(stderr);
            return 2;
        }
        const char *flag = argv[i++];
        if (cli_parse_long(flag, argv[i], dst)) return 2;
    }
    const tcq_block_params p = {(int)L, (int)k, 256};
    tcq_status s = tcq_block_check(p);
    if (s != TCQ_OK) return cli_fail(s, "demo");
    if (R <= 0 || C <= 0 || C % 256 || R * C > (1ll << 28)) {
        fprintf(stderr, "tcq demo: need R > 0, C a multiple of 256 and R*C <= 2^28\n");
        return 2;
    }
    const float sigma = 0.02f;   /* a typical weight scale */
    float *W = malloc((size_t)(R * C) * sizeof *W), *D = malloc((size_t)(R * C) * sizeof *D);
    uint32_t *codes = malloc((size_t)(R * C * k / 32) * 4);
    uint16_t *scales = malloc((size_t)R * 2);
    tcq_pool *pool = NULL;
    if (!W || !D || !codes || !scales) {
        fprintf(stderr, "tcq demo: out of memory\n");
        return 1;
    }
    uint64_t st = (uint64_t)seed;
    for (long long i = 0; i < R * C; i++) {
        double u = (double)((demo_rand(&st) >> 11) + 1) * 0x1.0p-53, v = (double)(demo_rand(&st) >> 11) * 0x1.0p-53;
        W[i] = sigma * (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
    }
    int rc = 0;
    if ((s = tcq_pool_create((int)threads, &pool)) != TCQ_OK) {
        rc = cli_fail(s, "demo: thread pool");
        goto out;
    }
    double t0 = cli_now(), sq = 0;
    s = tcq_encode_rows(p, NULL, W, NULL, R, C, codes, scales, pool, &sq);
    double t1 = cli_now();
    if (s != TCQ_OK) {
        rc = cli_fail(s, "demo: encode");
        goto out;
    }
    tcq_trellis w = {p, 1, 0, R, C, codes, scales};
    s = tcq_trellis_decode(&w, D);
    double t2 = cli_now();
    if (s != TCQ_OK) {
        rc = cli_fail(s, "demo: decode");
        goto out;
    }
    double e = 0, ref = 0;
    for (long long i = 0; i < R * C; i++) {
        e += ((double)W[i] - D[i]) * ((double)W[i] - D[i]);
        ref += (double)W[i] * W[i];
    }
    const double n = (double)(R * C), nmse = e / ref;
    printf("tcq demo: %lld x %lld Gaussian matrix, L=%lld k=%lld T=256, %d threads, ISA %s\n", R, C, L, k,
           tcq_pool_size(pool), tcq_isa_name(tcq_isa_active()));
    printf("  bits/weight      %.4f (k + 16/C for the fp16 row scales)\n", tcq_trellis_bpw(&w));
    printf("  normalized MSE   %.5f   (rate-distortion bound 2^-2k = %.5f, ratio %.3f)\n", nmse,
           pow(2.0, -2.0 * (double)k), nmse / pow(2.0, -2.0 * (double)k));
    printf("  SQNR             %.2f dB\n", -10.0 * log10(nmse));
    printf("  encode           %.3f s  (%.2f M weights/s)\n", t1 - t0, n / (t1 - t0) / 1e6);
    printf("  decode           %.3f s  (%.1f M weights/s, scalar reference decode)\n", t2 - t1, n / (t2 - t1) / 1e6);
    if ((double)e != (double)e || fabs(e - sq) > 1e-6 * (e + 1e-30)) {
        fprintf(stderr, "tcq demo: decoded error %.9g disagrees with the encoder's %.9g\n", e, sq);
        rc = 1;
    }
out:
    tcq_pool_free(pool);
    free(W);
    free(D);
    free(codes);
    free(scales);
    return rc;
}
