/* The tcq command line: each command is one file, cmd_<name>.c, with one entry point. */
#ifndef TCQ_CLI_H
#define TCQ_CLI_H

#include "tcq_kernels.h"

#include <stdio.h>

typedef struct cli_command {
    const char *name;
    const char *summary;                    /* one line for `tcq --help` */
    int (*run)(int argc, char **argv);      /* argv[0] is the command name; returns exit code */
} cli_command;

/* Print "tcq: <what>: <status>: <message>" to stderr and return exit code 1. */
int cli_fail(tcq_status s, const char *what);
/* 1 if argv[i] is --help or -h. */
int cli_is_help(const char *arg);
/* Parse a comma-separated list of ints ("1,2,3") into out[0..max); returns count or -1. */
int cli_parse_int_list(const char *s, int *out, int max);
/* Strict integer / float parse of a flag's value; prints an error naming the flag on failure. */
int cli_parse_long(const char *flag, const char *s, long long *out);
int cli_parse_double(const char *flag, const char *s, double *out);
/* A benchmark's matrix shape "OUTxIN", both positive multiples of 256 (whole T-blocks); prints an
 * error naming the flag on failure. */
int cli_parse_shape(const char *flag, const char *s, long long *out, long long *in);
/* Wall clock in seconds (monotonic). */
double cli_now(void);

int cmd_demo(int argc, char **argv);
int cmd_demo_codec(int argc, char **argv);   /* tcq demo --codec (argv[0] is "demo") */
int cmd_logits(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_kl(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_codec(int argc, char **argv);
int cmd_chat_template(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int bench_kernels_cuda(int argc, char **argv);   /* bench/bench_kernels_cuda.c */

#endif
