/* zcrun.c: the local launcher. Owns starting N ranks of a program on this host with the
 * zcoll launcher environment (ZC_RANK, ZC_NRANKS, ZC_LOCAL_RANK, ZC_ROOT_ADDR, ZC_SECRET),
 * relaying their output line by line with a "[rank] " prefix, forwarding signals, and stopping
 * the whole job when a rank fails or the timeout passes. It must never exit while a rank it
 * started is still running, never leave a child unreaped, and never mix two lines of output.
 * A tool, not library code: it uses libc and Linux (signalfd, getrandom) directly and
 * allocates its rank table once at start. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    ZR_MAX_RANKS = 4096,
    ZR_PREFIX_MAX = 8,           /* "[4095] " is 7 bytes */
    ZR_LINE_MAX_BYTES = 65536,   /* longest line sent in one piece */
    ZR_LINE_MIN_BYTES = 4096,    /* floor when many ranks share the budget below */
    ZR_BUFFERS_BUDGET = 64 << 20, /* all line buffers together, bytes */
    ZR_FAIL_GRACE_MS = 500,      /* SIGTERM -> SIGKILL when zcrun itself stops the job */
    ZR_SIGNAL_GRACE_MS = 2000,   /* forwarded signal -> SIGKILL */
    ZR_DRAIN_MS = 500,           /* output still read after the last rank is reaped */
    ZR_EXIT_USAGE = 2,
    ZR_EXIT_TIMEOUT = 124,
    ZR_EXIT_LAUNCH = 125,
    ZR_EXIT_NOEXEC = 127,
};

/* One of a rank's two output pipes. Buffer layout: [ZR_PREFIX_MAX bytes of room][line_bytes
 * of data][1 spare byte for an added newline]. */
typedef struct zr_stream {
    int fd;        /* read end; -1 once at EOF */
    int out_fd;    /* 1 or 2: where its lines go */
    size_t used;   /* bytes of an unfinished line at the start of the data, 0..line_bytes */
    char *buf;
} zr_stream;

typedef struct zr_rank {
    pid_t pid;     /* also its process group id; 0 if never started */
    bool running;  /* started and not yet reaped */
    zr_stream s[2];
} zr_rank;

typedef enum zr_stop { ZR_RUNNING, ZR_STOP_FAILURE, ZR_STOP_TIMEOUT, ZR_STOP_SIGNAL } zr_stop;

typedef struct zr_job {
    /* from the command line */
    uint32_t nranks;          /* 1..ZR_MAX_RANKS */
    uint64_t timeout_ms;      /* 0 = none */
    const char *timeout_text; /* as typed, for the message */
    bool keep_going;
    bool bind_core;           /* --bind-to core: rank i runs on core i alone */
    char **argv;              /* PROGRAM ARGS..., NULL-terminated */
    /* fixed at start */
    char root_addr[32];
    char secret[33];
    size_t line_bytes;
    sigset_t orig_mask;       /* restored in ranks before exec */
    int sigfd;
    zr_rank *ranks;
    struct pollfd *pfds;      /* 1 + 2 * nranks */
    uint32_t *pfd_stream;     /* pfds[k] (k >= 1) is stream pfd_stream[k] = 2 * rank + 0/1 */
    char *buffers;
    cpu_set_t *cores;         /* --bind-to core: [ncores] each core's hardware threads */
    uint32_t ncores;
    /* progress */
    uint64_t start_ms, kill_at_ms, drain_until_ms; /* 0 = not scheduled */
    uint32_t running, open_streams;
    zr_stop stop;
    bool killed, timed_out, launch_failed;
    bool sink_gone[3], sink_dropped[3]; /* by fd 1 and 2: writing there failed / pipes shut */
    int first_fail;           /* first failing rank's status; -1 while none */
    int signal;               /* first forwarded signal; 0 while none */
} zr_job;

static uint64_t zr_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- command line --------------------------------------------------------------------- */

static const char zr_usage_line[] =
    "usage: zcrun -n N [--timeout SECONDS] [--keep-going] [--bind-to core|none] PROGRAM "
    "[ARGS...]\n";

static void zr_help(void) {
    fputs(zr_usage_line, stdout);
    fputs("\nStarts N ranks of PROGRAM (found through PATH) on this host and waits for them.\n"
          "\nOptions:\n"
          "  -n N               number of ranks, 1 to 4096 (required)\n"
          "  --timeout SECONDS  stop the job after SECONDS (integer or decimal, e.g. 2.5);\n"
          "                     0, the default, means no limit\n"
          "  --keep-going       a failing rank does not stop the others; wait for all ranks\n"
          "  --bind-to core     rank i runs on the i-th core zcrun may use (its CPU affinity;\n"
          "                     a core is all of its hardware threads), as mpirun's\n"
          "                     --bind-to core: every rank a core of its own, so N must not\n"
          "                     exceed the cores; --bind-to none (the default) binds nothing\n"
          "  -h, --help         show this text\n"
          "  --                 end of options\n",
          stdout);
    fputs("\nEach rank i (0..N-1) gets the environment:\n"
          "  ZC_RANK=i  ZC_NRANKS=N  ZC_LOCAL_RANK=i\n"
          "  ZC_ROOT_ADDR=127.0.0.1:PORT  a TCP port that was free at start, for rank 0\n"
          "  ZC_SECRET=32 lowercase hex digits, 128 random bits, fresh for every job\n"
          "Ranks read stdin from /dev/null and run each in its own process group.\n",
          stdout);
    fputs("\nOutput: every line a rank writes to stdout (stderr) is written to zcrun's stdout\n"
          "(stderr) prefixed \"[i] \", whole lines only; a last line without newline gets one;\n"
          "lines longer than 64 KiB are split into pieces, each prefixed. If nobody reads\n"
          "zcrun's stdout any more, ranks writing to it get SIGPIPE, as in a shell pipeline.\n"
          "\nStopping: when a rank exits non-zero or dies of a signal, zcrun prints\n"
          "\"zcrun: rank i exited with status S\" (or \"killed by signal SIG\") and stops the\n"
          "other ranks: SIGTERM to each rank's process group, SIGKILL 0.5 s later. With\n"
          "--keep-going it waits for the others instead. SIGINT, SIGTERM, SIGHUP and SIGQUIT\n"
          "sent to zcrun are forwarded to every rank's process group; ranks still running\n"
          "2 s later get SIGKILL. When a rank exits, what it left in its group is killed.\n",
          stdout);
    fputs("\nExit status:\n"
          "  0        every rank exited 0\n"
          "  S        the first failing rank's exit status (128+SIG if a signal killed it)\n"
          "  128+SIG  zcrun received signal SIG, forwarded it, and no rank failed\n"
          "  124      the timeout passed\n"
          "  2        usage error\n"
          "  125      zcrun could not start the job (pipes, processes, randomness)\n"
          "  127      PROGRAM could not be run (each rank prints why and exits 127)\n",
          stdout);
}

/* Prints why the command line is wrong and the usage line; the caller exits 2. */
static int zr_usage_error(const char *what, const char *arg) {
    fprintf(stderr, "zcrun: %s%s%s%s\n", what, arg ? " \"" : "", arg ? arg : "", arg ? "\"" : "");
    fputs(zr_usage_line, stderr);
    fputs("(zcrun --help for more)\n", stderr);
    return ZR_EXIT_USAGE;
}

static bool zr_parse_nranks(const char *s, uint32_t *n) {
    uint32_t v = 0;
    if (!s || !*s) return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > ZR_MAX_RANKS) return false;
        v = v * 10u + (uint32_t)(*s - '0');
    }
    if (v < 1 || v > ZR_MAX_RANKS) return false;
    *n = v;
    return true;
}

/* DIGITS[.DIGITS] seconds to milliseconds (digits past the third decimal are ignored). Own
 * parser rather than strtod, which would also take "inf", "nan", hex and locale commas. */
static bool zr_parse_seconds(const char *s, uint64_t *ms) {
    uint64_t whole = 0, frac = 0, scale = 100;
    size_t digits = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        if (whole > 10000000u) return false; /* over ~115 days: surely a typo */
        whole = whole * 10u + (uint64_t)(*s - '0');
    }
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++, digits++) {
            frac += scale * (uint64_t)(*s - '0');
            scale /= 10u;
        }
    }
    if (*s != '\0' || digits == 0) return false;
    *ms = whole * 1000u + frac;
    return true;
}

/* Fills the option fields of j; returns -1 to go on, else the exit status for main. */
static int zr_parse_args(zr_job *j, int argc, char **argv) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            zr_help();
            return 0;
        } else if (strcmp(a, "--keep-going") == 0) {
            j->keep_going = true;
        } else if (strncmp(a, "-n", 2) == 0) { /* -n N or -nN */
            const char *v = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
            if (!zr_parse_nranks(v, &j->nranks))
                return zr_usage_error("-n needs a rank count from 1 to 4096, got", v ? v : "");
        } else if (strcmp(a, "--bind-to") == 0 || strncmp(a, "--bind-to=", 10) == 0) {
            const char *v = a[9] ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || (strcmp(v, "core") != 0 && strcmp(v, "none") != 0))
                return zr_usage_error("--bind-to takes core or none, got", v ? v : "");
            j->bind_core = strcmp(v, "core") == 0;
        } else if (strcmp(a, "--timeout") == 0 || strncmp(a, "--timeout=", 10) == 0) {
            const char *v = a[9] ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || !zr_parse_seconds(v, &j->timeout_ms))
                return zr_usage_error("--timeout needs seconds such as 30 or 2.5, got",
                                      v ? v : "");
            j->timeout_text = v;
        } else {
            return zr_usage_error("unknown option", a);
        }
    }
    if (j->nranks == 0) return zr_usage_error("missing -n N", NULL);
    if (i >= argc) return zr_usage_error("missing PROGRAM", NULL);
    j->argv = argv + i;
    return -1;
}

/* ---- job setup -------------------------------------------------------------------------- */

/* A port the kernel calls free now. Rank 0 binds it moments later; the window is the same
 * one every launcher of this kind accepts. */
static bool zr_pick_root_addr(zr_job *j) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0;
    close(fd);
    if (ok) snprintf(j->root_addr, sizeof j->root_addr, "127.0.0.1:%u", ntohs(a.sin_port));
    return ok;
}

static bool zr_make_secret(zr_job *j) {
    uint8_t key[16];
    size_t got = 0;
    while (got < sizeof key) {
        ssize_t n = getrandom(key + got, sizeof key - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof key; i++)
        snprintf(j->secret + 2 * i, 3, "%02x", key[i]);
    return true;
}

/* The one place that sizes the buffers: 64 KiB lines while the total stays within the
 * budget, shorter lines (never under 4 KiB) for very many ranks. */
static size_t zr_line_bytes(uint32_t nranks) {
    size_t per = (size_t)ZR_BUFFERS_BUDGET / (2u * (size_t)nranks);
    if (per > ZR_LINE_MAX_BYTES) per = ZR_LINE_MAX_BYTES;
    if (per < ZR_LINE_MIN_BYTES) per = ZR_LINE_MIN_BYTES;
    return per;
}

static size_t zr_stream_stride(const zr_job *j) { return ZR_PREFIX_MAX + j->line_bytes + 1u; }

static bool zr_alloc(zr_job *j) {
    size_t n = j->nranks, streams = 2u * n;
    j->line_bytes = zr_line_bytes(j->nranks);
    j->ranks = calloc(n, sizeof *j->ranks);
    j->pfds = calloc(1u + streams, sizeof *j->pfds);
    j->pfd_stream = calloc(1u + streams, sizeof *j->pfd_stream);
    j->buffers = calloc(streams, zr_stream_stride(j));
    if (!j->ranks || !j->pfds || !j->pfd_stream || !j->buffers) return false;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            zr_stream *s = &j->ranks[i].s[k];
            s->fd = -1;
            s->out_fd = k + 1;
            s->buf = j->buffers + (2u * i + (size_t)k) * zr_stream_stride(j);
        }
    }
    return true;
}

static void zr_free(zr_job *j) {
    free(j->ranks);
    free(j->pfds);
    free(j->pfd_stream);
    free(j->buffers);
    free(j->cores);
}

/* Two pipes per rank plus a few: raise the soft open-file limit as far as allowed. */
static bool zr_raise_fd_limit(uint32_t nranks) {
    struct rlimit rl;
    rlim_t need = 2u * (rlim_t)nranks + 16u;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
    if (rl.rlim_cur >= need) return true;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
    errno = EMFILE;
    return rl.rlim_cur >= need;
}

/* A closed fd 0, 1 or 2 would be reused by a pipe, and dup2 onto itself would then keep the
 * close-on-exec flag in the rank; keep them occupied. */
static void zr_fill_std_fds(void) {
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        int null = open("/dev/null", O_RDWR);
        if (null >= 0 && null != fd) close(null);
    }
}

/* Signals arrive through signalfd so the poll loop wakes for them. SIGPIPE is blocked rather
 * than ignored so a closed stdout gives EPIPE here while ranks keep the usual default. */
static bool zr_setup_signals(zr_job *j) {
    sigset_t set;
    sigemptyset(&set);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&set, sigs[i]);
    signal(SIGCHLD, SIG_DFL); /* an inherited SIG_IGN would let the kernel reap our ranks */
    sigset_t block = set;
    sigaddset(&block, SIGPIPE);
    if (sigprocmask(SIG_BLOCK, &block, &j->orig_mask) != 0) return false;
    j->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return j->sigfd >= 0;
}

/* ---- cores (--bind-to core) ------------------------------------------------------------ */

/* Adds to core the CPUs of a list such as "0-1,4" (the kernel's cpulist format); false when
 * the text is not one. */
static bool zr_parse_cpulist(const char *s, cpu_set_t *core) {
    while (*s && *s != '\n') {
        char *end;
        unsigned long lo = strtoul(s, &end, 10), hi = lo;
        if (end == s) return false;
        if (*end == '-') {
            s = end + 1;
            hi = strtoul(s, &end, 10);
            if (end == s) return false;
        }
        for (size_t c = lo; c <= hi && c < CPU_SETSIZE; c++) CPU_SET(c, core);
        s = *end == ',' ? end + 1 : end;
    }
    return true;
}

/* The hardware threads of cpu's core (sysfs topology); cpu alone where that cannot be read. */
static void zr_core_of(size_t cpu, cpu_set_t *core) {
    char path[96], text[256];
    CPU_ZERO(core);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%zu/topology/thread_siblings_list",
             cpu);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0) close(fd);
    if (n > 0) {
        text[n] = '\0';
        if (!zr_parse_cpulist(text, core)) CPU_ZERO(core);
    }
    CPU_SET(cpu, core);
}

/* --bind-to core: the cores of the CPUs zcrun may run on, in the order of their first CPU, each
 * limited to those CPUs. False (with the sentence printed) when there are fewer than ranks. */
static bool zr_find_cores(zr_job *j) {
    cpu_set_t allowed, seen;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        fprintf(stderr, "zcrun: --bind-to core: cannot read zcrun's CPU affinity (%s)\n",
                strerror(errno));
        return false;
    }
    j->cores = calloc(CPU_SETSIZE, sizeof *j->cores);
    if (!j->cores) {
        fprintf(stderr, "zcrun: out of memory for the core table\n");
        return false;
    }
    CPU_ZERO(&seen);
    for (size_t cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || CPU_ISSET(cpu, &seen)) continue;
        cpu_set_t *core = &j->cores[j->ncores++];
        zr_core_of(cpu, core);
        CPU_AND(core, core, &allowed);
        CPU_OR(&seen, &seen, core);
    }
    if (j->ncores >= j->nranks) return true;
    fprintf(stderr, "zcrun: --bind-to core: %u ranks but %u core%s to run on (zcrun's CPU "
            "affinity): every rank needs a core of its own; run at most %u ranks, or "
            "--bind-to none\n", j->nranks, j->ncores, j->ncores == 1 ? "" : "s", j->ncores);
    return false;
}

/* ---- starting ranks ------------------------------------------------------------------- */

_Noreturn static void zr_child(const zr_job *j, uint32_t rank, int out_fd, int err_fd) {
    char num[16], total[16];
    setpgid(0, 0);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* dup2 clears close-on-exec on the copies; the originals go away at exec. */
    if (null < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(126);
    snprintf(num, sizeof num, "%u", rank);
    snprintf(total, sizeof total, "%u", j->nranks);
    if (setenv("ZC_RANK", num, 1) || setenv("ZC_NRANKS", total, 1) ||
        setenv("ZC_LOCAL_RANK", num, 1) || setenv("ZC_ROOT_ADDR", j->root_addr, 1) ||
        setenv("ZC_SECRET", j->secret, 1)) {
        dprintf(2, "zcrun: cannot set the environment: %s\n", strerror(errno));
        _exit(ZR_EXIT_NOEXEC);
    }
    if (j->bind_core && sched_setaffinity(0, sizeof(cpu_set_t), &j->cores[rank]) != 0) {
        dprintf(2, "zcrun: cannot bind rank %u to its core: %s\n", rank, strerror(errno));
        _exit(ZR_EXIT_NOEXEC);
    }
    sigprocmask(SIG_SETMASK, &j->orig_mask, NULL);
    execvp(j->argv[0], j->argv);
    dprintf(2, "zcrun: cannot run %s: %s\n", j->argv[0], strerror(errno));
    _exit(ZR_EXIT_NOEXEC);
}

static bool zr_spawn(zr_job *j, uint32_t rank) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) return false;
    if (pipe2(err, O_CLOEXEC) != 0) {
        int pipe_errno = errno;
        close(out[0]);
        close(out[1]);
        errno = pipe_errno;
        return false;
    }
    pid_t pid = fork();
    if (pid == 0) zr_child(j, rank, out[1], err[1]);
    int fork_errno = errno;
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
        close(out[0]);
        close(err[0]);
        errno = fork_errno;
        return false;
    }
    setpgid(pid, pid); /* also here: a kill(-pid) right after fork must find the group */
    zr_rank *r = &j->ranks[rank];
    r->pid = pid;
    r->running = true;
    r->s[0].fd = out[0];
    r->s[1].fd = err[0];
    j->running++;
    j->open_streams += 2;
    return true;
}

/* ---- output --------------------------------------------------------------------------- */

/* Writes all of p; false when the reader is gone (EPIPE) or the fd is otherwise broken. */
static bool zr_write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            poll(&pf, 1, 100);
        } else if (!(w < 0 && errno == EINTR)) {
            return false;
        }
    }
    return true;
}

/* Writes data[start .. start+len) (ending in '\n') with the prefix in one write(). The prefix
 * goes into the bytes just before the line: the buffer's room, or a line already written. */
static void zr_emit(zr_job *j, uint32_t rank, zr_stream *s, size_t start, size_t len) {
    if (j->sink_gone[s->out_fd]) return;
    char prefix[ZR_PREFIX_MAX + 8];
    int p = snprintf(prefix, sizeof prefix, "[%u] ", rank);
    char *line = s->buf + ZR_PREFIX_MAX + start;
    memcpy(line - p, prefix, (size_t)p);
    if (!zr_write_all(s->out_fd, line - p, (size_t)p + len)) j->sink_gone[s->out_fd] = true;
}

/* Emits every complete line among the used bytes (new ones start at `fresh`), keeps the
 * unfinished rest at the start of the data; a full buffer without a newline goes out as one
 * piece, or everything when `eof`, each with a newline added. */
static void zr_flush(zr_job *j, uint32_t rank, zr_stream *s, size_t fresh, bool eof) {
    char *data = s->buf + ZR_PREFIX_MAX;
    size_t start = 0;
    for (char *nl; (nl = memchr(data + fresh, '\n', s->used - fresh)) != NULL;) {
        size_t end = (size_t)(nl - data) + 1u;
        zr_emit(j, rank, s, start, end - start);
        start = fresh = end;
    }
    s->used -= start;
    memmove(data, data + start, s->used);
    if (s->used > 0 && (eof || s->used == j->line_bytes)) {
        data[s->used] = '\n'; /* the spare byte */
        zr_emit(j, rank, s, 0, s->used + 1u);
        s->used = 0;
    }
}

static void zr_close_stream(zr_job *j, uint32_t rank, zr_stream *s) {
    zr_flush(j, rank, s, s->used, true);
    close(s->fd);
    s->fd = -1;
    j->open_streams--;
}

/* One read per wake-up: poll said there is data or EOF, so it cannot block. */
static void zr_read_stream(zr_job *j, uint32_t rank, zr_stream *s) {
    char *data = s->buf + ZR_PREFIX_MAX;
    ssize_t n = read(s->fd, data + s->used, j->line_bytes - s->used);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        zr_close_stream(j, rank, s);
        return;
    }
    size_t fresh = s->used;
    s->used += (size_t)n;
    zr_flush(j, rank, s, fresh, false);
}

/* zcrun's stdout (or stderr) reader is gone: stop reading the ranks' pipes that feed it, so
 * a rank writing there gets SIGPIPE / EPIPE just as it would in a plain shell pipeline,
 * instead of running on with nobody reading. */
static void zr_drop_gone_sinks(zr_job *j) {
    for (int out = 1; out <= 2; out++) {
        if (!j->sink_gone[out] || j->sink_dropped[out]) continue;
        j->sink_dropped[out] = true;
        for (uint32_t i = 0; i < j->nranks; i++) {
            zr_stream *s = &j->ranks[i].s[out - 1];
            if (s->fd < 0) continue;
            close(s->fd);
            s->fd = -1;
            s->used = 0;
            j->open_streams--;
        }
    }
}

/* ---- stopping ------------------------------------------------------------------------- */

static void zr_signal_all(zr_job *j, int sig) {
    for (uint32_t i = 0; i < j->nranks; i++)
        if (j->ranks[i].running) kill(-j->ranks[i].pid, sig);
}

static void zr_schedule_kill(zr_job *j, uint64_t grace_ms) {
    uint64_t at = zr_now_ms() + grace_ms;
    if (j->kill_at_ms == 0 || at < j->kill_at_ms) j->kill_at_ms = at;
}

/* zcrun's own decision to end the job: TERM now, KILL after a short grace. */
static void zr_stop_job(zr_job *j, zr_stop why) {
    if (j->stop == ZR_RUNNING) j->stop = why;
    zr_signal_all(j, SIGTERM);
    zr_schedule_kill(j, ZR_FAIL_GRACE_MS);
}

static void zr_forward(zr_job *j, int sig) {
    if (j->signal == 0) j->signal = sig;
    if (j->stop == ZR_RUNNING) j->stop = ZR_STOP_SIGNAL;
    zr_signal_all(j, sig);
    zr_schedule_kill(j, ZR_SIGNAL_GRACE_MS);
}

static const char *zr_signame(int sig) {
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    default: return "signal";
    }
}

/* Records a reaped rank; the first failure decides the exit status. Only failures that
 * happen while the job runs are reported: the ones zcrun causes by stopping it are not news. */
static void zr_rank_ended(zr_job *j, uint32_t rank, int wstatus) {
    int code = WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
    if (code == 0) return;
    if (j->first_fail < 0) j->first_fail = code;
    if (j->stop != ZR_RUNNING) return;
    if (WIFSIGNALED(wstatus))
        fprintf(stderr, "zcrun: rank %u killed by signal %s (%d)\n", rank,
                zr_signame(WTERMSIG(wstatus)), WTERMSIG(wstatus));
    else
        fprintf(stderr, "zcrun: rank %u exited with status %d\n", rank, code);
    if (!j->keep_going) zr_stop_job(j, ZR_STOP_FAILURE);
}

static int32_t zr_rank_of(const zr_job *j, pid_t pid) {
    for (uint32_t i = 0; i < j->nranks; i++)
        if (j->ranks[i].running && j->ranks[i].pid == pid) return (int32_t)i;
    return -1;
}

static void zr_reap(zr_job *j) {
    int wstatus;
    pid_t pid;
    while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
        int32_t rank = zr_rank_of(j, pid);
        if (rank < 0 || !(WIFEXITED(wstatus) || WIFSIGNALED(wstatus))) continue;
        j->ranks[rank].running = false;
        j->running--;
        /* The group outlives its leader while something the rank started is still in it;
         * the pid cannot be reused until then, so this reaches only the leftovers. */
        kill(-pid, SIGKILL);
        zr_rank_ended(j, (uint32_t)rank, wstatus);
        if (j->running == 0) j->drain_until_ms = zr_now_ms() + ZR_DRAIN_MS;
    }
}

static void zr_read_signals(zr_job *j) {
    struct signalfd_siginfo si;
    while (read(j->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD) zr_reap(j);
        else zr_forward(j, (int)si.ssi_signo);
    }
}

/* ---- the loop ------------------------------------------------------------------------- */

static void zr_check_deadlines(zr_job *j, uint64_t now) {
    if (j->timeout_ms && j->stop == ZR_RUNNING && now >= j->start_ms + j->timeout_ms) {
        fprintf(stderr, "zcrun: timeout after %s s, stopping %u ranks\n", j->timeout_text,
                j->running);
        j->timed_out = true;
        zr_stop_job(j, ZR_STOP_TIMEOUT);
    }
    if (j->kill_at_ms && !j->killed && now >= j->kill_at_ms) {
        zr_signal_all(j, SIGKILL);
        j->killed = true;
    }
    /* Only a process that left the ranks' groups can still hold a pipe open now. */
    if (j->running == 0 && j->drain_until_ms && now >= j->drain_until_ms) {
        for (uint32_t i = 0; i < j->nranks; i++)
            for (int k = 0; k < 2; k++)
                if (j->ranks[i].s[k].fd >= 0) zr_close_stream(j, i, &j->ranks[i].s[k]);
    }
}

static int zr_poll_timeout(const zr_job *j, uint64_t now) {
    uint64_t next = UINT64_MAX;
    if (j->timeout_ms && j->stop == ZR_RUNNING) next = j->start_ms + j->timeout_ms;
    if (j->kill_at_ms && !j->killed && j->kill_at_ms < next) next = j->kill_at_ms;
    if (j->running == 0 && j->drain_until_ms && j->drain_until_ms < next)
        next = j->drain_until_ms;
    if (next == UINT64_MAX) return -1;
    return next <= now ? 0 : (int)(next - now > 60000u ? 60000u : next - now);
}

/* Waits for one batch of events and handles them; returns false if poll itself failed. */
static bool zr_poll_once(zr_job *j) {
    nfds_t n = 1;
    j->pfds[0] = (struct pollfd){.fd = j->sigfd, .events = POLLIN};
    for (uint32_t i = 0; i < j->nranks; i++) {
        for (uint32_t k = 0; k < 2; k++) {
            if (j->ranks[i].s[k].fd < 0) continue;
            j->pfds[n] = (struct pollfd){.fd = j->ranks[i].s[k].fd, .events = POLLIN};
            j->pfd_stream[n++] = 2u * i + k;
        }
    }
    int ready = poll(j->pfds, n, zr_poll_timeout(j, zr_now_ms()));
    if (ready < 0) return errno == EINTR;
    for (nfds_t p = 1; p < n && ready > 0; p++) {
        if (!j->pfds[p].revents) continue;
        uint32_t rank = j->pfd_stream[p] / 2u;
        zr_read_stream(j, rank, &j->ranks[rank].s[j->pfd_stream[p] % 2u]);
    }
    /* Signals after output, so the lines of a rank that just died are out before its
     * failure message. */
    if (j->pfds[0].revents) zr_read_signals(j);
    zr_drop_gone_sinks(j);
    return true;
}

static void zr_run_loop(zr_job *j) {
    while (j->running > 0 || j->open_streams > 0) {
        zr_check_deadlines(j, zr_now_ms());
        if (j->running == 0 && j->open_streams == 0) break;
        if (!zr_poll_once(j)) {
            /* Cannot wait for events any more: end the job the hard way, but still reap. */
            perror("zcrun: poll");
            zr_signal_all(j, SIGKILL);
            j->killed = true;
            siginfo_t si;
            while (j->running > 0 && waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) == 0) zr_reap(j);
            break;
        }
    }
}

static int zr_exit_status(const zr_job *j) {
    if (j->launch_failed) return ZR_EXIT_LAUNCH;
    if (j->timed_out) return ZR_EXIT_TIMEOUT;
    if (j->first_fail >= 0) return j->first_fail;
    if (j->signal) return 128 + j->signal;
    return 0;
}

static bool zr_prepare(zr_job *j) {
    const char *what = NULL;
    if (!zr_raise_fd_limit(j->nranks))
        what = "the open-file limit is too low for two pipes per rank";
    else if (!zr_alloc(j)) what = "out of memory for the rank table";
    else if (!zr_pick_root_addr(j)) what = "cannot find a free TCP port on 127.0.0.1";
    else if (!zr_make_secret(j)) what = "cannot read random bytes for ZC_SECRET";
    else if (!zr_setup_signals(j)) what = "cannot set up signal handling";
    if (what) fprintf(stderr, "zcrun: %s (%s)\n", what, strerror(errno));
    return what == NULL;
}

int main(int argc, char **argv) {
    zr_job j = {.sigfd = -1, .first_fail = -1, .timeout_text = "0"};
    int rc = zr_parse_args(&j, argc, argv);
    if (rc >= 0) return rc;
    if (j.bind_core && !zr_find_cores(&j)) {
        free(j.cores);
        return ZR_EXIT_USAGE;
    }
    zr_fill_std_fds();
    if (!zr_prepare(&j)) {
        zr_free(&j);
        return ZR_EXIT_LAUNCH;
    }
    j.start_ms = zr_now_ms();
    for (uint32_t i = 0; i < j.nranks; i++) {
        if (zr_spawn(&j, i)) continue;
        fprintf(stderr, "zcrun: cannot start rank %u: %s\n", i, strerror(errno));
        j.launch_failed = true;
        zr_stop_job(&j, ZR_STOP_FAILURE);
        break;
    }
    zr_run_loop(&j);
    fflush(stdout);
    zr_free(&j);
    return zr_exit_status(&j);
}
