/* tutorial.h: the harness the seed tutorials' programs (examples/seed*.c) share, so each of
 * them holds only its tutorial's logic. It holds:
 *   - init from the launcher environment: ex_init reads rank, size, rendezvous and secret from
 *     zcrun's (or torchrun's) environment and joins the job; ex_fini leaves it;
 *   - checked calls: ex_check, and ex_run for a posted request, exit with the call's name,
 *     status and error text on anything but ZC_OK;
 *   - ordered printing: each rank collects a section's lines in an ex_text (ex_printf), then
 *     ex_print_in_rank_order prints them rank by rank, waiting until zcrun has read each
 *     rank's pipe, so the output is the same on every run;
 *   - torch-style formatting: Python's str(float) and lists of floats, torch's str() of 1-D
 *     float32, int32 and int64 tensors and Python lists of them, and the section titles.
 * Every function is static inline, so a program that leaves some unused gets no warning.
 *
 * The ordered printing needs POSIX (fstat, ioctl FIONREAD, nanosleep): a program defines
 * _POSIX_C_SOURCE 200809L before its first #include, then includes this header. */

#ifndef ZCOLL_EXAMPLES_TUTORIAL_H
#define ZCOLL_EXAMPLES_TUTORIAL_H

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#error "define _POSIX_C_SOURCE 200809L before any #include, then include tutorial.h"
#endif

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

enum { EX_MAX_RANKS = 64 };   /* sizes the programs' per-rank buffers; ex_init checks it */

/* ---- init from the launcher environment, checked calls ------------------------------------ */

typedef struct ex_world {
    zc_comm *comm;   /* NULL until zc_comm_init succeeded */
    void *arena;     /* zc_comm_arena_bytes() of caller memory; ours again after fini */
    uint32_t rank;
    uint32_t size;
} ex_world;

static inline void ex_die(const ex_world *w, const char *call, zc_status s) {
    fprintf(stderr, "%s failed: %s: %s\n", call, zc_status_name(s),
            w->comm != NULL ? zc_comm_error_text(w->comm) : zc_init_error_text());
    exit(1);
}

static inline void ex_check(const ex_world *w, const char *call, zc_status s) {
    if (s != ZC_OK) ex_die(w, call, s);
}

/* Checks the status of the call that posted req, then waits for req. */
static inline void ex_run(ex_world *w, const char *call, zc_status posted, zc_req *req) {
    ex_check(w, call, posted);
    ex_check(w, call, zc_wait(w->comm, req));
}

static inline void ex_barrier(ex_world *w) {
    zc_req req;
    ex_run(w, "zc_barrier", zc_barrier(w->comm, &req), &req);
}

/* Reads rank, size, rendezvous and secret from zcrun's environment and joins the job. */
static inline void ex_init(ex_world *w) {
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

static inline void ex_fini(ex_world *w) {
    zc_status s = zc_comm_fini(w->comm);
    if (s != ZC_OK) {
        fprintf(stderr, "zc_comm_fini failed: %s\n", zc_status_name(s));
        exit(1);
    }
    free(w->arena);
    w->comm = NULL;
    w->arena = NULL;
}

/* ---- ordered printing ---------------------------------------------------------------------- */

/* The lines one rank prints in one section; printed together, in rank order. */
typedef struct ex_text {
    char buf[4096];
    size_t len;   /* bytes used, < sizeof buf; longer text is cut */
} ex_text;

__attribute__((format(printf, 2, 3)))
static inline void ex_printf(ex_text *t, const char *fmt, ...) {
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
static inline void ex_wait_stdout_read(void) {
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
static inline void ex_print_in_rank_order(ex_world *w, const ex_text *t) {
    for (uint32_t r = 0; r < w->size; r++) {
        if (r == w->rank && t->len > 0) {
            fputs(t->buf, stdout);
            fflush(stdout);
            ex_wait_stdout_read();
        }
        ex_barrier(w);
    }
}

/* Rank 0 opens each section with its title: "## title". */
static inline void ex_title(const ex_world *w, ex_text *t, const char *title) {
    if (w->rank == 0) ex_printf(t, "## %s\n", title);
}

/* ---- torch-style formatting ---------------------------------------------------------------- */

/* Python's str(float): the shortest digits that read back as x, in fixed notation for
 * exponents -4..15 (always with a ".0" or decimals), else in scientific notation. */
static inline void ex_pyfloat(ex_text *t, double x) {
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
static inline void ex_format_f32(char *out, size_t bytes, float v, int whole, int sci) {
    if (sci) snprintf(out, bytes, "%.4e", (double)v);
    else if (!whole) snprintf(out, bytes, "%.4f", (double)v);
    else snprintf(out, bytes, isfinite(v) ? "%.0f." : "%.0f", (double)v);
}

static inline void ex_tensor_f32(ex_text *t, const float *v, size_t n) {
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

/* Element i of an int32 (elem_bytes 4) or int64 (elem_bytes 8) array. */
static inline long long ex_int_at(const void *v, size_t elem_bytes, size_t i) {
    if (elem_bytes == sizeof(int32_t)) return (long long)((const int32_t *)v)[i];
    return (long long)((const int64_t *)v)[i];
}

/* torch's str() of a 1-D integer tensor: elements right-aligned to the widest, then
 * `dtype_suffix`; torch names every integer dtype but its default int64. */
static inline void ex_tensor_int(ex_text *t, const void *v, size_t elem_bytes, size_t n,
                                 const char *dtype_suffix) {
    int width = 1;
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(NULL, 0, "%lld", ex_int_at(v, elem_bytes, i));
        width = len > width ? len : width;
    }
    ex_printf(t, "tensor([");
    for (size_t i = 0; i < n; i++) {
        ex_printf(t, "%s%*lld", i > 0 ? ", " : "", width, ex_int_at(v, elem_bytes, i));
    }
    ex_printf(t, "]%s)", dtype_suffix);
}

/* An int32 tensor: "tensor([0, 1, 2], dtype=torch.int32)". */
static inline void ex_tensor_i32(ex_text *t, const int32_t *v, size_t n) {
    ex_tensor_int(t, v, sizeof *v, n, ", dtype=torch.int32");
}

/* An int64 tensor, the dtype of torch.tensor([42]): "tensor([42])". */
static inline void ex_tensor_i64(ex_text *t, const int64_t *v, size_t n) {
    ex_tensor_int(t, v, sizeof *v, n, "");
}

/* Prints item i of the array at v (items of `len` elements each) for ex_list. */
typedef void ex_item_fn(ex_text *t, const void *v, size_t i, size_t len);

static inline void ex_item_f32_tensor(ex_text *t, const void *v, size_t i, size_t len) {
    ex_tensor_f32(t, (const float *)v + i * len, len);
}

static inline void ex_item_i32_tensor(ex_text *t, const void *v, size_t i, size_t len) {
    ex_tensor_i32(t, (const int32_t *)v + i * len, len);
}

static inline void ex_item_pyfloat(ex_text *t, const void *v, size_t i, size_t len) {
    (void)len;
    ex_pyfloat(t, (double)((const float *)v)[i]);
}

/* A Python list of `count` items: "[a, b, c]"; item i is item(t, v, i, len). */
static inline void ex_list(ex_text *t, ex_item_fn *item, const void *v, size_t count,
                           size_t len) {
    ex_printf(t, "[");
    for (size_t i = 0; i < count; i++) {
        ex_printf(t, "%s", i > 0 ? ", " : "");
        item(t, v, i, len);
    }
    ex_printf(t, "]");
}

/* A Python list of `chunks` float32 tensors of `len` elements each, as list(x.chunk(size))
 * prints: "[tensor([0.]), tensor([1.])]". */
static inline void ex_tensor_list_f32(ex_text *t, const float *v, size_t chunks, size_t len) {
    ex_list(t, ex_item_f32_tensor, v, chunks, len);
}

/* The same for int32 tensors: "[tensor([0, 1], dtype=torch.int32), ...]". */
static inline void ex_tensor_list_i32(ex_text *t, const int32_t *v, size_t chunks, size_t len) {
    ex_list(t, ex_item_i32_tensor, v, chunks, len);
}

/* A Python list of floats, as print() shows [t.item() for t in tensors]: "[1.0, 2.0]". */
static inline void ex_pyfloat_list(ex_text *t, const float *v, size_t n) {
    ex_list(t, ex_item_pyfloat, v, n, 1);
}

#endif /* ZCOLL_EXAMPLES_TUTORIAL_H */
