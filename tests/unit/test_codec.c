/* Codec unit tests: 1MAD values, conversions, block layout, tensors, interleave, scales, and the
 * reference encoder's structural guarantees. */
#include "test.h"

static uint64_t rng;

static void test_value_table(void)
{
    const double d = 147.800537109375;
    CHECK((float)d == TCQ_RMAD_DIV, "divisor not exact in f32");
    const float *tab = tcq_code_value_table();
    int naive_off = 0;
    for (int y = -510; y <= 510; y++) {
        const float f = tab[y + 510];
        /* correctly rounded: no f32 neighbour is closer to y/d (products exact in double) */
        const double e = fabs((double)f * d - y);
        CHECK(e <= fabs((double)nextafterf(f, INFINITY) * d - y), "y=%d not correctly rounded (up)", y);
        CHECK(e <= fabs((double)nextafterf(f, -INFINITY) * d - y), "y=%d not correctly rounded (down)", y);
        if (y * (1.0f / TCQ_RMAD_DIV) != f) naive_off++;
    }
    /* FORMAT.md: the plain reciprocal multiply is one ulp off for 398 of the 1021 values. */
    CHECK(naive_off == 398, "naive reciprocal differs for %d values, FORMAT.md says 398", naive_off);
    for (int L = TCQ_L_MIN; L <= TCQ_L_MAX; L++) {
        int distinct[1021] = {0}, nd = 0, bad = 0;
        for (uint32_t s = 0; s < (1u << L); s++) {
            const int y = tcq_code_y(s);
            if (!distinct[y + 510]++) nd++;
            if (tcq_code_value_computed(s) != tcq_code_value(s)) bad++;
        }
        CHECK(bad == 0, "L=%d: computed value differs from the table for %d states", L, bad);
        /* FORMAT.md says the 4096 states of L=12 take 1021 distinct values; they take 713 (y spans
         * [-510, 510], which has 1021 integers). Checked independently in Python; noted in README. */
        if (L == 12) CHECK(nd == 713, "L=12 has %d distinct values", nd);
        if (L == 16) CHECK(nd == 908, "L=16 has %d distinct values", nd);
        const double rms = tcq_code_rms(L);
        CHECK(rms > 0.9 && rms < 1.1, "L=%d: code RMS %.4f is not near 1", L, rms);
    }
    /* a hand-computed state: s=0 -> x = 76625530 = 0x0491367A -> bytes 0x7A+0x36+0x91+0x04 */
    CHECK(tcq_code_y(0) == 0x7a + 0x36 + 0x91 + 0x04 - 510, "y(0) = %d", tcq_code_y(0));
    /* s=1: x = 34038481 + 76625530 = 110664011 = 0x0698994B */
    CHECK(tcq_code_y(1) == 0x4b + 0x99 + 0x98 + 0x06 - 510, "y(1) = %d", tcq_code_y(1));
}

static void test_conversions(void)
{
    /* bf16: ties to even, NaN stays NaN, overflow to inf */
    CHECK(tcq_f32_to_bf16(1.0f) == 0x3f80, "1.0");
    float f;
    uint32_t u = 0x3f808000u; /* exactly halfway between 0x3f80 and 0x3f81: to even (0x3f80) */
    memcpy(&f, &u, 4);
    CHECK(tcq_f32_to_bf16(f) == 0x3f80, "tie to even down: %04x", tcq_f32_to_bf16(f));
    u = 0x3f818000u; /* halfway between 0x3f81 and 0x3f82: to even (0x3f82) */
    memcpy(&f, &u, 4);
    CHECK(tcq_f32_to_bf16(f) == 0x3f82, "tie to even up: %04x", tcq_f32_to_bf16(f));
    u = 0x3f808001u;
    memcpy(&f, &u, 4);
    CHECK(tcq_f32_to_bf16(f) == 0x3f81, "above half rounds up");
    u = 0x7f7fffffu; /* FLT_MAX rounds to inf */
    memcpy(&f, &u, 4);
    CHECK(tcq_f32_to_bf16(f) == 0x7f80, "FLT_MAX -> inf: %04x", tcq_f32_to_bf16(f));
    CHECK(isnan(tcq_bf16_to_f32(tcq_f32_to_bf16(NAN))), "NaN stays NaN");
    CHECK(tcq_f32_to_bf16(-0.0f) == 0x8000, "-0");
    /* fp16: every half value round-trips; midpoints tie to even; range edges */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float x = tcq_f16_to_f32((uint16_t)h);
        if (isnan(x)) continue;
        if (tcq_f32_to_f16(x) != h) bad++;
        if ((h & 0x7c00u) != 0x7c00u && (h & 0x7fffu) != 0x7bffu) {
            /* the midpoint to the next half rounds to the even one of the two */
            const float nx = tcq_f16_to_f32((uint16_t)(h + 1));
            if ((h & 0x8000u) == ((h + 1) & 0x8000u)) {
                const float mid = (float)(((double)x + nx) / 2);
                const uint16_t want = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
                if (tcq_f32_to_f16(mid) != want) bad++;
            }
        }
    }
    CHECK(bad == 0, "fp16 conversion wrong for %d cases", bad);
    CHECK(tcq_f32_to_f16(65520.0f) == 0x7c00, "65520 -> inf");
    CHECK(tcq_f32_to_f16(65519.0f) == 0x7bff, "65519 -> 65504");
    CHECK(tcq_f32_to_f16(1e-9f) == 0, "tiny -> 0");
#if defined(__FLT16_MAX__)
    for (int i = 0; i < 100000; i++) {
        float x = (float)(test_gauss(&rng) * pow(10.0, (double)(test_rand(&rng) % 12) - 7.0));
        _Float16 h = (_Float16)x;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        if (tcq_f32_to_f16(x) != hb) {
            bad++;
            if (bad < 5) fprintf(stderr, "f16(%g): %04x vs compiler %04x\n", x, tcq_f32_to_f16(x), hb);
        }
    }
    CHECK(bad == 0, "fp16 disagrees with the compiler's _Float16 for %d values", bad);
#endif
}

static tcq_block_params random_params(void)
{
    for (;;) {
        tcq_block_params p = {8 + (int)(test_rand(&rng) % 9), 1 + (int)(test_rand(&rng) % 4),
                              64 << (test_rand(&rng) % 3)};
        if (tcq_block_check(p) == TCQ_OK) return p;
    }
}

/* Random states obeying the cyclic successor rule: pick T random symbols, build states from them. */
static void random_states(tcq_block_params p, uint32_t *st)
{
    uint32_t sym[256];
    for (int t = 0; t < p.T; t++) sym[t] = (uint32_t)test_rand(&rng) & ((1u << p.k) - 1u);
    for (int t = 0; t < p.T; t++) {
        uint32_t s = 0;
        for (int i = 0; i * p.k < p.L + p.k; i++) {   /* older symbols, wrapping */
            const int tt = ((t - i) % p.T + p.T) % p.T;
            s |= sym[tt] << (i * p.k);
        }
        st[t] = s & ((1u << p.L) - 1u);
    }
}

static void test_blocks(void)
{
    for (int L = TCQ_L_MIN; L <= TCQ_L_MAX; L++)
        for (int k = 1; k <= 4; k++)
            for (int T = 64; T <= 256; T *= 2) {
                tcq_block_params p = {L, k, T};
                if (tcq_block_check(p) != TCQ_OK) {
                    CHECK((T * k) % 32 != 0, "valid params rejected L=%d k=%d T=%d", L, k, T);
                    continue;
                }
                for (int rep = 0; rep < 4; rep++) {
                    uint32_t st[256], st2[256], words[32], words2[32];
                    random_states(p, st);
                    CHECK(tcq_block_states_valid(p, st), "generator broke the successor rule");
                    tcq_block_pack(p, st, words);
                    int bad = 0;
                    for (int t = 0; t < T; t++) bad += tcq_block_state(p, words, t) != st[t];
                    CHECK(bad == 0, "L=%d k=%d T=%d: window != state at %d positions", L, k, T, bad);
                    tcq_block_unpack(p, words, st2);
                    tcq_block_pack(p, st2, words2);
                    CHECK(memcmp(words, words2, (size_t)tcq_block_words(p) * 4) == 0, "pack(unpack(w)) != w");
                    /* any word pattern is a valid tail-biting code */
                    for (int i = 0; i < tcq_block_words(p); i++) words[i] = (uint32_t)test_rand(&rng);
                    tcq_block_unpack(p, words, st2);
                    CHECK(tcq_block_states_valid(p, st2), "random words decode to an invalid path");
                    float out[256];
                    tcq_block_decode_f32(p, words, 0.5f, out);
                    bad = 0;
                    for (int t = 0; t < T; t++) bad += out[t] != tcq_code_value(st2[t]) * 0.5f;
                    CHECK(bad == 0, "block decode mismatch");
                }
            }

    CHECK(tcq_block_check((tcq_block_params){7, 2, 256}) != TCQ_OK, "L=7 accepted");
    CHECK(tcq_block_check((tcq_block_params){12, 5, 256}) != TCQ_OK, "k=5 accepted");
    CHECK(tcq_block_check((tcq_block_params){12, 2, 100}) != TCQ_OK, "T=100 accepted");
    CHECK(tcq_block_check((tcq_block_params){12, 1, 64}) == TCQ_OK, "k=1 T=64 rejected");
    /* FORMAT.md worked example, k=3: t=0 reads bits 765..767 then bits 0..8 */
    {
        tcq_block_params p = {12, 3, 256};
        uint32_t w[24] = {0};
        w[23] = 0x5u << 29;   /* bits 765..767 = 0b101 */
        w[0] = 0x1abu;        /* bits 0..8 */
        CHECK(tcq_block_state(p, w, 0) == (0x5u | (0x1abu << 3)), "worked example t=0: %x",
              tcq_block_state(p, w, 0));
        CHECK(tcq_block_state(p, w, 255) == 0x1abu, "t=255 is the window at offset 0");
    }
}

static void test_tensors(void)
{
    /* axis 1 and axis 0 decode agree with block decode; interleave round trip and decode */
    const int64_t R = 3, C = 1024;
    tcq_block_params p = {12, 3, 256};
    const int64_t rw = C * 3 / 32;
    uint32_t *codes = malloc((size_t)(R * rw) * 4), *il = malloc((size_t)(R * rw) * 4),
             *back = malloc((size_t)(R * rw) * 4);
    uint16_t scales[3];
    for (int64_t i = 0; i < R * rw; i++) codes[i] = (uint32_t)test_rand(&rng);
    for (int r = 0; r < R; r++) scales[r] = tcq_f32_to_f16(0.01f * (float)(r + 1));
    float *W1 = malloc((size_t)(R * C) * 4), *W0 = malloc((size_t)(R * C) * 4), *Wi = malloc((size_t)(R * C) * 4);
    tcq_trellis a1 = {p, 1, 0, R, C, codes, scales}, a0 = {p, 0, 0, R, C, codes, scales};
    CHECK_OK(tcq_trellis_decode(&a1, W1));
    CHECK_OK(tcq_trellis_decode(&a0, W0));
    int bad = 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            const float v = tcq_code_value(tcq_block_state(p, codes + r * rw + (c / 256) * 24, (int)(c % 256))) *
                            tcq_f16_to_f32(scales[r]);
            bad += W1[r * C + c] != v;      /* axis 1: W [R, C] */
            bad += W0[c * R + r] != v;      /* axis 0: W [C, R] = stored^T */
        }
    CHECK(bad == 0, "tensor decode mismatches: %d", bad);
    CHECK_OK(tcq_interleave(R, C, codes, il));
    CHECK_OK(tcq_deinterleave(R, C, il, back));
    CHECK(memcmp(codes, back, (size_t)(R * rw) * 4) == 0, "interleave round trip");
    /* FORMAT.md addressing: word w of block blk of row r at (blk/2)*R*48 + r*48 + (blk%2)*24 + w */
    bad = 0;
    for (int64_t r = 0; r < R; r++)
        for (int blk = 0; blk < 4; blk++)
            for (int w = 0; w < 24; w++)
                bad += il[(blk / 2) * R * 48 + r * 48 + (blk % 2) * 24 + w] != codes[r * rw + blk * 24 + w];
    CHECK(bad == 0, "interleaved addressing");
    tcq_trellis ai = {p, 0, 1, R, C, il, scales};
    CHECK_OK(tcq_trellis_decode(&ai, Wi));
    CHECK(memcmp(W0, Wi, (size_t)(R * C) * 4) == 0, "interleaved decode differs");
    uint16_t *Wb = malloc((size_t)(R * C) * 2);
    CHECK_OK(tcq_trellis_decode_bf16(&a1, Wb));
    bad = 0;
    for (int64_t i = 0; i < R * C; i++) bad += Wb[i] != tcq_f32_to_bf16(W1[i]);
    CHECK(bad == 0, "bf16 decode is not the rounded f32 product");
    /* rejections */
    tcq_trellis badt = a1;
    badt.cols = 1000;
    CHECK(tcq_trellis_check(&badt) == TCQ_ERR_INVALID_ARG, "C not multiple of T accepted");
    badt = a1;
    badt.interleaved = 1;
    CHECK(tcq_trellis_check(&badt) == TCQ_ERR_INVALID_ARG, "interleave on axis 1 accepted");
    CHECK(strstr(tcq_last_error(), "interleave") != NULL, "message: %s", tcq_last_error());
    CHECK(tcq_interleave(R, 1000, codes, il) == TCQ_ERR_INVALID_ARG, "interleave of C=1000");
    CHECK(tcq_trellis_bpw(&a1) == 3.0 + 16.0 / 1024, "bpw");
    free(codes), free(il), free(back), free(W1), free(W0), free(Wi), free(Wb);
}

static void test_scales(void)
{
    float row[512];
    for (int i = 0; i < 512; i++) row[i] = (float)test_gauss(&rng) * 0.03f;
    double s2 = 0;
    for (int i = 0; i < 512; i++) s2 += (double)row[i] * row[i];
    const float want = (float)(sqrt(s2 / 512) / tcq_code_rms(12));
    const uint16_t h = tcq_scale_for_row(12, row, 512);
    CHECK(h == tcq_f32_to_f16(want), "scale %g vs %g", tcq_f16_to_f32(h), want);
    memset(row, 0, sizeof row);
    CHECK(tcq_f16_to_f32(tcq_scale_for_row(12, row, 512)) == 1.0f, "all-zero row gets scale 1");
}

static void test_ref_encoder(void)
{
    /* structural guarantees; quality and speed are test_encode's business */
    for (int rep = 0; rep < 6; rep++) {
        tcq_block_params p = random_params();
        if (p.L > 12) p.L = 12;   /* keep the reference's run time small */
        float x[256], w[256];
        for (int t = 0; t < p.T; t++) {
            x[t] = (float)test_gauss(&rng);
            w[t] = (float)(0.1 + test_uniform(&rng));
        }
        uint32_t words[32], st[256];
        double err = -1;
        CHECK_OK(tcq_encode_block_ref(p, NULL, x, rep & 1 ? w : NULL, words, st, &err));
        CHECK(tcq_block_states_valid(p, st), "L=%d k=%d T=%d: output breaks the cyclic successor rule", p.L,
              p.k, p.T);
        int bad = 0;
        for (int t = 0; t < p.T; t++) bad += tcq_block_state(p, words, t) != st[t];
        CHECK(bad == 0, "packed words do not hold the returned states");
        CHECK(err >= 0 && err < 0.5 * p.T, "error %g for unit-variance input", err);
    }
    float x[256] = {0};
    uint32_t words[32];
    CHECK(tcq_encode_block_ref((tcq_block_params){12, 5, 256}, NULL, x, NULL, words, NULL, NULL) ==
              TCQ_ERR_INVALID_ARG,
          "k=5 accepted");
}

int main(void)
{
    rng = test_seed();
    test_value_table();
    test_conversions();
    test_blocks();
    test_tensors();
    test_scales();
    test_ref_encoder();
    return test_done("test_codec");
}
