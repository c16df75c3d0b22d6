/* Tensor-core kernels for k = 3 (tc_kernels.cuh). */
#define TCQ_TC_K 3
#include "../tc_kernels.cuh"
