/* fuzz_header.c: the receive path's fingerprint check (core/channel.c) against corrupted slot
 * headers. Two in-process ranks run one call (the first input bytes pick collective, dtype,
 * op, count and root); after rank 0 has published its messages to rank 1, the rest of the
 * input is XORed into the first message's 56-byte header (the wire's tag stays, so the
 * message has arrived). Then rank 1 runs its call. A corruption of any fingerprint field
 * (everything before `placed`) must give rank 1 ZC_MISMATCH with a sentence; one of the
 * padding alone must change nothing (ZC_OK on both ranks, the reference result; where the
 * payload fits ZC_INLINE_BYTES the `inl` bytes are the payload, whose corruption no header
 * check sees, as with any payload byte: rank 1's values are then not compared); a changed
 * `placed` may fail the call with a sentence (a stream claimed to be in place that was not
 * offered) or not matter. A message carried by flagged lines (9 B..ZC_LINES_MAX_BYTES) is taken
 * from its lines, whose checks carry the fingerprint; its header is read only when a line fails
 * its check, so a corrupted header must change nothing there. Never a crash, a hang (bounded passes) or a wrong result reported as
 * success. */
#include "fake_plat.h"

#include "engine.h"
#include "zcoll.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

/* True when flip (n bytes XORed from the header's start) changes a byte in [from, to). */
static bool fz_touches(const uint8_t *flip, size_t n, size_t from, size_t to) {
    for (size_t i = from; i < n && i < to; i++)
        if (flip[i]) return true;
    return false;
}

#define FZ_MAX 64

static void fz_fill(int64_t *v, size_t n, uint32_t rank) {
    for (size_t i = 0; i < n; i++) v[i] = (int64_t)(rank + 1u) * 1000 + (int64_t)i;
}

/* Rank r's call: an allreduce, a broadcast from root or an allgather of count int64s. */
static zc_status fz_issue(zc_comm *c, uint32_t kind, size_t count, uint32_t root,
                          const int64_t *s, int64_t *d, zc_req *req) {
    if (kind == 0) return zc_allreduce(c, s, d, count, ZC_INT64, ZC_SUM, req);
    if (kind == 1) {
        if (zc_comm_rank(c) == root) memcpy(d, s, count * sizeof *s);
        return zc_broadcast(c, d, d, count, ZC_INT64, root, req);
    }
    return zc_allgather(c, s, d, count, ZC_INT64, req);
}

static void fz_expect(uint32_t kind, size_t count, uint32_t root, int64_t *want) {
    int64_t in[2][FZ_MAX];
    fz_fill(in[0], count, 0);
    fz_fill(in[1], count, 1);
    for (size_t i = 0; i < count; i++) {
        if (kind == 0) want[i] = in[0][i] + in[1][i];
        else if (kind == 1) want[i] = in[root][i];
    }
    if (kind == 2) {
        memcpy(want, in[0], count * sizeof *want);
        memcpy(want + count, in[1], count * sizeof *want);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
    if (len < 2) return 0;
    fp_install();
    uint32_t kind = data[0] % 3u, root = (data[0] >> 2) & 1u;
    size_t count = 1 + data[1] % FZ_MAX;
    const uint8_t *flip = data + 2;
    size_t nflip = len - 2 < ZC_SLOT_HDR_BYTES - 8u ? len - 2 : ZC_SLOT_HDR_BYTES - 8u;
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.nranks = 2;
    cfg.transport = ZC_TRANSPORT_INPROC;
    cfg.timeout_ns = 50000000ull; /* the fake clock runs 1 ms a read: a stall ends soon */
    size_t bytes = zc_comm_arena_bytes(&cfg);
    static void *arenas[2];
    if (!arenas[0]) {
        arenas[0] = aligned_alloc(64, (bytes + 63u) / 64u * 64u);
        arenas[1] = aligned_alloc(64, (bytes + 63u) / 64u * 64u);
    }
    zc_comm *c[2];
    if (zc_comm_init_inproc(&cfg, arenas, bytes, c) != ZC_OK) abort();
    int64_t s[2][FZ_MAX], d[2][2 * FZ_MAX], want[2 * FZ_MAX];
    memset(d, 0, sizeof d);
    fz_fill(s[0], count, 0);
    fz_fill(s[1], count, 1);
    fz_expect(kind, count, root, want);
    zc_req req[2];
    zc_status st[2] = {ZC_IN_PROGRESS, ZC_IN_PROGRESS};
    if (fz_issue(c[0], kind, count, root, s[0], d[0], &req[0]) != ZC_OK) abort();
    for (int i = 0; i < 4; i++) (void)zc_progress(c[0]); /* rank 0 publishes to rank 1 */
    /* The first message from rank 0 to rank 1 (lane 0, slot 0, tag 1), if it was sent. */
    uint8_t *h = (uint8_t *)(uintptr_t)c[1]->wire->rx_slot(c[1]->wire_state, 0, 0, 0, 1, 0);
    if (h)
        for (size_t i = 0; i < nflip; i++) h[i] ^= flip[i];
    if (fz_issue(c[1], kind, count, root, s[1], d[1], &req[1]) != ZC_OK) abort();
    for (int pass = 0; pass < 100000 && (st[0] == ZC_IN_PROGRESS || st[1] == ZC_IN_PROGRESS);
         pass++)
        for (int k = 0; k < 2; k++) {
            if (st[k] != ZC_IN_PROGRESS) continue;
            (void)zc_progress(c[k]);
            st[k] = zc_test(c[k], &req[k]);
        }
    size_t out = kind == 2 ? 2 * count : count;
    size_t placed = offsetof(zc__hdr, placed), inl = offsetof(zc__hdr, inl);
    bool payload_flipped = h && count * sizeof(int64_t) <= ZC_INLINE_BYTES &&
                           fz_touches(flip, nflip, inl, inl + ZC_INLINE_BYTES);
    size_t msg = count * sizeof(int64_t);
    bool by_lines = msg > ZC_INLINE_BYTES && msg <= ZC_LINES_MAX_BYTES;
    if (h && !by_lines && fz_touches(flip, nflip, 0, placed)) {
        if (st[1] != ZC_MISMATCH) abort(); /* a corrupted fingerprint went unnoticed */
    } else if (!h || by_lines || !fz_touches(flip, nflip, placed, placed + sizeof(uint32_t))) {
        if (st[0] != ZC_OK || st[1] != ZC_OK) abort(); /* padding only: nothing may change */
    }
    for (int k = 0; k < 2; k++) {
        if (st[k] == ZC_IN_PROGRESS) abort(); /* a hang: the deadline must have ended it */
        if (st[k] == ZC_OK && !(k == 1 && payload_flipped) &&
            memcmp(d[k], want, out * sizeof *want) != 0)
            abort();
        if (st[k] != ZC_OK && !zc_comm_error_text(c[k])[0]) abort();
    }
    zc_comm_fini(c[0]);
    zc_comm_fini(c[1]);
    return 0;
}
