/* layout.c: the one function that decides how a communicator is carved from its arena. The
 * size query (zc_comm_arena_bytes) and init both call zc__layout, and init asserts that its
 * carve ends exactly at layout.total. Every region is 64-byte aligned. */
#include "bootstrap.h"
#include "engine.h"

static size_t zc_align64(size_t v) { return (v + 63u) & ~(size_t)63u; }

const zc_wire_ops *zc__wire_for(const zc_config *cfg) {
#ifdef ZC_HAVE_IB
    if (cfg->transport == ZC_TRANSPORT_IB) return &zc_wire_ib;
#else
    (void)cfg; /* without transport_ib every config gets the shm wire */
#endif
    return &zc_wire_shm; /* shm, in-process, AUTO until init knows where the ranks are */
}

/* The wires a communicator with cfg may end up on (AUTO: either); NULL-terminated. */
static void zc_candidates(const zc_config *cfg, const zc_wire_ops *out[3]) {
    out[0] = zc__wire_for(cfg);
    out[1] = 0;
    out[2] = 0;
#ifdef ZC_HAVE_IB
    if (cfg->transport == ZC_TRANSPORT_AUTO) out[1] = &zc_wire_ib;
#endif
}

/* Adds bytes at the current end and returns the region's offset. */
static size_t zc_take(size_t *end, size_t bytes) {
    size_t at = *end;
    *end = zc_align64(at + bytes);
    return at;
}

bool zc__layout(const zc_config *cfg, zc__arena_map *L) {
    if (!zc__config_check(cfg, NULL, 0)) return false;
    const zc_wire_ops *w = zc__wire_for(cfg), *cands[3];
    size_t n = cfg->nranks, end = 0, state = 0, addr = 0;
    L->geom = (zc_wire_geom){0};
    L->geom.rank = cfg->rank;
    L->geom.nranks = cfg->nranks;
    L->geom.slots = cfg->slots;
    L->geom.slot_bytes = cfg->slot_bytes;
    L->geom.stride = ZC_SLOT_HDR_BYTES + cfg->slot_bytes;
    L->geom.cfg = cfg;
    zc_candidates(cfg, cands);
    for (const zc_wire_ops *const *c = cands; *c; c++) {
        size_t sb = (*c)->state_bytes(&L->geom), ab = (*c)->addr_bytes(&L->geom);
        state = sb > state ? sb : state;
        addr = ab > addr ? ab : addr;
    }
    L->addr_bytes = addr;
    L->comm = zc_take(&end, sizeof(zc_comm));
    L->wire_state = zc_take(&end, state);
    L->addrs = zc_take(&end, n * addr); /* every rank's address blob (wires that need them) */
    L->group = zc_take(&end, n * sizeof(zc_comm *));
    L->chans = zc_take(&end, ZC_WIRE_LANES * n * sizeof(zc__chan));
    L->reqs = zc_take(&end, cfg->max_requests * sizeof(zc__req));
    L->bases = zc_take(&end, (size_t)cfg->max_requests * n *
                                 (2u * sizeof(uint64_t) + sizeof(zc__place)));
    L->active = zc_take(&end, cfg->max_requests * sizeof(uint32_t));
    L->plans = zc_take(&end, cfg->max_plans * sizeof(zc__plan));
    L->mems = zc_take(&end, cfg->max_mems * sizeof(zc__mem_entry));
    L->gpu = zc_take(&end, zc__gpu_bytes(cfg)); /* 0 without CUDA (coll_gpu.c carves it) */
    L->scratch = zc_take(&end, (cfg->transport == ZC_TRANSPORT_INPROC ? 0 : sizeof(zc__boot)) +
                                   n * ZC_SCRATCH_RANK_BYTES + addr);
    /* In-process ranks keep their inbound window in the arena; processes map theirs. */
    L->window = zc_take(&end, cfg->transport == ZC_TRANSPORT_INPROC
                                  ? w->window_bytes(&L->geom) : 0);
    L->total = end;
    L->geom.cfg = 0;
    return true;
}

size_t zc_comm_arena_bytes(const zc_config *cfg) {
    zc__arena_map L;
    return zc__layout(cfg, &L) ? L.total : 0;
}
