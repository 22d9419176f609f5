/* wire.h: the provider interface between the core and a transport (a "wire"). The core owns
 * the protocol (slot rings, credits, fingerprinted headers, ordering, failure handling); a wire
 * only moves bytes into the peer's inbound slots and publishes them, carries credit counters
 * back, and reports peers' liveness. Transports include this header (with fmt.h, the shared
 * sentence formatter), zcoll.h and platform.h, never core internals (configure.py gives them
 * -Iprovider, not -Icore). Every wire function is non-blocking except create/attach (init time).
 *
 * Connections. A rank exchanges messages only with its connections (the geometry's conn_peer:
 * itself and its peers, rank order; every rank, or fewer in the core's overlay mode), and a
 * wire keeps rings, credit words and queue pairs for those only. The relation is symmetric: q
 * is p's connection when p is q's. Data-path calls name a peer by rank; conn maps it to its
 * connection's index.
 *
 * Geometry. Each rank owns one inbound window: for each lane and each connection, a ring of `slots`
 * slots of `stride` bytes (a 64-byte header, then up to slot_bytes of payload), plus one credit
 * word per (lane, peer) that the peer writes (how many of my messages it has consumed) and one
 * alarm word any peer may write (a job failure report). Message number m on a (lane, peer)
 * ring goes to slot m % slots and is published with tag m + 1; the credit protocol in the core
 * guarantees a slot is never rewritten before it was consumed.
 *
 * Placement (optional; wires that can write into a peer's memory directly, transport_ib). The
 * core registers the caller's buffers through mem_register; a receiver tells a sender where a
 * stream goes (address and remote key) and the sender puts each chunk there before posting the
 * chunk's message with a header only. A put is ordered before the message posted next into the
 * same slot, so the message's arrival means the chunk is in place.
 *
 * Waking (in-process groups only). One thread may drive a whole group, and visiting every rank
 * in turn to find the few that something arrived for costs cache misses per rank; so a wire
 * whose geometry has inproc_wake sets the receiver's bit there (zc_wire_wake) after each post,
 * and the sender's after a credit that it asked for (credit_wake: it found no slot free), and
 * the core's walk visits the ranks whose bits it takes (a full walk still comes regularly:
 * deadlines, alarms). A missed bit costs time, never a message.
 *
 * Alarms (in-process groups). Every progress pass reads the rank's alarm word, a line no other
 * rank touches until a job fails: in a group of thousands driven by one thread that line is a
 * cache miss at every visit. So a wire whose geometry has inproc_alarms adds 1 to that count
 * (release) after it wrote a report into its peers' alarm words, sets their wake bits, and
 * answers `alarmed` from the rank's own word only once the count (acquire) is not 0: before
 * any alarm, every pass reads the one line the whole group shares. */
#ifndef ZC_WIRE_H
#define ZC_WIRE_H

#include "fmt.h"
#include "zcoll.h"

#define ZC_WIRE_VERSION 12u
/* Lanes: 0 collectives, 1 send/recv, 2 (relaying overlay communicators only: geometry lanes 3)
 * messages relayed toward a rank without a connection. ZC_WIRE_LANES is the most a geometry names. */
#define ZC_WIRE_LANES 3u
#define ZC_WIRE_LANES_MESH 2u
#define ZC_SLOT_HDR_BYTES 64u /* the header part of every slot; its last 8 bytes hold the tag */
#define ZC_WIRE_MAX_ADDR_BYTES 65536u /* ceiling of a rank's address blob (see addr_bytes) */

typedef struct zc_wire_geom {
    uint64_t comm_id;      /* same on every rank of the communicator */
    uint32_t rank, nranks;
    uint32_t slots;        /* slots per (lane, peer) ring, power of two */
    uint32_t slot_bytes;   /* payload bytes per slot */
    uint32_t stride;       /* ZC_SLOT_HDR_BYTES + slot_bytes */
    uint32_t nconn;        /* connections: this rank and its peers (conn_peer's entries) */
    uint32_t conn_cap;     /* connections any rank of the communicator may have: windows and
                            * address blobs are sized for this many, the same on every rank */
    uint32_t lanes;        /* lanes of every ring set: 2, or 3 in overlay mode (0 reads as 2) */
    const uint32_t *conn;      /* [nranks] rank -> connection index (UINT32_MAX: none); valid
                                * until close; NULL while sizes are computed */
    const uint32_t *conn_peer; /* [nconn] connection index -> rank, ascending; as conn */
    void *const *inproc_windows; /* in-process: every rank's window (read during create and
                                  * attach only); NULL between processes */
    const zc_config *cfg;  /* the communicator's configuration (device choice, timeouts);
                            * valid during create only: copy what is needed later */
    uint64_t *inproc_wake; /* in-process: the group's wake bits, one per rank (zc_wire_wake),
                            * valid until close; NULL between processes */
    uint64_t *inproc_alarms; /* in-process: the group's count of alarms raised, valid until
                              * close; NULL between processes (see "Alarms" above) */
} zc_wire_geom;

/* The lanes g's windows hold a ring of per connection. */
static inline uint32_t zc_wire_lanes(const zc_wire_geom *g) {
    return g->lanes ? g->lanes : ZC_WIRE_LANES_MESH;
}

/* Sets rank's wake bit in bits (the geometry's inproc_wake): a wire of an in-process group
 * calls it after a post or a credit to rank, so that the core's walk of the group (progress.c)
 * visits the ranks something arrived for, not all of them. Release: the walker that takes the
 * bit (acquire) sees what the post wrote. */
static inline void zc_wire_wake(uint64_t *bits, uint32_t rank) {
    uint64_t *w = bits + (rank >> 6), bit = (uint64_t)1 << (rank & 63u);
    if (!(__atomic_load_n(w, __ATOMIC_RELAXED) & bit)) __atomic_fetch_or(w, bit, __ATOMIC_RELEASE);
}

/* A registration of the caller's memory with the wire (mem_register fills it). */
typedef struct zc_wire_mr {
    void *handle;          /* the wire's own object (NULL: not registered) */
    uint64_t lkey;         /* names it as a source of this rank's puts */
    uint64_t rkey;         /* names it to peers, as the destination of their puts; 32 bits
                            * (verbs' key space): the core refuses a peer's wider one */
} zc_wire_mr;

/* The connections create makes (links fills it). */
typedef struct zc_wire_links {
    uint32_t peers;      /* ranks this rank exchanges messages with directly */
    uint32_t qps;        /* RDMA queue pairs it opens (0: none) */
    uint64_t cq_entries; /* entries of its completion queues (0: none) */
    uint32_t shared;     /* 1: the memory takes counts is shared memory peers map; 0: private */
    uint32_t reserved_;
} zc_wire_links;

typedef struct zc_wire_ops {
    uint32_t struct_bytes; /* sizeof(zc_wire_ops) */
    uint32_t version;      /* ZC_WIRE_VERSION */
    const char *name;
    /* Arena bytes of the wire's own state and bytes of one rank's inbound window. */
    size_t (*state_bytes)(const zc_wire_geom *g);
    size_t (*window_bytes)(const zc_wire_geom *g);
    /* Bytes of the address blob every rank publishes at create and every rank reads at attach
     * (queue pair numbers, keys, ring addresses); 0 when the wire needs none. At most
     * ZC_WIRE_MAX_ADDR_BYTES; the same on every rank with the same geometry. */
    size_t (*addr_bytes)(const zc_wire_geom *g);
    /* Init, step 1: set up state and this rank's inbound window (in-process: window is given,
     * in the arena; otherwise the wire maps one) and write this rank's address blob to addr
     * (addr_bytes of it; NULL when addr_bytes is 0). The core then exchanges the blobs.
     * Step 2, after every rank did step 1: reach the peers' windows; addrs holds the blobs of
     * this rank's connections, connection i's (rank conn_peer[i]) at addrs + i * addr_bytes
     * (its own entry included; NULL when addr_bytes is 0; it stays valid until close).
     * Step 3, after every rank did step 2: drop names others no longer need.
     * Failures return a status with a sentence in err. */
    zc_status (*create)(void *state, const zc_wire_geom *g, void *window, void *addr, char *err,
                        size_t cap);
    zc_status (*attach)(void *state, const void *addrs, char *err, size_t cap);
    void (*seal)(void *state);
    void (*close)(void *state);
    /* Where message (lane, peer, slot) is written: header then payload. */
    void *(*tx_slot)(void *state, uint32_t lane, uint32_t peer, uint32_t slot);
    /* Publishes the message written there (bytes = header + payload used) under tag. ZC_AGAIN:
     * no room for it now (a full send queue), nothing went; the core posts the same message
     * again, unchanged, before any later one to that peer on that lane. Any other failure is
     * for good: the peer is lost (peer_alive says how). */
    zc_status (*post)(void *state, uint32_t lane, uint32_t peer, uint32_t slot, size_t bytes,
                      uint64_t tag);
    /* The inbound slot from peer if the message tagged tag has arrived there, else NULL.
     * lines: payload lines (64 B, after the header) the caller will read at once; a wire whose
     * sender writes the slot in place may prefetch them while the message is not there yet, so
     * they travel with the header instead of one miss after it (a hint; 0: none). */
    const void *(*rx_slot)(void *state, uint32_t lane, uint32_t peer, uint32_t slot,
                           uint64_t tag, uint32_t lines);
    /* Tells peer that `consumed` of its messages on lane are consumed (monotonic). */
    void (*credit)(void *state, uint32_t lane, uint32_t peer, uint64_t consumed);
    /* How many of my messages on lane peer has consumed. */
    uint64_t (*credits)(void *state, uint32_t lane, uint32_t peer);
    /* Writes a failure report into every peer's alarm word (best effort); reads mine (0: none). */
    void (*alarm)(void *state, uint64_t word);
    uint64_t (*alarmed)(void *state);
    /* ZC_OK while peer's process lives, ZC_PEER_LOST once it is gone (err says how). */
    zc_status (*peer_alive)(void *state, uint32_t peer, char *err, size_t cap);
    /* ---- placement: NULL (put_min, mem_register, put, put_done) in wires without it ---- */
    /* Streams of at least this many bytes may be placed (0: never); the same on every rank
     * (attach checked). */
    uint64_t (*put_min)(void *state);
    /* Registers [addr, addr+bytes) of kind zc_mem_kind; device memory comes with a dma-buf
     * fd (and addr's offset in it), or fd -1 to try the address itself. Not on the data path:
     * it may take a while; it never blocks on a peer. */
    zc_status (*mem_register)(void *state, void *addr, size_t bytes, uint32_t kind, int32_t fd,
                              uint64_t fd_offset, zc_wire_mr *out, char *err, size_t cap);
    void (*mem_deregister)(void *state, zc_wire_mr *mr);
    /* Writes bytes from src to raddr (rkey) in peer's memory, ordered before the message tagged
     * tag that goes next into (lane, peer, slot). src in this rank's registered memory (mr)
     * goes as is and must stay unchanged until put_done; with mr NULL it is copied into the
     * slot's staging first (bytes <= slot_bytes). ZC_AGAIN as post (nothing written; the core
     * puts again later); other failures are for good. */
    zc_status (*put)(void *state, uint32_t lane, uint32_t peer, uint32_t slot, uint64_t tag,
                     const void *src, const zc_wire_mr *mr, size_t bytes, uint64_t raddr,
                     uint64_t rkey);
    /* True once every put to peer from registered memory has been read by the wire. */
    bool (*put_done)(void *state, uint32_t peer);
    /* ---- the symmetric region: NULL in wires without one ---- */
    /* Where rank's symmetric region (cfg->sym_bytes, after the rings of its window) is mapped in
     * this process; NULL when the communicator has none. Valid from attach until close. */
    void *(*sym_base)(void *state, uint32_t rank);
    /* ---- what create takes, which init checks against the platform's limits first ---- */
    /* Bytes of memory create takes from the host beyond the arena (a window in shared memory,
     * private pages) into *mem, and of them the bytes it registers with a device (pinned,
     * counted against RLIMIT_MEMLOCK) into *locked; 0 and 0 in-process (the window is in the
     * arena). g names its cfg, as for window_bytes. */
    void (*takes)(const zc_wire_geom *g, uint64_t *mem, uint64_t *locked);
    /* The peers, queue pairs and completion queue entries create makes for g (its cfg named,
     * as for takes), and whether what takes counts is shared memory. */
    void (*links)(const zc_wire_geom *g, zc_wire_links *out);
    /* ---- flagged lines: NULL in wires without them ---- */
    /* The inbound slot (lane, peer, slot) as the peer's stores reach it, whatever its tag says:
     * a wire whose sender writes the receiver's memory directly, in the order of its stores
     * (shm, in process), returns it, and the core may then send a small message as flagged
     * lines that the receiver polls in place (core/proto.h). */
    const void *(*rx_mem)(void *state, uint32_t lane, uint32_t peer, uint32_t slot);
    /* ---- a clean close: NULL in wires that cannot tell one from a loss ---- */
    /* Before close, when every call this rank issued has finished: marks its window closed
     * after its first seqs collectives (the sequence numbers 0..seqs-1). */
    void (*closing)(void *state, uint64_t seqs);
    /* 0 unless peer closed cleanly (closing), else 1 + the seqs it closed with: readable after
     * the peer's process is gone, so that a rank still in a call the peer had finished does not
     * count the peer's exit as a loss. */
    uint64_t (*closed_after)(void *state, uint32_t peer);
    /* ---- waking (see Waking): NULL in wires without in-process groups ---- */
    /* A sender with no slot free until peer's credit on lane reaches want: true if it has (read
     * credits again); else, in an in-process group, peer's next credit wakes this rank. */
    bool (*credit_wake)(void *state, uint32_t lane, uint32_t peer, uint64_t want);
} zc_wire_ops;

extern const zc_wire_ops zc_wire_shm;
#ifdef ZC_HAVE_IB
extern const zc_wire_ops zc_wire_ib;
#endif

/* What an RDMA device offers device-memory collectives (zc_device_report). */
typedef struct zc_wire_nic {
    char name[64];
    uint32_t ports_active;
    uint32_t ethernet; /* 1: RoCE (an active port's link layer is Ethernet) */
    int32_t dmabuf;    /* 1: it registered the device memory through its dma-buf; 0: it
                        * refused (why); -1: not tried */
    int32_t peermem;   /* the same by address (nvidia-peermem) */
    char why[200];
} zc_wire_nic;

#ifdef ZC_HAVE_IB
/* Every RDMA device of this host (at most cap, *n of them) into nics; each one opened and asked
 * to register [mem, mem + bytes) of device memory through fd (a dma-buf, mem's offset off in
 * it; fd < 0: not tried) and by address (mem NULL: neither). ZC_UNSUPPORTED (err says why) when
 * there is no RDMA device. Opens and closes everything within the call (transport_ib/probe.c). */
zc_status zc__ib_nics(zc_wire_nic *nics, uint32_t cap, uint32_t *n, void *mem, size_t bytes,
                      int32_t fd, uint64_t off, char *err, size_t errcap);
#endif

#endif
