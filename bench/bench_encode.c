/* tcq bench encode: throughput of tcq_encode_rows (the real path: row scales, blocks on the
 * pool) on a Gaussian matrix, in million weights/s, median of several repeats. */
#include "bench.h"
#include "cli.h"
#include "encode/viterbi.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CPU seconds used by the whole process (all threads): on a shared machine the wall clock
 * counts time other jobs held the cores, CPU time does not. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void benc_usage(FILE *f)
{
    fprintf(f,
            "usage: tcq bench encode [--L 12] [--k 2,3,4] [--T 256] [--threads N] [--rows R] [--cols C]\n"
            "                        [--repeats N] [--search default|seams] [--seams N]\n"
            "                        [--isa scalar|avx2|avx512] [--json]\n"
            "  Codes a random Gaussian matrix [R, C] (default 64 x 4096) with tcq_encode_rows for each\n"
            "  k, --repeats times (default 5) after one warm-up, and prints the median, min and max\n"
            "  throughput in million weights/s of wall time, the median per CPU-second, and the speed of\n"
            "  the fastest of 256 single-block encodes on one thread (what one core does when nothing\n"
            "  else runs on it; on a shared machine the other two figures include other jobs' time).\n"
            "  --threads 0 (default): one per CPU.\n");
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_encode_main(int argc, char **argv)
{
    long long L = 12, T = 256, threads = 0, R = 64, C = 4096, repeats = 5, seams = 0;
    int ks[8] = {2, 3, 4}, nk = 3, json = 0;
    tcq_encode_opts opts = {TCQ_SEARCH_TWO_PASS, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long *dst = NULL;
        if (cli_is_help(a)) {
            benc_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        } else if (!strcmp(a, "--L")) dst = &L;
        else if (!strcmp(a, "--T")) dst = &T;
        else if (!strcmp(a, "--threads")) dst = &threads;
        else if (!strcmp(a, "--rows")) dst = &R;
        else if (!strcmp(a, "--cols")) dst = &C;
        else if (!strcmp(a, "--repeats")) dst = &repeats;
        else if (!strcmp(a, "--seams")) dst = &seams;
        else if (i + 1 < argc && (!strcmp(a, "--k") || !strcmp(a, "--search") || !strcmp(a, "--isa"))) {
            tcq_status s = TCQ_OK;
            if (!strcmp(a, "--k")) {
                if ((nk = cli_parse_int_list(argv[i + 1], ks, 8)) < 0) {
                    fprintf(stderr, "tcq bench encode: --k needs a list like 2,3,4\n");
                    return 2;
                }
            } else if (!strcmp(a, "--search")) {
                s = tcq_search_parse(argv[i + 1], &opts.search);
            } else {
                tcq_isa isa;
                s = tcq_isa_parse(argv[i + 1], &isa);
                if (s == TCQ_OK) s = tcq_isa_set(isa);
            }
            if (s != TCQ_OK) return cli_fail(s, a);
            i++;
            continue;
        }
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "tcq bench encode: unknown or incomplete option '%s'\n", a);
            benc_usage(stderr);
            return 2;
        }
        if (cli_parse_long(a, argv[i + 1], dst)) return 2;
        i++;
    }
    if (R <= 0 || C <= 0 || R * C > (1ll << 28) || repeats <= 0 || repeats > 1000 || threads < 0 || threads > 1024 ||
        seams < 0) {
        fprintf(stderr, "tcq bench encode: need R, C > 0, R*C <= 2^28, 1 <= --repeats <= 1000, --threads >= 0\n");
        return 2;
    }
    opts.seams = (int)seams;
    for (int i = 0; i < nk; i++) {
        tcq_status s = tcq_block_check((tcq_block_params){(int)L, ks[i], (int)T});
        if (s != TCQ_OK) return cli_fail(s, "bench encode");
        if (C % T) {
            fprintf(stderr, "tcq bench encode: --cols must be a multiple of T=%lld\n", T);
            return 2;
        }
    }
    const int64_t n = R * C;
    float *W = malloc((size_t)n * sizeof *W);
    uint32_t *codes = malloc((size_t)n / 2);
    uint16_t *scales = malloc((size_t)R * sizeof *scales);
    double *mws = malloc((size_t)repeats * sizeof *mws), *mwc = malloc((size_t)repeats * sizeof *mwc);
    tcq_pool *pool = NULL;
    int rc = 0;
    if (!W || !codes || !scales || !mws || !mwc) {
        fprintf(stderr, "tcq bench encode: out of memory\n");
        rc = 1;
        goto out;
    }
    tcq_status s = tcq_pool_create((int)threads, &pool);
    if (s != TCQ_OK) {
        rc = cli_fail(s, "bench encode: thread pool");
        goto out;
    }
    uint64_t st = 12345;
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = (st += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        const double u = (double)((z >> 11) + 1) * 0x1.0p-53, v = (double)(z & 0xfffff) / 1048576.0;
        W[i] = 0.02f * (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
    }
    if (!json)
        printf("tcq bench encode: [%lld, %lld] L=%lld T=%lld search %s, %d threads, ISA %s, %lld repeats\n"
               "   k   median Mw/s     min     max   Mw/CPU-s  best-block Mw/s\n",
               R, C, L, T, tcq_search_name(opts.search), tcq_pool_size(pool), tcq_isa_name(tcq_isa_active()), repeats);
    for (int i = 0; i < nk; i++) {
        const tcq_block_params p = {(int)L, ks[i], (int)T};
        for (long long r = -1; r < repeats; r++) {   /* r = -1: warm-up */
            const double t0 = cli_now(), c0 = cpu_now();
            s = tcq_encode_rows(p, &opts, W, NULL, R, C, codes, scales, pool, NULL);
            const double dt = cli_now() - t0, dc = cpu_now() - c0;
            if (s != TCQ_OK) {
                rc = cli_fail(s, "bench encode");
                goto out;
            }
            if (r >= 0) {
                mws[r] = (double)n / dt / 1e6;
                mwc[r] = (double)n / dc / 1e6;
            }
        }
        qsort(mws, (size_t)repeats, sizeof *mws, cmp_double);
        qsort(mwc, (size_t)repeats, sizeof *mwc, cmp_double);
        const int h = (int)(repeats / 2);
        const double med = repeats % 2 ? mws[h] : 0.5 * (mws[h - 1] + mws[h]);
        const double medc = repeats % 2 ? mwc[h] : 0.5 * (mwc[h - 1] + mwc[h]);
        /* single blocks, one thread, scratch reused as tcq_encode_rows does */
        double best_blk = 1e30;
        {
            vit_scratch sc = {0};
            float xb[256];
            uint32_t wb[32];
            for (int64_t b = 0; b < 256 && b < n / T; b++) {
                for (int t = 0; t < T; t++) xb[t] = W[b * T + t] * 50.0f;   /* ~unit variance */
                const double t0 = cli_now();
                s = vit_encode_block(p, &opts, &sc, xb, NULL, wb, NULL, NULL);
                const double dt = cli_now() - t0;
                if (s != TCQ_OK) break;
                if (dt < best_blk) best_blk = dt;
            }
            vit_scratch_release(&sc);
            if (s != TCQ_OK) {
                rc = cli_fail(s, "bench encode: block");
                goto out;
            }
        }
        const double blk_mws = (double)T / best_blk / 1e6;
        if (json) {
            json_t *o = json_pack("{s:s,s:I,s:i,s:I,s:i,s:s,s:s,s:I,s:I,s:f,s:f,s:f,s:f,s:f}", "bench", "encode", "L",
                                  (json_int_t)L, "k", ks[i], "T", (json_int_t)T, "threads", tcq_pool_size(pool),
                                  "isa", tcq_isa_name(tcq_isa_active()), "search", tcq_search_name(opts.search),
                                  "weights", (json_int_t)n, "repeats", (json_int_t)repeats, "mw_per_s", med,
                                  "mw_per_s_min", mws[0], "mw_per_s_max", mws[repeats - 1], "mw_per_cpu_s", medc, "best_block_mw_per_s", blk_mws);
            char *txt = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6)) : NULL;
            if (txt) printf("%s\n", txt);
            else rc = 1;
            free(txt);
            json_decref(o);
        } else {
            printf("%4d  %12.3f  %7.3f %7.3f   %8.3f  %15.3f\n", ks[i], med, mws[0], mws[repeats - 1], medc, blk_mws);
        }
        fflush(stdout);
    }
out:
    tcq_pool_free(pool);
    free(W);
    free(codes);
    free(scales);
    free(mws);
    free(mwc);
    return rc;
}
