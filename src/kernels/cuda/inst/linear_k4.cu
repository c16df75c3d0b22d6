/* Tensor-core kernels for k = 4 (tc_kernels.cuh). */
#define TCQ_TC_K 4
#include "../tc_kernels.cuh"
