/* config.c: zc_config defaults, the launcher environment (zcrun, torchrun, Open MPI, Slurm)
 * and the one validity check that zc_comm_arena_bytes and zc_comm_init share. Reads the
 * environment only through the platform layer. */
#include "config.h"

#include "platform.h"
#include "text.h"

void zc_config_default(zc_config *cfg) {
    zc__memset(cfg, 0, sizeof *cfg);
    cfg->version = ZC_CONFIG_VERSION;
    cfg->rank = 0;
    cfg->nranks = 1;
    cfg->timeout_ns = ZC_DEFAULT_TIMEOUT_NS;
    cfg->init_timeout_ns = ZC_DEFAULT_INIT_TIMEOUT_NS;
    cfg->max_requests = ZC_DEFAULT_MAX_REQUESTS;
    cfg->max_plans = ZC_DEFAULT_MAX_PLANS;
    cfg->max_mems = ZC_DEFAULT_MAX_MEMS;
    cfg->slot_bytes = ZC_DEFAULT_SLOT_BYTES;
    cfg->slots = ZC_DEFAULT_SLOTS;
    cfg->spin_polls = 0; /* auto: decided at init from the ranks per CPU */
    cfg->transport = ZC_TRANSPORT_AUTO;
    cfg->allreduce_oneshot_max_bytes = ZC_DEFAULT_ALLREDUCE_ONESHOT_MAX_BYTES;
    cfg->reduce_direct_max_bytes = ZC_DEFAULT_REDUCE_DIRECT_MAX_BYTES;
    cfg->bcast_tree_max_bytes = ZC_DEFAULT_BCAST_TREE_MAX_BYTES;
    cfg->ib_gid_index = -1;
    cfg->ib_qps_per_peer = ZC_DEFAULT_IB_QPS_PER_PEER;
    cfg->ib_retry_cnt = ZC_DEFAULT_IB_RETRY_CNT;
    cfg->ib_zcopy_min_bytes = ZC_DEFAULT_IB_ZCOPY_MIN_BYTES;
    cfg->gpu_device = -1;
    cfg->gpu_stream_slots = ZC_DEFAULT_GPU_STREAM_SLOTS;
    cfg->gpu_scratch_bytes = ZC_DEFAULT_GPU_SCRATCH_BYTES;
    cfg->gpu_oneshot_max_bytes = ZC_DEFAULT_GPU_ONESHOT_MAX_BYTES;
    cfg->gpu_provider = ZC_GPU_PROVIDER_AUTO;
    cfg->gpu_path = ZC_GPU_PATH_AUTO;
    cfg->gpu_stage_bytes = ZC_DEFAULT_GPU_STAGE_BYTES;
    cfg->threads = ZC_THREADS_MULTI;
    cfg->log_min_ranks = ZC_DEFAULT_LOG_MIN_RANKS;
    cfg->overlay_min_ranks = 0;
}

static bool zc_has_nul(const char *s, size_t cap) {
    for (size_t i = 0; i < cap; i++)
        if (!s[i]) return true;
    return false;
}

/* Splits "host:port" (the last ':'); false unless both parts are there and the port is
 * 1..65535. host gets a NUL-terminated copy. */
bool zc__split_addr(const char *addr, char *host, size_t host_cap, uint16_t *port) {
    size_t len = zc__strlen(addr), colon = len;
    for (size_t i = 0; i < len; i++)
        if (addr[i] == ':') colon = i;
    uint64_t p = 0;
    if (colon == 0 || colon >= len || colon + 1 > host_cap) return false;
    if (!zc__parse_u64(addr + colon + 1, &p) || p == 0 || p > 65535u) return false;
    zc__memcpy(host, addr, colon);
    host[colon] = '\0';
    *port = (uint16_t)p;
    return true;
}

static bool zc_is_pow2(uint32_t v) { return v && !(v & (v - 1)); }

bool zc__config_check(const zc_config *cfg, char *why, size_t cap) {
    char host[ZC_ADDR_BYTES];
    uint16_t port;
#define ZC_REQUIRE_(cond, ...)                                                                  \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            if (why) zc__fmt(why, cap, __VA_ARGS__);                                            \
            return false;                                                                       \
        }                                                                                       \
    } while (0)
    ZC_REQUIRE_(cfg != NULL, "cfg is NULL");
    ZC_REQUIRE_(cfg->version == ZC_CONFIG_VERSION,
                "cfg->version is %u, expected %u: start from zc_config_default()", cfg->version,
                ZC_CONFIG_VERSION);
    ZC_REQUIRE_(cfg->nranks >= 1 && cfg->nranks <= ZC_MAX_RANKS,
                "cfg->nranks is %u, must be 1..%u", cfg->nranks, ZC_MAX_RANKS);
    ZC_REQUIRE_(cfg->nranks <= ZC_MESH_MAX_RANKS ||
                    (cfg->overlay_min_ranks && cfg->overlay_min_ranks <= cfg->nranks),
                "cfg->nranks is %u: more than %u ranks need overlay mode (overlay_min_ranks "
                "1..nranks), where each rank connects to O(log n) of them", cfg->nranks,
                ZC_MESH_MAX_RANKS);
    ZC_REQUIRE_(cfg->rank < cfg->nranks, "cfg->rank %u is not below cfg->nranks %u", cfg->rank,
                cfg->nranks);
    ZC_REQUIRE_(cfg->max_requests >= 1 && cfg->max_requests <= ZC_MAX_REQUESTS,
                "cfg->max_requests is %u, must be 1..%u", cfg->max_requests, ZC_MAX_REQUESTS);
    ZC_REQUIRE_(cfg->max_plans <= ZC_MAX_REQUESTS, "cfg->max_plans is %u, must be 0..%u",
                cfg->max_plans, ZC_MAX_REQUESTS);
    ZC_REQUIRE_(cfg->max_mems <= ZC_MAX_MEMS, "cfg->max_mems is %u, must be 0..%u",
                cfg->max_mems, ZC_MAX_MEMS);
    ZC_REQUIRE_(cfg->slot_bytes >= 256u && cfg->slot_bytes <= (16u << 20) &&
                    cfg->slot_bytes % 64u == 0,
                "cfg->slot_bytes is %u, must be a multiple of 64 in 256..16777216",
                cfg->slot_bytes);
    ZC_REQUIRE_(cfg->slots >= 2u && cfg->slots <= 1024u && zc_is_pow2(cfg->slots),
                "cfg->slots is %u, must be a power of two in 2..1024", cfg->slots);
    ZC_REQUIRE_(cfg->spin_polls <= (1u << 24),
                "cfg->spin_polls is %u, must be 0 (auto) or 1..16777216", cfg->spin_polls);
    ZC_REQUIRE_((unsigned)cfg->transport <= (unsigned)ZC_TRANSPORT_HIER,
                "cfg->transport is %u, not a zc_transport", (unsigned)cfg->transport);
    ZC_REQUIRE_(zc_has_nul(cfg->ib_device, sizeof cfg->ib_device),
                "cfg->ib_device is not NUL-terminated");
    ZC_REQUIRE_(cfg->ib_port <= 255u, "cfg->ib_port is %u, must be 0 (auto) or 1..255",
                cfg->ib_port);
    ZC_REQUIRE_(cfg->ib_gid_index >= -1 && cfg->ib_gid_index <= 65535,
                "cfg->ib_gid_index is %d, must be -1 (auto) or 0..65535", (int)cfg->ib_gid_index);
    ZC_REQUIRE_(cfg->ib_qps_per_peer >= 1u && cfg->ib_qps_per_peer <= 4u,
                "cfg->ib_qps_per_peer is %u, must be 1..4", cfg->ib_qps_per_peer);
    ZC_REQUIRE_(cfg->ib_timeout <= 31u, "cfg->ib_timeout is %u, must be 0 (auto) or 1..31",
                cfg->ib_timeout);
    ZC_REQUIRE_(cfg->ib_retry_cnt <= 7u, "cfg->ib_retry_cnt is %u, must be 0..7",
                cfg->ib_retry_cnt);
    ZC_REQUIRE_(cfg->gpu_device >= -2, "cfg->gpu_device is %d, must be -2 (none), -1 (current) "
                "or a device ordinal", (int)cfg->gpu_device);
    ZC_REQUIRE_(cfg->gpu_provider <= ZC_GPU_PROVIDER_SIM, "cfg->gpu_provider is %u, must be "
                "0 (auto), 1 (cuda) or 2 (sim)", cfg->gpu_provider);
    ZC_REQUIRE_(cfg->gpu_stream_slots <= ZC_MAX_GPU_STREAM_SLOTS,
                "cfg->gpu_stream_slots is %u, must be 0..%u", cfg->gpu_stream_slots,
                ZC_MAX_GPU_STREAM_SLOTS);
    ZC_REQUIRE_(cfg->gpu_scratch_bytes <= (1ull << 30) && cfg->gpu_scratch_bytes % 256u == 0,
                "cfg->gpu_scratch_bytes is %llu, must be a multiple of 256 in 0..1073741824",
                (unsigned long long)cfg->gpu_scratch_bytes);
    ZC_REQUIRE_(cfg->sym_bytes <= (1ull << 40) && cfg->sym_bytes % 4096u == 0,
                "cfg->sym_bytes is %llu, must be a multiple of 4096 in 0..1099511627776",
                (unsigned long long)cfg->sym_bytes);
    ZC_REQUIRE_(cfg->gpu_path <= ZC_GPU_PATH_DIRECT, "cfg->gpu_path is %u, must be 0 (auto), "
                "1 (ipc), 2 (staged) or 3 (direct)", cfg->gpu_path);
    ZC_REQUIRE_(cfg->threads <= ZC_THREADS_SERIAL, "cfg->threads is %u, must be 0 (multi) or 1 "
                "(serial)", cfg->threads);
    ZC_REQUIRE_(cfg->gpu_stage_bytes <= (1ull << 30) && cfg->gpu_stage_bytes % 256u == 0,
                "cfg->gpu_stage_bytes is %llu, must be a multiple of 256 in 0..1073741824",
                (unsigned long long)cfg->gpu_stage_bytes);
    ZC_REQUIRE_(!cfg->inproc_ranks_per_host || cfg->transport == ZC_TRANSPORT_INPROC,
                "cfg->inproc_ranks_per_host is %u but cfg->transport is %u: simulated hosts "
                "are for in-process groups (ZC_TRANSPORT_INPROC) only; real ranks take their "
                "host from the machine", cfg->inproc_ranks_per_host, (unsigned)cfg->transport);
    ZC_REQUIRE_(!cfg->overlay_min_ranks ||
                    (cfg->log_min_ranks && cfg->log_min_ranks <= cfg->overlay_min_ranks),
                "cfg->overlay_min_ranks is %u but cfg->log_min_ranks is %u: overlay mode runs "
                "only the log-depth algorithms, so log_min_ranks must be 1..overlay_min_ranks",
                cfg->overlay_min_ranks, cfg->log_min_ranks);
    ZC_REQUIRE_(zc_has_nul(cfg->root_addr, sizeof cfg->root_addr),
                "cfg->root_addr is not NUL-terminated");
    if (cfg->nranks > 1 && cfg->transport != ZC_TRANSPORT_INPROC) {
        ZC_REQUIRE_(zc__split_addr(cfg->root_addr, host, sizeof host, &port),
                    "cfg->root_addr \"%s\" is not host:port (needed for %u ranks)",
                    cfg->root_addr, cfg->nranks);
        ZC_REQUIRE_(cfg->secret_set, "cfg->secret is not set (needed for %u ranks)",
                    cfg->nranks);
    }
#undef ZC_REQUIRE_
    return true;
}

/* ---- the launcher environment ---- */

typedef struct zc_env_err {
    char *text;
    size_t cap;
} zc_env_err;

/* Reads a whole decimal variable; returns false (with a sentence) when set but malformed. */
static bool zc_env_u64(const char *name, uint64_t max, bool *present, uint64_t *value,
                       zc_env_err *err) {
    const char *s = zc_plat_getenv(name);
    *present = s != NULL;
    if (!s) return true;
    if (!zc__parse_u64(s, value) || *value > max) {
        zc__fmt(err->text, err->cap, "%s=\"%s\" is not a whole number in 0..%llu", name, s,
                (unsigned long long)max);
        return false;
    }
    return true;
}

typedef struct zc_launcher {
    const char *rank, *size, *local; /* variable names */
} zc_launcher;

static const zc_launcher zc_launchers[] = {
    {"ZC_RANK", "ZC_NRANKS", "ZC_LOCAL_RANK"},
    {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

static bool zc_env_ranks(zc_config *c, zc_env_err *err) {
    for (size_t i = 0; i < sizeof zc_launchers / sizeof zc_launchers[0]; i++) {
        const zc_launcher *l = &zc_launchers[i];
        bool has_rank, has_size, has_local;
        uint64_t rank = 0, size = 0, local = 0;
        if (!zc_env_u64(l->rank, UINT32_MAX, &has_rank, &rank, err)) return false;
        if (!has_rank) continue;
        /* processes: above ZC_MESH_MAX_RANKS in overlay mode only (zc__config_check) */
        if (!zc_env_u64(l->size, ZC_MAX_RANKS, &has_size, &size, err)) return false;
        if (!zc_env_u64(l->local, UINT32_MAX, &has_local, &local, err)) return false;
        if (!has_size || size == 0) {
            zc__fmt(err->text, err->cap, "%s is %s: it must be 1..%u when %s is set", l->size,
                    has_size ? "0" : "unset", ZC_MAX_RANKS, l->rank);
            return false;
        }
        bool has_ov;
        uint64_t ov = 0;
        if (!zc_env_u64("ZC_OVERLAY_MIN_RANKS", UINT32_MAX, &has_ov, &ov, err)) return false;
        if (size > ZC_MESH_MAX_RANKS && (!ov || ov > size)) {
            zc__fmt(err->text, err->cap, "%s=%llu: more than %u ranks need overlay mode "
                    "(ZC_OVERLAY_MIN_RANKS 1..%llu)", l->size, (unsigned long long)size,
                    ZC_MESH_MAX_RANKS, (unsigned long long)size);
            return false;
        }
        if (rank >= size) {
            zc__fmt(err->text, err->cap, "%s=%llu is not below %s=%llu", l->rank,
                    (unsigned long long)rank, l->size, (unsigned long long)size);
            return false;
        }
        c->rank = (uint32_t)rank;
        c->nranks = (uint32_t)size;
        c->local_rank = (uint32_t)local;
        return true;
    }
    return true; /* no launcher: the single-rank default stays */
}

static bool zc_env_addr(zc_config *c, zc_env_err *err) {
    char host[ZC_ADDR_BYTES];
    uint16_t port;
    const char *root = zc_plat_getenv("ZC_ROOT_ADDR");
    const char *maddr = zc_plat_getenv("MASTER_ADDR"), *mport = zc_plat_getenv("MASTER_PORT");
    if (root) {
        if (zc__strlen(root) >= sizeof c->root_addr ||
            !zc__split_addr(root, host, sizeof host, &port)) {
            zc__fmt(err->text, err->cap, "ZC_ROOT_ADDR=\"%s\" is not host:port (port 1..65535)",
                    root);
            return false;
        }
        zc__strlcpy(c->root_addr, root, sizeof c->root_addr);
        return true;
    }
    if (maddr || mport) {
        uint64_t p = 0;
        if (!maddr || !*maddr) {
            zc__fmt(err->text, err->cap, "MASTER_ADDR is %s while MASTER_PORT is %s",
                    maddr ? "empty" : "unset", mport ? "set" : "unset");
            return false;
        }
        if (!mport) {
            zc__fmt(err->text, err->cap, "MASTER_PORT is unset while MASTER_ADDR is set");
            return false;
        }
        /* torchrun's own store listens on MASTER_PORT: zcoll's rendezvous takes the next one. */
        if (!zc__parse_u64(mport, &p) || p == 0 || p > 65534u) {
            zc__fmt(err->text, err->cap, "MASTER_PORT=\"%s\" is not a port (1..65534; zcoll "
                    "listens on MASTER_PORT+1)", mport);
            return false;
        }
        if (zc__strlen(maddr) + 7 > sizeof c->root_addr) {
            zc__fmt(err->text, err->cap, "MASTER_ADDR is longer than %u characters",
                    ZC_ADDR_BYTES - 7u);
            return false;
        }
        zc__fmt(c->root_addr, sizeof c->root_addr, "%s:%u", maddr, (unsigned)p + 1u);
        return true;
    }
    if (c->nranks > 1 && !zc__split_addr(c->root_addr, host, sizeof host, &port)) {
        zc__fmt(err->text, err->cap,
                "no rendezvous address for %u ranks: set ZC_ROOT_ADDR (host:port) or "
                "MASTER_ADDR and MASTER_PORT",
                c->nranks);
        return false;
    }
    return true;
}

/* FNV-1a over the launcher's job identity: keeps unrelated jobs apart when no ZC_SECRET is
 * given; it is not a defence against an attacker (set ZC_SECRET or ZC_SECRET_FILE for that),
 * and rank 0 says so once at init (zc__secret_derived). */
static void zc_derive_secret(zc_config *c) {
    static const char *const ids[] = {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
                                      "OMPI_MCA_ess_base_jobid", "MASTER_ADDR", "MASTER_PORT"};
    uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    for (size_t k = 0; k < 2; k++) {
        const char *s = c->root_addr;
        for (; *s; s++) h[k] = (h[k] ^ (uint8_t)*s) * 0x100000001b3ull;
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
            const char *v = zc_plat_getenv(ids[i]);
            for (; v && *v; v++) h[k] = (h[k] ^ (uint8_t)*v) * 0x100000001b3ull;
        }
    }
    zc__memcpy(c->secret, h, sizeof c->secret);
    c->secret_set = true;
}

bool zc__secret_derived(const zc_config *cfg) {
    zc_config d = *cfg;
    zc_derive_secret(&d);
    return cfg->secret_set && zc__memcmp(d.secret, cfg->secret, sizeof d.secret) == 0;
}

/* ZC_SECRET_FILE: the secret as 32 hex digits in a file (blanks and line ends around them are
 * ignored), read here, once. */
static bool zc_env_secret_file(zc_config *c, const char *path, zc_env_err *err) {
    char text[128], os[96];
    size_t len = 0, at = 0;
    zc_plat_rc rc = zc_plat_read_file(path, text, sizeof text - 1u, &len);
    if (rc != ZC_PLAT_OK) {
        zc_plat_os_error_text(zc_plat_os_error(), os, sizeof os);
        zc__fmt(err->text, err->cap, "ZC_SECRET_FILE=\"%s\" cannot be read: %s (%s)", path,
                zc_plat_rc_name(rc), os);
        return false;
    }
    text[len] = '\0';
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ' ||
                   text[len - 1] == '\t'))
        text[--len] = '\0';
    while (at < len && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n')) at++;
    if (!zc__parse_hex(text + at, c->secret, sizeof c->secret)) {
        zc__fmt(err->text, err->cap, "ZC_SECRET_FILE=\"%s\" does not hold 32 hex digits (it has "
                "%zu characters)", path, len - at);
        return false;
    }
    c->secret_set = true;
    return true;
}

static bool zc_env_secret(zc_config *c, zc_env_err *err) {
    const char *s = zc_plat_getenv("ZC_SECRET"), *file = zc_plat_getenv("ZC_SECRET_FILE");
    if (s && file) {
        zc__fmt(err->text, err->cap, "ZC_SECRET and ZC_SECRET_FILE are both set: set one");
        return false;
    }
    if (file) return zc_env_secret_file(c, file, err);
    if (s) {
        if (!zc__parse_hex(s, c->secret, sizeof c->secret)) {
            zc__fmt(err->text, err->cap, "ZC_SECRET is not 32 hex digits (it has %zu characters)",
                    zc__strlen(s));
            return false;
        }
        c->secret_set = true;
        return true;
    }
    if (c->secret_set) return true; /* the caller set one: keep it */
    if (zc_plat_getenv("ZC_RANK") && c->nranks > 1) {
        zc__fmt(err->text, err->cap, "ZC_SECRET is unset while ZC_RANK is set (zcrun sets both; "
                "ZC_SECRET_FILE serves too)");
        return false;
    }
    if (c->nranks > 1) zc_derive_secret(c);
    return true;
}

/* ZC_IB_*: transport_ib's device choice and queue pair timing. */
static bool zc_env_ib(zc_config *c, zc_env_err *err) {
    bool has;
    uint64_t v = 0;
    const char *dev = zc_plat_getenv("ZC_IB_DEVICE");
    if (dev) {
        if (zc__strlen(dev) >= sizeof c->ib_device) {
            zc__fmt(err->text, err->cap, "ZC_IB_DEVICE is longer than %u characters",
                    ZC_IB_DEVICE_BYTES - 1u);
            return false;
        }
        zc__strlcpy(c->ib_device, dev, sizeof c->ib_device);
    }
    if (!zc_env_u64("ZC_IB_PORT", 255u, &has, &v, err)) return false;
    if (has) c->ib_port = (uint32_t)v;
    const char *gid = zc_plat_getenv("ZC_IB_GID_INDEX");
    if (gid && !zc__streq(gid, "auto")) {
        if (!zc_env_u64("ZC_IB_GID_INDEX", 65535u, &has, &v, err)) return false;
        c->ib_gid_index = (int32_t)v;
    } else if (gid) {
        c->ib_gid_index = -1;
    }
    if (!zc_env_u64("ZC_IB_QPS_PER_PEER", 4u, &has, &v, err)) return false;
    if (has) c->ib_qps_per_peer = (uint32_t)v;
    if (!zc_env_u64("ZC_IB_TIMEOUT", 31u, &has, &v, err)) return false;
    if (has) c->ib_timeout = (uint32_t)v;
    if (!zc_env_u64("ZC_IB_RETRY_CNT", 7u, &has, &v, err)) return false;
    if (has) c->ib_retry_cnt = (uint32_t)v;
    if (!zc_env_u64("ZC_IB_ZCOPY_MIN_BYTES", UINT32_MAX, &has, &v, err)) return false;
    if (has) c->ib_zcopy_min_bytes = (uint32_t)v;
    return true;
}

/* ZC_GPU_PATH and ZC_GPU_STAGE_BYTES: how device-memory calls move (core/gpu_mem.c decides,
 * core/sched_stage.c and core/sched_put.c run them). */
static bool zc_env_gpu_path(zc_config *c, zc_env_err *err) {
    bool has;
    uint64_t v = 0;
    if (!zc_env_u64("ZC_GPU_STAGE_BYTES", UINT64_MAX, &has, &v, err)) return false;
    if (has) c->gpu_stage_bytes = v;
    const char *path = zc_plat_getenv("ZC_GPU_PATH");
    if (path && zc__streq(path, "auto")) c->gpu_path = ZC_GPU_PATH_AUTO;
    else if (path && zc__streq(path, "ipc")) c->gpu_path = ZC_GPU_PATH_IPC;
    else if (path && zc__streq(path, "staged")) c->gpu_path = ZC_GPU_PATH_STAGED;
    else if (path && zc__streq(path, "direct")) c->gpu_path = ZC_GPU_PATH_DIRECT;
    else if (path) {
        zc__fmt(err->text, err->cap, "ZC_GPU_PATH=\"%s\" is not one of auto, ipc, staged, "
                "direct", path);
        return false;
    }
    return true;
}

/* ZC_GPU_*: device-memory collectives (read in every build; used by CUDA builds). */
static bool zc_env_gpu(zc_config *c, zc_env_err *err) {
    bool has;
    uint64_t v = 0;
    const char *dev = zc_plat_getenv("ZC_GPU_DEVICE");
    if (dev && (zc__streq(dev, "-1") || zc__streq(dev, "current"))) {
        c->gpu_device = -1;
    } else if (dev && (zc__streq(dev, "-2") || zc__streq(dev, "none"))) {
        c->gpu_device = -2;
    } else if (dev) {
        if (!zc_env_u64("ZC_GPU_DEVICE", 1023u, &has, &v, err)) return false;
        c->gpu_device = (int32_t)v;
    }
    const char *prov = zc_plat_getenv("ZC_GPU_PROVIDER");
    if (prov && zc__streq(prov, "auto")) c->gpu_provider = ZC_GPU_PROVIDER_AUTO;
    else if (prov && zc__streq(prov, "cuda")) c->gpu_provider = ZC_GPU_PROVIDER_CUDA;
    else if (prov && zc__streq(prov, "sim")) c->gpu_provider = ZC_GPU_PROVIDER_SIM;
    else if (prov) {
        zc__fmt(err->text, err->cap, "ZC_GPU_PROVIDER=\"%s\" is not one of auto, cuda, sim",
                prov);
        return false;
    }
    if (!zc_env_u64("ZC_GPU_STREAM_SLOTS", UINT32_MAX, &has, &v, err)) return false;
    if (has) c->gpu_stream_slots = (uint32_t)v;
    if (!zc_env_u64("ZC_GPU_SCRATCH_BYTES", UINT64_MAX, &has, &v, err)) return false;
    if (has) c->gpu_scratch_bytes = v;
    if (!zc_env_u64("ZC_GPU_ONESHOT_MAX_BYTES", UINT64_MAX, &has, &v, err)) return false;
    if (has) c->gpu_oneshot_max_bytes = v;
    return zc_env_gpu_path(c, err);
}

static bool zc_env_tunables(zc_config *c, zc_env_err *err) {
    bool has;
    uint64_t v = 0;
    const char *threads = zc_plat_getenv("ZC_THREADS");
    if (threads && zc__streq(threads, "multi")) c->threads = ZC_THREADS_MULTI;
    else if (threads && zc__streq(threads, "serial")) c->threads = ZC_THREADS_SERIAL;
    else if (threads) {
        zc__fmt(err->text, err->cap, "ZC_THREADS=\"%s\" is not one of multi, serial", threads);
        return false;
    }
    if (!zc_env_u64("ZC_TIMEOUT_MS", UINT64_MAX / 1000000u, &has, &v, err)) return false;
    if (has) c->timeout_ns = v * 1000000u;
    if (!zc_env_u64("ZC_SLOT_BYTES", UINT32_MAX, &has, &v, err)) return false;
    if (has) c->slot_bytes = (uint32_t)v;
    if (!zc_env_u64("ZC_SYM_BYTES", UINT64_MAX, &has, &v, err)) return false;
    if (has) c->sym_bytes = v;
    if (!zc_env_u64("ZC_SLOTS", UINT32_MAX, &has, &v, err)) return false;
    if (has) c->slots = (uint32_t)v;
    if (!zc_env_u64("ZC_MAX_REQUESTS", UINT32_MAX, &has, &v, err)) return false;
    if (has) c->max_requests = (uint32_t)v;
    if (!zc_env_u64("ZC_SPIN_POLLS", UINT32_MAX, &has, &v, err)) return false;
    if (has) c->spin_polls = (uint32_t)v;
    if (!zc_env_u64("ZC_INPROC_RANKS_PER_HOST", UINT32_MAX, &has, &v, err)) return false;
    if (has) c->inproc_ranks_per_host = (uint32_t)v;
    if (!zc_env_u64("ZC_LOG_MIN_RANKS", UINT32_MAX, &has, &v, err)) return false;
    if (has) c->log_min_ranks = (uint32_t)v;
    if (!zc_env_u64("ZC_OVERLAY_MIN_RANKS", UINT32_MAX, &has, &v, err)) return false;
    if (has) c->overlay_min_ranks = (uint32_t)v;
    const char *t = zc_plat_getenv("ZC_TRANSPORT");
    if (t) {
        if (zc__streq(t, "auto")) c->transport = ZC_TRANSPORT_AUTO;
        else if (zc__streq(t, "shm")) c->transport = ZC_TRANSPORT_SHM;
        else if (zc__streq(t, "ib")) c->transport = ZC_TRANSPORT_IB;
        else if (zc__streq(t, "hier")) c->transport = ZC_TRANSPORT_HIER;
        else {
            zc__fmt(err->text, err->cap, "ZC_TRANSPORT=\"%s\" is not one of auto, shm, ib, "
                    "hier", t);
            return false;
        }
    }
    return zc_env_ib(c, err) && zc_env_gpu(c, err);
}

/* zc_config_from_env (launcher: rank, size, rendezvous and secret too) and
 * zc_config_tunables_from_env. */
static zc_status zc_from_env(zc_config *cfg, bool launcher) {
    if (!cfg) return ZC_INVALID_ARG;
    zc_config c = *cfg;
    zc_env_err err = {cfg->error_text, sizeof cfg->error_text};
    cfg->error_text[0] = '\0';
    if (launcher && (!zc_env_ranks(&c, &err) || !zc_env_addr(&c, &err) ||
                     !zc_env_secret(&c, &err)))
        return ZC_INVALID_ARG;
    if (!zc_env_tunables(&c, &err)) return ZC_INVALID_ARG;
    if (!zc__config_check(&c, cfg->error_text, sizeof cfg->error_text)) return ZC_INVALID_ARG;
    c.error_text[0] = '\0';
    *cfg = c;
    return ZC_OK;
}

zc_status zc_config_from_env(zc_config *cfg) { return zc_from_env(cfg, true); }

zc_status zc_config_tunables_from_env(zc_config *cfg) { return zc_from_env(cfg, false); }
