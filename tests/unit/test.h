/* Minimal test helpers: CHECK records a failure and continues; test_done() is main's return. */
#ifndef TCQ_TEST_H
#define TCQ_TEST_H

#include "tcq.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int test_failures;
static int test_checks;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        tcq_status s_ = (expr);                                                                    \
        CHECK(s_ == TCQ_OK, "%s -> %s: %s", #expr, tcq_status_str(s_), tcq_last_error());          \
    } while (0)

static inline int test_done(const char *name)
{
    fprintf(stderr, "%s: %d checks, %d failed\n", name, test_checks, test_failures);
    return test_failures ? 1 : 0;
}

/* A whole file, NUL-terminated (len optional), or NULL: tcq_io_read_file for tests. */
static inline char *test_slurp(const char *path, size_t *len)
{
    char *p = NULL;
    return tcq_io_read_file(path, &p, len) == TCQ_OK ? p : NULL;
}

/* Deterministic PRNG for tests (splitmix64) and a Gaussian from it. */
static inline uint64_t test_rand(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double test_uniform(uint64_t *st) { return (double)(test_rand(st) >> 11) * 0x1.0p-53; }
static inline double test_gauss(uint64_t *st)
{
    double u = test_uniform(st), v = test_uniform(st);
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
/* A seed that differs per run unless TCQ_TEST_SEED is set (printed so a failure can be replayed). */
static inline uint64_t test_seed(void)
{
    const char *e = getenv("TCQ_TEST_SEED");
    uint64_t s = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    fprintf(stderr, "TCQ_TEST_SEED=%llu\n", (unsigned long long)s);
    return s;
}

#endif
