/* The fast path's activation prep (tcq_kq_prepare): the AVX2 and AVX-512 versions give the scalar
 * definition's integers, steps and corrections bit for bit, on random rows with partial last
 * blocks, zero blocks, NaN, Inf, huge and subnormal values, with and without axis-0 scales; and
 * a hand-checked block pins the definition itself. */
#include "test.h"

#include "kernels/kernels.h"

#include <float.h>

static int same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

static int prepare_with(tcq_isa isa, kq_act *qa, const float *x, int64_t M, int64_t n, const uint16_t *sc)
{
    const tcq_isa keep = tcq_isa_active();
    if (tcq_isa_set(isa) != TCQ_OK) return 0;
    tcq_status s = tcq_kq_prepare(qa, x, M, n, sc);
    tcq_isa_set(keep);
    CHECK(s == TCQ_OK, "prepare: %s", tcq_last_error());
    return s == TCQ_OK;
}

static void test_hand(void)
{
    /* one block: amax 2.54 -> d = 0.02, q = round(x / 0.02) */
    float x[TCQ_FAST_QB] = {2.54f, -1.0f, 0.01f, 0.03f, -2.54f};
    kq_act qa = {0};
    if (!prepare_with(TCQ_ISA_SCALAR, &qa, x, 1, TCQ_FAST_QB, NULL)) return;
    CHECK(qa.q[0] == 127 && qa.q[1] == -50 && qa.q[2] == 0 && qa.q[3] == 2 && qa.q[4] == -127 && qa.q[5] == 0,
          "q = %d %d %d %d %d %d", qa.q[0], qa.q[1], qa.q[2], qa.q[3], qa.q[4], qa.q[5]);
    CHECK(qa.d[0] == 2.54f / 127.0f && qa.corr[0] == -510 * (127 - 50 + 0 + 2 - 127), "d %g corr %d", qa.d[0],
          qa.corr[0]);
    CHECK(qa.q4[1] == 0xcecececeu && qa.q2[1] == 0xffceffceu, "q4 %08x q2 %08x", qa.q4[1], qa.q2[1]);
    tcq_kq_free(&qa);
    /* a block whose 127/amax overflows counts as zero (the loop once rounded inf to -127) */
    float t[2 * TCQ_FAST_QB] = {0};
    t[0] = 1e-42f, t[1] = -3e-43f, t[TCQ_FAST_QB] = 1.0f;
    for (int isa = TCQ_ISA_SCALAR; isa <= TCQ_ISA_AVX512; isa++) {
        kq_act tq = {0};
        if (prepare_with((tcq_isa)isa, &tq, t, 1, 2 * TCQ_FAST_QB, NULL))
            CHECK(tq.q[0] == 0 && tq.q[1] == 0 && tq.d[0] == 0.0f && tq.corr[0] == 0 && tq.q[TCQ_FAST_QB] == 127 &&
                      tq.d[1] == 1.0f / 127.0f && tq.q16[0] == 0,
                  "isa %d: tiny block q %d %d d %g, next block q %d d %g", isa, tq.q[0], tq.q[1], tq.d[0],
                  tq.q[TCQ_FAST_QB], tq.d[1]);
        tcq_kq_free(&tq);
    }
}

static float special(uint64_t *st)
{
    switch (test_rand(st) % 8) {
    case 0: return NAN;
    case 1: return (test_rand(st) & 1) ? INFINITY : -INFINITY;
    case 2: return (test_rand(st) & 1) ? FLT_MAX : -FLT_MAX / 3;
    case 3: return 1e-42f;   /* subnormal */
    case 4: return -0.0f;
    default: return 0.0f;
    }
}

static void test_random(uint64_t *st)
{
    static const int64_t ns[] = {1, 17, 63, 64, 65, 100, 512, 1000, 1536, 5120};
    int cases[TCQ_ISA_COUNT] = {0}, bad[TCQ_ISA_COUNT] = {0};
    for (int it = 0; it < 400; it++) {
        const int64_t M = 1 + (int64_t)(test_rand(st) % 5), n = ns[test_rand(st) % 10];
        const int with_scales = test_rand(st) & 1;
        float *x = malloc((size_t)(M * n) * sizeof *x);
        uint16_t *sc = malloc((size_t)n * sizeof *sc);
        const double amp = pow(10.0, (double)(test_rand(st) % 9) - 4);
        for (int64_t i = 0; i < M * n; i++) x[i] = (float)(amp * test_gauss(st));
        for (int64_t i = 0; i < n; i++) sc[i] = tcq_f32_to_f16((float)(0.01 + 0.02 * fabs(test_gauss(st))));
        const int kind = (int)(test_rand(st) % 4);   /* 0: plain; 1: a zero block; 2: specials; 3: both */
        if (kind & 1) {
            const int64_t m = (int64_t)(test_rand(st) % (uint64_t)M), b0 = (int64_t)(test_rand(st) % (uint64_t)((n + 63) / 64));
            for (int64_t i = b0 * 64; i < n && i < b0 * 64 + 64; i++) x[m * n + i] = 0;
        }
        if (kind & 2)
            for (int j = 0; j < 3; j++) x[test_rand(st) % (uint64_t)(M * n)] = special(st);
        kq_act r = {0};
        const uint16_t *s = with_scales ? sc : NULL;
        if (prepare_with(TCQ_ISA_SCALAR, &r, x, M, n, s))
            for (int isa = TCQ_ISA_AVX2; isa <= TCQ_ISA_AVX512; isa++) {
                kq_act v = {0};
                if (prepare_with((tcq_isa)isa, &v, x, M, n, s)) {
                    const size_t np = (size_t)(M * r.npad), nb = (size_t)(M * r.nblk);
                    int ok = r.npad == v.npad && r.nblk == v.nblk && same_bits(r.q, v.q, np) &&
                             same_bits(r.q4, v.q4, np * 4) && same_bits(r.q2, v.q2, np * 4) &&
                             same_bits(r.d, v.d, nb * 4) && same_bits(r.corr, v.corr, nb * 4);
                    if (!s && n % 32 == 0) ok &= same_bits(r.q16, v.q16, np * 2) && same_bits(r.d16, v.d16, (size_t)M * 4);
                    cases[isa]++;
                    bad[isa] += !ok;
                    if (!ok) fprintf(stderr, "isa %d mismatch: M=%lld n=%lld scales=%d kind=%d amp=%g\n", isa,
                                     (long long)M, (long long)n, with_scales, kind, amp);
                }
                tcq_kq_free(&v);
            }
        tcq_kq_free(&r);
        free(x), free(sc);
    }
    for (int isa = TCQ_ISA_AVX2; isa <= TCQ_ISA_AVX512; isa++) {
        if (cases[isa] == 0) fprintf(stderr, "test_prep: this CPU cannot run ISA %d; not compared\n", isa);
        CHECK(bad[isa] == 0, "%d of %d random cases differ between the scalar prep and ISA %d's", bad[isa], cases[isa], isa);
    }
}

/* One kq_act reused by calls of different shapes (as a kernel context does): a call with more rows
 * of fewer positions fits the int8 buffers of an earlier one but not its per-row steps; the
 * buffers then grew on M * npad alone, and the 256-row call below wrote d16 past its 128 floats
 * (the ASan build of CI catches the write; the values check the rest).  The reused one is filled
 * over a 2-thread pool, in items of rows: the same bytes as one thread's. */
static void test_reuse(uint64_t *st)
{
    static const int64_t shapes[][3] = {{128, 17408, 1}, {256, 5120, 0}, {1, 17408, 0}, {40, 64, 0}, {3, 5120, 1}};
    kq_act qa = {0};
    tcq_pool *pool = NULL;
    CHECK_OK(tcq_pool_create(2, &pool));
    for (int i = 0; i < 5; i++) {
        const int64_t M = shapes[i][0], n = shapes[i][1];
        float *x = malloc((size_t)(M * n) * sizeof *x);
        uint16_t *sc = malloc((size_t)n * sizeof *sc);
        for (int64_t j = 0; j < M * n; j++) x[j] = (float)test_gauss(st);
        for (int64_t j = 0; j < n; j++) sc[j] = tcq_f32_to_f16(0.02f);
        const uint16_t *s = shapes[i][2] ? sc : NULL;
        kq_act fresh = {0};
        const tcq_status sp = tcq_kq_prepare_pool(&qa, x, M, n, s, pool);
        CHECK(sp == TCQ_OK, "prepare over the pool: %s", tcq_last_error());
        if (sp == TCQ_OK && prepare_with(tcq_isa_active(), &fresh, x, M, n, s)) {
            const size_t np = (size_t)(M * qa.npad), nb = (size_t)(M * qa.nblk);
            int ok = same_bits(qa.q, fresh.q, np) && same_bits(qa.q4, fresh.q4, np * 4) &&
                     same_bits(qa.q2, fresh.q2, np * 4) && same_bits(qa.d, fresh.d, nb * 4) &&
                     same_bits(qa.corr, fresh.corr, nb * 4);
            if (!s) ok &= same_bits(qa.q16, fresh.q16, np * 2) && same_bits(qa.d16, fresh.d16, (size_t)M * 4);
            CHECK(ok, "reused buffers: call %d (M=%lld n=%lld) differs from a fresh prep", i, (long long)M,
                  (long long)n);
        }
        tcq_kq_free(&fresh);
        free(x), free(sc);
    }
    tcq_kq_free(&qa);
    tcq_pool_free(pool);
}

int main(void)
{
    uint64_t st = test_seed();
    test_hand();
    test_random(&st);
    test_reuse(&st);
    return test_done("test_prep");
}
