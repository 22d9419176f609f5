/* hier.c: the two-wire communicator ("hier"): one communicator between processes whose
 * connections are carried by two wire instances, chosen per connection. Instance 0 (shm) carries
 * the connections to the ranks of this rank's own place (its host, or the host it claims with
 * ZC_HOST_ID), instance 1 (transport_ib; a second shm instance in tests) the connections to the
 * other places' ranks. Each instance has its own geometry: its connection subset (this rank and
 * the peers it carries, rank order, its own indices) and its own cap, so windows, rings and
 * queue pairs exist only for the connections an instance carries.
 *
 * It is itself a wire (zc__wire_hier, wire.h's interface): the core calls it as it calls any
 * wire, and each data-path function forwards to the instance that carries the peer's connection
 * (zc_hier_of: the one dispatch point). Calls that concern no peer (alarm, seal, close) go to
 * both instances. Its address blob is the two instances' blobs side by side; attach hands each
 * instance its connections' parts, in its own connection order: instance 0's (small: a shared
 * memory reference each) copied into this state, instance 1's packed in place in the core's
 * table, which is this wire's until close (wire.h) and never read by the core again.
 *
 * What the instances differ in stays per connection: only instance 1 may put (placement is
 * planned per connection, zc__hier_puts); neither flagged lines nor a symmetric region are
 * offered (the core uses them only where every connection has them). Init prepares the state
 * (zc__hier_prepare: which instance carries each connection, the instances' caps) before
 * create. */
#include "engine.h"
#include "text.h"

#ifdef ZC_TEST_HOOKS
uint32_t zc__test_hier_shm;
#endif

#define ZC_HIER_SALT 0x9e3779b97f4a7c15ull /* instance 1's comm_id: comm_id ^ this */

typedef struct zc_hier {
    const zc_wire_ops *w[2]; /* the instances' wires */
    void *st[2];             /* their states (in this state) */
    uint32_t *conn[2];       /* [nranks] rank -> the instance's connection index */
    uint32_t *peer[2];       /* [cap] the instance's connection index -> rank */
    uint8_t *blobs[2];       /* the instance's connections' blobs, ab[k] bytes each: 0's in
                              * this state, 1's packed in the core's table at attach */
    uint8_t *via;            /* [conn_cap] the communicator's connection -> its instance */
    const uint32_t *cconn;   /* the communicator's conn (rank -> connection), until close */
    size_t ab[2];            /* the instances' blob bytes (0: none) */
    size_t part1;            /* offset of instance 1's part in the blob */
    size_t whole;            /* bytes of the blob (zc_hier_addr_bytes) */
    uint32_t nconn[2], cap[2];
    uint64_t comm_id;
    uint32_t made; /* bit k: instance k was created */
    uint32_t pad_;
} zc_hier;

static size_t zc_hier_al(size_t v) { return (v + 63u) & ~(size_t)63u; }

/* The wire of instance 1: transport_ib, or shm in the test builds that ask for it (and in
 * builds without transport_ib, where only the tests reach this wire). */
static const zc_wire_ops *zc_hier_inter(void) {
#ifdef ZC_TEST_HOOKS
    if (zc__test_hier_shm) return &zc_wire_shm;
#endif
#ifdef ZC_HAVE_IB
    return &zc_wire_ib;
#else
    return &zc_wire_shm;
#endif
}

/* The largest state and blob either wire may take for the geometry g (full connection cap). */
static size_t zc_hier_max(size_t (*size)(const zc_wire_ops *, const zc_wire_geom *),
                          const zc_wire_geom *g) {
    size_t a = size(&zc_wire_shm, g), b = a;
#ifdef ZC_HAVE_IB
    b = size(&zc_wire_ib, g);
#endif
    return a > b ? a : b;
}
static size_t zc_sz_state(const zc_wire_ops *w, const zc_wire_geom *g) {
    return w->state_bytes(g);
}
static size_t zc_sz_addr(const zc_wire_ops *w, const zc_wire_geom *g) {
    return w->addr_bytes(g);
}

/* Where each part of the state starts (bytes from its beginning), from the communicator's
 * geometry; the total. Sized for the full connection cap: an instance never has more. */
enum { ZC_HO_ST0, ZC_HO_ST1, ZC_HO_CONN, ZC_HO_PEER, ZC_HO_BLOB0, ZC_HO_VIA, ZC_HO_COUNT };
static size_t zc_hier_layout(const zc_wire_geom *g, size_t off[ZC_HO_COUNT]) {
    size_t n = g->nranks, cap = g->conn_cap, end = zc_hier_al(sizeof(zc_hier));
    size_t bytes[ZC_HO_COUNT] = {
        zc_wire_shm.state_bytes(g), zc_hier_max(zc_sz_state, g), 2u * n * sizeof(uint32_t),
        2u * cap * sizeof(uint32_t), cap * zc_wire_shm.addr_bytes(g), cap};
    for (uint32_t i = 0; i < ZC_HO_COUNT; i++) {
        off[i] = end;
        end += zc_hier_al(bytes[i]);
    }
    return end;
}

static size_t zc_hier_state_bytes(const zc_wire_geom *g) {
    size_t off[ZC_HO_COUNT];
    return zc_hier_layout(g, off);
}

/* Processes only: the windows are shared memory or registered, never in the arena. */
static size_t zc_hier_window_bytes(const zc_wire_geom *g) {
    (void)g;
    return 0;
}

static size_t zc_hier_addr_bytes(const zc_wire_geom *g) {
    return zc_wire_shm.addr_bytes(g) + zc_hier_max(zc_sz_addr, g);
}

/* The geometry of instance k: g's sizes over the instance's connections. */
static zc_wire_geom zc_hier_geom(const zc_hier *h, const zc_wire_geom *g, uint32_t k) {
    zc_wire_geom s = *g;
    s.comm_id = k ? g->comm_id ^ ZC_HIER_SALT : g->comm_id;
    s.nconn = h->nconn[k];
    s.conn_cap = h->cap[k];
    s.conn = h->conn[k];
    s.conn_peer = h->peer[k];
    s.inproc_windows = 0;
    return s;
}

void zc__hier_prepare(void *state, const zc_wire_geom *cg, const uint64_t *places,
                      size_t stride, uint32_t cap0, uint32_t cap1) {
    zc_wire_geom g = *cg;
    size_t off[ZC_HO_COUNT];
    uint8_t *base = state;
    zc_hier_layout(&g, off);
    zc_hier *h = state;
    uint32_t *conns = (uint32_t *)(void *)(base + off[ZC_HO_CONN]);
    uint32_t *peers = (uint32_t *)(void *)(base + off[ZC_HO_PEER]);
    *h = (zc_hier){{&zc_wire_shm, zc_hier_inter()}, {base + off[ZC_HO_ST0], base + off[ZC_HO_ST1]},
                   {conns, conns + g.nranks}, {peers, peers + g.conn_cap},
                   {base + off[ZC_HO_BLOB0], 0}, base + off[ZC_HO_VIA],
                   g.conn, {0, 0}, 0, 0, {0, 0}, {cap0, cap1}, g.comm_id, 0, 0};
    for (uint32_t p = 0; p < g.nranks; p++) h->conn[0][p] = h->conn[1][p] = ZC_NO_CONN;
    uint64_t mine = *(const uint64_t *)(const void *)((const uint8_t *)places + g.rank * stride);
    for (uint32_t i = 0; i < g.nconn; i++) { /* rank order in, rank order out */
        uint32_t p = g.conn_peer[i];
        uint64_t its = *(const uint64_t *)(const void *)((const uint8_t *)places + p * stride);
        h->via[i] = (uint8_t)(its != mine);
        for (uint32_t k = 0; k < 2u; k++) {
            if (p != g.rank && h->via[i] != k) continue; /* this rank: in both */
            ZC_ASSERT(h->nconn[k] < h->cap[k]);
            h->conn[k][p] = h->nconn[k];
            h->peer[k][h->nconn[k]++] = p;
        }
    }
    zc_wire_geom g0 = zc_hier_geom(h, &g, 0), g1 = zc_hier_geom(h, &g, 1);
    h->ab[0] = h->w[0]->addr_bytes(&g0);
    h->ab[1] = h->w[1]->addr_bytes(&g1);
    h->part1 = zc_wire_shm.addr_bytes(&g);
    h->whole = zc_hier_addr_bytes(&g);
}

static zc_status zc_hier_create(void *state, const zc_wire_geom *g, void *window, void *addr,
                                char *err, size_t cap) {
    zc_hier *h = state;
    uint8_t *blob = addr;
    (void)window;
    ZC_ASSERT(h->cconn == g->conn && h->comm_id == g->comm_id); /* zc__hier_prepare ran */
    if (blob) zc__memset(blob, 0, zc_hier_addr_bytes(g));
    for (uint32_t k = 0; k < 2u; k++) {
        zc_wire_geom s = zc_hier_geom(h, g, k);
        zc_status st = h->w[k]->create(h->st[k], &s, 0, blob ? blob + (k ? h->part1 : 0) : 0,
                                       err, cap);
        if (st != ZC_OK) {
            if (h->made & 1u) h->w[0]->close(h->st[0]);
            h->made = 0;
            return st;
        }
        h->made |= 1u << k;
    }
    return ZC_OK;
}

/* Each instance gets its connections' parts of the blobs (addrs: the communicator's
 * connections' blobs, connection order, h->whole bytes each) in its own connection order:
 * instance 0's copied out first, then instance 1's packed from the front of the table (its
 * j-th part moves from connection i >= j's place, never onto a part still to move). */
static zc_status zc_hier_attach(void *state, const void *addrs, char *err, size_t cap) {
    zc_hier *h = state;
    uint8_t *table = (uint8_t *)(uintptr_t)addrs; /* this wire's until close (wire.h) */
    for (uint32_t j = 0; j < h->nconn[0] && h->ab[0] && table; j++)
        zc__memcpy(h->blobs[0] + (size_t)j * h->ab[0],
                   table + (size_t)h->cconn[h->peer[0][j]] * h->whole, h->ab[0]);
    for (uint32_t j = 0; j < h->nconn[1] && h->ab[1] && table; j++)
        __builtin_memmove(table + (size_t)j * h->ab[1],
                          table + (size_t)h->cconn[h->peer[1][j]] * h->whole + h->part1,
                          h->ab[1]);
    h->blobs[1] = table;
    for (uint32_t k = 0; k < 2u; k++) {
        zc_status st = h->w[k]->attach(h->st[k], h->ab[k] ? h->blobs[k] : 0, err, cap);
        if (st != ZC_OK) return st;
    }
    return ZC_OK;
}

static void zc_hier_seal(void *state) {
    zc_hier *h = state;
    for (uint32_t k = 0; k < 2u; k++) h->w[k]->seal(h->st[k]);
}

/* Instance 1 first: its close may wait for peers' credits, which instance 0's peers do not
 * hold up. */
static void zc_hier_close(void *state) {
    zc_hier *h = state;
    for (uint32_t k = 2u; k-- > 0;)
        if (h->made & (1u << k)) h->w[k]->close(h->st[k]);
    h->made = 0;
}

/* The one dispatch point: the instance carrying peer's connection. */
static inline uint32_t zc_hier_of(const zc_hier *h, uint32_t peer) {
    return h->via[h->cconn[peer]];
}

static void *zc_hier_tx_slot(void *state, uint32_t lane, uint32_t peer, uint32_t slot) {
    zc_hier *h = state;
    uint32_t k = zc_hier_of(h, peer);
    return h->w[k]->tx_slot(h->st[k], lane, peer, slot);
}

static zc_status zc_hier_post(void *state, uint32_t lane, uint32_t peer, uint32_t slot,
                              size_t bytes, uint64_t tag) {
    zc_hier *h = state;
    uint32_t k = zc_hier_of(h, peer);
    return h->w[k]->post(h->st[k], lane, peer, slot, bytes, tag);
}

static const void *zc_hier_rx_slot(void *state, uint32_t lane, uint32_t peer, uint32_t slot,
                                   uint64_t tag, uint32_t lines) {
    zc_hier *h = state;
    uint32_t k = zc_hier_of(h, peer);
    return h->w[k]->rx_slot(h->st[k], lane, peer, slot, tag, lines);
}

static void zc_hier_credit(void *state, uint32_t lane, uint32_t peer, uint64_t consumed) {
    zc_hier *h = state;
    uint32_t k = zc_hier_of(h, peer);
    h->w[k]->credit(h->st[k], lane, peer, consumed);
}

static uint64_t zc_hier_credits(void *state, uint32_t lane, uint32_t peer) {
    zc_hier *h = state;
    uint32_t k = zc_hier_of(h, peer);
    return h->w[k]->credits(h->st[k], lane, peer);
}

/* A failure report reaches every connection: both instances' peers. */
static void zc_hier_alarm(void *state, uint64_t word) {
    zc_hier *h = state;
    for (uint32_t k = 0; k < 2u; k++) h->w[k]->alarm(h->st[k], word);
}

static uint64_t zc_hier_alarmed(void *state) {
    zc_hier *h = state;
    uint64_t word = h->w[0]->alarmed(h->st[0]);
    return word ? word : h->w[1]->alarmed(h->st[1]);
}

static zc_status zc_hier_peer_alive(void *state, uint32_t peer, char *err, size_t cap) {
    zc_hier *h = state;
    uint32_t k = zc_hier_of(h, peer);
    return h->w[k]->peer_alive(h->st[k], peer, err, cap);
}

static void zc_hier_closing(void *state, uint64_t seqs) {
    zc_hier *h = state;
    for (int k = 0; k < 2; k++)
        if (h->w[k]->closing) h->w[k]->closing(h->st[k], seqs);
}

static uint64_t zc_hier_closed_after(void *state, uint32_t peer) {
    zc_hier *h = state;
    uint32_t k = zc_hier_of(h, peer);
    return h->w[k]->closed_after ? h->w[k]->closed_after(h->st[k], peer) : 0;
}

/* Placement is instance 1's (the core plans it only for its connections: zc__hier_puts). */
static bool zc_hier_places(const zc_hier *h) {
    const zc_wire_ops *w = h->w[1];
    return w->put_min && w->put && w->put_done && w->mem_register;
}

static uint64_t zc_hier_put_min(void *state) {
    zc_hier *h = state;
    return zc_hier_places(h) ? h->w[1]->put_min(h->st[1]) : 0;
}

static zc_status zc_hier_mem_register(void *state, void *addr, size_t bytes, uint32_t kind,
                                      int32_t fd, uint64_t fd_offset, zc_wire_mr *out,
                                      char *err, size_t cap) {
    zc_hier *h = state;
    if (!zc_hier_places(h)) {
        zc__fmt(err, cap, "the %s wire between hosts registers no memory", h->w[1]->name);
        return ZC_UNSUPPORTED;
    }
    return h->w[1]->mem_register(h->st[1], addr, bytes, kind, fd, fd_offset, out, err, cap);
}

static void zc_hier_mem_deregister(void *state, zc_wire_mr *mr) {
    zc_hier *h = state;
    if (zc_hier_places(h)) h->w[1]->mem_deregister(h->st[1], mr);
}

static zc_status zc_hier_put(void *state, uint32_t lane, uint32_t peer, uint32_t slot,
                             uint64_t tag, const void *src, const zc_wire_mr *mr, size_t bytes,
                             uint64_t raddr, uint64_t rkey) {
    zc_hier *h = state;
    ZC_ASSERT(zc_hier_of(h, peer) == 1u && zc_hier_places(h)); /* zc__hier_puts planned it */
    return h->w[1]->put(h->st[1], lane, peer, slot, tag, src, mr, bytes, raddr, rkey);
}

static bool zc_hier_put_done(void *state, uint32_t peer) {
    zc_hier *h = state;
    return zc_hier_of(h, peer) != 1u || !zc_hier_places(h) || h->w[1]->put_done(h->st[1], peer);
}

bool zc__hier_puts(const void *state, uint32_t peer) {
    const zc_hier *h = state;
    return zc_hier_of(h, peer) == 1u && zc_hier_places(h);
}

/* Sizes without a prepared state (wire.h's takes and links): the worst case, every connection
 * on both instances. The core asks zc__hier_need for a prepared communicator's. */
static void zc_hier_takes(const zc_wire_geom *g, uint64_t *mem, uint64_t *locked) {
    uint64_t m1 = 0, l1 = 0;
    zc_wire_shm.takes(g, mem, locked);
    zc_hier_inter()->takes(g, &m1, &l1);
    *mem += m1;
    *locked += l1;
}

static void zc_hier_links(const zc_wire_geom *g, zc_wire_links *out) {
    zc_wire_links l1;
    zc_wire_shm.links(g, out);
    zc_hier_inter()->links(g, &l1);
    out->qps += l1.qps;
    out->cq_entries += l1.cq_entries;
}

void zc__hier_need(const zc_config *cfg, const zc_wire_geom *g, const uint32_t nconn[2],
                   const uint32_t cap[2], zc__hier_cost *out) {
    const zc_wire_ops *w[2] = {&zc_wire_shm, zc_hier_inter()};
    *out = (zc__hier_cost){0};
    for (uint32_t k = 0; k < 2u; k++) {
        zc_wire_geom s = *g;
        s.nconn = nconn[k];
        s.conn_cap = cap[k];
        s.cfg = cfg;
        s.inproc_windows = 0;
        w[k]->takes(&s, &out->mem[k], &out->locked[k]);
        w[k]->links(&s, &out->links[k]);
    }
}

void zc__hier_shape(const void *state, uint32_t nconn[2], uint32_t cap[2]) {
    const zc_hier *h = state;
    for (uint32_t k = 0; k < 2u; k++) {
        nconn[k] = h->nconn[k];
        cap[k] = h->cap[k];
    }
}

const char *zc__hier_inter_name(void) {
#if !defined(ZC_HAVE_IB) && defined(ZC_TEST_HOOKS)
    if (!zc__test_hier_shm) return 0;
#elif !defined(ZC_HAVE_IB)
    return 0;
#endif
    return zc_hier_inter()->name;
}

const zc_wire_ops zc__wire_hier = {
    sizeof(zc_wire_ops), ZC_WIRE_VERSION, "hier",
    zc_hier_state_bytes, zc_hier_window_bytes, zc_hier_addr_bytes,
    zc_hier_create, zc_hier_attach, zc_hier_seal, zc_hier_close,
    zc_hier_tx_slot, zc_hier_post, zc_hier_rx_slot,
    zc_hier_credit, zc_hier_credits,
    zc_hier_alarm, zc_hier_alarmed, zc_hier_peer_alive,
    zc_hier_put_min, zc_hier_mem_register, zc_hier_mem_deregister, zc_hier_put,
    zc_hier_put_done,
    0, /* no symmetric region: the instances' peers are not all mapped */
    zc_hier_takes,
    zc_hier_links,
    0, /* no flagged lines: instance 1's peers cannot poll a sender's stores */
    zc_hier_closing, zc_hier_closed_after,
    0, /* no waking: between processes only */
};
