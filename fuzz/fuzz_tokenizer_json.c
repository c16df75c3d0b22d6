/* libFuzzer: any tokenizer.json either loads (then encodes and decodes) or fails cleanly. */
#include "tcq.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz-tok-%d.json", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    tcq_tokenizer *tok = NULL;
    if (tcq_tokenizer_load(path, &tok) == TCQ_OK) {
        int32_t *ids = NULL;
        size_t n = 0;
        const char *text = "Hello w\xC3\xB6rld <s> 123 \xF0\x9F\x98\x80  x";
        if (tcq_tokenizer_encode_alloc(tok, text, strlen(text), TCQ_TOK_ADD_SPECIAL, &ids, &n) == TCQ_OK) {
            char *back = NULL;
            if (tcq_tokenizer_decode(tok, ids, n, 0, &back, NULL) == TCQ_OK) free(back);
            free(ids);
        }
        tcq_tokenizer_free(tok);
    }
    remove(path);
    return 0;
}
