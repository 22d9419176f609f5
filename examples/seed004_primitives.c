/* seed004_primitives.c: the tutorial "torch.distributed communication primitives" (seed 004)
 * in C on zcoll, on 4 ranks: broadcast of 1 from rank 0, all_reduce (SUM) of rank+1 (10
 * everywhere), scatter of [1.0, 2.0, 3.0, 4.0] from rank 0, gather of rank+1 to rank 0, and
 * the non-blocking all_reduce of rank (6 everywhere), each printed as the article prints it
 * ("Rank 1 has data: 1.0", "Rank 0 gathered list: [1.0, 2.0, 3.0, 4.0]", ...).
 *
 * Run: build/zcrun -n 4 build/examples/seed004_primitives
 * zcrun puts "[rank] " before every line. Every zcoll collective is non-blocking like the
 * article's async_op=True form: post it, then zc_wait; the blocking torch calls are the two
 * together. Each section prints in rank order (ranks take turns, each waiting until zcrun has
 * read its lines), so the output is the same on every run. */

/* POSIX for the output turn-taking below (fstat, ioctl FIONREAD, nanosleep); the zcoll calls
 * need only C11. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zcoll.h"

enum { EX_MAX_RANKS = 64 };   /* sizes the per-rank lists below; checked at start */

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

/* Python's str(float): the shortest digits that read back as x, in fixed notation for
 * exponents -4..15 (always with a ".0" or decimals), else in scientific notation. */
static void ex_pyfloat(ex_text *t, double x) {
    if (!isfinite(x)) {
        ex_printf(t, "%s", isnan(x) ? "nan" : x < 0.0 ? "-inf" : "inf");
        return;
    }
    char s[40];
    int digits = 1;
    for (; digits <= 17; digits++) {   /* 17 significant digits always read back */
        snprintf(s, sizeof s, "%.*e", digits - 1, x);
        if (strtod(s, NULL) == x) break;
    }
    int exp10 = atoi(strchr(s, 'e') + 1);   /* the exponent after rounding to `digits` */
    if (exp10 < -4 || exp10 >= 16) {
        ex_printf(t, "%s", s);
        return;
    }
    int decimals = digits - 1 - exp10;
    ex_printf(t, "%.*f%s", decimals > 0 ? decimals : 0, x, decimals > 0 ? "" : ".0");
}

/* A Python list of floats, as print() shows [t.item() for t in tensors]: "[1.0, 2.0]". */
static void ex_pyfloat_list(ex_text *t, const float *v, size_t n) {
    ex_printf(t, "[");
    for (size_t i = 0; i < n; i++) {
        ex_printf(t, "%s", i > 0 ? ", " : "");
        ex_pyfloat(t, (double)v[i]);
    }
    ex_printf(t, "]");
}

/* One line "Rank {rank} {what}: {value}" with value a Python float. */
static void ex_rank_line(const ex_world *w, ex_text *t, const char *what, float value) {
    ex_printf(t, "Rank %u %s: ", (unsigned)w->rank, what);
    ex_pyfloat(t, (double)value);
    ex_printf(t, "\n");
}

/* ---- the article's examples ------------------------------------------------------------- */

/* tensor = zeros(1), rank 0 adds 1, broadcast from rank 0: ranks 1..3 go from 0 to 1. */
static void run_broadcast(ex_world *w) {
    float tensor[1] = {0.0f};
    if (w->rank == 0) tensor[0] += 1.0f;
    zc_req req;
    ex_run(w, "zc_broadcast",
           zc_broadcast(w->comm, tensor, tensor, 1, ZC_FLOAT32, 0, &req), &req);
    ex_text t = {.len = 0};
    ex_rank_line(w, &t, "has data", tensor[0]);
    ex_print_in_rank_order(w, &t);
}

/* tensor = [rank + 1], all_reduce SUM in place: 1+2+3+4 = 10 on every rank. */
static void run_all_reduce(ex_world *w) {
    float tensor[1] = {(float)(w->rank + 1)};
    ex_text t = {.len = 0};
    ex_rank_line(w, &t, "initial tensor", tensor[0]);
    zc_req req;
    ex_run(w, "zc_allreduce",
           zc_allreduce(w->comm, tensor, tensor, 1, ZC_FLOAT32, ZC_SUM, &req), &req);
    ex_rank_line(w, &t, "final tensor", tensor[0]);
    ex_print_in_rank_order(w, &t);
}

/* Rank 0 scatters [1.0, ..., size]: rank i receives i + 1. The send list is read at the root
 * only; the others pass NULL (the article's scatter_list=None). */
static void run_scatter(ex_world *w) {
    float my_tensor[1] = {0.0f};
    float scatter_list[EX_MAX_RANKS];
    for (uint32_t i = 0; i < w->size; i++) scatter_list[i] = (float)i + 1.0f;
    ex_text t = {.len = 0};
    if (w->rank == 0) {
        ex_printf(&t, "Rank 0 scatter list: ");
        ex_pyfloat_list(&t, scatter_list, w->size);
        ex_printf(&t, "\n");
    }
    zc_req req;
    ex_run(w, "zc_scatter",
           zc_scatter(w->comm, w->rank == 0 ? scatter_list : NULL, my_tensor, 1, ZC_FLOAT32, 0,
                      &req), &req);
    ex_rank_line(w, &t, "received tensor", my_tensor[0]);
    ex_print_in_rank_order(w, &t);
}

/* Every rank sends [rank + 1.0] to rank 0, which receives them in rank order; the receive
 * list exists at the root only (gather_list=None elsewhere). */
static void run_gather(ex_world *w) {
    float my_tensor[1] = {(float)w->rank + 1.0f};
    float gather_list[EX_MAX_RANKS];
    for (uint32_t i = 0; i < w->size; i++) gather_list[i] = 0.0f;
    zc_req req;
    ex_run(w, "zc_gather",
           zc_gather(w->comm, my_tensor, w->rank == 0 ? gather_list : NULL, 1, ZC_FLOAT32, 0,
                     &req), &req);
    ex_text t = {.len = 0};
    if (w->rank == 0) {
        ex_printf(&t, "Rank 0 gathered list: ");
        ex_pyfloat_list(&t, gather_list, w->size);
        ex_printf(&t, "\n");
    } else {
        ex_rank_line(w, &t, "sent tensor", my_tensor[0]);
    }
    ex_print_in_rank_order(w, &t);
}

/* tensor = ones(1) * rank; all_reduce(async_op=True) returns at once, wait() finishes it:
 * 0+1+2+3 = 6 on every rank. zcoll has no thread of its own: an operation in flight moves when
 * this rank calls zc_progress, zc_test or zc_wait, so work overlapped with it (the article's
 * compute_something_else()) should call zc_progress now and then, as done once here. */
static void run_async_all_reduce(ex_world *w) {
    float tensor[1] = {1.0f * (float)w->rank};
    zc_req req;
    ex_check(w, "zc_allreduce",
             zc_allreduce(w->comm, tensor, tensor, 1, ZC_FLOAT32, ZC_SUM, &req));
    ex_check(w, "zc_progress", zc_progress(w->comm));   /* result = compute_something_else() */
    ex_check(w, "zc_wait", zc_wait(w->comm, &req));     /* work_handle.wait() */
    ex_text t = {.len = 0};
    ex_rank_line(w, &t, "async all_reduce result", tensor[0]);
    ex_print_in_rank_order(w, &t);
}

int main(void) {
    ex_world w;
    ex_init(&w);
    run_broadcast(&w);
    run_all_reduce(&w);
    run_scatter(&w);
    run_gather(&w);
    run_async_all_reduce(&w);
    ex_fini(&w);
    return 0;
}
