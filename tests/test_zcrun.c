/* test_zcrun.c: the launcher's behaviour seen from outside: output prefixes, the rank
 * environment, stopping a job on failure, timeout and signals, exit statuses and usage. The
 * rank programs here run under the build's zcrun as `zctest --rank NAME`. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "zt.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char zr_out[1 << 19];

static const char *zr_path(const char *name) {
    static char paths[2][4200];
    char *p = paths[strcmp(name, "zcrun") == 0 ? 0 : 1];
    snprintf(p, sizeof paths[0], "%s/%s", zt_build_dir(), name);
    return p;
}

/* Runs zcrun with args (NULL-terminated, after argv[0]) capturing into zr_out. */
static int zr_zcrun(const char *const args[], uint32_t *elapsed_ms) {
    const char *argv[16] = {zr_path("zcrun")};
    size_t n = 1;
    for (; args[n - 1]; n++) {
        ZT_CHECK(n + 1 < sizeof argv / sizeof argv[0]);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    return zt_run(argv, NULL, zr_out, sizeof zr_out, 20000, elapsed_ms);
}

static size_t zr_count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* The rank number in a "[r] " prefix at the start of line, or -1 without one. */
static int zr_prefix_rank(const char *line, size_t *prefix_len) {
    unsigned r = 0;
    int end = 0;
    if (sscanf(line, "[%u] %n", &r, &end) != 1 || end == 0 || line[end - 1] != ' ') return -1;
    if (prefix_len) *prefix_len = (size_t)end;
    return (int)r;
}

static void zr_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int zr_env_rank(void) {
    const char *r = getenv("ZC_RANK");
    return r ? atoi(r) : -1;
}

/* Prints "pid P" so the test can check the process is gone after zcrun returns. */
static void zr_print_pid(void) {
    printf("pid %ld\n", (long)getpid());
    fflush(stdout);
}

/* Every "[r] pid P" line's process must be gone; returns how many there were. */
static size_t zr_check_pids_gone(const char *out) {
    size_t n = 0;
    for (const char *p = out; (p = strstr(p, "] pid ")) != NULL; p += 6) {
        long pid = strtol(p + 6, NULL, 10);
        ZT_CHECK(pid > 1);
        errno = 0;
        ZT_CHECK(kill((pid_t)pid, 0) == -1 && errno == ESRCH);
        n++;
    }
    return n;
}

/* ---- rank programs ---------------------------------------------------------------------- */

int zcrun_rank_prints_three_lines(void) {
    int r = zr_env_rank();
    printf("out line from rank %d\n", r);
    fflush(stdout);
    fprintf(stderr, "err line from rank %d\n", r);
    printf("last line without newline from rank %d", r);
    return 0;
}

/* "cpus of rank R: a b c" from this process's CPU affinity. */
int zcrun_rank_prints_its_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    printf("cpus of rank %d:", zr_env_rank());
    for (size_t c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) printf(" %zu", c);
    printf("\n");
    return 0;
}

int zcrun_rank_prints_long_line(void) {
    static char line[100001];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    fwrite(line, 1, sizeof line, stdout);
    return 0;
}

int zcrun_rank_prints_env(void) {
    const char *names[] = {"ZC_RANK", "ZC_NRANKS", "ZC_LOCAL_RANK", "ZC_ROOT_ADDR", "ZC_SECRET"};
    printf("env");
    for (size_t i = 0; i < 5; i++) printf(" %s", getenv(names[i]) ? getenv(names[i]) : "unset");
    printf("\n");
    return 0;
}

/* Rank 1 fails once every rank is up (ready files named with the job secret), so every pid
 * has been printed; the others would sleep 30 s. */
int zcrun_rank_1_exits_3_others_sleep(void) {
    const char *secret = getenv("ZC_SECRET");
    int r = zr_env_rank(), n = atoi(getenv("ZC_NRANKS") ? getenv("ZC_NRANKS") : "0");
    char path[128];
    zr_print_pid();
    snprintf(path, sizeof path, "/tmp/zcrun_test_%s_%d.ready", secret ? secret : "none", r);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    if (r != 1) {
        zr_sleep_ms(30000);
        return 0;
    }
    for (int other = 0, waited = 0; other < n && waited < 5000; waited++) {
        snprintf(path, sizeof path, "/tmp/zcrun_test_%s_%d.ready", secret ? secret : "none",
                 other);
        if (access(path, F_OK) == 0) other++;
        else zr_sleep_ms(1);
    }
    for (int other = 0; other < n; other++) {
        snprintf(path, sizeof path, "/tmp/zcrun_test_%s_%d.ready", secret ? secret : "none",
                 other);
        unlink(path);
    }
    return 3;
}

int zcrun_rank_0_killed_by_sigkill(void) {
    zr_print_pid();
    if (zr_env_rank() == 0) raise(SIGKILL);
    zr_sleep_ms(30000);
    return 0;
}

/* Ignores SIGTERM so only zcrun's SIGKILL can end it (or 30 s, if zcrun is broken). */
int zcrun_rank_ignores_term_and_hangs(void) {
    signal(SIGTERM, SIG_IGN);
    zr_print_pid();
    zr_sleep_ms(30000);
    return 0;
}

/* Exits at once, leaving a child in its process group that would sleep 30 s. */
int zcrun_rank_leaves_child_behind(void) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        zr_sleep_ms(30000);
        _exit(0);
    }
    printf("child %ld\n", (long)child);
    return child > 0 ? 0 : 1;
}

int zcrun_rank_0_fails_1_survives(void) {
    if (zr_env_rank() == 0) return 5;
    zr_sleep_ms(300);
    printf("survivor done\n");
    return 0;
}

/* Writes a line every millisecond for up to 30 s. */
int zcrun_rank_writes_until_stopped(void) {
    for (int i = 0; i < 30000; i++) {
        printf("line %d\n", i);
        zr_sleep_ms(1);
    }
    return 0;
}

/* SIGTERM is blocked before "ready" is printed, so the test's signal cannot be missed; the
 * wait is bounded so a broken zcrun leaves no rank behind for long. */
int zcrun_rank_waits_for_term(void) {
    sigset_t set;
    int sig;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    printf("ready\n");
    fflush(stdout);
    struct timespec limit = {30, 0};
    sig = sigtimedwait(&set, NULL, &limit);
    if (sig != SIGTERM) return 1;
    printf("got TERM\n");
    return 0;
}

/* ---- tests ------------------------------------------------------------------------------ */

void zcrun_prefixes_each_output_line_with_rank(void) {
    const char *args[] = {"-n", "3", zr_path("zctest"), "--rank",
                          "zcrun_rank_prints_three_lines", NULL};
    ZT_CHECK_EQ(zr_zcrun(args, NULL), 0);
    ZT_CHECK_EQ(zr_count(zr_out, "\n"), 9);
    for (char *line = zr_out; *line;) {
        char *nl = strchr(line, '\n');
        ZT_CHECK(nl != NULL);
        int r = zr_prefix_rank(line, NULL);
        ZT_CHECK(r >= 0 && r < 3);
        line = nl + 1;
    }
    for (int r = 0; r < 3; r++) {
        char want[96];
        snprintf(want, sizeof want, "[%d] out line from rank %d\n", r, r);
        ZT_CHECK_EQ(zr_count(zr_out, want), 1);
        snprintf(want, sizeof want, "[%d] err line from rank %d\n", r, r);
        ZT_CHECK_EQ(zr_count(zr_out, want), 1);
        snprintf(want, sizeof want, "[%d] last line without newline from rank %d\n", r, r);
        ZT_CHECK_EQ(zr_count(zr_out, want), 1);
    }
}

void zcrun_splits_overlong_lines_into_prefixed_pieces(void) {
    const char *args[] = {"-n", "2", zr_path("zctest"), "--rank",
                          "zcrun_rank_prints_long_line", NULL};
    size_t xs[2] = {0, 0}, pieces[2] = {0, 0};
    ZT_CHECK_EQ(zr_zcrun(args, NULL), 0);
    for (char *line = zr_out; *line;) {
        char *nl = strchr(line, '\n');
        size_t skip = 0;
        int r = zr_prefix_rank(line, &skip);
        ZT_CHECK(nl != NULL && (r == 0 || r == 1));
        size_t run = strspn(line + skip, "x");
        ZT_CHECK(line + skip + run == nl); /* nothing but x inside a piece */
        xs[r] += run;
        pieces[r]++;
        line = nl + 1;
    }
    for (int r = 0; r < 2; r++) {
        ZT_CHECK_EQ(xs[r], 100000);
        ZT_CHECK(pieces[r] >= 2);
    }
}

/* Parses the "[r] env ..." lines of one 3-rank job; returns the job's secret in secret. */
static void zr_check_env_job(char secret[64]) {
    char addr0[64] = "", secret0[64] = "";
    const char *args[] = {"-n", "3", zr_path("zctest"), "--rank", "zcrun_rank_prints_env", NULL};
    ZT_CHECK_EQ(zr_zcrun(args, NULL), 0);
    ZT_CHECK_EQ(zr_count(zr_out, "] env "), 3);
    for (int r = 0; r < 3; r++) {
        char want[16], rank[16], nranks[16], local[16], addr[64], sec[64];
        unsigned port = 0;
        int end = 0;
        snprintf(want, sizeof want, "[%d] env ", r);
        const char *line = strstr(zr_out, want);
        ZT_CHECK(line != NULL);
        ZT_CHECK_EQ(sscanf(line, "[%*d] env %15s %15s %15s %63s %63s", rank, nranks, local,
                           addr, sec), 5);
        ZT_CHECK_EQ(atoi(rank), r);
        ZT_CHECK(strcmp(nranks, "3") == 0);
        ZT_CHECK_EQ(atoi(local), r);
        ZT_CHECK(sscanf(addr, "127.0.0.1:%u%n", &port, &end) == 1 && addr[end] == '\0');
        ZT_CHECK(port >= 1 && port <= 65535);
        ZT_CHECK_EQ(strlen(sec), 32);
        ZT_CHECK_EQ(strspn(sec, "0123456789abcdef"), 32);
        if (r == 0) {
            snprintf(addr0, sizeof addr0, "%s", addr);
            snprintf(secret0, sizeof secret0, "%s", sec);
        }
        ZT_CHECK(strcmp(addr, addr0) == 0);
        ZT_CHECK(strcmp(sec, secret0) == 0);
    }
    snprintf(secret, 64, "%s", secret0);
}

void zcrun_sets_rank_env_and_fresh_secret_per_job(void) {
    char first[64], second[64];
    zr_check_env_job(first);
    zr_check_env_job(second);
    ZT_CHECK(strcmp(first, second) != 0);
}

void zcrun_exit_3_stops_job_within_a_second(void) {
    const char *args[] = {"-n", "3", zr_path("zctest"), "--rank",
                          "zcrun_rank_1_exits_3_others_sleep", NULL};
    uint32_t elapsed_ms = 0;
    ZT_CHECK_EQ(zr_zcrun(args, &elapsed_ms), 3);
    ZT_CHECK(elapsed_ms < 1000);
    ZT_CHECK(strstr(zr_out, "zcrun: rank 1 exited with status 3\n") != NULL);
    ZT_CHECK_EQ(zr_check_pids_gone(zr_out), 3);
}

void zcrun_reports_rank_killed_by_signal_as_128_plus_signal(void) {
    const char *args[] = {"-n", "2", zr_path("zctest"), "--rank",
                          "zcrun_rank_0_killed_by_sigkill", NULL};
    uint32_t elapsed_ms = 0;
    ZT_CHECK_EQ(zr_zcrun(args, &elapsed_ms), 128 + SIGKILL);
    ZT_CHECK(elapsed_ms < 2000);
    ZT_CHECK(strstr(zr_out, "zcrun: rank 0 killed by signal SIGKILL") != NULL);
    zr_check_pids_gone(zr_out);
}

void zcrun_timeout_kills_hung_rank_and_exits_124(void) {
    const char *args[] = {"-n", "2", "--timeout", "1", zr_path("zctest"), "--rank",
                          "zcrun_rank_ignores_term_and_hangs", NULL};
    uint32_t elapsed_ms = 0;
    ZT_CHECK_EQ(zr_zcrun(args, &elapsed_ms), 124);
    ZT_CHECK(elapsed_ms >= 1000 && elapsed_ms < 3000);
    ZT_CHECK(strstr(zr_out, "zcrun: timeout after 1 s, stopping 2 ranks\n") != NULL);
    ZT_CHECK_EQ(zr_check_pids_gone(zr_out), 2);
}

void zcrun_keep_going_waits_for_survivors(void) {
    const char *keep[] = {"-n", "2", "--keep-going", zr_path("zctest"), "--rank",
                          "zcrun_rank_0_fails_1_survives", NULL};
    ZT_CHECK_EQ(zr_zcrun(keep, NULL), 5);
    ZT_CHECK(strstr(zr_out, "[1] survivor done\n") != NULL);
    ZT_CHECK(strstr(zr_out, "zcrun: rank 0 exited with status 5\n") != NULL);
    /* The contrast: without --keep-going the survivor is stopped before it finishes. */
    const char *stop[] = {"-n", "2", zr_path("zctest"), "--rank",
                          "zcrun_rank_0_fails_1_survives", NULL};
    ZT_CHECK_EQ(zr_zcrun(stop, NULL), 5);
    ZT_CHECK(strstr(zr_out, "survivor done") == NULL);
}

void zcrun_kills_what_a_rank_left_in_its_group(void) {
    /* Orphans become our children, so we can see how they ended (and reap them). */
    ZT_CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
    const char *args[] = {"-n", "2", zr_path("zctest"), "--rank",
                          "zcrun_rank_leaves_child_behind", NULL};
    ZT_CHECK_EQ(zr_zcrun(args, NULL), 0);
    ZT_CHECK_EQ(zr_count(zr_out, "] child "), 2);
    pid_t children[2] = {0, 0}, got[2] = {0, 0};
    int status[2] = {0, 0};
    const char *p = zr_out;
    for (int c = 0; c < 2; c++, p += 8) {
        p = strstr(p, "] child ");
        children[c] = (pid_t)strtol(p + 8, NULL, 10);
        ZT_CHECK(children[c] > 1);
    }
    for (int waited = 0; waited < 2000 && (got[0] == 0 || got[1] == 0); waited++) {
        for (int c = 0; c < 2; c++)
            if (got[c] == 0) got[c] = waitpid(children[c], &status[c], WNOHANG);
        zr_sleep_ms(1);
    }
    for (int c = 0; c < 2; c++) {
        if (got[c] == 0) kill(children[c], SIGKILL); /* leave nothing behind on failure */
    }
    for (int c = 0; c < 2; c++) {
        ZT_CHECK_EQ(got[c], children[c]);
        ZT_CHECK(WIFSIGNALED(status[c]) && WTERMSIG(status[c]) == SIGKILL);
    }
}

/* Starts zcrun with stdout+stderr into a pipe; returns its pid and the read end in *fd. */
static pid_t zr_start_zcrun(const char *const argv[], int *fd) {
    int p[2];
    ZT_CHECK(pipe(p) == 0);
    pid_t pid = fork();
    ZT_CHECK(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execv(argv[0], (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    close(p[1]);
    *fd = p[0];
    return pid;
}

/* Appends what fd yields to zr_out until `count` copies of needle are there (0: until EOF)
 * or deadline_ms passes; returns false at the deadline. */
static bool zr_read_until(int fd, size_t *used, const char *needle, size_t count,
                          int deadline_ms) {
    for (int waited = 0; waited < deadline_ms; waited += 10) {
        if (count && zr_count(zr_out, needle) >= count) return true;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 10) <= 0) continue;
        ssize_t n = read(fd, zr_out + *used, sizeof zr_out - 1 - *used);
        if (n <= 0) return count == 0;
        *used += (size_t)n;
        zr_out[*used] = '\0';
    }
    return false;
}

void zcrun_forwards_sigterm_to_ranks(void) {
    const char *argv[] = {zr_path("zcrun"), "-n", "3", "--timeout", "20", zr_path("zctest"),
                          "--rank", "zcrun_rank_waits_for_term", NULL};
    int fd = -1, status = 0;
    size_t used = 0;
    zr_out[0] = '\0';
    pid_t pid = zr_start_zcrun(argv, &fd);
    bool ready = zr_read_until(fd, &used, "] ready\n", 3, 5000);
    if (!ready) kill(pid, SIGTERM); /* zcrun passes it on, so no rank waits forever */
    ZT_CHECK(ready);
    zr_sleep_ms(300);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ZT_CHECK(kill(pid, SIGTERM) == 0);
    ZT_CHECK(zr_read_until(fd, &used, "", 0, 10000));
    ZT_CHECK(waitpid(pid, &status, 0) == pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000L + (t1.tv_nsec - t0.tv_nsec) / 1000000L;
    /* Every rank exited 0 on its own, well before the 2 s SIGKILL; zcrun reports that it
     * was interrupted with 128 + SIGTERM. */
    ZT_CHECK(ms < 1500);
    ZT_CHECK(WIFEXITED(status));
    ZT_CHECK_EQ(WEXITSTATUS(status), 128 + SIGTERM);
    for (int r = 0; r < 3; r++) {
        char want[32];
        snprintf(want, sizeof want, "[%d] got TERM\n", r);
        ZT_CHECK_EQ(zr_count(zr_out, want), 1);
    }
    close(fd);
}

void zcrun_closed_stdout_ends_ranks_with_sigpipe(void) {
    const char *argv[] = {zr_path("zcrun"), "-n", "2", "--timeout", "20", zr_path("zctest"),
                          "--rank", "zcrun_rank_writes_until_stopped", NULL};
    int fd = -1, status = 0;
    size_t used = 0;
    zr_out[0] = '\0';
    pid_t pid = zr_start_zcrun(argv, &fd);
    bool started = zr_read_until(fd, &used, "] line ", 2, 5000);
    close(fd); /* like `zcrun ... | head -2` */
    pid_t got = 0;
    for (int waited = 0; waited < 3000 && got == 0; waited++) {
        got = waitpid(pid, &status, WNOHANG);
        if (got == 0) zr_sleep_ms(1);
    }
    if (got == 0) kill(pid, SIGTERM); /* zcrun passes it on to the ranks */
    ZT_CHECK(started);
    ZT_CHECK_EQ(got, pid);
    ZT_CHECK(WIFEXITED(status));
    ZT_CHECK_EQ(WEXITSTATUS(status), 128 + SIGPIPE);
}

/* --bind-to core: every rank on a core of its own (CPU sets pairwise disjoint, within
 * zcrun's); more ranks than cores is refused with a sentence and exit 2; --bind-to none leaves
 * every rank zcrun's whole affinity. */
void zcrun_bind_to_core_gives_each_rank_a_core_of_its_own(void) {
    cpu_set_t mine;
    ZT_CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0);
    int ncpus = CPU_COUNT(&mine);
    if (ncpus < 2) zt_skip("one CPU: no two ranks can have cores of their own");
    const char *bound[] = {"-n", "2", "--bind-to", "core", zr_path("zctest"), "--rank",
                           "zcrun_rank_prints_its_cpus", NULL};
    ZT_CHECK_EQ(zr_zcrun(bound, NULL), 0);
    cpu_set_t sets[2];
    for (int r = 0; r < 2; r++) {
        char want[32];
        snprintf(want, sizeof want, "cpus of rank %d:", r);
        const char *p = strstr(zr_out, want);
        ZT_CHECK(p != NULL);
        CPU_ZERO(&sets[r]);
        for (p += strlen(want); *p == ' ';) {
            char *end;
            unsigned long c = strtoul(p + 1, &end, 10);
            ZT_CHECK(end != p + 1 && c < CPU_SETSIZE && CPU_ISSET(c, &mine));
            CPU_SET(c, &sets[r]);
            p = end;
        }
        ZT_CHECK(CPU_COUNT(&sets[r]) >= 1 && CPU_COUNT(&sets[r]) < ncpus);
    }
    cpu_set_t both;
    CPU_AND(&both, &sets[0], &sets[1]);
    ZT_CHECK_EQ(CPU_COUNT(&both), 0);
    char many[16];
    snprintf(many, sizeof many, "%d", ncpus + 1);
    const char *too_many[] = {"-n", many, "--bind-to", "core", "true", NULL};
    ZT_CHECK_EQ(zr_zcrun(too_many, NULL), 2);
    ZT_CHECK(strstr(zr_out, "every rank needs a core of its own") != NULL);
    const char *unbound[] = {"-n", "2", "--bind-to=none", zr_path("zctest"), "--rank",
                             "zcrun_rank_prints_its_cpus", NULL};
    ZT_CHECK_EQ(zr_zcrun(unbound, NULL), 0);
    ZT_CHECK_EQ(zr_count(zr_out, "cpus of rank"), 2);
    const char *bad[] = {"-n", "2", "--bind-to", "socket", "true", NULL};
    ZT_CHECK_EQ(zr_zcrun(bad, NULL), 2);
    ZT_CHECK(strstr(zr_out, "--bind-to takes core or none") != NULL);
}

void zcrun_rejects_bad_usage(void) {
    const char *none[] = {NULL};
    const char *zero[] = {"-n", "0", "true", NULL};
    const char *letters[] = {"-n", "abc", "true", NULL};
    const char *too_many[] = {"-n", "4097", "true", NULL};
    const char *no_program[] = {"-n", "2", NULL};
    const char *bad_timeout[] = {"-n", "2", "--timeout", "-1", "true", NULL};
    const char *unknown[] = {"-n", "2", "--frobnicate", "true", NULL};
    const char *const *bad[] = {none, zero, letters, too_many, no_program, bad_timeout, unknown};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ZT_CHECK_EQ(zr_zcrun(bad[i], NULL), 2);
        ZT_CHECK(strstr(zr_out, "usage: zcrun -n N") != NULL);
    }
    const char *help[] = {"--help", NULL};
    ZT_CHECK_EQ(zr_zcrun(help, NULL), 0);
    ZT_CHECK(strstr(zr_out, "ZC_SECRET") != NULL);
    ZT_CHECK(strstr(zr_out, "124") != NULL);
    const char *missing[] = {"-n", "2", "/nonexistent/zcrun-test-program", NULL};
    ZT_CHECK_EQ(zr_zcrun(missing, NULL), 127);
    ZT_CHECK(strstr(zr_out, "cannot run /nonexistent/zcrun-test-program") != NULL);
    const char *fine[] = {"-n", "1", "--timeout", "2.5", "true", NULL};
    ZT_CHECK_EQ(zr_zcrun(fine, NULL), 0);
}
