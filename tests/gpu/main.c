/* main.c: build/zcgputest, the device-memory suite's runner (`ninja check` on the simulated GPU,
 * `ninja check-gpu` on CUDA): the tests of tests/gpu/list.h through the shared runner
 * (tests/harness.c), after ZC_GPU_PROVIDER is settled (unset: cuda in CUDA builds, sim
 * otherwise; the ranks inherit it). The parent never touches CUDA, so every test's process
 * starts with a fresh context; the communicators of rank programs live in a static arena. */
#include "zg.h"

#include <stdlib.h>
#include <string.h>

#define ZT_TEST(name, timeout_s) {#name, name, timeout_s},
#define ZT_RANK(name)
static const zt_entry zg_tests[] = {
#include "list.h"
};
#undef ZT_TEST
#undef ZT_RANK
#define ZT_TEST(name, timeout_s)
#define ZT_RANK(name) {#name, name},
static const zt_rank_entry zg_ranks[] = {
#include "list.h"
    {NULL, NULL}};
#undef ZT_TEST
#undef ZT_RANK

static zc_comm *zg_comm;
static uint64_t zg_arena[(64u << 20) / 8]; /* static: allocation-free like every zcoll user */

zc_status zg_comm_init_env(uint64_t gpu_scratch_bytes, uint64_t oneshot_max_bytes,
                           zc_comm **out) {
    zc_config cfg;
    zg_need_device();
    zc_config_default(&cfg);
    if (zc_config_from_env(&cfg) != ZC_OK) zt_fail(__FILE__, __LINE__, "zc_config_from_env",
                                                   cfg.error_text);
    cfg.gpu_scratch_bytes = gpu_scratch_bytes;
    cfg.gpu_oneshot_max_bytes = oneshot_max_bytes;
    if (!getenv("ZC_TIMEOUT_MS")) cfg.timeout_ns = 60000000000ull;
    size_t need = zc_comm_arena_bytes(&cfg);
    ZT_CHECK(need > 0 && need <= sizeof zg_arena);
    return zc_comm_init(&cfg, zg_arena, sizeof zg_arena, out);
}

zc_comm *zg_comm_from_env(uint64_t gpu_scratch_bytes, uint64_t oneshot_max_bytes) {
    zc_status st = zg_comm_init_env(gpu_scratch_bytes, oneshot_max_bytes, &zg_comm);
    if (st != ZC_OK) zt_fail(__FILE__, __LINE__, "zc_comm_init", zc_init_error_text());
    zg_watch(zg_comm);
    return zg_comm;
}

uint32_t zg_rank(void) {
    const char *r = getenv("ZC_RANK");
    return r ? (uint32_t)atoi(r) : 0u;
}

int main(int argc, char **argv) {
#ifdef ZC_HAVE_CUDA
    setenv("ZC_GPU_PROVIDER", "cuda", 0);
#else
    setenv("ZC_GPU_PROVIDER", "sim", 0);
#endif
    if (!(argc == 3 && strcmp(argv[1], "--rank") == 0))
        printf("device: %s\n", zg_sim() ? "simulated (ZC_GPU_PROVIDER=sim)" : "CUDA");
    return zt_main(argc, argv, "zcgputest", zg_tests, sizeof zg_tests / sizeof zg_tests[0],
                   zg_ranks);
}
