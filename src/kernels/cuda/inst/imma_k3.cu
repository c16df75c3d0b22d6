/* The integer tensor-core kernels for k = 3 (im_kernels.cuh). */
#define TCQ_IM_K 3
#include "../im_kernels.cuh"
