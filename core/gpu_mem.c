/* gpu_mem.c: the device state of a communicator and its CUDA registrations, written once
 * against the gpu provider (provider/gpu.h); no CUDA header or call here.
 *
 * zc__gpu_open starts the provider in the device regions layout.c sized and comm.c carved;
 * without a usable device the communicator has no device state and every device call says
 * why (zc__gpu_absent, or the header's why). A ZC_MEM_CUDA registration is either the NIC's
 * (transport_ib: a dma-buf export of the pages, else by address; nothing is exchanged) or,
 * over shm with more than one rank, the provider's IPC export of the buffer, exchanged with
 * every peer by an internal schedule (ZC_K_REGISTER, issued here, run by sched_gpu.c: every
 * record in, then the peers' buffers mapped). Every rank registers its CUDA buffers in the
 * same order, as a collective.
 *
 * Must not: include CUDA headers, block (but zc__gpu_close, which waits for the provider's
 * stream), or allocate. */
#include "engine.h"
#include "gpu.h"

void zc__gpu_open(zc_comm *c) {
    struct zc__gpu *g = c->gpu_area;
    c->gpu = 0;
    if (!g) return; /* cfg picks no provider */
    g->ops = zc__gpu_provider(&c->cfg);
    if (g->ops->struct_bytes != sizeof(zc_gpu_ops) || g->ops->version != ZC_GPU_VERSION) {
        zc__fmt(g->why, sizeof g->why, "the gpu provider %s has interface version %u, the "
                "core expects %u", g->ops->name, g->ops->version, ZC_GPU_VERSION);
        return;
    }
    if (c->nranks > ZC_GPU_MAX_SRCS) {
        zc__fmt(g->why, sizeof g->why, "device collectives need at most %u ranks and this "
                "communicator has %u", ZC_GPU_MAX_SRCS, c->nranks);
        return;
    }
    g->nranks = c->nranks;
    g->rank = c->rank;
    g->nbinds = c->cfg.gpu_stream_slots;
    g->scratch_bytes = c->cfg.gpu_scratch_bytes;
    g->pid = zc_plat_process_id();
    zc_gpu_geom geom = zc__gpu_geometry(&c->cfg);
    geom.pin = c->stage_area->p2p; /* the staging: send/recv's, then the collectives' */
    geom.pin_bytes = (uint64_t)(c->stage_area->buf + c->cfg.gpu_stage_bytes - c->stage_area->p2p);
    if (g->ops->init(g->state, &geom) != ZC_OK) {
        zc__fmt(g->why, sizeof g->why, "%s", g->ops->error_text(g->state));
        return;
    }
    g->flags = g->ops->flags(g->state);
    g->scratch = g->ops->scratch(g->state);
    c->gpu = g;
    zc__stage_open(c, g->ops, g->state); /* staging and the path (sched_stage.c) */
}

static void zc_gpu_unmap(struct zc__gpu *g, uint32_t e) {
    for (uint32_t p = 0; p < g->nranks; p++) {
        size_t i = (size_t)e * g->nranks + p;
        if (p != g->rank && g->mapped[i] && g->recs[i].pid != g->pid)
            g->ops->ipc_close(g->state, &g->recs[i], g->mapped[i]);
        g->mapped[i] = 0;
    }
}

void zc__gpu_close(zc_comm *c) {
    struct zc__gpu *g = c->gpu;
    if (!g) return;
    g->ops->fini(g->state); /* waits for the stream: no kernel reads a peer's buffer after */
    for (uint32_t e = 0; e < c->cfg.max_mems; e++)
        if (c->mems[e].gstate == ZC_GMEM_MAPPED) zc_gpu_unmap(g, e);
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

/* ZC_MEM_CUDA on the ib wire: the NIC registers the buffer, through a dma-buf export of its
 * pages (GPUDirect RDMA), else by address (nvidia-peermem). Local: no exchange with peers. */
static zc_status zc_gpu_register_nic(zc_comm *c, struct zc__gpu *g, zc__mem_entry *me,
                                     void *addr, size_t bytes) {
    char why[160], first[160];
    int32_t fd = -1;
    uint64_t off = 0;
    zc_status st = g->ops->dmabuf_export(g->state, addr, bytes, &fd, &off);
    if (st == ZC_OK) {
        st = c->wire->mem_register(c->wire_state, addr, bytes, ZC_MEM_CUDA, fd, off, &me->mr,
                                   why, sizeof why);
        zc_plat_fd_close(fd); /* the registration holds its own reference */
        if (st == ZC_OK) return ZC_OK;
        zc__fmt(first, sizeof first, "%s", why);
    } else {
        zc__fmt(first, sizeof first, "dma-buf export: %s", g->ops->error_text(g->state));
    }
    st = c->wire->mem_register(c->wire_state, addr, bytes, ZC_MEM_CUDA, -1, 0, &me->mr, why,
                               sizeof why);
    if (st == ZC_OK) return ZC_OK;
    return zc__error(c, st, "zc_mem_register: the NIC cannot register this device memory (%s; "
                     "then %s)", first, why);
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
    if (c->wire->mem_register || zc__stage_path(c) == ZC_GPU_PATH_STAGED) {
        /* transport_ib: the NIC registers it. Staged: no CUDA IPC either way */
        st = c->wire->mem_register ? zc_gpu_register_nic(c, g, me, addr, bytes) : ZC_OK;
        if (st != ZC_OK) return st;
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
    if (e->gstate == ZC_GMEM_MAPPED) zc_gpu_unmap(g, i);
    e->gstate = ZC_GMEM_FREE;
    return ZC_OK;
}
