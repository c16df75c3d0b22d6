/* The rotation fold: RMSNorm gains into the readers of the normalized stream, then R on the
 * residual stream (h -> R^T h).  Readers W become W diag(g) R, writers R^T W (returned
 * transposed, the layout axis-0 coding stores), embedding rows R^T e. */
#include "../core/internal.h"

#include <string.h>

tcq_status tcq_rotate_reader(const tcq_hadamard *h, float *W, int64_t out, const float *gain, tcq_pool *pool)
{
    if (!h || (!W && out > 0)) return tcq_fail(TCQ_ERR_INVALID_ARG, "rotate_reader: NULL argument");
    const int64_t n = tcq_hadamard_size(h);
    if (gain)
        for (int64_t r = 0; r < out; r++)
            for (int64_t c = 0; c < n; c++) W[r * n + c] *= gain[c];
    return tcq_hadamard_rows(h, W, out, 0, pool);
}

tcq_status tcq_rotate_writer(const tcq_hadamard *h, const float *W, int64_t in, float *Wt, tcq_pool *pool)
{
    if (!h || !W || !Wt || in <= 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "rotate_writer: bad argument");
    const int64_t n = tcq_hadamard_size(h);
    /* Blocked transpose: W [n, in] -> Wt [in, n]. */
    for (int64_t r0 = 0; r0 < n; r0 += 32)
        for (int64_t c0 = 0; c0 < in; c0 += 32)
            for (int64_t r = r0; r < TCQ_MIN(n, r0 + 32); r++)
                for (int64_t c = c0; c < TCQ_MIN(in, c0 + 32); c++) Wt[c * n + r] = W[r * in + c];
    return tcq_hadamard_rows(h, Wt, in, 0, pool);
}
