/* test_zcbench.c: the benchmark seen from outside: --check over every collective at 2 and 3
 * ranks finds no wrong element and no allocation in the timed loops, with exactly the rows the
 * size rules predict; --json lines carry every key and busbw/algbw equals nccl-tests' bus
 * factor; failures and bad usage give the documented exit statuses and messages. Runs
 * build/zcbench under build/zcrun. */
#include "zt.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static char zb_out[1 << 18];

static const char *zb_path(int which) {
    static char paths[2][4200];
    snprintf(paths[which], sizeof paths[0], "%s/%s", zt_build_dir(),
             which == 0 ? "zcrun" : "zcbench");
    return paths[which];
}

/* Runs `zcrun -n nranks --timeout 30 zcbench ARGS...` (nranks 0: zcbench alone) capturing
 * stdout+stderr into zb_out; returns the exit status. args is NULL-terminated. */
static int zb_bench(uint32_t nranks, const char *const args[], const char *const env[]) {
    const char *argv[40];
    char n[16];
    size_t k = 0;
    if (nranks > 0) {
        snprintf(n, sizeof n, "%u", nranks);
        argv[k++] = zb_path(0);
        argv[k++] = "-n";
        argv[k++] = n;
        argv[k++] = "--timeout";
        argv[k++] = "30";
    }
    argv[k++] = zb_path(1);
    for (size_t i = 0; args[i]; i++) {
        ZT_CHECK(k + 1 < sizeof argv / sizeof argv[0]);
        argv[k++] = args[i];
    }
    argv[k] = NULL;
    return zt_run(argv, env, zb_out, sizeof zb_out, 40000, NULL);
}

/* Prints the captured output so a failing check shows what zcbench said. */
static void zb_show(void) {
    printf("    --- zcbench output ---\n%s    ---\n", zb_out);
}

#define ZB_CHECK(expr)                                                                        \
    do {                                                                                      \
        if (!(expr)) {                                                                        \
            zb_show();                                                                        \
            zt_fail(__FILE__, __LINE__, #expr, NULL);                                         \
        }                                                                                     \
    } while (0)

static size_t zb_count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

static const char *const zb_colls[] = {"allreduce", "reduce",  "broadcast", "reduce_scatter",
                                       "allgather", "gather",  "scatter",   "alltoall",
                                       "sendrecv",  "barrier"};
enum { ZB_COLLS = sizeof zb_colls / sizeof zb_colls[0] };

/* Collectives whose size is n blocks of one rank's count. */
static bool zb_blocked(const char *coll) {
    return strcmp(coll, "reduce_scatter") == 0 || strcmp(coll, "allgather") == 0 ||
           strcmp(coll, "gather") == 0 || strcmp(coll, "scatter") == 0 ||
           strcmp(coll, "alltoall") == 0;
}

/* Rows zcbench must print for coll over sizes min*f^k <= max of float32 on n ranks. */
static unsigned zb_expected_rows(const char *coll, uint64_t min, uint64_t max, uint64_t f,
                                 uint32_t n) {
    if (strcmp(coll, "barrier") == 0) return 1;
    unsigned rows = 0;
    for (uint64_t b = min; b <= max; b *= f) {
        uint64_t count = zb_blocked(coll) ? b / 4 / n : b / 4;
        rows += count > 0;
    }
    return rows;
}

static double zb_bus_factor(const char *coll, uint32_t n) {
    if (strcmp(coll, "allreduce") == 0) return 2.0 * (n - 1) / n;
    if (zb_blocked(coll)) return (double)(n - 1) / n;
    return 1.0;
}

/* The line after each "[0] " prefix, one at a time: *cursor walks zb_out. */
static bool zb_next_rank0_line(const char **cursor, char *line, size_t cap) {
    for (;;) {
        const char *p = *cursor;
        if (*p == '\0') return false;
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        *cursor = end ? end + 1 : p + len;
        if (len < 4 || strncmp(p, "[0] ", 4) != 0) continue;
        len -= 4;
        if (len >= cap) len = cap - 1;
        memcpy(line, p + 4, len);
        line[len] = '\0';
        return true;
    }
}

/* Runs every collective with --check at n ranks (persistent: --persistent, whose header
 * says so) and checks rows, #wrong and allocations. */
static void zb_check_all(uint32_t n, bool persistent, bool multi) {
    const char *args[] = {"-c", "all", "-b", "8", "-e", "64K", "-f", "4", "-n", "5",
                          "-w", "1", "--threads", multi ? "multi" : "serial", "--check",
                          persistent ? "--persistent" : NULL, NULL};
    int rc = zb_bench(n, args, NULL);
    if (rc != 0) zb_show();
    ZT_CHECK_EQ(rc, 0);
    const char *cursor = zb_out;
    char line[512], coll[32] = "";
    unsigned rows[ZB_COLLS] = {0}, allocs_lines = 0, switch_lines = 0;
    int current = -1;
    while (zb_next_rank0_line(&cursor, line, sizeof line)) {
        char header_n[16];
        if (sscanf(line, "# zcbench: %31s on %15s ranks", coll, header_n) == 2) {
            current = -1;
            for (int c = 0; c < ZB_COLLS; c++)
                if (strcmp(coll, zb_colls[c]) == 0) current = c;
            ZB_CHECK(current >= 0);
            ZB_CHECK((uint32_t)atoi(header_n) == n);
            continue;
        }
        if (strncmp(line, "# allocations", 13) == 0) {
#if defined(ZC_SANITIZED)
            ZB_CHECK(strcmp(line, "# allocations: not counted (sanitized build)") == 0);
#else
            ZB_CHECK(strcmp(line, "# allocations during timed loops: 0") == 0);
#endif
            allocs_lines++;
            continue;
        }
        unsigned long long inv = 0, vol = 0;
        if (sscanf(line, "# context switches during timed loops: %llu involuntary (a rank's "
                   "CPU taken away), %llu voluntary", &inv, &vol) == 2) {
            switch_lines++;
            continue;
        }
        if (line[0] == '#') continue;
        unsigned long long size = 0, count = 0;
        char type[16], redop[16], wrong[16];
        int root = 0;
        double t = 0, algbw = 0, busbw = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
        int got = sscanf(line, "%llu %llu %15s %15s %d %lf %lf %lf %15s %lf %lf %lf %lf", &size,
                         &count, type, redop, &root, &t, &algbw, &busbw, wrong, &p50, &p99,
                         &p999, &max);
        if (got != 13) printf("    unparsed row: %s\n", line);
        ZB_CHECK(got == 13);
        ZB_CHECK(current >= 0);
        ZB_CHECK(strcmp(wrong, "0") == 0);
        ZB_CHECK(strcmp(type, "float32") == 0);
        ZB_CHECK(size == count * 4);
        ZB_CHECK(t > 0 && p50 > 0 && p50 <= p99 && p99 <= p999 && p999 <= max);
        rows[current]++;
    }
    for (int c = 0; c < ZB_COLLS; c++) {
        unsigned want = zb_expected_rows(zb_colls[c], 8, 64 << 10, 4, n);
        if (rows[c] != want) printf("    %s: %u rows, expected %u\n", zb_colls[c], rows[c], want);
        ZB_CHECK(rows[c] == want);
    }
    ZB_CHECK(allocs_lines == ZB_COLLS);
    ZB_CHECK(switch_lines == ZB_COLLS);
    ZB_CHECK(zb_count(zb_out, "persistent plans, zc_start per call") ==
             (persistent ? ZB_COLLS : 0));
    ZB_CHECK(zb_count(zb_out, multi ? ", threads multi\n" : ", threads serial\n") == ZB_COLLS);
}

void zcbench_check_every_collective_at_2_ranks_exact_and_allocation_free(void) {
    zb_check_all(2, false, false);
}

/* At 3 ranks with --threads multi: the communicator's lock taken, as for a library called from
 * several threads (the default is serial, no lock). */
void zcbench_check_every_collective_at_3_ranks_exact_and_allocation_free(void) {
    zb_check_all(3, false, true);
}

/* --persistent: every row's plans made once and started per iteration, exact and allocation
 * free, at 3 ranks (sendrecv with a rank idle). */
void zcbench_persistent_plans_check_every_collective_exact(void) {
    zb_check_all(3, true, false);
}

/* Jobs of 5 and 8 processes with the log-depth algorithms forced (ZC_LOG_MIN_RANKS=1: Bruck
 * all_gather and all_to_all; gather from a root that is not 0 keeps the direct algorithm in a
 * full mesh) check exactly, in 1-, 2-, 4- and 8-byte dtypes. */
void zcbench_log_depth_algorithms_check_exact_at_5_and_8_ranks(void) {
    static const char *const cases[][2] = {{"alltoall", "uint8"}, {"gather", "float16"},
                                           {"scatter", "int32"},  {"allgather", "float64"},
                                           {"alltoall", "int64"}, {"gather", "int8"}};
    const char *env[] = {"ZC_LOG_MIN_RANKS=1", NULL};
    for (uint32_t n = 5; n <= 8; n += 3)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char root[8];
            snprintf(root, sizeof root, "%u", n - 2u);
            const char *args[] = {"-c", cases[i][0], "-d", cases[i][1], "-r", root, "-b", "8",
                                  "-e", "4K", "-f", "8", "-n", "3", "-w", "1", "--check",
                                  "--json", NULL};
            int rc = zb_bench(n, args, env);
            if (rc != 0) zb_show();
            ZT_CHECK_EQ(rc, 0);
            ZB_CHECK(zb_count(zb_out, "\"wrong\":0,") == zb_count(zb_out, "\"wrong\":"));
            ZB_CHECK(zb_count(zb_out, "\"wrong\":") >= 3);
        }
}

/* Narrow types, other ops, a non-zero root and barrier mode still check exactly. */
void zcbench_check_narrow_dtypes_ops_and_roots_exact(void) {
    static const char *const cases[][4] = {
        {"fp8_e5m2", "sum", "reduce", "2"},      {"fp8_e4m3", "avg", "allreduce", "1"},
        {"bfloat16", "prod", "reduce_scatter", "0"}, {"float16", "max", "reduce", "1"},
        {"int8", "min", "allreduce", "0"},       {"uint64", "avg", "reduce_scatter", "0"},
        {"float64", "sum", "gather", "2"},       {"int32", "sum", "scatter", "1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"-c", cases[i][2], "-d", cases[i][0], "-o", cases[i][1],
                              "-r", cases[i][3], "-b", "64", "-e", "64K", "-f", "32",
                              "-n", "3", "-w", "1", "--check", "--mode", "barrier", "--json",
                              NULL};
        int rc = zb_bench(3, args, NULL);
        if (rc != 0) zb_show();
        ZT_CHECK_EQ(rc, 0);
        ZB_CHECK(zb_count(zb_out, "\"wrong\":0,") == 3);
        ZB_CHECK(zb_count(zb_out, "\"mode\":\"barrier\"") == 3);
        ZB_CHECK(zb_count(zb_out, "\"wrong\":") == 3);
    }
}

static const char *const zb_keys[] = {"impl", "coll", "bytes", "count", "dtype", "op",
                                      "root", "ranks", "mode", "iters", "time_us", "algbw",
                                      "busbw", "p50_us", "p99_us", "p999_us", "max_us", "wrong",
                                      "allocs", "preempted", "yielded"};

/* The number after "\"key\":" in the JSON line. */
static double zb_json_num(const char *line, const char *key) {
    char pat[40];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    ZT_CHECK(p != NULL);
    return strtod(p + strlen(pat), NULL);
}

void zcbench_json_lines_have_every_key_and_bus_factor(void) {
    const char *args[] = {"-c", "all", "-b", "1K", "-e", "16K", "-f", "4", "-n", "3", "-w", "1",
                          "--json", NULL};
    int rc = zb_bench(3, args, NULL);
    if (rc != 0) zb_show();
    ZT_CHECK_EQ(rc, 0);
    const char *cursor = zb_out;
    char line[1024];
    unsigned objects = 0, per_coll[ZB_COLLS] = {0};
    while (zb_next_rank0_line(&cursor, line, sizeof line)) {
        if (line[0] == '#') continue;
        ZB_CHECK(line[0] == '{' && line[strlen(line) - 1] == '}');
        for (size_t k = 0; k < sizeof zb_keys / sizeof zb_keys[0]; k++) {
            char pat[40];
            snprintf(pat, sizeof pat, "\"%s\":", zb_keys[k]);
            if (!strstr(line, pat)) printf("    key %s missing in %s\n", zb_keys[k], line);
            ZB_CHECK(zb_count(line, pat) == 1);
        }
        ZB_CHECK(strstr(line, "\"impl\":\"zcoll\"") && strstr(line, "\"ranks\":3,"));
        ZB_CHECK(strstr(line, "\"wrong\":-1,") && strstr(line, "\"iters\":3,"));
#if !defined(ZC_SANITIZED)
        ZB_CHECK(strstr(line, "\"allocs\":0,"));
#endif
        char coll[32] = "";
        const char *c = strstr(line, "\"coll\":\"");
        ZB_CHECK(c && sscanf(c + 8, "%31[a-z_]", coll) == 1);
        int idx = -1;
        for (int k = 0; k < ZB_COLLS; k++)
            if (strcmp(coll, zb_colls[k]) == 0) idx = k;
        ZB_CHECK(idx >= 0);
        per_coll[idx]++;
        objects++;
        double algbw = zb_json_num(line, "algbw"), busbw = zb_json_num(line, "busbw");
        double bytes = zb_json_num(line, "bytes"), t = zb_json_num(line, "time_us");
        if (idx == ZB_COLLS - 1) { /* barrier: no bytes, no bandwidth */
            ZB_CHECK(bytes == 0 && algbw == 0 && busbw == 0);
            continue;
        }
        ZB_CHECK(algbw > 0 && t > 0);
        ZB_CHECK(fabs(algbw - bytes / t / 1e3) <= 1e-6 * algbw);
        double ratio = busbw / algbw, want = zb_bus_factor(coll, 3);
        if (fabs(ratio - want) > 1e-6) printf("    %s: busbw/algbw %.9f, expected %.9f\n", coll,
                                              ratio, want);
        ZB_CHECK(fabs(ratio - want) <= 1e-6);
    }
    for (int k = 0; k < ZB_COLLS; k++)
        ZB_CHECK(per_coll[k] == zb_expected_rows(zb_colls[k], 1024, 16384, 4, 3));
    ZB_CHECK(objects > 0);
}

void zcbench_rejects_bad_usage_with_exit_2(void) {
    static const char *const bad[][8] = {
        {NULL},
        {"-b", "8", NULL},
        {"-c", "allreduse", NULL},
        {"-c", "allreduce", "-b", "1X", NULL},
        {"-c", "allreduce", "-b", "0", NULL},
        {"-c", "allreduce", "-f", "1", NULL},
        {"-c", "allreduce", "-b", "2K", "-e", "1K", NULL},
        {"-c", "allreduce", "-d", "float33", NULL},
        {"-c", "allreduce", "-o", "mean", NULL},
        {"-c", "allreduce", "--mode", "fast", NULL},
        {"-c", "allreduce", "-n", "0", NULL},
        {"-c", "allreduce", "--transport", "carrier-pigeon", NULL},
        {"-c", "allreduce", "--bogus", NULL},
        {"-c", "allreduce", "--threads", "single", NULL},
        {"-c", "allreduce", "-e", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = zb_bench(0, bad[i], NULL);
        if (rc != 2 || !strstr(zb_out, "usage: ")) printf("    case %zu\n", i);
        ZB_CHECK(rc == 2);
        ZB_CHECK(strstr(zb_out, "usage: ") != NULL);
    }
    /* A root beyond the ranks is known only after init: still a usage error. */
    const char *root[] = {"-c", "reduce", "-r", "2", "-b", "8", "-e", "8", NULL};
    ZB_CHECK(zb_bench(2, root, NULL) == 2);
    ZB_CHECK(strstr(zb_out, "-r 2: only 2 ranks") != NULL);
    /* --help exits 0 and names every option and column. */
    const char *help[] = {"--help", NULL};
    ZB_CHECK(zb_bench(0, help, NULL) == 0);
    static const char *const words[] = {
        "-c COLL", "-b MINBYTES", "-e MAXBYTES", "-f FACTOR", "-d DTYPE", "-o OP", "-r ROOT",
        "-w WARMUP", "-n ITERS", "--mode loop", "--mode barrier", "--check", "--json",
        "--transport", "--threads", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "p99.9(us)",
        "allocations"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) ZB_CHECK(strstr(zb_out, words[i]));
}

/* A failing zcoll call prints "zcbench: CALL: STATUS: sentence" and exits 1; one rank alone
 * (no launcher) runs every collective but sendrecv. */
void zcbench_reports_failures_with_exit_1_and_runs_single_rank(void) {
    const char *args[] = {"-c", "all", "-b", "8", "-e", "64", "-f", "8", "-n", "2", "-w", "0",
                          "--check", NULL};
    const char *const env[] = {"ZC_SLOT_BYTES=lots", NULL};
    ZB_CHECK(zb_bench(0, args, env) == 1);
    ZB_CHECK(strstr(zb_out, "zcbench: zc_config_from_env: ZC_INVALID_ARG: ") != NULL);
    ZB_CHECK(strstr(zb_out, "ZC_SLOT_BYTES") != NULL);
    int rc = zb_bench(0, args, NULL);
    if (rc != 0) zb_show();
    ZT_CHECK_EQ(rc, 0);
    ZB_CHECK(strstr(zb_out, "# sendrecv needs 2 or more ranks: skipped") != NULL);
    ZB_CHECK(zb_count(zb_out, "# zcbench: ") == ZB_COLLS - 1);
    ZB_CHECK(zb_count(zb_out, "# allocations") == ZB_COLLS - 1);
}

/* --transport hier asks for the two-wire communicator; ranks that all share one host need only
 * its shared-memory wire, which then carries the calls (zc_comm_transport says shm). */
void zcbench_transport_hier_on_one_host_runs_on_shm(void) {
    const char *args[] = {"-c", "allreduce", "-b", "8", "-e", "64", "-n", "4", "-w", "1",
                          "--check", "--transport", "hier", NULL};
    int rc = zb_bench(2, args, NULL);
    if (rc != 0) zb_show();
    ZT_CHECK_EQ(rc, 0);
    ZB_CHECK(strstr(zb_out, "allreduce on 2 ranks, transport shm") != NULL);
}
