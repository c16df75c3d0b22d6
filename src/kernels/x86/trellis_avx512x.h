/* The AVX-512 trellis kernels' entries, shared by the files of one ISA (compiled with the
 * _avx512x flags): trellis_avx512x.c holds the tables that dispatch to them and the f32 decode,
 * trellis_reduce_avx512x.c axis 1, trellis_scatter_avx512x.c axis 0.  Not installed. */
#ifndef TCQ_TRELLIS_AVX512X_H
#define TCQ_TRELLIS_AVX512X_H
#include "../kernels.h"

/* Blocks [b0, b0 + nb) of coded row r as f32 weights (value * scale). */
void tcq_avx512_decode_rows(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, float *out);
/* axis 1 (trellis_reduce_avx512x.c): M = 1..4 one decode shared by the rows; the tiles */
void tcq_avx512_reduce_fast_shared(const kr_args *a);
void tcq_avx512_reduce_exact_shared(const kr_args *a);
void tcq_avx512_reduce_fast_tile16(const kr_args *a);
void tcq_avx512_reduce_exact_tile(const kr_args *a);
/* axis 0 (trellis_scatter_avx512x.c) */
void tcq_avx512_scatter_fast_shared(const ks_args *a);
void tcq_avx512_scatter_exact_shared(const ks_args *a);
void tcq_avx512_scatter_fast_tile(const ks_args *a);
void tcq_avx512_scatter_exact_tile(const ks_args *a);

#endif
