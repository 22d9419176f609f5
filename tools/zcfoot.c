/* zcfoot: what a communicator costs per rank before it is made (zc_comm_footprint), one row per
 * job size, and the in-process baseline of a small all_reduce at many ranks.
 *   zcfoot [--ranks N,N,...] [--per-host K] [--transport auto|shm|ib|hier|inproc] [--slot-bytes B]
 *          [--slots S] [--qps Q] [--no-gpu] [--raw]
 *     one row per N: hosts, wire, arena, shared, registered, device, peers, qps, cq entries
 *     and the host memory in all (arena + shared + registered), then three parts of the
 *     arena: the connections' address table, init's scratch and the per-rank tables kept
 *     after init; a size init refuses prints "refused:" and the sentence. --raw: bytes as
 *     exact integers.
 *   zcfoot --time [--ranks N,...] [--slot-bytes B] [--slots S] [--reps R] [--no-gpu] [--huge]
 *     [--log-min-ranks K] (cfg->log_min_ranks: 0 = one-shot at every n, 1 = recursive doubling)
 *     [--overlay K] (both forms: cfg->overlay_min_ranks, overlay mode from K ranks; log_min_ranks
 *     1 unless it is 1..K)
 *     [--coll allreduce|reduce|broadcast|reduce_scatter|allgather|alltoall|gather|scatter|
 *     barrier] [--bytes B]
 *     per N: an in-process group (zc_comm_init_inproc) and the CPU time of one call over all
 *     ranks driven by this thread (issue on every rank, then zc_wait on each), median and
 *     minimum of R calls after one warm-up, with the arena per rank. The groups of every N are
 *     made first and take their calls in turn, one of each per round, so that a host whose
 *     speed drifts slows every size alike; a last line gives each size's median and minimum
 *     over the first size's. The call is --coll (default
 *     allreduce; rooted ones at root 0) of B bytes of float32 per rank (per block for
 *     reduce_scatter, allgather, alltoall, gather, scatter; default 8; none for barrier), results
 *     checked. Also per
 *     call: the messages each rank sent (mean and most, from zc_comm_messages), and the
 *     algorithm zc__choose takes for host memory with its message rounds (steps) and its mean
 *     messages per rank by formula (docs/algorithms.md; "-" where it has none here). The
 *     arenas lie back to back in one region; --huge asks the kernel for huge pages under it
 *     (madvise MADV_HUGEPAGE), which takes TLB misses out of the thousands of ranks' state.
 * A tool, not library code: it uses libc directly. */
#define _GNU_SOURCE

#include "zcoll.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define ZF_MAX_SIZES 32
#define ZF_MAX_REPS 101

typedef struct zf_opts {
    uint32_t ranks[ZF_MAX_SIZES], nsizes, per_host, slot_bytes, slots, qps, reps, log_min;
    uint32_t overlay; /* cfg->overlay_min_ranks */
    zc_transport transport;
    bool time, raw, no_gpu, huge;
    const char *coll; /* --time: one of zf_colls */
    uint64_t bytes;   /* --time: bytes per rank (per block), float32 */
} zf_opts;

/* --coll's names, in zf_call's order. */
static const char *const zf_colls[] = {"allreduce", "reduce", "broadcast", "reduce_scatter",
                                       "allgather", "alltoall", "gather", "scatter",
                                       "barrier"};
enum { ZF_AR, ZF_RE, ZF_BC, ZF_RS, ZF_AG, ZF_A2A, ZF_GA, ZF_SC, ZF_BAR, ZF_NCOLLS };

static int zf_coll_index(const char *c) {
    if (strcmp(c, "all_reduce") == 0) return ZF_AR;
    for (int i = 0; i < ZF_NCOLLS; i++)
        if (strcmp(c, zf_colls[i]) == 0) return i;
    return -1;
}

static void zf_usage(const char *why) {
    FILE *f = why ? stderr : stdout;
    if (why) fprintf(f, "zcfoot: %s\n", why);
    fprintf(f, "usage: zcfoot [--ranks N,N,...] [--per-host K] "
            "[--transport auto|shm|ib|hier|inproc] [--slot-bytes B] [--slots S] [--qps Q] "
            "[--no-gpu] [--raw]\n       zcfoot --time [--ranks N,...] [--slot-bytes B] "
            "[--slots S] [--reps R] [--no-gpu] [--huge] [--log-min-ranks K]\n"
            "       [--coll allreduce|reduce|broadcast|reduce_scatter|allgather|alltoall|gather|"
            "scatter|barrier] [--bytes B]\n       both: [--overlay K]\n");
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
    if (strcmp(s, "hier") == 0) return ZC_TRANSPORT_HIER;
    zf_usage("--transport: auto, shm, ib, hier or inproc");
    return ZC_TRANSPORT_AUTO;
}

static void zf_parse(zf_opts *o, int argc, char **argv) {
    static const char defaults[] = "8,64,512,1024,4096,65536";
    *o = (zf_opts){.per_host = 8, .slot_bytes = ZC_DEFAULT_SLOT_BYTES, .slots = ZC_DEFAULT_SLOTS,
                   .qps = ZC_DEFAULT_IB_QPS_PER_PEER, .reps = 9, .transport = ZC_TRANSPORT_AUTO,
                   .log_min = ZC_DEFAULT_LOG_MIN_RANKS, .coll = "allreduce", .bytes = 8};
    zf_ranks(o, defaults);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool value = true;
        if (strcmp(a, "--time") == 0) o->time = true, value = false;
        else if (strcmp(a, "--raw") == 0) o->raw = true, value = false;
        else if (strcmp(a, "--no-gpu") == 0) o->no_gpu = true, value = false;
        else if (strcmp(a, "--huge") == 0) o->huge = true, value = false;
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
        else if (strcmp(a, "--bytes") == 0) o->bytes = zf_u32(v, "--bytes: a number of bytes");
        else zf_usage("unknown option (zcfoot --help for the list)");
        if (value) i++;
    }
    if (!o->reps || o->reps > ZF_MAX_REPS) zf_usage("--reps: 1..101");
    if (zf_coll_index(o->coll) < 0)
        zf_usage("--coll: allreduce, reduce, broadcast, reduce_scatter, allgather, alltoall, "
                 "gather or scatter");
    if (o->bytes < 4) zf_usage("--bytes: at least 4 (one float32)");
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
                                         : t == ZC_TRANSPORT_INPROC ? "inproc"
                                         : t == ZC_TRANSPORT_HIER   ? "hier" : "auto";
}

static int zf_table(const zf_opts *o) {
    char b[8][32];
    char per[32];
    snprintf(per, sizeof per, "%u ranks per host", o->per_host);
    printf("# zc_comm_footprint, rank 0: %s, transport %s, %u slots x %u B, %u qps per peer%s, "
           "overlay_min_ranks %u\n", o->per_host ? per : "one host", zf_wire(o->transport),
           o->slots, o->slot_bytes, o->qps, o->no_gpu ? ", no gpu state" : "", o->overlay);
    printf("%8s %6s %6s %12s %12s %12s %12s %8s %8s %10s %12s %12s %12s %12s\n", "ranks",
           "hosts", "wire", "arena", "shared", "registered", "device", "peers", "qps", "cq",
           "host_total", "addresses", "init", "rank_tables");
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
        printf("%8u %6u %6s %12s %12s %12s %12s %8u %8u %10llu %12s %12s %12s %12s\n",
               o->ranks[i], fp.hosts, zf_wire(fp.transport), zf_bytes(o, b[0], 32, fp.arena_bytes),
               zf_bytes(o, b[1], 32, fp.shared_bytes), zf_bytes(o, b[2], 32, fp.registered_bytes),
               zf_bytes(o, b[3], 32, fp.device_bytes), fp.peers, fp.qps,
               (unsigned long long)fp.cq_entries, zf_bytes(o, b[4], 32, total),
               zf_bytes(o, b[5], 32, fp.address_bytes), zf_bytes(o, b[6], 32, fp.init_bytes),
               zf_bytes(o, b[7], 32, fp.rank_bytes));
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

/* The call k (zf_colls) of count float32 per rank (per block) on rank r: rank p's input is
 * p + 1 everywhere, so every result is known (reductions: sums of small integers, exact). */
static zc_status zf_issue(int k, zc_comm *c, uint32_t r, size_t count, float *in, float *out,
                          zc_req *req) {
    switch (k) {
    case ZF_AR: return zc_allreduce(c, in, out, count, ZC_FLOAT32, ZC_SUM, req);
    case ZF_RE: return zc_reduce(c, in, r == 0 ? out : NULL, count, ZC_FLOAT32, ZC_SUM, 0, req);
    case ZF_BC: return zc_broadcast(c, in, out, count, ZC_FLOAT32, 0, req);
    case ZF_RS: return zc_reduce_scatter(c, in, out, count, ZC_FLOAT32, ZC_SUM, req);
    case ZF_AG: return zc_allgather(c, in, out, count, ZC_FLOAT32, req);
    case ZF_A2A: return zc_alltoall(c, in, out, count, ZC_FLOAT32, req);
    case ZF_GA: return zc_gather(c, in, out, count, ZC_FLOAT32, 0, req);
    case ZF_BAR: return zc_barrier(c, req);
    default: return zc_scatter(c, in, out, count, ZC_FLOAT32, 0, req);
    }
}

/* Whether rank r's result of call k is right (elements [0, len) of out). */
static bool zf_right(int k, uint32_t n, uint32_t r, size_t count, const float *out) {
    size_t len = k == ZF_AG || k == ZF_A2A || (k == ZF_GA && r == 0) ? count * n : count;
    /* gather and reduce: the root's alone; a barrier has none */
    if (((k == ZF_RE || k == ZF_GA) && r != 0) || k == ZF_BAR) return true;
    for (size_t i = 0; i < len; i++) {
        float want = k == ZF_AR || k == ZF_RE || k == ZF_RS ? (float)n * ((float)n + 1.0f) / 2.0f
                     : k == ZF_AG || k == ZF_A2A || k == ZF_GA ? (float)(i / count + 1u)
                                                               : 1.0f;
        if (out[i] != want) return false;
    }
    return true;
}

typedef struct zf_msgs {
    uint64_t sum, most; /* messages sent in the calls, over all ranks; the most by one rank */
} zf_msgs;

/* One call k on every rank of the group; its CPU milliseconds (<0: it failed or a result is
 * wrong). in and out: n * stride floats each. Adds the messages each rank sent to *m. */
static double zf_one(int k, zc_comm **c, uint32_t n, size_t count, size_t stride, float *in,
                     float *out, zc_req *reqs, zf_msgs *m) {
    uint64_t *before = calloc(n, sizeof *before);
    if (!before) return -1.0;
    for (uint32_t r = 0; r < n; r++) zc_comm_messages(c[r], &before[r], NULL);
    double t0 = zf_cpu_ms(), ms = -1.0;
    for (uint32_t r = 0; r < n; r++)
        if (zf_issue(k, c[r], r, count, in + r * stride, out + r * stride, &reqs[r]) != ZC_OK)
            goto out;
    for (uint32_t r = 0; r < n; r++)
        if (zc_wait(c[r], &reqs[r]) != ZC_OK) goto out;
    ms = zf_cpu_ms() - t0;
    for (uint32_t r = 0; r < n; r++) {
        uint64_t now;
        zc_comm_messages(c[r], &now, NULL);
        m->sum += now - before[r];
        m->most = now - before[r] > m->most ? now - before[r] : m->most;
        if (!zf_right(k, n, r, count, out + r * stride)) ms = -1.0;
    }
out:
    free(before);
    return ms;
}

/* ---- the algorithm zc__choose takes (host memory), and its cost by formula ---- */

static uint32_t zf_log2c(uint32_t n) {
    uint32_t l = 0;
    while ((1ull << l) < n) l++;
    return l;
}
static uint64_t zf_msgs_of(uint64_t elems, uint64_t per) { return (elems + per - 1u) / per; }
static uint64_t zf_lo(uint64_t count, uint32_t n, uint32_t b) {
    return b * (count / n) + (b < count % n ? b : count % n);
}
static uint32_t zf_lowbit(uint32_t v) { return v & (~v + 1u); }
static uint32_t zf_bsize(uint32_t n, uint32_t v) {
    return v == 0 ? n : zf_lowbit(v) < n - v ? zf_lowbit(v) : n - v;
}

/* The hierarchical all_reduce's blocks (core/conn.c's zc__host_blocks) on simulated hosts of
 * cfg->inproc_ranks_per_host ranks: the largest power of two dividing that and n, leaving at
 * least two blocks; 0: none. */
static uint32_t zf_blocks(const zc_config *cfg, uint32_t n) {
    uint32_t k = cfg->inproc_ranks_per_host, q = 0;
    for (uint32_t b = 2; k && k < n && b <= n / 2u && n % b == 0 && k % b == 0; b *= 2u) q = b;
    return q;
}

typedef struct zf_cost {
    const char *alg;
    uint32_t steps;  /* message rounds one after another (chunks pipelined) */
    double msgs;     /* mean messages a rank sends per call; < 0: no formula here */
} zf_cost;

/* The hierarchical schedule over blocks of q ranks (n / q leaders), C messages per link: up
 * and down each block's tree (q - 1 messages each way), recursive doubling among the leaders
 * (the fold's two steps when their count is not a power of two). */
static zf_cost zf_hrd_cost(uint32_t q, uint32_t n, double C) {
    uint32_t H = n / q, PH = 1, sH = 0;
    while (PH * 2u <= H) PH *= 2u, sH++;
    return (zf_cost){"hrd", 2u * zf_log2c(q) + sH + (H > PH ? 2u : 0u),
                     (2.0 * (q - 1u) * H + (double)PH * sH + 2.0 * (H - PH)) * C / n};
}

/* The choice of core/sched.c's zc__choose for a host call of count elements per rank (per
 * block) and its cost: E elements per slot, A per accumulator chunk (float32 sum: 4-byte
 * accumulators in a slice of min(slot, 8 KiB)). */
static zf_cost zf_cost_of(const zc_config *cfg, int k, uint32_t n, uint64_t count) {
    uint64_t bytes = count * 4u, E = cfg->slot_bytes / 4u;
    uint64_t A = (cfg->slot_bytes < 8192u ? cfg->slot_bytes : 8192u) / 4u;
    uint64_t C = zf_msgs_of(count, E), Ca = zf_msgs_of(count, A);
    uint32_t L = zf_log2c(n), P = 1, steps = 0;
    while (P * 2u <= n) P *= 2u, steps++;
    uint32_t e = n - P;
    bool logn = cfg->log_min_ranks && n >= cfg->log_min_ranks;
    bool ov = cfg->overlay_min_ranks && n >= cfg->overlay_min_ranks;
    double dn = (double)n, x = 0;
    if (n == 1) return (zf_cost){"local", 0, 0};
    switch (k) {
    case ZF_AR:
        if ((ov || logn) && (bytes <= cfg->allreduce_oneshot_max_bytes || count < n)) {
            if (zf_blocks(cfg, n)) return zf_hrd_cost(zf_blocks(cfg, n), n, (double)Ca);
            return (zf_cost){"rd", steps + (e ? 2u : 0u),
                             ((double)P * steps + 2.0 * e) * (double)Ca / dn};
        }
        if (ov) return (zf_cost){"rabenseifner", 2u * steps + (e ? 2u : 0u), -1};
        if (bytes <= cfg->allreduce_oneshot_max_bytes || count < n)
            return (zf_cost){"oneshot", 1, (dn - 1) * (double)C};
        return (zf_cost){"rs+ag", 2, -1};
    case ZF_RE:
        if (ov || (logn && (bytes <= cfg->reduce_direct_max_bytes || count < n)))
            return (zf_cost){"vtree", steps + (e ? 1u : 0u), (dn - 1) * (double)Ca / dn};
        if (bytes <= cfg->reduce_direct_max_bytes || count < n || n == 2)
            return (zf_cost){"direct", 1, (dn - 1) * (double)C / dn};
        return (zf_cost){"rs+gather", 2, -1};
    case ZF_BC:
        if (bytes <= cfg->bcast_tree_max_bytes)
            return (zf_cost){"tree", L, (dn - 1) * (double)C / dn};
        if (!ov) return (zf_cost){"chain", n - 1u, (dn - 1) * (double)C / dn};
        for (uint32_t v = 1; v < n; v++) /* the scatter: each subtree's range into its root */
            x += (double)zf_msgs_of(zf_lo(count, n, v + zf_bsize(n, v)) - zf_lo(count, n, v), E);
        for (uint32_t v = 0; v < n; v++) /* Bruck: round j's min(2^j, n - 2^j) blocks from v */
            for (uint32_t j = 0; j < L; j++) {
                uint32_t d = 1u << j, m = d < n - d ? d : n - d, end = v + m;
                uint64_t len = end <= n ? zf_lo(count, n, end) - zf_lo(count, n, v)
                                        : count - zf_lo(count, n, v) + zf_lo(count, n, end - n);
                x += (double)zf_msgs_of(len, E);
            }
        return (zf_cost){"van de geijn", 2u * L, x / dn};
    case ZF_RS: return ov ? (zf_cost){"rh", steps + (e ? 1u : 0u), -1}
                          : (zf_cost){"direct", 1, (dn - 1) * (double)C};
    case ZF_AG:
        if (!logn && !ov) return (zf_cost){"direct", 1, (dn - 1) * (double)C};
        for (uint32_t j = 0; j < L; j++) {
            uint32_t d = 1u << j;
            x += (double)zf_msgs_of((d < n - d ? d : n - d) * count, E);
        }
        return (zf_cost){"bruck", L, x};
    case ZF_A2A:
        if (!ov && !(logn && bytes <= 1024u)) return (zf_cost){"direct", 1, (dn - 1) * (double)C};
        for (uint32_t j = 0; j < L; j++) {
            uint32_t d = 1u << j, rest = n % (2u * d);
            x += (double)zf_msgs_of(((n / (2u * d)) * d + (rest > d ? rest - d : 0)) * count, E);
        }
        return (zf_cost){"bruck", L, x};
    case ZF_BAR: /* one empty message per link */
        if ((ov || logn) && zf_blocks(cfg, n)) return zf_hrd_cost(zf_blocks(cfg, n), n, 1.0);
        return (zf_cost){"dissemination", L, (double)L};
    default: /* gather, scatter */
        if (!ov) return (zf_cost){"direct", 1, (dn - 1) * (double)C / dn};
        for (uint32_t v = 1; v < n; v++) x += (double)zf_bsize(n, v) * (double)C;
        return (zf_cost){"binomial", L, x / dn};
    }
}

/* One size's in-process group, its buffers and its timings (ms[0]: the warm-up call). */
typedef struct zf_group {
    uint32_t n;
    int k;
    size_t bytes, count, stride;
    zc_config cfg;
    void **arenas;
    zc_comm **c;
    float *in, *out;
    zc_req *reqs;
    char *region;
    double ms[ZF_MAX_REPS + 1];
    zf_msgs m;
    int rc; /* 1: refused or failed (said), 0: timed */
} zf_group;

/* Makes the group of n ranks; 1 (and a row saying why) when it cannot be made. */
static int zf_group_open(const zf_opts *o, uint32_t n, zf_group *g) {
    memset(g, 0, sizeof *g);
    g->n = n;
    g->cfg = zf_config(o, n, ZC_TRANSPORT_INPROC);
    g->bytes = zc_comm_arena_bytes(&g->cfg);
    g->count = o->bytes / 4u;
    g->k = zf_coll_index(o->coll);
    bool blocks = g->k == ZF_RS || g->k == ZF_AG || g->k == ZF_A2A || g->k == ZF_GA || g->k == ZF_SC;
    g->stride = blocks ? g->count * n : g->count;
    g->arenas = calloc(n, sizeof *g->arenas);
    g->c = calloc(n, sizeof *g->c);
    g->in = calloc(g->stride * n, sizeof *g->in);
    g->out = calloc(g->stride * n, sizeof *g->out);
    g->reqs = calloc(n, sizeof *g->reqs);
    int rc = !g->bytes || !g->arenas || !g->c || !g->in || !g->out || !g->reqs;
    size_t step = (g->bytes + 4095u) & ~(size_t)4095u, huge = (size_t)2 << 20;
    size_t all = (step * n + huge - 1u) & ~(huge - 1u);
    g->region = rc ? NULL : aligned_alloc(huge, all);
    rc = rc || !g->region;
    if (!rc && o->huge) (void)madvise(g->region, all, MADV_HUGEPAGE);
    for (uint32_t r = 0; !rc && r < n; r++) {
        g->arenas[r] = g->region + step * r;
        for (size_t i = 0; i < g->stride; i++) g->in[r * g->stride + i] = (float)(r + 1u);
    }
    if (rc) {
        printf("%8u failed: out of memory\n", n);
    } else if (zc_comm_init_inproc(&g->cfg, g->arenas, g->bytes, g->c) != ZC_OK) {
        printf("%8u refused: %s\n", n, zc_init_error_text());
        memset(g->c, 0, n * sizeof *g->c); /* nothing to finish */
        rc = 1;
    }
    return g->rc = rc;
}

/* Call i of the group (0 warms up); 1 (and a row saying why) when it fails. */
static int zf_group_call(zf_group *g, uint32_t i) {
    g->ms[i] = zf_one(g->k, g->c, g->n, g->count, g->stride, g->in, g->out, g->reqs, &g->m);
    if (g->ms[i] >= 0.0) return 0;
    printf("%8u failed: %s\n", g->n, zc_comm_error_text(g->c[0]));
    return g->rc = 1;
}

static void zf_group_row(const zf_opts *o, zf_group *g) {
    zf_cost f = zf_cost_of(&g->cfg, g->k, g->n, g->count);
    char formula[32] = "-";
    if (f.msgs >= 0) snprintf(formula, sizeof formula, "%.1f", f.msgs);
    qsort(g->ms + 1, o->reps, sizeof g->ms[0], zf_cmp);
    printf("%8u %12zu %12.3f %12.3f %12.4f %10.1f %9llu %13s %6u %11s\n", g->n, g->bytes,
           g->ms[1 + o->reps / 2], g->ms[1], g->ms[1 + o->reps / 2] / g->n,
           (double)g->m.sum / ((double)g->n * (o->reps + 1u)), (unsigned long long)g->m.most,
           f.alg, f.steps, formula);
}

static void zf_group_close(zf_group *g) {
    for (uint32_t r = 0; g->c && r < g->n; r++)
        if (g->c[r]) zc_comm_fini(g->c[r]);
    free(g->region), free(g->arenas), free(g->c), free(g->in), free(g->out), free(g->reqs);
}

/* Every size's group is made first, then the calls go round the sizes (one call of each per
 * round), so that a host whose speed changes over seconds changes every size's timings alike
 * and the ratios of the medians hold within one run. */
static int zf_time(const zf_opts *o) {
    int rc = 0;
    printf("# in-process %s of %llu bytes of float32 per rank%s over all ranks, one thread; %u "
           "slots x %u B%s; log_min_ranks %u, overlay_min_ranks %u, %u ranks per host; CPU ms of "
           "one call, median and min of %u, the sizes' calls in turn; messages sent per rank per "
           "call (mean, most), the algorithm, its steps and mean messages by formula\n", o->coll,
           (unsigned long long)o->bytes, strcmp(o->coll, "allreduce") && strcmp(o->coll, "reduce") &&
           strcmp(o->coll, "broadcast") ? " and block" : "", o->slots, o->slot_bytes,
           o->no_gpu ? ", no gpu state" : "", o->log_min, o->overlay, o->per_host, o->reps);
    printf("%8s %12s %12s %12s %12s %10s %9s %13s %6s %11s\n", "ranks", "arena_bytes",
           "median_ms", "min_ms", "ms_per_rank", "msgs_rank", "msgs_most", "alg", "steps",
           "msgs_formula");
    fflush(stdout);
    zf_group *g = calloc(o->nsizes, sizeof *g);
    if (!g) return 1;
    for (uint32_t s = 0; s < o->nsizes; s++) rc |= zf_group_open(o, o->ranks[s], &g[s]);
    for (uint32_t i = 0; i <= o->reps; i++)
        for (uint32_t s = 0; s < o->nsizes; s++)
            if (!g[s].rc) rc |= zf_group_call(&g[s], i);
    const zf_group *first = NULL;
    for (uint32_t s = 0; s < o->nsizes; s++) {
        if (g[s].rc) continue;
        zf_group_row(o, &g[s]);
        if (!first) first = &g[s];
    }
    for (uint32_t s = 0; first && s < o->nsizes; s++)
        if (!g[s].rc && &g[s] != first)
            printf("# %u / %u ranks: median %.1fx, min %.1fx\n", g[s].n, first->n,
                   g[s].ms[1 + o->reps / 2] / first->ms[1 + o->reps / 2], g[s].ms[1] / first->ms[1]);
    for (uint32_t s = 0; s < o->nsizes; s++) zf_group_close(&g[s]);
    free(g);
    fflush(stdout);
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
