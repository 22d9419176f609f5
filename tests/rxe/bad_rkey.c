/* bad_rkey.c: an LD_PRELOAD shim for the test-rxe fault test "a wrong rkey is reported, not
 * hung". tests/rxe/run.sh builds it as build/rxe/bad_rkey.so (the guest's /zc/lib/bad_rkey.so);
 * it is not part of the library or of build/zctest.
 *
 * In the process whose ZC_RANK equals ZC_RXE_BAD_RKEY_RANK, every memory region registered
 * with remote access (ibv_reg_mr, ibv_reg_mr_iova, ibv_reg_mr_iova2, ibv_reg_dmabuf_mr) gets
 * its rkey field flipped (rkey ^ 1) before the caller sees it. The kernel keeps the real key,
 * so whatever the transport sends its peers is a wrong rkey: their first RDMA access to this
 * rank completes with IBV_WC_REM_ACCESS_ERR and both queue pairs go to the error state, as
 * with a stale or corrupted key on a real fabric. lkeys, and so local work, are untouched.
 * Each flip is logged on stderr ("bad_rkey: rank R: ..."), so a test can tell that the fault
 * was injected. rdma_rxe's rkeys are (index << 8 | 8-bit key): a flipped key bit never names
 * another region. Nothing else in the process changes. ZC_RXE_BAD_RKEY_SKIP=N leaves the first
 * N such regions alone (1: the wire's window, so that only memory registered after it, such as
 * device memory on the direct path, has a wrong key). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* verbs.h turns these two into inline dispatchers; the shim defines the exported symbols. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* libibverbs' own ibv_reg_mr may call ibv_reg_mr_iova2 through its PLT, that is through this
 * shim again: only the outermost call flips the key. */
static __thread int bad_rkey_depth;

static int bad_rkey_here(void) {
    const char *want = getenv("ZC_RXE_BAD_RKEY_RANK"), *rank = getenv("ZC_RANK");
    return want && rank && strcmp(want, rank) == 0;
}

static struct ibv_mr *bad_rkey_apply(struct ibv_mr *mr, unsigned int access, const char *fn) {
    unsigned int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC;
    static int seen;
    if (bad_rkey_depth != 0 || !mr || !(access & remote) || !bad_rkey_here()) return mr;
    const char *skip = getenv("ZC_RXE_BAD_RKEY_SKIP");
    if (seen++ < (skip ? atoi(skip) : 0)) return mr;
    uint32_t good = mr->rkey;
    mr->rkey = good ^ 1u;
    fprintf(stderr, "bad_rkey: rank %s: %s(%zu bytes) rkey 0x%08x handed out as 0x%08x\n",
            getenv("ZC_RANK"), fn, mr->length, good, mr->rkey);
    return mr;
}

static void *bad_rkey_next(const char *name, const char *version) {
    void *f = version ? dlvsym(RTLD_NEXT, name, version) : NULL;
    if (!f) f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "bad_rkey: no %s after this shim: %s\n", name, dlerror());
        abort();
    }
    return f;
}

/* The exported entry points that verbs.h's ibv_reg_mr macro and its relatives end in. */
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) {
    struct ibv_mr *(*next)(struct ibv_pd *, void *, size_t, int) =
        (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t, int))bad_rkey_next(
            "ibv_reg_mr", "IBVERBS_1.1");
    bad_rkey_depth++;
    struct ibv_mr *mr = next(pd, addr, length, access);
    bad_rkey_depth--;
    return bad_rkey_apply(mr, (unsigned int)access, "ibv_reg_mr");
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                               int access) {
    struct ibv_mr *(*next)(struct ibv_pd *, void *, size_t, uint64_t, int) =
        (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t, uint64_t, int))bad_rkey_next(
            "ibv_reg_mr_iova", NULL);
    bad_rkey_depth++;
    struct ibv_mr *mr = next(pd, addr, length, iova, access);
    bad_rkey_depth--;
    return bad_rkey_apply(mr, (unsigned int)access, "ibv_reg_mr_iova");
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                unsigned int access) {
    struct ibv_mr *(*next)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int) =
        (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int))
            bad_rkey_next("ibv_reg_mr_iova2", NULL);
    bad_rkey_depth++;
    struct ibv_mr *mr = next(pd, addr, length, iova, access);
    bad_rkey_depth--;
    return bad_rkey_apply(mr, access, "ibv_reg_mr_iova2");
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                 uint64_t iova, int fd, int access) {
    struct ibv_mr *(*next)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int) =
        (struct ibv_mr *(*)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int))
            bad_rkey_next("ibv_reg_dmabuf_mr", NULL);
    bad_rkey_depth++;
    struct ibv_mr *mr = next(pd, offset, length, iova, fd, access);
    bad_rkey_depth--;
    return bad_rkey_apply(mr, (unsigned int)access, "ibv_reg_dmabuf_mr");
}
