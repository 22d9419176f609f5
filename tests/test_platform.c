/* test_platform.c: the Linux port (platform/posix.c) against platform.h's contracts: clock,
 * shared memory (in one process and across processes under zcrun), private pages,
 * loopback TCP with its deadlines, randomness, host and process identity, environment, error
 * texts, log and panic.
 * Network traffic goes to 127.0.0.1 only. Shared-memory labels carry the test's pid. */
#define _GNU_SOURCE
#include "zt.h"
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PT_MS 1000000ull
#define PT_MIB (1024u * 1024u)

static uint64_t pt_ms_since(uint64_t t0_ns) { return (zc_plat_now_ns() - t0_ns) / PT_MS; }

/* "/zct-plat-<pid>-<tag>": a segment's label. */
static void pt_shm_name(char *buf, size_t cap, const char *tag) {
    snprintf(buf, cap, "/zct-plat-%ld-%s", (long)getpid(), tag);
}

/* 1 if the folder holds an entry whose name contains part. */
static int pt_dir_has(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;)
        found = strstr(e->d_name, part) != 0;
    closedir(d);
    return found;
}

/* 1 if /proc/<pid>/maps maps a memfd whose label contains part. */
static int pt_maps_memfd(long pid, const char *part) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%ld/maps", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *m = strstr(line, "/memfd:");
        found = m && strstr(m, part) != 0;
    }
    fclose(f);
    return found;
}

/* ---- clock and scheduling ---------------------------------------------------------------- */

void platform_clock_is_monotonic_and_sleep_advances_it(void) {
    uint64_t prev = zc_plat_now_ns();
    ZT_CHECK(prev > 0);
    for (int i = 0; i < 10000; i++) {
        uint64_t now = zc_plat_now_ns();
        ZT_CHECK(now >= prev);
        prev = now;
    }
    uint64_t t0 = zc_plat_now_ns();
    zc_plat_sleep_ns(2 * PT_MS);
    uint64_t slept = zc_plat_now_ns() - t0;
    ZT_CHECK(slept >= 2 * PT_MS);
    ZT_CHECK(slept < 1000 * PT_MS);
    zc_plat_sleep_ns(0);
    for (int i = 0; i < 100; i++) zc_plat_cpu_relax();
    zc_plat_yield();
}

/* ---- shared memory in one process -------------------------------------------------------- */

void platform_shm_create_then_open_sees_same_bytes(void) {
    char name[64];
    pt_shm_name(name, sizeof name, "same");
    const size_t bytes = 3 * 4096 + 17;
    unsigned char *a = NULL, *b = NULL;
    zc_plat_shm_ref ref;
    ZT_CHECK_ST(zc_plat_shm_create(name, bytes, (void **)&a, &ref), ZC_PLAT_OK);
    ZT_CHECK(a != NULL);
    for (size_t i = 0; i < bytes; i++) ZT_CHECK_EQ(a[i], 0); /* zero-filled */
    ZT_CHECK_ST(zc_plat_shm_open(&ref, bytes, (void **)&b), ZC_PLAT_OK);
    ZT_CHECK(b != NULL && b != a);
    for (size_t i = 0; i < bytes; i++) a[i] = (unsigned char)(i * 7u + 3u);
    for (size_t i = 0; i < bytes; i++) ZT_CHECK_EQ(b[i], (unsigned char)(i * 7u + 3u));
    b[5] = 0xee; /* and the other way */
    ZT_CHECK_EQ(a[5], 0xee);
    /* A smaller view of the same segment is fine; a larger one is not. */
    void *c = NULL;
    ZT_CHECK_ST(zc_plat_shm_open(&ref, 4096, &c), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_unmap(c, 4096), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_open(&ref, bytes + 4096 * 4, &c), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_shm_seal(&ref), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_unmap(b, bytes), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_unmap(a, bytes), ZC_PLAT_OK);
}

void platform_shm_segment_has_no_name_in_any_folder(void) {
    char name[64];
    pt_shm_name(name, sizeof name, "noname");
    void *a = NULL;
    zc_plat_shm_ref ref;
    ZT_CHECK_ST(zc_plat_shm_create(name, 8192, &a, &ref), ZC_PLAT_OK);
    ZT_CHECK(pt_maps_memfd((long)getpid(), name + 1)); /* the label shows where it is mapped */
    ZT_CHECK(!pt_dir_has("/dev/shm", name + 1));       /* and nowhere else */
    ZT_CHECK_EQ(ref.words[0], (uint64_t)getpid());
    ZT_CHECK_ST(zc_plat_shm_seal(&ref), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_unmap(a, 8192), ZC_PLAT_OK);
    ZT_CHECK(!pt_maps_memfd((long)getpid(), name + 1));
}

void platform_shm_open_after_seal_or_by_stale_ref_returns_not_found(void) {
    char name[64];
    pt_shm_name(name, sizeof name, "seal");
    unsigned char *a = NULL;
    void *b = NULL;
    zc_plat_shm_ref ref, stale;
    ZT_CHECK_ST(zc_plat_shm_create(name, 4096, (void **)&a, &ref), ZC_PLAT_OK);
    stale = ref;
    stale.words[2] ^= 1u; /* another inode behind the same pid and descriptor */
    ZT_CHECK_ST(zc_plat_shm_open(&stale, 4096, &b), ZC_PLAT_NOT_FOUND);
    stale = ref;
    stale.words[1] = 999999; /* no such descriptor */
    ZT_CHECK_ST(zc_plat_shm_open(&stale, 4096, &b), ZC_PLAT_NOT_FOUND);
    ZT_CHECK(b == NULL);
    zc_plat_shm_ref copy = ref;
    ZT_CHECK_ST(zc_plat_shm_seal(&ref), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_open(&copy, 4096, &b), ZC_PLAT_NOT_FOUND);
    ZT_CHECK_ST(zc_plat_shm_seal(&ref), ZC_PLAT_INVALID); /* once only */
    a[4095] = 9; /* the mapping outlives the seal */
    ZT_CHECK_EQ(a[4095], 9);
    ZT_CHECK_ST(zc_plat_shm_unmap(a, 4096), ZC_PLAT_OK);
}

/* A segment's size is sealed before anyone can open it: a process holding it (a peer that
 * opened it through the ref) can neither shrink it under the others' mappings, the SIGBUS of
 * every rank, nor grow it; and open refuses a segment of a ref whose size is not sealed (a
 * hostile peer's), however large it is. */
void platform_shm_segment_size_is_sealed_and_open_wants_it_so(void) {
    char name[64], path[64];
    pt_shm_name(name, sizeof name, "sealed");
    void *a = NULL, *b = NULL;
    zc_plat_shm_ref ref;
    ZT_CHECK_ST(zc_plat_shm_create(name, 8192, &a, &ref), ZC_PLAT_OK);
    snprintf(path, sizeof path, "/proc/%llu/fd/%llu", (unsigned long long)ref.words[0],
             (unsigned long long)ref.words[1]);
    int fd = open(path, O_RDWR); /* what a peer holds */
    ZT_CHECK(fd >= 0);
    ZT_CHECK(ftruncate(fd, 4096) != 0 && errno == EPERM);
    ZT_CHECK(ftruncate(fd, 1u << 20) != 0 && errno == EPERM);
    ZT_CHECK(fallocate(fd, 0, 0, 1u << 20) != 0 && errno == EPERM);
    ZT_CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) != 0 && errno == EPERM);
    struct stat st;
    ZT_CHECK(fstat(fd, &st) == 0 && st.st_size == 8192);
    close(fd);
    ZT_CHECK_ST(zc_plat_shm_open(&ref, 8192, &b), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_unmap(b, 8192), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_seal(&ref), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_unmap(a, 8192), ZC_PLAT_OK);
    /* A segment made without the seals, as a hostile peer would, is refused. */
    int raw = memfd_create("zct-unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ZT_CHECK(raw >= 0 && ftruncate(raw, 8192) == 0 && fstat(raw, &st) == 0);
    zc_plat_shm_ref forged = {{(uint64_t)getpid(), (uint64_t)raw, (uint64_t)st.st_ino, 8192}};
    b = NULL;
    ZT_CHECK_ST(zc_plat_shm_open(&forged, 8192, &b), ZC_PLAT_INVALID);
    ZT_CHECK(b == NULL);
    ZT_CHECK(fcntl(raw, F_ADD_SEALS, F_SEAL_SHRINK) == 0); /* shrink sealed, grow not: still */
    ZT_CHECK_ST(zc_plat_shm_open(&forged, 8192, &b), ZC_PLAT_INVALID);
    close(raw);
}

void platform_shm_rejects_bad_labels_and_arguments(void) {
    char longest[64], too_long[65];
    longest[0] = too_long[0] = '/';
    for (int i = 1; i < 63; i++) longest[i] = 'a';
    longest[63] = '\0'; /* 62 characters after the slash: the longest valid label */
    for (int i = 1; i < 64; i++) too_long[i] = 'b';
    too_long[64] = '\0';
    const char *bad[] = {"/zct/second-slash", "/", "", "/zct space", "/zct*star", too_long};
    void *a = NULL;
    zc_plat_shm_ref ref = {{0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ZT_CHECK_ST(zc_plat_shm_create(bad[i], 4096, &a, &ref), ZC_PLAT_INVALID);
    ZT_CHECK(a == NULL);
    ZT_CHECK_ST(zc_plat_shm_create(NULL, 4096, &a, &ref), ZC_PLAT_INVALID);
    char name[64];
    pt_shm_name(name, sizeof name, "args");
    ZT_CHECK_ST(zc_plat_shm_create(name, 0, &a, &ref), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_shm_create(name, 4096, NULL, &ref), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_shm_create(name, 4096, &a, NULL), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_shm_open(NULL, 4096, &a), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_shm_open(&ref, 4096, &a), ZC_PLAT_INVALID); /* pid 0 */
    ZT_CHECK_ST(zc_plat_shm_seal(&ref), ZC_PLAT_INVALID);            /* not this process's */
    ZT_CHECK_ST(zc_plat_shm_seal(NULL), ZC_PLAT_INVALID);
    /* The longest valid label works, with or without the slash. */
    ZT_CHECK_ST(zc_plat_shm_create(longest, 4096, &a, &ref), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_seal(&ref), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_unmap(a, 4096), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_create("zct-no-slash", 4096, &a, &ref), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_seal(&ref), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_unmap(a, 4096), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_shm_unmap(NULL, 4096), ZC_PLAT_INVALID);
}

/* A segment the backing store cannot hold fails at create with the OS's error; it never maps
 * pages that a first store would fault on (SIGBUS). The file-size limit stands in for a full
 * store: it refuses the reservation the same way, in a child so the limit stays there. */
void platform_shm_create_reserves_its_pages_or_fails(void) {
    pid_t child = fork();
    ZT_CHECK(child >= 0);
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {65536, 65536};
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(3);
        void *a = NULL;
        zc_plat_shm_ref ref;
        char name[64];
        pt_shm_name(name, sizeof name, "full");
        if (zc_plat_shm_create(name, 1u << 20, &a, &ref) != ZC_PLAT_ERROR || a) _exit(4);
        if (zc_plat_os_error() != EFBIG) _exit(5);
        if (pt_maps_memfd((long)getpid(), name + 1)) _exit(6); /* nothing left mapped */
        /* Within the limit the pages are there: every one can be written. */
        if (zc_plat_shm_create(name, 65536, &a, &ref) != ZC_PLAT_OK) _exit(7);
        memset(a, 1, 65536);
        _exit(0);
    }
    int status = 0;
    ZT_CHECK(waitpid(child, &status, 0) == child);
    ZT_CHECK(WIFEXITED(status));
    ZT_CHECK_EQ(WEXITSTATUS(status), 0);
}

/* ---- private pages --------------------------------------------------------------------- */

void platform_pages_are_zeroed_aligned_private_and_freed(void) {
    long page = sysconf(_SC_PAGESIZE);
    void *bad = (void *)1;
    ZT_CHECK_ST(zc_plat_pages_alloc(0, &bad), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_pages_alloc(4096, NULL), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_pages_free(NULL, 4096), ZC_PLAT_INVALID);
    static const size_t sizes[] = {1, 4096, 4097, 3 * PT_MIB + 5};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = NULL;
        ZT_CHECK_ST(zc_plat_pages_alloc(sizes[i], (void **)&p), ZC_PLAT_OK);
        ZT_CHECK(p != NULL && (uintptr_t)p % (uintptr_t)page == 0);
        for (size_t b = 0; b < sizes[i]; b += 512) ZT_CHECK_EQ(p[b], 0);
        ZT_CHECK_EQ(p[sizes[i] - 1], 0);
        memset(p, 0xa5, sizes[i]);
        pid_t child = fork(); /* private: a child's write stays the child's */
        ZT_CHECK(child >= 0);
        if (child == 0) {
            int same = p[sizes[i] - 1] == 0xa5;
            p[0] = 1;
            _exit(same ? 0 : 1);
        }
        int status = 0;
        ZT_CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) &&
                 WEXITSTATUS(status) == 0);
        ZT_CHECK_EQ(p[0], 0xa5);
        ZT_CHECK_ST(zc_plat_pages_free(p, sizes[i]), ZC_PLAT_OK);
    }
    /* A size past the address space is an OS error with its errno kept. */
    void *huge = NULL;
    ZT_CHECK_ST(zc_plat_pages_alloc((size_t)1 << 62, &huge), ZC_PLAT_ERROR);
    ZT_CHECK(zc_plat_os_error() == ENOMEM);
}

/* ---- shared memory across processes (zcrun) ---------------------------------------------- */

#define PT_XSHM_BYTES 4096u
#define PT_XSHM_DATA 64u

static int pt_rank_fail(const char *what) {
    fprintf(stderr, "platform_rank_shm_seen_across_processes: rank %s: %s\n",
            getenv("ZC_RANK") ? getenv("ZC_RANK") : "?", what);
    return 1;
}

/* Waits until *word == want (acquire) for up to 10 s. */
static int pt_wait_word(uint32_t *word, uint32_t want) {
    uint64_t t0 = zc_plat_now_ns();
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != want) {
        if (zc_plat_now_ns() - t0 > 10000 * PT_MS) return 0;
        zc_plat_sleep_ns(100000);
    }
    return 1;
}

/* Rank 0 creates and publishes its ref through the file path (written whole, then renamed);
 * rank 1 opens the segment by it. */
static int pt_xshm_rank0(const char *path) {
    unsigned char *m = NULL;
    zc_plat_shm_ref ref;
    zc_plat_rc rc = zc_plat_shm_create("/zct-xshm", PT_XSHM_BYTES, (void **)&m, &ref);
    if (rc != ZC_PLAT_OK) return pt_rank_fail(zc_plat_rc_name(rc));
    for (uint32_t i = PT_XSHM_DATA; i < PT_XSHM_BYTES; i++) m[i] = (unsigned char)(i * 13u + 5u);
    uint32_t *flag = (uint32_t *)(void *)m, *ack = flag + 1;
    __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(&ref, sizeof ref, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0)
        return pt_rank_fail("cannot publish the ref");
    int ok = pt_wait_word(ack, 1u);
    unlink(path);
    zc_plat_shm_seal(&ref);
    zc_plat_shm_unmap(m, PT_XSHM_BYTES);
    return ok ? 0 : pt_rank_fail("no ack from rank 1 within 10 s");
}

static int pt_xshm_rank1(const char *path) {
    unsigned char *m = NULL;
    zc_plat_shm_ref ref;
    uint64_t t0 = zc_plat_now_ns();
    FILE *f = NULL;
    while (!(f = fopen(path, "rb")) && zc_plat_now_ns() - t0 < 10000 * PT_MS)
        zc_plat_sleep_ns(PT_MS);
    if (!f) return pt_rank_fail("rank 0 published no ref within 10 s");
    size_t got = fread(&ref, sizeof ref, 1, f);
    fclose(f);
    if (got != 1) return pt_rank_fail("short ref");
    zc_plat_rc rc = zc_plat_shm_open(&ref, PT_XSHM_BYTES, (void **)&m);
    if (rc != ZC_PLAT_OK) return pt_rank_fail(zc_plat_rc_name(rc));
    uint32_t *flag = (uint32_t *)(void *)m, *ack = flag + 1;
    if (!pt_wait_word(flag, 1u)) return pt_rank_fail("no ready flag from rank 0 within 10 s");
    for (uint32_t i = PT_XSHM_DATA; i < PT_XSHM_BYTES; i++)
        if (m[i] != (unsigned char)(i * 13u + 5u)) return pt_rank_fail("pattern differs");
    __atomic_store_n(ack, 1u, __ATOMIC_RELEASE);
    zc_plat_shm_unmap(m, PT_XSHM_BYTES);
    return 0;
}

int platform_rank_shm_seen_across_processes(void) {
    const char *rank = getenv("ZC_RANK"), *secret = getenv("ZC_SECRET");
    if (!rank || !secret || strlen(secret) < 16) return pt_rank_fail("ZC_RANK/ZC_SECRET unset");
    char path[128];
    snprintf(path, sizeof path, "/tmp/zct-xshm-%.16s", secret);
    if (strcmp(rank, "0") == 0) return pt_xshm_rank0(path);
    if (strcmp(rank, "1") == 0) return pt_xshm_rank1(path);
    return pt_rank_fail("expected ranks 0 and 1 only");
}

void platform_shm_seen_across_processes(void) {
    char out[8192];
    int rc = zt_run_ranks(2, "platform_rank_shm_seen_across_processes", 30, NULL, out, sizeof out);
    if (rc != 0) printf("%s\n", out);
    ZT_CHECK_EQ(rc, 0);
}

/* ---- TCP on loopback --------------------------------------------------------------------- */

static uint64_t pt_deadline_ms(uint64_t ms) { return zc_plat_now_ns() + ms * PT_MS; }

/* A connected pair on 127.0.0.1 in this process: *a connected, *b accepted. */
static void pt_tcp_pair(int *a, int *b) {
    int ls = -1;
    uint16_t port = 0;
    ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, &ls, &port), ZC_PLAT_OK);
    ZT_CHECK(port != 0);
    ZT_CHECK_ST(zc_plat_tcp_connect("127.0.0.1", port, pt_deadline_ms(5000), a), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_tcp_accept(ls, pt_deadline_ms(5000), b), ZC_PLAT_OK);
    zc_plat_tcp_close(ls);
}

static void pt_fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 31u + seed) ^ (i >> 11));
}

static int pt_same(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)((i * 31u + seed) ^ (i >> 11))) return 0;
    return 1;
}

static unsigned char pt_big_out[PT_MIB], pt_big_in[PT_MIB];

void platform_tcp_moves_1mib_both_ways_on_loopback(void) {
    int ls = -1;
    uint16_t port = 0;
    ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, &ls, &port), ZC_PLAT_OK);
    pid_t child = fork();
    ZT_CHECK(child >= 0);
    if (child == 0) { /* the peer: connect, send A, receive B */
        int s = -1;
        zc_plat_tcp_close(ls);
        ZT_CHECK_ST(zc_plat_tcp_connect("127.0.0.1", port, pt_deadline_ms(5000), &s), ZC_PLAT_OK);
        pt_fill(pt_big_out, PT_MIB, 1);
        ZT_CHECK_ST(zc_plat_tcp_send_all(s, pt_big_out, PT_MIB, pt_deadline_ms(10000)),
                    ZC_PLAT_OK);
        ZT_CHECK_ST(zc_plat_tcp_recv_all(s, pt_big_in, PT_MIB, pt_deadline_ms(10000)),
                    ZC_PLAT_OK);
        ZT_CHECK(pt_same(pt_big_in, PT_MIB, 2));
        zc_plat_tcp_close(s);
        _exit(0);
    }
    int s = -1;
    ZT_CHECK_ST(zc_plat_tcp_accept(ls, pt_deadline_ms(5000), &s), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_tcp_recv_all(s, pt_big_in, PT_MIB, pt_deadline_ms(10000)), ZC_PLAT_OK);
    ZT_CHECK(pt_same(pt_big_in, PT_MIB, 1));
    pt_fill(pt_big_out, PT_MIB, 2);
    ZT_CHECK_ST(zc_plat_tcp_send_all(s, pt_big_out, PT_MIB, pt_deadline_ms(10000)), ZC_PLAT_OK);
    int status = 0;
    ZT_CHECK(waitpid(child, &status, 0) == child);
    ZT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The peer has gone: the stream ends with CLOSED, not a hang or an error. */
    unsigned char one;
    ZT_CHECK_ST(zc_plat_tcp_recv_all(s, &one, 1, pt_deadline_ms(2000)), ZC_PLAT_CLOSED);
    zc_plat_tcp_close(s);
    zc_plat_tcp_close(ls);
}

void platform_tcp_recv_some_returns_again_when_idle_and_closed_after_peer_close(void) {
    int a = -1, b = -1;
    pt_tcp_pair(&a, &b);
    char buf[16];
    size_t got = 99;
    ZT_CHECK_ST(zc_plat_tcp_recv_some(b, buf, sizeof buf, &got), ZC_PLAT_AGAIN);
    ZT_CHECK_EQ(got, 0);
    ZT_CHECK_ST(zc_plat_tcp_send_all(a, "hello", 5, pt_deadline_ms(2000)), ZC_PLAT_OK);
    zc_plat_rc rc = ZC_PLAT_AGAIN;
    uint64_t t0 = zc_plat_now_ns();
    while ((rc = zc_plat_tcp_recv_some(b, buf, sizeof buf, &got)) == ZC_PLAT_AGAIN &&
           pt_ms_since(t0) < 2000)
        zc_plat_sleep_ns(PT_MS / 10);
    ZT_CHECK_ST(rc, ZC_PLAT_OK);
    ZT_CHECK(got >= 1 && got <= 5 && memcmp(buf, "hello", got) == 0);
    if (got < 5) ZT_CHECK_ST(zc_plat_tcp_recv_all(b, buf + got, 5 - got, pt_deadline_ms(2000)),
                             ZC_PLAT_OK);
    ZT_CHECK(memcmp(buf, "hello", 5) == 0);
    ZT_CHECK_ST(zc_plat_tcp_recv_some(b, buf, sizeof buf, &got), ZC_PLAT_AGAIN);
    zc_plat_tcp_close(a);
    t0 = zc_plat_now_ns();
    while ((rc = zc_plat_tcp_recv_some(b, buf, sizeof buf, &got)) == ZC_PLAT_AGAIN &&
           pt_ms_since(t0) < 2000)
        zc_plat_sleep_ns(PT_MS / 10);
    ZT_CHECK_ST(rc, ZC_PLAT_CLOSED);
    ZT_CHECK_EQ(got, 0);
    ZT_CHECK_ST(zc_plat_tcp_recv_all(b, buf, 1, pt_deadline_ms(2000)), ZC_PLAT_CLOSED);
    /* Misuse: no buffer, no room, no socket. */
    ZT_CHECK_ST(zc_plat_tcp_recv_some(b, buf, 0, &got), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_tcp_recv_some(b, buf, sizeof buf, NULL), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_tcp_recv_some(-1, buf, sizeof buf, &got), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_tcp_send_all(-1, buf, 1, 0), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_tcp_recv_all(b, NULL, 1, 0), ZC_PLAT_INVALID);
    zc_plat_tcp_close(b);
}

void platform_tcp_send_to_closed_peer_returns_closed(void) {
    int a = -1, b = -1;
    pt_tcp_pair(&a, &b);
    zc_plat_tcp_close(b);
    /* The first writes may be buffered; the RST they provoke makes a later one fail. A
     * SIGPIPE would kill the test instead (MSG_NOSIGNAL must be in effect). */
    zc_plat_rc rc = ZC_PLAT_OK;
    char chunk[4096] = {0};
    for (int i = 0; i < 1000 && rc == ZC_PLAT_OK; i++) {
        rc = zc_plat_tcp_send_all(a, chunk, sizeof chunk, pt_deadline_ms(2000));
        if (rc == ZC_PLAT_OK) zc_plat_sleep_ns(PT_MS / 10);
    }
    ZT_CHECK_ST(rc, ZC_PLAT_CLOSED);
    zc_plat_tcp_close(a);
}

void platform_tcp_connect_to_closed_port_is_refused_fast(void) {
    int ls = -1, s = -1;
    uint16_t port = 0;
    ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, &ls, &port), ZC_PLAT_OK);
    zc_plat_tcp_close(ls); /* now nobody listens on port */
    uint64_t t0 = zc_plat_now_ns();
    ZT_CHECK_ST(zc_plat_tcp_connect("127.0.0.1", port, pt_deadline_ms(5000), &s),
                ZC_PLAT_REFUSED);
    ZT_CHECK(pt_ms_since(t0) < 200);
    ZT_CHECK_EQ(s, -1);
    ZT_CHECK_EQ(zc_plat_os_error(), ECONNREFUSED);
    /* Misuse. */
    ZT_CHECK_ST(zc_plat_tcp_connect("127.0.0.1", 0, pt_deadline_ms(100), &s), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_tcp_connect(NULL, port, pt_deadline_ms(100), &s), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_tcp_connect("127.0.0.1", port, pt_deadline_ms(100), NULL),
                ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, NULL, &port), ZC_PLAT_INVALID);
}

/* A listener with a full accept queue that nobody accepts from: Linux drops further SYNs, so a
 * connect to it cannot complete before its deadline. Made with raw calls (backlog 1). */
static int pt_stuck_listener(uint16_t *port_out) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ZT_CHECK(fd >= 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    ZT_CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    ZT_CHECK(listen(fd, 1) == 0);
    ZT_CHECK(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    *port_out = ntohs(sa.sin_port);
    return fd;
}

void platform_tcp_connect_past_deadline_times_out(void) {
    uint16_t port = 0;
    int lfd = pt_stuck_listener(&port);
    int conns[8];
    int n = 0;
    for (; n < 8; n++) {
        uint64_t t0 = zc_plat_now_ns();
        zc_plat_rc rc = zc_plat_tcp_connect("127.0.0.1", port, pt_deadline_ms(300), &conns[n]);
        if (rc == ZC_PLAT_OK) continue; /* still room in the queue */
        uint64_t ms = pt_ms_since(t0);
        ZT_CHECK(rc == ZC_PLAT_TIMEOUT || rc == ZC_PLAT_REFUSED);
        if (rc == ZC_PLAT_TIMEOUT) ZT_CHECK(ms >= 300 && ms < 1500);
        break;
    }
    if (n == 8) {
        /* The kernel completed every handshake: show the deadline on a silent stream instead. */
        char buf[8];
        uint64_t t0 = zc_plat_now_ns();
        ZT_CHECK_ST(zc_plat_tcp_recv_all(conns[0], buf, sizeof buf, pt_deadline_ms(300)),
                    ZC_PLAT_TIMEOUT);
        uint64_t ms = pt_ms_since(t0);
        ZT_CHECK(ms >= 300 && ms < 1500);
    }
    for (int i = 0; i < n; i++) zc_plat_tcp_close(conns[i]);
    close(lfd);
}

void platform_tcp_recv_all_past_deadline_times_out(void) {
    int a = -1, b = -1;
    pt_tcp_pair(&a, &b);
    char buf[8];
    ZT_CHECK_ST(zc_plat_tcp_send_all(a, "abc", 3, pt_deadline_ms(1000)), ZC_PLAT_OK);
    uint64_t t0 = zc_plat_now_ns();
    /* 3 of 8 bytes arrive, then silence. */
    ZT_CHECK_ST(zc_plat_tcp_recv_all(b, buf, sizeof buf, pt_deadline_ms(300)), ZC_PLAT_TIMEOUT);
    uint64_t ms = pt_ms_since(t0);
    ZT_CHECK(ms >= 300 && ms < 1500);
    /* Deadline 0: one try, then AGAIN instead of waiting. */
    ZT_CHECK_ST(zc_plat_tcp_recv_all(b, buf, sizeof buf, 0), ZC_PLAT_AGAIN);
    zc_plat_tcp_close(a);
    zc_plat_tcp_close(b);
}

void platform_tcp_accept_past_deadline_times_out(void) {
    int ls = -1, s = -1;
    uint16_t port = 0;
    ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, &ls, &port), ZC_PLAT_OK);
    uint64_t t0 = zc_plat_now_ns();
    ZT_CHECK_ST(zc_plat_tcp_accept(ls, pt_deadline_ms(200), &s), ZC_PLAT_TIMEOUT);
    uint64_t ms = pt_ms_since(t0);
    ZT_CHECK(ms >= 200 && ms < 1200);
    t0 = zc_plat_now_ns();
    ZT_CHECK_ST(zc_plat_tcp_accept(ls, 0, &s), ZC_PLAT_AGAIN);
    ZT_CHECK(pt_ms_since(t0) < 100);
    ZT_CHECK_ST(zc_plat_tcp_accept(-1, 0, &s), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_tcp_accept(ls, 0, NULL), ZC_PLAT_INVALID);
    zc_plat_tcp_close(ls);
}

/* ---- process and host -------------------------------------------------------------------- */

void platform_random_draws_differ(void) {
    unsigned char a[32], b[32];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    ZT_CHECK_ST(zc_plat_random(a, sizeof a), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_random(b, sizeof b), ZC_PLAT_OK);
    ZT_CHECK(memcmp(a, b, sizeof a) != 0);
    static const unsigned char zero[32];
    ZT_CHECK(memcmp(a, zero, sizeof a) != 0);
    static unsigned char big[100000];
    ZT_CHECK_ST(zc_plat_random(big, sizeof big), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_random(big, 0), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_random(NULL, 1), ZC_PLAT_INVALID);
}

void platform_host_id_is_stable_and_nonempty(void) {
    char a[512], b[512], host[256];
    ZT_CHECK_ST(zc_plat_host_id(a, sizeof a), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_host_id(b, sizeof b), ZC_PLAT_OK);
    ZT_CHECK(a[0] != '\0');
    ZT_CHECK(strcmp(a, b) == 0);
    ZT_CHECK(gethostname(host, sizeof host) == 0);
    ZT_CHECK(strncmp(a, host, strlen(host)) == 0 && a[strlen(host)] == ':');
    ZT_CHECK(strlen(a) > strlen(host) + 1); /* a boot id follows */
    ZT_CHECK(strchr(a, '\n') == NULL);
    /* The same in a child process (the identity is per host, not per process). */
    pid_t child = fork();
    ZT_CHECK(child >= 0);
    if (child == 0) {
        char c[512];
        _exit(zc_plat_host_id(c, sizeof c) == ZC_PLAT_OK && strcmp(c, a) == 0 ? 0 : 1);
    }
    int status = 0;
    ZT_CHECK(waitpid(child, &status, 0) == child);
    ZT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char tiny[4];
    ZT_CHECK_ST(zc_plat_host_id(tiny, sizeof tiny), ZC_PLAT_INVALID);
    ZT_CHECK_ST(zc_plat_host_id(NULL, 16), ZC_PLAT_INVALID);
}

void platform_process_alive_tracks_self_reaped_child_and_zombie(void) {
    ZT_CHECK_EQ(zc_plat_process_id(), getpid());
    ZT_CHECK_ST(zc_plat_process_alive(zc_plat_process_id()), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_process_alive((uint64_t)getppid()), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_process_alive(1), ZC_PLAT_OK); /* EPERM when not root: still alive */
    ZT_CHECK_ST(zc_plat_process_alive(0), ZC_PLAT_INVALID);
    /* Exited and reaped. */
    pid_t child = fork();
    ZT_CHECK(child >= 0);
    if (child == 0) _exit(0);
    int status = 0;
    ZT_CHECK(waitpid(child, &status, 0) == child);
    ZT_CHECK_ST(zc_plat_process_alive((uint64_t)child), ZC_PLAT_NOT_FOUND);
    /* Exited, not reaped: a zombie counts as exited. */
    child = fork();
    ZT_CHECK(child >= 0);
    if (child == 0) _exit(0);
    siginfo_t info;
    memset(&info, 0, sizeof info);
    ZT_CHECK(waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT) == 0);
    ZT_CHECK_ST(zc_plat_process_alive((uint64_t)child), ZC_PLAT_NOT_FOUND);
    ZT_CHECK(waitpid(child, &status, 0) == child);
    /* A live child is alive. */
    child = fork();
    ZT_CHECK(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    ZT_CHECK_ST(zc_plat_process_alive((uint64_t)child), ZC_PLAT_OK);
    kill(child, SIGKILL);
    ZT_CHECK(waitpid(child, &status, 0) == child);
}

void platform_getenv_reads_set_and_unset_variables(void) {
    ZT_CHECK(setenv("ZCT_PLATFORM_VAR", "some value", 1) == 0);
    const char *v = zc_plat_getenv("ZCT_PLATFORM_VAR");
    ZT_CHECK(v != NULL && strcmp(v, "some value") == 0);
    ZT_CHECK(unsetenv("ZCT_PLATFORM_VAR") == 0);
    ZT_CHECK(zc_plat_getenv("ZCT_PLATFORM_VAR") == NULL);
    ZT_CHECK(zc_plat_getenv(NULL) == NULL);
}

void platform_os_error_text_and_rc_names_are_distinct(void) {
    char text[256];
    zc_plat_os_error_text(EACCES, text, sizeof text);
    ZT_CHECK(text[0] != '\0');
    zc_plat_os_error_text(987654, text, sizeof text); /* no such errno: still some text */
    ZT_CHECK(text[0] != '\0');
    char one[1] = {'x'};
    zc_plat_os_error_text(EACCES, one, sizeof one);
    ZT_CHECK_EQ(one[0], '\0');
    char small[8];
    memset(small, 'x', sizeof small);
    zc_plat_os_error_text(EACCES, small, sizeof small);
    ZT_CHECK(memchr(small, '\0', sizeof small) != NULL);
    /* An OS failure records its errno: send on a file that is not a socket. */
    int fd = open("/dev/null", O_RDWR);
    ZT_CHECK(fd >= 0);
    ZT_CHECK_ST(zc_plat_tcp_send_all(fd, "x", 1, pt_deadline_ms(100)), ZC_PLAT_ERROR);
    ZT_CHECK_EQ(zc_plat_os_error(), ENOTSOCK);
    close(fd);
    const zc_plat_rc all[] = {ZC_PLAT_OK,        ZC_PLAT_TIMEOUT, ZC_PLAT_AGAIN,
                              ZC_PLAT_CLOSED,    ZC_PLAT_REFUSED, ZC_PLAT_EXISTS,
                              ZC_PLAT_NOT_FOUND, ZC_PLAT_INVALID, ZC_PLAT_UNSUPPORTED,
                              ZC_PLAT_ERROR};
    const size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++) {
        const char *a = zc_plat_rc_name(all[i]);
        ZT_CHECK(a != NULL && strncmp(a, "ZC_PLAT_", 8) == 0);
        for (size_t j = 0; j < i; j++) ZT_CHECK(strcmp(a, zc_plat_rc_name(all[j])) != 0);
    }
    ZT_CHECK(strcmp(zc_plat_rc_name(ZC_PLAT_TIMEOUT), "ZC_PLAT_TIMEOUT") == 0);
    ZT_CHECK(zc_plat_rc_name((zc_plat_rc)-100) != NULL);
}

/* ---- log and panic ----------------------------------------------------------------------- */

/* Runs fn in a child whose stderr goes to out; returns the child's wait status. */
static int pt_capture_stderr(void (*fn)(const char *), const char *arg, char *out, size_t cap) {
    int fds[2];
    ZT_CHECK(pipe(fds) == 0);
    pid_t child = fork();
    ZT_CHECK(child >= 0);
    if (child == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    size_t used = 0;
    while (used + 1 < cap) {
        ssize_t n = read(fds[0], out + used, cap - 1 - used);
        if (n > 0) used += (size_t)n;
        else if (n == 0 || errno != EINTR) break;
    }
    out[used] = '\0';
    close(fds[0]);
    int status = 0;
    ZT_CHECK(waitpid(child, &status, 0) == child);
    return status;
}

static void pt_log_all_levels(const char *zc_log) {
    if (zc_log) setenv("ZC_LOG", zc_log, 1);
    else unsetenv("ZC_LOG");
    zc_plat_log(ZC_PLAT_LOG_ERROR, "line-error");
    zc_plat_log(ZC_PLAT_LOG_WARN, "line-warn");
    zc_plat_log(ZC_PLAT_LOG_INFO, "line-info");
    zc_plat_log(ZC_PLAT_LOG_DEBUG, "line-debug");
}

void platform_log_filters_by_zc_log_level(void) {
    char out[1024];
    int st = pt_capture_stderr(pt_log_all_levels, NULL, out, sizeof out);
    ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ZT_CHECK(strcmp(out, "zcoll: error: line-error\nzcoll: warn: line-warn\n") == 0);
    pt_capture_stderr(pt_log_all_levels, "error", out, sizeof out);
    ZT_CHECK(strcmp(out, "zcoll: error: line-error\n") == 0);
    pt_capture_stderr(pt_log_all_levels, "info", out, sizeof out);
    ZT_CHECK(strstr(out, "line-info") != NULL && strstr(out, "line-debug") == NULL);
    pt_capture_stderr(pt_log_all_levels, "debug", out, sizeof out);
    ZT_CHECK(strstr(out, "zcoll: debug: line-debug\n") != NULL);
    ZT_CHECK(strstr(out, "zcoll: error: line-error\n") == out);
}

static void pt_panic(const char *what) { zc_plat_panic("some/file.c", 123, what); }

void platform_panic_prints_where_and_aborts(void) {
    char out[1024];
    int st = pt_capture_stderr(pt_panic, "the invariant broke", out, sizeof out);
    ZT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    ZT_CHECK(strstr(out, "zcoll: panic at some/file.c:123: the invariant broke\n") != NULL);
}
