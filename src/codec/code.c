/* The 1MAD code: canonical values, the computed (refined reciprocal) value, and the
 * bf16 / fp16 conversions every path shares. */
#include "../core/internal.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static float g_values[1021];   /* [y + 510] */
static double g_rms[TCQ_L_MAX + 1];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* y / d correctly rounded to f32.  d = 605391/4096 has 20 significant bits, so f * d is exact in
 * double for any f32 f: pick, among the double-rounded quotient and its two f32 neighbours, the
 * one whose product is nearest y (ties to the even significand). */
static float div_correctly_rounded(int y)
{
    const double d = 147.800537109375;
    float q = (float)((double)y / d);
    float best = q;
    double best_err = fabs((double)q * d - y);
    const float cand[2] = {nextafterf(q, -INFINITY), nextafterf(q, INFINITY)};
    for (int i = 0; i < 2; i++) {
        double e = fabs((double)cand[i] * d - y);
        uint32_t bits;
        memcpy(&bits, &cand[i], 4);
        if (e < best_err || (e == best_err && (bits & 1u) == 0)) {
            best = cand[i];
            best_err = e;
        }
    }
    return best;
}

static void code_init(void)
{
    for (int y = -510; y <= 510; y++) g_values[y + 510] = div_correctly_rounded(y);
    for (int L = TCQ_L_MIN; L <= TCQ_L_MAX; L++) {
        double s2 = 0;
        for (uint32_t s = 0; s < (1u << L); s++) {
            double v = g_values[tcq_code_y(s) + 510];
            s2 += v * v;
        }
        g_rms[L] = sqrt(s2 / (double)(1u << L));
    }
}

const float *tcq_code_value_table(void)
{
    pthread_once(&g_once, code_init);
    return g_values;
}

float tcq_code_value_y(int y) { return tcq_code_value_table()[y + 510]; }

float tcq_code_value(uint32_t s) { return tcq_code_value_table()[tcq_code_y(s) + 510]; }

float tcq_code_value_computed(uint32_t s)
{
    const float d = TCQ_RMAD_DIV, r = 1.0f / TCQ_RMAD_DIV;
    const float y = (float)tcq_code_y(s);
    float q = y * r;
    const float e = fmaf(-q, d, y);
    return fmaf(e, r, q);
}

double tcq_code_rms(int L)
{
    if (L < TCQ_L_MIN || L > TCQ_L_MAX) return 0;
    pthread_once(&g_once, code_init);
    return g_rms[L];
}

uint16_t tcq_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);   /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float tcq_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t tcq_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));   /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {
        /* Subnormal or zero in fp16: value = m * 2^-24, round to nearest even. */
        if (a < 0x33000000u) return (uint16_t)sign;   /* < 2^-25: rounds to 0 */
        const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        const int shift = 126 - (int)e; /* bits to drop so the unit is 2^-24 */
        uint32_t q = m >> (shift), rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t h = ((a >> 13) - (112u << 10));
    const uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float tcq_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f) u = sign | 0x7f800000u | (m << 13);
    else if (e == 0) {
        if (m == 0) u = sign;
        else {
            /* normalise the subnormal */
            int sh = 0;
            while (!(m & 0x400u)) { m <<= 1; sh++; }
            u = sign | ((uint32_t)(113 - sh) << 23) | ((m & 0x3ffu) << 13);
        }
    } else
        u = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
