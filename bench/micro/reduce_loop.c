/* The fast axis-1 M=1 inner loop (4 groups + the per-activation-block fold, k=3 offsets, as gcc
 * compiled trellis_avx512x.c) alone, data in L1, timed in thread CPU time: variant 0 as compiled,
 * 1 with two accumulators, 2 without the fold, 3 with 4 decode registers.  Not part of the build:
 *   gcc -O2 -mavx512f -mavx512bw -mavx512vbmi -mavx512vnni -o /tmp/rloop bench/micro/reduce_loop.c
 * Results on Zen 5: docs/PERFORMANCE.md "Zen 5 (2026-12-03)". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static uint8_t codes[4096] __attribute__((aligned(64)));
static uint8_t q4[16384] __attribute__((aligned(64)));
static float dd[256] __attribute__((aligned(64)));
static int32_t corr[256] __attribute__((aligned(64)));
#define GRP(off,qoff) "vpbroadcastq " #off "(%%rdx),%%zmm2\n vpmultishiftqb %%zmm2,%%zmm13,%%zmm2\n vpandd %%zmm2,%%zmm12,%%zmm2\n vpmulld %%zmm11,%%zmm2,%%zmm2\n vpaddd %%zmm3,%%zmm2,%%zmm2\n vpdpbusd " #qoff "(%%rdi),%%zmm2,%%zmm1\n"
#define GRPB(off,qoff,acc) "vpbroadcastq " #off "(%%rdx),%%zmm2\n vpmultishiftqb %%zmm2,%%zmm13,%%zmm2\n vpandd %%zmm2,%%zmm12,%%zmm2\n vpmulld %%zmm11,%%zmm2,%%zmm2\n vpaddd %%zmm3,%%zmm2,%%zmm2\n vpdpbusd " #qoff "(%%rdi),%%zmm2,%%zmm" #acc "\n"
/* variant 0: as compiled (one accumulator, per-iteration masked load seed, cvt, fma {1to16}) */
static double run(int variant, long iters){
  long n=iters; double t0=now();
  if(variant==0) __asm__ volatile(
   "mov $1,%%eax\n kmovw %%eax,%%k3\n"
   "1:\n lea %[codes],%%rdx\n lea %[q4],%%rdi\n lea %[corr],%%r10\n lea %[dd],%%r11\n mov $16,%%ecx\n"
   "2:\n vmovdqu32 (%%r10),%%zmm1%{%%k3%}%{z%}\n"
   GRP(18,0) GRP(12,64) GRP(6,128) GRP(0,192)
   "vcvtdq2ps %%zmm1,%%zmm1\n vfmadd231ps (%%r11)%{1to16%},%%zmm1,%%zmm19\n"
   "add $4,%%r10\n add $256,%%rdi\n add $24,%%rdx\n add $4,%%r11\n dec %%ecx\n jnz 2b\n"
   "dec %[n]\n jnz 1b\n"
   : [n]"+r"(n) : [codes]"m"(codes),[q4]"m"(q4),[corr]"m"(corr),[dd]"m"(dd) : "rax","rcx","rdx","rdi","r10","r11","memory","cc","k3","xmm1","xmm2","xmm19");
  else if(variant==1) __asm__ volatile(   /* two accumulators */
   "mov $1,%%eax\n kmovw %%eax,%%k3\n"
   "1:\n lea %[codes],%%rdx\n lea %[q4],%%rdi\n lea %[corr],%%r10\n lea %[dd],%%r11\n mov $16,%%ecx\n"
   "2:\n vmovdqu32 (%%r10),%%zmm1%{%%k3%}%{z%}\n vpxord %%zmm4,%%zmm4,%%zmm4\n"
   GRPB(18,0,1) GRPB(12,64,4) GRPB(6,128,1) GRPB(0,192,4)
   "vpaddd %%zmm4,%%zmm1,%%zmm1\n vcvtdq2ps %%zmm1,%%zmm1\n vfmadd231ps (%%r11)%{1to16%},%%zmm1,%%zmm19\n"
   "add $4,%%r10\n add $256,%%rdi\n add $24,%%rdx\n add $4,%%r11\n dec %%ecx\n jnz 2b\n"
   "dec %[n]\n jnz 1b\n"
   : [n]"+r"(n) : [codes]"m"(codes),[q4]"m"(q4),[corr]"m"(corr),[dd]"m"(dd) : "rax","rcx","rdx","rdi","r10","r11","memory","cc","k3","xmm1","xmm2","xmm4","xmm19");
  else if(variant==2) __asm__ volatile(   /* no fold at all: pure mix with memory q */
   "1:\n lea %[codes],%%rdx\n lea %[q4],%%rdi\n mov $16,%%ecx\n"
   "2:\n"
   GRPB(18,0,1) GRPB(12,64,4) GRPB(6,128,5) GRPB(0,192,6)
   "add $256,%%rdi\n add $24,%%rdx\n dec %%ecx\n jnz 2b\n"
   "dec %[n]\n jnz 1b\n"
   : [n]"+r"(n) : [codes]"m"(codes),[q4]"m"(q4) : "rax","rcx","rdx","rdi","memory","cc","xmm1","xmm2","xmm4","xmm5","xmm6");
  else if(variant==3) __asm__ volatile(   /* separate decode registers per group */
   "mov $1,%%eax\n kmovw %%eax,%%k3\n"
   "1:\n lea %[codes],%%rdx\n lea %[q4],%%rdi\n lea %[corr],%%r10\n lea %[dd],%%r11\n mov $16,%%ecx\n"
   "2:\n vmovdqu32 (%%r10),%%zmm1%{%%k3%}%{z%}\n"
   "vpbroadcastq 18(%%rdx),%%zmm2\n vpbroadcastq 12(%%rdx),%%zmm5\n vpbroadcastq 6(%%rdx),%%zmm6\n vpbroadcastq 0(%%rdx),%%zmm7\n"
   "vpmultishiftqb %%zmm2,%%zmm13,%%zmm2\n vpmultishiftqb %%zmm5,%%zmm13,%%zmm5\n vpmultishiftqb %%zmm6,%%zmm13,%%zmm6\n vpmultishiftqb %%zmm7,%%zmm13,%%zmm7\n"
   "vpandd %%zmm2,%%zmm12,%%zmm2\n vpandd %%zmm5,%%zmm12,%%zmm5\n vpandd %%zmm6,%%zmm12,%%zmm6\n vpandd %%zmm7,%%zmm12,%%zmm7\n"
   "vpmulld %%zmm11,%%zmm2,%%zmm2\n vpmulld %%zmm11,%%zmm5,%%zmm5\n vpmulld %%zmm11,%%zmm6,%%zmm6\n vpmulld %%zmm11,%%zmm7,%%zmm7\n"
   "vpaddd %%zmm3,%%zmm2,%%zmm2\n vpaddd %%zmm3,%%zmm5,%%zmm5\n vpaddd %%zmm3,%%zmm6,%%zmm6\n vpaddd %%zmm3,%%zmm7,%%zmm7\n"
   "vpdpbusd 0(%%rdi),%%zmm2,%%zmm1\n vpdpbusd 64(%%rdi),%%zmm5,%%zmm1\n vpdpbusd 128(%%rdi),%%zmm6,%%zmm1\n vpdpbusd 192(%%rdi),%%zmm7,%%zmm1\n"
   "vcvtdq2ps %%zmm1,%%zmm1\n vfmadd231ps (%%r11)%{1to16%},%%zmm1,%%zmm19\n"
   "add $4,%%r10\n add $256,%%rdi\n add $24,%%rdx\n add $4,%%r11\n dec %%ecx\n jnz 2b\n"
   "dec %[n]\n jnz 1b\n"
   : [n]"+r"(n) : [codes]"m"(codes),[q4]"m"(q4),[corr]"m"(corr),[dd]"m"(dd) : "rax","rcx","rdx","rdi","r10","r11","memory","cc","k3","xmm1","xmm2","xmm5","xmm6","xmm7","xmm19");
  return (now()-t0)/(iters*16.0*4);   /* per group */
}
int main(){ for(int i=0;i<4096;i++)codes[i]=i*37; for(int i=0;i<16384;i++)q4[i]=i*11;
  for(int r=0;r<3;r++) for(int v=0;v<4;v++){ printf("variant %d: %.3f ns/group\n",v,run(v,2000000)*1e9);}
}
