/* test_config.c: zc_config_default, zc_config_from_env under each launcher convention (zcrun,
 * torchrun, Open MPI, Slurm) with its precedence and malformed values, and the contract of
 * zc_comm_arena_bytes (0 for an invalid config; never shrinks when a size field grows).
 * Each test runs in its own forked process, so the environment is changed freely; every test
 * first unsets every variable the code reads, so the machine's own launcher can't leak in. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#endif
#include "zt.h"

#include "zcoll.h"

#include <stdbool.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- environment helpers ---- */

/* Every variable zc_config_from_env reads, the secret derivation's job ids included. */
static const char *const zt_env_vars[] = {
    "ZC_RANK",          "ZC_NRANKS",
    "ZC_LOCAL_RANK",    "ZC_ROOT_ADDR",
    "ZC_SECRET",        "RANK",
    "WORLD_SIZE",       "LOCAL_RANK",
    "MASTER_ADDR",      "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID",
    "SLURM_NTASKS",     "SLURM_LOCALID",
    "ZC_TIMEOUT_MS",    "ZC_SLOT_BYTES",
    "ZC_SLOTS",         "ZC_MAX_REQUESTS",
    "ZC_TRANSPORT",     "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID",     "OMPI_MCA_ess_base_jobid",
    "ZC_IB_DEVICE",     "ZC_IB_PORT",
    "ZC_IB_GID_INDEX",  "ZC_IB_QPS_PER_PEER",
    "ZC_IB_TIMEOUT",    "ZC_IB_RETRY_CNT",
    "ZC_SPIN_POLLS",    "ZC_IB_ZCOPY_MIN_BYTES",
    "ZC_THREADS",       "ZC_SECRET_FILE",
    "ZC_LOG_MIN_RANKS",
};

static void zt_env_clear(void) {
    for (size_t i = 0; i < sizeof zt_env_vars / sizeof zt_env_vars[0]; i++) {
        ZT_CHECK(unsetenv(zt_env_vars[i]) == 0);
        ZT_CHECK(getenv(zt_env_vars[i]) == NULL);
    }
}

/* Sets one "NAME=VALUE" entry (VALUE may be empty). */
static void zt_env_put(const char *kv) {
    char name[64];
    const char *eq = strchr(kv, '=');
    ZT_CHECK(eq != NULL && (size_t)(eq - kv) < sizeof name);
    size_t len = (size_t)(eq - kv);
    memcpy(name, kv, len);
    name[len] = '\0';
    ZT_CHECK(setenv(name, eq + 1, 1) == 0);
}

/* Clears the launcher environment, then sets the NULL-terminated list of "NAME=VALUE". */
static void zt_env_only(const char *const kv[]) {
    zt_env_clear();
    for (size_t i = 0; kv[i]; i++) zt_env_put(kv[i]);
}

/* ---- config helpers ---- */

#define ZT_SECRET_HEX "00112233445566778899aabbccddeeff"
static const uint8_t zt_secret_bytes[ZC_SECRET_BYTES] = {
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
    0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
};

/* A default config with a few fields the environment never touches set to non-defaults (to
 * see that they survive) and a marker in error_text (to see that success clears it). */
static void zt_cfg_base(zc_config *cfg) {
    zc_config_default(cfg);
    cfg->max_plans = 7;
    cfg->max_mems = 3;
    cfg->allreduce_oneshot_max_bytes = 4321u;
    cfg->init_timeout_ns = 123456789u;
    memset(cfg->error_text, 'E', sizeof cfg->error_text - 1);
    cfg->error_text[sizeof cfg->error_text - 1] = '\0';
}

/* zc_config_from_env must succeed; on failure prints its sentence. */
static void zt_from_env_ok(zc_config *cfg, int line) {
    zc_status s = zc_config_from_env(cfg);
    if (s != ZC_OK) zt_fail(__FILE__, line, "zc_config_from_env(cfg) == ZC_OK", cfg->error_text);
    ZT_CHECK(cfg->error_text[0] == '\0');
    /* The fields no variable sets stayed as zt_cfg_base left them. */
    ZT_CHECK_EQ(cfg->version, ZC_CONFIG_VERSION);
    ZT_CHECK_EQ(cfg->max_plans, 7);
    ZT_CHECK_EQ(cfg->max_mems, 3);
    ZT_CHECK(cfg->allreduce_oneshot_max_bytes == 4321u);
    ZT_CHECK_EQ(cfg->init_timeout_ns, 123456789u);
}
#define ZT_FROM_ENV_OK(cfg) zt_from_env_ok((cfg), __LINE__)

static bool zt_is_word_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* True if text contains word as a whole token ("RANK" is not found in "ZC_RANK"). */
static bool zt_names(const char *text, const char *word) {
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        bool starts = p == text || !zt_is_word_char(p[-1]);
        if (starts && !zt_is_word_char(p[n])) return true;
    }
    return false;
}

/* zc_config_from_env must fail with ZC_INVALID_ARG, leave every field but error_text as it
 * was (byte for byte), and leave a sentence naming var. where labels a failure. */
static void zt_from_env_rejects(const char *var, const char *where, int line) {
    zc_config cfg, before;
    char d[ZC_ERROR_TEXT_BYTES + 128];
    zt_cfg_base(&cfg);
    memcpy(&before, &cfg, sizeof cfg);
    zc_status s = zc_config_from_env(&cfg);
    if (s != ZC_INVALID_ARG) {
        snprintf(d, sizeof d, "%s: returned %s (must name %s)", where, zc_status_name(s), var);
        zt_fail(__FILE__, line, "zc_config_from_env(cfg) == ZC_INVALID_ARG", d);
    }
    if (memcmp(&cfg, &before, offsetof(zc_config, error_text)) != 0)
        zt_fail(__FILE__, line, "cfg unchanged but for error_text", where);
    if (memchr(cfg.error_text, '\0', sizeof cfg.error_text) == NULL)
        zt_fail(__FILE__, line, "error_text is NUL-terminated", where);
    if (!zt_names(cfg.error_text, var)) {
        snprintf(d, sizeof d, "%s: \"%s\" does not name %s", where, cfg.error_text, var);
        zt_fail(__FILE__, line, "error_text names the variable", d);
    }
}
#define ZT_FROM_ENV_REJECTS(var) zt_from_env_rejects((var), "this case", __LINE__)

static void zt_check_secret(const zc_config *cfg) {
    ZT_CHECK(cfg->secret_set);
    ZT_CHECK(memcmp(cfg->secret, zt_secret_bytes, sizeof zt_secret_bytes) == 0);
}

/* Every field but error_text equal (field by field: struct copies need not copy padding). */
static void zt_check_same_fields(const zc_config *a, const zc_config *b) {
    ZT_CHECK_EQ(a->version, b->version);
    ZT_CHECK_EQ(a->rank, b->rank);
    ZT_CHECK_EQ(a->nranks, b->nranks);
    ZT_CHECK_EQ(a->local_rank, b->local_rank);
    ZT_CHECK(memcmp(a->root_addr, b->root_addr, sizeof a->root_addr) == 0);
    ZT_CHECK(memcmp(a->secret, b->secret, sizeof a->secret) == 0);
    ZT_CHECK(a->secret_set == b->secret_set);
    ZT_CHECK(a->timeout_ns == b->timeout_ns);
    ZT_CHECK(a->init_timeout_ns == b->init_timeout_ns);
    ZT_CHECK_EQ(a->max_requests, b->max_requests);
    ZT_CHECK_EQ(a->max_plans, b->max_plans);
    ZT_CHECK_EQ(a->max_mems, b->max_mems);
    ZT_CHECK_EQ(a->slot_bytes, b->slot_bytes);
    ZT_CHECK_EQ(a->slots, b->slots);
    ZT_CHECK_EQ(a->spin_polls, b->spin_polls);
    ZT_CHECK_EQ(a->transport, b->transport);
    ZT_CHECK(a->allreduce_oneshot_max_bytes == b->allreduce_oneshot_max_bytes);
    ZT_CHECK(a->reduce_direct_max_bytes == b->reduce_direct_max_bytes);
    ZT_CHECK(a->bcast_tree_max_bytes == b->bcast_tree_max_bytes);
}

/* ---- defaults ---- */

void config_default_is_single_rank_and_valid(void) {
    zc_config cfg;
    memset(&cfg, 0xa5, sizeof cfg); /* every field must be written */
    zc_config_default(&cfg);
    ZT_CHECK_EQ(cfg.version, ZC_CONFIG_VERSION);
    ZT_CHECK_EQ(cfg.rank, 0);
    ZT_CHECK_EQ(cfg.nranks, 1);
    ZT_CHECK_EQ(cfg.local_rank, 0);
    ZT_CHECK(cfg.root_addr[0] == '\0');
    ZT_CHECK(!cfg.secret_set);
    ZT_CHECK(cfg.timeout_ns == ZC_DEFAULT_TIMEOUT_NS);
    ZT_CHECK(cfg.init_timeout_ns == ZC_DEFAULT_INIT_TIMEOUT_NS);
    ZT_CHECK_EQ(cfg.max_requests, ZC_DEFAULT_MAX_REQUESTS);
    ZT_CHECK_EQ(cfg.max_plans, ZC_DEFAULT_MAX_PLANS);
    ZT_CHECK_EQ(cfg.max_mems, ZC_DEFAULT_MAX_MEMS);
    ZT_CHECK_EQ(cfg.slot_bytes, ZC_DEFAULT_SLOT_BYTES);
    ZT_CHECK_EQ(cfg.slots, ZC_DEFAULT_SLOTS);
    ZT_CHECK_EQ(cfg.spin_polls, 0); /* auto */
    ZT_CHECK_EQ(cfg.transport, ZC_TRANSPORT_AUTO);
    ZT_CHECK_EQ(cfg.threads, ZC_THREADS_MULTI);
    ZT_CHECK(cfg.allreduce_oneshot_max_bytes == ZC_DEFAULT_ALLREDUCE_ONESHOT_MAX_BYTES);
    ZT_CHECK(cfg.reduce_direct_max_bytes == ZC_DEFAULT_REDUCE_DIRECT_MAX_BYTES);
    ZT_CHECK(cfg.bcast_tree_max_bytes == ZC_DEFAULT_BCAST_TREE_MAX_BYTES);
    ZT_CHECK(cfg.error_text[0] == '\0');
    /* The documented numbers themselves (docs/api.md, zcoll.h). */
    ZT_CHECK(ZC_DEFAULT_TIMEOUT_NS == 30000000000ull);
    ZT_CHECK(ZC_DEFAULT_INIT_TIMEOUT_NS == 60000000000ull);
    ZT_CHECK(ZC_DEFAULT_SLOT_BYTES % 64u == 0);
    ZT_CHECK((ZC_DEFAULT_SLOTS & (ZC_DEFAULT_SLOTS - 1u)) == 0 && ZC_DEFAULT_SLOTS >= 2u);
    ZT_CHECK(ZC_DEFAULT_MAX_REQUESTS >= 1u && ZC_DEFAULT_MAX_REQUESTS <= ZC_MAX_REQUESTS);
    ZT_CHECK(zc_comm_arena_bytes(&cfg) > 0);
}

/* ---- launchers ---- */

void config_from_env_reads_zcrun_variables(void) {
    zc_config cfg;
    /* zcrun's variables win over every other launcher's, which are set too (a zcrun rank
     * started inside a torchrun, mpirun or srun job). RANK is even malformed: never read. */
    static const char *const all[] = {
        "ZC_RANK=1", "ZC_NRANKS=4", "ZC_LOCAL_RANK=2", "ZC_ROOT_ADDR=127.0.0.1:29500",
        "ZC_SECRET=00112233445566778899AABBccddeeff", "RANK=x", "WORLD_SIZE=8",
        "LOCAL_RANK=7", "MASTER_ADDR=10.9.9.9", "MASTER_PORT=1234",
        "OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=6", "SLURM_PROCID=6",
        "SLURM_NTASKS=7", NULL};
    zt_env_only(all);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 1);
    ZT_CHECK_EQ(cfg.nranks, 4);
    ZT_CHECK_EQ(cfg.local_rank, 2);
    ZT_CHECK(strcmp(cfg.root_addr, "127.0.0.1:29500") == 0); /* not MASTER_ADDR's */
    zt_check_secret(&cfg);
    /* Without tunables, the tunables keep their defaults. */
    ZT_CHECK(cfg.timeout_ns == ZC_DEFAULT_TIMEOUT_NS);
    ZT_CHECK_EQ(cfg.slot_bytes, ZC_DEFAULT_SLOT_BYTES);
    ZT_CHECK_EQ(cfg.slots, ZC_DEFAULT_SLOTS);
    ZT_CHECK_EQ(cfg.max_requests, ZC_DEFAULT_MAX_REQUESTS);
    ZT_CHECK_EQ(cfg.transport, ZC_TRANSPORT_AUTO);

    /* The tunables. */
    static const char *const tuned[] = {
        "ZC_RANK=3", "ZC_NRANKS=4", "ZC_ROOT_ADDR=node-a:1", "ZC_SECRET=" ZT_SECRET_HEX,
        "ZC_TIMEOUT_MS=1500", "ZC_SLOT_BYTES=4096", "ZC_SLOTS=16", "ZC_MAX_REQUESTS=64",
        "ZC_TRANSPORT=shm", "ZC_SPIN_POLLS=17", "ZC_THREADS=serial", "ZC_LOG_MIN_RANKS=2",
        NULL};
    zt_env_only(tuned);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 3);
    ZT_CHECK_EQ(cfg.local_rank, 0); /* ZC_LOCAL_RANK unset */
    ZT_CHECK(strcmp(cfg.root_addr, "node-a:1") == 0);
    ZT_CHECK(cfg.timeout_ns == 1500000000ull);
    ZT_CHECK_EQ(cfg.slot_bytes, 4096);
    ZT_CHECK_EQ(cfg.slots, 16);
    ZT_CHECK_EQ(cfg.max_requests, 64);
    ZT_CHECK_EQ(cfg.spin_polls, 17);
    ZT_CHECK_EQ(cfg.log_min_ranks, 2);
    ZT_CHECK_EQ(cfg.transport, ZC_TRANSPORT_SHM);
    ZT_CHECK_EQ(cfg.threads, ZC_THREADS_SERIAL);
    ZT_CHECK(zc_comm_arena_bytes(&cfg) > 0);
    ZT_CHECK(setenv("ZC_THREADS", "multi", 1) == 0);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.threads, ZC_THREADS_MULTI);
    ZT_CHECK(setenv("ZC_TRANSPORT", "auto", 1) == 0);
    ZT_FROM_ENV_OK(&cfg); /* from the shm config just made */
    ZT_CHECK_EQ(cfg.transport, ZC_TRANSPORT_AUTO);
    ZT_CHECK_EQ(cfg.ib_gid_index, -1);
    ZT_CHECK_EQ(cfg.ib_qps_per_peer, ZC_DEFAULT_IB_QPS_PER_PEER);
    ZT_CHECK_EQ(cfg.ib_retry_cnt, ZC_DEFAULT_IB_RETRY_CNT);
    ZT_CHECK_EQ(cfg.ib_zcopy_min_bytes, ZC_DEFAULT_IB_ZCOPY_MIN_BYTES);

    /* transport_ib's choices. */
    static const char *const ib[] = {
        "ZC_TRANSPORT=ib", "ZC_IB_DEVICE=rxe0", "ZC_IB_PORT=1", "ZC_IB_GID_INDEX=3",
        "ZC_IB_QPS_PER_PEER=2", "ZC_IB_TIMEOUT=14", "ZC_IB_RETRY_CNT=3",
        "ZC_IB_ZCOPY_MIN_BYTES=0", NULL};
    zt_env_only(ib);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.transport, ZC_TRANSPORT_IB);
    ZT_CHECK(strcmp(cfg.ib_device, "rxe0") == 0);
    ZT_CHECK_EQ(cfg.ib_port, 1);
    ZT_CHECK_EQ(cfg.ib_gid_index, 3);
    ZT_CHECK_EQ(cfg.ib_qps_per_peer, 2);
    ZT_CHECK_EQ(cfg.ib_timeout, 14);
    ZT_CHECK_EQ(cfg.ib_zcopy_min_bytes, 0);
    ZT_CHECK_EQ(cfg.ib_retry_cnt, 3);
    ZT_CHECK(zc_comm_arena_bytes(&cfg) > 0);
    ZT_CHECK(setenv("ZC_IB_GID_INDEX", "auto", 1) == 0);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.ib_gid_index, -1);
    ZT_CHECK(setenv("ZC_TRANSPORT", "hier", 1) == 0); /* the two-wire communicator */
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.transport, ZC_TRANSPORT_HIER);
    ZT_CHECK(zc_comm_arena_bytes(&cfg) > 0);

    /* One rank needs neither a rendezvous nor a secret. */
    static const char *const single[] = {"ZC_RANK=0", "ZC_NRANKS=1", NULL};
    zt_env_only(single);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 0);
    ZT_CHECK_EQ(cfg.nranks, 1);
    ZT_CHECK(cfg.root_addr[0] == '\0');
    ZT_CHECK(!cfg.secret_set);
}

/* Runs zc_config_from_env on a fresh base config and returns the result. */
static zc_config zt_torchrun(const char *rank, const char *port, const char *run_id) {
    zc_config cfg;
    zt_env_clear();
    ZT_CHECK(setenv("RANK", rank, 1) == 0);
    ZT_CHECK(setenv("WORLD_SIZE", "4", 1) == 0);
    ZT_CHECK(setenv("LOCAL_RANK", rank, 1) == 0);
    ZT_CHECK(setenv("MASTER_ADDR", "10.0.0.1", 1) == 0);
    ZT_CHECK(setenv("MASTER_PORT", port, 1) == 0);
    ZT_CHECK(setenv("TORCHELASTIC_RUN_ID", run_id, 1) == 0);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    return cfg;
}

void config_from_env_reads_torchrun_variables(void) {
    zc_config a = zt_torchrun("2", "29500", "job1");
    ZT_CHECK_EQ(a.rank, 2);
    ZT_CHECK_EQ(a.nranks, 4);
    ZT_CHECK_EQ(a.local_rank, 2);
    ZT_CHECK(strcmp(a.root_addr, "10.0.0.1:29501") == 0); /* torchrun keeps MASTER_PORT for its store */
    /* No ZC_SECRET: a secret derived from the job's identity, the same for every call and
     * every rank of the job, different for another job. */
    ZT_CHECK(a.secret_set);
    ZT_CHECK(zc_comm_arena_bytes(&a) > 0);
    zc_config again = zt_torchrun("2", "29500", "job1");
    ZT_CHECK(again.secret_set);
    ZT_CHECK(memcmp(a.secret, again.secret, sizeof a.secret) == 0);
    zc_config peer = zt_torchrun("0", "29500", "job1");
    ZT_CHECK_EQ(peer.rank, 0);
    ZT_CHECK(memcmp(a.secret, peer.secret, sizeof a.secret) == 0);
    zc_config other_port = zt_torchrun("2", "29501", "job1");
    ZT_CHECK(memcmp(a.secret, other_port.secret, sizeof a.secret) != 0);
    zc_config other_job = zt_torchrun("2", "29500", "job2");
    ZT_CHECK(memcmp(a.secret, other_job.secret, sizeof a.secret) != 0);

    /* ZC_SECRET and ZC_ROOT_ADDR apply under torchrun too, and win. */
    zc_config cfg;
    ZT_CHECK(setenv("ZC_SECRET", ZT_SECRET_HEX, 1) == 0);
    ZT_CHECK(setenv("ZC_ROOT_ADDR", "rdv.example:7000", 1) == 0);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 2);
    ZT_CHECK(strcmp(cfg.root_addr, "rdv.example:7000") == 0);
    zt_check_secret(&cfg);

    /* torchrun's RANK wins over Open MPI's and Slurm's variables. */
    static const char *const nested[] = {
        "RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=80",
        "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=3", "SLURM_PROCID=2",
        "SLURM_NTASKS=5", NULL};
    zt_env_only(nested);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 1);
    ZT_CHECK_EQ(cfg.nranks, 2);
    ZT_CHECK_EQ(cfg.local_rank, 0); /* LOCAL_RANK unset */
    ZT_CHECK(strcmp(cfg.root_addr, "h:81") == 0);
}

void config_from_env_reads_open_mpi_variables(void) {
    zc_config cfg;
    static const char *const zc_rdv[] = {
        "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1",
        "ZC_ROOT_ADDR=node0:5000", "ZC_SECRET=" ZT_SECRET_HEX, NULL};
    zt_env_only(zc_rdv);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 3);
    ZT_CHECK_EQ(cfg.nranks, 4);
    ZT_CHECK_EQ(cfg.local_rank, 1);
    ZT_CHECK(strcmp(cfg.root_addr, "node0:5000") == 0);
    zt_check_secret(&cfg);

    /* MASTER_ADDR/MASTER_PORT give the rendezvous when ZC_ROOT_ADDR is absent; without
     * ZC_SECRET the secret is derived. */
    static const char *const master[] = {
        "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "MASTER_ADDR=node1",
        "MASTER_PORT=6000", "OMPI_MCA_ess_base_jobid=77", NULL};
    zt_env_only(master);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 0);
    ZT_CHECK_EQ(cfg.nranks, 2);
    ZT_CHECK(strcmp(cfg.root_addr, "node1:6001") == 0);
    ZT_CHECK(cfg.secret_set);

    /* More than one rank needs a rendezvous: Open MPI gives none of its own. */
    static const char *const none[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                                       "ZC_SECRET=" ZT_SECRET_HEX, NULL};
    zt_env_only(none);
    ZT_FROM_ENV_REJECTS("ZC_ROOT_ADDR");
    ZT_FROM_ENV_REJECTS("MASTER_ADDR");

    /* One rank needs none. */
    static const char *const single[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1",
                                         NULL};
    zt_env_only(single);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.nranks, 1);
    ZT_CHECK(!cfg.secret_set);
}

void config_from_env_reads_slurm_variables(void) {
    zc_config cfg;
    static const char *const master[] = {
        "SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "MASTER_ADDR=head",
        "MASTER_PORT=6000", "SLURM_JOB_ID=42", NULL};
    zt_env_only(master);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 5);
    ZT_CHECK_EQ(cfg.nranks, 8);
    ZT_CHECK_EQ(cfg.local_rank, 1);
    ZT_CHECK(strcmp(cfg.root_addr, "head:6001") == 0);
    ZT_CHECK(cfg.secret_set);
    uint8_t job42[ZC_SECRET_BYTES];
    memcpy(job42, cfg.secret, sizeof job42);
    ZT_CHECK(setenv("SLURM_JOB_ID", "43", 1) == 0);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK(memcmp(job42, cfg.secret, sizeof job42) != 0);

    static const char *const zc_rdv[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2",
                                         "ZC_ROOT_ADDR=10.1.2.3:65535",
                                         "ZC_SECRET=" ZT_SECRET_HEX, NULL};
    zt_env_only(zc_rdv);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 0);
    ZT_CHECK_EQ(cfg.nranks, 2);
    ZT_CHECK_EQ(cfg.local_rank, 0);
    ZT_CHECK(strcmp(cfg.root_addr, "10.1.2.3:65535") == 0);
    zt_check_secret(&cfg);

    /* Open MPI run under Slurm: Open MPI's variables win. */
    ZT_CHECK(setenv("OMPI_COMM_WORLD_RANK", "1", 1) == 0);
    ZT_CHECK(setenv("OMPI_COMM_WORLD_SIZE", "3", 1) == 0);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 1);
    ZT_CHECK_EQ(cfg.nranks, 3);

    static const char *const none[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", NULL};
    zt_env_only(none);
    ZT_FROM_ENV_REJECTS("ZC_ROOT_ADDR");
}

/* ZC_SECRET_FILE: the 32 hex digits in a file, blanks and line ends around them ignored; it
 * serves where zcrun's ZC_RANK wants a secret; with ZC_SECRET as well it is refused. */
void config_from_env_reads_a_secret_file(void) {
    char path[] = "/tmp/zct-secret-XXXXXX";
    int fd = mkstemp(path);
    ZT_CHECK(fd >= 0);
    const char text[] = "  " ZT_SECRET_HEX "\n";
    ZT_CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
    close(fd);
    char var[64];
    snprintf(var, sizeof var, "ZC_SECRET_FILE=%s", path);
    const char *const zcrun[] = {"ZC_RANK=1", "ZC_NRANKS=2", "ZC_ROOT_ADDR=h:1", var, NULL};
    zt_env_only(zcrun);
    zc_config cfg;
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    zt_check_secret(&cfg);
    const char *const both[] = {"ZC_RANK=1", "ZC_NRANKS=2", "ZC_ROOT_ADDR=h:1", var,
                                "ZC_SECRET=" ZT_SECRET_HEX, NULL};
    zt_env_only(both);
    ZT_FROM_ENV_REJECTS("ZC_SECRET_FILE");
    fd = open(path, O_WRONLY | O_TRUNC);
    ZT_CHECK(fd >= 0 && write(fd, "0011", 4) == 4);
    close(fd);
    zt_env_only(zcrun);
    ZT_FROM_ENV_REJECTS("ZC_SECRET_FILE"); /* 4 digits */
    unlink(path);
    ZT_FROM_ENV_REJECTS("ZC_SECRET_FILE"); /* gone */
    const char *const big[] = {"ZC_SECRET_FILE=/proc/self/status", NULL};
    zt_env_only(big);
    ZT_FROM_ENV_REJECTS("ZC_SECRET_FILE"); /* longer than any secret */
}

/* zc_config_tunables_from_env reads the tunables alone: a launcher's variables, even ones
 * zc_config_from_env refuses, are not read, and rank, size, rendezvous and secret stay. */
void config_tunables_from_env_reads_no_launcher_variable(void) {
    const char *const env[] = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=65535",
                               "ZC_SLOTS=16", NULL};
    zt_env_only(env);
    zc_config cfg;
    zt_cfg_base(&cfg);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_INVALID_ARG); /* MASTER_PORT + 1 is no port */
    zt_cfg_base(&cfg);
    ZT_CHECK_ST(zc_config_tunables_from_env(&cfg), ZC_OK);
    ZT_CHECK_EQ(cfg.slots, 16);
    ZT_CHECK_EQ(cfg.rank, 0);
    ZT_CHECK_EQ(cfg.nranks, 1);
    ZT_CHECK(!cfg.secret_set && cfg.root_addr[0] == '\0');
    ZT_CHECK(setenv("ZC_SLOTS", "3", 1) == 0);
    ZT_CHECK_ST(zc_config_tunables_from_env(&cfg), ZC_INVALID_ARG);
    ZT_CHECK(strstr(cfg.error_text, "cfg->slots") != NULL);
    ZT_CHECK_EQ(cfg.slots, 16); /* unchanged */
    ZT_CHECK_ST(zc_config_tunables_from_env(NULL), ZC_INVALID_ARG);
}

void config_from_env_without_launcher_keeps_single_rank(void) {
    zc_config cfg;
    zt_env_clear();
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.rank, 0);
    ZT_CHECK_EQ(cfg.nranks, 1);
    ZT_CHECK_EQ(cfg.local_rank, 0);
    ZT_CHECK(cfg.root_addr[0] == '\0');
    ZT_CHECK(!cfg.secret_set);
    ZT_CHECK(cfg.timeout_ns == ZC_DEFAULT_TIMEOUT_NS);
    ZT_CHECK_EQ(cfg.slot_bytes, ZC_DEFAULT_SLOT_BYTES);
    ZT_CHECK_EQ(cfg.slots, ZC_DEFAULT_SLOTS);
    ZT_CHECK_EQ(cfg.max_requests, ZC_DEFAULT_MAX_REQUESTS);
    ZT_CHECK_EQ(cfg.transport, ZC_TRANSPORT_AUTO);
    ZT_CHECK(zc_comm_arena_bytes(&cfg) > 0);
    /* A second call on the result changes nothing. */
    zc_config again = cfg;
    ZT_FROM_ENV_OK(&again);
    zt_check_same_fields(&again, &cfg);
    /* Tunables alone apply to the single rank. */
    ZT_CHECK(setenv("ZC_TIMEOUT_MS", "0", 1) == 0);
    ZT_CHECK(setenv("ZC_SLOTS", "1024", 1) == 0);
    zt_cfg_base(&cfg);
    ZT_FROM_ENV_OK(&cfg);
    ZT_CHECK_EQ(cfg.nranks, 1);
    ZT_CHECK(cfg.timeout_ns == 0);
    ZT_CHECK_EQ(cfg.slots, 1024);
    ZT_CHECK_ST(zc_config_from_env(NULL), ZC_INVALID_ARG);
}

/* ---- malformed values ---- */

typedef struct zt_bad_env {
    const char *env[8]; /* "NAME=VALUE", NULL-terminated */
    const char *names;  /* what error_text must name */
} zt_bad_env;

#define ZT_RDV "ZC_ROOT_ADDR=127.0.0.1:29500"
#define ZT_SEC "ZC_SECRET=" ZT_SECRET_HEX
#define ZT_MASTER "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500"

static const zt_bad_env zt_bad_envs[] = {
    /* non-numeric or out-of-range numbers */
    {{"ZC_RANK=x1", "ZC_NRANKS=2", ZT_RDV, ZT_SEC, NULL}, "ZC_RANK"},
    {{"ZC_RANK= 1", "ZC_NRANKS=2", ZT_RDV, ZT_SEC, NULL}, "ZC_RANK"},
    {{"ZC_RANK=", "ZC_NRANKS=2", ZT_RDV, ZT_SEC, NULL}, "ZC_RANK"},
    {{"ZC_RANK=0", "ZC_NRANKS=2x", ZT_RDV, ZT_SEC, NULL}, "ZC_NRANKS"},
    {{"ZC_RANK=0", "ZC_NRANKS=2", "ZC_LOCAL_RANK=a", ZT_RDV, ZT_SEC, NULL}, "ZC_LOCAL_RANK"},
    {{"RANK=-1", "WORLD_SIZE=2", ZT_MASTER, NULL}, "RANK"},
    {{"RANK=0", "WORLD_SIZE=2000", ZT_MASTER, NULL}, "WORLD_SIZE"},
    {{"RANK=99999999999999999999", "WORLD_SIZE=2", ZT_MASTER, NULL}, "RANK"},
    {{"OMPI_COMM_WORLD_RANK=1.0", "OMPI_COMM_WORLD_SIZE=2", ZT_RDV, NULL},
     "OMPI_COMM_WORLD_RANK"},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=two", ZT_RDV, NULL}, "SLURM_NTASKS"},
    /* rank >= size, for each launcher */
    {{"ZC_RANK=2", "ZC_NRANKS=2", ZT_RDV, ZT_SEC, NULL}, "ZC_RANK"},
    {{"RANK=4", "WORLD_SIZE=4", ZT_MASTER, NULL}, "RANK"},
    {{"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=2", ZT_RDV, NULL},
     "OMPI_COMM_WORLD_RANK"},
    {{"SLURM_PROCID=3", "SLURM_NTASKS=3", ZT_RDV, NULL}, "SLURM_PROCID"},
    /* size 0 or missing */
    {{"ZC_RANK=0", "ZC_NRANKS=0", ZT_RDV, ZT_SEC, NULL}, "ZC_NRANKS"},
    {{"RANK=0", "WORLD_SIZE=0", ZT_MASTER, NULL}, "WORLD_SIZE"},
    {{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=0", NULL}, "OMPI_COMM_WORLD_SIZE"},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=0", NULL}, "SLURM_NTASKS"},
    {{"ZC_RANK=0", ZT_RDV, ZT_SEC, NULL}, "ZC_NRANKS"},
    {{"RANK=0", ZT_MASTER, NULL}, "WORLD_SIZE"},
    /* rendezvous */
    {{"ZC_RANK=0", "ZC_NRANKS=2", ZT_SEC, NULL}, "ZC_ROOT_ADDR"},
    {{"RANK=1", "WORLD_SIZE=2", NULL}, "ZC_ROOT_ADDR"},
    {{"ZC_ROOT_ADDR=127.0.0.1", NULL}, "ZC_ROOT_ADDR"},
    {{"ZC_ROOT_ADDR=127.0.0.1:", NULL}, "ZC_ROOT_ADDR"},
    {{"ZC_ROOT_ADDR=:29500", NULL}, "ZC_ROOT_ADDR"},
    {{"ZC_ROOT_ADDR=127.0.0.1:0", NULL}, "ZC_ROOT_ADDR"},
    {{"ZC_ROOT_ADDR=127.0.0.1:70000", NULL}, "ZC_ROOT_ADDR"},
    {{"ZC_ROOT_ADDR=127.0.0.1:80x", NULL}, "ZC_ROOT_ADDR"},
    {{"ZC_ROOT_ADDR=h123456789h123456789h123456789h123456789h123456789h123456789h:80", NULL},
     "ZC_ROOT_ADDR"}, /* 64 characters: no room for the NUL */
    {{"ZC_RANK=0", "ZC_NRANKS=2", "ZC_ROOT_ADDR=127.0.0.1:0", ZT_SEC, NULL}, "ZC_ROOT_ADDR"},
    {{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=10.0.0.1", NULL}, "MASTER_PORT"},
    {{"MASTER_ADDR=10.0.0.1", NULL}, "MASTER_PORT"},
    {{"MASTER_PORT=29500", NULL}, "MASTER_ADDR"},
    {{"MASTER_ADDR=10.0.0.1", "MASTER_PORT=http", NULL}, "MASTER_PORT"},
    {{"MASTER_ADDR=10.0.0.1", "MASTER_PORT=0", NULL}, "MASTER_PORT"},
    {{"MASTER_ADDR=10.0.0.1", "MASTER_PORT=65536", NULL}, "MASTER_PORT"},
    {{"MASTER_ADDR=h123456789h123456789h123456789h123456789h123456789h123456789",
      "MASTER_PORT=80", NULL},
     "MASTER_ADDR"}, /* 60 characters + ":80" would not fit with every port */
    /* secret */
    {{"ZC_SECRET=00112233445566778899aabbccddeef", NULL}, "ZC_SECRET"},   /* 31 */
    {{"ZC_SECRET=00112233445566778899aabbccddeeff0", NULL}, "ZC_SECRET"}, /* 33 */
    {{"ZC_SECRET=00112233445566778899aabbccddeefg", NULL}, "ZC_SECRET"},  /* non-hex */
    {{"ZC_SECRET=0x112233445566778899aabbccddeeff", NULL}, "ZC_SECRET"},
    {{"ZC_SECRET=", NULL}, "ZC_SECRET"},
    {{"ZC_RANK=1", "ZC_NRANKS=2", "ZC_SECRET=1234", ZT_RDV, NULL}, "ZC_SECRET"},
    {{"ZC_RANK=1", "ZC_NRANKS=2", ZT_RDV, NULL}, "ZC_SECRET"}, /* zcrun always sets it */
    /* tunables */
    {{"ZC_TIMEOUT_MS=abc", NULL}, "ZC_TIMEOUT_MS"},
    {{"ZC_TIMEOUT_MS=-5", NULL}, "ZC_TIMEOUT_MS"},
    {{"ZC_TIMEOUT_MS=99999999999999999999", NULL}, "ZC_TIMEOUT_MS"},
    {{"ZC_SLOT_BYTES=64k", NULL}, "ZC_SLOT_BYTES"},
    {{"ZC_SLOTS=", NULL}, "ZC_SLOTS"},
    {{"ZC_MAX_REQUESTS=many", NULL}, "ZC_MAX_REQUESTS"},
    {{"ZC_SPIN_POLLS=fast", NULL}, "ZC_SPIN_POLLS"},
    {{"ZC_LOG_MIN_RANKS=many", NULL}, "ZC_LOG_MIN_RANKS"},
    {{"ZC_SPIN_POLLS=16777217", NULL}, "cfg->spin_polls"},
    {{"ZC_TRANSPORT=tcp", NULL}, "ZC_TRANSPORT"},
    {{"ZC_TRANSPORT=", NULL}, "ZC_TRANSPORT"},
    {{"ZC_TRANSPORT=IB", NULL}, "ZC_TRANSPORT"},
    {{"ZC_THREADS=single", NULL}, "ZC_THREADS"},
    {{"ZC_IB_DEVICE=0123456789012345678901234567890123456789012345678901234567890123", NULL},
     "ZC_IB_DEVICE"},
    {{"ZC_IB_PORT=256", NULL}, "ZC_IB_PORT"},
    {{"ZC_IB_PORT=one", NULL}, "ZC_IB_PORT"},
    {{"ZC_IB_GID_INDEX=-2", NULL}, "ZC_IB_GID_INDEX"},
    {{"ZC_IB_GID_INDEX=70000", NULL}, "ZC_IB_GID_INDEX"},
    {{"ZC_IB_QPS_PER_PEER=5", NULL}, "ZC_IB_QPS_PER_PEER"},
    {{"ZC_IB_QPS_PER_PEER=0", NULL}, "cfg->ib_qps_per_peer"},
    {{"ZC_IB_TIMEOUT=32", NULL}, "ZC_IB_TIMEOUT"},
    {{"ZC_IB_RETRY_CNT=8", NULL}, "ZC_IB_RETRY_CNT"},
    {{"ZC_IB_ZCOPY_MIN_BYTES=4294967296", NULL}, "ZC_IB_ZCOPY_MIN_BYTES"},
    /* well-formed numbers the config check refuses: it names the field */
    {{"ZC_SLOTS=3", NULL}, "cfg->slots"},
    {{"ZC_SLOTS=2048", NULL}, "cfg->slots"},
    {{"ZC_SLOT_BYTES=100", NULL}, "cfg->slot_bytes"},
    {{"ZC_SLOT_BYTES=1000", NULL}, "cfg->slot_bytes"},
    {{"ZC_MAX_REQUESTS=0", NULL}, "cfg->max_requests"},
    {{"ZC_MAX_REQUESTS=100000", NULL}, "cfg->max_requests"},
    /* a bad tunable fails a launcher config that is otherwise fine */
    {{"ZC_RANK=0", "ZC_NRANKS=2", ZT_RDV, ZT_SEC, "ZC_SLOTS=3", NULL}, "cfg->slots"},
    {{"RANK=0", "WORLD_SIZE=2", ZT_MASTER, "ZC_TRANSPORT=verbs", NULL}, "ZC_TRANSPORT"},
};

void config_from_env_rejects_malformed_values_naming_the_variable(void) {
    for (size_t i = 0; i < sizeof zt_bad_envs / sizeof zt_bad_envs[0]; i++) {
        const zt_bad_env *b = &zt_bad_envs[i];
        char where[48];
        snprintf(where, sizeof where, "zt_bad_envs[%zu] (%s)", i, b->env[0]);
        zt_env_only(b->env);
        zt_from_env_rejects(b->names, where, __LINE__);
    }
}

/* ---- zc_comm_arena_bytes ---- */

/* A valid config of the given transport and ranks with a rendezvous and a secret. */
static void zt_arena_base(zc_config *cfg, zc_transport transport, uint32_t nranks) {
    zc_config_default(cfg);
    cfg->transport = transport;
    cfg->nranks = nranks;
    cfg->rank = nranks - 1u;
    strcpy(cfg->root_addr, "127.0.0.1:29500");
    memcpy(cfg->secret, zt_secret_bytes, sizeof cfg->secret);
    cfg->secret_set = true;
}

typedef enum zt_field {
    ZT_NRANKS, ZT_MAX_REQUESTS, ZT_MAX_PLANS, ZT_MAX_MEMS, ZT_SLOT_BYTES, ZT_SLOTS,
    ZT_FIELD_COUNT
} zt_field;

static const char *const zt_field_names[ZT_FIELD_COUNT] = {
    "nranks", "max_requests", "max_plans", "max_mems", "slot_bytes", "slots"};

static uint32_t *zt_field_of(zc_config *cfg, zt_field f) {
    switch (f) {
    case ZT_NRANKS: return &cfg->nranks;
    case ZT_MAX_REQUESTS: return &cfg->max_requests;
    case ZT_MAX_PLANS: return &cfg->max_plans;
    case ZT_MAX_MEMS: return &cfg->max_mems;
    case ZT_SLOT_BYTES: return &cfg->slot_bytes;
    case ZT_SLOTS: return &cfg->slots;
    case ZT_FIELD_COUNT: break;
    }
    return NULL;
}

/* Ascending valid values of each field (0-terminated where 0 is not valid, else by count). */
#define ZT_MAX_VALUES 12
static const uint32_t zt_values[ZT_FIELD_COUNT][ZT_MAX_VALUES] = {
    [ZT_NRANKS] = {1, 2, 3, 4, 7, 8, 16, 64, 255, 1000, ZC_MESH_MAX_RANKS},
    [ZT_MAX_REQUESTS] = {1, 2, 3, 8, 32, 33, 100, 512, ZC_MAX_REQUESTS},
    [ZT_MAX_PLANS] = {0, 1, 2, 31, 32, 64, 500, ZC_MAX_REQUESTS},
    [ZT_MAX_MEMS] = {0, 1, 2, 16, 17, 100, 1024, 4095, 4096},
    [ZT_SLOT_BYTES] = {256, 320, 1024, 4096, 4160, 65536, 1u << 20, (16u << 20) - 64, 16u << 20},
    [ZT_SLOTS] = {2, 4, 8, 16, 64, 256, 1024},
};
static const size_t zt_value_counts[ZT_FIELD_COUNT] = {11, 9, 8, 9, 9, 7};

/* Walks field f of cfg up through its values (those not below the base's own), checking
 * that the size is never 0 and never shrinks. */
static void zt_walk_field(const zc_config *base, zt_field f, const char *base_name) {
    zc_config cfg = *base;
    uint32_t *field = zt_field_of(&cfg, f);
    const uint32_t start = *field;
    size_t prev = zc_comm_arena_bytes(&cfg);
    ZT_CHECK(prev > 0);
    for (size_t i = 0; i < zt_value_counts[f]; i++) {
        if (zt_values[f][i] < start) continue;
        *field = zt_values[f][i];
        size_t bytes = zc_comm_arena_bytes(&cfg);
        if (bytes == 0 || bytes < prev) {
            char d[200];
            snprintf(d, sizeof d, "base %s, %s = %u: %zu bytes after %zu", base_name,
                     zt_field_names[f], (unsigned)*field, bytes, prev);
            zt_fail(__FILE__, __LINE__, "0 < arena bytes >= previous", d);
        }
        prev = bytes;
    }
}

/* Every field at its smallest valid value, or at its largest. */
static void zt_arena_extreme(zc_config *cfg, zc_transport transport, bool largest) {
    zt_arena_base(cfg, transport, 1);
    for (int f = 0; f < ZT_FIELD_COUNT; f++) {
        size_t at = largest ? zt_value_counts[f] - 1u : 0u;
        *zt_field_of(cfg, (zt_field)f) = zt_values[f][at];
    }
    cfg->rank = 0;
}

void arena_bytes_is_monotonic_in_every_field(void) {
    static const zc_transport transports[] = {ZC_TRANSPORT_AUTO, ZC_TRANSPORT_SHM,
                                              ZC_TRANSPORT_INPROC};
    zc_config cfg;
    /* The plain default (one rank, no rendezvous): every field but nranks. */
    zc_config_default(&cfg);
    for (int f = ZT_MAX_REQUESTS; f < ZT_FIELD_COUNT; f++)
        zt_walk_field(&cfg, (zt_field)f, "default");
    for (size_t t = 0; t < sizeof transports / sizeof transports[0]; t++) {
        char name[64];
        /* The default with a rendezvous; a mid-sized job; every field at its minimum. */
        zt_arena_base(&cfg, transports[t], 1);
        snprintf(name, sizeof name, "default+rdv transport %d", (int)transports[t]);
        for (int f = 0; f < ZT_FIELD_COUNT; f++) zt_walk_field(&cfg, (zt_field)f, name);
        zt_arena_base(&cfg, transports[t], 8);
        cfg.max_requests = 4;
        cfg.max_plans = 1;
        cfg.slot_bytes = 1024;
        cfg.slots = 4;
        snprintf(name, sizeof name, "8 ranks transport %d", (int)transports[t]);
        for (int f = 0; f < ZT_FIELD_COUNT; f++) zt_walk_field(&cfg, (zt_field)f, name);
        zt_arena_extreme(&cfg, transports[t], false);
        snprintf(name, sizeof name, "minimum transport %d", (int)transports[t]);
        for (int f = 0; f < ZT_FIELD_COUNT; f++) zt_walk_field(&cfg, (zt_field)f, name);
        /* All at the top is strictly more than all at the bottom: the pools are in it. */
        zc_config lo, hi;
        zt_arena_extreme(&lo, transports[t], false);
        zt_arena_extreme(&hi, transports[t], true);
        ZT_CHECK(zc_comm_arena_bytes(&hi) > zc_comm_arena_bytes(&lo));
    }
    /* Seeded sweep: a random valid config, one random field grown to a random larger value. */
    zt_rng rng = {zt_seed()};
    for (int iter = 0; iter < 3000; iter++) {
        zc_config a;
        zt_arena_base(&a, transports[zt_rng_below(&rng, 3)], 1);
        for (int f = 0; f < ZT_FIELD_COUNT; f++)
            *zt_field_of(&a, (zt_field)f) = zt_values[f][zt_rng_below(&rng, zt_value_counts[f])];
        a.rank = (uint32_t)zt_rng_below(&rng, a.nranks);
        zt_field f = (zt_field)zt_rng_below(&rng, ZT_FIELD_COUNT);
        zc_config b = a;
        uint32_t *bf = zt_field_of(&b, f);
        size_t from = 0;
        while (from < zt_value_counts[f] && zt_values[f][from] < *bf) from++;
        *bf = zt_values[f][from + zt_rng_below(&rng, zt_value_counts[f] - from)];
        size_t sa = zc_comm_arena_bytes(&a), sb = zc_comm_arena_bytes(&b);
        if (sa == 0 || sb < sa) {
            char d[200];
            snprintf(d, sizeof d, "seed %llu iteration %d: %s %u -> %u gives %zu -> %zu bytes",
                     (unsigned long long)zt_seed(), iter, zt_field_names[f],
                     (unsigned)*zt_field_of(&a, f), (unsigned)*bf, sa, sb);
            zt_fail(__FILE__, __LINE__, "0 < arena bytes, never shrinking", d);
        }
        /* Not a size: rank and the deadlines leave the size alone. */
        b = a;
        b.rank = (uint32_t)zt_rng_below(&rng, b.nranks);
        b.timeout_ns = zt_rng_next(&rng);
        b.init_timeout_ns = 0;
        ZT_CHECK(zc_comm_arena_bytes(&b) == sa);
    }
}

void arena_bytes_is_zero_for_invalid_configs(void) {
    static const zc_transport transports[] = {ZC_TRANSPORT_AUTO, ZC_TRANSPORT_SHM,
                                              ZC_TRANSPORT_INPROC};
    ZT_CHECK(zc_comm_arena_bytes(NULL) == 0);
    for (size_t t = 0; t < sizeof transports / sizeof transports[0]; t++) {
        zc_config ok, c;
        zt_arena_base(&ok, transports[t], 4);
        ok.rank = 1;
        ZT_CHECK(zc_comm_arena_bytes(&ok) > 0);
#define ZT_INVALID(mutation)                                                                 \
    do {                                                                                     \
        c = ok;                                                                              \
        mutation;                                                                            \
        if (zc_comm_arena_bytes(&c) != 0)                                                    \
            zt_fail(__FILE__, __LINE__, "zc_comm_arena_bytes(invalid) == 0", #mutation);     \
    } while (0)
#define ZT_VALID(mutation)                                                                   \
    do {                                                                                     \
        c = ok;                                                                              \
        mutation;                                                                            \
        if (zc_comm_arena_bytes(&c) == 0)                                                    \
            zt_fail(__FILE__, __LINE__, "zc_comm_arena_bytes(valid) > 0", #mutation);        \
    } while (0)
        ZT_INVALID(c.version = 0);
        ZT_INVALID(c.version = ZC_CONFIG_VERSION + 1u);
        ZT_INVALID(c.nranks = 0);
        ZT_INVALID((c.nranks = 0, c.rank = 0));
        ZT_INVALID(c.nranks = ZC_MAX_RANKS + 1u);
        ZT_INVALID(c.nranks = UINT32_MAX);
        ZT_INVALID(c.rank = c.nranks);
        ZT_INVALID(c.rank = UINT32_MAX);
        ZT_INVALID(c.max_requests = 0);
        ZT_INVALID(c.max_requests = ZC_MAX_REQUESTS + 1u);
        ZT_INVALID(c.max_plans = ZC_MAX_REQUESTS + 1u);
        ZT_INVALID(c.max_mems = 4097);
        ZT_INVALID(c.slot_bytes = 0);
        ZT_INVALID(c.slot_bytes = 100);
        ZT_INVALID(c.slot_bytes = 192);  /* a multiple of 64, below 256 */
        ZT_INVALID(c.slot_bytes = 1000); /* not a multiple of 64 */
        ZT_INVALID(c.slot_bytes = 4096 + 32);
        ZT_INVALID(c.slot_bytes = (16u << 20) + 64u);
        ZT_INVALID(c.slots = 0);
        ZT_INVALID(c.slots = 1);
        ZT_INVALID(c.slots = 3);
        ZT_INVALID(c.slots = 12);
        ZT_INVALID(c.slots = 2048);
        ZT_INVALID(c.spin_polls = (1u << 24) + 1u);
        ZT_INVALID(c.transport = (zc_transport)5);
        ZT_INVALID(memset(c.ib_device, 'm', sizeof c.ib_device));
        ZT_INVALID(c.ib_port = 256);
        ZT_INVALID(c.ib_gid_index = -2);
        ZT_INVALID(c.ib_gid_index = 65536);
        ZT_INVALID(c.ib_qps_per_peer = 0);
        ZT_INVALID(c.ib_qps_per_peer = 5);
        ZT_INVALID(c.ib_timeout = 32);
        ZT_INVALID(c.ib_retry_cnt = 8);
        ZT_INVALID(c.transport = (zc_transport)99);
        ZT_INVALID(memset(c.root_addr, 'a', sizeof c.root_addr));
        /* The limits themselves are valid: the checks above fail for their own reason. */
        ZT_VALID(c.nranks = ZC_MESH_MAX_RANKS);
        ZT_INVALID(c.nranks = ZC_MESH_MAX_RANKS + 1u); /* a full mesh */
        ZT_VALID((c.nranks = ZC_MAX_RANKS, c.overlay_min_ranks = ZC_MAX_RANKS,
                  c.transport = ZC_TRANSPORT_INPROC));
        ZT_INVALID((c.overlay_min_ranks = 9, c.log_min_ranks = 10));
        ZT_INVALID((c.overlay_min_ranks = 9, c.log_min_ranks = 0));
        ZT_VALID(c.rank = c.nranks - 1u);
        ZT_VALID((c.max_requests = 1, c.max_plans = 0, c.max_mems = 0));
        ZT_VALID((c.max_requests = ZC_MAX_REQUESTS, c.max_plans = ZC_MAX_REQUESTS));
        ZT_VALID(c.max_mems = 4096);
        ZT_VALID(c.slot_bytes = 256);
        ZT_VALID(c.slot_bytes = 16u << 20);
        ZT_VALID(c.slots = 2);
        ZT_VALID(c.slots = 1024);
        ZT_VALID(c.spin_polls = 0);
        ZT_VALID(c.spin_polls = 1);
        ZT_VALID(c.spin_polls = 1u << 24);
        /* More than one rank between processes needs a rendezvous and a secret; ranks in one
         * process need neither. */
        if (transports[t] == ZC_TRANSPORT_INPROC) {
            ZT_VALID(c.root_addr[0] = '\0');
            ZT_VALID(c.secret_set = false);
            ZT_VALID((c.root_addr[0] = '\0', c.secret_set = false));
        } else {
            ZT_INVALID(c.root_addr[0] = '\0');
            ZT_INVALID(strcpy(c.root_addr, "127.0.0.1"));
            ZT_INVALID(strcpy(c.root_addr, "127.0.0.1:0"));
            ZT_INVALID(strcpy(c.root_addr, "127.0.0.1:65536"));
            ZT_INVALID(strcpy(c.root_addr, ":29500"));
            ZT_INVALID(c.secret_set = false);
            ZT_INVALID((c.nranks = 2, c.rank = 0, c.root_addr[0] = '\0'));
            ZT_INVALID((c.nranks = 2, c.rank = 0, c.secret_set = false));
        }
        /* One rank needs neither, whatever the transport. */
        ZT_VALID((c.nranks = 1, c.rank = 0, c.root_addr[0] = '\0', c.secret_set = false));
#undef ZT_INVALID
#undef ZT_VALID
    }
}
