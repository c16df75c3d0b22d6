/* Benchmark subcommands of `tcq bench`: each is one bench/bench_<name>.c with one entry point,
 * listed in tools/tcq/cmd_bench.c's table.  argv[0] is the subcommand name. */
#ifndef TCQ_BENCH_H
#define TCQ_BENCH_H

int bench_encode_main(int argc, char **argv);
int bench_model(int argc, char **argv);

#endif
