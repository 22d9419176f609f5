/* stream.c: the stream-ordered forms (zc_*_stream), written once against the gpu provider
 * (provider/gpu.h). A call takes a stream slot (its two flag words in pinned memory), enqueues
 * on the caller's stream "start = tick" and "wait until done >= tick", and is issued as a
 * request gated by its slot (sched_gpu.c's GATE phase waits for the start flag); progress.c
 * writes the done flag when the request ends, whatever its result, so the caller's stream
 * never hangs (the communicator's status says what happened).
 *
 * Must not: include CUDA headers, block, or allocate. */
#include "engine.h"
#include "gpu.h"

/* Enqueues a stream-ordered call on the caller's stream: [captured: done = tick - 1]
 * start = tick; wait until done >= tick. Not captured: the request is issued now (it takes its
 * place in the call order now) and waits at its gate for the start flag. Captured in a graph:
 * the slot stays armed until zc_comm_fini and every replay runs the call once more, taking its
 * place in the call order when the replay reaches it. */
static zc_status zc_gpu_stream_start(zc_comm *c, zc__sched *s, void *stream) {
    struct zc__gpu *g = c->gpu, *h = c->gpu_area;
    const char *name = zc__kind_name(s->kind);
    uint32_t i;
    bool captured = false;
    if (!g)
        return zc__error(c, ZC_UNSUPPORTED, "%s_stream: %s", name,
                         h ? h->why : zc__gpu_absent(&c->cfg));
    if (s->alg == ZC_ALG_STAGED)
        return zc__error(c, ZC_UNSUPPORTED, "%s_stream: stream-ordered calls on the staged path "
                         "(%s) are not supported yet: call %s and wait instead", name,
                         zc__stage_path(c) == ZC_GPU_PATH_STAGED ? "this communicator's "
                         "gpu_path" : "device send/recv", name);
    if (!(zc__family_of(s->alg)->flags & ZC_FAM_STREAM)) {
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
    zc__bind *b = &g->binds[i];
    const zc_gpu_ops *o = g->ops;
    uint32_t tick = b->tick + 1u ? b->tick + 1u : 1u;
    zc_status st = o->stream_capturing(g->state, stream, &captured);
    if (st == ZC_OK && captured)
        st = o->stream_write_flag(g->state, stream, 2u * i + 1u, tick - 1u);
    if (st == ZC_OK) st = o->stream_write_flag(g->state, stream, 2u * i, tick);
    if (st == ZC_OK) st = o->stream_wait_flag(g->state, stream, 2u * i + 1u, tick);
    if (st != ZC_OK) /* the caller's stream (or capture) is broken, not the communicator */
        return zc__error(c, st, "%s_stream: %s", name, o->error_text(g->state));
    b->tick = tick;
    b->s = *s;
    b->persistent = captured;
    b->state = ZC_BIND_ARMED;
    g->binds_live++;
    /* Not captured: issued now, so it takes its place in the call order now, and waits at its
     * gate. Enqueued already, so it must run: without a request slot now (or on a failed
     * communicator) it stays armed and starts (or fails, writing done) when the stream gets
     * there, like a captured call. */
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
