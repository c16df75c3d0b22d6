/* The kernel registry: every CPU kernel variant the dispatcher can run on this CPU, by the name
 * tcq_kctx_last_kernel gives it, with the settings that select it.  test_kernels walks it (each
 * entry against its reference) and `tcq bench kernels --kernel NAME` times one entry.  Internal:
 * tests and the bench link libtcq statically. */
#ifndef TCQ_KERNELS_REGISTRY_H
#define TCQ_KERNELS_REGISTRY_H

#include "tcq_kernels.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tcq_kernel_info {
    char name[96];            /* "trellis.reduce.fast.m1.avx512" (tcq_kctx_last_kernel) */
    const char *op;           /* its family (registry.c's families[]): "trellis.reduce", "f16", ... */
    int family;               /* index into that table */
    tcq_wformat fmt;          /* the weight format it multiplies */
    int axis;                 /* trellis weights: the coded axis (0 scatter, 1 reduce / SwiGLU) */
    int swiglu;               /* runs through tcq_linear_swiglu */
    tcq_kpath path;           /* TCQ_PATH_AUTO where the path does not apply (dense) */
    tcq_kregime regime;       /* TCQ_KR_AUTO where the regime does not apply (dense) */
    int isa;                  /* tcq_isa to force */
    unsigned exclude;         /* TCQ_KV_* variants to leave out */
    const char *variant;      /* "scalar", "avx2", "avx2vnni", "avx512", "avx512amx" */
    int64_t m_min, m_max;     /* a forced call with M in this range runs this entry */
    const char *reference;    /* what test_kernels checks it against */
} tcq_kernel_info;

/* Entries on this CPU (built once, thread-safe). */
int tcq_kernel_count(void);
const tcq_kernel_info *tcq_kernel_get(int i);      /* NULL outside [0, count) */
const tcq_kernel_info *tcq_kernel_find(const char *name);   /* NULL: not a kernel of this CPU */
/* Pin ctx to one entry: its ISA, variants, path and regime (calls with M in [m_min, m_max] run it).
 * Fails naming the kernel if it is not in the registry. */
tcq_status tcq_kctx_force_kernel(tcq_kctx *ctx, const char *name);

/* The names the dispatcher gives (linear.c): op 0 scatter, 1 reduce, 2 fused SwiGLU. */
void tcq_trellis_kernel_name(int isa, unsigned exclude, tcq_kpath path, int op, tcq_kregime reg, int64_t M,
                             char *buf, size_t n);
/* reg: a pinned regime (dense f16/bf16: GEMM or their tiles; the other formats ignore it); path: bf16's
 * GEMM regime on the fast path (AUTO included) is the bf16-activation GEMM */
void tcq_dense_kernel_name(tcq_wformat fmt, int isa, tcq_kpath path, tcq_kregime reg, int64_t M, char *buf, size_t n);

#endif
