/* The integer tensor-core kernels for k = 4 (im_kernels.cuh). */
#define TCQ_IM_K 4
#include "../im_kernels.cuh"
