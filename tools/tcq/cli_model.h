/* Helpers the model commands share: loading with progress, flags for threads and KV dtype. */
#ifndef TCQ_CLI_MODEL_H
#define TCQ_CLI_MODEL_H

#include "cli.h"

/* Load a model, printing progress and a summary (geometry, weight format and bytes) to stderr.
 * Returns 0 or prints the error and returns 1. */
int cli_model_load(const char *path, int threads, tcq_model **out);
/* The models' progress callback also reports evaluation windows, with an ETA from the last
 * cli_progress_start(); cli_progress_done() clears the line. */
void cli_progress_start(void);
void cli_progress_done(void);
/* --kpath auto|exact|fast: the trellis numerical path cli_model_load gives models (default auto). */
extern tcq_kpath cli_kpath;
int cli_parse_kpath(const char *s);
/* "f32" | "f16" -> tcq_kv_dtype; prints an error and returns -1 otherwise. */
int cli_parse_kv(const char *s, tcq_kv_dtype *out);
/* Bytes as "12.3 MiB". buf of at least 32. */
const char *cli_bytes(size_t n, char *buf);

#endif
