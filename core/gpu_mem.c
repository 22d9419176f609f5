/* gpu_mem.c: the device state of a communicator, the path its device calls take, and its CUDA
 * registrations, written once against the gpu provider (provider/gpu.h); no CUDA header or
 * call here.
 *
 * zc__gpu_open starts the provider in the device regions layout.c sized and comm.c carved;
 * without a usable device the communicator has no device state and every device call says
 * why (zc__gpu_absent, or the header's why). It decides the path: on a wire that maps peers
 * (shm) ipc when every rank's device can read every peer's (peer access, or one device), which
 * the ranks learn from two all_gathers of device records at init (the devices, then each rank's
 * verdict on the peers it must read); over transport_ib direct when every rank's device takes
 * NIC writes and every rank's NIC registered that rank's landing (its device scratch), which
 * the ranks learn from an all_gather of landing records at init; staged otherwise. A ZC_MEM_CUDA registration
 * is the NIC's on the direct path (a dma-buf export of the pages, else by address; nothing is
 * exchanged), local on the staged path, or, over shm with more than one rank, the provider's
 * IPC export of the buffer, exchanged with every peer by an internal schedule (ZC_K_REGISTER,
 * issued here, run by sched_gpu.c: every record in, then the peers' buffers mapped). Every
 * rank registers its CUDA buffers in the same order, as a collective; and deregisters the ones
 * shared through IPC the same way: its own mappings of the peers' buffers closed, then a word
 * from every peer that it closed its mapping of this rank's (ZC_K_DEREGISTER), so the caller
 * may free the memory when zc_mem_deregister returns (CUDA leaves a free before every
 * importer's close undefined).
 *
 * Must not: include CUDA headers, block (but zc__gpu_close, which waits for the provider's
 * stream), or allocate. */
#include "device.h"
#include "gpu.h"

/* Bytes of one collective landing area on the direct path: gpu_scratch_bytes shared out among
 * the source ranks, 256-byte aligned (0: too small for the direct path). */
static uint64_t zc_gpu_area(const zc_config *cfg) {
    return (cfg->gpu_scratch_bytes / cfg->nranks) & ~(uint64_t)255u;
}

bool zc__gpu_tries_direct(const zc_wire_ops *wire, const zc_config *cfg) {
    return wire != &zc__wire_hier && wire->mem_register && wire->put && wire->put_done &&
           (cfg->gpu_path == ZC_GPU_PATH_AUTO || cfg->gpu_path == ZC_GPU_PATH_DIRECT);
}

/* Whether the communicator tries the direct path; the same on every rank (init checked that
 * the wire and cfg->gpu_path are). */
static bool zc_gpu_tries_direct(const zc_comm *c) { return zc__gpu_tries_direct(c->wire, &c->cfg); }

uint64_t zc__gpu_scratch_bytes(const zc_config *cfg, bool direct) {
    uint64_t area = zc_gpu_area(cfg);
    if (!direct || !area) return zc__gpu_geometry(cfg).scratch_bytes;
    return (uint64_t)cfg->nranks * area + (uint64_t)cfg->nranks * cfg->slots * cfg->slot_bytes;
}

/* Starts the provider in the carved regions: comm->gpu on success, else the header's why says
 * what failed. direct: its scratch also holds send/recv's landing slots. */
static bool zc_gpu_start(zc_comm *c, struct zc__gpu *g, bool direct) {
    g->ops = zc__gpu_provider(&c->cfg);
    if (g->ops->struct_bytes != sizeof(zc_gpu_ops) || g->ops->version != ZC_GPU_VERSION) {
        zc__fmt(g->why, sizeof g->why, "the gpu provider %s has interface version %u, the "
                "core expects %u", g->ops->name, g->ops->version, ZC_GPU_VERSION);
        return false;
    }
    if (c->nranks > ZC_GPU_MAX_SRCS) {
        zc__fmt(g->why, sizeof g->why, "device collectives need at most %u ranks and this "
                "communicator has %u", ZC_GPU_MAX_SRCS, c->nranks);
        return false;
    }
    g->nranks = c->nranks;
    g->rank = c->rank;
    g->nbinds = c->cfg.gpu_stream_slots;
    g->pid = zc_plat_process_id();
    g->area = zc_gpu_area(&c->cfg);
    g->p2p_at = (uint64_t)c->nranks * g->area;
    zc_gpu_geom geom = zc__gpu_geometry(&c->cfg);
    geom.scratch_bytes = zc__gpu_scratch_bytes(&c->cfg, direct);
    g->scratch_bytes = geom.scratch_bytes;
    geom.pin = c->stage_area->p2p; /* the staging: send/recv's, then the collectives' */
    geom.pin_bytes = (uint64_t)(c->stage_area->buf + c->cfg.gpu_stage_bytes - c->stage_area->p2p);
    if (g->ops->init(g->state, &geom) != ZC_OK) {
        zc__fmt(g->why, sizeof g->why, "%s", g->ops->error_text(g->state));
        return false;
    }
    g->flags = g->ops->flags(g->state);
    g->scratch = g->ops->scratch(g->state);
    c->gpu = g;
    return true;
}

static zc_status zc_gpu_nic(zc_comm *c, struct zc__gpu *g, void *addr, size_t bytes,
                            zc_wire_mr *mr, char *why, size_t cap);

/* This rank's landing record for the direct path: its device must take NIC writes, its
 * scratch hold a landing area per rank, and the NIC register the scratch. A refusal's detail
 * goes to the header's why, for this rank's sentences. */
static zc__gpu_peer zc_gpu_landing(zc_comm *c, struct zc__gpu *g) {
    zc__gpu_peer mine = {0};
    if (!c->gpu) {
        mine.no = ZC_LAND_NO_DEVICE; /* the header's why says why already */
    } else if (!(g->ops->caps(g->state) & ZC_GPU_CAP_RDMA)) {
        mine.no = ZC_LAND_NO_RDMA;
        zc__fmt(g->why, sizeof g->why, "the %s device reports no GPUDirect RDMA support",
                g->ops->name);
    } else if (!g->area) {
        mine.no = ZC_LAND_SMALL;
        zc__fmt(g->why, sizeof g->why, "cfg->gpu_scratch_bytes %llu leaves under 256 bytes per "
                "rank", (unsigned long long)c->cfg.gpu_scratch_bytes);
    } else if (zc_gpu_nic(c, g, g->scratch, (size_t)g->scratch_bytes, &g->land_mr, g->why,
                          sizeof g->why) != ZC_OK) {
        mine.no = ZC_LAND_NIC;
    } else {
        mine.addr = (uint64_t)(uintptr_t)g->scratch;
        mine.rkey = g->land_mr.rkey;
        mine.area = g->area;
    }
    return mine;
}

static const char *zc_land_text(uint32_t no) {
    switch (no) {
    case ZC_LAND_NO_DEVICE: return "has no usable device";
    case ZC_LAND_NO_RDMA: return "has a device that takes no NIC writes (no GPUDirect RDMA)";
    case ZC_LAND_NIC: return "has a NIC that cannot register device memory";
    default: return "has too little device scratch for a landing area per rank";
    }
}

/* Whether the communicator asks whether every rank's device reads every peer's: several
 * processes on a wire that maps peers, gpu_path auto or ipc. */
static bool zc_gpu_tries_ipc(const zc_comm *c) {
    return !c->wire->mem_register && c->nranks > 1 &&
           c->cfg.transport != ZC_TRANSPORT_INPROC &&
           (c->cfg.gpu_path == ZC_GPU_PATH_AUTO || c->cfg.gpu_path == ZC_GPU_PATH_IPC);
}

bool zc__gpu_gathers(const zc_comm *c) {
    /* A two-wire parent gathers none itself, but its children on one host's shm do. */
    return c->gpu_area &&
           (zc_gpu_tries_direct(c) || zc_gpu_tries_ipc(c) || c->wire == &zc__wire_hier);
}

/* This rank's device record for the ipc decision (first round: its device only). */
static zc__gpu_peer zc_gpu_device_rec(zc_comm *c, struct zc__gpu *g) {
    zc__gpu_peer mine = {0};
    mine.reads = ZC_READS_UNKNOWN;
    if (!c->gpu) mine.no = ZC_LAND_NO_DEVICE;
    else if (g->ops->identity(g->state, &mine.id) != ZC_OK) mine.no = ZC_LAND_NO_DEVICE;
    return mine;
}

zc_status zc__gpu_open(zc_comm *c, bool *gather) {
    struct zc__gpu *g = c->gpu_area;
    c->gpu = 0;
    *gather = false;
    if (!g) return ZC_OK; /* cfg picks no provider */
    bool direct = zc_gpu_tries_direct(c);
    uint32_t path = c->cfg.gpu_path;
    if (path == ZC_GPU_PATH_DIRECT && !direct) {
        zc__fmt(c->err, sizeof c->err, "cfg->gpu_path is direct, which needs a wire that writes "
                "into device memory (transport_ib), and this communicator runs over %s: use "
                "gpu_path auto", c->wire->name);
        return ZC_UNSUPPORTED;
    }
    bool up = zc_gpu_start(c, g, direct);
    if (direct || zc_gpu_tries_ipc(c)) { /* every rank, with a device or not, gives its record */
        g->peers[c->rank] = direct ? zc_gpu_landing(c, g) : zc_gpu_device_rec(c, g);
        *gather = true;
        return ZC_OK;
    }
    if (path == ZC_GPU_PATH_AUTO) path = c->wire->mem_register ? ZC_GPU_PATH_STAGED
                                                               : ZC_GPU_PATH_IPC;
    if (up) { /* decided by the configuration alone: no records to gather */
        g->path = path;
        zc__stage_open(c, g->ops, g->state); /* staging (sched_stage.c) */
    }
    return ZC_OK;
}

bool zc__land_take(zc_comm *c, uint32_t p, const zc__gpu_peer *q) {
    uint64_t slots = (uint64_t)c->nranks * c->cfg.slots * c->cfg.slot_bytes;
    bool fits = q->area <= (UINT64_MAX - slots) / c->nranks &&
                zc__span_in(q->addr, (uint64_t)c->nranks * q->area + slots, UINT64_MAX);
    if (q->no > ZC_LAND_SMALL || (q->no == ZC_LAND_OK && (!q->addr || !q->area || !fits ||
                                                          q->rkey > UINT32_MAX))) {
        zc__fmt(c->err, sizeof c->err, "rank %u sent a landing record no rank of this job "
                "writes (reason %u, address 0x%llx, key 0x%llx, areas of %llu bytes)", p, q->no,
                (unsigned long long)q->addr, (unsigned long long)q->rkey,
                (unsigned long long)q->area);
        return false;
    }
    return true;
}

const char *zc_comm_gpu_path(const zc_comm *c) {
    if (!zc__comm_ok(c)) return "none";
    switch (zc__gpu_path_now(c)) {
    case ZC_GPU_PATH_STAGED: return "staged";
    case ZC_GPU_PATH_DIRECT: return "direct";
    case ZC_GPU_PATH_IPC: return "ipc";
    default: return "none";
    }
}

/* First round: this rank's verdict on the devices of the peers it must read. */
static void zc_gpu_judge(zc_comm *c, struct zc__gpu *g) {
    zc__gpu_peer *mine = &g->peers[c->rank];
    mine->reads = 1;
    for (uint32_t p = 0; p < c->nranks && c->gpu && mine->no == ZC_LAND_OK; p++) {
        uint32_t can = 1;
        if (p == c->rank || g->peers[p].no != ZC_LAND_OK) continue;
        if (g->ops->can_read(g->state, &g->peers[p].id, &can) != ZC_OK || !can) {
            mine->reads = 0;
            mine->unread = p;
            zc__fmt(g->why, sizeof g->why, "its device (%s) cannot read rank %u's (%s): no peer "
                    "access between them", mine->id.bus, p, g->peers[p].id.bus);
            return;
        }
    }
}

/* The decision: logged with its reason (why), then the staging opened (sched_stage.c). */
static zc_status zc_gpu_decided(zc_comm *c, struct zc__gpu *g, uint32_t path, const char *why) {
    char line[ZC_ERROR_TEXT_BYTES];
    zc__fmt(line, sizeof line, "device memory over %s %s: %s", c->wire->name,
            path == ZC_GPU_PATH_STAGED ? "goes staged through host memory"
            : path == ZC_GPU_PATH_IPC  ? "takes the ipc path"
                                       : "takes the direct path",
            why);
    zc_plat_log(ZC_PLAT_LOG_INFO, line);
    g->path = path;
    if (c->gpu) zc__stage_open(c, g->ops, g->state);
    return ZC_OK;
}

/* Second round: ipc when every rank reads every peer's device, else staged. */
static zc_status zc_gpu_ipc_path(zc_comm *c, struct zc__gpu *g) {
    uint32_t bad = c->nranks;
    for (uint32_t p = 0; p < c->nranks && bad == c->nranks; p++)
        if (g->peers[p].reads == 0) bad = p;
    if (bad == c->nranks)
        return zc_gpu_decided(c, g, ZC_GPU_PATH_IPC, "every rank's device reads every peer's");
    char who[ZC_ERROR_TEXT_BYTES - 64];
    zc__fmt(who, sizeof who, "rank %u's device cannot read rank %u's (no peer access between "
            "%s and %s)", bad, g->peers[bad].unread, g->peers[bad].id.bus,
            g->peers[g->peers[bad].unread].id.bus);
    if (c->cfg.gpu_path != ZC_GPU_PATH_IPC) return zc_gpu_decided(c, g, ZC_GPU_PATH_STAGED, who);
    zc__fmt(c->err, sizeof c->err, "cfg->gpu_path is ipc but %s: use gpu_path auto", who);
    return ZC_UNSUPPORTED;
}

zc_status zc__gpu_path(zc_comm *c, bool *again) {
    struct zc__gpu *g = c->gpu_area;
    *again = false;
    if (!zc_gpu_tries_direct(c)) {
        if (g->peers[c->rank].reads != ZC_READS_UNKNOWN) return zc_gpu_ipc_path(c, g);
        zc_gpu_judge(c, g);
        *again = true;
        return ZC_OK;
    }
    char why[ZC_ERROR_TEXT_BYTES - 64];
    uint32_t bad = c->nranks, first = c->nranks;
    for (uint32_t p = 0; p < c->nranks; p++) {
        const zc__gpu_peer *q = &g->peers[p];
        if (!zc__land_take(c, p, q)) return ZC_MISMATCH;
        if (q->no != ZC_LAND_OK) {
            if (bad == c->nranks) bad = p;
        } else if (first == c->nranks) {
            first = p;
        } else if (q->area != g->peers[first].area) {
            zc__fmt(c->err, sizeof c->err, "rank %u lands device data in areas of %llu bytes "
                    "but rank %u in %llu: cfg->gpu_scratch_bytes must be equal on every rank",
                    p, (unsigned long long)q->area, first,
                    (unsigned long long)g->peers[first].area);
            return ZC_MISMATCH;
        }
    }
    if (bad == c->nranks) {
        zc__fmt(why, sizeof why, "GPUDirect RDMA into %llu-byte landing areas",
                (unsigned long long)g->area);
        return zc_gpu_decided(c, g, ZC_GPU_PATH_DIRECT, why);
    }
    if (bad == c->rank) zc__fmt(why, sizeof why, "rank %u (this one) %s: %s", bad,
                                zc_land_text(g->peers[bad].no), g->why);
    else zc__fmt(why, sizeof why, "rank %u %s (its own error says why)", bad,
                 zc_land_text(g->peers[bad].no));
    if (c->cfg.gpu_path == ZC_GPU_PATH_DIRECT) {
        zc__fmt(c->err, sizeof c->err, "cfg->gpu_path is direct but %s", why);
        return ZC_UNSUPPORTED;
    }
    if (g->land_mr.handle) c->wire->mem_deregister(c->wire_state, &g->land_mr);
    return zc_gpu_decided(c, g, ZC_GPU_PATH_STAGED, why);
}

static void zc_gpu_unmap(const zc_comm *c, struct zc__gpu *g, uint32_t e) {
    for (uint32_t p = 0; p < g->nranks; p++) {
        size_t i = (size_t)e * g->nranks + p;
        if (g->mapped[i] && !zc__gpu_one_space(c, p))
            g->ops->ipc_close(g->state, &g->recs[i], g->mapped[i]);
        g->mapped[i] = 0;
    }
}

void zc__gpu_close(zc_comm *c) {
    struct zc__gpu *g = c->gpu;
    if (!g) return;
    if (g->land_mr.handle) c->wire->mem_deregister(c->wire_state, &g->land_mr);
    g->ops->fini(g->state); /* waits for the stream: no kernel reads a peer's buffer after */
    for (uint32_t e = 0; e < c->cfg.max_mems; e++)
        if (c->mems[e].gstate == ZC_GMEM_MAPPED) zc_gpu_unmap(c, g, e);
    c->gpu = 0;
}

/* ---- registration ---- */

/* The internal schedule of a CUDA registration (entry e): my record to every peer and every
 * peer's record into its row of recs, then the mapping (sched_gpu.c). Takes a sequence number
 * like the collective it replaces; nobody tests it (ZC_PLAN_INTERNAL): its slot frees itself. */
static zc_status zc_gpu_issue_register(zc_comm *c, uint32_t e, const zc_gpu_ipc *mine,
                                       zc_gpu_ipc *recs) {
    zc__sched s = {0};
    zc_req req;
    s.kind = ZC_K_REGISTER;
    s.alg = ZC_ALG_GPU_REGISTER;
    s.dtype = ZC_UINT8;
    s.esize = 1;
    s.chunk = c->cfg.slot_bytes;
    s.count = sizeof *mine;
    s.send = (const uint8_t *)mine;
    s.recv = (uint8_t *)recs;
    zc_status st = zc__issue(c, &s, ZC_PLAN_INTERNAL, 0, &req);
    if (st == ZC_OK) zc__lookup(c, &req)->mem = e;
    return st;
}

static zc_status zc_gpu_check_kind(zc_comm *c, struct zc__gpu *g, void *addr, size_t bytes) {
    uint32_t kind = ZC_GPU_MEM_HOST;
    if (g->ops->mem_query(g->state, addr, bytes, &kind) != ZC_OK)
        return zc__error(c, ZC_GPU, "zc_mem_register: %s", g->ops->error_text(g->state));
    switch (kind) {
    case ZC_GPU_MEM_DEVICE: return ZC_OK;
    case ZC_GPU_MEM_MANAGED:
        return zc__error(c, ZC_INVALID_ARG, "zc_mem_register: addr is CUDA managed memory; "
                         "ZC_MEM_CUDA needs device memory from cudaMalloc (peers map it "
                         "through CUDA IPC)");
    case ZC_GPU_MEM_OTHER_DEVICE:
        return zc__error(c, ZC_INVALID_ARG, "zc_mem_register: addr is device memory of "
                         "another CUDA device than the communicator's (cfg->gpu_device)");
    case ZC_GPU_MEM_PARTIAL:
        return zc__error(c, ZC_INVALID_ARG, "zc_mem_register: [addr, addr + %zu) runs past "
                         "the end of its CUDA allocation", bytes);
    default:
        return zc__error(c, ZC_INVALID_ARG, "zc_mem_register: addr is host memory, not CUDA "
                         "device memory: register it as ZC_MEM_HOST (or not at all)");
    }
}

/* Device memory registered with the NIC (the direct path: user buffers, the landing), through
 * a dma-buf export of its pages (GPUDirect RDMA), else by address (nvidia-peermem). Local: no
 * exchange with peers. A refusal says both attempts' reasons in why. */
static zc_status zc_gpu_nic(zc_comm *c, struct zc__gpu *g, void *addr, size_t bytes,
                            zc_wire_mr *mr, char *why, size_t cap) {
    char first[160], then[160];
    int32_t fd = -1;
    uint64_t off = 0;
    zc_status st = g->ops->dmabuf_export(g->state, addr, bytes, &fd, &off);
    if (st == ZC_OK) {
        st = c->wire->mem_register(c->wire_state, addr, bytes, ZC_MEM_CUDA, fd, off, mr, first,
                                   sizeof first);
        zc_plat_fd_close(fd); /* the registration holds its own reference */
        if (st == ZC_OK) return ZC_OK;
    } else {
        zc__fmt(first, sizeof first, "dma-buf export: %s", g->ops->error_text(g->state));
    }
    st = c->wire->mem_register(c->wire_state, addr, bytes, ZC_MEM_CUDA, -1, 0, mr, then,
                               sizeof then);
    if (st != ZC_OK) zc__fmt(why, cap, "%s; then %s", first, then);
    return st;
}

/* Fills the table entry of a CUDA registration that succeeded. */
static zc_status zc_gpu_entry(struct zc__gpu *g, zc__mem_entry *me, void *addr, size_t bytes,
                              zc_mem **mem_out) {
    g->used = 1;
    *mem_out = zc__mem_fill(me, addr, bytes, ZC_MEM_CUDA);
    return ZC_OK;
}

zc_status zc__gpu_mem_register(zc_comm *c, void *addr, size_t bytes, zc_mem **mem_out) {
    struct zc__gpu *g = c->gpu, *h = c->gpu_area;
    if (!g)
        return zc__error(c, ZC_UNSUPPORTED, "zc_mem_register: kind ZC_MEM_CUDA: %s",
                         !h ? zc__gpu_absent(&c->cfg) : h->why);
    if (c->failed) return (zc_status)c->failed;
    zc_status st = zc_gpu_check_kind(c, g, addr, bytes);
    if (st != ZC_OK) return st;
    uint32_t n = g->nranks, e;
    if ((st = zc__mem_take(c, &e)) != ZC_OK) return st;
    zc__mem_entry *me = &c->mems[e];
    uint32_t path = zc__gpu_path_now(c);
    if (path == ZC_GPU_PATH_DIRECT || path == ZC_GPU_PATH_STAGED || c->wire->mem_register) {
        /* Direct: the NIC registers it. Staged (or ipc over a wire that cannot map peers,
         * which every call refuses): nothing else sees it. Local either way: no exchange. */
        char why[ZC_ERROR_TEXT_BYTES - 64];
        if (path == ZC_GPU_PATH_DIRECT &&
            (st = zc_gpu_nic(c, g, addr, bytes, &me->mr, why, sizeof why)) != ZC_OK)
            return zc__error(c, st, "zc_mem_register: the NIC cannot register this device "
                             "memory (%s)", why);
        me->gstate = ZC_GMEM_FREE; /* nothing mapped from peers */
        return zc_gpu_entry(g, me, addr, bytes, mem_out);
    }
    zc_gpu_ipc *mine = &g->recs[(size_t)e * n + g->rank];
    zc__memset(mine, 0, sizeof *mine);
    if (n > 1 && g->ops->ipc_export(g->state, addr, bytes, mine) != ZC_OK)
        return zc__error(c, ZC_GPU, "zc_mem_register: %s", g->ops->error_text(g->state));
    mine->addr = (uint64_t)(uintptr_t)addr;
    mine->bytes = bytes;
    mine->pid = g->pid;
    mine->creg = g->creg_next;
    mine->valid = 1;
    me->creg = g->creg_next;
    me->gstate = n > 1 ? ZC_GMEM_PENDING : ZC_GMEM_MAPPED;
    if (n > 1) { /* collective: every rank registers its CUDA buffers in the same order */
        st = zc_gpu_issue_register(c, e, mine, &g->recs[(size_t)e * n]);
        if (st != ZC_OK) {
            me->gstate = ZC_GMEM_FREE;
            return st;
        }
    }
    g->creg_next++;
    return zc_gpu_entry(g, me, addr, bytes, mem_out);
}

/* Whether a call in flight (its request active) or a stream-ordered call (its slot armed,
 * running or draining; a graph-captured one until fini) uses memory of e. */
static bool zc_gpu_in_use(const zc_comm *c, const struct zc__gpu *g, const zc__mem_entry *e) {
    uintptr_t lo = (uintptr_t)e->addr, hi = lo + e->bytes;
#define ZC_IN_E(p) ((uintptr_t)(p) >= lo && (uintptr_t)(p) < hi)
    for (uint32_t i = 0; i < c->nreqs_active; i++) {
        const zc__req *r = &c->reqs[c->active[i]];
        if (zc__device_alg(r->s.alg) && (ZC_IN_E(r->s.send) || ZC_IN_E(r->s.recv))) return true;
    }
    for (uint32_t i = 0; i < g->nbinds; i++) {
        const zc__bind *b = &g->binds[i];
        if (b->state != ZC_BIND_FREE && b->state != ZC_BIND_LOST &&
            (ZC_IN_E(b->s.send) || ZC_IN_E(b->s.recv)))
            return true;
    }
#undef ZC_IN_E
    return false;
}

/* The internal schedule of a shared registration's end (entry e): a signal to every peer once
 * this rank unmapped the peers' buffers, and every peer's; its fingerprint carries the
 * registration number, so ranks deregistering in different orders fail with ZC_MISMATCH. The
 * caller waits for it (a request with a handle). */
static zc_status zc_gpu_issue_close(zc_comm *c, const zc__mem_entry *me, zc_req *req) {
    zc__sched s = {0};
    s.kind = ZC_K_DEREGISTER;
    s.alg = ZC_ALG_GPU_REGISTER;
    s.dtype = ZC_UINT8;
    s.esize = 1;
    s.chunk = c->cfg.slot_bytes;
    s.count = me->creg;
    return zc__issue(c, &s, -1, 0, req);
}

zc_status zc__gpu_mem_deregister(zc_comm *c, zc__mem_entry *e, zc_req *req) {
    struct zc__gpu *g = c->gpu;
    uint32_t i = (uint32_t)(e - c->mems);
    if (!g) return ZC_OK;
    if (e->gstate == ZC_GMEM_PENDING && !c->failed) /* a failed exchange never ends */
        return zc__error(c, ZC_INVALID_STATE, "zc_mem_deregister: the peers' handles of this "
                         "CUDA registration are still being exchanged (progress first)");
    if (e->gstate == ZC_GMEM_CLOSING)
        return zc__error(c, ZC_INVALID_STATE, "zc_mem_deregister: this registration is being "
                         "deregistered already (by another thread)");
    if (!c->failed && zc_gpu_in_use(c, g, e))
        return zc__error(c, ZC_INVALID_STATE, "zc_mem_deregister: a call in flight uses this "
                         "CUDA registration (or a stream-ordered call does: until its stream "
                         "passed it; a graph-captured one until zc_comm_fini): finish it first");
    bool shared = e->gstate == ZC_GMEM_MAPPED && g->nranks > 1 && !c->failed;
    zc_status st = shared ? zc_gpu_issue_close(c, e, req) : ZC_OK;
    if (st != ZC_OK) return st; /* nothing changed */
    if (e->gstate == ZC_GMEM_MAPPED) zc_gpu_unmap(c, g, i);
    e->gstate = shared ? ZC_GMEM_CLOSING : ZC_GMEM_FREE; /* closing: calls no longer find it */
    return shared ? ZC_IN_PROGRESS : ZC_OK;
}

void zc__gpu_mem_closed(zc_comm *c, zc__mem_entry *e) {
    (void)c;
    e->gstate = ZC_GMEM_FREE;
}
