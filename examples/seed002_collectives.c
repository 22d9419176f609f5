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

/* POSIX for tutorial.h's output turn-taking (fstat, ioctl FIONREAD, nanosleep), so before any
 * #include; the zcoll calls need only C11. */
#define _POSIX_C_SOURCE 200809L

#include "tutorial.h"

/* torch.empty(1) holds whatever was in memory; we use -1 so a result visibly replaces it. */
#define EX_EMPTY (-1.0f)

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
