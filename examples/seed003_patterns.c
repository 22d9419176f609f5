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

/* POSIX for tutorial.h's output turn-taking (fstat, ioctl FIONREAD, nanosleep), so before any
 * #include; the zcoll calls need only C11. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <string.h>

#include "tutorial.h"

enum {
    WEIGHT_LEN = 3,      /* the toy model's parameters: a weight of 3 and a bias of 1 */
    BIAS_LEN = 1,
    HIDDEN_SIZE = 4,     /* activations between the two model-parallel stages */
};
/* torch.empty(1) holds whatever was in memory; we use -1 so a result visibly replaces it. */
#define EX_EMPTY (-1.0f)

/* "label = tensor(before) -> tensor(after)\n" */
static void ex_before_after(ex_text *t, const char *label, const float *before,
                            const float *after, size_t n) {
    ex_printf(t, "%s = ", label);
    ex_tensor_f32(t, before, n);
    ex_printf(t, " -> ");
    ex_tensor_f32(t, after, n);
    ex_printf(t, "\n");
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
