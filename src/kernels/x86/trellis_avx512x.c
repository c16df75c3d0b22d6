/* AVX-512 trellis kernels (F/BW/VL + VNNI + VBMI).
 *
 * Decoding 16 consecutive weights of a block (one "group", lanes j = 0..15, t = 16g + j), in
 * trellis_dec_avx512.h: the group's 16 windows lie in one qword of the block (k <= 3; k = 4: two
 * qwords), broadcast from memory into vpmultishiftqb, which shifts each lane's window to bit 0;
 * vpandd keeps L bits; vpmulld/vpaddd give x = s*34038481 + 76625530.  (The first decoder held the
 * block in two registers and gathered each lane's 4 bytes with vpermi2b: 2 cycles of port 5.)
 * Fast path: vpdpbusd(acc, x, q replicated 4x) adds bytesum(x) * q; the -510 sum(q) offset seeds
 * the accumulator of each activation block, which is converted to f32 and scaled once.
 * Exact path: bytesum - 510 is one vpdpbusd against ones seeded with -510; value = refined
 * reciprocal (cvt, mul, fnmadd, fmadd, as tcq_code_value_computed); weight = value * scale. */
#include "trellis_avx512x.h"
#include "trellis_dec_avx512.h"

AI void decode_rows_(const tcq_trellis *w, const dec *d, int64_t r, int64_t b0, int64_t nb, float *out, const int BC)
{
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(w->scales[r]));
    for (int64_t b = 0; b < nb; b++) {
        const blk bl = blk_load(d, kblock(w, r, b0 + b), BC);
        for (int g = 0; g < d->ng; g++) _mm512_storeu_ps(out + b * w->p.T + g * 16, dec_w(d, bl, g, scale, BC));
    }
}

void tcq_avx512_decode_rows(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, float *out)
{
    dec d;
    dec_init(&d, w->p);
    BC_CALL(&d, decode_rows_(w, &d, r, b0, nb, out, BC));
}

static const tr_table table = {
    .isa = "avx512",
    .reduce = {{tcq_avx512_reduce_exact_shared, tcq_avx512_reduce_exact_shared, tcq_avx512_reduce_exact_tile},
               {tcq_avx512_reduce_fast_shared, tcq_avx512_reduce_fast_tile16, tcq_avx512_reduce_fast_tile16}},
    .scatter = {{tcq_avx512_scatter_exact_shared, tcq_avx512_scatter_exact_shared, tcq_avx512_scatter_exact_tile},
                {tcq_avx512_scatter_fast_shared, tcq_avx512_scatter_fast_shared, tcq_avx512_scatter_fast_tile}},
    .decode = tcq_avx512_decode_rows,
    .tag = {{NULL, NULL, NULL}, {NULL, "i16", "i16"}},
    .scatter_nbc = {{4, 4, 1}, {4, 4, 1}},
    .fast_shared_from = 4,
    /* exact: the f32 tile loses to decode + sgemm from M = 16 on axis 1, from 192 on axis 0;
     * fast: the int16 tiles took 0.5-0.7x the time of decode + OpenBLAS's AVX-512 sgemm at M =
     * 64..512 on Zen 5 (docs/PERFORMANCE.md "The fast tiles at every M"), and the axis-1 panel kernel
     * beats the tile from M = 24 (0.82-0.88x at 24..48, 0.58x at 512: "The panel kernel") */
    .reduce_fast_gemm = tcq_avx512_reduce_fast_panel,
    .gemm_from = {{192, TR_GEMM_NEVER}, {16, 24}},
};

/* AMX-INT8: the fast tile-regime kernels (M = 5..; trellis_*_amx.c).  M = 2..4 keep the register
 * kernels: side by side (docs/PERFORMANCE.md) they beat the tile unit there, whose vector stores ->
 * tile loads -> TDPBUSD -> tile stores -> vector loads round trip costs about one M=1 pass. */
static const tr_table table_amx = {
    .isa = "avx512",
    .reduce = {{tcq_avx512_reduce_exact_shared, tcq_avx512_reduce_exact_shared, tcq_avx512_reduce_exact_tile},
               {tcq_avx512_reduce_fast_shared, tcq_avx512_reduce_fast_tile16, tcq_amx_reduce_fast}},
    .scatter = {{tcq_avx512_scatter_exact_shared, tcq_avx512_scatter_exact_shared, tcq_avx512_scatter_exact_tile},
                {tcq_avx512_scatter_fast_shared, tcq_avx512_scatter_fast_shared, tcq_amx_scatter_fast}},
    .decode = tcq_avx512_decode_rows,
    .tag = {{NULL, NULL, NULL}, {NULL, "i16", "amx"}},
    .stag = {{NULL, NULL, NULL}, {NULL, NULL, "amx"}},
    .scatter_nbc = {{4, 4, 1}, {4, 4, 4}},
    .qt = 1,
    /* AMX's tiles ran M = 32 in 2.9-3.9x M = 1 on Sapphire Rapids (session 7), ahead of the
     * vector int16 tiles that beat sgemm at every M; never measured against sgemm at M > 32 (no
     * AMX machine since session 8) */
    .gemm_from = {{192, TR_GEMM_NEVER}, {16, TR_GEMM_NEVER}},
};

const tr_table *tcq_tr_avx512(int amx)
{
    const tcq_cpu_features *f = tcq_cpu();
    if (!(f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni && f->avx512vbmi)) return NULL;
    /* amx = 0 (tcq_kctx_exclude, TCQ_KV_NO_AMX) keeps the AVX-512 kernels on an AMX machine */
    return f->amx_int8 && amx ? &table_amx : &table;
}
