/* bench_report.h: the harness that zcbench (tools/zcbench.c) and its MPI peer (bench/mpi_bench.c)
 * share, so that their numbers are comparable: written once, each program supplies only its
 * calls. Owns the collectives' names and nccl-tests bus factors, the options both take and how
 * they parse (sizes with K/M/G suffixes), a row's geometry (counts, blocks, what recv gets),
 * the --check inputs and expected results, the warm-up and adaptive iteration counts, the
 * warm-up and timed loops, the statistics of one size (mean of the per-iteration maxima,
 * nearest-rank p50/p99/p99.9, the maximum, algbw, busbw; the context switches of the timed
 * loops), the size sweep, and the nccl-tests table and JSON lines they print. A program
 * fills a br_bench (embedded first in its own state) and a br_ops table of its calls: one
 * call of a row, a barrier, agreeing on the iteration count, combining the times over ranks,
 * encoding an element, its header line.
 *
 * Plain C11 and libc (no zcoll.h, no mpi.h), all static inline. Inside a timed loop the
 * harness calls only ops->run_once between the two clock reads (and, in barrier mode or with
 * --check, ops->barrier and the untimed verification); every cross-rank reduction of the
 * measurements comes after the loop. The includer defines a feature macro (_POSIX_C_SOURCE or
 * _GNU_SOURCE) before its first #include, for clock_gettime. */
#ifndef ZCOLL_BENCH_REPORT_H
#define ZCOLL_BENCH_REPORT_H

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum {
    BR_ADAPTIVE_MIN = 10,        /* adaptive iterations per size, at least */
    BR_ADAPTIVE_MAX = 100000,    /* ... and at most */
    BR_ITERS_MAX = 1000000,      /* ceiling of -n */
    BR_WARMUP_DEFAULT = 20,      /* warm-up iterations up to 1 MiB ... */
    BR_WARMUP_MIN = 3,           /* ... fewer above, down to this many */
    BR_WARMUP_MAX = 1000000,     /* ceiling of -w */
};
#define BR_TARGET_NS 300000000ull       /* adaptive: timed work per size, ns (0.3 s) */
#define BR_WARMUP_BYTES (64ull << 20)   /* default warm-up: about this many bytes above 1 MiB */
#define BR_PROGRESS_NS 2000000000ull    /* a size that took longer gets a progress line */

/* ---- the collectives ---------------------------------------------------------------------- */

typedef enum br_coll {
    BR_ALLREDUCE, BR_REDUCE, BR_BROADCAST, BR_REDUCE_SCATTER, BR_ALLGATHER, BR_GATHER,
    BR_SCATTER, BR_ALLTOALL, BR_SENDRECV, BR_BARRIER, BR_COLL_COUNT
} br_coll;

/* blocked: bytes is n blocks, one per rank, and the call's count is one block. */
typedef enum br_factor { BR_BUS_ONE, BR_BUS_ALLREDUCE, BR_BUS_N1_N } br_factor;
static const struct {
    const char *name;
    bool reduces, rooted, blocked;
    br_factor factor;
} br_colls[BR_COLL_COUNT] = {
    [BR_ALLREDUCE] = {"allreduce", true, false, false, BR_BUS_ALLREDUCE},
    [BR_REDUCE] = {"reduce", true, true, false, BR_BUS_ONE},
    [BR_BROADCAST] = {"broadcast", false, true, false, BR_BUS_ONE},
    [BR_REDUCE_SCATTER] = {"reduce_scatter", true, false, true, BR_BUS_N1_N},
    [BR_ALLGATHER] = {"allgather", false, false, true, BR_BUS_N1_N},
    [BR_GATHER] = {"gather", false, true, true, BR_BUS_N1_N},
    [BR_SCATTER] = {"scatter", false, true, true, BR_BUS_N1_N},
    [BR_ALLTOALL] = {"alltoall", false, false, true, BR_BUS_N1_N},
    [BR_SENDRECV] = {"sendrecv", false, false, false, BR_BUS_ONE},
    [BR_BARRIER] = {"barrier", false, false, false, BR_BUS_ONE},
};

/* nccl-tests' bus bandwidth factor for n ranks. */
static inline double br_bus_factor(br_coll c, double n) {
    switch (br_colls[c].factor) {
    case BR_BUS_ALLREDUCE: return 2.0 * (n - 1) / n;
    case BR_BUS_N1_N: return (n - 1) / n;
    case BR_BUS_ONE: break;
    }
    return 1.0;
}

/* ---- options ------------------------------------------------------------------------------ */

/* The help lines of the shared options, for each program's --help text: the sweep (-c -b -e
 * -f), then, after the program's -d and -o lines, the root and timing (-r -w -n --mode loop). */
#define BR_HELP_SWEEP                                                                           \
    "  -c COLL        allreduce reduce broadcast reduce_scatter allgather gather scatter\n"     \
    "                 alltoall sendrecv barrier, or all (required)\n"                           \
    "  -b MINBYTES    smallest size (default 8); suffixes K, M, G are powers of 1024\n"         \
    "  -e MAXBYTES    largest size (default 64M)\n"                                             \
    "  -f FACTOR      size multiplier between rows, >= 2 (default 2)\n"
#define BR_HELP_TIMING                                                                          \
    "  -r ROOT        root of reduce, broadcast, gather, scatter (default 0)\n"                 \
    "  -w WARMUP      untimed iterations per size (default 20, fewer above 1 MiB:\n"            \
    "                 about 64 MiB of data, at least 3)\n"                                      \
    "  -n ITERS       timed iterations per size, 1..1000000 (default adaptive: about\n"         \
    "                 0.3 s of timed work, 10..100000, decided by rank 0 from the\n"            \
    "                 warm-up and broadcast so every rank runs the same number)\n"              \
    "  --mode loop    back-to-back calls, each timed alone (default)\n"

/* The options both programs take, and the limits their parsing checks. */
typedef struct br_opts {
    int coll;              /* a br_coll, -1 for all, -2 until -c is given */
    uint64_t min_bytes;    /* 1..max_bytes */
    uint64_t max_bytes;    /* ..size_limit */
    uint64_t factor;       /* >= 2 */
    int64_t warmup;        /* -1: by size (BR_WARMUP_DEFAULT, fewer above 1 MiB) */
    uint64_t iters;        /* 0: adaptive */
    uint64_t root;         /* -r, 0..root_limit; the program checks it against the rank count */
    const char *dtype;     /* -d as given (default "float32"); the program looks it up */
    const char *op;        /* -o as given (default "sum"); the program looks it up */
    bool barrier_mode;     /* a barrier before each timed call */
    bool check, json;
    uint64_t size_limit;   /* the program's ceiling of -b and -e */
    uint64_t root_limit;   /* the program's ceiling of -r */
    const char *size_error; /* the usage error (one %s) for a size past size_limit */
} br_opts;

static inline br_opts br_opts_default(uint64_t size_limit, uint64_t root_limit,
                                      const char *size_error) {
    return (br_opts){.coll = -2, .min_bytes = 8, .max_bytes = 64ull << 20, .factor = 2,
                     .warmup = -1, .dtype = "float32", .op = "sum", .size_limit = size_limit,
                     .root_limit = root_limit, .size_error = size_error};
}

/* Decimal with an optional K/M/G suffix (powers of 1024); false if malformed or overflowing. */
static inline bool br_parse_bytes(const char *s, uint64_t *out) {
    if (*s < '0' || *s > '9') return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0) return false;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0' || v > (UINT64_MAX >> shift)) return false;
    *out = (uint64_t)v << shift;
    return true;
}

static inline bool br_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    if (*s < '0' || *s > '9') return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
    *out = (uint64_t)v;
    return true;
}

/* A br_coll, -1 for "all", -2 for a name that is neither. */
static inline int br_find_coll(const char *s) {
    if (strcmp(s, "all") == 0) return -1;
    for (int c = 0; c < BR_COLL_COUNT; c++)
        if (strcmp(s, br_colls[c].name) == 0) return c;
    return -2;
}

/* The value of option argv[*i] (advancing *i); NULL when it is missing. */
static inline const char *br_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) return NULL;
    return argv[++*i];
}

typedef enum br_parsed { BR_PARSED, BR_NOT_SHARED, BR_BAD } br_parsed;

/* Parses argv[*i] when it is a shared option (-c -b -e -f -d -o -r -w -n --mode --check
 * --json), advancing *i past its value. BR_BAD: a usage error, *fmt with one %s for *arg. */
static inline br_parsed br_parse_option(br_opts *o, int argc, char **argv, int *i,
                                        const char **fmt, const char **arg) {
    static const char *const valued[] = {"-c", "-b", "-e", "-f", "-d", "-o", "-r", "-w", "-n",
                                         "--mode"};
    const char *a = argv[*i];
    if (strcmp(a, "--check") == 0 || strcmp(a, "--json") == 0) {
        *(a[2] == 'c' ? &o->check : &o->json) = true;
        return BR_PARSED;
    }
    bool shared = false;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
        shared = shared || strcmp(a, valued[k]) == 0;
    if (!shared) return BR_NOT_SHARED;
    const char *s = br_value(argc, argv, i);
    uint64_t v = 0;
    *arg = s;
    *fmt = NULL;
    if (!s) {
        *fmt = "%s needs a value";
        *arg = a;
    } else if (strcmp(a, "-c") == 0) {
        o->coll = br_find_coll(s);
        if (o->coll == -2) *fmt = "-c %s: not a collective";
    } else if (strcmp(a, "-b") == 0 || strcmp(a, "-e") == 0) {
        if (!br_parse_bytes(s, &v) || v < 1 || v > o->size_limit)
            *fmt = o->size_error;
        else
            *(a[1] == 'b' ? &o->min_bytes : &o->max_bytes) = v;
    } else if (strcmp(a, "-f") == 0) {
        if (!br_parse_u64(s, 2, 1u << 20, &o->factor)) *fmt = "-f %s: must be 2 or more";
    } else if (strcmp(a, "-d") == 0 || strcmp(a, "-o") == 0) {
        *(a[1] == 'd' ? &o->dtype : &o->op) = s;
    } else if (strcmp(a, "-r") == 0) {
        if (!br_parse_u64(s, 0, o->root_limit, &o->root)) *fmt = "-r %s: not a rank";
    } else if (strcmp(a, "-w") == 0) {
        if (!br_parse_u64(s, 0, BR_WARMUP_MAX, &v))
            *fmt = "-w %s: 0..1000000";
        else
            o->warmup = (int64_t)v;
    } else if (strcmp(a, "-n") == 0) {
        if (!br_parse_u64(s, 1, BR_ITERS_MAX, &o->iters)) *fmt = "-n %s: 1..1000000";
    } else { /* --mode */
        if (strcmp(s, "loop") != 0 && strcmp(s, "barrier") != 0)
            *fmt = "--mode %s: loop or barrier";
        else
            o->barrier_mode = strcmp(s, "barrier") == 0;
    }
    return *fmt ? BR_BAD : BR_PARSED;
}

/* After the last option: a usage error (a message without %s), or NULL. */
static inline const char *br_check_opts(const br_opts *o) {
    if (o->coll == -2) return "-c COLL is required";
    if (o->min_bytes > o->max_bytes) return "-b is larger than -e";
    return NULL;
}

/* ---- timing ------------------------------------------------------------------------------- */

static inline uint64_t br_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Untimed iterations before a size of `bytes` (warmup: -w, or -1 for by size). */
static inline uint64_t br_warmup_iters(int64_t warmup, uint64_t bytes) {
    if (warmup >= 0) return (uint64_t)warmup;
    if (bytes <= (1u << 20)) return BR_WARMUP_DEFAULT;
    uint64_t w = BR_WARMUP_BYTES / bytes;
    return w < BR_WARMUP_MIN ? BR_WARMUP_MIN : w > BR_WARMUP_DEFAULT ? BR_WARMUP_DEFAULT : w;
}

/* Warm-up calls for a size of `bytes`: br_warmup_iters, but at least one when iters (-n) is 0
 * (adaptive: the estimate needs one call). */
static inline uint64_t br_warmup_calls(int64_t warmup, uint64_t iters, uint64_t bytes) {
    uint64_t warm = br_warmup_iters(warmup, bytes);
    return iters == 0 && warm == 0 ? 1 : warm;
}

/* Counts warm-up call `it` of `warm`, which took dt ns, into spent and timed (the first call
 * pays for cold pages, so it counts only when it is the only one). */
static inline void br_warmup_add(uint64_t it, uint64_t warm, uint64_t dt, uint64_t *spent,
                                 uint64_t *timed) {
    if (it > 0 || warm == 1) {
        *spent += dt;
        ++*timed;
    }
}

/* Adaptive timed iterations from `spent` ns over `timed` (>= 1) warm-up calls. */
static inline uint64_t br_adaptive_iters(uint64_t spent, uint64_t timed) {
    uint64_t per = spent / timed;
    uint64_t iters = per == 0 ? BR_ADAPTIVE_MAX : BR_TARGET_NS / per;
    if (iters < BR_ADAPTIVE_MIN) iters = BR_ADAPTIVE_MIN;
    if (iters > BR_ADAPTIVE_MAX) iters = BR_ADAPTIVE_MAX;
    return iters;
}

/* Elements of esize bytes that differ between got and want (bytes long; 0 when they match). */
static inline uint64_t br_count_wrong(const uint8_t *got, const uint8_t *want, size_t bytes,
                                      size_t esize) {
    if (bytes == 0 || memcmp(got, want, bytes) == 0) return 0;
    uint64_t wrong = 0;
    for (size_t off = 0; off < bytes; off += esize)
        wrong += memcmp(got + off, want + off, esize) != 0;
    return wrong;
}

/* ---- statistics --------------------------------------------------------------------------- */

typedef struct br_result {
    uint64_t iters;
    double time_us, p50_us, p99_us, p999_us, max_us, algbw, busbw;
    int64_t wrong;            /* summed over ranks; -1 without --check */
    int64_t allocs;           /* summed over ranks; -1 when not counted */
    /* Context switches during the timed loop, summed over ranks (getrusage): involuntary (the
     * CPU was taken from a rank: each one a stall of the call it fell in) and voluntary. */
    uint64_t preempted, yielded;
} br_result;

/* The counters a timed loop sums over ranks (br_ops.combine). */
enum { BR_SUM_WRONG, BR_SUM_ALLOCS, BR_SUM_PREEMPTED, BR_SUM_YIELDED, BR_SUMS };

/* What a collective's size sweep counted in its timed loops, summed over sizes and ranks. */
typedef struct br_totals {
    int64_t allocs;           /* -1 when not counted */
    uint64_t preempted, yielded;
} br_totals;

static inline int br_cmp_u64(const void *a, const void *c) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)c;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile p (0..1) of the sorted v[0..k). */
static inline double br_percentile_us(const uint64_t *v, uint64_t k, double p) {
    double idx = p * (double)k;
    uint64_t i = (uint64_t)idx;
    if ((double)i < idx) i++;
    i = i == 0 ? 0 : i - 1;
    if (i >= k) i = k - 1;
    return (double)v[i] / 1e3;
}

/* Fills res's times and bandwidths from the per-iteration maxima times[0..res->iters) in ns
 * (sorted in place) for a size of `bytes` with bus factor `bus`. */
static inline void br_stats(uint64_t *times, uint64_t bytes, double bus, br_result *res) {
    uint64_t iters = res->iters;
    double total = 0;
    for (uint64_t i = 0; i < iters; i++) total += (double)times[i];
    res->time_us = total / (double)iters / 1e3;
    qsort(times, (size_t)iters, sizeof times[0], br_cmp_u64);
    res->p50_us = br_percentile_us(times, iters, 0.5);
    res->p99_us = br_percentile_us(times, iters, 0.99);
    res->p999_us = br_percentile_us(times, iters, 0.999);
    res->max_us = (double)times[iters - 1] / 1e3;
    res->algbw = res->time_us > 0 ? (double)bytes / res->time_us / 1e3 : 0;
    res->busbw = res->algbw * bus;
}

/* ---- output ------------------------------------------------------------------------------- */

/* The "# iterations" header line, to f. */
static inline void br_print_iters_line(FILE *f, uint64_t iters, int64_t warmup) {
    if (iters)
        fprintf(f, "# iterations: %" PRIu64 " per size", iters);
    else
        fprintf(f, "# iterations: adaptive, ~0.3 s of timed work per size (10..100000)");
    if (warmup >= 0)
        fprintf(f, ", warm-up %" PRId64 "\n", warmup);
    else
        fprintf(f, ", warm-up 20 (fewer above 1 MiB)\n");
}

/* The nccl-tests column header, to stdout. */
static inline void br_print_columns(void) {
    printf("#%11s %12s %9s %6s %5s %11s %11s %11s %7s %10s %10s %10s %10s\n", "size", "count",
           "type", "redop", "root", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong",
           "p50(us)", "p99(us)", "p99.9(us)", "max(us)");
}

/* What a row names besides its result. */
typedef struct br_row {
    const char *impl, *coll, *dtype, *op, *mode;
    uint64_t bytes, count;
    int root;
    unsigned ranks;
} br_row;

/* One size's line, to stdout: a table row, or with json a JSON object. */
static inline void br_print_row(const br_row *w, const br_result *r, bool json) {
    if (json) {
        printf("{\"impl\":\"%s\",\"coll\":\"%s\",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
               ",\"dtype\":\"%s\",\"op\":\"%s\",\"root\":%d,\"ranks\":%u,\"mode\":\"%s\","
               "\"iters\":%" PRIu64 ",\"time_us\":%.9g,\"algbw\":%.9g,\"busbw\":%.9g,"
               "\"p50_us\":%.9g,\"p99_us\":%.9g,\"p999_us\":%.9g,\"max_us\":%.9g,"
               "\"wrong\":%" PRId64 ",\"allocs\":%" PRId64 ",\"preempted\":%" PRIu64
               ",\"yielded\":%" PRIu64 "}\n",
               w->impl, w->coll, w->bytes, w->count, w->dtype, w->op, w->root, w->ranks,
               w->mode, r->iters, r->time_us, r->algbw, r->busbw, r->p50_us, r->p99_us,
               r->p999_us, r->max_us, r->wrong, r->allocs, r->preempted, r->yielded);
        return;
    }
    char wrong[24];
    if (r->wrong < 0)
        snprintf(wrong, sizeof wrong, "N/A");
    else
        snprintf(wrong, sizeof wrong, "%" PRId64, r->wrong);
    printf(" %11" PRIu64 " %12" PRIu64 " %9s %6s %5d %11.2f %11.3f %11.3f %7s %10.2f %10.2f "
           "%10.2f %10.2f\n",
           w->bytes, w->count, w->dtype, w->op, w->root, r->time_us, r->algbw, r->busbw, wrong,
           r->p50_us, r->p99_us, r->p999_us, r->max_us);
}

/* The progress line, to stderr, for a size that took took_ns in all (when that was long). */
static inline void br_print_progress(uint64_t bytes, uint64_t iters, uint64_t took_ns) {
    if (took_ns > BR_PROGRESS_NS)
        fprintf(stderr, "# size %" PRIu64 " done: %" PRIu64 " iterations in %.1f s\n", bytes,
                iters, (double)took_ns / 1e9);
}

/* ---- the harness -------------------------------------------------------------------------- */

/* One row's geometry on this rank. */
typedef struct br_size {
    br_coll coll;
    uint64_t bytes;           /* the reported size: whole elements (whole blocks of n) */
    uint64_t count;           /* elements in that buffer */
    uint64_t arg;             /* the call's count argument: count, or one block's */
    size_t block_bytes;       /* blocked collectives: one rank's block */
    size_t recv_bytes;        /* bytes of recv this rank's call writes (what --check compares) */
    uint32_t peer;            /* sendrecv partner */
    bool idle;                /* sendrecv: no partner for this rank */
} br_size;

/* The reduction ops whose --check values the harness knows (zcoll's order; MPI lacks AVG). */
typedef enum br_op { BR_SUM, BR_PROD, BR_MIN, BR_MAX, BR_AVG } br_op;

struct br_bench;

/* What a program supplies: its calls. Every function gets the br_bench the program embedded
 * first in its own state (so it may cast it back). */
typedef struct br_ops {
    /* One call of the row's collective, issue to completion: the timed work. */
    void (*run_once)(struct br_bench *h, const br_size *s);
    /* An untimed barrier across the ranks (--mode barrier). */
    void (*barrier)(struct br_bench *h);
    /* Rank 0's iterations, returned on every rank (the others pass 0). */
    uint64_t (*agree_iters)(struct br_bench *h, uint64_t iters);
    /* After a timed loop: times[0..iters) become their maxima over the ranks and
     * sums[0..BR_SUMS) their sums (on rank 0 at least). */
    void (*combine)(struct br_bench *h, uint64_t iters, uint64_t sums[BR_SUMS]);
    /* The integer k as one element of the program's dtype at dst (integers wrap). */
    void (*encode)(const struct br_bench *h, uint64_t k, uint8_t *dst);
    /* The header line(s) of collective c's table, to h->meta (rank 0 only). */
    void (*header)(const struct br_bench *h, br_coll c);
    /* Optional: before a row's warm-up and after its timed loop (persistent plans). */
    void (*row_begin)(struct br_bench *h, const br_size *s);
    void (*row_end)(struct br_bench *h, const br_size *s);
    /* Optional (NULL: not counted): on, reset the count of allocations and count from now;
     * off, stop and return how many there were. */
    uint64_t (*count_allocs)(struct br_bench *h, bool on);
} br_ops;

/* The state both programs share; each program's own state starts with one. */
typedef struct br_bench {
    br_opts o;
    const br_ops *ops;
    const char *impl;         /* the JSON impl: "zcoll", "openmpi", "mpich" */
    br_op op;                 /* o.op looked up */
    uint32_t sum_ranks;       /* ranks whose SUM inputs are non-zero (fewer keeps narrow floats
                               * exact; n otherwise) */
    bool avg_same;            /* AVG: every rank the same input (floats: an exact mean) */
    uint32_t rank, n;
    size_t esize;             /* bytes of one element of o.dtype */
    uint8_t *send, *recv, *ref; /* ref: the expected recv (with --check) */
    uint64_t *times;          /* per-iteration ns; times_cap entries */
    uint64_t times_cap;
    FILE *meta;               /* where header and comment lines go: stdout, stderr in JSON */
} br_bench;

/* The row of collective c for `bytes` (ignored by barrier); false when it rounds to no
 * element. */
static inline bool br_geometry(const br_bench *h, br_coll c, uint64_t bytes, br_size *s) {
    *s = (br_size){.coll = c};
    uint64_t es = h->esize, n = h->n;
    if (c == BR_BARRIER) return true;
    uint64_t count = br_colls[c].blocked ? bytes / es / n * n : bytes / es;
    if (count == 0) return false;
    s->count = count;
    s->bytes = count * es;
    s->arg = br_colls[c].blocked ? count / n : count;
    s->block_bytes = (size_t)(s->arg * es);
    bool at_root = h->rank == h->o.root;
    switch (c) {
    case BR_ALLREDUCE: case BR_ALLGATHER: case BR_ALLTOALL:
        s->recv_bytes = (size_t)s->bytes;
        break;
    case BR_BROADCAST: /* in place at the root (its send): nothing lands in its recv */
        s->recv_bytes = at_root ? 0 : (size_t)s->bytes;
        break;
    case BR_REDUCE: case BR_GATHER:
        s->recv_bytes = at_root ? (size_t)s->bytes : 0;
        break;
    case BR_REDUCE_SCATTER: case BR_SCATTER:
        s->recv_bytes = s->block_bytes;
        break;
    case BR_SENDRECV:
        s->peer = h->rank ^ 1u;
        s->idle = s->peer >= h->n;
        s->recv_bytes = s->idle ? 0 : (size_t)s->bytes;
        break;
    case BR_BARRIER: case BR_COLL_COUNT:
        break;
    }
    return true;
}

/* ---- inputs and expected results -----------------------------------------------------------
 * Collectives that only move data get bytes that name their source rank and offset, compared
 * bytewise. Reductions get small non-negative integers per (rank, index) chosen so that every
 * result is an integer exact in the dtype (narrow floats: sums kept within 2^(mantissa+1) by
 * letting only the first sum_ranks ranks contribute); integer sums wrap like the library's. */

static inline uint8_t br_pattern(uint32_t rank, uint64_t off) {
    uint64_t h = (off + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)rank + 1) * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 29;
    return (uint8_t)((h * 0xbf58476d1ce4e5b9ull) >> 56);
}

/* Rank r's input at index i of the full send vector, as an integer. */
static inline uint64_t br_value_of(const br_bench *h, uint32_t r, uint64_t i) {
    uint64_t n = h->n;
    switch (h->op) {
    case BR_SUM: return r < h->sum_ranks ? (r + i) % 3 : 0;
    case BR_PROD: return (i + r) % n == 0 ? 1 + i % 3 : 1;
    case BR_MIN: case BR_MAX: return ((uint64_t)r * 5 + i) % 7;
    case BR_AVG: return h->avg_same ? i % 3 : (r + i) % 3;
    }
    return 0;
}

/* The reduction of every rank's input at index i, as an integer (before wrapping). */
static inline uint64_t br_expected(const br_bench *h, uint64_t i) {
    uint64_t acc = br_value_of(h, 0, i);
    for (uint32_t r = 1; r < h->n; r++) {
        uint64_t v = br_value_of(h, r, i);
        switch (h->op) {
        case BR_SUM: case BR_AVG: acc += v; break;
        case BR_PROD: acc *= v; break;
        case BR_MIN: acc = v < acc ? v : acc; break;
        case BR_MAX: acc = v > acc ? v : acc; break;
        }
    }
    return h->op == BR_AVG ? acc / h->n : acc;
}

/* Reductions: send gets this rank's inputs; ref the expected recv contents. */
static inline void br_prepare_reduce(br_bench *h, const br_size *s) {
    size_t es = h->esize;
    for (uint64_t i = 0; i < s->count; i++)
        h->ops->encode(h, br_value_of(h, h->rank, i), h->send + i * es);
    if (!h->o.check) return;
    uint64_t first = s->coll == BR_REDUCE_SCATTER ? (uint64_t)h->rank * s->arg : 0;
    for (uint64_t j = 0; j < s->recv_bytes / es; j++)
        h->ops->encode(h, br_expected(h, first + j), h->ref + j * es);
}

/* Data movement: send gets pattern(rank, offset); ref what recv must hold. */
static inline void br_prepare_move(br_bench *h, const br_size *s) {
    bool one_block = s->coll == BR_ALLGATHER || s->coll == BR_GATHER;
    size_t send_bytes = one_block ? s->block_bytes : (size_t)s->bytes;
    uint32_t root = (uint32_t)h->o.root, rank = h->rank;
    for (size_t off = 0; off < send_bytes; off++) h->send[off] = br_pattern(rank, off);
    if (!h->o.check) return;
    size_t blk = s->block_bytes;
    for (size_t off = 0; off < s->recv_bytes; off++) {
        uint8_t v = 0;
        switch (s->coll) {
        case BR_BROADCAST: v = br_pattern(root, off); break;
        case BR_ALLGATHER: case BR_GATHER: v = br_pattern((uint32_t)(off / blk), off % blk); break;
        case BR_SCATTER: v = br_pattern(root, rank * blk + off); break;
        case BR_ALLTOALL: v = br_pattern((uint32_t)(off / blk), rank * blk + off % blk); break;
        case BR_SENDRECV: v = br_pattern(s->peer, off); break;
        default: break;
        }
        h->ref[off] = v;
    }
}

/* ---- timing one size ---------------------------------------------------------------------- */

/* Runs the warm-up; returns the timed iterations every rank agrees on. */
static inline uint64_t br_warmup(br_bench *h, const br_size *s) {
    uint64_t warm = br_warmup_calls(h->o.warmup, h->o.iters, s->bytes);
    uint64_t spent = 0, timed = 0;
    for (uint64_t it = 0; it < warm; it++) {
        if (h->o.barrier_mode) h->ops->barrier(h);
        uint64_t t0 = br_now_ns();
        h->ops->run_once(h, s);
        br_warmup_add(it, warm, br_now_ns() - t0, &spent, &timed);
    }
    if (h->o.iters != 0) return h->o.iters;
    return h->ops->agree_iters(h, h->rank == 0 ? br_adaptive_iters(spent, timed) : 0);
}

/* The timed loop: h->times[it] = this rank's ns for iteration it; returns wrong elements. */
static inline uint64_t br_timed_loop(br_bench *h, const br_size *s, uint64_t iters) {
    uint64_t wrong = 0;
    for (uint64_t it = 0; it < iters; it++) {
        if (h->o.check) memset(h->recv, 0xff, s->recv_bytes);
        if (h->o.barrier_mode) h->ops->barrier(h);
        uint64_t t0 = br_now_ns();
        h->ops->run_once(h, s);
        h->times[it] = br_now_ns() - t0;
        if (h->o.check) wrong += br_count_wrong(h->recv, h->ref, s->recv_bytes, h->esize);
    }
    return wrong;
}

/* This process's context switches so far: involuntary, voluntary. */
static inline void br_switches(uint64_t *inv, uint64_t *vol) {
    struct rusage u;
    *inv = *vol = 0;
    if (getrusage(RUSAGE_SELF, &u) != 0) return;
    *inv = (uint64_t)u.ru_nivcsw;
    *vol = (uint64_t)u.ru_nvcsw;
}

/* Warm-up, timed loop, the combination over ranks; res complete on rank 0. */
static inline void br_measure(br_bench *h, const br_size *s, br_result *res) {
    uint64_t iters = br_warmup(h, s), inv0, vol0, inv1, vol1;
    bool counted = h->ops->count_allocs != NULL;
    if (counted) h->ops->count_allocs(h, true);
    br_switches(&inv0, &vol0);
    uint64_t sums[BR_SUMS] = {br_timed_loop(h, s, iters), 0, 0, 0};
    br_switches(&inv1, &vol1);
    if (counted) sums[BR_SUM_ALLOCS] = h->ops->count_allocs(h, false);
    sums[BR_SUM_PREEMPTED] = inv1 - inv0;
    sums[BR_SUM_YIELDED] = vol1 - vol0;
    h->ops->combine(h, iters, sums);
    *res = (br_result){.iters = iters, .wrong = h->o.check ? (int64_t)sums[BR_SUM_WRONG] : -1,
                       .allocs = counted ? (int64_t)sums[BR_SUM_ALLOCS] : -1,
                       .preempted = sums[BR_SUM_PREEMPTED], .yielded = sums[BR_SUM_YIELDED]};
    if (h->rank == 0) br_stats(h->times, s->bytes, br_bus_factor(s->coll, h->n), res);
}

/* One size of collective c: inputs, the measurement, rank 0's row; adds what it counted to
 * *t (allocs -1 when not counted). */
static inline void br_run_size(br_bench *h, br_coll c, uint64_t bytes, br_totals *t) {
    br_size s;
    if (!br_geometry(h, c, bytes, &s)) return;
    if (br_colls[c].reduces)
        br_prepare_reduce(h, &s);
    else if (c != BR_BARRIER)
        br_prepare_move(h, &s);
    uint64_t t0 = br_now_ns();
    br_result r;
    if (h->ops->row_begin) h->ops->row_begin(h, &s);
    br_measure(h, &s, &r);
    if (h->ops->row_end) h->ops->row_end(h, &s);
    t->allocs = r.allocs < 0 || t->allocs < 0 ? -1 : t->allocs + r.allocs;
    t->preempted += r.preempted;
    t->yielded += r.yielded;
    if (h->rank != 0) return;
    bool reduces = br_colls[c].reduces, rooted = br_colls[c].rooted;
    br_row w = {.impl = h->impl, .coll = br_colls[c].name, .dtype = h->o.dtype,
                .op = reduces ? h->o.op : "none", .mode = h->o.barrier_mode ? "barrier" : "loop",
                .bytes = s.bytes, .count = s.count, .root = rooted ? (int)h->o.root : -1,
                .ranks = h->n};
    br_print_row(&w, &r, h->o.json);
    fflush(stdout);
    br_print_progress(s.bytes, r.iters, br_now_ns() - t0);
}

/* Collective c over the size sweep: rank 0's header, every size. False when c cannot run
 * (sendrecv on one rank: a comment says so); else *t is what the timed loops counted (on rank
 * 0, summed over ranks): allocations (-1 when not counted) and context switches. */
static inline bool br_run_coll(br_bench *h, br_coll c, br_totals *t) {
    *t = (br_totals){0, 0, 0};
    if (c == BR_SENDRECV && h->n < 2) {
        if (h->rank == 0) fprintf(h->meta, "# sendrecv needs 2 or more ranks: skipped\n");
        return false;
    }
    if (h->rank == 0) {
        h->ops->header(h, c);
        br_print_iters_line(h->meta, h->o.iters, h->o.warmup);
        if (!h->o.json) br_print_columns();
    }
    if (c == BR_BARRIER) {
        br_run_size(h, c, 0, t);
        return true;
    }
    for (uint64_t bytes = h->o.min_bytes; bytes <= h->o.max_bytes; bytes *= h->o.factor) {
        br_run_size(h, c, bytes, t);
        if (bytes > h->o.max_bytes / h->o.factor) break;
    }
    return true;
}

/* ---- setup -------------------------------------------------------------------------------- */

/* bytes (at least one line) aligned to 64 and touched, so that no page fault lands in a timed
 * loop; NULL when there is no memory. */
static inline void *br_alloc(size_t bytes) {
    size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded);
    if (p) memset(p, 0, rounded);
    return p;
}

/* The buffers the harness owns (ref with --check, the iteration times) and meta; NULL when
 * done, else what had no memory. */
static inline const char *br_setup(br_bench *h, size_t buf_bytes) {
    h->meta = h->o.json ? stderr : stdout;
    if (h->o.check && !(h->ref = br_alloc(buf_bytes))) return "the expected results";
    h->times_cap = h->o.iters > BR_ADAPTIVE_MAX ? h->o.iters : BR_ADAPTIVE_MAX;
    h->times = br_alloc((size_t)h->times_cap * sizeof h->times[0]);
    return h->times ? NULL : "the iteration times";
}

/* Every collective in turn (-c all), or the one -c named, through the program's run_coll. */
static inline void br_run_all(br_bench *h, void (*run_coll)(br_bench *h, br_coll c)) {
    if (h->o.coll >= 0) {
        run_coll(h, (br_coll)h->o.coll);
        return;
    }
    for (int c = 0; c < BR_COLL_COUNT; c++) run_coll(h, (br_coll)c);
}

#endif
