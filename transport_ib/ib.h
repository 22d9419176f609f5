/* ib.h: transport_ib's internal model, shared by its three files and by nobody else:
 *   ib.c     the wire's setup: sizes, device limits, registered memory, queue pairs, the
 *            address blob, attach (RTR/RTS) and teardown; the ops table;
 *   path.c   the data path: staging slots, RDMA WRITE WITH IMM, completions, credits, alarm,
 *            peer liveness;
 *   verbs.c  every libibverbs call and the error text (ibv_wc_status_str, errno); the only
 *            file that includes <infiniband/verbs.h>.
 * The libibverbs objects appear here as incomplete types only.
 *
 * Memory, all taken at create (platform pages, registered once; nothing after init):
 *   window   [0] unused line, [1] alarm word, credit records [lane][connection] one line each
 *            (conn_cap of them per lane, so the rings start at the same offset on every rank;
 *            word 1 of a connection's lane-0 line: the peer's clean-close mark, path.c),
 *            then rings [lane][src connection][slot] of `stride` bytes for this rank's nconn
 *            connections (connection i: the rank conn_peer[i]; a peer writes at its index in
 *            this rank's table, which the address blob names). Registered for remote write
 *            (and remote atomics when the device has them).
 *   caller's the buffers zc_mem_register names (host memory, or device memory through
 *            dma-buf): registered for local and remote write when the caller asks; puts
 *            write from and into them.
 *   local    staging slots [lane][dst connection][slot] of `stride` bytes (tx_slot hands these out;
 *            post writes one into the peer's ring), then per queue pair a ring of sq_depth
 *            8-byte words, the sources of credit writes and the results of alarm
 *            compare-and-swaps (word w of a queue pair serves its send work request w, whose
 *            queue slot is reused only after that request finished). Registered local only.
 *
 * Immediate of a data message (32 bits, host order on both ends of libibverbs):
 *   [31:30] lane: 0 collectives, 1 send/recv, 2 the relay lane (overlay mode with relays);
 *           a lane the geometry does not have is a protocol error
 *   [29:20] slot (slots <= 1024)
 *   [19:0]  sequence: the low 20 bits of the message number on its (lane, peer) channel.
 * Message m of a channel travels on queue pair m % qps of that peer, so each queue pair sees
 * the messages of a lane in order m = j, j + qps, j + 2 qps ... and the receiver checks each
 * arrival against the next number it expects there. */
#ifndef ZC_TRANSPORT_IB_H
#define ZC_TRANSPORT_IB_H

#include <stdarg.h>

#include "platform.h"
#include "wire.h"

struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_qp;
struct ibv_mr;

#define ZC_IB_MAX_QPS 4u          /* ceiling of cfg->ib_qps_per_peer (config.c checks it) */
#define ZC_IB_WHY_BYTES 192u      /* a lost peer's sentence, NUL included */
#define ZC_IB_POLL_BATCH 16u      /* completions taken per poll */
#define ZC_IB_SQ_SPARE 64u        /* send requests beyond data and credits (alarm, bursts) */
#define ZC_IB_SEQ_BITS 20u
#define ZC_IB_SEQ_MASK ((1u << ZC_IB_SEQ_BITS) - 1u)
#define ZC_IB_BLOB_HEAD 128u      /* bytes of the address blob's head (then its connections'
                                   * ranks and queue pair numbers: ib.c) */
#define ZC_IB_MAGIC 0x7a63696276303032ull /* "zcibv002": blobs per connection */
#define ZC_NO_PEER UINT32_MAX     /* g.conn's entry for a rank that is not a connection */

enum { ZC_IB_LINK_IB = 1, ZC_IB_LINK_ETH = 2 };

/* The opened device and port, and the verbs objects that are not per peer. verbs.c fills it. */
typedef struct zc_ib_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *win_mr, *loc_mr;
    uint32_t win_rkey, loc_lkey;
    char name[ZC_IB_DEVICE_BYTES]; /* "mlx5_0", "rxe0" */
    uint8_t gid[16];          /* the port's GID at gid_index (zero without one) */
    uint32_t port;            /* 1..255 */
    int32_t gid_index;        /* GID used for GRH addressing; -1: none (InfiniBand, LIDs) */
    uint32_t link_layer;      /* ZC_IB_LINK_IB or ZC_IB_LINK_ETH */
    uint32_t mtu;             /* the port's active MTU as an enum ibv_mtu value (1..5) */
    uint32_t lid;             /* the port's LID (InfiniBand; 0 on Ethernet) */
    uint32_t atomics;         /* 1: 8-byte compare-and-swap between queue pairs works */
    uint32_t rd_atomic;       /* max_qp_rd_atom / max_qp_init_rd_atom to ask for (0 or 1) */
    /* device limits (ibv_query_device) */
    uint32_t max_qp_wr, max_cqe, max_qp, max_sge;
    uint64_t max_mr_size;
} zc_ib_dev;

/* What the wire needs of the device; checked against its limits before anything is made. */
typedef struct zc_ib_need {
    uint32_t sq_depth, rq_depth; /* work requests per queue pair */
    uint32_t cqe;                /* completion queue entries */
    uint32_t qps;                /* queue pairs in all */
    size_t window_bytes, local_bytes;
} zc_ib_need;

/* A completion, as path.c sees it. */
typedef struct zc_ib_wc {
    uint64_t wr_id;
    uint32_t status;          /* enum ibv_wc_status; 0 = success */
    uint32_t vendor_err;
    uint32_t imm;             /* host order; valid when recv_imm */
    uint32_t recv_imm;        /* 1: a receive completed by an RDMA WRITE WITH IMM */
} zc_ib_wc;

/* The peer side of one queue pair, from its address blob. */
typedef struct zc_ib_remote {
    uint32_t qpn, psn, lid, mtu;
    const uint8_t *gid;       /* 16 bytes */
} zc_ib_remote;

typedef struct zc_ib_qp {
    struct ibv_qp *qp;        /* NULL for this rank's own (unused) entries */
    uint64_t sq_posted;       /* send work requests posted */
    uint64_t sq_done;         /* of those, known finished (through a polled signalled one) */
    uint32_t qpn, psn;        /* this side's number and first packet sequence number */
    uint32_t rq_out;          /* receives posted and not yet seen completing */
    uint32_t pad_;
} zc_ib_qp;

typedef struct zc_ib_peer {
    uint64_t window;          /* the peer's inbound window: its address there */
    uint64_t ring[ZC_WIRE_LANES]; /* where this rank's ring of each lane is in it */
    uint32_t rkey;
    int32_t lost;             /* 0, or the status every call about this peer returns */
    uint32_t rank;            /* the peer's rank */
    uint32_t back;            /* this rank's connection index in the peer's table */
    uint64_t host, pid;       /* the peer's host hash and process id (liveness on one host) */
    uint64_t credit_want[ZC_WIRE_LANES]; /* consumed count to tell the peer */
    uint64_t credit_sent[ZC_WIRE_LANES]; /* last consumed count written to the peer */
    uint64_t credit_seen[ZC_WIRE_LANES]; /* last count the peer wrote to us, widened */
    uint64_t sent[ZC_WIRE_LANES]; /* messages posted to the peer on each lane */
    uint64_t probe;           /* 1 + send request number of the last liveness probe; 0 none */
    uint64_t mark;            /* 1 + send request number of the clean-close mark; 0 none */
    uint64_t put_wr[ZC_IB_MAX_QPS]; /* 1 + send request number of the last put from the
                                     * caller's registered memory on each queue pair; 0 none */
    char why[ZC_IB_WHY_BYTES];           /* how it was lost */
} zc_ib_peer;

typedef struct zc_ib {
    zc_wire_geom g;           /* g.cfg and g.inproc_windows are cleared after create */
    zc_ib_dev dev;
    uint32_t qps;             /* queue pairs per connection, 1..ZC_IB_MAX_QPS */
    uint32_t self;            /* this rank's own connection index (no queue pairs) */
    uint32_t sq_depth, rq_depth, signal_every;
    uint32_t cqe;
    uint32_t timeout, retry_cnt; /* QP local ACK timeout exponent and transport retries */
    uint32_t credit_backlog;  /* 1: some credit could not be posted yet (send queue full) */
    uint32_t attached;        /* 1 once every queue pair reached RTS */
    uint32_t put_min;         /* cfg->ib_zcopy_min_bytes (every rank's: attach checks) */
    uint32_t pad_;
    uint8_t *win;             /* inbound window (platform pages) */
    uint8_t *loc;             /* staging slots and posted words (platform pages) */
    size_t win_bytes, loc_bytes;
    size_t words_off;         /* offset of the posted-word rings in loc */
    uint64_t host, pid;       /* this process's host hash and process id */
    /* Per connection (index i, the rank g.conn_peer[i]; g.conn maps a rank to it): */
    zc_ib_peer *peers;        /* [nconn] */
    zc_ib_qp *qp;             /* [nconn * qps]; this rank's own entries unused */
    uint64_t *rx_next;        /* [lanes * nconn * qps] next message number due on each */
    uint64_t *rx_tag;         /* [lanes * nconn * slots] tag of the message arrived there */
} zc_ib;

/* ---- shared by ib.c and path.c ---- */
static inline size_t zc__ib_credits_off(void) { return 128u; }
static inline size_t zc__ib_alarm_off(void) { return 64u; }
static inline size_t zc__ib_rings_off(const zc_wire_geom *g) {
    return zc__ib_credits_off() + (size_t)zc_wire_lanes(g) * g->conn_cap * 64u;
}
/* Queue pair j of connection i. */
static inline zc_ib_qp *zc__ib_qp(const zc_ib *s, uint32_t i, uint32_t j) {
    return &s->qp[(size_t)i * s->qps + j];
}
/* The credit record: low 32 bits of the count and a check of them, so a torn 8-byte write
 * is recognised (and ignored until the next read) instead of trusted. */
static inline uint64_t zc__ib_credit_record(uint64_t count) {
    uint32_t low = (uint32_t)count, check = (low ^ 0x5bd1e995u) * 0x9e3779b1u;
    check ^= check >> 15;
    return (uint64_t)check << 32 | low;
}

/* wr_id of a work request: kind, connection index, queue pair and (sends) the low 32 bits of
 * its number on that queue pair's send queue. */
#define ZC_IB_WR_SEND (1ull << 62)
#define ZC_IB_WR_RECV (2ull << 62)
#define ZC_IB_WR_KIND (3ull << 62)
_Static_assert(ZC_MAX_RANKS <= (1u << 22), "wr_id holds a connection index in 22 bits");
static inline uint64_t zc__ib_wr_id(uint64_t kind, uint32_t i, uint32_t j, uint64_t n) {
    return kind | (uint64_t)i << 40 | (uint64_t)j << 32 | (n & 0xffffffffu);
}

/* path.c: the data-path ops of zc_wire_ib (contracts in provider/wire.h) */
void *zc__ib_tx_slot(void *state, uint32_t lane, uint32_t peer, uint32_t slot);
zc_status zc__ib_post(void *state, uint32_t lane, uint32_t peer, uint32_t slot, size_t bytes,
                      uint64_t tag);
const void *zc__ib_rx_slot(void *state, uint32_t lane, uint32_t peer, uint32_t slot,
                           uint64_t tag, uint32_t lines);
void zc__ib_credit(void *state, uint32_t lane, uint32_t peer, uint64_t consumed);
uint64_t zc__ib_credits(void *state, uint32_t lane, uint32_t peer);
void zc__ib_alarm(void *state, uint64_t word);
uint64_t zc__ib_alarmed(void *state);
zc_status zc__ib_peer_alive(void *state, uint32_t peer, char *err, size_t cap);
void zc__ib_closing(void *state, uint64_t seqs);
uint64_t zc__ib_closed_after(void *state, uint32_t peer);
/* Takes one batch of completions (arrivals, finished sends, errors) and posts credits that
 * were waiting for send-queue room. */
void zc__ib_poll(zc_ib *s);
/* Marks connection i lost (the first reason wins) with a sentence from fmt (zc__fmt's
 * conversions). */
void zc__ib_lose(zc_ib *s, uint32_t i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Marks connection i lost when its peer runs on this host and its process has exited (a
 * system call: the callers space it out); the wire cannot tell that of another host's. */
void zc__ib_watch_process(zc_ib *s, uint32_t i);
zc_status zc__ib_put(void *state, uint32_t lane, uint32_t peer, uint32_t slot, uint64_t tag,
                     const void *src, const zc_wire_mr *mr, size_t bytes, uint64_t raddr,
                     uint64_t rkey);
bool zc__ib_put_done(void *state, uint32_t peer);

/* ---- verbs.c ---- */
/* Opens the device and port cfg names (or the first usable), picks the GID and reads the
 * limits. ZC_UNSUPPORTED when there is no RDMA device (or none of that name). */
zc_status zc__ib_open(zc_ib_dev *d, const zc_config *cfg, char *err, size_t cap);
/* ZC_LIMIT, naming the limit and both numbers, when need exceeds the device. */
zc_status zc__ib_check(const zc_ib_dev *d, const zc_ib_need *need, char *err, size_t cap);
/* Protection domain, both memory registrations and the completion queue. */
zc_status zc__ib_setup(zc_ib_dev *d, void *win, size_t win_bytes, void *loc, size_t loc_bytes,
                       uint32_t cqe, char *err, size_t cap);
/* An RC queue pair in INIT with rq zero-length receives posted (wr_id recv_id). */
zc_status zc__ib_qp_create(zc_ib_dev *d, const zc_ib_need *need, uint64_t recv_id,
                           struct ibv_qp **qp, uint32_t *qpn, char *err, size_t cap);
/* INIT -> RTR -> RTS towards r. */
zc_status zc__ib_qp_connect(const zc_ib_dev *d, struct ibv_qp *qp, const zc_ib_remote *r,
                            uint32_t my_psn, uint32_t timeout, uint32_t retry_cnt, char *err,
                            size_t cap);
/* Posting: 0 or the error number libibverbs returned. */
int zc__ib_post_recv(struct ibv_qp *qp, uint64_t wr_id);
int zc__ib_post_write(struct ibv_qp *qp, uint64_t wr_id, int signaled, const void *src,
                      uint32_t lkey, uint32_t bytes, uint64_t raddr, uint32_t rkey,
                      int with_imm, uint32_t imm);
int zc__ib_post_cas(struct ibv_qp *qp, uint64_t wr_id, int signaled, uint64_t *result,
                    uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t swap);
/* Up to max completions (max <= ZC_IB_POLL_BATCH); -1 when the completion queue failed. */
int zc__ib_poll_cq(const zc_ib_dev *d, zc_ib_wc *out, int max);
const char *zc__ib_wc_text(uint32_t status);
const char *zc__ib_errno_text(int e, char *buf, size_t cap);
void zc__ib_qp_error(struct ibv_qp *qp);
void zc__ib_qp_destroy(struct ibv_qp *qp);
/* The caller's memory (zc_mem_register): host memory by address, device memory through a
 * dma-buf fd (fd >= 0) or by address (nvidia-peermem). Local write and remote write. */
zc_status zc__ib_reg_user(zc_ib_dev *d, void *addr, size_t bytes, int device, int32_t fd,
                          uint64_t fd_offset, struct ibv_mr **mr, char *err, size_t cap);
void zc__ib_dereg_user(struct ibv_mr *mr);
uint32_t zc__ib_mr_lkey(const struct ibv_mr *mr);
uint32_t zc__ib_mr_rkey(const struct ibv_mr *mr);
/* Destroys what zc__ib_setup and zc__ib_open made (each part only if there). */
void zc__ib_teardown(zc_ib_dev *d);

#endif
