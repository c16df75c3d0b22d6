/* AVX2 trellis kernels, the body: included twice by trellis_avx2.c, once with AVX-VNNI
 * (vpdpbusd on ymm) and once with the vpmaddubsw + vpmaddwd equivalent.  Needs:
 *   SFX(name)           function-name suffixing
 *   DOT(acc, x, q4, q2) acc + bytesum(x) * q   (q4: q in 4 bytes, q2: q in 2 int16)
 *   YSUM(x)             bytesum(x) - 510
 *   DOT16(acc, y, q)    acc + y q summed over int16 pairs (the int16 tiles)
 * A group is 8 weights (t = 8g + j): one 8-byte load (from the block, or from a 16-byte tail of
 * the block's last and first 8 bytes where the load would leave the block: that is also the
 * tail-biting wrap), vpshufb to give lane j its 4 bytes, vpsrlvd, vpand, vpmulld, vpaddd. */

typedef struct SFX(dec) {
    __m256i shuf, shift, mask, mul, add;
    int ng, nbytes, k;
} SFX(dec);

static void SFX(dec_init)(SFX(dec) *d, tcq_block_params p)
{
    uint8_t sh[32];
    int32_t cnt[8];
    /* dword j sits in 128-bit lane j/4 at byte (j%4)*4; both lanes hold the same 8 code bytes */
    for (int j = 0; j < 8; j++) {
        cnt[j] = ((7 - j) * p.k) & 7;
        for (int b = 0; b < 4; b++) sh[(j >> 2) * 16 + (j & 3) * 4 + b] = (uint8_t)(((7 - j) * p.k >> 3) + b);
    }
    d->shuf = _mm256_loadu_si256((const __m256i *)sh);
    d->shift = _mm256_loadu_si256((const __m256i *)cnt);
    d->mask = _mm256_set1_epi32((int)((1u << p.L) - 1u));
    d->mul = _mm256_set1_epi32((int)TCQ_RMAD_MUL);
    d->add = _mm256_set1_epi32((int)TCQ_RMAD_ADD);
    d->ng = p.T / 8;
    d->nbytes = p.T * p.k / 8;
    d->k = p.k;
}

/* the block's bytes and its 16-byte tail [last 8 | first 8] */
typedef struct SFX(blk) { const uint8_t *p; uint8_t tail[16]; } SFX(blk);

static inline __attribute__((always_inline)) void SFX(blk_load)(const SFX(dec) *d, const uint32_t *words,
                                                                SFX(blk) *b)
{
    b->p = (const uint8_t *)words;
    memcpy(b->tail, b->p + d->nbytes - 8, 8);
    memcpy(b->tail + 8, b->p, 8);
}

/* the decoder on the qword whose bytes hold group g's windows */
static inline __attribute__((always_inline)) __m256i SFX(dec_q)(const SFX(dec) *d, int64_t v)
{
    __m256i w = _mm256_shuffle_epi8(_mm256_set1_epi64x(v), d->shuf);
    w = _mm256_and_si256(_mm256_srlv_epi32(w, d->shift), d->mask);
    return _mm256_add_epi32(_mm256_mullo_epi32(w, d->mul), d->add);
}

/* maytail = 0 where the caller knows group g's 8 bytes lie inside the block (g >= 8: at most
 * the first 8/k - 1 groups reach past its end), which drops the per-group select. */
static inline __attribute__((always_inline)) __m256i SFX(dec_x_)(const SFX(dec) *d, const SFX(blk) *b, int g,
                                                                 const int maytail)
{
    const int B = (d->ng - 1 - g) * d->k;
    const uint8_t *src = !maytail || B + 8 <= d->nbytes ? b->p + B : b->tail + (B - (d->nbytes - 8));
    int64_t v;
    memcpy(&v, src, 8);
    return SFX(dec_q)(d, v);
}

static inline __attribute__((always_inline)) __m256i SFX(dec_x)(const SFX(dec) *d, const SFX(blk) *b, int g)
{
    return g < 8 ? SFX(dec_x_)(d, b, g, 1) : SFX(dec_x_)(d, b, g, 0);
}

/* ---- T = 256 with k a compile-time constant (every artifact's block shape) ----
 * The generic bodies spent ~3.4 cycles a group of 8 on Zen 5 (perf: the per-group tail test,
 * a 16-byte tail copied per block, offsets rebuilt from runtime k).  With K a constant the
 * offsets fold into immediates and the wrap groups' qwords are two scalar loads and a shift.
 * The same decoder, DOT sequence and fold as the generic bodies: the same bits. */
static inline __attribute__((always_inline)) int64_t SFX(qw256)(const uint8_t *p, const int K, const int g)
{
    const int nbytes = 32 * K, B = (31 - g) * K;
    int64_t v;
    if (B + 8 <= nbytes) {
        memcpy(&v, p + B, 8);
        return v;
    }
    /* the tail [last 8 | first 8] read at o = 1..6 */
    uint64_t lo, hi;
    memcpy(&lo, p + nbytes - 8, 8);
    memcpy(&hi, p, 8);
    const int o = B - (nbytes - 8);
    return (int64_t)((lo >> (8 * o)) | (hi << (64 - 8 * o)));
}

static inline __attribute__((always_inline)) __m256 SFX(dec_w)(const SFX(dec) *d, const SFX(blk) *b, int g,
                                                               __m256 scale)
{
    const __m256 f = _mm256_cvtepi32_ps(YSUM(SFX(dec_x)(d, b, g)));
    const __m256 r = _mm256_set1_ps(TCQ_RMAD_RINV), dv = _mm256_set1_ps(TCQ_RMAD_DIV);
    __m256 q = _mm256_mul_ps(f, r);
    const __m256 e = _mm256_fnmadd_ps(q, dv, f);
    q = _mm256_fmadd_ps(e, r, q);
    return _mm256_mul_ps(q, scale);
}

static inline float SFX(hsum)(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void SFX(decode_rows)(const tcq_trellis *w, int64_t r, int64_t b0, int64_t nb, float *out)
{
    SFX(dec) d;
    SFX(dec_init)(&d, w->p);
    const __m256 scale = _mm256_set1_ps(_cvtsh_ss(w->scales[r]));
    SFX(blk) bl;
    for (int64_t b = 0; b < nb; b++) {
        SFX(blk_load)(&d, kblock(w, r, b0 + b), &bl);
        for (int g = 0; g < d.ng; g++) _mm256_storeu_ps(out + b * w->p.T + g * 8, SFX(dec_w)(&d, &bl, g, scale));
    }
}

/* ---- axis 1 ---- */

static inline __attribute__((always_inline)) void SFX(reduce_fast_body)(const kr_args *a, const SFX(dec) *d,
                                                                        const int MC, int64_t m0)
{
    const tcq_trellis *w = a->w;
    const int64_t wpb = w->p.T * w->p.k / 32;
    const kq_act *qa = a->qa;
    const int T = w->p.T;
    const int64_t nb = w->cols / T;
    SFX(blk) bl;
    for (int64_t r = a->r0; r < a->r1; r++) {
        const uint32_t *rb = w->codes + r * (w->cols * w->p.k / 32);
        __m256 facc[4];
        for (int m = 0; m < MC; m++) facc[m] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            SFX(blk_load)(d, (rb + b * wpb), &bl);
            for (int qb = 0; qb < T / TCQ_FAST_QB; qb++) {
                const int64_t kb = b * (T / TCQ_FAST_QB) + qb;
                __m256i iacc[4];
                for (int m = 0; m < MC; m++)
                    iacc[m] = _mm256_zextsi128_si256(_mm_cvtsi32_si128(qa->corr[(m0 + m) * qa->nblk + kb]));
                for (int gg = 0; gg < TCQ_FAST_QB / 8; gg++) {
                    const int g = qb * (TCQ_FAST_QB / 8) + gg;
                    const __m256i x = SFX(dec_x)(d, &bl, g);
                    for (int m = 0; m < MC; m++) {
                        const int64_t o = (m0 + m) * qa->npad + b * T + g * 8;
                        iacc[m] = DOT(iacc[m], x, _mm256_loadu_si256((const __m256i *)(qa->q4 + o)),
                                      _mm256_loadu_si256((const __m256i *)(qa->q2 + o)));
                    }
                }
                for (int m = 0; m < MC; m++)
                    facc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[m]),
                                              _mm256_set1_ps(qa->d[(m0 + m) * qa->nblk + kb]), facc[m]);
            }
        }
        const float f = _cvtsh_ss(w->scales[r]) * TCQ_RMAD_RINV;
        for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = SFX(hsum)(facc[m]) * f;
    }
}

/* reduce_fast_body for T = 256 and a constant K: per coded row, 4 activation blocks a coded
 * block, 8 groups an activation block, all unrolled */
static inline __attribute__((always_inline)) void SFX(reduce_fast_256)(const kr_args *a, const SFX(dec) *d,
                                                                       const int K, const int MC, int64_t m0)
{
    const tcq_trellis *w = a->w;
    const kq_act *qa = a->qa;
    const int64_t nb = w->cols / 256;
    const uint32_t *q4[4];    /* activation row m's q4 [npad], corr [nblk], d [nblk] */
    const uint32_t *q2[4];
    const int32_t *corr[4];
    const float *dd[4];
    for (int m = 0; m < MC; m++) {
        q4[m] = qa->q4 + (m0 + m) * qa->npad;
        q2[m] = qa->q2 + (m0 + m) * qa->npad;
        corr[m] = qa->corr + (m0 + m) * qa->nblk;
        dd[m] = qa->d + (m0 + m) * qa->nblk;
    }
    (void)q4;    /* DOT reads one of the two */
    (void)q2;
    for (int64_t r = a->r0; r < a->r1; r++) {
        const uint8_t *rp = (const uint8_t *)(w->codes + r * (w->cols * K / 32));   /* [nb, 32K] bytes */
        __m256 facc[4];
        for (int m = 0; m < MC; m++) facc[m] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *p = rp + b * 32 * K;
#pragma GCC unroll 4
            for (int qb = 0; qb < 4; qb++) {
                const int64_t kb = b * 4 + qb;
                __m256i iacc[4];
                for (int m = 0; m < MC; m++) iacc[m] = _mm256_zextsi128_si256(_mm_cvtsi32_si128(corr[m][kb]));
#pragma GCC unroll 8
                for (int gg = 0; gg < 8; gg++) {
                    const int g = qb * 8 + gg;
                    const __m256i x = SFX(dec_q)(d, SFX(qw256)(p, K, g));
                    for (int m = 0; m < MC; m++) {
                        const int64_t o = b * 256 + g * 8;
                        iacc[m] = DOT(iacc[m], x, _mm256_loadu_si256((const __m256i *)(q4[m] + o)),
                                      _mm256_loadu_si256((const __m256i *)(q2[m] + o)));
                    }
                }
                for (int m = 0; m < MC; m++)
                    facc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[m]), _mm256_set1_ps(dd[m][kb]), facc[m]);
            }
        }
        const float f = _cvtsh_ss(w->scales[r]) * TCQ_RMAD_RINV;
        for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = SFX(hsum)(facc[m]) * f;
    }
}

/* ---- axis 1, tile regime, fast path: trellis_reduce_avx512x.c's int16 tile on ymm ----
 * A coded row decoded once to int16 code values y = bytesum - 510 (kq_act.q16's order: per 32
 * positions, vpackssdw of groups 0 and 2, then of 1 and 3), then per activation row one
 * vpmaddwd (vpdpwssd with AVX-VNNI) per 16 weights against q16, int32 sums over TCQ_Q16_CHUNK
 * positions (exact: |y q| <= 510 * 2047), an f32 fold, and one step d16 per activation row.
 * Before it, M rows went through reduce_fast in chunks of 4, each weight decoded M / 4 times. */
static void SFX(tile16_decode)(const SFX(dec) *d, const uint32_t *rb, int64_t nb, int64_t wpb, __m256i *yr)
{
    SFX(blk) bl;
    for (int64_t b = 0; b < nb; b++) {
        SFX(blk_load)(d, rb + b * wpb, &bl);
        for (int g = 0; g < d->ng; g += 4) {
            const __m256i y0 = YSUM(SFX(dec_x)(d, &bl, g)), y1 = YSUM(SFX(dec_x)(d, &bl, g + 1));
            const __m256i y2 = YSUM(SFX(dec_x)(d, &bl, g + 2)), y3 = YSUM(SFX(dec_x)(d, &bl, g + 3));
            __m256i *o = yr + (b * d->ng + g) / 2;
            _mm256_store_si256(o, _mm256_packs_epi32(y0, y2));
            _mm256_store_si256(o + 1, _mm256_packs_epi32(y1, y3));
        }
    }
}

/* RR coded rows (yr: row r + h at yr + h nv, nv ymm a row) against MC activation rows: each
 * activation vector, loaded once, feeds all RR rows; per output the same sums whatever RR, MC */
static inline __attribute__((always_inline)) void SFX(tile16_rows)(const kr_args *a, const __m256i *yr, int64_t nv,
                                                                   int64_t r, const int RR, const int MC, int64_t m0)
{
    const kq_act *qa = a->qa;
    const int64_t per = TCQ_Q16_CHUNK / 16;
    __m256 facc[SC16_RR][SC16_MC];
    for (int h = 0; h < RR; h++)
        for (int m = 0; m < MC; m++) facc[h][m] = _mm256_setzero_ps();
    for (int64_t v0 = 0; v0 < nv; v0 += per) {
        __m256i iacc[SC16_RR][SC16_MC];
        for (int h = 0; h < RR; h++)
            for (int m = 0; m < MC; m++) iacc[h][m] = _mm256_setzero_si256();
        const int64_t v1 = TCQ_MIN(nv, v0 + per);
        for (int64_t v = v0; v < v1; v++) {
            __m256i y[SC16_RR];
            for (int h = 0; h < RR; h++) y[h] = _mm256_load_si256(yr + h * nv + v);
            for (int m = 0; m < MC; m++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(qa->q16 + (m0 + m) * qa->npad + v * 16));
                for (int h = 0; h < RR; h++) iacc[h][m] = DOT16(iacc[h][m], y[h], q);
            }
        }
        for (int h = 0; h < RR; h++)
            for (int m = 0; m < MC; m++) facc[h][m] = _mm256_add_ps(facc[h][m], _mm256_cvtepi32_ps(iacc[h][m]));
    }
    for (int h = 0; h < RR; h++) {
        const float f = _cvtsh_ss(a->w->scales[r + h]) * TCQ_RMAD_RINV;
        for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r + h] = SFX(hsum)(facc[h][m]) * (qa->d16[m0 + m] * f);
    }
}

static void SFX(reduce_fast_tile16)(const kr_args *a)
{
    SFX(dec) d;
    SFX(dec_init)(&d, a->w->p);
    const tcq_trellis *w = a->w;
    const int64_t wpb = w->p.T * w->p.k / 32, rw = w->cols * w->p.k / 32;
    const int64_t nb = w->cols / w->p.T, nv = w->cols / 16;
    __m256i *yr = a->scratch;   /* [RR][C/16] int16 code values in q16 order */
    const int RR = (size_t)SC16_RR * nv * 32 <= kernel_private_bytes(w) ? SC16_RR : 1;
    for (int64_t r = a->r0, rr; r < a->r1; r += rr) {
        rr = r + RR <= a->r1 ? RR : 1;
        for (int h = 0; h < rr; h++) SFX(tile16_decode)(&d, w->codes + (r + h) * rw, nb, wpb, yr + h * nv);
        for (int64_t m0 = 0; m0 < a->M; m0 += SC16_MC) {
            const int mc = (int)TCQ_MIN(SC16_MC, a->M - m0);
            if (mc == SC16_MC) {
                if (rr > 1) SFX(tile16_rows)(a, yr, nv, r, SC16_RR, SC16_MC, m0);
                else SFX(tile16_rows)(a, yr, nv, r, 1, SC16_MC, m0);
            } else
                for (int64_t m = m0; m < m0 + mc; m++) {
                    if (rr > 1) SFX(tile16_rows)(a, yr, nv, r, SC16_RR, 1, m);
                    else SFX(tile16_rows)(a, yr, nv, r, 1, 1, m);
                }
        }
    }
}

static inline __attribute__((always_inline)) void SFX(reduce_exact_body)(const kr_args *a, const SFX(dec) *d,
                                                                         const int MC, int64_t m0)
{
    const tcq_trellis *w = a->w;
    const int64_t wpb = w->p.T * w->p.k / 32;
    const int T = w->p.T;
    const int64_t nb = w->cols / T, C = w->cols;
    SFX(blk) bl;
    for (int64_t r = a->r0; r < a->r1; r++) {
        const uint32_t *rb = w->codes + r * (w->cols * w->p.k / 32);
        const __m256 scale = _mm256_set1_ps(_cvtsh_ss(w->scales[r]));
        __m256 facc[4];
        for (int m = 0; m < MC; m++) facc[m] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            SFX(blk_load)(d, (rb + b * wpb), &bl);
            for (int g = 0; g < d->ng; g++) {
                const __m256 wv = SFX(dec_w)(d, &bl, g, scale);
                for (int m = 0; m < MC; m++)
                    facc[m] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a->x + (m0 + m) * C + b * T + g * 8), facc[m]);
            }
        }
        for (int m = 0; m < MC; m++) a->y[(m0 + m) * a->ldy + r] = SFX(hsum)(facc[m]);
    }
}

#define SFX_RF256_MC(K)                                                                            \
    switch (mc) {                                                                                  \
    case 1: SFX(reduce_fast_256)(a, &d, K, 1, m0); break;                                          \
    case 2: SFX(reduce_fast_256)(a, &d, K, 2, m0); break;                                          \
    case 3: SFX(reduce_fast_256)(a, &d, K, 3, m0); break;                                          \
    default: SFX(reduce_fast_256)(a, &d, K, 4, m0); break;                                         \
    }

static void SFX(reduce_fast)(const kr_args *a)
{
    SFX(dec) d;
    SFX(dec_init)(&d, a->w->p);
    const int k = a->w->p.k;
    if (a->w->p.T == 256 && k >= 2 && k <= 4) {
        for (int64_t m0 = 0; m0 < a->M; m0 += 4) {
            const int64_t mc = TCQ_MIN(4, a->M - m0);
            if (k == 2) { SFX_RF256_MC(2) }
            else if (k == 3) { SFX_RF256_MC(3) }
            else { SFX_RF256_MC(4) }
        }
        return;
    }
    for (int64_t m0 = 0; m0 < a->M; m0 += 4) {
        switch (TCQ_MIN(4, a->M - m0)) {
        case 1: SFX(reduce_fast_body)(a, &d, 1, m0); break;
        case 2: SFX(reduce_fast_body)(a, &d, 2, m0); break;
        case 3: SFX(reduce_fast_body)(a, &d, 3, m0); break;
        default: SFX(reduce_fast_body)(a, &d, 4, m0); break;
        }
    }
}

#undef SFX_RF256_MC

static void SFX(reduce_exact)(const kr_args *a)
{
    SFX(dec) d;
    SFX(dec_init)(&d, a->w->p);
    for (int64_t m0 = 0; m0 < a->M; m0 += 4) {
        switch (TCQ_MIN(4, a->M - m0)) {
        case 1: SFX(reduce_exact_body)(a, &d, 1, m0); break;
        case 2: SFX(reduce_exact_body)(a, &d, 2, m0); break;
        case 3: SFX(reduce_exact_body)(a, &d, 3, m0); break;
        default: SFX(reduce_exact_body)(a, &d, 4, m0); break;
        }
    }
}

/* ---- axis 0: MC rows x 4 groups of accumulators (16 ymm registers in all) ---- */

static inline __attribute__((always_inline)) void SFX(scatter_fast_body)(const ks_args *a, const SFX(dec) *d,
                                                                         const int MC, int64_t m0, int g0)
{
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const kq_act *qa = a->qa;
    const int T = w->p.T;
    SFX(blk) bl;
    for (int64_t ic = a->i0; ic < a->i1; ic += TCQ_FAST_QB) {
        const int64_t kb = ic / TCQ_FAST_QB, ie = TCQ_MIN(a->i1, ic + TCQ_FAST_QB);
        __m256i iacc[8];
        for (int m = 0; m < MC; m++)
            for (int g = 0; g < 4; g++) iacc[m * 4 + g] = _mm256_set1_epi32(qa->corr[(m0 + m) * qa->nblk + kb]);
        for (int64_t i = ic; i < ie; i++) {
            SFX(blk_load)(d, (cb + i * cs), &bl);
            for (int g = 0; g < 4; g++) {
                const __m256i x = SFX(dec_x)(d, &bl, g0 + g);
                for (int m = 0; m < MC; m++) {
                    const int64_t o = (m0 + m) * qa->npad + i;
                    iacc[m * 4 + g] = DOT(iacc[m * 4 + g], x, _mm256_set1_epi32((int)qa->q4[o]),
                                          _mm256_set1_epi32((int)qa->q2[o]));
                }
            }
        }
        for (int m = 0; m < MC; m++) {
            const __m256 dv = _mm256_set1_ps(qa->d[(m0 + m) * qa->nblk + kb]);
            float *acc = a->acc + (m0 + m) * T + g0 * 8;
            for (int g = 0; g < 4; g++)
                _mm256_storeu_ps(acc + g * 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[m * 4 + g]), dv,
                                                              _mm256_loadu_ps(acc + g * 8)));
        }
    }
}

/* scatter_fast_body for T = 256 and a constant K: GP groups a pass (8 at MC = 1, 4 at MC = 2: the
 * 8 accumulators the registers allow; 4 at MC = 1 took up to 1.3x the time), W = 1 for the pass
 * holding the wrap groups (g0 = 0), whose offsets are then all constants; the other passes
 * (g0 >= 4, inside the block at every k >= 2) read group g0 + g's qword at (31 - g0) K - g K. */
#define SC256_PF_ROWS 24
static inline __attribute__((always_inline)) void SFX(scatter_fast_256)(const ks_args *a, const SFX(dec) *d,
                                                                        const int K, const int MC, int64_t m0,
                                                                        const int W, int g0)
{
    const int GP = MC == 1 ? 8 : 4;
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const kq_act *qa = a->qa;
    const int pb = (31 - g0) * K;
    for (int64_t ic = a->i0; ic < a->i1; ic += TCQ_FAST_QB) {
        const int64_t kb = ic / TCQ_FAST_QB, ie = TCQ_MIN(a->i1, ic + TCQ_FAST_QB);
        __m256i iacc[8];
        for (int m = 0; m < MC; m++)
            for (int g = 0; g < GP; g++) iacc[m * GP + g] = _mm256_set1_epi32(qa->corr[(m0 + m) * qa->nblk + kb]);
        for (int64_t i = ic; i < ie; i++) {
            const uint8_t *p = (const uint8_t *)(cb + i * cs);
            if (W) {   /* the first pass meets each row's block first: fetch SC256_PF_ROWS ahead */
                const uint8_t *pf = p + SC256_PF_ROWS * cs * 4;
                _mm_prefetch((const char *)pf, _MM_HINT_T0);
                _mm_prefetch((const char *)pf + 32 * K - 1, _MM_HINT_T0);
            }
#pragma GCC unroll 8
            for (int g = 0; g < GP; g++) {
                int64_t v;
                if (W) v = SFX(qw256)(p, K, g);
                else memcpy(&v, p + pb - g * K, 8);
                const __m256i x = SFX(dec_q)(d, v);
                for (int m = 0; m < MC; m++) {
                    const int64_t o = (m0 + m) * qa->npad + i;
                    iacc[m * GP + g] = DOT(iacc[m * GP + g], x, _mm256_set1_epi32((int)qa->q4[o]),
                                           _mm256_set1_epi32((int)qa->q2[o]));
                }
            }
        }
        for (int m = 0; m < MC; m++) {
            const __m256 dv = _mm256_set1_ps(qa->d[(m0 + m) * qa->nblk + kb]);
            float *acc = a->acc + (m0 + m) * 256 + g0 * 8;
            for (int g = 0; g < GP; g++)
                _mm256_storeu_ps(acc + g * 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[m * GP + g]), dv,
                                                              _mm256_loadu_ps(acc + g * 8)));
        }
    }
}

#define SFX_SF256(K)                                                                               \
    for (int64_t m0 = 0; m0 < a->M; m0 += 2) {                                                     \
        if (a->M - m0 >= 2) {                                                                      \
            SFX(scatter_fast_256)(a, &d, K, 2, m0, 1, 0);                                          \
            for (int g0 = 4; g0 < 32; g0 += 4) SFX(scatter_fast_256)(a, &d, K, 2, m0, 0, g0);      \
        } else {                                                                                   \
            SFX(scatter_fast_256)(a, &d, K, 1, m0, 1, 0);                                          \
            for (int g0 = 8; g0 < 32; g0 += 8) SFX(scatter_fast_256)(a, &d, K, 1, m0, 0, g0);      \
        }                                                                                          \
    }

static void SFX(scatter_fast)(const ks_args *a)
{
    SFX(dec) d;
    SFX(dec_init)(&d, a->w->p);
    const int T = a->w->p.T;
    for (int64_t j = 0; j < a->M * T; j++) a->acc[j] = 0;
    const int k = a->w->p.k;
    if (T == 256 && k == 2) { SFX_SF256(2) }
    else if (T == 256 && k == 3) { SFX_SF256(3) }
    else if (T == 256 && k == 4) { SFX_SF256(4) }
    else
        for (int64_t m0 = 0; m0 < a->M; m0 += 2)
            for (int g0 = 0; g0 < d.ng; g0 += 4) {
                if (a->M - m0 >= 2) SFX(scatter_fast_body)(a, &d, 2, m0, g0);
                else SFX(scatter_fast_body)(a, &d, 1, m0, g0);
            }
    const __m256 ri = _mm256_set1_ps(TCQ_RMAD_RINV);
    for (int64_t j = 0; j < a->M * T; j += 8) _mm256_storeu_ps(a->acc + j, _mm256_mul_ps(_mm256_loadu_ps(a->acc + j), ri));
}

/* ---- axis 0, tile regime, fast path: trellis_scatter_avx512x.c's row-pair tile on ymm ----
 * An activation block of stored rows (<= TCQ_FAST_QB) decoded once into the scratch as byte sums
 * bs = bytesum(x) in [0, 1020], two stored rows per dword (row 2p low int16, 2p + 1 high); then
 * per (SC0_MC activation rows) x (2 groups) register block one vpdpwssd (vpmaddwd + vpaddd without
 * VNNI) with the pair (q[2p], q[2p + 1]) broadcast adds two rows' products for 8 columns.  The
 * int32 sums are the same integers as the shared kernel's (sum_i bs_i q_i + corr, exact). */
static inline __attribute__((always_inline)) void SFX(scatter_tile_blk)(const ks_args *a, const __m256i *xb, int ng,
                                                                        int64_t ic, int np, const int32_t *qp,
                                                                        const int MC, int64_t m0, int g0)
{
    const kq_act *qa = a->qa;
    const int64_t kb = ic / TCQ_FAST_QB;
    __m256i iacc[2 * SC0_MC];
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < 2; g++) iacc[m * 2 + g] = _mm256_set1_epi32(qa->corr[(m0 + m) * qa->nblk + kb]);
    for (int p = 0; p < np; p++) {
        const __m256i x0 = _mm256_load_si256(xb + p * ng + g0), x1 = _mm256_load_si256(xb + p * ng + g0 + 1);
        for (int m = 0; m < MC; m++) {
            const __m256i q = _mm256_set1_epi32(qp[m * (TCQ_FAST_QB / 2) + p]);
            iacc[m * 2] = DOT16(iacc[m * 2], x0, q);
            iacc[m * 2 + 1] = DOT16(iacc[m * 2 + 1], x1, q);
        }
    }
    for (int m = 0; m < MC; m++) {
        const __m256 dv = _mm256_set1_ps(qa->d[(m0 + m) * qa->nblk + kb]);
        float *acc = a->acc + (m0 + m) * a->w->p.T + g0 * 8;
        for (int g = 0; g < 2; g++)
            _mm256_storeu_ps(acc + g * 8,
                             _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[m * 2 + g]), dv, _mm256_loadu_ps(acc + g * 8)));
    }
}

static void SFX(scatter_fast_tile)(const ks_args *a)
{
    SFX(dec) d;
    SFX(dec_init)(&d, a->w->p);
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const int T = w->p.T;
    const kq_act *qa = a->qa;
    enum { QP = TCQ_FAST_QB / 2 };
    __m256i *xb = a->scratch;                       /* [QP row pairs, ng] */
    int32_t *qp = (int32_t *)(xb + QP * d.ng);      /* [SC0_MC, QP] (q[2p], q[2p+1]) as int16 */
    const __m256i c510 = _mm256_set1_epi32(510);
    for (int64_t j = 0; j < a->M * T; j++) a->acc[j] = 0;
    for (int64_t ic = a->i0; ic < a->i1; ic += TCQ_FAST_QB) {
        const int64_t n = TCQ_MIN(a->i1, ic + TCQ_FAST_QB) - ic;
        const int np = (int)((n + 1) / 2);
        SFX(blk) b0, b1;
        for (int p = 0; p < np; p++) {
            const int64_t i = ic + 2 * p;
            const int has1 = 2 * p + 1 < n;
            SFX(blk_load)(&d, cb + i * cs, &b0);
            if (has1) SFX(blk_load)(&d, cb + (i + 1) * cs, &b1);
            for (int g = 0; g < d.ng; g++) {
                const __m256i s0 = _mm256_add_epi32(YSUM(SFX(dec_x)(&d, &b0, g)), c510);
                const __m256i s1 = has1 ? _mm256_add_epi32(YSUM(SFX(dec_x)(&d, &b1, g)), c510) : _mm256_setzero_si256();
                _mm256_store_si256(xb + p * d.ng + g, _mm256_or_si256(s0, _mm256_slli_epi32(s1, 16)));
            }
        }
        for (int64_t m0 = 0; m0 < a->M; m0 += SC0_MC) {
            const int mc = (int)TCQ_MIN(SC0_MC, a->M - m0);
            /* q of rows ic.. (zero-padded past n) widened to int16: dword p is the pair */
            for (int m = 0; m < mc; m++)
                for (int j = 0; j < TCQ_FAST_QB / 16; j++)
                    _mm256_store_si256((__m256i *)(qp + m * QP) + j,
                                       _mm256_cvtepi8_epi16(_mm_loadu_si128(
                                           (const __m128i *)(qa->q + (m0 + m) * qa->npad + ic + 16 * j))));
            for (int g0 = 0; g0 < d.ng; g0 += 2) switch (mc) {
                case 1: SFX(scatter_tile_blk)(a, xb, d.ng, ic, np, qp, 1, m0, g0); break;
                case 2: SFX(scatter_tile_blk)(a, xb, d.ng, ic, np, qp, 2, m0, g0); break;
                case 3: SFX(scatter_tile_blk)(a, xb, d.ng, ic, np, qp, 3, m0, g0); break;
                default: SFX(scatter_tile_blk)(a, xb, d.ng, ic, np, qp, 4, m0, g0); break;
                }
        }
    }
    const __m256 ri = _mm256_set1_ps(TCQ_RMAD_RINV);
    for (int64_t j = 0; j < a->M * T; j += 8) _mm256_storeu_ps(a->acc + j, _mm256_mul_ps(_mm256_loadu_ps(a->acc + j), ri));
}

/* The shared regime's axis-0 kernel: at M = 3, 4 the row-pair tile (its decode once per stored
 * row pair, then one vpdpwssd per two rows, 8 columns and activation row) took 0.6-0.75x the time
 * of scatter_fast's two sweeps of two rows; at M = 2 they tie (docs/PERFORMANCE.md, "AVX2 at T = 256") */
static void SFX(scatter_fast_shared)(const ks_args *a)
{
    if (a->M >= 3) SFX(scatter_fast_tile)(a);
    else SFX(scatter_fast)(a);
}

static inline __attribute__((always_inline)) void SFX(scatter_exact_body)(const ks_args *a, const SFX(dec) *d,
                                                                          const int MC, int64_t m0, int g0)
{
    const tcq_trellis *w = a->w;
    const uint32_t *cb;
    int64_t cs;
    kblock_col(w, a->b, &cb, &cs);
    const int T = w->p.T;
    const int64_t in = w->rows;
    __m256 facc[8];
    for (int j = 0; j < MC * 4; j++) facc[j] = _mm256_setzero_ps();
    SFX(blk) bl;
    for (int64_t i = a->i0; i < a->i1; i++) {
        SFX(blk_load)(d, (cb + i * cs), &bl);
        const __m256 scale = _mm256_set1_ps(_cvtsh_ss(w->scales[i]));
        for (int g = 0; g < 4; g++) {
            const __m256 wv = SFX(dec_w)(d, &bl, g0 + g, scale);
            for (int m = 0; m < MC; m++)
                facc[m * 4 + g] = _mm256_fmadd_ps(wv, _mm256_set1_ps(a->x[(m0 + m) * in + i]), facc[m * 4 + g]);
        }
    }
    for (int m = 0; m < MC; m++)
        for (int g = 0; g < 4; g++) _mm256_storeu_ps(a->acc + (m0 + m) * T + (g0 + g) * 8, facc[m * 4 + g]);
}

#undef SFX_SF256
#undef SC256_PF_ROWS

static void SFX(scatter_exact)(const ks_args *a)
{
    SFX(dec) d;
    SFX(dec_init)(&d, a->w->p);
    for (int64_t m0 = 0; m0 < a->M; m0 += 2)
        for (int g0 = 0; g0 < d.ng; g0 += 4) {
            if (a->M - m0 >= 2) SFX(scatter_exact_body)(a, &d, 2, m0, g0);
            else SFX(scatter_exact_body)(a, &d, 1, m0, g0);
        }
}

static const tr_table SFX(table) = {
    .isa = "avx2" ISA_TAG,
    .reduce = {{SFX(reduce_exact), SFX(reduce_exact), SFX(reduce_exact)},
               {SFX(reduce_fast), SFX(reduce_fast), SFX(reduce_fast_tile16)}},
    .tag = {{NULL, NULL, NULL}, {NULL, NULL, "i16"}},
    .scatter = {{SFX(scatter_exact), SFX(scatter_exact), SFX(scatter_exact)},
                {SFX(scatter_fast), SFX(scatter_fast_shared), SFX(scatter_fast_tile)}},
    .decode = SFX(decode_rows),
    /* the exact path has no tile kernels (M rows in chunks of 4 decode each weight M / 4 times),
     * so decode + sgemm wins from M = 8..12; the fast int16 tiles took 0.7-0.8x its time at M =
     * 64..1024, with and without VNNI (2 threads, Zen 5 with OpenBLAS's Haswell kernels,
     * docs/PERFORMANCE.md "AVX2 at T = 256", "The fast tiles at every M") */
    .gemm_from = {{8, TR_GEMM_NEVER}, {12, TR_GEMM_NEVER}},
};
