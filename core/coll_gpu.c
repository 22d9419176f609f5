/* coll_gpu.c: collectives on device memory, CUDA registrations and stream-ordered starts, written
 * once against the gpu provider (provider/gpu.h); no CUDA header or call here.
 *
 * Data never travels the channels: every rank reads its peers' registered device buffers, mapped
 * into its own address space at registration (CUDA IPC), with reductions and copies launched on
 * the provider's stream and completion seen by polling an event. The channels carry only
 * fingerprinted signals, one message to every peer per step, so every rank agrees on the step:
 *   message 0, READY: my buffers hold their inputs; here is where they are (registration number
 *                     and offset of send and recv) and my round size;
 *   later messages:   done reading your buffers (and, for RS+AG, my reduced block is final).
 * A rank finishes only after every peer said it is done reading its buffers.
 *
 * Schedules (each a state machine of named phases, zc_gphase):
 *   GPU_ONESHOT (all_reduce up to gpu_oneshot_max_bytes): per round, reduce all n inputs of the
 *     round's elements; in place, into scratch, copied back once every peer is done reading.
 *   GPU_RSAG (larger all_reduce): per round, reduce block `rank` of the round's region (into
 *     recv, or scratch in place), then copy every peer's reduced block from its recv.
 *   GPU_DIRECT (every other collective): one launch of what this rank needs, then DONE.
 *   GPU_REGISTER (internal, a CUDA registration with more than one rank): my zc_gpu_ipc record
 *     as message 0 to every peer, every peer's into the registration's row of recs, then MAP
 *     (ipc_open of each peer's buffer); its slot frees itself when it finishes.
 * Reductions are the provider's kernels: rank order 0..n-1, the host kernels' exact semantics,
 * so device and host results are bitwise equal.
 *
 * Device requests are requests of the one engine: zc__issue takes their slot, sequence number
 * and channel numbers and puts them on comm->active; zc_progress steps them through zc__step
 * (zc__gpu_step here: one budget unit per phase transition), stamps and checks their deadlines
 * and peers' liveness, and zc__fail fails them, like host requests. This file adds only
 * their device state (zc_grq, per request slot) and the phases. A stream-ordered call is
 * issued "held" (no deadline) until its stream reaches it. zc__gpu_progress (called first by
 * every zc_progress) only starts and finishes stream-ordered calls.
 *
 * Must not: include CUDA headers, block, allocate, or record a CUDA error twice (the provider's
 * sentence is copied once into the communicator by zc_gpu_fail). */
#include "engine.h"
#include "gpu.h"


#define ZC_GPU_NONE 0xffffffffu                             /* "no buffer" registration number */

typedef enum zc_gmem_state {
    ZC_GMEM_FREE = 0, ZC_GMEM_PENDING, ZC_GMEM_MAPPED, ZC_GMEM_FAILED
} zc_gmem_state;

/* Per registration entry (parallel to comm->mems). */
typedef struct zc_gmem {
    uint32_t state;  /* zc_gmem_state */
    uint32_t creg;   /* CUDA registration number on this communicator */
} zc_gmem;

typedef enum zc_gphase {
    ZC_G_GATE = 0,     /* stream-ordered: wait until the caller's stream reached the call */
    ZC_G_READY,        /* exchange READY (message 0) */
    ZC_G_MAIN,         /* launch the round's reduction (or the collective's copies) */
    ZC_G_MAIN_WAIT,
    ZC_G_SYNC_A,       /* done reading the round's inputs */
    ZC_G_PLACE,        /* in place: copy scratch to recv */
    ZC_G_PLACE_WAIT,
    ZC_G_SYNC_B,       /* RS+AG: my reduced block of the round is in recv */
    ZC_G_GATHER,       /* RS+AG: copy the peers' reduced blocks */
    ZC_G_GATHER_WAIT,
    ZC_G_SYNC_DONE,    /* done reading everything of yours */
    ZC_G_MAP,          /* registration: map the peers' buffers from their records */
    ZC_G_FINISHED
} zc_gphase;

/* Per request slot. */
typedef struct zc_grq {
    uint32_t phase;       /* zc_gphase */
    uint32_t round, rounds;
    uint32_t in_place;    /* all_reduce with send == recv */
    uint32_t gate;        /* stream slot + 1 whose start flag gates the request; 0: none */
    uint32_t mem;         /* registration: its entry in comm->mems */
    uint64_t round_elems; /* elements per round (RS+AG: per region of n blocks) */
} zc_grq;

typedef enum zc_bind_state { ZC_BIND_FREE = 0, ZC_BIND_ARMED, ZC_BIND_RUNNING } zc_bind_state;

/* A stream-ordered call: flag words start = flags[2i], done = flags[2i+1]. */
typedef struct zc_gbind {
    uint32_t state;      /* zc_bind_state */
    uint32_t persistent; /* captured in a graph: re-armed after every run, held until fini */
    uint32_t tick;       /* the value its stream writes to start and waits for in done */
    uint32_t pad_;
    zc__sched s;
    zc_req req;
} zc_gbind;

/* READY's payload. */
typedef struct zc_ghello {
    uint32_t send_creg, recv_creg; /* ZC_GPU_NONE: no such buffer at this rank */
    uint64_t send_off, recv_off;   /* offsets inside those registrations */
    uint64_t round_elems;
} zc_ghello;

struct zc__gpu {
    const zc_gpu_ops *ops;
    void *state;           /* the provider's, in the arena */
    uint32_t nranks, rank;
    uint32_t creg_next;    /* next CUDA registration number */
    uint32_t used;         /* 1 once a CUDA registration was made (0: host calls skip every
                            * device check; after one, unregistered device memory is refused
                            * even when every registration was dropped again) */
    uint32_t pad_;
    uint32_t nbinds;
    uint32_t *flags;       /* host view of the 2 * nbinds flag words */
    uint8_t *scratch;
    uint64_t scratch_bytes;
    uint64_t pid;
    zc_gmem *mems;         /* [max_mems] */
    zc_gpu_ipc *recs;      /* [max_mems * nranks] every rank's export of each registration */
    uint8_t **mapped;      /* [max_mems * nranks] peers' registered buffers in this process */
    zc_grq *rqs;           /* [max_requests] */
    uint8_t **ptrs;        /* [max_requests * 2 * nranks] send then recv of every rank */
    zc_gbind *binds;       /* [nbinds] */
    char why[ZC_ERROR_TEXT_BYTES]; /* why comm->gpu is NULL */
};

static zc_status zc_gpu_issue_register(zc_comm *c, uint32_t e, const zc_gpu_ipc *mine,
                                       zc_gpu_ipc *recs);

/* ---- the region ---- */

typedef struct zc_gmap {
    size_t state, mems, recs, mapped, rqs, ptrs, binds, total;
} zc_gmap;

static size_t zc_galign(size_t v) { return (v + 63u) & ~(size_t)63u; }

/* The provider cfg asks for; NULL: none (gpu_device -2, or CUDA asked of a build without). */
static const zc_gpu_ops *zc_gpu_pick(const zc_config *cfg) {
    if (cfg->gpu_device == -2) return 0;
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

/* Why a communicator has no gpu provider state at all (zc_gpu_provider gave none). */
static const char *zc_gpu_absent(const zc_comm *c) {
    return c->cfg.gpu_device == -2 ? "cfg->gpu_device is -2 (no GPU state)"
                                   : "this build of zcoll has no CUDA support (configure.py "
                                     "found no nvcc; ZC_GPU_PROVIDER=sim selects the simulated "
                                     "device)";
}

static zc_gpu_geom zc_gpu_geometry(const zc_config *cfg) {
    zc_gpu_geom g = {cfg->rank, cfg->nranks, cfg->max_requests, 2u * cfg->gpu_stream_slots,
                     cfg->gpu_scratch_bytes, cfg->gpu_device, 0};
    return g;
}

/* The carve of the region; false when cfg has none. Per-rank tables are sized for at most
 * ZC_GPU_MAX_SRCS ranks (more ranks run no device collectives, zc__gpu_open says so; the size
 * stays that of the ceiling so the arena never shrinks as nranks grows). */
static bool zc_gpu_layout(const zc_config *cfg, zc_gmap *m) {
    const zc_gpu_ops *ops = zc_gpu_pick(cfg);
    size_t end = zc_galign(sizeof(struct zc__gpu));
    size_t n = cfg->nranks < ZC_GPU_MAX_SRCS ? cfg->nranks : ZC_GPU_MAX_SRCS;
    *m = (zc_gmap){0};
    if (!ops) return false;
    zc_gpu_geom g = zc_gpu_geometry(cfg);
    size_t mems = cfg->max_mems, reqs = cfg->max_requests;
    m->state = end, end = zc_galign(end + ops->state_bytes(&g));
    m->mems = end, end = zc_galign(end + mems * sizeof(zc_gmem));
    m->recs = end, end = zc_galign(end + mems * n * sizeof(zc_gpu_ipc));
    m->mapped = end, end = zc_galign(end + mems * n * sizeof(uint8_t *));
    m->rqs = end, end = zc_galign(end + reqs * sizeof(zc_grq));
    m->ptrs = end, end = zc_galign(end + reqs * 2u * n * sizeof(uint8_t *));
    m->binds = end, end = zc_galign(end + cfg->gpu_stream_slots * sizeof(zc_gbind));
    m->total = end;
    return true;
}

size_t zc__gpu_bytes(const zc_config *cfg) {
    zc_gmap m;
    return zc_gpu_layout(cfg, &m) ? m.total : 0;
}

static struct zc__gpu *zc_gpu_header(const zc_comm *c) {
    zc_gmap m;
    return zc_gpu_layout(&c->cfg, &m) ? (struct zc__gpu *)(void *)c->gpu_area : 0;
}

void zc__gpu_open(zc_comm *c) {
    zc_gmap m;
    c->gpu = 0;
    if (!zc_gpu_layout(&c->cfg, &m)) return;
    uint8_t *a = c->gpu_area;
    zc__memset(a, 0, m.total);
    struct zc__gpu *g = (struct zc__gpu *)(void *)a;
    g->ops = zc_gpu_pick(&c->cfg);
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
    g->state = a + m.state;
    g->nranks = c->nranks;
    g->rank = c->rank;
    g->nbinds = c->cfg.gpu_stream_slots;
    g->scratch_bytes = c->cfg.gpu_scratch_bytes;
    g->pid = zc_plat_process_id();
    g->mems = (zc_gmem *)(void *)(a + m.mems);
    g->recs = (zc_gpu_ipc *)(void *)(a + m.recs);
    g->mapped = (uint8_t **)(void *)(a + m.mapped);
    g->rqs = (zc_grq *)(void *)(a + m.rqs);
    g->ptrs = (uint8_t **)(void *)(a + m.ptrs);
    g->binds = (zc_gbind *)(void *)(a + m.binds);
    zc_gpu_geom geom = zc_gpu_geometry(&c->cfg);
    if (g->ops->init(g->state, &geom) != ZC_OK) {
        zc__fmt(g->why, sizeof g->why, "%s", g->ops->error_text(g->state));
        return;
    }
    g->flags = g->ops->flags(g->state);
    g->scratch = g->ops->scratch(g->state);
    c->gpu = g;
    zc__stage_open(c, g->ops, g->state); /* staging and the path (sched_stage.c) */
}

static void zc_gpu_unmap(zc_comm *c, struct zc__gpu *g, uint32_t e) {
    for (uint32_t p = 0; p < g->nranks; p++) {
        size_t i = (size_t)e * g->nranks + p;
        if (p != g->rank && g->mapped[i] && g->recs[i].pid != g->pid)
            g->ops->ipc_close(g->state, &g->recs[i], g->mapped[i]);
        g->mapped[i] = 0;
    }
    (void)c;
}

void zc__gpu_close(zc_comm *c) {
    struct zc__gpu *g = c->gpu;
    if (!g) return;
    g->ops->fini(g->state); /* waits for the stream: no kernel reads a peer's buffer after */
    for (uint32_t e = 0; e < c->cfg.max_mems; e++)
        if (g->mems[e].state == ZC_GMEM_MAPPED) zc_gpu_unmap(c, g, e);
    c->gpu = 0;
}

/* Records the provider's sentence (the one place a gpu failure reaches the communicator),
 * fails the communicator and returns st. */
static zc_status zc_gpu_fail(zc_comm *c, struct zc__gpu *g, zc_status st, const char *what,
                             uint64_t seq) {
    return zc__fail(c, st, seq, -1, 0, "%s: %s", what, g->ops->error_text(g->state));
}

/* ---- registration ---- */

/* The CUDA registration holding [p, p+bytes) entirely; *partial when one overlaps it only. */
static int32_t zc_gpu_find(const zc_comm *c, const void *p, size_t bytes, bool *partial) {
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    for (uint32_t i = 0; i < c->cfg.max_mems; i++) {
        const zc__mem_entry *e = &c->mems[i];
        uintptr_t elo = (uintptr_t)e->addr, ehi = elo + e->bytes;
        if (!e->addr || e->kind != ZC_MEM_CUDA || hi <= elo || lo >= ehi) continue;
        if (lo >= elo && hi <= ehi) return (int32_t)i;
        *partial = true;
    }
    return -1;
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
    struct zc__gpu *g = c->gpu, *h = zc_gpu_header(c);
    if (!g)
        return zc__error(c, ZC_UNSUPPORTED, "zc_mem_register: kind ZC_MEM_CUDA: %s",
                         !h ? zc_gpu_absent(c) : h->why);
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
        g->mems[e].state = ZC_GMEM_FREE; /* nothing mapped from peers */
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
    zc_gmem *gm = &g->mems[e];
    gm->creg = g->creg_next;
    gm->state = n > 1 ? ZC_GMEM_PENDING : ZC_GMEM_MAPPED;
    if (n > 1) { /* collective: every rank registers its CUDA buffers in the same order */
        st = zc_gpu_issue_register(c, e, mine, &g->recs[(size_t)e * n]);
        if (st != ZC_OK) {
            gm->state = ZC_GMEM_FREE;
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
    if (g->mems[i].state == ZC_GMEM_PENDING)
        return zc__error(c, ZC_INVALID_STATE, "zc_mem_deregister: the peers' handles of this "
                         "CUDA registration are still being exchanged (progress first)");
    if (g->mems[i].state == ZC_GMEM_MAPPED) zc_gpu_unmap(c, g, i);
    g->mems[i].state = ZC_GMEM_FREE;
    return ZC_OK;
}

/* The registration schedule's last phase: maps the peers' buffers of entry e from the records
 * its exchange brought; false when that failed the communicator. */
static bool zc_gpu_map(zc_comm *c, struct zc__gpu *g, uint32_t e) {
    zc_gmem *gm = &g->mems[e];
    gm->state = ZC_GMEM_FAILED;
    for (uint32_t p = 0; p < g->nranks; p++) {
        size_t i = (size_t)e * g->nranks + p;
        zc_gpu_ipc *rec = &g->recs[i];
        if (!rec->valid || rec->creg != gm->creg) {
            zc__fail(c, ZC_MISMATCH, c->seq, (int32_t)p, 0, "zc_mem_register: rank %u's CUDA "
                     "registration number %u met rank %u's number %u: every rank registers "
                     "its CUDA buffers in the same order", p, rec->creg, g->rank, gm->creg);
            return false;
        }
        if (p == g->rank || rec->pid == g->pid) {
            g->mapped[i] = (uint8_t *)(uintptr_t)rec->addr; /* one address space */
            continue;
        }
        void *m = 0;
        if (g->ops->ipc_open(g->state, rec, &m) != ZC_OK) {
            zc_gpu_fail(c, g, ZC_GPU, "zc_mem_register: mapping a peer's buffer", c->seq);
            return false;
        }
        g->mapped[i] = m;
    }
    gm->state = ZC_GMEM_MAPPED;
    return true;
}

/* ---- routing and issue ---- */

static zc_status zc_gpu_unregistered(zc_comm *c, const char *name, const char *which,
                                     const void *p, size_t bytes) {
    uint32_t kind = ZC_GPU_MEM_HOST;
    if (!c->gpu || !p || !bytes) return ZC_OK;
    if (c->gpu->ops->mem_query(c->gpu->state, p, bytes, &kind) != ZC_OK ||
        kind == ZC_GPU_MEM_HOST || kind == ZC_GPU_MEM_MANAGED)
        return ZC_OK; /* host code can read it (a failing query is not this call's business) */
    return zc__error(c, ZC_INVALID_ARG, "%s: %s is CUDA device memory that is not registered: "
                     "register it with zc_mem_register(..., ZC_MEM_CUDA, ...) first", name,
                     which);
}

zc_status zc__gpu_route(zc_comm *c, zc__sched *s) {
    const char *name = zc__kind_name(s->kind);
    uint64_t sblk, rblk;
    /* The hot path of host calls: one load when nothing is registered ZC_MEM_CUDA. */
    if (!c->gpu || !c->gpu->used || s->kind == ZC_K_BARRIER || s->count == 0) return ZC_OK;
    zc__extents(c, s->kind, s->root, &sblk, &rblk);
    size_t sb = (size_t)(sblk * s->count * s->esize), rb = (size_t)(rblk * s->count * s->esize);
    bool sp = false, rp = false;
    bool ds = sb && zc_gpu_find(c, s->send, sb, &sp) >= 0;
    bool dr = rb && zc_gpu_find(c, s->recv, rb, &rp) >= 0;
    if (sp || rp)
        return zc__error(c, ZC_INVALID_ARG, "%s: %s runs past the end of its ZC_MEM_CUDA "
                         "registration", name, sp ? "send" : "recv");
    if (!ds && !dr) {
        zc_status st = zc_gpu_unregistered(c, name, "send", s->send, sb);
        return st != ZC_OK ? st : zc_gpu_unregistered(c, name, "recv", s->recv, rb);
    }
    if ((sb && !ds) || (rb && !dr))
        return zc__error(c, ZC_INVALID_ARG, "%s: %s is registered ZC_MEM_CUDA memory but %s is "
                         "not: both buffers of a device collective must be", name,
                         ds ? "send" : "recv", ds ? "recv" : "send");
    if (zc__stage_path(c) == ZC_GPU_PATH_STAGED || s->kind == ZC_K_SEND || s->kind == ZC_K_RECV)
        return zc__stage_route(c, s); /* through host staging (sched_stage.c) */
    if (c->wire->mem_register)
        return zc__error(c, ZC_UNSUPPORTED, "%s: cfg->gpu_path is ipc, which needs the shm wire "
                         "(peers' device buffers mapped), and this communicator runs over %s: "
                         "use gpu_path auto or staged", name, c->wire->name);
    if (s->kind == ZC_K_ALLREDUCE && s->send == s->recv && c->cfg.gpu_scratch_bytes == 0)
        return zc__error(c, ZC_LIMIT, "%s: in-place device all_reduce needs scratch and "
                         "cfg->gpu_scratch_bytes is 0", name);
    if (s->kind != ZC_K_ALLREDUCE)
        s->alg = ZC_ALG_GPU_DIRECT;
    else if (s->count * s->esize <= c->cfg.gpu_oneshot_max_bytes || s->count < c->nranks)
        s->alg = ZC_ALG_GPU_ONESHOT;
    else
        s->alg = ZC_ALG_GPU_RSAG;
    return ZC_OK;
}

/* Rounds and elements per round; the same on every rank with the same scratch size (checked
 * through READY). */
static uint32_t zc_gpu_rounds(const zc_comm *c, const zc__sched *s, uint64_t *round_elems) {
    uint64_t per = c->cfg.gpu_scratch_bytes / (s->esize ? s->esize : 1u);
    if (s->alg == ZC_ALG_GPU_RSAG) per *= c->nranks;
    if (s->alg == ZC_ALG_GPU_DIRECT || s->alg == ZC_ALG_GPU_REGISTER || per == 0 ||
        s->count == 0) {
        *round_elems = s->count;
        return 1;
    }
    *round_elems = per;
    return (uint32_t)((s->count + per - 1) / per);
}

/* Signals to (and from) every peer. */
uint64_t zc__gpu_msgs(const zc_comm *c, const zc__sched *s) {
    uint64_t re;
    uint32_t rounds = zc_gpu_rounds(c, s, &re);
    switch (s->alg) {
    case ZC_ALG_GPU_ONESHOT: return 1u + (uint64_t)rounds;
    case ZC_ALG_GPU_RSAG: return 2u + 2u * (uint64_t)rounds;
    case ZC_ALG_GPU_REGISTER: return 1;
    default: return 2;
    }
}

/* zc__issue (slot, sequence, channel numbers, the active list), then the device state; gate:
 * the stream slot + 1 whose start flag holds the request (0: none). */
static zc_status zc_gpu_issue(zc_comm *c, const zc__sched *s, int32_t plan, zc_req *req,
                              uint32_t gate) {
    struct zc__gpu *g = c->gpu;
    ZC_ASSERT(g && zc__gpu_alg(s->alg));
    zc_status st = zc__issue(c, s, plan, req);
    if (st != ZC_OK) return st;
    uint32_t i = c->active[c->nreqs_active - 1u];
    zc__req *r = &c->reqs[i];
    ZC_ASSERT(r->seq == req->opaque_[3] && r->lane == 0 && r->place == 0);
    zc_grq *q = &g->rqs[i];
    uint64_t re;
    *q = (zc_grq){0};
    q->rounds = zc_gpu_rounds(c, s, &re);
    q->round_elems = re;
    q->in_place = s->kind == ZC_K_ALLREDUCE && s->send == s->recv;
    q->gate = gate;
    q->phase = gate ? ZC_G_GATE : ZC_G_READY;
    r->held = gate != 0;
    uint8_t **ptrs = g->ptrs + (size_t)i * 2u * g->nranks;
    for (uint32_t p = 0; p < 2u * g->nranks; p++) ptrs[p] = 0;
    ptrs[c->rank] = (uint8_t *)(uintptr_t)s->send;
    ptrs[g->nranks + c->rank] = s->recv;
    return ZC_OK;
}

/* The internal schedule of a CUDA registration (entry e): my record to every peer and every
 * peer's record into recs[0..n), then the mapping (ZC_G_MAP). Takes a sequence number like the
 * collective it replaces; nobody tests it (ZC_PLAN_INTERNAL): its slot frees itself. */
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
    zc_status st = zc_gpu_issue(c, &s, ZC_PLAN_INTERNAL, &req, 0);
    if (st == ZC_OK) c->gpu->rqs[c->active[c->nreqs_active - 1u]].mem = e;
    return st;
}

zc_status zc__gpu_issue(zc_comm *c, const zc__sched *s, int32_t plan, zc_req *req) {
    return zc_gpu_issue(c, s, plan, req, 0);
}

/* ---- the signals ---- */

static void zc_gpu_ref(const zc_comm *c, const void *p, uint32_t *creg, uint64_t *off) {
    bool partial = false;
    int32_t e = p ? zc_gpu_find(c, p, 1, &partial) : -1;
    *creg = ZC_GPU_NONE;
    *off = 0;
    if (e < 0) return;
    *creg = c->gpu->mems[e].creg;
    *off = (uint64_t)((const uint8_t *)p - (const uint8_t *)c->mems[e].addr);
}

/* The peer's buffer at (creg, off) in this process; false while that registration is not
 * mapped here yet. */
static bool zc_gpu_resolve(const zc_comm *c, uint32_t peer, uint32_t creg, uint64_t off,
                           uint8_t **out) {
    struct zc__gpu *g = c->gpu;
    *out = 0;
    if (creg == ZC_GPU_NONE) return true;
    for (uint32_t e = 0; e < c->cfg.max_mems; e++) {
        if (!c->mems[e].addr || c->mems[e].kind != ZC_MEM_CUDA || g->mems[e].creg != creg)
            continue;
        if (g->mems[e].state != ZC_GMEM_MAPPED) return false;
        *out = g->mapped[(size_t)e * g->nranks + peer] + off;
        return true;
    }
    return false; /* its exchange has not been issued here yet: wait */
}

/* Takes peer's READY; false when it cannot be used yet (or the communicator failed). */
static bool zc_gpu_take_hello(zc_comm *c, zc__req *r, uint32_t idx, uint32_t p,
                              const uint8_t *payload) {
    struct zc__gpu *g = c->gpu;
    zc_ghello h;
    zc__memcpy(&h, payload, sizeof h);
    if (h.round_elems != g->rqs[idx].round_elems) {
        zc__fail(c, ZC_MISMATCH, r->seq, (int32_t)p, 0, "%s sequence %llu: rank %u works in "
                 "rounds of %llu elements and rank %u in rounds of %llu: "
                 "cfg->gpu_scratch_bytes must be equal on every rank",
                 zc__kind_name(r->s.kind), (unsigned long long)r->seq, p,
                 (unsigned long long)h.round_elems, c->rank,
                 (unsigned long long)g->rqs[idx].round_elems);
        return false;
    }
    uint8_t **ptrs = g->ptrs + (size_t)idx * 2u * g->nranks;
    return zc_gpu_resolve(c, p, h.send_creg, h.send_off, &ptrs[p]) &&
           zc_gpu_resolve(c, p, h.recv_creg, h.recv_off, &ptrs[g->nranks + p]);
}

/* Sends message k to every peer (READY's payload for k == 0) and consumes message k from every
 * peer; true once both are done for all. */
static bool zc_gpu_exchange(zc_comm *c, zc__req *r, uint32_t idx, uint64_t k) {
    bool all = true, reg = r->s.alg == ZC_ALG_GPU_REGISTER;
    zc_ghello h = {0};
    if (k == 0 && !reg) {
        zc_gpu_ref(c, r->s.send, &h.send_creg, &h.send_off);
        zc_gpu_ref(c, r->s.recv, &h.recv_creg, &h.recv_off);
        h.round_elems = c->gpu->rqs[idx].round_elems;
    }
    /* Message 0's payload: READY, or a registration's record (the schedule's send). */
    const void *out = reg ? (const void *)r->s.send : (const void *)&h;
    size_t bytes = k != 0 ? 0 : reg ? sizeof(zc_gpu_ipc) : sizeof h;
    for (uint32_t p = 0; p < c->nranks && !c->failed; p++) {
        if (p == c->rank) continue;
        if (zc__tx_done(c, r, p) == k) {
            uint8_t *dst = zc__tx_begin(c, r, p, k);
            if (dst && bytes) zc__memcpy(dst, out, bytes);
            if (dst) (void)zc__tx_end(c, r, p, k, bytes);
        }
        if (zc__rx_done(c, r, p) == k) {
            const uint8_t *src = zc__rx_peek(c, r, p, k, bytes);
            if (src && reg) zc__memcpy(r->s.recv + (size_t)p * bytes, src, bytes);
            if (src && (k != 0 || reg || zc_gpu_take_hello(c, r, idx, p, src)))
                zc__rx_consume(c, r, p);
        }
        if (zc__tx_done(c, r, p) <= k || zc__rx_done(c, r, p) <= k) all = false;
    }
    return all && !c->failed;
}

/* ---- launches ---- */

static zc_status zc_gpu_launch_direct(zc_comm *c, struct zc__gpu *g, zc__req *r,
                                      uint8_t *const *ptrs) {
    const zc__sched *s = &r->s;
    const zc_gpu_ops *o = g->ops;
    uint32_t n = c->nranks, me = c->rank, root = s->root;
    size_t blk = (size_t)(s->count * s->esize);
    const void *srcs[ZC_GPU_MAX_SRCS];
    zc_status st = ZC_OK;
    switch (s->kind) {
    case ZC_K_REDUCE:
    case ZC_K_REDUCE_SCATTER:
        if (s->kind == ZC_K_REDUCE && me != root) return ZC_OK;
        for (uint32_t p = 0; p < n; p++)
            srcs[p] = ptrs[p] + (s->kind == ZC_K_REDUCE ? 0 : me * blk);
        return o->reduce(g->state, s->recv, srcs, n, (size_t)s->count, (zc_dtype)s->dtype,
                         (zc_op)s->op);
    case ZC_K_BROADCAST:
        if (me != root) return o->copy(g->state, s->recv, ptrs[root], blk);
        return s->recv && s->recv != s->send ? o->copy(g->state, s->recv, s->send, blk) : ZC_OK;
    case ZC_K_SCATTER:
        if (me != root) return o->copy(g->state, s->recv, ptrs[root] + me * blk, blk);
        return s->recv != s->send + me * blk ? o->copy(g->state, s->recv, s->send + me * blk, blk)
                                             : ZC_OK;
    case ZC_K_GATHER:
    case ZC_K_ALLGATHER:
    case ZC_K_ALLTOALL:
        if (s->kind == ZC_K_GATHER && me != root) return ZC_OK;
        for (uint32_t p = 0; p < n && st == ZC_OK; p++) {
            const uint8_t *src = ptrs[p] + (s->kind == ZC_K_ALLTOALL ? me * blk : 0);
            if (s->recv + p * blk != src) st = o->copy(g->state, s->recv + p * blk, src, blk);
        }
        return st;
    default: return ZC_OK; /* barrier and count 0: signals only */
    }
}

/* Elements [lo, lo+len) of the block of rank b within round q->round's region (RS+AG). */
static void zc_gpu_block(const zc__req *r, const zc_grq *q, uint32_t n, uint32_t b,
                         uint64_t *lo, uint64_t *len) {
    uint64_t base = (uint64_t)q->round * q->round_elems, rest = r->s.count - base;
    uint64_t L = rest < q->round_elems ? rest : q->round_elems;
    *lo = base + zc__block_lo(L, n, b);
    *len = zc__block_lo(L, n, b + 1) - zc__block_lo(L, n, b);
}

/* The round's reduction (ONESHOT, RSAG) or the collective's copies (DIRECT). */
static zc_status zc_gpu_launch_main(zc_comm *c, struct zc__gpu *g, zc__req *r, zc_grq *q,
                                    uint8_t *const *ptrs) {
    const zc__sched *s = &r->s;
    uint32_t n = c->nranks, es = s->esize;
    const void *srcs[ZC_GPU_MAX_SRCS];
    uint64_t lo, len;
    if (s->alg == ZC_ALG_GPU_DIRECT) return zc_gpu_launch_direct(c, g, r, ptrs);
    if (s->alg == ZC_ALG_GPU_RSAG) {
        zc_gpu_block(r, q, n, c->rank, &lo, &len);
    } else {
        lo = (uint64_t)q->round * q->round_elems;
        len = s->count - lo < q->round_elems ? s->count - lo : q->round_elems;
    }
    if (!len) return ZC_OK;
    for (uint32_t p = 0; p < n; p++) srcs[p] = ptrs[p] + lo * es;
    void *dst = q->in_place ? (void *)g->scratch : (void *)(s->recv + lo * es);
    return g->ops->reduce(g->state, dst, srcs, n, (size_t)len, (zc_dtype)s->dtype, (zc_op)s->op);
}

/* In place: the round's result from scratch into recv. */
static zc_status zc_gpu_launch_place(zc_comm *c, struct zc__gpu *g, zc__req *r, zc_grq *q) {
    uint64_t lo, len, es = r->s.esize;
    if (r->s.alg == ZC_ALG_GPU_RSAG) {
        zc_gpu_block(r, q, c->nranks, c->rank, &lo, &len);
    } else {
        lo = (uint64_t)q->round * q->round_elems;
        len = r->s.count - lo < q->round_elems ? r->s.count - lo : q->round_elems;
    }
    return len ? g->ops->copy(g->state, r->s.recv + lo * es, g->scratch, (size_t)(len * es))
               : ZC_OK;
}

/* RS+AG: every peer's reduced block of the round from its recv into mine. */
static zc_status zc_gpu_launch_gather(zc_comm *c, struct zc__gpu *g, zc__req *r, zc_grq *q,
                                      uint8_t *const *ptrs) {
    uint64_t lo, len, es = r->s.esize;
    zc_status st = ZC_OK;
    for (uint32_t p = 0; p < c->nranks && st == ZC_OK; p++) {
        if (p == c->rank) continue;
        zc_gpu_block(r, q, c->nranks, p, &lo, &len);
        if (len)
            st = g->ops->copy(g->state, r->s.recv + lo * es, ptrs[g->nranks + p] + lo * es,
                              (size_t)(len * es));
    }
    return st;
}

/* ---- the state machine of one device request ---- */

static uint32_t zc_gpu_next_round(zc_grq *q, const zc__req *r) {
    q->round++;
    if (q->round < q->rounds) return ZC_G_MAIN;
    return r->s.alg == ZC_ALG_GPU_ONESHOT ? ZC_G_FINISHED : ZC_G_SYNC_DONE;
}

/* Launches (what) and records the request's event; the next phase waits for it. */
static bool zc_gpu_launched(zc_comm *c, struct zc__gpu *g, zc__req *r, uint32_t idx,
                            zc_status st) {
    if (st == ZC_OK) st = g->ops->event_record(g->state, idx);
    if (st == ZC_OK) return true;
    zc_gpu_fail(c, g, st, zc__kind_name(r->s.kind), r->seq);
    return false;
}

/* ZC_OK once the request's event completed; ZC_IN_PROGRESS before; failures fail the comm. */
static zc_status zc_gpu_waited(zc_comm *c, struct zc__gpu *g, zc__req *r, uint32_t idx) {
    zc_status st = g->ops->event_query(g->state, idx);
    if (st == ZC_OK || st == ZC_IN_PROGRESS) return st;
    return zc_gpu_fail(c, g, st, zc__kind_name(r->s.kind), r->seq);
}

/* One phase transition; false when the request has to wait (or failed). */
static bool zc_gpu_advance(zc_comm *c, struct zc__gpu *g, zc__req *r, uint32_t idx) {
    zc_grq *q = &g->rqs[idx];
    uint8_t *const *ptrs = g->ptrs + (size_t)idx * 2u * g->nranks;
    bool rsag = r->s.alg == ZC_ALG_GPU_RSAG;
    switch (q->phase) {
    case ZC_G_GATE: {
        uint32_t *start = &g->flags[2u * (q->gate - 1u)];
        if (__atomic_load_n(start, __ATOMIC_ACQUIRE) != g->binds[q->gate - 1u].tick) return false;
        __atomic_store_n(start, 0u, __ATOMIC_RELAXED);
        r->held = 0; /* the deadline runs from progress's next clock read */
        r->deadline_ns = 0;
        q->phase = ZC_G_READY;
        return true;
    }
    case ZC_G_READY:
        if (!zc_gpu_exchange(c, r, idx, 0)) return false;
        q->phase = r->s.alg == ZC_ALG_GPU_REGISTER ? ZC_G_MAP : ZC_G_MAIN;
        return true;
    case ZC_G_MAP:
        if (!zc_gpu_map(c, g, q->mem)) return false;
        q->phase = ZC_G_FINISHED;
        return true;
    case ZC_G_MAIN:
        if (!zc_gpu_launched(c, g, r, idx, zc_gpu_launch_main(c, g, r, q, ptrs))) return false;
        q->phase = ZC_G_MAIN_WAIT;
        return true;
    case ZC_G_MAIN_WAIT:
        if (zc_gpu_waited(c, g, r, idx) != ZC_OK) return false;
        q->phase = r->s.alg == ZC_ALG_GPU_DIRECT ? ZC_G_SYNC_DONE : ZC_G_SYNC_A;
        return true;
    case ZC_G_SYNC_A:
        if (!zc_gpu_exchange(c, r, idx, 1u + (rsag ? 2u : 1u) * (uint64_t)q->round))
            return false;
        q->phase = q->in_place ? ZC_G_PLACE : rsag ? ZC_G_SYNC_B : zc_gpu_next_round(q, r);
        return true;
    case ZC_G_PLACE:
        if (!zc_gpu_launched(c, g, r, idx, zc_gpu_launch_place(c, g, r, q))) return false;
        q->phase = ZC_G_PLACE_WAIT;
        return true;
    case ZC_G_PLACE_WAIT:
        if (zc_gpu_waited(c, g, r, idx) != ZC_OK) return false;
        q->phase = rsag ? ZC_G_SYNC_B : zc_gpu_next_round(q, r);
        return true;
    case ZC_G_SYNC_B:
        if (!zc_gpu_exchange(c, r, idx, 2u + 2u * (uint64_t)q->round)) return false;
        q->phase = ZC_G_GATHER;
        return true;
    case ZC_G_GATHER:
        if (!zc_gpu_launched(c, g, r, idx, zc_gpu_launch_gather(c, g, r, q, ptrs))) return false;
        q->phase = ZC_G_GATHER_WAIT;
        return true;
    case ZC_G_GATHER_WAIT:
        if (zc_gpu_waited(c, g, r, idx) != ZC_OK) return false;
        q->phase = zc_gpu_next_round(q, r);
        return true;
    case ZC_G_SYNC_DONE:
        if (!zc_gpu_exchange(c, r, idx, rsag ? 1u + 2u * (uint64_t)q->rounds : 1u))
            return false;
        q->phase = ZC_G_FINISHED;
        return true;
    default: return false;
    }
}

void zc__gpu_step(zc_comm *c, zc__req *r, uint32_t *budget) {
    struct zc__gpu *g = c->gpu;
    uint32_t idx = (uint32_t)(r - c->reqs);
    ZC_ASSERT(g && idx < c->cfg.max_requests);
    while (*budget && !c->failed && zc_gpu_advance(c, g, r, idx)) (*budget)--;
    if (!c->failed && g->rqs[idx].phase == ZC_G_FINISHED) {
        ZC_ASSERT(r->tx_left == 0 && r->rx_left == 0);
        r->status = ZC_OK;
    }
}

/* ---- stream-ordered starts ---- */

static void zc_gpu_bind_done(struct zc__gpu *g, uint32_t i) {
    zc_gbind *b = &g->binds[i];
    __atomic_store_n(&g->flags[2u * i + 1u], b->tick, __ATOMIC_RELEASE);
    b->state = b->persistent ? ZC_BIND_ARMED : ZC_BIND_FREE;
}

/* Starts armed (graph-captured) calls whose stream reached them; finishes running ones by
 * writing their done flag (also after a failure: the caller's stream must not hang; the
 * communicator's status says what happened). */
static void zc_gpu_poll_binds(zc_comm *c, struct zc__gpu *g) {
    for (uint32_t i = 0; i < g->nbinds; i++) {
        zc_gbind *b = &g->binds[i];
        if (b->state == ZC_BIND_ARMED) {
            uint32_t *start = &g->flags[2u * i];
            if (__atomic_load_n(start, __ATOMIC_ACQUIRE) != b->tick) continue;
            zc_status st = zc_gpu_issue(c, &b->s, -1, &b->req, 0);
            if (st == ZC_AGAIN) continue; /* no request slot now: the flag stays up */
            __atomic_store_n(start, 0u, __ATOMIC_RELAXED);
            if (st != ZC_OK) zc_gpu_bind_done(g, i);
            else b->state = ZC_BIND_RUNNING;
        } else if (b->state == ZC_BIND_RUNNING) {
            if (zc__test(c, &b->req) != ZC_IN_PROGRESS) zc_gpu_bind_done(g, i);
        }
    }
}

void zc__gpu_progress(zc_comm *c) {
    struct zc__gpu *g = c->gpu;
    if (!g) return;
    zc_gpu_poll_binds(c, g);
}

/* Enqueues a stream-ordered call on the caller's stream: [captured: done = tick - 1]
 * start = tick; wait until done >= tick. Not captured: the request is issued now (it takes its
 * place in the call order now) and waits at its gate for the start flag. Captured in a graph:
 * the slot stays armed until zc_comm_fini and every replay runs the call once more, taking its
 * place in the call order when the replay reaches it. */
static zc_status zc_gpu_stream_start(zc_comm *c, zc__sched *s, void *stream) {
    struct zc__gpu *g = c->gpu, *h = zc_gpu_header(c);
    const char *name = zc__kind_name(s->kind);
    uint32_t i;
    bool captured = false;
    if (!g)
        return zc__error(c, ZC_UNSUPPORTED, "%s_stream: %s", name,
                         h ? h->why : zc_gpu_absent(c));
    if (s->alg == ZC_ALG_STAGED)
        return zc__error(c, ZC_UNSUPPORTED, "%s_stream: stream-ordered calls on the staged path "
                         "(%s) are not supported yet: call %s and wait instead", name,
                         zc__stage_path(c) == ZC_GPU_PATH_STAGED ? "this communicator's "
                         "gpu_path" : "device send/recv", name);
    if (!zc__gpu_alg(s->alg)) {
        if (s->kind != ZC_K_BARRIER && s->count != 0)
            return zc__error(c, ZC_INVALID_ARG, "%s_stream: the buffers must be registered "
                             "ZC_MEM_CUDA memory", name);
        s->alg = ZC_ALG_GPU_DIRECT; /* signals only: starts and ends in stream order */
    }
    for (i = 0; i < g->nbinds && g->binds[i].state != ZC_BIND_FREE; i++) {
    }
    if (i == g->nbinds)
        return zc__error(c, ZC_AGAIN, "%s_stream: all %u stream slots are in use "
                         "(cfg->gpu_stream_slots; graph-captured calls hold theirs until "
                         "zc_comm_fini)", name, g->nbinds);
    zc_gbind *b = &g->binds[i];
    const zc_gpu_ops *o = g->ops;
    uint32_t tick = b->tick + 1u ? b->tick + 1u : 1u;
    zc_status st = o->stream_capturing(g->state, stream, &captured);
    if (st == ZC_OK && captured) st = o->stream_write_flag(g->state, stream, 2u * i + 1u, tick - 1u);
    if (st == ZC_OK) st = o->stream_write_flag(g->state, stream, 2u * i, tick);
    if (st == ZC_OK) st = o->stream_wait_flag(g->state, stream, 2u * i + 1u, tick);
    if (st != ZC_OK) /* the caller's stream (or capture) is broken, not the communicator */
        return zc__error(c, st, "%s_stream: %s", name, o->error_text(g->state));
    b->tick = tick;
    b->s = *s;
    b->persistent = captured;
    if (captured) {
        b->state = ZC_BIND_ARMED;
        return ZC_OK;
    }
    /* Enqueued already, so it must run: without a request slot now (or on a failed
     * communicator) the slot is armed instead and starts (or fails, writing done) when the
     * stream gets there, like a captured call. */
    b->state = zc_gpu_issue(c, s, -1, &b->req, i + 1u) == ZC_OK ? ZC_BIND_RUNNING
                                                                 : ZC_BIND_ARMED;
    return ZC_OK;
}

static zc_status zc_stream_call(zc_comm *c, uint32_t kind, const void *send, void *recv,
                                size_t count, zc_dtype dtype, zc_op op, uint32_t root,
                                void *stream) {
    zc__sched s;
    if (!zc__comm_ok(c)) return ZC_INVALID_ARG;
    zc__lock(c);
    zc_status st = zc__build(c, kind, send, recv, count, dtype, op, root, &s);
    if (st == ZC_OK) st = zc_gpu_stream_start(c, &s, stream);
    zc__unlock(c);
    return st;
}

zc_status zc_allreduce_stream(zc_comm *comm, const void *send, void *recv, size_t count,
                              zc_dtype dtype, zc_op op, void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_ALLREDUCE, send, recv, count, dtype, op, 0, cuda_stream);
}
zc_status zc_reduce_stream(zc_comm *comm, const void *send, void *recv, size_t count,
                           zc_dtype dtype, zc_op op, uint32_t root, void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_REDUCE, send, recv, count, dtype, op, root, cuda_stream);
}
zc_status zc_broadcast_stream(zc_comm *comm, const void *send, void *recv, size_t count,
                              zc_dtype dtype, uint32_t root, void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_BROADCAST, send, recv, count, dtype, ZC_SUM, root,
                          cuda_stream);
}
zc_status zc_reduce_scatter_stream(zc_comm *comm, const void *send, void *recv,
                                   size_t recvcount, zc_dtype dtype, zc_op op,
                                   void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_REDUCE_SCATTER, send, recv, recvcount, dtype, op, 0,
                          cuda_stream);
}
zc_status zc_allgather_stream(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                              zc_dtype dtype, void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_ALLGATHER, send, recv, sendcount, dtype, ZC_SUM, 0,
                          cuda_stream);
}
zc_status zc_gather_stream(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                           zc_dtype dtype, uint32_t root, void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_GATHER, send, recv, sendcount, dtype, ZC_SUM, root,
                          cuda_stream);
}
zc_status zc_scatter_stream(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                            zc_dtype dtype, uint32_t root, void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_SCATTER, send, recv, recvcount, dtype, ZC_SUM, root,
                          cuda_stream);
}
zc_status zc_alltoall_stream(zc_comm *comm, const void *send, void *recv, size_t count,
                             zc_dtype dtype, void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_ALLTOALL, send, recv, count, dtype, ZC_SUM, 0,
                          cuda_stream);
}
zc_status zc_send_stream(zc_comm *comm, const void *buf, size_t count, zc_dtype dtype,
                         uint32_t peer, void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_SEND, buf, 0, count, dtype, ZC_SUM, peer, cuda_stream);
}
zc_status zc_recv_stream(zc_comm *comm, void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                         void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_RECV, 0, buf, count, dtype, ZC_SUM, peer, cuda_stream);
}
zc_status zc_barrier_stream(zc_comm *comm, void *cuda_stream) {
    return zc_stream_call(comm, ZC_K_BARRIER, 0, 0, 0, ZC_UINT8, ZC_SUM, 0, cuda_stream);
}
