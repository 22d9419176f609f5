/* device.h: the device-memory state and the device families' functions: CUDA registrations'
 * states, stream slots, the landing records, struct zc__gpu (gpu_mem.c opens it), the staged
 * path's state (sched_stage.c), and what gpu_mem.c, stream.c, sched_stage.c, sched_gpu.c and
 * sched_put.c offer each other and the files above them. Only the files that touch device
 * memory include it; the host files see none of it. */
#ifndef ZC_CORE_DEVICE_H
#define ZC_CORE_DEVICE_H

#include "engine.h"

/* ---- device memory: the state gpu_mem.c, stream.c, progress.c and sched_gpu.c share ---- */
#define ZC_GPU_NONE 0xffffffffu /* "no buffer" registration number */


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

/* The path device calls take (ZC_GPU_PATH_IPC, STAGED, DIRECT), decided at init (gpu_mem.c);
 * 0 (ZC_GPU_PATH_AUTO) where the communicator has no usable device. */
static inline uint32_t zc__gpu_path_now(const zc_comm *comm) {
    return comm->gpu ? comm->gpu->path : 0u;
}

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
/* Whether a communicator on wire with cfg tries the direct path: the wire writes into
 * registered memory (transport_ib) and cfg->gpu_path is auto or direct. */
bool zc__gpu_tries_direct(const zc_wire_ops *wire, const zc_config *cfg);
/* Bytes of device scratch the provider allocates at init for cfg: gpu_scratch_bytes, or on the
 * direct path (direct) the landing: a collective area per rank, then send/recv's slots. */
uint64_t zc__gpu_scratch_bytes(const zc_config *cfg, bool direct);
/* Whether comm's split joins the gathers of device records (its own path gathers them, or a
 * child's may: the children of a two-wire communicator); the same on every rank. */
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

/* ---- sched_stage.c: device-memory calls staged through host memory ---- */
/* From gpu_mem.c once the provider is up and the path decided (comm.c carved the staging's
 * regions). */
void zc__stage_open(zc_comm *comm, const zc_gpu_ops *ops, void *gstate);
/* From coll.c's device routing for a device-memory call the staged path carries:
 * ZC_ALG_STAGED, or ZC_LIMIT (with a sentence) when the staging cannot hold one element of each
 * block. */
zc_status zc__stage_route(zc_comm *comm, zc__sched *s);

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

#endif
