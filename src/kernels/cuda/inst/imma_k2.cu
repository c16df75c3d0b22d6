/* The integer tensor-core kernels for k = 2 (im_kernels.cuh). */
#define TCQ_IM_K 2
#include "../im_kernels.cuh"
