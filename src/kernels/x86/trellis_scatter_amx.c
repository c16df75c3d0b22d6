/* AMX-INT8 fast trellis kernel for axis 0 (scatter), the tile regime (M >= 5).
 *
 * TDPBSUD C[m][n] += sum_k sum_b A[m][4k+b] * B[k][4n+b] (A signed, B unsigned bytes) is the
 * fast path's vpdpbusd for 16 activation rows x 16 stored rows x 16 columns at once:
 *   A = the activation q4 rows as they are ([M, npad] dwords, q replicated in 4 bytes): rows
 *       m0.., 16 stored rows per tile row (64 bytes), row stride npad * 4;
 *   B = 16 decoded rows x = s*MUL + ADD (16 columns each: one zmm per stored row, stored as a
 *       tile row), so C[m][n] = sum_k q[m][k] bytesum(x[k][n]).
 * The vector units only decode (4 instructions + a store per 16 weights, the dot product moves to
 * the tile unit), so up to 32 activation rows cost about what one does.  Per activation block
 * (64 stored rows, one step d) C is stored and folded into the f32 accumulators exactly as the
 * AVX-512 kernels do: acc += f32(C + corr) * d, the same integers. */
#include "trellis_dec_avx512.h"
#include "trellis_amx.h"

/* Tiles: C0..C3 = tmm0..3, A (activation rows m0.. and m0+16..) = tmm4, tmm7, B = tmm5 / tmm6.
 * One m-tile (mr1 == 0): C0..3 are 4 column groups; two: C0, C1 = m-tile 0 x 2 groups, C2, C3 =
 * m-tile 1. */
static void tiles_config(int mr0, int mr1)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64;
    c.rows[0] = c.rows[1] = (uint8_t)mr0;
    c.rows[2] = c.rows[3] = (uint8_t)(mr1 ? mr1 : mr0);
    c.rows[4] = (uint8_t)mr0;
    c.rows[7] = (uint8_t)(mr1 ? mr1 : 1);
    c.rows[5] = c.rows[6] = 16;
    _tile_loadconfig(&c);
}

/* decode stored rows i0..i0+15 (rows >= i1 give zeros) of column groups g0..g0+GB-1 into the
 * tile rows bb[gg][k]; pf (if not NULL): prefetch row k of the next block, pf + k * cs */
AI void decode_tile(const dec *d, const uint32_t *cb, int64_t cs, int64_t i0, int64_t i1, int g0, const int GB,
                    __m512i *bb, const uint32_t *pf, const int BC)
{
    for (int k = 0; k < 16; k++) {
        if (pf) {
            _mm_prefetch((const char *)(pf + k * cs), _MM_HINT_T0);
            _mm_prefetch((const char *)(pf + k * cs) + 64, _MM_HINT_T0);
        }
        if (i0 + k < i1) {
            const blk bl = blk_load(d, cb + (i0 + k) * cs, BC);
#pragma GCC unroll 4
            for (int gg = 0; gg < GB; gg++) _mm512_store_si512(bb + gg * 16 + k, dec_x(d, bl, g0 + gg, BC));
        } else
            for (int gg = 0; gg < GB; gg++) _mm512_store_si512(bb + gg * 16 + k, _mm512_setzero_si512());
    }
}

AI void scatter_amx_(const ks_args *a, const dec *d, const int BC)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const int T = w->p.T, ng = d->ng;
    __m512i *bb = a->scratch;                      /* [4 steps][4 groups][16 rows] B tile rows */
    int32_t *cbuf = (int32_t *)(bb + 4 * 4 * 16);  /* [4 tiles][16 rows][16] C */
    const size_t qstride = (size_t)qa->npad * 4;
    for (int64_t j = 0; j < a->nbc * a->M * T; j++) a->acc[j] = 0;
    for (int64_t m0 = 0; m0 < a->M; m0 += 32) {
        const int mr0 = (int)TCQ_MIN(16, a->M - m0), mr1 = (int)TCQ_MAX(0, TCQ_MIN(16, a->M - m0 - 16));
        const int GB = mr1 ? 2 : 4;
        tiles_config(mr0, mr1);
        for (int64_t ic = a->i0; ic < a->i1; ic += QB) {
            const int64_t kb = ic / QB, ie = TCQ_MIN(a->i1, ic + QB);
            for (int64_t cbk = 0; cbk < a->nbc; cbk++) {
                const uint32_t *cb;
                int64_t cs;
                kblock_col(w, a->b + cbk, &cb, &cs);
                float *acc = a->acc + cbk * a->M * T;
                for (int g0 = 0; g0 < ng; g0 += GB) {
                    const int gb = TCQ_MIN(GB, ng - g0);
                    const int ns = (int)((ie - ic + 15) / 16);
                    /* Decode the whole batch (<= 4 steps of 16 rows x gb groups) before any tile
                     * op reads it: a tile load cannot take data from the store buffer, so it waits
                     * until the stores commit, and stores commit in order behind every earlier
                     * instruction.  Decoding step by step between the TDPBSUDs serialised the two
                     * units (measured ~120 cycles per TDPBSUD); batch by batch, the next batch's
                     * decode runs while this batch's tile ops execute. */
                    for (int st = 0; st < ns; st++) {
                        __m512i *bs = bb + st * GB * 16;
                        /* The first batch reads each row's block from memory (strided rows, the
                         * wrap load of group 0 took 12-16% of the samples): meanwhile prefetch
                         * the same rows of the next column block, or the next chunk's rows. */
                        const int64_t i = ic + 16 * st;
                        const uint32_t *pf = NULL;
                        if (g0 == 0 && cbk + 1 < a->nbc) pf = kblock(w, 0, a->b + cbk + 1) + i * cs;
                        else if (g0 == 0 && i + QB + 16 <= a->i1) pf = kblock(w, 0, a->b) + (i + QB) * cs;
                        if (gb == 4) decode_tile(d, cb, cs, i, ie, g0, 4, bs, pf, BC);
                        else if (gb == 2) decode_tile(d, cb, cs, i, ie, g0, 2, bs, pf, BC);
                        else decode_tile(d, cb, cs, i, ie, g0, 1, bs, pf, BC);
                    }
                    _tile_zero(0);
                    _tile_zero(1);
                    _tile_zero(2);
                    _tile_zero(3);
                    for (int st = 0; st < ns; st++) {
                        const uint32_t *q = qa->q4 + m0 * qa->npad + ic + 16 * st;
                        const __m512i *bs = bb + st * GB * 16;
                        _tile_loadd(4, q, qstride);
                        if (mr1) {
                            _tile_loadd(7, q + 16 * qa->npad, qstride);
                            _tile_loadd(5, bs, 64);
                            _tile_dpbsud(0, 4, 5);
                            _tile_dpbsud(2, 7, 5);
                            if (gb > 1) {
                                _tile_loadd(6, bs + 16, 64);
                                _tile_dpbsud(1, 4, 6);
                                _tile_dpbsud(3, 7, 6);
                            }
                        } else {
                            _tile_loadd(5, bs, 64);
                            _tile_dpbsud(0, 4, 5);
                            if (gb > 1) {
                                _tile_loadd(6, bs + 16, 64);
                                _tile_dpbsud(1, 4, 6);
                            }
                            if (gb > 2) {
                                _tile_loadd(5, bs + 32, 64);
                                _tile_dpbsud(2, 4, 5);
                                _tile_loadd(6, bs + 48, 64);
                                _tile_dpbsud(3, 4, 6);
                            }
                        }
                    }
                    _tile_stored(0, cbuf, 64);
                    _tile_stored(1, cbuf + 256, 64);
                    _tile_stored(2, cbuf + 512, 64);
                    _tile_stored(3, cbuf + 768, 64);
                    /* fold: tile t holds (m-tile, group) = mr1 ? (t / 2, g0 + t % 2) : (0, g0 + t) */
                    for (int t = 0; t < 4; t++) {
                        const int mt = mr1 ? t / 2 : 0, g = g0 + (mr1 ? t % 2 : t);
                        const int mr = mt ? mr1 : mr0;
                        if (g >= g0 + gb || !mr) continue;
                        for (int m = 0; m < mr; m++) {
                            const int64_t mm = m0 + mt * 16 + m;
                            const __m512i iv = _mm512_add_epi32(_mm512_load_si512(cbuf + t * 256 + m * 16),
                                                                _mm512_set1_epi32(qa->corr[mm * qa->nblk + kb]));
                            float *o = acc + mm * T + g * 16;
                            _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(iv),
                                                                _mm512_set1_ps(qa->d[mm * qa->nblk + kb]),
                                                                _mm512_loadu_ps(o)));
                        }
                    }
                }
            }
        }
    }
    _tile_release();
    const __m512 ri = _mm512_set1_ps(TCQ_RMAD_RINV);
    for (int64_t j = 0; j < a->nbc * a->M * T; j += 16)
        _mm512_storeu_ps(a->acc + j, _mm512_mul_ps(_mm512_loadu_ps(a->acc + j), ri));
}

void tcq_amx_scatter_fast(const ks_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    BC_CALL(&d, scatter_amx_(a, &d, BC));
}
