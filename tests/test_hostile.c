/* test_hostile.c: what one rank of a job can do to another. Rank 1 of a real three-process job
 * (zcrun, the shared-memory wire, the simulated device for the ipc path) plays a hostile peer:
 * through the test build's hook (engine.h's zc__test_forge, compiled into zctest only) it
 * forges fields of the messages it sends (ready messages' offsets, the ipc path's READY and
 * registration records, headers), and it writes failure-report words and credits into its
 * peers' windows as any rank can. For every field, an out-of-range value must make ranks 0 and
 * 2 fail cleanly (the expected status and a sentence naming rank 1, or the other's report of
 * it), leave the canary in their
 * private memory that the forged offsets aim at untouched, and no rank may hang (every call
 * returns well inside its deadline). Each case runs on a fresh child of a healthy parent
 * (zc_comm_split), so one job covers them all.
 *
 * Decoders whose messages the shared-memory wire never carries (placement ready messages and
 * the direct path's READY, which only a wire with puts exchanges; landing records, which only
 * such a wire gathers) and failure-report words of every shape are checked here in process,
 * and fuzzed (tests/fuzz/fuzz_ready.c); so is a stale one-line message (a previous call's
 * fingerprint). */
#include "zt.h"

#define ZC_TEST_HOOKS 1 /* zc__test_forge's declaration; zctest links its definition */
#include "../core/device.h" /* the hook, the header, the decoders, the landing records */
#include "sim.h"
#include "zcoll.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HX_RANKS 3u
#define HX_ATTACKER 1u
#define HX_SYM_BYTES (1u << 20)  /* ZC_SYM_BYTES of the job */
#define HX_COUNT 8192u           /* int64 per rank: ZC_SYM_MIN_BYTES, the single-copy schedule */
#define HX_DEV_COUNT 1024u       /* float per rank on the simulated device */
#define HX_BOUND_NS 5000000000ull /* every call returns within this; its deadline is 20 s */
#define HX_CANARY_BYTES 65536u
#define HX_CANARY 0x5Au

typedef enum hx_kind {
    HX_SYM_SEND_AT_PRIVATE, HX_SYM_RECV_AT_PRIVATE, HX_SYM_SEND_FAR, HX_SYM_SEND_PAST_END,
    HX_SYM_RECV_NONE, HX_SYM_P2P_AT_PRIVATE, HX_HDR_COUNT, HX_HDR_BYTES, HX_ALARM_NO_STATUS,
    HX_ALARM_RANK_OUTSIDE, HX_ALARM_AGAIN, HX_ALARM_REPORT, HX_CREDIT_AHEAD, HX_IPC_OFFSET_FAR,
    HX_IPC_UNKNOWN_REG, HX_IPC_RECORD_PAST_END, HX_IPC_RECORD_CLAIMS_PID, HX_KINDS
} hx_kind;

typedef struct hx_case {
    const char *name;
    zc_status want;   /* the status ranks 0 and 2 must get */
    const char *says; /* in their sentence */
} hx_case;

static const hx_case hx_cases[HX_KINDS] = {
    [HX_SYM_SEND_AT_PRIVATE] = {"sym ready: send offset aimed at the peer's private memory",
                                ZC_MISMATCH, "rank 1 sent a ready message that puts its send"},
    [HX_SYM_RECV_AT_PRIVATE] = {"sym ready: recv offset aimed at the peer's private memory",
                                ZC_MISMATCH, "rank 1 sent a ready message that puts its recv"},
    [HX_SYM_SEND_FAR] = {"sym ready: send offset 2^45", ZC_MISMATCH, "at offset 35184372088832"},
    [HX_SYM_SEND_PAST_END] = {"sym ready: send buffer across the region's end", ZC_MISMATCH,
                              "which has 1048576 bytes"},
    [HX_SYM_RECV_NONE] = {"sym ready: no recv buffer where the call needs one", ZC_MISMATCH,
                          "at offset 18446744073709551615"},
    [HX_SYM_P2P_AT_PRIVATE] = {"sym send: offset aimed at the receiver's private memory",
                               ZC_MISMATCH, "rank 1 sent a ready message that puts its send"},
    [HX_HDR_COUNT] = {"header: count", ZC_MISMATCH, "but rank 1 called"},
    [HX_HDR_BYTES] = {"header: payload bytes 2^30", ZC_MISMATCH,
                      "rank 1 sent a message whose header says message 0 of 1073741824 bytes"},
    [HX_ALARM_NO_STATUS] = {"failure report: status byte 0, another rank's number",
                            ZC_MISMATCH, "which is no report"},
    [HX_ALARM_RANK_OUTSIDE] = {"failure report: rank 4000", ZC_MISMATCH, "which is no report"},
    [HX_ALARM_AGAIN] = {"failure report: ZC_AGAIN", ZC_MISMATCH, "which is no report"},
    [HX_ALARM_REPORT] = {"failure report: well formed (rank 1, ZC_TIMED_OUT)", ZC_TIMED_OUT,
                         "rank 1 detected ZC_TIMED_OUT"},
    [HX_CREDIT_AHEAD] = {"credit for messages never sent", ZC_MISMATCH,
                         "rank 1 sent a credit for 1099511627776 messages"},
    [HX_IPC_OFFSET_FAR] = {"ipc READY: send offset 2^40 in its registration", ZC_MISMATCH,
                           "rank 1 sent a READY that puts its send buffer"},
    [HX_IPC_UNKNOWN_REG] = {"ipc READY: a registration nobody made", ZC_MISMATCH,
                            "which this rank does not hold"},
    [HX_IPC_RECORD_PAST_END] = {"registration record: 2^40 bytes", ZC_GPU,
                                "mapping rank 1's buffer"},
    [HX_IPC_RECORD_CLAIMS_PID] = {"registration record: the peer's pid and an address of its "
                                  "private memory", ZC_OK, NULL},
};

/* What each rank tells the others before a case: where its canary is, as an offset from rank
 * 1's symmetric region as mapped in its process and as an address, and its process id. */
typedef struct hx_share {
    uint64_t to_canary, canary, pid;
} hx_share;

static _Alignas(64) uint8_t hx_canary[HX_CANARY_BYTES];

/* The attacker's forgery: the child it forges on, the case, what every peer told it. */
static struct {
    const zc_comm *child;
    hx_kind kind;
    hx_share peer[HX_RANKS];
} hx_f;

static uint64_t hx_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void hx_put64(uint8_t *p, uint64_t v) { memcpy(p, &v, sizeof v); }

/* zc__test_forge of rank 1: changes the fields of the case in what it sends on hx_f.child. The
 * ipc READY's payload is {u32 send_creg, u32 recv_creg, u64 send_off, u64 recv_off, u64
 * round_elems} (core/sched_gpu.c), the symmetric ready message's {u64 send_off, recv_off}. */
static void hx_forge(const zc_comm *c, uint32_t peer, zc__hdr *h, uint8_t *payload) {
    if (c != hx_f.child) return;
    const hx_share *v = &hx_f.peer[peer];
    bool ready = h->alg == ZC_ALG_SYM && h->step == 0 && h->bytes == 16u;
    bool hello = zc__gpu_alg(h->alg) && h->kind != ZC_K_REGISTER && h->step == 0 &&
                 h->bytes == 32u;
    bool record = h->kind == ZC_K_REGISTER && h->bytes == sizeof(zc_gpu_ipc);
    zc_gpu_ipc rec;
    if (record) memcpy(&rec, payload, sizeof rec);
    switch (hx_f.kind) {
    case HX_SYM_SEND_AT_PRIVATE:
    case HX_SYM_P2P_AT_PRIVATE: if (ready) hx_put64(payload, v->to_canary); break;
    case HX_SYM_RECV_AT_PRIVATE: if (ready) hx_put64(payload + 8, v->to_canary); break;
    case HX_SYM_SEND_FAR: if (ready) hx_put64(payload, 1ull << 45); break;
    case HX_SYM_SEND_PAST_END: if (ready) hx_put64(payload, HX_SYM_BYTES - 64u); break;
    case HX_SYM_RECV_NONE: if (ready) hx_put64(payload + 8, UINT64_MAX); break;
    case HX_HDR_COUNT: h->count += 1u; break;
    case HX_HDR_BYTES: h->bytes = 1u << 30; break;
    case HX_IPC_OFFSET_FAR: if (hello) hx_put64(payload + 8, 1ull << 40); break;
    case HX_IPC_UNKNOWN_REG:
        if (hello) memcpy(payload, &(uint32_t){77u}, 4);
        break;
    case HX_IPC_RECORD_PAST_END: rec.bytes = 1ull << 40; break;
    case HX_IPC_RECORD_CLAIMS_PID:
        rec.pid = v->pid;
        rec.addr = v->canary;
        break;
    default: break;
    }
    if (record) memcpy(payload, &rec, sizeof rec);
}

typedef struct hx_rank {
    zc_config cfg;
    zc_comm *parent, *child;
    uint32_t me;
    char text[ZC_ERROR_TEXT_BYTES]; /* the child's sentence, kept when it is closed */
    char why[512];    /* the first thing that went wrong here */
} hx_rank;

/* Keeps the child's sentence and closes it. */
static void hx_close_child(hx_rank *x) {
    if (!x->child) return;
    snprintf(x->text, sizeof x->text, "%s", zc_comm_error_text(x->child));
    zc_comm_fini(x->child);
    x->child = NULL;
}

#define HX_FAIL(x, ...) (snprintf((x)->why, sizeof (x)->why, __VA_ARGS__), 1)

static zc_status hx_wait(zc_comm *c, zc_status issued, zc_req *req) {
    return issued == ZC_OK ? zc_wait(c, req) : issued;
}

static bool hx_parent_barrier(hx_rank *x) {
    zc_req r;
    return zc_barrier(x->parent, &r) == ZC_OK && zc_wait(x->parent, &r) == ZC_OK;
}

/* The symmetric-region cases: an all_gather (or rank 1's sends to both peers) of HX_COUNT
 * int64 in the region; *leak is set when a byte of the canary reached a result. */
static zc_status hx_sym_call(hx_rank *x, hx_kind k, bool *leak) {
    int64_t *send, *recv;
    zc_req q[2];
    zc_status st;
    if (zc_sym_alloc(x->child, HX_COUNT * 8u, (void **)&send) != ZC_OK ||
        zc_sym_alloc(x->child, HX_RANKS * HX_COUNT * 8u, (void **)&recv) != ZC_OK)
        return ZC_INTERNAL;
    for (uint32_t i = 0; i < HX_COUNT; i++) send[i] = (int64_t)(x->me * 100000u + i);
    memset(recv, 0xA5, HX_RANKS * HX_COUNT * 8u);
    if (k != HX_SYM_P2P_AT_PRIVATE) {
        st = hx_wait(x->child, zc_allgather(x->child, send, recv, HX_COUNT, ZC_INT64, &q[0]),
                     &q[0]);
    } else if (x->me != HX_ATTACKER) {
        st = hx_wait(x->child, zc_recv(x->child, recv, HX_COUNT, ZC_INT64, HX_ATTACKER, &q[0]),
                     &q[0]);
    } else {
        st = zc_send(x->child, send, HX_COUNT, ZC_INT64, 0, &q[0]);
        if (st == ZC_OK) st = zc_send(x->child, send, HX_COUNT, ZC_INT64, 2, &q[1]);
        if (st == ZC_OK) st = zc_wait(x->child, &q[0]);
        if (st == ZC_OK) st = zc_wait(x->child, &q[1]);
    }
    for (size_t i = 0; i < HX_RANKS * HX_COUNT; i++) /* no input element has this value */
        *leak |= (uint64_t)recv[i] == HX_CANARY * 0x0101010101010101ull;
    return st;
}

/* Ranks 0 and 2 all_gather through slots of 4 KiB in rings of 4: the fifth message to rank 1
 * reads its credit, which rank 1 forged and never overwrites (it issues nothing, it only polls
 * until the failure report comes). */
static zc_status hx_credit_call(hx_rank *x) {
    static int64_t send[4096], recv[HX_RANKS * 4096];
    zc_req q;
    if (x->me != HX_ATTACKER)
        return hx_wait(x->child, zc_allgather(x->child, send, recv, 4096, ZC_INT64, &q), &q);
    zc_status st = ZC_OK;
    for (uint64_t end = hx_now() + HX_BOUND_NS; st == ZC_OK && hx_now() < end;)
        st = zc_progress(x->child);
    return st;
}

/* The ipc cases: every rank registers two simulated device buffers, then all_reduces
 * HX_DEV_COUNT floats; *wrong is set when a rank's ZC_OK result is not the sum. */
static zc_status hx_ipc_call(hx_rank *x, bool *wrong) {
    float *dsend = zc_gpu_sim_alloc(HX_DEV_COUNT * 4u);
    float *drecv = zc_gpu_sim_alloc(HX_DEV_COUNT * 4u);
    zc_mem *ms = NULL, *mr = NULL;
    zc_req q;
    if (!dsend || !drecv) return ZC_INTERNAL;
    for (uint32_t i = 0; i < HX_DEV_COUNT; i++) dsend[i] = (float)(x->me + 1u) * (float)i;
    zc_status st = zc_mem_register(x->child, dsend, HX_DEV_COUNT * 4u, ZC_MEM_CUDA, &ms);
    if (st == ZC_OK) st = zc_mem_register(x->child, drecv, HX_DEV_COUNT * 4u, ZC_MEM_CUDA, &mr);
    /* Every rank mapped the others' buffers before any can fail the call and free its own. */
    if (st == ZC_OK) st = hx_wait(x->child, zc_barrier(x->child, &q), &q);
    if (st == ZC_OK)
        st = hx_wait(x->child, zc_allreduce(x->child, dsend, drecv, HX_DEV_COUNT, ZC_FLOAT32,
                                            ZC_SUM, &q), &q);
    for (uint32_t i = 0; i < HX_DEV_COUNT && st == ZC_OK; i++)
        *wrong |= drecv[i] != 6.0f * (float)i;
    if (ms) (void)zc_mem_deregister(x->child, ms);
    if (mr) (void)zc_mem_deregister(x->child, mr);
    hx_close_child(x); /* before the buffers go: the peers' mappings end with it */
    zc_gpu_sim_free(dsend);
    zc_gpu_sim_free(drecv);
    return st;
}

/* The call of case k at this rank, as the attacker or a victim. */
static zc_status hx_call(hx_rank *x, hx_kind k, bool *leak, bool *wrong) {
    static int64_t send[512], recv[512];
    zc_req q;
    switch (k) {
    case HX_HDR_COUNT:
    case HX_HDR_BYTES:
        return hx_wait(x->child, zc_allreduce(x->child, send, recv, 512, ZC_INT64, ZC_SUM, &q),
                       &q);
    case HX_ALARM_NO_STATUS:
    case HX_ALARM_RANK_OUTSIDE:
    case HX_ALARM_AGAIN:
    case HX_ALARM_REPORT: return hx_wait(x->child, zc_barrier(x->child, &q), &q);
    case HX_CREDIT_AHEAD: return hx_credit_call(x);
    case HX_IPC_OFFSET_FAR:
    case HX_IPC_UNKNOWN_REG:
    case HX_IPC_RECORD_PAST_END:
    case HX_IPC_RECORD_CLAIMS_PID: return hx_ipc_call(x, wrong);
    default: return hx_sym_call(x, k, leak);
    }
}

/* Rank 1, before the call: the words it writes into its peers' windows as any rank can. */
static void hx_write_words(hx_rank *x, hx_kind k) {
    static const uint64_t words[] = {
        [HX_ALARM_NO_STATUS] = 2ull << 32 | 5u,
        [HX_ALARM_RANK_OUTSIDE] = 7ull << 56 | 4000ull << 32,
        [HX_ALARM_AGAIN] = 1ull << 56 | 1ull << 32,
        [HX_ALARM_REPORT] = 7ull << 56 | 1ull << 32};
    zc_comm *c = x->child;
    if (k >= HX_ALARM_NO_STATUS && k <= HX_ALARM_REPORT) c->wire->alarm(c->wire_state, words[k]);
    for (uint32_t p = 0; p < HX_RANKS && k == HX_CREDIT_AHEAD; p++)
        if (p != x->me) c->wire->credit(c->wire_state, 0, p, 1ull << 40);
}

/* What must hold after case k at this rank. */
static int hx_judge(hx_rank *x, hx_kind k, zc_status st, const char *text, uint64_t took,
                    bool leak, bool wrong) {
    const hx_case *c = &hx_cases[k];
    if (took > HX_BOUND_NS)
        return HX_FAIL(x, "%s: the call took %llu ms", c->name,
                       (unsigned long long)(took / 1000000u));
    if (x->me == HX_ATTACKER) return 0; /* it may finish first or hear of the failure */
    if (st != c->want)
        return HX_FAIL(x, "%s: %s, expected %s (%s)", c->name, zc_status_name(st),
                       zc_status_name(c->want), text);
    /* A victim may hear of the failure from the other one first (the first report wins). */
    char relay[64];
    snprintf(relay, sizeof relay, "rank %u detected %s", 2u - x->me, zc_status_name(c->want));
    if (c->says && !strstr(text, c->says) && strncmp(text, relay, strlen(relay)) != 0)
        return HX_FAIL(x, "%s: the sentence \"%s\" does not say \"%s\"", c->name, text, c->says);
    for (size_t i = 0; i < HX_CANARY_BYTES; i++)
        if (hx_canary[i] != HX_CANARY)
            return HX_FAIL(x, "%s: canary byte %zu was written", c->name, i);
    if (leak) return HX_FAIL(x, "%s: canary bytes reached a result", c->name);
    if (wrong) return HX_FAIL(x, "%s: a result is not the sum", c->name);
    return 0;
}

/* One case on a fresh child of the parent; 0 when everything held here. */
static int hx_case_run(hx_rank *x, hx_kind k) {
    size_t bytes = zc_comm_arena_bytes(&x->cfg);
    void *arena = malloc(bytes);
    hx_share mine, all[HX_RANKS];
    zc_req q;
    if (!arena || zc_comm_split(x->parent, 0, (int)x->me, arena, bytes, &x->child) != ZC_OK)
        return HX_FAIL(x, "split: %s", zc_init_error_text());
    const uint8_t *base = x->child->wire->sym_base(x->child->wire_state, HX_ATTACKER);
    mine = (hx_share){(uint64_t)((uintptr_t)hx_canary - (uintptr_t)base),
                      (uint64_t)(uintptr_t)hx_canary, (uint64_t)getpid()};
    if (zc_allgather(x->child, &mine, all, sizeof mine, ZC_UINT8, &q) != ZC_OK ||
        zc_wait(x->child, &q) != ZC_OK)
        return HX_FAIL(x, "allgather: %s", zc_comm_error_text(x->child));
    /* Every rank is past the exchange before rank 1 writes into the windows, and rank 1 is
     * done writing before anyone calls. */
    if (!hx_parent_barrier(x))
        return HX_FAIL(x, "parent barrier: %s", zc_comm_error_text(x->parent));
    if (x->me == HX_ATTACKER) {
        hx_f.child = x->child;
        hx_f.kind = k;
        memcpy(hx_f.peer, all, sizeof all);
        hx_write_words(x, k);
    }
    if (!hx_parent_barrier(x))
        return HX_FAIL(x, "parent barrier: %s", zc_comm_error_text(x->parent));
    bool leak = false, wrong = false;
    uint64_t t0 = hx_now();
    zc_status st = hx_call(x, k, &leak, &wrong);
    uint64_t took = hx_now() - t0;
    hx_f.child = NULL;
    hx_close_child(x);
    free(arena);
    if (x->me != HX_ATTACKER)
        printf("hostile: %s: rank %u got %s: %s\n", hx_cases[k].name, x->me, zc_status_name(st),
               st == ZC_OK ? "" : x->text);
    int bad = hx_judge(x, k, st, x->text, took, leak, wrong);
    if (!hx_parent_barrier(x) && !bad)
        return HX_FAIL(x, "parent barrier after %s: %s", hx_cases[k].name,
                       zc_comm_error_text(x->parent));
    return bad;
}

int hostile_rank_forges(void) {
    hx_rank x;
    memset(&x, 0, sizeof x);
    zc_config_default(&x.cfg);
    if (zc_config_from_env(&x.cfg) != ZC_OK) return zt_rank_fail("config", "%s", x.cfg.error_text);
    x.me = x.cfg.rank;
    size_t bytes = zc_comm_arena_bytes(&x.cfg);
    void *arena = malloc(bytes);
    if (!arena || zc_comm_init(&x.cfg, arena, bytes, &x.parent) != ZC_OK)
        return zt_rank_fail("init", "%s", zc_init_error_text());
    memset(hx_canary, HX_CANARY, sizeof hx_canary);
    zc__test_forge = hx_forge;
    int bad = 0, only = getenv("HX_CASE") ? atoi(getenv("HX_CASE")) : -1; /* one, to debug */
    for (int k = 0; k < HX_KINDS && !bad; k++)
        if (only < 0 || k == only) bad = hx_case_run(&x, (hx_kind)k);
    zc__test_forge = NULL;
    zc_comm_fini(x.parent);
    free(arena);
    zc_gpu_sim_free_all();
    return bad ? zt_rank_fail("hostile", "%s", x.why) : 0;
}

void hostile_rank_fails_every_peer_cleanly(void) {
    static char out[1u << 16];
    const char *env[] = {"ZC_SYM_BYTES=1048576", "ZC_SLOTS=4", "ZC_SLOT_BYTES=4096",
                         "ZC_TIMEOUT_MS=20000", "ZC_GPU_PROVIDER=sim", "ZC_GPU_DEVICE=0", NULL};
    int rc = zt_run_ranks(HX_RANKS, "hostile_rank_forges", 240, env, out, sizeof out);
    uint32_t lines = 0, said = 0; /* every case's own sentence from one victim at least */
    for (const char *p = out; (p = strstr(p, "hostile: ")) != NULL; p++) lines++;
    for (int k = 0; k < HX_KINDS; k++) said += !hx_cases[k].says || strstr(out, hx_cases[k].says);
    if (rc != 0 || lines != 2u * HX_KINDS || said != HX_KINDS) printf("%s\n", out);
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK_EQ(lines, 2u * HX_KINDS);
    ZT_CHECK_EQ(said, HX_KINDS);
}

/* ---- in process: decoders the shared-memory wire does not reach, every alarm shape ---- */

typedef struct hx_group {
    void *arenas[2];
    zc_comm *c[2];
} hx_group;

/* Two ranks in process, 4 slots of 4 KiB (flagged lines up to 1,792 bytes), deadline
 * timeout_ns (0: the default). */
static void hx_open_for(hx_group *g, uint64_t timeout_ns) {
    zc_config cfg;
    zr_group_config(&cfg, 2, 4096, 4, 16384, timeout_ns);
    size_t bytes = zc_comm_arena_bytes(&cfg);
    for (int r = 0; r < 2; r++) ZT_CHECK((g->arenas[r] = aligned_alloc(64, bytes)) != NULL);
    ZT_CHECK_ST(zc_comm_init_inproc(&cfg, g->arenas, bytes, g->c), ZC_OK);
}

static void hx_open(hx_group *g) { hx_open_for(g, 0); }

static void hx_close(hx_group *g) {
    for (int r = 0; r < 2; r++) {
        zc_comm_fini(g->c[r]);
        free(g->arenas[r]);
    }
}

/* Every shape of failure-report word: rank 0 fails with a sentence, never an assertion; a well
 * formed report from rank 1 carries its status. */
void hostile_alarm_words_fail_the_communicator_never_abort(void) {
    static const struct { uint64_t word; zc_status want; const char *says; } w[] = {
        {1ull << 32, ZC_MISMATCH, "which is no report"},            /* status 0, rank 1 */
        {8ull << 56, ZC_MISMATCH, "which is no report"},            /* ZC_MISMATCH from rank 0 */
        {1ull << 56 | 1ull << 32, ZC_MISMATCH, "which is no report"}, /* ZC_AGAIN */
        {0x7full << 56 | 1ull << 32, ZC_MISMATCH, "which is no report"}, /* no such status */
        {0xffull << 56 | 0xffffffull << 32, ZC_MISMATCH, "which is no report"},
        {40ull << 56 | 2ull << 32, ZC_MISMATCH, "which is no report"}, /* rank 2 of 2 */
        {40ull << 56 | 1ull << 32 | 3u, ZC_PEER_LOST, "rank 1 detected ZC_PEER_LOST at sequence 3"},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        hx_group g;
        zc_req q;
        hx_open(&g);
        g.c[1]->wire->alarm(g.c[1]->wire_state, w[i].word);
        ZT_CHECK_ST(hx_wait(g.c[0], zc_barrier(g.c[0], &q), &q), w[i].want);
        if (!strstr(zc_comm_error_text(g.c[0]), w[i].says))
            printf("    word 0x%llx: %s\n", (unsigned long long)w[i].word,
                   zc_comm_error_text(g.c[0]));
        ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), w[i].says) != NULL);
        hx_close(&g);
    }
}

/* Landing records (gathered at init over a wire with puts): every field out of range is
 * refused with a sentence naming the rank; honest records and refusals pass. */
void hostile_landing_records_out_of_range_are_refused(void) {
    hx_group g;
    hx_open(&g);
    zc_comm *c = g.c[0];
    const zc__gpu_peer good = {.addr = 1u << 20, .rkey = 0x1234u, .area = 4096u, .no = ZC_LAND_OK};
    zc__gpu_peer bad[] = {good, good, good, good, good, good};
    bad[0].addr = 0;
    bad[1].addr = UINT64_MAX - 4096u;
    bad[2].rkey = 1ull << 32;
    bad[3].area = UINT64_MAX / 2u;
    bad[4].area = 0;
    bad[5].no = ZC_LAND_SMALL + 1u;
    ZT_CHECK(zc__land_take(c, 1, &good));
    ZT_CHECK(zc__land_take(c, 1, &(zc__gpu_peer){.no = ZC_LAND_NO_RDMA}));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c->err[0] = '\0';
        ZT_CHECK(!zc__land_take(c, 1, &bad[i]));
        ZT_CHECK(strstr(c->err, "rank 1 sent a landing record") != NULL);
    }
    hx_close(&g);
}

/* Placement ready messages and the direct path's READY (exchanged only over a wire with puts):
 * an address whose stream would pass the top of the address space, or a key wider than 32
 * bits, fails the communicator naming the rank; "no destination" (placement) and honest
 * values are taken. */
void hostile_ready_addresses_out_of_range_are_refused(void) {
    const uint64_t msgs[][2] = {{UINT64_MAX - 100u, 7}, {1u << 20, 1ull << 32}, {0, 1ull << 40}};
    for (int put = 0; put < 2; put++)
        for (size_t i = 0; i < 4; i++) {
            hx_group g;
            hx_open(&g);
            zc_comm *c = g.c[0];
            zc__req *r = &c->reqs[0];
            r->s = (zc__sched){.kind = ZC_K_ALLGATHER, .alg = ZC_ALG_DIRECT, .dtype = ZC_INT64,
                               .esize = 8, .chunk = 512, .count = 1024};
            uint64_t m[2] = {1u << 20, 0x42u}; /* i == 3: honest */
            if (i < 3) memcpy(m, msgs[i], sizeof m);
            bool took = put ? zc__put_take_ready(c, r, 1, (const uint8_t *)m)
                            : zc__place_take(c, r, 1, (const uint8_t *)m);
            bool ok = i == 3 || (!put && i == 2); /* raddr 0: through the slots */
            ZT_CHECK_EQ(took, ok);
            if (ok) ZT_CHECK(r->pl[1].raddr == m[0] && r->pl[1].rkey == m[1]);
            else ZT_CHECK(strstr(zc_comm_error_text(c), "rank 1 sent a ") != NULL);
            hx_close(&g);
        }
}

/* ---- in process: a stale line ---- */

static const zc_comm *hx_stale_from; /* the rank whose lines of sequence 5 say 4 */

static void hx_stale_forge(const zc_comm *c, uint32_t peer, zc__hdr *h, uint8_t *payload) {
    (void)peer;
    if (c != hx_stale_from || h->seq != 5u) return;
    h->seq = 4u;                    /* the previous call's line, with that call's data */
    memset(payload, 0x77, h->bytes); /* no element of the inputs below */
}

/* An 8-byte all_reduce's line (one line per peer: the line step) that carries the previous
 * call's fingerprint, as a line left over from it would, is not taken for the current call:
 * the receiver fails with ZC_MISMATCH naming both sequences, and its result is not written
 * with the stale data; six calls pass the 4-slot ring's wrap first. */
void hostile_stale_line_is_a_mismatch_never_consumed(void) {
    hx_group g;
    hx_open(&g);
    float in[2][2] = {{1, 2}, {3, 4}}, out[2][2];
    hx_stale_from = g.c[1];
    zc__test_forge = hx_stale_forge;
    zc_status st[2] = {ZC_OK, ZC_OK};
    for (int call = 0; call < 6 && st[0] == ZC_OK; call++) {
        zc_req q[2];
        memset(out, 0, sizeof out);
        for (int r = 0; r < 2; r++)
            ZT_CHECK_ST(zc_allreduce(g.c[r], in[r], out[r], 2, ZC_FLOAT32, ZC_SUM, &q[r]), ZC_OK);
        for (int r = 0; r < 2; r++) st[r] = zc_wait(g.c[r], &q[r]);
        if (call < 5) {
            ZT_CHECK_ST(st[0], ZC_OK);
            ZT_CHECK(out[0][0] == 4.0f && out[0][1] == 6.0f);
        }
    }
    zc__test_forge = NULL;
    ZT_CHECK_ST(st[0], ZC_MISMATCH);
    const char *t = zc_comm_error_text(g.c[0]);
    if (!strstr(t, "sequence 5") || !strstr(t, "its sequence 4")) printf("    %s\n", t);
    ZT_CHECK(strstr(t, "sequence 5") != NULL && strstr(t, "its sequence 4") != NULL);
    uint8_t stale[8];
    memset(stale, 0x77, sizeof stale);
    ZT_CHECK(memcmp(out[0], stale, sizeof stale) != 0);
    hx_close(&g);
}

/* ---- in process: flagged lines ---- */

#define HX_LL_COUNT 250u /* float32: 1,000 bytes, 18 flagged lines of 56 data bytes (the test
                          * build's override of the largest, zc__test_lines_max) */
#define HX_LL_LINES 18u

static const zc_comm *hx_ll_from;  /* the rank that forges */
static uint64_t hx_ll_seq;         /* the call whose lines it forges */
static uint32_t hx_ll_line;        /* which line */
static int hx_ll_how;              /* 0 torn data, 1 old line, 2 previous call's fingerprint */
static uint8_t hx_ll_old[4][HX_LL_LINES * 64u]; /* its lines of each slot's last message */

/* Keeps the lines rank hx_ll_from writes (one message per call on each channel: call s uses
 * slot s mod 4), and in call hx_ll_seq, after they were written, forges line hx_ll_line: part of
 * its data from the call 4 before (its flag new: a torn line), the whole line of that call
 * (data and flag: a stale line), or every line sealed for the previous call's fingerprint. */
static void hx_ll_forge(const zc_comm *c, uint32_t peer, zc__hdr *h, uint8_t *payload) {
    (void)peer;
    if (c != hx_ll_from || h->bytes != HX_LL_COUNT * 4u) return;
    uint8_t *old = hx_ll_old[h->seq % 4u], *line = payload + hx_ll_line * 64u;
    if (h->seq == hx_ll_seq && hx_ll_how == 0) memcpy(line + 16, old + hx_ll_line * 64u + 16, 8);
    if (h->seq == hx_ll_seq && hx_ll_how == 1) memcpy(line, old + hx_ll_line * 64u, 64);
    if (h->seq == hx_ll_seq && hx_ll_how == 2) {
        uint64_t tag;
        memcpy(&tag, payload + 56, sizeof tag); /* the low half: this message's tag */
        h->seq--;
        uint64_t fp = zc__lines_fp(h);
        for (uint32_t i = 0; i < HX_LL_LINES; i++) {
            uint64_t f = zc__lines_flag(payload + i * 64u, i, fp, tag);
            memcpy(payload + i * 64u + 56, &f, sizeof f);
        }
    }
    memcpy(old, payload, sizeof hx_ll_old[0]);
}

/* Runs 1,000-byte all_reduces (flagged lines) until call `until` with inputs that differ from
 * call to call, rank 1 forging as hx_ll_forge says; the statuses of the last call in st, its
 * result on rank 0 in out0 (preset to 0x5A bytes). */
static void hx_ll_run(hx_group *g, uint64_t until, zc_status st[2], float *out0) {
    static float in[2][HX_LL_COUNT], out[2][HX_LL_COUNT];
    hx_ll_from = g->c[1];
    zc__test_forge = hx_ll_forge;
    zc__test_lines_max = 4096;
    for (uint64_t call = 0; call <= until; call++) {
        zc_req q[2];
        for (uint32_t r = 0; r < 2; r++)
            for (uint32_t i = 0; i < HX_LL_COUNT; i++) in[r][i] = (float)(call * 1000u + i + r);
        memset(out, 0x5A, sizeof out);
        for (uint32_t r = 0; r < 2; r++)
            ZT_CHECK_ST(zc_allreduce(g->c[r], in[r], out[r], HX_LL_COUNT, ZC_FLOAT32, ZC_SUM,
                                     &q[r]), ZC_OK);
        for (uint32_t r = 0; r < 2; r++) st[r] = zc_wait(g->c[r], &q[r]);
        if (call < until) {
            ZT_CHECK_ST(st[0], ZC_OK);
            ZT_CHECK(out[0][7] == (float)(2u * (call * 1000u + 7u) + 1u));
        }
    }
    zc__test_forge = NULL;
    zc__test_lines_max = 0;
    memcpy(out0, out[0], sizeof out[0]);
}

/* A torn line (its flag this message's, 8 of its data bytes the previous use of the slot's)
 * is never taken, whichever line it is: the first, one between, the last. The receiver fails
 * with ZC_MISMATCH saying so, and writes no result. */
void hostile_torn_flagged_line_is_never_taken(void) {
    static const uint32_t which[] = {0, 7, HX_LL_LINES - 1u};
    for (size_t w = 0; w < sizeof which / sizeof which[0]; w++) {
        hx_group g;
        zc_status st[2];
        float out0[HX_LL_COUNT], none[HX_LL_COUNT];
        hx_open(&g);
        hx_ll_seq = 9, hx_ll_line = which[w], hx_ll_how = 0;
        hx_ll_run(&g, 9, st, out0);
        ZT_CHECK_ST(st[0], ZC_MISMATCH);
        const char *t = zc_comm_error_text(g.c[0]);
        char says[64];
        snprintf(says, sizeof says, "line %u of the message from rank 1", which[w]);
        if (!strstr(t, says) || !strstr(t, "torn or forged")) printf("    %s\n", t);
        ZT_CHECK(strstr(t, says) != NULL && strstr(t, "torn or forged") != NULL);
        memset(none, 0x5A, sizeof none);
        ZT_CHECK(memcmp(out0, none, sizeof none) == 0);
        hx_close(&g);
    }
}

/* Lines from a previous call are never taken: a line left from the slot's previous message
 * (its old flag) among lines of the current one is a stale line, and lines sealed with the
 * previous call's fingerprint (and a header that says so) a mismatch naming both sequences:
 * both fail with ZC_MISMATCH, and write no result. */
void hostile_stale_flagged_line_is_never_taken(void) {
    for (int how = 1; how <= 2; how++) {
        hx_group g;
        zc_status st[2];
        float out0[HX_LL_COUNT], none[HX_LL_COUNT];
        hx_open(&g);
        hx_ll_seq = 9, hx_ll_line = 5, hx_ll_how = how;
        hx_ll_run(&g, 9, st, out0);
        const char *t = zc_comm_error_text(g.c[0]);
        ZT_CHECK_ST(st[0], ZC_MISMATCH);
        if (how == 1) {
            if (!strstr(t, "line 5 of the message from rank 1 is an older message's (a stale"))
                printf("    %s\n", t);
            ZT_CHECK(strstr(t, "line 5 of the message from rank 1 is an older message's (a "
                               "stale") != NULL);
        } else {
            if (!strstr(t, "sequence 9") || !strstr(t, "its sequence 8")) printf("    %s\n", t);
            ZT_CHECK(strstr(t, "sequence 9") != NULL && strstr(t, "its sequence 8") != NULL);
        }
        memset(none, 0x5A, sizeof none);
        ZT_CHECK(memcmp(out0, none, sizeof none) == 0);
        hx_close(&g);
    }
}

/* Flags carry the low 32 bits of a message's number: with every channel's numbers and the
 * call sequence started just below 2^32 (the test hook), 64 calls of every size of flagged
 * line across the crossing on the 4-slot ring give the right sums; then a torn last line past
 * the crossing is still never taken: there a failed check of the last line may be a line left
 * 2^32 messages before whose tag looks current, so it reads as "not there yet" and the call
 * ends at its deadline. */
void hostile_flagged_line_tags_cross_2_to_the_32(void) {
    hx_group g;
    hx_open_for(&g, 300000000ull);
    const uint64_t base = (1ull << 32) - 32u;
    for (uint32_t r = 0; r < 2; r++) zc__test_numbers(g.c[r], base, base + 8u);
    static int32_t in[2][448], out[2][448];
    zc__test_lines_max = 4096;
    for (uint32_t call = 0; call < 64; call++) {
        uint32_t count = 3u + call * 7u; /* 12 .. 1,776 bytes */
        zc_req q[2];
        for (uint32_t r = 0; r < 2; r++)
            for (uint32_t i = 0; i < count; i++) in[r][i] = (int32_t)(call * 7919u + i * 31u + r);
        for (uint32_t r = 0; r < 2; r++)
            ZT_CHECK_ST(zc_allreduce(g.c[r], in[r], out[r], count, ZC_INT32, ZC_SUM, &q[r]),
                        ZC_OK);
        for (uint32_t r = 0; r < 2; r++) ZT_CHECK_ST(zc_wait(g.c[r], &q[r]), ZC_OK);
        for (uint32_t r = 0; r < 2; r++)
            for (uint32_t i = 0; i < count; i++) ZT_CHECK_EQ(out[r][i], in[0][i] + in[1][i]);
    }
    ZT_CHECK(g.c[0]->chans[1].tx_count > (1ull << 32) && g.c[0]->seq > (1ull << 32));
    zc_status st[2];
    float out0[HX_LL_COUNT], none[HX_LL_COUNT];
    hx_ll_seq = g.c[0]->seq + 9u, hx_ll_line = HX_LL_LINES - 1u, hx_ll_how = 0;
    memset(hx_ll_old, 0, sizeof hx_ll_old);
    hx_ll_run(&g, 9, st, out0);
    ZT_CHECK_ST(st[0], ZC_TIMED_OUT);
    memset(none, 0x5A, sizeof none);
    ZT_CHECK(memcmp(out0, none, sizeof none) == 0);
    hx_close(&g);
}
