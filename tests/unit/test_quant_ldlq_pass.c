/* The pieces after BlockLDLQ on small random SPD Hessians, both axes:
 *   - the coordinate descent pass never raises the (damped) proxy loss, and lowers it here;
 *   - H = I: LDLQ with a pass still equals rounding (tcq_encode_rows) bit for bit;
 *   - the H-weighted scales: no higher loss than the scales in hand, and no scaling of any one
 *     row by 1 +- 1 % lowers it (a minimum up to fp16 rounding);
 *   - the scale search (5 candidate scales per row): no higher loss than BlockLDLQ without it on
 *     axis 1 (by construction), within 1 % on axis 0. */
#include "test.h"
#include "quant/quant.h"

static double loss(tcq_block_params p, const float *W, const uint32_t *codes, const uint16_t *scales, int64_t R,
                   int64_t C, int axis, const double *H)
{
    float *What = malloc((size_t)(R * C) * sizeof *What);
    tcq_quant_decode_rows(p, codes, scales, R, C, What);
    double l = -1;
    CHECK_OK(tcq_quant_proxy(W, What, R, C, axis, H, NULL, &l, NULL));
    free(What);
    return l;
}

static void run(uint64_t *st, int axis, int identity)
{
    const tcq_block_params p = {12, 2, 256};
    const tcq_encode_opts enc = {0};
    const int64_t R = axis ? 16 : 160, C = axis ? 768 : 256, m = axis ? C : R, rw = C * p.k / 32;
    const double damp = 0.1;
    double *H = calloc((size_t)(m * m), sizeof *H), *Hd = malloc((size_t)(m * m) * sizeof *Hd);
    float *W = malloc((size_t)(R * C) * sizeof *W), *What = malloc((size_t)(R * C) * sizeof *What);
    uint32_t *c0 = malloc((size_t)(R * rw) * 4), *c1 = malloc((size_t)(R * rw) * 4);
    uint16_t *s0 = malloc((size_t)R * 2), *s1 = malloc((size_t)R * 2);
    if (identity)
        for (int64_t i = 0; i < m; i++) H[i * m + i] = 1;
    else
        test_random_spd(st, m, H);
    CHECK_OK(tcq_quant_damp(H, m, damp, Hd));
    for (int64_t i = 0; i < R * C; i++) W[i] = (float)test_gauss(st);
    tcq_pool *pool = NULL;
    CHECK_OK(tcq_pool_create(2, &pool));
    const tcq_ldlq_args a0 = {p, &enc, pool, W, R, C, axis, H, damp, 0, c0, s0, What, 0, 0, NULL, NULL, 1};
    CHECK_OK(tcq_quant_ldlq(&a0));
    const tcq_ldlq_args a1 = {p, &enc, pool, W, R, C, axis, H, damp, 0, c1, s1, What, 1, 0, NULL, NULL, 1};
    CHECK_OK(tcq_quant_ldlq(&a1));
    if (identity) {
        CHECK_OK(tcq_encode_rows(p, &enc, W, NULL, R, C, c0, s0, pool, NULL));
        CHECK(!memcmp(c0, c1, (size_t)(R * rw) * 4) && !memcmp(s0, s1, (size_t)R * 2),
              "axis %d: H = I, LDLQ with a pass differs from rounding", axis);
    } else {
        const double l0 = loss(p, W, c0, s0, R, C, axis, Hd), l1 = loss(p, W, c1, s1, R, C, axis, Hd);
        CHECK(l1 < l0, "axis %d: the pass gave loss %g, BlockLDLQ alone %g", axis, l1, l0);
        fprintf(stderr, "axis %d: damped proxy BlockLDLQ %g, + pass %g (%.1f%%)\n", axis, l0, l1, 100 * (l1 / l0 - 1));
        memcpy(s0, s1, (size_t)R * 2);
        /* on a 2-thread pool (axis 0's m x m steps are pool items) the same scales as on none */
        uint16_t *sp = malloc((size_t)R * 2);
        memcpy(sp, s1, (size_t)R * 2);
        CHECK_OK(tcq_quant_hscale_on(NULL, pool, p, W, R, C, axis, Hd, 0, c1, sp));
        CHECK_OK(tcq_quant_hscale(p, W, R, C, axis, Hd, 0, c1, s1));
        CHECK(!memcmp(sp, s1, (size_t)R * 2), "axis %d: H-weighted scales differ on a 2-thread pool", axis);
        CHECK(memcmp(s0, s1, (size_t)R * 2), "axis %d: H-weighted scales changed nothing", axis);
        free(sp);
        const double l2 = loss(p, W, c1, s1, R, C, axis, Hd);
        CHECK(l2 <= l1, "axis %d: H-weighted scales raised the loss %g -> %g", axis, l1, l2);
        fprintf(stderr, "axis %d: + H-weighted scales %g\n", axis, l2);
        int worse = 0;
        for (int64_t r = 0; r < R; r++)
            for (int sg = -1; sg <= 1; sg += 2) {
                memcpy(s0, s1, (size_t)R * 2);
                s0[r] = tcq_f32_to_f16(tcq_f16_to_f32(s1[r]) * (1.0f + 0.01f * (float)sg));
                worse += loss(p, W, c1, s0, R, C, axis, Hd) >= l2;
            }
        CHECK(worse == 2 * R, "axis %d: %d of %lld one-row scale changes lowered the H-weighted loss", axis,
              (int)(2 * R - worse), (long long)(2 * R));
        /* the scale search (no pass): its first candidate is the plain run, so on axis 1 (rows
         * independent, the best kept per row) the damped loss cannot rise; on axis 0 each row keeps
         * its best against its own target, whose later feedback differs: lower here, not bound */
        const tcq_ldlq_args a2 = {p, &enc, pool, W, R, C, axis, H, damp, 0, c1, s1, What, 0, 5, NULL, NULL, 1};
        CHECK_OK(tcq_quant_ldlq(&a2));
        const double l3 = loss(p, W, c1, s1, R, C, axis, Hd);
        fprintf(stderr, "axis %d: BlockLDLQ with the scale search of 5: %g (%.1f%%)\n", axis, l3, 100 * (l3 / l0 - 1));
        CHECK(axis ? l3 <= l0 : l3 < 1.01 * l0, "axis %d: the scale search gave loss %g, without %g", axis, l3, l0);
    }
    tcq_pool_free(pool);
    free(H);
    free(Hd);
    free(W);
    free(What);
    free(c0);
    free(c1);
    free(s0);
    free(s1);
}

int main(void)
{
    uint64_t st = test_seed();
    for (int axis = 0; axis <= 1; axis++) {
        run(&st, axis, 1);
        run(&st, axis, 0);
    }
    return test_done("test_quant_ldlq_pass");
}
