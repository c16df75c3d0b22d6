/* AVX-512 dense f16 kernel: f16 weights widened by vcvtph2ps in registers (or, from panel_from
 * rows, once per k block into an L1 panel the tiles share), times the f32 activations by
 * vfmadd231ps: a tile of up to 6 activation rows x 4 outputs, 24 accumulators of 16 lanes. */
#include "dense16_x86.h"

#define F16_KC 1024

AI __m512 ldw(const uint16_t *w, const float *p, int64_t k) { return p ? _mm512_loadu_ps(p + k) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + k))); }
AI __m512 ldw_tail(const uint16_t *w, const float *p, int64_t k, __mmask16 t)
{
    return p ? _mm512_maskz_loadu_ps(t, p + k) : _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(t, w + k));
}

/* PANEL: read the widened panel (pk = k - k0 within it) instead of the f16 rows: the same values */
AI void tile_h(const kd16_args *a, const int MR, const int PANEL, int64_t m0, int64_t n0, int nv, int64_t k0, int64_t kl,
               const float *panel, int first)
{
    const int64_t K = a->w->in, kc = F16_KC;
    const float *x = a->x + m0 * K;
    const uint16_t *W = a->w->dense, *w[4];
    const float *p[4] = {NULL, NULL, NULL, NULL};
    for (int n = 0; n < 4; n++) {
        w[n] = W + (n0 + TCQ_MIN(n, nv - 1)) * K;
        if (PANEL) {
            p[n] = panel + n * kc - k0;   /* indexed by k, like w */
            w[n] = NULL;
        }
    }
    __m512 acc[6][4];
    for (int m = 0; m < MR; m++)
        for (int n = 0; n < 4; n++) acc[m][n] = _mm512_setzero_ps();
    const int64_t k1 = k0 + kl, k16 = k0 + (kl & ~(int64_t)15);
    int64_t k = k0;
    for (; k < k16; k += 16) {
        const __m512 w0 = ldw(w[0], p[0], k), w1 = ldw(w[1], p[1], k), w2 = ldw(w[2], p[2], k), w3 = ldw(w[3], p[3], k);
        for (int m = 0; m < MR; m++) {
            const __m512 xv = _mm512_loadu_ps(x + m * K + k);
            acc[m][0] = _mm512_fmadd_ps(w0, xv, acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(w1, xv, acc[m][1]);
            acc[m][2] = _mm512_fmadd_ps(w2, xv, acc[m][2]);
            acc[m][3] = _mm512_fmadd_ps(w3, xv, acc[m][3]);
        }
    }
    if (k < k1) {   /* zeros on both sides past the row */
        const __mmask16 t = (__mmask16)((1u << (k1 - k)) - 1);
        const __m512 w0 = ldw_tail(w[0], p[0], k, t), w1 = ldw_tail(w[1], p[1], k, t);
        const __m512 w2 = ldw_tail(w[2], p[2], k, t), w3 = ldw_tail(w[3], p[3], k, t);
        for (int m = 0; m < MR; m++) {
            const __m512 xv = _mm512_maskz_loadu_ps(t, x + m * K + k);
            acc[m][0] = _mm512_fmadd_ps(w0, xv, acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(w1, xv, acc[m][1]);
            acc[m][2] = _mm512_fmadd_ps(w2, xv, acc[m][2]);
            acc[m][3] = _mm512_fmadd_ps(w3, xv, acc[m][3]);
        }
    }
    for (int m = 0; m < MR; m++)
        d16_store(a->y + (m0 + m) * a->ldy + n0, d16_hsum4_512(acc[m][0], acc[m][1], acc[m][2], acc[m][3]), nv, first);
}

#define TILE_CASES(PANEL)                                                        \
    switch (mr) {                                                                \
    case 1: tile_h(a, 1, PANEL, m0, n0, nv, k0, kl, panel, first); break;        \
    case 2: tile_h(a, 2, PANEL, m0, n0, nv, k0, kl, panel, first); break;        \
    case 3: tile_h(a, 3, PANEL, m0, n0, nv, k0, kl, panel, first); break;        \
    case 4: tile_h(a, 4, PANEL, m0, n0, nv, k0, kl, panel, first); break;        \
    case 5: tile_h(a, 5, PANEL, m0, n0, nv, k0, kl, panel, first); break;        \
    default: tile_h(a, 6, PANEL, m0, n0, nv, k0, kl, panel, first); break;       \
    }

static void tile(const kd16_args *a, int64_t m0, int mr, int64_t n0, int nv, int64_t k0, int64_t kl, const float *panel,
                 int first)
{
    if (panel) TILE_CASES(1)
    else TILE_CASES(0)
}

static void panel(const tcq_weight *w, int64_t n0, int nv, int64_t k0, int64_t kl, int64_t kc, float *out)
{
    d16_panel_f16_512(w, n0, nv, k0, kl, kc, out);
}

/* kc 1024: 64 steps of 24 FMAs per reduction, a 16 KB panel in L1 and a 128 x 1024 f32
 * activation block (512 KB) in L2; the panel from M = 12, two tiles sharing its widening */
static const kd16_isa f16_512 = {.name = "avx512", .mr = 6, .prep = KD16_PREP_NONE, .kc = F16_KC, .mc = 128,
                                 .panel_from = 12, .tile = tile, .panel = panel};

const kd16_isa *tcq_d16_avx512_f16(void) { return &f16_512; }
