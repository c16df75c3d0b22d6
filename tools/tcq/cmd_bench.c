/* tcq bench SUBCOMMAND: benchmark harnesses under bench/. */
#include "cli.h"

#include <string.h>

#include "../../bench/bench_kernels.h"

static const cli_command subs[] = {
    {"kernels", "CPU kernels at Qwen3-14B MLP shapes, beside bandwidth and issue-rate floors", bench_kernels},
};
enum { N_SUBS = sizeof subs / sizeof subs[0] };

int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: tcq bench SUBCOMMAND [options]\n\nsubcommands:\n");
        for (int i = 0; i < N_SUBS; i++) fprintf(f, "  %-10s %s\n", subs[i].name, subs[i].summary);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < N_SUBS; i++)
        if (!strcmp(argv[1], subs[i].name)) return subs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tcq bench: unknown subcommand '%s'\n", argv[1]);
    return 2;
}
