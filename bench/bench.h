/* Benchmark subcommands of `tcq bench`: each is one bench/bench_<name>.c with one entry point,
 * listed in tools/tcq/cmd_bench.c's table.  argv[0] is the subcommand name. */
#ifndef TCQ_BENCH_H
#define TCQ_BENCH_H

#include "cli.h"

int bench_encode_main(int argc, char **argv);  /* bench_encode.c */
int bench_kernels(int argc, char **argv);      /* bench_kernels.c */
int bench_model(int argc, char **argv);        /* bench_model.c */
int bench_serve(int argc, char **argv);        /* bench_serve.c: tcq serve's scheduler */

#endif
