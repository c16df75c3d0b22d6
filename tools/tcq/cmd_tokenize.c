/* tcq tokenize: print the token ids of a text. */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: tcq tokenize MODEL_DIR|tokenizer.json|tokenizer.bin --text STR [--json] [--pieces]\n"
               "                    [--no-bos] [--no-parse-special]\n"
               "  prints the ids space-separated; --json prints a JSON array (of {id, piece, text}\n"
               "  objects with --pieces); --pieces alone prints one 'id<TAB>piece' per line.\n"
               "  --no-bos: do not add BOS/EOS; --no-parse-special: special tokens in STR are text.\n");
}

int cmd_tokenize(int argc, char **argv)
{
    const char *path = NULL, *text = NULL;
    int as_json = 0, pieces = 0;
    unsigned flags = TCQ_TOK_ADD_SPECIAL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--text") && i + 1 < argc) {
            text = argv[++i];
        } else if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else if (!strcmp(argv[i], "--pieces")) {
            pieces = 1;
        } else if (!strcmp(argv[i], "--no-bos")) {
            flags &= ~(unsigned)TCQ_TOK_ADD_SPECIAL;
        } else if (!strcmp(argv[i], "--no-parse-special")) {
            flags |= TCQ_TOK_NO_PARSE_SPECIAL;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "tcq tokenize: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path || !text) {
        usage(stderr);
        return 2;
    }
    tcq_tokenizer *tok;
    tcq_status s = tcq_tokenizer_load(path, &tok);
    if (s != TCQ_OK) return cli_fail(s, "tokenize");
    int32_t *ids = NULL;
    size_t n = 0;
    s = tcq_tokenizer_encode_alloc(tok, text, strlen(text), flags, &ids, &n);
    if (s != TCQ_OK) {
        tcq_tokenizer_free(tok);
        return cli_fail(s, "tokenize");
    }
    if (as_json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            if (!pieces) {
                json_array_append_new(arr, json_integer(ids[i]));
                continue;
            }
            char buf[1024];
            size_t len = 0;
            tcq_tokenizer_token_bytes(tok, ids[i], buf, sizeof buf, &len);
            if (len > sizeof buf) len = sizeof buf;
            json_t *o = json_object();
            json_object_set_new(o, "id", json_integer(ids[i]));
            json_object_set_new(o, "piece", json_string(tcq_tokenizer_piece(tok, ids[i])));
            /* a token may be part of a UTF-8 character: its bytes then do not form a JSON string */
            json_t *t = json_stringn(buf, len);
            json_object_set_new(o, "text", t ? t : json_null());
            json_array_append_new(arr, o);
        }
        char *out = json_dumps(arr, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\n", out ? out : "[]");
        free(out);
        json_decref(arr);
    } else if (pieces) {
        for (size_t i = 0; i < n; i++) printf("%d\t%s\n", ids[i], tcq_tokenizer_piece(tok, ids[i]));
    } else {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    free(ids);
    tcq_tokenizer_free(tok);
    return 0;
}
