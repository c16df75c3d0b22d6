/* Fast-path activation quantization: int8 per block of TCQ_FAST_QB positions, step d = amax/127,
 * q = round-to-nearest-even(a / d) in [-127, 127].  The same for every ISA, so the fast kernels of
 * all ISAs see the same integers. */
#include "kernels.h"

#include <float.h>
#include <math.h>
#include <string.h>

void tcq_kq_free(kq_act *qa)
{
    tcq_afree(qa->q);
    tcq_afree(qa->q4);
    tcq_afree(qa->q2);
    tcq_afree(qa->d);
    tcq_afree(qa->corr);
    tcq_afree(qa->q16);
    tcq_afree(qa->d16);
    tcq_afree(qa->qt);
    tcq_afree(qa->dt);
    tcq_afree(qa->corrt);
    memset(qa, 0, sizeof *qa);
}

tcq_status tcq_kq_transpose(kq_act *qa, int64_t M)
{
    const int64_t nt = (M + 15) / 16, npad = qa->npad, nblk = qa->nblk;
    if (!qa->qt || qa->tcap < nt * npad || qa->tbcap < nt * nblk) {
        const int64_t tcap = TCQ_MAX(qa->tcap, nt * npad), tbcap = TCQ_MAX(qa->tbcap, nt * nblk);
        tcq_afree(qa->qt);
        tcq_afree(qa->dt);
        tcq_afree(qa->corrt);
        qa->qt = tcq_amalloc((size_t)tcap * 64);
        qa->dt = tcq_amalloc((size_t)tbcap * 64);
        qa->corrt = tcq_amalloc((size_t)tbcap * 64);
        qa->tcap = qa->qt && qa->dt && qa->corrt ? tcap : 0;
        qa->tbcap = qa->tcap ? tbcap : 0;
        if (!qa->tcap) return tcq_fail(TCQ_ERR_NOMEM, "AMX activation tiles (%lld x %lld)", (long long)M, (long long)npad);
    }
    for (int64_t t = 0; t < nt; t++)
        for (int n = 0; n < 16; n++) {
            const int64_t m = 16 * t + n;
            for (int64_t i = 0; i < npad; i++) qa->qt[(t * npad + i) * 16 + n] = m < M ? qa->q4[m * npad + i] : 0;
            for (int64_t b = 0; b < nblk; b++) {
                qa->dt[(t * nblk + b) * 16 + n] = m < M ? qa->d[m * nblk + b] : 0.0f;
                qa->corrt[(t * nblk + b) * 16 + n] = m < M ? qa->corr[m * nblk + b] : 0;
            }
        }
    return TCQ_OK;
}

/* The definition of the fast path's activation integers (the golden for prep_avx2.c and
 * prep_avx512.c). */
void tcq_kq_fill_ref(kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *scales)
{
    const int64_t nblk = qa->nblk, npad = qa->npad;
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * n;
        int8_t *q = qa->q + m * npad;
        uint32_t *q4 = qa->q4 + m * npad, *q2 = qa->q2 + m * npad;
        for (int64_t blk = 0; blk < nblk; blk++) {
            const int64_t i0 = blk * TCQ_FAST_QB, i1 = TCQ_MIN(n, i0 + TCQ_FAST_QB);
            float a[TCQ_FAST_QB], amax = 0;
            int finite = 1;
            for (int64_t i = i0; i < i1; i++) {
                a[i - i0] = scales ? xm[i] * tcq_f16_to_f32(scales[i]) : xm[i];
                finite &= fabsf(a[i - i0]) <= FLT_MAX;
                amax = fmaxf(amax, fabsf(a[i - i0]));
            }
            int32_t sum = 0;
            /* amax == 0: the block contributes nothing.  A NaN or Inf: q = 0 and d = NaN, so the
             * outputs show it (as the exact path's would) instead of hiding it. */
            if (!finite) amax = NAN;
            float inv, dstep;
            const int ok = kq_step(amax, 127.0f, &inv, &dstep);
            for (int64_t i = i0; i < i0 + TCQ_FAST_QB; i++) {
                int v = 0;
                if (i < i1 && ok) {
                    v = (int)nearbyintf(a[i - i0] * inv);
                    v = v > 127 ? 127 : v < -127 ? -127 : v;
                }
                q[i] = (int8_t)v;
                q4[i] = (uint32_t)(uint8_t)(int8_t)v * 0x01010101u;
                q2[i] = (uint32_t)(uint16_t)(int16_t)v * 0x00010001u;
                sum += v;
            }
            qa->d[m * nblk + blk] = dstep;
            qa->corr[m * nblk + blk] = -510 * sum;
        }
        if (!scales && n % 32 == 0) {
            float amax = 0;
            int finite = 1;
            for (int64_t i = 0; i < n; i++) {
                finite &= fabsf(xm[i]) <= FLT_MAX;
                amax = fmaxf(amax, fabsf(xm[i]));
            }
            if (!finite) amax = NAN;
            float inv, dstep;
            const int ok = kq_step(amax, (float)TCQ_Q16_MAX, &inv, &dstep);
            int16_t *q16 = qa->q16 + m * npad;
            for (int64_t c = 0; c < n; c += 32)
                for (int e = 0; e < 32; e++) {
                    const int64_t i = c + 4 * (e / 8) + e % 4 + 16 * ((e % 8) / 4);
                    int v = ok ? (int)nearbyintf(xm[i] * inv) : 0;
                    v = v > TCQ_Q16_MAX ? TCQ_Q16_MAX : v < -TCQ_Q16_MAX ? -TCQ_Q16_MAX : v;
                    q16[c + e] = (int16_t)v;
                }
            qa->d16[m] = dstep;
        }
    }
}

typedef struct fill_job {
    const kq_act *qa;
    const float *x;
    int64_t M, n, used;
    const uint16_t *scales;
    tcq_isa isa;
} fill_job;

/* Rows per fill item: rows are independent, so any split gives the same bytes. */
enum { PREP_ROWS = 16 };

static void fill_item(void *arg, int64_t item, int thread)
{
    (void)thread;
    const fill_job *J = arg;
    const int64_t m0 = item * PREP_ROWS, M = TCQ_MIN(PREP_ROWS, J->M - m0), n = J->n, used = J->used;
    const int64_t npad = J->qa->npad, nblk = J->qa->nblk;
    kq_act v = *J->qa;   /* a view of rows m0.. */
    v.q += m0 * npad, v.q4 += m0 * npad, v.q2 += m0 * npad, v.q16 += m0 * npad;
    v.d += m0 * nblk, v.corr += m0 * nblk, v.d16 += m0;
    const float *x = J->x + m0 * n;
    if (J->isa >= TCQ_ISA_AVX512) tcq_kq_fill_avx512(&v, x, M, n, J->scales);
    else if (J->isa >= TCQ_ISA_AVX2) tcq_kq_fill_avx2(&v, x, M, n, J->scales);
    else tcq_kq_fill_ref(&v, x, M, n, J->scales);
    /* the fills write the used positions (q16: n); the rest of each row is zero */
    const int64_t u16 = !J->scales && n % 32 == 0 ? n : npad;
    for (int64_t m = 0; m < M; m++) {
        memset(v.q + m * npad + used, 0, (size_t)(npad - used));
        memset(v.q4 + m * npad + used, 0, (size_t)(npad - used) * 4);
        memset(v.q2 + m * npad + used, 0, (size_t)(npad - used) * 4);
        memset(v.q16 + m * npad + u16, 0, (size_t)(npad - u16) * 2);
    }
}

tcq_status tcq_kq_prepare(kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *scales)
{
    return tcq_kq_prepare_pool(qa, x, M, n, scales, NULL);
}

tcq_status tcq_kq_prepare_pool(kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *scales,
                               tcq_pool *pool)
{
    /* one more block where a row of int16 copies would be a multiple of 256 bytes: 5120 positions
     * (10 KB) put every second row of the tile's chunk in the same 8 of L1's 64 sets, and 32 rows
     * no longer fit its 12 ways (docs/PERFORMANCE.md, session 19: 5-8 % at M = 8..64) */
    const int64_t nblk = (n + TCQ_FAST_QB - 1) / TCQ_FAST_QB, used = nblk * TCQ_FAST_QB,
                  npad = used + ((used / 32) % 4 == 0 ? TCQ_FAST_QB : 0);
    if (!qa->q || qa->cap < M * npad || qa->mcap < M || qa->bcap < M * nblk) {
        /* grow, each size to the largest asked so far: the buffers are reused by calls of every
         * shape, and reallocating at each change of shape cost page faults on every layer */
        const int64_t cap = TCQ_MAX(qa->cap, M * npad), mcap = TCQ_MAX(qa->mcap, M),
                      bcap = TCQ_MAX(qa->bcap, M * nblk);
        tcq_kq_free(qa);
        qa->q = tcq_amalloc((size_t)cap);
        qa->q4 = tcq_amalloc((size_t)cap * 4);
        qa->q2 = tcq_amalloc((size_t)cap * 4);
        qa->d = tcq_amalloc((size_t)bcap * 4);
        qa->corr = tcq_amalloc((size_t)bcap * 4);
        qa->q16 = tcq_amalloc((size_t)cap * 2);
        qa->d16 = tcq_amalloc((size_t)mcap * 4);
        if (!qa->q || !qa->q4 || !qa->q2 || !qa->d || !qa->corr || !qa->q16 || !qa->d16) {
            tcq_kq_free(qa);
            return tcq_fail(TCQ_ERR_NOMEM, "fast-path activation buffers (%lld x %lld)", (long long)M,
                            (long long)npad);
        }
        qa->cap = cap;
        qa->mcap = mcap;
        qa->bcap = bcap;
    }
    qa->n = n;
    qa->npad = npad;
    qa->nblk = nblk;
    fill_job J = {qa, x, M, n, used, scales, tcq_isa_active()};
    tcq_pool_run(pool, (M + PREP_ROWS - 1) / PREP_ROWS, fill_item, &J);
    return TCQ_OK;
}
