/* AVX2 trellis kernels (placeholder until the SIMD kernels land: the scalar reference runs). */
#include "../kernels.h"

const tr_table *tcq_tr_avx2(void) { return NULL; }
