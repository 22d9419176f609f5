/* zcbench.c: the benchmark. Owns zcoll's side of the harness in bench_report.h (which times
 * every collective over a geometric sweep of sizes and prints nccl-tests columns or one JSON
 * object per size, plus latency percentiles; with --check every rank verifies every timed
 * iteration): the zcoll calls of a row (plain, or persistent plans), zcoll's dtypes, the
 * communicator and its options (transport, symmetric region, simulated device, threads), the
 * arena size and the number of allocations inside the timed loops.
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


#if ZB_COUNT_ALLOCS
/* The harness's count_allocs: reset and count from now (on), or stop and say how many. */
static uint64_t zb_count_allocs(br_bench *h, bool on) {
    (void)h;
    if (on) zb_alloc_calls = 0;
    zb_counting = on;
    return zb_alloc_calls;
}
#endif

_Static_assert((int)ZC_SUM == (int)BR_SUM && (int)ZC_PROD == (int)BR_PROD &&
                   (int)ZC_MIN == (int)BR_MIN && (int)ZC_MAX == (int)BR_MAX &&
                   (int)ZC_AVG == (int)BR_AVG,
               "bench_report.h's br_op follows zc_op");

/* ---- options ------------------------------------------------------------------------------ */

/* zcbench's own options (the shared ones are the harness's br_opts). */
typedef struct zb_opts {
    zc_dtype dtype;        /* -d looked up */
    zc_op op;              /* -o looked up */
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
    "       [--transport auto|shm|ib|hier] [--sym] [--device] [--persistent]\n"
    "       [--threads serial|multi]\n"
    "       (zcbench --help for more)\n";

static void zb_help(void) {
    fputs(zb_usage_line, stdout);
    fputs("\nTimes zcoll collectives over a size sweep on the ranks zcrun (or another launcher)\n"
          "started. Rank 0 prints the report on stdout.\n"
          "\nOptions:\n"
          BR_HELP_SWEEP
          "  -d DTYPE       int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32\n"
          "                 float64 fp8_e4m3 fp8_e5m2 (zc_dtype_name; default float32)\n"
          "  -o OP          sum prod min max avg (zc_op_name; default sum)\n"
          BR_HELP_TIMING
          "  --mode barrier a zc_barrier (untimed) before each timed call: one-shot latency\n"
          "  --check        inputs whose results are exact in DTYPE; every rank verifies every\n"
          "                 timed iteration outside the timed region\n"
          "  --json         one JSON object per line and size instead of the table\n"
          "  --transport T  auto, shm, ib or hier (default: ZC_TRANSPORT, else auto: shared\n"
          "                 memory on one host, InfiniBand/RoCE verbs across hosts; hier: shm\n"
          "                 among the ranks of one host and ib between hosts, in one\n"
          "                 communicator, shm alone when every rank shares one host;\n"
          "                 ZC_IB_* choose the device, port and GID)\n"
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
          "maxima, max(us): the slowest of them. Each table ends with \"# allocations during\n"
          "timed loops: N\": malloc, calloc, realloc, free, mmap and munmap calls inside the\n"
          "timed loops summed over ranks (must be 0; not counted in sanitized builds), and\n"
          "\"# context switches during timed loops\": involuntary (the kernel took a rank's CPU:\n"
          "each is a stall of the call it fell in) and voluntary, from getrusage, summed over\n"
          "ranks and sizes.\n",
          stdout);
    fputs("\nJSON keys: impl (\"zcoll\"), coll, bytes, count, dtype, op, root, ranks, mode,\n"
          "iters, time_us, algbw, busbw, p50_us, p99_us, p999_us, max_us, wrong (-1 without\n"
          "--check), allocs (-1 when not counted), preempted and yielded (the row's\n"
          "involuntary and voluntary context switches). In JSON mode the header lines go to\n"
          "stderr.\n"
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

static void zb_parse_option(zb_opts *o, br_opts *br, int argc, char **argv, int *i) {
    const char *a = argv[*i], *fmt = NULL, *arg = NULL;
    switch (br_parse_option(br, argc, argv, i, &fmt, &arg)) {
    case BR_PARSED: return;
    case BR_BAD: zb_usage(fmt, arg);
    case BR_NOT_SHARED: break;
    }
    if (strcmp(a, "--sym") == 0) {
        o->sym = true;
    } else if (strcmp(a, "--transport") == 0) {
        const char *s = zb_value(argc, argv, i);
        if (strcmp(s, "auto") != 0 && strcmp(s, "shm") != 0 && strcmp(s, "ib") != 0 &&
            strcmp(s, "hier") != 0)
            zb_usage("--transport %s: auto, shm, ib or hier", s);
        o->transport = strcmp(s, "shm") == 0    ? ZC_TRANSPORT_SHM
                       : strcmp(s, "ib") == 0   ? ZC_TRANSPORT_IB
                       : strcmp(s, "hier") == 0 ? ZC_TRANSPORT_HIER
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

static void zb_parse(zb_opts *o, br_opts *br, int argc, char **argv) {
    *o = (zb_opts){0};
    *br = br_opts_default(ZB_MAX_BYTES, ZC_MESH_MAX_RANKS - 1,
                          "bad size %s (1 to 1024G, suffixes K M G)");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            zb_help();
            exit(0);
        }
    }
    for (int i = 1; i < argc; i++) zb_parse_option(o, br, argc, argv, &i);
    const char *bad = br_check_opts(br);
    if (bad) zb_usage("%s", bad);
    o->dtype = zb_find_dtype(br->dtype);
    o->op = zb_find_op(br->op);
}

/* ---- the run ------------------------------------------------------------------------------ */

typedef struct zb_bench {
    br_bench h;               /* first: the harness's state (options, buffers, times) */
    zb_opts o;
    zc_config cfg;
    zc_comm *comm;
    void *arena;
    size_t arena_bytes;
    zc_mem *send_mem, *recv_mem;
    zc_plan plan[2];          /* --persistent: the row's plans (sendrecv's receive: plan[1]) */
} zb_bench;

/* The zb_bench whose harness state h is (the harness hands back what zb_init gave it). */
static zb_bench *zb_of(br_bench *h) { return (zb_bench *)(void *)h; }
static const zb_bench *zb_of_const(const br_bench *h) { return (const zb_bench *)(const void *)h; }

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

static void zb_barrier(br_bench *h) {
    zb_bench *b = zb_of(h);
    zc_req req;
    ZB_CALL(b, zc_barrier(b->comm, &req));
    zb_wait(b, &req, "zc_wait(barrier)");
}

/* The row's call: issued (plan NULL: its request in req, sendrecv's receive in req2) or, with
 * plan, made a persistent plan instead (plan[0]; sendrecv's receive in plan[1]). */
#define ZB_FORM(fn, plan, slot, req, ...)                                                       \
    ((plan) ? fn##_init(__VA_ARGS__, &(plan)[slot]) : fn(__VA_ARGS__, (req)))
static void zb_call(zb_bench *b, const br_size *s, zc_plan *plan, zc_req *req, zc_req *req2) {
    zc_comm *c = b->comm;
    const zb_opts *o = &b->o;
    uint8_t *send = b->h.send, *recv = b->h.recv;
    uint32_t root = (uint32_t)b->h.o.root;
    size_t count = (size_t)s->arg;
    void *root_recv = b->h.rank == root ? send : recv;
    switch (s->coll) {
    case BR_ALLREDUCE:
        ZB_CALL(b, ZB_FORM(zc_allreduce, plan, 0, req, c, send, recv, count, o->dtype, o->op));
        break;
    case BR_REDUCE:
        ZB_CALL(b, ZB_FORM(zc_reduce, plan, 0, req, c, send, recv, count, o->dtype, o->op,
                           root));
        break;
    case BR_BROADCAST:
        /* In place at the root, as MPI_Bcast and torch.distributed.broadcast: no local copy. */
        ZB_CALL(b, ZB_FORM(zc_broadcast, plan, 0, req, c, send, root_recv, count, o->dtype,
                           root));
        break;
    case BR_REDUCE_SCATTER:
        ZB_CALL(b, ZB_FORM(zc_reduce_scatter, plan, 0, req, c, send, recv, count, o->dtype,
                           o->op));
        break;
    case BR_ALLGATHER:
        ZB_CALL(b, ZB_FORM(zc_allgather, plan, 0, req, c, send, recv, count, o->dtype));
        break;
    case BR_GATHER:
        ZB_CALL(b, ZB_FORM(zc_gather, plan, 0, req, c, send, recv, count, o->dtype, root));
        break;
    case BR_SCATTER:
        ZB_CALL(b, ZB_FORM(zc_scatter, plan, 0, req, c, send, recv, count, o->dtype, root));
        break;
    case BR_ALLTOALL:
        ZB_CALL(b, ZB_FORM(zc_alltoall, plan, 0, req, c, send, recv, count, o->dtype));
        break;
    case BR_SENDRECV:
        ZB_CALL(b, ZB_FORM(zc_recv, plan, 1, req2, c, recv, count, o->dtype, s->peer));
        ZB_CALL(b, ZB_FORM(zc_send, plan, 0, req, c, send, count, o->dtype, s->peer));
        break;
    case BR_BARRIER:
        ZB_CALL(b, plan ? zc_barrier_init(c, &plan[0]) : zc_barrier(c, req));
        break;
    case BR_COLL_COUNT:
        break;
    }
}

/* --persistent: the row's plans, made before its warm-up (row_begin) and released after its
 * timed loop (row_end). */
static void zb_plans(zb_bench *b, const br_size *s, bool make) {
    if (!b->o.persistent || (s->coll == BR_SENDRECV && s->idle)) return;
    if (make) {
        zb_call(b, s, b->plan, NULL, NULL);
        return;
    }
    ZB_CALL(b, zc_plan_release(b->comm, &b->plan[0]));
    if (s->coll == BR_SENDRECV) ZB_CALL(b, zc_plan_release(b->comm, &b->plan[1]));
}

static void zb_row_begin(br_bench *h, const br_size *s) { zb_plans(zb_of(h), s, true); }
static void zb_row_end(br_bench *h, const br_size *s) { zb_plans(zb_of(h), s, false); }

/* The harness's run_once: one call of the row's collective (a start of its plans with
 * --persistent) and its wait. */
static void zb_run_once(br_bench *h, const br_size *s) {
    zb_bench *b = zb_of(h);
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

/* The harness's agree_iters: rank 0's count broadcast. */
static uint64_t zb_agree_iters(br_bench *h, uint64_t iters) {
    zb_bench *b = zb_of(h);
    zc_req req;
    ZB_CALL(b, zc_broadcast(b->comm, &iters, &iters, 1, ZC_UINT64, 0, &req));
    zb_wait(b, &req, "zc_wait(broadcast of the iteration count)");
    return iters;
}

/* The harness's combine: the times' maxima and the counters' sums over the ranks. */
static void zb_combine(br_bench *h, uint64_t iters, uint64_t sums[BR_SUMS]) {
    zb_bench *b = zb_of(h);
    zc_req req;
    ZB_CALL(b, zc_allreduce(b->comm, h->times, h->times, (size_t)iters, ZC_UINT64, ZC_MAX,
                            &req));
    zb_wait(b, &req, "zc_wait(allreduce of the iteration times)");
    ZB_CALL(b, zc_allreduce(b->comm, sums, sums, BR_SUMS, ZC_UINT64, ZC_SUM, &req));
    zb_wait(b, &req, "zc_wait(allreduce of the counters)");
}

/* ---- elements ---------------------------------------------------------------------------
 * The harness picks each (rank, index)'s integer (bench_report.h); zcbench writes it in every
 * zcoll dtype, narrow floats included. */
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

/* The harness's encode. */
static void zb_encode_elem(const br_bench *h, uint64_t k, uint8_t *dst) {
    zb_encode(zb_of_const(h)->o.dtype, k, dst);
}

/* ---- output ------------------------------------------------------------------------------- */

/* The harness's header: what the table measures. */
static void zb_header(const br_bench *h, br_coll c) {
    const zb_bench *b = zb_of_const(h);
    FILE *f = h->meta;
    fprintf(f, "# zcbench: %s on %u ranks, transport %s, mode %s, %s%s%s, threads %s\n",
            br_colls[c].name, h->n, zc_comm_transport(b->comm),
            h->o.barrier_mode ? "barrier" : "loop", h->o.dtype, br_colls[c].reduces ? "/" : "",
            br_colls[c].reduces ? h->o.op : "", b->o.threads_multi ? "multi" : "serial");
    fprintf(f, "# arena %zu bytes per rank (zc_comm_arena_bytes)%s%s\n", b->arena_bytes,
            b->o.sym ? "; buffers in the symmetric region (--sym)" : "",
            b->o.persistent ? "; persistent plans, zc_start per call (--persistent)" : "");
}

static const br_ops zb_ops = {.run_once = zb_run_once, .barrier = zb_barrier,
                              .agree_iters = zb_agree_iters, .combine = zb_combine,
                              .encode = zb_encode_elem, .header = zb_header,
                              .row_begin = zb_row_begin, .row_end = zb_row_end,
#if ZB_COUNT_ALLOCS
                              .count_allocs = zb_count_allocs,
#endif
};

/* One collective's table through the harness, then its allocation count and (--device) the
 * device path's counters. */
static void zb_run_coll(br_bench *h, br_coll c) {
    zb_bench *b = zb_of(h);
    uint64_t calls0, rounds0, calls1, rounds1, direct0, bytes0, direct1, bytes1;
    zc_comm_gpu_staged(b->comm, &calls0, &rounds0);
    zc_comm_gpu_direct(b->comm, &direct0, &bytes0);
    br_totals t;
    if (!br_run_coll(h, c, &t) || h->rank != 0) return;
    if (t.allocs < 0)
        fprintf(h->meta, "# allocations: not counted (sanitized build)\n");
    else
        fprintf(h->meta, "# allocations during timed loops: %" PRId64 "\n", t.allocs);
    fprintf(h->meta, "# context switches during timed loops: %" PRIu64 " involuntary (a rank's "
            "CPU taken away), %" PRIu64 " voluntary\n", t.preempted, t.yielded);
    zc_comm_gpu_staged(b->comm, &calls1, &rounds1);
    zc_comm_gpu_direct(b->comm, &direct1, &bytes1);
    if (b->o.device)
        fprintf(h->meta, "# device path %s: %" PRIu64 " staged calls in %" PRIu64 " rounds, %"
                PRIu64 " direct calls putting %" PRIu64 " bytes\n", zc_comm_gpu_path(b->comm),
                calls1 - calls0, rounds1 - rounds0, direct1 - direct0, bytes1 - bytes0);
    fflush(h->meta);
}

/* ---- setup -------------------------------------------------------------------------------- */

static void *zb_alloc(size_t bytes, const char *what) {
    void *p = br_alloc(bytes);
    if (!p) {
        fprintf(stderr, "zcbench: no memory for %s (%zu bytes)\n", what, bytes);
        exit(ZB_EXIT_FAIL);
    }
    return p;
}

/* A send or receive buffer of bytes: host memory, or (--device) the simulated device's. */
static uint8_t *zb_buffer(const zb_bench *b, size_t bytes, const char *what) {
    if (!b->o.device) return zb_alloc(bytes, what);
    size_t rounded = (bytes + ZB_ALIGN - 1) / ZB_ALIGN * ZB_ALIGN;
    uint8_t *p = zc_gpu_sim_alloc(rounded);
    if (!p) {
        fprintf(stderr, "zcbench: --device: the simulated device has no memory for %s (%zu "
                "bytes)\n", what, rounded);
        exit(ZB_EXIT_FAIL);
    }
    memset(p, 0, rounded);
    return p;
}

/* The configuration from the environment and the options, the arena, the communicator. */
static void zb_init_comm(zb_bench *b) {
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
        b->cfg.sym_bytes = (2 * (b->h.o.max_bytes + ZB_ALIGN) + 4095) / 4096 * 4096;
    b->arena_bytes = zc_comm_arena_bytes(&b->cfg);
    if (b->arena_bytes == 0) {
        fprintf(stderr, "zcbench: zc_comm_arena_bytes: 0 (the configuration is invalid)\n");
        exit(ZB_EXIT_FAIL);
    }
    b->arena = zb_alloc(b->arena_bytes, "the arena");
    ZB_CALL(b, zc_comm_init(&b->cfg, b->arena, b->arena_bytes, &b->comm));
}

static void zb_init(zb_bench *b) {
    br_bench *h = &b->h;
    zb_init_comm(b);
    h->ops = &zb_ops;
    h->impl = "zcoll";
    h->rank = zc_comm_rank(b->comm);
    h->n = zc_comm_size(b->comm);
    if (h->o.root >= h->n) {
        /* Every rank says it: zcrun may stop the others as soon as one has exited. */
        fprintf(stderr, "zcbench: -r %" PRIu64 ": only %u ranks\n%s", h->o.root, h->n,
                zb_usage_line);
        zc_comm_fini(b->comm);
        exit(ZB_EXIT_USAGE);
    }
    h->op = (br_op)b->o.op;
    h->sum_ranks = zb_sum_ranks(b->o.dtype, h->n);
    h->avg_same = zb_is_float(b->o.dtype);
    h->esize = zc_dtype_bytes(b->o.dtype);
    size_t bytes = h->o.coll == BR_BARRIER ? ZB_ALIGN : (size_t)h->o.max_bytes; /* no data */
    if (b->o.sym) {
        ZB_CALL(b, zc_sym_alloc(b->comm, bytes, (void **)&h->send));
        ZB_CALL(b, zc_sym_alloc(b->comm, bytes, (void **)&h->recv));
        memset(h->send, 0, bytes); /* touch every page before timing */
        memset(h->recv, 0, bytes);
    } else {
        h->send = zb_buffer(b, bytes, "the send buffer");
        h->recv = zb_buffer(b, bytes, "the receive buffer");
    }
    const char *missing = br_setup(h, bytes);
    if (missing) {
        fprintf(stderr, "zcbench: no memory for %s\n", missing);
        exit(ZB_EXIT_FAIL);
    }
    zc_mem_kind kind = b->o.device ? ZC_MEM_CUDA : ZC_MEM_HOST;
    ZB_CALL(b, zc_mem_register(b->comm, h->send, bytes, kind, &b->send_mem));
    ZB_CALL(b, zc_mem_register(b->comm, h->recv, bytes, kind, &b->recv_mem));
}

static void zb_fini(zb_bench *b) {
    br_bench *h = &b->h;
    ZB_CALL(b, zc_mem_deregister(b->comm, b->send_mem));
    ZB_CALL(b, zc_mem_deregister(b->comm, b->recv_mem));
    ZB_CALL(b, zc_comm_fini(b->comm));
    b->comm = NULL;
    free(h->times);
    free(h->ref);
    if (b->o.device) {
        zc_gpu_sim_free(h->recv);
        zc_gpu_sim_free(h->send);
    } else if (!b->o.sym) { /* region buffers went with the communicator */
        free(h->recv);
        free(h->send);
    }
    free(b->arena);
}

int main(int argc, char **argv) {
    static zb_bench bench;
    zb_parse(&bench.o, &bench.h.o, argc, argv);
    zb_init(&bench);
    br_run_all(&bench.h, zb_run_coll);
    zb_fini(&bench);
    return 0;
}
