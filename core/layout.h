/* layout.h: the arena's region table: the regions a communicator is carved into (host and
 * device), their sizes from the configuration, and which wire and gpu provider a
 * configuration gets (layout.c). Included by engine.h. */
#ifndef ZC_CORE_LAYOUT_H
#define ZC_CORE_LAYOUT_H

#include "config.h"
#include "gpu.h"
#include "wire.h"

/* ---- layout.c ---- */
/* The scratch region of a communicator's arena serves the calls that create communicators,
 * so that no static memory is shared between threads creating different ones: zc_comm_init
 * keeps there (zc__init_scratch_map) its bootstrap state (zc__boot, processes only),
 * ZC_SCRATCH_RANK_BYTES per rank of hellos, the ranks of each place (8 bytes per rank: the
 * lowest rank and the next one of each rank's place), a work area (4 bytes per rank for
 * sorting by host, or the sparse exchange's window of ZC_ADDR_WINDOW_BYTES of address blobs)
 * and at its end rank 0's bootstrap table (8 bytes per rank); zc_comm_split and
 * zc_comm_split_inproc use their parent's (per rank: colors, keys, sizes or arenas,
 * communicators and hosts; then one address blob of the parent's size), an in-process group
 * its rank 0's (per rank: windows). */
#define ZC_SCRATCH_RANK_BYTES 96u
/* In-process groups need less per rank: zc_comm_split_inproc's color and key, arena, child and
 * host (split.c), or the group's windows. */
#define ZC_SCRATCH_INPROC_RANK_BYTES 32u
/* An in-process rank carves its state from (rank mod ZC_INPROC_COLORS) cache lines into its
 * arena, so that the same field of thousands of ranks' arenas (page-aligned, a multiple of
 * pages apart) does not fall into the same few cache sets; every in-process arena has the
 * room (ZC_INPROC_COLOR_BYTES). */
#define ZC_INPROC_COLORS 64u
#define ZC_INPROC_COLOR_BYTES ((ZC_INPROC_COLORS - 1u) * 64u)
/* The address blobs a rank holds at once in overlay mode's sparse exchange (bootstrap.h): the
 * exchange runs in rounds of ZC_ADDR_WINDOW_BYTES / addr_bytes ranks. */
#define ZC_ADDR_WINDOW_BYTES (1u << 20)
/* Offsets in the scratch of zc_comm_init between processes. */
typedef struct zc__init_scratch_map {
    size_t hellos; /* [nranks] hellos (ZC_SCRATCH_RANK_BYTES each) */
    size_t first;  /* [nranks] uint32_t: the lowest rank of each rank's place */
    size_t next;   /* [nranks] uint32_t: the next rank of its place, ZC_NO_CONN after the last */
    size_t work;   /* sorting by host (uint32_t [nranks]), then the sparse exchange's scratch */
    size_t where;  /* [nranks] uint64_t: rank 0's bootstrap table */
} zc__init_scratch_map;
/* Bytes of that scratch for cfg with address blobs of addr_bytes; its offsets into *m (may be
 * NULL). */
size_t zc__init_scratch(const zc_config *cfg, size_t addr_bytes, zc__init_scratch_map *m);
/* Ranks per round of the sparse exchange (zc__boot_sparse's window) for blobs of addr_bytes:
 * ZC_ADDR_WINDOW_BYTES of them, 1..nranks. */
uint32_t zc__addr_window(const zc_config *cfg, size_t addr_bytes);
/* The regions of an arena, in carve order. */
typedef enum zc__region {
    ZC_R_COMM = 0,   /* struct zc_comm */
    ZC_R_WIRE_STATE, /* the wire's state (the largest candidate wire's) */
    ZC_R_ADDRS,      /* [zc__conn_cap] address blobs, connection i's at i */
    ZC_R_CONN,       /* [nranks] uint32_t: rank -> connection index (zc__conn_fill) */
    ZC_R_CONN_PEER,  /* [zc__conn_cap] uint32_t: connection index -> rank */
    ZC_R_CHANS,      /* [zc__lanes * zc__conn_cap] zc__chan */
    ZC_R_REQS,       /* [max_requests] zc__req */
    ZC_R_BASES,      /* [max_requests][zc__conn_cap] zc__base */
    ZC_R_PLACES,     /* [max_requests][zc__conn_cap] zc__place */
    ZC_R_ACTIVE,     /* [max_requests] uint32_t */
    ZC_R_PLANS,      /* [max_plans] zc__plan */
    ZC_R_MEMS,       /* [max_mems] zc__mem_entry */
    ZC_R_ACC,        /* [max_requests][zc__acc_slice] the log-depth algorithms' partials
                      * (empty when cfg never picks them: zc__log_algs) */
    ZC_R_GPU,        /* struct zc__gpu: the device state (empty without a provider) */
    ZC_R_GPU_STATE,  /* the gpu provider's state */
    ZC_R_GPU_RECS,   /* [max_mems][nranks] zc_gpu_ipc */
    ZC_R_GPU_MAPPED, /* [max_mems][nranks] uint8_t * */
    ZC_R_GPU_PTRS,   /* [max_requests][2 * nranks] uint8_t * (zc__req.ptrs) */
    ZC_R_GPU_BINDS,  /* [gpu_stream_slots] zc__bind */
    ZC_R_GPU_PEERS,  /* [nranks] zc__gpu_peer: every rank's landing (the direct path) */
    ZC_R_STAGE,      /* struct zc__stage: the staged path's state (empty without a provider) */
    ZC_R_STAGE_REQS, /* [max_requests] zc__stage_req (zc__req.stg) */
    ZC_R_STAGE_P2P,  /* [max_requests][slot_bytes] send/recv's staging */
    ZC_R_STAGE_BUF,  /* [gpu_stage_bytes] the collectives' staging */
    ZC_R_GROUP,      /* in-process: [nranks] zc_comm * the group's ranks, then [ceil(nranks /
                      * 64)] uint64_t their wake bits, then a line of its own: the count of
                      * alarms raised (zc__group_alarms_at; rank 0's serve the group); else
                      * empty */
    ZC_R_SCRATCH,    /* init and split time (ZC_SCRATCH_RANK_BYTES above) */
    ZC_R_WINDOW,     /* in-process: this rank's inbound window; else empty */
    ZC_R_COUNT_
} zc__region;
typedef struct zc__arena_map {
    size_t at[ZC_R_COUNT_];    /* offset of each region, 64-byte aligned */
    size_t bytes[ZC_R_COUNT_]; /* its size */
    size_t addr_bytes; /* bytes of one rank's address blob (the largest candidate wire's) */
    size_t total;      /* where the last region ends, aligned: zc_comm_arena_bytes */
    zc_wire_geom geom;
} zc__arena_map;
/* Where the group's alarm count lies in ZC_R_GROUP (the line after the ranks and their wake
 * bits): read by every rank's pass, written only when an alarm is raised, so it shares no line
 * with the bits that posts write. */
static inline size_t zc__group_alarms_at(size_t nranks) {
    return (nranks * sizeof(void *) + (nranks + 63u) / 64u * sizeof(uint64_t) + 63u) &
           ~(size_t)63u;
}
/* Bytes of one request's share of ZC_R_ACC: the partial (accumulator format) that a log-depth
 * algorithm keeps between its steps, one slot's worth at most, capped so that the region stays
 * small (max_requests x 8 KiB at the default 64 KiB slots). */
#define ZC_ACC_SLICE_MAX 8192u
static inline size_t zc__acc_slice_of(uint64_t slot_bytes) {
    return slot_bytes < ZC_ACC_SLICE_MAX ? (size_t)slot_bytes : ZC_ACC_SLICE_MAX;
}
static inline size_t zc__acc_slice(const zc_config *cfg) {
    return zc__acc_slice_of(cfg->slot_bytes);
}
/* Whether a communicator of cfg picks the log-depth host algorithms (sched.c's zc__choose). */
static inline bool zc__log_algs(const zc_config *cfg) {
    return cfg->log_min_ranks && cfg->nranks >= cfg->log_min_ranks;
}
/* ---- conn.c: the connection set ---- */
/* A rank's connections: itself and the peers it exchanges messages with. A full mesh (every
 * rank) unless the communicator is in overlay mode (config.h's zc__overlay), where they are
 * the overlay O(n, r) and the ranks of its own host. For n ranks, P the largest power of two
 * <= n and e = n - P, O(n, r) is r itself and
 *   (a) (r + 2^k) mod n and (r - 2^k) mod n for every 2^k < n (Bruck, dissemination,
 *       binomial trees rooted anywhere: relative ranks at distance 2^k);
 *   (b) unless r is folded (r < 2e and odd), the real rank of u XOR 2^k for every 2^k < P, u
 *       r's recursive-doubling virtual rank (2i and 2i + 1 fold into i for i < e, the even one
 *       holds it; m >= 2e is m - e; virtual u < e is real 2u, else u + e);
 *   (c) r XOR 1 when r < 2e (the fold partner).
 * It is symmetric, so both ends of a connection know it without talking. */
#define ZC_NO_CONN UINT32_MAX
/* Ranks on one host a communicator of processes in overlay mode may have (its arena holds a
 * connection for each). */
#define ZC_OVERLAY_MAX_LOCAL 64u
/* Connections a rank of cfg may have, itself included: the size of the per-connection rows. */
uint32_t zc__conn_cap(const zc_config *cfg);
/* O(n, r) ascending into out (cap entries, at least the overlay's size); returns its size. */
uint32_t zc__overlay_set(uint32_t n, uint32_t r, uint32_t *out, uint32_t cap);
/* Connections of rank cfg->rank when hosts hold per_host ranks each, in rank order (0: one
 * host): the size of the set zc__conn_fill makes. */
uint32_t zc__conn_count(const zc_config *cfg, uint32_t per_host);
/* Fills c->conn, c->conn_peer and c->nconn from the connection set; hosts: each rank's host
 * (a uint64_t every stride bytes; NULL: cfg->inproc_ranks_per_host's simulated hosts). False
 * with a sentence in c->err when the host's ranks do not fit the table. */
bool zc__conn_fill(struct zc_comm *c, const uint64_t *hosts, size_t stride);
/* Sets c->hblock: the largest power of two q >= 2 that divides n, leaves at least two blocks,
 * and keeps each block of ranks jq .. jq + q - 1 on one place (hosts as zc__conn_fill's), or
 * 0 when there is none. A function of every rank's place, so all ranks agree: the
 * hierarchical all_reduce and barrier (sched.c's ZC_ALG_HRD) run over these blocks.
 * O(n log n); O(log n) for simulated hosts. */
void zc__host_blocks(struct zc_comm *c, const uint64_t *hosts, size_t stride);
/* order[0..n) = the ranks sorted by keys[r] (a uint64_t every stride bytes), ties by rank:
 * heapsort, O(n log n), nothing but order. */
void zc__sort_by_key(const uint64_t *keys, size_t stride, uint32_t n, uint32_t *order);
/* From order (zc__sort_by_key's): first[r] the lowest rank with r's key, next[r] the next
 * higher one (ZC_NO_CONN after the last), so a key's ranks are a walk. O(n). */
void zc__link_keys(const uint64_t *keys, size_t stride, uint32_t n, const uint32_t *order,
                   uint32_t *first, uint32_t *next);
/* Rank r's connection set in c's communicator, ascending, at most cap entries into out;
 * returns how many. Its host's ranks: the walk first[r], next[..] (zc__link_keys over the
 * places; NULL: cfg->inproc_ranks_per_host's simulated hosts); a host with more ranks than
 * overlay mode allows is cut short (zc__conn_fill refuses it on its own ranks). O(log n +
 * ranks on r's host). */
uint32_t zc__conn_set(const struct zc_comm *c, const uint32_t *first, const uint32_t *next,
                      uint32_t r, uint32_t *out, uint32_t cap);

/* The one function that decides the arena's regions; false if cfg is invalid. */
bool zc__layout(const zc_config *cfg, zc__arena_map *out);
const zc_wire_ops *zc__wire_for(const zc_config *cfg);
/* The transport init runs on when asked for asked: AUTO is shm on one host, ib across hosts
 * (hier is only ever asked for). */
zc_transport zc__transport_picked(zc_transport asked, bool across_hosts);
/* The gpu provider cfg asks for; NULL: none (gpu_device -2, or one this build lacks). */
const zc_gpu_ops *zc__gpu_provider(const zc_config *cfg);
zc_gpu_geom zc__gpu_geometry(const zc_config *cfg);
/* Why cfg picks no gpu provider (zc__gpu_provider gave NULL). */
const char *zc__gpu_absent(const zc_config *cfg);

/* Blocks of count elements in the send and recv buffers of a call of kind at rank (0: not
 * used there); the host checks, the device routing, the symmetric schedule and the checks of
 * what peers say about their buffers read one rule. zc__extents: at this rank. */

#endif
