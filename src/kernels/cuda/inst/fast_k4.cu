/* Fast-path kernels for k=4 (fast_kernels.cuh). */
#define TCQ_FAST_K 4
#include "../fast_kernels.cuh"
