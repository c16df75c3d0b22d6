/* Helpers shared by the IO files. Not installed. */
#ifndef TCQ_IO_H
#define TCQ_IO_H

#include "../core/internal.h"

/* Reads a whole file into a malloc'd NUL-terminated buffer (*len excludes the NUL). */
tcq_status tcq_io_read_text(const char *path, char **out, size_t *len);

#endif
