/* Text-side helpers of the model commands: the tokenizer that goes with a model, streaming
 * output of generated tokens through the detokenizer and stop strings. */
#ifndef TCQ_CLI_TEXT_H
#define TCQ_CLI_TEXT_H

#include "cli_model.h"
#include "core/internal.h"   /* tcq_fail for command-level errors */

/* The tokenizer for model_path: tok_path if given, else the model directory's (a llama2.c .bin
 * needs tok_path).  Checks it fits the model's vocabulary.  Prints errors; returns 0 or 1. */
int cli_tokenizer_load(const char *model_path, const char *tok_path, const tcq_model *m, tcq_tokenizer **out);
/* Read a whole file (NUL-terminated, malloc'd). Prints errors; returns 0 or 1. */
int cli_read_file(const char *path, char **text, size_t *len);

/* Streams tokens as text to a FILE (or only into .text when out is NULL), stopping at stop strings and at the tokenizer's end tokens. */
typedef struct cli_stream {
    const tcq_tokenizer *tok;
    tcq_detok *detok;
    tcq_stopper *stop;
    FILE *out;
    int32_t end_ids[4];
    int n_end;
    char *text;               /* everything printed (for chat history), malloc'd */
    size_t len, cap;
    int stopped;              /* a stop string or end token ended it */
} cli_stream;

tcq_status cli_stream_init(cli_stream *s, const tcq_tokenizer *tok, const char *const *stops, int n_stops, FILE *out);
void cli_stream_free(cli_stream *s);
/* tcq_token_fn: returns 1 to stop. */
int cli_stream_token(void *arg, int32_t token);
void cli_stream_finish(cli_stream *s);

#endif
