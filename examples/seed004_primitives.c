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

/* POSIX for tutorial.h's output turn-taking (fstat, ioctl FIONREAD, nanosleep), so before any
 * #include; the zcoll calls need only C11. */
#define _POSIX_C_SOURCE 200809L

#include "tutorial.h"

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
