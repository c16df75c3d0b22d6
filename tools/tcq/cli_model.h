/* Helpers the model commands share: loading with progress, flags for threads and KV dtype. */
#ifndef TCQ_CLI_MODEL_H
#define TCQ_CLI_MODEL_H

#include "cli.h"

/* Load a model, printing progress and a summary (geometry, weight format and bytes) to stderr.
 * Returns 0 or prints the error and returns 1. */
int cli_model_load(const char *path, int threads, tcq_model **out);
/* ... on numerical path kp instead of --kpath's (tcq kl's reference model: exact) */
int cli_model_load_kpath(const char *path, int threads, tcq_kpath kp, tcq_model **out);
/* The models' progress callback also reports evaluation windows, with an ETA from the last
 * cli_progress_start(); cli_progress_done() clears the line. */
void cli_progress_start(void);
void cli_progress_done(void);
/* --kpath auto|exact|fast: the numerical path cli_model_load gives models (default auto): trellis
 * weights' int8 activations, dense bf16 prefill's bf16 activations (fast, auto) or f32 (exact). */
extern tcq_kpath cli_kpath;
int cli_parse_kpath(const char *s);
/* --device cpu|cuda|cuda:N|auto: where cli_model_load runs models (default cpu). */
extern tcq_device cli_device;
extern int cli_device_index;
int cli_parse_device(const char *s);
/* "f32" | "f16" -> tcq_kv_dtype; prints an error and returns -1 otherwise. */
int cli_parse_kv(const char *s, tcq_kv_dtype *out);
/* The generation flags `tcq run` and `tcq chat` share.  Set the defaults, then offer each
 * argument to cli_gen_flag. */
typedef struct cli_gen_flags {
    const char *tokenizer;             /* --tokenizer PATH */
    int think;                         /* -1: the template's default; --no-think: 0 */
    long long n, threads, ctx, seed, top_k;
    double temp, top_p, min_p, rep;
    tcq_kv_dtype kv;
} cli_gen_flags;
/* argv[*i] is one of the shared flags: consume it and its value (advancing *i) and return 1;
 * a bad value: print why and return -1; not a shared flag: return 0. */
int cli_gen_flag(cli_gen_flags *g, int argc, char **argv, int *i);
/* Bytes as "12.3 MiB". buf of at least 32. */
const char *cli_bytes(size_t n, char *buf);

#endif
