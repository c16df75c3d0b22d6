/* The thread pool: every item of every run runs exactly once, with the run's own fn and arg, on a
 * thread index in range, whatever the thread count and hand-off (spinning or sleeping); runs
 * whose items take long enough that workers arrive late; a bad TCQ_POOL_SPIN_US. */
#include "test.h"

#include <stdatomic.h>
#include <unistd.h>

typedef struct {
    int tag;                 /* which of two job kinds: a torn (fn, arg) pair shows as a mismatch */
    int n_threads;
    int64_t n_items;
    atomic_int *count;       /* [n_items]: times each item ran */
    atomic_int bad;          /* items that saw a wrong tag, or a thread index out of range */
    int sleep_us;            /* per item, to make late workers */
} job;

static void run_a(void *varg, int64_t item, int thread)
{
    job *j = varg;
    if (j->sleep_us) usleep((useconds_t)j->sleep_us);   /* before counting: a run that returns early shows */
    if (j->tag != 1 || thread < 0 || thread >= j->n_threads || item < 0 || item >= j->n_items)
        atomic_fetch_add(&j->bad, 1);
    else atomic_fetch_add(&j->count[item], 1);
}

static void run_b(void *varg, int64_t item, int thread)
{
    job *j = varg;
    if (j->tag != 2 || thread < 0 || thread >= j->n_threads || item < 0 || item >= j->n_items)
        atomic_fetch_add(&j->bad, 1);
    else atomic_fetch_add(&j->count[item], 2);
}

static void test_runs(int n_threads, const char *spin_us, int n_runs)
{
    setenv("TCQ_POOL_SPIN_US", spin_us, 1);
    tcq_pool *p = NULL;
    CHECK_OK(tcq_pool_create(n_threads, &p));
    unsetenv("TCQ_POOL_SPIN_US");
    if (!p) return;
    CHECK(tcq_pool_size(p) == n_threads, "pool size %d, asked %d", tcq_pool_size(p), n_threads);
    enum { MAXN = 64 };
    atomic_int count[MAXN];
    uint64_t st = 0x5eed + (uint64_t)n_threads;
    int wrong_runs = 0, bad = 0;
    for (int r = 0; r < n_runs; r++) {
        job j = {.tag = 1 + (r & 1), .n_threads = n_threads, .n_items = 1 + (int64_t)(test_rand(&st) % MAXN),
                 .count = count, .sleep_us = (r % 97 == 0) ? 200 : 0};
        atomic_init(&j.bad, 0);
        for (int i = 0; i < MAXN; i++) atomic_init(&count[i], 0);
        tcq_pool_run(p, j.n_items, j.tag == 1 ? run_a : run_b, &j);
        /* everything is finished when run returns: no item may still be counting */
        int ok = 1;
        for (int i = 0; i < MAXN; i++)
            if (atomic_load(&count[i]) != (i < j.n_items ? j.tag : 0)) ok = 0;
        wrong_runs += !ok;
        bad += atomic_load(&j.bad);
    }
    CHECK(wrong_runs == 0 && bad == 0, "%d threads, spin %s us: %d of %d runs ran an item not exactly once, %d bad calls",
          n_threads, spin_us, wrong_runs, n_runs, bad);
    tcq_pool_free(p);
}

/* A pool left idle long enough that its workers sleep, then used again. */
static void test_sleep_wake(void)
{
    setenv("TCQ_POOL_SPIN_US", "50", 1);
    tcq_pool *p = NULL;
    CHECK_OK(tcq_pool_create(3, &p));
    unsetenv("TCQ_POOL_SPIN_US");
    if (!p) return;
    atomic_int count[8];
    for (int r = 0; r < 20; r++) {
        job j = {.tag = 1, .n_threads = 3, .n_items = 8, .count = count};
        atomic_init(&j.bad, 0);
        for (int i = 0; i < 8; i++) atomic_init(&count[i], 0);
        usleep(2000);   /* > the spin: the workers are asleep when the run starts */
        tcq_pool_run(p, 8, run_a, &j);
        int ok = atomic_load(&j.bad) == 0;
        for (int i = 0; i < 8; i++) ok &= atomic_load(&count[i]) == 1;
        CHECK(ok, "run %d after an idle pause", r);
    }
    tcq_pool_free(p);
}

int main(void)
{
    for (int n = 2; n <= 4; n++) {
        test_runs(n, "200", 20000);
        test_runs(n, "0", 3000);
    }
    test_sleep_wake();
    {   /* no pool: everything on the calling thread, as thread 0 */
        atomic_int count[3];
        job j = {.tag = 1, .n_threads = 1, .n_items = 3, .count = count};
        atomic_init(&j.bad, 0);
        for (int i = 0; i < 3; i++) atomic_init(&count[i], 0);
        tcq_pool_run(NULL, 3, run_a, &j);
        CHECK(atomic_load(&j.bad) == 0 && count[0] == 1 && count[1] == 1 && count[2] == 1, "NULL pool runs inline");
    }

    static const char *bad[] = {"-1", "abc", "12x", "2000000"};
    for (int i = 0; i < 4; i++) {
        setenv("TCQ_POOL_SPIN_US", bad[i], 1);
        tcq_pool *p = NULL;
        tcq_status s = tcq_pool_create(2, &p);
        CHECK(s == TCQ_ERR_INVALID_ARG && !p && strstr(tcq_last_error(), "TCQ_POOL_SPIN_US"),
              "TCQ_POOL_SPIN_US=%s: %s: %s", bad[i], tcq_status_str(s), tcq_last_error());
        tcq_pool_free(p);
    }
    unsetenv("TCQ_POOL_SPIN_US");
    return test_done("test_pool");
}
