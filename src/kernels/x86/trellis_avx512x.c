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
#include "trellis_dec_avx512.h"
#include "trellis_asm_avx512.h"

#ifndef TCQ_RPF
#define TCQ_RPF 4
#endif


AI void decode_rows_(const tcq_trellis *w, const dec *d, int64_t r, int64_t b0, int64_t nb, float *out, const int BC)
{
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(w->scales[r]));
    for (int64_t b = 0; b < nb; b++) {
        const blk bl = blk_load(d, kblock(w, r, b0 + b), BC);
        for (int g = 0; g < d->ng; g++) _mm512_storeu_ps(out + b * w->p.T + g * 16, dec_w(d, bl, g, scale, BC));
    }
}

static void decode_rows(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, float *out)
{
    dec d;
    dec_init(&d, w->p);
    BC_CALL(&d, decode_rows_(w, &d, r, b0, nb, out, BC));
}

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

static void reduce_fast_shared(const kr_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    if (a->w->p.T == 256 && a->w->p.k >= 2 && !a->w->interleaved) {
        for (int64_t m0 = 0; m0 < a->M; m0 += 4) reduce_fast_asm(a, &d, (int)TCQ_MIN(4, a->M - m0), m0);
        return;
    }
    for (int64_t m0 = 0; m0 < a->M; m0 += 4) MC_SWITCH(reduce_fast_body, a, &d, TCQ_MIN(4, a->M - m0), m0);
}

static void reduce_exact_shared(const kr_args *a)
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

static void reduce_fast_tile16(const kr_args *a)
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

static void reduce_exact_tile(const kr_args *a)
{
    const tcq_trellis *w = a->w;
    float *wr = a->scratch;
    for (int64_t r = a->r0; r < a->r1; r++) {
        decode_rows(w, r, 0, w->cols / w->p.T, wr);
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

/* ---- axis 0 (scatter) -------------------------------------------------------------------- */

/* fast: MC activation rows x G groups (from g0) of integer accumulators live in registers over
 * one activation block of stored rows, then fold into acc (f32, in memory). */
AI void scatter_fast_body(const ks_args *a, const dec *d, const int MC, const int G, int64_t m0, int g0, const int BC)
{
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const kq_act *qa = a->qa;
    const int T = w->p.T;
    for (int64_t ic = a->i0; ic < a->i1; ic += QB) {
        const int64_t kb = ic / QB, ie = TCQ_MIN(a->i1, ic + QB);
        __m512i iacc[16];
        for (int m = 0; m < MC; m++)
            for (int g = 0; g < G; g++) iacc[m * G + g] = _mm512_set1_epi32(qa->corr[(m0 + m) * qa->nblk + kb]);
        for (int64_t i = ic; i < ie; i++) {
            const blk bl = blk_load(d, (cb + i * cs), BC);
            if (i + 8 < ie) {
                const char *pf = (const char *)(cb + (i + 8) * cs);
                _mm_prefetch(pf, _MM_HINT_T0);
                _mm_prefetch(pf + 64, _MM_HINT_T0);
            }
            __m512i qv[4];
            for (int m = 0; m < MC; m++) qv[m] = _mm512_set1_epi32((int)qa->q4[(m0 + m) * qa->npad + i]);
#pragma GCC unroll 16
            for (int g = 0; g < G; g++) {
                const __m512i x = dec_x(d, bl, g0 + g, BC);
                for (int m = 0; m < MC; m++) dpbusd_ip(&iacc[m * G + g], x, qv[m]);
            }
        }
        for (int m = 0; m < MC; m++) {
            const __m512 dv = _mm512_set1_ps(qa->d[(m0 + m) * qa->nblk + kb]);
            float *acc = a->acc + (m0 + m) * T + g0 * 16;
            for (int g = 0; g < G; g++)
                _mm512_storeu_ps(acc + g * 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[m * G + g]), dv,
                                                               _mm512_loadu_ps(acc + g * 16)));
        }
    }
}

AI void scatter_exact_body(const ks_args *a, const dec *d, const int MC, const int G, int64_t m0, int g0, const int BC)
{
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const int T = w->p.T;
    const int64_t in = w->rows;
    __m512 facc[16];
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < G; g++) facc[m * G + g] = _mm512_loadu_ps(a->acc + (m0 + m) * T + (g0 + g) * 16);
    for (int64_t i = a->i0; i < a->i1; i++) {
        const blk bl = blk_load(d, (cb + i * cs), BC);
        if (i + 8 < a->i1) {
            const char *pf = (const char *)(cb + (i + 8) * cs);
            _mm_prefetch(pf, _MM_HINT_T0);
            _mm_prefetch(pf + 64, _MM_HINT_T0);
        }
        const __m512 scale = _mm512_set1_ps(_cvtsh_ss(w->scales[i]));
        __m512 xv[4];
        for (int m = 0; m < MC; m++) xv[m] = _mm512_set1_ps(a->x[(m0 + m) * in + i]);
#pragma GCC unroll 16
        for (int g = 0; g < G; g++) {
            const __m512 wv = dec_w(d, bl, g0 + g, scale, BC);
            for (int m = 0; m < MC; m++) facc[m * G + g] = _mm512_fmadd_ps(wv, xv[m], facc[m * G + g]);
        }
    }
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < G; g++) _mm512_storeu_ps(a->acc + (m0 + m) * T + (g0 + g) * 16, facc[m * G + g]);
}

/* groups per pass so that MC * G accumulators fit the register file */
#define SC_DISPATCH_(body, a, d, mc, m0, BC)                                                       \
    do {                                                                                           \
        const int ng_ = (d)->ng;                                                                   \
        switch (mc) {                                                                              \
        case 1:                                                                                    \
            if (BC != 0 && ng_ >= 16) {                                                            \
                /* no block registers: 16 accumulators, each row's block read in one pass */       \
                for (int g0_ = 0; g0_ < ng_; g0_ += 16) body(a, d, 1, 16, m0, g0_, BC);            \
                break;                                                                             \
            }                                                                                      \
            /* 8 accumulators + the 8 group indices stay in registers; 16 spilled */              \
            for (int g0_ = 0; g0_ < ng_; g0_ += 8) {                                               \
                if (ng_ >= 8) body(a, d, 1, 8, m0, g0_, BC);                                       \
                else body(a, d, 1, 4, m0, g0_, BC);                                                \
            }                                                                                      \
            break;                                                                                 \
        case 2:                                                                                    \
            for (int g0_ = 0; g0_ < ng_; g0_ += 8) {                                               \
                if (ng_ >= 8) body(a, d, 2, 8, m0, g0_, BC);                                       \
                else body(a, d, 2, 4, m0, g0_, BC);                                                \
            }                                                                                      \
            break;                                                                                 \
        case 3:                                                                                    \
            for (int g0_ = 0; g0_ < ng_; g0_ += 4) body(a, d, 3, 4, m0, g0_, BC);                  \
            break;                                                                                 \
        default:                                                                                   \
            for (int g0_ = 0; g0_ < ng_; g0_ += 4) body(a, d, 4, 4, m0, g0_, BC);                  \
            break;                                                                                 \
        }                                                                                          \
    } while (0)
#define SC_DISPATCH(body, a, d, mc, m0) BC_CALL(d, SC_DISPATCH_(body, a, d, mc, m0, BC))

/* Row chunks outermost, then the column blocks: each chunk of rows is read column block after
 * column block while it is still in L1/L2 (better line and TLB use than one block column over
 * the whole partition). */
#define SCATTER_CHUNK_FAST QB
#define SCATTER_CHUNK_EXACT (4 * QB)

static void scatter_fast_tile(const ks_args *a);

static void scatter_fast_shared(const ks_args *a)
{
    const int T = a->w->p.T;
    /* M = 4 at T = 256: the row-pair tile (the same integer sums, so the same bits) took
     * 0.93-0.97x the time at k = 2, 3 and tied at k = 4 (docs/PERFORMANCE.md, session 21) */
    if (a->M >= 4 && T == 256) {
        for (int64_t cb = 0; cb < a->nbc; cb++) {
            ks_args one = *a;
            one.b = a->b + cb;
            one.nbc = 1;
            one.acc = a->acc + cb * a->M * T;
            scatter_fast_tile(&one);
        }
        return;
    }
    dec d;
    dec_init(&d, a->w->p);
    for (int64_t j = 0; j < a->nbc * a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += SCATTER_CHUNK_FAST)
        for (int64_t cb = 0; cb < a->nbc; cb++) {
            ks_args s = *a;
            s.i0 = ic;
            s.i1 = TCQ_MIN(a->i1, ic + SCATTER_CHUNK_FAST);
            s.b = a->b + cb;
            s.acc = a->acc + cb * a->M * T;
            /* the asm loops (T = 256, k = 2..4) prefetch into the pass after this one: the next
             * column block, or the next chunk's first */
            const int use_asm = T == 256 && d.bc >= 2;
            const int64_t nic = cb + 1 < a->nbc ? ic : ic + SCATTER_CHUNK_FAST, ncb = cb + 1 < a->nbc ? cb + 1 : 0;
            const char *next = use_asm && nic < a->i1 ? (const char *)kblock(a->w, nic, a->b + ncb) : NULL;
            for (int64_t m0 = 0; m0 < a->M; m0 += 4) {
                const int mc = (int)TCQ_MIN(4, a->M - m0);
                if (use_asm) scatter_fast_mc(&s, &d, next, mc, m0);
                else SC_DISPATCH(scatter_fast_body, &s, &d, mc, m0);
            }
        }
    const __m512 ri = _mm512_set1_ps(TCQ_RMAD_RINV);
    for (int64_t j = 0; j < a->nbc * a->M * T; j += 16)
        _mm512_storeu_ps(a->acc + j, _mm512_mul_ps(_mm512_loadu_ps(a->acc + j), ri));
}

static void scatter_exact_shared(const ks_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    const int T = a->w->p.T;
    for (int64_t j = 0; j < a->nbc * a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += SCATTER_CHUNK_EXACT)
        for (int64_t cb = 0; cb < a->nbc; cb++) {
            ks_args s = *a;
            s.i0 = ic;
            s.i1 = TCQ_MIN(a->i1, ic + SCATTER_CHUNK_EXACT);
            s.b = a->b + cb;
            s.acc = a->acc + cb * a->M * T;
            for (int64_t m0 = 0; m0 < a->M; m0 += 4) SC_DISPATCH(scatter_exact_body, &s, &d, (int)TCQ_MIN(4, a->M - m0), m0);
        }
}

/* tile: decode an activation block of stored rows (<= 64 rows x T) once into the scratch buffer
 * as byte sums bs = bytesum(x) in [0, 1020] (the code value is bs - 510, the -510 sum(q) seed
 * covers the offset), two stored rows per dword (row 2p in the low int16, 2p+1 in the high), then
 * run every (6 rows of M) x (4 groups) register block over it with the panel kernel's micro-kernel
 * (tcq_avx512_mk6x4): one vpdpwssd, with the activation pair (q[2p], q[2p+1]) broadcast, adds two
 * rows' products for 16 columns, where vpdpbusd added one (its byte sum wastes 3 of 4 products).
 * The int32 sums are the same integers as sum_i bs_i q_i + corr, exact, so the result is the same
 * as the shared kernel's.  (The 8 x 2 block before it, with embedded broadcasts: 18 loads per 16
 * vpdpwssd against 10 per 24; 1.04-1.18x the time, docs/PERFORMANCE.md "The panel kernel".) */
AI void scatter_fast_tile_(const ks_args *a, const dec *dp, const int BC)
{
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const dec d = *dp;
    const int T = w->p.T;
    const kq_act *qa = a->qa;
    __m512i *xb = a->scratch;                           /* [QB/2 row pairs, ng] */
    int32_t *qp = (int32_t *)(xb + (QB / 2) * d.ng);    /* [6, QB/2] (q[2p], q[2p+1]) as int16 */
    const __m512i ones = _mm512_set1_epi32(0x01010101), zero = _mm512_setzero_si512();
    for (int64_t j = 0; j < a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += QB) {
        const int64_t n = TCQ_MIN(a->i1, ic + QB) - ic;
        const int np = (int)((n + 1) / 2);
        /* the next block's q (one line of each activation row, a row stride apart: too many
         * streams for the hardware prefetchers), fetched while this block decodes */
        if (ic + QB < a->i1)
            for (int64_t m = 0; m < a->M; m++)
                _mm_prefetch((const char *)(qa->q + m * qa->npad + ic + QB), _MM_HINT_T0);
        int p = 0;
        if (T == 256 && BC >= 2 && n / 2 > 0) {
            scatter_tile_decode_pairs(&d, (const char *)(cb + ic * cs), cs * 4, n / 2, xb);
            p = (int)(n / 2);
        }
        for (; p < np; p++) {
            const int64_t i = ic + 2 * p;
            const int has1 = 2 * p + 1 < n;
            const blk b0 = blk_load(&d, (cb + i * cs), BC), b1 = has1 ? blk_load(&d, (cb + (i + 1) * cs), BC) : b0;
            for (int g = 0; g < d.ng; g++) {
                const __m512i s0 = _mm512_dpbusd_epi32(zero, dec_x(&d, b0, g, BC), ones);
                const __m512i s1 = has1 ? _mm512_dpbusd_epi32(zero, dec_x(&d, b1, g, BC), ones) : zero;
                _mm512_store_si512(xb + p * d.ng + g, _mm512_or_si512(s0, _mm512_slli_epi32(s1, 16)));
            }
        }
        for (int64_t m0 = 0; m0 < a->M; m0 += 6) {
            const int mc = (int)TCQ_MIN(6, a->M - m0);
            /* q of rows ic..ic+QB (zero-padded past n) widened to int16: dword p is the pair */
            for (int m = 0; m < mc; m++) {
                const __m512i q8 = _mm512_loadu_si512(qa->q + (m0 + m) * qa->npad + ic);
                _mm512_store_si512(qp + m * (QB / 2), _mm512_cvtepi8_epi16(_mm512_castsi512_si256(q8)));
                _mm512_store_si512(qp + m * (QB / 2) + 16, _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(q8, 1)));
            }
            for (int g0 = 0; g0 < d.ng; g0 += 4) {
                __m512i o[24];
                tcq_avx512_mk6x4(xb + g0, (int64_t)d.ng * 64, np, qp, QB / 2, mc, o);
                for (int m = 0; m < mc; m++) {
                    const __m512i corr = _mm512_set1_epi32(qa->corr[(m0 + m) * qa->nblk + ic / QB]);
                    const __m512 dv = _mm512_set1_ps(qa->d[(m0 + m) * qa->nblk + ic / QB]);
                    float *acc = a->acc + (m0 + m) * T + g0 * 16;
                    for (int j = 0; j < 4; j++) {
                        const __m512 s = _mm512_cvtepi32_ps(_mm512_add_epi32(o[4 * m + j], corr));
                        _mm512_storeu_ps(acc + j * 16, _mm512_fmadd_ps(s, dv, _mm512_loadu_ps(acc + j * 16)));
                    }
                }
            }
        }
    }
    const __m512 ri = _mm512_set1_ps(TCQ_RMAD_RINV);
    for (int64_t j = 0; j < a->M * T; j += 16) _mm512_storeu_ps(a->acc + j, _mm512_mul_ps(_mm512_loadu_ps(a->acc + j), ri));
}

static void scatter_fast_tile(const ks_args *a)
{
    dec d;
    dec_init(&d, a->w->p);
    BC_CALL(&d, scatter_fast_tile_(a, &d, BC));
}

AI void scatter_exact_tile_blk(const ks_args *a, const float *wb, int T, int64_t ic, int64_t n, const int MC,
                               int64_t m0, int g0)
{
    const int64_t in = a->w->rows;
    __m512 facc[16];
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < 4; g++) facc[m * 4 + g] = _mm512_loadu_ps(a->acc + (m0 + m) * T + (g0 + g) * 16);
    for (int64_t i = 0; i < n; i++) {
        __m512 xv[4];
        for (int m = 0; m < MC; m++) xv[m] = _mm512_set1_ps(a->x[(m0 + m) * in + ic + i]);
        for (int g = 0; g < 4; g++) {
            const __m512 wv = _mm512_load_ps(wb + i * T + (g0 + g) * 16);
            for (int m = 0; m < MC; m++) facc[m * 4 + g] = _mm512_fmadd_ps(wv, xv[m], facc[m * 4 + g]);
        }
    }
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < 4; g++) _mm512_storeu_ps(a->acc + (m0 + m) * T + (g0 + g) * 16, facc[m * 4 + g]);
}

static void scatter_exact_tile(const ks_args *a)
{
    const tcq_trellis *w = a->w;
    const int T = w->p.T;
    float *wb = a->scratch;   /* [QB rows, T] */
    for (int64_t j = 0; j < a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += QB) {
        const int64_t n = TCQ_MIN(a->i1, ic + QB) - ic;
        for (int64_t i = 0; i < n; i++) decode_rows(w, ic + i, a->b, 1, wb + i * T);
        for (int64_t m0 = 0; m0 < a->M; m0 += 4) {
            const int mc = (int)TCQ_MIN(4, a->M - m0);
            for (int g0 = 0; g0 < T / 16; g0 += 4) {
                if (mc == 4) scatter_exact_tile_blk(a, wb, T, ic, n, 4, m0, g0);
                else
                    for (int m = 0; m < mc; m++) scatter_exact_tile_blk(a, wb, T, ic, n, 1, m0 + m, g0);
            }
        }
    }
}

/* Fast axis 1, M = 2..4: the int16 tile kernel (one decode stored as int16 code values, half a
 * vpdpwssd per 16 weights per row) against the shared int8 kernel (one vpdpbusd per row), side by
 * side.  Sapphire Rapids: 0.72-0.75x at M=4, 0.90-1.02x at M=3, 1.01-1.08x at M=2 ("Broadcast
 * decoder and AMX tiles"); Zen 5: int8 0.80-0.85x of int16 at M=2, 0.81-0.93x at M=3,
 * 1.06-1.31x at M=4 (docs/PERFORMANCE.md "Zen 5"), hence int8 (the M1 entry) below M=4 here; the
 * AMX table (Sapphire Rapids) keeps int16 from M=2. */
static const tr_table table = {
    .isa = "avx512",
    .reduce = {{reduce_exact_shared, reduce_exact_shared, reduce_exact_tile},
               {reduce_fast_shared, reduce_fast_tile16, reduce_fast_tile16}},
    .scatter = {{scatter_exact_shared, scatter_exact_shared, scatter_exact_tile},
                {scatter_fast_shared, scatter_fast_shared, scatter_fast_tile}},
    .decode = decode_rows,
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
    .reduce = {{reduce_exact_shared, reduce_exact_shared, reduce_exact_tile},
               {reduce_fast_shared, reduce_fast_tile16, tcq_amx_reduce_fast}},
    .scatter = {{scatter_exact_shared, scatter_exact_shared, scatter_exact_tile},
                {scatter_fast_shared, scatter_fast_shared, tcq_amx_scatter_fast}},
    .decode = decode_rows,
    .tag = {{NULL, NULL, NULL}, {NULL, "i16", "amx"}},
    .stag = {{NULL, NULL, NULL}, {NULL, NULL, "amx"}},
    .scatter_nbc = {{4, 4, 1}, {4, 4, 4}},
    .qt = 1,
    /* AMX's tiles ran M = 32 in 2.9-3.9x M = 1 on Sapphire Rapids (session 7), ahead of the
     * vector int16 tiles that beat sgemm at every M; never measured against sgemm at M > 32 (no
     * AMX machine since session 8) */
    .gemm_from = {{192, TR_GEMM_NEVER}, {16, TR_GEMM_NEVER}},
};

const tr_table *tcq_tr_avx512(void)
{
    const tcq_cpu_features *f = tcq_cpu();
    if (!(f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni && f->avx512vbmi)) return NULL;
    /* TCQ_NO_AMX=1 (read per call: the tests switch it) keeps the AVX-512 kernels */
    const char *e = getenv("TCQ_NO_AMX");
    return f->amx_int8 && !(e && *e == '1') ? &table_amx : &table;
}
