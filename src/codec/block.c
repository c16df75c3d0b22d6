/* One block: pack, unpack, validity of the cyclic successor rule, decode. */
#include "../core/internal.h"

#include <string.h>

tcq_status tcq_block_check(tcq_block_params p)
{
    if (p.L < TCQ_L_MIN || p.L > TCQ_L_MAX)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "trellis L=%d is outside 8..16", p.L);
    if (p.k < 1 || p.k > TCQ_K_MAX || p.k >= p.L)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "trellis k=%d is outside 1..4 (and k < L)", p.k);
    if (p.T != 64 && p.T != 128 && p.T != 256)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "trellis T=%d is not 64, 128 or 256", p.T);
    if ((p.T * p.k) % 32 != 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "trellis T*k=%d is not a multiple of 32", p.T * p.k);
    return TCQ_OK;
}

void tcq_block_pack(tcq_block_params p, const uint32_t *states, uint32_t *words)
{
    const int wpb = tcq_block_words(p);
    const uint32_t mask = (1u << p.k) - 1u;
    memset(words, 0, (size_t)wpb * 4);
    for (int t = 0; t < p.T; t++) {
        /* k divides 32 or (k=3) the symbol may straddle two words */
        const int pos = (p.T - 1 - t) * p.k, wi = pos >> 5, off = pos & 31;
        const uint64_t b = (uint64_t)(states[t] & mask) << off;
        words[wi] |= (uint32_t)b;
        if (off + p.k > 32) words[wi + 1] |= (uint32_t)(b >> 32);
    }
}

void tcq_block_unpack(tcq_block_params p, const uint32_t *words, uint32_t *states)
{
    for (int t = 0; t < p.T; t++) states[t] = tcq_block_state(p, words, t);
}

int tcq_block_states_valid(tcq_block_params p, const uint32_t *states)
{
    const uint32_t smask = (1u << p.L) - 1u, kmask = (1u << p.k) - 1u;
    for (int t = 0; t < p.T; t++) {
        const uint32_t prev = states[t == 0 ? p.T - 1 : t - 1];
        if (states[t] > smask) return 0;
        if ((((prev << p.k) | (states[t] & kmask)) & smask) != states[t]) return 0;
    }
    return 1;
}

void tcq_block_decode_f32(tcq_block_params p, const uint32_t *words, float scale, float *out)
{
    const float *v = tcq_code_value_table() + 510;
    for (int t = 0; t < p.T; t++) out[t] = v[tcq_code_y(tcq_block_state(p, words, t))] * scale;
}
