/* mem.c: the registration table (comm->mems, cfg->max_mems entries), host and CUDA entries
 * alike: its one free-entry search, its one fill, and its one range lookup. comm.c registers
 * host memory and gpu_mem.c device memory through these; sched.c (placement) and the device
 * families find the registration of a call's buffer here.
 * Must not: block, allocate. */
#include "engine.h"

zc_status zc__mem_take(zc_comm *c, uint32_t *index) {
    for (uint32_t i = 0; i < c->cfg.max_mems; i++)
        if (!c->mems[i].addr) {
            c->mems[i].mr = (zc_wire_mr){0};
            *index = i;
            return ZC_OK;
        }
    return zc__error(c, ZC_LIMIT, "zc_mem_register: all %u registration slots are taken "
                     "(cfg->max_mems)", c->cfg.max_mems);
}

zc_mem *zc__mem_fill(zc__mem_entry *e, void *addr, size_t bytes, uint32_t kind) {
    e->addr = addr;
    e->bytes = bytes;
    e->kind = kind;
    e->gen++;
    return (zc_mem *)(void *)e;
}

int32_t zc__mem_find(const zc_comm *c, const void *p, uint64_t bytes, uint32_t kind,
                     bool *partial) {
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    for (uint32_t i = 0; i < c->cfg.max_mems; i++) {
        const zc__mem_entry *e = &c->mems[i];
        uintptr_t elo = (uintptr_t)e->addr, ehi = elo + e->bytes;
        if (!e->addr || e->kind != kind || e->gstate == ZC_GMEM_CLOSING || hi <= elo ||
            lo >= ehi)
            continue;
        if (lo >= elo && hi <= ehi) return (int32_t)i;
        if (partial) *partial = true;
    }
    return -1;
}
