/* AMX tile configuration (palette 1), shared by the AMX kernels. */
#ifndef TCQ_TRELLIS_AMX_H
#define TCQ_TRELLIS_AMX_H

#include <stdint.h>

/* the 64-byte LDTILECFG operand */
typedef struct tilecfg {
    uint8_t palette, start_row, rsv[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

#endif
