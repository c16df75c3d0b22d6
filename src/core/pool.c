/* A fixed pool of worker threads that runs fn over a range of items.
 * Items are claimed dynamically (compare-and-swap on a ticket, below); callers make each item's
 * result independent of which thread ran it, which keeps outputs identical for any thread count.
 *
 * Hand-off: a model's forward pass calls the pool hundreds of times per token, a few tens of
 * microseconds apart, and waking a sleeping thread through a condition variable costs about as much
 * as a small call's work (docs/PERFORMANCE.md, "The pool's hand-off").  So between runs the workers, and
 * the caller waiting for them, first spin on an atomic for up to TCQ_POOL_SPIN_US microseconds
 * (default 200; 0 sleeps at once, for machines with more threads than cores) and only then sleep.
 * Sleeping uses the mutex and condition variables; the "sleeping" counts, read under the mutex,
 * tell the other side whether a wake-up is needed. */
#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* One run's job.  Two slots, by generation parity: a worker that read a slot and then claims an
 * item by compare-and-swap on the ticket knows the slot was not rewritten in between, because the
 * slot of run g is only rewritten for run g + 2, after the ticket has left g. */
typedef struct {   /* atomics only so that a late reader's discarded read is not a data race */
    _Atomic(tcq_pool_fn) fn;
    _Atomic(void *) arg;
    atomic_llong n_items;
} pool_job;

struct tcq_pool {
    int n;                     /* threads including the caller */
    pthread_t *threads;        /* [n-1] */
    int64_t spin_ns;           /* how long a waiting side spins before it sleeps */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int sleeping;              /* workers inside cv_work's wait (under mu) */
    atomic_int quit;
    pool_job job[2];
    /* generation << 32 | next item: the caller stores (g, 0) after writing job[g & 1] */
    _Alignas(64) atomic_uint_fast64_t ticket;
    _Alignas(64) atomic_llong done;    /* items of the current run finished */
};

typedef struct { tcq_pool *pool; int id; } worker_arg;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins until pred(p, v) holds or spin_ns pass; returns whether it holds. */
static int spin_until(const tcq_pool *p, int (*pred)(const tcq_pool *, uint64_t), uint64_t v)
{
    if (pred(p, v)) return 1;
    if (p->spin_ns <= 0) return 0;
    const int64_t end = now_ns() + p->spin_ns;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            cpu_relax();
            if (pred(p, v)) return 1;
        }
        if (now_ns() > end) return pred(p, v);
    }
}

static uint64_t generation(const tcq_pool *p)
{
    return atomic_load_explicit(&p->ticket, memory_order_acquire) >> 32;
}

static int new_run(const tcq_pool *p, uint64_t seen)
{
    return generation(p) != seen || atomic_load_explicit(&p->quit, memory_order_relaxed);
}

static int all_done(const tcq_pool *p, uint64_t n_items)
{
    return atomic_load_explicit(&p->done, memory_order_acquire) == (long long)n_items;
}

/* Runs items of generation g until none is left or the run is over; a thread that arrives late
 * claims nothing, so the caller never waits for a thread that has no item. */
static void pool_drain(tcq_pool *p, uint64_t g, int thread)
{
    pool_job *j = &p->job[g & 1];
    uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
    for (;;) {
        if (t >> 32 != g) return;
        const int64_t i = (int64_t)(t & 0xffffffffu);
        const tcq_pool_fn fn = atomic_load_explicit(&j->fn, memory_order_relaxed);
        void *arg = atomic_load_explicit(&j->arg, memory_order_relaxed);
        const int64_t n_items = atomic_load_explicit(&j->n_items, memory_order_relaxed);
        if (i >= n_items) return;
        if (!atomic_compare_exchange_weak_explicit(&p->ticket, &t, t + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        fn(arg, i, thread);
        if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == n_items) {
            /* the last item: wake the caller if it went to sleep (a no-op when it spins) */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
        t = atomic_load_explicit(&p->ticket, memory_order_acquire);
    }
}

static void *pool_worker(void *varg)
{
    worker_arg *wa = varg;
    tcq_pool *p = wa->pool;
    const int id = wa->id;
    free(wa);
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until(p, new_run, seen)) {
            pthread_mutex_lock(&p->mu);
            p->sleeping++;
            while (!new_run(p, seen)) pthread_cond_wait(&p->cv_work, &p->mu);
            p->sleeping--;
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = generation(p);
        pool_drain(p, seen, id);
    }
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
    p->spin_ns = 200 * 1000;
    const char *e = getenv("TCQ_POOL_SPIN_US");
    if (e && *e) {
        char *end;
        long us = strtol(e, &end, 10);
        if (*end || us < 0 || us > 1000000) {
            free(p);
            return tcq_fail(TCQ_ERR_INVALID_ARG, "TCQ_POOL_SPIN_US=\"%s\": not a count of microseconds in 0..1000000", e);
        }
        p->spin_ns = (int64_t)us * 1000;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        p->n = 1;
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
    atomic_store(&p->quit, 1);
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

/* A run of more items than the ticket's 32-bit item field holds, as several runs. */
typedef struct { tcq_pool_fn fn; void *arg; int64_t base; } pool_chunk;
static void chunk_item(void *arg, int64_t item, int thread)
{
    const pool_chunk *c = arg;
    c->fn(c->arg, c->base + item, thread);
}

void tcq_pool_run(tcq_pool *p, int64_t n_items, tcq_pool_fn fn, void *arg)
{
    if (n_items <= 0) return;
    if (!p || p->n == 1 || n_items == 1) {
        for (int64_t i = 0; i < n_items; i++) fn(arg, i, 0);
        return;
    }
    const int64_t max_run = 0xffffffffLL;
    if (n_items > max_run) {
        for (int64_t base = 0; base < n_items; base += max_run) {
            pool_chunk c = {fn, arg, base};
            tcq_pool_run(p, n_items - base < max_run ? n_items - base : max_run, chunk_item, &c);
        }
        return;
    }
    const uint64_t g = (generation(p) + 1) & 0xffffffffu;
    pool_job *j = &p->job[g & 1];
    atomic_store_explicit(&j->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&j->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&j->n_items, n_items, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->ticket, g << 32, memory_order_seq_cst);   /* publishes the job */
    /* A worker that counted itself sleeping checks the generation under mu afterwards, so reading
     * the count under mu after the store cannot miss one. */
    pthread_mutex_lock(&p->mu);
    if (p->sleeping) pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    pool_drain(p, g, 0);
    if (!spin_until(p, all_done, (uint64_t)n_items)) {
        pthread_mutex_lock(&p->mu);
        while (!all_done(p, (uint64_t)n_items)) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
