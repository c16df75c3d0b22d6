/* Fast-path kernels for k=2 (fast_kernels.cuh). */
#define TCQ_FAST_K 2
#include "../fast_kernels.cuh"
