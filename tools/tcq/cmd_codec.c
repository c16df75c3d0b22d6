/* tcq codec: codec quality on i.i.d. N(0,1) samples, coded directly (no scale), per k, against
 * the rate-distortion bound 2^-2k, with the encoder's throughput. */
#include "cli.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void codec_usage(FILE *f)
{
    fprintf(f,
            "usage: tcq codec [--L 12] [--k 1,2,3,4] [--T 256] [--samples N] [--seed S]\n"
            "                 [--search default|seams] [--seams N] [--threads N] [--device cpu|cuda] [--json]\n"
            "  Codes N i.i.d. N(0,1) samples (default 524288, rounded up to whole blocks) with the\n"
            "  trellis for each k and prints the mean squared error per weight against the\n"
            "  rate-distortion bound 2^-2k, and the encoder throughput in million weights/s.\n"
            "  The samples are coded directly (scale 1, no per-row scale), so the MSE compares with\n"
            "  ANCHORS.md's table.  --search seams adds --seams extra tail-biting candidates\n"
            "  (default 8).  --threads 0 (default): one per CPU.  --json: one object per line\n"
            "  {\"L\",\"k\",\"T\",\"samples\",\"mse\",\"rd_bound\",\"mw_per_s\",\"search\",\"seams\"}.\n");
}

static uint64_t codec_rand(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Box-Muller on 53-bit uniforms; both outputs used. */
static void codec_gauss(uint64_t seed, float *x, int64_t n)
{
    uint64_t st = seed;
    for (int64_t i = 0; i < n; i += 2) {
        const double u = (double)((codec_rand(&st) >> 11) + 1) * 0x1.0p-53;
        const double v = (double)(codec_rand(&st) >> 11) * 0x1.0p-53;
        const double r = sqrt(-2.0 * log(u));
        x[i] = (float)(r * cos(6.283185307179586 * v));
        if (i + 1 < n) x[i + 1] = (float)(r * sin(6.283185307179586 * v));
    }
}

int cmd_codec(int argc, char **argv)
{
    long long L = 12, T = 256, samples = 524288, seed = 1, threads = 0, seams = 0;
    int ks[8] = {1, 2, 3, 4}, nk = 4, json = 0, cuda = 0;
    tcq_encode_opts opts = {TCQ_SEARCH_TWO_PASS, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long *dst = NULL;
        if (cli_is_help(a)) {
            codec_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        } else if (!strcmp(a, "--device") && i + 1 < argc) {   /* cuda: the GPU encoder, same codes */
            cuda = !strcmp(argv[++i], "cuda");
            if (!cuda && strcmp(argv[i], "cpu")) {
                fprintf(stderr, "tcq codec: --device cpu|cuda, got '%s'\n", argv[i]);
                return 2;
            }
            continue;
        } else if (!strcmp(a, "--L")) dst = &L;
        else if (!strcmp(a, "--T")) dst = &T;
        else if (!strcmp(a, "--samples")) dst = &samples;
        else if (!strcmp(a, "--seed")) dst = &seed;
        else if (!strcmp(a, "--threads")) dst = &threads;
        else if (!strcmp(a, "--seams")) dst = &seams;
        else if ((!strcmp(a, "--k") || !strcmp(a, "--search")) && i + 1 < argc) {
            if (!strcmp(a, "--k")) {
                nk = cli_parse_int_list(argv[i + 1], ks, 8);
                if (nk < 0) {
                    fprintf(stderr, "tcq codec: --k needs a list like 2,3,4, got '%s'\n", argv[i + 1]);
                    return 2;
                }
            } else {
                tcq_status s = tcq_search_parse(argv[i + 1], &opts.search);
                if (s != TCQ_OK) return cli_fail(s, "codec --search");
            }
            i++;
            continue;
        }
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "tcq codec: unknown or incomplete option '%s'\n", a);
            codec_usage(stderr);
            return 2;
        }
        if (cli_parse_long(a, argv[i + 1], dst)) return 2;
        i++;
    }
    if (samples <= 0 || samples > (1ll << 30) || threads < 0 || threads > 1024 || seams < 0 || seams > 1 << 20) {
        fprintf(stderr, "tcq codec: need 0 < --samples <= 2^30, 0 <= --threads <= 1024, --seams >= 0\n");
        return 2;
    }
    opts.seams = (int)seams;
    for (int i = 0; i < nk; i++) {
        tcq_status s = tcq_block_check((tcq_block_params){(int)L, ks[i], (int)T});
        if (s != TCQ_OK) return cli_fail(s, "codec");
    }
    const int64_t nblk = (samples + T - 1) / T, n = nblk * T;
    float *x = malloc((size_t)n * sizeof *x);
    uint32_t *words = malloc((size_t)n * 4 / 8);   /* k <= 4: n*k/32 words of 4 bytes */
    tcq_pool *pool = NULL;
    tcq_cuda_ctx *gpu = NULL;
    int rc = 0;
    if (!x || !words) {
        fprintf(stderr, "tcq codec: out of memory for %lld samples\n", (long long)n);
        rc = 1;
        goto out;
    }
    tcq_status s = tcq_pool_create((int)threads, &pool);
    if (s != TCQ_OK) {
        rc = cli_fail(s, "codec: thread pool");
        goto out;
    }
    codec_gauss((uint64_t)seed, x, n);
    if (!json)
        printf("tcq codec: %lld N(0,1) samples, L=%lld T=%lld, search %s%s, %d threads, ISA %s\n"
               "   k        MSE   RD bound  MSE/bound     Mw/s\n",
               (long long)n, L, T, tcq_search_name(opts.search),
               opts.search == TCQ_SEARCH_SEAMS ? (seams ? "" : " (8 seams)") : "", tcq_pool_size(pool),
               cuda ? "cuda" : tcq_isa_name(tcq_isa_active()));
    for (int i = 0; i < nk; i++) {
        const tcq_block_params p = {(int)L, ks[i], (int)T};
        double sq = 0, t0 = cli_now();
        if (cuda && !gpu) s = tcq_cuda_ctx_create(0, &gpu);
        if (s == TCQ_OK) s = cuda ? tcq_cuda_encode_blocks(gpu, p, &opts, x, NULL, nblk, words, &sq)
                                  : tcq_encode_blocks(p, &opts, x, NULL, nblk, words, pool, &sq);
        const double dt = cli_now() - t0;
        if (s != TCQ_OK) {
            rc = cli_fail(s, "codec: encode");
            goto out;
        }
        const double mse = sq / (double)n, bound = pow(2.0, -2.0 * ks[i]), mws = (double)n / dt / 1e6;
        if (json) {
            json_t *o = json_pack("{s:I,s:i,s:I,s:I,s:f,s:f,s:f,s:s,s:i}", "L", (json_int_t)L, "k", ks[i], "T",
                                  (json_int_t)T, "samples", (json_int_t)n, "mse", mse, "rd_bound", bound,
                                  "mw_per_s", mws, "search", tcq_search_name(opts.search), "seams",
                                  opts.search == TCQ_SEARCH_SEAMS ? (seams ? (int)seams : 8) : 0);
            char *txt = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8)) : NULL;
            if (!txt) {
                fprintf(stderr, "tcq codec: JSON output failed\n");
                json_decref(o);
                rc = 1;
                goto out;
            }
            printf("%s\n", txt);
            free(txt);
            json_decref(o);
        } else {
            printf("%4d  %9.6f  %9.6f  %9.4f  %7.3f\n", ks[i], mse, bound, mse / bound, mws);
        }
        fflush(stdout);
    }
out:
    tcq_cuda_ctx_free(gpu);
    tcq_pool_free(pool);
    free(x);
    free(words);
    return rc;
}
