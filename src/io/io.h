/* Helpers shared by the IO files. Not installed. */
#ifndef TCQ_IO_H
#define TCQ_IO_H

#include "../core/internal.h"


#endif
