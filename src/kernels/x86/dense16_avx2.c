/* AVX2 dense f16 / bf16 kernels: weights widened in registers (vcvtph2ps from F16C; bf16 by a
 * 16-bit shift, exact), times the f32 activations by FMA; 2 activation rows x 4 outputs, 8
 * accumulators of 8 lanes. */
#include "dense16_x86.h"

#define KC 1024

AI __m256 ldw(int bf, const uint16_t *w)
{
    const __m128i h = _mm_loadu_si128((const __m128i *)w);
    return bf ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

AI __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

AI void tile_2(const kd16_args *a, const int BF, const int MR, int64_t m0, int64_t n0, int nv, int64_t k0, int64_t kl,
               int first)
{
    const int64_t K = a->w->in;
    const float *x = a->x + m0 * K;
    const uint16_t *W = a->w->dense, *w[4];
    for (int n = 0; n < 4; n++) w[n] = W + (n0 + TCQ_MIN(n, nv - 1)) * K;
    __m256 acc[2][4];
    for (int m = 0; m < MR; m++)
        for (int n = 0; n < 4; n++) acc[m][n] = _mm256_setzero_ps();
    const int64_t k1 = k0 + kl, k8 = k0 + (kl & ~(int64_t)7);
    int64_t k = k0;
    for (; k < k8; k += 8) {
        const __m256 w0 = ldw(BF, w[0] + k), w1 = ldw(BF, w[1] + k), w2 = ldw(BF, w[2] + k), w3 = ldw(BF, w[3] + k);
        for (int m = 0; m < MR; m++) {
            const __m256 xv = _mm256_loadu_ps(x + m * K + k);
            acc[m][0] = _mm256_fmadd_ps(w0, xv, acc[m][0]);
            acc[m][1] = _mm256_fmadd_ps(w1, xv, acc[m][1]);
            acc[m][2] = _mm256_fmadd_ps(w2, xv, acc[m][2]);
            acc[m][3] = _mm256_fmadd_ps(w3, xv, acc[m][3]);
        }
    }
    if (k < k1) {   /* the tail through a zeroed buffer: +0 terms past the row */
        uint16_t wt[4][8] = {{0}};
        float xt[2][8] = {{0}};
        for (int64_t j = 0; j < k1 - k; j++) {
            for (int n = 0; n < 4; n++) wt[n][j] = w[n][k + j];
            for (int m = 0; m < MR; m++) xt[m][j] = x[m * K + k + j];
        }
        for (int m = 0; m < MR; m++) {
            const __m256 xv = _mm256_loadu_ps(xt[m]);
            for (int n = 0; n < 4; n++) acc[m][n] = _mm256_fmadd_ps(ldw(BF, wt[n]), xv, acc[m][n]);
        }
    }
    for (int m = 0; m < MR; m++)
        d16_store(a->y + (m0 + m) * a->ldy + n0, hsum4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]), nv, first);
}

/* pf: not used (the next group's prefetch was measured on the AVX-512 table only) */
static void tile_f16(const kd16_args *a, int64_t m0, int mr, int64_t n0, int nv, int64_t k0, int64_t kl,
                     int first, const void *pf)
{
    (void)pf;
    if (mr == 1) tile_2(a, 0, 1, m0, n0, nv, k0, kl, first);
    else tile_2(a, 0, 2, m0, n0, nv, k0, kl, first);
}

static void tile_bf16(const kd16_args *a, int64_t m0, int mr, int64_t n0, int nv, int64_t k0, int64_t kl,
                      int first, const void *pf)
{
    (void)pf;
    if (mr == 1) tile_2(a, 1, 1, m0, n0, nv, k0, kl, first);
    else tile_2(a, 1, 2, m0, n0, nv, k0, kl, first);
}

static const kd16_isa t_f16 = {.name = "avx2", .mr = 2, .kc = KC, .mc = 128, .mg = 2, .tile = tile_f16};
static const kd16_isa t_bf16 = {.name = "avx2", .mr = 2, .kc = KC, .mc = 128, .mg = 2, .tile = tile_bf16};

const kd16_isa *tcq_d16_avx2(tcq_wformat fmt) { return fmt == TCQ_WF_BF16 ? &t_bf16 : &t_f16; }
