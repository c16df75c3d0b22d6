/* Helpers shared by the IO files. Not installed. */
#ifndef TCQ_IO_H
#define TCQ_IO_H

#include "../core/internal.h"

#include <stdio.h>

/* Like tcq_st_writer_add, but the bytes are read at write time from src at offset off (the
 * quantizer spills its outputs to a file so they never sit in memory together).  src must stay
 * open until the write. */
tcq_status tcq_st_writer_add_file(tcq_st_writer *w, const char *name, tcq_dtype dtype, int ndim, const int64_t *shape,
                                  FILE *src, int64_t off, size_t nbytes);


#endif
