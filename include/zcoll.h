/* zcoll.h: the one public header of zcoll, a fixed-memory, polling, deterministic library of
 * collective communication (the torch.distributed set) for accelerator clusters.
 *
 * Contract of every function here, unless its comment says otherwise:
 * - never blocks (only zc_wait and the collective zc_comm_init/zc_comm_split wait, each with a
 *   deadline); never allocates: all state lives in the arena the caller hands to init;
 * - returns a zc_status; on failure a sentence naming the argument, peer, collective and sequence
 *   number is left in zc_comm_error_text() (or cfg->error_text for configuration calls).
 * - threads: calls on one communicator may come from several threads at once. They are
 *   serialized by a lock in the communicator (each holder does bounded work and never waits,
 *   so a contender spins briefly): one thread may issue while another drives zc_progress, and
 *   zc_wait lets go of the lock between polls; a communicator whose cfg->threads is
 *   ZC_THREADS_SERIAL takes the caller's promise that its calls never overlap instead, and
 *   skips the lock. Calls on different communicators run in
 *   parallel; zc_comm_init, zc_comm_split and the _inproc forms are reentrant. Two splits of
 *   one parent at the same time: the second returns ZC_INVALID_STATE. Calls racing with
 *   zc_comm_fini of their communicator, or with the caller freeing its arena, are the caller's
 *   error (zcoll cannot see memory it no longer owns). Collectives must still be issued in the
 *   same order on every rank: threads that issue on one communicator must agree on that order.
 *
 * Includes only <stddef.h>, <stdint.h>, <stdbool.h>; compiles as C11 and as C++. */
#ifndef ZCOLL_H
#define ZCOLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZC_VERSION_MAJOR 0
#define ZC_VERSION_MINOR 1

/* ---- status ------------------------------------------------------------------------------
 * One map: code, value, sentence. Grouped by blast radius: > 0 not finished; -1..-19 the call
 * failed (the communicator is fine); -20..-39 this process's device or OS failed; -40.. the job
 * (a peer) failed. */
#define ZC_STATUS_MAP(X)                                                                         \
    X(ZC_OK, 0, "Success.")                                                                      \
    X(ZC_IN_PROGRESS, 1, "The operation has not finished yet; progress and ask again.")         \
    X(ZC_AGAIN, -1, "No free request slot or credit right now; progress, then retry.")          \
    X(ZC_INVALID_ARG, -2, "An argument is invalid; the error text names it.")                   \
    X(ZC_INVALID_STATE, -3, "The object is not in a state that allows this call.")              \
    X(ZC_TOO_SMALL, -4, "The arena is smaller than zc_comm_arena_bytes() asks for.")            \
    X(ZC_LIMIT, -5, "A configured or compile-time maximum would be exceeded.")                  \
    X(ZC_UNSUPPORTED, -6, "This build or transport does not support the request.")             \
    X(ZC_TIMED_OUT, -7, "The operation's deadline passed before it completed.")                 \
    X(ZC_MISMATCH, -8, "Ranks called different collectives, counts, types, ops or roots.")     \
    X(ZC_AUTH, -9, "A bootstrap peer did not prove the job secret.")                            \
    X(ZC_SYSTEM, -10, "An operating-system call failed; the error text has the error number.")  \
    X(ZC_TRANSPORT, -20, "The local network device or its verbs failed.")                       \
    X(ZC_GPU, -21, "A CUDA call failed.")                                                        \
    X(ZC_PEER_LOST, -40, "A peer process died or its link went down.")                          \
    X(ZC_ABORTED, -41, "The communicator was aborted.")                                         \
    X(ZC_INTERNAL, -99, "An internal invariant of zcoll was broken; please report it.")

typedef enum zc_status {
#define ZC_STATUS_ENUM_(code, value, text) code = value,
    ZC_STATUS_MAP(ZC_STATUS_ENUM_)
#undef ZC_STATUS_ENUM_
} zc_status;

/* "ZC_TIMED_OUT"; "ZC_UNKNOWN_STATUS" for a value outside the map. Never NULL. */
const char *zc_status_name(zc_status s);
/* One sentence; never NULL. */
const char *zc_status_text(zc_status s);

/* ---- types and operations ---------------------------------------------------------------- */
typedef enum zc_dtype {
    ZC_INT8, ZC_UINT8, ZC_INT32, ZC_UINT32, ZC_INT64, ZC_UINT64,
    ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64, ZC_FP8_E4M3, ZC_FP8_E5M2,
    ZC_DTYPE_COUNT_ /* not a type: the number of types */
} zc_dtype;

/* AVG is the sum divided by the number of ranks (integer types: truncating division of the
 * exact sum). 16- and 8-bit floating types are accumulated in fp32 and rounded once
 * (round-to-nearest-even). MIN/MAX of NaN follow IEEE fmin/fmax. Integer SUM/PROD wrap as two's
 * complement. Every element is reduced in one order, a function of n alone, whatever the
 * algorithm, message size, placement or memory kind: the rank tree. With p the largest power
 * of two <= n and e = n - p, the leaves are v_i = x_2i (+) x_2i+1 for i < e and v_i = x_i+e for
 * e <= i < p; pairs of neighbours are then combined level by level, w_j = w_2j (+) w_2j+1, up
 * to one value; the lower ranks' partial result is always the left operand, and partial
 * results keep the accumulator's format (fp32 for the 16- and 8-bit floats). For example
 * n = 4: (x0 + x1) + (x2 + x3); n = 5: ((x0 + x1) + x2) + (x3 + x4). For n <= 3 this is the
 * linear order (x0 + x1) + x2 of earlier versions; for n >= 4 floating results may differ
 * from theirs in the last bits. */
typedef enum zc_op { ZC_SUM, ZC_PROD, ZC_MIN, ZC_MAX, ZC_AVG, ZC_OP_COUNT_ } zc_op;

/* Bytes of one element; 0 for a value that is not a zc_dtype. */
size_t zc_dtype_bytes(zc_dtype t);
/* "float32", "bfloat16", ...; "unknown" outside the enum. Never NULL. */
const char *zc_dtype_name(zc_dtype t);
/* "sum", "prod", "min", "max", "avg"; "unknown" outside the enum. Never NULL. */
const char *zc_op_name(zc_op op);

typedef enum zc_mem_kind { ZC_MEM_HOST, ZC_MEM_CUDA } zc_mem_kind;

/* ---- configuration ------------------------------------------------------------------------
 * Compile-time ceilings (override with -D; checked by static asserts in core/). */
#ifndef ZC_MAX_RANKS
#define ZC_MAX_RANKS 65536u         /* ranks in one communicator (above ZC_MESH_MAX_RANKS:
                                     * in overlay mode, see cfg->overlay_min_ranks) */
#endif
#ifndef ZC_MESH_MAX_RANKS
#define ZC_MESH_MAX_RANKS 1024u     /* ranks of a communicator connected as a full mesh (every
                                     * one between processes, for now) */
#endif
#ifndef ZC_MAX_REQUESTS
#define ZC_MAX_REQUESTS 1024u       /* request pool ceiling */
#endif
#define ZC_ADDR_BYTES 64u           /* "host:port" of the rendezvous, NUL included */
#define ZC_SECRET_BYTES 16u         /* the job secret: 128 bits (32 hex digits in ZC_SECRET) */
#define ZC_ERROR_TEXT_BYTES 256u    /* sentence buffers, NUL included */

/* Defaults that zc_config_default() writes. The algorithm thresholds are fixed numbers, never
 * measured at run time, so every rank chooses the same algorithm for the same call. */
#define ZC_DEFAULT_TIMEOUT_NS 30000000000ull      /* 30 s: deadline of every operation */
#define ZC_DEFAULT_INIT_TIMEOUT_NS 60000000000ull /* 60 s: deadline of init and split */
#define ZC_DEFAULT_MAX_REQUESTS 32u     /* requests in flight per communicator */
#define ZC_DEFAULT_MAX_PLANS 32u        /* persistent plans per communicator */
#define ZC_DEFAULT_MAX_MEMS 16u         /* zc_mem_register table entries */
#define ZC_DEFAULT_SLOT_BYTES 65536u    /* payload bytes of one slot (multiple of 64) */
#define ZC_DEFAULT_SLOTS 8u             /* slots per directed peer ring (power of two, >= 2) */
/* Empty progress polls before zc_progress yields the CPU when every local rank has a CPU of
 * its own: 2^24 (seconds of polling), so a waiting rank spins and makes no system call, as
 * MPI's shared-memory paths do; with more ranks on this host than the CPUs they may run on
 * together (the union of their CPU sets: ranks pinned a core each are not crowded), it yields
 * after every empty poll (spinning there only delays the rank that has to run). Applies when
 * spin_polls is 0 (auto); set a small value to share the CPUs with other work. */
#define ZC_DEFAULT_SPIN_POLLS (1u << 24)
/* all_reduce: at most this many bytes go one-shot (every rank sends its whole input to every
 * peer and reduces all n inputs); above, direct reduce-scatter + all-gather. */
#define ZC_DEFAULT_ALLREDUCE_ONESHOT_MAX_BYTES 16384u
/* reduce: at most this many bytes go direct to the root; above, reduce-scatter + gather. With
 * 2 ranks every size goes direct (the root's work is one reduction of the input there, against
 * half a reduction, half a copy and a wait between the two phases: 2x faster from 512 KiB). */
#define ZC_DEFAULT_REDUCE_DIRECT_MAX_BYTES 16384u
/* broadcast: at most this many bytes go down a binomial tree; above, a pipelined chain (in
 * overlay mode binomial scatter + Bruck all-gather). */
#define ZC_DEFAULT_BCAST_TREE_MAX_BYTES 65536u
/* Host collectives of a communicator of at least this many ranks take the log-depth algorithms
 * (all_reduce: recursive doubling up to allreduce_oneshot_max_bytes, in its hierarchical form
 * when ranks numbered host by host fill blocks of a power of two per host, as barrier then
 * does; all_gather: Bruck;
 * all_to_all: Bruck up to blocks of 1 KiB; in overlay mode also gather and scatter down a
 * binomial tree, all_to_all by Bruck at every size, reduce_scatter by recursive halving, a
 * larger all_reduce by Rabenseifner, reduce down the canonical tree toward the root and a
 * broadcast above ZC_DEFAULT_BCAST_TREE_MAX_BYTES by van de Geijn), whose steps grow as
 * log2(n); smaller ones keep the direct
 * algorithms above, fastest at a few ranks. */
#define ZC_DEFAULT_LOG_MIN_RANKS 9u

typedef enum zc_transport {
    ZC_TRANSPORT_AUTO = 0,   /* shm when every rank is on one host, else ib */
    ZC_TRANSPORT_SHM = 1,    /* shared-memory segments between processes of one host */
    ZC_TRANSPORT_INPROC = 2, /* all ranks in one process (zc_comm_init_inproc) */
    ZC_TRANSPORT_IB = 3,     /* libibverbs RC queue pairs (builds with transport_ib) */
    ZC_TRANSPORT_HIER = 4    /* two wires, chosen per connection: shm among the ranks of one
                              * host (or of one ZC_HOST_ID claim), ib between hosts (builds
                              * with transport_ib); zc_comm_transport says "hier" */
} zc_transport;

#define ZC_IB_DEVICE_BYTES 64u          /* ceiling of zc_config.ib_device, NUL included */
#define ZC_DEFAULT_IB_QPS_PER_PEER 1u
#define ZC_DEFAULT_IB_RETRY_CNT 7u
/* transport_ib: a stream (a peer's block of a collective, a send) of at least this many bytes
 * whose destination the receiver registered with zc_mem_register goes by RDMA WRITE straight
 * into that destination (from the sender's buffer too when that is registered), with no copy
 * through the slots; the receiver first tells the sender where (one extra message). Every rank
 * needs the same value (init says ZC_MISMATCH otherwise). */
#define ZC_DEFAULT_IB_ZCOPY_MIN_BYTES 262144u

/* Device-memory collectives. */
#define ZC_DEFAULT_GPU_STREAM_SLOTS 16u
#define ZC_DEFAULT_GPU_SCRATCH_BYTES (8u << 20)
#define ZC_DEFAULT_GPU_ONESHOT_MAX_BYTES (256u << 10)
/* Host staging of device-memory calls on the staged path (zc_config.gpu_stage_bytes). */
#define ZC_DEFAULT_GPU_STAGE_BYTES (1u << 20)

/* How device-memory calls move their bytes (zc_config.gpu_path; zc_comm_gpu_path says which
 * one a communicator chose at init). */
typedef enum zc_gpu_path {
    ZC_GPU_PATH_AUTO = 0,   /* IPC where the wire maps peers (shm); over transport_ib direct
                             * when every rank's device and NIC can (GPUDirect RDMA), else
                             * staged */
    ZC_GPU_PATH_IPC = 1,    /* kernels read peers' IPC-mapped device buffers (shm wire only;
                             * send/recv of device memory is staged on this path) */
    ZC_GPU_PATH_STAGED = 2, /* per round: device-to-host copies into host staging in the arena
                             * (cfg->gpu_stage_bytes), the host schedule, host-to-device copies */
    ZC_GPU_PATH_DIRECT = 3  /* transport_ib: the NIC writes peers' bytes straight into device
                             * memory (registered buffers, or landing areas in device scratch),
                             * reductions are device kernels; init fails when a rank's device or
                             * NIC cannot */
} zc_gpu_path;

/* Which gpu provider runs device-memory collectives (zc_config.gpu_provider). */
typedef enum zc_gpu_provider {
    ZC_GPU_PROVIDER_AUTO = 0, /* CUDA in CUDA builds, none otherwise */
    ZC_GPU_PROVIDER_CUDA = 1, /* CUDA (ZC_UNSUPPORTED at registration in builds without it) */
    ZC_GPU_PROVIDER_SIM = 2   /* the simulated device of every build (gpu/sim.h): host memory
                               * from zc_gpu_sim_alloc stands for device memory, for tests */
} zc_gpu_provider;

/* Whether calls on one communicator may overlap (zc_config.threads). */
typedef enum zc_threads {
    ZC_THREADS_MULTI = 0, /* default: several threads may call at once; a lock in the
                           * communicator serializes them (an atomic exchange per call) */
    ZC_THREADS_SERIAL = 1 /* the caller promises that calls on this communicator never overlap
                           * (one thread, or the caller's own lock: MPI's THREAD_SERIALIZED);
                           * zcoll takes no lock (overlapping calls then corrupt its state) */
} zc_threads;

#define ZC_CONFIG_VERSION 1u

/* The public configuration. Start from zc_config_default(), then set fields or call
 * zc_config_from_env(). Every size field is a ceiling of the fixed memory the communicator
 * takes; zc_comm_arena_bytes() grows (never shrinks) when any of them grows. */
typedef struct zc_config {
    uint32_t version;            /* ZC_CONFIG_VERSION, set by zc_config_default */
    uint32_t rank;               /* this process's rank, 0..nranks-1 */
    uint32_t nranks;             /* ranks in the job, 1..ZC_MAX_RANKS */
    uint32_t local_rank;         /* rank among the processes of this host (informational) */
    char root_addr[ZC_ADDR_BYTES]; /* rendezvous "host:port" where rank 0 listens; "" = none */
    uint8_t secret[ZC_SECRET_BYTES]; /* job secret every bootstrap connection proves */
    bool secret_set;             /* false: no secret given (allowed only for nranks == 1) */
    uint64_t timeout_ns;         /* deadline of every operation, ns; 0 = default (30 s) */
    uint64_t init_timeout_ns;    /* deadline of init and split, ns; 0 = default (60 s) */
    uint32_t max_requests;       /* request pool, 1..ZC_MAX_REQUESTS */
    uint32_t max_plans;          /* persistent plan table, 0..ZC_MAX_REQUESTS */
    uint32_t max_mems;           /* registration table, 0..4096 */
    uint32_t slot_bytes;         /* payload bytes per slot, 256..16 MiB, multiple of 64 */
    uint32_t slots;              /* slots per directed ring, 2..1024, power of two */
    uint32_t spin_polls;         /* empty polls before yielding, 1..1<<24; 0 = auto (see
                                  * ZC_DEFAULT_SPIN_POLLS) */
    zc_transport transport;      /* which wire; ZC_TRANSPORT_AUTO picks */
    uint64_t allreduce_oneshot_max_bytes; /* see ZC_DEFAULT_ALLREDUCE_ONESHOT_MAX_BYTES */
    uint64_t reduce_direct_max_bytes;     /* see ZC_DEFAULT_REDUCE_DIRECT_MAX_BYTES */
    uint64_t bcast_tree_max_bytes;        /* see ZC_DEFAULT_BCAST_TREE_MAX_BYTES */
    /* transport_ib (ZC_TRANSPORT_IB, or AUTO across hosts): */
    char ib_device[ZC_IB_DEVICE_BYTES]; /* verbs device name ("mlx5_0", "rxe0"); "" = the
                                         * first device with an active port */
    uint32_t ib_port;            /* port number, 1..255; 0 = the first active port */
    int32_t ib_gid_index;        /* GID table index; -1 = auto (prefers a RoCE v2 IPv4 GID,
                                  * then RoCE v2, then any; InfiniBand ports use LIDs) */
    uint32_t ib_qps_per_peer;    /* RC queue pairs per peer, 1..4 (messages stripe over them) */
    uint32_t ib_timeout;         /* QP local ACK timeout exponent (4.096 us * 2^v), 1..31;
                                  * 0 = derived so retries end within timeout_ns */
    uint32_t ib_retry_cnt;       /* QP transport retries, 0..7 */
    uint32_t ib_zcopy_min_bytes; /* streams of at least this many bytes into memory the
                                  * receiver registered (zc_mem_register) are written there
                                  * directly; 0 = never (see ZC_DEFAULT_IB_ZCOPY_MIN_BYTES) */
    /* gpu/ (CUDA builds, or the simulated device of gpu_provider ZC_GPU_PROVIDER_SIM): */
    int32_t gpu_device;          /* CUDA device of device-memory collectives: -1 (default) =
                                  * the device current in the thread that runs zc_comm_init
                                  * if the process already has a CUDA context there (else none:
                                  * host-only programs never get a context from zcoll); an
                                  * ordinal = that device; -2 = none (no GPU state). Without a
                                  * device ZC_MEM_CUDA registration is ZC_UNSUPPORTED */
    uint32_t gpu_stream_slots;   /* zc_*_stream calls in flight plus graph-captured ones held,
                                  * 0..4096 */
    uint64_t gpu_scratch_bytes;  /* device scratch, 0..1 GiB, multiple of 256: of in-place
                                  * device all_reduce (per round) on the ipc path, 0 refusing
                                  * it; on the direct path the landing areas of the peers'
                                  * data (gpu_scratch_bytes / nranks each, the most one round
                                  * or one RDMA write moves; under 256 B each: no direct
                                  * path). Must be equal on every rank */
    uint64_t gpu_oneshot_max_bytes; /* device all_reduce: one-shot up to this many bytes,
                                     * reduce-scatter + all-gather above */
    uint32_t gpu_provider;       /* zc_gpu_provider: ZC_GPU_PROVIDER_AUTO (default), _CUDA or
                                  * _SIM (the simulated device; every rank must use the same) */
    uint64_t sym_bytes;          /* symmetric region of every rank (zc_sym_alloc), a
                                  * multiple of 4096 up to 1 TiB; 0 (default) = none. Must be
                                  * equal on every rank; only the shared-memory wire has one */
    uint32_t gpu_path;           /* zc_gpu_path: ZC_GPU_PATH_AUTO (default), _IPC, _STAGED or
                                  * _DIRECT; every rank must use the same */
    uint64_t gpu_stage_bytes;    /* host staging of the staged path (one call at a time uses it,
                                  * larger calls run in rounds), 0..1 GiB, multiple of 256; 0
                                  * refuses staged calls. Must be equal on every rank */
    uint32_t threads;            /* zc_threads: ZC_THREADS_MULTI (default) or _SERIAL; may differ
                                  * between ranks */
    char error_text[ZC_ERROR_TEXT_BYTES]; /* written by zc_config_from_env on failure */
    uint32_t inproc_ranks_per_host; /* in-process groups only (ZC_TRANSPORT_INPROC): ranks per
                                     * simulated host k; 0 (default) or k >= nranks = one host.
                                     * Ranks 0..k-1 are host 0, k..2k-1 host 1, ... (the last
                                     * host may have fewer): zc_comm_node sees these hosts, and
                                     * children of zc_comm_split_inproc keep their parents'.
                                     * Other transports need 0 */
    uint32_t log_min_ranks;      /* host collectives take the log-depth algorithms from this
                                  * many ranks up (see ZC_DEFAULT_LOG_MIN_RANKS); 0 = never.
                                  * Must be equal on every rank */
    uint32_t overlay_min_ranks;  /* overlay mode from this many ranks up (0 = never, the
                                  * default): a rank connects only to ranks at distance 2^k
                                  * and its recursive-doubling partners, plus its own host's
                                  * ranks; every collective runs over those peers, send and
                                  * recv naming another rank need overlay_relay. Needs
                                  * log_min_ranks 1..this value. Every transport; between
                                  * processes a rank's own host is the ranks of its real host
                                  * or ZC_HOST_ID's claim. Must be equal on every rank (init
                                  * checks) */
    uint32_t overlay_relay;      /* overlay mode only: 1 = send and recv reach every rank, the
                                  * ranks between relaying (a third ring per connection: a
                                  * third more window and registered memory, zc_comm_footprint
                                  * counts it); 0 (default) = they reach connected ranks, and
                                  * one naming another rank returns ZC_UNSUPPORTED. Must be
                                  * equal on every rank (init checks) */
} zc_config;

/* Writes the defaults: one rank (rank 0 of 1), no rendezvous, no secret. */
void zc_config_default(zc_config *cfg);

/* Fills rank, nranks, local_rank, root_addr and secret from the launcher's environment, first
 * match wins: zcrun's ZC_RANK/ZC_NRANKS/ZC_LOCAL_RANK/ZC_ROOT_ADDR/ZC_SECRET; torchrun's
 * RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT; Open MPI's OMPI_COMM_WORLD_RANK/SIZE/
 * LOCAL_RANK; Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID. ZC_ROOT_ADDR and ZC_SECRET (or
 * ZC_SECRET_FILE, a file holding the 32 hex digits, read here once), when set, apply under
 * every launcher; MASTER_ADDR:(MASTER_PORT+1) is the rendezvous when ZC_ROOT_ADDR is absent
 * (torchrun keeps MASTER_PORT for its own store). Without a secret, more than one rank gets
 * one derived from public launcher values (the rendezvous address, job ids), which keeps
 * unrelated jobs apart but no intruder out: rank 0's zc_comm_init then logs a warning, once
 * (docs/security.md says how to pass a secret under each launcher). Tunables:
 * ZC_TIMEOUT_MS, ZC_SLOT_BYTES, ZC_SLOTS, ZC_MAX_REQUESTS, ZC_SPIN_POLLS, ZC_LOG_MIN_RANKS,
 * ZC_TRANSPORT (auto|shm|ib|hier), ZC_IB_DEVICE, ZC_IB_PORT, ZC_IB_GID_INDEX (or auto),
 * ZC_IB_QPS_PER_PEER, ZC_IB_TIMEOUT, ZC_IB_RETRY_CNT, ZC_IB_ZCOPY_MIN_BYTES, ZC_GPU_DEVICE (-2, -1
 * or an ordinal), ZC_GPU_STREAM_SLOTS, ZC_GPU_SCRATCH_BYTES, ZC_GPU_ONESHOT_MAX_BYTES,
 * ZC_GPU_PROVIDER (auto|cuda|sim), ZC_GPU_PATH (auto|ipc|staged|direct), ZC_GPU_STAGE_BYTES,
 * ZC_SYM_BYTES, ZC_THREADS (multi|serial), ZC_OVERLAY_MIN_RANKS, ZC_OVERLAY_RELAY (0|1),
 * ZC_INPROC_RANKS_PER_HOST (in-process groups only: set
 * with another transport it is refused). ZC_HOST_ID (read by zc_comm_init, not here; for tests
 * and simulations): the host this process claims for its connection set in overlay mode
 * (ranks claiming the same string are one host's ranks), so that processes on one machine
 * can act as ranks of several hosts; the wire still follows the real host, but for
 * ZC_TRANSPORT=hier, whose shared-memory instance carries the ranks of one claim. No launcher
 * variables at all leaves the single-rank default. Malformed values (non-numeric, rank >= size, size 0, more than one rank without a
 * rendezvous address, a secret that is not 32 hex digits, an unreadable ZC_SECRET_FILE, both
 * ZC_SECRET and ZC_SECRET_FILE) return ZC_INVALID_ARG with a sentence naming the variable in
 * cfg->error_text; cfg is then unchanged but for error_text. */
zc_status zc_config_from_env(zc_config *cfg);
/* zc_config_from_env's tunables only (ZC_TIMEOUT_MS to ZC_GPU_STAGE_BYTES, ZC_SYM_BYTES,
 * ZC_THREADS, ZC_INPROC_RANKS_PER_HOST, ZC_LOG_MIN_RANKS): rank, size, rendezvous and secret
 * stay as cfg has them, and no launcher variable is read; for a caller that takes those from
 * elsewhere (zcoll_torch: torch's own rank, size and store). The same refusals, sentence and all-or-nothing update. */
zc_status zc_config_tunables_from_env(zc_config *cfg);

/* Exact bytes of arena zc_comm_init needs for cfg (every byte of the communicator's state; the
 * shared-memory windows are mapped separately, except in-process where they are in the arena);
 * 0 if cfg is invalid (zc_comm_init says why). Never decreases when a size field grows. */
size_t zc_comm_arena_bytes(const zc_config *cfg);

/* What a communicator with cfg takes on rank cfg->rank (zc_comm_footprint). */
typedef struct zc_footprint {
    size_t arena_bytes;      /* zc_comm_arena_bytes(cfg) */
    size_t shared_bytes;     /* this rank's own share of shared memory (its windows) */
    size_t registered_bytes; /* host memory this rank registers with the NIC */
    size_t device_bytes;     /* device scratch and the stream slots' step descriptors */
    uint32_t peers;          /* ranks this rank exchanges messages with directly */
    uint32_t qps;            /* RDMA queue pairs this rank opens */
    uint64_t cq_entries;     /* entries of its completion queue (0: none) */
    size_t private_bytes;    /* host memory beyond the arena that is not shared (transport_ib:
                              * its window and staging, the registered_bytes) */
    size_t address_bytes;    /* the arena's table of its connections' wire addresses */
    uint32_t hosts;          /* hosts the ranks span (ceil(nranks / ranks_per_host)) */
    zc_transport transport;  /* the wire init picks: SHM, IB, HIER or INPROC (AUTO resolved);
                              * for HIER shared_bytes is the shm instance's windows,
                              * registered_bytes, qps and cq_entries the ib instance's */
    size_t init_bytes;       /* of arena_bytes, the scratch init (and split) work in: between
                              * processes the bootstrap, 112 bytes per rank (hellos, the
                              * place index, rank 0's table) and a work area (4 bytes per
                              * rank, or the address window when larger) */
    size_t rank_bytes;       /* of arena_bytes, the tables of every rank the communicator
                              * keeps after init (rank -> connection; in process also the
                              * group's communicators, their wake bits and its alarm
                              * count) */
} zc_footprint;

/* What a communicator with cfg would take on rank cfg->rank when its ranks run ranks_per_host
 * to a host (ranks 0..k-1 on the first, and so on; 0: all on one host), on the wire init picks
 * (AUTO: shared memory on one host, transport_ib across hosts): its arena, the memory its wire
 * takes beyond the arena (a shared window, registered pages), its device scratch (on the path
 * init tries first; 0 without a gpu provider), its peers, queue pairs and completion queue
 * entries. Computed by the functions init sizes everything with; creates, maps and opens
 * nothing, never blocks. In-process (ZC_TRANSPORT_INPROC) the hosts are cfg's simulated ones
 * (cfg->inproc_ranks_per_host; ranks_per_host is ignored) and the window is in the arena
 * (shared_bytes 0). ZC_INVALID_ARG for a NULL argument or an invalid cfg
 * (as zc_comm_arena_bytes: cfg->nranks above ZC_MAX_RANKS, no rendezvous address or secret for
 * several ranks), ZC_UNSUPPORTED for shared memory across hosts or transport_ib in a build
 * without it; zc_init_error_text() then says why and *out is zeroed. */
zc_status zc_comm_footprint(const zc_config *cfg, uint32_t ranks_per_host, zc_footprint *out);

/* ---- the communicator ---------------------------------------------------------------------- */
typedef struct zc_comm zc_comm;

/* Collective over all cfg->nranks ranks: rendezvous at cfg->root_addr (every connection proves
 * the secret), map the shared-memory windows, carve all state from arena (8-byte aligned, at
 * least zc_comm_arena_bytes(cfg) bytes; the caller keeps owning it and must not touch it until
 * zc_comm_fini). Blocks until every rank joined or cfg->init_timeout_ns passed. On failure
 * *comm_out is NULL, nothing stays mapped or open, and zc_init_error_text() says why. After
 * init nothing is allocated, mapped or registered by zcoll. Reentrant: threads may create
 * different communicators at once (init's scratch is in the arena; split's in the parent's). */
zc_status zc_comm_init(const zc_config *cfg, void *arena, size_t arena_bytes,
                       zc_comm **comm_out);
/* The sentence of the last failed zc_comm_init / zc_comm_split / _inproc call of this
 * process (one static buffer: concurrent failing inits may overwrite each other's). */
const char *zc_init_error_text(void);

/* In-process mode: nranks communicators of one job inside this process (for tests and
 * single-process pipelines). cfg->transport must be ZC_TRANSPORT_INPROC and cfg->nranks the
 * number of ranks; arenas[r] (each zc_comm_arena_bytes(cfg) bytes) becomes rank r's comms[r].
 * Ranks are progressed in turn by whichever thread calls zc_progress/zc_wait: zc_wait on one
 * rank progresses the group's other ranks too (at each of its passes those that something
 * arrived for, now and then every rank). Not collective: returns at once. */
zc_status zc_comm_init_inproc(const zc_config *cfg, void *const arenas[], size_t arena_bytes,
                              zc_comm *comms[]);

/* Collective over parent's ranks: ranks with the same color form a child communicator ranked
 * by (key, parent rank), with its own arena (zc_comm_arena_bytes of the parent's config always
 * suffices) and its own windows; usable concurrently with the parent. A negative color gives
 * *child_out == NULL for that rank. Blocks until done or the parent's init timeout. A child
 * runs on its parent's wire, except that a child whose ranks all share one host runs on shared
 * memory when the parent's cfg->transport was ZC_TRANSPORT_AUTO, and a child of a hier
 * communicator whose ranks share one host (or one ZC_HOST_ID claim) runs on shared memory too.
 * Splitting with zc_comm_node as the color gives a communicator per host (and, say, the ranks
 * with zc_comm_node(c) == zc_comm_rank(c) as the cross-host communicator). */
zc_status zc_comm_split(zc_comm *parent, int color, int key, void *arena, size_t arena_bytes,
                        zc_comm **child_out);
/* The same for every rank of an in-process group at once: parents[r], colors[r], keys[r],
 * arenas[r] for r < zc_comm_size(parents[0]); children[r] as above. */
zc_status zc_comm_split_inproc(zc_comm *const parents[], const int colors[], const int keys[],
                               void *const arenas[], size_t arena_bytes, zc_comm *children[]);

/* Local, never blocks: fails every request in flight with ZC_ABORTED and tells the peers the
 * job failed. Later calls return ZC_ABORTED until zc_comm_fini. */
zc_status zc_comm_abort(zc_comm *comm);
/* Local: unmaps the windows and forgets the communicator; requests still in flight are
 * abandoned. The caller owns the arena again. Never blocks on a caller's stream: while a
 * stream-ordered call (zc_*_stream) is still on its stream (in flight, or ended but its stream
 * not yet past it), fini returns ZC_INVALID_STATE with a sentence and changes nothing (drive
 * zc_progress until the streams passed their calls, then call it again); on a failed or
 * aborted communicator it first releases the calls still waiting (their streams go on, their
 * outputs untouched). A CUDA graph that captured a call must not be launched after fini.
 * Over transport_ib a communicator that has not failed first waits until its peers consumed
 * the messages it sent them, at most as long as its queue pairs retry (ib_timeout,
 * ib_retry_cnt; 10 s at most): a lost packet is sent again only by the queue pair that fini
 * destroys. */
zc_status zc_comm_fini(zc_comm *comm);
uint32_t zc_comm_rank(const zc_comm *comm);
uint32_t zc_comm_size(const zc_comm *comm);
/* The lowest rank of comm on this rank's host: equal for the ranks that share a host, so it
 * serves as a zc_comm_split color for a communicator per host (0 for NULL). */
uint32_t zc_comm_node(const zc_comm *comm);
/* The wire this communicator runs on: "shm", "ib" (transport_ib), "hier" (shm within a host,
 * transport_ib across hosts), or "none" for NULL. */
const char *zc_comm_transport(const zc_comm *comm);
/* Why this communicator failed, once it has (the first failure's sentence: later errors do not
 * replace it); before that, the sentence of the last call that failed ("" if none). Never
 * NULL. */
const char *zc_comm_error_text(const zc_comm *comm);
/* The path this communicator's device-memory calls take, decided at init: "ipc", "staged",
 * "direct", or "none" (no gpu provider). Never NULL. Over transport_ib with gpu_path auto, init
 * picks direct when every rank's device supports GPUDirect RDMA and every rank's NIC registered
 * its device landing memory, staged otherwise (ZC_LOG=info prints which and why). */
const char *zc_comm_gpu_path(const zc_comm *comm);
/* Device-memory calls this communicator ran on the staged path, and their rounds, since init
 * (0 and 0 for NULL or a communicator without a gpu provider): how a program or test sees
 * which path its calls took. */
void zc_comm_gpu_staged(const zc_comm *comm, uint64_t *calls, uint64_t *rounds);
/* Device-memory calls this communicator ran on the direct path since init, and the bytes its
 * NIC wrote from this rank into peers' device memory for them (0 and 0 for NULL or a
 * communicator without a gpu provider). */
void zc_comm_gpu_direct(const zc_comm *comm, uint64_t *calls, uint64_t *bytes);
/* Messages this rank posted to and consumed from its peers since init, every connection and
 * lane together (0 and 0 for NULL): what a call costs in messages is the difference across it.
 * Reads counters only; O(connections). */
void zc_comm_messages(const zc_comm *comm, uint64_t *sent, uint64_t *received);
/* What this machine offers device-memory collectives and what zcoll would do with it, one line
 * at a time through emit (each line without its newline; user passed back): the CUDA driver and
 * runtime versions; every GPU (name, compute capability, multiprocessors, memory, PCI bus id,
 * GPUDirect RDMA, the NIC writes ordering and flush options, dma-buf export, stream memory
 * operations); the peer-access matrix; every RDMA device and whether it registers GPU memory
 * (through dma-buf, and by address with nvidia-peermem); and the path (ipc, staged, direct)
 * ranks on one host and across hosts would take, with the reason. Absent things say "none".
 * cfg picks the gpu provider (cfg->gpu_provider; NULL: the defaults). ZC_OK when a GPU is
 * usable, ZC_UNSUPPORTED when there is none, ZC_GPU when one is there but unusable (a driver
 * too old). Not reentrant; opens devices for a while: a tool's call (build/zcprobe prints it),
 * not a communicator's. */
zc_status zc_device_report(const zc_config *cfg, void (*emit)(void *user, const char *line),
                           void *user);

/* ---- memory registration ----------------------------------------------------------------- */
typedef struct zc_mem zc_mem;
/* Registers [addr, addr+bytes) from the fixed table in the arena (ZC_LIMIT when full). Host
 * buffers need not be registered: unregistered host memory is staged through the slots, and the
 * shared-memory wire stages registered host memory too (it cannot write another process's
 * private pages). Over transport_ib (cfg->ib_zcopy_min_bytes not 0) the NIC registers host
 * memory too (ibv_reg_mr; failures such as the locked-memory limit are returned, with the
 * reason): a collective's stream of at least ib_zcopy_min_bytes from one peer (its block of an
 * all-gather, gather, all-to-all or all_reduce's all-gather half, a broadcast, a scatter block)
 * whose destination lies in one registration is written there by RDMA, read straight from the
 * sender's buffer when that is registered too; send/recv still go through the slots. Local:
 * ranks register independently. Deregister only what no request in flight uses.
 * ZC_MEM_CUDA: device memory from cudaMalloc on the communicator's device (cfg->gpu_device),
 * which every collective on device memory needs (ZC_INVALID_ARG for unregistered device memory,
 * host or managed memory registered as CUDA, or a range past its allocation). With more than
 * one rank it is collective: every rank registers its CUDA buffers in the same order (sizes
 * may differ) and deregisters them in the same order; the call returns at once and the peers
 * map each other's buffers (CUDA IPC) during zc_progress, before the first collective that
 * uses them moves data. ZC_UNSUPPORTED without CUDA in this build (and gpu_provider not
 * ZC_GPU_PROVIDER_SIM) or without a usable device in this process (the error text says which
 * and why). With the simulated device, "device memory" is what zc_gpu_sim_alloc returned.
 * Over transport_ib (or with gpu_path ZC_GPU_PATH_STAGED) there is no IPC exchange and the
 * registration is local. On the direct path the NIC registers the buffer (through a dma-buf
 * export of its pages, ibv_reg_dmabuf_mr, else by address, nvidia-peermem; a refusal is this
 * call's status, with both reasons) and peers' RDMA writes land in it; on the staged path the
 * NIC never sees it (calls copy through host staging in the arena). */
zc_status zc_mem_register(zc_comm *comm, void *addr, size_t bytes, zc_mem_kind kind,
                          zc_mem **mem_out);
/* Ends a registration; ZC_INVALID_STATE while a call in flight uses the buffer (or a
 * stream-ordered call whose stream has not passed it; a graph-captured one until zc_comm_fini).
 * A ZC_MEM_CUDA registration that peers mapped through CUDA IPC (the ipc path, more than one
 * rank) ends collectively, like its registration: every rank deregisters its CUDA buffers in
 * the same order (else ZC_MISMATCH), and the call returns once every peer unmapped this rank's
 * buffer, driving zc_progress meanwhile up to the deadline, so the memory may be freed then
 * (CUDA leaves freeing it before then undefined). zc_comm_fini unmaps the peers' buffers too: a
 * buffer still registered at fini may be freed once every rank's zc_comm_fini returned. */
zc_status zc_mem_deregister(zc_comm *comm, zc_mem *mem);

/* ---- the symmetric region (single copy on one host) ---------------------------------------- */
/* With cfg->sym_bytes > 0 on the shared-memory wire, each rank's shared segment holds a region of
 * that many bytes that every peer process has mapped since init. zc_sym_alloc carves `bytes`
 * (rounded up to 64, 64-byte aligned) from this rank's region by moving a mark: no system call
 * and no allocation, so the same calls in the same order on every rank give the same offsets.
 * ZC_LIMIT when the region has no room left, ZC_UNSUPPORTED without a region (sym_bytes 0, or a
 * wire without one: ib). zc_sym_free(comm, p) gives back p and everything carved after it (a
 * stack); ZC_INVALID_ARG for a pointer zc_sym_alloc did not return or already gave back. Free
 * only what no request in flight uses.
 * A collective of at least ZC_SYM_MIN_BYTES whose buffers (every one this rank passes) lie in the
 * region, on every rank, runs single-copy: each rank reads its peers' inputs where they are and
 * writes each result once (all_reduce, reduce, reduce_scatter: rank r reduces block r of every
 * input, in the rank tree as everywhere else, so results are bitwise those of the other
 * algorithms; all_gather, all_to_all, gather, scatter, broadcast: the copies are shared out
 * among the ranks). Two short messages per peer mark "inputs ready" and "done"; in-place
 * all_to_all goes through the slots. A send and its recv of at least ZC_SYM_MIN_BYTES with both
 * buffers in the regions run single-copy too: the receiver copies straight from the sender's
 * buffer, and the send finishes once the receiver has (one message, the sender's; the
 * message's credit coming back says so). Ranks that disagree (one passes region buffers,
 * another does not) fail with ZC_MISMATCH, as any other mismatched call. */
#define ZC_SYM_MIN_BYTES 65536u
zc_status zc_sym_alloc(zc_comm *comm, size_t bytes, void **out);
zc_status zc_sym_free(zc_comm *comm, void *p);

/* ---- requests and progress ---------------------------------------------------------------- */
#define ZC_REQ_WORDS 4
typedef struct zc_req { uint64_t opaque_[ZC_REQ_WORDS]; } zc_req;   /* caller-owned */

/* Moves every request of comm forward by a bounded amount of work; never blocks. After
 * cfg->spin_polls calls in a row that found nothing to do it yields the CPU once (so many ranks
 * on few cores do not starve each other). Returns ZC_OK or the communicator's failure. */
zc_status zc_progress(zc_comm *comm);
/* Reads req: ZC_OK (done), ZC_IN_PROGRESS, or the failure. Once it returns anything but
 * ZC_IN_PROGRESS the request is finished: its slot is free and req may be reused. */
zc_status zc_test(zc_comm *comm, zc_req *req);
/* Progresses (every rank of an in-process group) until req finishes or its deadline passes. */
zc_status zc_wait(zc_comm *comm, zc_req *req);

/* ---- collectives (non-blocking; counts are in elements) ------------------------------------
 * Each validates its arguments (ZC_INVALID_ARG with a sentence, nothing written, the
 * communicator stays usable), takes a request slot (ZC_AGAIN when all cfg->max_requests are in
 * flight) and returns ZC_OK; the buffers belong to zcoll until the request finishes.
 * In place: send == recv for allreduce, reduce, broadcast; reduce_scatter when
 * recv == send + rank*recvcount*size; allgather and gather when send == recv + rank*sendcount*
 * size; scatter at the root when recv == send + root*recvcount*size. Other overlaps are
 * ZC_INVALID_ARG. count == 0 completes without moving data. Collectives must be called in the
 * same order on every rank: a rank that does otherwise gets ZC_MISMATCH, and so do its peers. */
zc_status zc_allreduce(zc_comm *comm, const void *send, void *recv, size_t count, zc_dtype dtype,
                       zc_op op, zc_req *req);
/* recv is written at the root only (may be NULL elsewhere). */
zc_status zc_reduce(zc_comm *comm, const void *send, void *recv, size_t count, zc_dtype dtype,
                    zc_op op, uint32_t root, zc_req *req);
/* send is read at the root only (may be NULL elsewhere); every rank's recv gets it (at the root
 * too, when recv != send). */
zc_status zc_broadcast(zc_comm *comm, const void *send, void *recv, size_t count,
                       zc_dtype dtype, uint32_t root, zc_req *req);
/* send holds nranks*recvcount elements; recv gets block `rank` of the reduction. */
zc_status zc_reduce_scatter(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                            zc_dtype dtype, zc_op op, zc_req *req);
/* recv holds nranks*sendcount elements, block r from rank r. */
zc_status zc_allgather(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                       zc_dtype dtype, zc_req *req);
/* recv (nranks*sendcount) is used at the root only. */
zc_status zc_gather(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                    zc_dtype dtype, uint32_t root, zc_req *req);
/* send (nranks*recvcount) is used at the root only. */
zc_status zc_scatter(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                     zc_dtype dtype, uint32_t root, zc_req *req);
/* count elements per peer: block p of send goes to rank p, block p of recv comes from it. */
zc_status zc_alltoall(zc_comm *comm, const void *send, void *recv, size_t count,
                      zc_dtype dtype, zc_req *req);
/* Point to point: sends and receives between one pair complete in call order; the receive's
 * count and dtype must equal the send's (else ZC_MISMATCH). peer must not be this rank.
 * zc_recv also takes peer ZC_ANY_SOURCE (see zc_recv_tagged). zc_send and zc_recv are the
 * tagged forms with tag 0. */
zc_status zc_send(zc_comm *comm, const void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                  zc_req *req);
zc_status zc_recv(zc_comm *comm, void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                  zc_req *req);
/* A receive's peer that matches a message from any rank. */
#define ZC_ANY_SOURCE 0xffffffffu
/* Tags: every message carries its send's tag, and a receive's tag must equal the tag of the
 * message it takes, as count and dtype must (else ZC_MISMATCH, whose sentence names both
 * calls): tags are checked, never used to reorder. A receive takes the next message of its
 * peer in call order whatever its tag, so a program whose sends and receives between a pair
 * come in different tag orders fails with that sentence instead of receiving out of order.
 *
 * zc_recv_tagged with peer ZC_ANY_SOURCE (host memory only; ZC_UNSUPPORTED for registered
 * device memory and in persistent or stream-ordered forms; ZC_INVALID_ARG in a communicator of
 * one rank) takes the first message that arrives from any peer and that no earlier receive
 * took: the progress poll that first finds one takes it, and when messages of several peers are
 * there at that poll, the lowest rank's. It keeps call order: a receive issued after it (a
 * named one too) does not take a message before it was matched, and it does not take a message
 * an earlier receive will. Once matched it is a receive from that peer (its count, dtype and
 * tag checked against the message, its deadline running from its issue). source (may be NULL)
 * gets the matched peer when the receive is matched, which is before zc_test or zc_wait says
 * ZC_OK (ZC_ANY_SOURCE for count 0, which completes at once without a message, as any count-0
 * receive does); it is the caller's until the request finished. With a named peer, *source is
 * that peer. */
zc_status zc_send_tagged(zc_comm *comm, const void *buf, size_t count, zc_dtype dtype,
                         uint32_t peer, uint32_t tag, zc_req *req);
zc_status zc_recv_tagged(zc_comm *comm, void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                         uint32_t tag, uint32_t *source, zc_req *req);
zc_status zc_barrier(zc_comm *comm, zc_req *req);

/* ---- persistent collectives ----------------------------------------------------------------
 * Each _init validates once and stores the schedule in a plan slot of the arena (ZC_LIMIT when
 * all cfg->max_plans are taken); zc_start runs it again (no validation beyond the plan's state,
 * no schedule building) and is waited on like any request; a plan may be started again once
 * its previous start finished. zc_plan_release frees the slot (ZC_INVALID_STATE while
 * running). */
#define ZC_PLAN_WORDS 4
typedef struct zc_plan { uint64_t opaque_[ZC_PLAN_WORDS]; } zc_plan;   /* caller-owned */
zc_status zc_allreduce_init(zc_comm *comm, const void *send, void *recv, size_t count,
                            zc_dtype dtype, zc_op op, zc_plan *plan);
zc_status zc_reduce_init(zc_comm *comm, const void *send, void *recv, size_t count,
                         zc_dtype dtype, zc_op op, uint32_t root, zc_plan *plan);
zc_status zc_broadcast_init(zc_comm *comm, const void *send, void *recv, size_t count,
                            zc_dtype dtype, uint32_t root, zc_plan *plan);
zc_status zc_reduce_scatter_init(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                                 zc_dtype dtype, zc_op op, zc_plan *plan);
zc_status zc_allgather_init(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                            zc_dtype dtype, zc_plan *plan);
zc_status zc_gather_init(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                         zc_dtype dtype, uint32_t root, zc_plan *plan);
zc_status zc_scatter_init(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                          zc_dtype dtype, uint32_t root, zc_plan *plan);
zc_status zc_alltoall_init(zc_comm *comm, const void *send, void *recv, size_t count,
                           zc_dtype dtype, zc_plan *plan);
zc_status zc_send_init(zc_comm *comm, const void *buf, size_t count, zc_dtype dtype,
                       uint32_t peer, zc_plan *plan);
zc_status zc_recv_init(zc_comm *comm, void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                       zc_plan *plan);
zc_status zc_barrier_init(zc_comm *comm, zc_plan *plan);
zc_status zc_start(zc_comm *comm, zc_plan *plan, zc_req *req);
zc_status zc_plan_release(zc_comm *comm, zc_plan *plan);

/* ---- collectives on device memory and stream-ordered forms (CUDA, or the simulated device) --
 * Every collective above, and send/recv, also runs on registered ZC_MEM_CUDA buffers (all
 * buffers of the call), on the path zc_comm_gpu_path names: ipc (one host: kernels read the
 * peers' buffers through CUDA IPC; send/recv go through host staging), direct (transport_ib:
 * the NIC writes peers' bytes into device memory) or staged (through host memory). Reductions
 * are in the rank tree (zc_op), with results bitwise those of the host kernels. The non-stream forms
 * read the inputs as they are when the call is made (synchronize the producing stream first)
 * and the outputs are complete when zc_test says ZC_OK.
 *
 * The _stream forms below take the same arguments with the final zc_req * replaced by
 * cuda_stream (a cudaStream_t, NULL being the legacy default stream; with the simulated device
 * a zc_gpu_sim_stream *). Each enqueues on that stream, and only there, the collective's whole
 * device program: "start after the work queued before", the collective's kernels (each waiting
 * for the host's go), and "wait until the collective finished", so it is safe however the
 * runtime maps streams onto hardware queues (CUDA_DEVICE_MAX_CONNECTIONS=1 included); it never
 * blocks the calling thread and returns ZC_OK once enqueued, and the caller keeps driving
 * zc_progress (no hidden thread) until the stream passed it. A call needing more than 128
 * device steps (rounds of gpu_scratch_bytes) is ZC_UNSUPPORTED with a sentence. A call takes its
 * place in the communicator's call order when made; a call made while the stream is being
 * captured into a CUDA graph is held (one of cfg->gpu_stream_slots, until zc_comm_fini) and
 * runs once per replay, taking its place in the call order when the replay reaches it (so
 * every rank must replay its graphs in the same order). ZC_AGAIN when every stream slot is in
 * use. A failure after the call is reported by zc_progress and the communicator's error text;
 * the stream then goes on (its wait is released) rather than hang. Buffers must be registered
 * ZC_MEM_CUDA memory (barrier and count 0 need none). Without a gpu provider they return
 * ZC_UNSUPPORTED with a sentence. */
zc_status zc_allreduce_stream(zc_comm *comm, const void *send, void *recv, size_t count,
                              zc_dtype dtype, zc_op op, void *cuda_stream);
zc_status zc_reduce_stream(zc_comm *comm, const void *send, void *recv, size_t count,
                           zc_dtype dtype, zc_op op, uint32_t root, void *cuda_stream);
zc_status zc_broadcast_stream(zc_comm *comm, const void *send, void *recv, size_t count,
                              zc_dtype dtype, uint32_t root, void *cuda_stream);
zc_status zc_reduce_scatter_stream(zc_comm *comm, const void *send, void *recv,
                                   size_t recvcount, zc_dtype dtype, zc_op op,
                                   void *cuda_stream);
zc_status zc_allgather_stream(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                              zc_dtype dtype, void *cuda_stream);
zc_status zc_gather_stream(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                           zc_dtype dtype, uint32_t root, void *cuda_stream);
zc_status zc_scatter_stream(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                            zc_dtype dtype, uint32_t root, void *cuda_stream);
zc_status zc_alltoall_stream(zc_comm *comm, const void *send, void *recv, size_t count,
                             zc_dtype dtype, void *cuda_stream);
zc_status zc_send_stream(zc_comm *comm, const void *buf, size_t count, zc_dtype dtype,
                         uint32_t peer, void *cuda_stream);
zc_status zc_recv_stream(zc_comm *comm, void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                         void *cuda_stream);
zc_status zc_barrier_stream(zc_comm *comm, void *cuda_stream);

#ifdef __cplusplus
}
#endif
#endif /* ZCOLL_H */
