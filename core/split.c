/* split.c: zc_comm_split and zc_comm_split_inproc: children of a communicator, built from
 * comm.c's pieces (carve, wire setup, in-process group) and agreed over the parent with its
 * own collectives. The one core file that calls the public collectives; nothing calls it.
 * Its scratch is the parent's (engine.h: ZC_SCRATCH_RANK_BYTES), nothing static. */
#include "bootstrap.h"
#include "device.h"

/* Child rank and size for color/key among all[] = {color, key} per parent rank. */
static void zc_child_place(const int32_t *all, uint32_t n, uint32_t me, uint32_t *rank,
                           uint32_t *size) {
    *rank = *size = 0;
    for (uint32_t p = 0; p < n; p++) {
        if (all[2 * p] != all[2 * me]) continue;
        (*size)++;
        if (all[2 * p + 1] < all[2 * me + 1] || (all[2 * p + 1] == all[2 * me + 1] && p < me))
            (*rank)++;
    }
}

static uint64_t zc_child_id(const zc_comm *parent, int32_t color) {
    uint64_t words[3] = {parent->comm_id, parent->splits, (uint64_t)(uint32_t)color};
    return zc__siphash(parent->cfg.secret, words, sizeof words);
}

static bool zc_split_needs_addrs(const zc_comm *parent) {
    zc_wire_geom g = zc__geom(parent, parent->comm_id, 0);
    return parent->wire->addr_bytes(&g) > 0; /* same wire everywhere: same answer */
}

/* This rank's child's wire and host number: every parent rank's {host, place} all-gathered
 * over the parent (into its scratch after all[]), then whether all of this rank's color share
 * its host (*one_host), the lowest child rank on its host (*node), and its members' places in
 * child rank order at *places (the scratch after those; a child in overlay mode connects by
 * them). */
static zc_status zc_split_hosts(zc_comm *parent, const int32_t *all, bool *one_host,
                                uint32_t *node, uint64_t **places) {
    uint64_t *hosts = (uint64_t *)(void *)(parent->scratch + 8u * parent->nranks);
    uint64_t mine[2] = {parent->host, parent->place};
    zc_req req;
    zc_status st = zc_allgather(parent, mine, hosts, 2, ZC_UINT64, &req);
    if (st == ZC_OK) st = zc_wait(parent, &req);
    *one_host = true;
    *node = UINT32_MAX;
    *places = hosts + 2u * parent->nranks;
    for (uint32_t p = 0; p < parent->nranks && st == ZC_OK; p++) {
        uint32_t rank, size;
        if (all[2 * p] != all[2 * parent->rank]) continue;
        zc_child_place(all, parent->nranks, p, &rank, &size);
        (*places)[rank] = hosts[2u * p + 1u];
        if (hosts[2u * p] != parent->host) *one_host = false;
        else if (rank < *node) *node = rank;
    }
    return st;
}

/* Whether the n places at places are all one. */
static bool zc_one_place(const uint64_t *places, uint32_t n) {
    for (uint32_t r = 1; r < n; r++)
        if (places[r] != places[0]) return false;
    return true;
}

/* Gives every child its members' address blobs over the parent: each parent rank broadcasts
 * its blob in turn (sizes first, as they differ between colors); members of the same color
 * keep it at the sender's connection index (when it is one). all[] holds {color, key} per
 * parent rank. */
static zc_status zc_split_exchange(zc_comm *parent, const int32_t *all, zc_comm *c,
                                   size_t ab) {
    uint64_t *sizes = (uint64_t *)(void *)(parent->scratch + 8u * parent->nranks);
    uint8_t *scratch = parent->scratch + 16u * parent->nranks; /* parent->addr_bytes */
    uint64_t mine = c ? ab : 0;
    zc_req req;
    zc_status st = zc_allgather(parent, &mine, sizes, 1, ZC_UINT64, &req);
    if (st == ZC_OK) st = zc_wait(parent, &req);
    for (uint32_t p = 0; p < parent->nranks && st == ZC_OK; p++) {
        if (!sizes[p]) continue;
        if (sizes[p] > parent->addr_bytes)
            return zc__error(parent, ZC_MISMATCH, "zc_comm_split: rank %u's wire address is "
                             "%llu bytes", p, (unsigned long long)sizes[p]);
        uint32_t prank, psize;
        zc_child_place(all, parent->nranks, p, &prank, &psize);
        bool keep = c && all[2 * p] == all[2 * parent->rank] && sizes[p] == ab &&
                    c->conn[prank] != ZC_NO_CONN;
        uint8_t *buf = keep ? c->addrs + (size_t)c->conn[prank] * ab : scratch;
        st = zc_broadcast(parent, buf, buf, sizes[p], ZC_UINT8, p, &req);
        if (st == ZC_OK) st = zc_wait(parent, &req);
    }
    return st;
}

/* The child's device state (gpu_mem.c); where its path needs every member's record, every
 * parent rank joins an all_gather of them over the parent (a rank whose child needs none gives
 * an empty one), and members keep their color's at the sender's child rank; the ipc decision
 * takes two such rounds, which every parent rank joins too. c: this rank's child, NULL for a
 * non-member. The parent's scratch holds {color, key} per rank, then the records. */
static zc_status zc_split_device(zc_comm *parent, const int32_t *all, zc_comm *c) {
    zc__gpu_peer *recs = (zc__gpu_peer *)(void *)(parent->scratch + 8u * parent->nranks);
    bool gathers = zc__gpu_gathers(parent), gather = false, more = false;
    zc_status st = c ? zc__gpu_open(c, &gather) : ZC_OK;
    /* A child gathers only where its parent does (a child of a parent that needs no records
     * needs none either), so every parent rank joins when the parent would. */
    ZC_ASSERT(!gather || gathers);
    if (!gathers) return st;
    for (uint32_t round = 0; round < 2u; round++) {
        zc__gpu_peer mine = {0};
        mine.no = ZC_LAND_NO_DEVICE;
        if (gather) mine = c->gpu_area->peers[c->rank];
        zc_req req;
        zc_status sync = zc_allgather(parent, &mine, recs, sizeof mine, ZC_UINT8, &req);
        if (sync == ZC_OK) sync = zc_wait(parent, &req);
        if (st == ZC_OK && sync != ZC_OK && c)
            zc__fmt(c->err, sizeof c->err, "the exchange of device records over the parent "
                    "failed: %s", parent->err);
        if (st == ZC_OK && sync != ZC_OK) st = sync;
        if (st == ZC_OK && gather) {
            for (uint32_t p = 0; p < parent->nranks; p++) {
                uint32_t rank, size;
                if (all[2 * p] != all[2 * parent->rank]) continue;
                zc_child_place(all, parent->nranks, p, &rank, &size);
                c->gpu_area->peers[rank] = recs[p];
            }
            st = zc__gpu_path(c, &more);
        }
        gather = gather && more && st == ZC_OK;
        /* A second round happens when any rank's child asks for one: the parent's ranks agree
         * by a max over one flag. */
        uint32_t want = gather, any = 0;
        sync = zc_allreduce(parent, &want, &any, 1, ZC_UINT32, ZC_MAX, &req);
        if (sync == ZC_OK) sync = zc_wait(parent, &req);
        if (sync != ZC_OK) return st != ZC_OK ? st : sync;
        if (!any) break;
    }
    return st;
}

/* A split uses its parent's scratch from start to end: a second one on the same parent at the
 * same time (another thread's) is refused, never interleaved. True when this one may run. */
static bool zc_split_claim(zc_comm *parent, const char *who) {
    if (!__atomic_exchange_n(&parent->splitting, 1u, __ATOMIC_ACQUIRE)) return true;
    zc__lock(parent);
    (void)zc__error(parent, ZC_INVALID_STATE, "%s: another split of this communicator is "
                    "running (one at a time per parent)", who);
    zc__unlock(parent);
    zc__set_init_error("%s: another split of this communicator is running (one at a time per "
                       "parent)", who);
    return false;
}

static void zc_split_release(zc_comm *parent) {
    __atomic_store_n(&parent->splitting, 0u, __ATOMIC_RELEASE);
}

static zc_status zc_split(zc_comm *parent, int color, int key, void *arena, size_t arena_bytes,
                          zc_comm **child_out) {
    int32_t *all = (int32_t *)(void *)parent->scratch; /* [2 * nranks] {color, key} */
    if (parent->cfg.transport == ZC_TRANSPORT_INPROC)
        return zc__error(parent, ZC_INVALID_ARG, "zc_comm_split on an in-process group: use "
                         "zc_comm_split_inproc");
    *child_out = 0;
    int32_t mine[2] = {color < 0 ? -1 : color, key};
    zc_req req;
    zc_status st = zc_allgather(parent, mine, all, 2, ZC_INT32, &req);
    if (st == ZC_OK) st = zc_wait(parent, &req);
    bool one_host;
    uint32_t node;
    uint64_t *places;
    if (st == ZC_OK) st = zc_split_hosts(parent, all, &one_host, &node, &places);
    if (st != ZC_OK) return st;
    uint64_t id = zc_child_id(parent, mine[0]);
    parent->splits++;
    zc_comm *c = 0;
    size_t ab = 0;
    char err[ZC_ERROR_TEXT_BYTES]; /* the carve's sentence (after it, the child's own) */
    zc_status local = ZC_OK;
    bool created = false; /* the child's wire exists: close it unless the split succeeds */
    if (color >= 0) {
        zc_config cc = parent->cfg; /* its transport: the wire the parent picked */
        zc_child_place(all, parent->nranks, parent->rank, &cc.rank, &cc.nranks);
        if (one_host && parent->wire_auto) cc.transport = ZC_TRANSPORT_SHM;
        if (cc.transport == ZC_TRANSPORT_HIER && zc_one_place(places, cc.nranks))
            cc.transport = ZC_TRANSPORT_SHM; /* one place: the hier wire's shm instance alone */
        local = zc__carve(&cc, arena, arena_bytes, &c, err);
        if (local == ZC_OK && zc__overlay(&cc) && !zc__conn_fill(c, places, sizeof *places)) {
            zc__strlcpy(err, c->err, sizeof err);
            local = ZC_INVALID_ARG;
        }
        if (local == ZC_OK) zc__host_blocks(c, places, sizeof *places);
        if (local == ZC_OK && c->wire == &zc__wire_hier) {
            c->place = parent->place;
            local = zc__hier_caps(c, places, 0, sizeof *places); /* the parent checked hosts */
        }
        zc_plat_room room, none = {UINT64_MAX, UINT64_MAX, ZC_PLAT_ROOM_UNKNOWN, 0};
        if (local != ZC_OK || zc_plat_mem_room(&room) != ZC_PLAT_OK) room = none;
        if (local == ZC_OK) {
            c->wire_auto = parent->wire_auto;
            c->host = parent->host;
            c->place = parent->place;
            c->node = node;
            c->comm_id = id;
            zc_wire_geom g = zc__geom(c, id, 0);
            if (c->wire == &zc__wire_hier)
                zc__hier_prepare(c->wire_state, &g, places, sizeof *places, c->hier_cap[0],
                                 c->hier_cap[1]);
            ab = c->wire->addr_bytes(&g);
            ZC_ASSERT(ab <= c->addr_bytes && ab <= ZC_WIRE_MAX_ADDR_BYTES);
            /* This rank's own window first; the others check theirs. */
            local = zc__room_check(c, cc.rank, 1, room.avail_bytes, room.lock_bytes);
            if (local == ZC_OK)
                local = c->wire->create(c->wire_state, &g, 0,
                                        ab ? c->addrs + c->conn[cc.rank] * ab : 0, c->err,
                                        sizeof c->err);
            created = local == ZC_OK;
            if (local != ZC_OK && ab) __builtin_memset(c->addrs + c->conn[cc.rank] * ab, 0xff, ab);
        }
    }
    /* Every parent rank joins every sync, member or not, so nobody waits on a missing one. */
    int32_t ok, worst = 0;
    zc_req sync;
    if (zc_split_needs_addrs(parent)) st = zc_split_exchange(parent, all, c, ab);
    else st = ZC_OK;
    if (st == ZC_OK) st = zc_barrier(parent, &sync);
    if (st == ZC_OK) st = zc_wait(parent, &sync);
    if (st == ZC_OK && c && local == ZC_OK) {
        local = c->wire->attach(c->wire_state, ab ? c->addrs : 0, c->err, sizeof c->err);
    }
    ok = local == ZC_OK ? 0 : (int32_t)local;
    if (st == ZC_OK) st = zc_allreduce(parent, &ok, &worst, 1, ZC_INT32, ZC_MIN, &sync);
    if (st == ZC_OK) st = zc_wait(parent, &sync);
    if (st == ZC_OK && worst != 0) st = (zc_status)worst;
    if (st == ZC_OK && c) c->wire->seal(c->wire_state); /* every member attached */
    bool device = false; /* its device step failed: the child's sentence says why */
    if (st == ZC_OK) {
        st = zc_split_device(parent, all, c);
        device = st != ZC_OK && c;
    }
    if (c && local == ZC_OK && st == ZC_OK) {
        zc__open_live(c);
        *child_out = c;
        return ZC_OK;
    }
    if (c && c->gpu) zc__gpu_close(c);
    if (created) c->wire->close(c->wire_state); /* also after a failed attach */
    if (st == ZC_OK) st = local;
    if (local != ZC_OK || device) zc__set_init_error("zc_comm_split: %s", c ? c->err : err);
    else zc__set_init_error("zc_comm_split: another rank failed to set up its child (%s)",
                            zc_status_name(st));
    return st;
}

static zc_status zc_split_inproc(zc_comm *const parents[], const int colors[], const int keys[],
                                 void *const arenas[], size_t arena_bytes, zc_comm *children[]) {
    uint32_t n = parents[0]->nranks;
    int32_t *all = (int32_t *)(void *)parents[0]->scratch; /* [2n] {color, key} */
    void **group_arenas = (void **)(void *)(parents[0]->scratch + 8u * n); /* [n] */
    zc_comm **group = (zc_comm **)(void *)(parents[0]->scratch + 16u * n); /* [n] */
    uint64_t *hosts = (uint64_t *)(void *)(parents[0]->scratch + 24u * n); /* [n] by child rank */
    for (uint32_t p = 0; p < n; p++) {
        all[2 * p] = colors[p] < 0 ? -1 : colors[p];
        all[2 * p + 1] = keys[p];
        children[p] = 0;
    }
    for (uint32_t p = 0; p < n; p++) {
        uint32_t rank, size, first = p;
        if (all[2 * p] < 0) continue;
        for (uint32_t q = 0; q < p; q++)
            if (all[2 * q] == all[2 * p]) first = q;
        if (first != p) continue; /* this color's group was built already */
        for (uint32_t q = p; q < n; q++) {
            if (all[2 * q] != all[2 * p]) continue;
            zc_child_place(all, n, q, &rank, &size);
            group_arenas[rank] = arenas[q];
            hosts[rank] = parents[q]->host;
        }
        zc_status st = zc__inproc_group(&parents[0]->cfg, size, group_arenas, arena_bytes, group,
                                       zc_child_id(parents[0], all[2 * p]), hosts);
        if (st != ZC_OK) return st;
        for (uint32_t q = p; q < n; q++)
            if (all[2 * q] == all[2 * p]) {
                zc_child_place(all, n, q, &rank, &size);
                children[q] = group[rank];
            }
    }
    for (uint32_t p = 0; p < n; p++) parents[p]->splits++;
    return ZC_OK;
}

zc_status zc_comm_split(zc_comm *parent, int color, int key, void *arena, size_t arena_bytes,
                        zc_comm **child_out) {
    if (!zc__comm_ok(parent) || !child_out) return ZC_INVALID_ARG;
    if (!zc_split_claim(parent, "zc_comm_split")) return ZC_INVALID_STATE;
    zc_status st = zc_split(parent, color, key, arena, arena_bytes, child_out);
    zc_split_release(parent);
    return st;
}

zc_status zc_comm_split_inproc(zc_comm *const parents[], const int colors[], const int keys[],
                               void *const arenas[], size_t arena_bytes, zc_comm *children[]) {
    if (!parents || !zc__comm_ok(parents[0]) || !colors || !keys || !arenas || !children) {
        zc__set_init_error("zc_comm_split_inproc: a NULL argument or parents[0] is not a "
                           "communicator");
        return ZC_INVALID_ARG;
    }
    if (!zc_split_claim(parents[0], "zc_comm_split_inproc")) return ZC_INVALID_STATE;
    zc_status st = zc_split_inproc(parents, colors, keys, arenas, arena_bytes, children);
    zc_split_release(parents[0]);
    return st;
}
