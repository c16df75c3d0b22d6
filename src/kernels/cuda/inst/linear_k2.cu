/* Tensor-core kernels for k = 2 (tc_kernels.cuh). */
#define TCQ_TC_K 2
#include "../tc_kernels.cuh"
