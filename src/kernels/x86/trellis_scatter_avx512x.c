/* AVX-512 trellis kernels, axis 0 ("scatter": inputs are coded rows): the register kernels for
 * M = 1..4, the exact f32 tile and the fast row-pair tile (two stored rows' byte sums a dword, on
 * the panel micro-kernel tcq_avx512_mk6x4).  The decoder is described in trellis_avx512x.c. */
#include "trellis_avx512x.h"
#include "trellis_dec_avx512.h"
#include "trellis_asm_avx512.h"

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


void tcq_avx512_scatter_fast_shared(const ks_args *a)
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
            tcq_avx512_scatter_fast_tile(&one);
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

void tcq_avx512_scatter_exact_shared(const ks_args *a)
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

void tcq_avx512_scatter_fast_tile(const ks_args *a)
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

void tcq_avx512_scatter_exact_tile(const ks_args *a)
{
    const tcq_trellis *w = a->w;
    const int T = w->p.T;
    float *wb = a->scratch;   /* [QB rows, T] */
    for (int64_t j = 0; j < a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += QB) {
        const int64_t n = TCQ_MIN(a->i1, ic + QB) - ic;
        for (int64_t i = 0; i < n; i++) tcq_avx512_decode_rows(w, ic + i, a->b, 1, wb + i * T);
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
