/* faults.c: fault injection through the platform layer, the way SQLite's test VFS makes every
 * OS call replaceable. Compiled to something only by `configure.py --mode faults`
 * (ZC_PLAT_FAULTS), where it sits in front of posix.c's implementations (faults.h renames
 * those zc_px_real_*).
 *
 *   ZC_PLAT_FAULT=NAME:N[:RANK]  the Nth call (1-based) of zc_plat_NAME in this process fails
 *                                with ZC_PLAT_ERROR and errno EIO (only in the process whose
 *                                ZC_RANK is RANK, when given). A call that releases something
 *                                (shm_seal, shm_unmap, pages_free) does its work first and
 *                                then reports the failure, as an OS may.
 *   ZC_PLAT_FAULT_COUNT=1        at exit, prints "zc-fault-count: NAME CALLS" for every call
 *                                to stderr, so that a driver knows which N exist.
 * tests/test_faults.c drives it. */
#ifdef ZC_PLAT_FAULTS
#define _GNU_SOURCE
#include "faults.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZC_FAULT_CALLS(X)                                                                     \
    X(shm_create) X(shm_open) X(shm_seal) X(shm_unmap) X(pages_alloc) X(pages_free)           \
    X(tcp_listen) X(tcp_accept) X(tcp_connect) X(tcp_send_all) X(tcp_recv_all)                \
    X(tcp_recv_some) X(tcp_local_host) X(random) X(host_id) X(process_alive) X(mem_room)      \
    X(read_file)

enum {
#define ZC_F_ENUM(name) ZC_F_##name,
    ZC_FAULT_CALLS(ZC_F_ENUM) ZC_F_COUNT_
#undef ZC_F_ENUM
};

static const char *const zc_f_names[ZC_F_COUNT_] = {
#define ZC_F_NAME(name) #name,
    ZC_FAULT_CALLS(ZC_F_NAME)
#undef ZC_F_NAME
};

static unsigned long zc_f_calls[ZC_F_COUNT_];
static int zc_f_target = -1; /* the call to fail, or -1 */
static unsigned long zc_f_nth;
static pthread_once_t zc_f_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t zc_f_lock = PTHREAD_MUTEX_INITIALIZER;

static void zc_f_report(void) {
    for (int i = 0; i < ZC_F_COUNT_; i++)
        fprintf(stderr, "zc-fault-count: %s %lu\n", zc_f_names[i], zc_f_calls[i]);
}

/* Reads ZC_PLAT_FAULT and ZC_PLAT_FAULT_COUNT once. */
static void zc_f_setup(void) {
    const char *count = getenv("ZC_PLAT_FAULT_COUNT");
    if (count && strcmp(count, "1") == 0) atexit(zc_f_report);
    const char *spec = getenv("ZC_PLAT_FAULT"), *rank = getenv("ZC_RANK");
    char name[32];
    unsigned long nth = 0;
    long want_rank = -1;
    if (!spec || sscanf(spec, "%31[a-z_]:%lu:%ld", name, &nth, &want_rank) < 2 || nth == 0)
        return;
    if (want_rank >= 0 && (!rank || strtol(rank, NULL, 10) != want_rank)) return;
    for (int i = 0; i < ZC_F_COUNT_; i++)
        if (strcmp(name, zc_f_names[i]) == 0) zc_f_target = i;
    zc_f_nth = nth;
}

/* Counts a call of f; true when it is the one to fail. */
static int zc_f_hit(int f) {
    pthread_once(&zc_f_once, zc_f_setup);
    pthread_mutex_lock(&zc_f_lock);
    int hit = ++zc_f_calls[f] == zc_f_nth && f == zc_f_target;
    pthread_mutex_unlock(&zc_f_lock);
    if (hit) fprintf(stderr, "zc-fault: failing call %lu of zc_plat_%s\n", zc_f_nth,
                     zc_f_names[f]);
    return hit;
}

static zc_plat_rc zc_f_fail(void) {
    zc_px_set_os_error(EIO);
    return ZC_PLAT_ERROR;
}

/* A call that acquires: fails instead of running. */
#define ZC_F_BEFORE(name, call)                                                               \
    do {                                                                                      \
        if (zc_f_hit(ZC_F_##name)) return zc_f_fail();                                        \
        return call;                                                                          \
    } while (0)
/* A call that releases: runs, then reports the failure. */
#define ZC_F_AFTER(name, call)                                                                \
    do {                                                                                      \
        zc_plat_rc rc_ = call;                                                                \
        return zc_f_hit(ZC_F_##name) ? zc_f_fail() : rc_;                                     \
    } while (0)

zc_plat_rc zc_plat_shm_create(const char *name, size_t bytes, void **addr_out,
                              zc_plat_shm_ref *ref_out) {
    ZC_F_BEFORE(shm_create, zc_px_real_shm_create(name, bytes, addr_out, ref_out));
}
zc_plat_rc zc_plat_shm_open(const zc_plat_shm_ref *ref, size_t bytes, void **addr_out) {
    ZC_F_BEFORE(shm_open, zc_px_real_shm_open(ref, bytes, addr_out));
}
zc_plat_rc zc_plat_shm_seal(zc_plat_shm_ref *ref) {
    ZC_F_AFTER(shm_seal, zc_px_real_shm_seal(ref));
}
zc_plat_rc zc_plat_shm_unmap(void *addr, size_t bytes) {
    ZC_F_AFTER(shm_unmap, zc_px_real_shm_unmap(addr, bytes));
}
zc_plat_rc zc_plat_pages_alloc(size_t bytes, void **addr_out) {
    ZC_F_BEFORE(pages_alloc, zc_px_real_pages_alloc(bytes, addr_out));
}
zc_plat_rc zc_plat_pages_free(void *addr, size_t bytes) {
    ZC_F_AFTER(pages_free, zc_px_real_pages_free(addr, bytes));
}
zc_plat_rc zc_plat_tcp_listen(const char *host, uint16_t port, int *sock_out,
                              uint16_t *port_out) {
    ZC_F_BEFORE(tcp_listen, zc_px_real_tcp_listen(host, port, sock_out, port_out));
}
zc_plat_rc zc_plat_tcp_accept(int listen_sock, uint64_t deadline_ns, int *sock_out) {
    ZC_F_BEFORE(tcp_accept, zc_px_real_tcp_accept(listen_sock, deadline_ns, sock_out));
}
zc_plat_rc zc_plat_tcp_connect(const char *host, uint16_t port, uint64_t deadline_ns,
                               int *sock_out) {
    ZC_F_BEFORE(tcp_connect, zc_px_real_tcp_connect(host, port, deadline_ns, sock_out));
}
zc_plat_rc zc_plat_tcp_send_all(int sock, const void *buf, size_t bytes, uint64_t deadline_ns) {
    ZC_F_BEFORE(tcp_send_all, zc_px_real_tcp_send_all(sock, buf, bytes, deadline_ns));
}
zc_plat_rc zc_plat_tcp_recv_all(int sock, void *buf, size_t bytes, uint64_t deadline_ns) {
    ZC_F_BEFORE(tcp_recv_all, zc_px_real_tcp_recv_all(sock, buf, bytes, deadline_ns));
}
zc_plat_rc zc_plat_tcp_recv_some(int sock, void *buf, size_t cap, size_t *got_out) {
    if (got_out) *got_out = 0;
    ZC_F_BEFORE(tcp_recv_some, zc_px_real_tcp_recv_some(sock, buf, cap, got_out));
}
zc_plat_rc zc_plat_tcp_local_host(int sock, char *buf, size_t cap) {
    ZC_F_BEFORE(tcp_local_host, zc_px_real_tcp_local_host(sock, buf, cap));
}
zc_plat_rc zc_plat_random(void *buf, size_t bytes) {
    ZC_F_BEFORE(random, zc_px_real_random(buf, bytes));
}
zc_plat_rc zc_plat_host_id(char *buf, size_t cap) {
    ZC_F_BEFORE(host_id, zc_px_real_host_id(buf, cap));
}
zc_plat_rc zc_plat_process_alive(uint64_t pid) {
    ZC_F_BEFORE(process_alive, zc_px_real_process_alive(pid));
}
zc_plat_rc zc_plat_mem_room(zc_plat_room *out) {
    ZC_F_BEFORE(mem_room, zc_px_real_mem_room(out));
}
zc_plat_rc zc_plat_read_file(const char *path, void *buf, size_t cap, size_t *len_out) {
    ZC_F_BEFORE(read_file, zc_px_real_read_file(path, buf, cap, len_out));
}
#else
typedef int zc_faults_not_built; /* ISO C wants something in a translation unit */
#endif
