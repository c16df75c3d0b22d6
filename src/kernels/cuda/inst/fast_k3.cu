/* Fast-path kernels for k=3 (fast_kernels.cuh). */
#define TCQ_FAST_K 3
#include "../fast_kernels.cuh"
