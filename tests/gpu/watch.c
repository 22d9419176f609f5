/* watch.c: where a device test stands when it stalls. zg_dump prints a communicator's stream
 * slots (state, tick, GO base, steps, the five flag words) and its active requests (kind,
 * algorithm, phase, steps released, held at the gate); zg_watch arms a watchdog (ZG_WATCHDOG_S
 * seconds, 0 or unset: none) that, when it fires, prints the calling thread's backtrace and that
 * dump to stderr and ends the process with status 124, so a hang on a real GPU becomes a report
 * instead of a time-out with no output. Reads the core's structures (core/device.h): a test's
 * view, not an interface. */
#include "zg.h"

#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "device.h"

static const char *zg_bind_state(uint32_t s) {
    static const char *names[] = {"free", "armed", "running", "draining", "lost"};
    return s < sizeof names / sizeof names[0] ? names[s] : "?";
}

void zg_dump(const zc_comm *c) {
    if (!c) return;
    const struct zc__gpu *g = c->gpu;
    fprintf(stderr, "zg_dump: rank %u, failed %d, %u active request(s)\n", c->rank,
            (int)c->failed, c->nreqs_active);
    for (uint32_t i = 0; g && i < g->nbinds; i++) {
        const zc__bind *b = &g->binds[i];
        if (b->state == ZC_BIND_FREE && b->tick == 0) continue;
        volatile const uint32_t *f = &g->flags[ZC_BIND_FLAGS * i];
        fprintf(stderr, "  stream slot %u: %s %s, tick %u, go %u, steps %u; flags START %u "
                "DONE %u GO %u KD %u FIN %u\n", i, zg_bind_state(b->state),
                zc__kind_name(b->s.kind), b->tick, b->go, b->steps, f[ZC_BF_START],
                f[ZC_BF_DONE], f[ZC_BF_GO], f[ZC_BF_KD], f[ZC_BF_FIN]);
    }
    for (uint32_t k = 0; k < c->nreqs_active; k++) {
        const zc__req *r = &c->reqs[c->active[k]];
        fprintf(stderr, "  request %u: %s, algorithm %u, seq %llu, phase %u, round %u/%u, "
                "stream slot + 1 %u, step %u, held %u, line %u, tx_left %llu, rx_left %llu\n",
                c->active[k], zc__kind_name(r->s.kind), r->s.alg, (unsigned long long)r->seq,
                r->phase, r->round, r->rounds, r->bind, r->step, r->held,
                r->line, (unsigned long long)r->tx_left, (unsigned long long)r->rx_left);
    }
}

static const zc_comm *zg_watched;

static void zg_fire(int sig) {
    (void)sig;
    static const char head[] = "zg_watch: the watchdog fired; backtrace:\n";
    void *frames[64];
    (void)!write(2, head, sizeof head - 1);
    backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
    zg_dump(zg_watched);
    _exit(124);
}

void zg_watch(const zc_comm *c) {
    const char *s = getenv("ZG_WATCHDOG_S");
    zg_watched = c;
    if (!s || atoi(s) <= 0) return;
    signal(SIGALRM, zg_fire);
    alarm((unsigned)atoi(s));
}
