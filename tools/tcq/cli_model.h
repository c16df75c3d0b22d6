/* Helpers the model commands share: loading with progress, flags for threads and KV dtype. */
#ifndef TCQ_CLI_MODEL_H
#define TCQ_CLI_MODEL_H

#include "cli.h"

/* Load a model, printing progress and a summary (geometry, weight format and bytes) to stderr.
 * Returns 0 or prints the error and returns 1. */
int cli_model_load(const char *path, int threads, tcq_model **out);
/* "f32" | "f16" -> tcq_kv_dtype; prints an error and returns -1 otherwise. */
int cli_parse_kv(const char *s, tcq_kv_dtype *out);
/* Bytes as "12.3 MiB". buf of at least 32. */
const char *cli_bytes(size_t n, char *buf);

#endif
