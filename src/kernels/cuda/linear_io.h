/* A linear call fused with its neighbours (the device model's decode, where each launch costs a
 * few microseconds of a ~170 us layer): the activation prep of the integer kernels can form
 * rmsnorm(x) itself or read a previous call's unfinished output (pend.cuh), and the chunk sums can
 * add into y (the residual add) or be left to the consumer.  Only the integer kernels (M <= 8 at
 * most, imma.cu) take these; tcq_cuda_linear_io_ok says whether a call does.  Not installed. */
#ifndef TCQ_LINEAR_IO_H
#define TCQ_LINEAR_IO_H

#include "cuda_internal.h"
#include "pend.cuh"

struct tcq_cuda_io {
    const float *norm;          /* activation row m = rmsnorm(x row m) * norm (eps): x is the residual stream */
    float eps;
    const tcq_cuda_pend *src;   /* activation = this pending output of the previous call on ctx (x unused) */
    int accumulate;             /* y += W x (the chunk sums added to what y holds) */
    tcq_cuda_pend *defer;       /* y not written: the output is described here, valid until the call
                                 * after the next one on ctx (its partials live in the context scratch) */
};

/* 1 if tcq_cuda_linear_io takes (w, up, M, path) with (accumulate) */
int tcq_cuda_linear_io_ok(const tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, int64_t M,
                          tcq_kpath path, int accumulate);
/* tcq_cuda_linear (up NULL) or tcq_cuda_linear_swiglu (up: w the gate) with io's fusions */
tcq_status tcq_cuda_linear_io(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x, float *y,
                              int64_t M, tcq_kpath path, const tcq_cuda_io *io);
/* imma.cu: tcq_cuda_linear_im with io (NULL: plain) */
tcq_status tcq_cuda_linear_im_io(tcq_cuda_ctx *ctx, const tcq_trellis *w, const tcq_trellis *up, const float *x,
                                 float *y, int64_t M, int limbs, const tcq_cuda_io *io);

#endif
