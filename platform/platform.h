/* platform.h: the only door from zcoll to the operating system.
 *
 * core/ and the transports reach the OS through these functions and nothing else (a build
 * check, check-symbols, holds them to it). One file implements them per port:
 * platform/posix.c (Linux) and platform/freestanding.c (every service is a hook the integrator
 * installs with zc_plat_install_hooks). This header includes nothing of zcoll's; results are
 * zc_plat_rc values and the OS's own error number is kept per thread, read with
 * zc_plat_os_error().
 *
 * Time is monotonic nanoseconds. A "deadline_ns" is an absolute zc_plat_now_ns() value; a
 * call given a deadline returns ZC_PLAT_TIMEOUT when it passes, never later than that by more
 * than a scheduling quantum. Shared memory and listening sockets are for init-time use. */
#ifndef ZC_PLATFORM_H
#define ZC_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zc_plat_rc {
    ZC_PLAT_OK = 0,
    ZC_PLAT_TIMEOUT = -1,   /* the deadline passed */
    ZC_PLAT_AGAIN = -2,     /* nothing available now (non-blocking call) */
    ZC_PLAT_CLOSED = -3,    /* the peer closed the connection */
    ZC_PLAT_REFUSED = -4,   /* nobody listens at that address */
    ZC_PLAT_EXISTS = -5,    /* a shared-memory segment of that name exists already */
    ZC_PLAT_NOT_FOUND = -6, /* no such segment / host / variable */
    ZC_PLAT_INVALID = -7,   /* bad argument (name too long, zero size, bad address) */
    ZC_PLAT_UNSUPPORTED = -8, /* this port has no such service (hook not installed) */
    ZC_PLAT_ERROR = -9      /* the OS call failed: zc_plat_os_error() says why */
} zc_plat_rc;

/* Short name of a result ("ZC_PLAT_TIMEOUT"); never NULL. */
const char *zc_plat_rc_name(zc_plat_rc rc);
/* The OS error number of this thread's last failed platform call (errno on POSIX), 0 if none. */
int zc_plat_os_error(void);
/* Writes a NUL-terminated description of an OS error number into buf (cap > 0). */
void zc_plat_os_error_text(int os_error, char *buf, size_t cap);

/* ---- time and scheduling ---- */
uint64_t zc_plat_now_ns(void);          /* monotonic clock, ns; never a system call on Linux */
void zc_plat_cpu_relax(void);           /* spin-wait hint (pause) */
void zc_plat_yield(void);               /* give the CPU to another runnable thread */
/* CPUs this process may run on (0 = unknown); with mask (ZC_PLAT_CPU_WORDS words, may be NULL)
 * which ones: bit c % 256 for CPU c, all zero where the platform cannot say. */
#define ZC_PLAT_CPU_WORDS 4u
uint32_t zc_plat_cpus(uint64_t *mask);
void zc_plat_sleep_ns(uint64_t ns);     /* sleep at least ns (blocks: init/tests only) */

/* ---- shared memory between the processes of one host (init-time only) ----
 * create makes a new segment of bytes, zero-filled, with every page reserved now (a backing
 * store that cannot hold it fails here with the OS's error, never later with a fault on first
 * touch) and its size fixed for good (no process holding it can shrink it under a peer's
 * mapping, or grow it), maps it read-write and fills *ref with what another process of this
 * host needs to map it. name (up to 62 of [A-Za-z0-9._-], after an optional '/') only labels
 * the segment for diagnostics (/proc/PID/maps on Linux); it is never a name in a file system,
 * so a process that dies at any moment leaves nothing behind. open maps the segment of a ref
 * made by another (or this) process, which must be at least bytes long and of a fixed size
 * (ZC_PLAT_INVALID otherwise: a ref may come from a hostile peer); it fails with
 * ZC_PLAT_NOT_FOUND once the creator has sealed it or exited. seal, by the creator only, gives
 * up the means to open the segment (mappings stay valid). unmap takes the address and size
 * that create/open returned. */
#define ZC_PLAT_SHM_REF_WORDS 4u
typedef struct zc_plat_shm_ref {
    uint64_t words[ZC_PLAT_SHM_REF_WORDS]; /* the port's own meaning (Linux: pid, fd, inode) */
} zc_plat_shm_ref;
zc_plat_rc zc_plat_shm_create(const char *name, size_t bytes, void **addr_out,
                              zc_plat_shm_ref *ref_out);
zc_plat_rc zc_plat_shm_open(const zc_plat_shm_ref *ref, size_t bytes, void **addr_out);
zc_plat_rc zc_plat_shm_seal(zc_plat_shm_ref *ref);
zc_plat_rc zc_plat_shm_unmap(void *addr, size_t bytes);

/* ---- private pages (init-time only) ----
 * pages_alloc maps bytes (> 0, rounded up to whole pages) of zero-filled, page-aligned,
 * read-write memory private to this process (a transport's registered rings and staging);
 * pages_free takes the address and size that pages_alloc returned. */
zc_plat_rc zc_plat_pages_alloc(size_t bytes, void **addr_out);
zc_plat_rc zc_plat_pages_free(void *addr, size_t bytes);

/* ---- TCP (bootstrap and side channel) ----
 * Sockets are small non-negative integers; every socket is non-blocking inside. host is a
 * numeric IPv4 address or a name ("localhost"); port 0 in listen picks a free port, returned in
 * *port_out. connect fails fast with ZC_PLAT_REFUSED when nothing listens. accept/connect/
 * send_all/recv_all return ZC_PLAT_TIMEOUT at the deadline (deadline 0: try once, then
 * ZC_PLAT_AGAIN instead of waiting). recv_some never waits: it returns ZC_PLAT_AGAIN with
 * *got_out == 0 when no byte is there, ZC_PLAT_CLOSED at end of stream. */
zc_plat_rc zc_plat_tcp_listen(const char *host, uint16_t port, int *sock_out,
                              uint16_t *port_out);
zc_plat_rc zc_plat_tcp_accept(int listen_sock, uint64_t deadline_ns, int *sock_out);
zc_plat_rc zc_plat_tcp_connect(const char *host, uint16_t port, uint64_t deadline_ns,
                               int *sock_out);
zc_plat_rc zc_plat_tcp_send_all(int sock, const void *buf, size_t bytes, uint64_t deadline_ns);
zc_plat_rc zc_plat_tcp_recv_all(int sock, void *buf, size_t bytes, uint64_t deadline_ns);
zc_plat_rc zc_plat_tcp_recv_some(int sock, void *buf, size_t cap, size_t *got_out);
void zc_plat_tcp_close(int sock);
/* The numeric host (IPv4 dotted quad) of this end of a connected socket: the address a peer
 * reached this process at, so a listener there is reachable the same way. */
zc_plat_rc zc_plat_tcp_local_host(int sock, char *buf, size_t cap);
/* Closes a file descriptor another layer handed over (a GPU buffer's dma-buf export). */
void zc_plat_fd_close(int fd);

/* ---- process and host ---- */
/* Value of an environment variable, or NULL when unset. The pointer stays valid until the
 * environment changes. */
const char *zc_plat_getenv(const char *name);
/* Fills buf with bytes from the OS's cryptographic random source. */
zc_plat_rc zc_plat_random(void *buf, size_t bytes);
/* A NUL-terminated identity of this host (same string for every process of one boot of one
 * machine, different across machines): hostname plus boot id on Linux. */
zc_plat_rc zc_plat_host_id(char *buf, size_t cap);
/* This process's id. */
uint64_t zc_plat_process_id(void);
/* ZC_PLAT_OK if the process of that id (on this host) is alive, ZC_PLAT_NOT_FOUND if it has
 * exited (zombies count as exited). */
zc_plat_rc zc_plat_process_alive(uint64_t pid);

/* ---- what this process may take (init-time only) ----
 * mem_room: how many more bytes of memory the process may take before something stops it (the
 * tighter of its memory cgroup's limit, every ancestor's included, less what the cgroup holds,
 * and the host's MemAvailable), and how many it may still lock, as a NIC's registration does
 * (RLIMIT_MEMLOCK less what is pinned already; no limit with CAP_IPC_LOCK). Each is UINT64_MAX
 * when there is no limit or the port cannot tell; avail_from says which bound avail_bytes. */
typedef enum zc_plat_room_from {
    ZC_PLAT_ROOM_UNKNOWN = 0, ZC_PLAT_ROOM_CGROUP = 1, ZC_PLAT_ROOM_HOST = 2
} zc_plat_room_from;
typedef struct zc_plat_room {
    uint64_t avail_bytes; /* memory it may still take */
    uint64_t lock_bytes;  /* memory it may still lock (register with a device) */
    uint32_t avail_from;  /* zc_plat_room_from */
    uint32_t pad_;
} zc_plat_room;
zc_plat_rc zc_plat_mem_room(zc_plat_room *out);
/* Reads the file at path (at most cap bytes; a longer one is ZC_PLAT_INVALID) into buf and its
 * length into *len_out: a secret the operator keeps in a file. */
zc_plat_rc zc_plat_read_file(const char *path, void *buf, size_t cap, size_t *len_out);

/* ---- diagnostics ---- */
typedef enum zc_plat_log_level {
    ZC_PLAT_LOG_ERROR = 0, ZC_PLAT_LOG_WARN = 1, ZC_PLAT_LOG_INFO = 2, ZC_PLAT_LOG_DEBUG = 3
} zc_plat_log_level;
/* One line to the log sink (stderr on POSIX, "zcoll: " prefixed). Messages above the level in
 * ZC_LOG (error|warn|info|debug, default warn) are dropped. */
void zc_plat_log(zc_plat_log_level level, const char *line);
/* Reports an internal invariant failure and ends the process (abort on POSIX). */
_Noreturn void zc_plat_panic(const char *file, int line, const char *what);

/* ---- the freestanding port's hooks ----
 * platform/freestanding.c implements every function above by calling these; a hook left NULL
 * makes its functions return ZC_PLAT_UNSUPPORTED (or 0 / nothing). posix.c ignores them. */
typedef struct zc_plat_hooks {
    uint32_t struct_bytes;       /* sizeof(zc_plat_hooks), for forward compatibility */
    void *user;                  /* passed back to every hook */
    uint64_t (*now_ns)(void *user);
    void (*cpu_relax)(void *user);
    void (*yield)(void *user);
    void (*sleep_ns)(void *user, uint64_t ns);
    zc_plat_rc (*shm_create)(void *user, const char *name, size_t bytes, void **addr_out,
                             zc_plat_shm_ref *ref_out);
    zc_plat_rc (*shm_open)(void *user, const zc_plat_shm_ref *ref, size_t bytes,
                           void **addr_out);
    zc_plat_rc (*shm_seal)(void *user, zc_plat_shm_ref *ref);
    zc_plat_rc (*shm_unmap)(void *user, void *addr, size_t bytes);
    zc_plat_rc (*tcp_listen)(void *user, const char *host, uint16_t port, int *sock_out,
                             uint16_t *port_out);
    zc_plat_rc (*tcp_accept)(void *user, int listen_sock, uint64_t deadline_ns, int *sock_out);
    zc_plat_rc (*tcp_connect)(void *user, const char *host, uint16_t port,
                              uint64_t deadline_ns, int *sock_out);
    zc_plat_rc (*tcp_send_all)(void *user, int sock, const void *buf, size_t bytes,
                               uint64_t deadline_ns);
    zc_plat_rc (*tcp_recv_all)(void *user, int sock, void *buf, size_t bytes,
                               uint64_t deadline_ns);
    zc_plat_rc (*tcp_recv_some)(void *user, int sock, void *buf, size_t cap, size_t *got_out);
    void (*tcp_close)(void *user, int sock);
    const char *(*getenv)(void *user, const char *name);
    zc_plat_rc (*random)(void *user, void *buf, size_t bytes);
    zc_plat_rc (*host_id)(void *user, char *buf, size_t cap);
    uint64_t (*process_id)(void *user);
    zc_plat_rc (*process_alive)(void *user, uint64_t pid);
    int (*os_error)(void *user);
    void (*log)(void *user, zc_plat_log_level level, const char *line);
    void (*panic)(void *user, const char *file, int line, const char *what); /* must not return */
    uint32_t (*cpus)(void *user);
    zc_plat_rc (*pages_alloc)(void *user, size_t bytes, void **addr_out);
    zc_plat_rc (*pages_free)(void *user, void *addr, size_t bytes);
    void (*fd_close)(void *user, int fd);
    zc_plat_rc (*mem_room)(void *user, zc_plat_room *out);
    zc_plat_rc (*read_file)(void *user, const char *path, void *buf, size_t cap,
                            size_t *len_out);
    zc_plat_rc (*tcp_local_host)(void *user, int sock, char *buf, size_t cap);
} zc_plat_hooks;

/* Installs the hooks (copied). Freestanding port only; call before any other zcoll function. */
void zc_plat_install_hooks(const zc_plat_hooks *hooks);

#ifdef __cplusplus
}
#endif
#endif /* ZC_PLATFORM_H */
