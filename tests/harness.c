/* harness.c: the test runner's machinery (zt.h), shared by build/zctest (tests/main.c) and
 * build/zcgputest (tests/gpu/main.c): failing and skipping a test, running programs and rank
 * programs under zcrun with a time limit, and zt_main, which runs a list of tests each in its own
 * forked process group and counts the results. Owns process plumbing for tests; allocates
 * nothing. */
#define _GNU_SOURCE
#include "zt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char zt_dir[4096];  /* the folder of the running binary */
static char zt_self[4096]; /* the running binary */

const char *zt_build_dir(void) { return zt_dir; }

void zt_fail(const char *file, int line, const char *expr, const char *detail) {
    printf("    %s:%d: check failed: %s%s%s\n", file, line, expr, detail ? "  -- " : "",
           detail ? detail : "");
    fflush(stdout);
    _exit(1);
}

void zt_fail_status(const char *file, int line, const char *expr, int got, int want) {
    char d[96];
    snprintf(d, sizeof d, "returned %d, expected %d", got, want);
    zt_fail(file, line, expr, d);
}

void zt_skip(const char *why) {
    printf("    skipped: %s\n", why);
    fflush(stdout);
    _exit(77);
}

uint64_t zt_seed(void) {
    const char *s = getenv("ZT_SEED");
    return s ? strtoull(s, NULL, 0) : 20261121ull;
}

void zt_inproc_config(zc_config *cfg, uint32_t n, uint32_t slots, uint32_t slot_bytes) {
    zc_config_default(cfg);
    cfg->transport = ZC_TRANSPORT_INPROC;
    cfg->nranks = n;
    cfg->slots = slots;
    cfg->slot_bytes = slot_bytes;
}

void zt_inproc_open(const zc_config *cfg, void **arenas, zc_comm **comms) {
    size_t bytes = zc_comm_arena_bytes(cfg);
    ZT_CHECK(bytes > 0);
    for (uint32_t r = 0; r < cfg->nranks; r++)
        ZT_CHECK((arenas[r] = aligned_alloc(64, bytes)) != NULL);
    zc_status st = zc_comm_init_inproc(cfg, arenas, bytes, comms);
    if (st != ZC_OK) printf("    init: %s\n", zc_init_error_text());
    ZT_CHECK_ST(st, ZC_OK);
}

void zt_inproc_close(uint32_t n, void **arenas, zc_comm **comms) {
    for (uint32_t r = 0; r < n; r++) {
        ZT_CHECK_ST(zc_comm_fini(comms[r]), ZC_OK);
        free(arenas[r]);
    }
}

uint64_t zt_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits for pid until deadline_ms; kills its process group at the deadline. */
static int zt_wait_child(pid_t pid, uint64_t deadline_ms, int pipe_fd, char *out, size_t cap) {
    size_t used = 0;
    int status = 0;
    for (;;) {
        if (pipe_fd >= 0) {
            char sink[4096];
            char *dst = (out && used + 1 < cap) ? out + used : sink;
            size_t room = (out && used + 1 < cap) ? cap - 1 - used : sizeof sink;
            ssize_t n = read(pipe_fd, dst, room);
            if (n > 0) {
                if (dst != sink) used += (size_t)n;
                continue;
            }
            if (n == 0) pipe_fd = -1;
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (zt_now_ms() >= deadline_ms) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(2000);
    }
    /* Drain what the child left in the pipe. */
    while (pipe_fd >= 0 && out && used + 1 < cap) {
        ssize_t n = read(pipe_fd, out + used, cap - 1 - used);
        if (n <= 0) break;
        used += (size_t)n;
    }
    if (out && cap) out[used] = '\0';
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

int zt_run(const char *const argv[], const char *const env[], char *out, size_t cap,
           uint32_t timeout_ms, uint32_t *elapsed_ms) {
    int fds[2] = {-1, -1};
    if (out && pipe(fds) != 0) return -1;
    uint64_t t0 = zt_now_ms();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        setpgid(0, 0);
        if (out) {
            dup2(fds[1], 1);
            dup2(fds[1], 2);
            close(fds[0]);
            close(fds[1]);
        }
        for (size_t i = 0; env && env[i]; i++) putenv((char *)(uintptr_t)env[i]);
        execv(argv[0], (char *const *)(uintptr_t)argv);
        fprintf(stderr, "zt_run: cannot start %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    if (out) {
        close(fds[1]);
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
    }
    int rc = zt_wait_child(pid, t0 + timeout_ms, out ? fds[0] : -1, out, cap);
    if (out) close(fds[0]);
    if (elapsed_ms) *elapsed_ms = (uint32_t)(zt_now_ms() - t0);
    return rc;
}

int zt_rank_fail(const char *what, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s FAILED: rank %s: ", what, getenv("ZC_RANK") ? getenv("ZC_RANK") : "?");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    return 1;
}

int zt_run_ranks(uint32_t nranks, const char *rank_fn_name, uint32_t timeout_s,
                 const char *const env[], char *out, size_t cap) {
    char zcrun[4200], n[16], t[16];
    snprintf(zcrun, sizeof zcrun, "%s/zcrun", zt_dir);
    snprintf(n, sizeof n, "%u", nranks);
    snprintf(t, sizeof t, "%u", timeout_s);
    const char *argv[] = {zcrun, "-n", n, "--timeout", t, zt_self, "--rank", rank_fn_name, NULL};
    return zt_run(argv, env, out, cap, (timeout_s + 10u) * 1000u, NULL);
}


static int zt_selected(const char *name, int argc, char **argv) {
    if (argc <= 1) return 1;
    for (int i = 1; i < argc; i++)
        if (strncmp(name, argv[i], strlen(argv[i])) == 0) return 1;
    return 0;
}

static void zt_find_dir(const char *argv0) {
    ssize_t n = readlink("/proc/self/exe", zt_self, sizeof zt_self - 1);
    if (n <= 0) {
        snprintf(zt_self, sizeof zt_self, "%s", argv0);
        n = (ssize_t)strlen(zt_self);
    }
    zt_self[n] = '\0';
    snprintf(zt_dir, sizeof zt_dir, "%s", zt_self);
    char *slash = strrchr(zt_dir, '/');
    if (slash) *slash = '\0';
    else snprintf(zt_dir, sizeof zt_dir, ".");
}


double zt_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One test in its own process group, killed (the group) at its time limit; its exit status. */
static int zt_run_test(const zt_entry *t) {
    uint64_t t0 = zt_now_ms();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        t->fn();
        fflush(stdout);
        _exit(0);
    }
    setpgid(pid, pid);
    int rc = pid < 0 ? -1 : zt_wait_child(pid, t0 + t->timeout_s * 1000ull, -1, NULL, 0);
    kill(-pid, SIGKILL); /* no stray grandchildren */
    return rc;
}

int zt_main(int argc, char **argv, const char *name, const zt_entry *tests, size_t ntests,
            const zt_rank_entry *ranks) {
    zt_find_dir(argv[0]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "--rank") == 0) {
        for (size_t i = 0; ranks[i].name; i++)
            if (strcmp(ranks[i].name, argv[2]) == 0) return ranks[i].fn();
        fprintf(stderr, "%s: no rank program named %s\n", name, argv[2]);
        return 2;
    }
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < ntests; i++) printf("%s\n", tests[i].name);
        return 0;
    }
    unsigned passed = 0, failed = 0, skipped = 0;
    printf("%s: seed %llu (set ZT_SEED to replay)\n", name, (unsigned long long)zt_seed());
    for (size_t i = 0; i < ntests; i++) {
        const zt_entry *t = &tests[i];
        if (!zt_selected(t->name, argc, argv)) continue;
        uint64_t t0 = zt_now_ms();
        int rc = zt_run_test(t);
        unsigned ms = (unsigned)(zt_now_ms() - t0);
        if (rc == 0) {
            passed++;
            printf("ok   %s (%u ms)\n", t->name, ms);
        } else if (rc == 77) {
            skipped++;
            printf("skip %s\n", t->name);
        } else {
            failed++;
            printf("FAIL %s (exit %d%s, %u ms)\n", t->name, rc,
                   rc == 128 + SIGKILL ? ": time limit or crash" : "", ms);
        }
    }
    printf("%u passed, %u failed, %u skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
