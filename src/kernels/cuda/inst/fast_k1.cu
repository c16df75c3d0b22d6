/* Fast-path kernels for k=1 (fast_kernels.cuh). */
#define TCQ_FAST_K 1
#include "../fast_kernels.cuh"
