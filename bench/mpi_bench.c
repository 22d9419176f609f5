/* mpi_bench.c: the MPI peer of zcbench. Owns timing the same collectives, over the same size
 * sweep, with the same warm-up, adaptive iteration count, timing modes, --check inputs and
 * output (nccl-tests table or one JSON object per size) as tools/zcbench.c, but through plain
 * MPI calls, so that `ninja bench` can put Open MPI and MPICH beside zcoll.
 *
 * Built by bench/run_bench.py with mpicc.openmpi and mpicc.mpich (never by the default build:
 * MPI is optional); run under mpirun. It must not do anything inside the timed loop that
 * zcbench does not do: one MPI call per iteration (plus MPI_Barrier in barrier mode, and the
 * untimed verification with --check); the cross-rank reduction of the times comes after the
 * loop. The JSON `impl` is "openmpi" or "mpich", from MPI_Get_library_version (or
 * -DMB_IMPL=\"name\" at build time). Rank 0 alone prints. */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    MB_EXIT_FAIL = 1,
    MB_EXIT_USAGE = 2,
    MB_ADAPTIVE_MIN = 10,        /* adaptive iterations per size, at least */
    MB_ADAPTIVE_MAX = 100000,    /* ... and at most */
    MB_ITERS_MAX = 1000000,      /* ceiling of -n */
    MB_WARMUP_DEFAULT = 20,      /* warm-up iterations up to 1 MiB ... */
    MB_WARMUP_MIN = 3,           /* ... fewer above, down to this many */
    MB_WARMUP_MAX = 1000000,     /* ceiling of -w */
    MB_ALIGN = 64,
    MB_TAG = 7,                  /* sendrecv's message tag */
};
#define MB_TARGET_NS 300000000ull       /* adaptive: timed work per size, ns (0.3 s) */
#define MB_WARMUP_BYTES (64ull << 20)   /* default warm-up: about this many bytes above 1 MiB */
#define MB_PROGRESS_NS 2000000000ull    /* a size that took longer gets a progress line */
#define MB_MAX_BYTES (1ull << 34)       /* ceiling of -e (16 GiB: MPI counts are int) */

/* ---- the collectives ---------------------------------------------------------------------- */

typedef enum mb_coll {
    MB_ALLREDUCE, MB_REDUCE, MB_BROADCAST, MB_REDUCE_SCATTER, MB_ALLGATHER, MB_GATHER,
    MB_SCATTER, MB_ALLTOALL, MB_SENDRECV, MB_BARRIER, MB_COLL_COUNT
} mb_coll;

/* blocked: bytes is n blocks, one per rank, and the call's count is one block. */
typedef enum mb_factor { MB_BUS_ONE, MB_BUS_ALLREDUCE, MB_BUS_N1_N } mb_factor;
static const struct {
    const char *name;
    bool reduces, rooted, blocked;
    mb_factor factor;
} mb_colls[MB_COLL_COUNT] = {
    [MB_ALLREDUCE] = {"allreduce", true, false, false, MB_BUS_ALLREDUCE},
    [MB_REDUCE] = {"reduce", true, true, false, MB_BUS_ONE},
    [MB_BROADCAST] = {"broadcast", false, true, false, MB_BUS_ONE},
    [MB_REDUCE_SCATTER] = {"reduce_scatter", true, false, true, MB_BUS_N1_N},
    [MB_ALLGATHER] = {"allgather", false, false, true, MB_BUS_N1_N},
    [MB_GATHER] = {"gather", false, true, true, MB_BUS_N1_N},
    [MB_SCATTER] = {"scatter", false, true, true, MB_BUS_N1_N},
    [MB_ALLTOALL] = {"alltoall", false, false, true, MB_BUS_N1_N},
    [MB_SENDRECV] = {"sendrecv", false, false, false, MB_BUS_ONE},
    [MB_BARRIER] = {"barrier", false, false, false, MB_BUS_ONE},
};

/* nccl-tests' bus bandwidth factor for n ranks. */
static double mb_bus_factor(mb_coll c, int n) {
    switch (mb_colls[c].factor) {
    case MB_BUS_ALLREDUCE: return 2.0 * (double)(n - 1) / (double)n;
    case MB_BUS_N1_N: return (double)(n - 1) / (double)n;
    case MB_BUS_ONE: break;
    }
    return 1.0;
}

/* The element types MPI has (its standard has no 16- or 8-bit floats); zcbench's names. */
typedef enum mb_dtype {
    MB_INT8, MB_UINT8, MB_INT32, MB_UINT32, MB_INT64, MB_UINT64, MB_FLOAT32, MB_FLOAT64,
    MB_DTYPE_COUNT
} mb_dtype;
static const struct {
    const char *name;
    size_t bytes;
} mb_dtypes[MB_DTYPE_COUNT] = {
    [MB_INT8] = {"int8", 1},       [MB_UINT8] = {"uint8", 1},
    [MB_INT32] = {"int32", 4},     [MB_UINT32] = {"uint32", 4},
    [MB_INT64] = {"int64", 8},     [MB_UINT64] = {"uint64", 8},
    [MB_FLOAT32] = {"float32", 4}, [MB_FLOAT64] = {"float64", 8},
};

/* A function, not a table: Open MPI's handles are addresses, MPICH's are integers. */
static MPI_Datatype mb_mpi_dtype(mb_dtype t) {
    switch (t) {
    case MB_INT8: return MPI_INT8_T;
    case MB_UINT8: return MPI_UINT8_T;
    case MB_INT32: return MPI_INT32_T;
    case MB_UINT32: return MPI_UINT32_T;
    case MB_INT64: return MPI_INT64_T;
    case MB_UINT64: return MPI_UINT64_T;
    case MB_FLOAT32: return MPI_FLOAT;
    case MB_FLOAT64: return MPI_DOUBLE;
    case MB_DTYPE_COUNT: break;
    }
    return MPI_DATATYPE_NULL;
}

/* zcbench's ops less avg, which MPI does not have. */
typedef enum mb_op { MB_SUM, MB_PROD, MB_MIN, MB_MAX, MB_OP_COUNT } mb_op;
static const char *const mb_op_names[MB_OP_COUNT] = {"sum", "prod", "min", "max"};

static MPI_Op mb_mpi_op(mb_op op) {
    switch (op) {
    case MB_SUM: return MPI_SUM;
    case MB_PROD: return MPI_PROD;
    case MB_MIN: return MPI_MIN;
    case MB_MAX: return MPI_MAX;
    case MB_OP_COUNT: break;
    }
    return MPI_OP_NULL;
}

/* ---- options ------------------------------------------------------------------------------ */

typedef struct mb_opts {
    int coll;              /* an mb_coll, or -1 for all */
    uint64_t min_bytes;    /* 1..max_bytes */
    uint64_t max_bytes;    /* ..MB_MAX_BYTES */
    uint64_t factor;       /* >= 2 */
    mb_dtype dtype;
    mb_op op;
    int root;              /* checked against the rank count */
    int64_t warmup;        /* -1: by size (MB_WARMUP_DEFAULT, fewer above 1 MiB) */
    uint64_t iters;        /* 0: adaptive */
    bool barrier_mode;     /* an MPI_Barrier before each timed call */
    bool check, json, help;
} mb_opts;

static int mb_rank; /* this process's rank in MPI_COMM_WORLD; only rank 0 prints */

static const char mb_usage_line[] =
    "usage: mpirun -np N mpi_bench -c COLL [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-d DTYPE]\n"
    "       [-o OP] [-r ROOT] [-w WARMUP] [-n ITERS] [--mode loop|barrier] [--check] [--json]\n"
    "       (mpi_bench --help for more)\n";

static void mb_help(void) {
    fputs(mb_usage_line, stdout);
    fputs("\nzcbench's twin over plain MPI: times MPI_Allreduce, MPI_Reduce, MPI_Bcast,\n"
          "MPI_Reduce_scatter_block, MPI_Allgather, MPI_Gather, MPI_Scatter, MPI_Alltoall,\n"
          "MPI_Sendrecv and MPI_Barrier over a size sweep. Rank 0 prints the report.\n"
          "\nOptions (as zcbench):\n"
          "  -c COLL        allreduce reduce broadcast reduce_scatter allgather gather scatter\n"
          "                 alltoall sendrecv barrier, or all (required)\n"
          "  -b MINBYTES    smallest size (default 8); suffixes K, M, G are powers of 1024\n"
          "  -e MAXBYTES    largest size (default 64M)\n"
          "  -f FACTOR      size multiplier between rows, >= 2 (default 2)\n"
          "  -d DTYPE       int8 uint8 int32 uint32 int64 uint64 float32 float64\n"
          "                 (default float32; MPI has no 16- or 8-bit floats)\n"
          "  -o OP          sum prod min max (default sum; MPI has no avg)\n"
          "  -r ROOT        root of reduce, broadcast, gather, scatter (default 0)\n"
          "  -w WARMUP      untimed iterations per size (default 20, fewer above 1 MiB:\n"
          "                 about 64 MiB of data, at least 3)\n"
          "  -n ITERS       timed iterations per size, 1..1000000 (default adaptive: about\n"
          "                 0.3 s of timed work, 10..100000, decided by rank 0 from the\n"
          "                 warm-up and broadcast so every rank runs the same number)\n"
          "  --mode loop    back-to-back calls, each timed alone (default)\n"
          "  --mode barrier an MPI_Barrier (untimed) before each timed call\n"
          "  --check        every rank verifies every timed iteration outside the timed region\n"
          "  --json         one JSON object per line and size instead of the table\n"
          "  -h, --help     this text\n"
          "\nSizes, columns and JSON keys are zcbench's (zcbench --help); `impl` is \"openmpi\"\n"
          "or \"mpich\" and `allocs` is -1 (not counted).\n",
          stdout);
}

/* Every rank parses the same arguments and reaches the same verdict; rank 0 says it. */
static _Noreturn void mb_usage(const char *fmt, const char *arg) {
    if (mb_rank == 0) {
        fputs("mpi_bench: ", stderr);
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
        fputs(mb_usage_line, stderr);
    }
    MPI_Finalize();
    exit(MB_EXIT_USAGE);
}

/* Decimal with an optional K/M/G suffix (powers of 1024); false if malformed or overflowing. */
static bool mb_parse_bytes(const char *s, uint64_t *out) {
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

static bool mb_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    if (*s < '0' || *s > '9') return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
    *out = (uint64_t)v;
    return true;
}

static int mb_find_coll(const char *s) {
    if (strcmp(s, "all") == 0) return -1;
    for (int c = 0; c < MB_COLL_COUNT; c++)
        if (strcmp(s, mb_colls[c].name) == 0) return c;
    mb_usage("-c %s: not a collective", s);
}

static mb_dtype mb_find_dtype(const char *s) {
    for (int t = 0; t < MB_DTYPE_COUNT; t++)
        if (strcmp(s, mb_dtypes[t].name) == 0) return (mb_dtype)t;
    mb_usage("-d %s: not a dtype MPI has (int8 uint8 int32 uint32 int64 uint64 float32 "
             "float64)", s);
}

static mb_op mb_find_op(const char *s) {
    for (int o = 0; o < MB_OP_COUNT; o++)
        if (strcmp(s, mb_op_names[o]) == 0) return (mb_op)o;
    mb_usage("-o %s: not an op MPI has (sum prod min max)", s);
}

/* The value of option argv[*i] (advancing *i); a usage error when it is missing. */
static const char *mb_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) mb_usage("%s needs a value", argv[*i]);
    return argv[++*i];
}

static void mb_parse_option(mb_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    uint64_t v = 0;
    if (strcmp(a, "-c") == 0) {
        o->coll = mb_find_coll(mb_value(argc, argv, i));
    } else if (strcmp(a, "-b") == 0 || strcmp(a, "-e") == 0) {
        const char *s = mb_value(argc, argv, i);
        if (!mb_parse_bytes(s, &v) || v < 1 || v > MB_MAX_BYTES)
            mb_usage("bad size %s (1 to 16G, suffixes K M G)", s);
        *(a[1] == 'b' ? &o->min_bytes : &o->max_bytes) = v;
    } else if (strcmp(a, "-f") == 0) {
        const char *s = mb_value(argc, argv, i);
        if (!mb_parse_u64(s, 2, 1u << 20, &o->factor)) mb_usage("-f %s: must be 2 or more", s);
    } else if (strcmp(a, "-d") == 0) {
        o->dtype = mb_find_dtype(mb_value(argc, argv, i));
    } else if (strcmp(a, "-o") == 0) {
        o->op = mb_find_op(mb_value(argc, argv, i));
    } else if (strcmp(a, "-r") == 0) {
        const char *s = mb_value(argc, argv, i);
        if (!mb_parse_u64(s, 0, 1u << 20, &v)) mb_usage("-r %s: not a rank", s);
        o->root = (int)v;
    } else if (strcmp(a, "-w") == 0) {
        const char *s = mb_value(argc, argv, i);
        if (!mb_parse_u64(s, 0, MB_WARMUP_MAX, &v)) mb_usage("-w %s: 0..1000000", s);
        o->warmup = (int64_t)v;
    } else if (strcmp(a, "-n") == 0) {
        const char *s = mb_value(argc, argv, i);
        if (!mb_parse_u64(s, 1, MB_ITERS_MAX, &o->iters)) mb_usage("-n %s: 1..1000000", s);
    } else if (strcmp(a, "--mode") == 0) {
        const char *s = mb_value(argc, argv, i);
        if (strcmp(s, "loop") != 0 && strcmp(s, "barrier") != 0)
            mb_usage("--mode %s: loop or barrier", s);
        o->barrier_mode = strcmp(s, "barrier") == 0;
    } else if (strcmp(a, "--check") == 0) {
        o->check = true;
    } else if (strcmp(a, "--json") == 0) {
        o->json = true;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        o->help = true;
    } else {
        mb_usage("unknown argument %s", a);
    }
}

static void mb_parse(mb_opts *o, int argc, char **argv) {
    *o = (mb_opts){.coll = -2, .min_bytes = 8, .max_bytes = 64ull << 20, .factor = 2,
                   .dtype = MB_FLOAT32, .op = MB_SUM, .warmup = -1};
    for (int i = 1; i < argc; i++) mb_parse_option(o, argc, argv, &i);
    if (o->help) return;
    if (o->coll == -2) mb_usage("%s", "-c COLL is required");
    if (o->min_bytes > o->max_bytes) mb_usage("%s", "-b is larger than -e");
}

/* ---- the run ------------------------------------------------------------------------------ */

typedef struct mb_bench {
    mb_opts o;
    int rank, n;
    const char *impl;          /* "openmpi", "mpich" or what -DMB_IMPL named */
    char version[MPI_MAX_LIBRARY_VERSION_STRING]; /* first line of the library's version */
    MPI_Datatype mdt;
    MPI_Op mop;
    size_t esize;              /* bytes of one element of o.dtype */
    size_t buf_bytes;          /* of send, recv and (with --check) ref */
    uint8_t *send, *recv, *ref;
    uint64_t *times;           /* per-iteration ns; times_cap entries */
    uint64_t times_cap;
    FILE *meta;                /* where header and comment lines go: stdout, stderr in JSON */
} mb_bench;

/* One row's geometry on this rank. */
typedef struct mb_size {
    mb_coll coll;
    uint64_t bytes;            /* the reported size: whole elements (whole blocks of n) */
    uint64_t count;            /* elements in that buffer */
    int arg;                   /* the call's count argument */
    size_t block_bytes;        /* blocked collectives: one rank's block */
    size_t recv_bytes;         /* bytes of recv this rank's call writes */
    int peer;                  /* sendrecv partner */
    bool idle;                 /* sendrecv: no partner for this rank */
} mb_size;

static uint64_t mb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* MPI's default handler aborts the job on error, so a failed call never returns here. */
static void mb_run_once(mb_bench *b, const mb_size *s) {
    const mb_opts *o = &b->o;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (s->coll) {
    case MB_ALLREDUCE:
        MPI_Allreduce(b->send, b->recv, s->arg, b->mdt, b->mop, w);
        break;
    case MB_REDUCE:
        MPI_Reduce(b->send, b->recv, s->arg, b->mdt, b->mop, o->root, w);
        break;
    case MB_BROADCAST: /* zcbench broadcasts from the root's send into the others' recv */
        MPI_Bcast(b->rank == o->root ? b->send : b->recv, s->arg, b->mdt, o->root, w);
        break;
    case MB_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(b->send, b->recv, s->arg, b->mdt, b->mop, w);
        break;
    case MB_ALLGATHER:
        MPI_Allgather(b->send, s->arg, b->mdt, b->recv, s->arg, b->mdt, w);
        break;
    case MB_GATHER:
        MPI_Gather(b->send, s->arg, b->mdt, b->recv, s->arg, b->mdt, o->root, w);
        break;
    case MB_SCATTER:
        MPI_Scatter(b->send, s->arg, b->mdt, b->recv, s->arg, b->mdt, o->root, w);
        break;
    case MB_ALLTOALL:
        MPI_Alltoall(b->send, s->arg, b->mdt, b->recv, s->arg, b->mdt, w);
        break;
    case MB_SENDRECV:
        if (s->idle) return;
        MPI_Sendrecv(b->send, s->arg, b->mdt, s->peer, MB_TAG, b->recv, s->arg, b->mdt,
                     s->peer, MB_TAG, w, MPI_STATUS_IGNORE);
        break;
    case MB_BARRIER:
        MPI_Barrier(w);
        break;
    case MB_COLL_COUNT:
        break;
    }
}

/* The row for `bytes` (ignored by barrier); false when it rounds to no element. */
static bool mb_geometry(const mb_bench *b, mb_coll c, uint64_t bytes, mb_size *s) {
    *s = (mb_size){.coll = c};
    uint64_t es = b->esize, n = (uint64_t)b->n;
    if (c == MB_BARRIER) return true;
    uint64_t count = mb_colls[c].blocked ? bytes / es / n * n : bytes / es;
    if (count == 0) return false;
    s->count = count;
    s->bytes = count * es;
    s->arg = (int)(mb_colls[c].blocked ? count / n : count);
    s->block_bytes = (size_t)s->arg * b->esize;
    bool at_root = b->rank == b->o.root;
    switch (c) {
    case MB_ALLREDUCE: case MB_BROADCAST: case MB_ALLGATHER: case MB_ALLTOALL:
        s->recv_bytes = (size_t)s->bytes;
        break;
    case MB_REDUCE: case MB_GATHER:
        s->recv_bytes = at_root ? (size_t)s->bytes : 0;
        break;
    case MB_REDUCE_SCATTER: case MB_SCATTER:
        s->recv_bytes = s->block_bytes;
        break;
    case MB_SENDRECV:
        s->peer = b->rank ^ 1;
        s->idle = s->peer >= b->n;
        s->recv_bytes = s->idle ? 0 : (size_t)s->bytes;
        break;
    case MB_BARRIER: case MB_COLL_COUNT:
        break;
    }
    /* The root's own copy of a broadcast is its send buffer: nothing lands in its recv. */
    if (c == MB_BROADCAST && at_root) s->recv_bytes = 0;
    return true;
}

/* ---- inputs and expected results -----------------------------------------------------------
 * As zcbench: collectives that only move data get bytes naming their source rank and offset,
 * compared bytewise; reductions get small non-negative integers per (rank, index) whose
 * results are exact in every dtype here (integer sums cannot wrap at the rank counts MPI runs
 * on one host). */

static uint8_t mb_pattern(int rank, uint64_t off) {
    uint64_t h = (off + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)rank + 1) * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 29;
    return (uint8_t)((h * 0xbf58476d1ce4e5b9ull) >> 56);
}

/* Writes the integer k as one element of dtype t at dst (integers wrap to their width). */
static void mb_encode(mb_dtype t, uint64_t k, uint8_t *dst) {
    if (t == MB_FLOAT32) {
        float f = (float)k;
        memcpy(dst, &f, sizeof f);
        return;
    }
    if (t == MB_FLOAT64) {
        double d = (double)k;
        memcpy(dst, &d, sizeof d);
        return;
    }
    for (size_t i = 0; i < mb_dtypes[t].bytes; i++) dst[i] = (uint8_t)(k >> (8 * i));
}

/* Rank r's input at index i of the full send vector, as an integer. */
static uint64_t mb_value_of(const mb_bench *b, int r, uint64_t i) {
    uint64_t n = (uint64_t)b->n, ur = (uint64_t)r;
    switch (b->o.op) {
    case MB_SUM: return (ur + i) % 3;
    case MB_PROD: return (i + ur) % n == 0 ? 1 + i % 3 : 1;
    case MB_MIN: case MB_MAX: return (ur * 5 + i) % 7;
    case MB_OP_COUNT: break;
    }
    return 0;
}

/* The reduction of every rank's input at index i, as an integer (before wrapping). */
static uint64_t mb_expected(const mb_bench *b, uint64_t i) {
    uint64_t acc = mb_value_of(b, 0, i);
    for (int r = 1; r < b->n; r++) {
        uint64_t v = mb_value_of(b, r, i);
        switch (b->o.op) {
        case MB_SUM: acc += v; break;
        case MB_PROD: acc *= v; break;
        case MB_MIN: acc = v < acc ? v : acc; break;
        case MB_MAX: acc = v > acc ? v : acc; break;
        case MB_OP_COUNT: break;
        }
    }
    return acc;
}

/* Reductions: send gets this rank's inputs; ref the expected recv contents. */
static void mb_prepare_reduce(mb_bench *b, const mb_size *s) {
    size_t es = b->esize;
    for (uint64_t i = 0; i < s->count; i++)
        mb_encode(b->o.dtype, mb_value_of(b, b->rank, i), b->send + i * es);
    if (!b->o.check) return;
    uint64_t first = s->coll == MB_REDUCE_SCATTER ? (uint64_t)b->rank * (uint64_t)s->arg : 0;
    for (uint64_t j = 0; j < s->recv_bytes / es; j++)
        mb_encode(b->o.dtype, mb_expected(b, first + j), b->ref + j * es);
}

/* Data movement: send gets pattern(rank, offset); ref what recv must hold. */
static void mb_prepare_move(mb_bench *b, const mb_size *s) {
    bool one_block = s->coll == MB_ALLGATHER || s->coll == MB_GATHER;
    size_t send_bytes = one_block ? s->block_bytes : (size_t)s->bytes;
    for (size_t off = 0; off < send_bytes; off++) b->send[off] = mb_pattern(b->rank, off);
    if (!b->o.check) return;
    size_t blk = s->block_bytes;
    for (size_t off = 0; off < s->recv_bytes; off++) {
        uint8_t v = 0;
        switch (s->coll) {
        case MB_BROADCAST: v = mb_pattern(b->o.root, off); break;
        case MB_ALLGATHER: case MB_GATHER: v = mb_pattern((int)(off / blk), off % blk); break;
        case MB_SCATTER: v = mb_pattern(b->o.root, (size_t)b->rank * blk + off); break;
        case MB_ALLTOALL:
            v = mb_pattern((int)(off / blk), (size_t)b->rank * blk + off % blk);
            break;
        case MB_SENDRECV: v = mb_pattern(s->peer, off); break;
        default: break;
        }
        b->ref[off] = v;
    }
}

/* Wrong elements of this rank's result (0 when it matches ref). */
static uint64_t mb_verify(const mb_bench *b, const mb_size *s) {
    if (s->recv_bytes == 0 || memcmp(b->recv, b->ref, s->recv_bytes) == 0) return 0;
    uint64_t wrong = 0;
    for (size_t off = 0; off < s->recv_bytes; off += b->esize)
        wrong += memcmp(b->recv + off, b->ref + off, b->esize) != 0;
    return wrong;
}

/* ---- timing one size ---------------------------------------------------------------------- */

typedef struct mb_result {
    uint64_t iters;
    double time_us, p50_us, p99_us, p999_us, algbw, busbw;
    int64_t wrong;             /* summed over ranks; -1 without --check */
} mb_result;

static uint64_t mb_warmup_iters(const mb_bench *b, const mb_size *s) {
    if (b->o.warmup >= 0) return (uint64_t)b->o.warmup;
    if (s->bytes <= (1u << 20)) return MB_WARMUP_DEFAULT;
    uint64_t w = MB_WARMUP_BYTES / s->bytes;
    return w < MB_WARMUP_MIN ? MB_WARMUP_MIN : w > MB_WARMUP_DEFAULT ? MB_WARMUP_DEFAULT : w;
}

/* Runs the warm-up; returns the timed iterations every rank agrees on. */
static uint64_t mb_warmup(mb_bench *b, const mb_size *s) {
    uint64_t warm = mb_warmup_iters(b, s);
    bool adaptive = b->o.iters == 0;
    if (adaptive && warm == 0) warm = 1; /* the estimate needs one call */
    uint64_t spent = 0, timed = 0;
    for (uint64_t it = 0; it < warm; it++) {
        if (b->o.barrier_mode) MPI_Barrier(MPI_COMM_WORLD);
        uint64_t t0 = mb_now_ns();
        mb_run_once(b, s);
        uint64_t dt = mb_now_ns() - t0;
        if (it > 0 || warm == 1) { /* the first call pays for cold pages */
            spent += dt;
            timed++;
        }
    }
    if (!adaptive) return b->o.iters;
    uint64_t iters = 0;
    if (b->rank == 0) {
        uint64_t per = spent / timed;
        iters = per == 0 ? MB_ADAPTIVE_MAX : MB_TARGET_NS / per;
        if (iters < MB_ADAPTIVE_MIN) iters = MB_ADAPTIVE_MIN;
        if (iters > MB_ADAPTIVE_MAX) iters = MB_ADAPTIVE_MAX;
    }
    MPI_Bcast(&iters, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return iters;
}

/* The timed loop: b->times[it] = this rank's ns for iteration it; returns wrong elements. */
static uint64_t mb_timed_loop(mb_bench *b, const mb_size *s, uint64_t iters) {
    uint64_t wrong = 0;
    for (uint64_t it = 0; it < iters; it++) {
        if (b->o.check) memset(b->recv, 0xff, s->recv_bytes);
        if (b->o.barrier_mode) MPI_Barrier(MPI_COMM_WORLD);
        uint64_t t0 = mb_now_ns();
        mb_run_once(b, s);
        b->times[it] = mb_now_ns() - t0;
        if (b->o.check) wrong += mb_verify(b, s);
    }
    return wrong;
}

static int mb_cmp_u64(const void *a, const void *c) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)c;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile p (0..1) of the sorted v[0..k). */
static double mb_percentile_us(const uint64_t *v, uint64_t k, double p) {
    double idx = p * (double)k;
    uint64_t i = (uint64_t)idx;
    if ((double)i < idx) i++;
    i = i == 0 ? 0 : i - 1;
    if (i >= k) i = k - 1;
    return (double)v[i] / 1e3;
}

static void mb_measure(mb_bench *b, const mb_size *s, mb_result *res) {
    uint64_t iters = mb_warmup(b, s);
    uint64_t wrong = mb_timed_loop(b, s, iters);
    /* iters <= MB_ITERS_MAX, so it fits an int count. */
    MPI_Allreduce(MPI_IN_PLACE, b->times, (int)iters, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    *res = (mb_result){.iters = iters, .wrong = b->o.check ? (int64_t)wrong : -1};
    if (b->rank != 0) return;
    double total = 0;
    for (uint64_t i = 0; i < iters; i++) total += (double)b->times[i];
    res->time_us = total / (double)iters / 1e3;
    qsort(b->times, (size_t)iters, sizeof b->times[0], mb_cmp_u64);
    res->p50_us = mb_percentile_us(b->times, iters, 0.5);
    res->p99_us = mb_percentile_us(b->times, iters, 0.99);
    res->p999_us = mb_percentile_us(b->times, iters, 0.999);
    res->algbw = res->time_us > 0 ? (double)s->bytes / res->time_us / 1e3 : 0;
    res->busbw = res->algbw * mb_bus_factor(s->coll, b->n);
}

/* ---- output ------------------------------------------------------------------------------- */

static const char *mb_op_text(const mb_bench *b, mb_coll c) {
    return mb_colls[c].reduces ? mb_op_names[b->o.op] : "none";
}

static int mb_root_of(const mb_bench *b, mb_coll c) {
    return mb_colls[c].rooted ? b->o.root : -1;
}

static void mb_print_header(const mb_bench *b, mb_coll c) {
    FILE *f = b->meta;
    fprintf(f, "# mpi_bench (%s): %s on %d ranks, mode %s, %s%s%s\n", b->version,
            mb_colls[c].name, b->n, b->o.barrier_mode ? "barrier" : "loop",
            mb_dtypes[b->o.dtype].name, mb_colls[c].reduces ? "/" : "",
            mb_colls[c].reduces ? mb_op_names[b->o.op] : "");
    if (b->o.iters)
        fprintf(f, "# iterations: %" PRIu64 " per size", b->o.iters);
    else
        fprintf(f, "# iterations: adaptive, ~0.3 s of timed work per size (10..100000)");
    if (b->o.warmup >= 0)
        fprintf(f, ", warm-up %" PRId64 "\n", b->o.warmup);
    else
        fprintf(f, ", warm-up 20 (fewer above 1 MiB)\n");
    if (b->o.json) return;
    printf("#%11s %12s %9s %6s %5s %11s %11s %11s %7s %10s %10s %10s\n", "size", "count",
           "type", "redop", "root", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong",
           "p50(us)", "p99(us)", "p99.9(us)");
}

static void mb_print_row(const mb_bench *b, const mb_size *s, const mb_result *r) {
    mb_coll c = s->coll;
    if (b->o.json) {
        printf("{\"impl\":\"%s\",\"coll\":\"%s\",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
               ",\"dtype\":\"%s\",\"op\":\"%s\",\"root\":%d,\"ranks\":%d,\"mode\":\"%s\","
               "\"iters\":%" PRIu64 ",\"time_us\":%.9g,\"algbw\":%.9g,\"busbw\":%.9g,"
               "\"p50_us\":%.9g,\"p99_us\":%.9g,\"p999_us\":%.9g,\"wrong\":%" PRId64
               ",\"allocs\":-1}\n",
               b->impl, mb_colls[c].name, s->bytes, s->count, mb_dtypes[b->o.dtype].name,
               mb_op_text(b, c), mb_root_of(b, c), b->n,
               b->o.barrier_mode ? "barrier" : "loop", r->iters, r->time_us, r->algbw,
               r->busbw, r->p50_us, r->p99_us, r->p999_us, r->wrong);
        return;
    }
    char wrong[24];
    if (r->wrong < 0)
        snprintf(wrong, sizeof wrong, "N/A");
    else
        snprintf(wrong, sizeof wrong, "%" PRId64, r->wrong);
    printf(" %11" PRIu64 " %12" PRIu64 " %9s %6s %5d %11.2f %11.3f %11.3f %7s %10.2f %10.2f "
           "%10.2f\n",
           s->bytes, s->count, mb_dtypes[b->o.dtype].name, mb_op_text(b, c), mb_root_of(b, c),
           r->time_us, r->algbw, r->busbw, wrong, r->p50_us, r->p99_us, r->p999_us);
}

static void mb_run_size(mb_bench *b, mb_coll c, uint64_t bytes) {
    mb_size s;
    if (!mb_geometry(b, c, bytes, &s)) return;
    if (mb_colls[c].reduces)
        mb_prepare_reduce(b, &s);
    else if (c != MB_BARRIER)
        mb_prepare_move(b, &s);
    uint64_t t0 = mb_now_ns();
    mb_result r;
    mb_measure(b, &s, &r);
    if (b->rank != 0) return;
    mb_print_row(b, &s, &r);
    fflush(stdout);
    uint64_t took = mb_now_ns() - t0;
    if (took > MB_PROGRESS_NS)
        fprintf(stderr, "# size %" PRIu64 " done: %" PRIu64 " iterations in %.1f s\n", s.bytes,
                r.iters, (double)took / 1e9);
}

static void mb_run_coll(mb_bench *b, mb_coll c) {
    if (c == MB_SENDRECV && b->n < 2) {
        if (b->rank == 0) fprintf(b->meta, "# sendrecv needs 2 or more ranks: skipped\n");
        return;
    }
    if (b->rank == 0) mb_print_header(b, c);
    if (c == MB_BARRIER) {
        mb_run_size(b, c, 0);
    } else {
        for (uint64_t bytes = b->o.min_bytes; bytes <= b->o.max_bytes; bytes *= b->o.factor) {
            mb_run_size(b, c, bytes);
            if (bytes > b->o.max_bytes / b->o.factor) break;
        }
    }
    if (b->rank == 0) fflush(b->meta);
}

/* ---- setup -------------------------------------------------------------------------------- */

static void *mb_alloc(size_t bytes, const char *what) {
    size_t rounded = (bytes + MB_ALIGN - 1) / MB_ALIGN * MB_ALIGN;
    if (rounded == 0) rounded = MB_ALIGN;
    void *p = aligned_alloc(MB_ALIGN, rounded);
    if (!p) {
        fprintf(stderr, "mpi_bench: no memory for %s (%zu bytes)\n", what, bytes);
        MPI_Abort(MPI_COMM_WORLD, MB_EXIT_FAIL);
    }
    memset(p, 0, rounded); /* touch every page before timing */
    return p;
}

/* "openmpi" or "mpich" from the library's own words; the first line kept for the header. */
static void mb_identify(mb_bench *b) {
    int len = 0;
    MPI_Get_library_version(b->version, &len);
    b->version[strcspn(b->version, "\n,")] = '\0';
    for (char *p = b->version; *p; p++)
        if (*p == '\t') *p = ' ';
#ifdef MB_IMPL
    b->impl = MB_IMPL;
#else
    if (strstr(b->version, "Open MPI"))
        b->impl = "openmpi";
    else if (strstr(b->version, "MPICH"))
        b->impl = "mpich";
    else
        b->impl = "mpi";
#endif
}

static void mb_init(mb_bench *b) {
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->n);
    if (b->o.root >= b->n) {
        if (b->rank == 0) fprintf(stderr, "mpi_bench: -r %d: only %d ranks\n%s", b->o.root,
                                  b->n, mb_usage_line);
        MPI_Finalize();
        exit(MB_EXIT_USAGE);
    }
    mb_identify(b);
    b->mdt = mb_mpi_dtype(b->o.dtype);
    b->mop = mb_mpi_op(b->o.op);
    b->esize = mb_dtypes[b->o.dtype].bytes;
    b->buf_bytes = (size_t)b->o.max_bytes;
    b->send = mb_alloc(b->buf_bytes, "the send buffer");
    b->recv = mb_alloc(b->buf_bytes, "the receive buffer");
    if (b->o.check) b->ref = mb_alloc(b->buf_bytes, "the expected results");
    b->times_cap = b->o.iters > MB_ADAPTIVE_MAX ? b->o.iters : MB_ADAPTIVE_MAX;
    b->times = mb_alloc((size_t)b->times_cap * sizeof b->times[0], "the iteration times");
    b->meta = b->o.json ? stderr : stdout;
}

int main(int argc, char **argv) {
    static mb_bench bench;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mb_rank);
    mb_parse(&bench.o, argc, argv);
    if (bench.o.help) {
        if (mb_rank == 0) mb_help();
        MPI_Finalize();
        return 0;
    }
    mb_init(&bench);
    if (bench.o.coll >= 0) {
        mb_run_coll(&bench, (mb_coll)bench.o.coll);
    } else {
        for (int c = 0; c < MB_COLL_COUNT; c++) mb_run_coll(&bench, (mb_coll)c);
    }
    free(bench.times);
    free(bench.ref);
    free(bench.recv);
    free(bench.send);
    MPI_Finalize();
    return 0;
}
