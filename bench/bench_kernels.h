/* tcq bench kernels (bench/bench_kernels.c). */
#ifndef TCQ_BENCH_KERNELS_H
#define TCQ_BENCH_KERNELS_H

/* argv[0] is "kernels"; returns the exit code. */
int bench_kernels(int argc, char **argv);

#endif
