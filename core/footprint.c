/* footprint.c: zc_comm_footprint, what a communicator would take on one rank before it is
 * made: the arena (layout.c's zc__layout), the memory and connections of the wire init picks
 * (its takes and links, the functions its create sizes with) and the device scratch
 * (gpu_mem.c's). Creates, maps and opens nothing. */
#include "device.h"

/* The configuration init ends up with for cfg when its ranks span hosts (its transport
 * picked); false with a sentence when init would refuse it. */
static bool zc_fp_pick(const zc_config *cfg, uint32_t per, uint32_t hosts, zc_config *picked) {
    *picked = *cfg;
    picked->transport = zc__transport_picked(cfg->transport, hosts > 1);
    if (picked->transport == ZC_TRANSPORT_HIER && hosts == 1)
        picked->transport = ZC_TRANSPORT_SHM; /* as init: one host needs no second wire */
    if (picked->transport == ZC_TRANSPORT_HIER && !zc__hier_inter_name()) {
        zc__set_init_error("zc_comm_footprint: cfg->transport is hier: this build has no "
                           "transport_ib (configure.py found no libibverbs)");
        return false;
    }
    if (picked->transport == ZC_TRANSPORT_SHM && hosts > 1) {
        zc__set_init_error("zc_comm_footprint: cfg->transport is shm but %u ranks at %u per host "
                           "span %u hosts: the shared-memory wire needs every rank on one host "
                           "(use ib or auto)", cfg->nranks, per, hosts);
        return false;
    }
#ifndef ZC_HAVE_IB
    if (picked->transport == ZC_TRANSPORT_IB) {
        zc__set_init_error("zc_comm_footprint: %s: this build has no transport_ib (configure.py "
                           "found no libibverbs)", hosts > 1 ? "ranks span hosts"
                                                            : "cfg->transport is ib");
        return false;
    }
#endif
    return true;
}

/* The two-wire communicator's memory and links on a rank of a full host of per ranks (the
 * last host holds the remainder): each instance over its own connections, under the caps init
 * derives (comm.c's zc__hier_caps); shared memory from the instances that share it. */
static void zc_fp_hier(const zc_config *cfg, const zc_wire_geom *g, uint32_t per,
                       zc_footprint *out, zc_wire_links *links) {
    uint32_t n = cfg->nranks, least = n % per ? n % per : per, cap = zc__conn_cap(cfg);
    uint32_t nconn[2] = {per, g->nconn - per + 1u}, caps[2] = {per, n - least + 1u};
    if (zc__overlay(cfg)) caps[1] = cap;
    zc__hier_cost cost;
    zc__hier_need(cfg, g, nconn, caps, &cost);
    *links = (zc_wire_links){0};
    for (uint32_t k = 0; k < 2u; k++) {
        size_t mem = (size_t)cost.mem[k];
        out->shared_bytes += cost.links[k].shared ? mem : 0;
        out->private_bytes += cost.links[k].shared ? 0 : mem;
        out->registered_bytes += (size_t)cost.locked[k];
        links->peers += cost.links[k].peers;
        links->qps += cost.links[k].qps;
        links->cq_entries += cost.links[k].cq_entries;
    }
}

zc_status zc_comm_footprint(const zc_config *cfg, uint32_t ranks_per_host, zc_footprint *out) {
    char why[ZC_ERROR_TEXT_BYTES];
    zc__arena_map L;
    zc_config picked;
    if (out) *out = (zc_footprint){0};
    if (!out || !zc__config_check(cfg, why, sizeof why)) {
        zc__set_init_error("zc_comm_footprint: %s%s", out ? "invalid configuration: " : "",
                           out ? why : "out is NULL");
        return ZC_INVALID_ARG;
    }
    bool inproc = cfg->transport == ZC_TRANSPORT_INPROC;
    if (inproc) ranks_per_host = cfg->inproc_ranks_per_host; /* its simulated hosts */
    uint32_t per = !ranks_per_host || ranks_per_host > cfg->nranks ? cfg->nranks
                                                                   : ranks_per_host;
    uint32_t hosts = (cfg->nranks + per - 1u) / per;
    if (!inproc && !zc_fp_pick(cfg, per, hosts, &picked)) return ZC_UNSUPPORTED;
    if (inproc) picked = *cfg;
    ZC_ASSERT(zc__layout(cfg, &L)); /* init carves cfg as given (AUTO: every candidate wire) */
    const zc_wire_ops *w = zc__wire_for(&picked);
    void *const no_window = 0;
    zc_wire_geom g = L.geom;
    g.cfg = &picked;
    if (inproc) g.inproc_windows = &no_window; /* the window is in the arena */
    g.nconn = zc__conn_count(cfg, per); /* this rank's connections */
    uint64_t mem = 0, locked = 0;
    zc_wire_links links;
    if (w == &zc__wire_hier) {
        zc_fp_hier(&picked, &g, per, out, &links);
    } else {
        w->takes(&g, &mem, &locked);
        w->links(&g, &links);
        out->shared_bytes = links.shared ? (size_t)mem : 0;
        out->private_bytes = links.shared ? 0 : (size_t)mem;
        out->registered_bytes = (size_t)locked;
    }
    out->arena_bytes = L.total;
    if (zc__gpu_provider(cfg) && cfg->nranks <= ZC_GPU_MAX_SRCS)
        out->device_bytes = (size_t)zc__gpu_scratch_bytes(cfg, zc__gpu_tries_direct(w, &picked)) +
                            (size_t)cfg->gpu_stream_slots * sizeof(zc_gpu_desc);
    out->peers = links.peers;
    out->qps = links.qps;
    out->cq_entries = links.cq_entries;
    out->address_bytes = L.bytes[ZC_R_ADDRS];
    out->init_bytes = L.bytes[ZC_R_SCRATCH];
    out->rank_bytes = L.bytes[ZC_R_CONN] + L.bytes[ZC_R_GROUP];
    out->hosts = hosts;
    out->transport = picked.transport;
    return ZC_OK;
}
