/* seed000_reduce_scatter.c: the forum thread "How does reduce_scatter work?" (seed 000) in C on
 * zcoll. Its toy program, on 2 ranks: each rank starts with [rank*3, rank*3+1, rank*3+2] and
 * all_gathers it; then two reduce_scatters of int32 tensors of size*5 elements cut into size
 * chunks of 5: rank r receives the element-wise sum, over all ranks, of chunk r of their input.
 *   input 1: every rank holds 0..size*5-1, so rank r gets size * chunk r:
 *            rank 0 [0, 2, 4, 6, 8], rank 1 [10, 12, 14, 16, 18];
 *   input 2: rank q holds q*5 + (0..size*5-1), so the ranks' chunks are shifted copies:
 *            rank 0 [5, 7, 9, 11, 13], rank 1 [15, 17, 19, 21, 23].
 * (The "count" of the NCCL pictures the thread asks about is the 5 elements each rank
 * receives: zc_reduce_scatter's recvcount; the send buffer holds size * recvcount.)
 *
 * Run: build/zcrun -n 2 build/examples/seed000_reduce_scatter
 * zcrun puts "[rank] " before every line. Tensors print as torch prints them; the thread's
 * tensors live on cuda:{rank}, so torch would add device='cuda:0'; these are host buffers.
 * Each section prints in rank order (ranks take turns, each waiting until zcrun has read its
 * lines), so the output is the same on every run. */

/* POSIX for the output turn-taking below (fstat, ioctl FIONREAD, nanosleep); the zcoll calls
 * need only C11. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zcoll.h"

enum {
    EX_MAX_RANKS = 64,    /* sizes the buffers below; checked at start */
    TENSOR_LEN = 3,       /* the thread's tensor_len */
    SCATTER_SIZE = 5,     /* the thread's scatter_size: elements each rank receives */
};
/* th.empty_like() holds whatever was in memory; we use -1 so a result visibly replaces it. */
#define EX_EMPTY (-1)

/* ---- the small harness of the seed examples (each example carries its own copy) --------- */

typedef struct ex_world {
    zc_comm *comm;   /* NULL until zc_comm_init succeeded */
    void *arena;     /* zc_comm_arena_bytes() of caller memory; ours again after fini */
    uint32_t rank;
    uint32_t size;
} ex_world;

/* The lines one rank prints in one section; printed together, in rank order. */
typedef struct ex_text {
    char buf[4096];
    size_t len;   /* bytes used, < sizeof buf; longer text is cut */
} ex_text;

static void ex_die(const ex_world *w, const char *call, zc_status s) {
    fprintf(stderr, "%s failed: %s: %s\n", call, zc_status_name(s),
            w->comm != NULL ? zc_comm_error_text(w->comm) : zc_init_error_text());
    exit(1);
}

static void ex_check(const ex_world *w, const char *call, zc_status s) {
    if (s != ZC_OK) ex_die(w, call, s);
}

/* Checks the status of the call that posted req, then waits for req. */
static void ex_run(ex_world *w, const char *call, zc_status posted, zc_req *req) {
    ex_check(w, call, posted);
    ex_check(w, call, zc_wait(w->comm, req));
}

static void ex_barrier(ex_world *w) {
    zc_req req;
    ex_run(w, "zc_barrier", zc_barrier(w->comm, &req), &req);
}

/* Reads rank, size, rendezvous and secret from zcrun's environment and joins the job. */
static void ex_init(ex_world *w) {
    zc_config cfg;
    zc_config_default(&cfg);
    zc_status s = zc_config_from_env(&cfg);
    if (s != ZC_OK) {
        fprintf(stderr, "zc_config_from_env failed: %s: %s\n", zc_status_name(s), cfg.error_text);
        exit(1);
    }
    size_t bytes = zc_comm_arena_bytes(&cfg);   /* 0: invalid config; init says why */
    w->comm = NULL;
    w->arena = bytes > 0 ? malloc(bytes) : NULL;
    if (bytes > 0 && w->arena == NULL) {
        fprintf(stderr, "out of memory for a %zu-byte arena\n", bytes);
        exit(1);
    }
    ex_check(w, "zc_comm_init", zc_comm_init(&cfg, w->arena, bytes, &w->comm));
    w->rank = zc_comm_rank(w->comm);
    w->size = zc_comm_size(w->comm);
    if (w->size > EX_MAX_RANKS) {
        fprintf(stderr, "this example runs on at most %d ranks\n", EX_MAX_RANKS);
        exit(1);
    }
}

static void ex_fini(ex_world *w) {
    zc_status s = zc_comm_fini(w->comm);
    if (s != ZC_OK) {
        fprintf(stderr, "zc_comm_fini failed: %s\n", zc_status_name(s));
        exit(1);
    }
    free(w->arena);
    w->comm = NULL;
    w->arena = NULL;
}

__attribute__((format(printf, 2, 3)))
static void ex_printf(ex_text *t, const char *fmt, ...) {
    size_t room = sizeof t->buf - t->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n < room ? (size_t)n : room - 1;
}

/* zcrun reads every rank's pipe separately, so lines written first can still come out later
 * than another rank's. When stdout is a pipe, wait (at most about a second) until its reader
 * has taken everything we wrote; then our lines are out before anyone else's next ones. */
static void ex_wait_stdout_read(void) {
    struct stat st;
    if (fstat(STDOUT_FILENO, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
    const struct timespec pause = {.tv_sec = 0, .tv_nsec = 50000};
    for (int i = 0; i < 20000; i++) {
        int unread = 0;
        if (ioctl(STDOUT_FILENO, FIONREAD, &unread) != 0 || unread == 0) return;
        nanosleep(&pause, NULL);
    }
}

/* Ranks take turns: rank r writes its text and waits until it was read, then all meet at a
 * barrier, so rank r's lines come out before rank r+1 writes any. */
static void ex_print_in_rank_order(ex_world *w, const ex_text *t) {
    for (uint32_t r = 0; r < w->size; r++) {
        if (r == w->rank && t->len > 0) {
            fputs(t->buf, stdout);
            fflush(stdout);
            ex_wait_stdout_read();
        }
        ex_barrier(w);
    }
}

/* torch's str() of a 1-D int32 tensor: elements right-aligned to the widest, then the dtype
 * (torch names every integer dtype but its default int64). */
static void ex_tensor_i32(ex_text *t, const int32_t *v, size_t n) {
    int width = 1;
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(NULL, 0, "%d", (int)v[i]);
        width = len > width ? len : width;
    }
    ex_printf(t, "tensor([");
    for (size_t i = 0; i < n; i++) ex_printf(t, "%s%*d", i > 0 ? ", " : "", width, (int)v[i]);
    ex_printf(t, "], dtype=torch.int32)");
}

/* A Python list of `chunks` tensors of `len` elements each, as list(x.chunk(size)) prints. */
static void ex_tensor_list_i32(ex_text *t, const int32_t *v, size_t chunks, size_t len) {
    ex_printf(t, "[");
    for (size_t c = 0; c < chunks; c++) {
        ex_printf(t, "%s", c > 0 ? ", " : "");
        ex_tensor_i32(t, v + c * len, len);
    }
    ex_printf(t, "]");
}

/* ---- the thread's program ---------------------------------------------------------------- */

/* vals = [rank*3 + i for i in range(3)], all_gathered: every rank sees every rank's tensor,
 * in rank order. */
static void do_all_gather(ex_world *w) {
    int32_t tensor[TENSOR_LEN];
    int32_t output[EX_MAX_RANKS * TENSOR_LEN];
    for (int i = 0; i < TENSOR_LEN; i++) tensor[i] = (int32_t)w->rank * TENSOR_LEN + i;
    for (uint32_t i = 0; i < w->size * TENSOR_LEN; i++) output[i] = EX_EMPTY;
    zc_req req;
    ex_run(w, "zc_allgather",
           zc_allgather(w->comm, tensor, output, TENSOR_LEN, ZC_INT32, &req), &req);
    ex_text t = {.len = 0};
    ex_printf(&t, "Rank: %u\nStart tensor: ", (unsigned)w->rank);
    ex_tensor_i32(&t, tensor, TENSOR_LEN);
    ex_printf(&t, "\nGathered: ");
    ex_tensor_list_i32(&t, output, w->size, TENSOR_LEN);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

/* aggregate = [offset + i for i in range(size*5)] cut into size chunks of 5; reduce_scatter
 * with SUM gives rank r the sum over ranks of their chunk r. `label` is "" or " 2", as in the
 * thread's two prints. */
static void do_reduce_scatter(ex_world *w, int32_t offset, const char *label) {
    int32_t aggregate[EX_MAX_RANKS * SCATTER_SIZE];
    int32_t output[SCATTER_SIZE];
    for (uint32_t i = 0; i < w->size * SCATTER_SIZE; i++) aggregate[i] = offset + (int32_t)i;
    for (int i = 0; i < SCATTER_SIZE; i++) output[i] = EX_EMPTY;
    zc_req req;
    ex_run(w, "zc_reduce_scatter",
           zc_reduce_scatter(w->comm, aggregate, output, SCATTER_SIZE, ZC_INT32, ZC_SUM, &req),
           &req);
    ex_text t = {.len = 0};
    ex_printf(&t, "Input list%s: ", label);
    ex_tensor_list_i32(&t, aggregate, w->size, SCATTER_SIZE);
    ex_printf(&t, "\nReduce Scatter output%s: ", label);
    ex_tensor_i32(&t, output, SCATTER_SIZE);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

int main(void) {
    ex_world w;
    ex_init(&w);
    do_all_gather(&w);
    do_reduce_scatter(&w, 0, "");   /* every rank: 0..size*5-1 */
    do_reduce_scatter(&w, (int32_t)w.rank * SCATTER_SIZE, " 2");   /* rank*5 + i */
    ex_fini(&w);
    return 0;
}
