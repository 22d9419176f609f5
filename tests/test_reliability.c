/* test_reliability.c: regressions of defects found under hostile conditions. A backing store
 * that cannot hold a rank's segment fails init on every rank with one verdict and a sentence
 * (no SIGBUS later); ranks killed at any moment of init leave nothing in /dev/shm; huge
 * timeouts mean "no deadline", not "expired at once"; a rank that cannot read its host identity
 * fails init on every rank with the cause; several threads driving one communicator (issue
 * and wait in one, zc_progress in others) get right answers.
 * Rank programs (`zctest --rank rel_rank_*`) run under zcrun; each prints one "rel FAILED"
 * line and exits 1 when something is wrong. */
#define _GNU_SOURCE
#include "zt.h"
#include "zcoll.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char rel_out[65536];

#define rel_fail(...) zt_rank_fail("rel", __VA_ARGS__)

/* zc_comm_init from the environment (and init_timeout_ns unless 0) into a malloc'd arena; the
 * status, comm and arena out. */
static zc_status rel_init(zc_config *cfg, zc_comm **comm, void **arena, uint64_t init_timeout_ns) {
    zc_config_default(cfg);
    if (zc_config_from_env(cfg) != ZC_OK) return ZC_INVALID_ARG;
    if (init_timeout_ns) cfg->init_timeout_ns = init_timeout_ns;
    size_t bytes = zc_comm_arena_bytes(cfg);
    *arena = malloc(bytes);
    if (!*arena) return ZC_SYSTEM;
    return zc_comm_init(cfg, *arena, bytes, comm);
}

/* One all_reduce of rank-dependent int32 values, checked. */
static int rel_allreduce_ok(zc_comm *comm, uint32_t n) {
    int32_t s[16], d[16];
    for (int i = 0; i < 16; i++) s[i] = (int32_t)(zc_comm_rank(comm) * 100u) + i;
    zc_req r;
    zc_status st = zc_allreduce(comm, s, d, 16, ZC_INT32, ZC_SUM, &r);
    if (st == ZC_OK) st = zc_wait(comm, &r);
    if (st != ZC_OK)
        return rel_fail("allreduce: %s: %s", zc_status_name(st), zc_comm_error_text(comm));
    for (int i = 0; i < 16; i++) {
        int32_t want = (int32_t)(100u * n * (n - 1u) / 2u) + (int32_t)n * i;
        if (d[i] != want) return rel_fail("allreduce element %d is %d, not %d", i, d[i], want);
    }
    return 0;
}

/* Runs a rank program on n ranks under zcrun; every rank must exit 0 without "rel FAILED". */
static void rel_job(uint32_t n, const char *prog, const char *const env[]) {
    int rc = zt_run_ranks(n, prog, 30, env, rel_out, sizeof rel_out);
    printf("%s", rel_out);
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK(strstr(rel_out, "rel FAILED") == NULL);
}

/* zc_comm_init must fail with ZC_SYSTEM on every rank: rank 1's sentence holds every string of
 * own (NULL-terminated), every other rank's every string of peer. */
static int rel_init_must_fail(const char *const own[], const char *const peer[]) {
    zc_config cfg;
    zc_comm *comm = NULL;
    void *arena = NULL;
    zc_status st = rel_init(&cfg, &comm, &arena, 0);
    const char *text = zc_init_error_text();
    printf("rel-info: rank %u: %s: %s\n", cfg.rank, zc_status_name(st), text);
    free(arena);
    if (st != ZC_SYSTEM)
        return rel_fail("zc_comm_init returned %s, not ZC_SYSTEM", zc_status_name(st));
    for (const char *const *part = cfg.rank == 1 ? own : peer; *part; part++)
        if (!strstr(text, *part)) return rel_fail("the sentence lacks \"%s\": %s", *part, text);
    return 0;
}

/* ---- a segment the backing store cannot hold ---------------------------------------------- */

/* Rank 1's file-size limit refuses its segment's reservation (as a full tmpfs or memory limit
 * would): rank 1 fails naming its segment, the size and the OS's error; every other rank fails
 * too, naming rank 1 and its sentence. */
int rel_rank_segment_refused(void) {
    const char *rank = getenv("ZC_RANK");
    if (rank && strcmp(rank, "1") == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return rel_fail("setrlimit failed");
    }
    static const char *const own[] = {"cannot create segment /zc-", " bytes)", "File too large",
                                      NULL};
    static const char *const peer[] = {"rank 1 could not set up the wire", "File too large",
                                       NULL};
    return rel_init_must_fail(own, peer);
}

void reliability_refused_segment_fails_init_on_every_rank_with_its_cause(void) {
    static const char *const env[] = {"ZC_TRANSPORT=shm", NULL};
    rel_job(3, "rel_rank_segment_refused", env);
}

/* ---- a host identity that cannot be read ---------------------------------------------------- */

/* Rank 1 runs out of descriptors right after its bootstrap socket (as `ulimit -n 4` did), so it
 * cannot read its host identity: every rank fails saying so, none guesses "another host". */
int rel_rank_host_id_unreadable(void) {
    const char *rank = getenv("ZC_RANK");
    if (rank && strcmp(rank, "1") == 0) {
        int top = 2; /* fill every hole below the highest open descriptor */
        DIR *d = opendir("/proc/self/fd");
        if (!d) return rel_fail("cannot list /proc/self/fd");
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            if (atoi(e->d_name) > top) top = atoi(e->d_name);
        closedir(d);
        for (int fd = 0; fd <= top; fd++)
            if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDONLY) != fd)
                return rel_fail("cannot fill descriptor %d", fd);
        struct rlimit lim = {(rlim_t)top + 2, (rlim_t)top + 2}; /* room for the socket only */
        if (setrlimit(RLIMIT_NOFILE, &lim) != 0) return rel_fail("setrlimit failed");
    }
    static const char *const own[] = {"cannot read this host's identity", "Too many open files",
                                      NULL};
    static const char *const peer[] = {"rank 1 cannot read its host's identity", NULL};
    return rel_init_must_fail(own, peer);
}

void reliability_unreadable_host_identity_fails_init_with_its_cause(void) {
    rel_job(2, "rel_rank_host_id_unreadable", NULL);
}

/* ---- ranks killed during init ------------------------------------------------------------- */

int rel_rank_init_fini_loop(void) {
    for (int i = 0; i < 1000; i++) {
        zc_config cfg;
        zc_comm *comm = NULL;
        void *arena = NULL;
        zc_status st = rel_init(&cfg, &comm, &arena, 0);
        if (st != ZC_OK)
            return rel_fail("init %d: %s: %s", i, zc_status_name(st), zc_init_error_text());
        if (rel_allreduce_ok(comm, cfg.nranks)) return 1;
        zc_comm_fini(comm);
        free(arena);
    }
    return 0;
}

/* Entries of /dev/shm whose name starts with "zc-". */
static int rel_shm_leftovers(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += strncmp(e->d_name, "zc-", 3) == 0;
    closedir(d);
    return n;
}

/* Jobs of 3 ranks running init/fini loops are killed (SIGKILL, the whole job) after a random
 * 5..200 ms, so kills land in every phase of init, including between a segment's creation and
 * the moment every peer has mapped it: /dev/shm gains nothing. */
void reliability_ranks_killed_during_init_leave_nothing_in_dev_shm(void) {
    char zcrun[4200], zctest[4200];
    snprintf(zcrun, sizeof zcrun, "%s/zcrun", zt_build_dir());
    snprintf(zctest, sizeof zctest, "%s/zctest", zt_build_dir());
    int before = rel_shm_leftovers();
    zt_rng rng = {zt_seed()};
    for (int it = 0; it < 12; it++) {
        pid_t job = fork();
        ZT_CHECK(job >= 0);
        if (job == 0) {
            setpgid(0, 0);
            int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0) {
                dup2(devnull, 1);
                dup2(devnull, 2);
            }
            execl(zcrun, zcrun, "-n", "3", "--timeout", "20", zctest, "--rank",
                  "rel_rank_init_fini_loop", (char *)NULL);
            _exit(127);
        }
        setpgid(job, job);
        struct timespec t = {0, (long)(5 + zt_rng_below(&rng, 196)) * 1000000L};
        nanosleep(&t, NULL);
        kill(-job, SIGKILL);
        int status;
        waitpid(job, &status, 0);
        /* zcrun's ranks are in its group: wait until none is left (they are reparented). */
        for (int i = 0; i < 200 && kill(-job, 0) == 0; i++) {
            struct timespec ms = {0, 1000000L};
            nanosleep(&ms, NULL);
        }
    }
    int after = rel_shm_leftovers();
    printf("/dev/shm zc-* entries: %d before, %d after 12 killed jobs\n", before, after);
    ZT_CHECK_EQ(after, before);
}

/* ---- huge timeouts ------------------------------------------------------------------------ */

/* Timeouts at the parser's ceiling (ZC_TIMEOUT_MS=18446744073709, set by the test) and
 * init_timeout_ns = UINT64_MAX: init and collectives complete instead of timing out at once. */
int rel_rank_huge_timeouts(void) {
    zc_config cfg;
    zc_comm *comm = NULL;
    void *arena = NULL;
    zc_status st = rel_init(&cfg, &comm, &arena, UINT64_MAX);
    if (st != ZC_OK) return rel_fail("init: %s: %s", zc_status_name(st), zc_init_error_text());
    if (cfg.timeout_ns < 18446744073709000000ull) return rel_fail("ZC_TIMEOUT_MS not applied");
    for (int i = 0; i < 50; i++)
        if (rel_allreduce_ok(comm, cfg.nranks)) return 1;
    zc_comm_fini(comm);
    free(arena);
    return 0;
}

void reliability_huge_timeouts_saturate_instead_of_expiring(void) {
    static const char *const env[] = {"ZC_TIMEOUT_MS=18446744073709", NULL};
    rel_job(2, "rel_rank_huge_timeouts", env);
    /* The same in one process, with timeout_ns = UINT64_MAX. */
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.nranks = 2;
    cfg.transport = ZC_TRANSPORT_INPROC;
    cfg.timeout_ns = UINT64_MAX;
    size_t bytes = zc_comm_arena_bytes(&cfg);
    ZT_CHECK(bytes > 0);
    void *arenas[2] = {malloc(bytes), malloc(bytes)};
    zc_comm *comms[2];
    ZT_CHECK_ST(zc_comm_init_inproc(&cfg, arenas, bytes, comms), ZC_OK);
    int32_t s[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}}, d[2][4];
    zc_req r[2];
    for (int k = 0; k < 2; k++)
        ZT_CHECK_ST(zc_allreduce(comms[k], s[k], d[k], 4, ZC_INT32, ZC_SUM, &r[k]), ZC_OK);
    zc_status st[2] = {ZC_IN_PROGRESS, ZC_IN_PROGRESS};
    for (int spin = 0; spin < 1000000 && (st[0] == ZC_IN_PROGRESS || st[1] == ZC_IN_PROGRESS);
         spin++)
        for (int k = 0; k < 2; k++) {
            if (st[k] != ZC_IN_PROGRESS) continue;
            (void)zc_progress(comms[k]);
            st[k] = zc_test(comms[k], &r[k]);
        }
    for (int k = 0; k < 2; k++) {
        ZT_CHECK_ST(st[k], ZC_OK);
        for (int i = 0; i < 4; i++) ZT_CHECK_EQ(d[k][i], 11 * (i + 1));
        zc_comm_fini(comms[k]);
        free(arenas[k]);
    }
}

/* ---- threads driving one communicator ------------------------------------------------------ */

#define REL_ROUNDS 3000
#define REL_COUNT 37

typedef struct rel_group {
    zc_comm *comms[2];
    int done; /* set (atomically) once both ranks' threads finished */
    int bad;  /* a progress thread saw a failure */
} rel_group;

typedef struct rel_rank_arg {
    rel_group *g;
    uint32_t rank;
    int bad;
} rel_rank_arg;

/* Rank a->rank's thread: issues all_reduces on its communicator and waits for them (zc_wait
 * progresses the other rank too), checking every result. */
static void *rel_rank_thread(void *arg) {
    rel_rank_arg *a = arg;
    zc_comm *c = a->g->comms[a->rank];
    int32_t s[REL_COUNT], d[REL_COUNT];
    /* Every rank's element i of round r is rank * 1000 + r + i: the sum is 1000 + 2 (r + i). */
    for (int round = 0; round < REL_ROUNDS && !a->bad; round++) {
        size_t n = 1 + (size_t)round % REL_COUNT;
        for (size_t i = 0; i < n; i++)
            s[i] = (int32_t)(a->rank * 1000u + (uint32_t)round) + (int32_t)i;
        zc_req r;
        zc_status st = zc_allreduce(c, s, d, n, ZC_INT32, ZC_SUM, &r);
        if (st == ZC_OK) st = zc_wait(c, &r);
        if (st != ZC_OK) {
            printf("rank %u round %d: %s: %s\n", a->rank, round, zc_status_name(st),
                   zc_comm_error_text(c));
            a->bad = 1;
        }
        for (size_t i = 0; i < n && !a->bad; i++)
            if (d[i] != 1000 + 2 * (round + (int32_t)i)) {
                printf("rank %u round %d element %zu: %d\n", a->rank, round, i, d[i]);
                a->bad = 1;
            }
    }
    return NULL;
}

/* Drives zc_progress (and a zc_test of a dead handle) on both ranks until the ranks' threads
 * finish. */
static void *rel_progress_thread(void *arg) {
    rel_group *g = arg;
    zc_req stale = {{0}};
    for (unsigned long i = 0; !__atomic_load_n(&g->done, __ATOMIC_ACQUIRE); i++) {
        if (zc_progress(g->comms[i & 1u]) != ZC_OK) __atomic_store_n(&g->bad, 1, __ATOMIC_RELAXED);
        if (i % 64u == 0 && zc_test(g->comms[i & 1u], &stale) != ZC_INVALID_ARG)
            __atomic_store_n(&g->bad, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Two ranks of one process: each rank's own thread issues and waits (zc_wait progresses both
 * ranks) while two more threads call zc_progress on both: four threads inside two
 * communicators at once, every result checked (before the communicator's lock this crashed:
 * a heap overflow past the arena in zc_retire). */
void reliability_threads_issue_wait_and_progress_one_communicator(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.nranks = 2;
    cfg.transport = ZC_TRANSPORT_INPROC;
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arenas[2] = {malloc(bytes), malloc(bytes)};
    rel_group g = {{NULL, NULL}, 0, 0};
    ZT_CHECK_ST(zc_comm_init_inproc(&cfg, arenas, bytes, g.comms), ZC_OK);
    rel_rank_arg ranks[2] = {{&g, 0, 0}, {&g, 1, 0}};
    pthread_t th[4];
    for (int i = 0; i < 2; i++)
        ZT_CHECK(pthread_create(&th[i], NULL, rel_rank_thread, &ranks[i]) == 0);
    for (int i = 2; i < 4; i++)
        ZT_CHECK(pthread_create(&th[i], NULL, rel_progress_thread, &g) == 0);
    for (int i = 0; i < 2; i++) ZT_CHECK(pthread_join(th[i], NULL) == 0);
    __atomic_store_n(&g.done, 1, __ATOMIC_RELEASE);
    for (int i = 2; i < 4; i++) ZT_CHECK(pthread_join(th[i], NULL) == 0);
    ZT_CHECK_EQ(ranks[0].bad + ranks[1].bad + g.bad, 0);
    for (int k = 0; k < 2; k++) {
        ZT_CHECK_ST(zc_comm_fini(g.comms[k]), ZC_OK);
        free(arenas[k]);
    }
}
