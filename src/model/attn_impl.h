/* The attention core, included by attn.c (generic), attn_avx2.c and attn_avx512.c, which only
 * differ in the flags the build gives them.  The arithmetic is written out in a fixed order
 * (eight lanes combined as ((0+4)+(1+5))+((2+6)+(3+7)), separate multiply and add), so every
 * ISA computes bit-identical results; the wider ones just vectorize it better. */
#ifndef ATTN_NAME
#error "define ATTN_NAME before including attn_impl.h"
#endif

#include <math.h>
#include <string.h>

#define ATTN_TILE 32   /* outputs per register tile of the weighted sum of V rows */
typedef tcq_model_v16 attn_v16;
_Static_assert(ATTN_TILE == 2 * 16, "the full f32 tile is two attn_v16 accumulators");

/* the fixed combination of eight lane sums */
static inline float attn_tree8(const float acc[8])
{
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static float attn_dot(const float *a, const float *b, int n)
{
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++) acc[u] += a[i + u] * b[i + u];
    for (; i < n; i++) acc[0] += a[i] * b[i];
    return attn_tree8(acc);
}

/* e^x for the softmax's x = score - max <= 0, in plain float operations so that it vectorizes
 * (libm's expf was a call per score, 5.5 % of a decode token at 1536 positions) and gives the
 * same bits on every ISA: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite, two-part ln2), e^r by
 * Cephes' degree-6 polynomial (about 1 ulp), 2^n through the exponent bits.  x below -87 is
 * clamped there (e^-87 ~ 1.6e-38 instead of a smaller subnormal or 0: nothing a sum >= 1 sees).
 * x > 0 never occurs (the max is subtracted first). */
static inline float attn_expf(float x)
{
    /* NaN and -inf also become -87 here, which keeps the int conversion below defined; a NaN
     * score is passed through at the end (as libm's expf did), so a poisoned input still shows */
    const float xc = x > -87.0f ? x : -87.0f;
    const float t = xc * 1.44269504088896341f + 12582912.0f;   /* round(x / ln2) + 1.5 * 2^23 */
    const float n = t - 12582912.0f;
    const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    const int32_t e = ((int32_t)n + 127) << 23;   /* n in [-126, 0]: a normal float's exponent */
    float two_n;
    memcpy(&two_n, &e, sizeof two_n);
    return x == x ? p * two_n : x;
}

/* Prefetch the cache row ATTN_PF positions ahead (its bytes: hd elements).  The rows of one kv head
 * are kv_dim apart, and a position's work is short, so the loads of consecutive positions did not
 * overlap enough: the widening's load held 29-43 % of the core's samples at 1536 positions. */
#define ATTN_PF 8
static inline void attn_prefetch(const tcq_attn_args *a, const void *cache, int t)
{
    if (t >= a->n) return;
    const size_t es = a->kv_f16 ? 2 : 4;
    const char *p = (const char *)cache + (size_t)t * a->kv_dim * es;
    for (size_t b = 0; b < (size_t)a->hd * es; b += 64) __builtin_prefetch(p + b);
}

static const float *attn_row(const tcq_attn_args *a, const void *cache, int t)
{
    if (!a->kv_f16) return (const float *)cache + (size_t)t * a->kv_dim;
    const uint16_t *p = (const uint16_t *)cache + (size_t)t * a->kv_dim;
    int i = 0;
    for (; i + 16 <= a->hd; i += 16) {
        attn_v16 f;
        tcq_model_h2f16(p + i, &f);
        memcpy(a->buf + i, &f, sizeof f);
    }
    for (; i < a->hd; i++) a->buf[i] = tcq_model_h2f(p[i]);
    return a->buf;
}

/* p[t] = softmax(p)[t] over t in [0, n): the plain-float expf, the sum in eight fixed lanes. */
static void attn_softmax(float *p, int n)
{
    float mx = -INFINITY;
    for (int t = 0; t < n; t++) mx = p[t] > mx ? p[t] : mx;
    for (int t = 0; t < n; t++) p[t] = attn_expf(p[t] - mx);
    /* the sum in eight fixed lanes, as attn_dot does (one chain of n adds was latency-bound) */
    float ps[8] = {0};
    int t = 0;
    for (; t + 8 <= n; t += 8)
        for (int u = 0; u < 8; u++) ps[u] += p[t + u];
    for (; t < n; t++) ps[0] += p[t];
    const float inv = 1.0f / attn_tree8(ps);
    for (int t = 0; t < n; t++) p[t] *= inv;
}

/* The prefill block's row softmax (attn_block.c): the per-row core's own, so that prefill and
 * decode round the same way (libm's expf there was 7 % of a 1536-token prefill, a call per score). */
#define ATTN_CAT2(a, b) a##b
#define ATTN_CAT(a, b) ATTN_CAT2(a, b)
void ATTN_CAT(ATTN_NAME, _softmax)(float *p, int n) { attn_softmax(p, n); }

void ATTN_NAME(const tcq_attn_args *a)
{
    const int hd = a->hd, G = a->G, n = a->n;
    const size_t S = (size_t)a->n;   /* scores row stride */
    const float scale = 1.0f / sqrtf((float)hd);
    for (int t = 0; t < n; t++) {
        attn_prefetch(a, a->k, t + ATTN_PF);
        const float *k = attn_row(a, a->k, t);
        for (int g = 0; g < G; g++) a->scores[g * S + t] = attn_dot(a->q + (size_t)g * hd, k, hd) * scale;
    }
    for (int g = 0; g < G; g++) attn_softmax(a->scores + g * S, n);
    /* out[g, i] = sum over t in order of w[g, t] v[t, i], from 0.  In tiles of 32 outputs held
     * in registers across t: accumulated in memory row by row, every t's add waited for the
     * previous t's store (47 % of this function's time at 1536 positions).  Same additions in
     * the same order as that loop, so the same bits.  An f16 cache's full tiles come first, two
     * query heads at a time, so that each V row is widened once for both (per head, the
     * widening was most of the f16 path's extra cost at 1536 positions: docs/PERFORMANCE.md, session 16). */
    if (a->kv_f16)
        for (int i0 = 0; i0 + ATTN_TILE <= hd; i0 += ATTN_TILE)
            for (int g = 0; g < G; g += 2) {
                const int two = g + 1 < G;
                const float *w0 = a->scores + g * S, *w1 = two ? w0 + S : w0;
                attn_v16 s0 = {0}, s1 = {0}, u0 = {0}, u1 = {0};
                const uint16_t *v = (const uint16_t *)a->v + i0;
                for (int t = 0; t < n; t++, v += a->kv_dim) {
                    if (t + ATTN_PF < n) __builtin_prefetch(v + (size_t)ATTN_PF * a->kv_dim);
                    attn_v16 x0, x1;
                    tcq_model_h2f16(v, &x0);
                    tcq_model_h2f16(v + 16, &x1);
                    s0 = s0 + w0[t] * x0;
                    s1 = s1 + w0[t] * x1;
                    u0 = u0 + w1[t] * x0;
                    u1 = u1 + w1[t] * x1;
                }
                float *o = a->out + (size_t)g * hd + i0;
                memcpy(o, &s0, sizeof s0);
                memcpy(o + 16, &s1, sizeof s1);
                if (two) {
                    memcpy(o + hd, &u0, sizeof u0);
                    memcpy(o + hd + 16, &u1, sizeof u1);
                }
            }
    for (int g = 0; g < G; g++) {
        const float *w = a->scores + g * S;
        for (int i0 = 0; i0 < hd; i0 += ATTN_TILE) {
            const int nt = hd - i0 < ATTN_TILE ? hd - i0 : ATTN_TILE;
            float acc[ATTN_TILE] = {0};
            if (!a->kv_f16 && nt == ATTN_TILE) {
                /* vector types, so that the tile stays in registers (as an array gcc kept it in
                 * memory); element-wise IEEE operations: the same bits on every ISA */
                attn_v16 s0 = {0}, s1 = {0};
                const float *v = (const float *)a->v + i0;
                for (int t = 0; t < n; t++, v += a->kv_dim) {
                    if (t + ATTN_PF < n) {   /* the tile's two lines of a row ATTN_PF ahead */
                        __builtin_prefetch(v + (size_t)ATTN_PF * a->kv_dim);
                        __builtin_prefetch(v + (size_t)ATTN_PF * a->kv_dim + 16);
                    }
                    attn_v16 x0, x1;
                    memcpy(&x0, v, sizeof x0);
                    memcpy(&x1, v + 16, sizeof x1);
                    s0 = s0 + w[t] * x0;
                    s1 = s1 + w[t] * x1;
                }
                memcpy(acc, &s0, sizeof s0);
                memcpy(acc + 16, &s1, sizeof s1);
            } else if (nt == ATTN_TILE) {   /* f16: done above */
                continue;
            } else if (!a->kv_f16) {
                const float *v = (const float *)a->v + i0;
                for (int t = 0; t < n; t++, v += a->kv_dim)
                    for (int u = 0; u < nt; u++) acc[u] += w[t] * v[u];
            } else {
                const uint16_t *v = (const uint16_t *)a->v + i0;
                for (int t = 0; t < n; t++, v += a->kv_dim)
                    for (int u = 0; u < nt; u++) acc[u] += w[t] * tcq_model_h2f(v[u]);
            }
            memcpy(a->out + (size_t)g * hd + i0, acc, (size_t)nt * sizeof *acc);
        }
    }
}
