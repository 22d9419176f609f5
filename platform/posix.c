/* posix.c: the Linux port of platform.h, the only file of zcoll that calls libc and the
 * kernel: monotonic clock, shared memory (memfd + mmap, opened by peers through /proc), private
 * pages (anonymous mmap, for transport_ib's registered memory), non-blocking IPv4 TCP with
 * deadlines (poll), environment, getrandom, host and process identity, stderr logging, panic.
 * errno stops here: every failure that comes from the OS leaves its errno in a per-thread slot
 * read by zc_plat_os_error(), and the caller sees only zc_plat_rc values.
 * Must not: allocate on the heap, start threads, or keep state beyond the per-thread errno and
 * the lazily read log level. zc_plat_install_hooks belongs to the freestanding port, not here.
 *
 * Deadline 0 means "try once": a transfer that would block returns ZC_PLAT_AGAIN at once. For
 * send_all/recv_all that try may already have moved part of the buffer, so deadline 0 there is
 * only for probing a connection whose stream position no longer matters. */
#define _GNU_SOURCE
#ifdef ZC_PLAT_FAULTS /* the faults build: platform/faults.c fronts the calls that can fail */
#define ZC_PX_RENAME
#include "faults.h"
#endif
#include "platform.h"
#include "spin.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- results and OS errors ------------------------------------------------------------- */

static _Thread_local int zc_px_errno;

/* Records the OS error of a failed call and returns rc (usually ZC_PLAT_ERROR). */
static zc_plat_rc zc_px_fail(zc_plat_rc rc, int os_error) {
    zc_px_errno = os_error;
    return rc;
}

#define ZC_PLAT_RC_MAP(X)                                                                     \
    X(ZC_PLAT_OK) X(ZC_PLAT_TIMEOUT) X(ZC_PLAT_AGAIN) X(ZC_PLAT_CLOSED) X(ZC_PLAT_REFUSED)    \
    X(ZC_PLAT_EXISTS) X(ZC_PLAT_NOT_FOUND) X(ZC_PLAT_INVALID) X(ZC_PLAT_UNSUPPORTED)          \
    X(ZC_PLAT_ERROR)

const char *zc_plat_rc_name(zc_plat_rc rc) {
    switch (rc) {
#define ZC_PX_CASE(name) case name: return #name;
        ZC_PLAT_RC_MAP(ZC_PX_CASE)
#undef ZC_PX_CASE
    }
    return "ZC_PLAT_UNKNOWN";
}

int zc_plat_os_error(void) { return zc_px_errno; }

#ifdef ZC_PLAT_FAULTS
void zc_px_set_os_error(int os_error) { zc_px_errno = os_error; }
#endif

static void zc_px_copy(char *buf, size_t cap, const char *text) {
    size_t n = strlen(text);
    if (n >= cap) n = cap - 1;
    memmove(buf, text, n);
    buf[n] = '\0';
}

/* strerror_r comes in two kinds: GNU (returns the text, maybe not in buf) and XSI (returns 0
 * or an error number and writes buf). _Generic picks the one this libc declared. */
static const char *zc_px_strerror_gnu(char *ret, char *buf) {
    (void)buf;
    return ret;
}
static const char *zc_px_strerror_xsi(int ret, char *buf) { return ret == 0 ? buf : NULL; }
#define ZC_PX_STRERROR_TEXT(ret, buf)                                                         \
    _Generic((ret), char *: zc_px_strerror_gnu, int: zc_px_strerror_xsi)((ret), (buf))

void zc_plat_os_error_text(int os_error, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    char tmp[256];
    tmp[0] = '\0';
    const char *text = ZC_PX_STRERROR_TEXT(strerror_r(os_error, tmp, sizeof tmp), tmp);
    if (!text || !text[0]) {
        snprintf(tmp, sizeof tmp, "os error %d", os_error);
        text = tmp;
    }
    zc_px_copy(buf, cap, text);
}

/* ---- time and scheduling ----------------------------------------------------------------- */

uint64_t zc_plat_now_ns(void) {
    struct timespec ts;
    /* CLOCK_MONOTONIC is served by the vDSO: no system call. It cannot fail for this clock. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void zc_plat_cpu_relax(void) {
    zc_plat_spin_hint();
}

void zc_plat_yield(void) { sched_yield(); }

uint32_t zc_plat_cpus(uint64_t *mask) {
    cpu_set_t set;
    if (mask) memset(mask, 0, ZC_PLAT_CPU_WORDS * sizeof *mask);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (size_t c = 0; mask && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                mask[c / 64u % ZC_PLAT_CPU_WORDS] |= 1ull << (c % 64u);
        return (uint32_t)CPU_COUNT(&set);
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 0;
}

void zc_plat_sleep_ns(uint64_t ns) {
    struct timespec req = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    struct timespec rem;
    /* Bounded: each EINTR leaves less remaining time. */
    while (nanosleep(&req, &rem) != 0 && errno == EINTR) req = rem;
}

/* ---- shared memory between processes ----------------------------------------------------
 * A segment is a memfd: it has no name in any file system, so it disappears with the last
 * descriptor and mapping, whenever and however its processes end. Another process of the same
 * user opens it through the creator's descriptor, /proc/<pid>/fd/<fd>, for as long as the
 * creator keeps that descriptor (until seal). ref = {pid, fd, inode, bytes}: the inode tells a
 * reused pid and descriptor number from the segment. Its size is sealed at create (memfd seals:
 * no shrink, no grow, no further seal) and open refuses a segment without those seals. */

/* The seals of every segment: its size is fixed for good (and no seal can be added). */
#define ZC_PX_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* "[/][A-Za-z0-9._-]{1,62}": a label, checked so that diagnostics stay printable. */
static int zc_px_shm_name_ok(const char *name) {
    if (!name) return 0;
    if (name[0] == '/') name++;
    size_t i = 0;
    for (; name[i] && i <= 62; i++) {
        char c = name[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok) return 0;
    }
    return i >= 1 && i <= 62 && name[i] == '\0';
}

static zc_plat_rc zc_px_map(int fd, size_t bytes, void **addr_out) {
    void *addr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) return zc_px_fail(ZC_PLAT_ERROR, errno);
    *addr_out = addr;
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_shm_create(const char *name, size_t bytes, void **addr_out,
                              zc_plat_shm_ref *ref_out) {
    if (!zc_px_shm_name_ok(name) || bytes == 0 || bytes > (size_t)LLONG_MAX || !addr_out ||
        !ref_out)
        return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    int fd = memfd_create(name[0] == '/' ? name + 1 : name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return zc_px_fail(ZC_PLAT_ERROR, errno); /* open until zc_plat_shm_seal */
    /* fallocate, not ftruncate: every page is taken now, so a full memory or tmpfs limit is
     * this call's error instead of a SIGBUS at the first store into an unbacked page. Then the
     * size is sealed before any peer can open it: no process holding the segment can shrink
     * it under a mapping (a SIGBUS in every process that maps it) or grow it. */
    struct stat st;
    zc_plat_rc rc = ZC_PLAT_OK;
    int e = 0;
    do e = fallocate(fd, 0, 0, (off_t)bytes) != 0 ? errno : 0; while (e == EINTR);
    if (e) rc = zc_px_fail(ZC_PLAT_ERROR, e);
    else if (fcntl(fd, F_ADD_SEALS, ZC_PX_SEALS) != 0) rc = zc_px_fail(ZC_PLAT_ERROR, errno);
    else if (fstat(fd, &st) != 0) rc = zc_px_fail(ZC_PLAT_ERROR, errno);
    else rc = zc_px_map(fd, bytes, addr_out);
    if (rc != ZC_PLAT_OK) {
        e = zc_px_errno;
        close(fd);
        zc_px_errno = e;
        return rc;
    }
    *ref_out = (zc_plat_shm_ref){{(uint64_t)getpid(), (uint64_t)fd, (uint64_t)st.st_ino,
                                  (uint64_t)bytes}};
    return ZC_PLAT_OK;
}

/* A ref whose process, descriptor or inode no longer names the segment is NOT_FOUND (the
 * creator sealed it or exited); a segment shorter than bytes, or whose size is not sealed (a
 * peer's that it could shrink under this mapping), is ZC_PLAT_INVALID. */
zc_plat_rc zc_plat_shm_open(const zc_plat_shm_ref *ref, size_t bytes, void **addr_out) {
    if (!ref || bytes == 0 || bytes > (size_t)LLONG_MAX || !addr_out || ref->words[0] == 0 ||
        ref->words[0] > INT_MAX || ref->words[1] > INT_MAX)
        return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    char path[64];
    snprintf(path, sizeof path, "/proc/%llu/fd/%llu", (unsigned long long)ref->words[0],
             (unsigned long long)ref->words[1]);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return zc_px_fail(e == ENOENT ? ZC_PLAT_NOT_FOUND : ZC_PLAT_ERROR, e);
    }
    struct stat st;
    zc_plat_rc rc = ZC_PLAT_OK;
    if (fstat(fd, &st) != 0)
        rc = zc_px_fail(ZC_PLAT_ERROR, errno);
    else if ((uint64_t)st.st_ino != ref->words[2])
        rc = zc_px_fail(ZC_PLAT_NOT_FOUND, ENOENT);
    else if ((unsigned long long)st.st_size < (unsigned long long)bytes)
        rc = zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    else if ((fcntl(fd, F_GET_SEALS) & ZC_PX_SEALS) != ZC_PX_SEALS)
        rc = zc_px_fail(ZC_PLAT_INVALID, EPERM);
    else
        rc = zc_px_map(fd, bytes, addr_out);
    close(fd);
    return rc;
}

zc_plat_rc zc_plat_shm_seal(zc_plat_shm_ref *ref) {
    if (!ref || ref->words[0] != (uint64_t)getpid() || ref->words[1] > INT_MAX)
        return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    int fd = (int)ref->words[1];
    ref->words[1] = (uint64_t)INT_MAX + 1u; /* sealed: a second seal is INVALID */
    if (close(fd) != 0) return zc_px_fail(ZC_PLAT_ERROR, errno);
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_shm_unmap(void *addr, size_t bytes) {
    if (!addr || bytes == 0) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    if (munmap(addr, bytes) != 0) return zc_px_fail(ZC_PLAT_ERROR, errno);
    return ZC_PLAT_OK;
}

/* ---- private pages ----------------------------------------------------------------------- */

zc_plat_rc zc_plat_pages_alloc(size_t bytes, void **addr_out) {
    if (bytes == 0 || bytes > (size_t)LLONG_MAX || !addr_out)
        return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    void *addr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr == MAP_FAILED) return zc_px_fail(ZC_PLAT_ERROR, errno);
    *addr_out = addr;
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_pages_free(void *addr, size_t bytes) {
    if (!addr || bytes == 0) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    if (munmap(addr, bytes) != 0) return zc_px_fail(ZC_PLAT_ERROR, errno);
    return ZC_PLAT_OK;
}

/* ---- TCP --------------------------------------------------------------------------------- */

/* Waits until fd is ready for events or the deadline passes. OK: ready (or in error, which the
 * next call reports); AGAIN: deadline 0; TIMEOUT: the deadline passed. */
static zc_plat_rc zc_px_wait_fd(int fd, short events, uint64_t deadline_ns) {
    if (deadline_ns == 0) return ZC_PLAT_AGAIN;
    /* Bounded by the deadline: every pass either returns or sleeps in ppoll. */
    for (;;) {
        uint64_t now = zc_plat_now_ns();
        if (now >= deadline_ns) return zc_px_fail(ZC_PLAT_TIMEOUT, ETIMEDOUT);
        uint64_t left = deadline_ns - now;
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        struct pollfd p = {fd, events, 0};
        int n = ppoll(&p, 1, &ts, NULL);
        if (n > 0) return ZC_PLAT_OK;
        if (n < 0 && errno != EINTR) return zc_px_fail(ZC_PLAT_ERROR, errno);
    }
}

/* host -> IPv4 address: dotted quad directly, a name through getaddrinfo (init-time only).
 * NULL or "" means any address (listen only). */
static zc_plat_rc zc_px_resolve(const char *host, uint16_t port, struct sockaddr_in *sa) {
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    if (!host || !host[0]) {
        sa->sin_addr.s_addr = htonl(INADDR_ANY);
        return ZC_PLAT_OK;
    }
    if (inet_pton(AF_INET, host, &sa->sin_addr) == 1) return ZC_PLAT_OK;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, NULL, &hints, &res);
    if (g != 0 || !res) {
        if (g == EAI_SYSTEM) return zc_px_fail(ZC_PLAT_ERROR, errno);
        if (g == EAI_MEMORY) return zc_px_fail(ZC_PLAT_ERROR, ENOMEM);
        if (g == EAI_AGAIN) return zc_px_fail(ZC_PLAT_ERROR, EAGAIN);
        return zc_px_fail(ZC_PLAT_NOT_FOUND, EHOSTUNREACH);
    }
    sa->sin_addr = ((const struct sockaddr_in *)(const void *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return ZC_PLAT_OK;
}

static zc_plat_rc zc_px_socket(int *fd_out) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return zc_px_fail(ZC_PLAT_ERROR, errno);
    *fd_out = fd;
    return ZC_PLAT_OK;
}

static void zc_px_nodelay(int fd) {
    int one = 1;
    /* Best effort: a socket without it is slower, not wrong. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

zc_plat_rc zc_plat_tcp_listen(const char *host, uint16_t port, int *sock_out,
                              uint16_t *port_out) {
    if (!sock_out) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    struct sockaddr_in sa;
    zc_plat_rc rc = zc_px_resolve(host, port, &sa);
    int fd = -1;
    if (rc == ZC_PLAT_OK) rc = zc_px_socket(&fd);
    if (rc != ZC_PLAT_OK) return rc;
    int one = 1;
    socklen_t len = sizeof sa;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        int e = errno;
        close(fd);
        return zc_px_fail(ZC_PLAT_ERROR, e);
    }
    *sock_out = fd;
    if (port_out) *port_out = ntohs(sa.sin_port);
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_tcp_local_host(int sock, char *buf, size_t cap) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (!buf || cap < INET_ADDRSTRLEN) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    if (getsockname(sock, (struct sockaddr *)&sa, &len) != 0)
        return zc_px_fail(ZC_PLAT_ERROR, errno);
    if (sa.sin_family != AF_INET) return zc_px_fail(ZC_PLAT_UNSUPPORTED, EAFNOSUPPORT);
    if (!inet_ntop(AF_INET, &sa.sin_addr, buf, (socklen_t)cap))
        return zc_px_fail(ZC_PLAT_ERROR, errno);
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_tcp_accept(int listen_sock, uint64_t deadline_ns, int *sock_out) {
    if (listen_sock < 0 || !sock_out) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    /* Bounded by the deadline (zc_px_wait_fd) and by the connections queued meanwhile. */
    for (;;) {
        int fd = accept4(listen_sock, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            zc_px_nodelay(fd);
            *sock_out = fd;
            return ZC_PLAT_OK;
        }
        int e = errno;
        if (e == EINTR || e == ECONNABORTED) continue;
        if (e != EAGAIN && e != EWOULDBLOCK) return zc_px_fail(ZC_PLAT_ERROR, e);
        zc_plat_rc rc = zc_px_wait_fd(listen_sock, POLLIN, deadline_ns);
        if (rc != ZC_PLAT_OK) return rc;
    }
}

/* Maps a connect failure (from connect or SO_ERROR) to a result. */
static zc_plat_rc zc_px_connect_error(int e) {
    if (e == ECONNREFUSED) return zc_px_fail(ZC_PLAT_REFUSED, e);
    if (e == ETIMEDOUT) return zc_px_fail(ZC_PLAT_TIMEOUT, e);
    return zc_px_fail(ZC_PLAT_ERROR, e);
}

static zc_plat_rc zc_px_connect_finish(int fd, uint64_t deadline_ns) {
    zc_plat_rc rc = ZC_PLAT_OK;
    if (deadline_ns == 0) {
        /* Try once: a handshake not done by now is abandoned. */
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 0) <= 0) rc = zc_px_fail(ZC_PLAT_AGAIN, EINPROGRESS);
    } else {
        rc = zc_px_wait_fd(fd, POLLOUT, deadline_ns);
    }
    if (rc != ZC_PLAT_OK) return rc;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        return zc_px_fail(ZC_PLAT_ERROR, errno);
    return err == 0 ? ZC_PLAT_OK : zc_px_connect_error(err);
}

zc_plat_rc zc_plat_tcp_connect(const char *host, uint16_t port, uint64_t deadline_ns,
                               int *sock_out) {
    if (!host || !host[0] || port == 0 || !sock_out) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    struct sockaddr_in sa;
    zc_plat_rc rc = zc_px_resolve(host, port, &sa);
    int fd = -1;
    if (rc == ZC_PLAT_OK) rc = zc_px_socket(&fd);
    if (rc != ZC_PLAT_OK) return rc;
    zc_px_nodelay(fd);
    if (connect(fd, (const struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        /* EINTR: the handshake goes on in the background, as with EINPROGRESS. */
        rc = (e == EINPROGRESS || e == EINTR) ? zc_px_connect_finish(fd, deadline_ns)
                                              : zc_px_connect_error(e);
    }
    if (rc != ZC_PLAT_OK) {
        int e = zc_px_errno;
        close(fd);
        zc_px_errno = e;
        return rc;
    }
    *sock_out = fd;
    return ZC_PLAT_OK;
}

/* A transfer error: the peer going away is CLOSED, anything else is the OS's. */
static zc_plat_rc zc_px_io_error(int e) {
    if (e == EPIPE || e == ECONNRESET) return zc_px_fail(ZC_PLAT_CLOSED, e);
    if (e == ETIMEDOUT) return zc_px_fail(ZC_PLAT_TIMEOUT, e);
    return zc_px_fail(ZC_PLAT_ERROR, e);
}

zc_plat_rc zc_plat_tcp_send_all(int sock, const void *buf, size_t bytes, uint64_t deadline_ns) {
    if (sock < 0 || (!buf && bytes)) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    const char *p = buf;
    size_t done = 0;
    /* Bounded by bytes (every send moves at least one) and the deadline (every wait). */
    while (done < bytes) {
        ssize_t n = send(sock, p + done, bytes - done, MSG_NOSIGNAL);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        int e = errno;
        if (n < 0 && e == EINTR) continue;
        if (n < 0 && e != EAGAIN && e != EWOULDBLOCK) return zc_px_io_error(e);
        zc_plat_rc rc = zc_px_wait_fd(sock, POLLOUT, deadline_ns);
        if (rc != ZC_PLAT_OK) return rc;
    }
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_tcp_recv_all(int sock, void *buf, size_t bytes, uint64_t deadline_ns) {
    if (sock < 0 || (!buf && bytes)) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    char *p = buf;
    size_t done = 0;
    while (done < bytes) {
        ssize_t n = recv(sock, p + done, bytes - done, 0);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n == 0) return zc_px_fail(ZC_PLAT_CLOSED, 0);
        int e = errno;
        if (e == EINTR) continue;
        if (e != EAGAIN && e != EWOULDBLOCK) return zc_px_io_error(e);
        zc_plat_rc rc = zc_px_wait_fd(sock, POLLIN, deadline_ns);
        if (rc != ZC_PLAT_OK) return rc;
    }
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_tcp_recv_some(int sock, void *buf, size_t cap, size_t *got_out) {
    if (got_out) *got_out = 0;
    if (sock < 0 || !buf || cap == 0 || !got_out) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    /* A few retries on EINTR only; recv on a non-blocking socket never waits. */
    for (int tries = 0; tries < 8; tries++) {
        ssize_t n = recv(sock, buf, cap, 0);
        if (n > 0) {
            *got_out = (size_t)n;
            return ZC_PLAT_OK;
        }
        if (n == 0) return zc_px_fail(ZC_PLAT_CLOSED, 0);
        int e = errno;
        if (e == EINTR) continue;
        if (e == EAGAIN || e == EWOULDBLOCK) return ZC_PLAT_AGAIN;
        return zc_px_io_error(e);
    }
    return ZC_PLAT_AGAIN;
}

void zc_plat_tcp_close(int sock) {
    if (sock >= 0) close(sock);
}

void zc_plat_fd_close(int fd) {
    if (fd >= 0) close(fd);
}

/* ---- process and host -------------------------------------------------------------------- */

const char *zc_plat_getenv(const char *name) { return name ? getenv(name) : NULL; }

/* /dev/urandom, for kernels without getrandom (before 3.17). */
static zc_plat_rc zc_px_urandom(unsigned char *p, size_t bytes) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zc_px_fail(ZC_PLAT_ERROR, errno);
    size_t done = 0;
    while (done < bytes) {
        ssize_t n = read(fd, p + done, bytes - done);
        if (n > 0) {
            done += (size_t)n;
        } else if (n == 0 || errno != EINTR) {
            int e = n == 0 ? EIO : errno;
            close(fd);
            return zc_px_fail(ZC_PLAT_ERROR, e);
        }
    }
    close(fd);
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_random(void *buf, size_t bytes) {
    if (!buf && bytes) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    unsigned char *p = buf;
    size_t done = 0;
    /* Bounded by bytes: every successful call moves at least one. */
    while (done < bytes) {
        ssize_t n = getrandom(p + done, bytes - done, 0);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == ENOSYS) return zc_px_urandom(p + done, bytes - done);
        return zc_px_fail(ZC_PLAT_ERROR, n < 0 ? errno : EIO);
    }
    return ZC_PLAT_OK;
}

/* Reads a small text file into buf (NUL-terminated, trailing whitespace dropped). */
static zc_plat_rc zc_px_read_small(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zc_px_fail(errno == ENOENT ? ZC_PLAT_NOT_FOUND : ZC_PLAT_ERROR, errno);
    size_t used = 0;
    while (used + 1 < cap) {
        ssize_t n = read(fd, buf + used, cap - 1 - used);
        if (n > 0) {
            used += (size_t)n;
        } else if (n == 0) {
            break;
        } else if (errno != EINTR) {
            int e = errno;
            close(fd);
            return zc_px_fail(ZC_PLAT_ERROR, e);
        }
    }
    close(fd);
    while (used > 0 && (buf[used - 1] == '\n' || buf[used - 1] == ' ' || buf[used - 1] == '\t' ||
                        buf[used - 1] == '\r'))
        used--;
    buf[used] = '\0';
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_host_id(char *buf, size_t cap) {
    if (!buf || cap == 0) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    buf[0] = '\0';
    char host[256], boot[64];
    if (gethostname(host, sizeof host) != 0) return zc_px_fail(ZC_PLAT_ERROR, errno);
    host[sizeof host - 1] = '\0';
    zc_plat_rc rc = zc_px_read_small("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    /* Without a boot id two boots (or two machines of one name) would look alike. */
    if (rc == ZC_PLAT_NOT_FOUND) return zc_px_fail(ZC_PLAT_ERROR, zc_px_errno);
    if (rc != ZC_PLAT_OK) return rc;
    int n = snprintf(buf, cap, "%s:%s", host, boot);
    if (n < 0 || (size_t)n >= cap) {
        buf[0] = '\0';
        return zc_px_fail(ZC_PLAT_INVALID, ENAMETOOLONG);
    }
    return ZC_PLAT_OK;
}

uint64_t zc_plat_process_id(void) { return (uint64_t)getpid(); }

/* 1 if /proc/<pid>/stat says the process is a zombie (or dead), or is gone. */
static int zc_px_is_zombie(pid_t pid) {
    char path[64], stat[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    zc_plat_rc rc = zc_px_read_small(path, stat, sizeof stat);
    if (rc == ZC_PLAT_NOT_FOUND) return 1;
    if (rc != ZC_PLAT_OK) return 0; /* kill() said it exists; keep that answer */
    /* "pid (comm) S ...": comm may hold ')' and spaces, so look after the last ')'. It is at
     * most 15 bytes long, so the last ')' of these first bytes is comm's own. */
    const char *close_paren = strrchr(stat, ')');
    if (!close_paren || close_paren[1] != ' ') return 0;
    char state = close_paren[2];
    return state == 'Z' || state == 'X' || state == 'x';
}

zc_plat_rc zc_plat_process_alive(uint64_t pid) {
    /* pid 0 and negative pids name process groups for kill(); not a process. */
    if (pid == 0 || pid > (uint64_t)INT_MAX) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    pid_t p = (pid_t)pid;
    if (kill(p, 0) != 0) {
        int e = errno;
        if (e == ESRCH) return zc_px_fail(ZC_PLAT_NOT_FOUND, e);
        if (e != EPERM) return zc_px_fail(ZC_PLAT_ERROR, e);
    }
    if (zc_px_is_zombie(p)) return zc_px_fail(ZC_PLAT_NOT_FOUND, ESRCH);
    return ZC_PLAT_OK;
}

/* ---- what this process may take --------------------------------------------------------- */

/* The first number of a small file ("max" and anything unreadable: UINT64_MAX). */
static uint64_t zc_px_read_u64(const char *path) {
    char text[64], *end = NULL;
    if (zc_px_read_small(path, text, sizeof text) != ZC_PLAT_OK) return UINT64_MAX;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    return end == text || errno ? UINT64_MAX : (uint64_t)v;
}

/* The cgroup path of this process's memory controller, after its file system's mount point
 * (v2: "0::/path" under /sys/fs/cgroup; v1: "N:...memory...:/path" under
 * /sys/fs/cgroup/memory); false without one. */
static bool zc_px_cgroup(char *dir, size_t cap, const char **top, bool *v2) {
    char lines[2048];
    if (zc_px_read_small("/proc/self/cgroup", lines, sizeof lines) != ZC_PLAT_OK) return false;
    char *save = NULL;
    for (char *ln = strtok_r(lines, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
        const char *v1 = strstr(ln, ":memory:");
        if (strncmp(ln, "0::", 3) == 0 || v1) {
            *v2 = !v1;
            *top = *v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
            snprintf(dir, cap, "%s", *v2 ? ln + 3 : v1 + 8);
            if (!*v2) return true; /* v1's memory line wins over a v2 line of a hybrid mount */
        }
    }
    return *top != NULL;
}

/* The room its memory cgroup leaves this process: every level from its own up to the top,
 * v2 (memory.max - memory.current) or v1 (memory.limit_in_bytes - memory.usage_in_bytes), the
 * least; UINT64_MAX without a limit or a cgroup file system to read. */
static uint64_t zc_px_cgroup_room(void) {
    char dir[512], path[600];
    const char *top = NULL;
    bool v2 = true;
    if (!zc_px_cgroup(dir, sizeof dir, &top, &v2)) return UINT64_MAX;
    uint64_t room = UINT64_MAX;
    for (int depth = 0; depth < 64; depth++) { /* bounded: each pass drops one level */
        snprintf(path, sizeof path, "%s%s/%s", top, dir, v2 ? "memory.max"
                                                            : "memory.limit_in_bytes");
        uint64_t lim = zc_px_read_u64(path);
        snprintf(path, sizeof path, "%s%s/%s", top, dir, v2 ? "memory.current"
                                                            : "memory.usage_in_bytes");
        uint64_t used = zc_px_read_u64(path);
        if (lim != UINT64_MAX && used != UINT64_MAX && (lim > used ? lim - used : 0) < room)
            room = lim > used ? lim - used : 0;
        char *slash = strrchr(dir, '/');
        if (!slash || dir[0] == '\0') break;
        *slash = '\0';
    }
    return room;
}

/* The value after "name" in text (/proc's "Name:   value" lines); NULL without one. */
static const char *zc_px_field(const char *text, const char *name) {
    const char *at = strstr(text, name);
    if (!at) return NULL;
    at += strlen(name);
    while (*at == ' ' || *at == '\t') at++;
    return at;
}

/* MemAvailable of /proc/meminfo, in bytes; UINT64_MAX without it. */
static uint64_t zc_px_mem_available(void) {
    char info[4096];
    if (zc_px_read_small("/proc/meminfo", info, sizeof info) != ZC_PLAT_OK) return UINT64_MAX;
    const char *v = zc_px_field(info, "MemAvailable:");
    return v ? (uint64_t)strtoull(v, NULL, 10) * 1024u : UINT64_MAX;
}

/* What this process may still lock: RLIMIT_MEMLOCK less VmPin (what devices pinned already,
 * which the kernel counts against it); no limit with CAP_IPC_LOCK in CapEff. */
static uint64_t zc_px_lock_room(void) {
    char status[4096];
    struct rlimit lim;
    if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
    uint64_t pinned = 0;
    if (zc_px_read_small("/proc/self/status", status, sizeof status) == ZC_PLAT_OK) {
        const char *cap = zc_px_field(status, "CapEff:");
        if (cap && (strtoull(cap, NULL, 16) >> 14) & 1u) return UINT64_MAX; /* CAP_IPC_LOCK */
        const char *pin = zc_px_field(status, "VmPin:");
        if (pin) pinned = (uint64_t)strtoull(pin, NULL, 10) * 1024u;
    }
    return (uint64_t)lim.rlim_cur > pinned ? (uint64_t)lim.rlim_cur - pinned : 0;
}

zc_plat_rc zc_plat_mem_room(zc_plat_room *out) {
    if (!out) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    uint64_t cg = zc_px_cgroup_room(), host = zc_px_mem_available();
    uint32_t from = cg < host ? ZC_PLAT_ROOM_CGROUP
                              : host != UINT64_MAX ? ZC_PLAT_ROOM_HOST : ZC_PLAT_ROOM_UNKNOWN;
    *out = (zc_plat_room){cg < host ? cg : host, zc_px_lock_room(), from, 0};
    return ZC_PLAT_OK;
}

zc_plat_rc zc_plat_read_file(const char *path, void *buf, size_t cap, size_t *len_out) {
    if (!path || !buf || !len_out) return zc_px_fail(ZC_PLAT_INVALID, EINVAL);
    *len_out = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zc_px_fail(errno == ENOENT ? ZC_PLAT_NOT_FOUND : ZC_PLAT_ERROR, errno);
    size_t used = 0;
    char extra;
    for (;;) { /* bounded: every pass reads at least a byte, or ends */
        ssize_t n = used < cap ? read(fd, (char *)buf + used, cap - used) : read(fd, &extra, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 || (n > 0 && used == cap)) { /* a failure, or more than cap bytes */
            int e = n < 0 ? errno : EFBIG;
            close(fd);
            return zc_px_fail(n < 0 ? ZC_PLAT_ERROR : ZC_PLAT_INVALID, e);
        }
        if (n == 0) break;
        used += (size_t)n;
    }
    close(fd);
    *len_out = used;
    return ZC_PLAT_OK;
}

/* ---- diagnostics ------------------------------------------------------------------------- */

static int zc_px_log_level = -1; /* -1: ZC_LOG not read yet; read with __atomic builtins */

static int zc_px_read_log_level(void) {
    int level = __atomic_load_n(&zc_px_log_level, __ATOMIC_RELAXED);
    if (level >= 0) return level;
    /* Two threads may both get here; they compute the same value. */
    const char *s = getenv("ZC_LOG");
    level = ZC_PLAT_LOG_WARN;
    if (s && strcmp(s, "error") == 0) level = ZC_PLAT_LOG_ERROR;
    else if (s && strcmp(s, "info") == 0) level = ZC_PLAT_LOG_INFO;
    else if (s && strcmp(s, "debug") == 0) level = ZC_PLAT_LOG_DEBUG;
    __atomic_store_n(&zc_px_log_level, level, __ATOMIC_RELAXED);
    return level;
}

/* One writev per line, so lines of concurrent processes do not interleave mid-line. */
static void zc_px_write_line(const char *prefix, const char *line) {
    struct iovec iov[3] = {{(void *)(uintptr_t)prefix, strlen(prefix)},
                           {(void *)(uintptr_t)line, strlen(line)},
                           {(void *)(uintptr_t)"\n", 1}};
    ssize_t n = writev(STDERR_FILENO, iov, 3);
    (void)n; /* nowhere to report a failing log */
}

void zc_plat_log(zc_plat_log_level level, const char *line) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    int lv = (int)level;
    if (lv < 0) lv = 0;
    if (lv > 3) lv = 3;
    if (lv > zc_px_read_log_level()) return;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "zcoll: %s: ", names[lv]);
    zc_px_write_line(prefix, line ? line : "(null)");
}

_Noreturn void zc_plat_panic(const char *file, int line, const char *what) {
    char prefix[512];
    snprintf(prefix, sizeof prefix, "zcoll: panic at %s:%d: ", file ? file : "?", line);
    zc_px_write_line(prefix, what ? what : "");
    abort();
}
