/* tcq bench: dispatches to the benchmark subcommands of bench/ (one line each below). */
#include "cli.h"

#include "../../bench/bench.h"

#include <string.h>

static const cli_command benches[] = {
    {"encode", "Viterbi encoder throughput (million weights/s), median of repeats", bench_encode_main},
    {"kernels", "CPU kernels at Qwen3-14B MLP shapes, beside bandwidth and issue-rate floors", bench_kernels},
    {"model", "prefill and decode tokens/s of a model (or a synthetic Qwen3-14B-geometry one)", bench_model},
    {"serve", "tcq serve's scheduler: aggregate tokens/s and time to first token for 1, 4, 16 clients", bench_serve},
};
enum { N_BENCHES = sizeof benches / sizeof benches[0] };

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: tcq bench SUBCOMMAND [options]   (tcq bench SUBCOMMAND --help)\n\nsubcommands:\n");
    for (int i = 0; i < N_BENCHES; i++) fprintf(f, "  %-10s %s\n", benches[i].name, benches[i].summary);
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        bench_usage(stderr);
        return 2;
    }
    if (cli_is_help(argv[1])) {
        bench_usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "kernels"))   /* --device cuda: bench/bench_kernels_cuda.c */
        for (int i = 2; i + 1 < argc; i++)
            if (!strcmp(argv[i], "--device") && !strcmp(argv[i + 1], "cuda")) return bench_kernels_cuda(argc - 1, argv + 1);
    for (int i = 0; i < N_BENCHES; i++)
        if (!strcmp(argv[1], benches[i].name)) return benches[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tcq bench: unknown subcommand '%s'\n\n", argv[1]);
    bench_usage(stderr);
    return 2;
}
