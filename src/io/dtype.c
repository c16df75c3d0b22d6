/* Element types of safetensors files. */
#include "../core/internal.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[TCQ_DTYPE_COUNT] = {
    [TCQ_DTYPE_F32] = {"F32", 4},  [TCQ_DTYPE_F16] = {"F16", 2},   [TCQ_DTYPE_BF16] = {"BF16", 2},
    [TCQ_DTYPE_F64] = {"F64", 8},  [TCQ_DTYPE_U8] = {"U8", 1},     [TCQ_DTYPE_I8] = {"I8", 1},
    [TCQ_DTYPE_U16] = {"U16", 2},  [TCQ_DTYPE_I16] = {"I16", 2},   [TCQ_DTYPE_U32] = {"U32", 4},
    [TCQ_DTYPE_I32] = {"I32", 4},  [TCQ_DTYPE_U64] = {"U64", 8},   [TCQ_DTYPE_I64] = {"I64", 8},
    [TCQ_DTYPE_BOOL] = {"BOOL", 1},
};

/* Dtypes the safetensors format defines that tcq does not compute with: reported as unsupported
 * rather than malformed, so the message says which is the case. */
static const char *const known_unsupported[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                                "F4", "C64", "C128", "I4", "U4"};

size_t tcq_dtype_size(tcq_dtype t) { return (unsigned)t < TCQ_DTYPE_COUNT ? dtypes[t].size : 0; }

const char *tcq_dtype_name(tcq_dtype t) { return (unsigned)t < TCQ_DTYPE_COUNT ? dtypes[t].name : "?"; }

tcq_status tcq_dtype_parse(const char *name, tcq_dtype *out)
{
    if (!name || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "dtype name or output is NULL");
    for (int i = 0; i < TCQ_DTYPE_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (tcq_dtype)i;
            return TCQ_OK;
        }
    for (size_t i = 0; i < sizeof known_unsupported / sizeof known_unsupported[0]; i++)
        if (strcmp(name, known_unsupported[i]) == 0)
            return tcq_fail(TCQ_ERR_UNSUPPORTED, "dtype '%s' is not supported", name);
    return tcq_fail(TCQ_ERR_FORMAT, "unknown dtype '%.64s'", name);
}
