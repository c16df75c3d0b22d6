/* libFuzzer: any bytes encode and decode without crashing through the tokenizer.json path
 * (TCQ_FUZZ_TOKENIZER names the file; default: the tinyqwen tokenizer of the shared data). */
#include "tcq.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static tcq_tokenizer *tok;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tok) {
        const char *p = getenv("TCQ_FUZZ_TOKENIZER");
        if (tcq_tokenizer_load(p ? p : TCQ_REPO_DATA "/tinyqwen", &tok) != TCQ_OK) abort();
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (tcq_tokenizer_encode_alloc(tok, (const char *)data, size, TCQ_TOK_ADD_SPECIAL, &ids, &n) != TCQ_OK) abort();
    char *text = NULL;
    if (tcq_tokenizer_decode(tok, ids, n, 0, &text, NULL) != TCQ_OK) abort();
    free(text);
    free(ids);
    return 0;
}
