/* layout.c: the one table of the regions a communicator is carved into from its arena. The
 * size query (zc_comm_arena_bytes), init's carve (comm.c) and the device state's setup
 * (gpu_mem.c) all read it: each row's bytes are computed here once, every region starts
 * 64-byte aligned where the previous one ended, and the total is where the last ends. Also
 * which wire and which gpu provider a configuration gets, as both size rows (and
 * footprint.c's query). */
#include "bootstrap.h"
#include "device.h"

static size_t zc_align64(size_t v) { return (v + 63u) & ~(size_t)63u; }

const zc_wire_ops *zc__wire_for(const zc_config *cfg) {
#ifdef ZC_HAVE_IB
    if (cfg->transport == ZC_TRANSPORT_IB) return &zc_wire_ib;
#endif
    if (cfg->transport == ZC_TRANSPORT_HIER) return &zc__wire_hier;
    return &zc_wire_shm; /* shm, in-process, AUTO until init knows where the ranks are */
}

const zc_gpu_ops *zc__gpu_provider(const zc_config *cfg) {
    if (cfg->gpu_device == -2 || zc__overlay(cfg)) return 0;
#ifdef ZC_HAVE_GPU_SIM
    if (cfg->gpu_provider == ZC_GPU_PROVIDER_SIM) return &zc_gpu_sim;
#else
    if (cfg->gpu_provider == ZC_GPU_PROVIDER_SIM) return 0; /* a freestanding port has none */
#endif
#ifdef ZC_HAVE_CUDA
    return &zc_gpu_cuda;
#else
    return 0;
#endif
}

const char *zc__gpu_absent(const zc_config *cfg) {
    if (zc__overlay(cfg))
        return "overlay mode keeps no device state (the device paths hold tables of every rank)";
    return cfg->gpu_device == -2 ? "cfg->gpu_device is -2 (no GPU state)"
                                 : "this build of zcoll has no CUDA support (configure.py "
                                   "found no nvcc; ZC_GPU_PROVIDER=sim selects the simulated "
                                   "device)";
}

zc_gpu_geom zc__gpu_geometry(const zc_config *cfg) {
    zc_gpu_geom g = {cfg->rank,
                     cfg->nranks,
                     cfg->max_requests,
                     ZC_BIND_FLAGS * cfg->gpu_stream_slots,
                     cfg->gpu_stream_slots,
                     cfg->gpu_device,
                     cfg->gpu_scratch_bytes,
                     0,
                     0};
    return g;
}

/* The device rows: empty without a provider. Per-rank tables are sized for at most
 * ZC_GPU_MAX_SRCS ranks (more ranks run no device collectives, gpu_mem.c says so). */
static void zc_gpu_rows(const zc_config *cfg, size_t bytes[ZC_R_COUNT_]) {
    const zc_gpu_ops *ops = zc__gpu_provider(cfg);
    size_t n = cfg->nranks < ZC_GPU_MAX_SRCS ? cfg->nranks : ZC_GPU_MAX_SRCS;
    size_t mems = cfg->max_mems, reqs = cfg->max_requests;
    zc_gpu_geom g = zc__gpu_geometry(cfg);
    bytes[ZC_R_GPU] = ops ? sizeof(struct zc__gpu) : 0;
    bytes[ZC_R_GPU_STATE] = ops ? ops->state_bytes(&g) : 0;
    bytes[ZC_R_GPU_RECS] = ops ? mems * n * sizeof(zc_gpu_ipc) : 0;
    bytes[ZC_R_GPU_MAPPED] = ops ? mems * n * sizeof(uint8_t *) : 0;
    bytes[ZC_R_GPU_PTRS] = ops ? reqs * 2u * n * sizeof(uint8_t *) : 0;
    bytes[ZC_R_GPU_BINDS] = ops ? cfg->gpu_stream_slots * sizeof(zc__bind) : 0;
    bytes[ZC_R_GPU_PEERS] = ops ? cfg->nranks * sizeof(zc__gpu_peer) : 0; /* every rank's */
    bytes[ZC_R_STAGE] = ops ? sizeof(struct zc__stage) : 0;
    bytes[ZC_R_STAGE_REQS] = ops ? reqs * sizeof(zc__stage_req) : 0;
    bytes[ZC_R_STAGE_P2P] = ops ? reqs * cfg->slot_bytes : 0;
    bytes[ZC_R_STAGE_BUF] = ops ? cfg->gpu_stage_bytes : 0;
}

/* The wires a communicator with cfg may end up on (AUTO between processes: shm or ib);
 * NULL-terminated. */
static void zc_candidates(const zc_config *cfg, const zc_wire_ops *out[3]) {
    out[0] = zc__wire_for(cfg);
    out[1] = out[2] = 0;
#ifdef ZC_HAVE_IB
    if (cfg->transport == ZC_TRANSPORT_AUTO && cfg->nranks > 1) out[1] = &zc_wire_ib;
#endif
}

/* The wire geometry of cfg, and the largest state and address blob of its candidate wires. */
static void zc_wire_sizes(const zc_config *cfg, zc__arena_map *L, size_t *state) {
    const zc_wire_ops *cands[3];
    L->geom = (zc_wire_geom){0};
    L->geom.rank = cfg->rank;
    L->geom.nranks = cfg->nranks;
    L->geom.slots = cfg->slots;
    L->geom.slot_bytes = cfg->slot_bytes;
    L->geom.stride = ZC_SLOT_HDR_BYTES + cfg->slot_bytes;
    L->geom.nconn = L->geom.conn_cap = zc__conn_cap(cfg);
    L->geom.lanes = zc__lanes(cfg);
    L->geom.cfg = cfg;
    zc_candidates(cfg, cands);
    *state = L->addr_bytes = 0;
    bool inproc = cfg->transport == ZC_TRANSPORT_INPROC; /* windows handed over, no blobs */
    for (const zc_wire_ops *const *c = cands; *c; c++) {
        size_t sb = (*c)->state_bytes(&L->geom), ab = inproc ? 0 : (*c)->addr_bytes(&L->geom);
        *state = sb > *state ? sb : *state;
        L->addr_bytes = ab > L->addr_bytes ? ab : L->addr_bytes;
    }
}

/* Bytes of every region, in carve order (engine.h: zc__region). */
static void zc_rows(const zc_config *cfg, const zc__arena_map *L, size_t state,
                    size_t bytes[ZC_R_COUNT_]) {
    size_t n = cfg->nranks, reqs = cfg->max_requests, addr = L->addr_bytes;
    size_t nc = zc__conn_cap(cfg);
    bool inproc = cfg->transport == ZC_TRANSPORT_INPROC;
    bytes[ZC_R_COMM] = sizeof(zc_comm);
    bytes[ZC_R_WIRE_STATE] = state;
    bytes[ZC_R_ADDRS] = nc * addr; /* each connection's address blob (wires that need them) */
    bytes[ZC_R_CONN] = n * sizeof(uint32_t);
    bytes[ZC_R_CONN_PEER] = nc * sizeof(uint32_t);
    bytes[ZC_R_CHANS] = zc__lanes(cfg) * nc * sizeof(zc__chan);
    bytes[ZC_R_REQS] = reqs * sizeof(zc__req);
    bytes[ZC_R_BASES] = reqs * nc * sizeof(zc__base);
    bytes[ZC_R_PLACES] = reqs * nc * sizeof(zc__place);
    bytes[ZC_R_ACTIVE] = reqs * sizeof(uint32_t);
    bytes[ZC_R_PLANS] = cfg->max_plans * sizeof(zc__plan);
    bytes[ZC_R_MEMS] = cfg->max_mems * sizeof(zc__mem_entry);
    bytes[ZC_R_ACC] = zc__log_algs(cfg) ? reqs * zc__acc_slice(cfg) : 0;
    zc_gpu_rows(cfg, bytes);
    bytes[ZC_R_GROUP] = inproc ? zc__group_alarms_at(n) + 64u : 0;
    bytes[ZC_R_SCRATCH] = inproc ? n * ZC_SCRATCH_INPROC_RANK_BYTES + addr
                                 : zc__init_scratch(cfg, addr, NULL);
    /* In-process ranks keep their inbound window in the arena; processes map theirs. */
    bytes[ZC_R_WINDOW] = inproc ? zc__wire_for(cfg)->window_bytes(&L->geom) : 0;
}

uint32_t zc__addr_window(const zc_config *cfg, size_t addr_bytes) {
    size_t w = addr_bytes ? ZC_ADDR_WINDOW_BYTES / addr_bytes : cfg->nranks;
    if (w < 1u) w = 1u;
    return w < cfg->nranks ? (uint32_t)w : cfg->nranks;
}

size_t zc__init_scratch(const zc_config *cfg, size_t addr_bytes, zc__init_scratch_map *m) {
    size_t n = cfg->nranks, work = n * 4u, at = zc_align64(sizeof(zc__boot));
    if (zc__overlay(cfg) && addr_bytes) {
        size_t sparse = zc__boot_sparse_bytes(zc__addr_window(cfg, addr_bytes), addr_bytes);
        work = sparse > work ? sparse : work;
    }
    zc__init_scratch_map map;
    map.hellos = at;
    at += n * ZC_SCRATCH_RANK_BYTES;
    map.first = at;
    map.next = at + n * 4u;
    map.work = at + n * 8u;
    at = (map.work + work + addr_bytes + 7u) & ~(size_t)7u;
    map.where = at;
    if (m) *m = map;
    return at + n * 8u;
}

bool zc__layout(const zc_config *cfg, zc__arena_map *L) {
    if (!zc__config_check(cfg, NULL, 0)) return false;
    size_t state, end = 0;
    zc_wire_sizes(cfg, L, &state);
    zc_rows(cfg, L, state, L->bytes);
    for (uint32_t r = 0; r < ZC_R_COUNT_; r++) {
        L->at[r] = end;
        end = zc_align64(end + L->bytes[r]);
    }
    L->total = end + (cfg->transport == ZC_TRANSPORT_INPROC ? ZC_INPROC_COLOR_BYTES : 0u);
    L->geom.cfg = 0;
    return true;
}

size_t zc_comm_arena_bytes(const zc_config *cfg) {
    zc__arena_map L;
    return zc__layout(cfg, &L) ? L.total : 0;
}

zc_transport zc__transport_picked(zc_transport asked, bool across_hosts) {
    if (asked != ZC_TRANSPORT_AUTO) return asked;
    return across_hosts ? ZC_TRANSPORT_IB : ZC_TRANSPORT_SHM;
}
