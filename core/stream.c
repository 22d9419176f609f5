/* stream.c: the stream-ordered forms (zc_*_stream), written once against the gpu provider
 * (provider/gpu.h). A call takes a stream slot (its flag words and step descriptor in pinned
 * memory) and enqueues its whole program on the caller's stream at once: "start", then for each
 * device step of the call "wait for go, the step's kernel, kernel done", then "wait for done" and
 * "fin". Every dependency is on the caller's stream, in operations the runtime orders there:
 * no work of the call goes anywhere else later, so a stream waiting on a flag can never hold
 * back work the flag waits for (one shared hardware queue, CUDA_DEVICE_MAX_CONNECTIONS=1, or
 * streams that share one are fine). The call is issued as a request gated by its slot
 * (progress.c's gate waits for the start flag); its schedule fills the step descriptor and
 * raises "go" instead of launching, and waits for "kernel done" instead of an event;
 * progress.c writes the done flag when the request ends, whatever its result, so the caller's
 * stream never hangs (the communicator's status says what happened), and frees the slot once
 * the stream wrote "fin".
 *
 * Must not: include CUDA headers, block, or allocate. */
#include "device.h"
#include "gpu.h"

/* Enqueues slot i's program (engine.h, zc__bind) on stream; the first failure's status. */
static zc_status zc_stream_program(zc_comm *c, uint32_t i, void *stream, bool captured) {
    struct zc__gpu *g = c->gpu;
    const zc_gpu_ops *o = g->ops;
    const zc__bind *b = &g->binds[i];
    uint32_t f = ZC_BIND_FLAGS * i;
    zc_status st = ZC_OK;
    if (captured) { /* every replay starts from the values the graph holds */
        st = o->stream_write_flag(g->state, stream, f + ZC_BF_DONE, b->tick - 1u);
        if (st == ZC_OK) st = o->stream_write_flag(g->state, stream, f + ZC_BF_GO, b->go);
        if (st == ZC_OK) st = o->stream_write_flag(g->state, stream, f + ZC_BF_KD, b->go);
    }
    if (st == ZC_OK) st = o->stream_write_flag(g->state, stream, f + ZC_BF_START, b->tick);
    for (uint32_t j = 1; j <= b->steps && st == ZC_OK; j++) {
        st = o->stream_wait_flag(g->state, stream, f + ZC_BF_GO, b->go + j);
        if (st == ZC_OK)
            st = o->stream_step(g->state, stream, i, (zc_dtype)b->s.dtype, (zc_op)b->s.op);
        if (st == ZC_OK) st = o->stream_write_flag(g->state, stream, f + ZC_BF_KD, b->go + j);
    }
    if (st == ZC_OK) st = o->stream_wait_flag(g->state, stream, f + ZC_BF_DONE, b->tick);
    if (st == ZC_OK) st = o->stream_write_flag(g->state, stream, f + ZC_BF_FIN, b->tick);
    return st;
}

/* The algorithm a stream-ordered call of s runs and its steps; a refusal's sentence. */
static zc_status zc_stream_plan(zc_comm *c, zc__sched *s, uint32_t *steps) {
    const char *name = zc__kind_name(s->kind);
    if (s->alg == ZC_ALG_STAGED)
        return zc__error(c, ZC_UNSUPPORTED, "%s_stream: stream-ordered calls on the staged path "
                         "(%s) are not supported yet: call %s and wait instead", name,
                         zc__gpu_path_now(c) == ZC_GPU_PATH_STAGED ? "this communicator's "
                         "gpu_path" : "device send/recv", name);
    if (!(zc__family_of(s->alg)->flags & ZC_FAM_STREAM)) {
        if (s->kind != ZC_K_BARRIER && s->count != 0)
            return zc__error(c, ZC_INVALID_ARG, "%s_stream: the buffers must be registered "
                             "ZC_MEM_CUDA memory", name);
        s->alg = ZC_ALG_GPU_DIRECT; /* signals only: starts and ends in stream order */
    }
    *steps = zc__gpu_alg(s->alg) ? zc__gpu_steps(c, s) : zc__put_steps(c, s);
    if (*steps <= ZC_BIND_MAX_STEPS) return ZC_OK;
    return zc__error(c, ZC_UNSUPPORTED, "%s_stream: this call needs %u device steps (rounds of "
                     "cfg->gpu_scratch_bytes, or chunks of slot_bytes) and a stream-ordered call "
                     "takes at most %u: raise those sizes, or call %s and wait", name, *steps,
                     ZC_BIND_MAX_STEPS, name);
}

/* Enqueues a stream-ordered call on the caller's stream (zc_stream_program). Not captured: the
 * request is issued now (it takes its place in the call order now) and waits at its gate for the
 * start flag. Captured in a graph: the slot stays armed until zc_comm_fini and every replay runs
 * the call once more, taking its place in the call order when the replay reaches it. */
static zc_status zc_gpu_stream_start(zc_comm *c, zc__sched *s, void *stream) {
    struct zc__gpu *g = c->gpu, *h = c->gpu_area;
    const char *name = zc__kind_name(s->kind);
    uint32_t i, steps = 0;
    bool captured = false;
    if (!g)
        return zc__error(c, ZC_UNSUPPORTED, "%s_stream: %s", name,
                         h ? h->why : zc__gpu_absent(&c->cfg));
    zc_status st = zc_stream_plan(c, s, &steps);
    if (st != ZC_OK) return st;
    for (i = 0; i < g->nbinds && g->binds[i].state != ZC_BIND_FREE; i++) {
    }
    if (i == g->nbinds)
        return zc__error(c, ZC_AGAIN, "%s_stream: all %u stream slots are in use "
                         "(cfg->gpu_stream_slots; graph-captured calls hold theirs until "
                         "zc_comm_fini, ended calls until their stream is past them)", name,
                         g->nbinds);
    zc__bind *b = &g->binds[i];
    st = g->ops->stream_capturing(g->state, stream, &captured);
    if (st != ZC_OK) /* the caller's stream (or capture) is broken, not the communicator */
        return zc__error(c, st, "%s_stream: %s", name, g->ops->error_text(g->state));
    b->tick = b->tick + 1u ? b->tick + 1u : 1u;
    b->go = b->go + b->steps + 1u; /* past every value its last program used */
    b->steps = steps;
    b->s = *s;
    b->persistent = captured;
    b->state = ZC_BIND_ARMED;
    g->binds_live++;
    st = zc_stream_program(c, i, stream, captured);
    if (st != ZC_OK) { /* what went onto the stream is let through; the slot is not reused */
        char why[ZC_ERROR_TEXT_BYTES];
        zc__fmt(why, sizeof why, "%s", g->ops->error_text(g->state));
        zc__bind_release(c, i);
        b->state = ZC_BIND_LOST;
        return zc__error(c, st, "%s_stream: %s", name, why);
    }
    /* Not captured: issued now, so it takes its place in the call order now, and waits at its
     * gate. Enqueued already, so it must run: without a request slot now (or on a failed
     * communicator) it stays armed and starts (or fails, releasing its stream) when the stream
     * gets there, like a captured call. */
    if (!captured) (void)zc__bind_issue(c, i);
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
