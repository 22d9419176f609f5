/* engine.h: the core's internal model, shared by the files of core/ and by nobody else. It
 * holds the communicator and what every core file uses, and includes the parts kept by their
 * owners: req.h (the request model), proto.h (the message header and channel.c's protocol) and
 * layout.h (the arena's region table). device.h (the device state and the device families)
 * includes this file and is included only by the files that touch device memory.
 *
 * A communicator lives entirely in the caller's arena (layout.c decides the carve). Its
 * requests come from a fixed pool; each runs a collective's schedule as an explicit state
 * machine (in the file of its schedule family: the family table in progress.c) that moves
 * messages through the wire's slot rings with the channel helpers of channel.c. Ordering rule
 * that keeps concurrent requests deadlock-free: a request reserves, when it is issued, the
 * numbers of the messages it will send to and receive from every peer on its lane
 * (zc__req.base); every rank issues collectives in the same order, so both ends of a channel
 * number each message identically, and message m may only be written once message m-1 was,
 * and only consumed once m-1 was. Each message's header carries the full fingerprint of the
 * call that sent it, checked before its payload is used.
 *
 * The files, each calling only files listed below it (core/layers.txt holds this order and
 * `ninja check-layers` enforces it; the declarations follow it):
 *   split.c     zc_comm_split(_inproc): children agreed over the parent's own collectives
 *   report.c    zc_device_report: what the machine offers device-memory calls
 *   footprint.c zc_comm_footprint: what a communicator would take on one rank, from the sizes
 *               init uses (layout.c, the wire's takes and links, gpu_mem.c's device scratch)
 *   comm.c      init (bootstrap, wire setup, carve), in-process groups, abort, fini,
 *               accessors, host memory registration
 *   gpu_mem.c   the device state's start and stop, the path its calls take (ipc, staged, or
 *               direct from every rank's landing record), CUDA registrations (the NIC's, or an
 *               internal schedule that exchanges the IPC records)
 *   stream.c    the stream-ordered forms (zc_*_stream): a stream slot, then an issue
 *   coll.c      the public collectives, plans and zc_start: argument checks, algorithm choice
 *               (host, or device when the buffers are registered ZC_MEM_CUDA)
 *   progress.c  the request pool, the family table (which family runs each algorithm) and the
 *               polling loop: issue (reserve what the family's links say), zc_progress, stream
 *               slots and gates, the one finish, deadlines, peer liveness, peers' failure
 *               reports, zc_test, zc_wait
 *   sched_stage.c  the staged family: device-memory calls through host memory, per round
 *               copies around the host family's schedule of the round
 *   sched.c     the host family: every host collective's schedule (its table of algorithms:
 *               links and step), placement, the algorithm choice
 *   sym.c       the symmetric region (zc_sym_alloc, zc_sym_free) and its family: the
 *               single-copy schedule (ZC_ALG_SYM)
 *   sched_put.c the direct family: puts into peers' device memory (recv buffers, landing
 *               areas, send/recv slots), kernels over landed data
 *   sched_gpu.c the ipc family: phases, signals, provider launches; the launch and wait steps
 *               sched_put.c and sched_stage.c share
 *   mem.c       the registration table: its free-entry search, fill and range lookup
 *   channel.c   one message through a (lane, peer) channel: turn, credits, header check
 *   fail.c      the failure record (first failure wins) and the words of its sentences
 *   layout.c    the arena's regions (the device ones too), for the size query and the carve
 *   conn.c      the connection set (full mesh, or overlay mode's) and the connection table
 *   hier.c      the two-wire communicator (zc__wire_hier): shm among a place's ranks, ib (shm
 *               in tests) across places, chosen per connection behind the wire interface
 *   reduce.c    host reduction kernels over elem.h, the element code gpu/reduce.cu shares
 *   bootstrap.c, config.c, status.c, text.c: rendezvous, configuration, names, strings
 * Host and device requests share one lifecycle: zc__issue takes the slot, sequence number and
 * channel numbers; zc_progress steps both within one budget, stamps and checks deadlines and
 * peers' liveness by one clock rule; zc__fail ends them. */
#ifndef ZC_CORE_ENGINE_H
#define ZC_CORE_ENGINE_H

#include "config.h"
#include "gpu.h"
#include "platform.h"
#include "text.h"
#include "wire.h"
#include "zcoll.h"

#define ZC_PROGRESS_BUDGET 64u      /* messages moved at most per zc_progress call */
#define ZC_LIVENESS_NS 50000000ull  /* a stalled request checks peers' liveness this often */
/* zc_progress reads the clock (about 25 ns through the vDSO on these VMs, as much as a whole
 * small call's other work) only every this many calls that moved something, and every this
 * many calls that moved nothing: deadlines are stamped and checked then. */
#define ZC_CLOCK_BUSY_POLLS 64u
#define ZC_CLOCK_IDLE_POLLS 8u
/* Idle passes in a row before one parks (its waits are named from the pass before; comm.c
 * sets a communicator's park_after, progress.c parks). In process, ZC_PARK_AFTER_INPROC: a
 * rank of a large group driven by one thread waits through many walks of the group, and each
 * idle visit parked touches two lines of it, not ten. Between processes, ZC_PARK_AFTER_PROCS:
 * a parked rank polls the awaited line every few nanoseconds and takes it from the sender
 * between the stores that fill it, which costs a call that waits a few passes (2 processes,
 * 8-byte all_reduce p50 0.52-0.55 us parked after 4 idle passes against 0.43 never parked,
 * 3 runs each; after 64, 0.43), so only a long wait (a root's for a late peer) parks there. */
#define ZC_PARK_AFTER_INPROC 4u
#define ZC_PARK_AFTER_PROCS 64u
/* In-process groups of this many ranks or more have wake bits (progress.c's zc_walk visits
 * the ranks something arrived for); a smaller one is walked whole at every pass, which costs
 * fewer instructions than setting and taking the bits (two ranks: 13 to 39 more per call). */
#define ZC_WAKE_MIN_RANKS 16u
#define ZC_COMM_MAGIC 0x7a63636f6d6d3031ull /* "zccomm01" */
#define ZC_REQ_MAGIC 0x7a63u
#define ZC_PLAN_MAGIC 0x7a70u

#include "req.h"

typedef struct zc__mem_entry {
    void *addr;          /* NULL: a free entry */
    size_t bytes;
    uint32_t kind;       /* zc_mem_kind */
    uint32_t gen;        /* bumped at every registration */
    zc_wire_mr mr;       /* the wire's registration (handle NULL: none, the wire has no put) */
    uint32_t gstate;     /* ZC_MEM_CUDA: zc__gmem_state */
    uint32_t creg;       /* ZC_MEM_CUDA: registration number, the same on every rank */
} zc__mem_entry;
typedef enum zc__gmem_state {
    ZC_GMEM_FREE = 0, /* nothing mapped from peers (also: registered with the NIC only) */
    ZC_GMEM_PENDING,  /* the IPC records are being exchanged */
    ZC_GMEM_MAPPED,   /* every peer's buffer is mapped here (gpu->mapped) */
    ZC_GMEM_FAILED,
    ZC_GMEM_CLOSING   /* being deregistered: unmapped here, the peers' word awaited */
} zc__gmem_state;
/* The registration table's owner (mem.c). zc__mem_take: a free entry's index (its wire
 * registration cleared), else ZC_LIMIT with the sentence. zc__mem_fill: entry e now holds
 * [addr, addr + bytes) of kind (its generation bumped); the caller's handle. zc__mem_find: the
 * entry of kind holding [p, p + bytes) entirely (CUDA entries being deregistered excluded),
 * -1 when none does; *partial (when not NULL) set when one overlaps the range only. */
zc_status zc__mem_take(zc_comm *comm, uint32_t *index);
zc_mem *zc__mem_fill(zc__mem_entry *e, void *addr, size_t bytes, uint32_t kind);
int32_t zc__mem_find(const zc_comm *comm, const void *p, uint64_t bytes, uint32_t kind,
                     bool *partial);

#include "proto.h"

/* A host call's reservation as progress.c's zc_reserve keeps it: when its schedule's links
 * named each peer once, with one message at most each way, and every such peer's connection
 * index is below 64 (any peer of a communicator of at most 64 ranks or of a bounded connection
 * set: overlay mode), the schedule's call word (kind, dtype, op, alg, root), count and chunk,
 * and the connections it sends one message on and receives one from (bit i: connection i). */
typedef struct zc__links_memo {
    uint64_t word, count, tx, rx;
    uint32_t chunk;
    uint32_t ok; /* 1: the fields above hold such a reservation */
} zc__links_memo;

/* A host call's schedule as zc_build validated and chose it (coll.c), for a later call with the
 * same arguments: those arguments (ZC_CALL_KEY_WORDS words, coll.c packs them) and the schedule.
 * ZC_CALL_MEMOS of them per communicator (a power of two), an entry per hash of the arguments, so
 * that calls rotating over several buffers (one per bucket of gradients, one per layer) each
 * keep theirs. */
#define ZC_CALL_KEY_WORDS 6u
#define ZC_CALL_MEMOS 16u
typedef struct zc__call_memo {
    uint64_t key[ZC_CALL_KEY_WORDS];
    uint32_t ok; /* 1: key and s hold a validated call */
    uint32_t pad_;
    zc__sched s;
} zc__call_memo;

struct zc_comm {
    /* What every call and progress pass reads, first: two cache lines, so that a pass over a
     * rank touches few lines (in-process groups of thousands of ranks are bound by them). */
    uint64_t magic;
    uint32_t lock;         /* 1 while a thread is inside a public call (zc__lock) */
    int32_t failed;        /* 0, or the status every later call returns (fail.c writes it) */
    uint32_t nreqs_active;
    uint32_t recv_waiting; /* receives whose wild is not ZC_WILD_NONE (progress.c) */
    const zc_wire_ops *wire;
    void *wire_state;
    zc__req *reqs;         /* [max_requests] */
    uint32_t *active;      /* [max_requests] active request slots in issue order */
    struct zc__gpu *gpu;   /* device-memory state; NULL: no CUDA build, no device, or off */
    uint64_t unposted;     /* channels with a message the wire refused for now (tx_unposted) */
    uint32_t empty_polls;  /* zc_progress calls in a row that moved nothing */
    uint32_t spin_polls;   /* cfg.spin_polls, here where every idle pass reads it (zc__set_spin) */
    uint32_t clock_polls;  /* zc_progress calls since it last read the clock */
    uint16_t relay;        /* 1: overlay_relay: progress serves the relay lane (relay.c) */
    uint16_t serial;       /* 1: cfg.threads is ZC_THREADS_SERIAL: no lock (zc__lock) */
    uint32_t slot_mask;    /* cfg.slots - 1: message m of a channel is in slot m & slot_mask */
    uint8_t park_waits;    /* this pass's waits: 0 none, 1 one message (park.where), 2 more,
                            * or a message it could not send (channel.c) */
    uint8_t parked;        /* 1: the one call in flight waits for park_tag at park.at alone */
    uint16_t park_after;   /* idle passes in a row before one parks (comm.c, progress.c) */
    uint16_t name_after;   /* idle passes in a row before a pass names its waits: park_after
                            * - 1, or 0 in a group with wake bits (every pass names them: a
                            * rank whose one wait is named needs no visit until it is woken) */
    zc__chan *chans;       /* [zc__lanes(cfg) * nconn] */
    uint32_t *conn;        /* [nranks] rank -> its connection's index; ZC_NO_CONN: none */
    union {
        uint64_t where;    /* during a pass: the awaited message's peer << 32 | word << 12 |
                            * slot << 2 | lane (park_waits 1; word: channel.c's zc_wait_for) */
        const uint64_t *at; /* parked: that word of the slot (progress.c's zc_parks) */
    } park;
    uint64_t park_tag;     /* the awaited message's tag (the word's low 32 bits show it) */
    zc__chan *tx_begun;    /* the channel whose next message zc__tx_begin_n returned last ... */
    struct zc__hdr *tx_hdr; /* ... and that message's slot header (NULL: none since the
                            * channel's last publish), which its publish reuses */
    uint64_t seq;          /* next collective sequence number */
    uint64_t *group_wake;  /* in-process: the group's wake bits (rank 0's ZC_R_GROUP; wire.h's
                            * zc_wire_wake): an issue sets this rank's; else NULL */
    uint32_t splitting;    /* 1 while a zc_comm_split(_inproc) of this parent runs (split.c) */
    uint64_t comm_id;
    zc_config cfg;         /* a copy; rank/nranks are this communicator's */
    uint32_t rank, nranks;
    int32_t fail_peer;     /* the failure's peer, -1 for none (fail.c) */
    int64_t fail_code;     /* the failure's foreign error code, 0 for none (fail.c) */
    uint64_t fail_seq;     /* the collective sequence the failure was detected at (fail.c) */
    uint64_t splits;       /* zc_comm_split calls made (names children) */
    uint64_t host;         /* a hash of this rank's host (init's; a child keeps its parent's;
                            * in-process: its simulated host's number + 1) */
    uint64_t place;        /* where it runs for its connection set: host, or ZC_HOST_ID's
                            * claim (comm.c's zc_place_hash; a child keeps its parent's) */
    uint32_t node;         /* the lowest rank on this rank's host (zc_comm_node) */
    uint32_t hblock;       /* ranks per block of the hierarchical all_reduce and barrier
                            * (conn.c's zc__host_blocks; 0: no such blocks) */
    uint32_t wire_auto;    /* 1: cfg asked for ZC_TRANSPORT_AUTO: a split child whose ranks
                            * share a host takes the shared-memory wire (split.c) */
    uint32_t hier_cap[2];  /* on the two-wire communicator (hier.c): each instance's
                            * connection cap, the same on every rank (zc__hier_caps) */
    uint64_t liveness_ns;  /* last time peers' liveness was checked */
    uint64_t suspect_ns;   /* when a stalled request first found rank suspect - 1 gone */
    uint32_t suspect;      /* that rank + 1 (0: none): it fails a request only if a step pass
                            * after suspect_ns did not move it (progress.c) */
    uint64_t put_min;      /* the wire's put_min (0: nothing is written in place) */
    uint64_t placed_bytes; /* payload bytes peers put straight into this rank's buffers */
    uint64_t sym_used;     /* bytes of the symmetric region zc_sym_alloc has carved (sym.c) */
    uint64_t lines_waits;  /* polls for flagged lines that found them not there (channel.c) */
    uint32_t relay_cursor; /* relay.c: the next ring link (2 k: +2^k, 2 k + 1: -2^k) polled */
    uint32_t relay_wait;   /* relay.c: the next hop + 1 a forward waits on for credit (0: none) */
    uint64_t relay_wait_ns; /* relay.c: when that wait was first seen by a clock read (0: not) */
    /* Per kind of call, the reservation of the last host call of that kind (progress.c's
     * zc_reserve replays it for a call of the same schedule). */
    struct zc__links_memo links[ZC_K_BARRIER + 1];
    /* Host calls that zc_build validated, by a hash of their arguments (coll.c takes a
     * schedule again for the same arguments; zc__calls_forget clears them). */
    struct zc__call_memo calls[ZC_CALL_MEMOS];
    uint8_t *addrs;        /* [zc__conn_cap * addr_bytes] the connections' address blobs */
    size_t addr_bytes;     /* of the largest candidate wire (the one in use may need less) */
    void *window;          /* in-process: this rank's inbound window, in the arena */
    zc_comm **group;       /* in-process: the group's communicators by rank (rank 0's
                            * ZC_R_GROUP), which zc_wait walks to progress the group; else NULL */
    uint32_t nconn;        /* connections: this rank itself and the peers it exchanges
                            * messages with (layout.h: zc__conn_set), rank order */
    uint32_t *conn_peer;   /* [nconn] connection index -> rank */
    zc__plan *plans;       /* [max_plans] */
    zc__mem_entry *mems;   /* [max_mems] */
    struct zc__gpu *gpu_area; /* the device region's header; NULL: cfg picks no provider */
    uint8_t *scratch;      /* init and split time only: ZC_SCRATCH_* (layout.c sizes it) */
    struct zc__stage *stage_area; /* the staged path's state, carved; NULL: no provider */
    struct zc__stage *stage; /* staged-path state once opened; NULL: no gpu provider */
    char err[ZC_ERROR_TEXT_BYTES];
};

/* Forgets every call coll.c remembers (zc__call_memo): what zc_build reads besides a call's
 * arguments changed (a registration, the symmetric region's allocations). */
static inline void zc__calls_forget(zc_comm *c) {
    for (uint32_t k = 0; k < ZC_CALL_MEMOS; k++) c->calls[k].ok = 0;
}

/* The communicator's lock (zcoll.h, "Threads"). Every public call that reads or changes a
 * communicator's state holds it, so calls on one communicator from several threads are
 * serialized: one thread may issue while another drives zc_progress or zc_wait. A holder does
 * bounded work and never waits for another thread, so a contender spins (and yields now and
 * then, in case the holder's thread was preempted). Never taken twice by one thread: code that
 * runs under it calls the unlocked forms (zc__test). A communicator whose caller promised
 * serial calls (cfg.threads ZC_THREADS_SERIAL) takes none: its atomic exchange is the costliest
 * instruction of a small call (15 to 30 ns per call on the 2-vCPU VM with a slow cache line). */
static inline void zc__lock(zc_comm *c) {
    if (c->serial) return;
    for (uint32_t spins = 0; __atomic_exchange_n(&c->lock, 1u, __ATOMIC_ACQUIRE);) {
        while (__atomic_load_n(&c->lock, __ATOMIC_RELAXED)) {
            if (++spins % 256u == 0) zc_plat_yield();
            else zc_plat_cpu_relax();
        }
    }
}
static inline void zc__unlock(zc_comm *c) {
    if (!c->serial) __atomic_store_n(&c->lock, 0u, __ATOMIC_RELEASE);
}
/* Empty polls before a yield: cfg.spin_polls and its copy in the lines a pass reads. */
static inline void zc__set_spin(zc_comm *c, uint32_t polls) {
    c->cfg.spin_polls = c->spin_polls = polls;
}
/* The body of a public call: ZC_INVALID_ARG for what is not a communicator, else call (an
 * expression giving the zc_status) under c's lock. */
#define ZC_LOCKED(c, call)                                                                      \
    do {                                                                                        \
        if (!zc__comm_ok(c)) return ZC_INVALID_ARG;                                             \
        zc__lock(c);                                                                            \
        zc_status zc_locked_st_ = (call);                                                       \
        zc__unlock(c);                                                                          \
        return zc_locked_st_;                                                                   \
    } while (0)

/* Whether a communicator of cfg relays send/recv between ranks without a connection (relay.c):
 * overlay mode with cfg->overlay_relay. */
static inline bool zc__relays(const zc_config *cfg) {
    return zc__overlay(cfg) && cfg->overlay_relay;
}
/* The wire lanes of a communicator of cfg: a relaying one adds the relay lane (relay.c). */
#define ZC_LANE_RELAY 2u
static inline uint32_t zc__lanes(const zc_config *cfg) {
    return zc__relays(cfg) ? ZC_LANE_RELAY + 1u : ZC_WIRE_LANES_MESH;
}

/* The connection index of peer (a rank the call's links name; issue asserts it has one). */
static inline uint32_t zc__ci(const zc_comm *c, uint32_t peer) { return c->conn[peer]; }

/* Whether comm is a live communicator (every public call asks first). */
static inline bool zc__comm_ok(const zc_comm *comm) {
    return comm && comm->magic == ZC_COMM_MAGIC;
}

/* ---- comm.c: pieces of a communicator's setup that split.c reuses ---- */
/* Checks the arena and carves the communicator's state from it (no communication); a failure
 * is said in err (ZC_ERROR_TEXT_BYTES). */
zc_status zc__carve(const zc_config *cfg, void *arena, size_t arena_bytes, zc_comm **out,
                    char *err);
zc_wire_geom zc__geom(const zc_comm *c, uint64_t comm_id, void *const *windows);
/* Whether the window c's wire takes at create (wire.h's takes) fits what the platform leaves:
 * k ranks' windows within room bytes of memory on rank who's host, its registered bytes within
 * lock bytes of lockable memory (UINT64_MAX: no limit). ZC_LIMIT with a sentence giving the
 * numbers and what to change in c->err otherwise. */
zc_status zc__room_check(zc_comm *c, uint32_t who, uint32_t k, uint64_t room, uint64_t lock);
/* The two-wire communicator's instance caps into c->hier_cap from every rank's place
 * (places[r] at stride bytes), and whether this rank's place mates run on its host (a claim
 * shared across hosts cannot be one shm instance): ZC_OK, or ZC_UNSUPPORTED with the sentence
 * in c->err. The largest place's rank count, and n minus the smallest place's plus 1 (overlay
 * mode: the connection cap); O(n log n) in c's scratch. hosts: every rank's host (NULL: not
 * checked). */
zc_status zc__hier_caps(zc_comm *c, const uint64_t *places, const uint64_t *hosts,
                        size_t stride);
/* Once the wire and the device state are up: placement, and the communicator made live. */
void zc__open_live(zc_comm *c);
/* Builds an in-process group of n ranks over arenas[], each with cfg's sizes (the init error
 * says why it failed); hosts[r]: rank r's host (NULL: the simulated hosts of
 * cfg->inproc_ranks_per_host). */
zc_status zc__inproc_group(const zc_config *cfg, uint32_t n, void *const arenas[],
                           size_t arena_bytes, zc_comm *comms[], uint64_t comm_id,
                           const uint64_t *hosts);

/* ---- coll.c: the public collectives' argument checks and algorithm choice ---- */
/* Validates one call and fills s (the host or device algorithm chosen); what every public
 * collective, _init and _stream form runs first. */
zc_status zc__build(zc_comm *c, uint32_t kind, const void *send, void *recv, size_t count,
                    zc_dtype dtype, zc_op op, uint32_t root, zc__sched *s);

/* ---- progress.c ---- */
/* Takes a request slot for s, reserves its channel numbers and starts it (ZC_AGAIN if full);
 * host and device schedules alike. bind: the stream slot + 1 whose start flag gates a
 * stream-ordered device call (0: none). */
zc_status zc__issue(zc_comm *comm, const zc__sched *s, int32_t plan, uint32_t bind,
                    zc_req *req);
/* zc_test under the lock the caller holds (req's status once finished, the slot freed). */
zc_status zc__test(zc_comm *comm, zc_req *req);
/* The request req names, or NULL when it is none in flight on comm. */
zc__req *zc__lookup(zc_comm *comm, const zc_req *req);
/* Issues stream slot i's call (armed), gated by its start flag; the slot runs on ZC_OK. */
zc_status zc__bind_issue(zc_comm *comm, uint32_t i);
/* Writes slot i's done flag with every step of its program released (an unfinished step runs
 * nothing): its stream goes on; the slot drains. */
void zc__bind_release(zc_comm *comm, uint32_t i);
/* zc_comm_fini's first step: ZC_OK when no caller's stream still holds an operation of this
 * communicator's (every stream slot free, or captured and idle); on a failed communicator the
 * calls still waiting are released first. Else ZC_INVALID_STATE with a sentence: nothing was
 * torn down. */
zc_status zc__binds_fini(zc_comm *comm);
/* The family that runs algorithm alg (zc__alg). */
const struct zc__family *zc__family_of(uint32_t alg);

/* ---- schedule families: each one row, defined by the file that runs it ---- */
/* links(c, s, fn, ctx) calls fn(ctx, peer, tx, rx) once for every peer a call of s exchanges
 * messages with (tx to it, rx from it over the whole call), never for this rank: the one
 * statement of a call's message counts, which the issue reserves and a finished request has
 * moved exactly (progress.c asserts it). */
typedef void (*zc__link_fn)(void *ctx, uint32_t peer, uint64_t tx, uint64_t rx);
#define ZC_FAM_EAGER 1u  /* a call whose streams are one message each takes a step at issue */
#define ZC_FAM_PLACE 2u  /* its copy streams may be written in place (wires with put) */
#define ZC_FAM_STREAM 4u /* the stream-ordered forms (stream.c) run it */
typedef struct zc__family {
    const char *name;
    uint32_t flags; /* ZC_FAM_* */
    void (*links)(const zc_comm *c, const zc__sched *s, zc__link_fn fn, void *ctx);
    /* At issue, after the reservation: the request's own fields (NULL: none). */
    void (*begin)(zc_comm *c, zc__req *r);
    /* Moves r within *budget (one unit per message or phase); true once its work is done.
     * A failure fails the communicator (zc__fail) and returns false. */
    bool (*step)(zc_comm *c, zc__req *r, uint32_t *budget);
} zc__family;
extern const zc__family zc__fam_host;   /* sched.c: host memory */
/* The host family's step of a request whose r->line its begin set: what zc__fam_host.step
 * runs for it, which progress.c calls without the family's dispatch. */
bool zc__line_step(zc_comm *c, zc__req *r, uint32_t *budget);
extern const zc__family zc__fam_sym;    /* sym.c: buffers in the symmetric region */
extern const zc__family zc__fam_staged; /* sched_stage.c: device memory through host staging */
extern const zc__family zc__fam_ipc;    /* sched_gpu.c: device memory, peers' buffers mapped */
extern const zc__family zc__fam_direct; /* sched_put.c: device memory, NIC writes into it */
extern const zc__family zc__fam_relay;  /* relay.c: send/recv to a rank with no connection */

/* ---- relay.c: relayed send/recv in overlay mode ---- */
/* The next hop from rank me toward dst (!= me) of n ranks: the shorter way round the ring
 * (clockwise on a tie), by the highest power of two in the distance left; popcount(distance)
 * hops in all, each a ring link (r +- 2^k) and each shorter than the one before. */
uint32_t zc__relay_next(uint32_t n, uint32_t me, uint32_t dst);
/* Every zc_progress pass, within *budget: the next messages of up to ZC_RELAY_POLLS relay
 * rings (round robin over the ring links), each forwarded to its next hop when that hop has
 * credit or delivered into the receive it belongs to when there is one; otherwise it waits
 * (never blocks). At most ZC_RELAY_PASS messages moved. */
void zc__relay_pass(zc_comm *comm, uint32_t *budget);
/* For a receive from any source whose turn it is: the lowest rank whose relayed message to
 * this rank is the next of a relay ring and belongs to no receive issued; UINT32_MAX: none. */
uint32_t zc__relay_any(zc_comm *comm);
/* At a clock read, now: a forward that has waited ZC_LIVENESS_NS for its next hop's credit
 * checks that hop's liveness; a gone hop fails the communicator with ZC_PEER_LOST (the report
 * travels the overlay as every failure's does). */
void zc__relay_check(zc_comm *comm, uint64_t now);

/* ---- sched.c: every host collective's schedule as a state machine ---- */
/* At issue, before the reservation, for a call of at least comm->put_min bytes per block:
 * r->place, and when it is not 0 r->pl (which peers exchange ready messages with r;
 * zc_reserve reserves them). */
void zc__place_plan(zc_comm *comm, zc__req *r);
/* Peer p's placement ready message (its payload in), read before a put uses it: no
 * destination (raddr 0), or one under which this call's stream to p stays below the top of the
 * address space, with a key of the wire's 32-bit key space (wire.h); into r->pl[p]. Where in
 * p's memory the puts land is p's NIC's to check against p's registration: a put writes only
 * into p. False when the message failed the communicator (zc__bad_peer). */
bool zc__place_take(zc_comm *comm, zc__req *r, uint32_t p, const uint8_t *in);
/* The host algorithm of a call of kind with count elements of bytes in all, from the
 * configured thresholds (never from timing: every rank picks the same). */
zc__alg zc__choose(const zc_comm *comm, uint32_t kind, uint64_t count, uint64_t bytes);

/* ---- sym.c: the symmetric region's single-copy schedule ---- */
/* Whether s runs as ZC_ALG_SYM: a collective it covers, at least ZC_SYM_MIN_BYTES, and every
 * buffer this rank uses in the carved part of its symmetric region. */
bool zc__sym_fits(const zc_comm *c, const zc__sched *s);

/* ---- hier.c: the two-wire communicator (ZC_TRANSPORT_HIER) ---- */
/* A wire whose connections are carried by two instances (0: shm, the ranks of this rank's
 * place; 1: transport_ib, or shm in tests, the other places' ranks): each data-path call goes
 * to the instance carrying the peer's connection. Processes only. */
extern const zc_wire_ops zc__wire_hier;
#ifdef ZC_TEST_HOOKS
/* Test builds only: when not 0, instance 1 is a second shm instance (one machine whose
 * processes claim hosts with ZC_HOST_ID, no RDMA device). */
extern uint32_t zc__test_hier_shm;
#endif
/* Before create: which instance carries each of g's connections (places[r] at stride bytes:
 * rank r's place; this rank's own place's ranks on instance 0, this rank on both) and each
 * instance's connection cap (the same on every rank, at least its connections there). */
void zc__hier_prepare(void *state, const zc_wire_geom *g, const uint64_t *places,
                      size_t stride, uint32_t cap0, uint32_t cap1);
/* Whether the stream to or from peer may be placed: its connection's instance puts. */
bool zc__hier_puts(const void *state, uint32_t peer);
/* What each instance takes and opens for nconn[k] connections under cap[k] (g: the
 * communicator's geometry, cfg its configuration). */
typedef struct zc__hier_cost {
    uint64_t mem[2], locked[2];
    zc_wire_links links[2];
} zc__hier_cost;
void zc__hier_need(const zc_config *cfg, const zc_wire_geom *g, const uint32_t nconn[2],
                   const uint32_t cap[2], zc__hier_cost *out);
/* A prepared state's connections and caps per instance. */
void zc__hier_shape(const void *state, uint32_t nconn[2], uint32_t cap[2]);
/* The wire of instance 1 ("ib", or "shm" in tests). */
const char *zc__hier_inter_name(void);

/* ---- fail.c: the failure record (the one place it is written) ---- */
/* One failure as its detector knows it: status, collective sequence, the peer it concerns (-1:
 * none), a foreign error code (errno, ibv_wc_status, cudaError_t; 0: none) and the rank that
 * detected it (-1: this rank; a peer's rank when this is its report, passed on). */
typedef struct zc__failure {
    zc_status status;
    int32_t peer;
    int64_t vendor;
    uint64_t seq;
    int32_t origin;
    uint32_t pad_;
} zc__failure;
/* Fails the communicator. The first failure records status, sentence, peer and vendor code
 * together and reports it to the peers; a later one records nothing (first failure wins).
 * Either way every active request finishes with the communicator's status, which is returned. */
zc_status zc__fail(zc_comm *comm, zc_status status, uint64_t seq, int32_t peer, int64_t vendor,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
zc_status zc__vfail(zc_comm *comm, const zc__failure *f, const char *fmt, va_list ap);
/* zc__fail for a failure peer `origin` reported: the report this rank passes on to its own
 * connections names origin as the detector, so that ranks with no connection to it still learn
 * who failed (the overlay relays it hop by hop). */
zc_status zc__fail_relayed(zc_comm *comm, zc_status status, uint64_t seq, uint32_t origin,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* zc_comm_abort: fails with ZC_ABORTED; from then on calls return ZC_ABORTED (docs/api.md) even
 * when an earlier failure is recorded, whose sentence, peer and code stay. */
void zc__abort(zc_comm *comm);
/* A call's error that leaves the communicator usable (bad argument, full pool): records the
 * sentence unless the communicator failed (its failure's sentence stays); returns status. */
zc_status zc__error(zc_comm *comm, zc_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The sentence zc_init_error_text returns (init, split, in-process groups). */
void zc__set_init_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void zc__vset_init_error(const char *fmt, va_list ap);
/* Whether [off, off + bytes) lies in [0, region); bytes 0 addresses nothing and always does. */
static inline bool zc__span_in(uint64_t off, uint64_t bytes, uint64_t region) {
    return !bytes || (off <= region && bytes <= region - off);
}
/* A field of peer's message that no rank of the job sends (an offset, length, key or count out
 * of the range it addresses): fails the communicator with ZC_MISMATCH and the sentence "<call>
 * sequence <seq>: rank <peer> sent <what fmt says>; ...", before the field is used. */
zc_status zc__bad_peer(zc_comm *comm, const zc__req *r, uint32_t peer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "zc_allreduce(count 10, int32, sum)": the call a header or request describes (root: a send's
 * or receive's tag, shown when not 0). */
void zc__describe(char *buf, size_t cap, uint32_t kind, uint64_t count, uint32_t dtype,
                  uint32_t op, uint32_t root);
const char *zc__kind_name(uint32_t kind);

#include "layout.h"

static inline void zc__extents_at(const zc_comm *c, uint32_t rank, uint32_t kind,
                                  uint32_t root_rank, uint64_t *sblocks, uint64_t *rblocks) {
    uint64_t n = c->nranks;
    bool root = rank == root_rank;
    *sblocks = *rblocks = 1;
    switch (kind) {
    case ZC_K_REDUCE: *rblocks = root; break;
    case ZC_K_BROADCAST: *sblocks = root; break;
    case ZC_K_REDUCE_SCATTER: *sblocks = n; break;
    case ZC_K_ALLGATHER: *rblocks = n; break;
    case ZC_K_GATHER: *rblocks = root ? n : 0; break;
    case ZC_K_SCATTER: *sblocks = root ? n : 0; break;
    case ZC_K_ALLTOALL: *sblocks = *rblocks = n; break;
    case ZC_K_SEND: *rblocks = 0; break;
    case ZC_K_RECV: *sblocks = 0; break;
    case ZC_K_BARRIER: *sblocks = *rblocks = 0; break;
    default: break;
    }
}
static inline void zc__extents(const zc_comm *c, uint32_t kind, uint32_t root_rank,
                               uint64_t *sblocks, uint64_t *rblocks) {
    zc__extents_at(c, c->rank, kind, root_rank, sblocks, rblocks);
}

/* Elements [lo, hi) of block b when count elements are split into n balanced blocks. */
static inline uint64_t zc__block_lo(uint64_t count, uint32_t n, uint32_t b) {
    uint64_t base = count / n, rem = count % n;
    return b * base + (b < rem ? b : rem);
}
/* Messages needed for len elements at chunk elements per message. */
static inline uint64_t zc__msgs(uint64_t len, uint32_t chunk) {
    if (len <= chunk) return len != 0; /* small calls skip the division (tens of cycles) */
    return (len + chunk - 1) / chunk;
}
/* (a + b) % n for a, b < n, without a division. */
static inline uint32_t zc__add_mod(uint32_t a, uint32_t b, uint32_t n) {
    uint32_t v = a + b;
    return v >= n ? v - n : v;
}

#define ZC_ASSERT(cond)                                                                         \
    do {                                                                                        \
        if (!(cond)) zc_plat_panic(__FILE__, __LINE__, #cond);                                  \
    } while (0)

#endif
