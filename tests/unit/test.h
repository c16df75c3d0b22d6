/* Minimal test helpers: CHECK records a failure and continues; test_done() is main's return. */
#ifndef TCQ_TEST_H
#define TCQ_TEST_H

#include "tcq_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Test data.  The small files of the shared data folder ship with the repository
 * (tests/data/shared-small.tar.xz, unpacked by cmake into the build folder in the layout of
 * ../shared/data): TEST_REPO_DATA "/stories260K/tok512.bin".  The larger ones (the bf16 tinyqwen
 * model) come from $TCQ_TEST_DATA, default ../shared/data beside the source folder:
 * test_data_path("tinyqwen").  A test that lacks them says what it misses and is reported as
 * skipped (exit 77, ctest's SKIP_RETURN_CODE): TEST_REQUIRE_DATA skips the whole test,
 * test_have_data lets the rest run and test_done then returns 77 (if nothing failed). */
#ifndef TCQ_REPO_DATA   /* CMakeLists.txt defines both for tests/unit; others get the layout's */
#define TCQ_REPO_DATA "testdata"
#endif
#ifndef TCQ_TEST_DATA_DEFAULT
#define TCQ_TEST_DATA_DEFAULT "../shared/data"
#endif
#define TEST_REPO_DATA TCQ_REPO_DATA
#define TEST_SKIP 77
static int test_skipped;

static inline const char *test_data_dir(void)
{
    const char *e = getenv("TCQ_TEST_DATA");
    return e && *e ? e : TCQ_TEST_DATA_DEFAULT;
}

/* $TCQ_TEST_DATA/rel, in one of 8 rotating buffers (a call may use a few at once). */
static inline const char *test_data_path(const char *rel)
{
    static char buf[8][1024];
    static int next;
    char *p = buf[next++ & 7];
    snprintf(p, sizeof buf[0], "%s/%s", test_data_dir(), rel);
    return p;
}

static inline int test_have_data(const char *rel)
{
    struct stat sb;
    const char *p = test_data_path(rel);
    if (stat(p, &sb) == 0) return 1;
    fprintf(stderr, "SKIP: needs %s (set TCQ_TEST_DATA)\n", p);
    test_skipped++;
    return 0;
}

#define TEST_REQUIRE_DATA(rel)                                                                     \
    do {                                                                                           \
        if (!test_have_data(rel)) exit(TEST_SKIP);                                                 \
    } while (0)

static inline int test_done(const char *name)
{
    fprintf(stderr, "%s: %d checks, %d failed%s\n", name, test_checks, test_failures,
            test_skipped ? ", parts skipped (SKIP lines above)" : "");
    return test_failures ? 1 : test_skipped ? TEST_SKIP : 0;
}

/* A whole file, NUL-terminated (len optional), or NULL: tcq_io_read_file for tests. */
static inline char *test_slurp(const char *path, size_t *len)
{
    char *p = NULL;
    return tcq_io_read_file(path, &p, len) == TCQ_OK ? p : NULL;
}

/* text into a new file at path (a failed open is a failed check). */
static inline void test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A character-level BPE tokenizer.json at path (ids < 512): <unk> 0, space 1, a-z 2..27: what the
 * quantizer tests' calibration texts need on tiny_llama (vocab 512). */
static inline void test_write_char_tokenizer(const char *path)
{
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, "
                     "\"pre_tokenizer\": null, \"post_processor\": null, \"decoder\": null, \"model\": {\"type\": "
                     "\"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": false, \"byte_fallback\": false, \"vocab\": "
                     "{\"<unk>\": 0, \" \": 1");
    for (int c = 'a'; c <= 'z'; c++) n += snprintf(buf + n, sizeof buf - (size_t)n, ", \"%c\": %d", c, c - 'a' + 2);
    snprintf(buf + n, sizeof buf - (size_t)n, "}, \"merges\": []}}\n");
    test_write_file(path, buf);
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
/* H [m, m] = A A^T / k + a strong shared direction + 0.05 I, A [m, k = m + 8] Gaussian: a random
 * SPD matrix with correlated inputs, as a Hessian (the LDLQ tests). */
static inline void test_random_spd(uint64_t *st, int64_t m, double *H)
{
    const int64_t k = m + 8;
    double *A = malloc((size_t)(m * k) * sizeof *A), *u = malloc((size_t)m * sizeof *u);
    for (int64_t i = 0; i < m * k; i++) A[i] = test_gauss(st);
    for (int64_t i = 0; i < m; i++) u[i] = test_gauss(st);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < m; j++) {
            double s = 0;
            for (int64_t t = 0; t < k; t++) s += A[i * k + t] * A[j * k + t];
            H[i * m + j] = s / (double)k + 4.0 * u[i] * u[j] + (i == j ? 0.05 : 0);
        }
    free(A);
    free(u);
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
