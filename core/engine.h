/* engine.h: the core's internal model, shared by the files of core/ and by nobody else.
 *
 * A communicator lives entirely in the caller's arena (layout.c decides the carve). Its
 * requests come from a fixed pool; each runs a collective's schedule as an explicit state
 * machine (in the file of its schedule family: the family table in progress.c) that moves
 * messages through the wire's slot rings with the channel helpers of channel.c. Ordering rule that keeps concurrent requests deadlock-free: a request
 * reserves, when it is issued, the numbers of the messages it will send to and receive from
 * every peer on its lane (tx_base/rx_base); every rank issues collectives in the same order, so
 * both ends of a channel number each message identically, and message m may only be written
 * once message m-1 was, and only consumed once m-1 was. Each message's header carries the full
 * fingerprint of the call that sent it, checked before its payload is used.
 *
 * The files, each calling only files listed below it (core/layers.txt holds this order and
 * `ninja check-layers` enforces it; the declarations follow it):
 *   split.c     zc_comm_split(_inproc): children agreed over the parent's own collectives
 *   report.c    zc_device_report: what the machine offers device-memory calls
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
#define ZC_COMM_MAGIC 0x7a63636f6d6d3031ull /* "zccomm01" */
#define ZC_REQ_MAGIC 0x7a63u
#define ZC_PLAN_MAGIC 0x7a70u

/* A collective's kind, as it travels in headers and error sentences. */
typedef enum zc__kind {
    ZC_K_NONE = 0, ZC_K_ALLREDUCE, ZC_K_REDUCE, ZC_K_BROADCAST, ZC_K_REDUCE_SCATTER,
    ZC_K_ALLGATHER, ZC_K_GATHER, ZC_K_SCATTER, ZC_K_ALLTOALL, ZC_K_SEND, ZC_K_RECV,
    ZC_K_BARRIER,
    ZC_K_REGISTER, /* internal: a CUDA registration's exchange (sched_gpu.c's GPU_REGISTER) */
    ZC_K_DEREGISTER, /* internal: its end: every rank unmapped every peer's buffer (the same) */
    ZC_K_COUNT_
} zc__kind;

typedef enum zc__alg {
    ZC_ALG_LOCAL = 0,  /* nothing to move (count 0 or one rank) */
    ZC_ALG_ONESHOT,    /* every rank sends its input to every peer and reduces all n */
    ZC_ALG_RSAG,       /* direct reduce-scatter, then all-gather of the reduced blocks */
    ZC_ALG_DIRECT,     /* reduce: all to the root; gather/scatter/allgather/alltoall: direct */
    ZC_ALG_RSGATHER,   /* reduce: direct reduce-scatter, then gather of blocks to the root */
    ZC_ALG_TREE,       /* broadcast down a binomial tree */
    ZC_ALG_CHAIN,      /* broadcast down a pipelined chain */
    ZC_ALG_DISSEM,     /* barrier: dissemination rounds */
    ZC_ALG_P2P,        /* send / recv */
    ZC_ALG_SYM,        /* buffers in the symmetric region: single copy, peers' buffers read
                        * and written directly (sym.c) */
    ZC_ALG_STAGED,     /* device memory through host staging (sched_stage.c): per round,
                        * device-to-host copies, a host schedule, host-to-device copies */
    /* Device memory (sched_gpu.c): data moves by kernels reading peers' IPC-mapped buffers;
     * only zero-payload-size signals (readiness, done reading) travel the channels. */
    ZC_ALG_GPU_ONESHOT, /* all_reduce: every rank reduces all n inputs */
    ZC_ALG_GPU_RSAG,    /* all_reduce: reduce-scatter, then all-gather of the blocks */
    ZC_ALG_GPU_DIRECT,  /* every other collective: each rank pulls what it needs */
    ZC_ALG_GPU_REGISTER, /* internal: a CUDA registration's IPC records to and from every
                          * peer, then the mapping of the peers' buffers */
    /* Device memory on the direct path (sched_put.c): the wire's puts (RDMA WRITE) carry the
     * bytes into the receiver's registered buffer or its landing areas in device scratch, a
     * header-only message after each says it is there; reductions are provider kernels. */
    ZC_ALG_PUT_ONESHOT, /* all_reduce (small), reduce: each contributor puts its round's slice
                         * into every reducer's landing; reducers reduce all n in rank order */
    ZC_ALG_PUT_RSAG,    /* all_reduce (large): per round, blocks into their owners' landing,
                         * owners reduce, then put the result into every peer's recv;
                         * reduce_scatter: the first half */
    ZC_ALG_PUT_COPY,    /* broadcast, scatter, gather, all_gather, all_to_all: every block put
                         * straight into its receiver's recv */
    ZC_ALG_PUT_P2P,     /* send/recv: chunks put into the receiver's device slots, copied out
                         * by a kernel; the slot's credit returns after the copy */
    ZC_ALG_COUNT_
} zc__alg;

/* sched_gpu.c's schedules (peers' buffers mapped through IPC). */
static inline bool zc__gpu_alg(uint32_t alg) {
    return alg >= ZC_ALG_GPU_ONESHOT && alg <= ZC_ALG_GPU_REGISTER;
}
/* sched_put.c's (the direct path). */
static inline bool zc__put_alg(uint32_t alg) { return alg >= ZC_ALG_PUT_ONESHOT; }
/* A call on device memory: staged, or one of sched_gpu.c's or sched_put.c's. */
static inline bool zc__device_alg(uint32_t alg) { return alg >= ZC_ALG_STAGED; }

/* Everything a start needs: validated arguments and the chosen algorithm. */
typedef struct zc__sched {
    uint8_t kind;        /* zc__kind */
    uint8_t alg;         /* zc__alg */
    uint8_t dtype;       /* zc_dtype */
    uint8_t op;          /* zc_op (0 where there is none) */
    uint32_t root;       /* root, or the peer of send/recv; 0 where there is none */
    uint32_t esize;      /* bytes per element */
    uint32_t chunk;      /* elements per message: slot_bytes / esize */
    uint32_t tag;        /* send/recv: the tag every message carries (0 elsewhere) */
    uint32_t pad_;
    uint64_t count;      /* elements, as the caller gave them (per rank / per block) */
    const uint8_t *send;
    uint8_t *recv;
} zc__sched;

/* Bytes of a call's result buffer (the largest part a rank writes). */
static inline uint64_t zc__result_bytes(const zc__sched *s, uint32_t n) {
    uint64_t b = s->count * s->esize;
    return s->kind == ZC_K_ALLGATHER || s->kind == ZC_K_GATHER || s->kind == ZC_K_ALLTOALL
               ? b * n : b;
}

typedef enum zc__req_state { ZC_REQ_FREE = 0, ZC_REQ_ACTIVE, ZC_REQ_DONE } zc__req_state;

/* zc__req.plan of an internal request (no caller holds its handle): its slot is freed as soon
 * as it finishes instead of waiting for zc_test. */
#define ZC_PLAN_INTERNAL (-2)

typedef struct zc__req {
    uint32_t state;      /* zc__req_state */
    uint32_t gen;        /* bumped at every reuse: stale zc_req handles are refused */
    int32_t status;      /* ZC_IN_PROGRESS while active, then the result */
    uint32_t lane;       /* 0 collectives, 1 send/recv */
    int32_t plan;        /* plan slot that started it, -1 for none, ZC_PLAN_INTERNAL */
    uint32_t held;       /* 1: a stream-ordered call whose stream has not reached it (its start
                          * flag is down): not stepped, no deadline; written by progress.c only */
    uint64_t seq;        /* collective sequence number (p2p: the pair's op number) */
    /* When progress first looked at the clock after issue (0: not yet), the deadline (start
     * + timeout; 0: not stamped yet) and when it last saw the request move. */
    uint64_t start_ns, deadline_ns, moved_ns;
    uint32_t moved;      /* 1: moved since progress last read the clock */
    uint32_t place;      /* ZC_PLACE_*: this call has streams written in place (sched.c) */
    zc__sched s;
    uint64_t tx_left, rx_left; /* messages still to send / receive, all peers together */
    uint64_t a, b;       /* host schedule counters (which: see sched.c) */
    uint64_t *tx_base;   /* [nranks] first message number on each peer's lane, sending */
    uint64_t *rx_base;   /* [nranks] the same, receiving */
    struct zc__place *pl; /* [nranks] streams written in place, per peer (sched.c) */
    /* Device schedules (sched_gpu.c, sched_put.c). */
    uint32_t phase;      /* zc__gphase, or sched_put.c's phases */
    uint32_t round, rounds;
    uint32_t bind;       /* stream slot + 1 of a stream-ordered call (0: none): its start flag
                          * gates the request, its done flag is written when it ends */
    uint32_t mem;        /* ZC_K_REGISTER: the registration's entry in comm->mems */
    uint32_t step;       /* stream-ordered: steps released so far (GO = bind's go + step) */
    uint32_t wild;       /* ZC_WILD_*: a receive that reserved nothing yet (progress.c) */
    uint64_t round_elems; /* elements per round (RS+AG: per region of n blocks) */
    uint8_t **ptrs;      /* [2 * nranks] every rank's send, then recv buffer, in this process */
    /* The direct path (sched_put.c). */
    uint64_t ticket;     /* its turn at the landing areas (ONESHOT, RSAG) */
    const zc_wire_mr *smr, *rmr; /* the NIC's registrations of send and recv (NULL: none) */
    uint32_t pflags;     /* ZC_PUT_* (sched_put.c): own copy launched / done, bytes landed */
    uint32_t fill;       /* stream-ordered: entries in the step descriptor being filled */
    struct zc__stage_req *stg; /* a staged call's state (sched_stage.c; NULL: no gpu provider) */
    uint32_t *source;    /* send/recv: where the matched peer goes (the caller's; NULL: none) */
} zc__req;

/* zc__req.wild: receives that reserve their messages only once it is their turn. A receive
 * from any source cannot reserve before a message says which peer's channel it takes; every
 * receive issued after one waits behind it, so that none overtakes it (progress.c resolves
 * them in issue order). */
#define ZC_WILD_NONE 0u  /* reserved at issue, as every other call */
#define ZC_WILD_ANY 1u   /* from any source, not matched yet */
#define ZC_WILD_AFTER 2u /* from a named peer, behind a receive from any source */

/* Placement (wires with put): a stream of at least comm->put_min bytes from a peer is preceded
 * by one message the other way, the "ready" message, at channel number base - 1: the receiver
 * says where the stream goes (address and key of its registered destination) or that it
 * cannot take it in place (raddr 0). Both ends decide alike from the call alone. */
#define ZC_PLACE_ON 1u        /* some stream of the call may be written in place */
#define ZC_PLACE_HANDSHAKE 2u /* ready messages still to send or read */
#define ZC_PLACE_DIRECT 4u    /* puts went from the caller's memory: finish after put_done */
typedef struct zc__place {
    uint64_t raddr, rkey; /* where my stream to this peer goes (raddr 0: through the slots) */
    uint8_t ready_in;     /* 1: this peer sends me a ready message (I stream to it) */
    uint8_t ready_out;    /* 1: I send it one (it streams to me) */
    uint8_t offered;      /* 1: mine offered a destination */
    uint8_t direct;       /* 1: a put to it went from the caller's memory */
    uint8_t sent, got;    /* 1: my ready message went / its ready message was read */
    uint8_t pad_[2];
} zc__place;

/* A request's end: its status, and its slot held for zc_test (or freed at once when internal:
 * nobody holds its handle). The caller takes it off the active list. */
static inline void zc__req_end(zc__req *r, zc_status st) {
    r->status = st;
    r->state = ZC_REQ_DONE;
    if (r->plan == ZC_PLAN_INTERNAL) {
        r->state = ZC_REQ_FREE;
        r->gen++;
    }
}

typedef struct zc__plan {
    uint32_t used;       /* 0 free, 1 held */
    uint32_t gen;
    int32_t running;     /* request slot of its current start, -1 for none */
    uint32_t pad_;
    zc__sched s;
} zc__plan;

typedef struct zc__mem_entry {
    void *addr;          /* NULL: a free entry */
    size_t bytes;
    uint32_t kind;       /* zc_mem_kind */
    uint32_t gen;        /* bumped at every registration */
    zc_wire_mr mr;       /* the wire's registration (handle NULL: none, the wire has no put) */
    uint32_t gstate;     /* ZC_MEM_CUDA: zc__gmem_state */
    uint32_t creg;       /* ZC_MEM_CUDA: registration number, the same on every rank */
} zc__mem_entry;
/* The registration table's owner (mem.c). zc__mem_take: a free entry's index (its wire
 * registration cleared), else ZC_LIMIT with the sentence. zc__mem_fill: entry e now holds
 * [addr, addr + bytes) of kind (its generation bumped); the caller's handle. zc__mem_find: the
 * entry of kind holding [p, p + bytes) entirely (CUDA entries being deregistered excluded),
 * -1 when none does; *partial (when not NULL) set when one overlaps the range only. */
zc_status zc__mem_take(zc_comm *comm, uint32_t *index);
zc_mem *zc__mem_fill(zc__mem_entry *e, void *addr, size_t bytes, uint32_t kind);
int32_t zc__mem_find(const zc_comm *comm, const void *p, uint64_t bytes, uint32_t kind,
                     bool *partial);

/* ---- device memory: the state gpu_mem.c, stream.c, progress.c and sched_gpu.c share ---- */
#define ZC_GPU_NONE 0xffffffffu /* "no buffer" registration number */

typedef enum zc__gmem_state {
    ZC_GMEM_FREE = 0, /* nothing mapped from peers (also: registered with the NIC only) */
    ZC_GMEM_PENDING,  /* the IPC records are being exchanged */
    ZC_GMEM_MAPPED,   /* every peer's buffer is mapped here (gpu->mapped) */
    ZC_GMEM_FAILED,
    ZC_GMEM_CLOSING   /* being deregistered: unmapped here, the peers' word awaited */
} zc__gmem_state;

/* A device request's phases (sched_gpu.c). */
typedef enum zc__gphase {
    ZC_G_READY = 0,    /* exchange READY (message 0) */
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
} zc__gphase;

/* A stream slot's life: FREE; ARMED (its program is on a caller's stream; a graph-captured one
 * stays armed between replays); RUNNING (issued: its request runs); DRAINING (the done flag is
 * written: the slot waits until its stream wrote the fin flag, past every operation of the
 * program, before its flag words and step descriptor serve again); LOST (a program whose
 * enqueue failed half-way, released: never used again, nothing to wait for). */
typedef enum zc__bind_state {
    ZC_BIND_FREE = 0, ZC_BIND_ARMED, ZC_BIND_RUNNING, ZC_BIND_DRAINING, ZC_BIND_LOST
} zc__bind_state;

/* A stream slot's flag words: flags[ZC_BIND_FLAGS * i + ZC_BF_*]. The caller's stream writes
 * START (the call may begin), KD (step j ran) and FIN (the stream is past the call); the host
 * writes GO (step j may run) and DONE (the call ended). */
#define ZC_BIND_FLAGS 8u
enum { ZC_BF_START = 0, ZC_BF_DONE, ZC_BF_GO, ZC_BF_KD, ZC_BF_FIN };
/* Device steps a stream-ordered call may enqueue (three stream operations each). */
#define ZC_BIND_MAX_STEPS 128u

/* A stream slot: one stream-ordered call, its program on the caller's stream (stream.c arms
 * it, progress.c starts, ends and drains it): [captured: DONE = tick - 1, GO = KD = go] START =
 * tick; for each step j of steps: wait GO >= go + j, the step's kernel (step descriptor i),
 * KD = go + j; wait DONE >= tick; FIN = tick. */
typedef struct zc__bind {
    uint32_t state;      /* zc__bind_state */
    uint32_t persistent; /* captured in a graph: re-armed after every run, held until fini */
    uint32_t tick;       /* the value its stream writes to START and FIN, waits for in DONE */
    uint32_t slot;       /* RUNNING: its request's slot ... */
    uint32_t gen;        /* ... and that slot's generation (a new one: the request ended) */
    uint32_t go;         /* the GO / KD base of its program (steps run at go + 1 .. go + steps) */
    uint32_t steps;      /* device steps of its program */
    uint32_t pad_;
    zc__sched s;
} zc__bind;

/* A buffer the calls of a communicator share (the staged path's staging, the direct path's
 * landing areas), taken in issue order: every rank issues its calls in the same order, so
 * waiting for it cannot deadlock (its holder never waits for a later call). */
typedef struct zc__turn {
    uint64_t next;    /* the ticket the next call takes */
    uint64_t serving; /* the ticket that holds the buffer */
} zc__turn;
static inline uint64_t zc__turn_take(zc__turn *t) { return t->next++; }
static inline bool zc__turn_mine(const zc__turn *t, uint64_t ticket) {
    return t->serving == ticket;
}
static inline void zc__turn_pass(zc__turn *t) { t->serving++; }

/* One rank's device as every rank learns it at init (gpu_mem.c): its landing on the direct
 * path, or on a wire that maps peers (shm) its device and whether it can read every peer's
 * (the ipc path needs every pair). */
typedef struct zc__gpu_peer {
    uint64_t addr;  /* its landing memory (the provider's scratch) as its NIC registered it */
    uint64_t rkey;
    uint64_t area;  /* bytes of one collective landing area (gpu_mem.c: zc_gpu_area) */
    uint32_t no;    /* zc__land_no: why this rank cannot take the direct path (0: it can) */
    uint32_t reads; /* shm, second round: 1 when its device reads every peer's, 0 when not,
                     * ZC_READS_UNKNOWN in the first round */
    uint32_t unread; /* reads 0: the first rank whose device it cannot read */
    uint32_t pad_;
    zc_gpu_ident id; /* its device (provider identity) */
} zc__gpu_peer;
#define ZC_READS_UNKNOWN 2u

typedef enum zc__land_no {
    ZC_LAND_OK = 0,
    ZC_LAND_NO_DEVICE, /* no device state at this rank (gpu_open failed) */
    ZC_LAND_NO_RDMA,   /* the device takes no NIC writes (no GPUDirect RDMA) */
    ZC_LAND_NIC,       /* the NIC refused to register the device's landing memory */
    ZC_LAND_SMALL      /* gpu_scratch_bytes / nranks is under 256 bytes */
} zc__land_no;

struct zc__gpu {
    const zc_gpu_ops *ops;
    void *state;           /* the provider's, in the arena */
    uint32_t nranks, rank;
    uint32_t creg_next;    /* next CUDA registration number */
    uint32_t used;         /* 1 once a CUDA registration was made (0: host calls skip every
                            * device check; after one, unregistered device memory is refused
                            * even when every registration was dropped again) */
    uint32_t path;         /* the path device calls take, decided at init (gpu_mem.c):
                            * ZC_GPU_PATH_IPC, STAGED or DIRECT (zc__gpu_path_now) */
    uint32_t nbinds;
    uint32_t binds_live;   /* stream slots not free (0: zc_progress skips them) */
    uint32_t *flags;       /* host view of the ZC_BIND_FLAGS * nbinds flag words */
    uint8_t *scratch;
    uint64_t scratch_bytes;
    uint64_t pid;
    zc_gpu_ipc *recs;      /* [max_mems * nranks] every rank's export of each registration */
    uint8_t **mapped;      /* [max_mems * nranks] peers' registered buffers in this process */
    zc__bind *binds;       /* [nbinds] */
    /* The direct path (gpu_mem.c opens it; sched_put.c uses it). The provider's scratch is the
     * landing: nranks collective areas of `area` bytes (source rank q's at q * area), then
     * send/recv's slots (source q's ring of cfg.slots slots at p2p_at + q * slots * slot_bytes,
     * mirroring the host ring, so the host slot's credit guards both). */
    zc__gpu_peer *peers;   /* [nranks] every rank's landing (ZC_R_GPU_PEERS) */
    zc_wire_mr land_mr;    /* the NIC's registration of this rank's landing (handle NULL: none) */
    uint64_t area;         /* bytes of one collective landing area */
    uint64_t p2p_at;       /* offset of send/recv's landing slots in the scratch */
    zc__turn land;         /* the collective landing areas, in issue order (ONESHOT, RSAG) */
    uint64_t direct_calls, direct_bytes; /* direct calls issued; bytes put from this rank */
    char why[ZC_ERROR_TEXT_BYTES]; /* why comm->gpu is NULL */
};

/* ---- the staged path: the state sched_stage.c keeps (comm.c carves it) ---- */
typedef enum zc__sphase {
    ZC_S_TURN = 0, /* wait until the staging is this call's (its ticket is served) */
    ZC_S_D2H,      /* launch the round's device-to-host copies */
    ZC_S_D2H_WAIT,
    ZC_S_HOST,     /* the round's host schedule */
    ZC_S_H2D,      /* launch the round's host-to-device copies */
    ZC_S_H2D_WAIT,
    ZC_S_DONE
} zc__sphase;

/* A staged call's state: a row per request slot (zc__req.stg). */
typedef struct zc__stage_req {
    uint32_t phase;       /* zc__sphase */
    uint32_t own;         /* 1: send/recv, on the slot's own staging (no ticket) */
    uint8_t *base;        /* the staging it uses */
    uint64_t ticket;      /* its turn at the staging */
    uint64_t round, rounds;
    uint64_t per;         /* elements of every block per round */
    zc__sched dev;        /* the call as issued (device buffers, ZC_ALG_STAGED) */
    zc__sched full, last; /* host schedules of a full round and of the last round */
    uint64_t full_tx, full_rx, last_tx, last_rx; /* their messages, all peers together */
} zc__stage_req;

struct zc__stage {
    const zc_gpu_ops *ops; /* the communicator's gpu provider (zc__gpu_open's) */
    void *gstate;
    uint8_t *buf;          /* the collectives' staging (ZC_R_STAGE_BUF) */
    uint64_t bytes;
    uint8_t *p2p;          /* [max_requests][slot_bytes] send/recv's staging, per request slot
                            * (ZC_R_STAGE_P2P) */
    zc__turn turn;          /* the collectives' staging, in issue order */
    uint64_t calls, rounds; /* staged calls issued and rounds run (tests read them) */
};

/* One direction of one lane with one peer is a channel; counters are message numbers. */
typedef struct zc__chan {
    uint64_t tx_count;     /* messages posted to the peer */
    uint64_t tx_reserved;  /* messages promised to the peer by issued requests */
    uint64_t rx_count;     /* messages consumed from the peer */
    uint64_t rx_reserved;  /* messages expected from the peer by issued requests */
    uint64_t tx_credit;    /* last credit value read (messages the peer consumed) */
    uint64_t p2p_sent;     /* lane 1: send operations issued to the peer */
    uint64_t p2p_recvd;    /* lane 1: receive operations issued from the peer */
    uint64_t tx_unposted;  /* tag of the last message, written but refused by the wire for now
                            * (ZC_AGAIN): posted again before anything else; 0: none */
} zc__chan;

/* The 64-byte header of every slot: the fingerprint of the call that sent the message. */
typedef struct zc__hdr {
    uint64_t comm_id;
    uint64_t seq;
    uint64_t count;
    uint8_t kind, dtype, op, alg;
    uint32_t root;       /* the call's root; a send's tag (its sender is src) */
    uint32_t step;       /* message index within the call on this channel */
    uint32_t bytes;      /* payload bytes */
    uint32_t src;        /* sender rank */
    uint32_t placed;     /* 1: the payload was put at the receiver's destination already */
    uint8_t inl[8];      /* a payload of at most ZC_INLINE_BYTES: in the header's own line */
    uint64_t tag;        /* written by the wire when it publishes */
} zc__hdr;
/* A payload this small travels in the header (zc__hdr.inl): the message is one cache line,
 * which the receiver reads with one transfer instead of two. */
#define ZC_INLINE_BYTES 8u
_Static_assert(sizeof(zc__hdr) == ZC_SLOT_HDR_BYTES, "slot header is 64 bytes");

struct zc_comm {
    uint64_t magic;
    uint32_t lock;         /* 1 while a thread is inside a public call (zc__lock) */
    uint32_t splitting;    /* 1 while a zc_comm_split(_inproc) of this parent runs (split.c) */
    uint64_t comm_id;
    zc_config cfg;         /* a copy; rank/nranks are this communicator's */
    uint32_t rank, nranks;
    int32_t failed;        /* 0, or the status every later call returns (fail.c writes it) */
    int32_t fail_peer;     /* the failure's peer, -1 for none (fail.c) */
    uint32_t recv_waiting; /* receives whose wild is not ZC_WILD_NONE (progress.c) */
    int64_t fail_code;     /* the failure's foreign error code, 0 for none (fail.c) */
    uint64_t fail_seq;     /* the collective sequence the failure was detected at (fail.c) */
    uint32_t nreqs_active;
    uint64_t seq;          /* next collective sequence number */
    uint64_t splits;       /* zc_comm_split calls made (names children) */
    uint64_t host;         /* a hash of this rank's host (init's; a child keeps its parent's) */
    uint32_t node;         /* the lowest rank on this rank's host (zc_comm_node) */
    uint32_t wire_auto;    /* 1: cfg asked for ZC_TRANSPORT_AUTO: a split child whose ranks
                            * share a host takes the shared-memory wire (split.c) */
    uint64_t empty_polls;  /* zc_progress calls in a row that moved nothing */
    uint64_t clock_polls;  /* zc_progress calls since it last read the clock */
    uint64_t liveness_ns;  /* last time peers' liveness was checked */
    uint64_t put_min;      /* the wire's put_min (0: nothing is written in place) */
    uint64_t placed_bytes; /* payload bytes peers put straight into this rank's buffers */
    uint64_t sym_used;     /* bytes of the symmetric region zc_sym_alloc has carved (sym.c) */
    uint64_t unposted;     /* channels with a message the wire refused for now (tx_unposted) */
    zc__chan *tx_begun;    /* the channel whose next message zc__tx_begin_n returned last ... */
    struct zc__hdr *tx_hdr; /* ... and that message's slot header (NULL: none since the
                            * channel's last publish), which its publish reuses */
    const zc_wire_ops *wire;
    void *wire_state;
    uint8_t *addrs;        /* [nranks * addr_bytes] the wire's address blobs */
    size_t addr_bytes;     /* of the largest candidate wire (the one in use may need less) */
    void *window;          /* in-process: this rank's inbound window, in the arena */
    zc_comm **group;       /* [nranks] in-process: every rank's communicator; else unused */
    zc__chan *chans;       /* [ZC_WIRE_LANES * nranks] */
    zc__req *reqs;         /* [max_requests] */
    uint32_t *active;      /* [max_requests] active request slots in issue order */
    zc__plan *plans;       /* [max_plans] */
    zc__mem_entry *mems;   /* [max_mems] */
    struct zc__gpu *gpu_area; /* the device region's header; NULL: cfg picks no provider */
    uint8_t *scratch;      /* init and split time only: ZC_SCRATCH_* (layout.c sizes it) */
    struct zc__gpu *gpu;   /* device-memory state; NULL: no CUDA build, no device, or off */
    struct zc__stage *stage_area; /* the staged path's state, carved; NULL: no provider */
    struct zc__stage *stage; /* staged-path state once opened; NULL: no gpu provider */
    char err[ZC_ERROR_TEXT_BYTES];
};

/* The communicator's lock (zcoll.h, "Threads"). Every public call that reads or changes a
 * communicator's state holds it, so calls on one communicator from several threads are
 * serialized: one thread may issue while another drives zc_progress or zc_wait. A holder does
 * bounded work and never waits for another thread, so a contender spins (and yields now and
 * then, in case the holder's thread was preempted). Never taken twice by one thread: code that
 * runs under it calls the unlocked forms (zc__test). A communicator whose caller promised
 * serial calls (cfg.threads ZC_THREADS_SERIAL) takes none: its atomic exchange is the costliest
 * instruction of a small call (15 to 30 ns per call on the 2-vCPU VM with a slow cache line). */
static inline void zc__lock(zc_comm *c) {
    if (c->cfg.threads == ZC_THREADS_SERIAL) return;
    for (uint32_t spins = 0; __atomic_exchange_n(&c->lock, 1u, __ATOMIC_ACQUIRE);) {
        while (__atomic_load_n(&c->lock, __ATOMIC_RELAXED)) {
            if (++spins % 256u == 0) zc_plat_yield();
            else zc_plat_cpu_relax();
        }
    }
}
static inline void zc__unlock(zc_comm *c) {
    if (c->cfg.threads != ZC_THREADS_SERIAL) __atomic_store_n(&c->lock, 0u, __ATOMIC_RELEASE);
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

/* Whether comm is a live communicator (every public call asks first). */
static inline bool zc__comm_ok(const zc_comm *comm) {
    return comm && comm->magic == ZC_COMM_MAGIC;
}

/* The path device calls take (ZC_GPU_PATH_IPC, STAGED, DIRECT), decided at init (gpu_mem.c);
 * 0 (ZC_GPU_PATH_AUTO) where the communicator has no usable device. */
static inline uint32_t zc__gpu_path_now(const zc_comm *comm) {
    return comm->gpu ? comm->gpu->path : 0u;
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
/* Once the wire and the device state are up: placement, and the communicator made live. */
void zc__open_live(zc_comm *c);
/* Builds an in-process group of n ranks over arenas[], each with cfg's sizes (the init error
 * says why it failed). */
zc_status zc__inproc_group(const zc_config *cfg, uint32_t n, void *const arenas[],
                           size_t arena_bytes, zc_comm *comms[], uint64_t comm_id);

/* ---- gpu_mem.c: the device state, CUDA registrations ---- */
/* After the wire is up: starts the provider (comm->gpu; without a usable device it stays
 * NULL and registrations say why) and decides the path, unless the path needs every rank's
 * record first: then (the same on every rank: zc__gpu_gathers; a wire that writes into memory
 * with gpu_path auto or direct: the landings; several processes on a wire that maps peers with
 * gpu_path auto or ipc: the devices) this rank's record is in gpu_area->peers[rank], *gather is
 * true, and the caller gathers every rank's record into gpu_area->peers (init over the
 * bootstrap, split over the parent) and calls zc__gpu_path, again while it says *again. Fails
 * (comm->err says why) only for gpu_path direct on a wire that cannot write into memory; the
 * caller closes the wire. */
zc_status zc__gpu_open(zc_comm *comm, bool *gather);
bool zc__gpu_gathers(const zc_comm *comm);
/* The path from every rank's record. Direct path: direct when every rank can take it, else
 * staged; ZC_UNSUPPORTED when cfg->gpu_path is direct and a rank cannot, ZC_MISMATCH when the
 * landing areas differ or a record is malformed. Shared memory: the first call judges which
 * peers' devices this rank's reads and asks for *again (one more gather of the records); the
 * second takes ipc when every rank reads every peer's device, else staged (ZC_UNSUPPORTED when
 * cfg->gpu_path is ipc). comm->err says which rank and why; the caller closes the
 * communicator. The same on every rank: the decision reads only the gathered records. */
zc_status zc__gpu_path(zc_comm *comm, bool *again);
/* Rank p's landing record q as it arrived: a reason of zc__land_no, or a landing whose every
 * byte (its nranks collective areas, then send/recv's slots) lies below the top of the address
 * space, under a key of the wire's 32-bit key space. False, with the sentence in comm->err, for
 * a record no rank of the job writes. */
bool zc__land_take(zc_comm *comm, uint32_t p, const zc__gpu_peer *q);
void zc__gpu_close(zc_comm *comm);
zc_status zc__gpu_mem_register(zc_comm *comm, void *addr, size_t bytes, zc_mem **mem_out);
/* The device side of a deregistration: ZC_OK when e may be cleared now; ZC_IN_PROGRESS with *req
 * when e is shared with peers through IPC: unmapped here, and *req the exchange that tells
 * every peer so and learns that every peer unmapped this rank's buffer (the caller waits for
 * it outside the lock, then calls zc__gpu_mem_closed); ZC_INVALID_STATE (a sentence) while a
 * call in flight or a stream-ordered call uses the buffer. */
zc_status zc__gpu_mem_deregister(zc_comm *comm, zc__mem_entry *e, zc_req *req);
void zc__gpu_mem_closed(zc_comm *comm, zc__mem_entry *e);

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
extern const zc__family zc__fam_sym;    /* sym.c: buffers in the symmetric region */
extern const zc__family zc__fam_staged; /* sched_stage.c: device memory through host staging */
extern const zc__family zc__fam_ipc;    /* sched_gpu.c: device memory, peers' buffers mapped */
extern const zc__family zc__fam_direct; /* sched_put.c: device memory, NIC writes into it */

/* ---- sched_stage.c: device-memory calls staged through host memory ---- */
/* From gpu_mem.c once the provider is up and the path decided (comm.c carved the staging's
 * regions). */
void zc__stage_open(zc_comm *comm, const zc_gpu_ops *ops, void *gstate);
/* From coll.c's device routing for a device-memory call the staged path carries:
 * ZC_ALG_STAGED, or ZC_LIMIT (with a sentence) when the staging cannot hold one element of each
 * block. */
zc_status zc__stage_route(zc_comm *comm, zc__sched *s);

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

/* ---- sched_gpu.c: every device schedule as a state machine ---- */
/* Device steps (launches) a stream-ordered call of s makes: its program's length. */
uint32_t zc__gpu_steps(const zc_comm *comm, const zc__sched *s);
/* Whether rank p's registered buffers are in this process's address space as they are in p's
 * (p is this rank, or the communicator is in-process): then its records' addresses are used
 * as they are, else the provider maps their handles (and unmaps them at the end). */
bool zc__gpu_one_space(const zc_comm *comm, uint32_t p);
/* A launch's work: on the provider's stream, or (a stream-ordered call) into the step
 * descriptor that zc__gpu_launched then lets the caller's stream run. One step holds one
 * reduction or up to ZC_GPU_MAX_SRCS copies. */
zc_status zc__gpu_reduce(zc_comm *comm, zc__req *r, void *dst, const void *const *srcs,
                         size_t count);
zc_status zc__gpu_copy(zc_comm *comm, zc__req *r, void *dst, const void *src, size_t bytes);
/* Shared with sched_put.c and sched_stage.c. st of a launch on the provider's stream (or a
 * stream-ordered step's go), then the request's event recorded after it: false (the
 * communicator failed with the provider's sentence) unless both went. ZC_OK once that event
 * completed (or the step's kernel-done flag passed it), ZC_IN_PROGRESS before, else the
 * failure (the communicator failed). zc__gpu_failed: fails the communicator with the
 * provider's sentence. */
bool zc__gpu_launched(zc_comm *comm, zc__req *r, zc_status st);
zc_status zc__gpu_waited(zc_comm *comm, zc__req *r);
zc_status zc__gpu_failed(zc_comm *comm, const zc__req *r, zc_status st);

/* ---- sched_put.c: the direct path's schedules (ZC_ALG_PUT_*) ---- */
/* From coll.c's device routing on the direct path: the put algorithm of s. */
void zc__put_route(const zc_comm *comm, zc__sched *s);
/* Peer p's READY (its payload src), read before a put uses it: its recv's address, under
 * which every byte this call puts there (p's whole recv) stays below the top of the address
 * space, and a key of the wire's 32-bit key space; into r->pl[p]. As for zc__place_take, the
 * puts' place in p's memory is p's NIC's to check. False when it failed the communicator. */
bool zc__put_take_ready(zc_comm *comm, zc__req *r, uint32_t p, const uint8_t *src);
/* Device steps (launches) a stream-ordered put call of s makes. */
uint32_t zc__put_steps(const zc_comm *comm, const zc__sched *s);

/* ---- channel.c: moving one message ---- */
/* Payload pointer of message k (0-based within r) to peer for a payload of bytes, or NULL when
 * it cannot be written yet (an earlier message on the channel is unsent, or no credit). */
uint8_t *zc__tx_begin_n(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes);
/* zc__tx_begin_n for a payload of none or over ZC_INLINE_BYTES. */
uint8_t *zc__tx_begin(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k);
/* Fills the header of message k and publishes it with bytes of payload. A wire without room
 * for it now (ZC_AGAIN) gets it again before any later message of the channel (zc__tx_begin,
 * zc__tx_flush): it counts as sent. A wire that cannot post it for good fails the communicator
 * (status and sentence recorded); the status is returned. */
zc_status zc__tx_end(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes);
/* True once the wire has read every put r made from the caller's memory (zc__place.direct
 * marks the peers it put to): the sources may change. */
bool zc__tx_puts_done(zc_comm *comm, const zc__req *r);
/* True once peer has consumed message k of r (its credit came back): the symmetric schedule's
 * send learns so that the receiver stopped reading its buffer (sym.c). */
bool zc__tx_consumed(zc_comm *comm, const zc__req *r, uint32_t peer, uint64_t k);
/* Messages of r already sent to peer / consumed from peer. */
uint64_t zc__tx_done(const zc_comm *comm, const zc__req *r, uint32_t peer);
uint64_t zc__rx_done(const zc_comm *comm, const zc__req *r, uint32_t peer);
/* Payload of message k from peer when it arrived and its fingerprint matches r; NULL when not
 * there yet; on a mismatch r fails (r->status set) and NULL is returned. expect_bytes is the
 * payload size the schedule expects. */
const uint8_t *zc__rx_peek(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k,
                           size_t expect_bytes);
/* Placement: writes bytes from src (registered as mr, or NULL: staged) to the peer's memory at
 * raddr/rkey ahead of message k, which zc__tx_end_placed then publishes with the header only.
 * ZC_AGAIN: the wire had no room, nothing was written; the schedule tries again at its next
 * step. Other failures fail the communicator (as zc__tx_end). */
zc_status zc__tx_put(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, const void *src,
                     const zc_wire_mr *mr, size_t bytes, uint64_t raddr, uint64_t rkey);
zc_status zc__tx_end_placed(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k,
                            size_t bytes);
/* True when the payload of bytes that zc__rx_peek returned was put in place by the sender. */
static inline bool zc__rx_placed(const uint8_t *payload, size_t bytes) {
    size_t at = bytes <= ZC_INLINE_BYTES ? __builtin_offsetof(zc__hdr, inl) : ZC_SLOT_HDR_BYTES;
    return ((const zc__hdr *)(const void *)(payload - at))->placed != 0;
}
#ifdef ZC_TEST_HOOKS
/* Test builds only (configure.py compiles channel.c so for zctest, never for the library): when
 * set, called with every message this process publishes, header filled and payload written,
 * just before the wire posts it; it may change any byte (tests/test_hostile.c plays a hostile
 * rank with it). */
extern void (*zc__test_forge)(const zc_comm *comm, uint32_t peer, zc__hdr *h, uint8_t *payload);
#endif
/* Posts again the messages the wire refused for now (ZC_AGAIN), before the steps of every
 * zc_progress: a message the peer waits for must not wait on this rank's next send. */
void zc__tx_flush(zc_comm *comm);
/* Consumes the message peeked last from peer and returns its credit. */
void zc__rx_consume(zc_comm *comm, zc__req *r, uint32_t peer);

/* ---- fail.c: the failure record (the one place it is written) ---- */
/* One failure as its detector knows it: status, collective sequence, the peer it concerns (-1:
 * none) and a foreign error code (errno, ibv_wc_status, cudaError_t; 0: none). */
typedef struct zc__failure {
    zc_status status;
    int32_t peer;
    int64_t vendor;
    uint64_t seq;
} zc__failure;
/* Fails the communicator. The first failure records status, sentence, peer and vendor code
 * together and reports it to the peers; a later one records nothing (first failure wins).
 * Either way every active request finishes with the communicator's status, which is returned. */
zc_status zc__fail(zc_comm *comm, zc_status status, uint64_t seq, int32_t peer, int64_t vendor,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
zc_status zc__vfail(zc_comm *comm, const zc__failure *f, const char *fmt, va_list ap);
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

/* ---- layout.c ---- */
/* The scratch region of a communicator's arena serves the calls that create communicators,
 * so that no static memory is shared between threads creating different ones: zc_comm_init
 * keeps its bootstrap state (zc__boot, processes only) and ZC_SCRATCH_RANK_BYTES per rank of
 * hellos there; zc_comm_split and zc_comm_split_inproc use their parent's (per rank: colors,
 * keys, sizes or arenas and communicators; then one address blob of the parent's size), an
 * in-process group its rank 0's (per rank: windows). */
#define ZC_SCRATCH_RANK_BYTES 48u
/* Per rank, processes only: init's verdict (comm.c's zc_outcome: status and sentence), after
 * the bootstrap state and the hellos. */
#define ZC_SCRATCH_VERDICT_BYTES 192u
/* The regions of an arena, in carve order. */
typedef enum zc__region {
    ZC_R_COMM = 0,   /* struct zc_comm */
    ZC_R_WIRE_STATE, /* the wire's state (the largest candidate wire's) */
    ZC_R_ADDRS,      /* [nranks] address blobs */
    ZC_R_GROUP,      /* [nranks] zc_comm * (in-process) */
    ZC_R_CHANS,      /* [ZC_WIRE_LANES * nranks] zc__chan */
    ZC_R_REQS,       /* [max_requests] zc__req */
    ZC_R_TX_BASES,   /* [max_requests][nranks] uint64_t */
    ZC_R_RX_BASES,   /* [max_requests][nranks] uint64_t */
    ZC_R_PLACES,     /* [max_requests][nranks] zc__place */
    ZC_R_ACTIVE,     /* [max_requests] uint32_t */
    ZC_R_PLANS,      /* [max_plans] zc__plan */
    ZC_R_MEMS,       /* [max_mems] zc__mem_entry */
    ZC_R_GPU,        /* struct zc__gpu: the device state (empty without a provider) */
    ZC_R_GPU_STATE,  /* the gpu provider's state */
    ZC_R_GPU_RECS,   /* [max_mems][nranks] zc_gpu_ipc */
    ZC_R_GPU_MAPPED, /* [max_mems][nranks] uint8_t * */
    ZC_R_GPU_PTRS,   /* [max_requests][2 * nranks] uint8_t * (zc__req.ptrs) */
    ZC_R_GPU_BINDS,  /* [gpu_stream_slots] zc__bind */
    ZC_R_GPU_PEERS,  /* [nranks] zc__gpu_peer: every rank's landing (the direct path) */
    ZC_R_STAGE,      /* struct zc__stage: the staged path's state (empty without a provider) */
    ZC_R_STAGE_REQS, /* [max_requests] zc__stage_req (zc__req.stg) */
    ZC_R_STAGE_P2P,  /* [max_requests][slot_bytes] send/recv's staging */
    ZC_R_STAGE_BUF,  /* [gpu_stage_bytes] the collectives' staging */
    ZC_R_SCRATCH,    /* init and split time (ZC_SCRATCH_RANK_BYTES above) */
    ZC_R_WINDOW,     /* in-process: this rank's inbound window; else empty */
    ZC_R_COUNT_
} zc__region;
typedef struct zc__arena_map {
    size_t at[ZC_R_COUNT_];    /* offset of each region, 64-byte aligned */
    size_t bytes[ZC_R_COUNT_]; /* its size */
    size_t addr_bytes; /* bytes of one rank's address blob (the largest candidate wire's) */
    size_t total;      /* where the last region ends, aligned: zc_comm_arena_bytes */
    zc_wire_geom geom;
} zc__arena_map;
/* The one function that decides the arena's regions; false if cfg is invalid. */
bool zc__layout(const zc_config *cfg, zc__arena_map *out);
const zc_wire_ops *zc__wire_for(const zc_config *cfg);
/* The gpu provider cfg asks for; NULL: none (gpu_device -2, or one this build lacks). */
const zc_gpu_ops *zc__gpu_provider(const zc_config *cfg);
zc_gpu_geom zc__gpu_geometry(const zc_config *cfg);
/* Why cfg picks no gpu provider (zc__gpu_provider gave NULL). */
const char *zc__gpu_absent(const zc_config *cfg);

/* Blocks of count elements in the send and recv buffers of a call of kind at rank (0: not
 * used there); the host checks, the device routing, the symmetric schedule and the checks of
 * what peers say about their buffers read one rule. zc__extents: at this rank. */
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
