/* test_limits.c: what init checks before it takes anything, and what it says about the
 * secret. Windows larger than the memory the host (MemAvailable) or a memory cgroup leaves fail
 * init on every rank with ZC_LIMIT and the numbers, never an OOM kill in the middle of it; a
 * job whose secret was derived from public launcher values gets one warning from rank 0, and
 * none when ZC_SECRET_FILE gives it one. Jobs run under zcrun (real processes, the
 * shared-memory wire). */
#include "zt.h"

#include "../core/text.h" /* zc__fmt_bytes */
#include "zcoll.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void limits_sizes_read_as_people_write_them(void) {
    static const struct { uint64_t bytes; const char *text; } k[] = {
        {0, "0 bytes"},           {1023, "1023 bytes"},       {1024, "1.00 KiB"},
        {1536, "1.50 KiB"},       {8u << 20, "8.00 MiB"},    {8808039, "8.40 MiB"},
        {8409088, "8.01 MiB"},    {230u << 20, "230 MiB"},   {1u << 30, "1.00 GiB"},
        {64ull << 40, "64 TiB"},  {UINT64_MAX, "15 EiB"}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char buf[24];
        zc__fmt_bytes(buf, sizeof buf, k[i].bytes);
        if (strcmp(buf, k[i].text) != 0)
            printf("    %llu: \"%s\"\n", (unsigned long long)k[i].bytes, buf);
        ZT_CHECK(strcmp(buf, k[i].text) == 0);
    }
}

/* A communicator from the environment's config, its arena in *arena (the caller frees it);
 * the config's refusal is ZC_INVALID_ARG with its sentence printed. */
static zc_status lm_init(zc_comm **c, void **arena) {
    zc_config cfg;
    zc_config_default(&cfg);
    *c = NULL;
    *arena = NULL;
    if (zc_config_from_env(&cfg) != ZC_OK) {
        printf("limits-info: config: %s\n", cfg.error_text);
        return ZC_INVALID_ARG;
    }
    size_t bytes = zc_comm_arena_bytes(&cfg);
    *arena = malloc(bytes);
    return zc_comm_init(&cfg, *arena, bytes, c);
}

/* Init with the environment's config: LIMITS_WANT=ok must succeed, =limit must fail with
 * ZC_LIMIT and a sentence that gives what it needs, what is left and what to lower. */
int limits_rank_init(void) {
    void *arena;
    zc_comm *c;
    zc_status st = lm_init(&c, &arena);
    const char *want = getenv("LIMITS_WANT"), *text = zc_init_error_text();
    printf("limits-info: %s: %s\n", zc_status_name(st), st == ZC_OK ? "" : text);
    if (c) zc_comm_fini(c);
    free(arena);
    if (want && strcmp(want, "ok") == 0)
        return st == ZC_OK ? 0 : zt_rank_fail("limits", "init: %s: %s", zc_status_name(st), text);
    if (st != ZC_LIMIT || !strstr(text, "leaves") || !strstr(text, "lower ZC_SYM_BYTES"))
        return zt_rank_fail("limits", "init gave %s (%s), not ZC_LIMIT with the numbers",
                            zc_status_name(st), text);
    return 0;
}

/* Symmetric regions of 1 TiB (the most a config takes) on two ranks: more than a test host
 * leaves. */
void limits_window_over_the_host_memory_fails_init_on_every_rank(void) {
    static char out[16384];
    const char *env[] = {"ZC_SYM_BYTES=1099511627776", "LIMITS_WANT=limit", NULL};
    int rc = zt_run_ranks(2, "limits_rank_init", 60, env, out, sizeof out);
    if (rc != 0) printf("%s\n", out);
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK(strstr(out, "[0] limits-info: ZC_LIMIT") && strstr(out, "[1] limits-info: ZC_LIMIT"));
    ZT_CHECK(strstr(out, "the 2 windows on rank 0's host need 2.00 TiB of shared memory (1.00 "
                         "TiB each, with its ZC_SYM_BYTES region) but the memory limit there") !=
             NULL);
}

/* This process's memory cgroup (its folder under the controller's mount), v1 or v2. */
static int lm_cgroup(char *dir, size_t cap, const char **limit_file) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[256];
    int found = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        const char *v1 = strstr(line, ":memory:");
        if (v1) {
            snprintf(dir, cap, "/sys/fs/cgroup/memory%s", v1 + 8);
            *limit_file = "memory.limit_in_bytes";
            found = 1;
            break;
        }
        if (strncmp(line, "0::", 3) == 0) {
            snprintf(dir, cap, "/sys/fs/cgroup%s", line + 3);
            *limit_file = "memory.max";
            found = 1;
        }
    }
    if (f) fclose(f);
    return found;
}

static int lm_write(const char *dir, const char *file, const char *text) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The case: ZC_SYM_BYTES=1 GiB in a memory cgroup of 256 MiB. Without the check the
 * rank is killed in the middle of init; with it every rank fails init with the numbers. A
 * region that fits still works there. Needs a memory cgroup this test may create (root, a
 * writable cgroup file system): skipped elsewhere. */
void limits_window_over_a_memory_cgroup_fails_init_not_the_process(void) {
    char mine[512], dir[600], pid[32];
    const char *limit = NULL;
    if (!lm_cgroup(mine, sizeof mine, &limit)) ZT_SKIP("no memory cgroup");
    snprintf(dir, sizeof dir, "%s/zctest-%d", mine, (int)getpid());
    if (mkdir(dir, 0755) != 0) ZT_SKIP("cannot create a memory cgroup here (not root?)");
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    int moved = lm_write(dir, limit, "268435456") == 0 && lm_write(dir, "cgroup.procs", pid) == 0;
    static char out[16384];
    int rc = -1, fits = -1;
    if (moved) {
        const char *big[] = {"ZC_SYM_BYTES=1073741824", "LIMITS_WANT=limit", NULL};
        rc = zt_run_ranks(2, "limits_rank_init", 60, big, out, sizeof out);
        if (rc != 0) printf("%s\n", out);
        const char *small[] = {"ZC_SYM_BYTES=16777216", "LIMITS_WANT=ok", NULL};
        fits = zt_run_ranks(2, "limits_rank_init", 60, small, out, sizeof out);
        if (fits != 0) printf("%s\n", out);
        (void)lm_write(mine, "cgroup.procs", pid); /* back, so the cgroup can go */
    }
    rmdir(dir);
    if (!moved) ZT_SKIP("cannot limit a memory cgroup here");
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK_EQ(fits, 0);
}

/* Turns zcrun's environment into torchrun's without a secret (MASTER_ADDR and MASTER_PORT one
 * below zcrun's rendezvous port, RANK, WORLD_SIZE), unless LIMITS_SECRET_FILE names a file
 * for ZC_SECRET_FILE; then inits twice. */
int limits_rank_derived_secret(void) {
    const char *rdv = getenv("ZC_ROOT_ADDR"), *colon = rdv ? strrchr(rdv, ':') : NULL;
    const char *file = getenv("LIMITS_SECRET_FILE");
    if (!colon) return zt_rank_fail("limits", "no ZC_ROOT_ADDR");
    char host[64], port[24];
    snprintf(host, sizeof host, "%.*s", (int)(colon - rdv), rdv);
    snprintf(port, sizeof port, "%ld", (long)(strtol(colon + 1, NULL, 10) - 1) % 100000);
    setenv("RANK", getenv("ZC_RANK"), 1);
    setenv("WORLD_SIZE", getenv("ZC_NRANKS"), 1);
    setenv("MASTER_ADDR", host, 1);
    setenv("MASTER_PORT", port, 1);
    if (file) setenv("ZC_SECRET_FILE", file, 1);
    unsetenv("ZC_RANK");
    unsetenv("ZC_NRANKS");
    unsetenv("ZC_ROOT_ADDR");
    unsetenv("ZC_SECRET");
    for (int round = 0; round < 2; round++) {
        void *arena;
        zc_comm *c;
        if (lm_init(&c, &arena) != ZC_OK)
            return zt_rank_fail("limits", "init: %s", zc_init_error_text());
        zc_comm_fini(c);
        free(arena);
    }
    return 0;
}

static unsigned lm_count(const char *text, const char *what) {
    unsigned n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p++) n++;
    return n;
}

void limits_derived_secret_is_said_once_by_rank_0(void) {
    static char out[16384];
    int rc = zt_run_ranks(2, "limits_rank_derived_secret", 60, NULL, out, sizeof out);
    if (rc != 0 || lm_count(out, "job secret is derived") != 1) printf("%s\n", out);
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK_EQ(lm_count(out, "[0] zcoll: warn: the job secret is derived"), 1);
    ZT_CHECK_EQ(lm_count(out, "job secret is derived"), 1);
    ZT_CHECK(strstr(out, "ZC_SECRET_FILE") != NULL);

    char path[] = "/tmp/zct-secret-XXXXXX", var[64];
    int fd = mkstemp(path);
    ZT_CHECK(fd >= 0 && write(fd, "00112233445566778899aabbccddeeff\n", 33) == 33);
    close(fd);
    snprintf(var, sizeof var, "LIMITS_SECRET_FILE=%s", path);
    const char *env[] = {var, NULL};
    rc = zt_run_ranks(2, "limits_rank_derived_secret", 60, env, out, sizeof out);
    unlink(path);
    if (rc != 0 || lm_count(out, "job secret is derived") != 0) printf("%s\n", out);
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK_EQ(lm_count(out, "job secret is derived"), 0);
}

#ifdef ZC_HAVE_IB
#include "../core/engine.h" /* zc__carve, zc__room_check */
#endif

/* transport_ib registers its rings and staging (wire.h's takes): with the default config that
 * fits the default `ulimit -l` of 8 MiB up to 3 ranks; from 4 ranks init says so, with the
 * numbers and what to raise or lower, before any rank registers a byte. */
void limits_default_registered_memory_fits_8_mib_or_says_so(void) {
#ifndef ZC_HAVE_IB
    ZT_SKIP("this build has no transport_ib");
#else
    for (uint32_t n = 2; n <= 4; n++) {
        zc_config cfg;
        zc_config_default(&cfg);
        cfg.nranks = n;
        cfg.transport = ZC_TRANSPORT_IB;
        snprintf(cfg.root_addr, sizeof cfg.root_addr, "127.0.0.1:1");
        cfg.secret_set = true;
        size_t bytes = zc_comm_arena_bytes(&cfg);
        void *arena = aligned_alloc(64, (bytes + 63u) / 64u * 64u);
        zc_comm *c = NULL;
        char err[ZC_ERROR_TEXT_BYTES];
        ZT_CHECK(arena != NULL);
        ZT_CHECK_ST(zc__carve(&cfg, arena, bytes, &c, err), ZC_OK);
        zc_wire_geom g = zc__geom(c, 1, 0);
        uint64_t mem = 0, locked = 0;
        c->wire->takes(&g, &mem, &locked);
        printf("    %u ranks: transport_ib registers %.1f MiB per rank\n", n,
               (double)locked / 1048576.0);
        ZT_CHECK_EQ(mem, locked);
        zc_status st = zc__room_check(c, 0, 1, UINT64_MAX, 8u << 20);
        ZT_CHECK_ST(st, n <= 3 ? ZC_OK : ZC_LIMIT);
        if (n == 4) {
            printf("    %s\n", c->err);
            ZT_CHECK(strstr(c->err, "RLIMIT_MEMLOCK leaves 8.00 MiB: raise it") != NULL);
        }
        free(arena);
    }
#endif
}
