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

#include "../tools/bench_report.h"

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
    MB_ALIGN = 64,
    MB_TAG = 7,                  /* sendrecv's message tag */
};
#define MB_MAX_BYTES (1ull << 34)       /* ceiling of -e (16 GiB: MPI counts are int) */

/* ---- the collectives ---------------------------------------------------------------------- */

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
    br_opts br;            /* -c -b -e -f -w -n --mode --check --json */
    mb_dtype dtype;
    mb_op op;
    int root;              /* checked against the rank count */
    bool help;
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
    const char *v = br_value(argc, argv, i);
    if (!v) mb_usage("%s needs a value", argv[*i]);
    return v;
}

static void mb_parse_option(mb_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *fmt = NULL, *arg = NULL;
    uint64_t v = 0;
    switch (br_parse_option(&o->br, argc, argv, i, MB_MAX_BYTES,
                            "bad size %s (1 to 16G, suffixes K M G)", &fmt, &arg)) {
    case BR_PARSED: return;
    case BR_BAD: mb_usage(fmt, arg);
    case BR_NOT_SHARED: break;
    }
    if (strcmp(a, "-d") == 0) {
        o->dtype = mb_find_dtype(mb_value(argc, argv, i));
    } else if (strcmp(a, "-o") == 0) {
        o->op = mb_find_op(mb_value(argc, argv, i));
    } else if (strcmp(a, "-r") == 0) {
        const char *s = mb_value(argc, argv, i);
        if (!br_parse_u64(s, 0, 1u << 20, &v)) mb_usage("-r %s: not a rank", s);
        o->root = (int)v;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        o->help = true;
    } else {
        mb_usage("unknown argument %s", a);
    }
}

static void mb_parse(mb_opts *o, int argc, char **argv) {
    *o = (mb_opts){.br = br_opts_default(), .dtype = MB_FLOAT32, .op = MB_SUM};
    for (int i = 1; i < argc; i++) mb_parse_option(o, argc, argv, &i);
    if (o->help) return;
    const char *bad = br_check_opts(&o->br);
    if (bad) mb_usage("%s", bad);
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
    br_coll coll;
    uint64_t bytes;            /* the reported size: whole elements (whole blocks of n) */
    uint64_t count;            /* elements in that buffer */
    int arg;                   /* the call's count argument */
    size_t block_bytes;        /* blocked collectives: one rank's block */
    size_t recv_bytes;         /* bytes of recv this rank's call writes */
    int peer;                  /* sendrecv partner */
    bool idle;                 /* sendrecv: no partner for this rank */
} mb_size;

/* MPI's default handler aborts the job on error, so a failed call never returns here. */
static void mb_run_once(mb_bench *b, const mb_size *s) {
    const mb_opts *o = &b->o;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (s->coll) {
    case BR_ALLREDUCE:
        MPI_Allreduce(b->send, b->recv, s->arg, b->mdt, b->mop, w);
        break;
    case BR_REDUCE:
        MPI_Reduce(b->send, b->recv, s->arg, b->mdt, b->mop, o->root, w);
        break;
    case BR_BROADCAST: /* zcbench broadcasts from the root's send into the others' recv */
        MPI_Bcast(b->rank == o->root ? b->send : b->recv, s->arg, b->mdt, o->root, w);
        break;
    case BR_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(b->send, b->recv, s->arg, b->mdt, b->mop, w);
        break;
    case BR_ALLGATHER:
        MPI_Allgather(b->send, s->arg, b->mdt, b->recv, s->arg, b->mdt, w);
        break;
    case BR_GATHER:
        MPI_Gather(b->send, s->arg, b->mdt, b->recv, s->arg, b->mdt, o->root, w);
        break;
    case BR_SCATTER:
        MPI_Scatter(b->send, s->arg, b->mdt, b->recv, s->arg, b->mdt, o->root, w);
        break;
    case BR_ALLTOALL:
        MPI_Alltoall(b->send, s->arg, b->mdt, b->recv, s->arg, b->mdt, w);
        break;
    case BR_SENDRECV:
        if (s->idle) return;
        MPI_Sendrecv(b->send, s->arg, b->mdt, s->peer, MB_TAG, b->recv, s->arg, b->mdt,
                     s->peer, MB_TAG, w, MPI_STATUS_IGNORE);
        break;
    case BR_BARRIER:
        MPI_Barrier(w);
        break;
    case BR_COLL_COUNT:
        break;
    }
}

/* The row for `bytes` (ignored by barrier); false when it rounds to no element. */
static bool mb_geometry(const mb_bench *b, br_coll c, uint64_t bytes, mb_size *s) {
    *s = (mb_size){.coll = c};
    uint64_t es = b->esize, n = (uint64_t)b->n;
    if (c == BR_BARRIER) return true;
    uint64_t count = br_colls[c].blocked ? bytes / es / n * n : bytes / es;
    if (count == 0) return false;
    s->count = count;
    s->bytes = count * es;
    s->arg = (int)(br_colls[c].blocked ? count / n : count);
    s->block_bytes = (size_t)s->arg * b->esize;
    bool at_root = b->rank == b->o.root;
    switch (c) {
    case BR_ALLREDUCE: case BR_BROADCAST: case BR_ALLGATHER: case BR_ALLTOALL:
        s->recv_bytes = (size_t)s->bytes;
        break;
    case BR_REDUCE: case BR_GATHER:
        s->recv_bytes = at_root ? (size_t)s->bytes : 0;
        break;
    case BR_REDUCE_SCATTER: case BR_SCATTER:
        s->recv_bytes = s->block_bytes;
        break;
    case BR_SENDRECV:
        s->peer = b->rank ^ 1;
        s->idle = s->peer >= b->n;
        s->recv_bytes = s->idle ? 0 : (size_t)s->bytes;
        break;
    case BR_BARRIER: case BR_COLL_COUNT:
        break;
    }
    /* The root's own copy of a broadcast is its send buffer: nothing lands in its recv. */
    if (c == BR_BROADCAST && at_root) s->recv_bytes = 0;
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
    if (!b->o.br.check) return;
    uint64_t first = s->coll == BR_REDUCE_SCATTER ? (uint64_t)b->rank * (uint64_t)s->arg : 0;
    for (uint64_t j = 0; j < s->recv_bytes / es; j++)
        mb_encode(b->o.dtype, mb_expected(b, first + j), b->ref + j * es);
}

/* Data movement: send gets pattern(rank, offset); ref what recv must hold. */
static void mb_prepare_move(mb_bench *b, const mb_size *s) {
    bool one_block = s->coll == BR_ALLGATHER || s->coll == BR_GATHER;
    size_t send_bytes = one_block ? s->block_bytes : (size_t)s->bytes;
    for (size_t off = 0; off < send_bytes; off++) b->send[off] = mb_pattern(b->rank, off);
    if (!b->o.br.check) return;
    size_t blk = s->block_bytes;
    for (size_t off = 0; off < s->recv_bytes; off++) {
        uint8_t v = 0;
        switch (s->coll) {
        case BR_BROADCAST: v = mb_pattern(b->o.root, off); break;
        case BR_ALLGATHER: case BR_GATHER: v = mb_pattern((int)(off / blk), off % blk); break;
        case BR_SCATTER: v = mb_pattern(b->o.root, (size_t)b->rank * blk + off); break;
        case BR_ALLTOALL:
            v = mb_pattern((int)(off / blk), (size_t)b->rank * blk + off % blk);
            break;
        case BR_SENDRECV: v = mb_pattern(s->peer, off); break;
        default: break;
        }
        b->ref[off] = v;
    }
}

/* Wrong elements of this rank's result (0 when it matches ref). */
static uint64_t mb_verify(const mb_bench *b, const mb_size *s) {
    return br_count_wrong(b->recv, b->ref, s->recv_bytes, b->esize);
}

/* ---- timing one size ---------------------------------------------------------------------- */

/* Runs the warm-up; returns the timed iterations every rank agrees on. */
static uint64_t mb_warmup(mb_bench *b, const mb_size *s) {
    uint64_t warm = br_warmup_calls(b->o.br.warmup, b->o.br.iters, s->bytes);
    uint64_t spent = 0, timed = 0;
    for (uint64_t it = 0; it < warm; it++) {
        if (b->o.br.barrier_mode) MPI_Barrier(MPI_COMM_WORLD);
        uint64_t t0 = br_now_ns();
        mb_run_once(b, s);
        br_warmup_add(it, warm, br_now_ns() - t0, &spent, &timed);
    }
    if (b->o.br.iters != 0) return b->o.br.iters;
    uint64_t iters = 0;
    if (b->rank == 0) {
        iters = br_adaptive_iters(spent, timed);
    }
    MPI_Bcast(&iters, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return iters;
}

/* The timed loop: b->times[it] = this rank's ns for iteration it; returns wrong elements. */
static uint64_t mb_timed_loop(mb_bench *b, const mb_size *s, uint64_t iters) {
    uint64_t wrong = 0;
    for (uint64_t it = 0; it < iters; it++) {
        if (b->o.br.check) memset(b->recv, 0xff, s->recv_bytes);
        if (b->o.br.barrier_mode) MPI_Barrier(MPI_COMM_WORLD);
        uint64_t t0 = br_now_ns();
        mb_run_once(b, s);
        b->times[it] = br_now_ns() - t0;
        if (b->o.br.check) wrong += mb_verify(b, s);
    }
    return wrong;
}

static void mb_measure(mb_bench *b, const mb_size *s, br_result *res) {
    uint64_t iters = mb_warmup(b, s);
    uint64_t wrong = mb_timed_loop(b, s, iters);
    /* iters <= MB_ITERS_MAX, so it fits an int count. */
    MPI_Allreduce(MPI_IN_PLACE, b->times, (int)iters, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    *res = (br_result){.iters = iters, .wrong = b->o.br.check ? (int64_t)wrong : -1,
                       .allocs = -1};
    if (b->rank != 0) return;
    br_stats(b->times, s->bytes, br_bus_factor(s->coll, b->n), res);
}

/* ---- output ------------------------------------------------------------------------------- */

static const char *mb_op_text(const mb_bench *b, br_coll c) {
    return br_colls[c].reduces ? mb_op_names[b->o.op] : "none";
}

static int mb_root_of(const mb_bench *b, br_coll c) {
    return br_colls[c].rooted ? b->o.root : -1;
}

static void mb_print_header(const mb_bench *b, br_coll c) {
    FILE *f = b->meta;
    fprintf(f, "# mpi_bench (%s): %s on %d ranks, mode %s, %s%s%s\n", b->version,
            br_colls[c].name, b->n, b->o.br.barrier_mode ? "barrier" : "loop",
            mb_dtypes[b->o.dtype].name, br_colls[c].reduces ? "/" : "",
            br_colls[c].reduces ? mb_op_names[b->o.op] : "");
    br_print_iters_line(f, b->o.br.iters, b->o.br.warmup);
    if (b->o.br.json) return;
    br_print_columns();
}

static void mb_print_row(const mb_bench *b, const mb_size *s, const br_result *r) {
    br_coll c = s->coll;
    br_row w = {.impl = b->impl, .coll = br_colls[c].name, .dtype = mb_dtypes[b->o.dtype].name,
                .op = mb_op_text(b, c), .mode = b->o.br.barrier_mode ? "barrier" : "loop",
                .bytes = s->bytes, .count = s->count, .root = mb_root_of(b, c), .ranks = (unsigned)b->n};
    br_print_row(&w, r, b->o.br.json);
}

static void mb_run_size(mb_bench *b, br_coll c, uint64_t bytes) {
    mb_size s;
    if (!mb_geometry(b, c, bytes, &s)) return;
    if (br_colls[c].reduces)
        mb_prepare_reduce(b, &s);
    else if (c != BR_BARRIER)
        mb_prepare_move(b, &s);
    uint64_t t0 = br_now_ns();
    br_result r;
    mb_measure(b, &s, &r);
    if (b->rank != 0) return;
    mb_print_row(b, &s, &r);
    fflush(stdout);
    uint64_t took = br_now_ns() - t0;
    br_print_progress(s.bytes, r.iters, took);
}

static void mb_run_coll(mb_bench *b, br_coll c) {
    if (c == BR_SENDRECV && b->n < 2) {
        if (b->rank == 0) fprintf(b->meta, "# sendrecv needs 2 or more ranks: skipped\n");
        return;
    }
    if (b->rank == 0) mb_print_header(b, c);
    if (c == BR_BARRIER) {
        mb_run_size(b, c, 0);
    } else {
        for (uint64_t bytes = b->o.br.min_bytes; bytes <= b->o.br.max_bytes; bytes *= b->o.br.factor) {
            mb_run_size(b, c, bytes);
            if (bytes > b->o.br.max_bytes / b->o.br.factor) break;
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
    b->buf_bytes = (size_t)b->o.br.max_bytes;
    b->send = mb_alloc(b->buf_bytes, "the send buffer");
    b->recv = mb_alloc(b->buf_bytes, "the receive buffer");
    if (b->o.br.check) b->ref = mb_alloc(b->buf_bytes, "the expected results");
    b->times_cap = b->o.br.iters > BR_ADAPTIVE_MAX ? b->o.br.iters : BR_ADAPTIVE_MAX;
    b->times = mb_alloc((size_t)b->times_cap * sizeof b->times[0], "the iteration times");
    b->meta = b->o.br.json ? stderr : stdout;
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
    if (bench.o.br.coll >= 0) {
        mb_run_coll(&bench, (br_coll)bench.o.br.coll);
    } else {
        for (int c = 0; c < BR_COLL_COUNT; c++) mb_run_coll(&bench, (br_coll)c);
    }
    free(bench.times);
    free(bench.ref);
    free(bench.recv);
    free(bench.send);
    MPI_Finalize();
    return 0;
}
