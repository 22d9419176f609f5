/* board.h: what the bare-metal board (platform/baremetal/board.c, QEMU virt, aarch64) offers
 * the one program it hosts, and what that program supplies. The board owns the UART, the
 * generic timer, PSCI and the exit; it installs zcoll's freestanding hooks before calling
 * zc_app_main. */
#ifndef ZC_BOARD_H
#define ZC_BOARD_H

#include <stdint.h>

/* Writes a NUL-terminated string to the PL011 UART (no newline added). */
void zc_board_puts(const char *s);
/* Monotonic nanoseconds from the Arm generic timer (CNTVCT_EL0 / CNTFRQ_EL0). */
uint64_t zc_board_now_ns(void);
/* Prints "zc-board: exit N" and ends the emulation with status code: semihosting SYS_EXIT
 * (QEMU run with -semihosting exits with code), else PSCI SYSTEM_OFF. */
_Noreturn void zc_board_exit(int code);
/* Powers on core cpu (1..) through PSCI CPU_ON; it runs fn(cpu) on its own stack with FP,
 * MMU and caches on, then parks. Returns 0, or the PSCI error (negative). */
int zc_board_start_cpu(uint32_t cpu, void (*fn)(uint32_t cpu));

/* The program: called on core 0 once the hooks are installed; returns the exit status. */
int zc_app_main(void);

#endif /* ZC_BOARD_H */
