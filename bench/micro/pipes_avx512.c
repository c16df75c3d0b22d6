/* Register-only microbenchmark of AVX-512 instruction throughput, latency, pairs (which share
 * pipes) and the trellis decode mixes (bc: broadcast qword + vpmultishiftqb; sh: vpshufb +
 * vpsrlvd; vpermi2b / vpermb: the block-in-registers decoders), 8 independent chains, timed in
 * thread CPU time (the machine is shared).  Not part of the build:
 *   gcc -O2 -mavx512f -mavx512bw -mavx512vbmi -mavx512vbmi2 -mavx512vnni -o /tmp/pipes bench/micro/pipes_avx512.c
 *   /tmp/pipes 5      # best of 5; "cycles" = ns / scalar add latency
 * Results on Zen 5: docs/PERFORMANCE.md "Zen 5 (2026-12-03)". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static uint64_t mem[512] __attribute__((aligned(64)));
#define N 2000000L
#define BENCH(name, nins, body) static double name(void){ long n=N; const void*p=mem; double t0=now(); \
  __asm__ volatile("1:\n" body "dec %0\n jnz 1b\n" : "+r"(n) : "r"(p) : "memory","cc","rax", \
  "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15", \
  "xmm16","xmm17","xmm18","xmm19","xmm20","xmm21","xmm22","xmm23","xmm24","xmm25","xmm26","xmm27","xmm28","xmm29","xmm30","xmm31"); \
  return (now()-t0)/(double)N/(nins);}
#define R8(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7)
// latency: dependent chain
BENCH(lat_add, 8, "vpaddd %%zmm0,%%zmm0,%%zmm0\n vpaddd %%zmm0,%%zmm0,%%zmm0\nvpaddd %%zmm0,%%zmm0,%%zmm0\nvpaddd %%zmm0,%%zmm0,%%zmm0\nvpaddd %%zmm0,%%zmm0,%%zmm0\nvpaddd %%zmm0,%%zmm0,%%zmm0\nvpaddd %%zmm0,%%zmm0,%%zmm0\nvpaddd %%zmm0,%%zmm0,%%zmm0\n")
BENCH(lat_addq, 8, "add %%rax,%%rax\nadd %%rax,%%rax\nadd %%rax,%%rax\nadd %%rax,%%rax\nadd %%rax,%%rax\nadd %%rax,%%rax\nadd %%rax,%%rax\nadd %%rax,%%rax\n")
#define T2(ins) \
 ins " %%zmm16,%%zmm17,%%zmm0\n" ins " %%zmm16,%%zmm17,%%zmm1\n" ins " %%zmm16,%%zmm17,%%zmm2\n" ins " %%zmm16,%%zmm17,%%zmm3\n" \
 ins " %%zmm16,%%zmm17,%%zmm4\n" ins " %%zmm16,%%zmm17,%%zmm5\n" ins " %%zmm16,%%zmm17,%%zmm6\n" ins " %%zmm16,%%zmm17,%%zmm7\n" \
 ins " %%zmm16,%%zmm17,%%zmm8\n" ins " %%zmm16,%%zmm17,%%zmm9\n" ins " %%zmm16,%%zmm17,%%zmm10\n" ins " %%zmm16,%%zmm17,%%zmm11\n" \
 ins " %%zmm16,%%zmm17,%%zmm12\n" ins " %%zmm16,%%zmm17,%%zmm13\n" ins " %%zmm16,%%zmm17,%%zmm14\n" ins " %%zmm16,%%zmm17,%%zmm15\n"
BENCH(t_paddd,16,T2("vpaddd"))
BENCH(t_pandd,16,T2("vpandd"))
BENCH(t_pmulld,16,T2("vpmulld"))
BENCH(t_mshift,16,T2("vpmultishiftqb"))
BENCH(t_permb,16,T2("vpermb"))
BENCH(t_permi2b,16,T2("vpermi2b"))
BENCH(t_permt2b,16,T2("vpermt2b"))
BENCH(t_dpbusd,16,T2("vpdpbusd"))
BENCH(t_dpwssd,16,T2("vpdpwssd"))
BENCH(t_shrdvd,16,T2("vpshrdvd"))
BENCH(t_srlvd,16,T2("vpsrlvd"))
BENCH(t_pmaddubsw,16,T2("vpmaddubsw"))
BENCH(t_pmaddwd,16,T2("vpmaddwd"))
BENCH(t_pshufb,16,T2("vpshufb"))
BENCH(t_fma,16,T2("vfmadd231ps"))
BENCH(t_cvt,16,"vcvtdq2ps %%zmm16,%%zmm0\nvcvtdq2ps %%zmm16,%%zmm1\nvcvtdq2ps %%zmm16,%%zmm2\nvcvtdq2ps %%zmm16,%%zmm3\nvcvtdq2ps %%zmm16,%%zmm4\nvcvtdq2ps %%zmm16,%%zmm5\nvcvtdq2ps %%zmm16,%%zmm6\nvcvtdq2ps %%zmm16,%%zmm7\nvcvtdq2ps %%zmm16,%%zmm8\nvcvtdq2ps %%zmm16,%%zmm9\nvcvtdq2ps %%zmm16,%%zmm10\nvcvtdq2ps %%zmm16,%%zmm11\nvcvtdq2ps %%zmm16,%%zmm12\nvcvtdq2ps %%zmm16,%%zmm13\nvcvtdq2ps %%zmm16,%%zmm14\nvcvtdq2ps %%zmm16,%%zmm15\n")
BENCH(t_bcq,16,"vpbroadcastq (%1),%%zmm0\nvpbroadcastq 8(%1),%%zmm1\nvpbroadcastq 16(%1),%%zmm2\nvpbroadcastq 24(%1),%%zmm3\nvpbroadcastq 32(%1),%%zmm4\nvpbroadcastq 40(%1),%%zmm5\nvpbroadcastq 48(%1),%%zmm6\nvpbroadcastq 56(%1),%%zmm7\nvpbroadcastq 64(%1),%%zmm8\nvpbroadcastq 72(%1),%%zmm9\nvpbroadcastq 80(%1),%%zmm10\nvpbroadcastq 88(%1),%%zmm11\nvpbroadcastq 96(%1),%%zmm12\nvpbroadcastq 104(%1),%%zmm13\nvpbroadcastq 112(%1),%%zmm14\nvpbroadcastq 120(%1),%%zmm15\n")
// latencies
#define L8(ins) ins " %%zmm17,%%zmm0,%%zmm0\n" ins " %%zmm17,%%zmm0,%%zmm0\n" ins " %%zmm17,%%zmm0,%%zmm0\n" ins " %%zmm17,%%zmm0,%%zmm0\n" ins " %%zmm17,%%zmm0,%%zmm0\n" ins " %%zmm17,%%zmm0,%%zmm0\n" ins " %%zmm17,%%zmm0,%%zmm0\n" ins " %%zmm17,%%zmm0,%%zmm0\n"
BENCH(l_pmulld,8,L8("vpmulld"))
BENCH(l_mshift,8,L8("vpmultishiftqb"))
BENCH(l_dpbusd,8,L8("vpdpbusd"))
BENCH(l_permb,8,L8("vpermb"))
// decode mixes, per group (16 weights), 8 independent groups per iteration.
// zmm24 shctl, zmm25 mask, zmm26 mul, zmm27 add, zmm28..31 q rows (M up to 4); acc zmm0-7 (m=0), zmm8-15 (m=1)...
#define DEC_BC(j, off) "vpbroadcastq " #off "(%1),%%zmm" #j "\n" "vpmultishiftqb %%zmm" #j ",%%zmm24,%%zmm" #j "\n" \
  "vpandd %%zmm25,%%zmm" #j ",%%zmm" #j "\n" "vpmulld %%zmm26,%%zmm" #j ",%%zmm" #j "\n" "vpaddd %%zmm27,%%zmm" #j ",%%zmm" #j "\n"
#define DEC_P(j, off) "vmovdqa64 %%zmm20,%%zmm" #j "\n vpermi2b %%zmm22,%%zmm21,%%zmm" #j "\n" "vpmultishiftqb %%zmm" #j ",%%zmm24,%%zmm" #j "\n" \
  "vpandd %%zmm25,%%zmm" #j ",%%zmm" #j "\n" "vpmulld %%zmm26,%%zmm" #j ",%%zmm" #j "\n" "vpaddd %%zmm27,%%zmm" #j ",%%zmm" #j "\n"
#define DEC_PB(j, off) "vpermb %%zmm21,%%zmm20,%%zmm" #j "\n" "vpmultishiftqb %%zmm" #j ",%%zmm24,%%zmm" #j "\n" \
  "vpandd %%zmm25,%%zmm" #j ",%%zmm" #j "\n" "vpmulld %%zmm26,%%zmm" #j ",%%zmm" #j "\n" "vpaddd %%zmm27,%%zmm" #j ",%%zmm" #j "\n"
#define DP1(j,a) "vpdpbusd %%zmm28,%%zmm" #j ",%%zmm" #a "\n"
#define DP(j,a,r) "vpdpbusd %%zmm" #r ",%%zmm" #j ",%%zmm" #a "\n"
#define G1(D,j,a0,a1,a2,a3,off) D(j,off) DP(j,a0,28)
#define G2(D,j,a0,a1,a2,a3,off) D(j,off) DP(j,a0,28) DP(j,a1,29)
#define G3(D,j,a0,a1,a2,a3,off) D(j,off) DP(j,a0,28) DP(j,a1,29) DP(j,a2,30)
#define G4(D,j,a0,a1,a2,a3,off) D(j,off) DP(j,a0,28) DP(j,a1,29) DP(j,a2,30) DP(j,a3,31)
#define MIX(G,D) G(D,0,8,12,16,18,0) G(D,1,9,13,17,19,8) G(D,2,10,14,16,18,16) G(D,3,11,15,17,19,24) G(D,4,8,12,16,18,32) G(D,5,9,13,17,19,40) G(D,6,10,14,16,18,48) G(D,7,11,15,17,19,56)
BENCH(mix_bc1,8,MIX(G1,DEC_BC))
BENCH(mix_bc2,8,MIX(G2,DEC_BC))
BENCH(mix_bc3,8,MIX(G3,DEC_BC))
BENCH(mix_bc4,8,MIX(G4,DEC_BC))
BENCH(mix_p1,8,MIX(G1,DEC_P))
BENCH(mix_pb1,8,MIX(G1,DEC_PB))
BENCH(mix_pb4,8,MIX(G4,DEC_PB))
// decode only (no dpbusd)
#define G0(D,j,a0,a1,a2,a3,off) D(j,off)
BENCH(mix_bc0,8,MIX(G0,DEC_BC))
BENCH(p_0,16,"vpmulld %%zmm16,%%zmm17,%%zmm0\n""vpdpbusd %%zmm16,%%zmm17,%%zmm1\n""vpmulld %%zmm16,%%zmm17,%%zmm2\n""vpdpbusd %%zmm16,%%zmm17,%%zmm3\n""vpmulld %%zmm16,%%zmm17,%%zmm4\n""vpdpbusd %%zmm16,%%zmm17,%%zmm5\n""vpmulld %%zmm16,%%zmm17,%%zmm6\n""vpdpbusd %%zmm16,%%zmm17,%%zmm7\n""vpmulld %%zmm16,%%zmm17,%%zmm8\n""vpdpbusd %%zmm16,%%zmm17,%%zmm9\n""vpmulld %%zmm16,%%zmm17,%%zmm10\n""vpdpbusd %%zmm16,%%zmm17,%%zmm11\n""vpmulld %%zmm16,%%zmm17,%%zmm12\n""vpdpbusd %%zmm16,%%zmm17,%%zmm13\n""vpmulld %%zmm16,%%zmm17,%%zmm14\n""vpdpbusd %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_1,16,"vpmultishiftqb %%zmm16,%%zmm17,%%zmm0\n""vpdpbusd %%zmm16,%%zmm17,%%zmm1\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm2\n""vpdpbusd %%zmm16,%%zmm17,%%zmm3\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm4\n""vpdpbusd %%zmm16,%%zmm17,%%zmm5\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm6\n""vpdpbusd %%zmm16,%%zmm17,%%zmm7\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm8\n""vpdpbusd %%zmm16,%%zmm17,%%zmm9\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm10\n""vpdpbusd %%zmm16,%%zmm17,%%zmm11\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm12\n""vpdpbusd %%zmm16,%%zmm17,%%zmm13\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm14\n""vpdpbusd %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_2,16,"vpmultishiftqb %%zmm16,%%zmm17,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_3,16,"vpermb %%zmm16,%%zmm17,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpermb %%zmm16,%%zmm17,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpermb %%zmm16,%%zmm17,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpermb %%zmm16,%%zmm17,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpermb %%zmm16,%%zmm17,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpermb %%zmm16,%%zmm17,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpermb %%zmm16,%%zmm17,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpermb %%zmm16,%%zmm17,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_4,16,"vpermb %%zmm16,%%zmm17,%%zmm0\n""vpdpbusd %%zmm16,%%zmm17,%%zmm1\n""vpermb %%zmm16,%%zmm17,%%zmm2\n""vpdpbusd %%zmm16,%%zmm17,%%zmm3\n""vpermb %%zmm16,%%zmm17,%%zmm4\n""vpdpbusd %%zmm16,%%zmm17,%%zmm5\n""vpermb %%zmm16,%%zmm17,%%zmm6\n""vpdpbusd %%zmm16,%%zmm17,%%zmm7\n""vpermb %%zmm16,%%zmm17,%%zmm8\n""vpdpbusd %%zmm16,%%zmm17,%%zmm9\n""vpermb %%zmm16,%%zmm17,%%zmm10\n""vpdpbusd %%zmm16,%%zmm17,%%zmm11\n""vpermb %%zmm16,%%zmm17,%%zmm12\n""vpdpbusd %%zmm16,%%zmm17,%%zmm13\n""vpermb %%zmm16,%%zmm17,%%zmm14\n""vpdpbusd %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_5,16,"vpermb %%zmm16,%%zmm17,%%zmm0\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm1\n""vpermb %%zmm16,%%zmm17,%%zmm2\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm3\n""vpermb %%zmm16,%%zmm17,%%zmm4\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm5\n""vpermb %%zmm16,%%zmm17,%%zmm6\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm7\n""vpermb %%zmm16,%%zmm17,%%zmm8\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm9\n""vpermb %%zmm16,%%zmm17,%%zmm10\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm11\n""vpermb %%zmm16,%%zmm17,%%zmm12\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm13\n""vpermb %%zmm16,%%zmm17,%%zmm14\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_6,16,"vpshufb %%zmm16,%%zmm17,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpshufb %%zmm16,%%zmm17,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpshufb %%zmm16,%%zmm17,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpshufb %%zmm16,%%zmm17,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpshufb %%zmm16,%%zmm17,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpshufb %%zmm16,%%zmm17,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpshufb %%zmm16,%%zmm17,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpshufb %%zmm16,%%zmm17,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_7,16,"vpsrlvd %%zmm16,%%zmm17,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpsrlvd %%zmm16,%%zmm17,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpsrlvd %%zmm16,%%zmm17,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpsrlvd %%zmm16,%%zmm17,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpsrlvd %%zmm16,%%zmm17,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpsrlvd %%zmm16,%%zmm17,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpsrlvd %%zmm16,%%zmm17,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpsrlvd %%zmm16,%%zmm17,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_8,16,"vpsrlvd %%zmm16,%%zmm17,%%zmm0\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm1\n""vpsrlvd %%zmm16,%%zmm17,%%zmm2\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm3\n""vpsrlvd %%zmm16,%%zmm17,%%zmm4\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm5\n""vpsrlvd %%zmm16,%%zmm17,%%zmm6\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm7\n""vpsrlvd %%zmm16,%%zmm17,%%zmm8\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm9\n""vpsrlvd %%zmm16,%%zmm17,%%zmm10\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm11\n""vpsrlvd %%zmm16,%%zmm17,%%zmm12\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm13\n""vpsrlvd %%zmm16,%%zmm17,%%zmm14\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_9,16,"vpdpwssd %%zmm16,%%zmm17,%%zmm0\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm1\n""vpdpwssd %%zmm16,%%zmm17,%%zmm2\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm3\n""vpdpwssd %%zmm16,%%zmm17,%%zmm4\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm5\n""vpdpwssd %%zmm16,%%zmm17,%%zmm6\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm7\n""vpdpwssd %%zmm16,%%zmm17,%%zmm8\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm9\n""vpdpwssd %%zmm16,%%zmm17,%%zmm10\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm11\n""vpdpwssd %%zmm16,%%zmm17,%%zmm12\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm13\n""vpdpwssd %%zmm16,%%zmm17,%%zmm14\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_10,16,"vpmaddwd %%zmm16,%%zmm17,%%zmm0\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm1\n""vpmaddwd %%zmm16,%%zmm17,%%zmm2\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm3\n""vpmaddwd %%zmm16,%%zmm17,%%zmm4\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm5\n""vpmaddwd %%zmm16,%%zmm17,%%zmm6\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm7\n""vpmaddwd %%zmm16,%%zmm17,%%zmm8\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm9\n""vpmaddwd %%zmm16,%%zmm17,%%zmm10\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm11\n""vpmaddwd %%zmm16,%%zmm17,%%zmm12\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm13\n""vpmaddwd %%zmm16,%%zmm17,%%zmm14\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_11,16,"vpslld $3,%%zmm16,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpslld $3,%%zmm16,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpslld $3,%%zmm16,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpslld $3,%%zmm16,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpslld $3,%%zmm16,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpslld $3,%%zmm16,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpslld $3,%%zmm16,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpslld $3,%%zmm16,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_12,16,"vpsllq $3,%%zmm16,%%zmm0\n""vpdpbusd %%zmm16,%%zmm17,%%zmm1\n""vpsllq $3,%%zmm16,%%zmm2\n""vpdpbusd %%zmm16,%%zmm17,%%zmm3\n""vpsllq $3,%%zmm16,%%zmm4\n""vpdpbusd %%zmm16,%%zmm17,%%zmm5\n""vpsllq $3,%%zmm16,%%zmm6\n""vpdpbusd %%zmm16,%%zmm17,%%zmm7\n""vpsllq $3,%%zmm16,%%zmm8\n""vpdpbusd %%zmm16,%%zmm17,%%zmm9\n""vpsllq $3,%%zmm16,%%zmm10\n""vpdpbusd %%zmm16,%%zmm17,%%zmm11\n""vpsllq $3,%%zmm16,%%zmm12\n""vpdpbusd %%zmm16,%%zmm17,%%zmm13\n""vpsllq $3,%%zmm16,%%zmm14\n""vpdpbusd %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_13,16,"vpternlogd $0x96,%%zmm16,%%zmm17,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpternlogd $0x96,%%zmm16,%%zmm17,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpternlogd $0x96,%%zmm16,%%zmm17,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpternlogd $0x96,%%zmm16,%%zmm17,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpternlogd $0x96,%%zmm16,%%zmm17,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpternlogd $0x96,%%zmm16,%%zmm17,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpternlogd $0x96,%%zmm16,%%zmm17,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpternlogd $0x96,%%zmm16,%%zmm17,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_14,16,"vpmullw %%zmm16,%%zmm17,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpmullw %%zmm16,%%zmm17,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpmullw %%zmm16,%%zmm17,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpmullw %%zmm16,%%zmm17,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpmullw %%zmm16,%%zmm17,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpmullw %%zmm16,%%zmm17,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpmullw %%zmm16,%%zmm17,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpmullw %%zmm16,%%zmm17,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_15,16,"vpshldvd %%zmm16,%%zmm17,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpshldvd %%zmm16,%%zmm17,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpshldvd %%zmm16,%%zmm17,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpshldvd %%zmm16,%%zmm17,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpshldvd %%zmm16,%%zmm17,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpshldvd %%zmm16,%%zmm17,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpshldvd %%zmm16,%%zmm17,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpshldvd %%zmm16,%%zmm17,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_16,16,"vpmultishiftqb %%zmm16,%%zmm17,%%zmm0\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm1\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm2\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm3\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm4\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm5\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm6\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm7\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm8\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm9\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm10\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm11\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm12\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm13\n""vpmultishiftqb %%zmm16,%%zmm17,%%zmm14\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_17,16,"vpmulld %%zmm16,%%zmm17,%%zmm0\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm1\n""vpmulld %%zmm16,%%zmm17,%%zmm2\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm3\n""vpmulld %%zmm16,%%zmm17,%%zmm4\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm5\n""vpmulld %%zmm16,%%zmm17,%%zmm6\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm7\n""vpmulld %%zmm16,%%zmm17,%%zmm8\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm9\n""vpmulld %%zmm16,%%zmm17,%%zmm10\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm11\n""vpmulld %%zmm16,%%zmm17,%%zmm12\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm13\n""vpmulld %%zmm16,%%zmm17,%%zmm14\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_18,16,"vpdpbusd %%zmm16,%%zmm17,%%zmm0\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm1\n""vpdpbusd %%zmm16,%%zmm17,%%zmm2\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm3\n""vpdpbusd %%zmm16,%%zmm17,%%zmm4\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm5\n""vpdpbusd %%zmm16,%%zmm17,%%zmm6\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm7\n""vpdpbusd %%zmm16,%%zmm17,%%zmm8\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm9\n""vpdpbusd %%zmm16,%%zmm17,%%zmm10\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm11\n""vpdpbusd %%zmm16,%%zmm17,%%zmm12\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm13\n""vpdpbusd %%zmm16,%%zmm17,%%zmm14\n""vfmadd231ps %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_19,16,"vcvtdq2ps %%zmm16,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vcvtdq2ps %%zmm16,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vcvtdq2ps %%zmm16,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vcvtdq2ps %%zmm16,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vcvtdq2ps %%zmm16,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vcvtdq2ps %%zmm16,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vcvtdq2ps %%zmm16,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vcvtdq2ps %%zmm16,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_20,16,"vpermd %%zmm16,%%zmm17,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpermd %%zmm16,%%zmm17,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpermd %%zmm16,%%zmm17,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpermd %%zmm16,%%zmm17,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpermd %%zmm16,%%zmm17,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpermd %%zmm16,%%zmm17,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpermd %%zmm16,%%zmm17,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpermd %%zmm16,%%zmm17,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")
BENCH(p_21,16,"vpsadbw %%zmm16,%%zmm17,%%zmm0\n""vpmulld %%zmm16,%%zmm17,%%zmm1\n""vpsadbw %%zmm16,%%zmm17,%%zmm2\n""vpmulld %%zmm16,%%zmm17,%%zmm3\n""vpsadbw %%zmm16,%%zmm17,%%zmm4\n""vpmulld %%zmm16,%%zmm17,%%zmm5\n""vpsadbw %%zmm16,%%zmm17,%%zmm6\n""vpmulld %%zmm16,%%zmm17,%%zmm7\n""vpsadbw %%zmm16,%%zmm17,%%zmm8\n""vpmulld %%zmm16,%%zmm17,%%zmm9\n""vpsadbw %%zmm16,%%zmm17,%%zmm10\n""vpmulld %%zmm16,%%zmm17,%%zmm11\n""vpsadbw %%zmm16,%%zmm17,%%zmm12\n""vpmulld %%zmm16,%%zmm17,%%zmm13\n""vpsadbw %%zmm16,%%zmm17,%%zmm14\n""vpmulld %%zmm16,%%zmm17,%%zmm15\n")

#define DEC_SH(j, off) "vpbroadcastq " #off "(%1),%%zmm" #j "\n" "vpshufb %%zmm23,%%zmm" #j ",%%zmm" #j "\n" "vpsrlvd %%zmm22,%%zmm" #j ",%%zmm" #j "\n" \
  "vpandd %%zmm25,%%zmm" #j ",%%zmm" #j "\n" "vpmulld %%zmm26,%%zmm" #j ",%%zmm" #j "\n" "vpaddd %%zmm27,%%zmm" #j ",%%zmm" #j "\n"
BENCH(mix_sh0,8,MIX(G0,DEC_SH))
BENCH(mix_sh1,8,MIX(G1,DEC_SH))
BENCH(mix_sh2,8,MIX(G2,DEC_SH))
BENCH(mix_sh3,8,MIX(G3,DEC_SH))
BENCH(mix_sh4,8,MIX(G4,DEC_SH))


/* hybrid: even groups by the broadcast decoder, odd by the byte-shuffle one */
#define MIXH(G) G(DEC_BC,0,8,12,16,18,0) G(DEC_SH,1,9,13,17,19,8) G(DEC_BC,2,10,14,16,18,16) G(DEC_SH,3,11,15,17,19,24) G(DEC_BC,4,8,12,16,18,32) G(DEC_SH,5,9,13,17,19,40) G(DEC_BC,6,10,14,16,18,48) G(DEC_SH,7,11,15,17,19,56)
BENCH(mix_hy1,8,MIXH(G1))
BENCH(mix_hy2,8,MIXH(G2))
BENCH(mix_hy4,8,MIXH(G4))
int main(int argc,char**argv){ setvbuf(stdout,0,_IONBF,0);
  for(int i=0;i<512;i++) mem[i]=i*0x9e3779b97f4a7c15ull;
  double cyc=lat_add(); cyc=lat_add(); double cq=lat_addq();
  printf("vpaddd latency chain %.4f ns  (scalar add %.4f ns) -> %.2f GHz\n",cyc*1e9,cq*1e9,1e-9/cq);
  struct {const char*n; double(*f)(void);} t[]={
   {"vpaddd",t_paddd},{"vpandd",t_pandd},{"vpmulld",t_pmulld},{"vpmultishiftqb",t_mshift},{"vpermb",t_permb},
   {"vpermi2b",t_permi2b},{"vpermt2b",t_permt2b},{"vpdpbusd",t_dpbusd},{"vpdpwssd",t_dpwssd},{"vpshrdvd",t_shrdvd},{"vpsrlvd",t_srlvd},
   {"vpmaddubsw",t_pmaddubsw},{"vpmaddwd",t_pmaddwd},{"vpshufb",t_pshufb},{"vfmadd231ps",t_fma},{"vcvtdq2ps",t_cvt},{"vpbroadcastq m64",t_bcq},
   {"LAT vpmulld",l_pmulld},{"LAT vpmultishiftqb",l_mshift},{"LAT vpdpbusd",l_dpbusd},{"LAT vpermb",l_permb},
   {"MIX bc decode only (per group)",mix_bc0},{"MIX bc M=1",mix_bc1},{"MIX bc M=2",mix_bc2},{"MIX bc M=3",mix_bc3},{"MIX bc M=4",mix_bc4},
   {"MIX vpermi2b M=1",mix_p1},{"MIX vpermb M=1",mix_pb1},{"MIX vpermb M=4",mix_pb4},{"MIX sh decode only",mix_sh0},{"MIX sh M=1",mix_sh1},{"MIX sh M=2",mix_sh2},{"MIX sh M=3",mix_sh3},{"MIX sh M=4",mix_sh4},{"MIX hybrid M=1",mix_hy1},{"MIX hybrid M=2",mix_hy2},{"MIX hybrid M=4",mix_hy4},{"PAIR vpmulld + vpdpbusd",p_0},{"PAIR vpmultishiftqb + vpdpbusd",p_1},{"PAIR vpmultishiftqb + vpmulld",p_2},{"PAIR vpermb + vpmulld",p_3},{"PAIR vpermb + vpdpbusd",p_4},{"PAIR vpermb + vpmultishiftqb",p_5},{"PAIR vpshufb + vpmulld",p_6},{"PAIR vpsrlvd + vpmulld",p_7},{"PAIR vpsrlvd + vpmultishiftqb",p_8},{"PAIR vpdpwssd + vpmultishiftqb",p_9},{"PAIR vpmaddwd + vpmultishiftqb",p_10},{"PAIR vpslld $3, + vpmulld",p_11},{"PAIR vpsllq $3, + vpdpbusd",p_12},{"PAIR vpternlogd $0x96, + vpmulld",p_13},{"PAIR vpmullw + vpmulld",p_14},{"PAIR vpshldvd + vpmulld",p_15},{"PAIR vpmultishiftqb + vfmadd231ps",p_16},{"PAIR vpmulld + vfmadd231ps",p_17},{"PAIR vpdpbusd + vfmadd231ps",p_18},{"PAIR vcvtdq2ps + vpmulld",p_19},{"PAIR vpermd + vpmulld",p_20},{"PAIR vpsadbw + vpmulld",p_21}};
  int rep = argc>1?atoi(argv[1]):3;
  for(unsigned i=0;i<sizeof t/sizeof*t;i++){ double b=1e9; for(int r=0;r<rep;r++){double x=t[i].f(); if(x<b)b=x;}
    printf("%-44s %.4f ns  %.2f cycles\n",t[i].n,b*1e9,b/cq);}
}
