/* AMX-INT8 fast trellis kernel for axis 1 (reduce), the tile regime.  The tile unit's dot
 * product for 16 coded rows x 16 activation rows; the vector units only decode (see
 * trellis_scatter_amx.c for the costs).  Its own file: in one translation unit with the axis-0
 * kernel, gcc compiled that one 40% smaller and 25% slower at M=32. */
#include "trellis_dec_avx512.h"
#include "trellis_amx.h"

/* TDPBUSD with A = 16 decoded coded rows (one group of 16 positions per tile row, unsigned x)
 * and B = the activations of 16 rows side by side (kq_act.qt: B[k][4n+b] = q of row n at
 * position k), so C[r][n] = sum_k bytesum(x[r][k]) q[n][k]: coded rows by activation rows.
 * Tiles: C = tmm0..3 (up to 4 tiles of 16 activation rows), A = tmm4, B = tmm6 / tmm7. */
static void tiles_config_reduce(int mr)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64;
    for (int t = 0; t < 6; t++) c.rows[t] = (uint8_t)mr;
    c.rows[6] = c.rows[7] = 16;
    _tile_loadconfig(&c);
}

/* One activation block's tile ops into the C tiles c0.. (c0 + 3 when ntc == 4) */
#define RED_TILES(c0, c1, c2, c3)                                                                  \
    do {                                                                                           \
        _tile_zero(c0);                                                                            \
        if (ntc > 1) _tile_zero(c1);                                                               \
        if (ntc > 2) _tile_zero(c2);                                                               \
        if (ntc > 3) _tile_zero(c3);                                                               \
        for (int st = 0; st < GPQ; st++) {                                                         \
            const uint32_t *q = qt + st * 256;                                                     \
            _tile_loadd(4, abuf + st * 16, 64);                                                    \
            _tile_loadd(6, q, 64);                                                                 \
            _tile_dpbusd(c0, 4, 6);                                                                \
            if (ntc > 1) {                                                                         \
                _tile_loadd(7, q + tstride, 64);                                                   \
                _tile_dpbusd(c1, 4, 7);                                                            \
            }                                                                                      \
            if (ntc > 2) {                                                                         \
                _tile_loadd(6, q + 2 * tstride, 64);                                               \
                _tile_dpbusd(c2, 4, 6);                                                            \
            }                                                                                      \
            if (ntc > 3) {                                                                         \
                _tile_loadd(7, q + 3 * tstride, 64);                                               \
                _tile_dpbusd(c3, 4, 7);                                                            \
            }                                                                                      \
        }                                                                                          \
        _tile_stored(c0, cb, 64);                                                                  \
        if (ntc > 1) _tile_stored(c1, cb + 256, 64);                                               \
        if (ntc > 2) _tile_stored(c2, cb + 512, 64);                                               \
        if (ntc > 3) _tile_stored(c3, cb + 768, 64);                                               \
    } while (0)

/* facc[t][r] += f32(C + corr) * d of activation block kb, from the stored C tiles cb */
AI void reduce_fold(const kq_act *qa, const int32_t *cb, __m512 *facc, int64_t nt0, int ntc, int mr, int64_t kb)
{
    for (int t = 0; t < ntc; t++) {
        const int64_t o = ((nt0 + t) * qa->nblk + kb) * 16;
        const __m512i cv = _mm512_load_si512(qa->corrt + o);
        const __m512 dv = _mm512_load_ps(qa->dt + o);
        for (int r = 0; r < mr; r++) {
            const __m512i iv = _mm512_add_epi32(_mm512_load_si512(cb + t * 256 + r * 16), cv);
            facc[t * 16 + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iv), dv, facc[t * 16 + r]);
        }
    }
}

AI void reduce_amx_(const kr_args *a, const dec *d, const int BC)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const int T = w->p.T;
    const int64_t nb = w->cols / T, wpb = T * w->p.k / 32, NT = (a->M + 15) / 16, nkb = nb * (T / QB);
    const int mr = (int)(a->r1 - a->r0);
    __m512i *ab = a->scratch;                        /* [2][4 steps][16 rows] A tile rows */
    int32_t *cbuf = (int32_t *)(ab + 2 * 4 * 16);    /* [2][4 tiles][16 rows][16] */
    __m512 *facc = (__m512 *)(cbuf + 2 * 4 * 256);   /* [4 tiles][16 rows] */
    const int64_t tstride = qa->npad * 16;           /* dwords between activation tiles */
    tiles_config_reduce(mr);
    for (int64_t nt0 = 0; nt0 < NT; nt0 += 4) {
        const int ntc = (int)TCQ_MIN(4, NT - nt0);
        for (int j = 0; j < 4 * 16; j++) facc[j] = _mm512_setzero_ps();
        /* Software pipeline over activation blocks: A tile rows and C buffers alternate, and
         * block kb's C is folded while block kb+1 is in the tile unit (a vector load of a
         * tile store, like a tile load of vector stores, waits for the store to commit). */
        for (int64_t kb = 0; kb < nkb; kb++) {
            const int64_t b = kb / (T / QB);
            const int qb = (int)(kb % (T / QB)), par = (int)(kb & 1);
            __m512i *abuf = ab + par * 64;
            int32_t *cb = cbuf + par * 1024;
            for (int r = 0; r < mr; r++) {
                const uint32_t *rb = w->codes + (a->r0 + r) * (w->cols * w->p.k / 32);
                if (qb == 0 && b + 2 < nb) {
                    /* 16 rows are 16 streams: the hardware prefetcher fell behind (the first
                     * load of each block was 27% of the samples at M=4) */
                    _mm_prefetch((const char *)(rb + (b + 2) * wpb), _MM_HINT_T0);
                    _mm_prefetch((const char *)(rb + (b + 2) * wpb) + 64, _MM_HINT_T0);
                }
                const blk bl = blk_load(d, rb + b * wpb, BC);
#pragma GCC unroll 4
                for (int st = 0; st < GPQ; st++) _mm512_store_si512(abuf + st * 16 + r, dec_x(d, bl, qb * GPQ + st, BC));
            }
            const uint32_t *qt = qa->qt + (nt0 * qa->npad + kb * QB) * 16;
            if (ntc > 2 || !par) RED_TILES(0, 1, 2, 3);
            else RED_TILES(2, 3, 0, 1);   /* ntc <= 2: odd blocks use C2, C3 */
            if (kb > 0) reduce_fold(qa, cbuf + (1 - par) * 1024, facc, nt0, ntc, mr, kb - 1);
        }
        reduce_fold(qa, cbuf + ((nkb - 1) & 1) * 1024, facc, nt0, ntc, mr, nkb - 1);
        for (int t = 0; t < ntc; t++) {
            const int64_t n0 = (nt0 + t) * 16, nn = TCQ_MIN(16, a->M - n0);
            for (int r = 0; r < mr; r++) {
                const float f = _cvtsh_ss(w->scales[a->r0 + r]) * TCQ_RMAD_RINV;
                float v[16];
                _mm512_storeu_ps(v, facc[t * 16 + r]);
                for (int64_t n = 0; n < nn; n++) a->y[(n0 + n) * a->ldy + a->r0 + r] = v[n] * f;
            }
        }
    }
    _tile_release();
}

void tcq_amx_reduce_fast(const kr_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    for (int64_t r0 = a->r0; r0 < a->r1; r0 += 16) {   /* a tile holds 16 coded rows */
        kr_args s = *a;
        s.r0 = r0;
        s.r1 = TCQ_MIN(a->r1, r0 + 16);
        BC_CALL(&d, reduce_amx_(&s, &d, BC));
    }
}
