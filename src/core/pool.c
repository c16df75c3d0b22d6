/* A fixed pool of worker threads that runs fn over a range of items.
 * Items are claimed dynamically by an atomic counter; callers make each item's result independent
 * of which thread ran it, which keeps outputs identical for any thread count. */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

struct tcq_pool {
    int n;                 /* threads including the caller */
    pthread_t *threads;    /* [n-1] */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t generation;   /* bumped for every run */
    int quit;
    int active;            /* workers still inside the current run */
    /* current job */
    tcq_pool_fn fn;
    void *arg;
    int64_t n_items;
    atomic_llong next;
};

typedef struct { tcq_pool *pool; int id; } worker_arg;

static void pool_drain(tcq_pool *p, int thread)
{
    for (;;) {
        int64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_items) break;
        p->fn(p->arg, i, thread);
    }
}

static void *pool_worker(void *varg)
{
    worker_arg *wa = varg;
    tcq_pool *p = wa->pool;
    const int id = wa->id;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        pool_drain(p, id);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

tcq_status tcq_pool_create(int n_threads, tcq_pool **out)
{
    *out = NULL;
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 1024) return tcq_fail(TCQ_ERR_INVALID_ARG, "thread count %d is too large", n_threads);
    tcq_pool *p = calloc(1, sizeof *p);
    if (!p) return tcq_fail(TCQ_ERR_NOMEM, "thread pool");
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        tcq_pool_free(p);
        return tcq_fail(TCQ_ERR_NOMEM, "thread pool");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            p->n = i;
            tcq_pool_free(p);
            return tcq_fail(TCQ_ERR_NOMEM, "thread pool");
        }
        wa->pool = p;
        wa->id = i;
        if (pthread_create(&p->threads[i - 1], NULL, pool_worker, wa) != 0) {
            free(wa);
            p->n = i;
            tcq_pool_free(p);
            return tcq_fail(TCQ_ERR_INTERNAL, "pthread_create failed");
        }
    }
    *out = p;
    return TCQ_OK;
}

void tcq_pool_free(tcq_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p->threads);
    free(p);
}

int tcq_pool_size(const tcq_pool *p) { return p ? p->n : 1; }

void tcq_pool_run(tcq_pool *p, int64_t n_items, tcq_pool_fn fn, void *arg)
{
    if (n_items <= 0) return;
    if (!p || p->n == 1 || n_items == 1) {
        for (int64_t i = 0; i < n_items; i++) fn(arg, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n_items = n_items;
    atomic_store(&p->next, 0);
    p->active = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    pool_drain(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
