/* freestanding.c: the port of platform.h for targets without an OS, or with one zcoll does not
 * know (firmware, an RTOS, a unikernel, a host with its own allocator and sockets). Every
 * zc_plat_* function forwards to a hook that the integrator supplies; this file includes no
 * libc header and calls no libc function.
 *
 * Integrator's guide:
 *   1. Build zcoll's core/ and transport_shm/ with this file instead of platform/posix.c, using
 *      -ffreestanding; provide memcpy/memset/memmove/memcmp (the compiler may emit them).
 *   2. Fill a zc_plat_hooks: set struct_bytes = sizeof(zc_plat_hooks) and user = your context
 *      (passed back as every hook's first argument); leave a hook NULL when the service is
 *      absent. Hook contracts are those of the matching zc_plat_* function in platform.h.
 *   3. Call zc_plat_install_hooks(&hooks) once, before any other zcoll call and before any
 *      thread uses zcoll. The struct is copied; yours may be discarded. Installing again
 *      replaces all hooks (not thread-safe against concurrent zcoll calls).
 *   4. Minimum for a working communicator: now_ns (deadlines), panic, log; shm_* for the
 *      shared-memory wire in process mode; tcp_* for the bootstrap; random for the job secret;
 *      pages_* for transport_ib (its registered rings and staging slots); mem_room so that
 *      init refuses windows the memory cannot hold (without it nothing is checked); read_file
 *      for ZC_SECRET_FILE.
 *   Missing hooks: result functions return ZC_PLAT_UNSUPPORTED, now_ns/process_id/os_error
 *   return 0, cpus returns 0 (unknown), getenv returns NULL, log drops the line, cpu_relax
 *   falls back to a pause instruction, sleep_ns spins on now_ns (if installed), and panic
 *   traps and spins forever.
 *   A hooks struct from an older zcoll (smaller struct_bytes) is accepted: the fields it lacks
 *   stay NULL. (struct_bytes guards fields added at the end only: in 0.1 the shm hooks took
 *   their present form, a ref instead of a name, and shm_seal replaced shm_unlink.)
 *
 * Worked example: platform/baremetal/ hosts zcoll on a 64-bit Arm core with no OS at all
 * (QEMU virt, `ninja check-baremetal`). Its board file, board.c, is what a firmware team
 * writes: three hooks, nothing else, enough for the in-process transport (every rank in one
 * address space, on one core or one per core):
 *       static uint64_t now(void *u) { return cntvct / cntfrq in ns; }    generic timer
 *       static void log(void *u, zc_plat_log_level l, const char *line)   PL011 UART
 *       static void panic(void *u, const char *file, int line, const char *what)
 *                                                     print, then end (semihosting exit)
 *       zc_plat_hooks h = {.struct_bytes = sizeof h, .now_ns = now, .log = log,
 *                          .panic = panic};
 *       zc_plat_install_hooks(&h);                    then zc_comm_init_inproc, ...
 *   Around it: start.S (stack, BSS, FP/SIMD enabled because the reductions use floating point,
 *   MMU on so atomics and unaligned copies behave, a vector that prints faults), link.ld, and
 *   mem.c (memcpy/memset/memmove/memcmp, the only C library the core calls). The image links
 *   -nostdlib: libgcc is its only library (tests/ref.c's 128-bit division); a check lists the
 *   image's symbols to prove no libc came in.
 * Must not: include libc headers, allocate, or keep state beyond the installed hooks. */
#include "platform.h"
#include "spin.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static zc_plat_hooks zc_fs_hooks;

void zc_plat_install_hooks(const zc_plat_hooks *hooks) {
    zc_fs_hooks = (zc_plat_hooks){0};
    if (!hooks) return;
    size_t n = hooks->struct_bytes < sizeof zc_fs_hooks ? hooks->struct_bytes : sizeof zc_fs_hooks;
    __builtin_memcpy(&zc_fs_hooks, hooks, n);
    zc_fs_hooks.struct_bytes = (uint32_t)sizeof zc_fs_hooks;
}

/* ---- results and OS errors ------------------------------------------------------------- */

const char *zc_plat_rc_name(zc_plat_rc rc) {
    switch (rc) {
    case ZC_PLAT_OK: return "ZC_PLAT_OK";
    case ZC_PLAT_TIMEOUT: return "ZC_PLAT_TIMEOUT";
    case ZC_PLAT_AGAIN: return "ZC_PLAT_AGAIN";
    case ZC_PLAT_CLOSED: return "ZC_PLAT_CLOSED";
    case ZC_PLAT_REFUSED: return "ZC_PLAT_REFUSED";
    case ZC_PLAT_EXISTS: return "ZC_PLAT_EXISTS";
    case ZC_PLAT_NOT_FOUND: return "ZC_PLAT_NOT_FOUND";
    case ZC_PLAT_INVALID: return "ZC_PLAT_INVALID";
    case ZC_PLAT_UNSUPPORTED: return "ZC_PLAT_UNSUPPORTED";
    case ZC_PLAT_ERROR: return "ZC_PLAT_ERROR";
    }
    return "ZC_PLAT_UNKNOWN";
}

int zc_plat_os_error(void) {
    return zc_fs_hooks.os_error ? zc_fs_hooks.os_error(zc_fs_hooks.user) : 0;
}

/* No strerror here: the text is "os error <number>", truncated to cap. */
void zc_plat_os_error_text(int os_error, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    static const char head[] = "os error ";
    char digits[12];
    size_t nd = 0;
    bool negative = os_error < 0;
    /* Work on the negative value so INT_MIN needs no special case. */
    int v = negative ? os_error : -os_error;
    do {
        digits[nd++] = (char)('0' - v % 10);
        v /= 10;
    } while (v != 0 && nd < sizeof digits);
    size_t used = 0;
    for (size_t i = 0; head[i] && used + 1 < cap; i++) buf[used++] = head[i];
    if (negative && used + 1 < cap) buf[used++] = '-';
    while (nd > 0 && used + 1 < cap) buf[used++] = digits[--nd];
    buf[used] = '\0';
}

/* ---- time and scheduling ----------------------------------------------------------------- */

uint64_t zc_plat_now_ns(void) {
    return zc_fs_hooks.now_ns ? zc_fs_hooks.now_ns(zc_fs_hooks.user) : 0;
}

void zc_plat_cpu_relax(void) {
    if (zc_fs_hooks.cpu_relax) {
        zc_fs_hooks.cpu_relax(zc_fs_hooks.user);
        return;
    }
    zc_plat_spin_hint();
}

uint32_t zc_plat_cpus(uint64_t *mask) {
    for (uint32_t i = 0; mask && i < ZC_PLAT_CPU_WORDS; i++) mask[i] = 0; /* which: unknown */
    return zc_fs_hooks.cpus ? zc_fs_hooks.cpus(zc_fs_hooks.user) : 0;
}

void zc_plat_yield(void) {
    if (zc_fs_hooks.yield) zc_fs_hooks.yield(zc_fs_hooks.user);
    else zc_plat_cpu_relax();
}

void zc_plat_sleep_ns(uint64_t ns) {
    if (zc_fs_hooks.sleep_ns) {
        zc_fs_hooks.sleep_ns(zc_fs_hooks.user, ns);
        return;
    }
    if (!zc_fs_hooks.now_ns) return;
    /* Bounded by the clock: spin until ns have passed. */
    uint64_t start = zc_plat_now_ns();
    while (zc_plat_now_ns() - start < ns) zc_plat_cpu_relax();
}

/* ---- shared memory ----------------------------------------------------------------------- */

zc_plat_rc zc_plat_shm_create(const char *name, size_t bytes, void **addr_out,
                              zc_plat_shm_ref *ref_out) {
    if (!zc_fs_hooks.shm_create) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.shm_create(zc_fs_hooks.user, name, bytes, addr_out, ref_out);
}

zc_plat_rc zc_plat_shm_open(const zc_plat_shm_ref *ref, size_t bytes, void **addr_out) {
    if (!zc_fs_hooks.shm_open) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.shm_open(zc_fs_hooks.user, ref, bytes, addr_out);
}

zc_plat_rc zc_plat_shm_seal(zc_plat_shm_ref *ref) {
    if (!zc_fs_hooks.shm_seal) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.shm_seal(zc_fs_hooks.user, ref);
}

zc_plat_rc zc_plat_shm_unmap(void *addr, size_t bytes) {
    if (!zc_fs_hooks.shm_unmap) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.shm_unmap(zc_fs_hooks.user, addr, bytes);
}


/* ---- private pages ----------------------------------------------------------------------- */

zc_plat_rc zc_plat_pages_alloc(size_t bytes, void **addr_out) {
    if (!zc_fs_hooks.pages_alloc) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.pages_alloc(zc_fs_hooks.user, bytes, addr_out);
}

zc_plat_rc zc_plat_pages_free(void *addr, size_t bytes) {
    if (!zc_fs_hooks.pages_free) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.pages_free(zc_fs_hooks.user, addr, bytes);
}

/* ---- TCP --------------------------------------------------------------------------------- */

zc_plat_rc zc_plat_tcp_listen(const char *host, uint16_t port, int *sock_out,
                              uint16_t *port_out) {
    if (!zc_fs_hooks.tcp_listen) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.tcp_listen(zc_fs_hooks.user, host, port, sock_out, port_out);
}

zc_plat_rc zc_plat_tcp_accept(int listen_sock, uint64_t deadline_ns, int *sock_out) {
    if (!zc_fs_hooks.tcp_accept) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.tcp_accept(zc_fs_hooks.user, listen_sock, deadline_ns, sock_out);
}

zc_plat_rc zc_plat_tcp_connect(const char *host, uint16_t port, uint64_t deadline_ns,
                               int *sock_out) {
    if (!zc_fs_hooks.tcp_connect) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.tcp_connect(zc_fs_hooks.user, host, port, deadline_ns, sock_out);
}

zc_plat_rc zc_plat_tcp_send_all(int sock, const void *buf, size_t bytes, uint64_t deadline_ns) {
    if (!zc_fs_hooks.tcp_send_all) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.tcp_send_all(zc_fs_hooks.user, sock, buf, bytes, deadline_ns);
}

zc_plat_rc zc_plat_tcp_recv_all(int sock, void *buf, size_t bytes, uint64_t deadline_ns) {
    if (!zc_fs_hooks.tcp_recv_all) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.tcp_recv_all(zc_fs_hooks.user, sock, buf, bytes, deadline_ns);
}

zc_plat_rc zc_plat_tcp_recv_some(int sock, void *buf, size_t cap, size_t *got_out) {
    if (got_out) *got_out = 0;
    if (!zc_fs_hooks.tcp_recv_some) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.tcp_recv_some(zc_fs_hooks.user, sock, buf, cap, got_out);
}

zc_plat_rc zc_plat_tcp_local_host(int sock, char *buf, size_t cap) {
    if (!zc_fs_hooks.tcp_local_host) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.tcp_local_host(zc_fs_hooks.user, sock, buf, cap);
}

void zc_plat_tcp_close(int sock) {
    if (zc_fs_hooks.tcp_close) zc_fs_hooks.tcp_close(zc_fs_hooks.user, sock);
}

void zc_plat_fd_close(int fd) {
    if (zc_fs_hooks.fd_close) zc_fs_hooks.fd_close(zc_fs_hooks.user, fd);
}

/* ---- process and host -------------------------------------------------------------------- */

const char *zc_plat_getenv(const char *name) {
    return zc_fs_hooks.getenv ? zc_fs_hooks.getenv(zc_fs_hooks.user, name) : NULL;
}

zc_plat_rc zc_plat_random(void *buf, size_t bytes) {
    if (!zc_fs_hooks.random) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.random(zc_fs_hooks.user, buf, bytes);
}

zc_plat_rc zc_plat_host_id(char *buf, size_t cap) {
    if (buf && cap) buf[0] = '\0';
    if (!zc_fs_hooks.host_id) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.host_id(zc_fs_hooks.user, buf, cap);
}

uint64_t zc_plat_process_id(void) {
    return zc_fs_hooks.process_id ? zc_fs_hooks.process_id(zc_fs_hooks.user) : 0;
}

zc_plat_rc zc_plat_mem_room(zc_plat_room *out) {
    if (!out) return ZC_PLAT_INVALID;
    *out = (zc_plat_room){UINT64_MAX, UINT64_MAX, ZC_PLAT_ROOM_UNKNOWN, 0};
    if (!zc_fs_hooks.mem_room) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.mem_room(zc_fs_hooks.user, out);
}

zc_plat_rc zc_plat_read_file(const char *path, void *buf, size_t cap, size_t *len_out) {
    if (!zc_fs_hooks.read_file) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.read_file(zc_fs_hooks.user, path, buf, cap, len_out);
}

zc_plat_rc zc_plat_process_alive(uint64_t pid) {
    if (!zc_fs_hooks.process_alive) return ZC_PLAT_UNSUPPORTED;
    return zc_fs_hooks.process_alive(zc_fs_hooks.user, pid);
}

/* ---- diagnostics ------------------------------------------------------------------------- */

void zc_plat_log(zc_plat_log_level level, const char *line) {
    if (zc_fs_hooks.log) zc_fs_hooks.log(zc_fs_hooks.user, level, line);
}

_Noreturn void zc_plat_panic(const char *file, int line, const char *what) {
    if (zc_fs_hooks.panic) zc_fs_hooks.panic(zc_fs_hooks.user, file, line, what);
    /* No hook, or a hook that returned against its contract: stop here for good. */
    __builtin_trap();
    for (;;) {
    }
}
