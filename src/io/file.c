/* Whole-file reads and atomic whole-file writes. */
#include "io.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

tcq_status tcq_io_read_file(const char *path, char **out, size_t *len)
{
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return tcq_fail(errno == ENOENT ? TCQ_ERR_NOT_FOUND : TCQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, fp);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(fp);
    fclose(fp);
    if (!buf) return tcq_fail(TCQ_ERR_NOMEM, "%s: reading", path);
    if (err) {
        free(buf);
        return tcq_fail(TCQ_ERR_IO, "%s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return TCQ_OK;
}

tcq_status tcq_io_write_file(const char *path, const void *data, size_t len)
{
    if (!path || (!data && len)) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_io_write_file: NULL argument");
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16);
    if (!tmp) return tcq_fail(TCQ_ERR_NOMEM, "%s", path);
    snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        tcq_status s = tcq_fail(TCQ_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
        free(tmp);
        return s;
    }
    fchmod(fd, 0644);
    tcq_status s = TCQ_OK;
    const char *p = data;
    size_t left = len;
    while (left && s == TCQ_OK) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            s = tcq_fail(TCQ_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        else {
            p += n;
            left -= (size_t)n;
        }
    }
    if (close(fd) != 0 && s == TCQ_OK) s = tcq_fail(TCQ_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    if (s == TCQ_OK && rename(tmp, path) != 0)
        s = tcq_fail(TCQ_ERR_IO, "%s: rename from %s failed: %s", path, tmp, strerror(errno));
    if (s != TCQ_OK) unlink(tmp);
    free(tmp);
    return s;
}
