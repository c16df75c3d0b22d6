/* Internal helpers shared by every module. Not installed. */
#ifndef TCQ_INTERNAL_H
#define TCQ_INTERNAL_H

#include "tcq_kernels.h"

#include <stdarg.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define TCQ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TCQ_PRINTF(a, b)
#endif

/* Record a failure for tcq_last_error() and return its status, so call sites read
 *     return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor %s: bad dtype", path, name);          */
tcq_status tcq_fail(tcq_status s, const char *fmt, ...) TCQ_PRINTF(2, 3);
/* Prefix the current message with "prefix: " (to add the file name at an outer layer). */
void tcq_error_prefix(const char *fmt, ...) TCQ_PRINTF(1, 2);
void tcq_error_clear(void);

/* 64-byte aligned allocation; free with tcq_afree. Size 0 returns a valid pointer. */
void *tcq_amalloc(size_t bytes);
void tcq_afree(void *p);

#define TCQ_TRY(expr)                                                                              \
    do {                                                                                           \
        tcq_status tcq_try_s_ = (expr);                                                            \
        if (tcq_try_s_ != TCQ_OK) return tcq_try_s_;                                               \
    } while (0)

#define TCQ_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TCQ_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
