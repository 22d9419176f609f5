/* comm.c: the communicator's life: init (bootstrap, wire windows, carve of the arena), the
 * in-process group, abort, fini, accessors and memory registration; split.c builds children
 * from these pieces.
 * Init-time work only blocks with a deadline; nothing is allocated: the arena is the memory. */
#include "bootstrap.h"
#include "device.h"

uint32_t zc_comm_rank(const zc_comm *comm) { return zc__comm_ok(comm) ? comm->rank : 0; }
uint32_t zc_comm_node(const zc_comm *comm) { return zc__comm_ok(comm) ? comm->node : 0; }
const char *zc_comm_transport(const zc_comm *comm) {
    return zc__comm_ok(comm) ? comm->wire->name : "none";
}
uint32_t zc_comm_size(const zc_comm *comm) { return zc__comm_ok(comm) ? comm->nranks : 0; }
const char *zc_comm_error_text(const zc_comm *comm) {
    return zc__comm_ok(comm) ? comm->err : "not a communicator";
}

/* The device regions (empty without a provider): the header's tables, the staging, and every
 * request's rows (buffers, staged state); zc__gpu_open (gpu_mem.c) starts the provider once the
 * wire is up. */
static void zc_carve_gpu(zc_comm *c, uint8_t *a, const zc__arena_map *L) {
    const zc_config *cfg = &c->cfg;
    size_t n = cfg->nranks < ZC_GPU_MAX_SRCS ? cfg->nranks : ZC_GPU_MAX_SRCS;
    if (!L->bytes[ZC_R_GPU]) return;
    struct zc__gpu *g = (struct zc__gpu *)(void *)(a + L->at[ZC_R_GPU]);
    g->state = a + L->at[ZC_R_GPU_STATE];
    g->recs = (zc_gpu_ipc *)(void *)(a + L->at[ZC_R_GPU_RECS]);
    g->mapped = (uint8_t **)(void *)(a + L->at[ZC_R_GPU_MAPPED]);
    g->binds = (zc__bind *)(void *)(a + L->at[ZC_R_GPU_BINDS]);
    g->peers = (zc__gpu_peer *)(void *)(a + L->at[ZC_R_GPU_PEERS]);
    struct zc__stage *st = (struct zc__stage *)(void *)(a + L->at[ZC_R_STAGE]);
    st->p2p = a + L->at[ZC_R_STAGE_P2P];
    st->buf = a + L->at[ZC_R_STAGE_BUF];
    for (uint32_t i = 0; i < cfg->max_requests; i++) {
        c->reqs[i].ptrs = (uint8_t **)(void *)(a + L->at[ZC_R_GPU_PTRS]) + (size_t)i * 2u * n;
        c->reqs[i].stg = (zc__stage_req *)(void *)(a + L->at[ZC_R_STAGE_REQS]) + i;
    }
    c->gpu_area = g;
    c->stage_area = st;
}

/* Checks the arena and carves the communicator's state from it (no communication). A failure
 * is said in err (ZC_ERROR_TEXT_BYTES). */
zc_status zc__carve(const zc_config *cfg, void *arena, size_t arena_bytes, zc_comm **out,
                          char *err) {
    char why[ZC_ERROR_TEXT_BYTES];
    zc__arena_map L;
    if (!zc__config_check(cfg, why, sizeof why)) {
        zc__fmt(err, ZC_ERROR_TEXT_BYTES, "invalid configuration: %s", why);
        return ZC_INVALID_ARG;
    }
    ZC_ASSERT(zc__layout(cfg, &L));
    if (!arena || ((uintptr_t)arena & 7u)) {
        zc__fmt(err, ZC_ERROR_TEXT_BYTES, "arena is %s; pass %zu bytes, 8-byte aligned",
                arena ? "not 8-byte aligned" : "NULL", L.total);
        return ZC_INVALID_ARG;
    }
    if (arena_bytes < L.total) {
        zc__fmt(err, ZC_ERROR_TEXT_BYTES, "arena_bytes is %zu but zc_comm_arena_bytes() asks "
                "for %zu", arena_bytes, L.total);
        return ZC_TOO_SMALL;
    }
    uint8_t *a = arena;
    if (cfg->transport == ZC_TRANSPORT_INPROC) a += (size_t)(cfg->rank % ZC_INPROC_COLORS) * 64u;
    zc__memset(a, 0, L.at[ZC_R_WINDOW]); /* the window (in-process) is cleared by the wire */
    zc_comm *c = (zc_comm *)(void *)(a + L.at[ZC_R_COMM]);
    c->cfg = *cfg;
    if (!c->cfg.timeout_ns) c->cfg.timeout_ns = ZC_DEFAULT_TIMEOUT_NS;
    if (!c->cfg.init_timeout_ns) c->cfg.init_timeout_ns = ZC_DEFAULT_INIT_TIMEOUT_NS;
    /* init may lower it (zc_auto_spin) */
    zc__set_spin(c, c->cfg.spin_polls ? c->cfg.spin_polls : ZC_DEFAULT_SPIN_POLLS);
    c->serial = c->cfg.threads == ZC_THREADS_SERIAL;
    c->slot_mask = c->cfg.slots - 1u;
    c->park_after = (uint16_t)(cfg->transport == ZC_TRANSPORT_INPROC ? ZC_PARK_AFTER_INPROC
                                                                      : ZC_PARK_AFTER_PROCS);
    c->name_after = (uint16_t)(c->park_after - 1u);
    c->rank = cfg->rank;
    c->nranks = cfg->nranks;
    c->wire = zc__wire_for(cfg);
    c->wire_state = a + L.at[ZC_R_WIRE_STATE];
    c->addrs = a + L.at[ZC_R_ADDRS];
    c->addr_bytes = L.addr_bytes;
    c->conn = (uint32_t *)(void *)(a + L.at[ZC_R_CONN]);
    c->conn_peer = (uint32_t *)(void *)(a + L.at[ZC_R_CONN_PEER]);
    c->chans = (zc__chan *)(void *)(a + L.at[ZC_R_CHANS]);
    c->reqs = (zc__req *)(void *)(a + L.at[ZC_R_REQS]);
    for (uint32_t i = 0; i < cfg->max_requests; i++) {
        size_t row = (size_t)i * zc__conn_cap(cfg);
        c->reqs[i].base = (zc__base *)(void *)(a + L.at[ZC_R_BASES]) + row;
        c->reqs[i].pl = (zc__place *)(void *)(a + L.at[ZC_R_PLACES]) + row;
        c->reqs[i].acc = L.bytes[ZC_R_ACC] ? a + L.at[ZC_R_ACC] + i * zc__acc_slice(cfg) : 0;
    }
    c->active = (uint32_t *)(void *)(a + L.at[ZC_R_ACTIVE]);
    c->plans = (zc__plan *)(void *)(a + L.at[ZC_R_PLANS]);
    for (uint32_t i = 0; i < cfg->max_plans; i++) c->plans[i].running = -1;
    c->mems = (zc__mem_entry *)(void *)(a + L.at[ZC_R_MEMS]);
    zc_carve_gpu(c, a, &L);
    if (L.bytes[ZC_R_GROUP]) { /* in process: zc__inproc_group points every rank at rank 0's */
        c->group = (zc_comm **)(void *)(a + L.at[ZC_R_GROUP]);
        if (cfg->nranks >= ZC_WAKE_MIN_RANKS) {
            c->group_wake =
                (uint64_t *)(void *)(a + L.at[ZC_R_GROUP] + cfg->nranks * sizeof(void *));
            c->name_after = 0;
        }
    }
    c->scratch = a + L.at[ZC_R_SCRATCH];
    c->window = L.bytes[ZC_R_WINDOW] ? a + L.at[ZC_R_WINDOW] : 0;
    if (zc__overlay(cfg) && cfg->sym_bytes) {
        zc__fmt(err, ZC_ERROR_TEXT_BYTES, "overlay mode (%u ranks, overlay_min_ranks %u) runs "
                "without a symmetric region (every rank maps every other's): set sym_bytes 0",
                cfg->nranks, cfg->overlay_min_ranks);
        return ZC_UNSUPPORTED;
    }
    c->relay = zc__relays(cfg); /* the relay lane every progress pass polls (relay.c) */
    /* Simulated hosts; between processes in overlay mode init and split fill it from where
     * the ranks run. */
    if ((cfg->transport == ZC_TRANSPORT_INPROC || !zc__overlay(cfg)) && !zc__conn_fill(c, 0, 0)) {
        zc__strlcpy(err, c->err, ZC_ERROR_TEXT_BYTES);
        return ZC_INVALID_ARG;
    }
    zc__host_blocks(c, 0, 0);
    *out = c;
    return ZC_OK;
}

zc_wire_geom zc__geom(const zc_comm *c, uint64_t comm_id, void *const *windows) {
    zc_wire_geom g = {comm_id,     c->rank,      c->nranks,
                      c->cfg.slots, c->cfg.slot_bytes, ZC_SLOT_HDR_BYTES + c->cfg.slot_bytes,
                      c->nconn,    zc__conn_cap(&c->cfg), zc__lanes(&c->cfg),
                      c->conn,     c->conn_peer, windows,
                      &c->cfg,     0,            0};
    return g;
}

/* What every rank tells the others at init. */
typedef struct zc_hello {
    uint64_t nonce, host;
    /* Where it runs for its connection set (overlay mode: its own host's ranks are
     * connections): the host, or ZC_HOST_ID's claim; 0 when that claim is unusable. */
    uint64_t place;
    uint32_t overlay; /* cfg->overlay_min_ranks */
    uint32_t pid; /* its low bits: the nonce where the platform has no randomness */
    uint32_t slots, slot_bytes, transport, sym_pages; /* sym_pages: cfg->sym_bytes / 4096 */
    uint32_t gpu; /* zc_gpu_word: the gpu provider and path asked for */
    /* What the platform leaves it before any window is taken (zc_plat_mem_room): memory in
     * MiB, lockable memory in KiB; UINT32_MAX: no limit known. */
    uint32_t room_mib, lock_kib;
    uint32_t relay; /* cfg->overlay_relay */
    uint64_t cpus[ZC_PLAT_CPU_WORDS]; /* the CPUs it may run on (zc_plat_cpus; 0: unknown) */
} zc_hello;
_Static_assert(sizeof(zc_hello) <= ZC_SCRATCH_RANK_BYTES, "hellos fit the init scratch");

/* A hash of this host's identity (never 0), or 0 when the platform cannot read it: then no
 * rank can tell whether this one shares its host, and init fails on every rank (see
 * zc_check_hellos) rather than guess. *why gets the cause. */
static uint64_t zc_host_hash(char *why, size_t cap) {
    char id[256];
    uint8_t key[16] = {0};
    zc_plat_rc rc = zc_plat_host_id(id, sizeof id);
    if (rc != ZC_PLAT_OK) {
        char os[96];
        zc_plat_os_error_text(zc_plat_os_error(), os, sizeof os);
        zc__fmt(why, cap, "%s (%s)", zc_plat_rc_name(rc), os);
        return 0;
    }
    return zc__siphash(key, id, zc__strlen(id)) | 1u;
}

/* Where this rank runs as far as its connection set goes (zc_hello's place): ZC_HOST_ID's
 * value when set (a claim of its own host for tests and simulations: processes on one machine
 * can claim different hosts; the wire still follows the real host), else host. 0 with *why
 * when the claim is unusable (empty or longer than 255 bytes). */
static uint64_t zc_place_hash(uint64_t host, char *why, size_t cap) {
    const char *id = zc_plat_getenv("ZC_HOST_ID");
    uint8_t key[16] = {'Z', 'C', '_', 'H', 'O', 'S', 'T', '_', 'I', 'D'};
    if (!id) return host;
    size_t n = zc__strlen(id);
    if (n == 0 || n > 255u) {
        zc__fmt(why, cap, "ZC_HOST_ID is %s: give it 1..255 characters naming the host this "
                "rank claims, or unset it", n ? "longer than 255 bytes" : "empty");
        return 0;
    }
    return zc__siphash(key, id, n) | 1u;
}

/* The device settings every rank must share (gpu_mem.c decides the path from them alike):
 * whether cfg picks a gpu provider, which, and cfg->gpu_path. */
static uint32_t zc_gpu_word(const zc_config *cfg) {
    return zc__gpu_provider(cfg) ? 1u | cfg->gpu_provider << 4 | cfg->gpu_path << 8 : 0u;
}

static const char *zc_transport_name(uint32_t t) {
    return t == ZC_TRANSPORT_SHM ? "shm" : t == ZC_TRANSPORT_IB ? "ib" : t == ZC_TRANSPORT_AUTO
                                       ? "auto" : t == ZC_TRANSPORT_HIER ? "hier" : "inproc";
}

/* Picks the wire once every rank's hello is known: AUTO is shm on one host, ib across hosts
 * (hier, shm among a host's ranks and ib between hosts, is asked for: it has no device path
 * but staging); a child split by zc_comm_node gets shared memory (split.c). order: the ranks
 * sorted by host (zc__sort_by_key), so ranks that share a host are neighbours there: O(n). */
static zc_status zc_pick_wire(zc_comm *c, const zc_hello *all, const uint32_t *order) {
    uint32_t other = 0, n = c->nranks;
    bool shared = false;
    for (uint32_t r = 1; r < n && !other; r++)
        if (all[r].host != all[0].host) other = r;
    for (uint32_t i = 1; i < n && !shared; i++)
        shared = all[order[i]].host == all[order[i - 1u]].host;
    c->node = c->rank;
    for (uint32_t q = 0; q < c->rank; q++) /* the lowest rank on this rank's host */
        if (all[q].host == all[c->rank].host) {
            c->node = q;
            break;
        }
    c->host = all[c->rank].host;
    zc_transport t = c->cfg.transport;
    c->wire_auto = t == ZC_TRANSPORT_AUTO;
    t = zc__transport_picked(t, other != 0);
    if (t == ZC_TRANSPORT_SHM && other) {
        zc__fmt(c->err, sizeof c->err, "rank %u runs on another host than rank 0: the "
                "shared-memory wire needs every rank on one host (use ZC_TRANSPORT=ib or auto; "
                "for shared memory among each host's ranks, split by zc_comm_node)", other);
        return ZC_UNSUPPORTED;
    }
    if (other && shared && t == ZC_TRANSPORT_IB && c->rank == 0) {
        char line[ZC_ERROR_TEXT_BYTES];
        zc__fmt(line, sizeof line, "ranks span hosts and some share one: one wire (ib) "
                "carries this communicator, also between ranks on one host (ZC_TRANSPORT=hier: "
                "shared memory among them); children split by zc_comm_node run on shared "
                "memory");
        zc_plat_log(ZC_PLAT_LOG_INFO, line);
    }
    bool places = false; /* whether the ranks claim more than one place */
    for (uint32_t r = 1; r < c->nranks && !places; r++) places = all[r].place != all[0].place;
    if (t == ZC_TRANSPORT_HIER && !places && !other)
        t = ZC_TRANSPORT_SHM; /* one place: the shm instance alone carries everything */
    if (t == ZC_TRANSPORT_HIER && !zc__hier_inter_name()) {
        zc__fmt(c->err, sizeof c->err, "ZC_TRANSPORT is hier: this build has no transport_ib "
                "(configure.py found no libibverbs) to carry it between hosts");
        return ZC_UNSUPPORTED;
    }
#ifndef ZC_HAVE_IB
    if (t == ZC_TRANSPORT_IB) {
        zc__fmt(c->err, sizeof c->err, "%s: this build has no transport_ib (configure.py "
                "found no libibverbs)", other ? "ranks span hosts" : "ZC_TRANSPORT is ib");
        return ZC_UNSUPPORTED;
    }
#endif
    c->cfg.transport = t; /* children of a split stay on the same wire */
    c->wire = zc__wire_for(&c->cfg);
    return ZC_OK;
}

zc_status zc__room_check(zc_comm *c, uint32_t who, uint32_t k, uint64_t room, uint64_t lock) {
    zc_wire_geom g = zc__geom(c, c->comm_id, 0);
    uint64_t mem = 0, locked = 0;
    char need[24], each[24], left[24];
    if (c->wire == &zc__wire_hier) { /* each instance for its own connections */
        zc__hier_cost cost;
        zc__hier_need(&c->cfg, &g, c->hier_cap, c->hier_cap, &cost);
        mem = cost.mem[0] + cost.mem[1];
        locked = cost.locked[0] + cost.locked[1];
    } else {
        c->wire->takes(&g, &mem, &locked);
    }
    uint64_t all = mem > UINT64_MAX / k ? UINT64_MAX : mem * k;
    if (all > room) {
        zc__fmt_bytes(need, sizeof need, all);
        zc__fmt_bytes(each, sizeof each, mem);
        zc__fmt_bytes(left, sizeof left, room);
        zc__fmt(c->err, sizeof c->err, "the %u window%s on rank %u's host need%s %s of %s "
                "memory (%s each%s) but the memory limit there (cgroup, MemAvailable) leaves "
                "%s: lower %sZC_SLOTS or ZC_SLOT_BYTES", k, k > 1 ? "s" : "", who,
                k > 1 ? "" : "s", need, locked ? "registered" : "shared", each,
                c->cfg.sym_bytes ? ", with its ZC_SYM_BYTES region" : "", left,
                c->cfg.sym_bytes ? "ZC_SYM_BYTES, " : "");
        return ZC_LIMIT;
    }
    if (locked <= lock) return ZC_OK;
    zc__fmt_bytes(need, sizeof need, locked);
    zc__fmt_bytes(left, sizeof left, lock);
    zc__fmt(c->err, sizeof c->err, "rank %u registers %s with the NIC (rings and staging for "
            "%u ranks) but its RLIMIT_MEMLOCK leaves %s: raise it (ulimit -l unlimited; "
            "LimitMEMLOCK=infinity for systemd or slurmd) or lower ZC_SLOTS or ZC_SLOT_BYTES",
            who, need, c->nranks, left);
    return ZC_LIMIT;
}

/* A hello's lockable room in bytes (UINT64_MAX: no limit). */
static uint64_t zc_lock_of(const zc_hello *h) {
    return h->lock_kib == UINT32_MAX ? UINT64_MAX : (uint64_t)h->lock_kib << 10;
}

/* Sifts v[i] down the max-heap v[0..n) (a heapsort step; bounded by log2 n swaps). */
static void zc_sift(uint64_t *v, uint32_t i, uint32_t n) {
    for (uint32_t k = 0; k < 32u; k++) {
        uint32_t big = i, l = 2u * i + 1u, r = l + 1u;
        if (l < n && v[l] > v[big]) big = l;
        if (r < n && v[r] > v[big]) big = r;
        if (big == i) return;
        uint64_t t = v[i];
        v[i] = v[big];
        v[big] = t;
        i = big;
    }
}

/* The largest and smallest number of ranks sharing a place (places at stride bytes), in
 * O(n log n): the places copied into c's scratch (its place index, free until the wire is
 * set up), heap-sorted, and their runs counted. */
static void zc_place_sizes(zc_comm *c, const uint8_t *places, size_t stride, uint32_t *most,
                           uint32_t *least) {
    uint32_t n = c->nranks, run = 0;
    zc__init_scratch_map m;
    (void)zc__init_scratch(&c->cfg, c->addr_bytes, &m); /* first and next: 8 bytes per rank */
    uint64_t *v = (uint64_t *)(void *)(c->scratch + m.first);
    for (uint32_t r = 0; r < n; r++) v[r] = *(const uint64_t *)(const void *)(places + r * stride);
    for (uint32_t i = n / 2u; i-- > 0;) zc_sift(v, i, n);
    for (uint32_t end = n; end-- > 1u;) {
        uint64_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        zc_sift(v, 0, end);
    }
    *most = 0;
    *least = n;
    for (uint32_t r = 0; r < n; r++) {
        run++;
        if (r + 1u < n && v[r + 1u] == v[r]) continue;
        *most = run > *most ? run : *most;
        *least = run < *least ? run : *least;
        run = 0;
    }
}

zc_status zc__hier_caps(zc_comm *c, const uint64_t *places, const uint64_t *hosts,
                        size_t stride) {
    const uint8_t *at = (const uint8_t *)places;
    uint32_t n = c->nranks, most = 0, least = n, cap = zc__conn_cap(&c->cfg);
    for (uint32_t p = 0; p < n && hosts; p++) /* this rank's place mates share its host */
        if (*(const uint64_t *)(const void *)(at + p * stride) == c->place &&
            *(const uint64_t *)(const void *)((const uint8_t *)hosts + p * stride) !=
                *(const uint64_t *)(const void *)((const uint8_t *)hosts + c->rank * stride)) {
            zc__fmt(c->err, sizeof c->err, "ranks %u and %u claim one host (ZC_HOST_ID) but run "
                    "on different machines: the two-wire communicator (ZC_TRANSPORT hier) "
                    "carries one host's ranks over shared memory; give each machine's ranks "
                    "claims of their own", c->rank, p);
            return ZC_UNSUPPORTED;
        }
    zc_place_sizes(c, at, stride, &most, &least);
    c->hier_cap[0] = most < cap ? most : cap; /* overlay mode: conn_fill refused a larger one */
    c->hier_cap[1] = zc__overlay(&c->cfg) ? cap : n - least + 1u;
    return ZC_OK;
}

/* Whether every rank's window fits what the platform leaves, decided alike on every rank from
 * the hellos (each rank's room was read before any rank took its window): on each host the
 * windows of all its ranks within the least room one of them reported, each rank's registered
 * bytes within its own lockable room. ZC_LIMIT with the numbers (comm->err) otherwise, for
 * the lowest rank that fails. order: the ranks sorted by host, so a host's ranks are one run
 * of it, its lowest first: O(n). */
static zc_status zc_check_room(zc_comm *c, const zc_hello *all, const uint32_t *order) {
    uint32_t n = c->nranks, bad = n, bad_k = 1;
    uint64_t bad_room = UINT64_MAX;
    for (uint32_t i = 0, j; i < n; i = j) {
        uint64_t room = UINT64_MAX;
        for (j = i; j < n && all[order[j]].host == all[order[i]].host; j++) {
            uint32_t mib = all[order[j]].room_mib;
            uint64_t mine = mib == UINT32_MAX ? UINT64_MAX : (uint64_t)mib << 20;
            room = mine < room ? mine : room;
        }
        for (uint32_t x = i; x < j; x++) { /* the host's lowest rank checks its windows */
            uint32_t r = order[x], k = x == i ? j - i : 1u;
            uint64_t left = x == i ? room : UINT64_MAX;
            if (r < bad && zc__room_check(c, r, k, left, zc_lock_of(&all[r])) != ZC_OK) {
                bad = r;
                bad_k = k;
                bad_room = left;
            }
        }
    }
    if (bad == n) return ZC_OK;
    return zc__room_check(c, bad, bad_k, bad_room, zc_lock_of(&all[bad])); /* its sentence */
}

/* Bytes in units of 1 << shift for a hello: UINT32_MAX for no limit, never for a real one. */
static uint32_t zc_room_units(uint64_t bytes, unsigned shift) {
    if (bytes == UINT64_MAX) return UINT32_MAX;
    return bytes >> shift >= UINT32_MAX ? UINT32_MAX - 1u : (uint32_t)(bytes >> shift);
}

/* spin_polls auto: with more ranks on this host than CPUs they may run on together (the union
 * of their CPU sets: ranks pinned to a core each are not crowded, ranks confined to fewer CPUs
 * than there are of them are), a rank that spins only delays the one that has to run: yield
 * after every empty poll. Where a rank's set is unknown, this rank's own CPU count stands in. */
static void zc_auto_spin(zc_comm *c, const zc_hello *all) {
    uint64_t any[ZC_PLAT_CPU_WORDS] = {0};
    uint32_t local = 0, cpus = zc_plat_cpus(NULL);
    bool known = true;
    for (uint32_t r = 0; r < c->nranks; r++) {
        if (all[r].host != all[c->rank].host) continue;
        uint64_t seen = 0;
        for (uint32_t w = 0; w < ZC_PLAT_CPU_WORDS; w++) {
            any[w] |= all[r].cpus[w];
            seen |= all[r].cpus[w];
        }
        known = known && seen;
        local++;
    }
    if (known) {
        cpus = 0;
        for (uint32_t w = 0; w < ZC_PLAT_CPU_WORDS; w++)
            for (uint64_t v = any[w]; v; v &= v - 1u) cpus++;
    }
    zc__set_spin(c, cpus && local > cpus ? 1u : ZC_DEFAULT_SPIN_POLLS);
}

static zc_status zc_check_hellos(zc_comm *c, const zc_hello *all, const char *host_why) {
    for (uint32_t r = 0; r < c->nranks; r++) {
        if (all[r].host && !all[r].place) {
            if (r == c->rank) zc__fmt(c->err, sizeof c->err, "%s", host_why);
            else zc__fmt(c->err, sizeof c->err, "rank %u's ZC_HOST_ID is unusable (its own error "
                         "says why)", r);
            return ZC_INVALID_ARG;
        }
        if (all[r].host) continue;
        if (r == c->rank)
            zc__fmt(c->err, sizeof c->err, "cannot read this host's identity (hostname and boot "
                    "id): %s; without it no rank can tell which wire reaches it", host_why);
        else
            zc__fmt(c->err, sizeof c->err, "rank %u cannot read its host's identity (its own "
                    "error says why), so no rank can tell which wire reaches it", r);
        return ZC_SYSTEM;
    }
    for (uint32_t r = 1; r < c->nranks; r++) {
        if (all[r].transport != all[0].transport) {
            zc__fmt(c->err, sizeof c->err, "rank %u asks for transport %s but rank 0 for %s: "
                    "every rank needs the same ZC_TRANSPORT", r,
                    zc_transport_name(all[r].transport), zc_transport_name(all[0].transport));
            return ZC_MISMATCH;
        }
        if (all[r].slots != all[0].slots || all[r].slot_bytes != all[0].slot_bytes) {
            zc__fmt(c->err, sizeof c->err, "rank %u has slots=%u slot_bytes=%u but rank 0 has "
                    "slots=%u slot_bytes=%u: every rank needs the same ring geometry", r,
                    all[r].slots, all[r].slot_bytes, all[0].slots, all[0].slot_bytes);
            return ZC_MISMATCH;
        }
        if (all[r].gpu != all[0].gpu) {
            zc__fmt(c->err, sizeof c->err, "rank %u has gpu provider/path settings 0x%x but rank "
                    "0 has 0x%x (1 = a provider, then gpu_provider << 4, gpu_path << 8): every "
                    "rank needs the same cfg->gpu_provider, gpu_path and whether gpu_device is "
                    "-2", r, all[r].gpu, all[0].gpu);
            return ZC_MISMATCH;
        }
        if (all[r].overlay != all[0].overlay) {
            zc__fmt(c->err, sizeof c->err, "rank %u has overlay_min_ranks=%u but rank 0 has %u: "
                    "every rank needs the same (it decides which ranks connect)", r,
                    all[r].overlay, all[0].overlay);
            return ZC_MISMATCH;
        }
        if (all[r].relay != all[0].relay) {
            zc__fmt(c->err, sizeof c->err, "rank %u has overlay_relay=%u but rank 0 has %u: "
                    "every rank needs the same (it decides the wire's lanes)", r, all[r].relay,
                    all[0].relay);
            return ZC_MISMATCH;
        }
        if (all[r].sym_pages != all[0].sym_pages) {
            zc__fmt(c->err, sizeof c->err, "rank %u has sym_bytes=%llu but rank 0 has %llu: "
                    "every rank needs the same symmetric region", r,
                    (unsigned long long)all[r].sym_pages << 12,
                    (unsigned long long)all[0].sym_pages << 12);
            return ZC_MISMATCH;
        }
    }
    return ZC_OK;
}

/* After the wire is up: whether its streams may be written in place (engine.h). */
static void zc_open_place(zc_comm *c) {
    c->put_min = c->wire->put_min && c->wire->put && c->wire->put_done && c->wire->mem_register
                     ? c->wire->put_min(c->wire_state) : 0;
    c->placed_bytes = 0;
}

void zc__open_live(zc_comm *c) {
    zc_open_place(c);
    c->magic = ZC_COMM_MAGIC;
}

/* The device state (gpu_mem.c). Where its path needs every rank's record, they are
 * all-gathered over the bootstrap (twice for the ipc decision), which every rank still holds: a fault of the new wire (a
 * wrong key) cannot make the ranks' verdicts differ. A failure closes the device state and the
 * wire (comm->err says why). */
static zc_status zc_open_device(zc_comm *c, zc__boot *b) {
    bool gather;
    zc_status st = zc__gpu_open(c, &gather);
    if (st == ZC_OK && !gather) return ZC_OK;
    for (uint32_t round = 0; st == ZC_OK && gather; round++) { /* at most two */
        ZC_ASSERT(round < 2u);
        zc__gpu_peer *all = c->gpu_area->peers, mine = all[c->rank];
        st = zc__boot_allgather(b, &mine, all, sizeof mine);
        if (st == ZC_OK) st = zc__gpu_path(c, &gather);
    }
    if (st == ZC_OK) return ZC_OK;
    zc__gpu_close(c);
    c->wire->close(c->wire_state);
    return st;
}

/* What every rank tells the others once it tried to reach its peers: its status and, when it
 * failed, its sentence (cut to fit), so that init ends with one verdict on every rank. */
typedef struct zc_outcome {
    int32_t status;
    uint32_t step; /* where it failed: 1 create, 2 reaching the peers; 0 not at all */
    uint32_t rank;
    char text[180];
} zc_outcome;
_Static_assert(sizeof(zc_outcome) <= ZC_BOOT_REDUCE_MAX, "an outcome goes through reduce");

/* The reduce's fold: the failure of the earliest step, then of the lowest rank. */
static void zc_first_failure(void *ctx, void *acc, const void *in) {
    zc_outcome *a = acc;
    const zc_outcome *b = in;
    (void)ctx;
    if (b->status == ZC_OK) return;
    if (a->status == ZC_OK || b->step < a->step || (b->step == a->step && b->rank < a->rank))
        __builtin_memcpy(a, b, sizeof *a);
}

/* Every rank's outcome reduced over the bootstrap tree: the status and sentence of the rank
 * that failed first (the earliest step, then the lowest rank: a create failure explains the
 * attach failures it causes) become this rank's, so no rank returns ZC_OK from an init another
 * rank failed. */
static zc_status zc_agree(zc_comm *c, zc__boot *b, zc_status mine, uint32_t step) {
    zc_outcome me = {(int32_t)mine, mine != ZC_OK ? step : 0u, c->rank, {0}}, first;
    if (mine != ZC_OK) zc__strlcpy(me.text, c->err, sizeof me.text);
    zc_status st = zc__boot_reduce(b, &me, &first, sizeof me, zc_first_failure, 0);
    if (st != ZC_OK) return mine != ZC_OK ? mine : st;
    if (first.status == ZC_OK) return ZC_OK;
    if (first.rank != c->rank) {
        first.text[sizeof first.text - 1] = '\0';
        zc__fmt(c->err, sizeof c->err, "rank %u could not set up the wire (%s): %s", first.rank,
                zc_status_name((zc_status)first.status), first.text);
    }
    return (zc_status)first.status;
}

/* The sparse exchange's need (bootstrap.h): rank r's connections, from every rank's place. */
typedef struct zc_need_ctx {
    const zc_comm *c;
    const uint32_t *first, *next; /* each rank's place's ranks (zc__link_keys) */
} zc_need_ctx;

static uint32_t zc_need(void *ctx, uint32_t r, uint32_t *out, uint32_t cap) {
    const zc_need_ctx *x = ctx;
    return zc__conn_set(x->c, x->first, x->next, r, out, cap);
}

/* The address blobs (ab bytes each) into c->addrs in connection order (c->conn_peer's, as
 * attach reads them): in overlay mode the connections' only by the sparse exchange, in rounds
 * of the window the arena's scratch holds; else every rank's (a full mesh: rank order). */
static zc_status zc_exchange_addrs(zc_comm *c, zc__boot *b, const zc_hello *all, size_t ab) {
    uint8_t *mine = c->addrs + (size_t)c->conn[c->rank] * ab;
    if (!zc__overlay(&c->cfg)) return zc__boot_allgather(b, mine, c->addrs, ab);
    zc__init_scratch_map m;
    (void)zc__init_scratch(&c->cfg, c->addr_bytes, &m);
    uint32_t *first = (uint32_t *)(void *)(c->scratch + m.first);
    uint32_t *next = (uint32_t *)(void *)(c->scratch + m.next);
    uint32_t *order = (uint32_t *)(void *)(c->scratch + m.work); /* then the window */
    zc__sort_by_key(&all[0].place, sizeof *all, c->nranks, order);
    zc__link_keys(&all[0].place, sizeof *all, c->nranks, order, first, next);
    zc_need_ctx x = {c, first, next};
    return zc__boot_sparse(b, mine, c->addrs, ab, zc_need, &x, c->scratch + m.work,
                           zc__addr_window(&c->cfg, c->addr_bytes)); /* verdicts come later */
}

/* Wire setup between processes, synchronised through the bootstrap: create, exchange the
 * address blobs (or just meet), attach, agree on the outcome, seal. pre: a failure this rank
 * met before (its sentence in comm->err): it creates nothing but still joins every exchange,
 * so every rank ends with that verdict instead of waiting for it. all: every rank's hello. */
static zc_status zc_open_wire(zc_comm *c, zc__boot *b, const zc_hello *all, zc_status pre) {
    zc_wire_geom g = zc__geom(c, c->comm_id, 0);
    size_t ab = c->wire->addr_bytes(&g);
    ZC_ASSERT(ab <= c->addr_bytes && ab <= ZC_BOOT_MAX_BLOB);
    uint8_t *mine = ab ? c->addrs + (size_t)c->conn[c->rank] * ab : 0;
    if (pre == ZC_OK && c->wire == &zc__wire_hier)
        zc__hier_prepare(c->wire_state, &g, &all[0].place, sizeof *all, c->hier_cap[0],
                         c->hier_cap[1]);
    zc_status st = pre != ZC_OK ? pre
                                : c->wire->create(c->wire_state, &g, 0, mine, c->err,
                                                  sizeof c->err);
    uint32_t step = 1;
    uint8_t failed = 0xff; /* a rank whose create failed publishes a blob of 0xff bytes */
    if (st != ZC_OK && ab) __builtin_memset(mine, failed, ab);
    zc_status sync = ab ? zc_exchange_addrs(c, b, all, ab) : zc__boot_barrier(b);
    if (st == ZC_OK && sync != ZC_OK) { /* the bootstrap failed: no verdict to share */
        c->wire->close(c->wire_state);
        return sync;
    }
    if (st == ZC_OK) {
        step = 2;
        st = c->wire->attach(c->wire_state, ab ? c->addrs : 0, c->err, sizeof c->err);
    }
    bool made = pre == ZC_OK;
    st = zc_agree(c, b, st, step); /* everyone attached or knows who did not: seal */
    if (st == ZC_OK) c->wire->seal(c->wire_state);
    else if (made) c->wire->close(c->wire_state);
    return st;
}

/* Rank 0 of a job whose secret was derived from public launcher values says so, once per
 * process: such a job is open to any process that reaches its rendezvous address. */
static void zc_warn_derived(const zc_config *cfg) {
    static uint32_t warned;
    char line[ZC_ERROR_TEXT_BYTES];
    if (cfg->rank != 0 || cfg->nranks < 2 || !zc__secret_derived(cfg) ||
        __atomic_exchange_n(&warned, 1u, __ATOMIC_RELAXED))
        return;
    zc__fmt(line, sizeof line, "the job secret is derived from public launcher values (the "
            "rendezvous address %s, the launcher's job id): any process that reaches that "
            "address can join this job as a rank; give the job a secret of its own with "
            "ZC_SECRET or ZC_SECRET_FILE (docs/security.md)", cfg->root_addr);
    zc_plat_log(ZC_PLAT_LOG_WARN, line);
}

zc_status zc_comm_init(const zc_config *cfg, void *arena, size_t arena_bytes,
                       zc_comm **comm_out) {
    zc_comm *c = 0;
    if (!comm_out) {
        zc__set_init_error("comm_out is NULL");
        return ZC_INVALID_ARG;
    }
    *comm_out = 0;
    char err[ZC_ERROR_TEXT_BYTES];
    zc_status st = zc__carve(cfg, arena, arena_bytes, &c, err);
    if (st != ZC_OK) {
        zc__set_init_error("%s", err);
        return st;
    }
    if (cfg->transport == ZC_TRANSPORT_INPROC) {
        zc__set_init_error("cfg->transport is ZC_TRANSPORT_INPROC: use zc_comm_init_inproc");
        return ZC_INVALID_ARG;
    }
    zc_warn_derived(cfg);
    zc__init_scratch_map m;
    (void)zc__init_scratch(cfg, c->addr_bytes, &m);
    zc__boot *boot = (zc__boot *)(void *)c->scratch; /* too large for small stacks */
    zc_hello *all = (zc_hello *)(void *)(c->scratch + m.hellos);
    uint64_t deadline = zc__deadline_after(zc_plat_now_ns(), c->cfg.init_timeout_ns);
    uint64_t *where = (uint64_t *)(void *)(c->scratch + m.where); /* rank 0's table */
    st = zc__boot_open(boot, cfg, where, deadline, c->err, sizeof c->err);
    if (st != ZC_OK) {
        zc__set_init_error("%s", c->err);
        return st;
    }
    char host_why[128] = "";
    zc_plat_room room, none = {UINT64_MAX, UINT64_MAX, ZC_PLAT_ROOM_UNKNOWN, 0};
    if (zc_plat_mem_room(&room) != ZC_PLAT_OK) room = none; /* nothing checked */
    uint64_t host = zc_host_hash(host_why, sizeof host_why);
    zc_hello mine = {0, host, host ? zc_place_hash(host, host_why, sizeof host_why) : 0,
                     cfg->overlay_min_ranks, (uint32_t)zc_plat_process_id(), cfg->slots,
                     cfg->slot_bytes,
                     (uint32_t)cfg->transport, (uint32_t)(cfg->sym_bytes >> 12),
                     zc_gpu_word(cfg), zc_room_units(room.avail_bytes, 20),
                     zc_room_units(room.lock_bytes, 10), cfg->overlay_relay, {0}};
    if (zc_plat_random(&mine.nonce, sizeof mine.nonce) != ZC_PLAT_OK) mine.nonce = mine.pid;
    (void)zc_plat_cpus(mine.cpus);
    st = zc__boot_allgather(boot, &mine, all, sizeof mine);
    uint32_t *order = (uint32_t *)(void *)(c->scratch + m.work); /* the ranks by host */
    if (st == ZC_OK) st = zc_check_hellos(c, all, host_why);
    if (st == ZC_OK) zc__sort_by_key(&all[0].host, sizeof *all, cfg->nranks, order);
    if (st == ZC_OK) st = zc_pick_wire(c, all, order);
    zc_status conns = ZC_OK; /* a failure every rank must hear of (zc_open_wire) */
    if (st == ZC_OK) {
        c->place = all[c->rank].place;
        if (!zc__conn_fill(c, &all[0].place, sizeof *all)) conns = ZC_INVALID_ARG;
        zc__host_blocks(c, &all[0].place, sizeof *all);
        if (conns == ZC_OK && c->wire == &zc__wire_hier)
            conns = zc__hier_caps(c, &all[0].place, &all[0].host, sizeof *all);
    }
    if (st == ZC_OK && conns == ZC_OK) st = zc_check_room(c, all, order);
    if (st == ZC_OK && !cfg->spin_polls) zc_auto_spin(c, all);
    if (st == ZC_OK) {
        c->comm_id = zc__siphash(cfg->secret, &all[0].nonce, sizeof all[0].nonce);
        st = zc_open_wire(c, boot, all, conns);
    }
    if (st == ZC_OK) st = zc_open_device(c, boot);
    zc__boot_close(boot);
    if (st != ZC_OK) {
        zc__set_init_error("%s", c->err);
        return st;
    }
    zc__open_live(c);
    *comm_out = c;
    return ZC_OK;
}

/* Rank r's simulated host in an in-process group: hosts[r] (a split's children keep their
 * parents'), else its number under cfg->inproc_ranks_per_host, plus 1 (a host hash is never
 * 0); and the lowest rank on that host (zc_comm_node). */
static void zc_inproc_host(const zc_config *cfg, const uint64_t *hosts, uint32_t n,
                           uint32_t r, zc_comm *c) {
    uint32_t k = cfg->inproc_ranks_per_host && cfg->inproc_ranks_per_host < n
                     ? cfg->inproc_ranks_per_host : n;
    if (!hosts) {
        c->host = c->place = (uint64_t)(r / k) + 1u;
        c->node = r / k * k;
        return;
    }
    uint32_t q = 0;
    while (hosts[q] != hosts[r]) q++; /* ends at r at the latest */
    c->host = c->place = hosts[r];
    c->node = q;
}

/* Builds an in-process group of n ranks over arenas[], each with cfg's sizes; hosts: each
 * rank's host (NULL: cfg->inproc_ranks_per_host's). */
zc_status zc__inproc_group(const zc_config *cfg, uint32_t n, void *const arenas[],
                           size_t arena_bytes, zc_comm *comms[], uint64_t comm_id,
                           const uint64_t *hosts) {
    void **windows = 0; /* [n] in rank 0's scratch */
    zc_config rc = *cfg;
    rc.nranks = n;
    for (uint32_t r = 0; r < n; r++) {
        rc.rank = r;
        char err[ZC_ERROR_TEXT_BYTES];
        zc_status st = zc__carve(&rc, arenas[r], arena_bytes, &comms[r], err);
        if (st != ZC_OK) {
            zc__set_init_error("%s", err);
            return st;
        }
        if (r == 0) windows = (void **)(void *)comms[0]->scratch;
        windows[r] = comms[r]->window;
        comms[0]->group[r] = comms[r];
        comms[r]->group = comms[0]->group;
        comms[r]->group_wake = comms[0]->group_wake;
        zc_inproc_host(&rc, hosts, n, r, comms[r]);
    }
    for (uint32_t r = 0; hosts && zc__overlay(&rc) && r < n; r++) /* the parents' hosts */
        if (!zc__conn_fill(comms[r], hosts, sizeof *hosts)) {
            zc__set_init_error("%s", comms[r]->err);
            return ZC_INVALID_ARG;
        }
    if (hosts) zc__host_blocks(comms[0], hosts, sizeof *hosts); /* the same for every rank */
    for (uint32_t r = 1; hosts && r < n; r++) comms[r]->hblock = comms[0]->hblock;
    for (uint32_t r = 0; r < n; r++) {
        zc_comm *c = comms[r];
        zc_wire_geom g = zc__geom(c, comm_id, windows);
        g.inproc_wake = c->group_wake;
        g.inproc_alarms = (uint64_t *)(void *)((uint8_t *)c->group + zc__group_alarms_at(n));
        c->comm_id = comm_id;
        zc_status st = c->wire->create(c->wire_state, &g, c->window, 0, c->err, sizeof c->err);
        if (st != ZC_OK) {
            zc__set_init_error("%s", c->err);
            return st;
        }
    }
    for (uint32_t r = 0; r < n; r++) {
        zc_comm *c = comms[r];
        zc_status st = c->wire->attach(c->wire_state, 0, c->err, sizeof c->err);
        if (st != ZC_OK) {
            zc__set_init_error("%s", c->err);
            return st;
        }
        bool gather;
        st = zc__gpu_open(c, &gather);
        if (st != ZC_OK) { /* gpu_path direct: the in-process wire has no puts */
            zc__set_init_error("%s", c->err);
            return st;
        }
        ZC_ASSERT(!gather);
        zc__open_live(c);
    }
    return ZC_OK;
}

zc_status zc_comm_init_inproc(const zc_config *cfg, void *const arenas[], size_t arena_bytes,
                              zc_comm *comms[]) {
    if (!cfg || !arenas || !comms) {
        zc__set_init_error("%s is NULL", !cfg ? "cfg" : !arenas ? "arenas" : "comms");
        return ZC_INVALID_ARG;
    }
    if (cfg->transport != ZC_TRANSPORT_INPROC) {
        zc__set_init_error("cfg->transport must be ZC_TRANSPORT_INPROC for zc_comm_init_inproc "
                           "(and zc_comm_arena_bytes must see it)");
        return ZC_INVALID_ARG;
    }
    uintptr_t where = (uintptr_t)arenas[0]; /* distinct for every live group */
    uint64_t id = zc__siphash(cfg->secret, &where, sizeof where);
    return zc__inproc_group(cfg, cfg->nranks, arenas, arena_bytes, comms, id, 0);
}

zc_status zc_comm_abort(zc_comm *comm) {
    if (!zc__comm_ok(comm)) return ZC_INVALID_ARG;
    zc__lock(comm);
    zc__abort(comm);
    zc__unlock(comm);
    return ZC_OK;
}

zc_status zc_comm_fini(zc_comm *comm) {
    if (!zc__comm_ok(comm)) return ZC_INVALID_ARG;
    zc__lock(comm); /* a call still inside (another thread's) ends first */
    zc_status st = zc__binds_fini(comm); /* no stream may still write or wait on our flags */
    if (st != ZC_OK) {
        zc__unlock(comm);
        return st;
    }
    /* The peers' last messages credited: a wire's close may wait for that (transport_ib).
     * Not in-process: there a peer's window is in its arena, which a peer already finished
     * may have handed back to its caller, and nothing waits at close. */
    if (!comm->window) zc__rx_credit_all(comm);
    for (uint32_t i = 0; i < comm->cfg.max_mems; i++) /* before the wire's teardown */
        if (comm->mems[i].mr.handle) comm->wire->mem_deregister(comm->wire_state,
                                                                &comm->mems[i].mr);
    zc__gpu_close(comm);
    /* Every call finished: a peer still in one of them (slower, waiting on another rank) will
     * not count this rank's exit as a loss (progress.c, zc_peer_gone). */
    if (!comm->failed && !comm->nreqs_active && comm->wire->closing)
        comm->wire->closing(comm->wire_state, comm->seq);
    comm->wire->close(comm->wire_state);
    comm->magic = 0;
    zc__unlock(comm);
    return ZC_OK;
}

/* ---- memory registration ---- */

/* Whether the NIC may pin bytes more of this process's memory: its RLIMIT_MEMLOCK less what
 * is pinned already (zc_plat_mem_room), a sentence with the numbers otherwise, before the
 * registration is tried. */
static zc_status zc_lockable(zc_comm *comm, size_t bytes) {
    zc_plat_room room;
    char want[24], left[24];
    if (zc_plat_mem_room(&room) != ZC_PLAT_OK || bytes <= room.lock_bytes) return ZC_OK;
    zc__fmt_bytes(want, sizeof want, bytes);
    zc__fmt_bytes(left, sizeof left, room.lock_bytes);
    return zc__error(comm, ZC_LIMIT, "zc_mem_register: the NIC would pin %s, but this process's "
                     "RLIMIT_MEMLOCK (ulimit -l) leaves %s: raise it (ulimit -l unlimited) or "
                     "register less", want, left);
}

static zc_status zc_mem_register_locked(zc_comm *comm, void *addr, size_t bytes,
                                        zc_mem_kind kind, zc_mem **mem_out) {
    zc__calls_forget(comm); /* a registration can change a call's schedule */
    if (!addr || !bytes || !mem_out)
        return zc__error(comm, ZC_INVALID_ARG, "zc_mem_register: %s",
                         !addr ? "addr is NULL" : !bytes ? "bytes is 0" : "mem_out is NULL");
    if (kind != ZC_MEM_HOST && kind != ZC_MEM_CUDA)
        return zc__error(comm, ZC_INVALID_ARG, "zc_mem_register: kind %u is not a zc_mem_kind",
                         (unsigned)kind);
    if ((uintptr_t)addr + bytes < (uintptr_t)addr)
        return zc__error(comm, ZC_INVALID_ARG, "zc_mem_register: addr + bytes wraps around");
    if (kind == ZC_MEM_CUDA) return zc__gpu_mem_register(comm, addr, bytes, mem_out);
    uint32_t i;
    zc_status st = zc__mem_take(comm, &i);
    if (st != ZC_OK) return st;
    zc__mem_entry *e = &comm->mems[i];
    if (comm->wire->mem_register && comm->put_min) { /* the wire writes into it */
        char why[160];
        if ((st = zc_lockable(comm, bytes)) != ZC_OK) return st;
        st = comm->wire->mem_register(comm->wire_state, addr, bytes, ZC_MEM_HOST, -1, 0, &e->mr,
                                      why, sizeof why);
        if (st != ZC_OK) return zc__error(comm, st, "zc_mem_register: %s", why);
    }
    *mem_out = zc__mem_fill(e, addr, bytes, ZC_MEM_HOST);
    return ZC_OK;
}

zc_status zc_mem_register(zc_comm *comm, void *addr, size_t bytes, zc_mem_kind kind,
                          zc_mem **mem_out) {
    ZC_LOCKED(comm, zc_mem_register_locked(comm, addr, bytes, kind, mem_out));
}

/* ZC_IN_PROGRESS with *req: a shared CUDA registration waits for its peers (zc_mem_deregister
 * finishes it). */
static zc_status zc_mem_deregister_locked(zc_comm *comm, zc_mem *mem, zc_req *req) {
    zc__mem_entry *e = (zc__mem_entry *)(void *)mem;
    zc__calls_forget(comm);
    if (!mem || e < comm->mems || e >= comm->mems + comm->cfg.max_mems || !e->addr)
        return zc__error(comm, ZC_INVALID_ARG, "zc_mem_deregister: mem is not a registration "
                         "of this communicator");
    if (e->kind == ZC_MEM_CUDA) {
        zc_status st = zc__gpu_mem_deregister(comm, e, req);
        if (st != ZC_OK) return st;
    }
    if (e->mr.handle) comm->wire->mem_deregister(comm->wire_state, &e->mr);
    e->addr = 0;
    e->bytes = 0;
    return ZC_OK;
}

zc_status zc_mem_deregister(zc_comm *comm, zc_mem *mem) {
    zc_req req;
    if (!zc__comm_ok(comm)) return ZC_INVALID_ARG;
    zc__lock(comm);
    zc_status st = zc_mem_deregister_locked(comm, mem, &req);
    zc__unlock(comm);
    if (st != ZC_IN_PROGRESS) return st;
    st = zc_wait(comm, &req); /* every peer unmapped this rank's buffer (or the deadline) */
    zc__mem_entry *e = (zc__mem_entry *)(void *)mem;
    zc__lock(comm);
    zc__gpu_mem_closed(comm, e);
    if (e->mr.handle) comm->wire->mem_deregister(comm->wire_state, &e->mr);
    e->addr = 0;
    e->bytes = 0;
    zc__unlock(comm);
    return st;
}
