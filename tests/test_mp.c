/* test_mp.c: whole communicators across real processes under zcrun. Every collective against a
 * local reference (a seeded sweep over kind x dtype x op x count x root x in-place with up to
 * eight calls in flight), a 64 MiB allreduce, persistent plans, split children next to their
 * parent, mismatches, a rank that never joins, a killed rank, no allocation after init, eight
 * ranks on two cores, and misuse that must leave the communicator usable.
 *
 * Each test starts rank programs (`zctest --rank mp_rank_*`) through zcrun. Inputs are a pure
 * function of (seed, call, rank, element), so every rank computes every other rank's input and
 * the reference locally. A rank program that sees something wrong prints one "mp FAILED" line
 * (the call, status names, the communicator's sentence, the seed) and exits 1; the rank
 * programs print "mp-info:" lines that the tests check and echo. */
#include "zt.h"

#define ZC_TEST_HOOKS 1 /* zc__test_forge: a rank that dies in the middle of a message */
#include "../core/engine.h" /* zc_comm's placed_bytes: what the wire put in place */
#include "../core/reduce.h"
#include "ref.h"
#include "zcoll.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MP_MS 1000000ull

/* ---- allocation counting ----------------------------------------------------------------
 * The release build replaces malloc & co. for the whole zctest binary with forwarders that
 * count calls while mp_counting is set (only inside mp_rank_alloc_free's measured loop). A
 * sanitizer owns malloc in the debug and tsan builds (ZC_SANITIZED), so there the forwarders
 * are left out and the test skips. */
#if defined(ZC_SANITIZED)
#define MP_COUNTING_ALLOCS 0
#else
#define MP_COUNTING_ALLOCS 1
enum { MP_MALLOC, MP_CALLOC, MP_REALLOC, MP_FREE, MP_MMAP, MP_MUNMAP, MP_ALLOC_FNS };
static const char *const mp_alloc_names[MP_ALLOC_FNS] = {"malloc", "calloc", "realloc",
                                                         "free",   "mmap",   "munmap"};
static volatile int mp_counting;
static volatile unsigned long mp_alloc_calls[MP_ALLOC_FNS];

extern void *__libc_malloc(size_t bytes);
extern void *__libc_calloc(size_t count, size_t bytes);
extern void *__libc_realloc(void *p, size_t bytes);
extern void __libc_free(void *p);

void *malloc(size_t bytes) {
    if (mp_counting) mp_alloc_calls[MP_MALLOC]++;
    return __libc_malloc(bytes);
}
void *calloc(size_t count, size_t bytes) {
    if (mp_counting) mp_alloc_calls[MP_CALLOC]++;
    return __libc_calloc(count, bytes);
}
void *realloc(void *p, size_t bytes) {
    if (mp_counting) mp_alloc_calls[MP_REALLOC]++;
    return __libc_realloc(p, bytes);
}
void free(void *p) {
    if (mp_counting) mp_alloc_calls[MP_FREE]++;
    __libc_free(p);
}
void *mmap(void *addr, size_t bytes, int prot, int flags, int fd, off_t offset) {
    if (mp_counting) mp_alloc_calls[MP_MMAP]++;
    return (void *)syscall(SYS_mmap, addr, bytes, prot, flags, fd, offset);
}
int munmap(void *addr, size_t bytes) {
    if (mp_counting) mp_alloc_calls[MP_MUNMAP]++;
    return (int)syscall(SYS_munmap, addr, bytes);
}
#endif

/* ---- rank program plumbing ---------------------------------------------------------------- */

typedef struct mp_ctx {
    const char *prog;   /* rank program name, for messages */
    zc_config cfg;
    void *arena;
    zc_comm *comm;
    uint32_t rank, n;
} mp_ctx;

static uint64_t mp_seed;

static uint64_t mp_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double mp_ms(uint64_t ns) { return (double)ns / 1e6; }

static void mp_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static _Noreturn void mp_die(const mp_ctx *m, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static _Noreturn void mp_die(const mp_ctx *m, const char *file, int line, const char *fmt, ...) {
#if MP_COUNTING_ALLOCS
    mp_counting = 0;
#endif
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("mp FAILED: %s rank %u of %u at %s:%d: %s | comm error text: \"%s\" | ZT_SEED=%llu\n",
           m->prog, m->rank, m->n, file, line, msg,
           m->comm ? zc_comm_error_text(m->comm) : "(no communicator)",
           (unsigned long long)mp_seed);
    fflush(stdout);
    exit(1);
}

#define MP_CHECK(m, cond, ...)                                                                \
    do {                                                                                      \
        if (!(cond)) mp_die((m), __FILE__, __LINE__, __VA_ARGS__);                            \
    } while (0)

#define MP_ST(m, call, want)                                                                  \
    do {                                                                                      \
        zc_status mp_s_ = (call), mp_w_ = (want);                                             \
        if (mp_s_ != mp_w_)                                                                   \
            mp_die((m), __FILE__, __LINE__, "%s returned %s, expected %s", #call,             \
                   zc_status_name(mp_s_), zc_status_name(mp_w_));                             \
    } while (0)

/* The error text of comm must contain word (a check that the sentence names the argument). */
#define MP_TEXT_HAS(m, comm, word)                                                            \
    MP_CHECK((m), strstr(zc_comm_error_text(comm), (word)) != NULL,                           \
             "error text \"%s\" does not mention \"%s\"", zc_comm_error_text(comm), (word))

/* zcrun's environment, as an application reads it; the caller may adjust cfg before mp_init. */
/* The claimed host of rank r under MP_LAYOUT ("3,2,1": ranks per claimed host, in rank order;
 * ranks past the sum join the last); 0 without one. */
static uint32_t mp_layout_host(uint32_t r) {
    const char *s = getenv("MP_LAYOUT");
    uint32_t host = 0, end = 0;
    for (char *e; s && *s; s = *e ? e + 1 : e, host++) {
        end += (uint32_t)strtoul(s, &e, 10);
        if (r < end || !*e) return host;
    }
    return host;
}

/* Every rank program reads these before init: MP_LAYOUT claims hosts through ZC_HOST_ID, and
 * MP_HIER_SHM=1 makes the two-wire communicator's inter-host instance a second shm one (test
 * builds: no RDMA device on this machine) unless MP_HIER_IB=1 (tests/rxe: ib there). */
static void mp_hier_env(uint32_t rank) {
    if (getenv("MP_LAYOUT")) {
        char id[64];
        snprintf(id, sizeof id, "hierhost-%u", mp_layout_host(rank));
        setenv("ZC_HOST_ID", id, 1);
    }
    const char *shm = getenv("MP_HIER_SHM");
    zc__test_hier_shm = shm && !strcmp(shm, "1") && !getenv("MP_HIER_IB");
}

static void mp_config(mp_ctx *m, const char *prog) {
    memset(m, 0, sizeof *m);
    m->prog = prog;
    mp_seed = zt_seed();
    zc_config_default(&m->cfg);
    zc_status st = zc_config_from_env(&m->cfg);
    m->rank = m->cfg.rank;
    m->n = m->cfg.nranks;
    MP_CHECK(m, st == ZC_OK, "zc_config_from_env: %s: %s", zc_status_name(st),
             m->cfg.error_text);
    mp_hier_env(m->rank);
}

static void mp_init(mp_ctx *m) {
    size_t bytes = zc_comm_arena_bytes(&m->cfg);
    MP_CHECK(m, bytes > 0, "zc_comm_arena_bytes returned 0 for the config");
    m->arena = malloc(bytes);
    MP_CHECK(m, m->arena != NULL, "no memory for an arena of %zu bytes", bytes);
    zc_status st = zc_comm_init(&m->cfg, m->arena, bytes, &m->comm);
    MP_CHECK(m, st == ZC_OK && m->comm != NULL, "zc_comm_init: %s: %s", zc_status_name(st),
             zc_init_error_text());
    MP_CHECK(m, zc_comm_rank(m->comm) == m->rank && zc_comm_size(m->comm) == m->n,
             "zc_comm_rank/size say %u of %u", zc_comm_rank(m->comm), zc_comm_size(m->comm));
}

static void mp_fini(mp_ctx *m) {
    MP_ST(m, zc_comm_fini(m->comm), ZC_OK);
    m->comm = NULL;
    free(m->arena);
    m->arena = NULL;
}

static void mp_barrier(mp_ctx *m) {
    zc_req r;
    MP_ST(m, zc_barrier(m->comm, &r), ZC_OK);
    MP_ST(m, zc_wait(m->comm, &r), ZC_OK);
}

static uint32_t mp_env_u32(const char *name, uint32_t dflt) {
    const char *s = getenv(name);
    return s && *s ? (uint32_t)strtoul(s, NULL, 10) : dflt;
}

/* ---- inputs: a pure function of (call uid, input identity, element index) ---------------- */

static uint64_t mp_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t mp_hash(uint64_t uid, uint32_t who, uint64_t idx) {
    return mp_mix(mp_mix(uid + 0x632be59bd9b4e019ull * (who + 1u)) + idx * 0x9e3779b97f4a7c15ull);
}

static float mp_qnan_f(void) {
    uint32_t b = 0x7fc00000u;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static double mp_qnan_d(void) {
    uint64_t b = 0x7ff8000000000000ull;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

/* Mostly small dyadic values (exact sums, non-trivial products), some arbitrary finite bit
 * patterns, 1/64 NaN and 1/64 infinities. */
static float mp_pick_float(uint64_t h) {
    uint32_t cls = (uint32_t)(h & 63u);
    if (cls == 0) return mp_qnan_f();
    if (cls == 1) return (h & 64u) ? INFINITY : -INFINITY;
    if (cls < 6) {
        uint32_t b = (uint32_t)(h >> 32);
        if (((b >> 23) & 0xffu) == 0xffu) b ^= 1u << 30;
        float f;
        memcpy(&f, &b, sizeof f);
        return f;
    }
    int v = (int)((h >> 8) % 33u) - 16, e = (int)((h >> 20) % 9u) - 4;
    return ldexpf((float)v, e);
}

static float mp_dec(zc_dtype t, const uint8_t *p) {
    uint16_t h;
    float f;
    switch (t) {
    case ZC_FLOAT16: memcpy(&h, p, 2); return zc__fp16_to_f32(h);
    case ZC_BFLOAT16: memcpy(&h, p, 2); return zc__bf16_to_f32(h);
    case ZC_FLOAT32: memcpy(&f, p, 4); return f;
    case ZC_FP8_E4M3: return zc__e4m3_to_f32(p[0]);
    case ZC_FP8_E5M2: return zc__e5m2_to_f32(p[0]);
    default: return 0.0f;
    }
}

/* Rounds f once into t (NaN as the canonical quiet NaN, as the library stores every NaN). */
static void mp_enc(zc_dtype t, float f, uint8_t *p) {
    uint16_t h;
    if (f != f) f = mp_qnan_f();
    switch (t) {
    case ZC_FLOAT16: h = zc__f32_to_fp16(f); memcpy(p, &h, 2); break;
    case ZC_BFLOAT16: h = zc__f32_to_bf16(f); memcpy(p, &h, 2); break;
    case ZC_FLOAT32: memcpy(p, &f, 4); break;
    case ZC_FP8_E4M3: p[0] = zc__f32_to_e4m3(f); break;
    case ZC_FP8_E5M2: p[0] = zc__f32_to_e5m2(f); break;
    default: break;
    }
}

/* One input element. Floating inputs never hold -0 or a NaN other than the canonical one, so
 * copying and reducing paths agree bit for bit and MIN/MAX never meet +-0 ties. */
static void mp_elem(zc_dtype t, uint64_t h, uint8_t *dst) {
    uint32_t u32 = (uint32_t)(h >> 16);
    switch (t) {
    case ZC_INT8:
    case ZC_UINT8: dst[0] = (uint8_t)(h >> 24); return;
    case ZC_INT32:
    case ZC_UINT32: memcpy(dst, &u32, 4); return;
    case ZC_INT64:
    case ZC_UINT64: memcpy(dst, &h, 8); return;
    case ZC_FLOAT64: {
        double d;
        if ((h & 63u) > 1u && (h & 63u) < 6u) {
            uint64_t b = mp_mix(h);
            if (((b >> 52) & 0x7ffu) == 0x7ffu) b ^= 1ull << 62;
            memcpy(&d, &b, 8);
        } else {
            d = (double)mp_pick_float(h);
        }
        if (d != d) d = mp_qnan_d();
        if (d == 0.0) d = 0.0;
        memcpy(dst, &d, 8);
        return;
    }
    default: {
        float f = mp_pick_float(h);
        mp_enc(t, f, dst);
        float back = mp_dec(t, dst);
        if (back != back) mp_enc(t, mp_qnan_f(), dst);
        else if (back == 0.0f) mp_enc(t, 0.0f, dst);
        return;
    }
    }
}

static bool mp_signed(zc_dtype t) { return t == ZC_INT8 || t == ZC_INT32 || t == ZC_INT64; }

static int64_t mp_load_s(zc_dtype t, const uint8_t *p) {
    int32_t v32;
    int64_t v64;
    switch (t) {
    case ZC_INT8: return (int8_t)p[0];
    case ZC_INT32: memcpy(&v32, p, 4); return v32;
    default: memcpy(&v64, p, 8); return v64;
    }
}

static uint64_t mp_load_u(zc_dtype t, const uint8_t *p) {
    uint32_t v32;
    uint64_t v64;
    switch (t) {
    case ZC_UINT8: return p[0];
    case ZC_UINT32: memcpy(&v32, p, 4); return v32;
    default: memcpy(&v64, p, 8); return v64;
    }
}

/* ---- one collective call with its buffers, and its reference ------------------------------ */

typedef enum mp_kind {
    MP_ALLREDUCE, MP_REDUCE, MP_BCAST, MP_RSCAT, MP_AGATHER, MP_GATHER, MP_SCATTER,
    MP_ALLTOALL, MP_RING, MP_BARRIER, MP_KIND_COUNT
} mp_kind;

static const char *const mp_kind_names[MP_KIND_COUNT] = {
    "allreduce", "reduce",  "broadcast", "reduce_scatter", "allgather",
    "gather",    "scatter", "alltoall",  "send/recv ring", "barrier"};

typedef struct mp_op {
    mp_kind kind;
    zc_dtype dt;
    zc_op op;
    size_t count;        /* the count argument (per block where the call has blocks) */
    uint32_t root;
    bool in_place;       /* docs/api.md's in-place layout (where this rank has one) */
    bool spare;          /* pass a sentinel buffer instead of NULL for arguments unused here */
    uint32_t n, me;      /* communicator size, this rank */
    const uint32_t *who; /* input identity of each communicator rank; NULL: the rank itself */
    uint64_t uid;        /* names the inputs of this call */
    size_t es;
    uint8_t *sbuf, *rbuf; /* owned buffers (NULL when this rank passes none) */
    size_t sbytes, rbytes;
    uint8_t *xs, *xr;    /* expected images of sbuf and rbuf after the call */
    const void *send;
    void *recv;
    zc_mem *mem[2];      /* sbuf's and rbuf's registrations (MP_REGISTER), or NULL */
    int nreq;            /* 0 (no call), 1, or 2 for the ring's send and recv */
    zc_req req[2];
    zc_plan plan[2];
} mp_op;

static uint32_t mp_who(const mp_op *o, uint32_t r) { return o->who ? o->who[r] : r; }

static void mp_op_name(const mp_op *o, char *buf, size_t cap) {
    snprintf(buf, cap, "%s(count %zu, %s, %s, root %u%s%s; uid %llu; rank %u of %u)",
             mp_kind_names[o->kind], o->count, zc_dtype_name(o->dt), zc_op_name(o->op),
             o->root, o->in_place ? ", in place" : "", o->spare ? ", spare buffers" : "",
             (unsigned long long)o->uid, o->me, o->n);
}

/* Rank r's input elements [idx, idx+c) of this call into dst. */
static void mp_gen(const mp_op *o, uint32_t r, uint64_t idx, size_t c, uint8_t *dst) {
    uint32_t w = mp_who(o, r);
    for (size_t i = 0; i < c; i++) mp_elem(o->dt, mp_hash(o->uid, w, idx + i), dst + i * o->es);
}

static void mp_sentinel(uint8_t *p, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)(0x5au + i * 131u);
}

/* Rank k's element idx as the accumulator (fp64 for fp64, else fp32 held in a double). */
static double mp_ref_value(const mp_op *o, uint32_t k, uint64_t idx) {
    uint8_t e[8];
    mp_elem(o->dt, mp_hash(o->uid, mp_who(o, k), idx), e);
    if (o->dt != ZC_FLOAT64) return (double)mp_dec(o->dt, e);
    double x;
    memcpy(&x, e, 8);
    return x;
}

/* a (+) b in the accumulator: fp64 for fp64, each operation rounded to float otherwise. */
static double mp_ref_op(const mp_op *o, double a, double b) {
    zc_op op = o->op;
    if (o->dt == ZC_FLOAT64) {
        if (op == ZC_SUM || op == ZC_AVG) return a + b;
        if (op == ZC_PROD) return a * b;
        return op == ZC_MIN ? fmin(a, b) : fmax(a, b);
    }
    float x = (float)a, y = (float)b;
    if (op == ZC_SUM || op == ZC_AVG) return (double)(x + y);
    if (op == ZC_PROD) return (double)(x * y);
    return (double)(op == ZC_MIN ? fminf(x, y) : fmaxf(x, y));
}

/* The rank tree over leaves l0..l1-1 (docs/api.md): with p the largest power of two <= n and
 * e = n - p, leaf i is rank 2i (+) rank 2i+1 for i < e and rank i+e after; a range splits in
 * halves, the lower on the left. */
static double mp_ref_tree(const mp_op *o, uint32_t e, uint32_t l0, uint32_t l1, uint64_t idx) {
    if (l1 - l0 > 1u) {
        uint32_t mid = l0 + (l1 - l0) / 2u;
        return mp_ref_op(o, mp_ref_tree(o, e, l0, mid, idx), mp_ref_tree(o, e, mid, l1, idx));
    }
    if (l0 < e)
        return mp_ref_op(o, mp_ref_value(o, 2u * l0, idx), mp_ref_value(o, 2u * l0 + 1u, idx));
    return mp_ref_value(o, l0 + e, idx);
}

/* The reference reduction of element idx: floating types in the rank tree, narrow floats
 * decoded to float, combined in float and encoded once; fp64 in double; integers (whose
 * results do not depend on the order) wrap through unsigned arithmetic; AVG is the sum over n
 * (integers: the exact sum truncated toward zero); MIN/MAX are fmin/fmax. */
static void mp_ref_elem(const mp_op *o, uint64_t idx, uint8_t *dst) {
    uint8_t e[8];
    zc_dtype t = o->dt;
    zc_op op = o->op;
    uint32_t n = o->n;
    if (t >= ZC_FLOAT16) {
        uint32_t p = 1;
        while (p * 2u <= n) p *= 2u;
        double acc = mp_ref_tree(o, n - p, 0, p, idx);
        if (t == ZC_FLOAT64) {
            if (op == ZC_AVG) acc = acc / (double)n;
            if (acc != acc) acc = mp_qnan_d();
            memcpy(dst, &acc, 8);
        } else {
            float facc = (float)acc;
            if (op == ZC_AVG) facc = facc / (float)n;
            mp_enc(t, facc, dst);
        }
        return;
    }
    uint64_t wrap = 0, out = 0;
    int64_t smin = 0, smax = 0;
    uint64_t umin = 0, umax = 0;
    __int128 ssum = 0;
    unsigned __int128 usum = 0;
    bool sgn = mp_signed(t);
    for (uint32_t k = 0; k < n; k++) {
        mp_elem(t, mp_hash(o->uid, mp_who(o, k), idx), e);
        int64_t s = sgn ? mp_load_s(t, e) : 0;
        uint64_t u = sgn ? (uint64_t)s : mp_load_u(t, e);
        if (k == 0) {
            wrap = u;
            smin = smax = s;
            umin = umax = u;
        } else {
            wrap = op == ZC_PROD ? wrap * u : wrap + u;
            smin = s < smin ? s : smin;
            smax = s > smax ? s : smax;
            umin = u < umin ? u : umin;
            umax = u > umax ? u : umax;
        }
        ssum += s;
        usum += u;
    }
    switch (op) {
    case ZC_SUM:
    case ZC_PROD: out = wrap; break;
    case ZC_MIN: out = sgn ? (uint64_t)smin : umin; break;
    case ZC_MAX: out = sgn ? (uint64_t)smax : umax; break;
    default: out = sgn ? (uint64_t)(int64_t)(ssum / (__int128)n)
                       : (uint64_t)(usum / (unsigned __int128)n); break;
    }
    memcpy(dst, &out, o->es); /* little-endian: the low bytes are the element */
}

static void mp_ref(const mp_op *o, uint64_t idx, size_t c, uint8_t *dst) {
    for (size_t i = 0; i < c; i++) mp_ref_elem(o, idx + i, dst + i * o->es);
}

/* Decides the buffers this rank passes (sizes, NULLs, in-place positions) and allocates them. */
static void mp_op_alloc(mp_op *o) {
    size_t c = o->count, n = o->n, es = zc_dtype_bytes(o->dt);
    bool root = o->me == o->root, ip = o->in_place, sp = o->spare;
    bool has_s = false, has_r = false;
    o->es = es;
    o->sbytes = o->rbytes = 0;
    switch (o->kind) {
    case MP_ALLREDUCE:
    case MP_REDUCE:
    case MP_BCAST:
        has_r = ip || o->kind != MP_REDUCE || root || sp;
        has_s = !ip && (o->kind != MP_BCAST || root || sp);
        o->rbytes = o->sbytes = c * es;
        break;
    case MP_RSCAT:
        has_s = true, has_r = !ip;
        o->sbytes = n * c * es, o->rbytes = c * es;
        break;
    case MP_AGATHER:
    case MP_GATHER:
        has_r = ip || o->kind == MP_AGATHER || root || sp;
        has_s = !ip;
        o->sbytes = c * es, o->rbytes = n * c * es;
        break;
    case MP_SCATTER:
        if (!root) o->in_place = ip = false;
        has_s = root || sp, has_r = !(root && ip);
        o->sbytes = n * c * es, o->rbytes = c * es;
        break;
    case MP_ALLTOALL:
        o->in_place = false;
        has_s = has_r = true;
        o->sbytes = o->rbytes = n * c * es;
        break;
    case MP_RING:
        o->in_place = false;
        has_s = has_r = true;
        o->sbytes = o->rbytes = c * es;
        break;
    default: o->in_place = false; break;
    }
    if (!has_s) o->sbytes = 0;
    if (!has_r) o->rbytes = 0;
    o->sbuf = has_s ? malloc(o->sbytes ? o->sbytes : 1) : NULL;
    o->rbuf = has_r ? malloc(o->rbytes ? o->rbytes : 1) : NULL;
    o->xs = o->xr = NULL;
    o->send = o->sbuf;
    o->recv = o->rbuf;
    if (!o->in_place) return;
    switch (o->kind) {
    case MP_RSCAT: o->recv = o->sbuf + o->me * c * es; break;
    case MP_AGATHER:
    case MP_GATHER: o->send = o->rbuf + o->me * c * es; break;
    case MP_SCATTER: o->recv = o->sbuf + o->root * c * es; break;
    default: o->send = o->rbuf; break; /* allreduce, reduce, broadcast: send == recv */
    }
}

static void mp_op_free(mp_op *o) {
    free(o->sbuf);
    free(o->rbuf);
    free(o->xs);
    free(o->xr);
    o->sbuf = o->rbuf = o->xs = o->xr = NULL;
}

/* Writes the buffers' contents before the call into sb/rb (the real buffers, or images). */
static void mp_op_fill(const mp_op *o, uint8_t *sb, uint8_t *rb) {
    size_t c = o->count, es = o->es, n = o->n;
    uint32_t me = o->me;
    bool root = me == o->root;
    if (sb) mp_sentinel(sb, o->sbytes);
    if (rb) mp_sentinel(rb, o->rbytes);
    switch (o->kind) {
    case MP_ALLREDUCE:
    case MP_REDUCE:
        if (o->in_place) mp_gen(o, me, 0, c, rb);
        else mp_gen(o, me, 0, c, sb);
        break;
    case MP_BCAST:
        if (root) mp_gen(o, me, 0, c, o->in_place ? rb : sb);
        break;
    case MP_RSCAT:
    case MP_ALLTOALL: mp_gen(o, me, 0, n * c, sb); break;
    case MP_AGATHER:
    case MP_GATHER:
        if (o->in_place) mp_gen(o, me, 0, c, rb + me * c * es);
        else mp_gen(o, me, 0, c, sb);
        break;
    case MP_SCATTER:
        if (root) mp_gen(o, me, 0, n * c, sb);
        break;
    case MP_RING: mp_gen(o, me, 0, c, sb); break;
    default: break;
    }
}

/* Expected images of sbuf/rbuf after the call: the fill, then the call's outputs. */
static void mp_op_expect(mp_op *o) {
    size_t c = o->count, es = o->es, n = o->n;
    uint32_t me = o->me;
    bool root = me == o->root;
    o->xs = o->sbuf ? malloc(o->sbytes ? o->sbytes : 1) : NULL;
    o->xr = o->rbuf ? malloc(o->rbytes ? o->rbytes : 1) : NULL;
    uint8_t *xs = o->xs, *xr = o->xr;
    mp_op_fill(o, xs, xr);
    switch (o->kind) {
    case MP_ALLREDUCE: mp_ref(o, 0, c, xr); break;
    case MP_REDUCE:
        if (root) mp_ref(o, 0, c, xr);
        break;
    case MP_BCAST: mp_gen(o, o->root, 0, c, xr); break;
    case MP_RSCAT: mp_ref(o, me * c, c, o->in_place ? xs + me * c * es : xr); break;
    case MP_AGATHER:
    case MP_GATHER:
        if (o->kind == MP_AGATHER || root)
            for (uint32_t p = 0; p < n; p++) mp_gen(o, p, 0, c, xr + p * c * es);
        break;
    case MP_SCATTER:
        if (!(root && o->in_place)) mp_gen(o, o->root, me * c, c, xr);
        break;
    case MP_ALLTOALL:
        for (uint32_t p = 0; p < n; p++) mp_gen(o, p, me * c, c, xr + p * c * es);
        break;
    case MP_RING: mp_gen(o, (me + o->n - 1) % o->n, 0, c, xr); break;
    default: break;
    }
}

static bool mp_cmp(const mp_op *o, const char *what, const uint8_t *got, const uint8_t *exp,
                   size_t from, size_t to, char *why, size_t cap) {
    if (to <= from || memcmp(got + from, exp + from, to - from) == 0) return true;
    size_t i = from;
    while (got[i] == exp[i]) i++;
    size_t el = i / o->es, bad = 0;
    for (size_t k = from; k < to; k += o->es)
        bad += memcmp(got + k, exp + k, o->es) != 0;
    char g[24] = "", x[24] = "";
    for (size_t b = 0; b < o->es; b++) {
        snprintf(g + 2 * b, 3, "%02x", got[el * o->es + o->es - 1 - b]);
        snprintf(x + 2 * b, 3, "%02x", exp[el * o->es + o->es - 1 - b]);
    }
    char name[256];
    mp_op_name(o, name, sizeof name);
    snprintf(why, cap, "%s: %s element %zu (block %zu of %zu elements) is 0x%s, expected 0x%s "
             "(%zu of %zu elements differ)", name, what, el, o->count ? el / o->count : 0,
             o->count, g, x, bad, (to - from) / o->es);
    return false;
}

/* Compares the buffers with the expected images; false with a sentence on a difference. */
static bool mp_op_compare(const mp_op *o, char *why, size_t cap) {
    size_t from = 0, to = o->sbytes;
    if (o->kind == MP_RSCAT && o->in_place) { /* only the result block is specified */
        from = o->me * o->count * o->es;
        to = from + o->count * o->es;
    }
    if (o->sbuf && !mp_cmp(o, "send buffer", o->sbuf, o->xs, from, to, why, cap)) return false;
    if (o->rbuf && !mp_cmp(o, "recv buffer", o->rbuf, o->xr, 0, o->rbytes, why, cap))
        return false;
    return true;
}

static void mp_op_check(const mp_ctx *m, mp_op *o, const char *where) {
    char why[1024];
    mp_op_expect(o);
    bool ok = mp_op_compare(o, why, sizeof why);
    MP_CHECK(m, ok, "%s: %s", where, why);
    free(o->xs);
    free(o->xr);
    o->xs = o->xr = NULL;
}

/* Issues the call (two requests for the ring: send right, then receive from the left). */
static zc_status mp_op_issue(zc_comm *comm, mp_op *o) {
    const void *s = o->send;
    void *r = o->recv;
    size_t c = o->count;
    zc_dtype t = o->dt;
    o->nreq = 1;
    switch (o->kind) {
    case MP_ALLREDUCE: return zc_allreduce(comm, s, r, c, t, o->op, &o->req[0]);
    case MP_REDUCE: return zc_reduce(comm, s, r, c, t, o->op, o->root, &o->req[0]);
    case MP_BCAST: return zc_broadcast(comm, s, r, c, t, o->root, &o->req[0]);
    case MP_RSCAT: return zc_reduce_scatter(comm, s, r, c, t, o->op, &o->req[0]);
    case MP_AGATHER: return zc_allgather(comm, s, r, c, t, &o->req[0]);
    case MP_GATHER: return zc_gather(comm, s, r, c, t, o->root, &o->req[0]);
    case MP_SCATTER: return zc_scatter(comm, s, r, c, t, o->root, &o->req[0]);
    case MP_ALLTOALL: return zc_alltoall(comm, s, r, c, t, &o->req[0]);
    case MP_RING: {
        zc_status st = zc_send(comm, s, c, t, (o->me + 1) % o->n, &o->req[0]);
        if (st != ZC_OK) return st;
        o->nreq = 2;
        return zc_recv(comm, r, c, t, (o->me + o->n - 1) % o->n, &o->req[1]);
    }
    default: return zc_barrier(comm, &o->req[0]);
    }
}

/* The same call as a persistent plan (two plans for the ring). */
static zc_status mp_op_plan(zc_comm *comm, mp_op *o) {
    const void *s = o->send;
    void *r = o->recv;
    size_t c = o->count;
    zc_dtype t = o->dt;
    o->nreq = 1;
    switch (o->kind) {
    case MP_ALLREDUCE: return zc_allreduce_init(comm, s, r, c, t, o->op, &o->plan[0]);
    case MP_REDUCE: return zc_reduce_init(comm, s, r, c, t, o->op, o->root, &o->plan[0]);
    case MP_BCAST: return zc_broadcast_init(comm, s, r, c, t, o->root, &o->plan[0]);
    case MP_RSCAT: return zc_reduce_scatter_init(comm, s, r, c, t, o->op, &o->plan[0]);
    case MP_AGATHER: return zc_allgather_init(comm, s, r, c, t, &o->plan[0]);
    case MP_GATHER: return zc_gather_init(comm, s, r, c, t, o->root, &o->plan[0]);
    case MP_SCATTER: return zc_scatter_init(comm, s, r, c, t, o->root, &o->plan[0]);
    case MP_ALLTOALL: return zc_alltoall_init(comm, s, r, c, t, &o->plan[0]);
    case MP_RING: {
        zc_status st = zc_send_init(comm, s, c, t, (o->me + 1) % o->n, &o->plan[0]);
        if (st != ZC_OK) return st;
        o->nreq = 2;
        return zc_recv_init(comm, r, c, t, (o->me + o->n - 1) % o->n, &o->plan[1]);
    }
    default: return zc_barrier_init(comm, &o->plan[0]);
    }
}

/* A request of one op: (op, which of its requests). */
typedef struct mp_pending {
    mp_op *o;
    int k;
} mp_pending;

static void mp_shuffle(mp_pending *p, size_t n, zt_rng *g) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)zt_rng_below(g, i);
        mp_pending t = p[i - 1];
        p[i - 1] = p[j];
        p[j] = t;
    }
}

/* Waits for every request of ops[0..k) in an order shuffled by g (local to this rank). */
static void mp_wait_ops(const mp_ctx *m, zc_comm *comm, mp_op *ops, size_t k, zt_rng *g,
                        const char *where) {
    mp_pending p[32];
    size_t np = 0;
    for (size_t j = 0; j < k; j++)
        for (int q = 0; q < ops[j].nreq; q++) p[np++] = (mp_pending){&ops[j], q};
    mp_shuffle(p, np, g);
    for (size_t i = 0; i < np; i++) {
        zc_status st = zc_wait(comm, &p[i].o->req[p[i].k]);
        if (st != ZC_OK) {
            char name[256];
            mp_op_name(p[i].o, name, sizeof name);
            mp_die(m, __FILE__, __LINE__, "%s: zc_wait on %s (request %d) returned %s", where,
                   name, p[i].k, zc_status_name(st));
        }
    }
}

/* Issues ops[0..k) on m's communicator in order, then waits for them (mp_wait_ops); where
 * names the batch in a failure. */
static void mp_issue_and_wait(const mp_ctx *m, mp_op *ops, size_t k, zt_rng *g,
                              const char *where) {
    for (size_t j = 0; j < k; j++) {
        zc_status st = mp_op_issue(m->comm, &ops[j]);
        if (st != ZC_OK) {
            char name[256];
            mp_op_name(&ops[j], name, sizeof name);
            mp_die(m, __FILE__, __LINE__, "%s: issuing %s returned %s", where, name,
                   zc_status_name(st));
        }
    }
    mp_wait_ops(m, m->comm, ops, k, g, where);
}

/* ---- 1. the sweep -------------------------------------------------------------------------- */

/* Ring geometry and algorithm thresholds per rank count, so that the runs together cover
 * defaults, tiny slots with two credits (every message chunked and flow-controlled), and
 * thresholds at 0 (every call of more than a few elements takes the large-message path); 5
 * ranks take the log-depth algorithms. */
static void mp_sweep_config(zc_config *cfg, uint32_t n) {
    switch (n) {
    case 2: cfg->slot_bytes = 1024, cfg->slots = 4; break;
    case 3:
        cfg->slot_bytes = 256, cfg->slots = 2;
        cfg->allreduce_oneshot_max_bytes = cfg->reduce_direct_max_bytes = 0;
        cfg->bcast_tree_max_bytes = 0;
        break;
    case 5:
        cfg->slot_bytes = 1024, cfg->slots = 8;
        cfg->allreduce_oneshot_max_bytes = cfg->reduce_direct_max_bytes = 2048;
        cfg->bcast_tree_max_bytes = 2048;
        cfg->log_min_ranks = 2; /* recursive doubling up to 2 KiB, Bruck's all_gather */
        break;
    case 8: cfg->slot_bytes = 4096, cfg->slots = 2; break;
    default: break; /* 1 and 4: the defaults (64 KiB slots, 8 of them) */
    }
    uint32_t sb = mp_env_u32("MP_SLOT_BYTES", 0);
    if (sb) cfg->slot_bytes = sb;
}

/* MP_MAX_COUNT (the soak's 1M elements): the largest draws reach it instead of 128 KiB. */
static size_t mp_draw_count(zt_rng *g, uint32_t n, size_t es, uint32_t slot_bytes) {
    uint64_t r = zt_rng_below(g, 100);
    size_t per_slot = slot_bytes / es, big = 65536 / es, most = mp_env_u32("MP_MAX_COUNT", 0);
    if (r >= 88 && most > big + 1) return big + 1 + (size_t)zt_rng_below(g, most - big - 1);
    if (r < 6) return 0;
    if (r < 14) return 1;
    if (r < 48) return 2 + (size_t)zt_rng_below(g, 60);
    if (r < 72) /* not divisible by n */
        return n * (1 + (size_t)zt_rng_below(g, 200)) + 1 + (size_t)zt_rng_below(g, n > 1 ? n - 1 : 1);
    if (r < 88) /* around a multiple of the slot payload */
        return per_slot * (1 + (size_t)zt_rng_below(g, 3)) + (size_t)zt_rng_below(g, 3) - 1;
    return big + 1 + (size_t)zt_rng_below(g, big); /* more than 64 KiB per block */
}

static void mp_draw_op(zt_rng *g, const mp_ctx *m, mp_op *o) {
    memset(o, 0, sizeof *o);
    o->kind = (mp_kind)zt_rng_below(g, MP_KIND_COUNT);
    if (o->kind == MP_RING && m->n == 1) o->kind = MP_BARRIER; /* no peer to send to */
    if (mp_env_u32("MP_ALLREDUCE_ONLY", 0)) o->kind = MP_ALLREDUCE; /* the draws stay the same */
    o->dt = (zc_dtype)zt_rng_below(g, ZC_DTYPE_COUNT_);
    o->op = (zc_op)zt_rng_below(g, ZC_OP_COUNT_);
    o->count = mp_draw_count(g, m->n, zc_dtype_bytes(o->dt), m->cfg.slot_bytes);
    o->root = (uint32_t)zt_rng_below(g, m->n);
    o->in_place = zt_rng_below(g, 3) == 0;
    o->spare = zt_rng_below(g, 2) == 0;
    o->n = m->n;
    o->me = m->rank;
}

/* MP_REGISTER=1: registers (zc_mem_register, ZC_MEM_HOST) each buffer of a call with
 * probability 3/4, this rank's own draw, so that streams go in place (transport_ib), from
 * registered sources or through the staging, and through the slots where the receiver has no
 * registration; deregisters them after the call. */
static void mp_register(const mp_ctx *m, mp_op *o, zt_rng *g) {
    uint8_t *bufs[2] = {o->sbuf, o->rbuf};
    size_t bytes[2] = {o->sbytes, o->rbytes};
    for (int i = 0; i < 2; i++) {
        o->mem[i] = NULL;
        if (!bufs[i] || !bytes[i] || zt_rng_below(g, 4) == 0) continue;
        MP_ST(m, zc_mem_register(m->comm, bufs[i], bytes[i], ZC_MEM_HOST, &o->mem[i]), ZC_OK);
    }
}

static void mp_deregister(const mp_ctx *m, mp_op *o) {
    for (int i = 0; i < 2; i++)
        if (o->mem[i]) MP_ST(m, zc_mem_deregister(m->comm, o->mem[i]), ZC_OK);
}

/* ---- the soak's resource samples ---------------------------------------------------------- */

typedef struct mp_usage {
    uint64_t rss_bytes; /* resident set */
    uint32_t fds;       /* open descriptors */
} mp_usage;

static mp_usage mp_sample_usage(void) {
    mp_usage u = {0, 0};
    unsigned long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu %lu", &pages, &rss) == 2) u.rss_bytes = (uint64_t)rss * 4096u;
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) u.fds += e->d_name[0] != '.';
        closedir(d);
        u.fds--; /* the descriptor of the listing itself */
    }
    return u;
}

/* MP_SOAK=1: after a warm-up (a tenth of the budget) the resident set may not grow by more
 * than 16 MiB and the descriptor count not at all; samples once a second, between batches. */
typedef struct mp_soak {
    bool on;
    uint64_t warm_ns, next_ns;
    mp_usage warm, last;
    uint32_t samples;
} mp_soak;

static void mp_soak_sample(mp_soak *k, uint64_t now, uint64_t t0) {
    if (!k->on || now < k->next_ns) return;
    k->next_ns = now + 1000 * MP_MS;
    k->last = mp_sample_usage();
    if (now - t0 < k->warm_ns || !k->samples++) k->warm = k->last;
}

static void mp_soak_check(const mp_ctx *m, const mp_soak *k) {
    if (!k->on) return;
    printf("mp-info: soak rank %u: %u samples after warm-up: resident %.1f -> %.1f MiB, "
           "descriptors %u -> %u\n", m->rank, k->samples, (double)k->warm.rss_bytes / 1048576.0,
           (double)k->last.rss_bytes / 1048576.0, k->warm.fds, k->last.fds);
    MP_CHECK(m, k->samples >= 2, "the soak ran too short to sample (%u samples)", k->samples);
    MP_CHECK(m, k->last.rss_bytes <= k->warm.rss_bytes + 16u * 1048576u,
             "the resident set grew from %llu to %llu bytes",
             (unsigned long long)k->warm.rss_bytes, (unsigned long long)k->last.rss_bytes);
    MP_CHECK(m, k->last.fds == k->warm.fds, "open descriptors went from %u to %u",
             k->warm.fds, k->last.fds);
}

int mp_rank_sweep(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_sweep");
    mp_sweep_config(&m.cfg, m.n);
    bool reg = mp_env_u32("MP_REGISTER", 0) != 0;
    if (reg) m.cfg.max_mems = 16; /* 8 calls of 2 buffers at most */
    mp_init(&m);
    static const uint32_t default_batches[9] = {0, 800, 600, 150, 160, 250, 0, 0, 120};
    uint32_t batches = mp_env_u32("MP_BATCHES", m.n <= 8 ? default_batches[m.n] : 40);
    if (!batches) batches = 60;
    zt_rng g = {mp_seed ^ (0x5eedull << 32) ^ m.n};                /* same on every rank */
    zt_rng local = {mp_seed ^ 0x10ca1ull ^ ((uint64_t)m.rank << 40)}; /* this rank's waits */
    mp_op ops[8];
    uint64_t calls = 0, bytes = 0, t0 = mp_now_ns();
    uint64_t per_kind[MP_KIND_COUNT] = {0};
    /* A time budget keeps slow (sanitizer, loaded) runs inside the limits; rank 0 decides and
     * broadcasts it, so every rank runs the same batches. */
    uint64_t budget_ns = mp_env_u32("MP_BUDGET_MS", 20000) * MP_MS;
    mp_soak soak = {mp_env_u32("MP_SOAK", 0) != 0, budget_ns / 10u, 0, {0, 0}, {0, 0}, 0};
    /* Buffers of 64 KiB and more straight from and back to the OS, so that the samples (taken
     * between batches, when no call's buffer is live) see zcoll's memory, not malloc's cache. */
    if (soak.on) (void)(mallopt(M_MMAP_THRESHOLD, 65536) && mallopt(M_TRIM_THRESHOLD, 65536));
    uint32_t b = 0;
    for (; b < batches; b++) {
        mp_soak_sample(&soak, mp_now_ns(), t0);
        int32_t go = mp_now_ns() - t0 < budget_ns;
        zc_req gr;
        MP_ST(&m, zc_broadcast(m.comm, &go, &go, 1, ZC_INT32, 0, &gr), ZC_OK);
        MP_ST(&m, zc_wait(m.comm, &gr), ZC_OK);
        if (!go) break;
        size_t k = 1 + (size_t)zt_rng_below(&g, 8);
        for (size_t j = 0; j < k; j++) {
            mp_draw_op(&g, &m, &ops[j]);
            ops[j].uid = mp_mix(mp_seed ^ ((uint64_t)b << 20) ^ (j << 4) ^ m.n);
            mp_op_alloc(&ops[j]);
            mp_op_fill(&ops[j], ops[j].sbuf, ops[j].rbuf);
            if (reg) mp_register(&m, &ops[j], &local);
        }
        char where[64];
        snprintf(where, sizeof where, "batch %u of %zu calls", b, k);
        mp_issue_and_wait(&m, ops, k, &local, where);
        for (size_t j = 0; j < k; j++) {
            mp_op_check(&m, &ops[j], where);
            calls++;
            per_kind[ops[j].kind]++;
            bytes += ops[j].sbytes > ops[j].rbytes ? ops[j].sbytes : ops[j].rbytes;
            if (reg) mp_deregister(&m, &ops[j]);
            mp_op_free(&ops[j]);
        }
    }
    mp_barrier(&m);
    /* Bytes the wire put straight into the ranks' buffers, all ranks together. */
    uint64_t placed = m.comm->placed_bytes, placed_all = 0;
    zc_req pr;
    MP_ST(&m, zc_allreduce(m.comm, &placed, &placed_all, 1, ZC_UINT64, ZC_SUM, &pr), ZC_OK);
    MP_ST(&m, zc_wait(m.comm, &pr), ZC_OK);
    if (m.rank == 0) {
        printf("mp-info: sweep n=%u slot_bytes=%u slots=%u: %u of %u batches, %llu calls (", m.n,
               m.cfg.slot_bytes, m.cfg.slots, b, batches, (unsigned long long)calls);
        for (int k = 0; k < MP_KIND_COUNT; k++)
            printf("%s%s %llu", k ? ", " : "", mp_kind_names[k], (unsigned long long)per_kind[k]);
        printf("), %.1f MB per rank, %.1f s", (double)bytes / 1e6,
               mp_ms(mp_now_ns() - t0) / 1000.0);
        if (reg) printf("; buffers registered, %.1f MB put in place", (double)placed_all / 1e6);
        printf("\n");
    }
    /* MP_EXPECT_PLACED=1 (a wire with put): registration must have taken some streams in place;
     * without put nothing may claim to be. */
    mp_soak_check(&m, &soak);
    if (mp_env_u32("MP_EXPECT_PLACED", 0))
        MP_CHECK(&m, placed_all > 0, "buffers were registered but no stream was put in place");
    else if (!reg || m.comm->put_min == 0)
        MP_CHECK(&m, placed_all == 0, "%llu bytes put in place without registration or put",
                 (unsigned long long)placed_all);
    mp_fini(&m);
    return 0;
}

/* ---- 1a. messages of flagged lines ---------------------------------------------------------- */

/* Every collective (and send/recv around the ring, and a barrier) at sizes on both sides of a
 * flagged line's 56 data bytes up to 4 KiB per message (MP_LINES_MAX=4096, the test build's
 * override, with the default 64 KiB slots: all of them flagged lines; else one line), the
 * dtypes and ops in turn, in place and not, rooted at every rank, one call at a time, against
 * the reference. */
int mp_rank_lines(void) {
    static const size_t sizes[] = {9, 24, 56, 57, 200, 1000, 2048, 4096};
    mp_ctx m;
    mp_config(&m, "mp_rank_lines");
    zc__test_lines_max = mp_env_u32("MP_LINES_MAX", 0);
    mp_init(&m);
    zt_rng local = {mp_seed ^ 0x11e5ull ^ ((uint64_t)m.rank << 40)};
    uint32_t i = 0, calls = 0;
    for (int k = 0; k < MP_KIND_COUNT; k++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            bool rooted = k == MP_REDUCE || k == MP_BCAST || k == MP_GATHER || k == MP_SCATTER;
            for (uint32_t root = 0; root < (rooted ? m.n : 1u); root++, i++) {
                mp_op o;
                memset(&o, 0, sizeof o);
                o.kind = (mp_kind)k;
                o.dt = (zc_dtype)(i % ZC_DTYPE_COUNT_);
                o.op = (zc_op)(i % ZC_OP_COUNT_);
                o.es = zc_dtype_bytes(o.dt);
                o.count = (sizes[si] + zc_dtype_bytes(o.dt) - 1u) / zc_dtype_bytes(o.dt);
                o.root = rooted ? root : i % m.n;
                o.in_place = (i & 1) != 0;
                o.spare = (i & 2) != 0;
                o.n = m.n, o.me = m.rank;
                o.uid = mp_mix(mp_seed ^ ((uint64_t)i << 20) ^ m.n);
                mp_op_alloc(&o);
                mp_op_fill(&o, o.sbuf, o.rbuf);
                char where[64];
                snprintf(where, sizeof where, "flagged-line call %u", i);
                MP_ST(&m, mp_op_issue(m.comm, &o), ZC_OK);
                mp_wait_ops(&m, m.comm, &o, 1, &local, where);
                mp_op_check(&m, &o, where);
                mp_op_free(&o);
                calls++;
            }
        }
    if (m.rank == 0) printf("mp-info: %u flagged-line calls on %u ranks match\n", calls, m.n);
    mp_fini(&m);
    return 0;
}

/* ---- 1b. one large allreduce --------------------------------------------------------------- */

int mp_rank_allreduce_big(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_allreduce_big");
    mp_init(&m);
    uint32_t mib = mp_env_u32("MP_MIB", 64);
    mp_op o = {.kind = MP_ALLREDUCE, .dt = ZC_FLOAT32, .op = ZC_SUM, .n = m.n, .me = m.rank};
    o.count = (size_t)mib << 18; /* float32 elements in mib MiB */
    o.uid = mp_mix(mp_seed ^ 0xb16ull);
    mp_op_alloc(&o);
    mp_op_fill(&o, o.sbuf, o.rbuf);
    mp_barrier(&m);
    uint64_t t0 = mp_now_ns();
    MP_ST(&m, mp_op_issue(m.comm, &o), ZC_OK);
    MP_ST(&m, zc_wait(m.comm, &o.req[0]), ZC_OK);
    uint64_t dt = mp_now_ns() - t0;
    mp_op_check(&m, &o, "large allreduce");
    if (m.rank == 0)
        printf("mp-info: allreduce float32 sum %u MiB on %u ranks: %.1f ms (%.2f GB/s algbw)\n",
               mib, m.n, mp_ms(dt), (double)(o.count * 4) / (double)dt);
    mp_op_free(&o);
    mp_fini(&m);
    return 0;
}

/* The rank tree on inputs where the linear order differs (zr_fill_order): all_reduce on both
 * sides of the one-shot threshold (one-shot, reduce-scatter + all-gather), reduce on both sides
 * of the direct one, reduce_scatter (the all_reduce in place); every rank checks its result against tests/ref.c. */
int mp_rank_order(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_order");
    mp_init(&m);
    uint64_t most = m.cfg.allreduce_oneshot_max_bytes > m.cfg.reduce_direct_max_bytes
                        ? m.cfg.allreduce_oneshot_max_bytes : m.cfg.reduce_direct_max_bytes;
    const size_t counts[] = {300, (size_t)(most / 4u) + 999u};
    const zr_coll colls[] = {ZR_ALLREDUCE, ZR_REDUCE, ZR_RS};
    uint8_t *send[ZR_MAX_RANKS];
    MP_CHECK(&m, m.n <= ZR_MAX_RANKS, "%u ranks", m.n);
    for (size_t ci = 0; ci < 2; ci++)
        for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++) {
            zr_case c = {colls[k], m.n, counts[ci], ZC_FLOAT32, ZC_SUM, m.n - 1u, k == 0};
            size_t bb = zr_buf_bytes(&c), bytes;
            for (uint32_t q = 0; q < m.n; q++) {
                send[q] = malloc(bb);
                MP_CHECK(&m, send[q] && zr_fill_order((float *)(void *)send[q],
                                                      m.n * c.count, m.n, q),
                         "order inputs for %u ranks", m.n);
            }
            uint8_t *recv = malloc(bb), *want = malloc(bb);
            MP_CHECK(&m, recv && want, "malloc");
            memset(recv, 0xA5, bb);
            memset(want, 0xA5, bb);
            zr_want(&c, send, m.rank, want);
            zc_req req;
            MP_ST(&m, zr_issue(&c, m.comm, m.rank, send[m.rank], recv, &req), ZC_OK);
            MP_ST(&m, zc_wait(m.comm, &req), ZC_OK);
            const uint8_t *got = zr_result(&c, m.rank, send[m.rank], recv, &bytes);
            size_t at = zr_first_diff(got, want, bytes);
            MP_CHECK(&m, at == bytes, "%s count %zu: byte %zu of %zu differs from the rank tree",
                     zr_coll_name(c.c), c.count, at, bytes);
            for (uint32_t q = 0; q < m.n; q++) free(send[q]);
            free(recv), free(want);
        }
    if (m.rank == 0) printf("mp-info: rank tree bits on %u ranks\n", m.n);
    mp_fini(&m);
    return 0;
}

/* ---- 2. persistent plans ------------------------------------------------------------------- */

int mp_rank_plans(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_plans");
    m.cfg.slot_bytes = 2048;
    mp_init(&m);
    /* One plan of every kind; sizes cross the algorithm thresholds and the slot size. */
    const struct {
        mp_kind kind;
        zc_dtype dt;
        zc_op op;
        size_t count;
        uint32_t root;
        bool in_place;
    } spec[] = {
        {MP_ALLREDUCE, ZC_FLOAT32, ZC_SUM, 1000, 0, false},
        {MP_ALLREDUCE, ZC_BFLOAT16, ZC_AVG, 20001, 0, true},
        {MP_REDUCE, ZC_INT32, ZC_PROD, 5003, 1, false},
        {MP_BCAST, ZC_FLOAT16, ZC_SUM, 40000, 2, false},
        {MP_RSCAT, ZC_FP8_E4M3, ZC_MAX, 333, 0, true},
        {MP_AGATHER, ZC_INT64, ZC_SUM, 257, 0, false},
        {MP_GATHER, ZC_UINT8, ZC_SUM, 100, 0, true},
        {MP_SCATTER, ZC_FLOAT64, ZC_SUM, 1000, 2, false},
        {MP_ALLTOALL, ZC_FP8_E5M2, ZC_SUM, 77, 0, false},
        {MP_RING, ZC_UINT32, ZC_SUM, 999, 0, false},
        {MP_BARRIER, ZC_UINT8, ZC_SUM, 0, 0, false},
    };
    enum { K = sizeof spec / sizeof spec[0] };
    mp_op ops[K];
    size_t k = 0;
    for (size_t i = 0; i < K; i++) {
        if (spec[i].kind == MP_RING && m.n == 1) continue;
        mp_op *o = &ops[k++];
        memset(o, 0, sizeof *o);
        o->kind = spec[i].kind, o->dt = spec[i].dt, o->op = spec[i].op;
        o->count = spec[i].count, o->root = spec[i].root % m.n, o->in_place = spec[i].in_place;
        o->n = m.n, o->me = m.rank;
        mp_op_alloc(o);
        MP_ST(&m, mp_op_plan(m.comm, o), ZC_OK);
    }
    zt_rng local = {mp_seed ^ 0x91a5ull ^ ((uint64_t)m.rank << 40)};
    for (uint32_t it = 0; it < 50; it++) {
        for (size_t j = 0; j < k; j++) {
            ops[j].uid = mp_mix(mp_seed ^ 0x71a9ull ^ ((uint64_t)it << 8) ^ j);
            mp_op_fill(&ops[j], ops[j].sbuf, ops[j].rbuf);
        }
        for (size_t j = 0; j < k; j++)
            for (int q = 0; q < ops[j].nreq; q++)
                MP_ST(&m, zc_start(m.comm, &ops[j].plan[q], &ops[j].req[q]), ZC_OK);
        char where[64];
        snprintf(where, sizeof where, "start %u of the plans", it);
        mp_wait_ops(&m, m.comm, ops, k, &local, where);
        for (size_t j = 0; j < k; j++) mp_op_check(&m, &ops[j], where);
    }
    /* A running plan can be neither released nor started again; once waited on, both work. */
    mp_op *a = &ops[0];
    a->uid = mp_mix(mp_seed ^ 0x1a57ull);
    mp_op_fill(a, a->sbuf, a->rbuf);
    MP_ST(&m, zc_start(m.comm, &a->plan[0], &a->req[0]), ZC_OK);
    zc_req again;
    MP_ST(&m, zc_plan_release(m.comm, &a->plan[0]), ZC_INVALID_STATE);
    MP_TEXT_HAS(&m, m.comm, "running");
    MP_ST(&m, zc_start(m.comm, &a->plan[0], &again), ZC_INVALID_STATE);
    MP_ST(&m, zc_wait(m.comm, &a->req[0]), ZC_OK);
    mp_op_check(&m, a, "the start after the refused release");
    for (size_t j = 0; j < k; j++)
        for (int q = 0; q < ops[j].nreq; q++)
            MP_ST(&m, zc_plan_release(m.comm, &ops[j].plan[q]), ZC_OK);
    MP_ST(&m, zc_plan_release(m.comm, &a->plan[0]), ZC_INVALID_ARG);
    MP_ST(&m, zc_start(m.comm, &a->plan[0], &again), ZC_INVALID_ARG);
    MP_TEXT_HAS(&m, m.comm, "plan");
    /* The slots came back: a new plan works. */
    a->uid = mp_mix(mp_seed ^ 0x2a57ull);
    mp_op_fill(a, a->sbuf, a->rbuf);
    MP_ST(&m, mp_op_plan(m.comm, a), ZC_OK);
    MP_ST(&m, zc_start(m.comm, &a->plan[0], &a->req[0]), ZC_OK);
    MP_ST(&m, zc_wait(m.comm, &a->req[0]), ZC_OK);
    mp_op_check(&m, a, "a plan made after releasing all");
    MP_ST(&m, zc_plan_release(m.comm, &a->plan[0]), ZC_OK);
    for (size_t j = 0; j < k; j++) mp_op_free(&ops[j]);
    if (m.rank == 0) printf("mp-info: %zu plans started 50 times each, all checked\n", k);
    mp_fini(&m);
    return 0;
}

/* ---- 3. split ------------------------------------------------------------------------------ */

typedef struct mp_any {
    zc_comm *comm;
    mp_op *o;
    int k;
    bool done;
} mp_any;

/* Waits for requests on several communicators, progressing all of them (a wait on one
 * communicator does not move another), in an order shuffled by g. */
static void mp_wait_any(const mp_ctx *m, mp_any *w, size_t nw, zc_comm *const *comms,
                        size_t ncomms, zt_rng *g) {
    uint64_t deadline = mp_now_ns() + 20000 * MP_MS;
    size_t left = nw;
    while (left) {
        size_t i = (size_t)zt_rng_below(g, nw);
        for (size_t s = 0; s < nw; s++, i = (i + 1) % nw) {
            if (w[i].done) continue;
            zc_status st = zc_test(w[i].comm, &w[i].o->req[w[i].k]);
            if (st == ZC_IN_PROGRESS) continue;
            char name[256];
            mp_op_name(w[i].o, name, sizeof name);
            MP_CHECK(m, st == ZC_OK, "zc_test on %s returned %s (%s)", name, zc_status_name(st),
                     zc_comm_error_text(w[i].comm));
            w[i].done = true;
            left--;
            break;
        }
        for (size_t c = 0; c < ncomms; c++) {
            zc_status st = zc_progress(comms[c]);
            MP_CHECK(m, st == ZC_OK, "zc_progress on communicator %zu returned %s (%s)", c,
                     zc_status_name(st), zc_comm_error_text(comms[c]));
        }
        MP_CHECK(m, mp_now_ns() < deadline, "requests still in flight after 20 s");
    }
}

static void mp_split_round(mp_ctx *m, zc_comm *parent, const uint32_t *parent_who,
                           zc_comm *child, const uint32_t *child_who, uint32_t round, zt_rng *g) {
    /* parent, child, parent, child: both communicators have two requests in flight. */
    mp_op ops[4];
    mp_any w[4];
    size_t nw = 0;
    static const zc_dtype dts[4] = {ZC_FLOAT32, ZC_INT64, ZC_BFLOAT16, ZC_UINT8};
    static const size_t counts[4] = {10, 7001, 33, 70000};
    for (uint32_t i = 0; i < 4; i++) {
        bool on_child = i % 2 == 1;
        if (on_child && !child) continue;
        zc_comm *c = on_child ? child : parent;
        mp_op *o = &ops[nw];
        memset(o, 0, sizeof *o);
        o->kind = MP_ALLREDUCE;
        o->dt = dts[(i + round) % 4];
        o->op = (zc_op)((i + round) % ZC_OP_COUNT_);
        o->count = counts[(i + 2 * round) % 4];
        o->in_place = (round + i) % 3 == 0;
        o->n = zc_comm_size(c), o->me = zc_comm_rank(c);
        o->who = on_child ? child_who : parent_who;
        o->uid = mp_mix(mp_seed ^ 0x5b1171ull ^ ((uint64_t)round << 8) ^ i);
        mp_op_alloc(o);
        mp_op_fill(o, o->sbuf, o->rbuf);
        MP_ST(m, mp_op_issue(c, o), ZC_OK);
        w[nw++] = (mp_any){c, o, 0, false};
    }
    zc_comm *comms[2] = {parent, child};
    mp_wait_any(m, w, nw, comms, child ? 2 : 1, g);
    for (size_t i = 0; i < nw; i++) {
        mp_op_check(m, &ops[i], w[i].comm == child ? "child allreduce" : "parent allreduce");
        mp_op_free(&ops[i]);
    }
}

int mp_rank_split(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_split");
    mp_init(&m);
    MP_CHECK(&m, m.n == 4, "this program wants 4 ranks, got %u", m.n);
    size_t bytes = zc_comm_arena_bytes(&m.cfg);
    void *arena1 = malloc(bytes), *arena2 = malloc(bytes);
    MP_CHECK(&m, arena1 && arena2, "no memory for the children's arenas");
    zt_rng g = {mp_seed ^ 0x5b17ull ^ ((uint64_t)m.rank << 40)};

    /* Split 1: color rank%2, key -rank: {0,2} ordered 2,0 and {1,3} ordered 3,1. */
    zc_comm *child = NULL;
    MP_ST(&m, zc_comm_split(m.comm, (int)(m.rank % 2), -(int)m.rank, arena1, bytes, &child),
          ZC_OK);
    MP_CHECK(&m, child != NULL, "split with color %u gave a NULL child", m.rank % 2);
    uint32_t want_rank = m.rank < 2 ? 1u : 0u;
    MP_CHECK(&m, zc_comm_size(child) == 2 && zc_comm_rank(child) == want_rank,
             "child is rank %u of %u, expected rank %u of 2 (key -rank orders the higher parent "
             "rank first)", zc_comm_rank(child), zc_comm_size(child), want_rank);
    /* One host: every rank's host number is 0, and a child keeps its parent's wire (shm; ib
     * when ZC_TRANSPORT=ib asked for it: only an auto parent's one-host child takes shm). */
    MP_CHECK(&m, zc_comm_node(m.comm) == 0 && zc_comm_node(child) == 0,
             "host numbers %u (parent) and %u (child) on one host, expected 0",
             zc_comm_node(m.comm), zc_comm_node(child));
    MP_CHECK(&m, strcmp(zc_comm_transport(child), zc_comm_transport(m.comm)) == 0,
             "the child runs on %s, its parent on %s", zc_comm_transport(child),
             zc_comm_transport(m.comm));
    uint32_t who1[2] = {m.rank % 2 + 2, m.rank % 2};
    for (uint32_t round = 0; round < 12; round++)
        mp_split_round(&m, m.comm, NULL, child, who1, round, &g);

    /* Split 2 while child 1 lives: rank 3 opts out with color -1 and gets NULL. */
    zc_comm *child2 = (zc_comm *)arena2; /* must be overwritten with NULL at rank 3 */
    MP_ST(&m, zc_comm_split(m.comm, m.rank == 3 ? -1 : 7, 0, arena2, bytes, &child2), ZC_OK);
    if (m.rank == 3) {
        MP_CHECK(&m, child2 == NULL, "color -1 gave a non-NULL child");
    } else {
        MP_CHECK(&m, child2 && zc_comm_size(child2) == 3 && zc_comm_rank(child2) == m.rank,
                 "second child is rank %u of %u, expected %u of 3 (equal keys keep parent order)",
                 child2 ? zc_comm_rank(child2) : 0, child2 ? zc_comm_size(child2) : 0, m.rank);
    }
    static const uint32_t who2[3] = {0, 1, 2};
    for (uint32_t round = 0; round < 8; round++) {
        mp_split_round(&m, m.comm, NULL, child2, who2, round, &g);
        mp_split_round(&m, child, who1, NULL, NULL, round + 100, &g); /* child 1 still works */
    }
    if (child2) MP_ST(&m, zc_comm_fini(child2), ZC_OK);
    MP_ST(&m, zc_comm_fini(child), ZC_OK);
    mp_barrier(&m); /* the parent outlives its children */
    if (m.rank == 0) printf("mp-info: split children and parent agree, requests interleaved\n");
    mp_fini(&m);
    free(arena1);
    free(arena2);
    return 0;
}

/* ---- 4. mismatches ------------------------------------------------------------------------- */

int mp_rank_mismatch(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_mismatch");
    m.cfg.timeout_ns = 5000 * MP_MS; /* not detecting shows as ZC_TIMED_OUT, not a hang */
    mp_init(&m);
    const char *cs = getenv("MP_CASE") ? getenv("MP_CASE") : "count";
    /* No warm-up call before the mismatching one: a rank that has not yet polled its last
     * good call to completion gets that one failed too when a faster peer's report of the
     * mismatch arrives first (every request in flight fails with the communicator). */
    int32_t one = (int32_t)m.rank + 1, sum = 0;
    zc_req r;
    float s[20] = {1}, d[20];
    /* "sequence" and this rank's own call; the test checks that some rank names both calls
     * (a rank that learns of the mismatch from a peer's report knows only its own). */
    const char *words[2] = {"sequence", NULL};
    bool odd = m.rank == 1;
    uint64_t t0 = mp_now_ns();
    zc_status st;
    if (strcmp(cs, "count") == 0) {
        st = zc_allreduce(m.comm, s, d, odd ? 20 : 10, ZC_FLOAT32, ZC_SUM, &r);
        words[1] = odd ? "count 20" : "count 10";
    } else if (strcmp(cs, "op") == 0) {
        st = zc_allreduce(m.comm, s, d, 10, ZC_FLOAT32, odd ? ZC_MAX : ZC_SUM, &r);
        words[1] = odd ? "max" : "sum";
    } else if (strcmp(cs, "dtype") == 0) {
        st = zc_allreduce(m.comm, s, d, 10, odd ? ZC_INT32 : ZC_FLOAT32, ZC_SUM, &r);
        words[1] = odd ? "int32" : "float32";
    } else {
        st = zc_broadcast(m.comm, s, d, 10, ZC_FLOAT32, m.rank == 1 ? 1 : 0, &r);
    }
    MP_ST(&m, st, ZC_OK);
    st = zc_wait(m.comm, &r);
    if (strcmp(cs, "root") == 0 && st == ZC_OK) {
        /* Each "root" only sends: the broadcast itself can finish; the next call must see the
         * stray message and fail on every rank. */
        MP_ST(&m, zc_barrier(m.comm, &r), ZC_OK);
        st = zc_wait(m.comm, &r);
    }
    uint64_t dt = mp_now_ns() - t0;
    printf("mp-info: rank %u case %s: %s after %.1f ms: %s\n", m.rank, cs, zc_status_name(st),
           mp_ms(dt), zc_comm_error_text(m.comm));
    MP_CHECK(&m, st == ZC_MISMATCH, "case %s: got %s, expected ZC_MISMATCH", cs,
             zc_status_name(st));
    for (int i = 0; i < 2; i++)
        if (words[i]) MP_TEXT_HAS(&m, m.comm, words[i]);
    MP_CHECK(&m, dt < 2000 * MP_MS, "detection took %.0f ms", mp_ms(dt));
    /* The communicator stays failed. */
    st = zc_allreduce(m.comm, &one, &sum, 1, ZC_INT32, ZC_SUM, &r);
    if (st == ZC_OK) st = zc_wait(m.comm, &r);
    MP_CHECK(&m, st == ZC_MISMATCH, "the call after the mismatch returned %s", zc_status_name(st));
    MP_ST(&m, zc_progress(m.comm), ZC_MISMATCH);
    mp_fini(&m);
    return 0;
}

/* ---- 5. a rank that never joins ----------------------------------------------------------- */

int mp_rank_never_joins(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_never_joins");
    m.cfg.timeout_ns = 300 * MP_MS;
    mp_init(&m);
    mp_barrier(&m);
    float s[64] = {0}, d[64];
    zc_req r;
    if (m.rank == 2) { /* skips the allreduce */
        mp_sleep_ms(2000);
        mp_fini(&m);
        return 0;
    }
    uint64_t t0 = mp_now_ns();
    MP_ST(&m, zc_allreduce(m.comm, s, d, 64, ZC_FLOAT32, ZC_SUM, &r), ZC_OK);
    zc_status st = zc_wait(m.comm, &r);
    uint64_t dt = mp_now_ns() - t0;
    printf("mp-info: rank %u: %s after %.1f ms: %s\n", m.rank, zc_status_name(st), mp_ms(dt),
           zc_comm_error_text(m.comm));
    MP_CHECK(&m, st == ZC_TIMED_OUT, "got %s, expected ZC_TIMED_OUT", zc_status_name(st));
    /* 0.3 s after this rank's own issue; a peer's report may come a little earlier than that
     * when the peer issued first, hence the 250 ms floor. */
    MP_CHECK(&m, dt >= 250 * MP_MS && dt <= 2000 * MP_MS, "timed out after %.1f ms, expected "
             "0.3 .. 2 s", mp_ms(dt));
    MP_CHECK(&m, strstr(zc_comm_error_text(m.comm), "timed out") ||
                 strstr(zc_comm_error_text(m.comm), "TIMED_OUT"),
             "the error text does not say it timed out");
    st = zc_barrier(m.comm, &r);
    if (st == ZC_OK) st = zc_wait(m.comm, &r);
    MP_CHECK(&m, st == ZC_TIMED_OUT, "the call after the timeout returned %s",
             zc_status_name(st));
    mp_fini(&m);
    return 0;
}

/* ---- 6. a killed peer --------------------------------------------------------------------- */

static void mp_kill_path(char *path, size_t cap) {
    const char *secret = getenv("ZC_SECRET");
    snprintf(path, cap, "/tmp/zcoll_mp_kill_%s", secret ? secret : "nosecret");
}

/* Writes the time into path, then dies by SIGKILL (the survivors read when it died). */
static _Noreturn void mp_die_killed(const char *path) {
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
    uint64_t t = mp_now_ns();
    if (fd < 0 || write(fd, &t, sizeof t) != (ssize_t)sizeof t) _exit(3);
    close(fd);
    raise(SIGKILL);
    _exit(3);
}

static char mp_kill_file[128];

/* MP_MID_LINES=1: the dying rank's first message of flagged lines is cut short: its last
 * line's flag is put back to an old tag (as if the process died before writing it), and the
 * process dies right there, inside the send. */
static void mp_kill_mid_lines(const zc_comm *c, uint32_t peer, zc__hdr *h, uint8_t *payload) {
    (void)c, (void)peer;
    if (h->bytes <= ZC_INLINE_BYTES) return;
    uint32_t lines = (h->bytes + ZC_LINE_DATA_BYTES - 1u) / ZC_LINE_DATA_BYTES;
    uint64_t old = 0;
    memcpy(payload + (lines - 1u) * 64u + 56u, &old, sizeof old);
    mp_die_killed(mp_kill_file);
}

int mp_rank_killed(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_killed");
    zc__test_lines_max = mp_env_u32("MP_LINES_MAX", 0);
    m.cfg.timeout_ns = 5000 * MP_MS;
    mp_init(&m);
    /* 4 MiB, or MP_COUNT floats (2: one line per peer; 12 or, with MP_LINES_MAX, 1,000:
     * flagged lines) */
    mp_op o = {.kind = MP_ALLREDUCE, .dt = ZC_FLOAT32, .op = ZC_SUM,
               .count = mp_env_u32("MP_COUNT", 1u << 20), .n = m.n, .me = m.rank};
    o.uid = 77;
    mp_op_alloc(&o);
    mp_op_fill(&o, o.sbuf, o.rbuf);
    char path[128];
    mp_kill_path(path, sizeof path);
    snprintf(mp_kill_file, sizeof mp_kill_file, "%s", path);
    for (uint32_t it = 0; it < 1000; it++) {
        if (m.rank == 2 && it == 5 && mp_env_u32("MP_MID_LINES", 0))
            zc__test_forge = mp_kill_mid_lines;
        MP_ST(&m, mp_op_issue(m.comm, &o), ZC_OK);
        if (m.rank == 2 && it == 5) {
            for (int i = 0; i < 20; i++) (void)zc_progress(m.comm); /* now mid-collective */
            mp_die_killed(path);
        }
        zc_status st = zc_wait(m.comm, &o.req[0]);
        if (st == ZC_OK) continue;
        uint64_t now = mp_now_ns(), killed = 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        MP_CHECK(&m, fd >= 0 && read(fd, &killed, sizeof killed) == (ssize_t)sizeof killed,
                 "allreduce %u failed with %s before rank 2 was killed (no %s)", it,
                 zc_status_name(st), path);
        close(fd);
        double late = mp_ms(now - killed);
        printf("mp-info: rank %u: allreduce %u returned %s %.1f ms after the kill: %s\n", m.rank,
               it, zc_status_name(st), late, zc_comm_error_text(m.comm));
        MP_CHECK(&m, st == ZC_PEER_LOST || st == ZC_TIMED_OUT, "got %s, expected ZC_PEER_LOST",
                 zc_status_name(st));
        MP_CHECK(&m, late < 1000.0, "reported %.1f ms after the kill, expected < 1 s", late);
        uint64_t t0 = mp_now_ns();
        MP_ST(&m, zc_comm_abort(m.comm), ZC_OK);
        uint64_t abort_ns = mp_now_ns() - t0;
        MP_CHECK(&m, abort_ns < 10 * MP_MS, "zc_comm_abort took %.3f ms", mp_ms(abort_ns));
        zc_req r;
        MP_ST(&m, zc_barrier(m.comm, &r), ZC_ABORTED);
        MP_ST(&m, zc_allreduce(m.comm, o.sbuf, o.rbuf, 4, ZC_FLOAT32, ZC_SUM, &r), ZC_ABORTED);
        MP_ST(&m, zc_progress(m.comm), ZC_ABORTED);
        printf("mp-info: rank %u peer lost ok (%s, abort %.3f ms)\n", m.rank, zc_status_name(st),
               mp_ms(abort_ns));
        fflush(stdout);
        mp_sleep_ms(100); /* let the other survivor read the file first */
        if (m.rank == 0) unlink(path);
        mp_op_free(&o);
        mp_fini(&m);
        return 0;
    }
    mp_die(&m, __FILE__, __LINE__, "1000 allreduces and no failure");
}

/* ---- 6b. a link that goes away (tests/rxe/hosts.sh: two guests on a virtual wire) ---------- */

static double mp_boot_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool mp_file_exists(const char *path) { return path && *path && access(path, F_OK) == 0; }

/* Expects init to fail (the rendezvous unreachable): prints the status, the time it took and
 * the sentence; fails unless that is a failure reported by the init deadline. */
static void mp_link_init_fails(mp_ctx *m) {
    size_t bytes = zc_comm_arena_bytes(&m->cfg);
    m->arena = malloc(bytes);
    MP_CHECK(m, bytes > 0 && m->arena, "no arena");
    uint64_t t0 = mp_now_ns();
    zc_status st = zc_comm_init(&m->cfg, m->arena, bytes, &m->comm);
    double ms = mp_ms(mp_now_ns() - t0), limit = mp_ms(m->cfg.init_timeout_ns);
    printf("mp-result: rank %u: init %s after %.0f ms (init deadline %.0f ms): %s\n", m->rank,
           zc_status_name(st), ms, limit, st == ZC_OK ? "" : zc_init_error_text());
    fflush(stdout);
    MP_CHECK(m, st != ZC_OK, "init succeeded, expected it to fail");
    m->comm = NULL;
    MP_CHECK(m, ms <= limit + 2000.0, "init failed %.0f ms after its start, past the %.0f ms "
             "deadline", ms, limit);
    MP_CHECK(m, zc_init_error_text()[0] != '\0', "no sentence for %s", zc_status_name(st));
    free(m->arena);
    m->arena = NULL;
}

/* One more communicator: init, a checked allreduce of MP_AGAIN_KIB KiB (256), fini. */
static void mp_link_one(mp_ctx *m) {
    uint64_t t1 = mp_now_ns();
    mp_init(m);
    double init_ms = mp_ms(mp_now_ns() - t1);
    uint32_t kib = mp_env_u32("MP_AGAIN_KIB", 256);
    mp_op o = {.kind = MP_ALLREDUCE, .dt = ZC_FLOAT32, .op = ZC_SUM, .count = (size_t)kib << 8,
               .n = m->n, .me = m->rank};
    o.uid = mp_mix(mp_seed ^ 0xa9a1ull);
    mp_op_alloc(&o);
    mp_op_fill(&o, o.sbuf, o.rbuf);
    MP_ST(m, mp_op_issue(m->comm, &o), ZC_OK);
    MP_ST(m, zc_wait(m->comm, &o.req[0]), ZC_OK);
    mp_op_check(m, &o, "allreduce on the new communicator");
    printf("mp-info: rank %u: a new communicator works (init %.0f ms, a checked %u KiB "
           "allreduce)\n", m->rank, init_ms, kib);
    mp_op_free(&o);
    mp_fini(m);
}

/* After the link failed (or the loop stopped): waits for MP_GO_FILE (the link is back), then
 * a new communicator over the same environment must init and run a checked allreduce, and
 * fini at once; MP_AGAIN times (default 1). */
static void mp_link_again(mp_ctx *m) {
    const char *go = getenv("MP_GO_FILE");
    if (!go || !*go) return;
    uint64_t t0 = mp_now_ns(), wait_ns = mp_env_u32("MP_GO_WAIT_MS", 120000) * MP_MS;
    while (!mp_file_exists(go) && mp_now_ns() - t0 < wait_ns) mp_sleep_ms(50);
    MP_CHECK(m, mp_file_exists(go), "%s did not appear within %.0f ms", go, mp_ms(wait_ns));
    for (uint32_t i = 0, n = mp_env_u32("MP_AGAIN", 1); i < n; i++) mp_link_one(m);
}

/* Allreduces of MP_KIB KiB (float32 sum, each result checked) until rank 0 sees MP_STOP_FILE
 * (it broadcasts the decision before each call) or MP_CALLS calls; prints one "mp-result" line
 * with how the loop ended. MP_EXPECT says what must happen: "ok" (every call succeeds),
 * "fail" (a call fails with ZC_PEER_LOST or ZC_TIMED_OUT by its deadline: the link was cut,
 * a peer's host died) or "init_fail" (init fails by its deadline, MP_INIT_MS). Then
 * mp_link_again. Times are also printed on the boot clock, to compare with the moment of the
 * cut. On one host the tests below stand in for the cut: rank MP_DIE_RANK kills itself
 * (SIGKILL) as call MP_DIE_AT begins. */
int mp_rank_link(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_link");
    uint32_t init_ms = mp_env_u32("MP_INIT_MS", 0);
    if (init_ms) m.cfg.init_timeout_ns = init_ms * MP_MS;
    const char *expect = getenv("MP_EXPECT") ? getenv("MP_EXPECT") : "ok";
    bool want_fail = strcmp(expect, "fail") == 0;
    if (strcmp(expect, "init_fail") == 0) {
        mp_link_init_fails(&m);
        return 0;
    }
    MP_CHECK(&m, want_fail || strcmp(expect, "ok") == 0, "MP_EXPECT=%s", expect);
    mp_init(&m);
    printf("mp-info: rank %u ready\n", m.rank);
    fflush(stdout);
    mp_op o = {.kind = MP_ALLREDUCE, .dt = ZC_FLOAT32, .op = ZC_SUM, .n = m.n, .me = m.rank};
    o.count = (size_t)mp_env_u32("MP_KIB", 1024) << 8;
    mp_op_alloc(&o);
    const char *stop = getenv("MP_STOP_FILE");
    uint32_t calls = mp_env_u32("MP_CALLS", 1000), it = 0;
    uint32_t die_rank = mp_env_u32("MP_DIE_RANK", UINT32_MAX), die_at = mp_env_u32("MP_DIE_AT", 0);
    zc_status st = ZC_OK;
    uint64_t t0 = mp_now_ns(), t_call = t0, slowest = 0;
    for (; it < calls; it++) {
        int32_t go = !mp_file_exists(stop);
        zc_req r;
        t_call = mp_now_ns();
        st = zc_broadcast(m.comm, &go, &go, 1, ZC_INT32, 0, &r);
        if (st == ZC_OK) st = zc_wait(m.comm, &r);
        if (st != ZC_OK || !go) break;
        o.uid = mp_mix(mp_seed ^ 0x11e4ull ^ ((uint64_t)it << 12));
        mp_op_fill(&o, o.sbuf, o.rbuf);
        t_call = mp_now_ns();
        st = mp_op_issue(m.comm, &o);
        if (m.rank == die_rank && it == die_at) raise(SIGKILL);
        if (st == ZC_OK) st = zc_wait(m.comm, &o.req[0]);
        if (st != ZC_OK) break;
        mp_op_check(&m, &o, "allreduce");
        if (mp_now_ns() - t_call > slowest) slowest = mp_now_ns() - t_call;
    }
    double into = mp_ms(mp_now_ns() - t_call), limit = mp_ms(m.cfg.timeout_ns);
    if (st == ZC_OK) {
        printf("mp-result: rank %u: ZC_OK: %u calls in %.0f ms (the slowest %.0f ms), every "
               "result checked, boot clock %.0f ms\n", m.rank, it, mp_ms(mp_now_ns() - t0),
               mp_ms(slowest), mp_boot_ms());
        fflush(stdout);
        MP_CHECK(&m, !want_fail, "%u calls and no failure", it);
        mp_fini(&m);
    } else {
        printf("mp-result: rank %u: %s in call %u, %.0f ms into it (deadline %.0f ms), boot "
               "clock %.0f ms: %s\n", m.rank, zc_status_name(st), it, into, limit, mp_boot_ms(),
               zc_comm_error_text(m.comm));
        fflush(stdout);
        MP_CHECK(&m, want_fail, "call %u failed", it);
        MP_CHECK(&m, st == ZC_PEER_LOST || st == ZC_TIMED_OUT, "got %s, expected ZC_PEER_LOST "
                 "or ZC_TIMED_OUT", zc_status_name(st));
        MP_CHECK(&m, into <= limit + 1000.0, "reported %.0f ms into the call, past its %.0f ms "
                 "deadline", into, limit);
        MP_ST(&m, zc_comm_abort(m.comm), ZC_OK);
        mp_fini(&m);
    }
    mp_op_free(&o);
    mp_link_again(&m);
    return 0;
}

/* ---- 7. no allocation after init ----------------------------------------------------------- */

#if MP_COUNTING_ALLOCS
static void mp_alloc_self_check(const mp_ctx *m) {
    void *(*volatile do_malloc)(size_t) = malloc;
    void (*volatile do_free)(void *) = free;
    void *(*volatile do_mmap)(void *, size_t, int, int, int, off_t) = mmap;
    int (*volatile do_munmap)(void *, size_t) = munmap;
    mp_counting = 1;
    void *p = do_malloc(24);
    do_free(p);
    void *q = do_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    do_munmap(q, 4096);
    mp_counting = 0;
    MP_CHECK(m, mp_alloc_calls[MP_MALLOC] == 1 && mp_alloc_calls[MP_FREE] == 1 &&
                    mp_alloc_calls[MP_MMAP] == 1 && mp_alloc_calls[MP_MUNMAP] == 1 &&
                    q != MAP_FAILED,
             "the counting forwarders are not in use (%lu %lu %lu %lu)",
             mp_alloc_calls[MP_MALLOC], mp_alloc_calls[MP_FREE], mp_alloc_calls[MP_MMAP],
             mp_alloc_calls[MP_MUNMAP]);
    for (int i = 0; i < MP_ALLOC_FNS; i++) mp_alloc_calls[i] = 0;
}
#endif

int mp_rank_alloc_free(void) {
#if !MP_COUNTING_ALLOCS
    printf("mp-info: allocation counting needs the release build\n");
    return 0;
#else
    mp_ctx m;
    mp_config(&m, "mp_rank_alloc_free");
    m.cfg.slot_bytes = 4096, m.cfg.slots = 4;
    mp_init(&m);
    mp_alloc_self_check(&m);
    /* Fixed calls: every kind, small and chunked, plus a persistent plan; buffers made, filled
     * and their expected images computed before counting starts. */
    const struct {
        mp_kind kind;
        zc_dtype dt;
        zc_op op;
        size_t count;
    } spec[] = {
        {MP_ALLREDUCE, ZC_INT32, ZC_SUM, 64},     {MP_ALLREDUCE, ZC_FLOAT32, ZC_SUM, 20000},
        {MP_REDUCE, ZC_FLOAT16, ZC_MAX, 9000},    {MP_BCAST, ZC_UINT8, ZC_SUM, 100000},
        {MP_RSCAT, ZC_INT64, ZC_MIN, 3000},       {MP_AGATHER, ZC_BFLOAT16, ZC_SUM, 500},
        {MP_GATHER, ZC_FLOAT64, ZC_SUM, 700},     {MP_SCATTER, ZC_UINT32, ZC_SUM, 5000},
        {MP_ALLTOALL, ZC_FP8_E4M3, ZC_SUM, 3000}, {MP_RING, ZC_INT8, ZC_SUM, 10000},
        {MP_BARRIER, ZC_UINT8, ZC_SUM, 0},        {MP_ALLREDUCE, ZC_FLOAT64, ZC_AVG, 8},
    };
    enum { K = sizeof spec / sizeof spec[0] };
    mp_op ops[K + 1];
    for (size_t i = 0; i < K; i++) {
        mp_op *o = &ops[i];
        memset(o, 0, sizeof *o);
        o->kind = spec[i].kind, o->dt = spec[i].dt, o->op = spec[i].op, o->count = spec[i].count;
        o->root = (uint32_t)i % m.n, o->n = m.n, o->me = m.rank;
        o->uid = mp_mix(mp_seed ^ 0xa11ull ^ i);
        mp_op_alloc(o);
        mp_op_fill(o, o->sbuf, o->rbuf);
        mp_op_expect(o);
    }
    mp_op *pl = &ops[K]; /* the persistent one */
    memset(pl, 0, sizeof *pl);
    pl->kind = MP_ALLREDUCE, pl->dt = ZC_BFLOAT16, pl->op = ZC_SUM, pl->count = 5000;
    pl->n = m.n, pl->me = m.rank, pl->uid = 0x91a4;
    mp_op_alloc(pl);
    mp_op_fill(pl, pl->sbuf, pl->rbuf);
    mp_op_expect(pl);
    MP_ST(&m, mp_op_plan(m.comm, pl), ZC_OK);
    zt_rng g = {mp_seed ^ 0xa110cull}; /* same on every rank: the calls must agree */
    char why[1024];
    uint32_t calls = 0;
    fflush(stdout);
    mp_barrier(&m);
    uint64_t t0 = mp_now_ns();
    mp_counting = 1;
    while (calls < 10000) {
        /* one or two calls in flight, waited with zc_wait or by polling zc_test */
        size_t a = (size_t)zt_rng_below(&g, K + 1), b = (size_t)zt_rng_below(&g, K + 1);
        size_t pick[2] = {a, b}, np = a == b ? 1 : 2;
        for (size_t i = 0; i < np; i++) {
            mp_op *o = &ops[pick[i]];
            if (o->rbuf) memset(o->rbuf, 0, o->rbytes);
            if (o == pl) {
                o->nreq = 1;
                MP_ST(&m, zc_start(m.comm, &o->plan[0], &o->req[0]), ZC_OK);
            } else {
                MP_ST(&m, mp_op_issue(m.comm, o), ZC_OK);
            }
        }
        for (size_t i = 0; i < np; i++) {
            mp_op *o = &ops[pick[i]];
            for (int q = 0; q < o->nreq; q++) {
                zc_status st;
                if (calls % 2) {
                    while ((st = zc_test(m.comm, &o->req[q])) == ZC_IN_PROGRESS)
                        MP_ST(&m, zc_progress(m.comm), ZC_OK);
                } else {
                    st = zc_wait(m.comm, &o->req[q]);
                }
                MP_ST(&m, st, ZC_OK);
            }
            /* Every recv buffer passed here is wholly written by the call (no spare ones). */
            MP_CHECK(&m, mp_op_compare(o, why, sizeof why), "call %u: %s", calls, why);
            calls++;
        }
    }
    mp_counting = 0;
    uint64_t dt = mp_now_ns() - t0;
    unsigned long total = 0;
    for (int i = 0; i < MP_ALLOC_FNS; i++) total += mp_alloc_calls[i];
    printf("mp-info: rank %u: %u calls in %.1f ms after init: %lu allocation calls (", m.rank,
           calls, mp_ms(dt), total);
    for (int i = 0; i < MP_ALLOC_FNS; i++)
        printf("%s%s %lu", i ? ", " : "", mp_alloc_names[i], mp_alloc_calls[i]);
    printf(")\n");
    MP_CHECK(&m, total == 0, "the library allocated or mapped %lu times after init", total);
    MP_ST(&m, zc_plan_release(m.comm, &pl->plan[0]), ZC_OK);
    for (size_t i = 0; i <= K; i++) mp_op_free(&ops[i]);
    mp_fini(&m);
    return 0;
#endif
}

/* ---- 8. oversubscribed ---------------------------------------------------------------------- */

int mp_rank_oversubscribed(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_oversubscribed");
    mp_init(&m);
    uint32_t iters = mp_env_u32("MP_ITERS", 2000);
    mp_barrier(&m);
    uint64_t t0 = mp_now_ns();
    for (uint32_t it = 0; it < iters; it++) {
        int64_t mine = (int64_t)(m.rank + 1) * (int64_t)(it + 1), sum = -1;
        zc_req r;
        MP_ST(&m, zc_allreduce(m.comm, &mine, &sum, 1, ZC_INT64, ZC_SUM, &r), ZC_OK);
        MP_ST(&m, zc_wait(m.comm, &r), ZC_OK);
        int64_t want = (int64_t)(m.n * (m.n + 1) / 2) * (int64_t)(it + 1);
        MP_CHECK(&m, sum == want, "allreduce %u gave %lld, expected %lld", it, (long long)sum,
                 (long long)want);
    }
    uint64_t dt = mp_now_ns() - t0;
    double per_op_ms = mp_ms(dt) / iters;
    if (m.rank == 0)
        printf("mp-info: %u ranks: %u allreduces of 8 bytes in %.1f ms: %.3f ms per op\n", m.n,
               iters, mp_ms(dt), per_op_ms);
    MP_CHECK(&m, per_op_ms < 5.0, "%.3f ms per allreduce, expected < 5 ms", per_op_ms);
    mp_fini(&m);
    return 0;
}

/* spin_polls auto, from the CPUs the ranks may run on together: MP_PIN=own confines rank r to
 * the r-th CPU zcrun allowed (as zcrun --bind-to core does), MP_PIN=shared every rank to the
 * first one. Ranks on CPUs of their own spin (a pinned rank is not crowded although it sees one
 * CPU); ranks crowded on fewer CPUs than there are of them yield after every empty poll. */
int mp_rank_spin_auto(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_spin_auto");
    const char *how = getenv("MP_PIN");
    bool own = how && strcmp(how, "own") == 0;
    cpu_set_t allowed, set;
    MP_CHECK(&m, sched_getaffinity(0, sizeof allowed, &allowed) == 0, "sched_getaffinity");
    size_t pick = 0, seen = 0, want_index = own ? m.rank : 0;
    for (size_t c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed) && seen++ == want_index) {
            pick = c;
            break;
        }
    MP_CHECK(&m, seen > want_index, "rank %u: no CPU of its own among %d", m.rank,
             CPU_COUNT(&allowed));
    CPU_ZERO(&set);
    CPU_SET(pick, &set);
    MP_CHECK(&m, sched_setaffinity(0, sizeof set, &set) == 0, "sched_setaffinity");
    mp_init(&m);
    uint32_t want = own ? ZC_DEFAULT_SPIN_POLLS : 1u;
    MP_CHECK(&m, m.comm->cfg.spin_polls == want, "rank %u on CPU %zu (%s): spin_polls %u, "
             "expected %u", m.rank, pick, own ? "a CPU of its own" : "every rank on it",
             m.comm->cfg.spin_polls, want);
    mp_barrier(&m);
    mp_fini(&m);
    return 0;
}

/* Between processes a call parks only after a long wait (engine.h's ZC_PARK_AFTER_PROCS idle
 * passes; in process after ZC_PARK_AFTER_INPROC): rank 0's 8-byte all_reduce is not parked
 * after ZC_PARK_AFTER_PROCS - 1 idle polls, parked at the next, and finishes, bitwise right,
 * once rank 1 (held back by a receive that rank 0's send releases) sends its part; then a
 * message of flagged lines (40 bytes) is waited for the same way. */
int mp_rank_parks_after_a_long_wait(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_parks_after_a_long_wait");
    m.cfg.spin_polls = 1u << 20; /* no yield (which restarts the idle count) on one CPU either */
    mp_init(&m);
    MP_CHECK(&m, m.comm->park_after == ZC_PARK_AFTER_PROCS, "park_after %u, expected %u",
             m.comm->park_after, ZC_PARK_AFTER_PROCS);
    const size_t counts[] = {2, 10};
    for (size_t t = 0; t < 2; t++) {
        int32_t in[10], out[10], go = 0;
        for (size_t i = 0; i < counts[t]; i++) in[i] = (int32_t)((m.rank + 1u) * (i + 3u * t));
        zc_req ar, pq;
        mp_barrier(&m);
        if (m.rank == 0) {
            MP_ST(&m, zc_allreduce(m.comm, in, out, counts[t], ZC_INT32, ZC_SUM, &ar), ZC_OK);
            for (uint32_t i = 1; i < ZC_PARK_AFTER_PROCS; i++) {
                MP_ST(&m, zc_progress(m.comm), ZC_OK);
                MP_CHECK(&m, !m.comm->parked, "parked after %u idle polls", i);
            }
            MP_ST(&m, zc_progress(m.comm), ZC_OK);
            MP_CHECK(&m, m.comm->parked, "not parked after %u idle polls", ZC_PARK_AFTER_PROCS);
            MP_ST(&m, zc_send(m.comm, &go, 1, ZC_INT32, 1, &pq), ZC_OK);
            MP_ST(&m, zc_wait(m.comm, &pq), ZC_OK);
        } else {
            MP_ST(&m, zc_recv(m.comm, &go, 1, ZC_INT32, 0, &pq), ZC_OK);
            MP_ST(&m, zc_wait(m.comm, &pq), ZC_OK);
            MP_ST(&m, zc_allreduce(m.comm, in, out, counts[t], ZC_INT32, ZC_SUM, &ar), ZC_OK);
        }
        MP_ST(&m, zc_wait(m.comm, &ar), ZC_OK);
        for (size_t i = 0; i < counts[t]; i++)
            MP_CHECK(&m, out[i] == (int32_t)(3u * (i + 3u * t)), "element %zu: %d, expected %d",
                     i, out[i], (int32_t)(3u * (i + 3u * t)));
    }
    mp_fini(&m);
    return 0;
}

/* ---- 9. misuse ------------------------------------------------------------------------------ */

/* Fills recv with the sentinel before a refused call and checks it after. */
typedef struct mp_guard {
    uint8_t *buf;
    size_t bytes;
} mp_guard;

static void mp_guard_check(const mp_ctx *m, const mp_guard *gd, const char *what) {
    for (size_t i = 0; i < gd->bytes; i++)
        MP_CHECK(m, gd->buf[i] == (uint8_t)(0x5au + i * 131u),
                 "%s: byte %zu of a buffer was written by a refused call", what, i);
}

#define MP_REFUSED(m, call, want, word, gd)                                                   \
    do {                                                                                      \
        mp_sentinel((gd)->buf, (gd)->bytes);                                                  \
        MP_ST((m), call, want);                                                               \
        MP_TEXT_HAS((m), (m)->comm, word);                                                    \
        mp_guard_check((m), (gd), #call);                                                     \
    } while (0)

/* The buffers every misuse case passes: buf (2n blocks) and other (n blocks), both guarded. */
enum { MP_MIS_COUNT = 16 };
typedef struct mp_mis {
    mp_ctx *m;
    zc_comm *c;
    uint32_t n, me, next; /* next: a block that is not this rank's */
    size_t blk;           /* bytes of one block of MP_MIS_COUNT float32 */
    uint8_t *buf, *other;
    mp_guard all, oth;
} mp_mis;

/* Bad arguments, one at a time; each names the argument and leaves the buffers alone. */
static void mp_misuse_arguments(const mp_mis *x) {
    mp_ctx *m = x->m;
    zc_comm *c = x->c;
    uint8_t *buf = x->buf, *other = x->other;
    uint32_t n = x->n, me = x->me, cnt = MP_MIS_COUNT;
    zc_req r;
    zc_plan p;
    MP_REFUSED(m, zc_allreduce(c, NULL, buf, cnt, ZC_FLOAT32, ZC_SUM, &r), ZC_INVALID_ARG,
               "send", &x->all);
    MP_REFUSED(m, zc_allreduce(c, other, NULL, cnt, ZC_FLOAT32, ZC_SUM, &r), ZC_INVALID_ARG,
               "recv", &x->oth);
    MP_REFUSED(m, zc_reduce(c, other, buf, cnt, ZC_FLOAT32, ZC_SUM, n, &r), ZC_INVALID_ARG,
               "root", &x->all);
    MP_REFUSED(m, zc_broadcast(c, other, buf, cnt, ZC_FLOAT32, n + 7, &r), ZC_INVALID_ARG,
               "root", &x->all);
    MP_REFUSED(m, zc_scatter(c, other, buf, cnt, ZC_FLOAT32, n, &r), ZC_INVALID_ARG, "root",
               &x->all);
    MP_REFUSED(m, zc_allreduce(c, other, buf, cnt, (zc_dtype)99, ZC_SUM, &r), ZC_INVALID_ARG,
               "dtype", &x->all);
    MP_REFUSED(m, zc_allgather(c, other, buf, cnt, (zc_dtype)-1, &r), ZC_INVALID_ARG, "dtype",
               &x->all);
    MP_REFUSED(m, zc_allreduce(c, other, buf, cnt, ZC_FLOAT32, (zc_op)99, &r), ZC_INVALID_ARG,
               "op", &x->all);
    MP_REFUSED(m, zc_reduce_scatter(c, other, buf, cnt, ZC_INT32, (zc_op)5, &r), ZC_INVALID_ARG,
               "op", &x->all);
    MP_REFUSED(m, zc_allreduce(c, other, buf, SIZE_MAX / 2, ZC_FLOAT32, ZC_SUM, &r),
               ZC_INVALID_ARG, "count", &x->all);
    if (n > 1) {
        MP_REFUSED(m, zc_send(c, other, cnt, ZC_FLOAT32, me, &r), ZC_INVALID_ARG, "peer",
                   &x->all);
        MP_REFUSED(m, zc_recv(c, buf, cnt, ZC_FLOAT32, me, &r), ZC_INVALID_ARG, "peer", &x->all);
    }
    MP_REFUSED(m, zc_send(c, other, cnt, ZC_FLOAT32, n, &r), ZC_INVALID_ARG, "peer", &x->all);
    MP_REFUSED(m, zc_allreduce(c, other, buf, cnt, ZC_FLOAT32, ZC_SUM, NULL), ZC_INVALID_ARG,
               "req", &x->all);
    MP_REFUSED(m, zc_allreduce_init(c, other, buf, cnt, ZC_FLOAT32, (zc_op)42, &p),
               ZC_INVALID_ARG, "op", &x->all);
    MP_CHECK(m, zc_allreduce(NULL, other, buf, cnt, ZC_FLOAT32, ZC_SUM, &r) == ZC_INVALID_ARG,
             "a NULL communicator was not refused");
    MP_CHECK(m, zc_comm_error_text(NULL) != NULL, "zc_comm_error_text(NULL) is NULL");
}

/* Overlapping send and recv other than docs/api.md's in-place layouts. */
static void mp_misuse_layouts(const mp_mis *x) {
    mp_ctx *m = x->m;
    zc_comm *c = x->c;
    uint8_t *buf = x->buf, *wrong = x->buf + x->next * x->blk;
    uint32_t cnt = MP_MIS_COUNT;
    zc_req r;
    if (x->n > 1) { /* n == 1 has only the right block */
        MP_REFUSED(m, zc_reduce_scatter(c, buf, wrong, cnt, ZC_FLOAT32, ZC_SUM, &r),
                   ZC_INVALID_ARG, "in-place", &x->all);
        MP_REFUSED(m, zc_allgather(c, wrong, buf, cnt, ZC_FLOAT32, &r), ZC_INVALID_ARG,
                   "in-place", &x->all);
        /* root = this rank on every rank: each one is a root, so each checks (and refuses) the
         * layout locally; nothing is issued anywhere. */
        MP_REFUSED(m, zc_gather(c, wrong, buf, cnt, ZC_FLOAT32, x->me, &r), ZC_INVALID_ARG,
                   "in-place", &x->all);
        MP_REFUSED(m, zc_scatter(c, buf, wrong, cnt, ZC_FLOAT32, x->me, &r), ZC_INVALID_ARG,
                   "in-place", &x->all);
    }
    MP_REFUSED(m, zc_reduce_scatter(c, buf, buf + 4, cnt, ZC_FLOAT32, ZC_SUM, &r),
               ZC_INVALID_ARG, "in-place", &x->all);
    MP_REFUSED(m, zc_alltoall(c, buf, buf, cnt, ZC_FLOAT32, &r), ZC_INVALID_ARG, "in-place",
               &x->all);
    MP_REFUSED(m, zc_allreduce(c, buf, buf + 4, cnt, ZC_FLOAT32, ZC_SUM, &r), ZC_INVALID_ARG,
               "in-place", &x->all);
}

/* A finished request is stale, a zeroed one was never started, a released plan is gone. */
static void mp_misuse_handles(const mp_mis *x) {
    mp_ctx *m = x->m;
    zc_comm *c = x->c;
    float a[MP_MIS_COUNT], s[MP_MIS_COUNT];
    for (int i = 0; i < MP_MIS_COUNT; i++) a[i] = (float)i;
    zc_req r, zero;
    zc_plan p, zp;
    memset(&zero, 0, sizeof zero);
    memset(&zp, 0, sizeof zp);
    MP_ST(m, zc_allreduce(c, a, s, MP_MIS_COUNT, ZC_FLOAT32, ZC_SUM, &r), ZC_OK);
    MP_ST(m, zc_wait(c, &r), ZC_OK);
    MP_ST(m, zc_test(c, &r), ZC_INVALID_ARG);
    MP_TEXT_HAS(m, c, "req");
    MP_ST(m, zc_wait(c, &r), ZC_INVALID_ARG);
    MP_ST(m, zc_wait(c, &zero), ZC_INVALID_ARG);
    MP_TEXT_HAS(m, c, "req");
    MP_ST(m, zc_test(c, &zero), ZC_INVALID_ARG);
    MP_ST(m, zc_allreduce_init(c, a, s, MP_MIS_COUNT, ZC_FLOAT32, ZC_SUM, &p), ZC_OK);
    MP_ST(m, zc_plan_release(c, &p), ZC_OK);
    MP_ST(m, zc_start(c, &p, &r), ZC_INVALID_ARG);
    MP_TEXT_HAS(m, c, "plan");
    MP_ST(m, zc_start(c, &zp, &r), ZC_INVALID_ARG);
    MP_ST(m, zc_plan_release(c, &zp), ZC_INVALID_ARG);
}

/* Checks an allreduce of (rank+1) * (k + i) over float32: sum = n(n+1)/2 * (k + i), exact. */
static void mp_misuse_expect_tri(const mp_mis *x, const float *out, int k, const char *what) {
    float tri = (float)(x->n * (x->n + 1) / 2);
    for (int i = 0; i < MP_MIS_COUNT; i++)
        MP_CHECK(x->m, out[i] == tri * (float)(k + i), "%s %d element %d: %g, expected %g", what,
                 k, i, (double)out[i], (double)(tri * (float)(k + i)));
}

/* cfg.max_requests (4) in flight: the fifth is ZC_AGAIN, the four still complete; and then
 * the communicator works. */
static void mp_misuse_pool(const mp_mis *x) {
    mp_ctx *m = x->m;
    zc_comm *c = x->c;
    zc_req four[4], r;
    float in[4][MP_MIS_COUNT], out[4][MP_MIS_COUNT];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < MP_MIS_COUNT; i++) in[k][i] = (float)((x->me + 1) * (uint32_t)(k + i));
        MP_ST(m, zc_allreduce(c, in[k], out[k], MP_MIS_COUNT, ZC_FLOAT32, ZC_SUM, &four[k]),
              ZC_OK);
    }
    MP_REFUSED(m, zc_allreduce(c, x->other, x->buf, MP_MIS_COUNT, ZC_FLOAT32, ZC_SUM, &r),
               ZC_AGAIN, "request", &x->all);
    MP_REFUSED(m, zc_barrier(c, &r), ZC_AGAIN, "request", &x->all);
    for (int k = 3; k >= 0; k--) MP_ST(m, zc_wait(c, &four[k]), ZC_OK);
    for (int k = 0; k < 4; k++) mp_misuse_expect_tri(x, out[k], k, "in-flight allreduce");
    for (int round = 0; round < 3; round++) {
        memset(out[0], 0, sizeof out[0]);
        MP_ST(m, zc_allreduce(c, in[1], out[0], MP_MIS_COUNT, ZC_FLOAT32, ZC_SUM, &r), ZC_OK);
        MP_ST(m, zc_wait(c, &r), ZC_OK);
        mp_misuse_expect_tri(x, out[0], 1, "allreduce after the misuse, round");
    }
}

/* Counts whose block count times nranks overflows size_t (a 1-byte type, so count * size
 * alone does not). Last, as a wrong acceptance issues a call that cannot work. */
static void mp_misuse_overflow(const mp_mis *x) {
    mp_ctx *m = x->m;
    zc_comm *c = x->c;
    zc_req r;
    size_t wrap = SIZE_MAX / x->n + 2; /* n * wrap wraps to a small number */
    MP_REFUSED(m, zc_alltoall(c, x->other, x->buf, wrap, ZC_UINT8, &r), ZC_INVALID_ARG, "count",
               &x->all);
    MP_REFUSED(m, zc_allgather(c, x->other, x->buf, wrap, ZC_INT8, &r), ZC_INVALID_ARG, "count",
               &x->all);
    MP_REFUSED(m, zc_reduce_scatter(c, x->other, x->buf, wrap, ZC_UINT8, ZC_SUM, &r),
               ZC_INVALID_ARG, "count", &x->all);
    /* n * count past the address space without wrapping: refused naming count. */
    MP_REFUSED(m, zc_alltoall(c, x->other, x->buf, SIZE_MAX / 2, ZC_UINT8, &r), ZC_INVALID_ARG,
               "count", &x->all);
}

static void mp_misuse_checks(mp_ctx *m) {
    mp_mis x = {.m = m, .c = m->comm, .n = m->n, .me = m->rank, .next = (m->rank + 1) % m->n};
    x.blk = MP_MIS_COUNT * 4u;
    x.buf = malloc(2 * x.n * x.blk + 64);
    x.other = malloc(x.n * x.blk + 64);
    MP_CHECK(m, x.buf && x.other, "no memory");
    x.all = (mp_guard){x.buf, 2 * x.n * x.blk};
    x.oth = (mp_guard){x.other, x.n * x.blk};
    mp_misuse_arguments(&x);
    mp_misuse_layouts(&x);
    mp_misuse_handles(&x);
    mp_misuse_pool(&x);
    mp_misuse_overflow(&x);
    free(x.buf);
    free(x.other);
}

int mp_rank_misuse(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_misuse");
    m.cfg.max_requests = 4;
    /* An arena one byte short: ZC_TOO_SMALL, both sizes named, nothing returned. */
    size_t need = zc_comm_arena_bytes(&m.cfg);
    MP_CHECK(&m, need > 0, "zc_comm_arena_bytes returned 0");
    void *arena = malloc(need);
    int dummy;
    zc_comm *c = (zc_comm *)(void *)&dummy;
    MP_ST(&m, zc_comm_init(&m.cfg, arena, need - 1, &c), ZC_TOO_SMALL);
    MP_CHECK(&m, c == NULL, "a failed zc_comm_init left *comm_out set");
    char need_s[32], short_s[32];
    snprintf(need_s, sizeof need_s, "%zu", need);
    snprintf(short_s, sizeof short_s, "%zu", need - 1);
    MP_CHECK(&m, strstr(zc_init_error_text(), need_s) && strstr(zc_init_error_text(), short_s),
             "zc_init_error_text \"%s\" does not name both %s and %s", zc_init_error_text(),
             short_s, need_s);
    free(arena);
    mp_init(&m);
    mp_misuse_checks(&m);
    if (m.rank == 0) printf("mp-info: every misuse refused with its argument named\n");
    mp_fini(&m);
    return 0;
}

/* A few small calls on both lanes (collectives, then a send/recv ring), each channel left with
 * fewer consumed messages than a credit batch, then zc_comm_fini on every rank at once (or one
 * after another, MP_FINI_STAGGER_MS): it must return well within a second, since fini hands
 * the last batch's credits back (a wire that waits at close for its messages to be credited
 * and its clean-close mark to land, transport_ib, would otherwise wait its whole flush bound,
 * as for a peer that closed first). */
int mp_rank_fini_prompt(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_fini_prompt");
    mp_init(&m);
    for (int i = 0; i < 3; i++) {
        float v = (float)(m.rank + 1u), sum = 0;
        zc_req r;
        MP_ST(&m, zc_allreduce(m.comm, &v, &sum, 1, ZC_FLOAT32, ZC_SUM, &r), ZC_OK);
        MP_ST(&m, zc_wait(m.comm, &r), ZC_OK);
        MP_CHECK(&m, sum == (float)(m.n * (m.n + 1u) / 2u), "sum %g", (double)sum);
    }
    if (m.n > 1) {
        uint32_t to = (m.rank + 1u) % m.n, from = (m.rank + m.n - 1u) % m.n, out = m.rank, in = 0;
        zc_req s, r;
        MP_ST(&m, zc_recv(m.comm, &in, 1, ZC_UINT32, from, &r), ZC_OK);
        MP_ST(&m, zc_send(m.comm, &out, 1, ZC_UINT32, to, &s), ZC_OK);
        MP_ST(&m, zc_wait(m.comm, &s), ZC_OK);
        MP_ST(&m, zc_wait(m.comm, &r), ZC_OK);
        MP_CHECK(&m, in == from, "received %u from rank %u", in, from);
    }
    mp_barrier(&m);
    /* MP_FINI_CRASH=k: rank k exits without closing (its process gone, no clean-close mark):
     * the others' fini must not wait for it as for a live peer. */
    if (getenv("MP_FINI_CRASH") && m.rank == (uint32_t)atol(getenv("MP_FINI_CRASH"))) {
        printf("mp-info: rank %u exits without zc_comm_fini\n", m.rank);
        fflush(stdout);
        _exit(0);
    }
    /* MP_FINI_STAGGER_MS: rank r closes r times that late, after its peers closed. */
    if (getenv("MP_FINI_STAGGER_MS")) mp_sleep_ms(m.rank * atol(getenv("MP_FINI_STAGGER_MS")));
    if (getenv("MP_FINI_CRASH")) mp_sleep_ms(100); /* the crashed rank is gone by then */
    uint64_t t0 = mp_now_ns();
    mp_fini(&m);
    double ms = mp_ms(mp_now_ns() - t0);
    MP_CHECK(&m, ms < 1000.0, "zc_comm_fini took %.0f ms after small calls", ms);
    printf("mp-info: rank %u: zc_comm_fini took %.1f ms\n", m.rank, ms);
    return 0;
}

/* ---- overlay mode between processes --------------------------------------------------------- */

/* MP_PER_HOST ranks per claimed host (ZC_HOST_ID, set here per rank before init: zcrun hands
 * every rank the same environment): rank r claims host r / MP_PER_HOST. */
static uint32_t mp_claim_host(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    if (zc_config_from_env(&cfg) != ZC_OK) return 1;
    uint32_t per = mp_env_u32("MP_PER_HOST", 3);
    char id[64];
    snprintf(id, sizeof id, "simhost-%u", cfg.rank / (per ? per : 1u));
    if (!getenv("MP_KEEP_HOST_ID")) setenv("ZC_HOST_ID", id, 1);
    return per ? per : 1u;
}

/* MP_BATCHES (12) batches of 1 to 4 calls drawn by mp_draw_op (counts above cap, when not 0,
 * cut to just below it; MP_COUNT_CAP, when set, replaces cap) issued together and checked
 * against the reference; the seeds' salts keep each job's draws its own. Returns the calls
 * checked. */
static uint64_t mp_batches(mp_ctx *m, uint64_t salt, uint64_t lsalt, uint64_t usalt, size_t cap,
                           const char *what) {
    uint32_t batches = mp_env_u32("MP_BATCHES", 12);
    if (mp_env_u32("MP_COUNT_CAP", 0)) cap = mp_env_u32("MP_COUNT_CAP", 0);
    zt_rng g = {mp_seed ^ salt};
    zt_rng local = {mp_seed ^ lsalt ^ ((uint64_t)m->rank << 40)};
    uint64_t calls = 0;
    mp_op ops[4];
    for (uint32_t b = 0; b < batches; b++) {
        size_t k = 1 + (size_t)zt_rng_below(&g, 4);
        for (size_t j = 0; j < k; j++) {
            mp_draw_op(&g, m, &ops[j]);
            if (cap && ops[j].count > cap) ops[j].count = cap - (size_t)zt_rng_below(&g, 7);
            ops[j].uid = mp_mix(mp_seed ^ ((uint64_t)b << 20) ^ (j << 4) ^ m->n ^ usalt);
            mp_op_alloc(&ops[j]);
            mp_op_fill(&ops[j], ops[j].sbuf, ops[j].rbuf);
        }
        char where[64];
        snprintf(where, sizeof where, "%s batch %u of %zu calls", what, b, k);
        mp_issue_and_wait(m, ops, k, &local, where);
        for (size_t j = 0; j < k; j++) {
            mp_op_check(m, &ops[j], where);
            mp_op_free(&ops[j]);
            calls++;
        }
    }
    return calls;
}

/* This rank's connections are exactly the definition's, and the address table the wire
 * attached with holds its connections' blobs only, in connection order (transport_ib's blob
 * names its rank 16 bytes in). */
static void mp_ov_check_conns(const mp_ctx *m, uint32_t per) {
    const zc_comm *c = m->comm;
    uint32_t k = 0;
    for (uint32_t q = 0; q < m->n; q++) {
        bool want = zr_overlay_member(m->n, per, m->rank, q);
        MP_CHECK(m, (c->conn[q] != ZC_NO_CONN) == want, "rank %u %s a connection", q,
                 want ? "is not" : "is");
        if (!want) continue;
        MP_CHECK(m, c->conn[q] == k && c->conn_peer[k] == q, "connection %u is rank %u", k, q);
        k++;
    }
    MP_CHECK(m, c->nconn == k && k < m->n, "%u connections of %u ranks, %u by definition",
             c->nconn, m->n, k);
    zc_footprint fp;
    MP_ST(m, zc_comm_footprint(&m->cfg, per, &fp), ZC_OK);
    MP_CHECK(m, fp.peers == k - 1u || strcmp(zc_comm_transport(c), "ib") != 0,
             "the footprint says %u peers, the communicator has %u", fp.peers, k - 1u);
    /* The address table holds the connections' blobs only, in connection order, sized for
     * zc__conn_cap of them: nothing past the first nconn (zero since the carve). */
    zc_wire_geom g = zc__geom(c, c->comm_id, 0);
    size_t ab = c->wire->addr_bytes(&g), seen = 0;
    for (uint32_t u = c->nconn; u < zc__conn_cap(&c->cfg) && ab; u++) {
        const uint8_t *blob = c->addrs + (size_t)u * ab;
        size_t j = 0;
        while (j < ab && !blob[j]) j++;
        seen += j < ab;
    }
    MP_CHECK(m, seen == 0, "the address table holds %zu blobs past its %u connections", seen,
             c->nconn);
    if (m->rank == 1)
        printf("mp-info: rank 1: %u connections, a table of %u blobs for %u ranks\n", c->nconn,
               zc__conn_cap(&c->cfg), m->n);
    if (strcmp(zc_comm_transport(c), "ib") != 0) return;
    for (uint32_t i = 0; i < c->nconn; i++) {
        uint32_t rank;
        memcpy(&rank, c->addrs + (size_t)i * ab + 16u, sizeof rank);
        MP_CHECK(m, rank == c->conn_peer[i], "address entry %u is rank %u's, not rank %u's", i,
                 rank, c->conn_peer[i]);
    }
}

/* Overlay mode (overlay_min_ranks 2) on every rank, hosts claimed through ZC_HOST_ID: the
 * connection set, then batches of every collective (broadcasts above bcast_tree_max_bytes by
 * van de Geijn; the send/recv ring, whose neighbours are connections) against the reference,
 * then a split into two overlay children that all_reduce. */
/* Claims this rank's host, then configures overlay mode (from 2 ranks, the log-depth
 * algorithms from 1) with slots of 1 KiB; returns the ranks per claimed host. */
static uint32_t mp_overlay_config(mp_ctx *m, const char *prog, uint32_t slots) {
    uint32_t per = mp_claim_host();
    mp_config(m, prog);
    m->cfg.slot_bytes = 1024, m->cfg.slots = slots;
    m->cfg.log_min_ranks = 1, m->cfg.overlay_min_ranks = 2;
    return per;
}

int mp_rank_overlay(void) {
    mp_ctx m;
    uint32_t per = mp_overlay_config(&m, "mp_rank_overlay", 4);
    m.cfg.bcast_tree_max_bytes = 4096;
    mp_init(&m);
    mp_ov_check_conns(&m, per);
    uint64_t t0 = mp_now_ns();
    uint64_t calls = mp_batches(&m, (0x0e1aull << 32) ^ m.n, 0x10ca1ull, 0x0eull, 3000,
                                "overlay");
    /* Two children (even and odd ranks), each in overlay mode from 2 ranks. */
    zc_comm *child = NULL;
    size_t cb = 0;
    {
        zc_config cc = m.cfg;
        cc.nranks = (m.n + 1u - m.rank % 2u) / 2u, cc.rank = m.rank / 2u;
        cb = zc_comm_arena_bytes(&cc);
    }
    void *carena = malloc(cb);
    MP_CHECK(&m, carena != NULL, "no memory for the child's arena");
    MP_ST(&m, zc_comm_split(m.comm, (int)(m.rank % 2u), (int)m.rank, carena, cb, &child), ZC_OK);
    uint32_t *who = malloc(sizeof *who * zc_comm_size(child));
    MP_CHECK(&m, who != NULL, "no memory for the child's rank table");
    for (uint32_t r = 0; r < zc_comm_size(child); r++) who[r] = 2u * r + m.rank % 2u;
    mp_op o = {.kind = MP_ALLREDUCE, .dt = ZC_FLOAT32, .op = ZC_SUM, .count = 777};
    o.n = zc_comm_size(child), o.me = zc_comm_rank(child), o.who = who;
    o.uid = mp_mix(mp_seed ^ 0xc41dull ^ (m.rank % 2u));
    mp_op_alloc(&o);
    mp_op_fill(&o, o.sbuf, o.rbuf);
    zc_status st = mp_op_issue(child, &o);
    if (st == ZC_OK) st = zc_wait(child, &o.req[0]);
    MP_CHECK(&m, st == ZC_OK, "the child's allreduce (child rank %u of %u) returned %s: %s",
             zc_comm_rank(child), zc_comm_size(child), zc_status_name(st),
             zc_comm_error_text(child));
    mp_op_check(&m, &o, "child allreduce");
    mp_op_free(&o);
    MP_CHECK(&m, child->nconn <= child->nranks, "the child has %u connections", child->nconn);
    MP_ST(&m, zc_comm_fini(child), ZC_OK);
    free(carena);
    free(who);
    mp_barrier(&m);
    if (m.rank == 0)
        printf("mp-info: overlay n=%u, %u per claimed host, transport %s: %u connections on rank "
               "0, %llu calls checked, %.1f s\n", m.n, per, zc_comm_transport(m.comm),
               m.comm->nconn, (unsigned long long)calls, mp_ms(mp_now_ns() - t0) / 1000.0);
    mp_fini(&m);
    return 0;
}

/* ---- the two-wire communicator (ZC_TRANSPORT=hier) ----------------------------------------- */

/* Which instance carries each connection (the claimed host's ranks on shm, the others on the
 * inter-host instance), where placement may happen, and what the footprint says per instance. */
static void mp_hier_check(const mp_ctx *m) {
    const zc_comm *c = m->comm;
    uint32_t mine = mp_layout_host(m->rank), local = 0, remote = 0, nconn[2], cap[2];
    MP_CHECK(m, !strcmp(zc_comm_transport(c), "hier"), "the transport is %s, not hier",
             zc_comm_transport(c));
    for (uint32_t i = 0; i < c->nconn; i++) {
        uint32_t p = c->conn_peer[i];
        bool same = mp_layout_host(p) == mine;
        if (p == m->rank) continue;
        local += same;
        remote += !same;
        MP_CHECK(m, zc__hier_puts(c->wire_state, p) == (!same && !zc__test_hier_shm),
                 "rank %u (%s host) %s be placed", p, same ? "this" : "another",
                 same ? "must not" : "may");
    }
    uint32_t most = 0; /* the largest claimed host: the shm instance's cap, on every rank */
    for (uint32_t r = 0, k = 0; r < m->n; r++, k = 0) {
        for (uint32_t p = 0; p < m->n; p++) k += mp_layout_host(p) == mp_layout_host(r);
        most = k > most ? k : most;
    }
    zc__hier_shape(c->wire_state, nconn, cap);
    MP_CHECK(m, nconn[0] == local + 1u && nconn[1] == remote + 1u && cap[0] == most &&
                    nconn[1] <= cap[1],
             "instances hold %u and %u connections (caps %u, %u), expected %u and %u (shm cap "
             "%u)", nconn[0], nconn[1], cap[0], cap[1], local + 1u, remote + 1u, most);
    zc_footprint fp;
    uint32_t per = (uint32_t)strtoul(getenv("MP_LAYOUT"), NULL, 10);
    MP_ST(m, zc_comm_footprint(&m->cfg, per, &fp), ZC_OK);
    MP_CHECK(m, fp.transport == ZC_TRANSPORT_HIER && fp.shared_bytes > 0 &&
                    (zc__test_hier_shm ? fp.qps == 0 && fp.registered_bytes == 0
                                       : fp.qps > 0 && fp.registered_bytes > 0),
             "the footprint says transport %u, %zu shared, %zu registered bytes, %u qps",
             (unsigned)fp.transport, fp.shared_bytes, fp.registered_bytes, fp.qps);
    /* Rank 0's host is the layout's first, as the footprint's uniform hosts make it. */
    uint32_t qps = zc__test_hier_shm ? 0u : remote * m->cfg.ib_qps_per_peer;
    MP_CHECK(m, m->rank != 0 || (fp.peers == local + remote && fp.qps == qps),
             "the footprint says %u peers and %u qps, rank 0 has %u peers, %u of them across "
             "hosts (%u qps)", fp.peers, fp.qps, local + remote, remote, qps);
    if (m->rank == 0)
        printf("mp-info: rank 0: %u + %u connections (shm, %s), footprint at %u per host: "
               "%zu shared, %zu registered bytes, %u qps, %u peers\n", local, remote,
               zc__test_hier_shm ? "shm" : "ib", per, fp.shared_bytes, fp.registered_bytes,
               fp.qps, fp.peers);
}

/* A child of the hier communicator: all_reduce over it against the reference, its transport
 * as expected (shm for one claimed host's ranks, hier when it spans hosts). */
static void mp_hier_child(mp_ctx *m, int color, uint32_t size, uint32_t crank, const uint32_t *who,
                          const char *want) {
    zc_config cc = m->cfg;
    cc.nranks = size, cc.rank = crank;
    size_t cb = zc_comm_arena_bytes(&cc);
    void *carena = malloc(cb);
    zc_comm *child = NULL;
    MP_CHECK(m, carena != NULL, "no memory for the child's arena");
    MP_ST(m, zc_comm_split(m->comm, color, (int)m->rank, carena, cb, &child), ZC_OK);
    MP_CHECK(m, !strcmp(zc_comm_transport(child), want), "the child (color %d) runs on %s, "
             "expected %s", color, zc_comm_transport(child), want);
    mp_op o = {.kind = MP_ALLREDUCE, .dt = ZC_INT32, .op = ZC_SUM, .count = 1001};
    o.n = zc_comm_size(child), o.me = zc_comm_rank(child), o.who = who;
    o.uid = mp_mix(mp_seed ^ 0x41e2u ^ (uint32_t)color);
    mp_op_alloc(&o);
    mp_op_fill(&o, o.sbuf, o.rbuf);
    zc_status st = mp_op_issue(child, &o);
    if (st == ZC_OK) st = zc_wait(child, &o.req[0]);
    MP_CHECK(m, st == ZC_OK, "the child's allreduce returned %s: %s", zc_status_name(st),
             zc_comm_error_text(child));
    mp_op_check(m, &o, "hier child allreduce");
    mp_op_free(&o);
    MP_ST(m, zc_comm_fini(child), ZC_OK);
    free(carena);
}

/* ZC_TRANSPORT=hier with hosts claimed by MP_LAYOUT (MP_HIER_SHM=1: both instances shm; under
 * tests/rxe the inter-host one is ib), MP_OVERLAY=1 for overlay mode (MP_HBLOCK: the blocks of
 * the hierarchical all_reduce every rank must have found): the connections'
 * instances, batches of every collective against the reference (in place among them), then a
 * child per claimed host (shm) and an even/odd child (hier while it spans hosts). */
int mp_rank_hier(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_hier");
    m.cfg.slot_bytes = 1024, m.cfg.slots = 4;
    if (mp_env_u32("MP_OVERLAY", 0)) m.cfg.log_min_ranks = 1, m.cfg.overlay_min_ranks = 2;
    mp_init(&m);
    mp_hier_check(&m);
    uint32_t blocks = mp_env_u32("MP_HBLOCK", 0); /* the claimed hosts' blocks, when given */
    MP_CHECK(&m, !getenv("MP_HBLOCK") || m.comm->hblock == blocks, "rank %u found blocks of %u "
             "ranks for the hierarchical all_reduce, not %u", m.rank, m.comm->hblock, blocks);
    uint64_t t0 = mp_now_ns();
    uint64_t calls = mp_batches(&m, (0x41e4ull << 32) ^ m.n, 0x10ca2ull, 0x41ull, 0, "hier");
    uint32_t *who = malloc(sizeof *who * m.n), size = 0, crank = 0, host = mp_layout_host(m.rank);
    MP_CHECK(&m, who != NULL, "no memory for the children's rank tables");
    bool spans = false;
    for (uint32_t r = 0; r < m.n; r++)
        if (mp_layout_host(r) == host) who[size++] = r;
    for (uint32_t r = 0; r < size; r++) crank = who[r] == m.rank ? r : crank;
    mp_hier_child(&m, (int)host, size, crank, who, "shm");
    size = 0;
    for (uint32_t r = m.rank % 2u; r < m.n; r += 2u) {
        spans = spans || mp_layout_host(r) != mp_layout_host(m.rank % 2u);
        who[size++] = r;
    }
    mp_hier_child(&m, (int)(m.rank % 2u), size, m.rank / 2u, who, spans ? "hier" : "shm");
    free(who);
    mp_barrier(&m);
    if (m.rank == 0)
        printf("mp-info: hier n=%u, layout %s, overlay %s: %u connections on rank 0, %llu calls "
               "checked, %.1f s\n", m.n, getenv("MP_LAYOUT"), m.comm->cfg.overlay_min_ranks ?
               "on" : "off", m.comm->nconn, (unsigned long long)calls,
               mp_ms(mp_now_ns() - t0) / 1000.0);
    mp_fini(&m);
    return 0;
}

/* The bytes message m of rank s to rank d carries in the relayed send/recv job. */
static void mp_relay_pattern(uint8_t *p, size_t bytes, uint32_t s, uint32_t d, uint32_t m) {
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)(s * 131u + d * 31u + m * 7u + i * 13u + (i >> 8));
}

/* Overlay mode (hosts claimed through ZC_HOST_ID, 2 slots of 1 KiB) between processes: every
 * ordered pair of ranks exchanges two messages (tags interleaved) in round k (rank r to r + k),
 * at 0 B, 8 B, one slot, several slots and a ragged size, a barrier after each round: most pairs
 * have no connection and go through relays, which forward whether or not they have a call in
 * flight. Byte for byte.
 * MP_CASE=kill: then rank 7 (the relay of rank 0's route to rank 6 at 9 ranks: 0, 7, 6) dies
 * by SIGKILL; rank 0's send and rank 6's receive over it end with ZC_PEER_LOST or
 * ZC_TIMED_OUT within the deadline, and so does every survivor's next call (after a second of
 * zc_progress alone). */
int mp_rank_overlay_relay(void) {
    mp_ctx m;
    uint32_t per = mp_overlay_config(&m, "mp_rank_overlay_relay", 2);
    m.cfg.overlay_relay = 1;
    m.cfg.timeout_ns = 4000 * MP_MS;
    mp_init(&m);
    uint32_t n = m.n, me = m.rank, relayed = 0;
    for (uint32_t q = 0; q < n; q++) relayed += m.comm->conn[q] == ZC_NO_CONN;
    static uint8_t out[2][3200], in[2][3200], want[3200];
    const size_t sizes[] = {0, 8, 1024, 3u * 1024u + 77u, 2048};
    for (uint32_t k = 1; k < n; k++) {
        uint32_t to = (me + k) % n, from = (me + n - k) % n;
        size_t bytes = sizes[k % 5u];
        zc_req q[4];
        for (uint32_t j = 0; j < 2; j++) {
            mp_relay_pattern(out[j], bytes, me, to, 2u * k + j);
            memset(in[j], 0xA5, bytes + 1u);
            MP_ST(&m, zc_send_tagged(m.comm, out[j], bytes, ZC_UINT8, to, 2u * k + j, &q[2u * j]),
                  ZC_OK);
            MP_ST(&m, zc_recv_tagged(m.comm, in[j], bytes, ZC_UINT8, from, 2u * k + j, NULL,
                                     &q[2u * j + 1u]), ZC_OK);
        }
        for (uint32_t j = 0; j < 4; j++) MP_ST(&m, zc_wait(m.comm, &q[j]), ZC_OK);
        for (uint32_t j = 0; j < 2; j++) {
            mp_relay_pattern(want, bytes, from, me, 2u * k + j);
            MP_CHECK(&m, memcmp(in[j], want, bytes) == 0 && in[j][bytes] == 0xA5,
                     "round %u: message %u of %zu B from rank %u differs", k, j, bytes, from);
        }
        /* No rank's next round may reach a rank still in this one: a relayed message whose
         * receive is not issued yet holds its ring (docs/scale.md). */
        mp_barrier(&m);
    }
    mp_barrier(&m);
    if (me == 0)
        printf("mp-info: relayed send/recv n=%u, %u per claimed host: every pair ok, rank 0 "
               "reaches %u ranks through relays\n", n, per, relayed);
    if (!getenv("MP_CASE") || strcmp(getenv("MP_CASE"), "kill") != 0 || n != 9) {
        mp_fini(&m);
        return 0;
    }
    if (me == 7) {
        mp_sleep_ms(50);
        raise(SIGKILL);
    }
    zc_req q;
    uint64_t t0 = mp_now_ns();
    zc_status st = ZC_OK;
    if (me == 0) {
        MP_CHECK(&m, zc__relay_next(n, 0, 6) == 7 && m.comm->conn[6] == ZC_NO_CONN,
                 "rank 0's route to rank 6 is not through rank 7");
        mp_sleep_ms(200);
        st = zc_send(m.comm, out[0], 3000, ZC_UINT8, 6, &q);
        if (st == ZC_OK) st = zc_wait(m.comm, &q);
    } else if (me == 6) {
        st = zc_recv(m.comm, in[0], 3000, ZC_UINT8, 0, &q);
        if (st == ZC_OK) st = zc_wait(m.comm, &q);
        MP_CHECK(&m, st == ZC_PEER_LOST || st == ZC_TIMED_OUT, "the receive over the dead relay "
                 "returned %s: %s", zc_status_name(st), zc_comm_error_text(m.comm));
    }
    if (me != 0 && me != 6) /* relays with no call in flight for a while */
        while (mp_now_ns() - t0 < 1000 * MP_MS && st == ZC_OK) st = zc_progress(m.comm);
    if (st == ZC_OK) { /* every survivor: a call that needs rank 7 */
        st = zc_barrier(m.comm, &q);
        if (st == ZC_OK) st = zc_wait(m.comm, &q);
    }
    double ms = mp_ms(mp_now_ns() - t0);
    printf("mp-info: rank %u: %s after %.0f ms: %s\n", me, zc_status_name(st), ms,
           zc_comm_error_text(m.comm));
    MP_CHECK(&m, (st == ZC_PEER_LOST || st == ZC_TIMED_OUT) && ms < 4500.0,
             "got %s after %.0f ms", zc_status_name(st), ms);
    printf("mp-info: rank %u relay lost ok\n", me);
    fflush(stdout);
    MP_ST(&m, zc_comm_abort(m.comm), ZC_OK);
    mp_fini(&m);
    return 0;
}

/* Overlay mode's misuse: MP_CASE=overlay (rank 1 asks for another overlay_min_ranks),
 * MP_CASE=host_id (rank 1 claims an empty host) and MP_CASE=relay (rank 1 alone asks for
 * overlay_relay) fail init on every rank with a sentence naming it, within the init deadline's
 * fraction, not by timing out. */
int mp_rank_overlay_misuse(void) {
    const char *which = getenv("MP_CASE");
    bool host_case = which && !strcmp(which, "host_id");
    bool relay_case = which && !strcmp(which, "relay");
    (void)mp_claim_host();
    mp_ctx m;
    mp_config(&m, "mp_rank_overlay_misuse");
    m.cfg.log_min_ranks = 1, m.cfg.overlay_min_ranks = 2;
    m.cfg.slot_bytes = 1024, m.cfg.slots = 2;
    if (m.rank == 1 && relay_case) m.cfg.overlay_relay = 1;
    else if (m.rank == 1 && !host_case) m.cfg.overlay_min_ranks = 3;
    if (m.rank == 1 && host_case) setenv("ZC_HOST_ID", "", 1);
    size_t bytes = zc_comm_arena_bytes(&m.cfg);
    m.arena = malloc(bytes);
    uint64_t t0 = mp_now_ns();
    zc_status st = zc_comm_init(&m.cfg, m.arena, bytes, &m.comm);
    double ms = mp_ms(mp_now_ns() - t0);
    const char *text = zc_init_error_text();
    zc_status want = host_case ? ZC_INVALID_ARG : ZC_MISMATCH;
    MP_CHECK(&m, st == want, "zc_comm_init returned %s, expected %s (%s)", zc_status_name(st),
             zc_status_name(want), text);
    const char *cause = host_case ? "ZC_HOST_ID" : relay_case ? "overlay_relay" : "overlay_min_ranks";
    MP_CHECK(&m, strstr(text, cause) != NULL,
             "the sentence \"%s\" does not name the cause", text);
    MP_CHECK(&m, ms < 5000.0, "init took %.0f ms to fail", ms);
    printf("mp-info: rank %u: %s after %.0f ms: %s\n", m.rank, zc_status_name(st), ms, text);
    free(m.arena);
    return 0;
}

/* A peer that sends its last message and exits while this rank is descheduled between its
 * step pass and its clock read (zc__test_clock sleeps there, once): rank 0 must take the
 * message waiting in its window, not call rank 1 lost. */
static uint32_t mp_clock_calls;
static void mp_stall_at_clock(const zc_comm *comm) {
    (void)comm;
    if (++mp_clock_calls == 2) mp_sleep_ms(400); /* rank 1 sends and exits meanwhile */
}

int mp_rank_late_exit(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_late_exit");
    mp_init(&m);
    uint32_t v = 0;
    zc_req r;
    if (m.rank == 1) {
        v = 1234567u;
        mp_sleep_ms(100);
        MP_ST(&m, zc_send(m.comm, &v, 1, ZC_UINT32, 0, &r), ZC_OK);
        MP_ST(&m, zc_wait(m.comm, &r), ZC_OK);
        printf("mp-result: rank 1: sent and exits\n");
    } else {
        zc__test_clock = mp_stall_at_clock;
        MP_ST(&m, zc_recv(m.comm, &v, 1, ZC_UINT32, 1, &r), ZC_OK);
        zc_status st = zc_wait(m.comm, &r);
        zc__test_clock = NULL;
        MP_CHECK(&m, st == ZC_OK, "zc_recv: %s (%s)", zc_status_name(st),
                 zc_comm_error_text(m.comm));
        MP_CHECK(&m, v == 1234567u && mp_clock_calls >= 2, "received %u, %u clock reads", v,
                 mp_clock_calls);
        printf("mp-result: rank 0: took the message of a rank that exited (%u clock reads)\n",
               mp_clock_calls);
    }
    fflush(stdout);
    mp_fini(&m);
    return 0;
}

/* 3 ranks, a reduce of 4 int32 to rank 0. Rank 1 sends its part, finishes, closes
 * (zc_comm_fini) and exits while rank 2 joins 300 ms late (MP_LATE_MS): rank 0, stalled on
 * rank 2 through several liveness checks, must not count rank 1's clean exit as a loss. MP_CASE=early: rank 1
 * closes before the reduce; then ranks 0 and 2 fail with ZC_PEER_LOST, rank 0 (which waits on
 * rank 1) saying rank 1 closed, rank 2 naming rank 0 as the detector. */
int mp_rank_clean_exit(void) {
    mp_ctx m;
    mp_config(&m, "mp_rank_clean_exit");
    mp_init(&m);
    bool early = getenv("MP_CASE") && strcmp(getenv("MP_CASE"), "early") == 0;
    int32_t in[4], out[4] = {0};
    for (int i = 0; i < 4; i++) in[i] = (int32_t)(m.rank * 100u) + i;
    if (m.rank == 1 && early) {
        printf("mp-result: rank 1 closes before the reduce\n");
        fflush(stdout);
        mp_fini(&m);
        return 0;
    }
    if (m.rank == 2) mp_sleep_ms(getenv("MP_LATE_MS") ? atol(getenv("MP_LATE_MS")) : 300);
    zc_req r;
    MP_ST(&m, zc_reduce(m.comm, in, out, 4, ZC_INT32, ZC_SUM, 0, &r), ZC_OK);
    zc_status st = zc_wait(m.comm, &r);
    if (early) {
        const char *text = zc_comm_error_text(m.comm);
        MP_CHECK(&m, st == ZC_PEER_LOST && strstr(text, m.rank == 0 ? "zc_comm_fini" :
                                                  "rank 0 detected") != NULL,
                 "the reduce returned %s (%s), not ZC_PEER_LOST naming %s", zc_status_name(st),
                 text, m.rank == 0 ? "rank 1's close" : "rank 0 as the detector");
        printf("mp-result: rank %u: %s: %s\n", m.rank, zc_status_name(st), text);
        free(m.arena); /* a failed communicator: its fini is not the point here */
        return 0;
    }
    MP_CHECK(&m, st == ZC_OK, "the reduce returned %s: %s", zc_status_name(st),
             zc_comm_error_text(m.comm));
    if (m.rank == 0)
        for (int i = 0; i < 4; i++)
            MP_CHECK(&m, out[i] == 300 + 3 * i, "element %d is %d", i, out[i]);
    printf("mp-result: rank %u: reduce done\n", m.rank);
    fflush(stdout);
    mp_fini(&m);
    return 0;
}

/* ---- the tests: start the rank programs --------------------------------------------------- */

static char mp_out[1 << 20];

/* Echoes the rank programs' own report lines (and zcrun's) from out. */
static void mp_echo(const char *out, bool everything) {
    if (everything) {
        size_t len = strlen(out);
        printf("    --- output (%zu bytes%s) ---\n%s\n", len,
               len > 12000 ? ", last 12000" : "", len > 12000 ? out + len - 12000 : out);
        return;
    }
    for (const char *p = out; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (memmem(p, len, "mp-info", 7) || memmem(p, len, "mp-result", 9) ||
            memmem(p, len, "mp FAILED", 9))
            printf("    %.*s\n", (int)len, p);
        p += len + (e ? 1 : 0);
    }
}

/* Runs n ranks of prog and requires zcrun's exit status want. */
static void mp_job(uint32_t n, const char *prog, uint32_t timeout_s, const char *const env[],
                   int want) {
    int rc = zt_run_ranks(n, prog, timeout_s, env, mp_out, sizeof mp_out);
    mp_echo(mp_out, rc != want);
    ZT_CHECK_EQ(rc, want);
    ZT_CHECK(strstr(mp_out, "mp FAILED") == NULL);
}

void mp_collectives_match_reference_n1(void) { mp_job(1, "mp_rank_sweep", 50, NULL, 0); }
void mp_collectives_match_reference_n2(void) { mp_job(2, "mp_rank_sweep", 50, NULL, 0); }
void mp_collectives_match_reference_n3(void) { mp_job(3, "mp_rank_sweep", 50, NULL, 0); }
/* The sweep with registered buffers (MP_REGISTER): on shared memory registration changes no
 * result and nothing is put in place; tests/rxe runs it over ib, where streams are. */
void mp_registered_buffers_match_reference_n3(void) {
    static const char *const env[] = {"MP_REGISTER=1", "MP_BATCHES=60", NULL};
    mp_job(3, "mp_rank_sweep", 50, env, 0);
}
void mp_collectives_match_reference_n4(void) { mp_job(4, "mp_rank_sweep", 50, NULL, 0); }
void mp_collectives_match_reference_n5(void) { mp_job(5, "mp_rank_sweep", 50, NULL, 0); }
void mp_collectives_match_reference_n8(void) { mp_job(8, "mp_rank_sweep", 50, NULL, 0); }

/* Processes under zcrun, every collective at 9 B to 4 KiB per message (flagged lines). */
void mp_flagged_line_calls_match_reference(void) {
    static const char *const wide[] = {"MP_LINES_MAX=4096", NULL};
    for (uint32_t n = 2; n <= 5; n += 3)
        for (int w = 0; w < 2; w++) {
            mp_job(n, "mp_rank_lines", 60, w ? wide : NULL, 0);
            ZT_CHECK(strstr(mp_out, "flagged-line calls on") != NULL);
        }
}

void mp_allreduce_64mib_float32_matches_reference_n2(void) {
    mp_job(2, "mp_rank_allreduce_big", 50, NULL, 0);
}

/* Processes under zcrun reduce in the rank tree, not the linear order, on 4, 5, 7, 8 ranks. */
void mp_reductions_give_the_rank_trees_bits_not_the_linear_orders(void) {
    for (uint32_t n = 4; n <= 8; n++)
        if (n != 6) mp_job(n, "mp_rank_order", 50, NULL, 0);
}

void mp_persistent_plans_restart(void) { mp_job(3, "mp_rank_plans", 50, NULL, 0); }

void mp_split_children_work_concurrently_with_parent(void) {
    mp_job(4, "mp_rank_split", 50, NULL, 0);
}

/* True when one line of out contains a, b and c. */
static bool mp_line_has(const char *out, const char *a, const char *b, const char *c) {
    for (const char *p = out; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (memmem(p, len, a, strlen(a)) && memmem(p, len, b, strlen(b)) &&
            memmem(p, len, c, strlen(c)))
            return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

void mp_mismatch_is_reported_on_every_rank(void) {
    static const struct {
        const char *env, *a, *b; /* the two calls' distinguishing words */
    } cases[] = {{"MP_CASE=count", "count 10", "count 20"},
                 {"MP_CASE=op", "sum", "max"},
                 {"MP_CASE=dtype", "float32", "int32"},
                 {"MP_CASE=root", "zc_broadcast", "sequence"}};
    for (uint32_t n = 2; n <= 3; n++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const char *env[] = {cases[i].env, NULL};
            int rc = zt_run_ranks(n, "mp_rank_mismatch", 15, env, mp_out, sizeof mp_out);
            bool ok = rc == 0 && !strstr(mp_out, "mp FAILED") &&
                      mp_line_has(mp_out, "ZC_MISMATCH after", cases[i].a, cases[i].b);
            for (uint32_t r = 0; r < n; r++) {
                char line[64];
                snprintf(line, sizeof line, "[%u] mp-info: rank %u case", r, r);
                ok = ok && mp_line_has(mp_out, line, "ZC_MISMATCH after", "sequence");
            }
            if (!ok) { /* quiet on success: eight jobs of report lines */
                printf("    n=%u %s: zcrun exit %d\n", n, cases[i].env, rc);
                mp_echo(mp_out, true);
            }
            ZT_CHECK(ok);
        }
}

void mp_rank_that_never_joins_times_out(void) {
    mp_job(3, "mp_rank_never_joins", 20, NULL, 0);
    ZT_CHECK(strstr(mp_out, "[0] mp-info: rank 0: ZC_TIMED_OUT") != NULL);
    ZT_CHECK(strstr(mp_out, "[1] mp-info: rank 1: ZC_TIMED_OUT") != NULL);
}

/* Three ranks of prog under zcrun --keep-going (a killed rank does not stop the others), its
 * output in mp_out; returns zcrun's exit status. */
static int mp_run_keep_going(const char *prog, const char *const env[]) {
    char zcrun[4200], zctest[4200];
    snprintf(zcrun, sizeof zcrun, "%s/zcrun", zt_build_dir());
    snprintf(zctest, sizeof zctest, "%s/zctest", zt_build_dir());
    const char *argv[] = {zcrun, "-n", "3", "--timeout", "30", "--keep-going",
                          zctest, "--rank", prog, NULL};
    return zt_run(argv, env, mp_out, sizeof mp_out, 40000, NULL);
}

static void mp_killed_peer_case(const char *const env[]) {
    int rc = mp_run_keep_going("mp_rank_killed", env);
    bool ok = rc == 128 + SIGKILL && strstr(mp_out, "[0] mp-info: rank 0 peer lost ok") &&
              strstr(mp_out, "[1] mp-info: rank 1 peer lost ok") &&
              !strstr(mp_out, "mp FAILED");
    mp_echo(mp_out, !ok);
    ZT_CHECK_EQ(rc, 128 + SIGKILL);
    ZT_CHECK(strstr(mp_out, "zcrun: rank 2 killed by signal SIGKILL") != NULL);
    ZT_CHECK(strstr(mp_out, "[0] mp-info: rank 0 peer lost ok") != NULL);
    ZT_CHECK(strstr(mp_out, "[1] mp-info: rank 1 peer lost ok") != NULL);
    ZT_CHECK(strstr(mp_out, "mp FAILED") == NULL);
}

/* A rank killed in the middle of a 4 MiB all_reduce, in a run of 8-byte ones (one line per
 * peer, the line steps), of 48-byte ones (one flagged line), of 4,000-byte ones (72 flagged
 * lines: the test build's override), and inside the send of a 4,000-byte one with its last
 * line unwritten: the survivors get ZC_PEER_LOST (or ZC_TIMED_OUT) within 1 s. */
void mp_killed_peer_is_reported_as_peer_lost(void) {
    static const char *const line[] = {"MP_COUNT=2", NULL};
    static const char *const one[] = {"MP_COUNT=12", NULL};
    static const char *const lines[] = {"MP_COUNT=1000", "MP_LINES_MAX=4096", NULL};
    static const char *const cut[] = {"MP_COUNT=1000", "MP_LINES_MAX=4096", "MP_MID_LINES=1",
                                      NULL};
    mp_killed_peer_case(NULL);
    mp_killed_peer_case(line);
    mp_killed_peer_case(one);
    mp_killed_peer_case(lines);
    mp_killed_peer_case(cut);
}

/* mp_rank_link on one host (tests/rxe/hosts.sh runs it across two guests): the loop ends on
 * its own, and a second communicator in the same processes works. */
void mp_link_loop_ends_and_a_new_communicator_works(void) {
    static const char *const env[] = {"MP_KIB=64", "MP_CALLS=5", "MP_EXPECT=ok",
                                      "MP_GO_FILE=/dev/null", NULL};
    mp_job(2, "mp_rank_link", 30, env, 0);
    for (uint32_t r = 0; r < 2; r++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "[%u] mp-result: rank %u: ZC_OK: 5 calls", r, r);
        snprintf(b, sizeof b, "[%u] mp-info: rank %u: a new communicator works", r, r);
        ZT_CHECK(strstr(mp_out, a) != NULL);
        ZT_CHECK(strstr(mp_out, b) != NULL);
    }
}

/* The failure branch: rank 2 dies in call 3; ranks 0 and 1 report ZC_PEER_LOST (or
 * ZC_TIMED_OUT) by the deadline, naming the call, and exit 0. */
void mp_link_loss_is_reported_by_the_deadline(void) {
    static const char *const env[] = {"MP_KIB=256", "MP_EXPECT=fail", "MP_DIE_RANK=2",
                                      "MP_DIE_AT=3", "ZC_TIMEOUT_MS=5000", NULL};
    int rc = mp_run_keep_going("mp_rank_link", env);
    bool ok = rc == 128 + SIGKILL && !strstr(mp_out, "mp FAILED");
    for (uint32_t r = 0; r < 2; r++) {
        char a[64];
        snprintf(a, sizeof a, "[%u] mp-result: rank %u: ZC_", r, r);
        ok = ok && mp_line_has(mp_out, a, "in call 3,", "(deadline 5000 ms)");
    }
    mp_echo(mp_out, !ok);
    ZT_CHECK(ok);
}

/* The init branch: a lone rank 1 whose rank 0 never listens fails init by MP_INIT_MS. */
void mp_link_unreachable_rendezvous_fails_init_by_its_deadline(void) {
    char zctest[4200];
    snprintf(zctest, sizeof zctest, "%s/zctest", zt_build_dir());
    const char *argv[] = {zctest, "--rank", "mp_rank_link", NULL};
    static const char *const env[] = {"ZC_RANK=1", "ZC_NRANKS=2", "ZC_LOCAL_RANK=0",
                                      "ZC_ROOT_ADDR=127.0.0.1:9", "MP_EXPECT=init_fail",
                                      "ZC_SECRET=00112233445566778899aabbccddeeff",
                                      "MP_INIT_MS=1500", NULL};
    uint32_t ms = 0;
    int rc = zt_run(argv, env, mp_out, sizeof mp_out, 20000, &ms);
    mp_echo(mp_out, rc != 0);
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK(mp_line_has(mp_out, "mp-result: rank 1: init ZC_TIMED_OUT", "127.0.0.1:9",
                         "(init deadline 1500 ms)"));
    ZT_CHECK(ms < 6000);
}

void mp_allocation_free_after_init(void) {
#if !MP_COUNTING_ALLOCS
    ZT_SKIP("allocation counting needs the release build (ASan owns malloc)");
#else
    mp_job(2, "mp_rank_alloc_free", 40, NULL, 0);
    ZT_CHECK(mp_line_has(mp_out, "[0] mp-info: rank 0: 100", "after init: 0 allocation calls",
                         "calls in"));
    ZT_CHECK(mp_line_has(mp_out, "[1] mp-info: rank 1: 100", "after init: 0 allocation calls",
                         "calls in"));
#endif
}

void mp_spin_auto_yields_only_when_ranks_share_cpus(void) {
    cpu_set_t allowed;
    ZT_CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    if (CPU_COUNT(&allowed) < 2) zt_skip("one CPU: no two ranks can have CPUs of their own");
    const char *own[] = {"MP_PIN=own", NULL}, *shared[] = {"MP_PIN=shared", NULL};
    mp_job(2, "mp_rank_spin_auto", 30, own, 0);
    mp_job(2, "mp_rank_spin_auto", 30, shared, 0);
}

void mp_parks_only_after_a_long_wait(void) {
    mp_job(2, "mp_rank_parks_after_a_long_wait", 30, NULL, 0);
}

void mp_oversubscribed_8_ranks_stay_fast(void) {
    mp_job(8, "mp_rank_oversubscribed", 40, NULL, 0);
    ZT_CHECK(strstr(mp_out, "ms per op") != NULL);
}

/* zc_comm_fini returns promptly after small calls, also where a peer exited without closing
 * (tests/rxe runs both over ib, where close waits for its peers' last credits). */
void mp_fini_returns_promptly_after_small_calls(void) {
    static const char *const crash[] = {"MP_FINI_CRASH=1", NULL};
    mp_job(3, "mp_rank_fini_prompt", 30, NULL, 0);
    ZT_CHECK(strstr(mp_out, "zc_comm_fini took") != NULL);
    mp_job(3, "mp_rank_fini_prompt", 30, crash, 0); /* rank 1 exits without closing */
    ZT_CHECK(strstr(mp_out, "rank 1 exits without zc_comm_fini") != NULL);
    ZT_CHECK(strstr(mp_out, "rank 2: zc_comm_fini took") != NULL);
}

/* A message that arrived before its sender exited is taken, not reported as ZC_PEER_LOST. */
void mp_message_of_an_exited_peer_is_taken(void) {
    mp_job(2, "mp_rank_late_exit", 30, NULL, 0);
    ZT_CHECK(strstr(mp_out, "took the message of a rank that exited") != NULL);
}

/* A rank that finished a call, closed and exited is no loss to a rank still in that call;
 * one that closed before joining it is. */
void mp_clean_exit_after_a_call_is_not_a_loss(void) {
    static const char *const early[] = {"MP_CASE=early", NULL};
    mp_job(3, "mp_rank_clean_exit", 30, NULL, 0);
    ZT_CHECK(strstr(mp_out, "rank 0: reduce done") != NULL);
    mp_job(3, "mp_rank_clean_exit", 30, early, 0);
    ZT_CHECK(strstr(mp_out, "rank 0: ZC_PEER_LOST") != NULL);
    ZT_CHECK(strstr(mp_out, "rank 2: ZC_PEER_LOST") != NULL);
}

void mp_misuse_leaves_comm_usable(void) {
    mp_job(2, "mp_rank_misuse", 30, NULL, 0);
    ZT_CHECK(strstr(mp_out, "every misuse refused") != NULL);
}

/* Overlay mode between processes on the wire the job picks (shared memory here, ib under
 * tests/rxe): 9 ranks at 3 per claimed host and 17 at 4, every call overlay mode runs. */
void mp_overlay_processes_match_reference_n9(void) {
    static const char *const env[] = {"MP_PER_HOST=3", NULL};
    mp_job(9, "mp_rank_overlay", 90, env, 0);
}
void mp_overlay_processes_match_reference_n17(void) {
    static const char *const env[] = {"MP_PER_HOST=4", "MP_BATCHES=8", NULL};
    mp_job(17, "mp_rank_overlay", 120, env, 0);
}

/* A job of ZC_SCALE_PROCS processes (128 when unset; `ninja check-scale` runs 1,100: more than
 * the 1,024 ranks a full mesh allows), 8 per claimed host, in overlay mode from the environment
 * (a job past 1,024 ranks is refused without it): init through the sparse bootstrap, the
 * connection set, 4 batches of collectives of up to 16 elements per block against the reference,
 * and the even/odd split. On 2 cores every rank yields after each empty poll, so a call is a
 * round of the scheduler over every process: the deadline is minutes. */
void scale_overlay_job_of_processes_matches_reference(void) {
    uint32_t n = mp_env_u32("ZC_SCALE_PROCS", 128);
    static const char *const env[] = {"MP_PER_HOST=8", "MP_BATCHES=4", "MP_COUNT_CAP=16",
                                      "ZC_OVERLAY_MIN_RANKS=2", "ZC_LOG_MIN_RANKS=1",
                                      "ZC_TIMEOUT_MS=300000", NULL};
    uint64_t t0 = mp_now_ns();
    mp_job(n, "mp_rank_overlay", n > 512 ? 1500 : 300, env, 0);
    ZT_CHECK(strstr(mp_out, "mp-info: overlay n=") != NULL);
    printf("    %u processes: %.1f s\n", n, mp_ms(mp_now_ns() - t0) / 1000.0);
}

/* The two-wire communicator between processes on this machine: shm among each claimed host's
 * ranks, a second shm instance across them (MP_HIER_SHM; tests/rxe runs ib there): 6 ranks at
 * 3,2,1 and 9 at 2,3,4 per claimed host, overlay mode off and on. */
void mp_hier_processes_match_reference_n6(void) {
    static const char *const env[] = {"ZC_TRANSPORT=hier", "MP_HIER_SHM=1", "MP_LAYOUT=3,2,1",
                                      NULL};
    static const char *const ov[] = {"ZC_TRANSPORT=hier", "MP_HIER_SHM=1", "MP_LAYOUT=3,2,1",
                                     "MP_OVERLAY=1", NULL};
    mp_job(6, "mp_rank_hier", 90, env, 0);
    ZT_CHECK(strstr(mp_out, "mp-info: hier n=6") != NULL);
    mp_job(6, "mp_rank_hier", 90, ov, 0);
    ZT_CHECK(strstr(mp_out, "overlay on") != NULL);
}
void mp_hier_processes_match_reference_n9(void) {
    static const char *const env[] = {"ZC_TRANSPORT=hier", "MP_HIER_SHM=1", "MP_LAYOUT=2,3,4",
                                      "MP_BATCHES=8", NULL};
    static const char *const ov[] = {"ZC_TRANSPORT=hier", "MP_HIER_SHM=1", "MP_LAYOUT=2,3,4",
                                     "MP_BATCHES=8", "MP_OVERLAY=1", NULL};
    mp_job(9, "mp_rank_hier", 120, env, 0);
    mp_job(9, "mp_rank_hier", 120, ov, 0);
}

/* The hierarchical all_reduce between processes on the two-wire communicator, overlay mode (the
 * log-depth algorithms): hosts claimed 4,4 (blocks of 4, two leaders across the second wire)
 * and 2,2,2 (blocks of 2, three leaders: the leaders' stage folds); every rank found the
 * blocks from the claimed places, and the batches (all_reduce only: MP_ALLREDUCE_ONLY) run it
 * up to 16 KiB, Rabenseifner above. */
void mp_hier_blocks_run_the_hierarchical_all_reduce(void) {
    static const char *const two[] = {"ZC_TRANSPORT=hier", "MP_HIER_SHM=1", "MP_LAYOUT=4,4",
                                      "MP_BATCHES=8", "MP_OVERLAY=1", "MP_HBLOCK=4",
                                      "MP_ALLREDUCE_ONLY=1", NULL};
    static const char *const three[] = {"ZC_TRANSPORT=hier", "MP_HIER_SHM=1", "MP_LAYOUT=2,2,2",
                                        "MP_BATCHES=8", "MP_OVERLAY=1", "MP_HBLOCK=2",
                                        "MP_ALLREDUCE_ONLY=1", NULL};
    mp_job(8, "mp_rank_hier", 120, two, 0);
    ZT_CHECK(strstr(mp_out, "mp-info: hier n=8") != NULL);
    mp_job(6, "mp_rank_hier", 120, three, 0);
    ZT_CHECK(strstr(mp_out, "mp-info: hier n=6") != NULL);
}

/* A rank of another claimed host killed mid all_reduce on the two-wire communicator: ranks 0
 * and 1 (one claimed host) report ZC_PEER_LOST within 1 s; then rank 2 on their host. */
void mp_hier_killed_peer_is_reported_as_peer_lost(void) {
    static const char *const across[] = {"ZC_TRANSPORT=hier", "MP_HIER_SHM=1", "MP_LAYOUT=2,1",
                                         NULL};
    static const char *const within[] = {"ZC_TRANSPORT=hier", "MP_HIER_SHM=1", "MP_LAYOUT=1,2",
                                         "MP_COUNT=2", NULL};
    mp_killed_peer_case(across);
    mp_killed_peer_case(within);
}

/* Relayed send/recv between processes in overlay mode (every pair at 9 ranks, 3 per claimed
 * host, and at 17, 4 per host), then at 9 ranks a relay killed on a route: the calls over it
 * end with ZC_PEER_LOST or ZC_TIMED_OUT within the deadline on every survivor. */
void mp_overlay_relayed_send_recv_every_pair(void) {
    static const char *const env9[] = {"MP_PER_HOST=3", NULL};
    mp_job(9, "mp_rank_overlay_relay", 90, env9, 0);
    static const char *const env17[] = {"MP_PER_HOST=4", NULL};
    mp_job(17, "mp_rank_overlay_relay", 120, env17, 0);
}
void mp_overlay_killed_relay_fails_calls_over_it(void) {
    static const char *const env[] = {"MP_PER_HOST=3", "MP_CASE=kill", NULL};
    char zcrun[4200], zctest[4200];
    snprintf(zcrun, sizeof zcrun, "%s/zcrun", zt_build_dir());
    snprintf(zctest, sizeof zctest, "%s/zctest", zt_build_dir());
    const char *argv[] = {zcrun, "-n", "9", "--timeout", "60", "--keep-going", zctest, "--rank",
                          "mp_rank_overlay_relay", NULL};
    int rc = zt_run(argv, env, mp_out, sizeof mp_out, 70000, NULL);
    uint32_t ok = 0;
    for (uint32_t r = 0; r < 9; r++) {
        char line[64];
        snprintf(line, sizeof line, "[%u] mp-info: rank %u relay lost ok", r, r);
        ok += strstr(mp_out, line) != NULL;
    }
    bool good = rc == 128 + SIGKILL && ok == 8u && !strstr(mp_out, "mp FAILED");
    mp_echo(mp_out, !good);
    ZT_CHECK_EQ(rc, 128 + SIGKILL);
    ZT_CHECK_EQ(ok, 8u);
    ZT_CHECK(strstr(mp_out, "mp FAILED") == NULL);
}

void mp_overlay_misuse_fails_init_on_every_rank(void) {
    static const char *const cases[] = {"MP_CASE=overlay", "MP_CASE=host_id", "MP_CASE=relay"};
    static const char *const causes[] = {"overlay_min_ranks", "ZC_HOST_ID", "overlay_relay"};
    for (size_t i = 0; i < 3; i++) {
        const char *env[] = {cases[i], NULL};
        int rc = zt_run_ranks(4, "mp_rank_overlay_misuse", 30, env, mp_out, sizeof mp_out);
        bool ok = rc == 0 && !strstr(mp_out, "mp FAILED");
        for (uint32_t r = 0; r < 4; r++) {
            char line[64];
            snprintf(line, sizeof line, "[%u] mp-info: rank %u:", r, r);
            ok = ok && mp_line_has(mp_out, line, i == 1 ? "ZC_INVALID_ARG" : "ZC_MISMATCH",
                                   causes[i]);
        }
        if (!ok) mp_echo(mp_out, true);
        ZT_CHECK(ok);
    }
}
