/* libFuzzer target: config.json quantization parsing.  What parses must serialise, re-parse to
 * the same object, and survive tcq_qconfig_apply; lookups under both prefixes must agree. */
#include "tcq_kernels.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same(tcq_qentry a, tcq_qentry b)
{
    return a.mode == b.mode && a.bits == b.bits && a.group_size == b.group_size &&
           (a.mode != TCQ_QMODE_TRELLIS || (a.L == b.L && a.axis == b.axis && a.interleaved == b.interleaved));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tcq_qconfig *q = NULL;
    if (tcq_qconfig_parse((const char *)data, size, "fuzz.json", &q) != TCQ_OK) return 0;
    for (int64_t i = 0; i < tcq_qconfig_count(q); i++) {
        tcq_qentry e;
        const char *key = tcq_qconfig_entry(q, i, &e);
        if (!key || !same(tcq_qconfig_lookup(q, key), e)) abort();
    }
    char *obj = NULL, *cfg = NULL;
    if (tcq_qconfig_to_json(q, &obj) == TCQ_OK) {
        size_t n = strlen(obj) + 32;
        char *text = malloc(n);
        snprintf(text, n, "{\"quantization\": %s}", obj);
        tcq_qconfig *r = NULL;
        if (tcq_qconfig_parse(text, strlen(text), "reparse", &r) != TCQ_OK) abort();
        if (tcq_qconfig_count(r) != tcq_qconfig_count(q)) abort();
        for (int64_t i = 0; i < tcq_qconfig_count(q); i++) {
            tcq_qentry a, b;
            const char *ka = tcq_qconfig_entry(q, i, &a), *kb = tcq_qconfig_entry(r, i, &b);
            if (strcmp(ka, kb) || !same(a, b)) abort();
        }
        tcq_qconfig_free(r);
        free(text);
        free(obj);
    }
    if (tcq_qconfig_apply((const char *)data, size, q, &cfg) == TCQ_OK) free(cfg);
    tcq_qconfig_free(q);
    return 0;
}
