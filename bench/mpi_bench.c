/* mpi_bench.c: the MPI peer of zcbench. Owns MPI's side of the harness that tools/zcbench.c
 * uses too (tools/bench_report.h: the same collectives, size sweep, warm-up, adaptive
 * iteration count, timing modes, --check inputs and output), so that `ninja bench` can put
 * Open MPI and MPICH beside zcoll: the MPI calls of a row, MPI's dtypes and ops.
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
_Static_assert((int)MB_SUM == (int)BR_SUM && (int)MB_PROD == (int)BR_PROD &&
                   (int)MB_MIN == (int)BR_MIN && (int)MB_MAX == (int)BR_MAX,
               "bench_report.h's br_op follows mb_op");

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
          BR_HELP_SWEEP
          "  -d DTYPE       int8 uint8 int32 uint32 int64 uint64 float32 float64\n"
          "                 (default float32; MPI has no 16- or 8-bit floats)\n"
          "  -o OP          sum prod min max (default sum; MPI has no avg)\n"
          BR_HELP_TIMING
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

/* Parses argv into the harness's options (and -h); false when --help was asked for. */
static bool mb_parse(br_opts *o, mb_dtype *dtype, mb_op *op, int argc, char **argv) {
    *o = br_opts_default(MB_MAX_BYTES, 1u << 20, "bad size %s (1 to 16G, suffixes K M G)");
    bool help = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *fmt = NULL, *arg = NULL;
        switch (br_parse_option(o, argc, argv, &i, &fmt, &arg)) {
        case BR_PARSED: continue;
        case BR_BAD: mb_usage(fmt, arg);
        case BR_NOT_SHARED: break;
        }
        if (strcmp(a, "-h") != 0 && strcmp(a, "--help") != 0) mb_usage("unknown argument %s", a);
        help = true;
    }
    if (help) return false;
    const char *bad = br_check_opts(o);
    if (bad) mb_usage("%s", bad);
    *dtype = mb_find_dtype(o->dtype);
    *op = mb_find_op(o->op);
    return true;
}

/* ---- the run ------------------------------------------------------------------------------ */

typedef struct mb_bench {
    br_bench h;                /* first: the harness's state (options, buffers, times) */
    mb_dtype dtype;
    mb_op op;
    char version[MPI_MAX_LIBRARY_VERSION_STRING]; /* first line of the library's version */
    MPI_Datatype mdt;
    MPI_Op mop;
} mb_bench;

/* The mb_bench whose harness state h is. */
static mb_bench *mb_of(br_bench *h) { return (mb_bench *)(void *)h; }
static const mb_bench *mb_of_const(const br_bench *h) { return (const mb_bench *)(const void *)h; }

/* The harness's run_once: one MPI call. MPI's default handler aborts the job on error, so a
 * failed call never returns here. */
static void mb_run_once(br_bench *h, const br_size *s) {
    const mb_bench *b = mb_of(h);
    MPI_Comm w = MPI_COMM_WORLD;
    int root = (int)h->o.root, count = (int)s->arg;
    void *send = h->send, *recv = h->recv;
    switch (s->coll) {
    case BR_ALLREDUCE:
        MPI_Allreduce(send, recv, count, b->mdt, b->mop, w);
        break;
    case BR_REDUCE:
        MPI_Reduce(send, recv, count, b->mdt, b->mop, root, w);
        break;
    case BR_BROADCAST: /* zcbench broadcasts from the root's send into the others' recv */
        MPI_Bcast(h->rank == h->o.root ? send : recv, count, b->mdt, root, w);
        break;
    case BR_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(send, recv, count, b->mdt, b->mop, w);
        break;
    case BR_ALLGATHER:
        MPI_Allgather(send, count, b->mdt, recv, count, b->mdt, w);
        break;
    case BR_GATHER:
        MPI_Gather(send, count, b->mdt, recv, count, b->mdt, root, w);
        break;
    case BR_SCATTER:
        MPI_Scatter(send, count, b->mdt, recv, count, b->mdt, root, w);
        break;
    case BR_ALLTOALL:
        MPI_Alltoall(send, count, b->mdt, recv, count, b->mdt, w);
        break;
    case BR_SENDRECV:
        if (s->idle) return;
        MPI_Sendrecv(send, count, b->mdt, (int)s->peer, MB_TAG, recv, count, b->mdt,
                     (int)s->peer, MB_TAG, w, MPI_STATUS_IGNORE);
        break;
    case BR_BARRIER:
        MPI_Barrier(w);
        break;
    case BR_COLL_COUNT:
        break;
    }
}

static void mb_barrier(br_bench *h) {
    (void)h;
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The harness's agree_iters: rank 0's count broadcast. */
static uint64_t mb_agree_iters(br_bench *h, uint64_t iters) {
    (void)h;
    MPI_Bcast(&iters, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return iters;
}

/* The harness's combine: the times' maxima and the counters' sums over the ranks (iters <=
 * BR_ITERS_MAX, so it fits an int count). */
static void mb_combine(br_bench *h, uint64_t iters, uint64_t sums[BR_SUMS]) {
    MPI_Allreduce(MPI_IN_PLACE, h->times, (int)iters, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, sums, BR_SUMS, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
}

/* The harness's encode: the integer k as one element of the dtype (integers wrap). */
static void mb_encode(const br_bench *h, uint64_t k, uint8_t *dst) {
    mb_dtype t = mb_of_const(h)->dtype;
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

/* The harness's header: what the table measures. */
static void mb_header(const br_bench *h, br_coll c) {
    const mb_bench *b = mb_of_const(h);
    fprintf(h->meta, "# mpi_bench (%s): %s on %u ranks, mode %s, %s%s%s\n", b->version,
            br_colls[c].name, h->n, h->o.barrier_mode ? "barrier" : "loop", h->o.dtype,
            br_colls[c].reduces ? "/" : "", br_colls[c].reduces ? h->o.op : "");
}

static const br_ops mb_ops = {.run_once = mb_run_once, .barrier = mb_barrier,
                              .agree_iters = mb_agree_iters, .combine = mb_combine,
                              .encode = mb_encode, .header = mb_header};

static void mb_run_coll(br_bench *h, br_coll c) {
    br_totals t;
    if (br_run_coll(h, c, &t) && h->rank == 0) /* allocations: not counted (MPI's own) */
        fprintf(h->meta, "# context switches during timed loops: %" PRIu64 " involuntary (a "
                "rank's CPU taken away), %" PRIu64 " voluntary\n", t.preempted, t.yielded);
    if (h->rank == 0) fflush(h->meta);
}

/* ---- setup -------------------------------------------------------------------------------- */

/* "openmpi" or "mpich" from the library's own words; the first line kept for the header. */
static void mb_identify(mb_bench *b) {
    int len = 0;
    MPI_Get_library_version(b->version, &len);
    b->version[strcspn(b->version, "\n,")] = '\0';
    for (char *p = b->version; *p; p++)
        if (*p == '\t') *p = ' ';
#ifdef MB_IMPL
    b->h.impl = MB_IMPL;
#else
    if (strstr(b->version, "Open MPI"))
        b->h.impl = "openmpi";
    else if (strstr(b->version, "MPICH"))
        b->h.impl = "mpich";
    else
        b->h.impl = "mpi";
#endif
}

static void mb_init(mb_bench *b) {
    br_bench *h = &b->h;
    int rank = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    h->rank = (uint32_t)rank;
    h->n = (uint32_t)n;
    if (h->o.root >= h->n) {
        if (rank == 0) fprintf(stderr, "mpi_bench: -r %" PRIu64 ": only %d ranks\n%s",
                               h->o.root, n, mb_usage_line);
        MPI_Finalize();
        exit(MB_EXIT_USAGE);
    }
    h->ops = &mb_ops;
    mb_identify(b);
    b->mdt = mb_mpi_dtype(b->dtype);
    b->mop = mb_mpi_op(b->op);
    h->op = (br_op)b->op; /* MB_SUM..MB_MAX are BR_SUM..BR_MAX */
    h->sum_ranks = h->n;
    h->esize = mb_dtypes[b->dtype].bytes;
    size_t bytes = (size_t)h->o.max_bytes;
    const char *missing = !(h->send = br_alloc(bytes))   ? "the send buffer"
                          : !(h->recv = br_alloc(bytes)) ? "the receive buffer"
                                                         : br_setup(h, bytes);
    if (missing) {
        fprintf(stderr, "mpi_bench: no memory for %s\n", missing);
        MPI_Abort(MPI_COMM_WORLD, MB_EXIT_FAIL);
    }
}

int main(int argc, char **argv) {
    static mb_bench bench;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mb_rank);
    if (!mb_parse(&bench.h.o, &bench.dtype, &bench.op, argc, argv)) {
        if (mb_rank == 0) mb_help();
        MPI_Finalize();
        return 0;
    }
    mb_init(&bench);
    br_run_all(&bench.h, mb_run_coll);
    free(bench.h.times);
    free(bench.h.ref);
    free(bench.h.recv);
    free(bench.h.send);
    MPI_Finalize();
    return 0;
}
