/* Tensor-core kernels for k = 1 (tc_kernels.cuh). */
#define TCQ_TC_K 1
#include "../tc_kernels.cuh"
