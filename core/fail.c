/* fail.c: the failure record. A communicator's failure is written here and nowhere else: the
 * first failure fixes status, sentence, peer and vendor code together, tells the peers and
 * finishes every active request; later failures change nothing (BearSSL's one sticky error).
 * Call-level errors (the communicator stays usable) record only their sentence, and never over
 * a failure's. Also the init-time sentence and the names that sentences are made of. Calls
 * nothing of the core above it: only the wire's alarm and the formatter. */
#include "engine.h"

/* One per process, as the API says: concurrent failing inits may overwrite each other's. */
static char zc_init_err[ZC_ERROR_TEXT_BYTES];

const char *zc_init_error_text(void) { return zc_init_err; }

void zc__vset_init_error(const char *fmt, va_list ap) {
    zc__vfmt(zc_init_err, sizeof zc_init_err, fmt, ap);
}

void zc__set_init_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    zc__vset_init_error(fmt, ap);
    va_end(ap);
}

zc_status zc__error(zc_comm *comm, zc_status status, const char *fmt, ...) {
    ZC_ASSERT(status != ZC_OK && status != ZC_IN_PROGRESS);
    if (comm->failed) return status; /* the failure's sentence stays */
    va_list ap;
    va_start(ap, fmt);
    zc__vfmt(comm->err, sizeof comm->err, fmt, ap);
    va_end(ap);
    return status;
}

/* The first failure only: the record (its sentence written just before), then the report to
 * the peers (first report wins in each window; they fail at their next poll). */
static void zc_record(zc_comm *comm, const zc__failure *f) {
    comm->failed = f->status;
    comm->fail_peer = f->peer;
    comm->fail_code = f->vendor;
    comm->fail_seq = f->seq;
    uint32_t detector = f->origin >= 0 ? (uint32_t)f->origin : comm->rank;
    uint64_t word = (uint64_t)(uint32_t)(-(int32_t)f->status) << 56 |
                    (uint64_t)(detector & 0xffffffu) << 32 | (f->seq & 0xffffffffu);
    comm->wire->alarm(comm->wire_state, word);
}

/* Every active request ends with the communicator's status (zc__req_end). */
static zc_status zc_finish_all(zc_comm *comm) {
    for (uint32_t i = 0; i < comm->nreqs_active; i++)
        zc__req_end(&comm->reqs[comm->active[i]], (zc_status)comm->failed);
    comm->nreqs_active = 0;
    ZC_ASSERT(comm->failed < 0 && comm->err[0]); /* paired: a failed comm always says why */
    return (zc_status)comm->failed;
}

zc_status zc__vfail(zc_comm *comm, const zc__failure *f, const char *fmt, va_list ap) {
    ZC_ASSERT(f->status < 0);
    if (!comm->failed) {
        zc__vfmt(comm->err, sizeof comm->err, fmt, ap);
        zc_record(comm, f);
    }
    return zc_finish_all(comm);
}

zc_status zc__fail(zc_comm *comm, zc_status status, uint64_t seq, int32_t peer, int64_t vendor,
                   const char *fmt, ...) {
    zc__failure f = {status, peer, vendor, seq, -1, 0};
    va_list ap;
    va_start(ap, fmt);
    zc_status st = zc__vfail(comm, &f, fmt, ap);
    va_end(ap);
    return st;
}

zc_status zc__fail_relayed(zc_comm *comm, zc_status status, uint64_t seq, uint32_t origin,
                           const char *fmt, ...) {
    zc__failure f = {status, (int32_t)origin, 0, seq, (int32_t)origin, 0};
    va_list ap;
    va_start(ap, fmt);
    zc_status st = zc__vfail(comm, &f, fmt, ap);
    va_end(ap);
    return st;
}

zc_status zc__bad_peer(zc_comm *comm, const zc__req *r, uint32_t peer, const char *fmt, ...) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    zc__vfmt(what, sizeof what, fmt, ap);
    va_end(ap);
    return zc__fail(comm, ZC_MISMATCH, r->seq, (int32_t)peer, 0, "%s sequence %llu: rank %u sent "
                    "%s; no rank of this job sends that, so this communicator has failed",
                    zc__kind_name(r->s.kind), (unsigned long long)r->seq, peer, what);
}

const char *zc__kind_name(uint32_t kind) {
    /* Every kind named: a missing one would be a NULL in sentences. */
    static const char *const names[ZC_K_COUNT_] = {
        "none", "zc_allreduce", "zc_reduce", "zc_broadcast", "zc_reduce_scatter",
        "zc_allgather", "zc_gather", "zc_scatter", "zc_alltoall", "zc_send", "zc_recv",
        "zc_barrier", "zc_mem_register", "zc_mem_deregister"};
    _Static_assert(ZC_K_DEREGISTER + 1 == ZC_K_COUNT_, "zc_mem_deregister is the last kind");
    return kind < ZC_K_COUNT_ ? names[kind] : "unknown";
}

void zc__describe(char *buf, size_t cap, uint32_t kind, uint64_t count, uint32_t dtype,
                  uint32_t op, uint32_t root) {
    bool reduces = kind == ZC_K_ALLREDUCE || kind == ZC_K_REDUCE || kind == ZC_K_REDUCE_SCATTER;
    bool rooted = kind == ZC_K_REDUCE || kind == ZC_K_BROADCAST || kind == ZC_K_GATHER ||
                  kind == ZC_K_SCATTER;
    if (kind == ZC_K_REGISTER || kind == ZC_K_DEREGISTER) { /* internal: no count or dtype */
        zc__fmt(buf, cap, kind == ZC_K_REGISTER ? "zc_mem_register(ZC_MEM_CUDA)'s exchange of IPC "
                "records" : "zc_mem_deregister(ZC_MEM_CUDA)'s word that the peers unmapped it");
        return;
    }
    size_t n = zc__fmt(buf, cap, "%s(count %llu, %s", zc__kind_name(kind),
                       (unsigned long long)count, zc_dtype_name((zc_dtype)dtype));
    if (reduces) n += zc__fmt(buf + n, cap - n, ", %s", zc_op_name((zc_op)op));
    if (rooted) n += zc__fmt(buf + n, cap - n, ", root %u", root);
    if ((kind == ZC_K_SEND || kind == ZC_K_RECV) && root) /* root: the tag */
        n += zc__fmt(buf + n, cap - n, ", tag %u", root);
    zc__fmt(buf + n, cap - n, ")");
}

void zc__abort(zc_comm *comm) {
    zc__fail(comm, ZC_ABORTED, comm->seq, -1, 0, "zc_comm_abort was called");
    comm->failed = ZC_ABORTED;
}
