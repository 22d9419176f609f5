/* board.c: the board file of the bare-metal aarch64 port (QEMU `-M virt`, no firmware, no OS),
 * the worked example of what a firmware team writes to host zcoll (platform/freestanding.c's
 * guide). It installs three freestanding hooks and nothing else: now_ns from the Arm generic
 * timer, log to the PL011 UART, panic (print, then exit non-zero). Every other zc_plat_*
 * service stays unsupported: the in-process transport needs none of them. It also owns the
 * core's C entry from start.S, the fault report, secondary cores (PSCI CPU_ON) and the exit
 * (semihosting SYS_EXIT, PSCI SYSTEM_OFF as the fallback).
 * Must not: call libc (there is none), allocate, or take an interrupt (none is enabled). */
#include "board.h"
#include "platform.h"

#include <stdbool.h>
#include <stddef.h>

#define BOARD_UART_BASE 0x09000000ul     /* QEMU virt's PL011 */
#define BOARD_UART_DR 0x00u              /* data register */
#define BOARD_UART_FR 0x18u              /* flag register */
#define BOARD_UART_FR_TXFF (1u << 5)     /* transmit FIFO full */
#define BOARD_PSCI_CPU_ON 0xc4000003ul   /* SMC64 function ids, through HVC on QEMU virt */
#define BOARD_PSCI_SYSTEM_OFF 0x84000008ul
#define BOARD_SEMIHOST_EXIT 0x18ul       /* SYS_EXIT */
#define BOARD_SEMIHOST_APP_EXIT 0x20026ul /* ADP_Stopped_ApplicationExit */

void zc_board_main(uint64_t cpu);
_Noreturn void zc_board_fault(uint64_t vector, uint64_t esr, uint64_t elr, uint64_t far);
extern char zc_board_secondary_entry[]; /* start.S */

/* ---- UART ---- */

static void board_putc(char c) {
    volatile uint32_t *fr = (volatile uint32_t *)(BOARD_UART_BASE + BOARD_UART_FR);
    volatile uint32_t *dr = (volatile uint32_t *)(BOARD_UART_BASE + BOARD_UART_DR);
    while (*fr & BOARD_UART_FR_TXFF) {
    }
    *dr = (uint32_t)(unsigned char)c;
}

void zc_board_puts(const char *s) {
    for (; *s; s++) {
        if (*s == '\n') board_putc('\r');
        board_putc(*s);
    }
}

/* Decimal or hex (with 0x) of v. */
static void board_put_u64(uint64_t v, unsigned base) {
    char d[24];
    size_t n = 0;
    do {
        d[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    if (base == 16) zc_board_puts("0x");
    while (n) board_putc(d[--n]);
}

/* ---- clock ---- */

uint64_t zc_board_now_ns(void) {
    uint64_t cnt, frq;
    __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(cnt) :: "memory");
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(frq));
    return cnt / frq * 1000000000ull + cnt % frq * 1000000000ull / frq;
}

/* ---- exit, PSCI ---- */

static uint64_t board_hvc(uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3) {
    register uint64_t x0 __asm__("x0") = fn;
    register uint64_t x1 __asm__("x1") = a1;
    register uint64_t x2 __asm__("x2") = a2;
    register uint64_t x3 __asm__("x3") = a3;
    __asm__ __volatile__("hvc #0" : "+r"(x0), "+r"(x1), "+r"(x2), "+r"(x3) :: "memory");
    return x0;
}

static volatile bool board_exiting;

_Noreturn void zc_board_exit(int code) {
    if (!board_exiting) { /* a second call comes from a fault in the semihosting trap */
        board_exiting = true;
        zc_board_puts("zc-board: exit ");
        board_put_u64((uint64_t)(uint32_t)code, 10);
        zc_board_puts("\n");
        uint64_t block[2] = {BOARD_SEMIHOST_APP_EXIT, (uint64_t)(uint32_t)code};
        register uint64_t x0 __asm__("x0") = BOARD_SEMIHOST_EXIT;
        register uint64_t x1 __asm__("x1") = (uint64_t)(uintptr_t)block;
        __asm__ __volatile__("hlt #0xf000" : "+r"(x0) : "r"(x1) : "memory");
    }
    (void)board_hvc(BOARD_PSCI_SYSTEM_OFF, 0, 0, 0);
    for (;;) __asm__ __volatile__("wfe");
}

static void (*volatile board_secondary_fn)(uint32_t);

int zc_board_start_cpu(uint32_t cpu, void (*fn)(uint32_t cpu)) {
    board_secondary_fn = fn;
    __asm__ __volatile__("dsb sy" ::: "memory");
    uint64_t rc = board_hvc(BOARD_PSCI_CPU_ON, cpu, (uint64_t)(uintptr_t)zc_board_secondary_entry,
                            cpu);
    return (int)(int64_t)rc;
}

/* ---- faults ---- */

_Noreturn void zc_board_fault(uint64_t vector, uint64_t esr, uint64_t elr, uint64_t far) {
    static const char *const from[4] = {"EL1 with SP_EL0", "EL1", "EL0 (64-bit)",
                                        "EL0 (32-bit)"};
    static const char *const kind[4] = {"synchronous", "IRQ", "FIQ", "SError"};
    zc_board_puts("\nzc-board: FAULT: ");
    zc_board_puts(kind[vector % 4]);
    zc_board_puts(" exception from ");
    zc_board_puts(from[vector / 4 % 4]);
    zc_board_puts(": ESR_EL1 ");
    board_put_u64(esr, 16);
    zc_board_puts(" (class ");
    board_put_u64(esr >> 26, 16);
    zc_board_puts(") ELR_EL1 ");
    board_put_u64(elr, 16);
    zc_board_puts(" FAR_EL1 ");
    board_put_u64(far, 16);
    zc_board_puts("\n");
    zc_board_exit(70);
}

/* ---- the hooks ---- */

static uint64_t board_hook_now_ns(void *user) {
    (void)user;
    return zc_board_now_ns();
}

static void board_hook_log(void *user, zc_plat_log_level level, const char *line) {
    (void)user;
    static const char *const names[4] = {"error", "warn", "info", "debug"};
    zc_board_puts("zcoll: ");
    zc_board_puts(names[(unsigned)level & 3u]);
    zc_board_puts(": ");
    zc_board_puts(line);
    zc_board_puts("\n");
}

static void board_hook_panic(void *user, const char *file, int line, const char *what) {
    (void)user;
    zc_board_puts("zcoll: PANIC at ");
    zc_board_puts(file);
    zc_board_puts(":");
    board_put_u64((uint64_t)(uint32_t)line, 10);
    zc_board_puts(": ");
    zc_board_puts(what);
    zc_board_puts("\n");
    zc_board_exit(71);
}

/* Called by start.S on every core with the MMU, caches and FP on. */
void zc_board_main(uint64_t cpu) {
    if (cpu != 0) {
        board_secondary_fn((uint32_t)cpu);
        for (;;) __asm__ __volatile__("wfe");
    }
    const zc_plat_hooks hooks = {
        .struct_bytes = sizeof(zc_plat_hooks),
        .now_ns = board_hook_now_ns,
        .log = board_hook_log,
        .panic = board_hook_panic,
    };
    zc_plat_install_hooks(&hooks);
    zc_board_exit(zc_app_main());
}
