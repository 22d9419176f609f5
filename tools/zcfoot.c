/* zcfoot: what a communicator costs per rank before it is made (zc_comm_footprint), one row per
 * job size, and the in-process baseline of a small all_reduce at many ranks.
 *   zcfoot [--ranks N,N,...] [--per-host K] [--transport auto|shm|ib|inproc] [--slot-bytes B]
 *          [--slots S] [--qps Q] [--no-gpu] [--raw]
 *     one row per N: hosts, wire, arena, shared, registered, device, peers, qps, cq entries
 *     and the host memory in all (arena + shared + registered); a size init refuses prints
 *     "refused:" and the sentence. --raw: bytes as exact integers.
 *   zcfoot --time [--ranks N,...] [--slot-bytes B] [--slots S] [--reps R] [--no-gpu]
 *     [--log-min-ranks K] (cfg->log_min_ranks: 0 = one-shot at every n, 1 = recursive doubling)
 *     [--overlay K] (both forms: cfg->overlay_min_ranks, overlay mode from K ranks; log_min_ranks
 *     1 unless it is 1..K)
 *     [--coll allreduce|alltoall|gather|scatter]
 *     per N: an in-process group (zc_comm_init_inproc) and the CPU time of one 8-byte float32
 *     all_reduce over all ranks driven by this thread (issue on every rank, then zc_wait on
 *     each), median and minimum of R calls after one warm-up, with the arena per rank; --coll
 *     times an all_to_all, gather or scatter (root 0) of one int64 per rank and block instead.
 * A tool, not library code: it uses libc directly. */
#define _GNU_SOURCE

#include "zcoll.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ZF_MAX_SIZES 32
#define ZF_MAX_REPS 101

typedef struct zf_opts {
    uint32_t ranks[ZF_MAX_SIZES], nsizes, per_host, slot_bytes, slots, qps, reps, log_min;
    uint32_t overlay; /* cfg->overlay_min_ranks */
    zc_transport transport;
    bool time, raw, no_gpu;
    const char *coll; /* --time: "allreduce", "alltoall", "gather" or "scatter" */
} zf_opts;

static void zf_usage(const char *why) {
    FILE *f = why ? stderr : stdout;
    if (why) fprintf(f, "zcfoot: %s\n", why);
    fprintf(f, "usage: zcfoot [--ranks N,N,...] [--per-host K] "
            "[--transport auto|shm|ib|inproc] [--slot-bytes B] [--slots S] [--qps Q] "
            "[--no-gpu] [--raw]\n       zcfoot --time [--ranks N,...] [--slot-bytes B] "
            "[--slots S] [--reps R] [--no-gpu] [--log-min-ranks K]\n"
            "       [--coll allreduce|alltoall|gather|scatter]\n       both: [--overlay K]\n");
    exit(why ? 2 : 0);
}

static uint32_t zf_u32(const char *s, const char *what) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || v > UINT32_MAX) zf_usage(what);
    return (uint32_t)v;
}

static void zf_ranks(zf_opts *o, const char *s) {
    char buf[512], *save = NULL;
    snprintf(buf, sizeof buf, "%s", s);
    o->nsizes = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == ZF_MAX_SIZES) zf_usage("--ranks: at most 32 sizes");
        o->ranks[o->nsizes] = zf_u32(t, "--ranks: a list of positive integers");
        if (!o->ranks[o->nsizes++]) zf_usage("--ranks: a list of positive integers");
    }
    if (!o->nsizes) zf_usage("--ranks needs at least one size");
}

static zc_transport zf_transport(const char *s) {
    if (strcmp(s, "auto") == 0) return ZC_TRANSPORT_AUTO;
    if (strcmp(s, "shm") == 0) return ZC_TRANSPORT_SHM;
    if (strcmp(s, "ib") == 0) return ZC_TRANSPORT_IB;
    if (strcmp(s, "inproc") == 0) return ZC_TRANSPORT_INPROC;
    zf_usage("--transport: auto, shm, ib or inproc");
    return ZC_TRANSPORT_AUTO;
}

static void zf_parse(zf_opts *o, int argc, char **argv) {
    static const char defaults[] = "8,64,512,1024,4096,65536";
    *o = (zf_opts){.per_host = 8, .slot_bytes = ZC_DEFAULT_SLOT_BYTES, .slots = ZC_DEFAULT_SLOTS,
                   .qps = ZC_DEFAULT_IB_QPS_PER_PEER, .reps = 9, .transport = ZC_TRANSPORT_AUTO,
                   .log_min = ZC_DEFAULT_LOG_MIN_RANKS, .coll = "allreduce"};
    zf_ranks(o, defaults);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool value = true;
        if (strcmp(a, "--time") == 0) o->time = true, value = false;
        else if (strcmp(a, "--raw") == 0) o->raw = true, value = false;
        else if (strcmp(a, "--no-gpu") == 0) o->no_gpu = true, value = false;
        else if (!v) zf_usage(strncmp(a, "--", 2) == 0 ? "an option needs a value"
                                                        : "not an option");
        else if (strcmp(a, "--ranks") == 0) zf_ranks(o, v);
        else if (strcmp(a, "--per-host") == 0) o->per_host = zf_u32(v, "--per-host: a number");
        else if (strcmp(a, "--transport") == 0) o->transport = zf_transport(v);
        else if (strcmp(a, "--slot-bytes") == 0) o->slot_bytes = zf_u32(v, "--slot-bytes: bytes");
        else if (strcmp(a, "--slots") == 0) o->slots = zf_u32(v, "--slots: a number");
        else if (strcmp(a, "--qps") == 0) o->qps = zf_u32(v, "--qps: a number");
        else if (strcmp(a, "--reps") == 0) o->reps = zf_u32(v, "--reps: a number");
        else if (strcmp(a, "--log-min-ranks") == 0) o->log_min = zf_u32(v, "--log-min-ranks: K");
        else if (strcmp(a, "--overlay") == 0) o->overlay = zf_u32(v, "--overlay: K");
        else if (strcmp(a, "--coll") == 0) o->coll = v;
        else zf_usage("unknown option (zcfoot --help for the list)");
        if (value) i++;
    }
    if (!o->reps || o->reps > ZF_MAX_REPS) zf_usage("--reps: 1..101");
    if (strcmp(o->coll, "allreduce") && strcmp(o->coll, "alltoall") && strcmp(o->coll, "gather") &&
        strcmp(o->coll, "scatter"))
        zf_usage("--coll: allreduce, alltoall, gather or scatter");
}

/* The configuration of rank 0 of an n-rank job (a rendezvous address and a secret as a job
 * would have; nothing is contacted). */
static zc_config zf_config(const zf_opts *o, uint32_t n, zc_transport t) {
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.nranks = n;
    cfg.transport = t;
    cfg.slot_bytes = o->slot_bytes;
    cfg.slots = o->slots;
    cfg.ib_qps_per_peer = o->qps;
    cfg.log_min_ranks = o->log_min;
    cfg.overlay_min_ranks = o->overlay;
    if (o->overlay && (!o->log_min || o->log_min > o->overlay)) cfg.log_min_ranks = 1;
    if (o->no_gpu) cfg.gpu_device = -2;
    if (t == ZC_TRANSPORT_INPROC) cfg.inproc_ranks_per_host = o->per_host; /* simulated hosts */
    snprintf(cfg.root_addr, sizeof cfg.root_addr, "127.0.0.1:29500");
    cfg.secret_set = true;
    return cfg;
}

/* bytes as "12.3 MiB" (or exact with --raw) into buf. */
static const char *zf_bytes(const zf_opts *o, char *buf, size_t cap, uint64_t v) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double d = (double)v;
    unsigned u = 0;
    if (o->raw) {
        snprintf(buf, cap, "%llu", (unsigned long long)v);
        return buf;
    }
    while (d >= 1024.0 && u < 4) d /= 1024.0, u++;
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", d, unit[u]);
    return buf;
}

static const char *zf_wire(zc_transport t) {
    return t == ZC_TRANSPORT_SHM ? "shm" : t == ZC_TRANSPORT_IB ? "ib"
                                         : t == ZC_TRANSPORT_INPROC ? "inproc" : "auto";
}

static int zf_table(const zf_opts *o) {
    char b[6][32];
    char per[32];
    snprintf(per, sizeof per, "%u ranks per host", o->per_host);
    printf("# zc_comm_footprint, rank 0: %s, transport %s, %u slots x %u B, %u qps per peer%s, "
           "overlay_min_ranks %u\n", o->per_host ? per : "one host", zf_wire(o->transport),
           o->slots, o->slot_bytes, o->qps, o->no_gpu ? ", no gpu state" : "", o->overlay);
    printf("%8s %6s %6s %12s %12s %12s %12s %8s %8s %10s %12s\n", "ranks", "hosts", "wire",
           "arena", "shared", "registered", "device", "peers", "qps", "cq", "host_total");
    for (uint32_t i = 0; i < o->nsizes; i++) {
        zc_config cfg = zf_config(o, o->ranks[i], o->transport);
        zc_footprint fp;
        zc_status st = zc_comm_footprint(&cfg, o->per_host, &fp);
        if (st != ZC_OK) {
            printf("%8u refused: %s (%s)\n", o->ranks[i], zc_init_error_text(),
                   zc_status_name(st));
            continue;
        }
        uint64_t total = (uint64_t)fp.arena_bytes + fp.shared_bytes + fp.private_bytes;
        printf("%8u %6u %6s %12s %12s %12s %12s %8u %8u %10llu %12s\n", o->ranks[i], fp.hosts,
               zf_wire(fp.transport), zf_bytes(o, b[0], 32, fp.arena_bytes),
               zf_bytes(o, b[1], 32, fp.shared_bytes), zf_bytes(o, b[2], 32, fp.registered_bytes),
               zf_bytes(o, b[3], 32, fp.device_bytes), fp.peers, fp.qps,
               (unsigned long long)fp.cq_entries, zf_bytes(o, b[4], 32, total));
    }
    return 0;
}

static double zf_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int zf_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One 8-byte all_reduce on every rank of the group; its CPU milliseconds (<0: it failed). */
static double zf_one_call(zc_comm **c, uint32_t n, float *send, float *recv, zc_req *reqs) {
    double t0 = zf_cpu_ms();
    for (uint32_t r = 0; r < n; r++)
        if (zc_allreduce(c[r], send + 2u * r, recv + 2u * r, 2, ZC_FLOAT32, ZC_SUM, &reqs[r]) !=
            ZC_OK)
            return -1.0;
    for (uint32_t r = 0; r < n; r++)
        if (zc_wait(c[r], &reqs[r]) != ZC_OK) return -1.0;
    double ms = zf_cpu_ms() - t0;
    for (uint32_t r = 0; r < n; r++)
        if (recv[2u * r] != (float)n || recv[2u * r + 1] != (float)(2u * n)) return -1.0;
    return ms;
}

/* One all_to_all, gather or scatter (root 0) of one int64 per rank and block on every rank;
 * its CPU milliseconds (<0: it failed or a result is wrong). send and recv: n * n each. */
static double zf_one_copy(const char *coll, zc_comm **c, uint32_t n, int64_t *send,
                          int64_t *recv, zc_req *reqs) {
    char k = coll[0]; /* 'a'lltoall, 'g'ather, 's'catter */
    double t0 = zf_cpu_ms();
    for (uint32_t r = 0; r < n; r++) {
        int64_t *in = send + (size_t)r * n, *out = recv + (size_t)r * n;
        zc_status st = k == 'a' ? zc_alltoall(c[r], in, out, 1, ZC_INT64, &reqs[r])
                       : k == 'g' ? zc_gather(c[r], in, out, 1, ZC_INT64, 0, &reqs[r])
                                  : zc_scatter(c[r], in, out, 1, ZC_INT64, 0, &reqs[r]);
        if (st != ZC_OK) return -1.0;
    }
    for (uint32_t r = 0; r < n; r++)
        if (zc_wait(c[r], &reqs[r]) != ZC_OK) return -1.0;
    double ms = zf_cpu_ms() - t0;
    for (uint32_t r = 0; r < n; r++) /* send[p][q] = p * n + q */
        for (uint32_t q = 0; q < (k == 's' ? 1u : n) && (k != 'g' || r == 0); q++) {
            int64_t want = k == 'a' ? (int64_t)q * n + r : k == 'g' ? (int64_t)q * n : r;
            if (recv[(size_t)r * n + q] != want) return -1.0;
        }
    return ms;
}

/* The in-process baseline at n ranks; 1 when the group cannot be made or a call fails. */
static int zf_time_one(const zf_opts *o, uint32_t n) {
    zc_config cfg = zf_config(o, n, ZC_TRANSPORT_INPROC);
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void **arenas = calloc(n, sizeof *arenas);
    zc_comm **c = calloc(n, sizeof *c);
    float *send = calloc(2u * n, sizeof *send), *recv = calloc(2u * n, sizeof *recv);
    bool copy = strcmp(o->coll, "allreduce") != 0;
    int64_t *csend = copy ? calloc((size_t)n * n, sizeof *csend) : NULL;
    int64_t *crecv = copy ? calloc((size_t)n * n, sizeof *crecv) : NULL;
    zc_req *reqs = calloc(n, sizeof *reqs);
    double ms[ZF_MAX_REPS + 1];
    int rc = !bytes || !arenas || !c || !send || !recv || !reqs || (copy && (!csend || !crecv));
    for (size_t i = 0; !rc && copy && i < (size_t)n * n; i++) csend[i] = (int64_t)i;
    for (uint32_t r = 0; !rc && r < n; r++) {
        rc = !(arenas[r] = aligned_alloc(64, bytes));
        send[2u * r] = 1.0f, send[2u * r + 1] = 2.0f;
    }
    if (!rc && zc_comm_init_inproc(&cfg, arenas, bytes, c) != ZC_OK) {
        printf("%8u refused: %s\n", n, zc_init_error_text());
        rc = 1;
        n = 0; /* nothing to finish */
    }
    for (uint32_t i = 0; !rc && i <= o->reps; i++) /* call 0 warms up */
        rc = (ms[i] = copy ? zf_one_copy(o->coll, c, n, csend, crecv, reqs)
                           : zf_one_call(c, n, send, recv, reqs)) < 0.0;
    if (!rc) {
        qsort(ms + 1, o->reps, sizeof ms[0], zf_cmp);
        printf("%8u %12zu %12.3f %12.3f %12.4f\n", n, bytes, ms[1 + o->reps / 2], ms[1],
               ms[1 + o->reps / 2] / n);
    } else if (n) {
        printf("%8u failed: %s\n", n, c && c[0] ? zc_comm_error_text(c[0]) : "out of memory");
    }
    for (uint32_t r = 0; c && r < n; r++)
        if (c[r]) zc_comm_fini(c[r]);
    for (uint32_t r = 0; arenas && r < cfg.nranks; r++) free(arenas[r]);
    free(arenas), free(c), free(send), free(recv), free(reqs), free(csend), free(crecv);
    fflush(stdout);
    return rc;
}

static int zf_time(const zf_opts *o) {
    int rc = 0;
    printf("# in-process %s over all ranks, one thread; %u slots x %u B%s; log_min_ranks %u, "
           "overlay_min_ranks %u, %u ranks per host; CPU ms of one call, median and min of %u\n",
           strcmp(o->coll, "allreduce") ? o->coll : "8-byte float32 all_reduce", o->slots,
           o->slot_bytes, o->no_gpu ? ", no gpu state" : "", o->log_min, o->overlay, o->per_host,
           o->reps);
    printf("%8s %12s %12s %12s %12s\n", "ranks", "arena_bytes", "median_ms", "min_ms",
           "ms_per_rank");
    for (uint32_t i = 0; i < o->nsizes; i++) rc |= zf_time_one(o, o->ranks[i]);
    return rc;
}

int main(int argc, char **argv) {
    zf_opts o;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("zcfoot: per-rank cost of a communicator before it is made (see the head of "
                   "tools/zcfoot.c)\n");
            zf_usage(NULL);
        }
    zf_parse(&o, argc, argv);
    return o.time ? zf_time(&o) : zf_table(&o);
}
