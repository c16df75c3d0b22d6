/* `tcq bench kernels --device cuda` (also `tcq cuda-bench`): the CUDA kernels at the
 * Qwen3-14B MLP shapes against the measured copy bandwidth and cuBLAS bf16 at the same shapes.
 * Times are medians of CUDA-graph replays of back-to-back calls cycling through enough weight
 * copies to exceed the L2 several times.  Weights are random codes (every bit pattern is a
 * valid block, and the kernels' speed does not depend on the values). */
#include "cli.h"
#include "kernels/cuda/timers.h"

#include <stdlib.h>
#include <string.h>

typedef struct cw {
    tcq_trellis h;
    void *dev;
    tcq_trellis d;
} cw;

static uint64_t bench_rng = 0x5eed;
static uint32_t rnd32(void)
{
    uint64_t z = (bench_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

static tcq_status make_copies(tcq_cuda_ctx *ctx, int k, int axis, int64_t out, int64_t in, int n, cw *w)
{
    tcq_trellis h = {{12, k, 256}, axis, 0, axis ? out : in, axis ? in : out, NULL, NULL};
    const int64_t nw = h.rows * h.cols * k / 32;
    uint32_t *codes = malloc((size_t)nw * 4);
    uint16_t *scales = malloc((size_t)h.rows * 2);
    if (!codes || !scales) {
        free(codes);
        free(scales);
        return TCQ_ERR_NOMEM;
    }
    for (int64_t i = 0; i < nw; i++) codes[i] = rnd32();
    for (int64_t r = 0; r < h.rows; r++) scales[r] = tcq_f32_to_f16(0.02f);
    h.codes = codes;
    h.scales = scales;
    tcq_status s = TCQ_OK;
    for (int i = 0; i < n && s == TCQ_OK; i++) {
        w[i].h = h;
        const size_t b = tcq_cuda_trellis_bytes(&h);
        s = tcq_cuda_malloc(&w[i].dev, b);
        if (s == TCQ_OK) s = tcq_cuda_trellis_upload(ctx, &h, w[i].dev, b, &w[i].d);
        codes[i % nw] ^= 0x9u;   /* copies differ */
    }
    if (s == TCQ_OK) s = tcq_cuda_sync(ctx);
    free(codes);
    free(scales);
    return s;
}

static void free_copies(cw *w, int n)
{
    for (int i = 0; i < n; i++) tcq_cuda_free(w[i].dev);
}

int bench_kernels_cuda(int argc, char **argv)
{
    int ks[4] = {2, 3, 4}, nk = 3, Ms[16] = {1, 2, 4, 8, 16, 32, 512}, nM = 7, json = 0, reps = 50, trials = 7;
    int64_t big = 17408, small = 5120;
    int do_reduce = 1, do_scatter = 1, do_swiglu = 1, do_dense = 1, do_encode = 1, do_fast = 1;
    tcq_cuda_opts kopt = {0};   /* --pin: the context's kernel choices (tcq_cuda_ctx_set_opts) */
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: tcq cuda-bench [--k 2,3,4] [--M 1,2,4,8,16,32,512] [--ops reduce,scatter,swiglu,dense,encode]\n"
                   "                      [--path exact,fast] [--reps N] [--trials N] [--shape OUTxIN] [--json]\n"
                   "  reduce/scatter run the exact path, and the fast (int8) path for M <= 8 unless --path exact\n"
                   "  --shape: gate/up's [out, in] (default 17408x5120, Qwen3-14B's MLP); down is [in, out]\n"
                   "  --pin pair|dp4a|wgmma|wgmma-ss|no-wgmma|chunk=N|grid=N[,...]: the kernel choices of\n"
                   "  tcq_cuda_opts (pair-table kernels, dp4a fast path, a wgmma kernel at every M it takes, the\n"
                   "  wgmma kernels off, the integer kernels' item length, the wgmma kernels' block count)\n"
                   "  TCQ_BENCH_NCOPY=N: N weight copies (default: enough to exceed 3x the L2; 1: L2-resident)\n");
            return 0;
        } else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) i++;   /* `tcq bench kernels --device cuda` */
        else if (!strcmp(argv[i], "--k") && i + 1 < argc) {
            if ((nk = cli_parse_int_list(argv[++i], ks, 4)) < 0) return cli_fail(TCQ_ERR_INVALID_ARG, "--k");
        } else if (!strcmp(argv[i], "--M") && i + 1 < argc) {
            if ((nM = cli_parse_int_list(argv[++i], Ms, 16)) < 0) return cli_fail(TCQ_ERR_INVALID_ARG, "--M");
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc) {
            const char *o = argv[++i];
            do_reduce = strstr(o, "reduce") != NULL;
            do_scatter = strstr(o, "scatter") != NULL;
            do_swiglu = strstr(o, "swiglu") != NULL;
            do_dense = strstr(o, "dense") != NULL;
            do_encode = strstr(o, "encode") != NULL;
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            long long o, n;
            if (cli_parse_shape(argv[i], argv[i + 1], &o, &n)) return 2;
            big = o, small = n;
            i++;
        } else if (!strcmp(argv[i], "--pin") && i + 1 < argc) {
            for (const char *p = argv[++i]; *p;) {
                const size_t n = strcspn(p, ",");
                int v = 0;
                if (n == 4 && !strncmp(p, "pair", 4)) kopt.pair_table = 1;
                else if (n == 4 && !strncmp(p, "dp4a", 4)) kopt.fast_dp4a = 1;
                else if (n == 5 && !strncmp(p, "wgmma", 5)) kopt.wgmma = 1;
                else if (n == 8 && !strncmp(p, "wgmma-ss", 8)) kopt.wgmma_ss = 1;
                else if (n == 8 && !strncmp(p, "no-wgmma", 8)) kopt.wgmma = kopt.wgmma_ss = -1;
                else if (sscanf(p, "chunk=%d", &v) == 1) kopt.im_chunk = v;
                else if (sscanf(p, "grid=%d", &v) == 1) kopt.wg_grid = v;
                else return cli_fail(TCQ_ERR_INVALID_ARG, "--pin takes pair|dp4a|wgmma|wgmma-ss|no-wgmma|chunk=N|grid=N");
                p += n;
                if (*p == ',') p++;
            }
        } else if (!strcmp(argv[i], "--path") && i + 1 < argc) {
            do_fast = strstr(argv[++i], "fast") != NULL;   /* exact always runs (the reference line) */
        } else {
            fprintf(stderr, "tcq cuda-bench: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    tcq_cuda_ctx *ctx;
    tcq_status s = tcq_cuda_ctx_create(0, &ctx);
    if (s == TCQ_OK && (s = tcq_cuda_ctx_set_opts(ctx, &kopt)) != TCQ_OK) tcq_cuda_ctx_free(ctx);
    if (s != TCQ_OK) return cli_fail(s, "cuda-bench");
    char desc[256];
    tcq_cuda_describe(ctx, desc, sizeof desc);
    double bw = 0;
    s = tcq_cuda_time_copy(ctx, (size_t)1 << 30, 10, trials, &bw);
    if (s != TCQ_OK) return cli_fail(s, "cuda-bench: copy bandwidth");
    int n_sm = 0;
    {
        const char *p = strstr(desc, ", ");
        n_sm = p ? atoi(p + 2) : 0;
    }
    if (json) printf("{\"op\":\"bandwidth\",\"gbps\":%.1f,\"device\":\"%s\"}\n", bw, desc);
    else printf("device: %s\ncopy bandwidth (read+write): %.0f GB/s\n\n%-8s %4s %2s %4s %5s %10s %10s %8s %10s %9s\n", desc, bw,
                "op", "axis", "k", "M", "path", "us", "GB/s", "frac_bw", "cuBLAS us", "speedup");
    /* dense baselines first, so every trellis line can print its ratio */
    double dense_us[2][16] = {{0}};
    if (do_dense)
        for (int a = 0; a < 2; a++)
            for (int mi = 0; mi < nM; mi++) {
                const int64_t out = a ? big : small, in = a ? small : big;
                const int ncopy = Ms[mi] >= 256 ? 2 : 6;
                s = tcq_cuda_time_dense_bf16(ctx, out, in, Ms[mi], ncopy, reps, trials, &dense_us[a][mi]);
                if (s != TCQ_OK) return cli_fail(s, "cuda-bench: cuBLAS");
                if (json)
                    printf("{\"op\":\"dense\",\"dtype\":\"bf16\",\"out\":%lld,\"in\":%lld,\"M\":%d,\"us\":%.2f,\"gflops\":%.1f}\n",
                           (long long)out, (long long)in, Ms[mi], dense_us[a][mi],
                           2.0 * out * in * Ms[mi] / (dense_us[a][mi] * 1e3));
            }
    for (int ki = 0; ki < nk; ki++) {
        const int k = ks[ki];
        for (int a = 1; a >= 0; a--) {
            if ((a == 1 && !do_reduce && !do_swiglu) || (a == 0 && !do_scatter)) continue;
            const int64_t out = a ? big : small, in = a ? small : big;
            const double wbytes = (double)out * in * k / 8 + 2.0 * (a ? out : in);
            int ncopy = (int)(3.0 * 60e6 / wbytes) + 2;
            if (ncopy > 12) ncopy = 12;
            /* TCQ_BENCH_NCOPY=1: one copy, L2-resident where it fits (separates memory latency
             * from what happens inside the SMs) */
            const char *nc = getenv("TCQ_BENCH_NCOPY");
            if (nc && atoi(nc) > 0) ncopy = atoi(nc);
            cw *w = calloc((size_t)ncopy * 2, sizeof *w);
            const tcq_trellis **wp = calloc((size_t)ncopy * 2, sizeof *wp);
            s = make_copies(ctx, k, a, out, in, a ? 2 * ncopy : ncopy, w);
            if (s != TCQ_OK) return cli_fail(s, "cuda-bench: weights");
            for (int i = 0; i < (a ? 2 * ncopy : ncopy); i++) wp[i] = &w[i].d;
            for (int mi = 0; mi < nM; mi++) {
                const int M = Ms[mi];
                float *x = NULL, *y = NULL;
                float *hx = malloc((size_t)M * in * 4);
                for (int64_t i = 0; i < (int64_t)M * in; i++) hx[i] = (float)((int)(rnd32() & 0xffff) - 32768) / 32768.0f;
                s = tcq_cuda_malloc((void **)&x, (size_t)M * in * 4);
                if (s == TCQ_OK) s = tcq_cuda_malloc((void **)&y, (size_t)M * out * 4);
                if (s == TCQ_OK) s = tcq_cuda_copy_to_device(ctx, x, hx, (size_t)M * in * 4);
                free(hx);
                if (s != TCQ_OK) return cli_fail(s, "cuda-bench: activations");
                /* op 0: linear, exact path; op 1: fused swiglu, exact; op 2 / 3: the same on the
                 * fast (int8) path, where a fast kernel runs (tcq_cuda_fast_block: the dispatcher's
                 * own answer) */
                for (int op = 0; op < 4; op++) {
                    const int two = op & 1, fast = op >= 2;
                    if (!two && !((a == 1 && do_reduce) || (a == 0 && do_scatter))) continue;
                    if (two && !(a == 1 && do_swiglu)) continue;
                    if (fast && (!do_fast || tcq_cuda_fast_block(ctx, wp[0], M) == 0)) continue;
                    double us = 0;
                    const int r = M >= 256 ? 10 : reps;
                    const tcq_kpath path = fast ? TCQ_PATH_FAST : TCQ_PATH_EXACT;
                    if (!two) s = tcq_cuda_time_linear(ctx, wp, ncopy, x, y, M, path, r, trials, &us);
                    else s = tcq_cuda_time_swiglu(ctx, wp, wp + ncopy, ncopy, x, y, M, path, r, trials, &us);
                    if (s != TCQ_OK) return cli_fail(s, "cuda-bench: kernel");
                    const double bytes = wbytes * (two ? 2 : 1), gbps = bytes / (us * 1e3);
                    const double flops = 2.0 * out * in * M * (two ? 2 : 1) / (us * 1e3);
                    const char *name = two ? "swiglu" : a ? "reduce" : "scatter";
                    const double d = dense_us[a][mi] * (two ? 2 : 1);
                    if (json)
                        printf("{\"op\":\"%s\",\"axis\":%d,\"k\":%d,\"M\":%d,\"path\":\"%s\",\"isa\":\"cuda\",\"threads\":%d,"
                               "\"us\":%.2f,\"weight_gbps\":%.1f,\"frac_bw\":%.3f,\"frac_floor\":%.3f,\"gflops\":%.1f,"
                               "\"cublas_bf16_us\":%.2f,\"out\":%lld,\"in\":%lld}\n",
                               name, a, k, M, fast ? "fast" : "exact", n_sm, us, gbps, gbps / bw, gbps / bw, flops, d,
                               (long long)out, (long long)in);
                    else
                        printf("%-8s %4d %2d %4d %5s %10.2f %10.0f %8.3f %10.2f %9.2f\n", name, a, k, M, fast ? "fast" : "exact",
                               us, gbps, gbps / bw, d, d > 0 ? d / us : 0.0);
                    fflush(stdout);
                }
                tcq_cuda_free(x);
                tcq_cuda_free(y);
            }
            free_copies(w, a ? 2 * ncopy : ncopy);
            free(w);
            free(wp);
        }
    }
    if (do_encode) {
        /* 4096 x 4096 (the earlier figures) and 17408 x 5120 (a 14B model's MLP matrix, rows as
         * the quantizer codes them) */
        static const int64_t shapes[2][2] = {{4096, 4096}, {17408, 5120}};
        for (int si = 0; si < 2; si++)
            for (int k = 2; k <= 4; k++) {
                const int64_t R = shapes[si][0], C = shapes[si][1];
                double wps = 0, kwps = 0;
                s = tcq_cuda_time_encode(ctx, (tcq_block_params){12, k, 256}, R, C, &wps, &kwps);
                if (s != TCQ_OK) return cli_fail(s, "cuda-bench: encoder");
                if (json)
                    printf("{\"op\":\"encode\",\"L\":12,\"k\":%d,\"T\":256,\"R\":%lld,\"C\":%lld,\"isa\":\"cuda\","
                           "\"weights_per_s\":%.4g,\"kernel_weights_per_s\":%.4g}\n", k, (long long)R, (long long)C, wps, kwps);
                else
                    printf("encode L=12 k=%d T=256 %lld x %lld: %.1f M weights/s whole call (tcq_cuda_encode_rows: "
                           "copies in, row scales, Viterbi, codes out), %.1f M weights/s kernels alone\n", k,
                           (long long)R, (long long)C, wps / 1e6, kwps / 1e6);
            }
    }
    tcq_cuda_ctx_free(ctx);
    return 0;
}
