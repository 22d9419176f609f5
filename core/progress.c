/* progress.c: the request pool and the polling engine: issue (reserve channel numbers, stamp
 * deadline; host and device schedules alike), zc_progress (one budget for the stream slots'
 * starts and ends and the bounded steps of active requests in issue order; deadlines, peer
 * liveness, failure reports from peers, yielding when idle), zc_test (reads a request's status;
 * a finished request's slot is freed there, as the API says) and zc_wait.
 * Nothing here blocks except zc_wait, which ends at the request's deadline. */
#include "device.h"
#include "platform.h"
#include "text.h"

#define ZC_HANDLE_MAGIC ((uint64_t)ZC_REQ_MAGIC << 48)

static void zc_check_alarm(zc_comm *comm);

static zc__req *zc_free_slot(zc_comm *comm, uint32_t *index) {
    for (uint32_t i = 0; i < comm->cfg.max_requests; i++)
        if (comm->reqs[i].state == ZC_REQ_FREE) {
            *index = i;
            return &comm->reqs[i];
        }
    return 0;
}

/* Every algorithm's family: one row each. A new algorithm is a row here, with its code in its
 * family's file (sched.c's host algorithms have a table of their own). */
static const zc__family *const zc_alg_family[ZC_ALG_COUNT_] = {
    [ZC_ALG_LOCAL] = &zc__fam_host,     [ZC_ALG_ONESHOT] = &zc__fam_host,
    [ZC_ALG_RSAG] = &zc__fam_host,      [ZC_ALG_DIRECT] = &zc__fam_host,
    [ZC_ALG_RSGATHER] = &zc__fam_host,  [ZC_ALG_TREE] = &zc__fam_host,
    [ZC_ALG_CHAIN] = &zc__fam_host,     [ZC_ALG_DISSEM] = &zc__fam_host,
    [ZC_ALG_P2P] = &zc__fam_host,       [ZC_ALG_RD] = &zc__fam_host,
    [ZC_ALG_BRUCK] = &zc__fam_host,     [ZC_ALG_BINOMIAL] = &zc__fam_host,
    [ZC_ALG_RH] = &zc__fam_host,        [ZC_ALG_RAB] = &zc__fam_host,
    [ZC_ALG_VTREE] = &zc__fam_host,     [ZC_ALG_SCAG] = &zc__fam_host,
    [ZC_ALG_HRD] = &zc__fam_host,
    [ZC_ALG_SYM] = &zc__fam_sym,        [ZC_ALG_RELAY] = &zc__fam_relay,
    [ZC_ALG_STAGED] = &zc__fam_staged,  [ZC_ALG_GPU_ONESHOT] = &zc__fam_ipc,
    [ZC_ALG_GPU_RSAG] = &zc__fam_ipc,   [ZC_ALG_GPU_DIRECT] = &zc__fam_ipc,
    [ZC_ALG_GPU_REGISTER] = &zc__fam_ipc, [ZC_ALG_PUT_ONESHOT] = &zc__fam_direct,
    [ZC_ALG_PUT_RSAG] = &zc__fam_direct, [ZC_ALG_PUT_COPY] = &zc__fam_direct,
    [ZC_ALG_PUT_P2P] = &zc__fam_direct,
};

static inline const zc__family *zc_family(uint32_t alg) {
    ZC_ASSERT(alg < ZC_ALG_COUNT_ && zc_alg_family[alg]);
    return zc_alg_family[alg];
}

const zc__family *zc__family_of(uint32_t alg) { return zc_family(alg); }

/* Reserves, on its lane's channel with peer, the tx messages r sends to peer and the rx it
 * receives from it (zc__link_fn over the family's links): a ready message first where a stream
 * is written in place (sched.c), then the schedule's. With a memo (not NULL), it also records
 * the reservation there while it is one a memo can hold (else the memo's ok is cleared). */
typedef struct zc_resv {
    zc_comm *comm;
    zc__req *r;
    zc__links_memo *memo;
} zc_resv;

static inline void zc_reserve_chan(zc_comm *comm, zc__req *r, uint32_t i, uint64_t tx,
                                   uint64_t rx) {
    zc__chan *c = &comm->chans[(size_t)r->lane * comm->nconn + i];
    r->base[i].tx = c->tx_reserved;
    r->base[i].rx = c->rx_reserved;
    c->tx_reserved += tx;
    c->rx_reserved += rx;
    r->tx_left += tx;
    r->rx_left += rx;
}

static void zc_reserve_peer(void *ctx, uint32_t p, uint64_t tx, uint64_t rx) {
    zc_comm *comm = ((zc_resv *)ctx)->comm;
    zc__req *r = ((zc_resv *)ctx)->r;
    zc__links_memo *memo = ((zc_resv *)ctx)->memo;
    ZC_ASSERT(p < comm->nranks && p != comm->rank);
    uint32_t i = zc__ci(comm, p);
    ZC_ASSERT(i != ZC_NO_CONN); /* a call names only connected peers (zc__choose) */
    uint32_t ready_tx = r->place ? r->pl[i].ready_out : 0u;
    uint32_t ready_rx = r->place ? r->pl[i].ready_in : 0u;
    zc_reserve_chan(comm, r, i, tx + ready_tx, rx + ready_rx);
    r->base[i].tx += ready_tx;
    r->base[i].rx += ready_rx;
    if (!memo || !memo->ok) return;
    uint64_t bit = i < 64u ? 1ull << i : 0u;
    if (!bit || tx > 1u || rx > 1u || ((memo->tx | memo->rx) & bit)) {
        memo->ok = 0;
        return;
    }
    memo->tx |= tx ? bit : 0u;
    memo->rx |= rx ? bit : 0u;
}

/* The call word (kind, dtype, op, alg, root) that opens a schedule. */
static uint64_t zc_sched_word(const zc__sched *s) {
    uint64_t w;
    __builtin_memcpy(&w, s, sizeof w);
    return w;
}

/* Reserves the message numbers r will use on the channels of its lane with the peers it
 * exchanges messages with. A host call with nothing written in place whose schedule's links
 * answered as its kind's memo says (the same call word, count and chunk: links are a function
 * of the schedule alone) takes that answer again without asking them. */
static void zc_reserve(zc_comm *comm, zc__req *r, const zc__family *f) {
    r->tx_left = r->rx_left = 0;
    r->place = 0;
    if ((f->flags & ZC_FAM_PLACE) && comm->put_min && r->s.count * r->s.esize >= comm->put_min)
        zc__place_plan(comm, r);
    zc__links_memo *memo = f == &zc__fam_host && !r->place && r->s.kind <= ZC_K_BARRIER
                               ? &comm->links[r->s.kind] : 0;
    uint64_t word = zc_sched_word(&r->s);
    if (memo && memo->ok && memo->word == word && memo->count == r->s.count &&
        memo->chunk == r->s.chunk) {
        for (uint64_t tx = memo->tx, rx = memo->rx, m = tx | rx; m; m &= m - 1u) {
            uint32_t i = (uint32_t)__builtin_ctzll(m);
            zc_reserve_chan(comm, r, i, (tx >> i) & 1u, (rx >> i) & 1u);
        }
        return;
    }
    if (memo) *memo = (zc__links_memo){word, r->s.count, 0, 0, r->s.chunk, 1};
    zc_resv v = {comm, r, memo};
    f->links(comm, &r->s, zc_reserve_peer, &v);
}

/* A stream-ordered call's gate (stream slot r->bind - 1): open once its stream wrote the start
 * flag; then its program's steps count from 0 and its deadline starts from progress's next
 * clock read. One unit of *budget. */
static bool zc_gate(zc_comm *comm, zc__req *r, uint32_t *budget) {
    struct zc__gpu *g = comm->gpu;
    uint32_t *start = &g->flags[ZC_BIND_FLAGS * (r->bind - 1u) + ZC_BF_START];
    if (__atomic_load_n(start, __ATOMIC_ACQUIRE) != g->binds[r->bind - 1u].tick) return false;
    __atomic_store_n(start, 0u, __ATOMIC_RELAXED);
    r->held = 0;
    r->deadline_ns = 0;
    r->step = 0;
    r->fill = 0;
    (*budget)--;
    return true;
}

/* Moves r within *budget through its family; true once it finished, every message it reserved
 * moved (paired with zc_reserve), its status ZC_OK. */
static inline __attribute__((always_inline)) bool zc_step(zc_comm *comm, zc__req *r,
                                                          uint32_t *budget) {
    if (r->held && !zc_gate(comm, r, budget)) return false;
    /* zc__issue found r's family (zc__family_of checks the table there); a one-line call
     * (the host family's) goes to its line step straight. */
    if (!*budget) return false;
    if (!(r->line ? zc__line_step(comm, r, budget)
                  : zc_alg_family[r->s.alg]->step(comm, r, budget)))
        return false;
    ZC_ASSERT(r->tx_left == 0 && r->rx_left == 0);
    r->status = ZC_OK;
    return true;
}

/* A receive's turn to reserve its messages (r->wild set; every receive issued before it has
 * reserved). A named peer's reserves at once. One from any source takes the lowest rank whose
 * next message on the send/recv lane that no receive reserved has arrived, and becomes a
 * receive from it: the symmetric region's single copy if its buffers fit, the pair's next
 * receive number, the matched peer in the caller's *source. False: nothing arrived yet. */
static bool zc_resolve(zc_comm *comm, zc__req *r) {
    uint32_t p = r->s.root;
    if (r->wild == ZC_WILD_ANY) {
        uint32_t i = 0; /* the lowest rank among the connections, which are in rank order */
        for (; i < comm->nconn; i++) {
            p = comm->conn_peer[i];
            uint64_t m = comm->chans[(size_t)comm->nconn + i].rx_reserved;
            if (p != comm->rank &&
                comm->wire->rx_slot(comm->wire_state, 1u, p,
                                    (uint32_t)(m & comm->slot_mask), m + 1u, 0))
                break;
        }
        /* Overlay mode: a relayed message from a lower rank goes first (relay.c). */
        uint32_t q = comm->relay ? zc__relay_any(comm) : UINT32_MAX;
        if (q != UINT32_MAX && (i == comm->nconn || q < p)) {
            r->s.root = q;
            r->s.alg = ZC_ALG_RELAY;
            r->lane = ZC_LANE_RELAY;
            r->a = r->line = 0;
            if (r->source) *r->source = q;
            r->wild = ZC_WILD_NONE;
            comm->recv_waiting--;
            return true;
        }
        if (i == comm->nconn) return false;
        r->s.root = p;
        if (comm->cfg.sym_bytes && zc__sym_fits(comm, &r->s)) r->s.alg = ZC_ALG_SYM;
        if (r->source) *r->source = p;
    } else if (r->s.alg == ZC_ALG_RELAY) { /* its messages are matched as they arrive */
        r->wild = ZC_WILD_NONE;
        comm->recv_waiting--;
        return true;
    }
    r->seq = comm->chans[(size_t)comm->nconn + zc__ci(comm, p)].p2p_recvd++;
    zc_reserve(comm, r, zc__family_of(r->s.alg));
    r->wild = ZC_WILD_NONE;
    comm->recv_waiting--;
    return true;
}

/* Whether the pass (or issue's first step) that just ran left the one call in flight, of the
 * host family, waiting for exactly one message and nothing else (no send held back, no message
 * the wire refused, no budget run out, no relay or stream slot to serve), on a wire whose slots
 * this rank reads in place (channel.c's zc_wait_for named it). Nothing but that message's
 * post can give such a rank more to do (or the clock: a deadline). */
static bool zc_one_wait(const zc_comm *comm) {
    if (comm->park_waits != 1u || !comm->wire->rx_mem || comm->nreqs_active != 1u ||
        comm->unposted || comm->relay || comm->failed || (comm->gpu && comm->gpu->binds_live))
        return false;
    const zc__req *r = &comm->reqs[comm->active[0]];
    return zc_alg_family[r->s.alg] == &zc__fam_host && !r->wild && !r->held && !r->place;
}

/* After issue's first step (done: it finished the call; budget: what it left): whether the
 * rank has nothing to do until a message is posted to it (no call left in flight and no relay
 * lane to serve, or zc_one_wait). */
__attribute__((noinline)) static bool zc_settled(zc_comm *comm, bool done, uint32_t budget) {
    if (done) return comm->nreqs_active == 0 && !comm->relay;
    return budget && zc_one_wait(comm);
}

/* A host call whose every stream is one message takes its first step at issue, as an eager
 * send does: its messages leave before the caller's first poll, and a call with nothing to
 * receive (a non-root's reduce or gather, a send) finishes here, its slot waiting for zc_test.
 * r is the last active request. A peer's failure report is read first, as zc_progress does;
 * a failure (reported, or of the step) finished r with the communicator. The step names its
 * waits in a group with wake bits only (name_after 0); true: the rank has nothing to do until
 * a message is posted to it (zc_one_wait, or no call left in flight). */
static bool zc_eager(zc_comm *comm, zc__req *r) {
    uint32_t budget = ZC_PROGRESS_BUDGET;
    zc_check_alarm(comm);
    if (comm->failed) return false;
    comm->park_waits = comm->name_after ? 2u : 0u; /* 2: not named */
    bool done = zc_step(comm, r, &budget);
    if (comm->failed) return false;
    if (budget != ZC_PROGRESS_BUDGET) r->moved = 1;
    if (done) {
        zc__req_end(r, ZC_OK);
        comm->nreqs_active--;
    }
    return comm->group_wake && zc_settled(comm, done, budget);
}

zc_status zc__issue(zc_comm *comm, const zc__sched *s, int32_t plan, uint32_t bind,
                    zc_req *req) {
    uint32_t index = 0;
    if (comm->failed) return (zc_status)comm->failed;
    zc__req *r = zc_free_slot(comm, &index);
    if (!r)
        return zc__error(comm, ZC_AGAIN, "%s: all %u request slots are in flight; progress and "
                         "finish one first", zc__kind_name(s->kind), comm->cfg.max_requests);
    const zc__family *f = zc_family(s->alg);
    /* A receive from any source reserves once matched, and every receive after it waits
     * for its turn (zc_resolve); device receives cannot wait so. */
    bool wait_turn = s->kind == ZC_K_RECV && s->alg != ZC_ALG_LOCAL &&
                     (s->root == ZC_ANY_SOURCE || comm->recv_waiting);
    if (wait_turn && zc__device_alg(s->alg))
        return zc__error(comm, ZC_UNSUPPORTED, "zc_recv: a receive into device memory cannot "
                         "be issued while a receive from any source is not matched yet");
    r->state = ZC_REQ_ACTIVE;
    r->status = ZC_IN_PROGRESS;
    r->s = *s;
    r->plan = plan;
    r->a = r->b = 0;
    r->lane = s->alg == ZC_ALG_RELAY ? ZC_LANE_RELAY
              : (s->kind == ZC_K_SEND || s->kind == ZC_K_RECV) ? 1u : 0u;
    r->source = 0;
    r->wild = wait_turn ? (s->root == ZC_ANY_SOURCE ? ZC_WILD_ANY : ZC_WILD_AFTER) : ZC_WILD_NONE;
    if (wait_turn) {
        comm->recv_waiting++;
        r->seq = 0; /* the pair's receive number, taken with its turn */
        r->tx_left = r->rx_left = 0;
        r->place = 0;
    } else if (s->root == ZC_ANY_SOURCE && r->lane == 1) { /* count 0: no pair, no message */
        r->seq = 0;
    } else if (r->lane == 0) {
        r->seq = comm->seq++;
    } else if (r->lane == ZC_LANE_RELAY || zc__ci(comm, s->root) == ZC_NO_CONN) {
        r->seq = 0; /* relayed (or count 0 to such a rank): matched in arrival order */
    } else {
        zc__chan *c = &comm->chans[(size_t)comm->nconn + zc__ci(comm, s->root)];
        r->seq = s->kind == ZC_K_SEND ? c->p2p_sent++ : c->p2p_recvd++;
    }
    if (!wait_turn) zc_reserve(comm, r, f);
    r->start_ns = r->moved_ns = r->deadline_ns = 0; /* stamped by progress's next clock read */
    r->moved = 0;
    r->bind = bind;
    r->held = bind != 0; /* gated by its stream slot's start flag (zc_gate) */
    r->line = 0;         /* the chunk streams, unless the host family's begin says lines */
    comm->parked = 0;    /* a pass looks at the new call */
    if (f->begin) f->begin(comm, r);
    comm->active[comm->nreqs_active++] = index;
    req->opaque_[0] = ZC_HANDLE_MAGIC | index;
    req->opaque_[1] = r->gen;
    req->opaque_[2] = (uint64_t)(uintptr_t)comm;
    req->opaque_[3] = r->seq;
    bool settled = (f->flags & ZC_FAM_EAGER) && s->count <= s->chunk && !wait_turn &&
                   zc_eager(comm, r);
    /* and a walk visits, unless the first step left the rank waiting for a post alone */
    if (comm->group_wake && !settled) zc_wire_wake(comm->group_wake, comm->rank);
    return ZC_OK;
}

static void zc_retire(zc_comm *comm, uint32_t pos) {
    for (uint32_t i = pos; i + 1 < comm->nreqs_active; i++) comm->active[i] = comm->active[i + 1];
    comm->nreqs_active--;
}

/* Whether a failure report's status byte names a failure of a communicator: a status of the
 * map below 0, but ZC_AGAIN (a call's back-pressure, never a communicator's state). */
static bool zc_alarm_status(uint64_t word, zc_status *st) {
    uint32_t code = (uint32_t)(word >> 56);
    *st = (zc_status)(-(int32_t)code);
    return code != 0 && *st != ZC_AGAIN && !zc__streq(zc_status_name(*st), "ZC_UNKNOWN_STATUS");
}

/* The failure a peer reported into our window (word: its alarm word), off the hot path. Any
 * peer may write the word, so every value is decoded as untrusted: a report that names no
 * failure status, a rank outside the communicator, or this rank (which has not failed, or it
 * would not be reading) fails the communicator as a broken peer would, never an assertion. */
__attribute__((noinline, cold)) static void zc_alarmed(zc_comm *comm, uint64_t word) {
    zc_status st;
    uint32_t who = (uint32_t)(word >> 32) & 0xffffffu;
    uint64_t seq = word & 0xffffffffu;
    if (!zc_alarm_status(word, &st) || who >= comm->nranks || who == comm->rank) {
        zc__fail(comm, ZC_MISMATCH, comm->seq, -1, 0, "rank %u's failure-report word holds "
                 "0x%llx, which is no report (status byte %u, rank %u of %u): a peer wrote it "
                 "out of turn; this communicator has failed", comm->rank,
                 (unsigned long long)word, (unsigned)(word >> 56), who, comm->nranks);
        return;
    }
    char mine[112];
    zc__fmt(mine, sizeof mine, "rank %u has no call of that sequence in flight", comm->rank);
    for (uint32_t i = 0; i < comm->nreqs_active; i++) {
        const zc__req *r = &comm->reqs[comm->active[i]];
        if (r->lane != 0 || (r->seq & 0xffffffffu) != seq) continue;
        size_t n = zc__fmt(mine, sizeof mine, "where rank %u called ", comm->rank);
        zc__describe(mine + n, sizeof mine - n, r->s.kind, r->s.count, r->s.dtype, r->s.op,
                     r->s.root);
    }
    /* The whole communicator fails, older calls in flight included: a peer that failed stops
     * serving every call, so finishing them could only end in a timeout. */
    zc__fail_relayed(comm, st, seq, who, "rank %u detected %s at sequence %llu (%s); this "
                     "communicator has failed", who, zc_status_name(st), (unsigned long long)seq,
                     mine);
}

/* A failure a peer reported into our window, if any. */
static void zc_check_alarm(zc_comm *comm) {
    uint64_t word = comm->wire->alarmed(comm->wire_state);
    if (word) zc_alarmed(comm, word);
}

/* Whether r can no longer need peer p, which closed cleanly (zc_comm_fini with every call
 * finished) after its first seqs collectives: a collective of a lower sequence had finished
 * there, so whatever p sends for it is in this rank's rings already and it takes nothing more;
 * a send or recv with another (or any) peer does not wait on p. A relayed call may route
 * through p: still needed. */
static bool zc_done_with(const zc__req *r, uint32_t p, uint64_t seqs) {
    if (r->lane == 0) return r->seq < seqs;
    return r->lane == 1 && r->s.root != p;
}

/* The liveness check of r, stalled for ZC_LIVENESS_NS: true when it failed the communicator.
 * A rank found gone is first only suspected: the clock is read after a step pass, and a peer
 * may have sent its last message and exited while this rank was descheduled between the two,
 * so r fails only if it is still stalled at a later check (a step pass ran between, and did
 * not move it: a moved request restarts its stall clock and never gets here). A peer that
 * closed cleanly after finishing what r needs of it is not a loss for r. */
static bool zc_peer_gone(zc_comm *comm, zc__req *r, uint64_t now) {
    comm->liveness_ns = now;
    for (uint32_t k = 0; k < comm->nconn; k++) { /* the ranks the wire reaches */
        char why[128];
        uint32_t p = comm->conn_peer[k];
        if (p == comm->rank ||
            comm->wire->peer_alive(comm->wire_state, p, why, sizeof why) == ZC_OK)
            continue;
        uint64_t closed = comm->wire->closed_after
                              ? comm->wire->closed_after(comm->wire_state, p) : 0;
        if (closed && zc_done_with(r, p, closed - 1u)) continue;
        if (closed)
            zc__fmt(why, sizeof why, "it closed the communicator (zc_comm_fini) after %llu "
                    "collectives", (unsigned long long)(closed - 1u));
        if (comm->suspect != p + 1u || now == comm->suspect_ns || r->moved_ns > comm->suspect_ns) {
            if (now != comm->suspect_ns) { /* not a second request of the same check */
                comm->suspect = p + 1u;
                comm->suspect_ns = now;
            }
            return false;
        }
        zc__fail(comm, ZC_PEER_LOST, r->seq, (int32_t)p, 0, "%s sequence %llu: rank %u is gone "
                 "(%s)", zc__kind_name(r->s.kind), (unsigned long long)r->seq, p, why);
        return true;
    }
    comm->suspect = 0;
    return false;
}

static void zc_check_deadlines(zc_comm *comm, uint64_t now) {
    for (uint32_t i = 0; i < comm->nreqs_active; i++) {
        zc__req *r = &comm->reqs[comm->active[i]];
        if (r->held) continue; /* a stream-ordered call its stream has not reached: no clock */
        if (!r->deadline_ns) { /* first clock read since issue: the deadline starts now */
            r->start_ns = r->moved_ns = now;
            r->deadline_ns = zc__deadline_after(now, comm->cfg.timeout_ns);
        }
        if (r->moved) {
            r->moved_ns = now;
            r->moved = 0;
        }
        if (now > r->deadline_ns && r->wild) {
            zc__fail(comm, ZC_TIMED_OUT, r->seq, -1, 0, "zc_recv %s timed out after %llu ms: "
                     "no peer sent it a message", r->wild == ZC_WILD_ANY ? "from any source" :
                     "waiting behind a receive from any source",
                     (unsigned long long)((now - r->start_ns) / 1000000u));
            return;
        }
        if (now > r->deadline_ns) {
            zc__fail(comm, ZC_TIMED_OUT, r->seq, -1, 0,
                     "%s sequence %llu timed out after %llu ms (%llu messages unsent, %llu "
                     "not received): a peer did not join or stalled",
                     zc__kind_name(r->s.kind), (unsigned long long)r->seq,
                     (unsigned long long)((now - r->start_ns) / 1000000u),
                     (unsigned long long)r->tx_left, (unsigned long long)r->rx_left);
            return;
        }
        bool due = comm->suspect || now - comm->liveness_ns > ZC_LIVENESS_NS;
        if (now - r->moved_ns > ZC_LIVENESS_NS && due && zc_peer_gone(comm, r, now)) return;
    }
}

/* ---- stream slots (stream.c arms them) ---- */

static uint32_t *zc_bflag(struct zc__gpu *g, uint32_t i, uint32_t which) {
    return &g->flags[ZC_BIND_FLAGS * i + which];
}

void zc__bind_release(zc_comm *comm, uint32_t i) {
    struct zc__gpu *g = comm->gpu;
    zc__bind *b = &g->binds[i];
    zc_gpu_desc *d = g->ops->desc(g->state, i);
    /* A step still to run finds nothing to do; one running already read its descriptor. */
    __atomic_store_n(&d->mode, ZC_GPU_STEP_NONE, __ATOMIC_RELAXED);
    __atomic_store_n(zc_bflag(g, i, ZC_BF_GO), b->go + b->steps, __ATOMIC_RELEASE);
    __atomic_store_n(zc_bflag(g, i, ZC_BF_DONE), b->tick, __ATOMIC_RELEASE);
    b->state = ZC_BIND_DRAINING;
}

zc_status zc__bind_issue(zc_comm *comm, uint32_t i) {
    struct zc__gpu *g = comm->gpu;
    zc__bind *b = &g->binds[i];
    zc_req req;
    ZC_ASSERT(b->state == ZC_BIND_ARMED);
    zc_status st = zc__issue(comm, &b->s, ZC_PLAN_INTERNAL, i + 1u, &req);
    if (st != ZC_OK) return st;
    const zc__req *r = zc__lookup(comm, &req);
    b->state = ZC_BIND_RUNNING;
    b->slot = (uint32_t)(r - comm->reqs);
    b->gen = r->gen;
    return ZC_OK;
}

/* A draining slot whose stream wrote its fin flag serves again: a graph-captured one armed for
 * the next replay, any other free. */
static bool zc_bind_drained(struct zc__gpu *g, uint32_t i) {
    zc__bind *b = &g->binds[i];
    if (__atomic_load_n(zc_bflag(g, i, ZC_BF_FIN), __ATOMIC_ACQUIRE) != b->tick) return false;
    b->state = b->persistent ? ZC_BIND_ARMED : ZC_BIND_FREE;
    if (b->state == ZC_BIND_FREE) g->binds_live--;
    return true;
}

/* An armed slot whose stream wrote its start flag is issued (and when that fails for good, on
 * a failed communicator, released at once); a running slot whose request ended (an internal
 * request: its slot was freed, the generation moved on) is released; a draining one frees when
 * its stream is past it. Also after a failure: a caller's stream must never hang. One unit of
 * *budget for each change. */
static void zc_poll_binds(zc_comm *comm, struct zc__gpu *g, uint32_t *budget) {
    for (uint32_t i = 0; i < g->nbinds && *budget; i++) {
        zc__bind *b = &g->binds[i];
        if (b->state == ZC_BIND_DRAINING && !zc_bind_drained(g, i)) continue;
        if (b->state == ZC_BIND_ARMED) {
            if (__atomic_load_n(zc_bflag(g, i, ZC_BF_START), __ATOMIC_ACQUIRE) != b->tick)
                continue;
            zc_status st = zc__bind_issue(comm, i);
            if (st == ZC_AGAIN) continue; /* no request slot now: the flag stays up */
            if (st != ZC_OK) zc__bind_release(comm, i);
        } else if (b->state == ZC_BIND_RUNNING && comm->reqs[b->slot].gen != b->gen) {
            zc__bind_release(comm, i);
        } else if (b->state != ZC_BIND_FREE) {
            continue;
        }
        (*budget)--;
    }
}

zc_status zc__binds_fini(zc_comm *comm) {
    struct zc__gpu *g = comm->gpu;
    uint32_t busy = 0, first = 0;
    if (g && g->ops->lost(g->state)) return ZC_OK; /* no stream will run again */
    for (uint32_t i = 0; g && i < g->nbinds; i++) {
        zc__bind *b = &g->binds[i];
        bool waiting = b->state == ZC_BIND_RUNNING ||
                       (b->state == ZC_BIND_ARMED && !b->persistent);
        if (waiting && comm->failed) zc__bind_release(comm, i); /* its request ended */
        if (b->state == ZC_BIND_DRAINING) (void)zc_bind_drained(g, i);
        if (b->state == ZC_BIND_RUNNING || b->state == ZC_BIND_DRAINING ||
            (b->state == ZC_BIND_ARMED && !b->persistent)) {
            if (!busy++) first = i;
        }
    }
    if (!busy) return ZC_OK;
    const zc__bind *b = &g->binds[first];
    return zc__error(comm, ZC_INVALID_STATE, "zc_comm_fini: %u stream-ordered call(s) are still "
                     "on their streams (stream slot %u: %s %s): drive zc_progress until every "
                     "stream that got a call has passed it (or call zc_comm_abort, then let the "
                     "streams pass), then call zc_comm_fini again", busy, first,
                     zc__kind_name(b->s.kind),
                     b->state == ZC_BIND_DRAINING ? "has ended but its stream is not past it"
                     : b->state == ZC_BIND_RUNNING ? "is running"
                                                   : "waits for its stream to reach it");
}

#ifdef ZC_TEST_HOOKS
void (*zc__test_clock)(const zc_comm *comm);
#endif

/* A pass that moved nothing: after spin_polls of them in a row the thread yields. */
static void zc_idle_pass(zc_comm *comm) {
    if (++comm->empty_polls >= comm->spin_polls) {
        comm->empty_polls = 0;
        zc_plat_yield();
    }
}

/* Whether the pass that just moved nothing can park: it left one wait (zc_one_wait); then it
 * points park.at at the word of that slot whose low 32 bits turn into the awaited tag when
 * the message lands (the header's tag, or the last flagged line's flag). Until they do, a
 * pass would find the same: progress only counts toward the clock's read (which ends the
 * parking, so deadlines and failure reports are read as before); an issue ends it too. A word
 * that shows the tag early (a line of a message 2^32 before) only ends the parking: the pass
 * then looks as any other does. */
static bool zc_parks(zc_comm *comm) {
    if (!zc_one_wait(comm)) return false;
    uint64_t w = comm->park.where;
    const uint8_t *slot = comm->wire->rx_mem(comm->wire_state, (uint32_t)(w & 3u),
                                             (uint32_t)(w >> 32), (uint32_t)(w >> 2) & 0x3ffu);
    comm->park.at = (const uint64_t *)(const void *)(slot + ((w >> 12) & 0xfffffu) * 8u);
    return true;
}

/* zc_progress's work, under the communicator's lock. A parked communicator (zc_parks) reads
 * the one word its call waits on and returns while that is unchanged, but every
 * ZC_CLOCK_IDLE_POLLS-th call, which runs the pass (the clock's read, deadlines, liveness,
 * failure reports): a peer's failure report waits for that pass, as its stall would. */
static zc_status zc_progress_locked(zc_comm *comm) {
    uint32_t budget = ZC_PROGRESS_BUDGET, finished = 0;
    if (comm->gpu && comm->gpu->binds_live) zc_poll_binds(comm, comm->gpu, &budget);
    if (comm->failed) return (zc_status)comm->failed;
    if (comm->parked) { /* nothing to do until the word changes, or the clock is due */
        if ((uint32_t)__atomic_load_n(comm->park.at, __ATOMIC_ACQUIRE) !=
                (uint32_t)comm->park_tag &&
            ++comm->clock_polls < ZC_CLOCK_IDLE_POLLS) {
            zc_idle_pass(comm);
            return ZC_OK;
        }
        comm->parked = 0;
    }
    comm->park_waits = comm->empty_polls >= comm->name_after ? 0u : 2u; /* 2: not named */
    zc_check_alarm(comm);
    if (comm->unposted) zc__tx_flush(comm); /* messages the wire refused for now, first */
    if (comm->failed) return (zc_status)comm->failed;
    if (comm->relay) zc__relay_pass(comm, &budget); /* whatever calls are in flight */
    bool turn_taken = false; /* a receive of this pass still waits: later ones wait too */
    for (uint32_t i = 0; i < comm->nreqs_active && budget && !comm->failed;) {
        zc__req *r = &comm->reqs[comm->active[i]];
        if (r->wild && (turn_taken || !zc_resolve(comm, r))) {
            turn_taken = true;
            i++;
            continue;
        }
        uint32_t before = budget;
        bool done = zc_step(comm, r, &budget);
        if (budget != before) r->moved = 1;
        if (comm->failed) break; /* the step failed the communicator (a mismatch) */
        if (done) {
            zc__req_end(r, ZC_OK);
            zc_retire(comm, i);
            finished++;
        } else {
            i++;
        }
    }
    bool idle = budget == ZC_PROGRESS_BUDGET && !finished;
    if (!comm->failed && (comm->nreqs_active || (comm->relay && comm->relay_wait)) &&
        ++comm->clock_polls >= (idle ? ZC_CLOCK_IDLE_POLLS : ZC_CLOCK_BUSY_POLLS)) {
        comm->clock_polls = 0;
#ifdef ZC_TEST_HOOKS
        if (zc__test_clock) zc__test_clock(comm);
#endif
        uint64_t now = zc_plat_now_ns();
        zc_check_deadlines(comm, now);
        if (comm->relay_wait && !comm->failed) zc__relay_check(comm, now);
    }
    if (idle) {
        zc_idle_pass(comm);
        comm->parked = comm->empty_polls >= comm->park_after && zc_parks(comm);
    } else {
        comm->empty_polls = 0;
        if (!budget) comm->park_waits = 2u; /* calls may have more to move than the pass did */
    }
    return comm->failed ? (zc_status)comm->failed : ZC_OK;
}

zc_status zc_progress(zc_comm *comm) { ZC_LOCKED(comm, zc_progress_locked(comm)); }

zc__req *zc__lookup(zc_comm *comm, const zc_req *req) {
    uint64_t index = req->opaque_[0] & 0xffffffffu;
    if ((req->opaque_[0] & ~(uint64_t)0xffffffffu) != ZC_HANDLE_MAGIC ||
        req->opaque_[2] != (uint64_t)(uintptr_t)comm || index >= comm->cfg.max_requests)
        return 0;
    zc__req *r = &comm->reqs[index];
    return r->state != ZC_REQ_FREE && r->gen == req->opaque_[1] ? r : 0;
}

/* zc__test of the request r that req names (looked up already; NULL: none). */
static zc_status zc_test_found(zc_comm *comm, zc__req *r, zc_req *req) {
    if (!r)
        return zc__error(comm, ZC_INVALID_ARG, "req is not a request in flight on this "
                         "communicator (never started, already finished, or another's)");
    if (r->state == ZC_REQ_ACTIVE) return ZC_IN_PROGRESS;
    zc_status st = (zc_status)r->status;
    if (r->plan >= 0) comm->plans[r->plan].running = -1;
    r->state = ZC_REQ_FREE;
    r->gen++;
    req->opaque_[0] = 0;
    return st;
}

zc_status zc__test(zc_comm *comm, zc_req *req) {
    return zc_test_found(comm, zc__lookup(comm, req), req);
}

zc_status zc_test(zc_comm *comm, zc_req *req) {
    if (!req) return ZC_INVALID_ARG;
    ZC_LOCKED(comm, zc__test(comm, req));
}

/* In process, one thread may drive the whole group: between two passes of its zc_wait it
 * walks the group (zc_walk). A group of ZC_WAKE_MIN_RANKS or more (comm.c) has wake bits, and
 * a walk visits the ranks whose bits it takes: set by the wire for a post to the rank, a
 * credit it asked for or an alarm, by an issue on it and by its own last visit when that moved
 * something (it may have more to move), but not when the issue's first step or the visit left
 * the rank waiting for one message alone (zc_one_wait: its post sets the bit). Every
 * ZC_WALK_FULL-th walk, and a walk that finds no bit set, visits every rank instead:
 * deadlines, liveness, failure reports and a stream's start come by the clock or a flag, not
 * by a message, and a group that waits for one of them has nothing in flight to set a bit.
 * So a visit comes to a rank that something arrived for without a pass over thousands that
 * nothing did, and none waits long for one. A smaller group is walked whole at every pass. */
#define ZC_WALK_FULL 64u

/* One rank's progress pass; whether it moved something while it has work in flight, other
 * than waiting for one message. */
static bool zc_walk_visit(zc_comm *p) {
    if (!zc__comm_ok(p)) return false;
    zc__lock(p);
    (void)zc_progress_locked(p);
    bool more = p->empty_polls == 0 && (p->nreqs_active || p->relay) &&
                !(p->group_wake && zc_one_wait(p));
    zc__unlock(p);
    return more;
}

static void zc_walk_prefetch(const zc_comm *p) {
    __builtin_prefetch(p, 1, 3);
    __builtin_prefetch((const uint8_t *)p + 64, 1, 3);
}

/* The woken ranks' visits (words: the bitmap's); whether any bit was set. */
static bool zc_walk_woken(zc_comm *comm, zc_comm *const *g, uint64_t *wake, uint32_t words) {
    bool any = false;
    for (uint32_t i = 0; i < words; i++) {
        if (!__atomic_load_n(&wake[i], __ATOMIC_RELAXED)) continue;
        uint64_t w = __atomic_exchange_n(&wake[i], 0, __ATOMIC_ACQUIRE);
        any = any || w;
        while (w) {
            uint32_t r = i * 64u + (uint32_t)__builtin_ctzll(w);
            w &= w - 1u;
            if (w) zc_walk_prefetch(g[i * 64u + (uint32_t)__builtin_ctzll(w)]);
            if (r != comm->rank && zc_walk_visit(g[r])) zc_wire_wake(wake, r);
        }
    }
    return any;
}

static void zc_walk(zc_comm *comm, uint32_t pass) {
    uint32_t n = comm->nranks, words = (n + 63u) / 64u;
    zc_comm *const *g = comm->group;
    uint64_t *wake = comm->group_wake; /* NULL: a small group, walked whole at every pass */
    if (wake && pass % ZC_WALK_FULL && zc_walk_woken(comm, g, wake, words)) return;
    if (wake) {
        for (uint32_t i = 0; i < words; i++) __atomic_store_n(&wake[i], 0, __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_SEQ_CST); /* every later bit is the walk's next */
    }
    for (uint32_t k = 1, r = comm->rank; k < n; k++) {
        r = r + 1u == n ? 0 : r + 1u;
        if (wake && k + 1u < n) zc_walk_prefetch(g[r + 1u == n ? 0 : r + 1u]); /* not cached */
        if (zc_walk_visit(g[r]) && wake) zc_wire_wake(wake, r);
    }
}

/* Polls until req finishes. The lock is let go every ZC_WAIT_PASSES passes (and in-process
 * after every pass, to walk the group: zc_walk), so that other threads may issue and progress
 * in between: no request waits on a call another thread cannot make. */
#define ZC_WAIT_PASSES 16u
zc_status zc_wait(zc_comm *comm, zc_req *req) {
    if (!comm || comm->magic != ZC_COMM_MAGIC || !req) return ZC_INVALID_ARG;
    bool inproc = comm->cfg.transport == ZC_TRANSPORT_INPROC;
    zc__lock(comm);
    zc__req *r = zc__lookup(comm, req); /* once: the loop below only polls */
    for (uint32_t pass = 1; r && r->state == ZC_REQ_ACTIVE; pass++) {
        (void)zc_progress_locked(comm);
        if (r->state != ZC_REQ_ACTIVE || (!inproc && pass % ZC_WAIT_PASSES)) continue;
        zc__unlock(comm);
        if (inproc) zc_walk(comm, pass);
        zc__lock(comm);
    }
    /* The lock was let go between passes: another thread may have finished the request (its
     * slot freed or reused), which the generation tells; then the dead handle's sentence. */
    if (r && (r->state == ZC_REQ_FREE || r->gen != req->opaque_[1])) r = 0;
    zc_status st = zc_test_found(comm, r, req);
    zc__unlock(comm);
    return st;
}
