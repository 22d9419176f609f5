/* shm.c: the intra-host wire. Every rank owns one inbound window: a shared-memory segment
 * mapped by all ranks of the communicator (processes), or a region of its arena (in-process
 * mode, where peers are in the same address space). A put is a store of header and payload
 * into the peer's window followed by a release-store of the tag; arrival is an acquire-load of
 * the tag. The sender's stores reach the receiver's window directly, in order, so the core may
 * send flagged lines (core/proto.h) that the receiver polls where rx_mem says they land.
 * Credits and the alarm word are single 8-byte stores into the peer's window.
 * Must not: allocate, or touch the OS except through platform.h at create/attach/seal/close.
 *
 * Window layout (64-byte lines): [0] header {magic, comm_id, rank, nranks, pid, slots,
 * stride, nconn}, [1] alarm word, then the window's connections (nconn ranks, ascending, of
 * conn_cap entries), credits[lane][connection] one line each, then rings[lane][connection]
 * [slot] of `stride` bytes each: sized for conn_cap connections, the same on every rank. A
 * rank writes into a peer's window at its own index in the peer's connections (read once at
 * attach). Its own ring entries are unused (kept for simple indexing), then the symmetric
 * region (cfg->sym_bytes, zc_sym_alloc), which peers read and write directly. */
#include "platform.h"
#include "wire.h"

#define ZC_SHM_MAGIC 0x7a6373686d303031ull /* "zcshm001" */
#define ZC_SHM_NAME_BYTES 48u

typedef struct zc_shm_head {
    uint64_t magic, comm_id;
    uint32_t rank, nranks;
    uint64_t pid;
    uint32_t slots, stride;
    uint32_t nconn, conn_cap;
    uint64_t closed; /* 0, or 1 + the collectives its rank had finished at a clean close */
    uint64_t pad_;
} zc_shm_head;
_Static_assert(sizeof(zc_shm_head) == 64, "window header is one line");

typedef struct zc_shm {
    zc_wire_geom g;           /* g.cfg is cleared after create */
    uint8_t *mine;            /* this rank's window */
    size_t bytes;             /* bytes of every window */
    size_t sym_off;           /* where the symmetric region starts in a window */
    uint64_t sym_bytes;       /* its bytes (0: none) */
    int mapped;               /* 1: windows are shared-memory mappings (process mode) */
    int sealed;               /* 1: peers can no longer open my segment */
    char name[ZC_SHM_NAME_BYTES]; /* my segment's label (zc-<comm id>-<rank>) */
    zc_plat_shm_ref ref;      /* what peers open my segment by, until sealed */
    /* Per connection (index as g.conn gives it): */
    uint8_t **peers;          /* [nconn] its window as seen here (mine for this rank) */
    uint32_t *back;           /* [nconn] this rank's index in its connections */
    /* [lanes * nconn] slot 0 of each (lane, connection) ring, found once at attach:
     * the one I write in the peer's window (tx), the one the peer writes in mine (rx). */
    uint8_t **tx, **rx;
    /* In the same line as the four above, which posts, credits and every pass read: */
    uint64_t *wake;           /* g.inproc_wake */
    const uint64_t *alarms;   /* g.inproc_alarms, or else this rank's alarm word: the word
                               * whose 0 says "no alarm" (zc_shm_alarmed) */
    uint64_t *pids;           /* [nconn] */
} zc_shm;
_Static_assert(__builtin_offsetof(zc_shm, alarms) / 64u == __builtin_offsetof(zc_shm, peers) / 64u,
               "the hot pointers share a line where the state is 64-byte aligned");

static size_t zc_shm_table_off(void) { return 128u; }
static size_t zc_shm_credits_off(const zc_wire_geom *g) {
    return zc_shm_table_off() + (((size_t)g->conn_cap * sizeof(uint32_t) + 63u) & ~(size_t)63u);
}
static size_t zc_shm_rings_off(const zc_wire_geom *g) {
    return zc_shm_credits_off(g) + (size_t)zc_wire_lanes(g) * g->conn_cap * 64u;
}

/* Where the symmetric region starts: after the rings (a multiple of 64). */
static size_t zc_shm_sym_off(const zc_wire_geom *g) {
    size_t ring = (size_t)g->slots * g->stride;
    return zc_shm_rings_off(g) + (size_t)zc_wire_lanes(g) * g->conn_cap * ring;
}

/* Every geometry handed to a wire names its configuration while sizes are computed. */
static size_t zc_shm_window_bytes(const zc_wire_geom *g) {
    return zc_shm_sym_off(g) + (size_t)(g->cfg ? g->cfg->sym_bytes : 0);
}

static size_t zc_shm_state_bytes(const zc_wire_geom *g) {
    size_t n = g->conn_cap;
    return sizeof(zc_shm) + n * (sizeof(uint8_t *) + sizeof(uint64_t) + sizeof(uint64_t)) +
           (size_t)2u * zc_wire_lanes(g) * n * sizeof(uint8_t *);
}

/* The slot of ring (lane, connection i of the window's owner) in window w. */
static uint8_t *zc_shm_slot(const zc_shm *s, uint8_t *w, uint32_t lane, uint32_t i,
                            uint32_t slot) {
    size_t ring = (size_t)lane * s->g.conn_cap + i;
    return w + zc_shm_rings_off(&s->g) + (ring * s->g.slots + slot) * s->g.stride;
}

static uint64_t *zc_shm_credit_word(const zc_shm *s, uint8_t *w, uint32_t lane, uint32_t i) {
    return (uint64_t *)(void *)(w + zc_shm_credits_off(&s->g) +
                                ((size_t)lane * s->g.conn_cap + i) * 64u);
}

/* Connection index of rank p here (p is one: the core names only connected peers). */
static uint32_t zc_shm_ci(const zc_shm *s, uint32_t p) { return s->g.conn[p]; }

static uint64_t *zc_shm_alarm_word(uint8_t *w) { return (uint64_t *)(void *)(w + 64); }

/* Decimal digits of v into buf (at least 21 bytes). */
static const char *zc_shm_decimal(char *buf, uint64_t v) {
    char digits[21];
    size_t d = 0, n = 0;
    do {
        digits[d++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    while (d) buf[n++] = digits[--d];
    buf[n] = '\0';
    return buf;
}

/* "/zc-<comm id in hex>-<rank>": the label of a rank's segment in diagnostics. */
static void zc_shm_name(char *buf, uint64_t comm_id, uint32_t rank) {
    static const char hex[] = "0123456789abcdef";
    const char *prefix = "/zc-";
    size_t n = 0;
    while (*prefix) buf[n++] = *prefix++;
    for (int i = 15; i >= 0; i--) buf[n++] = hex[(comm_id >> (4 * i)) & 15u];
    buf[n++] = '-';
    zc_shm_decimal(buf + n, rank);
}

static void zc_shm_err(char *err, size_t cap, const char *what, const char *name, size_t bytes,
                       zc_plat_rc rc) {
    char os[96], size[24];
    zc_plat_os_error_text(zc_plat_os_error(), os, sizeof os);
    /* No formatter in transports: assemble "shm: <what> <name> (<bytes> bytes): <rc> (<os>)". */
    const char *parts[] = {"shm: ", what, " ", name, " (", zc_shm_decimal(size, bytes),
                           " bytes): ", zc_plat_rc_name(rc), " (", os, ")"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        for (const char *p = parts[i]; *p && n + 1 < cap; p++) err[n++] = *p;
    if (cap) err[n] = '\0';
}

static zc_status zc_shm_status(zc_plat_rc rc) {
    return rc == ZC_PLAT_INVALID ? ZC_INVALID_ARG : ZC_SYSTEM;
}

/* Between processes every rank publishes its segment's platform ref; in-process windows are
 * handed over directly. */
static size_t zc_shm_addr_bytes(const zc_wire_geom *g) {
    return g->inproc_windows ? 0 : sizeof(zc_plat_shm_ref);
}

static zc_status zc_shm_create(void *state, const zc_wire_geom *g, void *window, void *blob,
                               char *err, size_t cap) {
    zc_shm *s = state;
    uint8_t *tail = (uint8_t *)(s + 1);
    __builtin_memset(s, 0, sizeof *s);
    s->g = *g;
    s->wake = g->inproc_wake;
    s->g.cfg = 0;
    s->bytes = zc_shm_window_bytes(g);
    s->sym_off = zc_shm_sym_off(g);
    s->sym_bytes = s->bytes - s->sym_off;
    size_t n = g->conn_cap;
    s->peers = (uint8_t **)(void *)tail;
    s->pids = (uint64_t *)(void *)(tail + n * sizeof(uint8_t *));
    s->back = (uint32_t *)(void *)(s->pids + n);
    s->tx = (uint8_t **)(void *)((uint64_t *)(void *)s->back + n);
    s->rx = s->tx + (size_t)zc_wire_lanes(g) * n;
    if (g->inproc_windows) {
        s->mine = window;
        __builtin_memset(s->mine, 0, s->bytes);
    } else {
        zc_shm_name(s->name, g->comm_id, g->rank);
        void *addr = 0;
        zc_plat_rc rc = zc_plat_shm_create(s->name, s->bytes, &addr, &s->ref);
        if (rc != ZC_PLAT_OK) {
            zc_shm_err(err, cap, "cannot create segment", s->name, s->bytes, rc);
            return zc_shm_status(rc);
        }
        __builtin_memcpy(blob, &s->ref, sizeof s->ref);
        s->mine = addr;
        s->mapped = 1;
    }
    zc_shm_head *h = (zc_shm_head *)(void *)s->mine;
    *h = (zc_shm_head){ZC_SHM_MAGIC, g->comm_id,  g->rank,  g->nranks, zc_plat_process_id(),
                       g->slots,     g->stride,   g->nconn, g->conn_cap, 0, 0};
    __builtin_memcpy(s->mine + zc_shm_table_off(), g->conn_peer, g->nconn * sizeof(uint32_t));
    s->alarms = g->inproc_alarms ? g->inproc_alarms : zc_shm_alarm_word(s->mine);
    return ZC_OK;
}

/* This rank's index among the connections of the window w (its table, nconn ranks ascending),
 * UINT32_MAX when it is not one. */
static uint32_t zc_shm_find(const zc_shm *s, const uint8_t *w) {
    const zc_shm_head *h = (const zc_shm_head *)(const void *)w;
    const uint32_t *t = (const uint32_t *)(const void *)(w + zc_shm_table_off());
    uint32_t lo = 0, hi = h->nconn <= s->g.conn_cap ? h->nconn : 0;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2u;
        if (t[mid] < s->g.rank) lo = mid + 1u;
        else hi = mid;
    }
    return lo < (h->nconn <= s->g.conn_cap ? h->nconn : 0) && t[lo] == s->g.rank ? lo
                                                                                 : UINT32_MAX;
}

/* Maps (processes: its reference is connection i's entry of addrs) or finds (in-process)
 * rank p = conn_peer[i]'s window into *w. */
static zc_status zc_shm_reach(zc_shm *s, const void *addrs, uint32_t i, uint8_t **w, char *err,
                              size_t cap) {
    uint32_t p = s->g.conn_peer[i];
    if (p == s->g.rank) {
        *w = s->mine;
        return ZC_OK;
    }
    if (s->g.inproc_windows) {
        *w = s->g.inproc_windows[p];
        return ZC_OK;
    }
    char name[ZC_SHM_NAME_BYTES];
    void *addr = 0;
    zc_plat_shm_ref ref;
    __builtin_memcpy(&ref, (const uint8_t *)addrs + (size_t)i * sizeof ref, sizeof ref);
    zc_shm_name(name, s->g.comm_id, p);
    zc_plat_rc rc = zc_plat_shm_open(&ref, s->bytes, &addr);
    if (rc != ZC_PLAT_OK) {
        zc_shm_err(err, cap, "cannot open peer segment", name, s->bytes, rc);
        return zc_shm_status(rc);
    }
    *w = addr;
    return ZC_OK;
}

static zc_status zc_shm_attach(void *state, const void *addrs, char *err, size_t cap) {
    zc_shm *s = state;
    for (uint32_t i = 0; i < s->g.nconn; i++) {
        uint32_t p = s->g.conn_peer[i];
        zc_status st = zc_shm_reach(s, addrs, i, &s->peers[i], err, cap);
        if (st != ZC_OK) return st;
        const zc_shm_head *h = (const zc_shm_head *)(const void *)s->peers[i];
        if (h->magic != ZC_SHM_MAGIC || h->comm_id != s->g.comm_id || h->rank != p ||
            h->nranks != s->g.nranks || h->slots != s->g.slots || h->stride != s->g.stride ||
            h->conn_cap != s->g.conn_cap) {
            zc_shm_err(err, cap, "peer window has another geometry or job", "", s->bytes,
                       ZC_PLAT_INVALID);
            return ZC_MISMATCH;
        }
        s->back[i] = zc_shm_find(s, s->peers[i]);
        if (s->back[i] == UINT32_MAX) {
            zc_shm_err(err, cap, "a peer's connections do not include this rank (its "
                       "configuration differs)", "", s->bytes, ZC_PLAT_INVALID);
            return ZC_MISMATCH;
        }
        s->pids[i] = h->pid;
        for (uint32_t lane = 0; lane < zc_wire_lanes(&s->g); lane++) {
            s->tx[lane * s->g.conn_cap + i] = zc_shm_slot(s, s->peers[i], lane, s->back[i], 0);
            s->rx[lane * s->g.conn_cap + i] = zc_shm_slot(s, s->mine, lane, i, 0);
        }
    }
    return ZC_OK;
}

static void zc_shm_seal(void *state) {
    zc_shm *s = state;
    if (s->mapped && !s->sealed) zc_plat_shm_seal(&s->ref);
    s->sealed = 1;
}

static void zc_shm_close(void *state) {
    zc_shm *s = state;
    if (!s->mapped) return;
    for (uint32_t i = 0; i < s->g.nconn; i++)
        if (s->peers[i] && s->peers[i] != s->mine) zc_plat_shm_unmap(s->peers[i], s->bytes);
    zc_shm_seal(s);
    if (s->mine) zc_plat_shm_unmap(s->mine, s->bytes);
    s->mine = 0;
    s->mapped = 0;
}

static void *zc_shm_tx_slot(void *state, uint32_t lane, uint32_t peer, uint32_t slot) {
    zc_shm *s = state;
    return s->tx[lane * s->g.conn_cap + zc_shm_ci(s, peer)] + (size_t)slot * s->g.stride;
}

static zc_status zc_shm_post(void *state, uint32_t lane, uint32_t peer, uint32_t slot,
                             size_t bytes, uint64_t tag) {
    (void)bytes;
    zc_shm *s = state;
    uint8_t *p = zc_shm_tx_slot(state, lane, peer, slot);
    __atomic_store_n((uint64_t *)(void *)(p + ZC_SLOT_HDR_BYTES - 8u), tag, __ATOMIC_RELEASE);
    if (s->wake) zc_wire_wake(s->wake, peer);
    return ZC_OK;
}

static const void *zc_shm_rx_mem(void *state, uint32_t lane, uint32_t peer, uint32_t slot) {
    zc_shm *s = state;
    return s->rx[lane * s->g.conn_cap + zc_shm_ci(s, peer)] + (size_t)slot * s->g.stride;
}

static const void *zc_shm_rx_slot(void *state, uint32_t lane, uint32_t peer, uint32_t slot,
                                  uint64_t tag, uint32_t lines) {
    const uint8_t *p = zc_shm_rx_mem(state, lane, peer, slot);
    uint64_t have = __atomic_load_n((uint64_t *)(void *)(p + ZC_SLOT_HDR_BYTES - 8u),
                                    __ATOMIC_ACQUIRE);
    if (have == tag) return p;
    for (uint32_t i = 0; i < lines; i++) /* not there yet: its payload comes along */
        __builtin_prefetch(p + ZC_SLOT_HDR_BYTES + (size_t)i * 64u, 0, 3);
    return 0;
}

/* In an in-process group a sender that found no slot free marks its credit word with
 * ZC_SHM_CREDIT_WAKE (zc_shm_credit_wake), and the credit that replaces the word wakes it. */
#define ZC_SHM_CREDIT_WAKE ((uint64_t)1 << 63)

static void zc_shm_credit(void *state, uint32_t lane, uint32_t peer, uint64_t consumed) {
    zc_shm *s = state;
    uint32_t i = zc_shm_ci(s, peer);
    uint64_t *w = zc_shm_credit_word(s, s->peers[i], lane, s->back[i]);
    if (!s->wake) {
        __atomic_store_n(w, consumed, __ATOMIC_RELEASE);
        return;
    }
    if (__atomic_exchange_n(w, consumed, __ATOMIC_ACQ_REL) & ZC_SHM_CREDIT_WAKE)
        zc_wire_wake(s->wake, peer);
}

static uint64_t zc_shm_credits(void *state, uint32_t lane, uint32_t peer) {
    zc_shm *s = state;
    uint64_t v = __atomic_load_n(zc_shm_credit_word(s, s->mine, lane, zc_shm_ci(s, peer)),
                                 __ATOMIC_ACQUIRE);
    return s->wake ? v & ~ZC_SHM_CREDIT_WAKE : v; /* between processes: as written */
}

/* The mark goes on only over the count read: a credit that comes in between fails it and is
 * read again, and one that comes after it finds it. */
static bool zc_shm_credit_wake(void *state, uint32_t lane, uint32_t peer, uint64_t want) {
    zc_shm *s = state;
    uint64_t *w = zc_shm_credit_word(s, s->mine, lane, zc_shm_ci(s, peer));
    uint64_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    for (;;) {
        if ((v & ~ZC_SHM_CREDIT_WAKE) >= want) return true;
        if (!s->wake || (v & ZC_SHM_CREDIT_WAKE)) return false;
        if (__atomic_compare_exchange_n(w, &v, v | ZC_SHM_CREDIT_WAKE, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return false;
    }
}

/* In process the group's count of alarms goes up after the words are written (wire.h's
 * "Alarms"), and the peers' wake bits are set, so that a walk visits them soon. */
static void zc_shm_alarm(void *state, uint64_t word) {
    zc_shm *s = state;
    for (uint32_t i = 0; i < s->g.nconn; i++) {
        uint64_t none = 0;
        if (!s->peers[i]) continue;
        __atomic_compare_exchange_n(zc_shm_alarm_word(s->peers[i]), &none, word, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        if (s->wake) zc_wire_wake(s->wake, s->g.conn_peer[i]);
    }
    if (s->g.inproc_alarms) __atomic_fetch_add(s->g.inproc_alarms, 1u, __ATOMIC_RELEASE);
}

static uint64_t zc_shm_alarmed(void *state) {
    zc_shm *s = state;
    if (!__atomic_load_n(s->alarms, __ATOMIC_ACQUIRE)) return 0;
    return __atomic_load_n(zc_shm_alarm_word(s->mine), __ATOMIC_ACQUIRE);
}

static zc_status zc_shm_peer_alive(void *state, uint32_t peer, char *err, size_t cap) {
    zc_shm *s = state;
    /* Only a definite "gone" counts: a port without liveness (UNSUPPORTED) trusts deadlines. */
    uint32_t i = s->g.conn[peer];
    if (!s->mapped || i == UINT32_MAX || zc_plat_process_alive(s->pids[i]) != ZC_PLAT_NOT_FOUND)
        return ZC_OK;
    const char *msg = "shm: the peer's process has exited";
    size_t n = 0;
    for (; msg[n] && n + 1 < cap; n++) err[n] = msg[n];
    if (cap) err[n] = '\0';
    return ZC_PEER_LOST;
}

static void zc_shm_closing(void *state, uint64_t seqs) {
    zc_shm *s = state;
    if (s->mapped && s->mine)
        __atomic_store_n(&((zc_shm_head *)(void *)s->mine)->closed, seqs + 1u, __ATOMIC_RELEASE);
}

/* The peer's window stays mapped here after its process exits; in process a finished peer's
 * window may be its caller's memory again, so nothing is read there. */
static uint64_t zc_shm_closed_after(void *state, uint32_t peer) {
    zc_shm *s = state;
    uint32_t i = s->g.conn[peer];
    if (!s->mapped || i == UINT32_MAX || !s->peers[i]) return 0;
    return __atomic_load_n(&((const zc_shm_head *)(const void *)s->peers[i])->closed,
                           __ATOMIC_ACQUIRE);
}

static void *zc_shm_sym_base(void *state, uint32_t rank) {
    zc_shm *s = state;
    uint32_t i = s->g.conn[rank];
    return s->sym_bytes && i != UINT32_MAX && s->peers[i] ? s->peers[i] + s->sym_off : 0;
}

static void zc_shm_takes(const zc_wire_geom *g, uint64_t *mem, uint64_t *locked) {
    *mem = g->inproc_windows ? 0 : zc_shm_window_bytes(g); /* one segment, this rank's */
    *locked = 0;
}

/* A ring pair with every connection; the window is a shared segment between processes. */
static void zc_shm_links(const zc_wire_geom *g, zc_wire_links *out) {
    *out = (zc_wire_links){0};
    out->peers = g->nconn - 1u;
    out->shared = g->inproc_windows ? 0u : 1u;
}

const zc_wire_ops zc_wire_shm = {
    sizeof(zc_wire_ops), ZC_WIRE_VERSION, "shm",
    zc_shm_state_bytes, zc_shm_window_bytes, zc_shm_addr_bytes,
    zc_shm_create, zc_shm_attach, zc_shm_seal, zc_shm_close,
    zc_shm_tx_slot, zc_shm_post, zc_shm_rx_slot,
    zc_shm_credit, zc_shm_credits,
    zc_shm_alarm, zc_shm_alarmed, zc_shm_peer_alive,
    0, 0, 0, 0, 0, /* no placement: a process cannot write into another's private pages */
    zc_shm_sym_base,
    zc_shm_takes,
    zc_shm_links,
    zc_shm_rx_mem,
    zc_shm_closing, zc_shm_closed_after,
    zc_shm_credit_wake,
};
