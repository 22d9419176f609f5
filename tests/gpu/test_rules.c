/* test_rules.c: what real CUDA does that a kind simulation would hide, each as a test that the
 * simulated GPU makes fail on code that breaks the rule (and that runs on CUDA too where a GPU
 * can show it): the thread's error slot after "not ready" polls; one hardware queue shared by
 * every stream (CUDA_DEVICE_MAX_CONNECTIONS=1); zc_comm_fini with calls still on their streams;
 * kernels loaded before a launch can wait behind a flag (lazy loading); progress while another
 * thread captures a graph in global mode; a driver older than the runtime; contexts on devices
 * a rank does not use and progress from a fresh thread; devices without peer access; contained
 * (sticky) errors; IPC mappings outliving a free; dma-buf mappings and flushes per platform;
 * vector loads past an unaligned head. */
#include "zg.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reduce.h"

#include "sim.h"

static zc_status zg_wait(zc_comm *c, zc_status issued, zc_req *req) {
    return issued != ZC_OK ? issued : zc_wait(c, req);
}

static void zg_drive(zc_comm *c, void *s) {
    while (!zg_stream_done(s)) ZT_CHECK_COMM(c, zc_progress(c), ZC_OK);
}

/* ---- the error slot ---- */

/* A device all_reduce waited for polls its event many times ("not ready" each time, which the
 * runtime keeps in the thread's error slot); the caller's next kernel launch, checked the way
 * PyTorch checks its own, must find the slot empty. */
void gpu_not_ready_polls_leave_nothing_in_the_callers_error_slot(void) {
    enum { N = 40000 };
    zc_comm *c = zg_comm_from_env(1u << 20, 1u << 20);
    int32_t *d, *e, host[64];
    zg_register_pair(c, N * 4, (void **)&d, (void **)&e);
    void *s = zg_stream_create();
    for (int k = 0; k < 3; k++) {
        zc_req req;
        ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, d, e, N, ZC_INT32, ZC_SUM, &req), &req),
                      ZC_OK);
        if (zg_sim()) ZT_CHECK(zc_gpu_sim_peek_error() == 0);
        zg_add_i32(d, 64, 1, s); /* fails the test if the slot holds an error */
        while (!zg_stream_done(s)) {
        }
    }
    zg_d2h(host, d, sizeof host);
    ZT_CHECK(host[0] == 3 && host[63] == 3);
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
}

/* ---- one hardware queue ---- */

/* Every stream feeds one in-order queue (Megatron-style tensor parallelism sets this): a
 * stream-ordered call whose device work went anywhere but its own stream, after a flag wait
 * there, would wait for itself. */
void gpu_stream_forms_share_one_hardware_queue_2_ranks(void) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
    setenv("ZC_TIMEOUT_MS", "20000", 1);
    zg_run(2, "zg_rank_stream_forms");
}

/* ---- zc_comm_fini with calls on their streams ---- */

/* A communicator from the environment and a registered device pair (d, e) of n int32, d holding
 * 0..n-1 (host holds them too). */
static zc_comm *zg_iota_pair(int32_t *host, int n, int32_t **d, int32_t **e) {
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    size_t bytes = sizeof(int32_t) * (size_t)n;
    zg_register_pair(c, bytes, (void **)d, (void **)e);
    for (int i = 0; i < n; i++) host[i] = i;
    zg_h2d(*d, host, bytes);
    return c;
}

/* One rank. A call still on its stream: fini refuses, says why, changes nothing; once the
 * stream passed it, fini works. Aborted with a call waiting: fini releases it (its stream goes
 * on, its output untouched) and refuses until the stream passed it. A graph-captured call
 * idle between replays does not hold fini. */
void gpu_fini_refuses_while_a_stream_holds_a_call_and_releases_after_abort(void) {
    enum { N = 1024 };
    int32_t host[N], *d, *e;
    zc_comm *c = zg_iota_pair(host, N, &d, &e);
    void *s = zg_stream_create();
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, d, e, N, ZC_INT32, ZC_SUM, s), ZC_OK);
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_INVALID_STATE);
    ZT_CHECK(strstr(zc_comm_error_text(c), "still on their streams") != NULL);
    zg_drive(c, s);
    zg_d2h(host, e, sizeof host);
    ZT_CHECK(host[0] == 0 && host[N - 1] == N - 1);
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);

    c = zg_comm_from_env(1u << 20, 256u << 10);
    zc_mem *m;
    ZT_CHECK_COMM(c, zc_mem_register(c, d, sizeof host, ZC_MEM_CUDA, &m), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, e, sizeof host, ZC_MEM_CUDA, &m), ZC_OK);
    zg_dev_memset(e, 0x5a, sizeof host);
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, d, e, N, ZC_INT32, ZC_SUM, s), ZC_OK);
    ZT_CHECK_COMM(c, zc_comm_abort(c), ZC_OK);
    zc_status f = zc_comm_fini(c); /* on a GPU its stream may be past it already */
    if (zg_sim()) ZT_CHECK(f == ZC_INVALID_STATE);
    while (!zg_stream_done(s)) {
    }
    if (f != ZC_OK) ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    zg_d2h(host, e, sizeof host);
    for (int i = 0; i < N; i++) ZT_CHECK(host[i] == 0x5a5a5a5a);

    c = zg_comm_from_env(1u << 20, 256u << 10);
    ZT_CHECK_COMM(c, zc_mem_register(c, d, sizeof host, ZC_MEM_CUDA, &m), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, e, sizeof host, ZC_MEM_CUDA, &m), ZC_OK);
    zg_capture_begin(s, true);
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, d, e, N, ZC_INT32, ZC_SUM, s), ZC_OK);
    void *g = zg_capture_end(s);
    ZT_CHECK(g != NULL);
    zg_graph_launch(g, s);
    zg_drive(c, s);
    while (zc_comm_fini(c) == ZC_INVALID_STATE) /* the replay's fin may still be on its way */
        ZT_CHECK_COMM(c, zc_progress(c), ZC_OK);
    zg_graph_free(g);
    zg_stream_destroy(s);
    zg_dev_free(d);
    zg_dev_free(e);
}

/* ---- lazy loading ---- */

/* A stream-ordered call launches its step behind its own flag wait. CUDA loads a kernel at its
 * first launch (lazy loading), and a load may wait for the device to go idle, which that wait
 * never lets it do until the host's next progress: the provider loads every kernel at init.
 * From nothing loaded (a fresh process), a communicator's first stream-ordered call runs; with
 * its kernels forgotten after init (a provider that skipped the load), the simulated launch
 * refuses where CUDA would hang, and the call fails with a sentence, its stream let through. */
void gpu_kernels_load_at_init_so_no_launch_waits_behind_a_flag(void) {
    zg_need_sim();
    enum { N = 256 };
    int32_t host[N], *d, *e;
    zc_gpu_sim_stats s0, s1, s2;
    zc_gpu_sim_unload();
    zc_gpu_sim_get_stats(&s0);
    zc_comm *c = zg_iota_pair(host, N, &d, &e);
    void *s = zg_stream_create();
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, d, e, N, ZC_INT32, ZC_SUM, s), ZC_OK);
    zg_drive(c, s);
    zg_d2h(host, e, sizeof host);
    ZT_CHECK(host[0] == 0 && host[N - 1] == N - 1);
    zc_gpu_sim_get_stats(&s1);
    ZT_CHECK(s1.lazy_blocks == s0.lazy_blocks);

    zc_gpu_sim_unload();
    ZT_CHECK(zc_allreduce_stream(c, d, e, N, ZC_INT32, ZC_SUM, s) == ZC_GPU);
    printf("    refused: %s\n", zc_comm_error_text(c));
    ZT_CHECK(strstr(zc_comm_error_text(c), "zc_step_kernel launch") != NULL);
    zc_gpu_sim_get_stats(&s2);
    ZT_CHECK(s2.lazy_blocks == s1.lazy_blocks + 1);
    while (!zg_stream_done(s)) {
    }
    zc_req req; /* the communicator goes on: its reduction kernels load on an idle device */
    ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, d, e, N, ZC_INT32, ZC_MAX, &req), &req), ZC_OK);
    zg_d2h(host, e, sizeof host);
    ZT_CHECK(host[0] == 0 && host[N - 1] == N - 1);
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    zg_stream_destroy(s);
    zg_dev_free(d);
    zg_dev_free(e);
}

/* A step kernel's grid covers the device and every block reads the step's descriptor: it reads
 * the device copy its stream made, never pinned host memory (on an H200 that cost 2.6 ms a
 * step in PCIe reads). The simulated device counts the steps that read host memory. */
void gpu_step_kernels_read_their_descriptor_from_device_memory(void) {
    zg_need_sim();
    enum { N = 512 };
    int32_t host[N], *d, *e;
    zc_gpu_sim_stats s0, s1;
    zc_comm *c = zg_iota_pair(host, N, &d, &e);
    void *s = zg_stream_create();
    zc_gpu_sim_get_stats(&s0);
    for (int i = 0; i < 3; i++) {
        ZT_CHECK_COMM(c, zc_allreduce_stream(c, d, e, N, ZC_INT32, ZC_SUM, s), ZC_OK);
        zg_drive(c, s);
    }
    zg_d2h(host, e, sizeof host);
    ZT_CHECK(host[0] == 0 && host[N - 1] == N - 1);
    zc_gpu_sim_get_stats(&s1);
    printf("    %llu step kernels, %llu of them reading host memory\n",
           (unsigned long long)(s1.steps - s0.steps),
           (unsigned long long)(s1.steps_host_desc - s0.steps_host_desc));
    ZT_CHECK(s1.steps >= s0.steps + 3);
    ZT_CHECK(s1.steps_host_desc == s0.steps_host_desc);
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    zg_stream_destroy(s);
    zg_dev_free(d);
    zg_dev_free(e);
}

/* A stream-ordered call puts its whole device program on the stream at once: one of more
 * steps than that holds (an in-place all_reduce in rounds of a tiny scratch) is refused with a
 * sentence, and enqueues nothing. */
void gpu_stream_call_of_too_many_steps_is_refused_with_a_sentence(void) {
    enum { N = 4096 };
    zc_comm *c = zg_comm_from_env(256, 256);
    int32_t *d, *e;
    zg_register_pair(c, N * 4, (void **)&d, (void **)&e);
    void *s = zg_stream_create();
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, d, d, N, ZC_INT32, ZC_SUM, s), ZC_UNSUPPORTED);
    ZT_CHECK(strstr(zc_comm_error_text(c), "device steps") != NULL);
    ZT_CHECK(zg_stream_done(s));
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, d, e, 64, ZC_INT32, ZC_SUM, s), ZC_OK);
    zg_drive(c, s);
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
}

/* ---- progress during another thread's global capture ---- */

typedef struct zg_capture_run {
    zc_comm *c;
    int32_t *d, *e;
    volatile int started, finished;
    zc_status st;
} zg_capture_run;

/* The other thread: a plain device all_reduce, issued and waited for (event queries) while the
 * main thread captures in global mode. */
static void *zg_capture_neighbour(void *arg) {
    zg_capture_run *run = arg;
    while (!__atomic_load_n(&run->started, __ATOMIC_ACQUIRE)) {
    }
    zc_req req;
    run->st = zg_wait(run->c, zc_allreduce(run->c, run->d, run->e, 4096, ZC_INT32, ZC_SUM, &req),
                      &req);
    __atomic_store_n(&run->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

int zg_rank_capture_neighbour(void) {
    enum { N = 4096 };
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    uint32_t n = zc_comm_size(c), me = zc_comm_rank(c);
    int32_t *d, *e, *pd, *pe, host[N];
    zg_register_pair(c, sizeof host, (void **)&d, (void **)&e);
    zg_register_pair(c, sizeof host, (void **)&pd, (void **)&pe);
    for (int i = 0; i < N; i++) host[i] = (int32_t)me;
    zg_h2d(d, host, sizeof host);
    zg_h2d(pd, host, sizeof host);
    zg_capture_run run = {c, pd, pe, 0, 0, ZC_OK};
    pthread_t t;
    ZT_CHECK(pthread_create(&t, NULL, zg_capture_neighbour, &run) == 0);
    void *s = zg_stream_create();
    zg_capture_begin(s, true);
    __atomic_store_n(&run.started, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&run.finished, __ATOMIC_ACQUIRE)) {
    }
    zg_add_i32(d, N, 1, s);
    ZT_CHECK_COMM(c, zc_allreduce_stream(c, d, e, N, ZC_INT32, ZC_SUM, s), ZC_OK);
    void *g = zg_capture_end(s);
    ZT_CHECK(pthread_join(t, NULL) == 0);
    ZT_CHECK_COMM(c, run.st, ZC_OK);
    ZT_CHECK(g != NULL); /* the neighbour's polls did not invalidate the capture */
    zg_d2h(host, pe, sizeof host);
    ZT_CHECK(host[0] == (int32_t)(n * (n - 1) / 2));
    for (int k = 1; k <= 5; k++) {
        zg_graph_launch(g, s);
        zg_drive(c, s);
        zg_d2h(host, e, sizeof host);
        ZT_CHECK(host[0] == (int32_t)(n * (n - 1) / 2 + n * (uint32_t)k) && host[N - 1] == host[0]);
    }
    if (me == 0) printf("%u ranks: a capture in global mode survived another thread's device "
                        "all_reduce; 5 replays correct\n", n);
    while (zc_comm_fini(c) == ZC_INVALID_STATE) ZT_CHECK_COMM(c, zc_progress(c), ZC_OK);
    zg_graph_free(g);
    return 0;
}

void gpu_progress_during_another_threads_global_capture_keeps_it_2_ranks(void) {
    zg_run(2, "zg_rank_capture_neighbour");
}

/* ---- the driver ---- */

/* A driver older than the runtime is a device that cannot be used, with both versions in the
 * sentence, and the suite fails on it instead of skipping; no driver at all is no device. */
void gpu_driver_older_than_the_runtime_fails_instead_of_looking_absent(void) {
    zg_need_sim();
    static const char *const drivers[] = {"12040", "0"};
    for (int k = 0; k < 2; k++) {
        setenv("ZC_GPU_SIM_DRIVER", drivers[k], 1);
        static zc_gpu_probe p;
        ZT_CHECK(zg_ops()->probe(&p) == ZC_OK && p.ndevs == 0);
        ZT_CHECK(p.unusable == (k == 0));
        ZT_CHECK(strstr(p.why, k == 0 ? "driver 12.4, runtime 13.0" : "no CUDA driver"));
        static uint64_t state[1u << 13];
        zc_gpu_geom g = {0, 1, 1, 8, 1, 0, 0, NULL, 0};
        ZT_CHECK(zg_ops()->state_bytes(&g) <= sizeof state);
        ZT_CHECK(zg_ops()->init(state, &g) == (k == 0 ? ZC_GPU : ZC_UNSUPPORTED));
        ZT_CHECK(strstr(zg_ops()->error_text(state), k == 0 ? "update the driver" : "driver 0.0"));
        char exe[4200], out[4096];
        snprintf(exe, sizeof exe, "%s/zcgputest", zt_build_dir());
        const char *argv[] = {exe, "gpu_registration_refuses", NULL};
        int rc = zt_run(argv, NULL, out, sizeof out, 60000, NULL);
        printf("    driver %s: the suite's test exits %d\n", drivers[k], rc);
        ZT_CHECK(rc == (k == 0 ? 1 : 0));
        ZT_CHECK(strstr(out, k == 0 ? "cannot use its GPU" : "1 skipped") != NULL);
    }
}

/* ---- contexts ---- */

typedef struct zg_fresh {
    zc_comm *c;
    int32_t *d, *e;
    zc_status plain, stream;
} zg_fresh;

/* A thread that never touched the device: a device all_reduce and a stream-ordered one, driven
 * here. */
static void *zg_fresh_thread(void *arg) {
    zg_fresh *f = arg;
    zc_req req;
    f->plain = zg_wait(f->c, zc_allreduce(f->c, f->d, f->e, 4096, ZC_INT32, ZC_SUM, &req), &req);
    void *s = zg_stream_create();
    f->stream = zc_allreduce_stream(f->c, f->d, f->e, 4096, ZC_INT32, ZC_SUM, s);
    while (f->stream == ZC_OK && !zg_stream_done(s))
        if ((f->stream = zc_progress(f->c)) != ZC_OK) break;
    zg_stream_destroy(s);
    return NULL;
}

int zg_rank_contexts(void) {
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    uint32_t me = zc_comm_rank(c), n = zc_comm_size(c);
    int32_t *d, *e, host[4096];
    zg_register_pair(c, sizeof host, (void **)&d, (void **)&e);
    for (int i = 0; i < 4096; i++) host[i] = (int32_t)me;
    zg_h2d(d, host, sizeof host);
    zg_fresh f = {c, d, e, ZC_GPU, ZC_GPU};
    pthread_t t;
    ZT_CHECK(pthread_create(&t, NULL, zg_fresh_thread, &f) == 0);
    ZT_CHECK(pthread_join(t, NULL) == 0);
    ZT_CHECK_COMM(c, f.plain, ZC_OK);
    ZT_CHECK_COMM(c, f.stream, ZC_OK);
    zg_d2h(host, e, sizeof host);
    ZT_CHECK(host[4095] == (int32_t)(n * (n - 1) / 2));
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    uint32_t made = zc_gpu_sim_contexts();
    printf("rank %u: contexts on devices 0x%x\n", me, made);
    ZT_CHECK(made == 1u << (me % 2u)); /* its own device's only */
    return 0;
}

/* Two devices, a rank on each; everything of rank 1 happens on device 1 (zcoll's calls, from
 * the main thread and from a thread that never touched the device), and no rank ends with a
 * context on the other's device. */
void gpu_no_context_on_another_device_and_progress_from_a_fresh_thread_2_ranks(void) {
    zg_need_sim();
    setenv("ZC_GPU_SIM_DEVICES", "2", 1);
    zg_run(2, "zg_rank_contexts");
}

/* ---- peer access ---- */

/* Two devices without peer access: the ipc path would map memory its kernels cannot read; the
 * communicator goes staged instead, and the whole sweep is right. */
void gpu_without_peer_access_the_ipc_path_goes_staged_2_ranks(void) {
    zg_need_sim();
    setenv("ZC_GPU_SIM_DEVICES", "2", 1);
    setenv("ZC_GPU_SIM_NO_PEER", "1", 1);
    setenv("ZC_GPU_STAGE_BYTES", "16384", 1);
    setenv("ZG_PATH", "staged", 1);
    zg_run(2, "zg_rank_collectives");
}

/* Two devices with peer access: the ipc path. */
void gpu_with_peer_access_two_devices_take_the_ipc_path_2_ranks(void) {
    zg_need_sim();
    setenv("ZC_GPU_SIM_DEVICES", "2", 1);
    setenv("ZG_PATH", "ipc", 1);
    zg_run(2, "zg_rank_collectives");
}

int zg_rank_ipc_refused(void) {
    zc_comm *c = NULL;
    zc_status st = zg_comm_init_env(1u << 20, 256u << 10, &c);
    printf("rank %u: %s: %s\n", zg_rank(), zc_status_name(st), zc_init_error_text());
    ZT_CHECK(st == ZC_UNSUPPORTED && c == NULL);
    ZT_CHECK(strstr(zc_init_error_text(), "gpu_path is ipc but rank 0's device cannot read "
                                          "rank 1's") != NULL);
    return 0;
}

/* gpu_path ipc forced on devices without peer access: every rank's init fails saying which. */
void gpu_path_ipc_without_peer_access_fails_init_on_every_rank_2_ranks(void) {
    zg_need_sim();
    setenv("ZC_GPU_SIM_DEVICES", "2", 1);
    setenv("ZC_GPU_SIM_NO_PEER", "1", 1);
    setenv("ZC_GPU_PATH", "ipc", 1);
    zg_run(2, "zg_rank_ipc_refused");
}

/* ---- sticky errors ---- */

static uint64_t zg_state[(1u << 16) / 8];

static const zc_gpu_ops *zg_open(uint32_t events) {
    zg_need_device();
    const zc_gpu_ops *o = zg_ops();
    zc_gpu_geom g = {0, 1, events, 8, 1, -1, 0, NULL, 0};
    ZT_CHECK(o->state_bytes(&g) <= sizeof zg_state);
    if (o->init(zg_state, &g) != ZC_OK) zt_fail(__FILE__, __LINE__, "init", o->error_text(zg_state));
    return o;
}

/* A contained error (an exception on the device, CUDA 12.x) loses the context like an illegal
 * address: every later call fails with it. */
void gpu_contained_error_is_sticky(void) {
    zg_need_sim();
    setenv("ZC_GPU_SIM_FAULT", "1", 1);
    setenv("ZC_GPU_SIM_FAULT_ERROR", "226", 1);
    const zc_gpu_ops *o = zg_open(1);
    uint8_t *a = zg_dev_alloc(64), *b = zg_dev_alloc(64);
    ZT_CHECK(o->copy(zg_state, b, a, 16) == ZC_OK);
    ZT_CHECK(o->event_record(zg_state, 0) == ZC_OK);
    zc_status st;
    while ((st = o->event_query(zg_state, 0)) == ZC_IN_PROGRESS) {
    }
    ZT_CHECK(st == ZC_GPU && strstr(o->error_text(zg_state), "cudaErrorContained"));
    ZT_CHECK(o->copy(zg_state, b, a, 16) == ZC_GPU);
    ZT_CHECK(strstr(o->error_text(zg_state), "lost earlier") != NULL);
    ZT_CHECK(o->lost(zg_state));
    o->fini(zg_state);
}

/* ---- IPC lifetimes ---- */

/* Rank 1 deregisters and frees its buffers at once; rank 0 keeps its mappings of them a while
 * longer. A deregistration returns only once every peer unmapped the buffer, so no rank frees
 * memory a peer still maps (undefined with CUDA; counted by the simulation). Deregistering a
 * buffer a call in flight uses is refused. */
int zg_rank_free_after_deregister(void) {
    enum { N = 4096 };
    zc_comm *c = zg_comm_from_env(1u << 20, 256u << 10);
    uint32_t me = zc_comm_rank(c);
    int32_t *d = zg_dev_alloc(N * 4), *e = zg_dev_alloc(N * 4);
    zc_mem *md, *mm;
    ZT_CHECK_COMM(c, zc_mem_register(c, d, N * 4, ZC_MEM_CUDA, &md), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, e, N * 4, ZC_MEM_CUDA, &mm), ZC_OK);
    zc_req req;
    ZT_CHECK_COMM(c, zg_wait(c, zc_allreduce(c, d, e, N, ZC_INT32, ZC_SUM, &req), &req), ZC_OK);
    ZT_CHECK_COMM(c, zc_allreduce(c, d, e, N, ZC_INT32, ZC_SUM, &req), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_deregister(c, md), ZC_INVALID_STATE); /* the call uses it */
    ZT_CHECK(strstr(zc_comm_error_text(c), "a call in flight") != NULL);
    ZT_CHECK_COMM(c, zc_wait(c, &req), ZC_OK);
    if (me == 0) usleep(300000);
    double t0 = zt_now_s();
    ZT_CHECK_COMM(c, zc_mem_deregister(c, md), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_deregister(c, mm), ZC_OK);
    double took = zt_now_s() - t0;
    zg_dev_free(d);
    zg_dev_free(e);
    zc_gpu_sim_stats st;
    zc_gpu_sim_get_stats(&st);
    printf("rank %u: deregistered in %.2f s; %llu frees of memory a peer still mapped\n", me,
           took, (unsigned long long)st.frees_while_mapped);
    ZT_CHECK(st.frees_while_mapped == 0);
    if (me == 1) ZT_CHECK(took > 0.2); /* it waited for rank 0's unmapping */
    ZT_CHECK_COMM(c, zc_comm_fini(c), ZC_OK);
    return 0;
}

void gpu_deregistration_returns_once_every_peer_unmapped_the_buffer_2_ranks(void) {
    zg_need_sim();
    zg_run(2, "zg_rank_free_after_deregister");
}

/* ---- GPUDirect per platform ---- */

/* Two dma-buf exports on each simulated platform: where the platform has a PCIe BAR1 mapping
 * besides its default (c2c: Grace Hopper) both take it, one path and one ordering domain;
 * where the flag is refused (x86 PCIe Hopper) both take the default. A device whose NIC writes
 * are not ordered for its kernels (Ampere) flushes them; the others need no flush. */
void gpu_dmabuf_exports_keep_one_mapping_and_flushes_follow_the_ordering(void) {
    zg_need_sim();
    static const char *const platforms[] = {"hopper", "c2c", "ampere"};
    static const uint64_t want_pcie[] = {0, 2, 0}, want_flush[] = {0, 0, 1};
    setenv("ZC_GPU_SIM_DMABUF", "1", 1);
    for (int k = 0; k < 3; k++) {
        setenv("ZC_GPU_SIM_PLATFORM", platforms[k], 1);
        zc_gpu_sim_stats before, after;
        zc_gpu_sim_get_stats(&before);
        const zc_gpu_ops *o = zg_open(1);
        uint8_t *d = zg_dev_alloc(3u << 12);
        for (int x = 0; x < 2; x++) {
            int32_t fd = -1;
            uint64_t off = 0;
            zc_status st = o->dmabuf_export(zg_state, d + 100 + 4096u * (uint32_t)x, 1000, &fd,
                                            &off);
            if (st != ZC_OK) zt_fail(__FILE__, __LINE__, "dmabuf_export", o->error_text(zg_state));
            ZT_CHECK(fd >= 0 && off == 100);
            close(fd);
        }
        ZT_CHECK(o->caps(zg_state) & ZC_GPU_CAP_RDMA);
        ZT_CHECK(o->rdma_flush(zg_state) == ZC_OK);
        zc_gpu_sim_get_stats(&after);
        printf("    %s: 2 exports, %llu through PCIe BAR1; %llu flushes\n", platforms[k],
               (unsigned long long)(after.exports_pcie - before.exports_pcie),
               (unsigned long long)(after.flushes - before.flushes));
        ZT_CHECK(after.exports - before.exports == 2);
        ZT_CHECK(after.exports_pcie - before.exports_pcie == want_pcie[k]);
        ZT_CHECK(after.flushes - before.flushes == want_flush[k]);
        o->fini(zg_state);
        zg_dev_free(d);
    }
}

/* ---- vector loads ---- */

/* A reduction whose pointers are all 4 bytes past a 16-byte boundary (a reduce-scatter block
 * at an odd element offset) goes in 16-byte vectors after a 3-element head; pointers
 * misaligned differently go one element at a time; both give the host kernels' bits. */
void gpu_reduce_vectorizes_past_an_unaligned_head(void) {
    zg_need_sim();
    enum { N = 1000 };
    const zc_gpu_ops *o = zg_open(1);
    float *a = zg_dev_alloc(3u * 8192u), *b = a + 2048, *out = a + 4096, want[N];
    for (int i = 0; i < 2 * 2048; i++) a[i] = (float)i * 0.5f - 100.0f;
    const void *srcs[2] = {a + 1, b + 1}, *odd[2] = {a + 2, b + 1};
    zc__reduce(want, srcs, 2, N, ZC_FLOAT32, ZC_SUM);
    zc_gpu_sim_stats s0, s1, s2;
    zc_gpu_sim_get_stats(&s0);
    ZT_CHECK(o->reduce(zg_state, out + 1, srcs, 2, N, ZC_FLOAT32, ZC_SUM) == ZC_OK);
    ZT_CHECK(o->event_record(zg_state, 0) == ZC_OK);
    while (o->event_query(zg_state, 0) == ZC_IN_PROGRESS) {
    }
    zc_gpu_sim_get_stats(&s1);
    ZT_CHECK(memcmp(out + 1, want, sizeof want) == 0);
    ZT_CHECK(o->reduce(zg_state, out + 1, odd, 2, N, ZC_FLOAT32, ZC_SUM) == ZC_OK);
    ZT_CHECK(o->event_record(zg_state, 0) == ZC_OK);
    while (o->event_query(zg_state, 0) == ZC_IN_PROGRESS) {
    }
    zc_gpu_sim_get_stats(&s2);
    printf("    equally misaligned: %llu of %d elements in vectors; differently: %llu\n",
           (unsigned long long)(s1.vec_elems - s0.vec_elems), N,
           (unsigned long long)(s2.vec_elems - s1.vec_elems));
    ZT_CHECK(s1.vec_elems - s0.vec_elems == 996 && s1.scalar_elems - s0.scalar_elems == 4);
    ZT_CHECK(s2.vec_elems == s1.vec_elems && s2.scalar_elems - s1.scalar_elems == N);
    o->fini(zg_state);
    zg_dev_free(a);
}
