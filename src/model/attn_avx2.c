/* Attention core built with AVX2 flags: same arithmetic as attn.c (see attn_impl.h). */
#include "model/model.h"

#define ATTN_NAME tcq_attn_avx2
#include "model/attn_impl.h"
