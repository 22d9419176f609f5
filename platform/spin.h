/* spin.h: the spin-wait hint both ports use (posix.c's zc_plat_cpu_relax, and freestanding.c's
 * when no cpu_relax hook is installed): one instruction that tells the core this thread polls
 * (x86 pause, Arm yield), a compiler barrier elsewhere. No OS, no libc: safe freestanding. */
#ifndef ZC_PLATFORM_SPIN_H
#define ZC_PLATFORM_SPIN_H

static inline void zc_plat_spin_hint(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

#endif
