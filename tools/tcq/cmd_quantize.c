/* tcq quantize IN_DIR OUT_DIR --bits K: the library's tcq_quantize_model with a progress bar. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>
#include <unistd.h>

static void quantize_usage(FILE *f)
{
    fprintf(f, "usage: tcq quantize IN_DIR OUT_DIR --bits 2|3|4 [--L 12] [--seed S] [--threads N]\n"
               "                    [--search default|seams] [--seams N] [--interleave] [--refit-scales]\n"
               "                    [--lm-head-bits 0|2|3|4]\n"
               "                    [--device cpu|cuda]\n"
               "                    [--method rtn|ldlq] [--calib FILE [--calib-tokens N] [--calib-ctx C]]\n"
               "                    [--calib-mode sequential|original] [--hessians DIR] [--save-hessians DIR]\n"
               "                    [--damp X] [--bpw B [--alloc-windows N] [--save-alloc FILE]\n"
               "                                        [--alloc-costs FILE]]\n"
               "                    [--layers N] [--ldlq-passes N] [--scale-search N] [--axis0-group N]\n"
               "                    [--asym layer|within] [--asym-alpha A]\n"
               "       tcq quantize IN_DIR OUT_DIR --rotate-only [--seed S]\n"
               "  Folds the RMSNorm gains, rotates the residual stream with a randomized Hadamard\n"
               "  transform, codes every attention and MLP projection with the bitshift trellis\n"
               "  (k bits per weight, per-row fp16 scales) and writes a model directory:\n"
               "  config.json with the quantization entries, model.safetensors, tokenizer files.\n"
               "  Input: a llama or qwen3 model directory (f32/f16/bf16 safetensors, sharded or not).\n"
               "  --seed: Hadamard sign seed (default 1); --threads: default one per CPU.\n"
               "  --search seams: the encoder tries N more tail-biting seams per block (default 8;\n"
               "  2 + N Viterbi passes instead of 2): lower error, slower.\n"
               "  --interleave: at k=3, store o/down codes in the two-block interleave (FORMAT.md).\n"
               "  --refit-scales: least-squares row scales for the chosen codes (lower error).\n"
               "  --lm-head-bits K: code the output projection too, at k = K (default 0: bf16).\n"
               "  --rotate-only: fold and rotate, code nothing, write f32 (an equivalent dense model).\n"
               "  --device cuda: code on the GPU (same codes, the same artifact byte for byte; needs a\n"
               "  CUDA build and device, the default search and L <= 12).  With a calibration the\n"
               "  Hessians, the LDL factor and LDLQ's products run there too (double precision, other\n"
               "  summation orders: the same algorithm, not the same bytes as the CPU's).\n"
               "  --calib FILE: run the model over FILE (--calib-tokens, default 32768, in windows of\n"
               "  --calib-ctx, default 512) layer by layer and take every projection's input Hessian\n"
               "  H = sum x x^T; each tensor's proxy loss tr((W-W^) H (W-W^)^T) is printed.  Memory: the\n"
               "  calibration activations, one layer's weights (f32) and its Hessians, not the model.\n"
               "  --calib-mode original (default): Hessians of the input model (reusable with any\n"
               "  --bits / --bpw); sequential: layer i's taken with layers 0..i-1 already coded, so\n"
               "  they depend on the k chosen.  --save-hessians DIR keeps them (with their mode),\n"
               "  --hessians DIR reuses them (same --seed).  --method ldlq (needs them): BlockLDLQ\n"
               "  on H + damp * mean(diag H) I (--damp, default 0.1), then --ldlq-passes (default 1)\n"
               "  block coordinate descent passes; with --refit-scales the row scales minimise the\n"
               "  proxy loss; --scale-search N (default 9; 1: off) codes each row at N candidate scales\n"
               "  (1, 0.9, 1.1, 0.8, 1.2, 0.95, 1.05, 0.85, 1.15 x its RMS one; at most 9) and keeps\n"
               "  the best (5: 0.65x the time of 9, tinyqwen's KL ~1.4 %% higher).  --axis0-group N in\n"
               "  [1, 256] (default 8): o/down (coded along their inputs) in blocks of N input rows, each\n"
               "  block's rows and candidates coded at once (1: row by row; larger: fewer, larger GPU\n"
               "  encoder calls, each row without the feedback of its own block; tinyqwen's KL +0.5 to\n"
               "  +1 %% at 8 against 1).  --bpw B in [2, 4]:\n"
               "  k in {2,3,4}\n"
               "  per projection so that the mean k is at most B (--bits stays the k of anything\n"
               "  without a Hessian): a first pass codes every projection at k = 2, 3, 4, layer by\n"
               "  layer with original Hessians, and measures each candidate's cost: the input model's\n"
               "  mean KL on the first --alloc-windows (default 4) windows of --calib FILE with only\n"
               "  that projection coded (needs --calib FILE also with --hessians; a forward of the\n"
               "  later layers per candidate); k is then raised where the KL drops most per bit (costs\n"
               "  added over projections: an approximation), and the second pass codes.\n"
               "  --save-alloc FILE writes the costs, --alloc-costs FILE reuses them (other budgets\n"
               "  without the first pass).\n"
               "  --asym layer|within (ldlq, --calib FILE --calib-mode sequential, CPU): GPTAQ's\n"
               "  asymmetric targets: each projection coded to reproduce the input model's output on\n"
               "  its own inputs (a second, unquantized stream through the calibration; ~1.5x its\n"
               "  forward time); within: the statistics also retaken before o, gate/up and down with\n"
               "  the projections before them coded (~4x).  --asym-alpha A: the fraction of the\n"
               "  correction taken (default 0.25, GPTAQ's; 1: all of it).\n"
               "  --layers N: only decoder layers 0..N-1, written as a truncated N-layer model (checks\n"
               "  of time and memory on large models).\n");
}

typedef struct bar {
    double t0, last;
    int tty;
    tcq_quantize_progress final;   /* the latest report (its strings are not kept) */
} bar;

static void fmt_time(double s, char *buf, size_t n)
{
    if (!isfinite(s) || s < 0) s = 0;
    const long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static void progress(const tcq_quantize_progress *p, void *user)
{
    bar *b = user;
    const double now = cli_now();
    b->final = *p;
    b->final.tensor = b->final.note = NULL;
    const char *cr = b->tty ? "\r\033[K" : "";
    if (p->phase && !strcmp(p->phase, "hessians")) {
        fprintf(stderr, "%slayer %d/%d: Hessians ready, %.1f s\n", cr, p->layer + 1, p->layer_count, p->seconds);
        return;
    }
    if (p->k && !p->phase) {
        char px[80] = "";
        if (p->proxy >= 0)
            snprintf(px, sizeof px, " proxy %.4e (relative %.5f)", p->proxy, p->proxy_ref > 0 ? p->proxy / p->proxy_ref : 0.0);
        fprintf(stderr, "%s  %-44s k=%d%s  %.1f s\n", cr, p->tensor, p->k, px, p->seconds);
    }
    if (p->phase && !strcmp(p->phase, "allocation") && p->tensor)
        fprintf(stderr, "%s  %-44s cost k=2 %.4e k=3 %.4e k=4 %.4e\n", cr, p->tensor, p->alloc_cost[0], p->alloc_cost[1],
                p->alloc_cost[2]);
    if (p->note) fprintf(stderr, "%stcq quantize: warning: %s\n", cr, p->note);
    const int last = p->tensor_index == p->tensor_count && !p->phase;
    if (!b->tty && !last && now - b->last < 10) return;   /* logs: a line every 10 s */
    b->last = now;
    const double frac = p->total ? (double)p->done / (double)p->total : (double)p->tensor_index / (p->tensor_count ? p->tensor_count : 1);
    const double el = now - b->t0;
    char eta[32], elapsed[32];
    if (frac > 0) fmt_time(el * (1 - frac) / frac, eta, sizeof eta);
    else snprintf(eta, sizeof eta, "-:--");
    fmt_time(el, elapsed, sizeof elapsed);
    char line[64];
    const int w = 30, fill = (int)(frac * w);
    for (int i = 0; i < w; i++) line[i] = i < fill ? '#' : '-';
    line[w] = 0;
    char where[96];
    if (p->layer_count && p->layer >= 0) snprintf(where, sizeof where, "%s layer %d/%d", p->phase ? p->phase : "", p->layer + 1, p->layer_count);
    else snprintf(where, sizeof where, "%s", p->phase ? p->phase : "");
    if (b->tty)
        fprintf(stderr, "%s[%s] %5.1f%% %d/%d tensors %s elapsed, ETA %s %s%s", cr, line, 100 * frac, p->tensor_index,
                p->tensor_count, elapsed, eta, where, last ? "\n" : "");
    else
        fprintf(stderr, "progress %5.1f%% %d/%d tensors, %s elapsed, ETA %s %s\n", 100 * frac, p->tensor_index,
                p->tensor_count, elapsed, eta, where);
}

int cmd_quantize(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    long long bits = 0, L = 12, seed = 1, threads = 0, seams = 0, lm_bits = 0;
    tcq_search search = TCQ_SEARCH_TWO_PASS;
    int rotate_only = 0, interleave = 0, refit = 0, cuda = 0, method = TCQ_QMETHOD_RTN, calib_sequential = 0;
    long long calib_tokens = 0, calib_ctx = 0, layers = 0, passes = 1, alloc_windows = 0, scale_search = 0;
    long long axis0_group = -1;   /* -1: not given (the library's default) */
    double damp = 0, bpw = 0;
    int asym = 0;
    double asym_alpha = 0;
    const char *calib = NULL, *hin = NULL, *hout = NULL, *cin = NULL, *cout = NULL;
    for (int i = 1; i < argc; i++) {
        long long *dst = NULL;
        if (cli_is_help(argv[i])) {
            quantize_usage(stdout);
            return 0;
        }
        if (argv[i][0] != '-') {
            if (!in) in = argv[i];
            else if (!out) out = argv[i];
            else {
                fprintf(stderr, "tcq quantize: unexpected argument '%s'\n", argv[i]);
                return 2;
            }
            continue;
        }
        if (!strcmp(argv[i], "--rotate-only")) {
            rotate_only = 1;
            continue;
        }
        if (!strcmp(argv[i], "--refit-scales")) {
            refit = 1;
            continue;
        }
        if (!strcmp(argv[i], "--interleave")) {
            interleave = 1;
            continue;
        }
        if (!strcmp(argv[i], "--asym") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "layer")) asym = 1;
            else if (!strcmp(argv[i], "within")) asym = 2;
            else {
                fprintf(stderr, "tcq quantize: --asym layer|within, got '%s'\n", argv[i]);
                return 2;
            }
            continue;
        }
        if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            cuda = !strcmp(argv[++i], "cuda");
            if (!cuda && strcmp(argv[i], "cpu")) {
                fprintf(stderr, "tcq quantize: --device cpu|cuda, got '%s'\n", argv[i]);
                return 2;
            }
            continue;
        }
        if (!strcmp(argv[i], "--method") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "ldlq")) method = TCQ_QMETHOD_LDLQ;
            else if (strcmp(argv[i], "rtn")) {
                fprintf(stderr, "tcq quantize: --method rtn|ldlq, got '%s'\n", argv[i]);
                return 2;
            }
            continue;
        }
        if (!strcmp(argv[i], "--calib-mode") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "sequential")) calib_sequential = 1;
            else if (strcmp(argv[i], "original")) {
                fprintf(stderr, "tcq quantize: --calib-mode sequential|original, got '%s'\n", argv[i]);
                return 2;
            }
            continue;
        }
        if ((!strcmp(argv[i], "--calib") || !strcmp(argv[i], "--hessians") || !strcmp(argv[i], "--save-hessians") ||
             !strcmp(argv[i], "--alloc-costs") || !strcmp(argv[i], "--save-alloc")) && i + 1 < argc) {
            const char **d = !strcmp(argv[i], "--calib") ? &calib : !strcmp(argv[i], "--hessians") ? &hin
                           : !strcmp(argv[i], "--alloc-costs") ? &cin : !strcmp(argv[i], "--save-alloc") ? &cout : &hout;
            *d = argv[++i];
            continue;
        }
        if ((!strcmp(argv[i], "--damp") || !strcmp(argv[i], "--bpw") || !strcmp(argv[i], "--asym-alpha")) && i + 1 < argc) {
            char *end;
            const double v = strtod(argv[i + 1], &end);
            if (end == argv[i + 1] || *end || !isfinite(v)) {
                fprintf(stderr, "tcq quantize: %s needs a number, got '%s'\n", argv[i], argv[i + 1]);
                return 2;
            }
            *(!strcmp(argv[i], "--damp") ? &damp : !strcmp(argv[i], "--bpw") ? &bpw : &asym_alpha) = v;
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--search") && i + 1 < argc) {
            if (tcq_search_parse(argv[++i], &search) != TCQ_OK) {
                fprintf(stderr, "tcq quantize: --search must be default or seams, got '%s'\n", argv[i]);
                return 2;
            }
            continue;
        }
        if (!strcmp(argv[i], "--bits")) dst = &bits;
        else if (!strcmp(argv[i], "--seams")) dst = &seams;
        else if (!strcmp(argv[i], "--lm-head-bits")) dst = &lm_bits;
        else if (!strcmp(argv[i], "--L")) dst = &L;
        else if (!strcmp(argv[i], "--calib-tokens")) dst = &calib_tokens;
        else if (!strcmp(argv[i], "--ldlq-passes")) dst = &passes;
        else if (!strcmp(argv[i], "--calib-ctx")) dst = &calib_ctx;
        else if (!strcmp(argv[i], "--layers")) dst = &layers;
        else if (!strcmp(argv[i], "--alloc-windows")) dst = &alloc_windows;
        else if (!strcmp(argv[i], "--scale-search")) dst = &scale_search;
        else if (!strcmp(argv[i], "--axis0-group")) dst = &axis0_group;
        else if (!strcmp(argv[i], "--seed")) dst = &seed;
        else if (!strcmp(argv[i], "--threads")) dst = &threads;
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "tcq quantize: unknown or incomplete option '%s'\n", argv[i]);
            quantize_usage(stderr);
            return 2;
        }
        if (cli_parse_long(argv[i], argv[i + 1], dst)) return 2;
        i++;
    }
    if (!in || !out) {
        quantize_usage(stderr);
        return 2;
    }
    if (rotate_only && bits) {
        fprintf(stderr, "tcq quantize: --rotate-only and --bits exclude each other\n");
        return 2;
    }
    if (!rotate_only && (bits < 2 || bits > 4)) {
        fprintf(stderr, "tcq quantize: --bits must be 2, 3 or 4\n");
        return 2;
    }
    if (lm_bits && (lm_bits < 2 || lm_bits > 4 || rotate_only)) {
        fprintf(stderr, "tcq quantize: --lm-head-bits must be 0 (dense), 2, 3 or 4, and needs --bits\n");
        return 2;
    }
    if (L < TCQ_L_MIN || L > TCQ_L_MAX || seed < 0 || threads < 0 || threads > 1024 || seams < 0 || seams > 64) {
        fprintf(stderr, "tcq quantize: --L must be in [%d, %d], --seed >= 0, --threads in [0, 1024], "
                        "--seams in [0, 64]\n", TCQ_L_MIN, TCQ_L_MAX);
        return 2;
    }
    if (cuda && !rotate_only && search != TCQ_SEARCH_TWO_PASS) {
        fprintf(stderr, "tcq quantize: --device cuda runs only the default search (drop --search %s)\n",
                tcq_search_name(search));
        return 2;
    }
    if (cuda && !rotate_only && L > 12) {
        fprintf(stderr, "tcq quantize: --device cuda handles --L up to 12 (got --L %lld)\n", L);
        return 2;
    }
    tcq_quantize_opts o = {.bits = (int)bits, .L = (int)L, .T = 256, .seed = (uint64_t)seed, .threads = (int)threads,
                           .enc = {.search = search, .seams = (int)seams}, .interleave = interleave,
                           .refit_scales = refit, .cuda = cuda, .lm_head_bits = (int)lm_bits, .method = method,
                           .calib = calib, .calib_tokens = calib_tokens, .calib_ctx = (int)calib_ctx, .damp = damp,
                           .hessians_in = hin, .hessians_out = hout, .bpw = bpw, .calib_sequential = calib_sequential,
                           .layers = (int)layers, .ldlq_passes = passes ? (int)passes : -1,
                           .alloc_windows = (int)alloc_windows, .alloc_costs_in = cin, .alloc_costs_out = cout,
                           .scale_search = (int)scale_search, .axis0_group = axis0_group < 0 ? 0 : (int)axis0_group, .asym = asym,
                           .asym_alpha = asym_alpha};
    if (axis0_group != -1 && (axis0_group < 1 || axis0_group > 256)) {
        fprintf(stderr, "tcq quantize: --axis0-group must be in [1, 256] (stored rows per BlockLDLQ block of "
                        "o/down), got %lld\n", axis0_group);
        return 2;
    }
    if (calib_tokens < 0 || calib_ctx < 0 || calib_ctx > 1 << 20 || damp < 0 || layers < 0 || layers > 1 << 16 ||
        passes < 0 || passes > 16 || alloc_windows < 0 || alloc_windows > 1 << 16 || scale_search < 0 || scale_search > 9) {
        fprintf(stderr, "tcq quantize: --calib-tokens, --calib-ctx, --layers and --damp must not be negative, "
                        "--ldlq-passes in [0, 16], --alloc-windows in [0, 65536], --scale-search in [0, 9]\n");
        return 2;
    }
    if ((cin || cout) && bpw == 0) {
        fprintf(stderr, "tcq quantize: --alloc-costs and --save-alloc need --bpw\n");
        return 2;
    }
    if (bpw != 0 && !cin && !calib) {
        fprintf(stderr, "tcq quantize: --bpw needs --calib FILE (its first --alloc-windows windows measure each "
                        "projection's KL, also with --hessians) or --alloc-costs FILE\n");
        return 2;
    }
#ifdef __GLIBC__
    /* The GPU quantizer takes and frees buffers of up to a few GB per tensor (a 14B down's m x m
     * factor and refit systems are 2.4 GB each).  glibc maps such blocks anew and unmaps them at
     * free, so every tensor faults their pages in again; from the heap and never trimmed they are
     * reused.  14B geometry, 2 layers, H100 (docs/PERFORMANCE.md, session 29): minor faults 19.4 M
     * -> 4.5 M, system time 70 -> 25 s, 65.1 -> 56.5 s a layer, peak RSS 17.4 -> 18.7 GB.  Not on
     * the CPU path, whose peak is bounded for machines smaller than the model (not measured
     * there). */
    if (cuda) {
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, -1);   /* mallopt(3): -1 disables trimming */
    }
#endif
    bar b = {cli_now(), 0, isatty(2), {0}};
    if (rotate_only) fprintf(stderr, "tcq quantize: %s -> %s, rotate only, seed=%lld\n", in, out, seed);
    else fprintf(stderr, "tcq quantize: %s -> %s, k=%lld L=%lld T=256 seed=%lld search=%s device=%s\n", in, out, bits,
                 L, seed, tcq_search_name(search), cuda ? "cuda" : "cpu");
    tcq_status s = tcq_quantize_model(in, out, &o, progress, &b);
    if (s != TCQ_OK) {
        if (b.tty) fputc('\n', stderr);
        return cli_fail(s, "quantize");
    }
    const tcq_quantize_progress *f = &b.final;
    if (rotate_only) {
        fprintf(stderr, "tcq quantize: folded and rotated, %lld weights written dense f32, %.1f s\n",
                (long long)f->dense_weights, cli_now() - b.t0);
        return 0;
    }
    char lm[32] = "";
    if (lm_bits) snprintf(lm, sizeof lm, " (the lm_head at k=%lld)", lm_bits);
    fprintf(stderr, "tcq quantize: %lld weights coded at k=%lld%s (relative MSE %.5f in the rotated basis), "
                    "%lld kept dense bf16, %.1f s\n", (long long)f->coded_weights, bits, lm,
            f->sq_ref > 0 ? f->sq_err / f->sq_ref : 0.0, (long long)f->dense_weights, cli_now() - b.t0);
    if (f->coded_weights)
        fprintf(stderr, "tcq quantize: method %s, %.4f bits per coded weight (k and row scales)%s\n",
                method == TCQ_QMETHOD_LDLQ ? "ldlq" : "rtn", f->coded_bits / (double)f->coded_weights,
                bpw > 0 ? " under --bpw" : "");
    return 0;
}
