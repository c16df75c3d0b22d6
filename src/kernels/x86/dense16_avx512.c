/* AVX-512 dense f16 / bf16 kernels: below the GEMM regime the weights widened in registers (f16
 * by vcvtph2ps, bf16 by a shift) times the f32 activations by vfmadd231ps, a tile of up to 6
 * activation rows x 4 outputs (24 accumulators of 16 lanes); the GEMM regime in
 * dense16_gemm_avx512.h.  These are the exact path's kernels (f32 activations): vdpbf16ps needs
 * the activations rounded to bf16, which moved tinyqwen's logits 0.05 from transformers' (the
 * parity tests allow 1e-3); the fast path's vdpbf16ps GEMM is dense16_dp_avx512x.c (a panel
 * form of it here ran 1.5x this GEMM's time on Zen 5 and is gone). */
#include "dense16_gemm_avx512.h"

#define KC 1024
#define ROW_PF 8192

/* 16 weights widened exactly: f16 by vcvtph2ps, bf16 as the top halves of f32 */
AI __m512 widen(const int BF, __m256i h)
{
    return BF ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}
AI __m512 ldw(const int BF, const uint16_t *w, int64_t k) { return widen(BF, _mm256_loadu_si256((const __m256i *)(w + k))); }
AI __m512 ldw_tail(const int BF, const uint16_t *w, int64_t k, __mmask16 t) { return widen(BF, _mm256_maskz_loadu_epi16(t, w + k)); }

AI void tile_h(const kd16_args *a, const int BF, const int MR, int64_t m0, int64_t n0, int nv, int64_t k0, int64_t kl,
               int first, const char *pf)
{
    const int64_t K = a->w->in;
    const float *x = a->x + m0 * K;
    const uint16_t *W = a->w->dense, *w[4];
    for (int n = 0; n < 4; n++) w[n] = W + (n0 + TCQ_MIN(n, nv - 1)) * K;
    __m512 acc[6][4];
    for (int m = 0; m < MR; m++)
        for (int n = 0; n < 4; n++) acc[m][n] = _mm512_setzero_ps();
    const int64_t k1 = k0 + kl, k16 = k0 + (kl & ~(int64_t)15);
    int64_t k = k0;
    for (; k < k16; k += 16) {
        if (pf) {   /* the next group, 4 rows x 16 weights = 2 lines a step, into L2 (dense16.c) */
            _mm_prefetch(pf + 8 * k, _MM_HINT_T1);
            _mm_prefetch(pf + 8 * k + 64, _MM_HINT_T1);
        }
        const __m512 w0 = ldw(BF, w[0], k), w1 = ldw(BF, w[1], k), w2 = ldw(BF, w[2], k), w3 = ldw(BF, w[3], k);
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
        const __m512 w0 = ldw_tail(BF, w[0], k, t), w1 = ldw_tail(BF, w[1], k, t);
        const __m512 w2 = ldw_tail(BF, w[2], k, t), w3 = ldw_tail(BF, w[3], k, t);
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

/* M = 1: one output row at a time, its k blocks in sequence, so a thread reads its rows of W as
 * one sequential stream; the tiles read 4 rows at once, 4 streams a row apart, which Zen 5 serves
 * slower (docs/PERFORMANCE.md, "CPU, dense bf16 / f16", decisions).  The same sums as tile_h with
 * MR = 1: each block's 16 lanes k ascending, d16_hsum4_512's tree, the blocks added in order (a
 * block's one FMA chain does not bind: the next block's chain is independent).  ROW_PF: the
 * weights 8 KB ahead into L2 by software as well. */
AI void row_h(const kd16_args *a, const int BF, int64_t r0, int64_t r1)
{
    const int64_t K = a->w->in;
    const float *x = a->x;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *w = (const uint16_t *)a->w->dense + r * K;
        float y = 0;
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            const int64_t k1 = TCQ_MIN(K, k0 + KC), k16 = k0 + ((k1 - k0) & ~(int64_t)15);
            __m512 acc = _mm512_setzero_ps();
            int64_t k = k0;
            for (; k + 64 <= k16; k += 64) {
                _mm_prefetch((const char *)(w + k) + ROW_PF, _MM_HINT_T1);
                _mm_prefetch((const char *)(w + k) + ROW_PF + 64, _MM_HINT_T1);
                acc = _mm512_fmadd_ps(ldw(BF, w, k), _mm512_loadu_ps(x + k), acc);
                acc = _mm512_fmadd_ps(ldw(BF, w, k + 16), _mm512_loadu_ps(x + k + 16), acc);
                acc = _mm512_fmadd_ps(ldw(BF, w, k + 32), _mm512_loadu_ps(x + k + 32), acc);
                acc = _mm512_fmadd_ps(ldw(BF, w, k + 48), _mm512_loadu_ps(x + k + 48), acc);
            }
            for (; k < k16; k += 16) acc = _mm512_fmadd_ps(ldw(BF, w, k), _mm512_loadu_ps(x + k), acc);
            if (k < k1) {   /* zeros on both sides past the row, as the tile */
                const __mmask16 t = (__mmask16)((1u << (k1 - k)) - 1);
                acc = _mm512_fmadd_ps(ldw_tail(BF, w, k, t), _mm512_maskz_loadu_ps(t, x + k), acc);
            }
            const float s = _mm_cvtss_f32(d16_hsum4_512(acc, acc, acc, acc));
            y = k0 ? y + s : s;
        }
        a->y[r] = y;
    }
}

static void row_f16(const kd16_args *a, int64_t r0, int64_t r1) { row_h(a, 0, r0, r1); }
static void row_bf16(const kd16_args *a, int64_t r0, int64_t r1) { row_h(a, 1, r0, r1); }

#define TILE_CASES(BF)                                                  \
    switch (mr) {                                                       \
    case 1: tile_h(a, BF, 1, m0, n0, nv, k0, kl, first, pf); break;     \
    case 2: tile_h(a, BF, 2, m0, n0, nv, k0, kl, first, pf); break;     \
    case 3: tile_h(a, BF, 3, m0, n0, nv, k0, kl, first, pf); break;     \
    case 4: tile_h(a, BF, 4, m0, n0, nv, k0, kl, first, pf); break;     \
    case 5: tile_h(a, BF, 5, m0, n0, nv, k0, kl, first, pf); break;     \
    default: tile_h(a, BF, 6, m0, n0, nv, k0, kl, first, pf); break;    \
    }

static void tile_f16(const kd16_args *a, int64_t m0, int mr, int64_t n0, int nv, int64_t k0, int64_t kl, int first,
                     const void *pf)
{
    TILE_CASES(0)
}

static void tile_bf16(const kd16_args *a, int64_t m0, int mr, int64_t n0, int nv, int64_t k0, int64_t kl, int first,
                      const void *pf)
{
    TILE_CASES(1)
}

/* GEMM tile: rows [m0, m0+MR) x 64 outputs over k in [s0, s0+ns) of the f32 panel */
AI void gtile_h(const kd16_args *a, const int MR, int64_t m0, int64_t n0, int nv, int64_t s0, int64_t ns,
                const uint32_t *panel, int first)
{
    const int64_t K = a->w->in, ldy = a->ldy;
    const float *x = a->x + m0 * K + s0, *pf = (const float *)panel;
    float *y = a->y + m0 * ldy + n0;
    __mmask16 vm[4];
    d16g_masks(nv, vm);
    __m512 acc[6][4];
    for (int m = 0; m < MR; m++)
        for (int j = 0; j < 4; j++) acc[m][j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(vm[j], y + m * ldy + 16 * j);
    for (int64_t s = 0; s < ns; s++) {
        const float *p = pf + s * 64;
        const __m512 w0 = _mm512_load_ps(p), w1 = _mm512_load_ps(p + 16), w2 = _mm512_load_ps(p + 32), w3 = _mm512_load_ps(p + 48);
        for (int m = 0; m < MR; m++) {
            const __m512 b = _mm512_set1_ps(x[m * K + s]);
            acc[m][0] = _mm512_fmadd_ps(w0, b, acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(w1, b, acc[m][1]);
            acc[m][2] = _mm512_fmadd_ps(w2, b, acc[m][2]);
            acc[m][3] = _mm512_fmadd_ps(w3, b, acc[m][3]);
        }
    }
    for (int m = 0; m < MR; m++)
        for (int j = 0; j < 4; j++) _mm512_mask_storeu_ps(y + m * ldy + 16 * j, vm[j], acc[m][j]);
}

static void gtile(const kd16_args *a, int64_t m0, int mr, int64_t n0, int nv, int64_t s0, int64_t ns,
                  const uint32_t *panel, int first)
{
    switch (mr) {
    case 1: gtile_h(a, 1, m0, n0, nv, s0, ns, panel, first); break;
    case 2: gtile_h(a, 2, m0, n0, nv, s0, ns, panel, first); break;
    case 3: gtile_h(a, 3, m0, n0, nv, s0, ns, panel, first); break;
    case 4: gtile_h(a, 4, m0, n0, nv, s0, ns, panel, first); break;
    case 5: gtile_h(a, 5, m0, n0, nv, s0, ns, panel, first); break;
    default: gtile_h(a, 6, m0, n0, nv, s0, ns, panel, first); break;
    }
}

static void gemm(const kd16_args *a, int64_t r0, int64_t r1, void *scratch)
{
    if (a->w->fmt == TCQ_WF_BF16) d16g_rows(1, a, r0, r1, scratch, gtile);
    else d16g_rows(0, a, r0, r1, scratch, gtile);
}

/* kc 1024: 64 steps of 24 FMAs per reduction and a 128 x 1024 f32 activation block (512 KB) in
 * L2.  The GEMM would pay from M = 12 (at M = 8 the tiles took 0.8-1.0x its time, at M = 12 it
 * took 0.75-0.95x theirs: bench kernels --ops f16,bf16 --regime gemm vs auto, 17408 x 5120,
 * docs/PERFORMANCE.md, "CPU, dense bf16 / f16"), but a served batch's rows must keep their M = 1 bits up to
 * TCQ_MAX_BATCH (test_batch_rows), which only the tiles give: it starts after the largest batch */
static const kd16_isa t_f16 = {.name = "avx512", .mr = 6, .kc = KC, .mc = 128, .mg = TCQ_MAX_BATCH, .tile = tile_f16, .row = row_f16,
                               .row_name = "avx512.row", .gemm = gemm,
                               .gemm_name = "gemm.avx512", .gemm_from = TCQ_MAX_BATCH + 1};
static const kd16_isa t_bf16 = {.name = "avx512", .mr = 6, .kc = KC, .mc = 128, .mg = TCQ_MAX_BATCH, .tile = tile_bf16, .row = row_bf16,
                                .row_name = "avx512.row", .gemm = gemm,
                                .gemm_name = "gemm.avx512", .gemm_from = TCQ_MAX_BATCH + 1};

const kd16_isa *tcq_d16_avx512(tcq_wformat fmt) { return fmt == TCQ_WF_BF16 ? &t_bf16 : &t_f16; }
