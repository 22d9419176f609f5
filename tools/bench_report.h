/* bench_report.h: the output format that zcbench (tools/zcbench.c) and its peers in bench/
 * (bench/mpi_bench.c) share, so that their numbers are comparable. Owns the collectives' names
 * and nccl-tests bus factors, the options both take and how they parse (sizes with K/M/G
 * suffixes), the warm-up and adaptive iteration counts, the statistics of one size (mean of
 * the per-iteration maxima, nearest-rank p50/p99/p99.9, algbw, busbw), and the nccl-tests
 * table and JSON lines they print.
 *
 * Plain C11 and libc (no zcoll.h, no mpi.h), all static inline so each program takes what it
 * uses. The includer defines a feature macro (_POSIX_C_SOURCE or _GNU_SOURCE) before its first
 * #include, for clock_gettime. */
#ifndef ZCOLL_BENCH_REPORT_H
#define ZCOLL_BENCH_REPORT_H

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The options both programs take. */
typedef struct br_opts {
    int coll;              /* a br_coll, -1 for all, -2 until -c is given */
    uint64_t min_bytes;    /* 1..max_bytes */
    uint64_t max_bytes;    /* ..the program's ceiling */
    uint64_t factor;       /* >= 2 */
    int64_t warmup;        /* -1: by size (BR_WARMUP_DEFAULT, fewer above 1 MiB) */
    uint64_t iters;        /* 0: adaptive */
    bool barrier_mode;     /* a barrier before each timed call */
    bool check, json;
} br_opts;

static inline br_opts br_opts_default(void) {
    return (br_opts){.coll = -2, .min_bytes = 8, .max_bytes = 64ull << 20, .factor = 2,
                     .warmup = -1};
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

/* Parses argv[*i] when it is a shared option (-c -b -e -f -w -n --mode --check --json),
 * advancing *i past its value. BR_BAD: a usage error, *fmt with one %s for *arg; max_bytes
 * and size_error: the ceiling of -b and -e and the error (with %s) for sizes past it. */
static inline br_parsed br_parse_option(br_opts *o, int argc, char **argv, int *i,
                                        uint64_t max_bytes, const char *size_error,
                                        const char **fmt, const char **arg) {
    static const char *const valued[] = {"-c", "-b", "-e", "-f", "-w", "-n", "--mode"};
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
        if (!br_parse_bytes(s, &v) || v < 1 || v > max_bytes)
            *fmt = size_error;
        else
            *(a[1] == 'b' ? &o->min_bytes : &o->max_bytes) = v;
    } else if (strcmp(a, "-f") == 0) {
        if (!br_parse_u64(s, 2, 1u << 20, &o->factor)) *fmt = "-f %s: must be 2 or more";
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
    double time_us, p50_us, p99_us, p999_us, algbw, busbw;
    int64_t wrong;            /* summed over ranks; -1 without --check */
    int64_t allocs;           /* summed over ranks; -1 when not counted */
} br_result;

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
    printf("#%11s %12s %9s %6s %5s %11s %11s %11s %7s %10s %10s %10s\n", "size", "count",
           "type", "redop", "root", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong",
           "p50(us)", "p99(us)", "p99.9(us)");
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
               "\"p50_us\":%.9g,\"p99_us\":%.9g,\"p999_us\":%.9g,\"wrong\":%" PRId64
               ",\"allocs\":%" PRId64 "}\n",
               w->impl, w->coll, w->bytes, w->count, w->dtype, w->op, w->root, w->ranks,
               w->mode, r->iters, r->time_us, r->algbw, r->busbw, r->p50_us, r->p99_us,
               r->p999_us, r->wrong, r->allocs);
        return;
    }
    char wrong[24];
    if (r->wrong < 0)
        snprintf(wrong, sizeof wrong, "N/A");
    else
        snprintf(wrong, sizeof wrong, "%" PRId64, r->wrong);
    printf(" %11" PRIu64 " %12" PRIu64 " %9s %6s %5d %11.2f %11.3f %11.3f %7s %10.2f %10.2f "
           "%10.2f\n",
           w->bytes, w->count, w->dtype, w->op, w->root, r->time_us, r->algbw, r->busbw, wrong,
           r->p50_us, r->p99_us, r->p999_us);
}

/* The progress line, to stderr, for a size that took took_ns in all (when that was long). */
static inline void br_print_progress(uint64_t bytes, uint64_t iters, uint64_t took_ns) {
    if (took_ns > BR_PROGRESS_NS)
        fprintf(stderr, "# size %" PRIu64 " done: %" PRIu64 " iterations in %.1f s\n", bytes,
                iters, (double)took_ns / 1e9);
}

#endif
