/* test_gpu.c: what of the GPU path runs without a GPU: ZC_MEM_CUDA registration and the
 * stream-ordered forms say why they cannot work here (no CUDA in the build; or, as zctest never
 * creates a CUDA context, no context for cfg->gpu_device -1 to take), the gpu_* configuration
 * fields, and the arena's gpu region. The device suite is tests/gpu (build/zcgputest: on the
 * simulated device in `ninja check`, on CUDA in `ninja check-gpu`). */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include "zt.h"

#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "zcoll.h"

static uint64_t zt_arena[(8u << 20) / 8];

static zc_comm *zt_one_rank(void) {
    zc_config cfg;
    zc_comm *c = NULL;
    zc_config_default(&cfg);
    ZT_CHECK(zc_comm_arena_bytes(&cfg) <= sizeof zt_arena);
    ZT_CHECK_ST(zc_comm_init(&cfg, zt_arena, sizeof zt_arena, &c), ZC_OK);
    return c;
}

void gpu_mem_register_cuda_without_a_usable_device_is_unsupported_with_a_sentence(void) {
    static uint8_t buf[4096];
    zc_comm *c = zt_one_rank();
    zc_mem *m = NULL;
    ZT_CHECK_ST(zc_mem_register(c, buf, sizeof buf, ZC_MEM_CUDA, &m), ZC_UNSUPPORTED);
    ZT_CHECK(m == NULL);
    const char *why = zc_comm_error_text(c);
    ZT_CHECK(strstr(why, "ZC_MEM_CUDA") != NULL);
#ifdef ZC_HAVE_CUDA
    /* No driver, no device, or (zctest never touches CUDA) no context to take. */
    ZT_CHECK(strstr(why, "CUDA") != NULL && strstr(why, "no CUDA support") == NULL);
#else
    ZT_CHECK(strstr(why, "no CUDA support") != NULL);
#endif
    /* The table is untouched: a host registration still gets the first entry. */
    ZT_CHECK_ST(zc_mem_register(c, buf, sizeof buf, ZC_MEM_HOST, &m), ZC_OK);
    ZT_CHECK_ST(zc_mem_deregister(c, m), ZC_OK);
    ZT_CHECK_ST(zc_mem_register(c, buf, sizeof buf, (zc_mem_kind)7, &m), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc_comm_fini(c), ZC_OK);
}

void gpu_config_fields_are_validated_and_read_from_env(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    ZT_CHECK_EQ(cfg.gpu_device, -1);
    ZT_CHECK_EQ(cfg.gpu_stream_slots, ZC_DEFAULT_GPU_STREAM_SLOTS);
    ZT_CHECK_EQ(cfg.gpu_scratch_bytes, ZC_DEFAULT_GPU_SCRATCH_BYTES);
    ZT_CHECK_EQ(cfg.gpu_oneshot_max_bytes, ZC_DEFAULT_GPU_ONESHOT_MAX_BYTES);
    zc_config bad = cfg;
    bad.gpu_device = -3;
    ZT_CHECK_EQ(zc_comm_arena_bytes(&bad), 0);
    bad = cfg;
    bad.gpu_stream_slots = 5000;
    ZT_CHECK_EQ(zc_comm_arena_bytes(&bad), 0);
    bad = cfg;
    bad.gpu_scratch_bytes = 1000; /* not a multiple of 256 */
    ZT_CHECK_EQ(zc_comm_arena_bytes(&bad), 0);
    zc_comm *c = NULL;
    ZT_CHECK_ST(zc_comm_init(&bad, zt_arena, sizeof zt_arena, &c), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_init_error_text(), "gpu_scratch_bytes") != NULL);
    ZT_CHECK(setenv("ZC_GPU_DEVICE", "none", 1) == 0);
    ZT_CHECK(setenv("ZC_GPU_STREAM_SLOTS", "4", 1) == 0);
    ZT_CHECK(setenv("ZC_GPU_SCRATCH_BYTES", "1048576", 1) == 0);
    ZT_CHECK(setenv("ZC_GPU_ONESHOT_MAX_BYTES", "65536", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_OK);
    ZT_CHECK_EQ(cfg.gpu_device, -2);
    ZT_CHECK_EQ(cfg.gpu_stream_slots, 4);
    ZT_CHECK_EQ(cfg.gpu_scratch_bytes, 1048576);
    ZT_CHECK_EQ(cfg.gpu_oneshot_max_bytes, 65536);
    ZT_CHECK_EQ(cfg.gpu_provider, ZC_GPU_PROVIDER_AUTO);
    ZT_CHECK(setenv("ZC_GPU_PROVIDER", "sim", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_OK);
    ZT_CHECK_EQ(cfg.gpu_provider, ZC_GPU_PROVIDER_SIM);
    ZT_CHECK(setenv("ZC_GPU_PROVIDER", "cuda", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_OK);
    ZT_CHECK_EQ(cfg.gpu_provider, ZC_GPU_PROVIDER_CUDA);
    ZT_CHECK(setenv("ZC_GPU_PROVIDER", "gpu", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_INVALID_ARG);
    ZT_CHECK(strstr(cfg.error_text, "ZC_GPU_PROVIDER") != NULL);
    ZT_CHECK(unsetenv("ZC_GPU_PROVIDER") == 0);
    bad = cfg;
    bad.gpu_provider = 3;
    ZT_CHECK_EQ(zc_comm_arena_bytes(&bad), 0);
    ZT_CHECK(setenv("ZC_GPU_DEVICE", "3", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_OK);
    ZT_CHECK_EQ(cfg.gpu_device, 3);
    ZT_CHECK(setenv("ZC_GPU_STREAM_SLOTS", "many", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_INVALID_ARG);
    ZT_CHECK(strstr(cfg.error_text, "ZC_GPU_STREAM_SLOTS") != NULL);
    ZT_CHECK(setenv("ZC_GPU_STREAM_SLOTS", "4", 1) == 0);
    ZT_CHECK(setenv("ZC_GPU_SCRATCH_BYTES", "1000", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_INVALID_ARG);
    ZT_CHECK(strstr(cfg.error_text, "gpu_scratch_bytes") != NULL);
    ZT_CHECK(unsetenv("ZC_GPU_DEVICE") == 0 && unsetenv("ZC_GPU_STREAM_SLOTS") == 0 &&
             unsetenv("ZC_GPU_SCRATCH_BYTES") == 0 && unsetenv("ZC_GPU_ONESHOT_MAX_BYTES") == 0);
}

void gpu_arena_region_exists_only_in_cuda_builds_and_grows_with_stream_slots(void) {
    zc_config cfg, off, more, sim;
    zc_config_default(&cfg);
    off = more = sim = cfg;
    off.gpu_device = -2;
    sim.gpu_provider = ZC_GPU_PROVIDER_SIM; /* the simulated device: a region in every build */
    ZT_CHECK(zc_comm_arena_bytes(&sim) > zc_comm_arena_bytes(&off));
    sim.gpu_device = -2;
    ZT_CHECK_EQ(zc_comm_arena_bytes(&sim), zc_comm_arena_bytes(&off));
    more.gpu_stream_slots = cfg.gpu_stream_slots * 4u;
    size_t base = zc_comm_arena_bytes(&cfg), none = zc_comm_arena_bytes(&off);
    size_t grown = zc_comm_arena_bytes(&more);
    ZT_CHECK(base > 0 && none > 0 && grown > 0);
#ifdef ZC_HAVE_CUDA
    ZT_CHECK(base > none);
    ZT_CHECK(grown > base);
#else
    ZT_CHECK_EQ(base, none);
    ZT_CHECK_EQ(grown, base);
#endif
}

void gpu_stream_forms_without_a_usable_device_are_unsupported(void) {
    static float buf[16];
    zc_comm *c = zt_one_rank();
    ZT_CHECK_ST(zc_allreduce_stream(c, buf, buf, 16, ZC_FLOAT32, ZC_SUM, NULL), ZC_UNSUPPORTED);
    ZT_CHECK(strstr(zc_comm_error_text(c), "zc_allreduce_stream") != NULL);
    ZT_CHECK_ST(zc_barrier_stream(c, NULL), ZC_UNSUPPORTED);
    ZT_CHECK_ST(zc_allreduce_stream(c, buf, buf, 16, ZC_FLOAT32, (zc_op)9, NULL),
                ZC_INVALID_ARG); /* validated like the non-blocking form, first */
    /* The host path is untouched by the hooks. */
    zc_req req;
    ZT_CHECK_ST(zc_allreduce(c, buf, buf, 16, ZC_FLOAT32, ZC_SUM, &req), ZC_OK);
    ZT_CHECK_ST(zc_wait(c, &req), ZC_OK);
    ZT_CHECK_ST(zc_comm_fini(c), ZC_OK);
}

/* gpu_path direct on a wire that cannot write into device memory (shm, in-process): init
 * refuses it with a sentence that says what to do; gpu_path auto there is ipc. */
void gpu_direct_path_needs_a_wire_with_puts(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.gpu_provider = ZC_GPU_PROVIDER_SIM;
    cfg.gpu_path = ZC_GPU_PATH_DIRECT;
    ZT_CHECK_ST(zc_gpu_sim_set_device(0), ZC_OK); /* the context gpu_device -1 takes */
    zc_comm *c = NULL;
    ZT_CHECK_ST(zc_comm_init(&cfg, zt_arena, sizeof zt_arena, &c), ZC_UNSUPPORTED);
    ZT_CHECK(c == NULL);
    ZT_CHECK(strstr(zc_init_error_text(), "gpu_path is direct") != NULL &&
             strstr(zc_init_error_text(), "use gpu_path auto") != NULL);
    cfg.gpu_path = ZC_GPU_PATH_AUTO;
    ZT_CHECK_ST(zc_comm_init(&cfg, zt_arena, sizeof zt_arena, &c), ZC_OK);
    ZT_CHECK(strcmp(zc_comm_gpu_path(c), "ipc") == 0);
    uint64_t calls = 1, bytes = 1;
    zc_comm_gpu_direct(c, &calls, &bytes);
    ZT_CHECK(calls == 0 && bytes == 0);
    ZT_CHECK_ST(zc_comm_fini(c), ZC_OK);
    zc_comm_gpu_direct(NULL, &calls, &bytes);
    ZT_CHECK(calls == 0 && bytes == 0);
}

/* The staged path's fields (core/sched_stage.c): defaults, validation, ZC_GPU_PATH and
 * ZC_GPU_STAGE_BYTES; then one rank on the simulated device with the staged path forced: the
 * path zc_comm_gpu_path reports, a staged all_reduce in several rounds equal to its input (also
 * as a persistent plan started twice), a device send to itself refused like a host one, and ZC_LIMIT naming cfg->gpu_stage_bytes when
 * the staging is 0. */
void gpu_staged_path_fields_and_one_rank_staged_allreduce(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    ZT_CHECK_EQ(cfg.gpu_path, ZC_GPU_PATH_AUTO);
    ZT_CHECK_EQ(cfg.gpu_stage_bytes, ZC_DEFAULT_GPU_STAGE_BYTES);
    zc_config bad = cfg;
    bad.gpu_path = ZC_GPU_PATH_DIRECT + 1;
    ZT_CHECK_EQ(zc_comm_arena_bytes(&bad), 0);
    bad = cfg;
    bad.gpu_stage_bytes = 1000; /* not a multiple of 256 */
    ZT_CHECK_EQ(zc_comm_arena_bytes(&bad), 0);
    ZT_CHECK(setenv("ZC_GPU_PATH", "staged", 1) == 0);
    ZT_CHECK(setenv("ZC_GPU_STAGE_BYTES", "4096", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_OK);
    ZT_CHECK_EQ(cfg.gpu_path, ZC_GPU_PATH_STAGED);
    ZT_CHECK_EQ(cfg.gpu_stage_bytes, 4096);
    ZT_CHECK(setenv("ZC_GPU_PATH", "direct", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_OK);
    ZT_CHECK_EQ(cfg.gpu_path, ZC_GPU_PATH_DIRECT);
    ZT_CHECK(setenv("ZC_GPU_PATH", "gpudirect", 1) == 0);
    ZT_CHECK_ST(zc_config_from_env(&cfg), ZC_INVALID_ARG);
    ZT_CHECK(strstr(cfg.error_text, "ZC_GPU_PATH") != NULL);
    ZT_CHECK(unsetenv("ZC_GPU_PATH") == 0 && unsetenv("ZC_GPU_STAGE_BYTES") == 0);
    static const uint64_t stages[] = {256, 0};
    ZT_CHECK_ST(zc_gpu_sim_set_device(0), ZC_OK); /* the context gpu_device -1 takes */
    for (int k = 0; k < 2; k++) {
        uint64_t stage = stages[k];
        zc_config_default(&cfg);
        cfg.gpu_provider = ZC_GPU_PROVIDER_SIM;
        cfg.gpu_path = ZC_GPU_PATH_STAGED;
        cfg.gpu_stage_bytes = stage;
        zc_comm *c = NULL;
        ZT_CHECK_ST(zc_comm_init(&cfg, zt_arena, sizeof zt_arena, &c), ZC_OK);
        ZT_CHECK(strcmp(zc_comm_gpu_path(c), "staged") == 0);
        float *d = zc_gpu_sim_alloc(4096), want[100];
        ZT_CHECK(d != NULL);
        for (int i = 0; i < 100; i++) d[i] = want[i] = (float)i - 7.5f;
        zc_mem *m;
        zc_req req;
        ZT_CHECK_ST(zc_mem_register(c, d, 4096, ZC_MEM_CUDA, &m), ZC_OK);
        zc_status st = zc_allreduce(c, d, d + 512, 100, ZC_FLOAT32, ZC_SUM, &req);
        if (stage) { /* 32 elements per round: 4 rounds */
            ZT_CHECK_ST(st, ZC_OK);
            ZT_CHECK_ST(zc_wait(c, &req), ZC_OK);
            ZT_CHECK(memcmp(d + 512, want, sizeof want) == 0);
            ZT_CHECK_ST(zc_send(c, d, 10, ZC_FLOAT32, 0, &req), ZC_INVALID_ARG);
            zc_plan plan; /* a persistent staged call, started twice */
            ZT_CHECK_ST(zc_allreduce_init(c, d, d + 256, 100, ZC_FLOAT32, ZC_SUM, &plan), ZC_OK);
            for (int start = 0; start < 2; start++) {
                memset(d + 256, 0, sizeof want);
                ZT_CHECK_ST(zc_start(c, &plan, &req), ZC_OK);
                ZT_CHECK_ST(zc_wait(c, &req), ZC_OK);
                ZT_CHECK(memcmp(d + 256, want, sizeof want) == 0);
            }
            ZT_CHECK_ST(zc_plan_release(c, &plan), ZC_OK);
        } else {
            ZT_CHECK_ST(st, ZC_LIMIT);
            ZT_CHECK(strstr(zc_comm_error_text(c), "cfg->gpu_stage_bytes") != NULL);
        }
        ZT_CHECK_ST(zc_mem_deregister(c, m), ZC_OK);
        ZT_CHECK_ST(zc_comm_fini(c), ZC_OK);
        zc_gpu_sim_free(d);
    }
}

/* Runs build/zcprobe (args after it) with env; its output in out, its exit status returned. */
static int zt_probe(const char *arg, const char *const env[], char *out, size_t cap) {
    char exe[4200];
    snprintf(exe, sizeof exe, "%s/zcprobe", zt_build_dir());
    const char *argv[] = {exe, arg, NULL};
    return zt_run(argv, env, out, cap, 60000, NULL);
}

/* zcprobe on a machine without a GPU (the simulated provider with no device) and without RDMA
 * devices says "none" for each and exits 0, 1 with --require-gpu; on two simulated GPUs without
 * peer access it prints the matrix and the staged path on one host; with a driver too old it
 * says so with both versions; the real provider's report always has its lines. */
void zcprobe_says_none_without_gpu_and_describes_devices_peers_and_paths(void) {
    static char out[8192];
    const char *none[] = {"ZC_GPU_PROVIDER=sim", "ZC_GPU_SIM_DEVICES=0", NULL};
    ZT_CHECK_EQ(zt_probe(NULL, none, out, sizeof out), 0);
    ZT_CHECK(strstr(out, "GPUs: none") && strstr(out, "path on one host: none") &&
             strstr(out, "path across hosts: none") && strstr(out, "NICs: "));
    ZT_CHECK_EQ(zt_probe("--require-gpu", none, out, sizeof out), 1);
    const char *two[] = {"ZC_GPU_PROVIDER=sim", "ZC_GPU_SIM_DEVICES=2", "ZC_GPU_SIM_NO_PEER=1",
                         NULL};
    ZT_CHECK_EQ(zt_probe("--require-gpu", two, out, sizeof out), 0);
    ZT_CHECK(strstr(out, "GPU 1: zcoll simulated GPU 1") &&
             strstr(out, "GPUDirect RDMA: yes; NIC writes ordering: owner") &&
             strstr(out, "GPU 0's kernels read GPU 1's memory: no") &&
             strstr(out, "path on one host: staged"));
    const char *peers[] = {"ZC_GPU_PROVIDER=sim", "ZC_GPU_SIM_DEVICES=2", NULL};
    ZT_CHECK_EQ(zt_probe(NULL, peers, out, sizeof out), 0);
    ZT_CHECK(strstr(out, "GPU 0's kernels read GPU 1's memory: yes") &&
             strstr(out, "path on one host: ipc"));
    const char *old[] = {"ZC_GPU_PROVIDER=sim", "ZC_GPU_SIM_DRIVER=12040", NULL};
    ZT_CHECK_EQ(zt_probe("--require-gpu", old, out, sizeof out), 1);
    ZT_CHECK(strstr(out, "driver 12.4, runtime 13.0") && strstr(out, "update the driver"));
    ZT_CHECK_EQ(zt_probe("--bogus", NULL, out, sizeof out), 2);
    ZT_CHECK_EQ(zt_probe(NULL, NULL, out, sizeof out), 0);
    ZT_CHECK(strstr(out, "gpu provider: ") && strstr(out, "path on one host: "));
}

/* `ninja check-gpu` on a machine with a GPU that CUDA cannot use (pretended: ZG_ASSUME_GPU=1)
 * fails at once with zcprobe's report instead of skipping every test; where CUDA can use it,
 * the check passes. */
void check_gpu_fails_when_a_gpu_is_present_but_unusable(void) {
    static char out[8192], probe[8192];
    const char *cuda[] = {"ZC_GPU_PROVIDER=cuda", NULL};
    int usable = zt_probe("--require-gpu", cuda, probe, sizeof probe) == 0;
    char script[4200];
    snprintf(script, sizeof script, "%s/../tests/gpu/run.sh", zt_build_dir());
    const char *argv[] = {"/bin/bash", script, NULL};
    const char *env[] = {"ZG_ASSUME_GPU=1", "ZG_PREFLIGHT_ONLY=1", NULL};
    int rc = zt_run(argv, env, out, sizeof out, 60000, NULL);
    printf("    a GPU CUDA %s use: check-gpu's preflight exits %d\n", usable ? "can" : "cannot",
           rc);
    ZT_CHECK_EQ(rc, usable ? 0 : 1);
    if (!usable) ZT_CHECK(strstr(out, "CUDA cannot use it") && strstr(out, "gpu provider: "));
}
