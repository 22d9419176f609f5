/* fuzz_ready.c: the decoders of what a peer says about memory (core/sym.c's ready messages,
 * core/sched.c's placement ready messages, core/sched_put.c's READY, core/gpu_mem.c's landing
 * records, core/progress.c's failure-report word) against a peer that says anything. The first
 * input byte picks the decoder, the next ones are what the peer wrote:
 *   0, 1  two in-process ranks run an all_gather (0) or a send to rank 1 (1) in their
 *         symmetric regions; after rank 0 has published its ready message to rank 1, its 16
 *         bytes {send offset, recv offset} are replaced by input bytes. Rank 1 must fail with
 *         ZC_MISMATCH and a sentence naming rank 0 exactly when an offset puts a buffer the call
 *         addresses outside the region, and both ranks must finish (ZC_OK, or the failure)
 *         otherwise; nothing past an arena's end is written (a guard checks, ASan watches);
 *   2     a failure-report word written into both windows: a barrier then fails on both ranks
 *         with a sentence (the word 0 is none: both succeed), never an assertion;
 *   3     a landing record from rank 1: taken exactly when it states a reason, or a landing
 *         whose every byte lies below the top of the address space under a 32-bit key;
 *   4, 5  a placement ready message (4) or a direct-path READY (5) from rank 1 for an
 *         all_gather of a count the input picks: taken exactly when its address (0 is "none"
 *         for placement only) plus the bytes the call puts there does not wrap and its key has
 *         32 bits.
 * Every refusal fails the communicator with a sentence that names the rank. */
#include "fake_plat.h"

#include "device.h" /* the landing records, and engine.h */
#include "zcoll.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

#define FZ_REGION (256u << 10)    /* each rank's symmetric region */
#define FZ_COUNT (8192u)          /* int64 per rank: ZC_SYM_MIN_BYTES */
#define FZ_GUARD 4096u
#define FZ_GUARD_BYTE 0xC3u

static void *fz_arenas[2];
static size_t fz_bytes;

static void fz_open(zc_comm *c[2]) {
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.nranks = 2;
    cfg.transport = ZC_TRANSPORT_INPROC;
    cfg.timeout_ns = 50000000ull; /* the fake clock runs 1 ms a read: a stall ends soon */
    cfg.sym_bytes = FZ_REGION;
    if (!fz_arenas[0]) {
        fz_bytes = (zc_comm_arena_bytes(&cfg) + 63u) / 64u * 64u;
        for (int r = 0; r < 2; r++) fz_arenas[r] = aligned_alloc(64, fz_bytes + FZ_GUARD);
    }
    for (int r = 0; r < 2; r++) memset((uint8_t *)fz_arenas[r] + fz_bytes, FZ_GUARD_BYTE, FZ_GUARD);
    if (zc_comm_init_inproc(&cfg, fz_arenas, fz_bytes, c) != ZC_OK) abort();
}

static void fz_close(zc_comm *c[2]) {
    for (int r = 0; r < 2; r++) {
        zc_comm_fini(c[r]);
        const uint8_t *g = (const uint8_t *)fz_arenas[r] + fz_bytes;
        for (size_t i = 0; i < FZ_GUARD; i++)
            if (g[i] != FZ_GUARD_BYTE) abort(); /* written past the arena */
    }
}

static uint64_t fz_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Both ranks' calls to the end (bounded passes: the deadline ends any stall). */
static void fz_drive(zc_comm *c[2], zc_req q[2], zc_status st[2]) {
    for (int pass = 0; pass < 100000 && (st[0] == ZC_IN_PROGRESS || st[1] == ZC_IN_PROGRESS);
         pass++)
        for (int r = 0; r < 2; r++)
            if (st[r] == ZC_IN_PROGRESS) {
                (void)zc_progress(c[r]);
                st[r] = zc_test(c[r], &q[r]);
            }
    for (int r = 0; r < 2; r++) {
        if (st[r] == ZC_IN_PROGRESS) abort(); /* a hang: the deadline must have ended it */
        if (st[r] != ZC_OK && !zc_comm_error_text(c[r])[0]) abort();
    }
}

/* Modes 0 and 1: a forged symmetric ready message from rank 0 to rank 1. */
static void fz_sym(const uint8_t *in, bool p2p) {
    zc_comm *c[2];
    zc_req q[2];
    zc_status st[2] = {ZC_IN_PROGRESS, ZC_IN_PROGRESS};
    int64_t *send[2], *recv[2];
    fz_open(c);
    for (int r = 0; r < 2; r++)
        if (zc_sym_alloc(c[r], FZ_COUNT * 8u, (void **)&send[r]) != ZC_OK ||
            zc_sym_alloc(c[r], 2u * FZ_COUNT * 8u, (void **)&recv[r]) != ZC_OK)
            abort();
    if ((p2p ? zc_send(c[0], send[0], FZ_COUNT, ZC_INT64, 1, &q[0])
             : zc_allgather(c[0], send[0], recv[0], FZ_COUNT, ZC_INT64, &q[0])) != ZC_OK)
        abort();
    for (int i = 0; i < 4; i++) (void)zc_progress(c[0]); /* rank 0 publishes its ready */
    uint32_t lane = p2p ? 1u : 0u;
    uint8_t *h = (uint8_t *)(uintptr_t)c[1]->wire->rx_slot(c[1]->wire_state, lane, 0, 0, 1, 0);
    if (!h) abort();
    memcpy(h + ZC_SLOT_HDR_BYTES, in, 16); /* the 16-byte payload follows the header */
    if ((p2p ? zc_recv(c[1], recv[1], FZ_COUNT, ZC_INT64, 0, &q[1])
             : zc_allgather(c[1], send[1], recv[1], FZ_COUNT, ZC_INT64, &q[1])) != ZC_OK)
        abort();
    fz_drive(c, q, st);
    uint64_t so = fz_u64(in), ro = fz_u64(in + 8), blk = FZ_COUNT * 8u;
    bool fits = zc__span_in(so, blk, FZ_REGION) && (p2p || zc__span_in(ro, 2u * blk, FZ_REGION));
    if (fits != (st[1] == ZC_OK)) abort();
    if (!fits && (st[1] != ZC_MISMATCH ||
                  !strstr(zc_comm_error_text(c[1]), "rank 0 sent a ready message")))
        abort();
    fz_close(c);
}

/* Mode 2: a failure-report word in both windows. */
static void fz_alarm(uint64_t word) {
    zc_comm *c[2];
    zc_req q[2];
    zc_status st[2] = {ZC_IN_PROGRESS, ZC_IN_PROGRESS};
    fz_open(c);
    c[1]->wire->alarm(c[1]->wire_state, word);
    for (int r = 0; r < 2; r++) {
        zc_status s = zc_barrier(c[r], &q[r]);
        if (s != ZC_OK) st[r] = s;
    }
    fz_drive(c, q, st);
    if ((word == 0) != (st[0] == ZC_OK && st[1] == ZC_OK)) abort();
    fz_close(c);
}

/* Mode 3: a landing record from rank 1: its address, key, area size and reason from the input
 * (the record's other fields are the device identity of the ipc path, not read here). */
static void fz_landing(const uint8_t *in) {
    zc_comm *c[2];
    zc__gpu_peer rec = {.addr = fz_u64(in), .rkey = fz_u64(in + 8), .area = fz_u64(in + 16)};
    memcpy(&rec.no, in + 24, sizeof rec.no);
    fz_open(c);
    uint64_t slots = 2u * c[0]->cfg.slots * (uint64_t)c[0]->cfg.slot_bytes;
    bool span = rec.area <= (UINT64_MAX - slots) / 2u &&
                zc__span_in(rec.addr, 2u * rec.area + slots, UINT64_MAX);
    bool good = rec.no <= ZC_LAND_SMALL &&
                (rec.no != ZC_LAND_OK || (rec.addr && rec.area && span && rec.rkey <= UINT32_MAX));
    c[0]->err[0] = '\0';
    if (zc__land_take(c[0], 1, &rec) != good) abort();
    if (!good && !strstr(c[0]->err, "rank 1 sent a landing record")) abort();
    fz_close(c);
}

/* Modes 4 and 5: a placement ready message or a direct-path READY from rank 1. */
static void fz_ready(const uint8_t *in, bool put) {
    zc_comm *c[2];
    fz_open(c);
    zc__req *r = &c[0]->reqs[0];
    uint64_t count = 1u + fz_u64(in + 16) % (1ull << 40), raddr = fz_u64(in), rkey = fz_u64(in + 8);
    r->s = (zc__sched){.kind = ZC_K_ALLGATHER, .alg = ZC_ALG_DIRECT, .dtype = ZC_INT64,
                       .esize = 8, .chunk = 512, .count = count};
    uint64_t bytes = count * 8u * (put ? 2u : 1u); /* put: rank 1's whole recv */
    bool good = put ? raddr && zc__span_in(raddr, bytes, UINT64_MAX) && rkey <= UINT32_MAX
                    : !raddr || (zc__span_in(raddr, bytes, UINT64_MAX) && rkey <= UINT32_MAX);
    bool took = put ? zc__put_take_ready(c[0], r, 1, in) : zc__place_take(c[0], r, 1, in);
    if (took != good) abort();
    if (took && (r->pl[1].raddr != raddr || r->pl[1].rkey != rkey)) abort();
    if (!took && !strstr(zc_comm_error_text(c[0]), "rank 1 sent a")) abort();
    fz_close(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
    uint8_t in[32] = {0};
    if (len < 1) return 0;
    memcpy(in, data + 1, len - 1 < sizeof in ? len - 1 : sizeof in);
    fp_install();
    switch (data[0] % 6u) {
    case 0: fz_sym(in, false); break;
    case 1: fz_sym(in, true); break;
    case 2: fz_alarm(fz_u64(in)); break;
    case 3: fz_landing(in); break;
    case 4: fz_ready(in, false); break;
    default: fz_ready(in, true); break;
    }
    return 0;
}
