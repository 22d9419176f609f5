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
 * keeps its bootstrap state (zc__boot, processes only) and ZC_SCRATCH_RANK_BYTES per rank of
 * hellos there; zc_comm_split and zc_comm_split_inproc use their parent's (per rank: colors,
 * keys, sizes or arenas, communicators and hosts; then one address blob of the parent's
 * size), an in-process group its rank 0's (per rank: windows). */
#define ZC_SCRATCH_RANK_BYTES 80u
/* Per rank, processes only: init's verdict (comm.c's zc_outcome: status and sentence), after
 * the bootstrap state and the hellos. */
#define ZC_SCRATCH_VERDICT_BYTES 192u
/* The regions of an arena, in carve order. */
typedef enum zc__region {
    ZC_R_COMM = 0,   /* struct zc_comm */
    ZC_R_WIRE_STATE, /* the wire's state (the largest candidate wire's) */
    ZC_R_ADDRS,      /* [nranks] address blobs */
    ZC_R_GROUP,      /* [nranks] zc_comm * (in-process) */
    ZC_R_CHANS,      /* [ZC_WIRE_LANES * nranks] zc__chan */
    ZC_R_REQS,       /* [max_requests] zc__req */
    ZC_R_TX_BASES,   /* [max_requests][nranks] uint64_t */
    ZC_R_RX_BASES,   /* [max_requests][nranks] uint64_t */
    ZC_R_PLACES,     /* [max_requests][nranks] zc__place */
    ZC_R_ACTIVE,     /* [max_requests] uint32_t */
    ZC_R_PLANS,      /* [max_plans] zc__plan */
    ZC_R_MEMS,       /* [max_mems] zc__mem_entry */
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
/* The one function that decides the arena's regions; false if cfg is invalid. */
bool zc__layout(const zc_config *cfg, zc__arena_map *out);
const zc_wire_ops *zc__wire_for(const zc_config *cfg);
/* The transport init runs on when asked for asked: AUTO is shm on one host, ib across hosts. */
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
