/* zcfoot: what a communicator costs per rank before it is made (zc_comm_footprint), one row per
 * job size, and the in-process baseline of a small all_reduce at many ranks.
 *   zcfoot [--ranks N,N,...] [--per-host K] [--transport auto|shm|ib|inproc] [--slot-bytes B]
 *          [--slots S] [--qps Q] [--no-gpu] [--raw]
 *     one row per N: hosts, wire, arena, shared, registered, device, peers, qps, cq entries
 *     and the host memory in all (arena + shared + registered); a size init refuses prints
 *     "refused:" and the sentence. --raw: bytes as exact integers.
 *   zcfoot --time [--ranks N,...] [--slot-bytes B] [--slots S] [--reps R] [--no-gpu]
 *     [--log-min-ranks K] (cfg->log_min_ranks: 0 = one-shot at every n, 1 = recursive doubling)
 *     per N: an in-process group (zc_comm_init_inproc) and the CPU time of one 8-byte float32
 *     all_reduce over all ranks driven by this thread (issue on every rank, then zc_wait on
 *     each), median and minimum of R calls after one warm-up, with the arena per rank.
 *     [--bytes B] times a B-byte call instead (a multiple of 4 x N), [--coll reduce_scatter]
 *     a reduce_scatter of B bytes of input per rank instead of the all_reduce.
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
    uint64_t bytes;  /* --bytes: per rank (all_reduce's buffer, reduce_scatter's input) */
    bool rs;         /* --coll reduce_scatter */
    zc_transport transport;
    bool time, raw, no_gpu;
} zf_opts;

static void zf_usage(const char *why) {
    FILE *f = why ? stderr : stdout;
    if (why) fprintf(f, "zcfoot: %s\n", why);
    fprintf(f, "usage: zcfoot [--ranks N,N,...] [--per-host K] "
            "[--transport auto|shm|ib|inproc] [--slot-bytes B] [--slots S] [--qps Q] "
            "[--no-gpu] [--raw]\n       zcfoot --time [--ranks N,...] [--slot-bytes B] "
            "[--slots S] [--reps R] [--no-gpu] [--log-min-ranks K]\n"
            "              [--bytes B] [--coll allreduce|reduce_scatter]\n");
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
                   .log_min = ZC_DEFAULT_LOG_MIN_RANKS, .bytes = 8};
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
        else if (strcmp(a, "--bytes") == 0) o->bytes = zf_u32(v, "--bytes: bytes");
        else if (strcmp(a, "--coll") == 0) o->rs = strcmp(v, "reduce_scatter") == 0;
        else zf_usage("unknown option (zcfoot --help for the list)");
        if (value) i++;
    }
    if (!o->reps || o->reps > ZF_MAX_REPS) zf_usage("--reps: 1..101");
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
    printf("# zc_comm_footprint, rank 0: %s, transport %s, %u slots x %u B, %u qps per peer%s\n",
           o->per_host ? per : "one host", zf_wire(o->transport), o->slots, o->slot_bytes, o->qps,
           o->no_gpu ? ", no gpu state" : "");
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

/* One call (all_reduce of k floats, or reduce_scatter of k floats of input: k / n per rank)
 * on every rank of the group; its CPU milliseconds (<0: it failed). Inputs are rank + 1 at
 * element 0 and 1 elsewhere. */
static double zf_one_call(const zf_opts *o, zc_comm **c, uint32_t n, float *send, float *recv,
                          size_t k, zc_req *reqs) {
    size_t out = o->rs ? k / n : k;
    double t0 = zf_cpu_ms();
    for (uint32_t r = 0; r < n; r++) {
        zc_status st = o->rs ? zc_reduce_scatter(c[r], send + k * r, recv + out * r, out,
                                                 ZC_FLOAT32, ZC_SUM, &reqs[r])
                             : zc_allreduce(c[r], send + k * r, recv + out * r, k, ZC_FLOAT32,
                                            ZC_SUM, &reqs[r]);
        if (st != ZC_OK) return -1.0;
    }
    for (uint32_t r = 0; r < n; r++)
        if (zc_wait(c[r], &reqs[r]) != ZC_OK) return -1.0;
    double ms = zf_cpu_ms() - t0;
    float first = (float)n * (float)(n + 1u) / 2.0f;
    for (uint32_t r = 0; r < n; r++)
        if (recv[out * r + out - 1] != (float)n || (!o->rs || r == 0 ? recv[out * r] != first
                                                                   : recv[out * r] != (float)n))
            return -1.0;
    return ms;
}

/* The in-process baseline at n ranks; 1 when the group cannot be made or a call fails. */
static int zf_time_one(const zf_opts *o, uint32_t n) {
    zc_config cfg = zf_config(o, n, ZC_TRANSPORT_INPROC);
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void **arenas = calloc(n, sizeof *arenas);
    zc_comm **c = calloc(n, sizeof *c);
    size_t k = (size_t)(o->bytes / 4u);
    if (k < 2u || (o->rs && (k % n || k / n < 2u))) {
        printf("%8u refused: --bytes must hold 2 floats per result (a multiple of 4 x n)\n", n);
        return 1;
    }
    float *send = calloc(k * n, sizeof *send), *recv = calloc(k * n, sizeof *recv);
    zc_req *reqs = calloc(n, sizeof *reqs);
    double ms[ZF_MAX_REPS + 1];
    int rc = !bytes || !arenas || !c || !send || !recv || !reqs;
    for (uint32_t r = 0; !rc && r < n; r++) {
        rc = !(arenas[r] = aligned_alloc(64, bytes));
        for (size_t j = 0; send && j < k; j++) send[k * r + j] = j ? 1.0f : (float)(r + 1u);
    }
    if (!rc && zc_comm_init_inproc(&cfg, arenas, bytes, c) != ZC_OK) {
        printf("%8u refused: %s\n", n, zc_init_error_text());
        rc = 1;
        n = 0; /* nothing to finish */
    }
    for (uint32_t i = 0; !rc && i <= o->reps; i++) /* call 0 warms up */
        rc = (ms[i] = zf_one_call(o, c, n, send, recv, k, reqs)) < 0.0;
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
    free(arenas), free(c), free(send), free(recv), free(reqs);
    fflush(stdout);
    return rc;
}

static int zf_time(const zf_opts *o) {
    int rc = 0;
    printf("# in-process %llu-byte float32 %s over all ranks, one thread; %u slots x %u B%s;"
           " log_min_ranks %u; CPU ms of one call, median and min of %u\n",
           (unsigned long long)o->bytes, o->rs ? "reduce_scatter" : "all_reduce", o->slots,
           o->slot_bytes, o->no_gpu ? ", no gpu state" : "", o->log_min, o->reps);
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
