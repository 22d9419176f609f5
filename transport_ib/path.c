/* path.c: transport_ib's data path. post writes a staging slot (header + payload) into the peer's
 * inbound slot with one RDMA WRITE WITH IMM; arrivals are receive completions whose immediate
 * (layout in ib.h) is checked against the sequence expected on that queue pair before the slot is
 * marked arrived; credits are 8-byte RDMA writes of a checked record of a monotonic count into the
 * peer's credit line; the alarm is a compare-and-swap (or a write, on devices without atomics)
 * into every peer's alarm word; a clean close writes a checked mark (the collectives finished)
 * into the next word of that credit line. Any error completion, failed post or out-of-sequence
 * arrival loses that peer for good (peer_alive says how). While the core asks about a peer's
 * liveness, one probe write to it stays in flight, so that a peer that died on another host shows
 * as soon as the queue pair's retries run out. A put is a plain RDMA WRITE into the peer's
 * registered memory on the queue pair of the message it precedes (an RC queue pair executes writes
 * in order, so the message's completion at the receiver means the put's data is in place); from
 * the caller's registered memory it is always signalled, so put_done can tell when the source may
 * change again.
 * Must not: block (every poll takes at most one batch of completions), or allocate.
 *
 * Everything here is per connection: a peer named by rank (the ops' argument) is its index i
 * in the connection table (g.conn), which indexes the state, the staging and this rank's
 * window; in the peer's window this rank is the index the peer's blob named (peer->back).
 *
 * Send queue accounting: request w of a queue pair is signalled when w % signal_every is
 * signal_every - 1; a polled completion of w finishes every request up to w. A request is
 * only posted while fewer than sq_depth are unfinished (one poll is tried when full; still
 * full, post and put return ZC_AGAIN and the core tries the same again later). A credit
 * that finds its queue full waits in credit_want and goes with the next poll. */
#include "ib.h"

/* The connection index of rank peer (the core names connected ranks only). */
static uint32_t zc_ci(const zc_ib *s, uint32_t peer) { return s->g.conn[peer]; }

static uint8_t *zc_staging(const zc_ib *s, uint32_t lane, uint32_t i, uint32_t slot) {
    size_t ring = (size_t)lane * s->g.nconn + i;
    return s->loc + (ring * s->g.slots + slot) * s->g.stride;
}

/* The posted word that send request w of queue pair (i, j) uses. */
static uint64_t *zc_word(const zc_ib *s, uint32_t i, uint32_t j, uint64_t w) {
    uint64_t *words = (uint64_t *)(void *)(s->loc + s->words_off);
    return words + ((size_t)i * s->qps + j) * s->sq_depth + w % s->sq_depth;
}

/* Where connection i's credit record of lane is in this rank's window. */
static uint64_t zc_credit_off(const zc_ib *s, uint32_t lane, uint32_t i) {
    return zc__ib_credits_off() + ((uint64_t)lane * s->g.conn_cap + i) * 64u;
}

/* Where this rank's credit record of lane is in peer p's window. */
static uint64_t zc_credit_at(const zc_ib *s, const zc_ib_peer *p, uint32_t lane) {
    return p->window + zc__ib_credits_off() + ((uint64_t)lane * s->g.conn_cap + p->back) * 64u;
}

void zc__ib_lose(zc_ib *s, uint32_t i, const char *fmt, ...) {
    zc_ib_peer *p = &s->peers[i];
    if (p->lost) return;
    p->lost = ZC_PEER_LOST;
    va_list ap;
    va_start(ap, fmt);
    zc__vfmt(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
}

/* ---- completions ---------------------------------------------------------------------------- */

/* A data message arrived on queue pair j of connection peer: check its sequence, mark its
 * slot, and put back the receive it used (before its credit can be returned). */
static void zc_arrived(zc_ib *s, uint32_t peer, uint32_t j, uint32_t imm) {
    uint32_t lane = imm >> 30, slot = (imm >> 20) & 0x3ffu, seq = imm & ZC_IB_SEQ_MASK;
    if (lane >= zc_wire_lanes(&s->g)) {
        zc__ib_lose(s, peer, "ib: queue pair %u brought an immediate of unknown kind (0x%x)",
                    j, imm);
        return;
    }
    uint64_t *next = &s->rx_next[((size_t)lane * s->g.nconn + peer) * s->qps + j];
    uint64_t m = *next;
    uint32_t want_slot = (uint32_t)(m & (s->g.slots - 1u));
    if (((uint32_t)m & ZC_IB_SEQ_MASK) != seq || slot != want_slot) {
        zc__ib_lose(s, peer, "ib: message out of sequence on lane %u queue pair %u: the "
                    "immediate says sequence %u slot %u, expected sequence %u slot %u", lane,
                    j, seq, slot, (unsigned)(m & ZC_IB_SEQ_MASK), want_slot);
        return;
    }
    s->rx_tag[((size_t)lane * s->g.nconn + peer) * s->g.slots + slot] = m + 1u;
    *next = m + s->qps;
    zc_ib_qp *q = zc__ib_qp(s, peer, j);
    int e = zc__ib_post_recv(q->qp, zc__ib_wr_id(ZC_IB_WR_RECV, peer, j, 0));
    if (e) {
        char why[128];
        zc__ib_lose(s, peer, "ib: re-posting a receive on queue pair %u failed (%s)", j,
                    zc__ib_errno_text(e, why, sizeof why));
        return;
    }
    q->rq_out++;
}

static void zc_completed(zc_ib *s, const zc_ib_wc *c) {
    uint32_t peer = (uint32_t)(c->wr_id >> 40) & 0x3fffffu, j = (uint32_t)(c->wr_id >> 32) & 0xffu;
    uint64_t kind = c->wr_id & ZC_IB_WR_KIND;
    if (peer >= s->g.nconn || peer == s->self || j >= s->qps) return; /* not ours */
    zc_ib_qp *q = zc__ib_qp(s, peer, j);
    const char *what = kind == ZC_IB_WR_RECV ? "a receive" : "a write";
    if (kind == ZC_IB_WR_RECV) q->rq_out--;
    if (c->status) {
        zc__ib_lose(s, peer, "ib: %s on queue pair %u completed with \"%s\" (status %u, "
                    "vendor error 0x%x)", what, j, zc__ib_wc_text(c->status), c->status,
                    c->vendor_err);
    } else if (kind == ZC_IB_WR_RECV) {
        if (c->recv_imm) zc_arrived(s, peer, j, c->imm);
        else zc__ib_lose(s, peer, "ib: queue pair %u received something other than an RDMA "
                         "WRITE WITH IMM", j);
    } else {
        /* Request w finished, and with it every earlier one: w is the unfinished request
         * whose number has these low 32 bits. */
        uint64_t last = q->sq_posted - 1u;
        uint64_t w = last - (uint32_t)((uint32_t)last - (uint32_t)c->wr_id);
        if (w + 1u > q->sq_done) q->sq_done = w + 1u;
    }
}

/* One batch of completions, without posting anything but receives. */
static void zc_reap(zc_ib *s) {
    zc_ib_wc wc[ZC_IB_POLL_BATCH];
    if (!s->dev.cq) return;
    int n = zc__ib_poll_cq(&s->dev, wc, (int)ZC_IB_POLL_BATCH);
    if (n < 0) {
        for (uint32_t i = 0; i < s->g.nconn; i++)
            if (i != s->self)
                zc__ib_lose(s, i, "ib: polling the completion queue of %s failed",
                            s->dev.name);
        return;
    }
    for (int i = 0; i < n; i++) zc_completed(s, &wc[i]);
}

/* True when queue pair q can take one more send request (polls once when it looks full). */
static int zc_room(zc_ib *s, const zc_ib_qp *q) {
    if (q->sq_posted - q->sq_done < s->sq_depth) return 1;
    zc_reap(s);
    return q->sq_posted - q->sq_done < s->sq_depth;
}

static int zc_signal(const zc_ib *s, const zc_ib_qp *q) {
    return q->sq_posted % s->signal_every == s->signal_every - 1u;
}

/* ---- credits --------------------------------------------------------------------------------- */

/* Writes connection peer's pending credit of lane if any; 0 when it has to wait for
 * send-queue room. */
static int zc_send_credit(zc_ib *s, uint32_t lane, uint32_t peer) {
    zc_ib_peer *p = &s->peers[peer];
    if (p->lost || p->credit_want[lane] == p->credit_sent[lane]) return 1;
    uint32_t j = lane % s->qps;
    zc_ib_qp *q = zc__ib_qp(s, peer, j);
    if (!zc_room(s, q)) return 0;
    uint64_t *w = zc_word(s, peer, j, q->sq_posted);
    *w = zc__ib_credit_record(p->credit_want[lane]);
    int e = zc__ib_post_write(q->qp, zc__ib_wr_id(ZC_IB_WR_SEND, peer, j, q->sq_posted),
                              zc_signal(s, q), w, s->dev.loc_lkey, 8u,
                              zc_credit_at(s, p, lane), p->rkey, 0, 0);
    if (e) {
        char why[128];
        zc__ib_lose(s, peer, "ib: posting a credit write failed (%s)",
                    zc__ib_errno_text(e, why, sizeof why));
        return 1;
    }
    q->sq_posted++;
    p->credit_sent[lane] = p->credit_want[lane];
    return 1;
}

static void zc_send_backlog(zc_ib *s) {
    s->credit_backlog = 0;
    for (uint32_t i = 0; i < s->g.nconn; i++)
        for (uint32_t lane = 0; lane < zc_wire_lanes(&s->g) && i != s->self; lane++)
            if (!zc_send_credit(s, lane, i)) s->credit_backlog = 1;
}

void zc__ib_poll(zc_ib *s) {
    zc_reap(s);
    if (s->credit_backlog) zc_send_backlog(s);
}

void zc__ib_credit(void *state, uint32_t lane, uint32_t peer, uint64_t consumed) {
    zc_ib *s = state;
    uint32_t i = zc_ci(s, peer);
    zc_ib_peer *p = &s->peers[i];
    if (consumed > p->credit_want[lane]) p->credit_want[lane] = consumed;
    if (!zc_send_credit(s, lane, i)) s->credit_backlog = 1;
}

uint64_t zc__ib_credits(void *state, uint32_t lane, uint32_t peer) {
    zc_ib *s = state;
    uint32_t i = zc_ci(s, peer);
    zc_ib_peer *p = &s->peers[i];
    zc__ib_poll(s);
    uint64_t rec = __atomic_load_n((uint64_t *)(void *)(s->win + zc_credit_off(s, lane, i)),
                                   __ATOMIC_ACQUIRE);
    uint32_t low = (uint32_t)rec;
    /* Not written yet, or caught half written: the last good count stands. The count moves
     * by at most slots between two reads, so its low 32 bits widen without doubt. */
    if (rec != zc__ib_credit_record(low)) return p->credit_seen[lane];
    p->credit_seen[lane] += (uint32_t)(low - (uint32_t)p->credit_seen[lane]);
    return p->credit_seen[lane];
}

/* ---- messages -------------------------------------------------------------------------------- */

void *zc__ib_tx_slot(void *state, uint32_t lane, uint32_t peer, uint32_t slot) {
    return zc_staging(state, lane, zc_ci(state, peer), slot);
}

zc_status zc__ib_post(void *state, uint32_t lane, uint32_t rank, uint32_t slot, size_t bytes,
                      uint64_t tag) {
    zc_ib *s = state;
    uint32_t peer = zc_ci(s, rank);
    zc_ib_peer *p = &s->peers[peer];
    if (p->lost) return (zc_status)p->lost;
    uint8_t *src = zc_staging(s, lane, peer, slot);
    __builtin_memcpy(src + ZC_SLOT_HDR_BYTES - 8u, &tag, sizeof tag); /* as shm: the tag last */
    uint64_t m = tag - 1u;
    if ((m & (s->g.slots - 1u)) != slot || bytes > s->g.stride)
        zc_plat_panic(__FILE__, __LINE__, "message m goes to slot m % slots, within a stride");
    uint32_t j = (uint32_t)(m % s->qps);
    zc_ib_qp *q = zc__ib_qp(s, peer, j);
    if (!zc_room(s, q)) return p->lost ? (zc_status)p->lost : ZC_AGAIN;
    if (p->lost) return (zc_status)p->lost; /* the poll in zc_room may have found it gone */
    uint64_t raddr = p->ring[lane] + (uint64_t)slot * s->g.stride;
    uint32_t imm = lane << 30 | slot << 20 | ((uint32_t)m & ZC_IB_SEQ_MASK);
    int e = zc__ib_post_write(q->qp, zc__ib_wr_id(ZC_IB_WR_SEND, peer, j, q->sq_posted),
                              zc_signal(s, q), src, s->dev.loc_lkey, (uint32_t)bytes, raddr,
                              p->rkey, 1, imm);
    if (e) {
        char why[128];
        zc__ib_lose(s, peer, "ib: posting a write on queue pair %u failed (%s)", j,
                    zc__ib_errno_text(e, why, sizeof why));
        return ZC_PEER_LOST;
    }
    q->sq_posted++;
    if (tag > p->sent[lane]) p->sent[lane] = tag; /* tag = message number + 1 */
    return ZC_OK;
}

zc_status zc__ib_put(void *state, uint32_t lane, uint32_t rank, uint32_t slot, uint64_t tag,
                     const void *src, const zc_wire_mr *mr, size_t bytes, uint64_t raddr,
                     uint64_t rkey) {
    zc_ib *s = state;
    uint32_t peer = zc_ci(s, rank);
    zc_ib_peer *p = &s->peers[peer];
    if (p->lost) return (zc_status)p->lost;
    uint64_t m = tag - 1u;
    if ((m & (s->g.slots - 1u)) != slot || bytes > UINT32_MAX ||
        (!mr && bytes > s->g.slot_bytes))
        zc_plat_panic(__FILE__, __LINE__, "a put precedes message m in slot m % slots; staged "
                      "puts fit a slot");
    uint32_t j = (uint32_t)(m % s->qps);
    zc_ib_qp *q = zc__ib_qp(s, peer, j);
    if (!zc_room(s, q)) return p->lost ? (zc_status)p->lost : ZC_AGAIN;
    if (p->lost) return (zc_status)p->lost;
    const void *from = src;
    uint32_t lkey;
    if (mr) {
        lkey = (uint32_t)mr->lkey;
    } else { /* the slot's staging payload: free until this slot's message is consumed */
        uint8_t *stage = zc_staging(s, lane, peer, slot) + ZC_SLOT_HDR_BYTES;
        __builtin_memcpy(stage, src, bytes);
        from = stage;
        lkey = s->dev.loc_lkey;
    }
    int e = zc__ib_post_write(q->qp, zc__ib_wr_id(ZC_IB_WR_SEND, peer, j, q->sq_posted),
                              mr ? 1 : zc_signal(s, q), from, lkey, (uint32_t)bytes, raddr,
                              (uint32_t)rkey, 0, 0);
    if (e) {
        char why[128];
        zc__ib_lose(s, peer, "ib: posting a put on queue pair %u failed (%s)", j,
                    zc__ib_errno_text(e, why, sizeof why));
        return ZC_PEER_LOST;
    }
    if (mr) p->put_wr[j] = q->sq_posted + 1u;
    q->sq_posted++;
    return ZC_OK;
}

bool zc__ib_put_done(void *state, uint32_t rank) {
    zc_ib *s = state;
    uint32_t peer = zc_ci(s, rank);
    zc_ib_peer *p = &s->peers[peer];
    for (int pass = 0; pass < 2; pass++) {
        uint32_t j = 0;
        while (j < s->qps && p->put_wr[j] <= zc__ib_qp(s, peer, j)->sq_done) j++;
        /* A lost peer's queue pairs are in error: nothing reads the source any more. */
        if (j == s->qps || p->lost) return true;
        if (pass == 0) zc_reap(s);
    }
    return false;
}

const void *zc__ib_rx_slot(void *state, uint32_t lane, uint32_t rank, uint32_t slot,
                           uint64_t tag, uint32_t lines) {
    (void)lines; /* the NIC writes the slot: the completion says when, no prefetch helps */
    zc_ib *s = state;
    uint32_t peer = zc_ci(s, rank);
    const uint64_t *have = &s->rx_tag[((size_t)lane * s->g.nconn + peer) * s->g.slots + slot];
    if (*have != tag) {
        zc__ib_poll(s);
        if (*have != tag) return 0;
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE); /* the completion came first: the data is there */
    size_t ring = (size_t)lane * s->g.nconn + peer;
    const uint8_t *in = s->win + zc__ib_rings_off(&s->g) + (ring * s->g.slots + slot) * s->g.stride;
    uint64_t written;
    __builtin_memcpy(&written, in + ZC_SLOT_HDR_BYTES - 8u, sizeof written);
    if (written != tag) {
        zc__ib_lose(s, peer, "ib: slot %u of lane %u says tag %llu, its completion said %llu",
                    slot, lane, (unsigned long long)written, (unsigned long long)tag);
        return 0;
    }
    return in;
}

/* ---- alarm and liveness ---------------------------------------------------------------------- */

void zc__ib_alarm(void *state, uint64_t word) {
    zc_ib *s = state;
    uint64_t none = 0;
    if (s->win)
        __atomic_compare_exchange_n((uint64_t *)(void *)(s->win + zc__ib_alarm_off()), &none,
                                    word, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    for (uint32_t peer = 0; peer < s->g.nconn && s->attached; peer++) {
        zc_ib_peer *p = &s->peers[peer];
        zc_ib_qp *q = zc__ib_qp(s, peer, 0);
        if (peer == s->self || p->lost || !zc_room(s, q)) continue; /* best effort */
        uint64_t *w = zc_word(s, peer, 0, q->sq_posted), id;
        id = zc__ib_wr_id(ZC_IB_WR_SEND, peer, 0, q->sq_posted);
        uint64_t raddr = p->window + zc__ib_alarm_off();
        int e;
        if (s->dev.atomics) {
            e = zc__ib_post_cas(q->qp, id, zc_signal(s, q), w, s->dev.loc_lkey, raddr, p->rkey,
                                word);
        } else {
            *w = word;
            e = zc__ib_post_write(q->qp, id, zc_signal(s, q), w, s->dev.loc_lkey, 8u, raddr,
                                  p->rkey, 0, 0);
        }
        if (!e) q->sq_posted++;
    }
}

uint64_t zc__ib_alarmed(void *state) {
    zc_ib *s = state;
    if (!s->win) return 0;
    return __atomic_load_n((uint64_t *)(void *)(s->win + zc__ib_alarm_off()), __ATOMIC_ACQUIRE);
}

/* Posts a signalled 8-byte write of value to raddr in connection i's window on its queue pair
 * 0, which has room: 1 + the send request's number, or 0 when the post failed, which loses
 * the peer (what names the write in the sentence). */
static uint64_t zc_write_word(zc_ib *s, uint32_t i, uint64_t value, uint64_t raddr,
                              const char *what) {
    zc_ib_qp *q = zc__ib_qp(s, i, 0);
    uint64_t *w = zc_word(s, i, 0, q->sq_posted);
    *w = value;
    int e = zc__ib_post_write(q->qp, zc__ib_wr_id(ZC_IB_WR_SEND, i, 0, q->sq_posted), 1, w,
                              s->dev.loc_lkey, 8u, raddr, s->peers[i].rkey, 0, 0);
    if (e) {
        char why[128];
        zc__ib_lose(s, i, "ib: posting %s failed (%s)", what,
                    zc__ib_errno_text(e, why, sizeof why));
        return 0;
    }
    return ++q->sq_posted;
}

/* A dead peer only shows when a write to it runs out of retries, and a rank that waits on
 * it may have nothing to write: so while the core asks (a stalled request, every 50 ms),
 * keep one signalled probe in flight towards it, a rewrite of the last credit record sent on
 * lane 0 (same queue pair as every lane-0 credit, so it never overtakes a newer one). */
static void zc_probe(zc_ib *s, uint32_t peer) {
    zc_ib_peer *p = &s->peers[peer];
    zc_ib_qp *q = zc__ib_qp(s, peer, 0);
    if (!s->attached || peer == s->self || p->lost || (p->probe && p->probe > q->sq_done) ||
        !zc_room(s, q))
        return;
    p->probe = zc_write_word(s, peer, zc__ib_credit_record(p->credit_sent[0]),
                             zc_credit_at(s, p, 0), "a liveness probe");
}

void zc__ib_watch_process(zc_ib *s, uint32_t i) {
    zc_ib_peer *p = &s->peers[i];
    if (!p->lost && p->pid && p->host == s->host &&
        zc_plat_process_alive(p->pid) == ZC_PLAT_NOT_FOUND)
        zc__ib_lose(s, i, "ib: the peer's process (pid %llu on this host) has exited",
                    (unsigned long long)p->pid);
}

zc_status zc__ib_peer_alive(void *state, uint32_t rank, char *err, size_t cap) {
    zc_ib *s = state;
    uint32_t peer = zc_ci(s, rank);
    if (peer == ZC_NO_PEER) return ZC_OK; /* not a connection: nothing to watch here */
    zc_ib_peer *p = &s->peers[peer];
    zc__ib_poll(s);
    /* On one host the peer's process is watched too (as shm does): that is immediate. */
    zc__ib_watch_process(s, peer);
    zc_probe(s, peer);
    if (!p->lost) return ZC_OK;
    zc__fmt(err, cap, "%s", p->why);
    return (zc_status)p->lost;
}

/* ---- a clean close --------------------------------------------------------------------------- */

/* The clean-close mark: 1 + the collectives this rank finished (48 bits) under a 16-bit check
 * of them, so that a torn or stray word reads as no mark. It lands in word 1 of this rank's
 * lane-0 credit line in each peer's window (nothing else writes that word) and stays there
 * after this rank's process is gone: the peer reads it when it finds this rank lost. */
#define ZC_IB_MARK_BITS 48u
static uint64_t zc_mark_record(uint64_t v) {
    uint64_t h = (v ^ 0x2545f4914f6cdd1dull) * 0x9e3779b97f4a7c15ull;
    return (h >> 48) << ZC_IB_MARK_BITS | v;
}

/* Writes the mark to every live peer on queue pair 0 (after every lane-0 credit), signalled:
 * close's flush waits for its completion as for the credits (bounded the same). A count that
 * does not fit 48 bits sends none (the exit then reads as a loss, as without a mark). */
void zc__ib_closing(void *state, uint64_t seqs) {
    zc_ib *s = state;
    if (!s->attached || seqs + 1u >= 1ull << ZC_IB_MARK_BITS) return;
    for (uint32_t i = 0; i < s->g.nconn; i++) {
        zc_ib_peer *p = &s->peers[i];
        zc_ib_qp *q = zc__ib_qp(s, i, 0);
        if (i == s->self || p->lost || !zc_room(s, q)) continue; /* no room: no mark */
        p->mark = zc_write_word(s, i, zc_mark_record(seqs + 1u), zc_credit_at(s, p, 0) + 8u,
                                "the close mark");
    }
}

uint64_t zc__ib_closed_after(void *state, uint32_t rank) {
    const zc_ib *s = state;
    uint32_t i = zc_ci(s, rank);
    if (!s->win || i == ZC_NO_PEER || i == s->self) return 0;
    uint64_t rec = __atomic_load_n((const uint64_t *)(const void *)(s->win +
                                   zc_credit_off(s, 0, i) + 8u), __ATOMIC_ACQUIRE);
    uint64_t v = rec & ((1ull << ZC_IB_MARK_BITS) - 1u);
    return v && rec == zc_mark_record(v) ? v : 0;
}
