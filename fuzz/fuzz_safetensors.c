/* libFuzzer target: the safetensors parser, then every accessor on what it accepted, and trellis
 * views over the tensors it finds (decoding a row reads through the view, so a view that does
 * not fit its tensor is caught by AddressSanitizer). */
#include "tcq_kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint8_t sink;

static void try_trellis(const tcq_st_file *f, const tcq_tensor_info *w)
{
    size_t n = strlen(w->name);
    if (w->dtype != TCQ_DTYPE_U32 || n < 7 || strcmp(w->name + n - 7, ".weight") != 0 || n > 200) return;
    char name[256];
    memcpy(name, w->name, n - 7);
    strcpy(name + n - 7, ".scales");
    const tcq_tensor_info *s = tcq_st_find(f, name);
    if (!s) return;
    static const tcq_qentry entries[] = {
        {TCQ_QMODE_TRELLIS, 2, 256, 12, 1, 0}, {TCQ_QMODE_TRELLIS, 3, 256, 12, 0, 1},
        {TCQ_QMODE_TRELLIS, 4, 64, 8, 0, 0},   {TCQ_QMODE_TRELLIS, 1, 64, 16, 1, 0},
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        tcq_trellis t;
        if (tcq_trellis_from_tensors("fuzz", &entries[i], w, s, &t) != TCQ_OK) continue;
        if (t.cols > (1 << 16)) continue;
        float *row = malloc((size_t)t.cols * sizeof *row);
        if (!row) continue;
        if (tcq_trellis_decode_row(&t, t.rows - 1, row) == TCQ_OK) sink ^= (uint8_t)(row[0] != 0);
        free(row);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tcq_st_file *f = NULL;
    if (tcq_st_parse(data, size, "fuzz.safetensors", &f) != TCQ_OK) return 0;
    for (int64_t i = 0; i < tcq_st_count(f); i++) {
        const tcq_tensor_info *t = tcq_st_tensor(f, i);
        if (tcq_st_find(f, t->name) != t) abort();
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        try_trellis(f, t);
    }
    (void)tcq_st_metadata(f, "format");
    (void)tcq_st_hole_bytes(f);
    tcq_st_close(f);
    return 0;
}
