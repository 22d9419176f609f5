/* probe.c: what this host's RDMA devices offer device-memory collectives, for
 * zc_device_report (provider/wire.h's zc__ib_nics): each device's name, link layer and active
 * ports, and whether it registers a given range of device memory through its dma-buf (the
 * GPUDirect RDMA path of ibv_reg_dmabuf_mr) and by its address (nvidia-peermem). Opens, tries
 * and closes everything within the call; never part of a communicator. */
#include <errno.h>
#include <infiniband/verbs.h>

#include "ib.h"

/* Registers [dev, dev + bytes) on pd through fd (fd >= 0) or by address: 1 when it took it,
 * else 0 with the reason in why. */
static int32_t zc_probe_reg(struct ibv_pd *pd, void *dev, size_t bytes, int32_t fd,
                            uint64_t off, char *why, size_t cap) {
    unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    errno = 0;
    struct ibv_mr *mr = fd >= 0 ? ibv_reg_dmabuf_mr(pd, off, bytes, (uint64_t)(uintptr_t)dev, fd,
                                                    (int)access)
                                : ibv_reg_mr(pd, dev, bytes, access);
    if (mr) {
        (void)ibv_dereg_mr(mr);
        return 1;
    }
    char text[128];
    zc__fmt(why, cap, "%s", zc__ib_errno_text(errno, text, sizeof text));
    return 0;
}

/* One device: its ports, and the two registrations of the device memory (when there is some). */
static void zc_probe_nic(struct ibv_device *dev, zc_wire_nic *nic, void *mem, size_t bytes,
                         int32_t fd, uint64_t off) {
    zc__fmt(nic->name, sizeof nic->name, "%s", ibv_get_device_name(dev));
    nic->dmabuf = nic->peermem = -1;
    struct ibv_context *ctx = ibv_open_device(dev);
    if (!ctx) {
        char text[128];
        zc__fmt(nic->why, sizeof nic->why, "ibv_open_device: %s",
                zc__ib_errno_text(errno, text, sizeof text));
        return;
    }
    struct ibv_device_attr attr;
    if (ibv_query_device(ctx, &attr) == 0)
        for (uint8_t p = 1; p <= attr.phys_port_cnt && p < 32u; p++) {
            struct ibv_port_attr pa;
            if (ibv_query_port(ctx, p, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
            nic->ports_active++;
            nic->ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
        }
    struct ibv_pd *pd = mem ? ibv_alloc_pd(ctx) : 0;
    if (pd) {
        char why_dmabuf[96] = "", why_addr[96] = "";
        if (fd >= 0) nic->dmabuf = zc_probe_reg(pd, mem, bytes, fd, off, why_dmabuf,
                                                sizeof why_dmabuf);
        nic->peermem = zc_probe_reg(pd, mem, bytes, -1, 0, why_addr, sizeof why_addr);
        zc__fmt(nic->why, sizeof nic->why, "%s%s%s%s", nic->dmabuf == 0 ? "dma-buf: " : "",
                nic->dmabuf == 0 ? why_dmabuf : "", nic->peermem == 0 ? "; by address: " : "",
                nic->peermem == 0 ? why_addr : "");
        (void)ibv_dealloc_pd(pd);
    }
    (void)ibv_close_device(ctx);
}

zc_status zc__ib_nics(zc_wire_nic *nics, uint32_t cap, uint32_t *n, void *mem, size_t bytes,
                      int32_t fd, uint64_t off, char *err, size_t errcap) {
    int num = 0;
    *n = 0;
    errno = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    if (!list || num <= 0) {
        char text[128];
        if (list) zc__fmt(err, errcap, "ibv_get_device_list found no RDMA device");
        else zc__fmt(err, errcap, "ibv_get_device_list: %s (no RDMA support loaded)",
                     zc__ib_errno_text(errno, text, sizeof text));
        if (list) ibv_free_device_list(list);
        return ZC_UNSUPPORTED;
    }
    for (int i = 0; i < num && *n < cap; i++) {
        nics[*n] = (zc_wire_nic){0};
        zc_probe_nic(list[i], &nics[(*n)++], mem, bytes, fd, off);
    }
    ibv_free_device_list(list);
    return ZC_OK;
}
