/* CPU feature detection (cpuid + xgetbv) and the once-chosen active ISA. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

#if (defined(__x86_64__) || defined(__i386__))
/* Linux hands out the 8 KiB tile data state only on request (XFEATURE_XTILEDATA = 18); a kernel
 * that refuses (or predates it) leaves AMX off and every caller on the AVX-512 kernels. */
static int amx_permit(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return 0;
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) != 0) return 0;
    return (perm >> XFEATURE_XTILEDATA) & 1;
#else
    return 0;
#endif
}
#endif

static tcq_cpu_features g_cpu;
static tcq_isa g_isa;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void cpu_detect(tcq_cpu_features *f)
{
    memset(f, 0, sizeof *f);
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const int osxsave = (c >> 27) & 1;
    f->fma = (c >> 12) & 1;
    f->f16c = (c >> 29) & 1;
    if (osxsave) {
        /* The OS must save XMM|YMM (bits 1,2) for AVX and also opmask|ZMM (bits 5,6,7). */
        const uint64_t xcr0 = xgetbv0();
        f->os_avx = (xcr0 & 0x6) == 0x6;
        f->os_avx512 = f->os_avx && (xcr0 & 0xe0) == 0xe0;
    }
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = (b >> 5) & 1;
    f->avx512f = (b >> 16) & 1;
    f->avx512dq = (b >> 17) & 1;
    f->avx512bw = (b >> 30) & 1;
    f->avx512vl = (b >> 31) & 1;
    f->avx512vbmi = (c >> 1) & 1;
    f->avx512vbmi2 = (c >> 6) & 1;
    f->avx512vnni = (c >> 11) & 1;
    f->avx512fp16 = (d >> 23) & 1;
    const int amx = ((d >> 24) & 1) && ((d >> 25) & 1);   /* AMX-TILE, AMX-INT8 */
    __cpuid_count(7, 1, a, b, c, d);
    f->avx512bf16 = (a >> 5) & 1;
    f->avxvnni = (a >> 4) & 1;
    f->amx_int8 = amx && osxsave && (xgetbv0() & (3u << 17)) == (3u << 17) && amx_permit();
    if (!f->os_avx) f->avx2 = f->fma = f->f16c = f->avxvnni = 0;
    if (!f->os_avx512) {
        f->avx512f = f->avx512dq = f->avx512bw = f->avx512vl = 0;
        f->avx512vbmi = f->avx512vbmi2 = f->avx512vnni = f->avx512bf16 = f->avx512fp16 = 0;
        f->amx_int8 = 0;
    }
#endif
}

static int isa_supported(const tcq_cpu_features *f, tcq_isa isa)
{
    switch (isa) {
    case TCQ_ISA_SCALAR: return 1;
    case TCQ_ISA_AVX2: return f->avx2 && f->fma && f->f16c;
    case TCQ_ISA_AVX512:
        return isa_supported(f, TCQ_ISA_AVX2) && f->avx512f && f->avx512bw && f->avx512dq &&
               f->avx512vl;
    default: return 0;
    }
}

static void cpu_init(void)
{
    cpu_detect(&g_cpu);
    g_isa = TCQ_ISA_SCALAR;
    for (int i = TCQ_ISA_COUNT - 1; i >= 0; i--)
        if (isa_supported(&g_cpu, (tcq_isa)i)) {
            g_isa = (tcq_isa)i;
            break;
        }
    const char *pin = getenv("TCQ_ISA");
    if (pin && *pin) {
        tcq_isa want;
        if (tcq_isa_parse(pin, &want) != TCQ_OK)
            fprintf(stderr, "tcq: TCQ_ISA=%s is not scalar|avx2|avx512; using %s\n", pin,
                    tcq_isa_name(g_isa));
        else if (!isa_supported(&g_cpu, want))
            fprintf(stderr, "tcq: TCQ_ISA=%s is not supported by this CPU; using %s\n", pin,
                    tcq_isa_name(g_isa));
        else
            g_isa = want;
    }
}

const tcq_cpu_features *tcq_cpu(void)
{
    pthread_once(&g_once, cpu_init);
    return &g_cpu;
}

tcq_isa tcq_isa_active(void)
{
    pthread_once(&g_once, cpu_init);
    return g_isa;
}

tcq_status tcq_isa_set(tcq_isa isa)
{
    pthread_once(&g_once, cpu_init);
    if (!isa_supported(&g_cpu, isa))
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "ISA %s is not supported by this CPU", tcq_isa_name(isa));
    g_isa = isa;
    return TCQ_OK;
}

const char *tcq_isa_name(tcq_isa isa)
{
    switch (isa) {
    case TCQ_ISA_SCALAR: return "scalar";
    case TCQ_ISA_AVX2: return "avx2";
    case TCQ_ISA_AVX512: return "avx512";
    default: return "?";
    }
}

tcq_status tcq_isa_parse(const char *name, tcq_isa *out)
{
    for (int i = 0; i < TCQ_ISA_COUNT; i++)
        if (name && strcmp(name, tcq_isa_name((tcq_isa)i)) == 0) {
            *out = (tcq_isa)i;
            return TCQ_OK;
        }
    return tcq_fail(TCQ_ERR_INVALID_ARG, "unknown ISA '%s' (want scalar|avx2|avx512)",
                    name ? name : "(null)");
}
