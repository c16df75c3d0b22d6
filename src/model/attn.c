/* Attention core: the generic build (the reference) and the per-ISA selection. */
#include "model/model.h"

#define ATTN_NAME tcq_attn_generic
#include "model/attn_impl.h"

void tcq_attn_avx2(const tcq_attn_args *a);
void tcq_attn_avx512(const tcq_attn_args *a);
void tcq_attn_avx2_softmax(float *p, int n);
void tcq_attn_avx512_softmax(float *p, int n);

tcq_attn_fn tcq_attn_select(tcq_isa isa)
{
    switch (isa) {
    case TCQ_ISA_AVX512: return tcq_attn_avx512;
    case TCQ_ISA_AVX2: return tcq_attn_avx2;
    default: return tcq_attn_generic;
    }
}

tcq_softmax_fn tcq_attn_softmax_select(tcq_isa isa)
{
    switch (isa) {
    case TCQ_ISA_AVX512: return tcq_attn_avx512_softmax;
    case TCQ_ISA_AVX2: return tcq_attn_avx2_softmax;
    default: return tcq_attn_generic_softmax;
    }
}
