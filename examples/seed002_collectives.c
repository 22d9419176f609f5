/* seed002_collectives.c: the tutorial "PyTorch distributed collective communication" (seed 002)
 * in C on zcoll: hello world, then reduce, all_reduce, scatter, gather, all_gather and broadcast
 * of one-element float32 tensors over every rank, printed the way the article prints them
 * ("data = 4.0", "data = [tensor([0.]), ...]", "data = tensor([0.])").
 *
 * Run: build/zcrun -n 4 build/examples/seed002_collectives
 * zcrun puts "[rank] " before every line, which is the article's f"[{rank}] ..." prefix, so the
 * program prints the rest of the line only. Each section prints in rank order (ranks take
 * turns, each waiting until zcrun has read its lines), so the output is the same on every run;
 * the article's order is whatever its processes happened to do. The article builds a group of
 * all ranks per call (dist.new_group); here the one world communicator plays that part. */

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
/* torch.empty(1) holds whatever was in memory; we use -1 so a result visibly replaces it. */
#define EX_EMPTY (-1.0f)

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

/* torch's str(tensor) of a 1-D float32 tensor: one format for all elements, right-aligned to
 * the widest: "4." when every finite value is whole, "0.5000" otherwise, "1.0000e+08" when the
 * nonzero magnitudes span more than 1000x, reach 1e8 or (not whole) fall under 1e-4
 * (torch/_tensor_str.py, _Formatter, precision 4). */
static void ex_format_f32(char *out, size_t bytes, float v, int whole, int sci) {
    if (sci) snprintf(out, bytes, "%.4e", (double)v);
    else if (!whole) snprintf(out, bytes, "%.4f", (double)v);
    else snprintf(out, bytes, isfinite(v) ? "%.0f." : "%.0f", (double)v);
}

static void ex_tensor_f32(ex_text *t, const float *v, size_t n) {
    int whole = 1;
    double lo = INFINITY, hi = 0.0;
    for (size_t i = 0; i < n; i++) {
        double a = fabs((double)v[i]);
        if (!isfinite(a) || a == 0.0) continue;
        whole = whole && a == ceil(a);
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    int sci = hi > 0.0 && (hi / lo > 1000.0 || hi > 1.0e8 || (!whole && lo < 1.0e-4));
    char s[48];
    int width = 1;
    for (size_t i = 0; i < n; i++) {
        ex_format_f32(s, sizeof s, v[i], whole, sci);
        width = (int)strlen(s) > width ? (int)strlen(s) : width;
    }
    ex_printf(t, "tensor([");
    for (size_t i = 0; i < n; i++) {
        ex_format_f32(s, sizeof s, v[i], whole, sci);
        ex_printf(t, "%s%*s", i > 0 ? ", " : "", width, s);
    }
    ex_printf(t, "])");
}

/* A Python list of `chunks` tensors of `len` elements each: "[tensor([0.]), tensor([1.])]". */
static void ex_tensor_list_f32(ex_text *t, const float *v, size_t chunks, size_t len) {
    ex_printf(t, "[");
    for (size_t c = 0; c < chunks; c++) {
        ex_printf(t, "%s", c > 0 ? ", " : "");
        ex_tensor_f32(t, v + c * len, len);
    }
    ex_printf(t, "]");
}

/* Rank 0 opens each section with its title. */
static void ex_title(const ex_world *w, ex_text *t, const char *title) {
    if (w->rank == 0) ex_printf(t, "## %s\n", title);
}

/* ---- the article's sections ------------------------------------------------------------- */

static void do_hello_world(ex_world *w) {
    ex_text t = {.len = 0};
    ex_title(w, &t, "Hello world");
    ex_printf(&t, "say hi!\n");
    ex_print_in_rank_order(w, &t);
}

/* Every rank holds 1; the root (0) gets the sum 4. zcoll writes the result at the root only,
 * so the other ranks still hold their own 1.0. (The article shows 3.0, 2.0 and 1.0 there:
 * gloo's reduce leaves the partial sums of its chain in the non-root tensors, which is a side
 * effect of that backend, not part of reduce's meaning.) */
static void do_reduce(ex_world *w) {
    float tensor[1] = {1.0f};
    zc_req req;
    ex_run(w, "zc_reduce",
           zc_reduce(w->comm, tensor, tensor, 1, ZC_FLOAT32, ZC_SUM, 0, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Reduce");
    ex_printf(&t, "data = ");
    ex_pyfloat(&t, (double)tensor[0]);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

static void do_all_reduce(ex_world *w) {
    float tensor[1] = {1.0f};
    zc_req req;
    ex_run(w, "zc_allreduce",
           zc_allreduce(w->comm, tensor, tensor, 1, ZC_FLOAT32, ZC_SUM, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "All Reduce");
    ex_printf(&t, "data = ");
    ex_pyfloat(&t, (double)tensor[0]);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

/* Rank 0 holds [1, 2, ..., size]; rank i receives element i. The send buffer is read at the
 * root only, so the other ranks pass NULL (the article's scatter_list=[]). */
static void do_scatter(ex_world *w) {
    float tensor[1] = {EX_EMPTY};
    float tensor_list[EX_MAX_RANKS];
    for (uint32_t i = 0; i < w->size; i++) tensor_list[i] = (float)(i + 1);
    zc_req req;
    ex_run(w, "zc_scatter",
           zc_scatter(w->comm, w->rank == 0 ? tensor_list : NULL, tensor, 1, ZC_FLOAT32, 0,
                      &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Scatter");
    ex_printf(&t, "data = ");
    ex_pyfloat(&t, (double)tensor[0]);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

/* Every rank sends [rank]; rank 0 collects them in rank order and is the only one to print. */
static void do_gather(ex_world *w) {
    float tensor[1] = {(float)w->rank};
    float tensor_list[EX_MAX_RANKS];
    for (uint32_t i = 0; i < w->size; i++) tensor_list[i] = EX_EMPTY;
    zc_req req;
    ex_run(w, "zc_gather",
           zc_gather(w->comm, tensor, w->rank == 0 ? tensor_list : NULL, 1, ZC_FLOAT32, 0,
                     &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Gather");
    if (w->rank == 0) {
        ex_printf(&t, "data = ");
        ex_tensor_list_f32(&t, tensor_list, w->size, 1);
        ex_printf(&t, "\n");
    }
    ex_print_in_rank_order(w, &t);
}

static void do_all_gather(ex_world *w) {
    float tensor[1] = {(float)w->rank};
    float tensor_list[EX_MAX_RANKS];
    for (uint32_t i = 0; i < w->size; i++) tensor_list[i] = EX_EMPTY;
    zc_req req;
    ex_run(w, "zc_allgather",
           zc_allgather(w->comm, tensor, tensor_list, 1, ZC_FLOAT32, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "All Gather");
    ex_printf(&t, "data = ");
    ex_tensor_list_f32(&t, tensor_list, w->size, 1);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

/* Rank 0 holds [0]; the others start "empty" and end with rank 0's tensor. In place: the
 * root's tensor is the source, every rank's tensor the destination. */
static void do_broadcast(ex_world *w) {
    float tensor[1] = {w->rank == 0 ? (float)w->rank : EX_EMPTY};
    zc_req req;
    ex_run(w, "zc_broadcast",
           zc_broadcast(w->comm, tensor, tensor, 1, ZC_FLOAT32, 0, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Broadcast");
    ex_printf(&t, "data = ");
    ex_tensor_f32(&t, tensor, 1);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

int main(void) {
    ex_world w;
    ex_init(&w);
    do_hello_world(&w);
    do_reduce(&w);
    do_all_reduce(&w);
    do_scatter(&w);
    do_gather(&w);
    do_all_gather(&w);
    do_broadcast(&w);
    ex_fini(&w);
    return 0;
}
