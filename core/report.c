/* report.c: zc_device_report, what this machine offers device-memory collectives and the path
 * ranks would take on it, in lines: from the gpu provider's probe (provider/gpu.h: versions,
 * devices, attributes, peer access) and transport_ib's (provider/wire.h: RDMA devices and
 * whether they register GPU memory). The path rules are gpu_mem.c's: ipc on one host when every
 * pair of the ranks' GPUs reads the other's memory, else staged; direct across hosts when the
 * GPU takes NIC writes (GPUDirect RDMA, with a host flush where its writes are not ordered) and
 * a NIC registers its memory, else staged.
 *
 * Must not: include CUDA or verbs headers, or allocate (a provider's state for the NIC test
 * lives on the stack). Not for a communicator's hot path: it opens devices. */
#include "engine.h"
#include "gpu.h"
#include "wire.h"

#define ZC_REPORT_NICS 16u

typedef struct zc_rep {
    void (*emit)(void *user, const char *line);
    void *user;
} zc_rep;

static void zc_line(const zc_rep *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void zc_line(const zc_rep *o, const char *fmt, ...) {
    char line[ZC_ERROR_TEXT_BYTES * 2];
    va_list ap;
    va_start(ap, fmt);
    zc__vfmt(line, sizeof line, fmt, ap);
    va_end(ap);
    o->emit(o->user, line);
}

static const char *zc_yes(int32_t v) { return v > 0 ? "yes" : v == 0 ? "no" : "unknown"; }

static const char *zc_ordering(int32_t v) {
    return v >= 200 ? "all devices (no flush needed)"
           : v >= 100 ? "owner (no flush needed for its own kernels)"
           : v == 0   ? "none (NIC writes need a flush before a kernel reads them)"
                      : "unknown";
}

static void zc_report_gpus(const zc_rep *o, const zc_gpu_probe *p) {
    if (p->ndevs == 0) {
        zc_line(o, "GPUs: none (%s)", p->why);
        return;
    }
    for (uint32_t i = 0; i < p->ndevs; i++) {
        const zc_gpu_probe_dev *d = &p->devs[i];
        zc_line(o, "GPU %u: %s, compute capability %d.%d, %d multiprocessors, %llu MiB, PCI bus "
                "%s", i, d->name, d->cc_major, d->cc_minor, d->sms,
                (unsigned long long)(d->mem_bytes >> 20), d->bus);
        zc_line(o, "  GPUDirect RDMA: %s; NIC writes ordering: %s; flush options:%s%s%s; "
                "dma-buf export: %s; stream memory operations: %s", zc_yes(d->rdma),
                zc_ordering(d->ordering), d->flush_opts & 1 ? " host" : "",
                d->flush_opts & 2 ? " stream" : "", d->flush_opts > 0 ? "" : " none",
                zc_yes(d->dmabuf), zc_yes(d->memops));
    }
    char row[ZC_ERROR_TEXT_BYTES];
    for (uint32_t i = 0; p->ndevs > 1 && i < p->ndevs; i++) {
        size_t n = zc__fmt(row, sizeof row, "peer access: GPU %u's kernels read", i);
        for (uint32_t j = 0, first = 1; j < p->ndevs; j++) {
            if (j == i) continue;
            n += zc__fmt(row + n, sizeof row - n, "%s GPU %u's memory: %s", first ? "" : ",",
                         j, p->devs[i].peers >> j & 1u ? "yes" : "no");
            first = 0;
        }
        zc_line(o, "%s", row);
    }
}

/* The NICs, each asked to register 2 MiB of GPU 0's memory (the provider started on it): *reg
 * set to the first that took it, with how; -2 when there is no NIC. */
static void zc_report_nics(const zc_rep *o, const zc_gpu_ops *ops, const zc_gpu_probe *p,
                           int32_t *reg, char *how, size_t cap) {
    *reg = -1;
#ifdef ZC_HAVE_IB
    static zc_wire_nic nics[ZC_REPORT_NICS];
    uint64_t state[2048];
    char err[ZC_ERROR_TEXT_BYTES];
    zc_gpu_geom g = {0, 1, 1, 8, 1, 0, 2u << 20, 0, 0};
    bool up = ops && p->ndevs && ops->state_bytes(&g) <= sizeof state &&
              ops->init(state, &g) == ZC_OK;
    void *mem = up ? ops->scratch(state) : 0;
    int32_t fd = -1;
    uint64_t off = 0;
    if (up && ops->dmabuf_export(state, mem, 2u << 20, &fd, &off) != ZC_OK) fd = -1;
    uint32_t n = 0;
    zc_status st = zc__ib_nics(nics, ZC_REPORT_NICS, &n, mem, 2u << 20, fd, off, err,
                               sizeof err);
    if (fd >= 0) zc_plat_fd_close(fd);
    if (up) ops->fini(state);
    if (st != ZC_OK) zc_line(o, "NICs: none (%s)", err);
    if (st != ZC_OK) *reg = -2;
    for (uint32_t i = 0; i < n; i++) {
        const zc_wire_nic *x = &nics[i];
        zc_line(o, "NIC %s: %u active port(s)%s; registers GPU 0's memory through dma-buf: %s, "
                "by address (nvidia-peermem): %s%s%s", x->name, x->ports_active,
                x->ethernet ? " (RoCE)" : "", mem ? zc_yes(x->dmabuf) : "not tried (no GPU)",
                mem ? zc_yes(x->peermem) : "not tried (no GPU)", x->why[0] ? " -- " : "",
                x->why);
        if (*reg < 0 && x->ports_active && (x->dmabuf > 0 || x->peermem > 0)) {
            *reg = (int32_t)i;
            zc__fmt(how, cap, "%s registers its memory %s", x->name,
                    x->dmabuf > 0 ? "through dma-buf" : "by address (nvidia-peermem)");
        }
    }
#else
    (void)ops, (void)p, (void)how, (void)cap;
    zc_line(o, "NICs: none (this build has no transport_ib)");
    *reg = -2;
#endif
}

/* The paths ranks would take: on one host, and across hosts. */
static void zc_report_paths(const zc_rep *o, const zc_gpu_probe *p, int32_t reg,
                            const char *how) {
    if (p->ndevs == 0) {
        zc_line(o, "path on one host: none (no usable GPU: device-memory calls fail with "
                "ZC_UNSUPPORTED)");
        zc_line(o, "path across hosts: none (no usable GPU)");
        return;
    }
    uint32_t bi = 0, bj = 0;
    bool all = true;
    for (uint32_t i = 0; i < p->ndevs; i++)
        for (uint32_t j = 0; j < p->ndevs && all; j++)
            if (i != j && !(p->devs[i].peers >> j & 1u)) all = false, bi = i, bj = j;
    if (all)
        zc_line(o, "path on one host: ipc (every pair of GPUs reads the other's memory; ranks "
                "on one GPU too)");
    else
        zc_line(o, "path on one host: staged where two ranks' GPUs lack peer access (GPU %u "
                "cannot read GPU %u's memory), ipc where every pair of them has it", bi, bj);
    const zc_gpu_probe_dev *d = &p->devs[0];
    bool flush_ok = d->ordering >= 100 || (d->flush_opts & 1);
    if (reg == -2)
        zc_line(o, "path across hosts: none (no RDMA device: ranks on other hosts need "
                "transport_ib)");
    else if (d->rdma <= 0)
        zc_line(o, "path across hosts: staged (GPU 0 reports no GPUDirect RDMA)");
    else if (!flush_ok)
        zc_line(o, "path across hosts: staged (GPU 0's NIC writes are not ordered and it offers "
                "no host flush)");
    else if (reg < 0)
        zc_line(o, "path across hosts: staged (no NIC registers GPU 0's memory)");
    else
        zc_line(o, "path across hosts: direct (GPU 0 takes NIC writes, ordering %s; %s)",
                zc_ordering(d->ordering), how);
}

zc_status zc_device_report(const zc_config *cfg, void (*emit)(void *user, const char *line),
                           void *user) {
    static zc_gpu_probe p;
    zc_config dflt;
    if (!emit) return ZC_INVALID_ARG;
    if (!cfg) {
        zc_config_default(&dflt);
        cfg = &dflt;
    }
    zc_rep o = {emit, user};
    const zc_gpu_ops *ops = zc__gpu_provider(cfg);
    zc__memset(&p, 0, sizeof p);
    if (!ops) {
        zc_line(&o, "gpu provider: none (%s)", zc__gpu_absent(cfg));
        zc__fmt(p.why, sizeof p.why, "no gpu provider");
    } else {
        (void)ops->probe(&p);
        zc_line(&o, "gpu provider: %s; CUDA driver %d.%d%s, runtime %d.%d", ops->name,
                p.driver / 1000, p.driver % 1000 / 10, p.driver ? "" : " (none loaded)",
                p.runtime / 1000, p.runtime % 1000 / 10);
    }
    zc_report_gpus(&o, &p);
    int32_t reg = -1;
    char how[160] = "";
    zc_report_nics(&o, ops, &p, &reg, how, sizeof how);
    zc_report_paths(&o, &p, reg, how);
    return p.ndevs ? ZC_OK : p.unusable ? ZC_GPU : ZC_UNSUPPORTED;
}
