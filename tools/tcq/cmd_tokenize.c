/* tcq tokenize: print the token ids of a text. */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: tcq tokenize MODEL_DIR|tokenizer.json|tokenizer.bin (--text STR | --file PATH)\n"
               "                    [--json] [--pieces] [--no-bos] [--no-parse-special] [--stats]\n"
               "  prints the ids space-separated; --json prints a JSON array (of {id, piece, text}\n"
               "  objects with --pieces); --pieces alone prints one 'id<TAB>piece' per line.\n"
               "  --no-bos: do not add BOS/EOS; --no-parse-special: special tokens in STR are text.\n"
               "  --stats: print only counts and encode/decode speed (and check the round trip).\n");
}

int cmd_tokenize(int argc, char **argv)
{
    const char *path = NULL, *text = NULL, *file = NULL;
    int as_json = 0, pieces = 0, stats = 0;
    unsigned flags = TCQ_TOK_ADD_SPECIAL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--text") && i + 1 < argc) {
            text = argv[++i];
        } else if (!strcmp(argv[i], "--file") && i + 1 < argc) {
            file = argv[++i];
        } else if (!strcmp(argv[i], "--stats")) {
            stats = 1;
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
    if (!path || !text == !file) {
        usage(stderr);
        return 2;
    }
    char *owned = NULL;
    size_t text_len = text ? strlen(text) : 0;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            fprintf(stderr, "tcq tokenize: cannot open %s\n", file);
            return 1;
        }
        size_t cap = 1 << 16;
        owned = malloc(cap);
        size_t k;
        while (owned && (k = fread(owned + text_len, 1, cap - text_len, f)) > 0) {
            text_len += k;
            if (text_len == cap) {
                char *p = realloc(owned, cap *= 2);
                if (!p) { free(owned); owned = NULL; }
                owned = p;
            }
        }
        fclose(f);
        if (!owned) {
            fprintf(stderr, "tcq tokenize: out of memory reading %s\n", file);
            return 1;
        }
        text = owned;
    }
    double t0 = cli_now();
    tcq_tokenizer *tok;
    tcq_status s = tcq_tokenizer_load(path, &tok);
    if (s != TCQ_OK) {
        free(owned);
        return cli_fail(s, "tokenize");
    }
    double t1 = cli_now();
    int32_t *ids = NULL;
    size_t n = 0;
    s = tcq_tokenizer_encode_alloc(tok, text, text_len, flags, &ids, &n);
    double t2 = cli_now();
    if (s != TCQ_OK) {
        tcq_tokenizer_free(tok);
        free(owned);
        return cli_fail(s, "tokenize");
    }
    if (stats) {
        char *back = NULL;
        size_t bl = 0;
        s = tcq_tokenizer_decode(tok, ids, n, TCQ_DETOK_SKIP_SPECIAL, &back, &bl);
        double t3 = cli_now();
        if (s == TCQ_OK) {
            printf("%zu bytes -> %zu tokens (%.3f bytes/token); load %.3f s, encode %.3f s (%.2f MB/s), "
                   "decode %.3f s; round trip %s\n", text_len, n, n ? (double)text_len / (double)n : 0.0, t1 - t0,
                   t2 - t1, (double)text_len / 1e6 / (t2 - t1 > 1e-9 ? t2 - t1 : 1e-9), t3 - t2,
                   bl == text_len && memcmp(back, text, bl) == 0 ? "exact" : "differs (normalization or unknown tokens)");
        }
        free(back);
        free(ids);
        free(owned);
        tcq_tokenizer_free(tok);
        return s == TCQ_OK ? 0 : cli_fail(s, "tokenize");
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
    free(owned);
    tcq_tokenizer_free(tok);
    return 0;
}
