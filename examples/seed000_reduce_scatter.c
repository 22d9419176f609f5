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

/* POSIX for tutorial.h's output turn-taking (fstat, ioctl FIONREAD, nanosleep), so before any
 * #include; the zcoll calls need only C11. */
#define _POSIX_C_SOURCE 200809L

#include "tutorial.h"

enum {
    TENSOR_LEN = 3,       /* the thread's tensor_len */
    SCATTER_SIZE = 5,     /* the thread's scatter_size: elements each rank receives */
};
/* th.empty_like() holds whatever was in memory; we use -1 so a result visibly replaces it. */
#define EX_EMPTY (-1)

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
