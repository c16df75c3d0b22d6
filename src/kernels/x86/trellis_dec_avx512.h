/* The AVX-512 (VNNI + VBMI) trellis decoder shared by trellis_{,reduce_,scatter_}avx512x.c and
 * the *_amx.c kernels:
 * x = s*MUL + ADD for 16 states at a time, by vpermi2b (any k) or by one broadcast qword per
 * group (k <= 3).  Static inline: each including file gets its own copy of the index tables. */
#ifndef TCQ_TRELLIS_DEC_AVX512_H
#define TCQ_TRELLIS_DEC_AVX512_H

#include "../kernels.h"

#include <immintrin.h>
#include <pthread.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))
#define QB TCQ_FAST_QB
#define GPQ (QB / 16)   /* groups per activation block */

/* In-place accumulation (acc += ...): the intrinsics return a new value and gcc then rotates
 * accumulator arrays through register copies (and spills) every iteration; the asm pins each
 * accumulator to one register. */
AI void dpwssd_rr(__m512i *acc, __m512i y, __m512i q)
{
    __asm__("vpdpwssd %2, %1, %0" : "+v"(*acc) : "v"(y), "v"(q));
}
AI void dpbusd_ip(__m512i *acc, __m512i x, __m512i q)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(*acc) : "v"(x), "v"(q));
}

typedef struct dec_tab {
    __m512i idx[16];     /* per group byte index into the block (lo:hi tables) */
    __m512i shctl;       /* vpmultishiftqb control */
} dec_tab;

typedef struct dec {
    const __m512i *idx;
    __m512i shctl, mask, mul, add;
    __m512i shbc;        /* vpmultishiftqb control of the broadcast decoder (k <= 3) */
    __mmask64 m0, m1;    /* load masks of the block's bytes [0, 64) and [64, 128) */
    int ng, nbytes;
    int bc;              /* k: the broadcast decoder, dec_x with BC = k (0: vpermi2b) */
    int off0;            /* broadcast decoder: group g's qword is at byte off0 - 2kg */
} dec;

/* index tables per (k, T), built once */
static dec_tab g_tab[TCQ_K_MAX + 1][3];
static pthread_once_t g_tab_once = PTHREAD_ONCE_INIT;

static void tab_init(void)
{
    for (int k = 1; k <= TCQ_K_MAX; k++)
        for (int ti = 0; ti < 3; ti++) {
            const int T = 64 << ti, ng = T / 16, nbytes = T * k / 8;
            if (T * k % 32) continue;
            uint8_t ix[64], sc[64];
            for (int g = 0; g < ng; g++) {
                const int B = (ng - 1 - g) * 2 * k;
                for (int j = 0; j < 16; j++)
                    for (int b = 0; b < 4; b++) ix[4 * j + b] = (uint8_t)((B + ((15 - j) * k >> 3) + b) % nbytes);
                memcpy(&g_tab[k][ti].idx[g], ix, 64);
            }
            /* lane j of qword j/2 starts at bit 32*(j&1); its window starts ((15-j)k & 7) further */
            for (int j = 0; j < 16; j++)
                for (int b = 0; b < 4; b++)
                    sc[4 * j + b] = (uint8_t)(((j & 1) * 32 + (((15 - j) * k) & 7) + 8 * b) & 63);
            memcpy(&g_tab[k][ti].shctl, sc, 64);
        }
}

static void dec_init(dec *d, tcq_block_params p)
{
    pthread_once(&g_tab_once, tab_init);
    const int nbytes = p.T * p.k / 8, ti = p.T == 64 ? 0 : p.T == 128 ? 1 : 2;
    d->idx = g_tab[p.k][ti].idx;
    d->shctl = g_tab[p.k][ti].shctl;
    d->ng = p.T / 16;
    d->nbytes = nbytes;
    d->mask = _mm512_set1_epi32((int)((1u << p.L) - 1u));
    d->mul = _mm512_set1_epi32((int)TCQ_RMAD_MUL);
    d->add = _mm512_set1_epi32((int)TCQ_RMAD_ADD);
    d->m0 = nbytes >= 64 ? ~0ull : (1ull << nbytes) - 1;
    d->m1 = nbytes > 64 ? (nbytes >= 128 ? ~0ull : (1ull << (nbytes - 64)) - 1) : 0;
    /* Broadcast decoder: lane j of group g is t = 16g + j, window at bit (T-1-t)k; the group's 16
     * windows start at bit (T-16-16g)k (a byte boundary: 16k is a multiple of 8), lane j's
     * (15-j)k bits in.  k <= 3: they span 15k + L <= 61 bits, so all lie in the one qword at
     * byte (T-16-16g)k/8 (which ends inside the block for g >= 1, except g = 1, 2 at k = 1).  k = 4: lanes 4..15 lie in that qword (44 + L <= 60), lanes 0..3
     * (qwords 0 and 1 of the vector) in the qword 4 bytes further (28 + L <= 44). */
    d->bc = p.k <= 4 ? p.k : 0;
    d->off0 = (p.T - 16) * p.k / 8;
    uint8_t sc[64];
    for (int j = 0; j < 16; j++)
        for (int b = 0; b < 4; b++)
            sc[4 * j + b] = (uint8_t)(((15 - j) * p.k - (p.k == 4 && j < 4 ? 32 : 0) + 8 * b) & 63);
    memcpy(&d->shbc, sc, 64);
}

/* A block as the decoders read it: BC = k <= 3 reads qwords straight from memory, BC = 0 holds
 * the block's bytes in two registers for vpermi2b.  BC is a compile-time constant in every
 * kernel body (k known: the qword offsets become immediates). */
typedef struct blk { __m512i lo, hi; const char *p; } blk;

AI blk blk_load(const dec *d, const uint32_t *words, const int BC)
{
    blk b;
    b.p = (const char *)words;
    if (BC) {
        b.lo = b.hi = _mm512_setzero_si512();   /* unused */
        return b;
    }
    b.lo = _mm512_maskz_loadu_epi8(d->m0, words);
    b.hi = d->m1 ? _mm512_maskz_loadu_epi8(d->m1, (const char *)words + 64) : b.lo;
    return b;
}

AI uint64_t ld64(const char *p)
{
    uint64_t u;
    memcpy(&u, p, 8);
    return u;
}

AI uint64_t ld32(const char *p)
{
    uint32_t u;
    memcpy(&u, p, 4);
    return u;
}

/* x = s*MUL + ADD for the 16 states of group g.  BC = 0: vpermi2b gathers each lane's 4 bytes
 * (measured: 2 cycles of port 5 per zmm on this machine, a third of the decode).  BC = k <= 3:
 * one qword broadcast from memory (a load, no ALU port) feeds vpmultishiftqb directly: 5 vector
 * instructions per 16 weights with the dot product instead of 6.  BC = 4: the same plus one
 * merge-masked broadcast (qwords 0 and 1 from 4 bytes further).  Only group 0 runs past the
 * block's end (the tail-biting wrap); its qword is put together in scalar registers. */
AI __m512i dec_x(const dec *d, blk b, int g, const int BC)
{
    __m512i v;
    if (BC == 4) {
        const char *pm = b.p + d->off0 - g * 8;
        const uint64_t hi = g == 0 ? ld32(b.p + d->nbytes - 4) | ld32(b.p) << 32 : ld64(pm + 4);
        v = _mm512_mask_set1_epi64(_mm512_set1_epi64((long long)ld64(pm)), 0x03, (long long)hi);
        v = _mm512_multishift_epi64_epi8(d->shbc, v);
    } else if (BC) {
        /* k = 1: the qwords of groups 1 and 2 would end 6 - 2g bytes past the block (their
         * windows need only the first 4), so they are read that much earlier and shifted */
        const uint64_t u = g == 0             ? ld64(b.p + d->nbytes - 8) >> (64 - 16 * BC) | ld64(b.p) << (16 * BC)
                           : BC == 1 && g < 3 ? ld64(b.p + d->nbytes - 8) >> (8 * (6 - 2 * g))
                                              : ld64(b.p + d->off0 - g * 2 * BC);
        v = _mm512_multishift_epi64_epi8(d->shbc, _mm512_set1_epi64((long long)u));
    } else {
        v = _mm512_permutex2var_epi8(b.lo, _mm512_load_si512(&d->idx[g]), b.hi);
        v = _mm512_multishift_epi64_epi8(d->shctl, v);
    }
    v = _mm512_and_si512(v, d->mask);
    return _mm512_add_epi32(_mm512_mullo_epi32(v, d->mul), d->add);
}

/* exact weights value(s) * scale of group g */
AI __m512 dec_w(const dec *d, blk b, int g, __m512 scale, const int BC)
{
    const __m512i x = dec_x(d, b, g, BC);
    const __m512i y = _mm512_dpbusd_epi32(_mm512_set1_epi32(-510), x, _mm512_set1_epi32(0x01010101));
    const __m512 f = _mm512_cvtepi32_ps(y), r = _mm512_set1_ps(TCQ_RMAD_RINV), dv = _mm512_set1_ps(TCQ_RMAD_DIV);
    __m512 q = _mm512_mul_ps(f, r);
    const __m512 e = _mm512_fnmadd_ps(q, dv, f);
    q = _mm512_fmadd_ps(e, r, q);
    return _mm512_mul_ps(q, scale);
}

/* BC_CALL(d, f(..., BC)): f instantiated for each broadcast k and for the vpermi2b decoder */
#define BC_CALL(d, call)                                                                           \
    do {                                                                                           \
        switch ((d)->bc) {                                                                         \
        case 1: { enum { BC = 1 }; call; } break;                                                  \
        case 2: { enum { BC = 2 }; call; } break;                                                  \
        case 3: { enum { BC = 3 }; call; } break;                                                  \
        case 4: { enum { BC = 4 }; call; } break;                                                  \
        default: { enum { BC = 0 }; call; } break;                                                 \
        }                                                                                          \
    } while (0)

#endif
