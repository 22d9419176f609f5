/* zcbench.c: the benchmark. Owns timing every zcoll collective over a geometric sweep of sizes
 * and printing nccl-tests columns (or one JSON object per size) plus latency percentiles, the
 * arena size and the number of allocations inside the timed loops; with --check it verifies
 * every timed iteration's result on every rank.
 *
 * A tool, not library code: it uses libc directly and allocates its buffers once before the
 * first timed loop. Inside a timed loop it only calls the collective (and, in barrier mode or
 * with --check, zc_barrier and the untimed verification); every cross-rank reduction of the
 * measurements happens after the loop. Rank 0 alone prints. */
#define _GNU_SOURCE

#include "zcoll.h"

#include "bench_report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum {
    ZB_EXIT_FAIL = 1,
    ZB_EXIT_USAGE = 2,
    ZB_ALIGN = 64,
};
#define ZB_MAX_BYTES (1ull << 40)       /* ceiling of -e */

/* ---- allocation counting -----------------------------------------------------------------
 * malloc & co. are replaced for the whole program by forwarders that count calls while
 * zb_counting is set (only around the timed loops). A sanitizer owns malloc in sanitized builds
 * (configure.py's debug and tsan modes define ZC_SANITIZED), so there the forwarders are left
 * out and the count is reported as not counted. */
#if defined(ZC_SANITIZED)
#define ZB_COUNT_ALLOCS 0
#else
#define ZB_COUNT_ALLOCS 1
#endif

#if ZB_COUNT_ALLOCS
static volatile int zb_counting;
static volatile uint64_t zb_alloc_calls;

extern void *__libc_malloc(size_t bytes);
extern void *__libc_calloc(size_t count, size_t bytes);
extern void *__libc_realloc(void *p, size_t bytes);
extern void __libc_free(void *p);

void *malloc(size_t bytes) {
    if (zb_counting) zb_alloc_calls++;
    return __libc_malloc(bytes);
}
void *calloc(size_t count, size_t bytes) {
    if (zb_counting) zb_alloc_calls++;
    return __libc_calloc(count, bytes);
}
void *realloc(void *p, size_t bytes) {
    if (zb_counting) zb_alloc_calls++;
    return __libc_realloc(p, bytes);
}
void free(void *p) {
    if (zb_counting) zb_alloc_calls++;
    __libc_free(p);
}
void *mmap(void *addr, size_t bytes, int prot, int flags, int fd, off_t offset) {
    if (zb_counting) zb_alloc_calls++;
    return (void *)syscall(SYS_mmap, addr, bytes, prot, flags, fd, offset);
}
int munmap(void *addr, size_t bytes) {
    if (zb_counting) zb_alloc_calls++;
    return (int)syscall(SYS_munmap, addr, bytes);
}
#define ZB_COUNTING(on) (zb_counting = (on))
#else
#define ZB_COUNTING(on) ((void)0)
#endif

/* ---- the collectives ---------------------------------------------------------------------- */

/* ---- options ------------------------------------------------------------------------------ */

typedef struct zb_opts {
    br_opts br;            /* -c -b -e -f -w -n --mode --check --json */
    zc_dtype dtype;
    zc_op op;
    uint32_t root;         /* checked against the rank count after init */
    zc_transport transport;
    bool transport_set;    /* --transport given (else ZC_TRANSPORT or auto) */
    bool sym;              /* --sym: send and recv carved from the symmetric region */
    bool device;           /* --device: buffers on the simulated device, ZC_MEM_CUDA */
    bool persistent;       /* --persistent: each row's call made a plan once, timed zc_start */
    bool threads_multi;    /* --threads multi: cfg->threads ZC_THREADS_MULTI (the lock taken);
                            * default serial: zcbench calls from one thread, as the MPI peers'
                            * MPI_Init (MPI_THREAD_SINGLE) */
} zb_opts;

/* The simulated device's allocator (gpu/sim.h; in libzcoll): its "device memory" is shared
 * host memory, so the fill and the checks below read and write it directly. The staged and
 * direct paths' counters (zc_comm_gpu_staged, zc_comm_gpu_direct) say how each table's calls
 * moved. */
void *zc_gpu_sim_alloc(size_t bytes);
void zc_gpu_sim_free(void *p);
zc_status zc_gpu_sim_set_device(int ordinal); /* cudaSetDevice: the context init looks for */

static const char zb_usage_line[] =
    "usage: zcrun -n N zcbench -c COLL [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-d DTYPE]\n"
    "       [-o OP] [-r ROOT] [-w WARMUP] [-n ITERS] [--mode loop|barrier] [--check] [--json]\n"
    "       [--transport auto|shm|ib] [--sym] [--device] [--persistent]\n"
    "       [--threads serial|multi]\n"
    "       (zcbench --help for more)\n";

static void zb_help(void) {
    fputs(zb_usage_line, stdout);
    fputs("\nTimes zcoll collectives over a size sweep on the ranks zcrun (or another launcher)\n"
          "started. Rank 0 prints the report on stdout.\n"
          "\nOptions:\n"
          "  -c COLL        allreduce reduce broadcast reduce_scatter allgather gather scatter\n"
          "                 alltoall sendrecv barrier, or all (required)\n"
          "  -b MINBYTES    smallest size (default 8); suffixes K, M, G are powers of 1024\n"
          "  -e MAXBYTES    largest size (default 64M)\n"
          "  -f FACTOR      size multiplier between rows, >= 2 (default 2)\n"
          "  -d DTYPE       int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32\n"
          "                 float64 fp8_e4m3 fp8_e5m2 (zc_dtype_name; default float32)\n"
          "  -o OP          sum prod min max avg (zc_op_name; default sum)\n"
          "  -r ROOT        root of reduce, broadcast, gather, scatter (default 0)\n"
          "  -w WARMUP      untimed iterations per size (default 20, fewer above 1 MiB:\n"
          "                 about 64 MiB of data, at least 3)\n"
          "  -n ITERS       timed iterations per size, 1..1000000 (default adaptive: about\n"
          "                 0.3 s of timed work, 10..100000, decided by rank 0 from the\n"
          "                 warm-up and broadcast so every rank runs the same number)\n"
          "  --mode loop    back-to-back calls, each timed alone (default)\n"
          "  --mode barrier a zc_barrier (untimed) before each timed call: one-shot latency\n"
          "  --check        inputs whose results are exact in DTYPE; every rank verifies every\n"
          "                 timed iteration outside the timed region\n"
          "  --json         one JSON object per line and size instead of the table\n"
          "  --transport T  auto, shm or ib (default: ZC_TRANSPORT, else auto: shared memory\n"
          "                 on one host, InfiniBand/RoCE verbs across hosts; ZC_IB_* choose\n"
          "                 the device, port and GID)\n"
          "  --sym          send and recv from the symmetric region (zc_sym_alloc; cfg->sym_bytes\n"
          "                 sized to fit): the single-copy path of one host\n"
          "  --device       send and receive buffers on the simulated device (needs\n"
          "                 ZC_GPU_PROVIDER=sim), registered ZC_MEM_CUDA; each table ends with\n"
          "                 the device path and the staged calls and rounds it ran\n"
          "  --persistent   each row's call made a persistent plan once (zc_*_init, before the\n"
          "                 warm-up), every timed iteration one zc_start and its wait\n"
          "  --threads T    serial (default: zcbench calls from one thread, cfg->threads\n"
          "                 ZC_THREADS_SERIAL, no lock; the thread level MPI_Init gives the\n"
          "                 MPI peers) or multi (the communicator's lock, as for a library\n"
          "                 called from several threads)\n"
          "  -h, --help     this text\n",
          stdout);
    fputs("\nSizes follow nccl-tests: `size` is the total buffer per rank: allreduce, reduce,\n"
          "broadcast, sendrecv: the buffer; reduce_scatter: the send buffer (n blocks);\n"
          "allgather: the receive buffer; gather, scatter: the root's full buffer; alltoall:\n"
          "each rank's send buffer (n blocks, one per peer). It is rounded down to whole\n"
          "elements (whole blocks of n); sizes that round to 0 elements are left out.\n"
          "sendrecv: ranks 0<->1, 2<->3, ... each send and receive `size` bytes (an odd last\n"
          "rank idles). barrier: one row, sizes ignored. broadcast runs in place at the root\n"
          "(send == recv there, as MPI_Bcast and torch.distributed.broadcast).\n",
          stdout);
    fputs("\nColumns: size (bytes), count (elements in that buffer), type, redop (none when the\n"
          "collective does not reduce), root (-1 when it has none), time(us): the mean over\n"
          "iterations of the slowest rank's time for that iteration (each rank times each\n"
          "call, issue to completion, with CLOCK_MONOTONIC; the maximum across ranks is\n"
          "taken per iteration after the loop), algbw(GB/s) = size / time (1 GB = 1e9 B),\n"
          "busbw(GB/s) = algbw * nccl-tests' bus factor (allreduce 2(n-1)/n; reduce_scatter,\n"
          "allgather, gather, scatter, alltoall (n-1)/n; broadcast, reduce, sendrecv 1),\n"
          "#wrong: wrong result elements summed over ranks and iterations (N/A without\n"
          "--check), p50/p99/p99.9(us): percentiles (nearest rank) of the same per-iteration\n"
          "maxima. Each table ends with \"# allocations during timed loops: N\": malloc,\n"
          "calloc, realloc, free, mmap and munmap calls inside the timed loops summed over\n"
          "ranks (must be 0; not counted in sanitized builds).\n",
          stdout);
    fputs("\nJSON keys: impl (\"zcoll\"), coll, bytes, count, dtype, op, root, ranks, mode,\n"
          "iters, time_us, algbw, busbw, p50_us, p99_us, p999_us, wrong (-1 without --check),\n"
          "allocs (-1 when not counted). In JSON mode the header lines go to stderr.\n"
          "\nExit status: 0 done, 1 a zcoll call failed (\"zcbench: CALL: STATUS: sentence\"),\n"
          "2 bad usage.\n",
          stdout);
}

static _Noreturn void zb_usage(const char *fmt, const char *arg) {
    fputs("zcbench: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    fputs(zb_usage_line, stderr);
    exit(ZB_EXIT_USAGE);
}

static zc_dtype zb_find_dtype(const char *s) {
    for (int t = 0; t < (int)ZC_DTYPE_COUNT_; t++)
        if (strcmp(s, zc_dtype_name((zc_dtype)t)) == 0) return (zc_dtype)t;
    zb_usage("-d %s: not a dtype (zcbench --help lists them)", s);
}

static zc_op zb_find_op(const char *s) {
    for (int o = 0; o < (int)ZC_OP_COUNT_; o++)
        if (strcmp(s, zc_op_name((zc_op)o)) == 0) return (zc_op)o;
    zb_usage("-o %s: not an op (sum prod min max avg)", s);
}

/* The value of option argv[*i] (advancing *i); a usage error when it is missing. */
static const char *zb_value(int argc, char **argv, int *i) {
    const char *v = br_value(argc, argv, i);
    if (!v) zb_usage("%s needs a value", argv[*i]);
    return v;
}

static void zb_parse_option(zb_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *fmt = NULL, *arg = NULL;
    uint64_t v = 0;
    switch (br_parse_option(&o->br, argc, argv, i, ZB_MAX_BYTES,
                            "bad size %s (1 to 1024G, suffixes K M G)", &fmt, &arg)) {
    case BR_PARSED: return;
    case BR_BAD: zb_usage(fmt, arg);
    case BR_NOT_SHARED: break;
    }
    if (strcmp(a, "-d") == 0) {
        o->dtype = zb_find_dtype(zb_value(argc, argv, i));
    } else if (strcmp(a, "-o") == 0) {
        o->op = zb_find_op(zb_value(argc, argv, i));
    } else if (strcmp(a, "-r") == 0) {
        const char *s = zb_value(argc, argv, i);
        if (!br_parse_u64(s, 0, ZC_MAX_RANKS - 1, &v)) zb_usage("-r %s: not a rank", s);
        o->root = (uint32_t)v;
    } else if (strcmp(a, "--sym") == 0) {
        o->sym = true;
    } else if (strcmp(a, "--transport") == 0) {
        const char *s = zb_value(argc, argv, i);
        if (strcmp(s, "auto") != 0 && strcmp(s, "shm") != 0 && strcmp(s, "ib") != 0)
            zb_usage("--transport %s: auto, shm or ib", s);
        o->transport = strcmp(s, "shm") == 0  ? ZC_TRANSPORT_SHM
                       : strcmp(s, "ib") == 0 ? ZC_TRANSPORT_IB
                                              : ZC_TRANSPORT_AUTO;
        o->transport_set = true;
    } else if (strcmp(a, "--device") == 0) {
        o->device = true;
    } else if (strcmp(a, "--persistent") == 0) {
        o->persistent = true;
    } else if (strcmp(a, "--threads") == 0) {
        const char *s = zb_value(argc, argv, i);
        if (strcmp(s, "serial") != 0 && strcmp(s, "multi") != 0)
            zb_usage("--threads %s: serial or multi", s);
        o->threads_multi = strcmp(s, "multi") == 0;
    } else {
        zb_usage("unknown argument %s", a);
    }
}

static void zb_parse(zb_opts *o, int argc, char **argv) {
    *o = (zb_opts){.br = br_opts_default(), .dtype = ZC_FLOAT32, .op = ZC_SUM};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            zb_help();
            exit(0);
        }
    }
    for (int i = 1; i < argc; i++) zb_parse_option(o, argc, argv, &i);
    const char *bad = br_check_opts(&o->br);
    if (bad) zb_usage("%s", bad);
}

/* ---- the run ------------------------------------------------------------------------------ */

typedef struct zb_bench {
    zb_opts o;
    zc_config cfg;
    zc_comm *comm;
    void *arena;
    size_t arena_bytes;
    uint32_t rank, n;
    size_t esize;             /* bytes of one element of o.dtype */
    size_t buf_bytes;         /* of send, recv and (with --check) ref */
    uint8_t *send, *recv, *ref;
    zc_mem *send_mem, *recv_mem;
    zc_plan plan[2];          /* --persistent: the row's plans (sendrecv's receive: plan[1]) */
    uint64_t *times;          /* per-iteration ns; times_cap entries */
    uint64_t times_cap;
    FILE *meta;               /* where header and comment lines go: stdout, stderr in JSON */
} zb_bench;

/* One row's geometry on this rank. */
typedef struct zb_size {
    br_coll coll;
    uint64_t bytes;           /* the reported size: whole elements (whole blocks of n) */
    uint64_t count;           /* elements in that buffer */
    size_t arg;               /* the call's count argument */
    size_t block_bytes;       /* blocked collectives: one rank's block */
    size_t recv_bytes;        /* bytes of recv this rank's call writes */
    size_t check_bytes;       /* bytes of recv compared with ref (0: nothing to check here) */
    uint32_t peer;            /* sendrecv partner */
    bool idle;                /* sendrecv: no partner for this rank */
} zb_size;

static _Noreturn void zb_die(const zb_bench *b, const char *call, zc_status st) {
    ZB_COUNTING(0);
    const char *text = b->comm ? zc_comm_error_text(b->comm) : zc_init_error_text();
    fflush(stdout);
    fprintf(stderr, "zcbench: %s: %s: %s\n", call, zc_status_name(st), text);
    exit(ZB_EXIT_FAIL);
}

#define ZB_CALL(b, call)                                                                      \
    do {                                                                                      \
        zc_status zb_st_ = (call);                                                            \
        if (zb_st_ != ZC_OK) zb_die((b), #call, zb_st_);                                      \
    } while (0)

static void zb_wait(zb_bench *b, zc_req *req, const char *what) {
    zc_status st = zc_wait(b->comm, req);
    if (st != ZC_OK) zb_die(b, what, st);
}

static void zb_barrier(zb_bench *b) {
    zc_req req;
    ZB_CALL(b, zc_barrier(b->comm, &req));
    zb_wait(b, &req, "zc_wait(barrier)");
}

/* The row's call: issued (plan NULL: its request in req, sendrecv's receive in req2) or, with
 * plan, made a persistent plan instead (plan[0]; sendrecv's receive in plan[1]). */
#define ZB_FORM(fn, plan, slot, req, ...)                                                       \
    ((plan) ? fn##_init(__VA_ARGS__, &(plan)[slot]) : fn(__VA_ARGS__, (req)))
static void zb_call(zb_bench *b, const zb_size *s, zc_plan *plan, zc_req *req, zc_req *req2) {
    zc_comm *c = b->comm;
    const zb_opts *o = &b->o;
    void *root_recv = b->rank == o->root ? b->send : b->recv;
    switch (s->coll) {
    case BR_ALLREDUCE:
        ZB_CALL(b, ZB_FORM(zc_allreduce, plan, 0, req, c, b->send, b->recv, s->arg, o->dtype,
                           o->op));
        break;
    case BR_REDUCE:
        ZB_CALL(b, ZB_FORM(zc_reduce, plan, 0, req, c, b->send, b->recv, s->arg, o->dtype, o->op,
                           o->root));
        break;
    case BR_BROADCAST:
        /* In place at the root, as MPI_Bcast and torch.distributed.broadcast: no local copy. */
        ZB_CALL(b, ZB_FORM(zc_broadcast, plan, 0, req, c, b->send, root_recv, s->arg, o->dtype,
                           o->root));
        break;
    case BR_REDUCE_SCATTER:
        ZB_CALL(b, ZB_FORM(zc_reduce_scatter, plan, 0, req, c, b->send, b->recv, s->arg,
                           o->dtype, o->op));
        break;
    case BR_ALLGATHER:
        ZB_CALL(b, ZB_FORM(zc_allgather, plan, 0, req, c, b->send, b->recv, s->arg, o->dtype));
        break;
    case BR_GATHER:
        ZB_CALL(b, ZB_FORM(zc_gather, plan, 0, req, c, b->send, b->recv, s->arg, o->dtype,
                           o->root));
        break;
    case BR_SCATTER:
        ZB_CALL(b, ZB_FORM(zc_scatter, plan, 0, req, c, b->send, b->recv, s->arg, o->dtype,
                           o->root));
        break;
    case BR_ALLTOALL:
        ZB_CALL(b, ZB_FORM(zc_alltoall, plan, 0, req, c, b->send, b->recv, s->arg, o->dtype));
        break;
    case BR_SENDRECV:
        ZB_CALL(b, ZB_FORM(zc_recv, plan, 1, req2, c, b->recv, s->arg, o->dtype, s->peer));
        ZB_CALL(b, ZB_FORM(zc_send, plan, 0, req, c, b->send, s->arg, o->dtype, s->peer));
        break;
    case BR_BARRIER:
        ZB_CALL(b, plan ? zc_barrier_init(c, &plan[0]) : zc_barrier(c, req));
        break;
    case BR_COLL_COUNT:
        break;
    }
}

/* --persistent: the row's plans, made before its warm-up and released after its timed loop. */
static void zb_plans(zb_bench *b, const zb_size *s, bool make) {
    if (!b->o.persistent || (s->coll == BR_SENDRECV && s->idle)) return;
    if (make) {
        zb_call(b, s, b->plan, NULL, NULL);
        return;
    }
    ZB_CALL(b, zc_plan_release(b->comm, &b->plan[0]));
    if (s->coll == BR_SENDRECV) ZB_CALL(b, zc_plan_release(b->comm, &b->plan[1]));
}

/* Runs one call of the row's collective (a start of its plans with --persistent) and waits. */
static void zb_run_once(zb_bench *b, const zb_size *s) {
    zc_req req, req2;
    bool p2p = s->coll == BR_SENDRECV;
    if (p2p && s->idle) return;
    if (b->o.persistent) {
        if (p2p) ZB_CALL(b, zc_start(b->comm, &b->plan[1], &req2));
        ZB_CALL(b, zc_start(b->comm, &b->plan[0], &req));
    } else {
        zb_call(b, s, NULL, &req, &req2);
    }
    if (p2p) zb_wait(b, &req2, "zc_wait(recv)");
    zb_wait(b, &req, "zc_wait");
}

/* The row for `bytes` (ignored by barrier); false when it rounds to no element. */
static bool zb_geometry(const zb_bench *b, br_coll c, uint64_t bytes, zb_size *s) {
    *s = (zb_size){.coll = c};
    uint64_t es = b->esize, n = b->n;
    if (c == BR_BARRIER) return true;
    uint64_t count = br_colls[c].blocked ? bytes / es / n * n : bytes / es;
    if (count == 0) return false;
    s->count = count;
    s->bytes = count * es;
    s->arg = (size_t)(br_colls[c].blocked ? count / n : count);
    s->block_bytes = s->arg * b->esize;
    bool at_root = b->rank == b->o.root;
    switch (c) {
    case BR_ALLREDUCE: case BR_ALLGATHER: case BR_ALLTOALL:
        s->recv_bytes = (size_t)s->bytes;
        break;
    case BR_BROADCAST: /* the root broadcasts in place: nothing to check there */
        s->recv_bytes = at_root ? 0 : (size_t)s->bytes;
        break;
    case BR_REDUCE: case BR_GATHER:
        s->recv_bytes = at_root ? (size_t)s->bytes : 0;
        break;
    case BR_REDUCE_SCATTER: case BR_SCATTER:
        s->recv_bytes = s->block_bytes;
        break;
    case BR_SENDRECV:
        s->peer = b->rank ^ 1u;
        s->idle = s->peer >= b->n;
        s->recv_bytes = s->idle ? 0 : (size_t)s->bytes;
        break;
    case BR_BARRIER: case BR_COLL_COUNT:
        break;
    }
    s->check_bytes = s->recv_bytes;
    return true;
}

/* ---- inputs and expected results -----------------------------------------------------------
 * Collectives that only move data get bytes that name their source rank and offset, compared
 * bytewise. Reductions get small non-negative integers per (rank, index) chosen so that every
 * result is an integer exact in the dtype (narrow floats: sums kept within 2^(mantissa+1) by
 * letting only the first few ranks contribute); integer sums wrap like the library's. */

static uint8_t zb_pattern(uint32_t rank, uint64_t off) {
    uint64_t h = (off + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)rank + 1) * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 29;
    return (uint8_t)((h * 0xbf58476d1ce4e5b9ull) >> 56);
}

/* Bits of the non-negative integer k in a float format with `mbits` mantissa bits; k must be
 * exact in it (asserted: the value rules below keep it so). */
static uint64_t zb_float_bits(uint64_t k, unsigned mbits, unsigned bias) {
    if (k == 0) return 0;
    unsigned e = 63u - (unsigned)__builtin_clzll(k);
    uint64_t frac = k - (1ull << e);
    uint64_t mant = e <= mbits ? frac << (mbits - e) : frac >> (e - mbits);
    if (e > mbits && (frac & ((1ull << (e - mbits)) - 1)) != 0) {
        fprintf(stderr, "zcbench: internal: %llu is not exact in the dtype\n",
                (unsigned long long)k);
        abort();
    }
    return ((uint64_t)(e + bias) << mbits) | mant;
}

/* Writes the integer k as one element of dtype t at dst (integers wrap to their width). */
static void zb_encode(zc_dtype t, uint64_t k, uint8_t *dst) {
    uint64_t bits = k;
    size_t es = zc_dtype_bytes(t);
    switch (t) {
    case ZC_FLOAT32: { float f = (float)k; memcpy(dst, &f, 4); return; }
    case ZC_FLOAT64: { double d = (double)k; memcpy(dst, &d, 8); return; }
    case ZC_FLOAT16: bits = zb_float_bits(k, 10, 15); break;
    case ZC_BFLOAT16: bits = zb_float_bits(k, 7, 127); break;
    case ZC_FP8_E4M3: bits = zb_float_bits(k, 3, 7); break;
    case ZC_FP8_E5M2: bits = zb_float_bits(k, 2, 15); break;
    default: break;
    }
    for (size_t i = 0; i < es; i++) dst[i] = (uint8_t)(bits >> (8 * i));
}

/* How many ranks contribute non-zero values to a SUM, so that the sum (at most 2 per rank)
 * stays an integer exact in t. */
static uint32_t zb_sum_ranks(zc_dtype t, uint32_t n) {
    uint32_t lim = n;
    switch (t) {
    case ZC_FLOAT16: lim = 1024; break;
    case ZC_BFLOAT16: lim = 128; break;
    case ZC_FP8_E4M3: lim = 8; break;
    case ZC_FP8_E5M2: lim = 4; break;
    default: break;
    }
    return lim < n ? lim : n;
}

static bool zb_is_float(zc_dtype t) {
    return t == ZC_FLOAT16 || t == ZC_BFLOAT16 || t == ZC_FLOAT32 || t == ZC_FLOAT64 ||
           t == ZC_FP8_E4M3 || t == ZC_FP8_E5M2;
}

/* Rank r's input at index i of the full send vector, as an integer. */
static uint64_t zb_value_of(const zb_bench *b, uint32_t r, uint64_t i) {
    uint32_t n = b->n;
    switch (b->o.op) {
    case ZC_SUM: return r < zb_sum_ranks(b->o.dtype, n) ? (r + i) % 3 : 0;
    case ZC_PROD: return (i + r) % n == 0 ? 1 + i % 3 : 1;
    case ZC_MIN: case ZC_MAX: return ((uint64_t)r * 5 + i) % 7;
    case ZC_AVG: return zb_is_float(b->o.dtype) ? i % 3 : (r + i) % 3;
    case ZC_OP_COUNT_: break;
    }
    return 0;
}

/* The reduction of every rank's input at index i, as an integer (before wrapping). */
static uint64_t zb_expected(const zb_bench *b, uint64_t i) {
    uint64_t acc = zb_value_of(b, 0, i);
    for (uint32_t r = 1; r < b->n; r++) {
        uint64_t v = zb_value_of(b, r, i);
        switch (b->o.op) {
        case ZC_SUM: case ZC_AVG: acc += v; break;
        case ZC_PROD: acc *= v; break;
        case ZC_MIN: acc = v < acc ? v : acc; break;
        case ZC_MAX: acc = v > acc ? v : acc; break;
        case ZC_OP_COUNT_: break;
        }
    }
    return b->o.op == ZC_AVG ? acc / b->n : acc;
}

/* Reductions: send gets this rank's inputs; ref the expected recv contents. */
static void zb_prepare_reduce(zb_bench *b, const zb_size *s) {
    size_t es = b->esize;
    for (uint64_t i = 0; i < s->count; i++) zb_encode(b->o.dtype, zb_value_of(b, b->rank, i),
                                                      b->send + i * es);
    if (!b->o.br.check) return;
    uint64_t first = s->coll == BR_REDUCE_SCATTER ? (uint64_t)b->rank * s->arg : 0;
    for (uint64_t j = 0; j < s->check_bytes / es; j++)
        zb_encode(b->o.dtype, zb_expected(b, first + j), b->ref + j * es);
}

/* Data movement: send gets pattern(rank, offset); ref what recv must hold. */
static void zb_prepare_move(zb_bench *b, const zb_size *s) {
    size_t send_bytes = br_colls[s->coll].blocked && s->coll != BR_SCATTER &&
                                s->coll != BR_ALLTOALL
                            ? s->block_bytes
                            : (size_t)s->bytes;
    for (size_t off = 0; off < send_bytes; off++) b->send[off] = zb_pattern(b->rank, off);
    if (!b->o.br.check) return;
    size_t blk = s->block_bytes;
    for (size_t off = 0; off < s->check_bytes; off++) {
        uint8_t v = 0;
        switch (s->coll) {
        case BR_BROADCAST: v = zb_pattern(b->o.root, off); break;
        case BR_ALLGATHER: case BR_GATHER:
            v = zb_pattern((uint32_t)(off / blk), off % blk);
            break;
        case BR_SCATTER: v = zb_pattern(b->o.root, b->rank * blk + off); break;
        case BR_ALLTOALL: v = zb_pattern((uint32_t)(off / blk), b->rank * blk + off % blk); break;
        case BR_SENDRECV: v = zb_pattern(s->peer, off); break;
        default: break;
        }
        b->ref[off] = v;
    }
}

/* Wrong elements of this rank's result (0 when it matches ref). */
static uint64_t zb_verify(const zb_bench *b, const zb_size *s) {
    return br_count_wrong(b->recv, b->ref, s->check_bytes, b->esize);
}

/* ---- timing one size ---------------------------------------------------------------------- */

/* Runs the warm-up; returns the timed iterations every rank agrees on. */
static uint64_t zb_warmup(zb_bench *b, const zb_size *s) {
    uint64_t warm = br_warmup_calls(b->o.br.warmup, b->o.br.iters, s->bytes);
    uint64_t spent = 0, timed = 0;
    for (uint64_t it = 0; it < warm; it++) {
        if (b->o.br.barrier_mode) zb_barrier(b);
        uint64_t t0 = br_now_ns();
        zb_run_once(b, s);
        br_warmup_add(it, warm, br_now_ns() - t0, &spent, &timed);
    }
    if (b->o.br.iters != 0) return b->o.br.iters;
    uint64_t iters = 0;
    if (b->rank == 0) {
        iters = br_adaptive_iters(spent, timed);
    }
    zc_req req;
    ZB_CALL(b, zc_broadcast(b->comm, &iters, &iters, 1, ZC_UINT64, 0, &req));
    zb_wait(b, &req, "zc_wait(broadcast of the iteration count)");
    return iters;
}

/* The timed loop: b->times[it] = this rank's ns for iteration it; returns wrong elements. */
static uint64_t zb_timed_loop(zb_bench *b, const zb_size *s, uint64_t iters) {
    uint64_t wrong = 0;
    ZB_COUNTING(1);
    for (uint64_t it = 0; it < iters; it++) {
        if (b->o.br.check) memset(b->recv, 0xff, s->recv_bytes);
        if (b->o.br.barrier_mode) zb_barrier(b);
        uint64_t t0 = br_now_ns();
        zb_run_once(b, s);
        b->times[it] = br_now_ns() - t0;
        if (b->o.br.check) wrong += zb_verify(b, s);
    }
    ZB_COUNTING(0);
    return wrong;
}

static void zb_measure(zb_bench *b, const zb_size *s, br_result *res) {
    uint64_t iters = zb_warmup(b, s);
#if ZB_COUNT_ALLOCS
    zb_alloc_calls = 0;
#endif
    uint64_t wrong = zb_timed_loop(b, s, iters);
    zc_req req;
    ZB_CALL(b, zc_allreduce(b->comm, b->times, b->times, (size_t)iters, ZC_UINT64, ZC_MAX, &req));
    zb_wait(b, &req, "zc_wait(allreduce of the iteration times)");
#if ZB_COUNT_ALLOCS
    uint64_t sums[2] = {wrong, zb_alloc_calls};
#else
    uint64_t sums[2] = {wrong, 0};
#endif
    ZB_CALL(b, zc_allreduce(b->comm, sums, sums, 2, ZC_UINT64, ZC_SUM, &req));
    zb_wait(b, &req, "zc_wait(allreduce of the counters)");
    *res = (br_result){.iters = iters,
                       .wrong = b->o.br.check ? (int64_t)sums[0] : -1,
                       .allocs = ZB_COUNT_ALLOCS ? (int64_t)sums[1] : -1};
    if (b->rank != 0) return;
    br_stats(b->times, s->bytes, br_bus_factor(s->coll, b->n), res);
}

/* ---- output ------------------------------------------------------------------------------- */

static const char *zb_op_text(const zb_bench *b, br_coll c) {
    return br_colls[c].reduces ? zc_op_name(b->o.op) : "none";
}

static int zb_root_of(const zb_bench *b, br_coll c) {
    return br_colls[c].rooted ? (int)b->o.root : -1;
}

static void zb_print_header(const zb_bench *b, br_coll c) {
    FILE *f = b->meta;
    fprintf(f, "# zcbench: %s on %u ranks, transport %s, mode %s, %s%s%s, threads %s\n",
            br_colls[c].name, b->n, zc_comm_transport(b->comm),
            b->o.br.barrier_mode ? "barrier" : "loop", zc_dtype_name(b->o.dtype),
            br_colls[c].reduces ? "/" : "", br_colls[c].reduces ? zc_op_name(b->o.op) : "",
            b->o.threads_multi ? "multi" : "serial");
    fprintf(f, "# arena %zu bytes per rank (zc_comm_arena_bytes)%s%s\n", b->arena_bytes,
            b->o.sym ? "; buffers in the symmetric region (--sym)" : "",
            b->o.persistent ? "; persistent plans, zc_start per call (--persistent)" : "");
    br_print_iters_line(f, b->o.br.iters, b->o.br.warmup);
    if (b->o.br.json) return;
    br_print_columns();
}

static void zb_print_row(const zb_bench *b, const zb_size *s, const br_result *r) {
    br_coll c = s->coll;
    br_row w = {.impl = "zcoll", .coll = br_colls[c].name, .dtype = zc_dtype_name(b->o.dtype),
                .op = zb_op_text(b, c), .mode = b->o.br.barrier_mode ? "barrier" : "loop",
                .bytes = s->bytes, .count = s->count, .root = zb_root_of(b, c), .ranks = b->n};
    br_print_row(&w, r, b->o.br.json);
}

/* One row; returns the allocations it counted (-1 when not counted). */
static int64_t zb_run_size(zb_bench *b, br_coll c, uint64_t bytes) {
    zb_size s;
    if (!zb_geometry(b, c, bytes, &s)) return 0;
    if (br_colls[c].reduces)
        zb_prepare_reduce(b, &s);
    else if (c != BR_BARRIER)
        zb_prepare_move(b, &s);
    uint64_t t0 = br_now_ns();
    br_result r;
    zb_plans(b, &s, true);
    zb_measure(b, &s, &r);
    zb_plans(b, &s, false);
    if (b->rank != 0) return r.allocs;
    zb_print_row(b, &s, &r);
    fflush(stdout);
    uint64_t took = br_now_ns() - t0;
    br_print_progress(s.bytes, r.iters, took);
    return r.allocs;
}

static void zb_run_coll(zb_bench *b, br_coll c) {
    if (c == BR_SENDRECV && b->n < 2) {
        if (b->rank == 0) fprintf(b->meta, "# sendrecv needs 2 or more ranks: skipped\n");
        return;
    }
    if (b->rank == 0) zb_print_header(b, c);
    int64_t allocs = 0;
    uint64_t calls0, rounds0, calls1, rounds1, direct0, bytes0, direct1, bytes1;
    zc_comm_gpu_staged(b->comm, &calls0, &rounds0);
    zc_comm_gpu_direct(b->comm, &direct0, &bytes0);
    if (c == BR_BARRIER) {
        allocs = zb_run_size(b, c, 0);
    } else {
        for (uint64_t bytes = b->o.br.min_bytes; bytes <= b->o.br.max_bytes;
             bytes *= b->o.br.factor) {
            int64_t a = zb_run_size(b, c, bytes);
            allocs = a < 0 || allocs < 0 ? -1 : allocs + a;
            if (bytes > b->o.br.max_bytes / b->o.br.factor) break;
        }
    }
    if (b->rank != 0) return;
    if (allocs < 0)
        fprintf(b->meta, "# allocations: not counted (sanitized build)\n");
    else
        fprintf(b->meta, "# allocations during timed loops: %" PRId64 "\n", allocs);
    zc_comm_gpu_staged(b->comm, &calls1, &rounds1);
    zc_comm_gpu_direct(b->comm, &direct1, &bytes1);
    if (b->o.device)
        fprintf(b->meta, "# device path %s: %" PRIu64 " staged calls in %" PRIu64 " rounds, %"
                PRIu64 " direct calls putting %" PRIu64 " bytes\n", zc_comm_gpu_path(b->comm),
                calls1 - calls0, rounds1 - rounds0, direct1 - direct0, bytes1 - bytes0);
    fflush(b->meta);
}

/* ---- setup -------------------------------------------------------------------------------- */

static void *zb_alloc(size_t bytes, const char *what) {
    size_t rounded = (bytes + ZB_ALIGN - 1) / ZB_ALIGN * ZB_ALIGN;
    void *p = aligned_alloc(ZB_ALIGN, rounded ? rounded : ZB_ALIGN);
    if (!p) {
        fprintf(stderr, "zcbench: no memory for %s (%zu bytes)\n", what, bytes);
        exit(ZB_EXIT_FAIL);
    }
    memset(p, 0, rounded ? rounded : ZB_ALIGN); /* touch every page before timing */
    return p;
}

/* A send or receive buffer of buf_bytes: host memory, or (--device) the simulated device's. */
static uint8_t *zb_buffer(const zb_bench *b, const char *what) {
    if (!b->o.device) return zb_alloc(b->buf_bytes, what);
    size_t rounded = (b->buf_bytes + ZB_ALIGN - 1) / ZB_ALIGN * ZB_ALIGN;
    uint8_t *p = zc_gpu_sim_alloc(rounded);
    if (!p) {
        fprintf(stderr, "zcbench: --device: the simulated device has no memory for %s (%zu "
                "bytes)\n", what, rounded);
        exit(ZB_EXIT_FAIL);
    }
    memset(p, 0, rounded);
    return p;
}

static void zb_init(zb_bench *b) {
    zc_config_default(&b->cfg);
    zc_status st = zc_config_from_env(&b->cfg);
    if (st != ZC_OK) {
        fprintf(stderr, "zcbench: zc_config_from_env: %s: %s\n", zc_status_name(st),
                b->cfg.error_text);
        exit(ZB_EXIT_FAIL);
    }
    if (b->o.transport_set) b->cfg.transport = b->o.transport;
    b->cfg.threads = b->o.threads_multi ? ZC_THREADS_MULTI : ZC_THREADS_SERIAL;
    if (b->o.device && b->cfg.gpu_provider != ZC_GPU_PROVIDER_SIM) {
        fprintf(stderr, "zcbench: --device needs ZC_GPU_PROVIDER=sim (zcbench fills and checks "
                "buffers from the host: a real GPU's memory is not supported yet)\n");
        exit(ZB_EXIT_USAGE);
    }
    if (b->o.device) (void)zc_gpu_sim_set_device(0);
    if (b->o.sym) /* send and recv, each rounded up to ZB_ALIGN, in whole pages */
        b->cfg.sym_bytes = (2 * (b->o.br.max_bytes + ZB_ALIGN) + 4095) / 4096 * 4096;
    b->arena_bytes = zc_comm_arena_bytes(&b->cfg);
    if (b->arena_bytes == 0) {
        fprintf(stderr, "zcbench: zc_comm_arena_bytes: 0 (the configuration is invalid)\n");
        exit(ZB_EXIT_FAIL);
    }
    b->arena = zb_alloc(b->arena_bytes, "the arena");
    ZB_CALL(b, zc_comm_init(&b->cfg, b->arena, b->arena_bytes, &b->comm));
    b->rank = zc_comm_rank(b->comm);
    b->n = zc_comm_size(b->comm);
    if (b->o.root >= b->n) {
        /* Every rank says it: zcrun may stop the others as soon as one has exited. */
        fprintf(stderr, "zcbench: -r %u: only %u ranks\n%s", b->o.root, b->n, zb_usage_line);
        zc_comm_fini(b->comm);
        exit(ZB_EXIT_USAGE);
    }
    b->esize = zc_dtype_bytes(b->o.dtype);
    b->buf_bytes = b->o.br.coll == BR_BARRIER ? ZB_ALIGN : (size_t)b->o.br.max_bytes; /* no data */
    if (b->o.sym) {
        ZB_CALL(b, zc_sym_alloc(b->comm, b->buf_bytes, (void **)&b->send));
        ZB_CALL(b, zc_sym_alloc(b->comm, b->buf_bytes, (void **)&b->recv));
        memset(b->send, 0, b->buf_bytes); /* touch every page before timing */
        memset(b->recv, 0, b->buf_bytes);
    } else {
        b->send = zb_buffer(b, "the send buffer");
        b->recv = zb_buffer(b, "the receive buffer");
    }
    if (b->o.br.check) b->ref = zb_alloc(b->buf_bytes, "the expected results");
    zc_mem_kind kind = b->o.device ? ZC_MEM_CUDA : ZC_MEM_HOST;
    ZB_CALL(b, zc_mem_register(b->comm, b->send, b->buf_bytes, kind, &b->send_mem));
    ZB_CALL(b, zc_mem_register(b->comm, b->recv, b->buf_bytes, kind, &b->recv_mem));
    b->times_cap = b->o.br.iters > BR_ADAPTIVE_MAX ? b->o.br.iters : BR_ADAPTIVE_MAX;
    b->times = zb_alloc((size_t)b->times_cap * sizeof b->times[0], "the iteration times");
    b->meta = b->o.br.json ? stderr : stdout;
}

static void zb_fini(zb_bench *b) {
    ZB_CALL(b, zc_mem_deregister(b->comm, b->send_mem));
    ZB_CALL(b, zc_mem_deregister(b->comm, b->recv_mem));
    ZB_CALL(b, zc_comm_fini(b->comm));
    b->comm = NULL;
    free(b->times);
    free(b->ref);
    if (b->o.device) {
        zc_gpu_sim_free(b->recv);
        zc_gpu_sim_free(b->send);
    } else if (!b->o.sym) { /* region buffers went with the communicator */
        free(b->recv);
        free(b->send);
    }
    free(b->arena);
}

int main(int argc, char **argv) {
    static zb_bench bench;
    zb_parse(&bench.o, argc, argv);
    zb_init(&bench);
    if (bench.o.br.coll >= 0) {
        zb_run_coll(&bench, (br_coll)bench.o.br.coll);
    } else {
        for (int c = 0; c < BR_COLL_COUNT; c++) zb_run_coll(&bench, (br_coll)c);
    }
    zb_fini(&bench);
    return 0;
}
