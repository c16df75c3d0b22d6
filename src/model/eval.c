/* Perplexity and KL over windows of a token stream (convention in tcq.h). */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* log-softmax statistics of one row: max and log-sum-exp, in double. */
static double row_lse(const float *l, int V)
{
    float mx = l[0];
    for (int i = 1; i < V; i++)
        if (l[i] > mx) mx = l[i];
    double s = 0;
    for (int i = 0; i < V; i++) s += exp((double)l[i] - mx);
    return mx + log(s);
}

static int row_argmax(const float *l, int V)
{
    int b = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs m (and ref if given) over the windows; chunked so the logits buffer stays [chunk, V]. */
static tcq_status eval_run(tcq_model *m, tcq_model *ref, const int32_t *tokens, int64_t n, int ctx, int max_windows,
                           tcq_eval_result *out)
{
    if (!m || !tokens || !out || ctx < 2) return tcq_fail(TCQ_ERR_INVALID_ARG, "eval: bad arguments (ctx must be >= 2)");
    memset(out, 0, sizeof *out);
    const int V = m->cfg.vocab_size;
    if (ref && ref->cfg.vocab_size != V)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "kl: vocabularies differ (%d vs %d)", V, ref->cfg.vocab_size);
    int64_t windows = n / ctx;
    if (max_windows > 0 && windows > max_windows) windows = max_windows;
    if (windows < 1) return tcq_fail(TCQ_ERR_RANGE, "eval: %lld tokens do not fill one window of %d", (long long)n, ctx);

    const int C = TCQ_PREFILL_CHUNK;
    tcq_status rc = TCQ_OK;
    tcq_session *s = NULL, *rs = NULL;
    float *lg = tcq_amalloc((size_t)C * V * sizeof *lg);
    float *rl = ref ? tcq_amalloc((size_t)C * V * sizeof *rl) : NULL;
    double *kls = ref ? malloc((size_t)(windows * (ctx - 1)) * sizeof *kls) : NULL;
    if (!lg || (ref && (!rl || !kls))) rc = tcq_fail(TCQ_ERR_NOMEM, "eval: out of memory");
    if (rc == TCQ_OK) rc = tcq_session_create(m, ctx, TCQ_KV_F32, &s);
    if (rc == TCQ_OK && ref) rc = tcq_session_create(ref, ctx, TCQ_KV_F32, &rs);
    double nll = 0, rnll = 0, kl = 0;
    int64_t np = 0, agree = 0;
    for (int64_t w = 0; rc == TCQ_OK && w < windows; w++) {
        if (m->opts.progress) {
            char what[64];
            snprintf(what, sizeof what, "window %lld of %lld", (long long)w + 1, (long long)windows);
            m->opts.progress(m->opts.progress_arg, (double)w / windows, what);
        }
        const int32_t *t = tokens + w * ctx;
        tcq_session_rewind(s, 0);
        if (rs) tcq_session_rewind(rs, 0);
        for (int i = 0; rc == TCQ_OK && i < ctx - 1; i += C) {
            int M = TCQ_MIN(C, ctx - 1 - i);   /* positions i..i+M-1 predict tokens i+1..i+M */
            rc = tcq_model_forward(m, s, t + i, M, lg);
            if (rc == TCQ_OK && ref) rc = tcq_model_forward(ref, rs, t + i, M, rl);
            for (int r = 0; rc == TCQ_OK && r < M; r++) {
                const float *a = lg + (size_t)r * V;
                const int32_t y = t[i + r + 1];
                double lse = row_lse(a, V);
                nll += lse - a[y];
                if (ref) {
                    const float *b = rl + (size_t)r * V;
                    double rlse = row_lse(b, V), k = 0;
                    rnll += rlse - b[y];
                    for (int v = 0; v < V; v++) {
                        double lp = (double)b[v] - rlse, lq = (double)a[v] - lse;
                        k += exp(lp) * (lp - lq);
                    }
                    if (k < 0) k = 0;   /* rounding */
                    kls[np] = k;
                    kl += k;
                    agree += row_argmax(a, V) == row_argmax(b, V);
                }
                np++;
            }
        }
    }
    if (rc == TCQ_OK) {
        out->windows = (int)windows;
        out->predictions = np;
        out->mean_nll = nll / np;
        out->perplexity = exp(out->mean_nll);
        if (ref) {
            out->mean_kl = kl / np;
            qsort(kls, (size_t)np, sizeof *kls, cmp_double);
            int64_t idx = (int64_t)ceil(0.95 * (double)np) - 1;
            out->kl_p95 = kls[idx < 0 ? 0 : idx];
            out->top1_agree = (double)agree / np;
            out->ref_mean_nll = rnll / np;
            out->ref_perplexity = exp(out->ref_mean_nll);
        }
    }
    tcq_session_free(s);
    tcq_session_free(rs);
    tcq_afree(lg);
    tcq_afree(rl);
    free(kls);
    return rc;
}

tcq_status tcq_eval_perplexity(tcq_model *m, const int32_t *tokens, int64_t n, int ctx, int max_windows,
                               tcq_eval_result *out)
{
    return eval_run(m, NULL, tokens, n, ctx, max_windows, out);
}

tcq_status tcq_eval_kl(tcq_model *m, tcq_model *ref, const int32_t *tokens, int64_t n, int ctx, int max_windows,
                       tcq_eval_result *out)
{
    if (!ref) return tcq_fail(TCQ_ERR_INVALID_ARG, "kl: no reference model");
    return eval_run(m, ref, tokens, n, ctx, max_windows, out);
}
