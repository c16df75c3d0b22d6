/* tcq bench WHAT ...: the benchmark table. */
#include "bench.h"

#include <string.h>

static const cli_command benches[] = {
    {"model", "prefill and decode tokens/s of a model (or a synthetic Qwen3-14B-geometry one)", bench_model},
};
enum { N_BENCHES = sizeof benches / sizeof benches[0] };

int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: tcq bench WHAT [options]   (tcq bench WHAT --help)\n\n");
        for (int i = 0; i < N_BENCHES; i++) fprintf(f, "  %-10s %s\n", benches[i].name, benches[i].summary);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < N_BENCHES; i++)
        if (strcmp(argv[1], benches[i].name) == 0) return benches[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tcq bench: unknown benchmark '%s'\n", argv[1]);
    return 2;
}
