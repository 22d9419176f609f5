/* req.h: the request model, shared through engine.h by every core file: a collective's kind
 * and algorithm, the validated call (zc__sched), the request (zc__req) and its end, placement
 * per peer, plans. */
#ifndef ZC_CORE_REQ_H
#define ZC_CORE_REQ_H

#include "config.h"
#include "wire.h"
#include "zcoll.h"

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
    ZC_ALG_RD,         /* all_reduce: recursive doubling over the canonical tree's virtual
                        * ranks, one accumulator chunk at a time */
    ZC_ALG_BRUCK,      /* all_gather: Bruck's ceil(log2 n) rounds at distances 1, 2, 4, ...;
                        * all_to_all: Bruck's rounds, blocks whose index has bit k set in round k */
    ZC_ALG_BINOMIAL,   /* gather, scatter: a binomial tree rooted at the root, each rank's
                        * subtree's blocks in one stream through its parent */
    ZC_ALG_RH,         /* reduce_scatter: recursive halving over the canonical tree's virtual
                        * ranks at distances 1, 2, 4, ..., one column at a time */
    ZC_ALG_RAB,        /* all_reduce (large): recursive halving, then recursive-doubling
                        * all-gather of the reduced blocks (Rabenseifner) */
    ZC_ALG_VTREE,      /* reduce: the canonical tree's own steps as a binomial tree toward the
                        * root's virtual rank, one accumulator chunk at a time */
    ZC_ALG_SCAG,       /* broadcast (large): binomial scatter of the n balanced blocks, then
                        * Bruck's all-gather of them (van de Geijn) */
    ZC_ALG_HRD,        /* all_reduce (small) and barrier over blocks of ranks that share a
                        * place: the canonical tree in each block toward its first rank,
                        * recursive doubling among those, the result back down the block's
                        * tree (a barrier: one empty message per link) */
    ZC_ALG_SYM,        /* buffers in the symmetric region: single copy, peers' buffers read
                        * and written directly (sym.c) */
    ZC_ALG_RELAY,      /* send/recv in overlay mode to a rank without a connection: over the
                        * relay lane, forwarded hop by hop by the ranks between (relay.c) */
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
                         * into every reducer's landing; reducers reduce all n in the rank tree */
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
    uint8_t dtype;       /* zc_dtype */
    uint8_t op;          /* zc_op (0 where there is none) */
    uint8_t alg;         /* zc__alg */
    uint32_t root;       /* root, or the peer of send/recv; 0 where there is none (these
                          * first 8 bytes in the order of the message header's: channel.c) */
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

/* A request's first message numbers on one connection's lane, sending and receiving: side by
 * side, so that a step with a peer it both sends to and receives from reads one line. */
typedef struct zc__base {
    uint64_t tx, rx;
} zc__base;

typedef struct zc__req {
    uint32_t state;      /* zc__req_state */
    uint32_t gen;        /* bumped at every reuse: stale zc_req handles are refused */
    int32_t status;      /* ZC_IN_PROGRESS while active, then the result */
    uint32_t lane;       /* 0 collectives, 1 send/recv, 2 relayed send/recv (relay.c) */
    int32_t plan;        /* plan slot that started it, -1 for none, ZC_PLAN_INTERNAL */
    uint32_t held;       /* 1: a stream-ordered call whose stream has not reached it (its start
                          * flag is down): not stepped, no deadline; written by progress.c only */
    uint64_t seq;        /* collective sequence number (p2p: the pair's op number) */
    /* When progress first looked at the clock after issue (0: not yet), the deadline (start
     * + timeout; 0: not stamped yet) and when it last saw the request move. */
    uint64_t start_ns, deadline_ns, moved_ns;
    uint32_t moved;      /* 1: moved since progress last read the clock */
    uint32_t place;      /* ZC_PLACE_*: this call has streams written in place (sched.c) */
    uint32_t line;       /* 1: every message of the call is one line, and it runs its
                          * algorithm's line step (sched.c); set at issue */
    uint32_t pad_;
    zc__sched s;
    uint64_t tx_left, rx_left; /* messages still to send / receive, all peers together */
    uint64_t a, b;       /* host schedule counters (which: see sched.c) */
    zc__base *base;      /* [nconn] first message numbers on each connection's lane */
    struct zc__place *pl; /* [nconn] streams written in place, per connection (sched.c) */
    uint8_t *acc;        /* zc__acc_slice bytes: a log-depth algorithm's partial (sched.c);
                          * NULL when the configuration never picks one */
    /* Device schedules (sched_gpu.c, sched_put.c). */
    uint32_t phase;      /* zc__gphase, or sched_put.c's phases; host schedules: the stage of
                          * the hierarchical all_reduce (sched.c's ZC_HRD_*) */
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

#endif
