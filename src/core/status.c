/* Status strings and the per-thread error message. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char tcq_errbuf[1024];

const char *tcq_status_str(tcq_status s)
{
    static const char *const names[TCQ_STATUS_COUNT] = {
        [TCQ_OK] = "ok",
        [TCQ_ERR_INVALID_ARG] = "invalid argument",
        [TCQ_ERR_NOMEM] = "out of memory",
        [TCQ_ERR_IO] = "i/o error",
        [TCQ_ERR_FORMAT] = "malformed input",
        [TCQ_ERR_UNSUPPORTED] = "unsupported",
        [TCQ_ERR_NOT_FOUND] = "not found",
        [TCQ_ERR_RANGE] = "out of range",
        [TCQ_ERR_DEVICE] = "device error",
        [TCQ_ERR_INTERNAL] = "internal error",
    };
    if ((unsigned)s >= TCQ_STATUS_COUNT) return "unknown status";
    return names[s];
}

const char *tcq_last_error(void) { return tcq_errbuf; }

void tcq_error_clear(void) { tcq_errbuf[0] = 0; }

tcq_status tcq_fail(tcq_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tcq_errbuf, sizeof tcq_errbuf, fmt, ap);
    va_end(ap);
    return s;
}

void tcq_error_prefix(const char *fmt, ...)
{
    char prefix[512], old[sizeof tcq_errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tcq_errbuf, sizeof old);
    /* Truncation is fine: the message is for people. */
    size_t n = strlen(prefix);
    memcpy(tcq_errbuf, prefix, n);
    size_t m = strlen(old);
    if (n + 2 + m >= sizeof tcq_errbuf) m = sizeof tcq_errbuf - n - 3;
    tcq_errbuf[n] = ':';
    tcq_errbuf[n + 1] = ' ';
    memcpy(tcq_errbuf + n + 2, old, m);
    tcq_errbuf[n + 2 + m] = 0;
}

const char *tcq_version(void) { return "0.1.0"; }

void *tcq_amalloc(size_t bytes)
{
    size_t n = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, n ? n : 64);
}

void tcq_afree(void *p) { free(p); }
