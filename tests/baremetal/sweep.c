/* sweep.c: the test program of the bare-metal image (board: platform/baremetal/). With no OS
 * underneath, it runs the core with the in-process transport and checks every result bitwise
 * against tests/ref.c, the reference build/zctest uses: its full sweep (every collective x
 * dtype x op, in place and not, ragged counts, rotating roots) on 8 ranks and two geometries
 * (one-shot/tree and pipelined algorithms); persistent plans restarted with fresh inputs; a
 * mismatch and a timeout; and the full sweep again with two ranks on two cores (QEMU -smp 2),
 * each core driving its own rank, over the shared-memory wire with real concurrency.
 * Prints one line per failure and per part, then `N passed, N failed` (one test per
 * collective and part, plus the misuse cases); returns 1 when any failed (the exit status).
 * Memory is static: arenas come from one pool, buffers are fixed arrays. */
#include "board.h"
#include "ref.h"
#include "text.h"
#include "zcoll.h"

#define NR 8u                     /* ranks of the sweep */
#define MAX_COUNT 257u            /* elements per block, at most */
#define BUF_BYTES (NR * MAX_COUNT * 8u + 1u)
#define POOL_BYTES (1u << 20)     /* arenas of one group: 8 x 91264 bytes used */

static uint8_t send_buf[NR][BUF_BYTES], recv_buf[NR][BUF_BYTES], want_buf[NR][BUF_BYTES];
static uint8_t pool[POOL_BYTES] __attribute__((aligned(64)));
static size_t pool_used;
static uint32_t passed, failed; /* tests: one per collective and part, and the misuse cases */
static uint32_t checked;        /* collective calls checked against the reference */
static size_t arena_bytes_seen;

/* printf to the UART, through the core's own formatter. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    zc__vfmt(line, sizeof line, fmt, ap);
    va_end(ap);
    zc_board_puts(line);
}

static void tally(bool ok) {
    if (ok) passed++;
    else failed++;
}

/* ---- groups ---- */

typedef struct group {
    uint32_t n;
    zc_config cfg;
    void *arenas[NR];
    zc_comm *c[NR];
} group;

/* Opens an in-process group of n ranks with arenas from the pool; false (and a line) if not. */
static bool group_open(group *g, uint32_t n, uint32_t slot_bytes, uint64_t small_max,
                       uint64_t timeout_ns) {
    __builtin_memset(g, 0, sizeof *g);
    g->n = n;
    zr_group_config(&g->cfg, n, slot_bytes, 4, small_max, timeout_ns);
    size_t bytes = (zc_comm_arena_bytes(&g->cfg) + 63u) & ~(size_t)63u;
    if (bytes > arena_bytes_seen) arena_bytes_seen = bytes;
    pool_used = 0;
    if (bytes == 0 || (size_t)n * bytes > POOL_BYTES) {
        say("FAIL group of %u: arena of %zu bytes does not fit the pool\n", n, bytes);
        return false;
    }
    for (uint32_t r = 0; r < n; r++) g->arenas[r] = pool + (pool_used += bytes) - bytes;
    zc_status st = zc_comm_init_inproc(&g->cfg, g->arenas, bytes, g->c);
    if (st != ZC_OK) say("FAIL init of %u ranks: %s\n", n, zc_init_error_text());
    return st == ZC_OK;
}

static void group_close(group *g) {
    for (uint32_t r = 0; r < g->n; r++) (void)zc_comm_fini(g->c[r]);
}

/* Waits every rank's request; true when each ended with want. */
static bool wait_all(group *g, zc_req *reqs, zc_status want) {
    bool ok = true;
    for (uint32_t r = 0; r < g->n; r++) {
        zc_status st = zc_wait(g->c[r], &reqs[r]);
        if (st == want) continue;
        say("    rank %u: %s, expected %s: %s\n", r, zc_status_name(st), zc_status_name(want),
            zc_comm_error_text(g->c[r]));
        ok = false;
    }
    return ok;
}

/* ---- one case against the reference ---- */

static void fill_inputs(const zr_case *k, uint64_t seed) {
    size_t bb = zr_buf_bytes(k);
    for (uint32_t r = 0; r < k->n; r++) {
        zr_fill(send_buf[r], k->n * k->count, k->t, seed, r, 0);
        send_buf[r][bb - 1] = 0xA5;
        __builtin_memset(recv_buf[r], 0xA5, bb);
        __builtin_memset(want_buf[r], 0xA5, bb);
    }
    uint8_t *send[NR];
    for (uint32_t r = 0; r < k->n; r++) send[r] = send_buf[r];
    for (uint32_t r = 0; r < k->n; r++) zr_want(k, send, r, want_buf[r]);
}

/* Compares every rank's result with the reference; one line per rank that differs. */
static bool check_results(const zr_case *k) {
    bool ok = true;
    for (uint32_t r = 0; r < k->n; r++) {
        size_t bytes;
        const uint8_t *got = zr_result(k, r, send_buf[r], recv_buf[r], &bytes);
        size_t at = zr_first_diff(got, want_buf[r], bytes);
        if (at == bytes) continue;
        char what[128];
        zr_describe(k, what, sizeof what);
        say("FAIL %s: rank %u differs at byte %zu of %zu\n", what, r, at, bytes);
        ok = false;
    }
    return ok;
}

static bool run_case(group *g, const zr_case *k, uint64_t seed) {
    fill_inputs(k, seed);
    zc_req reqs[NR];
    for (uint32_t r = 0; r < k->n; r++) {
        zc_status st = zr_issue(k, g->c[r], r, send_buf[r], recv_buf[r], &reqs[r]);
        if (st == ZC_OK) continue;
        char what[128];
        zr_describe(k, what, sizeof what);
        say("FAIL %s: rank %u issue: %s\n", what, r, zc_comm_error_text(g->c[r]));
        return false; /* the ranks issued so far cannot finish: the group is unusable */
    }
    return wait_all(g, reqs, ZC_OK) && check_results(k);
}

/* ---- the parts ---- */

/* The full sweep of tests/ref.c (every collective x dtype x op, in place and not, counts and
 * roots rotating): one test per collective, failed when any of its cases is. A failed case
 * ends the sweep (the group has failed), so the collectives not reached count as failed. */
static void sweep(uint32_t slot_bytes, uint64_t small_max) {
    static const size_t counts[] = {0, 1, 3, 17, 61, 130, 257};
    group g;
    if (!group_open(&g, NR, slot_bytes, small_max, 0)) {
        tally(false);
        return;
    }
    bool coll_ok[ZR_COUNT];
    for (uint32_t c = 0; c < ZR_COUNT; c++) coll_ok[c] = true;
    uint64_t t0 = zc_board_now_ns();
    uint32_t cases = 0, bad = 0;
    zr_case k;
    while (zr_sweep_case(cases, NR, counts, 7, &k) && !bad) {
        bool ok = run_case(&g, &k, 1000u + cases++);
        for (uint32_t c = k.c; c < ZR_COUNT && !ok; c++) coll_ok[c] = false;
        bad += !ok;
    }
    for (uint32_t c = 0; c < ZR_COUNT; c++) tally(coll_ok[c]);
    checked += cases;
    say("sweep slot_bytes=%u small_max=%llu, arena %zu bytes per rank: %u cases, %u failed "
        "(%llu ms)\n", slot_bytes, (unsigned long long)small_max, zc_comm_arena_bytes(&g.cfg),
        cases, bad, (unsigned long long)((zc_board_now_ns() - t0) / 1000000u));
    group_close(&g);
}

/* Each collective as a persistent plan, started five times with fresh inputs each time. */
static void plans(void) {
    group g;
    if (!group_open(&g, NR, 256, 1024, 0)) {
        tally(false);
        return;
    }
    for (uint32_t c = 0; c < ZR_COUNT; c++) {
        zr_case k = {(zr_coll)c, NR, 100, ZC_FLOAT32, ZC_SUM, 3, c == ZR_ALLREDUCE};
        zc_plan p[NR];
        zc_req q[NR];
        bool ok = true;
        for (uint32_t r = 0; r < NR && ok; r++)
            ok = zr_plan(&k, g.c[r], r, send_buf[r], recv_buf[r], &p[r]) == ZC_OK;
        for (uint32_t it = 0; it < 5 && ok; it++) {
            fill_inputs(&k, 77u * c + it); /* same buffers the plans hold */
            for (uint32_t r = 0; r < NR && ok; r++) ok = zc_start(g.c[r], &p[r], &q[r]) == ZC_OK;
            ok = ok && wait_all(&g, q, ZC_OK) && check_results(&k);
            checked++;
        }
        for (uint32_t r = 0; r < NR; r++) ok = zc_plan_release(g.c[r], &p[r]) == ZC_OK && ok;
        if (!ok) say("FAIL persistent %s\n", zr_coll_name((zr_coll)c));
        tally(ok);
    }
    say("persistent plans: every collective started 5 times\n");
    group_close(&g);
}

/* Two ranks call allreduce with different counts: both fail with ZC_MISMATCH. */
static void mismatch(void) {
    group g;
    if (!group_open(&g, 2, 256, 1024, 0)) {
        tally(false);
        return;
    }
    static int32_t a[20], b[20];
    zc_req q[2];
    bool ok = zc_allreduce(g.c[0], a, b, 10, ZC_INT32, ZC_SUM, &q[0]) == ZC_OK &&
              zc_allreduce(g.c[1], a, b, 20, ZC_INT32, ZC_SUM, &q[1]) == ZC_OK &&
              wait_all(&g, q, ZC_MISMATCH);
    if (!ok) say("FAIL mismatched counts\n");
    else say("mismatch: %s\n", zc_comm_error_text(g.c[0]));
    tally(ok);
    group_close(&g);
}

/* Rank 2 of 3 never calls: rank 0's wait ends with ZC_TIMED_OUT after the 150 ms deadline
 * (by the generic timer), and the communicator stays failed. */
static void timeout(void) {
    group g;
    if (!group_open(&g, 3, 256, 0, 150000000ull)) {
        tally(false);
        return;
    }
    static double x = 1.0, y = 0.0;
    zc_req q[2];
    bool ok = zc_allreduce(g.c[0], &x, &y, 1, ZC_FLOAT64, ZC_SUM, &q[0]) == ZC_OK &&
              zc_allreduce(g.c[1], &x, &y, 1, ZC_FLOAT64, ZC_SUM, &q[1]) == ZC_OK;
    uint64_t t0 = zc_board_now_ns();
    ok = ok && zc_wait(g.c[0], &q[0]) == ZC_TIMED_OUT;
    uint64_t ms = (zc_board_now_ns() - t0) / 1000000u;
    ok = ok && ms >= 100 && ms < 2000 && y == 0.0 && zc_barrier(g.c[0], &q[0]) == ZC_TIMED_OUT;
    say("timeout: %s after %llu ms: %s\n", ok ? "ok" : "FAIL", (unsigned long long)ms,
        zc_comm_error_text(g.c[0]));
    tally(ok);
    group_close(&g);
}

/* ---- two ranks on two cores ---- */

#define SMP_BUF (2u * MAX_COUNT * 8u + 1u)
#define SMP_CASES ZR_SWEEP_CASES

typedef struct smp_core {
    uint8_t inputs[2][SMP_BUF]; /* both ranks' inputs, for the reference */
    uint8_t send[SMP_BUF], recv[SMP_BUF], want[SMP_BUF];
    uint8_t failed[SMP_CASES];  /* 1: this core's rank got a wrong result or status */
    uint32_t cases;
} smp_core;

static smp_core smp[2];
static group smp_group;
static uint32_t smp_finished; /* set (release) by core 1 when its rank is done */

/* The n-th case of the two-rank sweep: tests/ref.c's full sweep on 2 ranks. */
static bool smp_case(uint32_t i, zr_case *k) {
    static const size_t counts[] = {0, 1, 5, 64, 200, 257};
    return zr_sweep_case(i, 2, counts, 6, k);
}

/* One core's rank: every case in order, driving only its own communicator's progress
 * (zc_progress + zc_test, never zc_wait, which would progress the other core's rank). */
static void smp_rank(uint32_t cpu) {
    smp_core *me = &smp[cpu];
    zc_comm *cm = smp_group.c[cpu];
    zr_case k;
    for (uint32_t i = 0; i < SMP_CASES && smp_case(i, &k); i++, me->cases++) {
        size_t bb = zr_buf_bytes(&k);
        uint8_t *inputs[2] = {me->inputs[0], me->inputs[1]};
        for (uint32_t r = 0; r < 2; r++) zr_fill(inputs[r], 2 * k.count, k.t, 5000u + i, r, 0);
        __builtin_memcpy(me->send, inputs[cpu], bb - 1);
        __builtin_memset(me->recv, 0xA5, bb);
        __builtin_memset(me->want, 0xA5, bb);
        zr_want(&k, inputs, cpu, me->want);
        zc_req req;
        zc_status st = zr_issue(&k, cm, cpu, me->send, me->recv, &req);
        while (st == ZC_OK) {
            (void)zc_progress(cm);
            st = zc_test(cm, &req);
            if (st != ZC_IN_PROGRESS) break;
            st = ZC_OK;
        }
        size_t bytes;
        const uint8_t *got = zr_result(&k, cpu, me->send, me->recv, &bytes);
        me->failed[i] = st != ZC_OK || zr_first_diff(got, me->want, bytes) != bytes;
        if (st != ZC_OK) break; /* the communicator has failed: later cases cannot run */
    }
}

static void smp_secondary(uint32_t cpu) {
    smp_rank(cpu);
    __atomic_store_n(&smp_finished, 1u, __ATOMIC_RELEASE);
}

/* Rank 1 on core 1 (started through PSCI), rank 0 here; then every case is tallied once, as
 * failed when either core's rank failed it. */
static void two_cores(void) {
    if (!group_open(&smp_group, 2, 256, 1024, 0)) {
        tally(false);
        return;
    }
    uint64_t t0 = zc_board_now_ns();
    int rc = zc_board_start_cpu(1, smp_secondary);
    if (rc != 0) {
        say("FAIL two cores: PSCI CPU_ON of core 1 returned %d (run with -smp 2)\n", rc);
        tally(false);
        group_close(&smp_group);
        return;
    }
    smp_rank(0);
    uint64_t limit = zc_board_now_ns() + 60000000000ull; /* past every request's deadline */
    while (!__atomic_load_n(&smp_finished, __ATOMIC_ACQUIRE) && zc_board_now_ns() < limit) {
    }
    bool joined = __atomic_load_n(&smp_finished, __ATOMIC_ACQUIRE) != 0;
    bool coll_ok[ZR_COUNT];
    for (uint32_t c = 0; c < ZR_COUNT; c++) coll_ok[c] = joined;
    uint32_t bad = 0;
    for (uint32_t i = 0; i < SMP_CASES; i++) {
        zr_case k;
        bool known = smp_case(i, &k);
        bool ok = known && i < smp[0].cases && i < smp[1].cases && !smp[0].failed[i] &&
                  !smp[1].failed[i];
        if (known && !ok) coll_ok[k.c] = false;
        if (!ok && bad++ < 5) {
            char what[128] = "?";
            if (known) zr_describe(&k, what, sizeof what);
            say("FAIL two cores: case %u %s (core 0: %s, core 1: %s)\n", i, what,
                i < smp[0].cases ? (smp[0].failed[i] ? "wrong" : "ok") : "not run",
                !joined ? "did not finish" : i < smp[1].cases ? (smp[1].failed[i] ? "wrong" : "ok")
                                                              : "not run");
        }
    }
    for (uint32_t c = 0; c < ZR_COUNT; c++) tally(coll_ok[c]);
    checked += SMP_CASES;
    say("two cores, one rank each, shared-memory wire: %u cases, %u failed (%llu ms)\n",
        SMP_CASES, bad, (unsigned long long)((zc_board_now_ns() - t0) / 1000000u));
    group_close(&smp_group);
}

int zc_app_main(void) {
    say("zcoll bare-metal: aarch64, no OS, in-process transport, %u ranks\n", NR);
    sweep(256, 1024);
    sweep(1024, 0);
    plans();
    mismatch();
    timeout();
    two_cores();
    say("%u calls checked; largest arena %zu bytes per rank; boot to done %llu ms (the generic "
        "timer counts from reset)\n", checked, arena_bytes_seen,
        (unsigned long long)(zc_board_now_ns() / 1000000u));
    say("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
