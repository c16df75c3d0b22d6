/* AMX-INT8 fast trellis kernel for axis 0 (scatter), M >= 2.
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

typedef struct tilecfg {
    uint8_t palette, start_row, rsv[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

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
 * tile rows bb[gg][k] */
AI void decode_tile(const dec *d, const uint32_t *cb, int64_t cs, int64_t i0, int64_t i1, int g0, const int GB,
                    __m512i *bb, const int BC)
{
    for (int k = 0; k < 16; k++) {
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
                        if (gb == 4) decode_tile(d, cb, cs, ic + 16 * st, ie, g0, 4, bs, BC);
                        else if (gb == 2) decode_tile(d, cb, cs, ic + 16 * st, ie, g0, 2, bs, BC);
                        else decode_tile(d, cb, cs, ic + 16 * st, ie, g0, 1, bs, BC);
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

/* ---- axis 1 (reduce) --------------------------------------------------------------------- */

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
