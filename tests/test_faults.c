/* test_faults.c: every platform call that can fail, failed in turn (the faults build,
 * `configure.py --mode faults`: platform/faults.c fails the call ZC_PLAT_FAULT names). A job
 * of 2 ranks runs init, an all_reduce, a split, an all_reduce on the child, a barrier and fini;
 * for each platform call and each of its calls in either rank (up to the 12th, and the last),
 * the job runs again with that one call failing. Whatever fails must fail cleanly: a status with a sentence on the
 * rank that saw it, every rank ending by its deadline, fini releasing everything (descriptors
 * as before init, no segment still mapped). In other builds the test skips.
 * Rank programs print one "faults FAILED" line and exit 1 when an invariant breaks. */
#define _GNU_SOURCE
#include "zt.h"
#include "zcoll.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define fl_fail(...) zt_rank_fail("faults", __VA_ARGS__)

static unsigned fl_fds(void) {
    unsigned n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the listing's own descriptor */
}

/* 1 if this process still maps a zcoll segment. */
static int fl_mapped(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, "memfd:zc-") != 0;
    if (f) fclose(f);
    return found;
}

/* One call and its wait; a failure must come with the communicator's sentence. */
static zc_status fl_step(zc_comm *c, zc_status st, zc_req *r, const char *what, int *bad) {
    if (st == ZC_OK) st = zc_wait(c, r);
    if (st != ZC_OK && !zc_comm_error_text(c)[0]) *bad = fl_fail("%s: %s without a sentence",
                                                                 what, zc_status_name(st));
    if (st != ZC_OK) printf("faults-info: %s: %s: %s\n", what, zc_status_name(st),
                            zc_comm_error_text(c));
    return st;
}

int faults_rank_job(void) {
    unsigned fds0 = fl_fds();
    int bad = 0;
    zc_config cfg;
    zc_config_default(&cfg);
    if (zc_config_from_env(&cfg) != ZC_OK) return fl_fail("config: %s", cfg.error_text);
    cfg.timeout_ns = 1000000000ull;
    cfg.init_timeout_ns = 2000000000ull;
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arena = malloc(bytes), *child_arena = malloc(bytes);
    zc_comm *comm = NULL, *child = NULL;
    zc_status st = zc_comm_init(&cfg, arena, bytes, &comm);
    if (st != ZC_OK) {
        printf("faults-info: init: %s: %s\n", zc_status_name(st), zc_init_error_text());
        if (!zc_init_error_text()[0]) bad = fl_fail("init: %s without a sentence",
                                                    zc_status_name(st));
    } else {
        int32_t s[64], d[64];
        for (int i = 0; i < 64; i++) s[i] = i;
        zc_req r;
        st = fl_step(comm, zc_allreduce(comm, s, d, 64, ZC_INT32, ZC_SUM, &r), &r,
                     "allreduce", &bad);
        if (st == ZC_OK) {
            st = zc_comm_split(comm, 0, (int)cfg.rank, child_arena, bytes, &child);
            if (st != ZC_OK) printf("faults-info: split: %s: %s\n", zc_status_name(st),
                                    zc_init_error_text());
            if (st != ZC_OK && !zc_init_error_text()[0])
                bad = fl_fail("split: %s without a sentence", zc_status_name(st));
        }
        if (st == ZC_OK)
            st = fl_step(child, zc_allreduce(child, s, d, 64, ZC_INT32, ZC_SUM, &r), &r,
                         "child allreduce", &bad);
        if (st == ZC_OK) st = fl_step(comm, zc_barrier(comm, &r), &r, "barrier", &bad);
        if (st == ZC_OK)
            for (int i = 0; i < 64; i++)
                if (d[i] != (int32_t)cfg.nranks * i) bad = fl_fail("element %d is %d", i, d[i]);
        if (child) zc_comm_fini(child);
        zc_comm_fini(comm);
    }
    free(arena);
    free(child_arena);
    printf("faults-info: rank %u done: %s\n", cfg.rank, zc_status_name(st));
    if (fl_fds() != fds0) bad = fl_fail("%u descriptors open before init, %u after", fds0,
                                        fl_fds());
    if (fl_mapped()) bad = fl_fail("a segment is still mapped after fini");
    return bad;
}

#ifdef ZC_PLAT_FAULTS
#define FL_CALLS 17
static const char *const fl_names[FL_CALLS] = {
    "shm_create", "shm_open", "shm_seal", "shm_unmap", "pages_alloc", "pages_free",
    "tcp_listen", "tcp_accept", "tcp_connect", "tcp_send_all", "tcp_recv_all",
    "tcp_recv_some", "random", "host_id", "process_alive", "mem_room", "read_file"};

static char fl_out[1 << 16];

/* Calls of each platform call in rank r of a fault-free job, from its counting output. */
static void fl_counts(unsigned long counts[2][FL_CALLS]) {
    static const char *const env[] = {"ZC_PLAT_FAULT_COUNT=1", NULL};
    int rc = zt_run_ranks(2, "faults_rank_job", 30, env, fl_out, sizeof fl_out);
    if (rc != 0) printf("%s\n", fl_out);
    ZT_CHECK_EQ(rc, 0);
    for (int r = 0; r < 2; r++)
        for (int f = 0; f < FL_CALLS; f++) {
            char key[64];
            snprintf(key, sizeof key, "[%d] zc-fault-count: %s ", r, fl_names[f]);
            const char *p = strstr(fl_out, key);
            ZT_CHECK(p != NULL);
            counts[r][f] = strtoul(p + strlen(key), NULL, 10);
        }
}

#endif

void faults_every_platform_call_fails_cleanly(void) {
#ifndef ZC_PLAT_FAULTS
    ZT_SKIP("needs the faults build (tests/variants.sh faults \"--mode faults\" faults_)");
#else
    unsigned long counts[2][FL_CALLS];
    fl_counts(counts);
    unsigned tried = 0, injected = 0, failed = 0;
    for (int r = 0; r < 2; r++)
        for (int f = 0; f < FL_CALLS; f++)
            for (unsigned long nth = 1; nth <= counts[r][f]; nth++) {
                if (nth > 12 && nth != counts[r][f]) continue; /* the first 12 and the last */
                char spec[64];
                snprintf(spec, sizeof spec, "ZC_PLAT_FAULT=%s:%lu:%d", fl_names[f], nth, r);
                const char *env[] = {spec, NULL};
                int rc = zt_run_ranks(2, "faults_rank_job", 30, env, fl_out, sizeof fl_out);
                tried++;
                injected += strstr(fl_out, "zc-fault: failing call") != NULL;
                if (rc != 0 || strstr(fl_out, "faults FAILED")) {
                    printf("with %s (exit %d):\n%s\n", spec, rc, fl_out);
                    failed++;
                }
            }
    printf("faults: %u injection points tried (every platform call of the 2-rank job, its first "
           "12 and last calls on each rank), %u reached, %u not clean\n", tried, injected,
           failed);
    ZT_CHECK(injected > 0);
    ZT_CHECK_EQ(failed, 0);
#endif
}
