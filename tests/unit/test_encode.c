/* Encoder: fast == reference bit for bit on every ISA, the successor rule on every coded block,
 * determinism across thread counts, MSE on a fixed seed, the seams search against two-pass and
 * against a float64 brute force, and rejection of bad parameters. */
#include "test.h"

#include "encode/viterbi.h"

static const int TS[3] = {64, 128, 256};

/* Unoptimised builds (the sanitizer job) run a quarter of the random cases. */
#ifdef __OPTIMIZE__
#define TEST_REPS(n) (n)
#else
#define TEST_REPS(n) ((n) / 4)
#endif

/* Codes one block with the reference and with every runnable ISA; all must agree exactly. */
static void check_block(tcq_block_params p, const tcq_encode_opts *o, const float *x, const float *w,
                        double *err_out)
{
    uint32_t wr[32], st_r[256], wf[32], st_f[256], un[256];
    double er = -1, ef = -2;
    CHECK_OK(tcq_encode_block_ref(p, o, x, w, wr, st_r, &er));
    CHECK(tcq_block_states_valid(p, st_r), "reference broke the successor rule L=%d k=%d T=%d", p.L, p.k, p.T);
    tcq_block_unpack(p, wr, un);
    CHECK(!memcmp(un, st_r, (size_t)p.T * 4), "reference words do not unpack to its states");
    const tcq_isa keep = tcq_isa_active();
    for (int isa = 0; isa < TCQ_ISA_COUNT; isa++) {
        if (tcq_isa_set((tcq_isa)isa) != TCQ_OK) continue;
        memset(wf, 0xa5, sizeof wf);
        CHECK_OK(tcq_encode_block(p, o, x, w, wf, st_f, &ef));
        CHECK(!memcmp(wf, wr, (size_t)tcq_block_words(p) * 4) && !memcmp(st_f, st_r, (size_t)p.T * 4) && ef == er,
              "ISA %s differs from the reference: L=%d k=%d T=%d w=%d search=%s seams=%d err %.9g vs %.9g",
              tcq_isa_name((tcq_isa)isa), p.L, p.k, p.T, w != NULL, tcq_search_name(o->search), o->seams, ef, er);
        CHECK(tcq_block_states_valid(p, st_f), "ISA %s broke the successor rule", tcq_isa_name((tcq_isa)isa));
    }
    tcq_isa_set(keep);
    if (err_out) *err_out = er;
}

/* The single passes (free, start-only, both ends) of every ISA agree state for state. */
static void test_passes(uint64_t *rs)
{
    static const vit_pass_fn fns[3] = {vit_pass_scalar, vit_pass_avx2, vit_pass_avx512};
    float x[256], w[256];
    uint32_t st[3][256];
    for (int it = 0; it < TEST_REPS(24); it++) {
        tcq_block_params p = {8 + (int)(test_rand(rs) % 5), 1 + (int)(test_rand(rs) % 4), 64};
        for (int t = 0; t < p.T; t++) {
            x[t] = it % 3 ? (float)test_gauss(rs) : tcq_code_value((uint32_t)(test_rand(rs) % (1u << p.L)));
            w[t] = (float)test_uniform(rs);
        }
        const int G = 1 << (p.L - p.k), ov = (int)(test_rand(rs) % (uint64_t)G);
        const int starts[3] = {-1, ov, ov}, ends[3] = {-1, -1, ov};
        for (int c = 0; c < 3; c++) {
            int n = 0;
            for (int isa = 0; isa < TCQ_ISA_COUNT; isa++) {
                if (tcq_isa_set((tcq_isa)isa) != TCQ_OK) continue;   /* the CPU must run it */
                vit_scratch sc = {0};
                CHECK_OK(vit_scratch_reserve(&sc, p));
                fns[isa](p, &sc, x, (it & 1) ? w : NULL, starts[c], ends[c], st[isa], 0);
                vit_scratch_release(&sc);
                if (isa > 0)
                    CHECK(!memcmp(st[isa], st[0], (size_t)p.T * 4), "pass (%d, %d) of %s differs from scalar: L=%d k=%d",
                          starts[c], ends[c], tcq_isa_name((tcq_isa)isa), p.L, p.k);
                n++;
            }
            CHECK(n >= 1, "no ISA ran");
        }
    }
}

/* Guaranteed ties: with weight 0 on every position but the last, every path costs the same
 * until then (all 2^k candidates of every traceback step tie), and the last position's target
 * is a value that several states share, so D_{T-1} has equal minima.  Every ISA must choose
 * the smallest state and the smallest j, like the scalar pass (and the encoder like the
 * reference). */
static void test_ties(uint64_t *rs)
{
    float x[256], w[256];
    for (int L = 8; L <= 12; L++)
        for (int k = 1; k <= 4; k++) {
            const uint32_t N = 1u << L;
            tcq_block_params p = {L, k, 64};
            /* a state s1 whose value some later state repeats, found from a random start (at L=8
             * only 17 of the 256 states repeat a value, so the scan must not skip any) */
            uint32_t s1 = N;
            const uint32_t a0 = (uint32_t)(test_rand(rs) % N);
            for (uint32_t i = 0; i < N && s1 == N; i++) {
                const uint32_t a = (a0 + i) % N;
                for (uint32_t b = a + 1; b < N; b++)
                    if (tcq_code_value(a) == tcq_code_value(b)) {
                        s1 = a;
                        break;
                    }
            }
            CHECK(s1 < N, "L=%d: no repeated value", L);
            if (s1 == N) continue;
            uint32_t first = 0;   /* the smallest state with that value */
            while (tcq_code_value(first) != tcq_code_value(s1)) first++;
            for (int t = 0; t < p.T; t++) {
                x[t] = (float)test_gauss(rs);
                w[t] = 0.0f;
            }
            x[p.T - 1] = tcq_code_value(s1);
            w[p.T - 1] = 1.0f;
            uint32_t st[3][256];
            static const vit_pass_fn fns[3] = {vit_pass_scalar, vit_pass_avx2, vit_pass_avx512};
            for (int isa = 0; isa < TCQ_ISA_COUNT; isa++) {
                if (tcq_isa_set((tcq_isa)isa) != TCQ_OK) continue;
                vit_scratch sc = {0};
                CHECK_OK(vit_scratch_reserve(&sc, p));
                fns[isa](p, &sc, x, w, -1, -1, st[isa], 0);
                vit_scratch_release(&sc);
                CHECK(st[isa][p.T - 1] == first, "%s ended in %u, want the smallest tied state %u (L=%d k=%d)",
                      tcq_isa_name((tcq_isa)isa), st[isa][p.T - 1], first, L, k);
                /* all candidates tie, so every step takes j = 0: s_{t-1} = s_t >> k */
                CHECK(st[isa][p.T - 2] == first >> k, "%s: step back from a full tie took j != 0", tcq_isa_name((tcq_isa)isa));
                if (isa > 0) CHECK(!memcmp(st[isa], st[0], (size_t)p.T * 4), "%s differs from scalar on ties", tcq_isa_name((tcq_isa)isa));
            }
            tcq_encode_opts o = {TCQ_SEARCH_TWO_PASS, 0};
            check_block(p, &o, x, w, NULL);
            o.search = TCQ_SEARCH_SEAMS;
            check_block(p, &o, x, w, NULL);
        }
}

static void test_bit_identical(uint64_t *rs)
{
    float x[256], w[256];
    for (int it = 0; it < TEST_REPS(64); it++) {
        tcq_block_params p;
        p.k = 1 + (int)(test_rand(rs) % 4);
        /* mostly small L (the reference is slow at 2^16 states), a few large ones */
        p.L = it < TEST_REPS(64) - 4 ? 8 + (int)(test_rand(rs) % 5) : 13 + (it - (TEST_REPS(64) - 4));
        do p.T = TS[test_rand(rs) % 3];
        while (p.T * p.k % 32);
        if (p.L >= 14) p.T = 64;   /* keep the reference's time down */
        const double sd = 0.2 + 2.0 * test_uniform(rs);
        for (int t = 0; t < p.T; t++) {
            x[t] = (float)(sd * test_gauss(rs));
            w[t] = (float)(test_uniform(rs) < 0.1 ? 0.0 : 3.0 * test_uniform(rs));
        }
        const int weighted = test_rand(rs) & 1;
        tcq_encode_opts o = {TCQ_SEARCH_TWO_PASS, 0};
        if (it % 3 == 0) {
            o.search = TCQ_SEARCH_SEAMS;
            o.seams = (int)(test_rand(rs) % 5);
        }
        check_block(p, &o, x, weighted ? w : NULL, NULL);
    }
    /* exact ties: targets that are code values (several states share each value) and all-zero
     * blocks, where the smallest-j / smallest-s rules decide */
    for (int it = 0; it < 16; it++) {
        tcq_block_params p = {8 + (int)(test_rand(rs) % 5), 1 + it % 4, 64};
        for (int t = 0; t < p.T; t++)
            x[t] = it < 12 ? tcq_code_value((uint32_t)(test_rand(rs) % (1u << p.L))) : 0.0f;
        tcq_encode_opts o = {it & 1 ? TCQ_SEARCH_SEAMS : TCQ_SEARCH_TWO_PASS, 2};
        check_block(p, &o, x, NULL, NULL);
        for (int t = 0; t < p.T; t++) w[t] = (float)(test_rand(rs) % 3);   /* 0, 1, 2: more ties */
        check_block(p, &o, x, w, NULL);
    }
    /* every k, L at the edges, the full geometry table of the brief */
    const int Ls[3] = {8, 12, 16};
    for (int li = 0; li < 3; li++)
        for (int k = 1; k <= 4; k++) {
            tcq_block_params p = {Ls[li], k, Ls[li] == 16 ? 64 : 256};
            for (int t = 0; t < p.T; t++) x[t] = (float)test_gauss(rs);
            tcq_encode_opts o = {TCQ_SEARCH_TWO_PASS, 0};
            check_block(p, &o, x, NULL, NULL);
        }
}

/* Seams never loses to two-pass (it keeps the two-pass path unless it finds a strictly better
 * one), and with every overlap tried it is the exact tail-biting optimum: compare with a float64
 * brute force over all overlaps at L=8, k=4 (16 overlaps). */
static double brute_tailbiting(tcq_block_params p, const float *x)
{
    const int N = 1 << p.L, G = 1 << (p.L - p.k), J = 1 << p.k;
    static double D[256], Dn[256];
    double best = INFINITY;
    for (int ov = 0; ov < G; ov++) {
        for (int s = 0; s < N; s++) {
            const double d = (double)x[0] - tcq_code_value((uint32_t)s);
            D[s] = (s >> p.k) == ov ? d * d : INFINITY;
        }
        for (int t = 1; t < p.T; t++) {
            for (int s = 0; s < N; s++) {
                double m = INFINITY;
                for (int j = 0; j < J; j++) m = fmin(m, D[(s >> p.k) + j * G]);
                const double d = (double)x[t] - tcq_code_value((uint32_t)s);
                Dn[s] = m + d * d;
            }
            memcpy(D, Dn, sizeof(double) * (size_t)N);
        }
        for (int i = 0; i < J; i++) best = fmin(best, D[ov + i * G]);
    }
    return best;
}

static void test_seams(uint64_t *rs)
{
    float x[256];
    tcq_block_params p = {12, 2, 256};
    double e2 = 0, es = 0;
    uint32_t words[32], st[256];
    for (int b = 0; b < TEST_REPS(12); b++) {
        for (int t = 0; t < p.T; t++) x[t] = (float)test_gauss(rs);
        tcq_encode_opts o2 = {TCQ_SEARCH_TWO_PASS, 0}, os = {TCQ_SEARCH_SEAMS, 4};
        double a, c;
        CHECK_OK(tcq_encode_block(p, &o2, x, NULL, words, NULL, &a));
        CHECK_OK(tcq_encode_block(p, &os, x, NULL, words, st, &c));
        CHECK(c <= a, "seams %.9g worse than two-pass %.9g", c, a);
        CHECK(tcq_block_states_valid(p, st), "seams broke the successor rule");
        e2 += a;
        es += c;
    }
    fprintf(stderr, "  seams(4) vs two-pass on %d blocks: %.6f vs %.6f\n", TEST_REPS(12), es / (TEST_REPS(12) * 256.0),
            e2 / (TEST_REPS(12) * 256.0));
    tcq_block_params q = {8, 4, 64};
    for (int b = 0; b < 6; b++) {
        for (int t = 0; t < q.T; t++) x[t] = (float)test_gauss(rs);
        tcq_encode_opts all = {TCQ_SEARCH_SEAMS, 15};
        double e;
        check_block(q, &all, x, NULL, &e);
        const double opt = brute_tailbiting(q, x);
        CHECK(fabs(e - opt) <= 1e-5 * opt, "all-overlap seams %.9g != float64 tail-biting optimum %.9g", e, opt);
    }
}

/* The seams candidate order: the short insertion path must agree with the full sort. */
static void test_seam_order(uint64_t *rs)
{
    enum { G = 512 };
    static float P[G];
    static uint32_t full[2 * G], top[2 * G];
    for (int i = 0; i < G; i++) P[i] = (float)(test_rand(rs) % 40);   /* many ties */
    vit_seam_order(G, P, full, G);
    for (uint32_t m = 1; m <= 64; m += 9) {
        vit_seam_order(G, P, top, m);
        CHECK(!memcmp(top, full, m * sizeof *top), "first %u of the seam order differ from the full sort", m);
    }
    for (int i = 1; i < G; i++)
        CHECK(P[full[i - 1]] < P[full[i]] || (P[full[i - 1]] == P[full[i]] && full[i - 1] < full[i]),
              "seam order not sorted at %d", i);
}

static void test_rows_determinism(uint64_t *rs)
{
    const int64_t R = 5, C = 512;
    float *src = malloc(sizeof(float) * R * C), *w = malloc(sizeof(float) * R * C);
    for (int64_t i = 0; i < R * C; i++) {
        src[i] = (float)(0.03 * test_gauss(rs));
        w[i] = (float)(0.5 + test_uniform(rs));
    }
    for (int64_t c = 0; c < C; c++) src[2 * C + c] = 0;   /* an all-zero row */
    for (int k = 2; k <= 4; k += 2) {
        tcq_block_params p = {12, k, 256};
        uint32_t codes[3][5 * 512 * 4 / 32];
        uint16_t sc[3][5];
        double err[3];
        for (int wi = 0; wi < 2; wi++)
            for (int n = 1; n <= 3; n++) {
                tcq_pool *pool = NULL;
                CHECK_OK(tcq_pool_create(n, &pool));
                CHECK_OK(tcq_encode_rows(p, NULL, src, wi ? w : NULL, R, C, codes[n - 1], sc[n - 1], pool, &err[n - 1]));
                tcq_pool_free(pool);
                if (n > 1)
                    CHECK(!memcmp(codes[n - 1], codes[0], (size_t)(R * C * k / 32) * 4) &&
                              !memcmp(sc[n - 1], sc[0], sizeof sc[0]) &&
                              err[n - 1] == err[0],
                          "encode_rows differs between 1 and %d threads (k=%d weighted=%d)", n, k, wi);
            }
        /* every block obeys the successor rule, and sq_err is the decoded error */
        tcq_trellis t = {p, 1, 0, R, C, codes[0], sc[0]};
        float *dec = malloc(sizeof(float) * R * C);
        CHECK_OK(tcq_trellis_decode(&t, dec));
        double e = 0;
        for (int64_t i = 0; i < R * C; i++) e += ((double)src[i] - dec[i]) * ((double)src[i] - dec[i]);
        CHECK(fabs(e - err[0]) <= 1e-9 * e, "sq_err %.12g vs decoded %.12g", err[0], e);
        for (int64_t r = 0; r < R; r++)
            for (int64_t b = 0; b < C / p.T; b++) {
                uint32_t st[256];
                tcq_block_unpack(p, tcq_trellis_block(&t, r, b), st);
                CHECK(tcq_block_states_valid(p, st), "row %lld block %lld breaks the successor rule", (long long)r,
                      (long long)b);
            }
        free(dec);
    }
    free(src);
    free(w);
}

/* MSE on a fixed seed (64 blocks, 16384 samples per k) against ANCHORS.md's two-pass column.
 * The block-to-block spread of the error measured here gives the standard error of the mean;
 * the bound is 4 of those plus ANCHORS' own 1%. */
static void test_mse(void)
{
    const double anchor[5] = {0, 0.2852, 0.0744, 0.0198, 0.00548};
    uint64_t rs = 20261202;
    enum { NB = TEST_REPS(64) };
    float *x = malloc(sizeof(float) * NB * 256);
    for (int i = 0; i < NB * 256; i++) x[i] = (float)test_gauss(&rs);
    for (int k = 1; k <= 4; k++) {
        tcq_block_params p = {12, k, 256};
        uint32_t words[32];
        double s = 0, s2 = 0;
        for (int b = 0; b < NB; b++) {
            uint32_t st[256];
            double e;
            CHECK_OK(tcq_encode_block(p, NULL, x + b * 256, NULL, words, st, &e));
            CHECK(tcq_block_states_valid(p, st), "k=%d block %d breaks the successor rule", k, b);
            e /= 256;
            s += e;
            s2 += e * e;
        }
        const double mse = s / NB, se = sqrt((s2 / NB - mse * mse) / (NB - 1));
        fprintf(stderr, "  k=%d: MSE %.5f (anchor %.5f, standard error %.5f)\n", k, mse, anchor[k], se);
        CHECK(fabs(mse - anchor[k]) <= 4 * se + 0.01 * anchor[k], "k=%d MSE %.5f vs anchor %.5f +- %.5f", k, mse,
              anchor[k], 4 * se + 0.01 * anchor[k]);
    }
    free(x);
}

static void test_bad_args(void)
{
    float x[256] = {0}, w[256];
    uint32_t words[32];
    for (int i = 0; i < 256; i++) w[i] = 1;
    const tcq_block_params bad[] = {{7, 2, 256}, {17, 2, 256}, {12, 0, 256}, {12, 5, 256}, {12, 2, 100}, {12, 2, 512}, {12, 1, 32}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(tcq_encode_block(bad[i], NULL, x, NULL, words, NULL, NULL) == TCQ_ERR_INVALID_ARG, "L=%d k=%d T=%d accepted",
              bad[i].L, bad[i].k, bad[i].T);
        CHECK(tcq_encode_block_ref(bad[i], NULL, x, NULL, words, NULL, NULL) == TCQ_ERR_INVALID_ARG,
              "ref: L=%d k=%d T=%d accepted", bad[i].L, bad[i].k, bad[i].T);
    }
    const tcq_block_params p = {12, 2, 64};
    CHECK(tcq_encode_block(p, NULL, NULL, NULL, words, NULL, NULL) == TCQ_ERR_INVALID_ARG, "NULL x accepted");
    CHECK(tcq_encode_block(p, NULL, x, NULL, NULL, NULL, NULL) == TCQ_ERR_INVALID_ARG, "NULL words accepted");
    x[5] = NAN;
    CHECK(tcq_encode_block(p, NULL, x, NULL, words, NULL, NULL) == TCQ_ERR_INVALID_ARG, "NaN accepted");
    CHECK(strstr(tcq_last_error(), "x[5]") != NULL, "message '%s' does not name x[5]", tcq_last_error());
    x[5] = INFINITY;
    CHECK(tcq_encode_block_ref(p, NULL, x, NULL, words, NULL, NULL) == TCQ_ERR_INVALID_ARG, "inf accepted");
    x[5] = 0;
    w[3] = -1;
    CHECK(tcq_encode_block(p, NULL, x, w, words, NULL, NULL) == TCQ_ERR_INVALID_ARG, "negative weight accepted");
    w[3] = 1;
    tcq_encode_opts o = {TCQ_SEARCH_SEAMS, 1 << 10};
    CHECK(tcq_encode_block(p, &o, x, w, words, NULL, NULL) == TCQ_ERR_INVALID_ARG, "seams = 2^(L-k) accepted");
    o.seams = -1;
    CHECK(tcq_encode_block(p, &o, x, w, words, NULL, NULL) == TCQ_ERR_INVALID_ARG, "seams = -1 accepted");
    o.search = (tcq_search)7;
    o.seams = 0;
    CHECK(tcq_encode_block(p, &o, x, w, words, NULL, NULL) == TCQ_ERR_INVALID_ARG, "search 7 accepted");
    tcq_search sr;
    CHECK(tcq_search_parse("bogus", &sr) == TCQ_ERR_INVALID_ARG, "search 'bogus' parsed");
    CHECK(tcq_search_parse("seams", &sr) == TCQ_OK && sr == TCQ_SEARCH_SEAMS, "search 'seams' not parsed");
    uint16_t sc[2];
    uint32_t codes[64];
    float src[2 * 96] = {0};
    CHECK(tcq_encode_rows(p, NULL, src, NULL, 2, 96, codes, sc, NULL, NULL) == TCQ_ERR_INVALID_ARG, "C %% T != 0 accepted");
    CHECK(tcq_encode_blocks(p, NULL, src, NULL, 0, codes, NULL, NULL) == TCQ_ERR_INVALID_ARG, "0 blocks accepted");
    src[70] = NAN;
    CHECK(tcq_encode_blocks(p, NULL, src, NULL, 2, codes, NULL, NULL) == TCQ_ERR_INVALID_ARG, "NaN block accepted");
    CHECK(strstr(tcq_last_error(), "block 1") != NULL, "message '%s' does not name block 1", tcq_last_error());
}

int main(void)
{
    uint64_t rs = test_seed();
    const tcq_isa keep = tcq_isa_active();
    for (int isa = 0; isa < TCQ_ISA_COUNT; isa++)
        if (tcq_isa_set((tcq_isa)isa) == TCQ_OK) fprintf(stderr, "  compares ISA %s\n", tcq_isa_name((tcq_isa)isa));
    tcq_isa_set(keep);
    test_bad_args();
    test_passes(&rs);
    test_ties(&rs);
    tcq_isa_set(keep);
    test_bit_identical(&rs);
    test_seams(&rs);
    test_seam_order(&rs);
    test_rows_determinism(&rs);
    test_mse();
    return test_done("test_encode");
}
