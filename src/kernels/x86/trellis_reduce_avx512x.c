/* AVX-512 trellis kernels, axis 1 ("reduce": outputs are coded rows): the register kernels for
 * M = 1..4 (one decode shared by the activation rows), the exact f32 tile and the fast int16 tile
 * (a coded row decoded once to int16 code values, reused across activation rows).  The decoder
 * and the fold are described in trellis_avx512x.c. */
#include "trellis_avx512x.h"
#include "trellis_dec_avx512.h"
#include "trellis_asm_avx512.h"

#ifndef TCQ_RPF
#define TCQ_RPF 4
#endif

/* ---- axis 1 (reduce) --------------------------------------------------------------------- */

/* one activation block (QB positions) of a coded block, rows m0..m0+MC */
AI void reduce_fast_qb(const dec *d, blk bl, int64_t kb, int qb, const int MC, const uint32_t *const *q4m,
                       const int32_t *const *corrm, const float *const *dm, __m512 *facc, const int BC)
{
    __m512i iacc[4];
    for (int m = 0; m < MC; m++) iacc[m] = _mm512_maskz_loadu_epi32(1, corrm[m] + kb);   /* lane 0 */
    const int64_t pos = kb * QB;
    for (int gg = 0; gg < GPQ; gg++) {
        const __m512i x = dec_x(d, bl, qb * GPQ + gg, BC);
        for (int m = 0; m < MC; m++) iacc[m] = _mm512_dpbusd_epi32(iacc[m], x, _mm512_loadu_si512(q4m[m] + pos + gg * 16));
    }
    for (int m = 0; m < MC; m++)
        facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[m]), _mm512_set1_ps(dm[m][kb]), facc[m]);
}

/* fast, rows m0..m0+MC share each decoded group */
AI void reduce_fast_body(const kr_args *a, const dec *d, const int MC, int64_t m0, const int BC)
{
    const tcq_trellis *w = a->w;
    const int64_t wpb = w->p.T * w->p.k / 32;
    const kq_act *qa = a->qa;
    const int T = w->p.T;
    const int64_t nb = w->cols / T;
    /* per-row base pointers: each vpdpbusd then addresses its activations as base + one shared
     * offset + displacement (gcc otherwise spent a lea per row and group) */
    const uint32_t *q4m[4];
    const int32_t *corrm[4];
    const float *dm[4];
    for (int m = 0; m < MC; m++) {
        q4m[m] = qa->q4 + (m0 + m) * qa->npad;
        corrm[m] = qa->corr + (m0 + m) * qa->nblk;
        dm[m] = qa->d + (m0 + m) * qa->nblk;
    }
    for (int64_t r = a->r0; r < a->r1; r++) {
        const uint32_t *rb = w->codes + r * (w->cols * w->p.k / 32);
        __m512 facc[4];
        for (int m = 0; m < MC; m++) facc[m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const blk bl = blk_load(d, (rb + b * wpb), BC);
            if (TCQ_RPF && b + TCQ_RPF < nb) {
                /* the row's stream, 4 blocks ahead (the wrap load of each block stalled on its
                 * first line otherwise) */
                _mm_prefetch((const char *)(rb + (b + TCQ_RPF) * wpb), _MM_HINT_T0);
                _mm_prefetch((const char *)(rb + (b + TCQ_RPF) * wpb) + 64, _MM_HINT_T0);
            }
            /* T = 256: the 4 activation blocks unrolled.  As a 4-trip inner loop, on Zen 5 the
             * kernel ran at 0.66-0.70 ns per group in some processes and 1.0-1.1 in others
             * (bimodal by run, so by code/data placement; the loop alone: 0.63); unrolled,
             * 0.68-0.70 in every run (docs/PERFORMANCE.md "Zen 5") */
            if (T == 256) {
#pragma GCC unroll 4
                for (int qb = 0; qb < 4; qb++) reduce_fast_qb(d, bl, b * 4 + qb, qb, MC, q4m, corrm, dm, facc, BC);
            } else
                for (int qb = 0; qb < T / QB; qb++)
                    reduce_fast_qb(d, bl, b * (T / QB) + qb, qb, MC, q4m, corrm, dm, facc, BC);
        }
        const float f = _cvtsh_ss(w->scales[r]) * TCQ_RMAD_RINV;
        for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = _mm512_reduce_add_ps(facc[m]) * f;
    }
}

AI void reduce_exact_body(const kr_args *a, const dec *d, const int MC, int64_t m0, const int BC)
{
    const tcq_trellis *w = a->w;
    const int64_t wpb = w->p.T * w->p.k / 32;
    const int T = w->p.T;
    const int64_t nb = w->cols / T, C = w->cols;
    for (int64_t r = a->r0; r < a->r1; r++) {
        const uint32_t *rb = w->codes + r * (w->cols * w->p.k / 32);
        const __m512 scale = _mm512_set1_ps(_cvtsh_ss(w->scales[r]));
        __m512 facc[4];
        for (int m = 0; m < MC; m++) facc[m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const blk bl = blk_load(d, (rb + b * wpb), BC);
            for (int g = 0; g < d->ng; g++) {
                const __m512 wv = dec_w(d, bl, g, scale, BC);
                for (int m = 0; m < MC; m++)
                    facc[m] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(a->x + (m0 + m) * C + b * T + g * 16), facc[m]);
            }
        }
        for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = _mm512_reduce_add_ps(facc[m]);
    }
}

#define MC_SWITCH_(body, a, d, mc, m0, BC)                                                         \
    switch (mc) {                                                                                  \
    case 1: body(a, d, 1, m0, BC); break;                                                          \
    case 2: body(a, d, 2, m0, BC); break;                                                          \
    case 3: body(a, d, 3, m0, BC); break;                                                          \
    default: body(a, d, 4, m0, BC); break;                                                         \
    }
#define MC_SWITCH(body, a, d, mc, m0) BC_CALL(d, MC_SWITCH_(body, a, d, mc, m0, BC))

void tcq_avx512_reduce_fast_shared(const kr_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    if (a->w->p.T == 256 && a->w->p.k >= 2 && !a->w->interleaved) {
        for (int64_t m0 = 0; m0 < a->M; m0 += 4) reduce_fast_asm(a, &d, (int)TCQ_MIN(4, a->M - m0), m0);
        return;
    }
    for (int64_t m0 = 0; m0 < a->M; m0 += 4) MC_SWITCH(reduce_fast_body, a, &d, TCQ_MIN(4, a->M - m0), m0);
}

void tcq_avx512_reduce_exact_shared(const kr_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    for (int64_t m0 = 0; m0 < a->M; m0 += 4) MC_SWITCH(reduce_exact_body, a, &d, TCQ_MIN(4, a->M - m0), m0);
}

/* Coded rows and activation rows per pass of the int16 tile: 3 x 4, the shape of the asm passes
 * (tile16_pass_asm3: 12 int accumulators, 3 rows' values and the activation in zmm16..31).  As
 * whole-row passes with the f32 sums in registers too, 3 x 4 measured 4-9 % faster than 2 x 4, and
 * 4 x 2 or 4 x 3 slower (docs/PERFORMANCE.md, session 16). */
#define TCQ_TILE_RR 3
#define TCQ_TILE_MC 4

/* tile, int16: decode a coded row once to int16 code values y (vpdpbusd against ones seeded
 * with -510, vpackssdw of two groups), then each activation row costs one vpdpwssd per 32
 * weights (two products per lane instead of vpdpbusd's one useful byte sum) and a fold every
 * TCQ_Q16_CHUNK weights; one f32 step per activation row (kq_act.q16).
 * A pass: RR coded rows (yr: their int16 values, row h at yr + h nv) against MC activation rows
 * over one chunk [v0, v1): each activation vector, loaded once, feeds all RR rows' vpdpwssd; the
 * chunk's int sums fold into the f32 accumulators parked in fa[h * fs + m] between chunks.  Per
 * output the same vpdpwssd sequence and fold whatever RR, MC and the pass order are, so the
 * same bits. */
AI void tile16_pass(const kq_act *qa, const __m512i *yr, int64_t nv, int64_t v0, int64_t v1, __m512 *fa, int64_t fs,
                    const int RR, const int MC, int64_t m0)
{
    __m512i iacc[4][4];
    for (int h = 0; h < RR; h++)
        for (int m = 0; m < MC; m++) iacc[h][m] = _mm512_setzero_si512();
    const int16_t *q0 = qa->q16 + m0 * qa->npad;
    for (int64_t v = v0; v < v1; v++) {
        __m512i y[4];
        for (int h = 0; h < RR; h++) y[h] = _mm512_load_si512(yr + h * nv + v);
        for (int m = 0; m < MC; m++) {
            const __m512i q = _mm512_load_si512(q0 + m * qa->npad + v * 32);
            for (int h = 0; h < RR; h++) dpwssd_rr(&iacc[h][m], y[h], q);
        }
    }
    for (int h = 0; h < RR; h++)
        for (int m = 0; m < MC; m++) fa[h * fs + m] = _mm512_add_ps(fa[h * fs + m], _mm512_cvtepi32_ps(iacc[h][m]));
}

/* One coded row's int16 code values y = bytesum - 510 into yr [C/32] (vpackssdw order). */
AI void tile16_decode(const dec *d, const uint32_t *rb, int64_t nb, int64_t wpb, __m512i *yr, const int BC)
{
    const __m512i c510 = _mm512_set1_epi32(-510), ones = _mm512_set1_epi32(0x01010101);
    for (int64_t b = 0; b < nb; b++) {
        const blk bl = blk_load(d, (rb + b * wpb), BC);
        for (int g = 0; g < d->ng; g += 2) {
            const __m512i ya = _mm512_dpbusd_epi32(c510, dec_x(d, bl, g, BC), ones);
            const __m512i yb = _mm512_dpbusd_epi32(c510, dec_x(d, bl, g + 1, BC), ones);
            _mm512_store_si512(yr + (b * d->ng + g) / 2, _mm512_packs_epi32(ya, yb));
        }
    }
}

/* Blocks [b0, b0 + nb) of coded row r as tile16_decode's int16 values (512 bytes a block at
 * T = 256), for the panel kernel (trellis_panel_avx512x.c). */
void tcq_avx512_decode_i16(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, void *out)
{
    dec d;
    dec_init(&d, w->p);
    const uint32_t *rb = kblock(w, r, b0);
    if (w->p.T == 256 && d.bc >= 2) tile16_decode_asm(&d, (const char *)rb, nb, out);
    else BC_CALL(&d, tile16_decode(&d, rb, nb, w->p.T * w->p.k / 32, out, BC));
}

/* The passes the asm does not take (two coded rows; one activation row against one or two coded
 * rows): RR, MC as constants, one function each.  Even so gcc keeps the accumulators on the
 * stack here (2x the asm's time), so the common passes are asm (trellis_asm_avx512.h). */
#define TILE16_PASS_FN(RR, MC)                                                                     \
    static __attribute__((noinline)) void tile16_pass_##RR##x##MC(const kq_act *qa, const __m512i *yr, int64_t nv, \
                                                                  int64_t v0, int64_t v1, __m512 *fa, int64_t fs,   \
                                                                  int64_t m0)                                       \
    {                                                                                              \
        tile16_pass(qa, yr, nv, v0, v1, fa, fs, RR, MC, m0);                                       \
    }
TILE16_PASS_FN(2, 4)
TILE16_PASS_FN(2, 1)
TILE16_PASS_FN(1, 1)

static void tile16_pass_rm(const kq_act *qa, const __m512i *yr, int64_t nv, int64_t v0, int64_t v1, __m512 *fa,
                           int64_t fs, int rr, int mc, int64_t m0)
{
    const int16_t *q = qa->q16 + m0 * qa->npad + v0 * 32;
    if (mc == TCQ_TILE_MC && rr == TCQ_TILE_RR)
        tile16_pass_asm3(yr + v0, nv * 64, q, qa->npad * 2, v1 - v0, (float *)fa, (float *)(fa + fs),
                         (float *)(fa + 2 * fs));
    else if (mc == TCQ_TILE_MC && rr == 1)
        tile16_pass_asm1(yr + v0, q, qa->npad * 2, v1 - v0, (float *)fa);
    else if (mc == TCQ_TILE_MC)
        tile16_pass_2x4(qa, yr, nv, v0, v1, fa, fs, m0);
    else
        for (int m = 0; m < mc; m++) {
            if (rr == TCQ_TILE_RR)
                tile16_pass_asm3x1(yr + v0, nv * 64, q + m * qa->npad, v1 - v0, (float *)(fa + m),
                                   (float *)(fa + fs + m), (float *)(fa + 2 * fs + m));
            else if (rr == 2) tile16_pass_2x1(qa, yr, nv, v0, v1, fa + m, fs, m0 + m);
            else tile16_pass_1x1(qa, yr, nv, v0, v1, fa + m, fs, m0 + m);
        }
}

#ifndef TCQ_TILE_RB
/* Coded rows decoded per round and activation rows per slab.  A round's passes take the columns
 * one chunk (TCQ_Q16_CHUNK) at a time for the slab, so the chunk's values (RB x 512 B), the
 * slab's activations (MS x 512 B) and its parked sums (RB x MS x 64 B), 17 KB at 6 x 16, stay in
 * L1, and the activations stream from L2 once per RB coded rows.  6 x 16 measured better than 6 x
 * 32, 6 x 64 and 16 x 16 (docs/PERFORMANCE.md, session 19). */
#define TCQ_TILE_RB 6
#define TCQ_TILE_MS 16
#endif

AI void reduce_fast_tile16_(const kr_args *a, const dec *dp, const int BC)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const int64_t wpb = w->p.T * w->p.k / 32, rw = w->cols * w->p.k / 32;
    const dec d = *dp;
    const int64_t nb = w->cols / w->p.T, nv = w->cols / 32, per = TCQ_Q16_CHUNK / 32;
    /* scratch: fa [RB][MS] f32 sums, then yr [RB][C/32] int16 code values in vpackssdw order;
     * fewer rows a round where a long row's values would not fit */
    __m512 *fa = a->scratch;
    const size_t room = kernel_private_bytes(w) - (size_t)TCQ_TILE_RB * TCQ_TILE_MS * 64;
    const int64_t RB = TCQ_MAX(1, TCQ_MIN(TCQ_TILE_RB, (int64_t)(room / ((size_t)nv * 64))));
    __m512i *yr = (__m512i *)(fa + TCQ_TILE_RB * TCQ_TILE_MS);
    for (int64_t r = a->r0, rb; r < a->r1; r += rb) {
        rb = TCQ_MIN(RB, a->r1 - r);
        for (int h = 0; h < rb; h++) {
            if (w->p.T == 256 && BC >= 2)
                tile16_decode_asm(&d, (const char *)(w->codes + (r + h) * rw), nb, yr + h * nv);
            else tile16_decode(&d, w->codes + (r + h) * rw, nb, wpb, yr + h * nv, BC);
        }
        for (int64_t ms = 0; ms < a->M; ms += TCQ_TILE_MS) {
            const int64_t ns = TCQ_MIN(TCQ_TILE_MS, a->M - ms);
            for (int64_t i = 0; i < rb * TCQ_TILE_MS; i++) fa[i] = _mm512_setzero_ps();
            /* the next round's codes, spread over the first slab's chunks: decoded cold, they
             * stalled the decode on memory */
            const char *pf = (const char *)(w->codes + (r + rb) * rw);
            const int64_t pfl = ms ? 0 : TCQ_MIN(RB, w->rows - r - rb) * rw * 4 / 64, nch = (nv + per - 1) / per;
            for (int64_t v0 = 0, l = 0; v0 < nv; v0 += per) {
                const int64_t v1 = TCQ_MIN(nv, v0 + per);
                const int64_t le = (v0 / per + 1) * pfl / nch;   /* lines prefetched by this chunk's end */
                for (; l < le; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
                for (int64_t m0 = ms; m0 < ms + ns; m0 += TCQ_TILE_MC)
                    for (int64_t h0 = 0, rr; h0 < rb; h0 += rr) {
                        rr = TCQ_MIN(TCQ_TILE_RR, rb - h0);
                        tile16_pass_rm(qa, yr + h0 * nv, nv, v0, v1, fa + h0 * TCQ_TILE_MS + (m0 - ms), TCQ_TILE_MS,
                                       (int)rr, (int)TCQ_MIN(TCQ_TILE_MC, ms + ns - m0), m0);
                    }
            }
            for (int64_t h = 0; h < rb; h++) {
                const float f = _cvtsh_ss(w->scales[r + h]) * TCQ_RMAD_RINV;
                for (int64_t m = ms; m < ms + ns; m++)
                    a->y[m * a->ldy + r + h] = _mm512_reduce_add_ps(fa[h * TCQ_TILE_MS + m - ms]) * (qa->d16[m] * f);
            }
        }
    }
}

void tcq_avx512_reduce_fast_tile16(const kr_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    BC_CALL(&d, reduce_fast_tile16_(a, &d, BC));
}

AI void reduce_exact_tile_rows(const kr_args *a, const float *wr, int64_t r, const int MC, int64_t m0)
{
    const int64_t C = a->w->cols;
    __m512 facc[8];
    for (int m = 0; m < MC; m++) facc[m] = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
        const __m512 wv = _mm512_load_ps(wr + c);
        for (int m = 0; m < MC; m++) facc[m] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(a->x + (m0 + m) * C + c), facc[m]);
    }
    for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = _mm512_reduce_add_ps(facc[m]);
}

void tcq_avx512_reduce_exact_tile(const kr_args *a)
{
    const tcq_trellis *w = a->w;
    float *wr = a->scratch;
    for (int64_t r = a->r0; r < a->r1; r++) {
        tcq_avx512_decode_rows(w, r, 0, w->cols / w->p.T, wr);
        for (int64_t m0 = 0; m0 < a->M; m0 += 8) {
            const int mc = (int)TCQ_MIN(8, a->M - m0);
            if (mc == 8) reduce_exact_tile_rows(a, wr, r, 8, m0);
            else if (mc >= 4) {
                reduce_exact_tile_rows(a, wr, r, 4, m0);
                for (int64_t m = m0 + 4; m < m0 + mc; m++) reduce_exact_tile_rows(a, wr, r, 1, m);
            } else
                for (int64_t m = m0; m < m0 + mc; m++) reduce_exact_tile_rows(a, wr, r, 1, m);
        }
    }
}
