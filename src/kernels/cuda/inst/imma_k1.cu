/* The integer tensor-core kernels for k = 1 (im_kernels.cuh). */
#define TCQ_IM_K 1
#include "../im_kernels.cuh"
