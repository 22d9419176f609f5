/* verbs.c: every libibverbs call of transport_ib, and its error text. Opens the device and
 * port (auto: the first device with an active port; on Ethernet the best RoCE GID), reads and
 * checks the device limits, makes the protection domain, memory registrations, completion
 * queue and RC queue pairs, moves them INIT -> RTR -> RTS, posts and polls. libibverbs' error
 * space (errno, enum ibv_wc_status) stops here: callers get zc_status values and sentences.
 * Must not: allocate, or register memory after init except the caller's explicit
 * registrations (zc_mem_register reaches zc__ib_reg_user through the wire).
 * Inline verbs (ibv_post_send, ibv_post_recv, ibv_poll_cq) import no symbol; ibv_query_port
 * and ibv_reg_mr are macros (VERBS_NOTES.md section 2). */
#include <errno.h>
#include <infiniband/verbs.h>

#include "ib.h"

/* ---- sentences ------------------------------------------------------------------------------ */

const char *zc__ib_errno_text(int e, char *buf, size_t cap) {
    char os[96];
    zc_plat_os_error_text(e, os, sizeof os);
    zc__fmt(buf, cap, "%s, errno %d", os, e);
    return buf;
}

const char *zc__ib_wc_text(uint32_t status) {
    return ibv_wc_status_str((enum ibv_wc_status)status);
}

static zc_status zc_verbs_fail(char *err, size_t cap, zc_status st, const char *what,
                               const char *dev, int e) {
    char why[128];
    zc__fmt(err, cap, "ib: %s on %s failed (%s)", what, dev, zc__ib_errno_text(e, why,
                                                                                  sizeof why));
    return st;
}

/* ---- device, port and GID ------------------------------------------------------------------- */

static int zc_same(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

static int zc_gid_zero(const uint8_t *g) {
    for (int i = 0; i < 16; i++)
        if (g[i]) return 0;
    return 1;
}

static int zc_gid_v4mapped(const uint8_t *g) {
    for (int i = 0; i < 10; i++)
        if (g[i]) return 0;
    return g[10] == 0xff && g[11] == 0xff;
}

/* How much auto likes GID idx: 3 RoCE v2 IPv4-mapped, 2 RoCE v2, 1 any other, 0 empty. */
static int zc_gid_score(struct ibv_context *ctx, uint32_t port, int idx, uint8_t *gid) {
    struct ibv_gid_entry e;
    if (ibv_query_gid_ex(ctx, port, (uint32_t)idx, &e, 0) == 0) {
        __builtin_memcpy(gid, e.gid.raw, 16);
        if (zc_gid_zero(gid)) return 0;
        if (e.gid_type != IBV_GID_TYPE_ROCE_V2) return 1;
        return zc_gid_v4mapped(gid) ? 3 : 2;
    }
    union ibv_gid g; /* kernels without the GID type: the plain query, type unknown */
    if (ibv_query_gid(ctx, (uint8_t)port, idx, &g) != 0) return 0;
    __builtin_memcpy(gid, g.raw, 16);
    return zc_gid_zero(gid) ? 0 : zc_gid_v4mapped(gid) ? 2 : 1;
}

/* The GID of an Ethernet (RoCE) port: cfg's index, or the best by zc_gid_score. */
static zc_status zc_pick_gid(zc_ib_dev *d, int32_t want, int tbl_len, char *err, size_t cap) {
    uint8_t gid[16];
    if (want >= 0) {
        if (want >= tbl_len || zc_gid_score(d->ctx, d->port, want, gid) == 0) {
            zc__fmt(err, cap, "ib: GID index %d of %s port %u is empty (the table has %d "
                       "entries; set ZC_IB_GID_INDEX to a filled one, or auto)", (int)want,
                       d->name, d->port, tbl_len);
            return ZC_INVALID_ARG;
        }
        __builtin_memcpy(d->gid, gid, 16);
        d->gid_index = want;
        return ZC_OK;
    }
    int best = 0;
    for (int i = 0; i < tbl_len && best < 3; i++) {
        int score = zc_gid_score(d->ctx, d->port, i, gid);
        if (score <= best) continue;
        best = score;
        d->gid_index = i;
        __builtin_memcpy(d->gid, gid, 16);
    }
    if (best) return ZC_OK;
    zc__fmt(err, cap, "ib: %s port %u is RoCE but has no GID (is an IP address set on its "
               "network device?)", d->name, d->port);
    return ZC_TRANSPORT;
}

/* Takes port p of d when it is active; fills the addressing fields. */
static zc_status zc_take_port(zc_ib_dev *d, uint32_t p, int32_t gid_want, char *err,
                              size_t cap) {
    struct ibv_port_attr pa;
    if (ibv_query_port(d->ctx, (uint8_t)p, &pa) != 0)
        return zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_query_port", d->name, errno);
    if (pa.state != IBV_PORT_ACTIVE) {
        zc__fmt(err, cap, "ib: %s port %u is %s, not active", d->name, p,
                   ibv_port_state_str(pa.state));
        return ZC_TRANSPORT;
    }
    d->port = p;
    d->mtu = (uint32_t)pa.active_mtu;
    d->lid = pa.lid;
    d->gid_index = -1;
    if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
        d->link_layer = ZC_IB_LINK_ETH;
        return zc_pick_gid(d, gid_want, pa.gid_tbl_len, err, cap);
    }
    d->link_layer = ZC_IB_LINK_IB;
    if (!pa.lid) {
        zc__fmt(err, cap, "ib: %s port %u has no LID (is a subnet manager running?)",
                   d->name, p);
        return ZC_TRANSPORT;
    }
    /* InfiniBand routes by LID; a GID index given explicitly adds a GRH (other subnets). The
     * port GID is published either way, for peers that address this rank with a GRH. */
    if (gid_want >= 0) return zc_pick_gid(d, gid_want, pa.gid_tbl_len, err, cap);
    union ibv_gid g;
    if (ibv_query_gid(d->ctx, (uint8_t)p, 0, &g) == 0) __builtin_memcpy(d->gid, g.raw, 16);
    return ZC_OK;
}

static zc_status zc_take_device(zc_ib_dev *d, struct ibv_device *dev, const zc_config *cfg,
                                char *err, size_t cap) {
    struct ibv_device_attr a;
    d->ctx = ibv_open_device(dev);
    if (!d->ctx) return zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_open_device", d->name, errno);
    if (ibv_query_device(d->ctx, &a) != 0)
        return zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_query_device", d->name, errno);
    d->max_qp_wr = a.max_qp_wr > 0 ? (uint32_t)a.max_qp_wr : 0;
    d->max_cqe = a.max_cqe > 0 ? (uint32_t)a.max_cqe : 0;
    d->max_qp = a.max_qp > 0 ? (uint32_t)a.max_qp : 0;
    d->max_sge = a.max_sge > 0 ? (uint32_t)a.max_sge : 0;
    d->max_mr_size = a.max_mr_size;
    d->atomics = a.atomic_cap != IBV_ATOMIC_NONE;
    d->rd_atomic = a.max_qp_rd_atom > 0 && a.max_qp_init_rd_atom > 0;
    if (!d->rd_atomic) d->atomics = 0;
    zc_status st = ZC_TRANSPORT;
    if (cfg->ib_port) {
        if (cfg->ib_port > a.phys_port_cnt) {
            zc__fmt(err, cap, "ib: %s has %u ports, cfg->ib_port is %u", d->name,
                       (unsigned)a.phys_port_cnt, cfg->ib_port);
            return ZC_INVALID_ARG;
        }
        return zc_take_port(d, cfg->ib_port, cfg->ib_gid_index, err, cap);
    }
    for (uint32_t p = 1; p <= a.phys_port_cnt && st != ZC_OK; p++)
        st = zc_take_port(d, p, cfg->ib_gid_index, err, cap);
    return st;
}

/* Names of the devices in list, for a sentence ("mlx5_0, mlx5_1"). */
static void zc_device_names(struct ibv_device **list, int num, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < num && n + 1 < cap; i++)
        n += zc__fmt(buf + n, cap - n, "%s%s", i ? ", " : "", ibv_get_device_name(list[i]));
}

static zc_status zc_no_device(struct ibv_device **list, int e, char *err, size_t cap) {
    char why[128];
    if (list)
        zc__fmt(err, cap, "ib: no RDMA device (ibv_get_device_list found none; is an RDMA "
                   "driver such as mlx5_ib or rdma_rxe loaded and a device present?)");
    else
        zc__fmt(err, cap, "ib: no RDMA device (ibv_get_device_list: %s; this kernel has no "
                   "RDMA support loaded)", zc__ib_errno_text(e, why, sizeof why));
    return ZC_UNSUPPORTED;
}

zc_status zc__ib_open(zc_ib_dev *d, const zc_config *cfg, char *err, size_t cap) {
    int num = 0;
    errno = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    if (!list || num <= 0) {
        int e = errno;
        if (list) ibv_free_device_list(list);
        return zc_no_device(list, e, err, cap);
    }
    zc_status st = ZC_UNSUPPORTED;
    for (int i = 0; i < num && st != ZC_OK; i++) {
        const char *name = ibv_get_device_name(list[i]);
        if (cfg->ib_device[0] && !zc_same(name, cfg->ib_device)) continue;
        zc__fmt(d->name, sizeof d->name, "%s", name);
        st = zc_take_device(d, list[i], cfg, err, cap);
        if (st != ZC_OK && d->ctx) {
            ibv_close_device(d->ctx);
            d->ctx = 0;
        }
        if (st != ZC_OK && cfg->ib_device[0]) break; /* the named one failed: say why */
    }
    if (st == ZC_UNSUPPORTED && cfg->ib_device[0]) {
        char names[160];
        zc_device_names(list, num, names, sizeof names);
        zc__fmt(err, cap, "ib: no RDMA device named \"%s\" (there are: %s)", cfg->ib_device,
                   names);
    }
    ibv_free_device_list(list);
    return st;
}

/* ---- limits, memory, completion queue ------------------------------------------------------ */

static zc_status zc_over(char *err, size_t cap, const zc_ib_dev *d, const char *what,
                         unsigned long long need, const char *limit, unsigned long long have) {
    int memory = zc_same(limit, "max_mr_size");
    zc__fmt(err, cap, "ib: %s needs %llu but %s allows %s %llu (%s fit)", what, need,
               d->name, limit, have, memory ? "smaller slot_bytes, fewer slots or fewer ranks"
                                            : "fewer slots, ranks or ib_qps_per_peer");
    return ZC_LIMIT;
}

zc_status zc__ib_check(const zc_ib_dev *d, const zc_ib_need *n, char *err, size_t cap) {
    if (n->sq_depth > d->max_qp_wr)
        return zc_over(err, cap, d, "each queue pair's send queue", n->sq_depth, "max_qp_wr",
                       d->max_qp_wr);
    if (n->rq_depth > d->max_qp_wr)
        return zc_over(err, cap, d, "each queue pair's receive queue", n->rq_depth,
                       "max_qp_wr", d->max_qp_wr);
    if (n->cqe > d->max_cqe)
        return zc_over(err, cap, d, "the completion queue", n->cqe, "max_cqe", d->max_cqe);
    if (n->qps > d->max_qp)
        return zc_over(err, cap, d, "the queue pairs", n->qps, "max_qp", d->max_qp);
    if (n->window_bytes > d->max_mr_size)
        return zc_over(err, cap, d, "the inbound window's registration", n->window_bytes,
                       "max_mr_size", d->max_mr_size);
    if (n->local_bytes > d->max_mr_size)
        return zc_over(err, cap, d, "the staging slots' registration", n->local_bytes,
                       "max_mr_size", d->max_mr_size);
    if (d->max_sge < 1) return zc_over(err, cap, d, "a work request", 1, "max_sge", 0);
    return ZC_OK;
}

static zc_status zc_reg_fail(char *err, size_t cap, const zc_ib_dev *d, const char *what,
                             size_t bytes, int e) {
    char why[128];
    zc__fmt(err, cap, "ib: registering the %s (%llu bytes) on %s failed (%s)%s", what,
               (unsigned long long)bytes, d->name, zc__ib_errno_text(e, why, sizeof why),
               e == ENOMEM || e == EPERM || e == EAGAIN
                   ? "; the locked-memory limit (ulimit -l) may be too low" : "");
    return ZC_TRANSPORT;
}

zc_status zc__ib_setup(zc_ib_dev *d, void *win, size_t win_bytes, void *loc, size_t loc_bytes,
                       uint32_t cqe, char *err, size_t cap) {
    unsigned remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                      (d->atomics ? (unsigned)IBV_ACCESS_REMOTE_ATOMIC : 0u);
    d->pd = ibv_alloc_pd(d->ctx);
    if (!d->pd) return zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_alloc_pd", d->name, errno);
    d->win_mr = ibv_reg_mr(d->pd, win, win_bytes, remote);
    if (!d->win_mr) return zc_reg_fail(err, cap, d, "inbound window", win_bytes, errno);
    d->loc_mr = ibv_reg_mr(d->pd, loc, loc_bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!d->loc_mr) return zc_reg_fail(err, cap, d, "staging slots", loc_bytes, errno);
    d->win_rkey = d->win_mr->rkey;
    d->loc_lkey = d->loc_mr->lkey;
    d->cq = ibv_create_cq(d->ctx, (int)(cqe ? cqe : 1u), 0, 0, 0);
    if (!d->cq) return zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_create_cq", d->name, errno);
    return ZC_OK;
}

zc_status zc__ib_reg_user(zc_ib_dev *d, void *addr, size_t bytes, int device, int32_t fd,
                          uint64_t fd_offset, struct ibv_mr **mr, char *err, size_t cap) {
    unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    *mr = 0;
    if (fd >= 0) {
        /* GPUDirect through dma-buf (kernel 5.12+, rdma-core 34+): the NIC maps the device
         * pages the fd exports; iova = addr, so peers write to the buffer's own address. */
        *mr = ibv_reg_dmabuf_mr(d->pd, fd_offset, bytes, (uint64_t)(uintptr_t)addr, fd,
                                (int)access);
        if (*mr) return ZC_OK;
        int e = errno;
        char why[128];
        zc__fmt(err, cap, "ib: ibv_reg_dmabuf_mr of %llu bytes of device memory on %s failed "
                   "(%s)", (unsigned long long)bytes, d->name,
                   zc__ib_errno_text(e, why, sizeof why));
        return e == EOPNOTSUPP || e == ENOSYS || e == EPROTONOSUPPORT ? ZC_UNSUPPORTED
                                                                      : ZC_TRANSPORT;
    }
    *mr = ibv_reg_mr(d->pd, addr, bytes, access);
    if (*mr) return ZC_OK;
    int e = errno;
    if (device) {
        /* Device memory by its address works only with nvidia-peermem loaded. */
        char why[128];
        zc__fmt(err, cap, "ib: ibv_reg_mr of %llu bytes of device memory on %s failed (%s): "
                   "GPUDirect RDMA needs dma-buf (CUDA 11.7+, an open kernel module) or the "
                   "nvidia-peermem module", (unsigned long long)bytes, d->name,
                   zc__ib_errno_text(e, why, sizeof why));
        return ZC_UNSUPPORTED;
    }
    return zc_reg_fail(err, cap, d, "buffer", bytes, e);
}

void zc__ib_dereg_user(struct ibv_mr *mr) {
    if (mr) (void)ibv_dereg_mr(mr);
}

uint32_t zc__ib_mr_lkey(const struct ibv_mr *mr) { return mr->lkey; }
uint32_t zc__ib_mr_rkey(const struct ibv_mr *mr) { return mr->rkey; }

void zc__ib_teardown(zc_ib_dev *d) {
    if (d->cq) ibv_destroy_cq(d->cq);
    if (d->loc_mr) ibv_dereg_mr(d->loc_mr);
    if (d->win_mr) ibv_dereg_mr(d->win_mr);
    if (d->pd) ibv_dealloc_pd(d->pd);
    if (d->ctx) ibv_close_device(d->ctx);
    d->cq = 0;
    d->loc_mr = d->win_mr = 0;
    d->pd = 0;
    d->ctx = 0;
}

/* ---- queue pairs ----------------------------------------------------------------------------- */

int zc__ib_post_recv(struct ibv_qp *qp, uint64_t wr_id) {
    /* No scatter entry: a WRITE WITH IMM only consumes the request (the data went to the
     * address the writer named). */
    struct ibv_recv_wr wr = {.wr_id = wr_id, .next = 0, .sg_list = 0, .num_sge = 0}, *bad = 0;
    return ibv_post_recv(qp, &wr, &bad);
}

zc_status zc__ib_qp_create(zc_ib_dev *d, const zc_ib_need *need, uint64_t recv_id,
                           struct ibv_qp **qp_out, uint32_t *qpn, char *err, size_t cap) {
    struct ibv_qp_init_attr ia;
    __builtin_memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = d->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;
    ia.cap.max_send_wr = need->sq_depth;
    ia.cap.max_recv_wr = need->rq_depth;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);
    if (!qp) return zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_create_qp", d->name, errno);
    *qp_out = qp;
    *qpn = qp->qp_num;
    struct ibv_qp_attr a;
    __builtin_memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)d->port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
                        (d->atomics ? (unsigned)IBV_ACCESS_REMOTE_ATOMIC : 0u);
    int e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                      IBV_QP_ACCESS_FLAGS);
    if (e) return zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_modify_qp to INIT", d->name, e);
    /* Every receive the peer can ever need is posted before RTR: no RNR by construction. */
    for (uint32_t i = 0; i < need->rq_depth; i++) {
        e = zc__ib_post_recv(qp, recv_id);
        if (e) return zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_post_recv", d->name, e);
    }
    return ZC_OK;
}

static zc_status zc_to_rtr(const zc_ib_dev *d, struct ibv_qp *qp, const zc_ib_remote *r,
                           char *err, size_t cap) {
    struct ibv_qp_attr a;
    __builtin_memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(r->mtu < d->mtu ? r->mtu : d->mtu);
    a.dest_qp_num = r->qpn;
    a.rq_psn = r->psn;
    a.max_dest_rd_atomic = (uint8_t)d->rd_atomic;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = (uint8_t)d->port;
    a.ah_attr.dlid = (uint16_t)r->lid;
    if (d->gid_index >= 0) {
        a.ah_attr.is_global = 1;
        __builtin_memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    int e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                      IBV_QP_MIN_RNR_TIMER);
    return e ? zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_modify_qp to RTR", d->name, e) : ZC_OK;
}

zc_status zc__ib_qp_connect(const zc_ib_dev *d, struct ibv_qp *qp, const zc_ib_remote *r,
                            uint32_t my_psn, uint32_t timeout, uint32_t retry_cnt, char *err,
                            size_t cap) {
    zc_status st = zc_to_rtr(d, qp, r, err, cap);
    if (st != ZC_OK) return st;
    struct ibv_qp_attr a;
    __builtin_memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t)timeout;
    a.retry_cnt = (uint8_t)retry_cnt;
    a.rnr_retry = 7; /* never needed: receives are posted before every credit */
    a.sq_psn = my_psn;
    a.max_rd_atomic = (uint8_t)d->rd_atomic;
    int e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    return e ? zc_verbs_fail(err, cap, ZC_TRANSPORT, "ibv_modify_qp to RTS", d->name, e) : ZC_OK;
}

void zc__ib_qp_error(struct ibv_qp *qp) {
    struct ibv_qp_attr a;
    __builtin_memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_ERR;
    (void)ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

void zc__ib_qp_destroy(struct ibv_qp *qp) { (void)ibv_destroy_qp(qp); }

/* Immediates travel in network order (libibverbs passes them through as they are). */
static uint32_t zc_be32(uint32_t v) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_bswap32(v);
#else
    return v;
#endif
}

/* ---- data path ------------------------------------------------------------------------------- */

int zc__ib_post_write(struct ibv_qp *qp, uint64_t wr_id, int signaled, const void *src,
                      uint32_t lkey, uint32_t bytes, uint64_t raddr, uint32_t rkey,
                      int with_imm, uint32_t imm) {
    struct ibv_sge sge = {(uint64_t)(uintptr_t)src, bytes, lkey};
    struct ibv_send_wr wr, *bad = 0;
    __builtin_memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = signaled ? (unsigned)IBV_SEND_SIGNALED : 0u;
    wr.imm_data = zc_be32(imm); /* network order on the wire; poll turns it back */
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return ibv_post_send(qp, &wr, &bad);
}

int zc__ib_post_cas(struct ibv_qp *qp, uint64_t wr_id, int signaled, uint64_t *result,
                    uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t swap) {
    struct ibv_sge sge = {(uint64_t)(uintptr_t)result, 8u, lkey};
    struct ibv_send_wr wr, *bad = 0;
    __builtin_memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.send_flags = signaled ? (unsigned)IBV_SEND_SIGNALED : 0u;
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.compare_add = 0; /* first report wins, as on shm */
    wr.wr.atomic.swap = swap;
    wr.wr.atomic.rkey = rkey;
    return ibv_post_send(qp, &wr, &bad);
}

int zc__ib_poll_cq(const zc_ib_dev *d, zc_ib_wc *out, int max) {
    struct ibv_wc wc[ZC_IB_POLL_BATCH];
    if (max > (int)ZC_IB_POLL_BATCH) max = (int)ZC_IB_POLL_BATCH;
    int n = ibv_poll_cq(d->cq, max, wc);
    if (n < 0) return -1;
    for (int i = 0; i < n; i++) {
        out[i].wr_id = wc[i].wr_id;
        out[i].status = (uint32_t)wc[i].status;
        out[i].vendor_err = wc[i].vendor_err;
        out[i].recv_imm = wc[i].status == IBV_WC_SUCCESS &&
                          wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
                          (wc[i].wc_flags & IBV_WC_WITH_IMM);
        out[i].imm = out[i].recv_imm ? zc_be32(wc[i].imm_data) : 0u;
    }
    return n;
}
