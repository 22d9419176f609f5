/* main.c: the runner of the device-memory suite (build/zcgputest, `ninja check-gpu`). Runs every
 * test of tests/gpu/list.h (or those named on the command line, by prefix) in a forked child
 * with its time limit, one line each, then `N passed, N failed, N skipped`; exit 1 if one
 * failed. `zcgputest --rank NAME` runs a rank program (zcrun starts those). The parent never
 * touches CUDA, so every child starts with a fresh context. ZC_GPU_PROVIDER (sim or cuda)
 * picks the device; unset, main sets it: cuda in CUDA builds, sim otherwise. */
#include "zg.h"

#include "sim.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct zg_entry {
    const char *name;
    void (*fn)(void);
    uint32_t timeout_s;
} zg_entry;
typedef struct zg_rank_entry {
    const char *name;
    int (*fn)(void);
} zg_rank_entry;

#define ZG_TEST(name, timeout_s) {#name, name, timeout_s},
#define ZG_RANK(name)
static const zg_entry zg_tests[] = {
#include "list.h"
};
#undef ZG_TEST
#undef ZG_RANK
#define ZG_TEST(name, timeout_s)
#define ZG_RANK(name) {#name, name},
static const zg_rank_entry zg_ranks[] = {
#include "list.h"
    {NULL, NULL}};
#undef ZG_TEST
#undef ZG_RANK

static char zg_self[4096];

void zg_fail(const char *file, int line, const char *expr, const char *detail) {
    zc_gpu_sim_free_all(); /* simulated device memory is named shared memory: unlink it */
    printf("    %s:%d: check failed: %s%s%s\n", file, line, expr, detail ? "  -- " : "",
           detail ? detail : "");
    fflush(stdout);
    _exit(1);
}

void zg_skip(const char *why) {
    printf("    skipped: %s\n", why);
    fflush(stdout);
    _exit(77);
}

double zg_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int zg_run_ranks(uint32_t nranks, const char *name, uint32_t timeout_s) {
    char zcrun[4200], n[16], t[16];
    const char *slash = strrchr(zg_self, '/');
    snprintf(zcrun, sizeof zcrun, "%.*s/zcrun", (int)(slash ? slash - zg_self : 1),
             slash ? zg_self : ".");
    snprintf(n, sizeof n, "%u", nranks);
    snprintf(t, sizeof t, "%u", timeout_s);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(zcrun, zcrun, "-n", n, "--timeout", t, zg_self, "--rank", name, (char *)NULL);
        printf("    cannot run %s: %s\n", zcrun, strerror(errno));
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static zc_comm *zg_comm;
static uint64_t zg_arena[(64u << 20) / 8]; /* static: allocation-free like every zcoll user */

zc_status zg_comm_init_env(uint64_t gpu_scratch_bytes, uint64_t oneshot_max_bytes,
                           zc_comm **out) {
    zc_config cfg;
    zc_config_default(&cfg);
    if (zc_config_from_env(&cfg) != ZC_OK) zg_fail(__FILE__, __LINE__, "zc_config_from_env",
                                                   cfg.error_text);
    cfg.gpu_scratch_bytes = gpu_scratch_bytes;
    cfg.gpu_oneshot_max_bytes = oneshot_max_bytes;
    if (!getenv("ZC_TIMEOUT_MS")) cfg.timeout_ns = 60000000000ull;
    size_t need = zc_comm_arena_bytes(&cfg);
    ZG_CHECK(need > 0 && need <= sizeof zg_arena);
    return zc_comm_init(&cfg, zg_arena, sizeof zg_arena, out);
}

zc_comm *zg_comm_from_env(uint64_t gpu_scratch_bytes, uint64_t oneshot_max_bytes) {
    zc_status st = zg_comm_init_env(gpu_scratch_bytes, oneshot_max_bytes, &zg_comm);
    if (st != ZC_OK) zg_fail(__FILE__, __LINE__, "zc_comm_init", zc_init_error_text());
    return zg_comm;
}

void zg_fill(void *buf, size_t count, zc_dtype dtype, uint64_t seed) {
    uint64_t s = seed * 0x100000001b3ull + 7u;
    size_t es = zc_dtype_bytes(dtype);
    uint8_t *b = buf;
    for (size_t i = 0; i < count; i++) {
        uint64_t r = zg_next(&s);
        if (dtype == ZC_FLOAT32 || dtype == ZC_FLOAT64) {
            double v = (double)(int64_t)(r >> 40) / 4096.0; /* moderate, exactly representable */
            switch (r & 63u) {
            case 0: v = NAN; break;
            case 1: v = INFINITY; break;
            case 2: v = -0.0; break;
            case 3: v = dtype == ZC_FLOAT32 ? 1e-40 : 1e-310; break; /* subnormal */
            case 4: v = dtype == ZC_FLOAT32 ? 3e38 : 1.7e308; break; /* overflows when summed */
            default: break;
            }
            if (dtype == ZC_FLOAT32) {
                float f = (float)v;
                memcpy(b + i * es, &f, es);
            } else {
                memcpy(b + i * es, &v, es);
            }
        } else {
            memcpy(b + i * es, &r, es); /* every bit pattern: NaNs, infinities, subnormals */
        }
    }
}

static int zg_run_one(const zg_entry *t) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(t->timeout_s);
        t->fn();
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return 1;
    if (WIFSIGNALED(status)) {
        printf("    killed by signal %d%s\n", WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? " (time limit)" : "");
        return 1;
    }
    return WEXITSTATUS(status);
}

int main(int argc, char **argv) {
    ssize_t n = readlink("/proc/self/exe", zg_self, sizeof zg_self - 1);
    if (n <= 0) snprintf(zg_self, sizeof zg_self, "%s", argv[0]);
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef ZC_HAVE_CUDA
    setenv("ZC_GPU_PROVIDER", "cuda", 0);
#else
    setenv("ZC_GPU_PROVIDER", "sim", 0);
#endif
    if (argc == 3 && strcmp(argv[1], "--rank") == 0) {
        for (const zg_rank_entry *r = zg_ranks; r->name; r++)
            if (strcmp(r->name, argv[2]) == 0) return r->fn();
        fprintf(stderr, "zcgputest: no rank program %s\n", argv[2]);
        return 2;
    }
    unsigned passed = 0, failed = 0, skipped = 0;
    printf("device: %s\n", zg_sim() ? "simulated (ZC_GPU_PROVIDER=sim)" : "CUDA");
    for (size_t i = 0; i < sizeof zg_tests / sizeof zg_tests[0]; i++) {
        const zg_entry *t = &zg_tests[i];
        bool wanted = argc < 2;
        for (int a = 1; a < argc; a++)
            wanted |= strncmp(t->name, argv[a], strlen(argv[a])) == 0;
        if (!wanted) continue;
        double t0 = zg_now_s();
        int rc = zg_run_one(t);
        unsigned ms = (unsigned)((zg_now_s() - t0) * 1000.0);
        if (rc == 0) passed++, printf("ok   %s (%u ms)\n", t->name, ms);
        else if (rc == 77) skipped++, printf("skip %s\n", t->name);
        else failed++, printf("FAIL %s (exit %d, %u ms)\n", t->name, rc, ms);
    }
    printf("%u passed, %u failed, %u skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
