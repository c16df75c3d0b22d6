/* Benchmarks behind `tcq bench WHAT`: one function per subject, one line each. */
#ifndef TCQ_BENCH_H
#define TCQ_BENCH_H

#include "cli.h"

int bench_model(int argc, char **argv);

#endif
