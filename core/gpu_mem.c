/* gpu_mem.c: the device state of a communicator, the path its device calls take, and its CUDA
 * registrations, written once against the gpu provider (provider/gpu.h); no CUDA header or
 * call here.
 *
 * zc__gpu_open starts the provider in the device regions layout.c sized and comm.c carved;
 * without a usable device the communicator has no device state and every device call says
 * why (zc__gpu_absent, or the header's why). It decides the path: ipc on a wire that maps
 * peers (shm), and over transport_ib direct when every rank's device takes NIC writes and
 * every rank's NIC registered that rank's landing (its device scratch), which the ranks learn
 * from an all_gather of landing records at init; staged otherwise. A ZC_MEM_CUDA registration
 * is the NIC's on the direct path (a dma-buf export of the pages, else by address; nothing is
 * exchanged), local on the staged path, or, over shm with more than one rank, the provider's
 * IPC export of the buffer, exchanged with every peer by an internal schedule (ZC_K_REGISTER,
 * issued here, run by sched_gpu.c: every record in, then the peers' buffers mapped). Every
 * rank registers its CUDA buffers in the same order, as a collective.
 *
 * Must not: include CUDA headers, block (but zc__gpu_close, which waits for the provider's
 * stream), or allocate. */
#include "engine.h"
#include "gpu.h"

/* Bytes of one collective landing area on the direct path: gpu_scratch_bytes shared out among
 * the source ranks, 256-byte aligned (0: too small for the direct path). */
static uint64_t zc_gpu_area(const zc_config *cfg) {
    return (cfg->gpu_scratch_bytes / cfg->nranks) & ~(uint64_t)255u;
}

/* Whether the communicator tries the direct path: its wire writes into registered memory
 * (transport_ib) and gpu_path is auto or direct; the same on every rank (init checked that
 * the wire and cfg->gpu_path are). */
static bool zc_gpu_tries_direct(const zc_comm *c) {
    return c->wire->mem_register && c->wire->put && c->wire->put_done &&
           (c->cfg.gpu_path == ZC_GPU_PATH_AUTO || c->cfg.gpu_path == ZC_GPU_PATH_DIRECT);
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
    if (direct && g->area) /* the landing: collective areas, then send/recv's slots */
        geom.scratch_bytes = g->p2p_at + (uint64_t)c->nranks * c->cfg.slots * c->cfg.slot_bytes;
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

bool zc__gpu_gathers(const zc_comm *c) { return c->gpu_area && zc_gpu_tries_direct(c); }

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
    if (direct) { /* every rank, with a device or not, gives its record */
        g->peers[c->rank] = zc_gpu_landing(c, g);
        *gather = true;
        return ZC_OK;
    }
    if (path == ZC_GPU_PATH_AUTO) path = c->wire->mem_register ? ZC_GPU_PATH_STAGED
                                                               : ZC_GPU_PATH_IPC;
    if (up) zc__stage_open(c, g->ops, g->state, path); /* staging (sched_stage.c) */
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

zc_status zc__gpu_path(zc_comm *c) {
    struct zc__gpu *g = c->gpu_area;
    char line[ZC_ERROR_TEXT_BYTES];
    uint32_t bad = c->nranks, first = c->nranks, path = ZC_GPU_PATH_DIRECT;
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
        zc__fmt(line, sizeof line, "device memory over %s: direct path (GPUDirect RDMA into "
                "%llu-byte landing areas)", c->wire->name, (unsigned long long)g->area);
    } else {
        char who[ZC_ERROR_TEXT_BYTES - 64];
        if (bad == c->rank) zc__fmt(who, sizeof who, "rank %u (this one) %s: %s", bad,
                                    zc_land_text(g->peers[bad].no), g->why);
        else zc__fmt(who, sizeof who, "rank %u %s (its own error says why)", bad,
                     zc_land_text(g->peers[bad].no));
        if (c->cfg.gpu_path == ZC_GPU_PATH_DIRECT) {
            zc__fmt(c->err, sizeof c->err, "cfg->gpu_path is direct but %s", who);
            return ZC_UNSUPPORTED;
        }
        if (g->land_mr.handle) c->wire->mem_deregister(c->wire_state, &g->land_mr);
        path = ZC_GPU_PATH_STAGED;
        zc__fmt(line, sizeof line, "device memory over %s goes staged through host memory: %s",
                c->wire->name, who);
    }
    zc_plat_log(ZC_PLAT_LOG_INFO, line);
    if (c->gpu) zc__stage_open(c, g->ops, g->state, path); /* staging (sched_stage.c) */
    return ZC_OK;
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
    me->addr = addr;
    me->bytes = bytes;
    me->kind = ZC_MEM_CUDA;
    me->gen++;
    *mem_out = (zc_mem *)(void *)me;
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
    for (e = 0; e < c->cfg.max_mems && c->mems[e].addr; e++) {
    }
    if (e == c->cfg.max_mems)
        return zc__error(c, ZC_LIMIT, "zc_mem_register: all %u registration slots are taken "
                         "(cfg->max_mems)", c->cfg.max_mems);
    zc__mem_entry *me = &c->mems[e];
    me->mr = (zc_wire_mr){0};
    uint32_t path = zc__stage_path(c);
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

zc_status zc__gpu_mem_deregister(zc_comm *c, zc__mem_entry *e) {
    struct zc__gpu *g = c->gpu;
    uint32_t i = (uint32_t)(e - c->mems);
    if (!g) return ZC_OK;
    if (e->gstate == ZC_GMEM_PENDING && !c->failed) /* a failed exchange never ends */
        return zc__error(c, ZC_INVALID_STATE, "zc_mem_deregister: the peers' handles of this "
                         "CUDA registration are still being exchanged (progress first)");
    if (e->gstate == ZC_GMEM_MAPPED) zc_gpu_unmap(c, g, i);
    e->gstate = ZC_GMEM_FREE;
    return ZC_OK;
}
