/* Packed trellis tensors: validation, block addressing (with the k=3 axis-0 interleave),
 * row / tensor decode, interleave conversion, per-row scales. */
#include "../core/internal.h"

#include <math.h>
#include <string.h>

/* Interleave geometry, the one source of truth: two k=3 blocks (2 x 24 words) per group. */
enum { IL_BLOCK_WORDS = 24, IL_GROUP_WORDS = 48, IL_GROUP_COLS = 512 };
_Static_assert(IL_GROUP_WORDS == 2 * IL_BLOCK_WORDS, "interleave groups hold two blocks");
_Static_assert(IL_GROUP_COLS * 3 / 32 == IL_GROUP_WORDS, "512 weights at k=3 fill 48 words");

tcq_status tcq_trellis_check(const tcq_trellis *w)
{
    if (!w) return tcq_fail(TCQ_ERR_INVALID_ARG, "trellis tensor is NULL");
    TCQ_TRY(tcq_block_check(w->p));
    if (w->axis != 0 && w->axis != 1)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "trellis axis=%d is not 0 or 1", w->axis);
    if (w->rows <= 0 || w->cols <= 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "trellis shape [%lld, %lld] is empty",
                        (long long)w->rows, (long long)w->cols);
    if (w->cols % w->p.T != 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "trellis row length %lld is not a multiple of T=%d",
                        (long long)w->cols, w->p.T);
    if (w->interleaved) {
        if (w->p.k != 3 || w->axis != 0 || w->p.T != 256 || w->cols % IL_GROUP_COLS != 0)
            return tcq_fail(TCQ_ERR_INVALID_ARG,
                            "two-block interleave needs k=3, axis 0, T=256 and C %% 512 == 0 "
                            "(got k=%d axis=%d T=%d C=%lld)",
                            w->p.k, w->axis, w->p.T, (long long)w->cols);
    }
    if (!w->codes || !w->scales) return tcq_fail(TCQ_ERR_INVALID_ARG, "trellis codes or scales are NULL");
    return TCQ_OK;
}

double tcq_trellis_bpw(const tcq_trellis *w) { return w->p.k + 16.0 / (double)w->cols; }

const uint32_t *tcq_trellis_block(const tcq_trellis *w, int64_t r, int64_t blk)
{
    const int wpb = tcq_block_words(w->p);
    if (!w->interleaved) return w->codes + r * tcq_trellis_row_words(w) + blk * wpb;
    return w->codes + (blk / 2) * w->rows * IL_GROUP_WORDS + r * IL_GROUP_WORDS + (blk % 2) * IL_BLOCK_WORDS;
}

tcq_status tcq_trellis_decode_row(const tcq_trellis *w, int64_t r, float *out)
{
    TCQ_TRY(tcq_trellis_check(w));
    if (r < 0 || r >= w->rows)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "row %lld outside [0, %lld)", (long long)r, (long long)w->rows);
    const float scale = tcq_f16_to_f32(w->scales[r]);
    for (int64_t b = 0; b < w->cols / w->p.T; b++)
        tcq_block_decode_f32(w->p, tcq_trellis_block(w, r, b), scale, out + b * w->p.T);
    return TCQ_OK;
}

tcq_status tcq_trellis_decode_row_bf16(const tcq_trellis *w, int64_t r, uint16_t *out)
{
    float buf[256];
    TCQ_TRY(tcq_trellis_check(w));
    if (r < 0 || r >= w->rows)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "row %lld outside [0, %lld)", (long long)r, (long long)w->rows);
    const float scale = tcq_f16_to_f32(w->scales[r]);
    for (int64_t b = 0; b < w->cols / w->p.T; b++) {
        tcq_block_decode_f32(w->p, tcq_trellis_block(w, r, b), scale, buf);
        for (int t = 0; t < w->p.T; t++) out[b * w->p.T + t] = tcq_f32_to_bf16(buf[t]);
    }
    return TCQ_OK;
}

/* Decode to W [out, in] as f32 (bf16 == NULL) or bf16. */
static tcq_status trellis_decode_any(const tcq_trellis *w, float *W, uint16_t *Wb)
{
    TCQ_TRY(tcq_trellis_check(w));
    const int64_t R = w->rows, C = w->cols;
    float *row = malloc((size_t)C * sizeof *row);
    if (!row) return tcq_fail(TCQ_ERR_NOMEM, "decode row buffer");
    for (int64_t r = 0; r < R; r++) {
        tcq_trellis_decode_row(w, r, row);
        for (int64_t c = 0; c < C; c++) {
            /* axis 1: W[r, c]; axis 0: stored row r is column r of W [C, R] */
            const int64_t idx = w->axis ? r * C + c : c * R + r;
            if (Wb) Wb[idx] = tcq_f32_to_bf16(row[c]);
            else W[idx] = row[c];
        }
    }
    free(row);
    return TCQ_OK;
}

tcq_status tcq_trellis_decode(const tcq_trellis *w, float *W) { return trellis_decode_any(w, W, NULL); }

tcq_status tcq_trellis_decode_bf16(const tcq_trellis *w, uint16_t *W) { return trellis_decode_any(w, NULL, W); }

static tcq_status interleave_check(int64_t R, int64_t C)
{
    if (R <= 0 || C <= 0 || C % IL_GROUP_COLS != 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "interleave needs R > 0 and C %% 512 == 0 (got R=%lld C=%lld)",
                        (long long)R, (long long)C);
    return TCQ_OK;
}

tcq_status tcq_interleave(int64_t R, int64_t C, const uint32_t *src, uint32_t *dst)
{
    TCQ_TRY(interleave_check(R, C));
    const int64_t groups = C / IL_GROUP_COLS, row_words = C * 3 / 32;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t r = 0; r < R; r++)
            memcpy(dst + (g * R + r) * IL_GROUP_WORDS, src + r * row_words + g * IL_GROUP_WORDS,
                   IL_GROUP_WORDS * 4);
    return TCQ_OK;
}

tcq_status tcq_deinterleave(int64_t R, int64_t C, const uint32_t *src, uint32_t *dst)
{
    TCQ_TRY(interleave_check(R, C));
    const int64_t groups = C / IL_GROUP_COLS, row_words = C * 3 / 32;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t r = 0; r < R; r++)
            memcpy(dst + r * row_words + g * IL_GROUP_WORDS, src + (g * R + r) * IL_GROUP_WORDS,
                   IL_GROUP_WORDS * 4);
    return TCQ_OK;
}

uint16_t tcq_scale_for_row(int L, const float *row, int64_t n)
{
    double s2 = 0;
    for (int64_t i = 0; i < n; i++) s2 += (double)row[i] * row[i];
    if (s2 == 0 || n <= 0) return tcq_f32_to_f16(1.0f);
    uint16_t h = tcq_f32_to_f16((float)(sqrt(s2 / (double)n) / tcq_code_rms(L)));
    /* A row whose RMS underflows fp16 would get scale 0 and decode to zeros; keep the smallest
     * positive fp16 so reconstruction keeps its sign pattern. */
    if ((h & 0x7fffu) == 0) h = 1;
    return h;
}
