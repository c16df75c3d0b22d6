/* Matrix encoder: per-row scales, then every block of every row on the pool.  Blocks are
 * independent, so the result does not depend on the thread count. */
#include "viterbi.h"

#include <pthread.h>
#include <string.h>

const vit_kernel *vit_kernel_active(void)
{
    static const vit_kernel k512 = {vit_fwd_avx512, vit_pass_avx512}, k2 = {vit_fwd_avx2, vit_pass_avx2},
                            k0 = {vit_fwd_scalar, vit_pass_scalar};
    switch (tcq_isa_active()) {
    case TCQ_ISA_AVX512: return &k512;
    case TCQ_ISA_AVX2: return &k2;
    default: return &k0;
    }
}

tcq_status vit_encode_block(tcq_block_params p, const tcq_encode_opts *opts, vit_scratch *sc, const float *x,
                            const float *w, uint32_t *words, uint32_t *states, double *err)
{
    TCQ_TRY(vit_check_args(p, opts, x, w, words));
    TCQ_TRY(vit_encode(p, opts, sc, vit_kernel_active(), x, w));
    tcq_block_pack(p, sc->best, words);
    if (states) memcpy(states, sc->best, (size_t)p.T * sizeof *states);
    if (err) {
        double e = 0;
        for (int t = 0; t < p.T; t++) {
            const double d = (double)x[t] - tcq_code_value(sc->best[t]);
            e += (w ? w[t] : 1.0) * d * d;
        }
        *err = e;
    }
    return TCQ_OK;
}

/* tcq_encode_block keeps one scratch per calling thread (freed when the thread exits): a
 * caller that codes block after block -- a sequential LDLQ loop, say -- would otherwise pay
 * for fresh tables and fresh pages on every call (211 us against 80 us per block at L=12). */
static pthread_key_t g_sc_key;
static pthread_once_t g_sc_once = PTHREAD_ONCE_INIT;
static int g_sc_key_ok;

static void sc_destroy(void *p)
{
    vit_scratch_release(p);
    free(p);
}

static void sc_key_init(void) { g_sc_key_ok = pthread_key_create(&g_sc_key, sc_destroy) == 0; }

static vit_scratch *thread_scratch(void)
{
    pthread_once(&g_sc_once, sc_key_init);
    if (!g_sc_key_ok) return NULL;
    vit_scratch *sc = pthread_getspecific(g_sc_key);
    if (!sc && (sc = calloc(1, sizeof *sc)) != NULL && pthread_setspecific(g_sc_key, sc) != 0) {
        free(sc);
        sc = NULL;
    }
    return sc;
}

tcq_status tcq_encode_block(tcq_block_params p, const tcq_encode_opts *opts, const float *x,
                            const float *w, uint32_t *words, uint32_t *states, double *err)
{
    vit_scratch *sc = thread_scratch();
    if (sc) return vit_encode_block(p, opts, sc, x, w, words, states, err);
    vit_scratch local = {0};
    tcq_status rc = vit_encode_block(p, opts, &local, x, w, words, states, err);
    vit_scratch_release(&local);
    return rc;
}

typedef struct blocks_job {
    tcq_block_params p;
    const tcq_encode_opts *opts;
    const float *x, *w;
    uint32_t *words;
    double *blk_err;        /* [n] */
    vit_scratch *sc;        /* [threads] */
    int64_t *first_bad;     /* [threads]: the first block each thread failed on (-1: none) */
} blocks_job;

static void blocks_one(void *arg, int64_t item, int thread)
{
    blocks_job *j = arg;
    const int T = j->p.T;
    tcq_status rc = vit_encode_block(j->p, j->opts, &j->sc[thread], j->x + item * T, j->w ? j->w + item * T : NULL,
                                     j->words + item * tcq_block_words(j->p), NULL, &j->blk_err[item]);
    if (rc != TCQ_OK && (j->first_bad[thread] < 0 || item < j->first_bad[thread])) j->first_bad[thread] = item;
}

tcq_status tcq_encode_blocks(tcq_block_params p, const tcq_encode_opts *opts, const float *x, const float *w,
                             int64_t n, uint32_t *words, tcq_pool *pool, double *sq_err)
{
    TCQ_TRY(tcq_block_check(p));
    if (!x || !words) return tcq_fail(TCQ_ERR_INVALID_ARG, "encode_blocks: NULL buffer");
    if (n <= 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "encode_blocks: %lld blocks", (long long)n);
    const int nt = tcq_pool_size(pool);
    blocks_job j = {p, opts, x, w, words, malloc((size_t)n * sizeof(double)), calloc((size_t)nt, sizeof(vit_scratch)),
                    malloc((size_t)nt * sizeof(int64_t))};
    tcq_status rc = TCQ_OK;
    if (!j.blk_err || !j.sc || !j.first_bad) {
        rc = tcq_fail(TCQ_ERR_NOMEM, "encode_blocks: %lld blocks", (long long)n);
    } else {
        for (int i = 0; i < nt; i++) j.first_bad[i] = -1;
        tcq_pool_run(pool, n, blocks_one, &j);
        int64_t bad = -1;
        for (int i = 0; i < nt; i++)
            if (j.first_bad[i] >= 0 && (bad < 0 || j.first_bad[i] < bad)) bad = j.first_bad[i];
        if (bad >= 0) {
            /* the message was set on a worker thread: redo that block here to report it */
            rc = vit_encode_block(p, opts, &j.sc[0], x + bad * p.T, w ? w + bad * p.T : NULL,
                                  words + bad * tcq_block_words(p), NULL, NULL);
            if (rc == TCQ_OK) rc = tcq_fail(TCQ_ERR_INTERNAL, "encode_blocks: block %lld failed once", (long long)bad);
            tcq_error_prefix("encode_blocks: block %lld", (long long)bad);
        }
        if (rc == TCQ_OK && sq_err) {
            double e = 0;
            for (int64_t i = 0; i < n; i++) e += j.blk_err[i];
            *sq_err = e;
        }
        for (int i = 0; i < nt; i++) vit_scratch_release(&j.sc[i]);
    }
    free(j.blk_err);
    free(j.sc);
    free(j.first_bad);
    return rc;
}

typedef struct rows_job {
    tcq_block_params p;
    const tcq_encode_opts *opts;
    const float *src, *w;
    int64_t C, blocks_per_row;
    uint32_t *codes;
    const uint16_t *scales;
    double *blk_err;        /* [R * blocks_per_row] */
    vit_scratch *sc;        /* [threads]: each thread's scratch, reused across its blocks */
    tcq_status *thread_rc;  /* [threads]: first failure seen by each thread */
} rows_job;

static void rows_block(void *arg, int64_t item, int thread)
{
    rows_job *j = arg;
    const int64_t r = item / j->blocks_per_row, b = item % j->blocks_per_row;
    const int T = j->p.T;
    const float scale = tcq_f16_to_f32(j->scales[r]);
    const float *row = j->src + r * j->C + b * T;
    float x[256];
    for (int t = 0; t < T; t++) x[t] = row[t] / scale;
    uint32_t states[256];
    uint32_t *words = j->codes + r * (j->C * j->p.k / 32) + b * tcq_block_words(j->p);
    tcq_status rc = vit_encode_block(j->p, j->opts, &j->sc[thread], x, j->w ? j->w + r * j->C + b * T : NULL,
                                     words, states, NULL);
    if (rc != TCQ_OK) {
        if (j->thread_rc[thread] == TCQ_OK) j->thread_rc[thread] = rc;
        j->blk_err[item] = 0;
        return;
    }
    double e = 0;
    for (int t = 0; t < T; t++) {
        const double d = (double)row[t] - (double)(tcq_code_value(states[t]) * scale);
        e += d * d;
    }
    j->blk_err[item] = e;
}

tcq_status tcq_encode_rows(tcq_block_params p, const tcq_encode_opts *opts, const float *src,
                           const float *w, int64_t R, int64_t C, uint32_t *codes, uint16_t *scales,
                           tcq_pool *pool, double *sq_err)
{
    TCQ_TRY(tcq_block_check(p));
    if (!src || !codes || !scales) return tcq_fail(TCQ_ERR_INVALID_ARG, "encode_rows: NULL buffer");
    if (R <= 0 || C <= 0 || C % p.T != 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "encode_rows: shape [%lld, %lld] needs C %% T(=%d) == 0",
                        (long long)R, (long long)C, p.T);
    for (int64_t r = 0; r < R; r++) scales[r] = tcq_scale_for_row(p.L, src + r * C, C);
    const int64_t bpr = C / p.T, nblk = R * bpr;
    const int nt = tcq_pool_size(pool);
    rows_job j = {p, opts, src, w, C, bpr, codes, scales, malloc((size_t)nblk * sizeof(double)),
                  calloc((size_t)nt, sizeof(vit_scratch)), calloc((size_t)nt, sizeof(tcq_status))};
    if (!j.blk_err || !j.thread_rc || !j.sc) {
        free(j.blk_err);
        free(j.sc);
        free(j.thread_rc);
        return tcq_fail(TCQ_ERR_NOMEM, "encode_rows: %lld blocks", (long long)nblk);
    }
    tcq_pool_run(pool, nblk, rows_block, &j);
    tcq_status rc = TCQ_OK;
    for (int i = 0; i < nt; i++)
        if (j.thread_rc[i] != TCQ_OK) rc = j.thread_rc[i];
    if (rc == TCQ_OK && sq_err) {
        double e = 0;
        for (int64_t i = 0; i < nblk; i++) e += j.blk_err[i];
        *sq_err = e;
    }
    for (int i = 0; i < nt; i++) vit_scratch_release(&j.sc[i]);
    free(j.blk_err);
    free(j.sc);
    free(j.thread_rc);
    if (rc != TCQ_OK) return tcq_fail(rc, "encode_rows: a block failed to encode");
    return rc;
}
