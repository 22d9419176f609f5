/* seed003_patterns.c: the guide "Distributed Communication Patterns" (seed 003) in C on zcoll:
 * each pattern it pictures (send/recv, broadcast, all-reduce, reduce, gather, all-gather,
 * scatter, reduce-scatter) with the page's values, then its four practical use cases:
 * data-parallel gradient averaging, parameter initialization by broadcast, distributed
 * validation loss and model-parallel activations sent from rank 0 to rank 1.
 *
 * Run: build/zcrun -n 3 build/examples/seed003_patterns
 * Three ranks, as on the page ("local_value # 1, 2, or 3", "[1,2,3] -> sum = 6",
 * "Destination sees [1, 2, 3]"); any size from 2 up works, with the sums that size gives.
 * The page shows code, not output, so each rank prints its tensor before -> after in torch's
 * notation ("data = tensor([1.]) -> tensor([6.])"). zcrun puts "[rank] " before every line;
 * each section prints in rank order (ranks take turns, each waiting until zcrun has read its
 * lines), so the output is the same on every run. */

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

enum {
    EX_MAX_RANKS = 64,   /* sizes the per-rank lists below; checked at start */
    WEIGHT_LEN = 3,      /* the toy model's parameters: a weight of 3 and a bias of 1 */
    BIAS_LEN = 1,
    HIDDEN_SIZE = 4,     /* activations between the two model-parallel stages */
};
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

/* torch's str() of a 1-D int64 tensor (the dtype of torch.tensor([42])): elements
 * right-aligned to the widest; int64 is torch's default integer type, so no dtype= suffix. */
static void ex_tensor_i64(ex_text *t, const int64_t *v, size_t n) {
    int width = 1;
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(NULL, 0, "%lld", (long long)v[i]);
        width = len > width ? len : width;
    }
    ex_printf(t, "tensor([");
    for (size_t i = 0; i < n; i++) {
        ex_printf(t, "%s%*lld", i > 0 ? ", " : "", width, (long long)v[i]);
    }
    ex_printf(t, "])");
}

/* "label = tensor(before) -> tensor(after)\n" */
static void ex_before_after(ex_text *t, const char *label, const float *before,
                            const float *after, size_t n) {
    ex_printf(t, "%s = ", label);
    ex_tensor_f32(t, before, n);
    ex_printf(t, " -> ");
    ex_tensor_f32(t, after, n);
    ex_printf(t, "\n");
}

/* Rank 0 opens each section with the page's heading. */
static void ex_title(const ex_world *w, ex_text *t, const char *title) {
    if (w->rank == 0) ex_printf(t, "## %s\n", title);
}

/* ---- the patterns ----------------------------------------------------------------------- */

/* Rank 0 sends torch.tensor([42]) to rank 1. The page's receiver uses torch.empty(1), a
 * float32 tensor; zcoll requires the receive's type and count to equal the send's (else
 * ZC_MISMATCH), so both sides use int64 here. Ranks 2.. take no part. */
static void send_recv(ex_world *w) {
    int64_t data[1] = {w->rank == 0 ? 42 : -1};
    zc_req req;
    if (w->rank == 0) {
        ex_run(w, "zc_send", zc_send(w->comm, data, 1, ZC_INT64, 1, &req), &req);
    } else if (w->rank == 1) {
        ex_run(w, "zc_recv", zc_recv(w->comm, data, 1, ZC_INT64, 0, &req), &req);
    }
    ex_text t = {.len = 0};
    ex_title(w, &t, "Send / Recv");
    if (w->rank <= 1) {
        ex_printf(&t, "%s data = ", w->rank == 0 ? "sent" : "received");
        ex_tensor_i64(&t, data, 1);
        ex_printf(&t, "\n");
    }
    ex_print_in_rank_order(w, &t);
}

/* data = torch.tensor([42]) if rank == 0 else torch.empty(1) (int64 everywhere, as above). */
static void broadcast(ex_world *w) {
    int64_t data[1] = {w->rank == 0 ? 42 : -1};
    zc_req req;
    ex_run(w, "zc_broadcast", zc_broadcast(w->comm, data, data, 1, ZC_INT64, 0, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Broadcast");
    ex_printf(&t, "data = ");
    ex_tensor_i64(&t, data, 1);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

/* data = [local_value] (1, 2 or 3), all_reduce SUM: every rank sees 6. */
static void all_reduce(ex_world *w) {
    float before[1] = {(float)(w->rank + 1)};
    float data[1] = {before[0]};
    zc_req req;
    ex_run(w, "zc_allreduce",
           zc_allreduce(w->comm, data, data, 1, ZC_FLOAT32, ZC_SUM, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "All-Reduce");
    ex_before_after(&t, "data", before, data, 1);
    ex_print_in_rank_order(w, &t);
}

/* The same contributions, reduced to rank 0 only. zcoll writes the result at the root only:
 * the other ranks keep their own value (torch leaves backend-specific partial results there). */
static void reduce(ex_world *w) {
    float before[1] = {(float)(w->rank + 1)};
    float data[1] = {before[0]};
    zc_req req;
    ex_run(w, "zc_reduce",
           zc_reduce(w->comm, data, data, 1, ZC_FLOAT32, ZC_SUM, 0, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Reduce");
    ex_before_after(&t, "data", before, data, 1);
    ex_print_in_rank_order(w, &t);
}

/* Rank r contributes r + 1: the destination (rank 0) sees [1, 2, 3]. */
static void gather(ex_world *w) {
    float data[1] = {(float)(w->rank + 1)};
    float gathered[EX_MAX_RANKS];
    zc_req req;
    ex_run(w, "zc_gather",
           zc_gather(w->comm, data, w->rank == 0 ? gathered : NULL, 1, ZC_FLOAT32, 0, &req),
           &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Gather");
    if (w->rank == 0) {
        ex_printf(&t, "gathered = ");
        ex_tensor_f32(&t, gathered, w->size);
        ex_printf(&t, "\n");
    }
    ex_print_in_rank_order(w, &t);
}

/* The same, but every rank sees [1, 2, 3]. */
static void all_gather(ex_world *w) {
    float data[1] = {(float)(w->rank + 1)};
    float gathered[EX_MAX_RANKS];
    zc_req req;
    ex_run(w, "zc_allgather",
           zc_allgather(w->comm, data, gathered, 1, ZC_FLOAT32, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "All-Gather");
    ex_printf(&t, "gathered = ");
    ex_tensor_f32(&t, gathered, w->size);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

/* Rank 0 holds [0, 1, 2]: each rank gets its own index back. */
static void scatter(ex_world *w) {
    float pieces[EX_MAX_RANKS];
    for (uint32_t i = 0; i < w->size; i++) pieces[i] = (float)i;
    float before[1] = {EX_EMPTY};
    float data[1] = {EX_EMPTY};
    zc_req req;
    ex_run(w, "zc_scatter",
           zc_scatter(w->comm, w->rank == 0 ? pieces : NULL, data, 1, ZC_FLOAT32, 0, &req),
           &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Scatter");
    ex_before_after(&t, "data", before, data, 1);
    ex_print_in_rank_order(w, &t);
}

/* Rank r holds (r + 1) * [1, 2, 3]; the sum is [6, 12, 18] and rank i sees part i of it. */
static void reduce_scatter(ex_world *w) {
    float data[EX_MAX_RANKS];
    for (uint32_t i = 0; i < w->size; i++) data[i] = (float)((w->rank + 1) * (i + 1));
    float part[1] = {EX_EMPTY};
    zc_req req;
    ex_run(w, "zc_reduce_scatter",
           zc_reduce_scatter(w->comm, data, part, 1, ZC_FLOAT32, ZC_SUM, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Reduce-Scatter");
    ex_printf(&t, "data = ");
    ex_tensor_f32(&t, data, w->size);
    ex_printf(&t, " -> part = ");
    ex_tensor_f32(&t, part, 1);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

/* ---- the practical use cases ------------------------------------------------------------ */

/* Sums one parameter's gradient over all ranks, then divides by the world size (the page's
 * two steps; op ZC_AVG does both in one call). */
static void average_gradient(ex_world *w, float *grad, size_t n) {
    zc_req req;
    ex_run(w, "zc_allreduce",
           zc_allreduce(w->comm, grad, grad, n, ZC_FLOAT32, ZC_SUM, &req), &req);
    for (size_t i = 0; i < n; i++) grad[i] /= (float)w->size;
}

/* Each rank's backward pass gave weight grad (rank+1) * [0.5, -0.25, 1.0] and bias grad
 * [rank]; after averaging every rank holds the same gradients: on 3 ranks
 * [1.0, -0.5, 2.0] and [1.0]. */
static void data_parallel(ex_world *w) {
    float scale = (float)(w->rank + 1);
    float weight_grad[WEIGHT_LEN] = {0.5f * scale, -0.25f * scale, 1.0f * scale};
    float bias_grad[BIAS_LEN] = {(float)w->rank};
    float weight_before[WEIGHT_LEN], bias_before[BIAS_LEN];
    memcpy(weight_before, weight_grad, sizeof weight_grad);
    memcpy(bias_before, bias_grad, sizeof bias_grad);
    average_gradient(w, weight_grad, WEIGHT_LEN);
    average_gradient(w, bias_grad, BIAS_LEN);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Data Parallel Training");
    ex_before_after(&t, "weight.grad", weight_before, weight_grad, WEIGHT_LEN);
    ex_before_after(&t, "bias.grad", bias_before, bias_grad, BIAS_LEN);
    ex_print_in_rank_order(w, &t);
}

/* Every rank starts from its own random weights (here: rank-dependent values); broadcasting
 * each parameter from rank 0 makes them all start from rank 0's. */
static void parameter_init(ex_world *w) {
    float weight[WEIGHT_LEN] = {0.5f, -1.25f, 2.0f};
    float bias[BIAS_LEN] = {0.125f};
    if (w->rank != 0) {
        for (int i = 0; i < WEIGHT_LEN; i++) weight[i] = (float)(w->rank * 10 + (uint32_t)i);
        bias[0] = (float)w->rank;
    }
    float weight_before[WEIGHT_LEN], bias_before[BIAS_LEN];
    memcpy(weight_before, weight, sizeof weight);
    memcpy(bias_before, bias, sizeof bias);
    zc_req req;
    ex_run(w, "zc_broadcast",
           zc_broadcast(w->comm, weight, weight, WEIGHT_LEN, ZC_FLOAT32, 0, &req), &req);
    ex_run(w, "zc_broadcast",
           zc_broadcast(w->comm, bias, bias, BIAS_LEN, ZC_FLOAT32, 0, &req), &req);
    ex_text t = {.len = 0};
    ex_title(w, &t, "Parameter Initialization");
    ex_before_after(&t, "weight", weight_before, weight, WEIGHT_LEN);
    ex_before_after(&t, "bias", bias_before, bias, BIAS_LEN);
    ex_print_in_rank_order(w, &t);
}

/* Rank r's validation loss is 2.0 + 0.25 * r; the summed loss over the world size is the
 * average every rank reports (2.25 on 3 ranks). */
static void distributed_validation(ex_world *w) {
    float validation_loss = 2.0f + 0.25f * (float)w->rank;
    float local_loss[1] = {validation_loss};
    zc_req req;
    ex_run(w, "zc_allreduce",
           zc_allreduce(w->comm, local_loss, local_loss, 1, ZC_FLOAT32, ZC_SUM, &req), &req);
    double avg_loss = (double)local_loss[0] / (double)w->size;   /* .item() is a double */
    ex_text t = {.len = 0};
    ex_title(w, &t, "Distributed Validation");
    ex_printf(&t, "validation_loss = ");
    ex_pyfloat(&t, (double)validation_loss);
    ex_printf(&t, ", avg_loss = ");
    ex_pyfloat(&t, avg_loss);
    ex_printf(&t, "\n");
    ex_print_in_rank_order(w, &t);
}

/* Rank 0 runs model_part1 (hidden = 2 * input + 1) and sends the activations; rank 1 receives
 * them and runs model_part2 (output = relu(hidden - 6)). */
static void model_parallel(ex_world *w) {
    float input[HIDDEN_SIZE] = {1.0f, 2.0f, 3.0f, 4.0f};
    float hidden[HIDDEN_SIZE], output[HIDDEN_SIZE];
    ex_text t = {.len = 0};
    ex_title(w, &t, "Model Parallel Training");
    zc_req req;
    if (w->rank == 0) {
        for (int i = 0; i < HIDDEN_SIZE; i++) hidden[i] = 2.0f * input[i] + 1.0f;
        ex_run(w, "zc_send", zc_send(w->comm, hidden, HIDDEN_SIZE, ZC_FLOAT32, 1, &req), &req);
        ex_printf(&t, "hidden = ");
        ex_tensor_f32(&t, hidden, HIDDEN_SIZE);
        ex_printf(&t, "\n");
    } else if (w->rank == 1) {
        ex_run(w, "zc_recv", zc_recv(w->comm, hidden, HIDDEN_SIZE, ZC_FLOAT32, 0, &req), &req);
        for (int i = 0; i < HIDDEN_SIZE; i++) output[i] = fmaxf(hidden[i] - 6.0f, 0.0f);
        ex_printf(&t, "output = ");
        ex_tensor_f32(&t, output, HIDDEN_SIZE);
        ex_printf(&t, "\n");
    }
    ex_print_in_rank_order(w, &t);
}

int main(void) {
    ex_world w;
    ex_init(&w);
    if (w.size < 2) {
        fprintf(stderr, "send/recv needs at least 2 ranks: zcrun -n 3\n");
        return 1;
    }
    send_recv(&w);
    broadcast(&w);
    all_reduce(&w);
    reduce(&w);
    gather(&w);
    all_gather(&w);
    scatter(&w);
    reduce_scatter(&w);
    data_parallel(&w);
    parameter_init(&w);
    distributed_validation(&w);
    model_parallel(&w);
    ex_fini(&w);
    return 0;
}
