/* test_colls.c: collectives on registered device memory through zcrun (1, 2 and 4 ranks on
 * whatever GPUs there are, one GPU shared being the usual case, or on the simulated device)
 * against a host reference computed from every rank's inputs with the host kernels; misuse
 * refused with sentences; stream-ordered forms (enqueued call by call, then captured in a graph
 * in global mode and replayed); an injected device fault failing every rank with a sentence;
 * one-shot latency. */
#include "zg.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reduce.h"
#include "../ref.h"

#include "zg_cuda.h"

#define ZG_BUF (2u << 20) /* bytes of each device buffer (the largest case needs 1.6 MB; 4 ranks
                          * of two fit a container's 64 MiB /dev/shm with the simulated device) */

static zc_status zg_wait(zc_comm *c, zc_status issued, zc_req *req) {
    return issued != ZC_OK ? issued : zc_wait(c, req);
}

void gpu_registration_refuses_host_managed_partial_and_unregistered_memory(void) {
    zg_need_device();
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    zc_mem *m = NULL, *mh = NULL;
    uint8_t *host = malloc(1u << 20), *managed = zg_managed_alloc(4096);
    uint8_t *dev = zg_dev_alloc(1u << 20), *dev2 = zg_dev_alloc(1u << 20);
    ZT_CHECK_COMM(c, zc_mem_register(c, host, 4096, ZC_MEM_CUDA, &mh), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_comm_error_text(c), "host memory") != NULL);
    if (managed) { /* CUDA only */
        ZT_CHECK_COMM(c, zc_mem_register(c, managed, 4096, ZC_MEM_CUDA, &mh), ZC_INVALID_ARG);
        ZT_CHECK(strstr(zc_comm_error_text(c), "managed") != NULL);
    }
    ZT_CHECK_COMM(c, zc_mem_register(c, dev, 2u << 20, ZC_MEM_CUDA, &mh), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_comm_error_text(c), "past the end") != NULL);
    ZT_CHECK_COMM(c, zc_mem_register(c, dev, 1u << 20, ZC_MEM_CUDA, &m), ZC_OK);
    zc_req req;
    ZT_CHECK_COMM(c, zc_allreduce(c, dev2, dev2, 16, ZC_FLOAT32, ZC_SUM, &req), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_comm_error_text(c), "not registered") != NULL);
    ZT_CHECK_COMM(c, zc_allreduce(c, dev, host, 16, ZC_FLOAT32, ZC_SUM, &req), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_comm_error_text(c), "ZC_MEM_CUDA") != NULL);
    ZT_CHECK_COMM(c, zc_allreduce(c, dev + (1u << 20) - 32, dev, 16, ZC_FLOAT32, ZC_SUM, &req),
                ZC_INVALID_ARG); /* runs past the registration */
    /* One rank: the device all_reduce is the n = 1 reduction (NaNs made canonical). */
    const size_t count = 4099;
    float *in = malloc(count * 4), *want = malloc(count * 4), *got = malloc(count * 4);
    zg_fill(in, count, ZC_FLOAT32, 5);
    const void *ins[1] = {in};
    zc__reduce(want, ins, 1, count, ZC_FLOAT32, ZC_SUM);
    zg_h2d(dev, in, count * 4);
    ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, dev, dev + (512u << 10), count, ZC_FLOAT32, ZC_SUM,
                                           &req), &req), ZC_OK);
    zg_d2h(got, dev + (512u << 10), count * 4);
    ZT_CHECK(memcmp(got, want, count * 4) == 0);
    ZT_CHECK_COMM(c, zc_mem_deregister(c, m), ZC_OK);
    ZT_CHECK_COMM(c, zc_allreduce(c, dev, dev, 16, ZC_FLOAT32, ZC_SUM, &req), ZC_INVALID_ARG);
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    zg_dev_free(dev);
    zg_dev_free(dev2);
    free(host);
    free(in);
    free(want);
    free(got);
}

/* ---- the collective sweep ---- */

typedef struct zg_case {
    int kind; /* 0 allreduce 1 reduce 2 reduce_scatter 3 broadcast 4 allgather 5 gather
               * 6 scatter 7 alltoall */
    zc_dtype dtype;
    zc_op op;
    size_t count;
    uint32_t root;
    bool in_place;
} zg_case;

static const char *const zg_kinds[] = {"allreduce", "reduce", "reduce_scatter", "broadcast",
                                       "allgather", "gather", "scatter", "alltoall"};

/* Blocks of count elements in rank r's input. */
static size_t zg_in_blocks(const zg_case *k, uint32_t n) {
    return k->kind == 2 || k->kind == 6 || k->kind == 7 ? n : 1;
}
static size_t zg_out_blocks(const zg_case *k, uint32_t n) {
    return k->kind == 4 || k->kind == 5 || k->kind == 7 ? n : 1;
}

static zc_status zg_issue(zc_comm *c, const zg_case *k, uint8_t *send, uint8_t *recv,
                          zc_req *req) {
    switch (k->kind) {
    case 0: return zc_allreduce(c, send, recv, k->count, k->dtype, k->op, req);
    case 1: return zc_reduce(c, send, recv, k->count, k->dtype, k->op, k->root, req);
    case 2: return zc_reduce_scatter(c, send, recv, k->count, k->dtype, k->op, req);
    case 3: return zc_broadcast(c, send, recv, k->count, k->dtype, k->root, req);
    case 4: return zc_allgather(c, send, recv, k->count, k->dtype, req);
    case 5: return zc_gather(c, send, recv, k->count, k->dtype, k->root, req);
    case 6: return zc_scatter(c, send, recv, k->count, k->dtype, k->root, req);
    default: return zc_alltoall(c, send, recv, k->count, k->dtype, req);
    }
}

/* The expected output of rank me from every rank's inputs (0: nothing to check here). */
static size_t zg_expect(const zg_case *k, uint32_t n, uint32_t me, uint8_t *const *in,
                        uint8_t *want) {
    size_t es = zc_dtype_bytes(k->dtype), blk = k->count * es;
    const void *ins[64];
    switch (k->kind) {
    case 0:
    case 1:
    case 2:
        if (k->kind == 1 && me != k->root) return 0;
        for (uint32_t r = 0; r < n; r++) ins[r] = in[r] + (k->kind == 2 ? me * blk : 0);
        zc__reduce(want, ins, n, k->count, k->dtype, k->op);
        return blk;
    case 3: memcpy(want, in[k->root], blk); return blk;
    case 5:
        if (me != k->root) return 0;
        /* fall through */
    case 4:
        for (uint32_t r = 0; r < n; r++) memcpy(want + r * blk, in[r], blk);
        return n * blk;
    case 6: memcpy(want, in[k->root] + me * blk, blk); return blk;
    default:
        for (uint32_t r = 0; r < n; r++) memcpy(want + r * blk, in[r] + me * blk, blk);
        return n * blk;
    }
}

/* Runs one case on device memory with every rank's inputs in in[] and compares with the host
 * reference. */
static void zg_run_filled(zc_comm *c, const zg_case *k, uint8_t *dsend, uint8_t *drecv,
                          uint8_t *const *in, uint8_t *want, uint8_t *got) {
    uint32_t n = zc_comm_size(c), me = zc_comm_rank(c);
    size_t es = zc_dtype_bytes(k->dtype), blk = k->count * es;
    uint8_t *send = dsend, *recv = drecv;
    if (k->in_place) {
        send = recv = drecv;
        if (k->kind == 2) recv = drecv + me * blk;
        if (k->kind == 4 || k->kind == 5) send = drecv + me * blk;
        if (k->kind == 6) recv = drecv + k->root * blk;
    }
    zg_dev_memset(drecv, 0xa5, zg_out_blocks(k, n) * blk + blk);
    zg_h2d(send, in[me], zg_in_blocks(k, n) * blk);
    zc_req req;
    ZT_CHECK_COMM(c, zg_wait(c, zg_issue(c, k, send, recv, &req), &req), ZC_OK);
    size_t bytes = zg_expect(k, n, me, in, want);
    if (!bytes) return;
    uint8_t *out = k->in_place && (k->kind == 4 || k->kind == 5) ? drecv : recv;
    zg_d2h(got, out, bytes);
    for (size_t i = 0; i < bytes; i++) {
        if (got[i] == want[i]) continue;
        char d[240];
        snprintf(d, sizeof d, "rank %u: %s %s %s count %zu root %u%s: element %zu differs "
                 "(device byte 0x%02x, host 0x%02x)", me, zg_kinds[k->kind],
                 zc_dtype_name(k->dtype), zc_op_name(k->op), k->count, k->root,
                 k->in_place ? " in place" : "", i / es, got[i], want[i]);
        zt_fail(__FILE__, __LINE__, "device == host reference", d);
    }
}

/* Runs one case on zg_fill's inputs; seed numbers cases. */
static void zg_run_case(zc_comm *c, const zg_case *k, uint32_t seed, uint8_t *dsend,
                        uint8_t *drecv, uint8_t *const *in, uint8_t *want, uint8_t *got) {
    uint32_t n = zc_comm_size(c);
    for (uint32_t r = 0; r < n; r++) zg_fill(in[r], k->count * zg_in_blocks(k, n), k->dtype,
                                             seed * 64u + r);
    zg_run_filled(c, k, dsend, drecv, in, want, got);
}

/* A rank program's buffers: registered device send and recv, every rank's host inputs, the
 * expected and the read-back result. */
typedef struct zg_io {
    uint8_t *dsend, *drecv, *in[64], *want, *got;
    zc_mem *ms, *mr;
} zg_io;

static void zg_io_open(zc_comm *c, zg_io *io) {
    uint32_t n = zc_comm_size(c);
    io->dsend = zg_dev_alloc(ZG_BUF);
    io->drecv = zg_dev_alloc(ZG_BUF);
    io->want = malloc(ZG_BUF);
    io->got = malloc(ZG_BUF);
    ZT_CHECK(io->want && io->got);
    for (uint32_t r = 0; r < n; r++) ZT_CHECK((io->in[r] = malloc(ZG_BUF)) != NULL);
    ZT_CHECK_COMM(c, zc_mem_register(c, io->dsend, ZG_BUF, ZC_MEM_CUDA, &io->ms), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, io->drecv, ZG_BUF, ZC_MEM_CUDA, &io->mr), ZC_OK);
}

/* Deregisters and frees io, then finalizes c. */
static void zg_io_close(zc_comm *c, zg_io *io) {
    uint32_t n = zc_comm_size(c);
    ZT_CHECK_COMM(c, zc_mem_deregister(c, io->ms), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_deregister(c, io->mr), ZC_OK);
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    zg_dev_free(io->dsend);
    zg_dev_free(io->drecv);
    for (uint32_t r = 0; r < n; r++) free(io->in[r]);
    free(io->want);
    free(io->got);
}

/* The rank tree on device memory, on inputs where the linear order differs (tests/ref.c
 * zr_fill_order, 4, 5, 7 or 8 ranks): all_reduce one-shot (300 elements) and reduce-scatter +
 * all-gather (40,000: past the 64 KiB one-shot limit), reduce and reduce_scatter, in place and
 * not, against the host kernels (which the host suite checks against the tree). */
int zg_rank_order(void) {
    zg_need_device();
    zc_comm *c = zg_comm_from_env(32u << 10, 64u << 10);
    uint32_t n = zc_comm_size(c);
    zg_io io;
    ZT_CHECK(n <= 8);
    zg_io_open(c, &io);
    static const size_t counts[] = {300, 40000};
    for (size_t ci = 0; ci < 2; ci++)
        for (int kind = 0; kind < 3; kind++)
            for (int ip = 0; ip < 2; ip++) {
                zg_case k = {kind, ZC_FLOAT32, ZC_SUM, counts[ci], n - 1u, ip == 1};
                for (uint32_t r = 0; r < n; r++)
                    ZT_CHECK(zr_fill_order((float *)(void *)io.in[r],
                                           k.count * zg_in_blocks(&k, n), n, r));
                zg_run_filled(c, &k, io.dsend, io.drecv, io.in, io.want, io.got);
            }
    if (zc_comm_rank(c) == 0) printf("rank tree bits on %u ranks\n", n);
    zg_io_close(c, &io);
    return 0;
}

void gpu_reductions_give_the_rank_trees_bits_on_4_5_7_8_ranks(void) {
    for (uint32_t n = 4; n <= 8; n++)
        if (n != 6) zg_run(n, "zg_rank_order");
}

/* Device send/recv in a ring (to me + 1, from me - 1), both issued before either is waited
 * for, compared with the sender's input (staged on the ipc and staged paths, put into the
 * receiver's device slots on the direct path). Returns the calls made (0 with one rank). */
static uint32_t zg_send_recv_ring(zc_comm *c, uint32_t *seed, uint8_t *dsend, uint8_t *drecv,
                                  uint8_t *const *in, uint8_t *got) {
    uint32_t n = zc_comm_size(c), me = zc_comm_rank(c), calls = 0;
    static const size_t counts[] = {1, 4099, 100003};
    static const zc_dtype dts[] = {ZC_INT8, ZC_FLOAT32, ZC_FLOAT64};
    uint32_t to = (me + 1) % n, from = (me + n - 1) % n;
    for (size_t ci = 0; ci < 3 && n > 1; ci++)
        for (size_t di = 0; di < 3; di++, (*seed)++, calls += 2) {
            size_t bytes = counts[ci] * zc_dtype_bytes(dts[di]);
            for (uint32_t r = 0; r < n; r++) zg_fill(in[r], counts[ci], dts[di], *seed * 64u + r);
            zg_h2d(dsend, in[me], bytes);
            zg_dev_memset(drecv, 0xa5, bytes);
            zc_req rr, rs;
            ZT_CHECK_COMM(c, zc_recv(c, drecv, counts[ci], dts[di], from, &rr), ZC_OK);
            ZT_CHECK_COMM(c, zg_wait(c, zc_send(c, dsend, counts[ci], dts[di], to, &rs), &rs),
                        ZC_OK);
            ZT_CHECK_COMM(c, zc_wait(c, &rr), ZC_OK);
            zg_d2h(got, drecv, bytes);
            ZT_CHECK(memcmp(got, in[from], bytes) == 0);
        }
    /* Nobody leaves while a peer still waits on its ring neighbour: progress's liveness check
     * watches every peer, so a rank gone early would fail a late peer's recv. */
    zc_req req;
    ZT_CHECK_COMM(c, zg_wait(c, zc_barrier(c, &req), &req), ZC_OK);
    return calls;
}

/* Two collectives in flight at once (a staged call waits for the staging in issue order): an
 * all_reduce and an all_gather of the same input, issued back to back, then waited for in the
 * other order; both against the host reference. Returns the calls made. */
static uint32_t zg_two_in_flight(zc_comm *c, uint32_t seed, uint8_t *dsend, uint8_t *drecv,
                                 uint8_t *const *in, uint8_t *want, uint8_t *got) {
    enum { N = 3001 };
    uint32_t n = zc_comm_size(c), me = zc_comm_rank(c);
    const void *ins[64];
    for (uint32_t r = 0; r < n; r++) {
        zg_fill(in[r], N, ZC_INT32, seed * 64u + r);
        ins[r] = in[r];
    }
    zg_h2d(dsend, in[me], N * 4);
    uint8_t *gathered = drecv + (64u << 10); /* past the all_reduce's N * 4 bytes */
    zc_req ra, rg;
    ZT_CHECK_COMM(c, zc_allreduce(c, dsend, drecv, N, ZC_INT32, ZC_SUM, &ra), ZC_OK);
    ZT_CHECK_COMM(c, zc_allgather(c, dsend, gathered, N, ZC_INT32, &rg), ZC_OK);
    ZT_CHECK_COMM(c, zc_wait(c, &rg), ZC_OK);
    ZT_CHECK_COMM(c, zc_wait(c, &ra), ZC_OK);
    zc__reduce(want, ins, n, N, ZC_INT32, ZC_SUM);
    zg_d2h(got, drecv, N * 4);
    ZT_CHECK(memcmp(got, want, N * 4) == 0);
    zg_d2h(got, gathered, (size_t)n * N * 4);
    for (uint32_t r = 0; r < n; r++) ZT_CHECK(memcmp(got + (size_t)r * N * 4, in[r], N * 4) == 0);
    return 2;
}

/* ZG_PATH (when set): the path the communicator must have chosen, "ipc", "staged" or
 * "direct"; staged: every call of the sweep went through the staging, in more rounds than
 * calls (the staging is small); direct: every call was a direct one, none staged, and this
 * rank's NIC wrote into its peers' device memory; ipc: only send/recv were staged. */
static void zg_check_path(zc_comm *c, uint32_t cases, uint32_t p2p) {
    const char *want = getenv("ZG_PATH");
    uint64_t calls, rounds, direct, bytes;
    zc_comm_gpu_staged(c, &calls, &rounds);
    zc_comm_gpu_direct(c, &direct, &bytes);
    if (zc_comm_rank(c) == 0)
        printf("path %s: %llu staged calls in %llu rounds, %llu direct calls putting %llu "
               "bytes (%u calls in all)\n", zc_comm_gpu_path(c), (unsigned long long)calls,
               (unsigned long long)rounds, (unsigned long long)direct,
               (unsigned long long)bytes, cases);
    if (!want) return;
    ZT_CHECK(strcmp(zc_comm_gpu_path(c), want) == 0);
    if (strcmp(want, "staged") == 0) ZT_CHECK(calls == cases && rounds > calls && direct == 0);
    else if (strcmp(want, "direct") == 0) ZT_CHECK(calls == 0 && direct == cases && bytes > 0);
    else ZT_CHECK(calls == p2p && direct == 0);
}

int zg_rank_collectives(void) {
    zg_need_device();
    /* Small scratch and one-shot limit: several rounds and both all_reduce algorithms. */
    zc_comm *c = zg_comm_from_env(32u << 10, 64u << 10);
    uint32_t n = zc_comm_size(c);
    zg_io io;
    zg_io_open(c, &io);
    uint8_t *dsend = io.dsend, *drecv = io.drecv, **in = io.in, *want = io.want, *got = io.got;
    static const size_t ar_counts[] = {1, 5000, 100003};
    uint32_t seed = 0, cases = 0;
    for (int dt = 0; dt < ZC_DTYPE_COUNT_; dt++)
        for (int op = 0; op < ZC_OP_COUNT_; op++)
            for (size_t ci = 0; ci < 3; ci++)
                for (int ip = 0; ip < 2; ip++, cases++) {
                    zg_case k = {0, (zc_dtype)dt, (zc_op)op, ar_counts[ci], 0, ip == 1};
                    zg_run_case(c, &k, seed++, dsend, drecv, in, want, got);
                }
    for (int kind = 1; kind < 8; kind++)
        for (int dt = 0; dt < ZC_DTYPE_COUNT_; dt++)
            for (int op = 0; op < ZC_OP_COUNT_; op++)
                for (int ip = 0; ip < 2; ip++) {
                    if (kind > 2 && op > 0) continue;      /* no op: once per dtype */
                    if (kind == 7 && ip) continue;          /* alltoall has no in-place form */
                    size_t count = (kind == 2 || kind == 7) ? 1001 : 4099;
                    zg_case k = {kind, (zc_dtype)dt, (zc_op)op, count, n - 1, ip == 1};
                    zg_run_case(c, &k, seed++, dsend, drecv, in, want, got);
                    cases++;
                }
    cases += zg_two_in_flight(c, seed++, dsend, drecv, in, want, got);
    uint32_t p2p = zg_send_recv_ring(c, &seed, dsend, drecv, in, got);
    cases += p2p;
    if (zc_comm_rank(c) == 0)
        printf("%u ranks: %u device collectives equal to the host reference\n", n, cases);
    zg_check_path(c, cases, p2p);
    zg_io_close(c, &io);
    return 0;
}

void gpu_collectives_match_host_reference_1_rank(void) { zg_run(1, "zg_rank_collectives"); }
void gpu_collectives_match_host_reference_2_ranks(void) {
    setenv("ZG_PATH", "ipc", 1);
    zg_run(2, "zg_rank_collectives");
}
void gpu_collectives_match_host_reference_4_ranks(void) { zg_run(4, "zg_rank_collectives"); }

/* ---- stream-ordered forms ---- */

static void zg_drive(zc_comm *c, void *s) {
    while (!zg_stream_done(s)) ZT_CHECK_COMM(c, zc_progress(c), ZC_OK);
}

/* Round k's results: all_reduce of (rank + 1 + k) and all_gather of every rank's input. */
static void zg_check_round(uint32_t n, int k, const int32_t *ar, const int32_t *ag, int N) {
    int32_t want = (int32_t)(n * (n + 1) / 2 + n * (uint32_t)k);
    if (ar[0] != want || ar[N - 1] != want) {
        char d[128];
        snprintf(d, sizeof d, "round %d: all_reduce gave %d and %d, expected %d", k, ar[0],
                 ar[N - 1], want);
        zt_fail(__FILE__, __LINE__, "round result", d);
    }
    for (uint32_t p = 0; p < n; p++)
        ZT_CHECK(ag[p * (uint32_t)N] == (int32_t)p + 1 + k &&
                 ag[p * (uint32_t)N + (uint32_t)N - 1] == ag[p * (uint32_t)N]);
}

/* Captured in global mode (what torch.cuda.graph uses): add 1, all_reduce, all_gather; the
 * graph replayed 50 times, rounds from + 1 on. */
static void zg_graph_rounds(zc_comm *c, void *s, int32_t *dsend, int32_t *drecv, int32_t *dag,
                            int32_t *host, int32_t *hag, int N, int from) {
    uint32_t n = zc_comm_size(c);
    zg_capture_begin(s, true);
    zg_add_i32(dsend, (size_t)N, 1, s);
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, dsend, drecv, (size_t)N, ZC_INT32, ZC_SUM, s), ZC_OK);
    ZT_CHECK_COMM(c, zc_allgather_stream(c, dsend, dag, (size_t)N, ZC_INT32, s), ZC_OK);
    void *g = zg_capture_end(s);
    ZT_CHECK(g != NULL);
    for (int k = from + 1; k <= from + 50; k++) {
        zg_graph_launch(g, s);
        zg_drive(c, s);
        zg_d2h(host, drecv, sizeof(int32_t) * (size_t)N);
        zg_d2h(hag, dag, sizeof(int32_t) * (size_t)N * n);
        zg_check_round(n, k, host, hag, N);
    }
    zg_graph_free(g);
}

/* Not captured: the same three calls enqueued again in each of 50 rounds. */
static void zg_plain_rounds(zc_comm *c, void *s, int32_t *dsend, int32_t *drecv, int32_t *dag,
                            int32_t *host, int32_t *hag, int N) {
    uint32_t n = zc_comm_size(c);
    for (int k = 1; k <= 50; k++) {
        zg_add_i32(dsend, (size_t)N, 1, s);
        ZT_CHECK_COMM(c, zc_allreduce_stream(c, dsend, drecv, (size_t)N, ZC_INT32, ZC_SUM, s),
                    ZC_OK);
        ZT_CHECK_COMM(c, zc_allgather_stream(c, dsend, dag, (size_t)N, ZC_INT32, s), ZC_OK);
        zg_drive(c, s);
        zg_d2h(host, drecv, sizeof(int32_t) * (size_t)N);
        zg_d2h(hag, dag, sizeof(int32_t) * (size_t)N * n);
        zg_check_round(n, k, host, hag, N);
    }
}

int zg_rank_stream_forms(void) {
    enum { N = 4096 };
    zg_need_device();
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    uint32_t n = zc_comm_size(c), me = zc_comm_rank(c);
    int32_t host[N], *hag = malloc(sizeof(int32_t) * N * n);
    int32_t *dsend = zg_dev_alloc(sizeof host), *drecv = zg_dev_alloc(sizeof host);
    int32_t *dag = zg_dev_alloc(sizeof host * n);
    zc_mem *m1, *m2, *m3;
    ZT_CHECK_COMM(c, zc_mem_register(c, dsend, sizeof host, ZC_MEM_CUDA, &m1), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, drecv, sizeof host, ZC_MEM_CUDA, &m2), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, dag, sizeof host * n, ZC_MEM_CUDA, &m3), ZC_OK);
    for (int i = 0; i < N; i++) host[i] = (int32_t)me + 1;
    zg_h2d(dsend, host, sizeof host);
    void *s = zg_stream_create();
    /* Ordered after the add on the same stream. */
    zg_add_i32(dsend, N, 0, s);
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, dsend, drecv, N, ZC_INT32, ZC_SUM, s), ZC_OK);
    ZT_CHECK_COMM(c, zc_barrier_stream(c, s), ZC_OK);
    zg_drive(c, s);
    zg_d2h(host, drecv, sizeof host);
    ZT_CHECK(host[0] == (int32_t)(n * (n + 1) / 2) && host[N - 1] == host[0]);
    zg_plain_rounds(c, s, dsend, drecv, dag, host, hag, N);
    zg_graph_rounds(c, s, dsend, drecv, dag, host, hag, N, 50);
    if (me == 0)
        printf("%u ranks: 100 rounds of add + all_reduce + all_gather on a stream correct (50 "
               "enqueued, 50 replays of a graph captured in global mode)\n", n);
    while (zc_comm_fini(c) == ZC_INVALID_STATE) /* the last replay's fin may be on its way */
        ZT_CHECK_COMM(c, zc_progress(c), ZC_OK);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    zg_dev_free(dag);
    zg_stream_destroy(s);
    free(hag);
    return 0;
}

void gpu_stream_forms_in_order_on_a_stream_100_rounds_2_ranks(void) {
    zg_run(2, "zg_rank_stream_forms");
}
void gpu_stream_forms_in_order_on_a_stream_100_rounds_4_ranks(void) {
    zg_run(4, "zg_rank_stream_forms");
}

/* ---- an injected fault (simulated device only) ---- */

/* Rank 1's third reduce faults (ZG_FAULT_AT: another operation): its all_reduce fails with the
 * device's sentence, every other rank's fails too (the communicator's failure reaches them),
 * and nobody hangs. On the IPC path the others are in the same call by then; on the staged path
 * (ZG_FAULT_AT set) a rank may still be finishing the call before, which fails instead. */
int zg_rank_fault(void) {
    enum { N = 1000 };
    uint32_t me = (uint32_t)atoi(getenv("ZC_RANK") ? getenv("ZC_RANK") : "0");
    const char *at = getenv("ZG_FAULT_AT"); /* the staged path copies instead of reducing */
    if (me == 1) setenv("ZC_GPU_SIM_FAULT", at ? at : "3", 1);
    setenv("ZC_TIMEOUT_MS", "10000", 1);
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    uint32_t n = zc_comm_size(c);
    float *dsend = zg_dev_alloc(N * 4), *drecv = zg_dev_alloc(N * 4), host[N];
    zc_mem *m1, *m2;
    ZT_CHECK_COMM(c, zc_mem_register(c, dsend, N * 4, ZC_MEM_CUDA, &m1), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, drecv, N * 4, ZC_MEM_CUDA, &m2), ZC_OK);
    for (int i = 0; i < N; i++) host[i] = (float)me;
    zg_h2d(dsend, host, sizeof host);
    zc_req req;
    zc_status st = ZC_OK;
    int k;
    double t0 = zt_now_s();
    for (k = 0; k < 3 && st == ZC_OK; k++) {
        t0 = zt_now_s();
        st = zg_wait(c, zc_allreduce(c, dsend, drecv, N, ZC_FLOAT32, ZC_SUM, &req), &req);
        if (st != ZC_OK) break;
        zg_d2h(host, drecv, sizeof host);
        ZT_CHECK(host[0] == (float)(n * (n - 1) / 2) && host[N - 1] == host[0]);
    }
    double took = zt_now_s() - t0;
    const char *why = zc_comm_error_text(c);
    printf("rank %u: call %d: %s after %.2f s: %s\n", me, k, zc_status_name(st), took, why);
    ZT_CHECK(st != ZC_OK && why[0] != '\0');
    ZT_CHECK(k == 2 || (at && me != 1 && k == 1));
    if (me == 1) ZT_CHECK(st == ZC_GPU && strstr(why, "simulated fault") != NULL);
    else if (!at) ZT_CHECK(strstr(why, "called zc_allreduce") != NULL); /* its call was found */
    else ZT_CHECK(st == ZC_GPU && strstr(why, "rank 1 detected ZC_GPU") != NULL);
    ZT_CHECK(took < 8.0); /* the deadline is 10 s: seen before it, not by it */
    (void)zc_comm_fini(c);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    return 0;
}

/* Stream-ordered calls through a fault: rank 1's first reduce faults inside a stream-ordered
 * all_reduce, which is followed on the same stream by a barrier and a second all_reduce. Every
 * rank's stream must still finish (each call's done flag written: the running call's when its
 * request ends with the failure, the later ones' when their stream reaches them on the failed
 * communicator) long before the deadline, with the failure's status on every rank; then a new
 * stream call is refused with it, and the stream slots are free again at fini. */
int zg_rank_stream_fault(void) {
    enum { N = 512 };
    uint32_t me = (uint32_t)atoi(getenv("ZC_RANK") ? getenv("ZC_RANK") : "0");
    if (me == 1) setenv("ZC_GPU_SIM_FAULT", "1", 1);
    setenv("ZC_TIMEOUT_MS", "10000", 1);
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    float *dsend = zg_dev_alloc(N * 4), *drecv = zg_dev_alloc(N * 4);
    zc_mem *m1, *m2;
    ZT_CHECK_COMM(c, zc_mem_register(c, dsend, N * 4, ZC_MEM_CUDA, &m1), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, drecv, N * 4, ZC_MEM_CUDA, &m2), ZC_OK);
    void *s = zg_stream_create();
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, dsend, drecv, N, ZC_FLOAT32, ZC_SUM, s), ZC_OK);
    ZT_CHECK_COMM(c, zc_barrier_stream(c, s), ZC_OK);
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, dsend, drecv, N, ZC_FLOAT32, ZC_SUM, s), ZC_OK);
    double t0 = zt_now_s();
    zc_status st = ZC_OK;
    while ((!zg_stream_done(s) || st == ZC_OK) && zt_now_s() - t0 < 8.0) {
        zc_status p = zc_progress(c);
        if (p != ZC_OK) st = p;
    }
    double took = zt_now_s() - t0;
    printf("rank %u: stream finished %s after %.2f s, %s: %s\n", me,
           zg_stream_done(s) ? "" : "NOT", took, zc_status_name(st), zc_comm_error_text(c));
    ZT_CHECK(zg_stream_done(s)); /* no caller's stream hangs on a failed communicator */
    ZT_CHECK(st != ZC_OK && took < 8.0);
    if (me == 1) ZT_CHECK(st == ZC_GPU && strstr(zc_comm_error_text(c), "simulated fault"));
    ZT_CHECK_COMM(c, zc_barrier_stream(c, s), st);
    ZT_CHECK(zg_stream_done(s)); /* refused: nothing was enqueued */
    (void)zc_comm_fini(c);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    zg_stream_destroy(s);
    return 0;
}

/* ---- a peer that leaves or stalls: device requests under the engine's deadline and liveness
 * checks ---- */

/* ZC_RANK_ACT: "exit" (rank 1 leaves after one all_reduce) or "stall" (rank 1 sleeps past
 * rank 0's 1.5 s deadline). Rank 0's second device all_reduce must fail with the right status. */
int zg_rank_peer_trouble(void) {
    enum { N = 256 };
    const char *act = getenv("ZG_ACT") ? getenv("ZG_ACT") : "exit";
    bool stall = strcmp(act, "stall") == 0;
    setenv("ZC_TIMEOUT_MS", stall ? "1500" : "20000", 1);
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    uint32_t me = zc_comm_rank(c);
    float *dsend, *drecv;
    zg_register_pair(c, N * 4, (void **)&dsend, (void **)&drecv);
    zc_req req;
    ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, dsend, drecv, N, ZC_FLOAT32, ZC_SUM, &req), &req),
                ZC_OK);
    if (me == 1) {
        if (!stall) { /* gone without a word (rank 0's mappings of its memory stay) */
            zg_dev_free(dsend);
            zg_dev_free(drecv);
            _exit(0);
        }
        usleep(3000000);
        (void)zc_comm_fini(c);
        zg_dev_free(dsend);
        zg_dev_free(drecv);
        return 0;
    }
    double t0 = zt_now_s();
    zc_status st = zg_wait(c, zc_allreduce(c, dsend, drecv, N, ZC_FLOAT32, ZC_SUM, &req), &req);
    double took = zt_now_s() - t0;
    printf("rank 0: %s after %.2f s: %s\n", zc_status_name(st), took, zc_comm_error_text(c));
    if (stall) {
        ZT_CHECK(st == ZC_TIMED_OUT && strstr(zc_comm_error_text(c), "timed out") != NULL);
        ZT_CHECK(took > 1.4 && took < 3.0);
    } else {
        ZT_CHECK(st == ZC_PEER_LOST && strstr(zc_comm_error_text(c), "rank 1") != NULL);
        ZT_CHECK(took < 5.0); /* seen by liveness, long before the 20 s deadline */
    }
    (void)zc_comm_fini(c);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    return 0;
}

static void zg_peer_trouble(const char *act) {
    zg_need_device();
    setenv("ZG_ACT", act, 1);
    int rc = zt_run_ranks(2, "zg_rank_peer_trouble", 60, NULL, NULL, 0);
    ZT_CHECK(rc == 0);
}

void gpu_dead_peer_fails_device_allreduce_with_peer_lost_2_ranks(void) { zg_peer_trouble("exit"); }
void gpu_stalled_peer_times_device_allreduce_out_2_ranks(void) { zg_peer_trouble("stall"); }

/* Rank 1 skips a registration that rank 0 makes: rank 0's registration exchange meets rank 1's
 * all_reduce, and both fail with ZC_MISMATCH and a sentence instead of hanging. */
int zg_rank_register_mismatch(void) {
    enum { N = 64 };
    setenv("ZC_TIMEOUT_MS", "20000", 1);
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    uint32_t me = zc_comm_rank(c);
    float *dev = zg_dev_alloc(N * 4), host[N] = {0};
    zc_mem *m;
    zc_req req;
    zc_status st;
    if (me == 0) {
        ZT_CHECK_COMM(c, zc_mem_register(c, dev, N * 4, ZC_MEM_CUDA, &m), ZC_OK);
        st = zg_wait(c, zc_allreduce(c, host, host, N, ZC_FLOAT32, ZC_SUM, &req), &req);
    } else {
        st = zg_wait(c, zc_allreduce(c, host, host, N, ZC_FLOAT32, ZC_SUM, &req), &req);
    }
    printf("rank %u: %s: %s\n", me, zc_status_name(st), zc_comm_error_text(c));
    /* Rank 0's sentence names its registration whoever detected the mismatch; rank 1's names
     * it when rank 1 detected it, else it is rank 0's report (which carries no call). */
    const char *why = zc_comm_error_text(c);
    ZT_CHECK(st == ZC_MISMATCH);
    ZT_CHECK(strstr(why, "zc_mem_register") != NULL ||
             (me == 1 && strstr(why, "rank 0 detected ZC_MISMATCH at sequence 0") != NULL));
    (void)zc_comm_fini(c);
    zg_dev_free(dev);
    return 0;
}

void gpu_registration_order_mismatch_fails_both_ranks_2_ranks(void) {
    zg_need_device();
    ZT_CHECK(zt_run_ranks(2, "zg_rank_register_mismatch", 60, NULL, NULL, 0) == 0);
}

void gpu_injected_device_fault_fails_every_rank_with_a_sentence_2_ranks(void) {
    if (!zg_sim()) zt_skip("fault injection is the simulated device's (ZC_GPU_SIM_FAULT)");
    int rc = zt_run_ranks(2, "zg_rank_fault", 60, NULL, NULL, 0);
    ZT_CHECK(rc == 0);
}
void gpu_stream_calls_finish_on_their_stream_through_a_device_fault_3_ranks(void) {
    if (!zg_sim()) zt_skip("fault injection is the simulated device's (ZC_GPU_SIM_FAULT)");
    ZT_CHECK(zt_run_ranks(3, "zg_rank_stream_fault", 60, NULL, NULL, 0) == 0);
}
void gpu_injected_device_fault_fails_every_rank_with_a_sentence_4_ranks(void) {
    if (!zg_sim()) zt_skip("fault injection is the simulated device's (ZC_GPU_SIM_FAULT)");
    int rc = zt_run_ranks(4, "zg_rank_fault", 60, NULL, NULL, 0);
    ZT_CHECK(rc == 0);
}

/* ---- the staged path on one host (sched_stage.c; cfg->gpu_path staged over shm) ---- */

/* The whole sweep staged through 16 KiB of host staging: many rounds per call. */
static void zg_staged(uint32_t n) {
    setenv("ZC_GPU_PATH", "staged", 1);
    setenv("ZC_GPU_STAGE_BYTES", "16384", 1);
    setenv("ZG_PATH", "staged", 1);
    zg_run(n, "zg_rank_collectives");
}
void gpu_staged_collectives_match_host_reference_2_ranks(void) { zg_staged(2); }
void gpu_staged_collectives_match_host_reference_3_ranks(void) { zg_staged(3); }

/* Host 8-byte all_reduces (their lines: the host family's line step) alternate with staged
 * device all_reduces of 3 rounds, which run the host family's chunk step on the same request
 * slots: each is correct (a staged call never inherits a host call's line step). */
int zg_rank_line_then_staged(void) {
    enum { N = 10000 };
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    uint32_t me = zc_comm_rank(c), n = zc_comm_size(c);
    float *dsend = zg_dev_alloc(N * 4), *drecv = zg_dev_alloc(N * 4), *host = malloc(N * 4);
    zc_mem *m1, *m2;
    ZT_CHECK_COMM(c, zc_mem_register(c, dsend, N * 4, ZC_MEM_CUDA, &m1), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, drecv, N * 4, ZC_MEM_CUDA, &m2), ZC_OK);
    for (int i = 0; i < N; i++) host[i] = (float)(me + 1u);
    zg_h2d(dsend, host, N * 4);
    for (int k = 0; k < 8; k++) {
        float hin[2] = {(float)me, 1.0f}, hout[2];
        zc_req req;
        ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, hin, hout, 2, ZC_FLOAT32, ZC_SUM, &req),
                                 &req), ZC_OK);
        ZT_CHECK(hout[0] == (float)(n * (n - 1) / 2) && hout[1] == (float)n);
        ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, dsend, drecv, N, ZC_FLOAT32, ZC_SUM, &req),
                                 &req), ZC_OK);
        zg_d2h(host, drecv, N * 4);
        ZT_CHECK(host[0] == (float)(n * (n + 1) / 2) && host[N - 1] == host[0]);
    }
    ZT_CHECK(strcmp(zc_comm_gpu_path(c), "staged") == 0);
    (void)zc_comm_fini(c);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    free(host);
    return 0;
}

void gpu_staged_calls_after_host_line_calls_stay_correct_2_ranks(void) {
    setenv("ZC_GPU_PATH", "staged", 1);
    setenv("ZC_GPU_STAGE_BYTES", "16384", 1);
    zg_run(2, "zg_rank_line_then_staged");
}

/* Rank 1's fifth device operation faults: the third all_reduce's device-to-host copy (each
 * staged all_reduce of one round is two copies). */
void gpu_staged_injected_device_fault_fails_every_rank_with_a_sentence_2_ranks(void) {
    if (!zg_sim()) zt_skip("fault injection is the simulated device's (ZC_GPU_SIM_FAULT)");
    setenv("ZC_GPU_PATH", "staged", 1);
    setenv("ZG_FAULT_AT", "5", 1);
    ZT_CHECK(zt_run_ranks(2, "zg_rank_fault", 60, NULL, NULL, 0) == 0);
}

void gpu_staged_dead_peer_fails_device_allreduce_with_peer_lost_2_ranks(void) {
    setenv("ZC_GPU_PATH", "staged", 1);
    zg_peer_trouble("exit");
}

/* ---- the path over a wire that writes into memory (transport_ib; tests/rxe/suite.sh) ---- */

/* ZG_NO_RDMA_RANK (when set) names a rank whose simulated device takes no NIC writes. With
 * gpu_path auto every rank must report ZG_PATH (staged when such a rank is there, direct
 * otherwise) and run device all_reduces on it equal to the reference; with ZC_GPU_PATH=direct
 * and such a rank, init must fail on every rank with ZC_UNSUPPORTED and a sentence naming it. */
int zg_rank_path_choice(void) {
    enum { N = 3000 };
    uint32_t me = (uint32_t)atoi(getenv("ZC_RANK") ? getenv("ZC_RANK") : "0");
    const char *bad = getenv("ZG_NO_RDMA_RANK"), *path = getenv("ZC_GPU_PATH");
    if (bad && (uint32_t)atoi(bad) == me) setenv("ZC_GPU_SIM_NO_RDMA", "1", 1);
    zc_comm *c = NULL;
    zc_status st = zg_comm_init_env(8u << 10, 8u << 10, &c);
    if (bad && path && strcmp(path, "direct") == 0) {
        const char *why = zc_init_error_text();
        char name[32];
        snprintf(name, sizeof name, "rank %s", bad);
        printf("rank %u: init %s: %s\n", me, zc_status_name(st), why);
        ZT_CHECK(st == ZC_UNSUPPORTED && strstr(why, "gpu_path is direct") && strstr(why, name));
        ZT_CHECK(strstr(why, "GPUDirect RDMA") != NULL);
        return 0;
    }
    if (st != ZC_OK) zt_fail(__FILE__, __LINE__, "zc_comm_init", zc_init_error_text());
    uint32_t n = zc_comm_size(c);
    int32_t *dsend = zg_dev_alloc(N * 4), *drecv = zg_dev_alloc(N * 4), host[N];
    zc_mem *m1, *m2;
    ZT_CHECK_COMM(c, zc_mem_register(c, dsend, N * 4, ZC_MEM_CUDA, &m1), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, drecv, N * 4, ZC_MEM_CUDA, &m2), ZC_OK);
    for (uint32_t k = 1; k <= 4; k++) { /* 12 KiB: RS+AG in rounds on the direct path */
        for (int i = 0; i < N; i++) host[i] = (int32_t)(k * me + (uint32_t)i);
        zg_h2d(dsend, host, sizeof host);
        zc_req req;
        ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, dsend, drecv, N, ZC_INT32, ZC_SUM, &req),
                               &req), ZC_OK);
        zg_d2h(host, drecv, sizeof host);
        for (int i = 0; i < N; i++)
            ZT_CHECK(host[i] == (int32_t)(k * n * (n - 1) / 2 + n * (uint32_t)i));
    }
    uint64_t staged, rounds, direct, bytes;
    zc_comm_gpu_staged(c, &staged, &rounds);
    zc_comm_gpu_direct(c, &direct, &bytes);
    printf("rank %u: path %s: %llu staged and %llu direct calls\n", me, zc_comm_gpu_path(c),
           (unsigned long long)staged, (unsigned long long)direct);
    const char *want = getenv("ZG_PATH");
    ZT_CHECK(want && strcmp(zc_comm_gpu_path(c), want) == 0);
    ZT_CHECK(strcmp(want, "direct") == 0 ? direct == 4 && staged == 0 : staged == 4 && !direct);
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    return 0;
}

/* One device all_reduce of N int32 on c (registered buffers d, e) of every member's k * rank +
 * i, checked against the sum over the members (their parent ranks: ranks[]). */
static void zg_sum_check(zc_comm *c, int32_t *d, int32_t *e, int32_t k, uint32_t me,
                         const uint32_t *ranks, uint32_t n) {
    enum { N = 3000 };
    int32_t host[N], want = 0;
    for (uint32_t r = 0; r < n; r++) want += k * (int32_t)ranks[r];
    for (int i = 0; i < N; i++) host[i] = k * (int32_t)me + i;
    zg_h2d(d, host, sizeof host);
    zc_req req;
    ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, d, e, N, ZC_INT32, ZC_SUM, &req), &req), ZC_OK);
    zg_d2h(host, e, sizeof host);
    for (int i = 0; i < N; i++) ZT_CHECK(host[i] == want + (int32_t)n * i);
}

/* A split on a wire that writes into memory: 4 ranks split by parity, each child deciding its
 * path from its members' landing records (gathered over the parent); each child and then the
 * parent run device all_reduces on the path ZG_PATH names, equal to the reference. */
int zg_rank_split(void) {
    enum { N = 3000 };
    zc_comm *parent = zg_comm_from_env(8u << 10, 8u << 10), *child = NULL;
    uint32_t me = zc_comm_rank(parent), n = zc_comm_size(parent), ranks[64], m = 0;
    void *arena = malloc(64u << 20);
    ZT_CHECK(arena != NULL);
    ZT_CHECK_COMM(parent, zc_comm_split(parent, (int)(me % 2), (int)me, arena, 64u << 20,
                                      &child), ZC_OK);
    ZT_CHECK(child != NULL && zc_comm_size(child) == (n + 1 - me % 2) / 2);
    for (uint32_t r = me % 2; r < n; r += 2) ranks[m++] = r;
    int32_t *d[4];
    zc_mem *mem;
    for (int i = 0; i < 4; i++) {
        d[i] = zg_dev_alloc(N * 4);
        ZT_CHECK_COMM(i < 2 ? child : parent,
                    zc_mem_register(i < 2 ? child : parent, d[i], N * 4, ZC_MEM_CUDA, &mem),
                    ZC_OK);
    }
    for (int32_t k = 1; k <= 3; k++) zg_sum_check(child, d[0], d[1], k, me, ranks, m);
    for (uint32_t r = 0; r < n; r++) ranks[r] = r;
    zg_sum_check(parent, d[2], d[3], 5, me, ranks, n);
    uint64_t cd, pd;
    zc_comm_gpu_direct(child, &cd, NULL);
    zc_comm_gpu_direct(parent, &pd, NULL);
    printf("rank %u: child of %u ranks on path %s (%llu direct calls), parent on %s\n", me, m,
           zc_comm_gpu_path(child), (unsigned long long)cd, zc_comm_gpu_path(parent));
    const char *want = getenv("ZG_PATH");
    ZT_CHECK(want && strcmp(zc_comm_gpu_path(child), want) == 0 &&
             strcmp(zc_comm_gpu_path(parent), want) == 0);
    if (strcmp(want, "direct") == 0) ZT_CHECK(cd == 3 && pd == 1);
    ZT_CHECK_COMM(child, zc_comm_fini(child), ZC_OK);
    ZT_CHECK_COMM(parent, zc_comm_fini(parent), ZC_OK);
    for (int i = 0; i < 4; i++) zg_dev_free(d[i]);
    free(arena);
    return 0;
}

/* Ranks that call different device collectives (rank 0 all_reduce, the others all_gather):
 * every rank fails with ZC_MISMATCH and a sentence naming its call well before the deadline,
 * and no user buffer was written by a peer (on the direct path puts into a peer's recv wait for
 * its READY, which a mismatched peer never sends). */
int zg_rank_mismatch(void) {
    enum { N = 1000 };
    setenv("ZC_TIMEOUT_MS", "20000", 1);
    zc_comm *c = zg_comm_from_env(64u << 10, 8u << 10);
    uint32_t me = zc_comm_rank(c), n = zc_comm_size(c);
    int32_t *dsend = zg_dev_alloc(N * 4), *drecv = zg_dev_alloc(64u * N * 4), host[N];
    zc_mem *m1, *m2;
    ZT_CHECK_COMM(c, zc_mem_register(c, dsend, N * 4, ZC_MEM_CUDA, &m1), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, drecv, 64u * N * 4, ZC_MEM_CUDA, &m2), ZC_OK);
    for (int i = 0; i < N; i++) host[i] = 7;
    zg_h2d(dsend, host, sizeof host);
    zg_dev_memset(drecv, 0x5a, (size_t)n * N * 4);
    zc_req req;
    double t0 = zt_now_s();
    zc_status st = me == 0 ? zc_allreduce(c, dsend, drecv, N, ZC_INT32, ZC_SUM, &req)
                           : zc_allgather(c, dsend, drecv, N, ZC_INT32, &req);
    st = zg_wait(c, st, &req);
    double took = zt_now_s() - t0;
    const char *why = zc_comm_error_text(c);
    printf("rank %u: %s after %.2f s: %s\n", me, zc_status_name(st), took, why);
    ZT_CHECK(st == ZC_MISMATCH && took < 10.0);
    ZT_CHECK(strstr(why, me == 0 ? "zc_allreduce" : "zc_allgather") != NULL);
    uint8_t *got = malloc((size_t)n * N * 4);
    zg_d2h(got, drecv, (size_t)n * N * 4);
    for (size_t i = 0; i < (size_t)n * N * 4; i++) ZT_CHECK(got[i] == 0x5a);
    free(got);
    (void)zc_comm_fini(c);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    return 0;
}

/* A job across hosts, ZG_PER_HOST ranks to a host (tests/rxe/suite.sh): the parent runs over
 * ib and zc_comm_node numbers the hosts; a split by it gives each host a child on shared memory
 * (device memory on the ipc path), a split of the hosts' lowest ranks a child across hosts over
 * ib (the direct path); device all_reduces on each child and on the parent equal the
 * reference. */
int zg_rank_mixed(void) {
    enum { N = 3000 };
    zc_comm *parent = zg_comm_from_env(8u << 10, 8u << 10), *host = NULL, *cross = NULL;
    uint32_t me = zc_comm_rank(parent), n = zc_comm_size(parent), ranks[64], m = 0;
    uint32_t per = (uint32_t)atoi(getenv("ZG_PER_HOST") ? getenv("ZG_PER_HOST") : "1");
    uint32_t node = zc_comm_node(parent);
    ZT_CHECK(per > 0 && node == me / per * per && strcmp(zc_comm_transport(parent), "ib") == 0);
    void *a1 = malloc(64u << 20), *a2 = malloc(64u << 20);
    ZT_CHECK(a1 && a2);
    ZT_CHECK_COMM(parent, zc_comm_split(parent, (int)node, (int)me, a1, 64u << 20, &host), ZC_OK);
    ZT_CHECK_COMM(parent, zc_comm_split(parent, node == me ? 0 : -1, (int)me, a2, 64u << 20,
                                      &cross), ZC_OK);
    ZT_CHECK(host && zc_comm_node(host) == 0 && strcmp(zc_comm_transport(host), "shm") == 0);
    ZT_CHECK(strcmp(zc_comm_gpu_path(host), "ipc") == 0);
    ZT_CHECK((cross != NULL) == (node == me));
    int32_t *d[6];
    zc_mem *mem;
    zc_comm *on[6] = {host, host, parent, parent, cross, cross};
    for (int i = 0; i < 6; i++) {
        d[i] = zg_dev_alloc(N * 4);
        if (on[i]) ZT_CHECK_COMM(on[i], zc_mem_register(on[i], d[i], N * 4, ZC_MEM_CUDA, &mem),
                               ZC_OK);
    }
    for (uint32_t r = node; r < n && r < node + per; r++) ranks[m++] = r;
    zg_sum_check(host, d[0], d[1], 2, me, ranks, m);
    int64_t mine = me + 1, sum = 0; /* host memory on the shared-memory child too */
    zc_req req;
    ZT_CHECK_COMM(host, zg_wait(host, zc_allreduce(host, &mine, &sum, 1, ZC_INT64, ZC_SUM, &req),
                              &req), ZC_OK);
    ZT_CHECK(sum == (int64_t)(m * (node + 1) + m * (m - 1) / 2));
    if (cross) {
        ZT_CHECK(strcmp(zc_comm_transport(cross), "ib") == 0);
        ZT_CHECK(strcmp(zc_comm_gpu_path(cross), "direct") == 0);
        for (m = 0; m * per < n; m++) ranks[m] = m * per;
        zg_sum_check(cross, d[4], d[5], 3, me, ranks, m);
    }
    for (uint32_t r = 0; r < n; r++) ranks[r] = r;
    zg_sum_check(parent, d[2], d[3], 5, me, ranks, n);
    printf("rank %u: host %u: host child on %s (%s path), %s, parent on %s (%s path)\n", me,
           node, zc_comm_transport(host), zc_comm_gpu_path(host),
           cross ? "in the cross-host child on ib" : "not across", zc_comm_transport(parent),
           zc_comm_gpu_path(parent));
    if (cross) ZT_CHECK_COMM(cross, zc_comm_fini(cross), ZC_OK);
    ZT_CHECK_COMM(host, zc_comm_fini(host), ZC_OK);
    ZT_CHECK_COMM(parent, zc_comm_fini(parent), ZC_OK);
    for (int i = 0; i < 6; i++) zg_dev_free(d[i]);
    free(a1);
    free(a2);
    return 0;
}

/* One 1 MiB float32 device all_reduce that must fail (tests/rxe/suite.sh runs it under a
 * wrong rkey): prints "zg-result: rank R: STATUS: sentence" and exits 0 when it failed. */
int zg_rank_must_fail(void) {
    enum { N = 1 << 18 };
    setenv("ZC_TIMEOUT_MS", "30000", 1);
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    float *dsend, *drecv;
    zg_register_pair(c, N * 4, (void **)&dsend, (void **)&drecv);
    zc_req req;
    zc_status st = zg_wait(c, zc_allreduce(c, dsend, drecv, N, ZC_FLOAT32, ZC_SUM, &req), &req);
    printf("zg-result: rank %u: %s: %s\n", zc_comm_rank(c), zc_status_name(st),
           zc_comm_error_text(c));
    (void)zc_comm_fini(c);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    return st == ZC_OK;
}

/* ---- latency ---- */

static int zg_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int zg_rank_latency(void) {
    enum { ITERS = 1000 };
    static double lat[ITERS];
    static const size_t sizes[] = {8, 64u << 10};
    zg_need_device();
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    uint8_t *dsend, *drecv;
    zg_register_pair(c, 64u << 10, (void **)&dsend, (void **)&drecv);
    zg_dev_memset(dsend, 0, 64u << 10);
    for (size_t si = 0; si < 2; si++) {
        zc_req req;
        size_t count = sizes[si] / 4;
        for (int i = -50; i < ITERS; i++) {
            double t0 = zt_now_s();
            ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, dsend, drecv, count, ZC_FLOAT32, ZC_SUM,
                                                   &req), &req), ZC_OK);
            if (i >= 0) lat[i] = (zt_now_s() - t0) * 1e6;
        }
        qsort(lat, ITERS, sizeof lat[0], zg_cmp);
        if (zc_comm_rank(c) == 0)
            printf("one-shot allreduce float32 %zu B on %u ranks: p50 %.1f us, p99 %.1f us\n",
                   sizes[si], zc_comm_size(c), lat[ITERS / 2], lat[ITERS * 99 / 100]);
    }
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    return 0;
}

/* A benchmark rank program, not a test (run it as `zcrun -n N zcgputest --rank zg_rank_sweep`):
 * float32 SUM all_reduce on device buffers of 8 B, 64 KiB, 1 MiB, 64 MiB and 1 GiB (up to
 * ZG_SWEEP_MAX bytes), each
 * call timed alone to its completion on the host; rank 0 prints p50, mean and max microseconds,
 * the bus bandwidth at p50 (2 (n-1)/n x bytes / time, as nccl-tests count it) and, beside it, one
 * device-to-device cudaMemcpy of the same bytes (bytes / time: the copy reads and writes each). */
int zg_rank_sweep(void) {
    enum { MAXIT = 1000 };
    static double lat[MAXIT];
    const char *e = getenv("ZG_SWEEP_MAX");
    size_t max = e ? (size_t)strtoull(e, NULL, 0) : (size_t)1 << 30;
    zg_need_device();
    zc_comm *c = zg_comm_from_env(64u << 20, 256u << 10);
    uint32_t n = zc_comm_size(c);
    uint8_t *dsend, *drecv;
    zg_register_pair(c, max, (void **)&dsend, (void **)&drecv);
    zg_dev_memset(dsend, 0, max);
    if (zc_comm_rank(c) == 0)
        printf("| bytes | ranks | p50 us | mean us | max us | busbw GB/s | d2d copy GB/s |\n"
               "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    static const size_t sizes[] = {8, 64u << 10, 1u << 20, 64u << 20, 1u << 30};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0] && sizes[si] <= max; si++) {
        size_t bytes = sizes[si];
        zc_req req;
        int iters = bytes <= (1u << 20) ? MAXIT : bytes <= (64u << 20) ? 50 : 10;
        for (int i = -(iters / 10 + 2); i < iters; i++) {
            double t0 = zt_now_s();
            ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, dsend, drecv, bytes / 4, ZC_FLOAT32,
                                                   ZC_SUM, &req), &req), ZC_OK);
            if (i >= 0) lat[i] = (zt_now_s() - t0) * 1e6;
        }
        double sum = 0;
        for (int i = 0; i < iters; i++) sum += lat[i];
        qsort(lat, (size_t)iters, sizeof lat[0], zg_cmp);
        ZT_CHECK_COMM(c, zg_wait(c, zc_barrier(c, &req), &req), ZC_OK);
        if (zc_comm_rank(c) == 0) {
            double best = 1e30;
            for (int k = 0; k < 5; k++) {
                double t0 = zt_now_s();
                zg_d2d(drecv, dsend, bytes);
                double t = zt_now_s() - t0;
                if (t < best) best = t;
            }
            double p50 = lat[iters / 2];
            printf("| %zu | %u | %.1f | %.1f | %.1f | %.2f | %.1f |\n", bytes, n, p50,
                   sum / iters, lat[iters - 1],
                   2.0 * (n - 1) / n * (double)bytes / (p50 * 1e-6) / 1e9,
                   (double)bytes / best / 1e9);
            fflush(stdout);
        }
        ZT_CHECK_COMM(c, zg_wait(c, zc_barrier(c, &req), &req), ZC_OK);
    }
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    zg_dev_free(dsend);
    zg_dev_free(drecv);
    return 0;
}

void gpu_oneshot_allreduce_latency_8b_and_64kib_2_ranks(void) {
    if (zg_sim()) zt_skip("latency is a GPU's to measure, not the simulated device's");
    zg_run(2, "zg_rank_latency");
}
