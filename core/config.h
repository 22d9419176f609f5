/* config.h: checks on a zc_config shared by the size query, init and split. */
#ifndef ZC_CORE_CONFIG_H
#define ZC_CORE_CONFIG_H

#include "zcoll.h"

#define ZC_MAX_MEMS 4096u /* ceiling of cfg->max_mems */
#define ZC_MAX_GPU_STREAM_SLOTS 4096u /* ceiling of cfg->gpu_stream_slots */

/* True if cfg is usable; otherwise false with a sentence naming the field in why (may be
 * NULL). */
bool zc__config_check(const zc_config *cfg, char *why, size_t cap);
/* Whether cfg's secret is the one zc_config_from_env derives from public launcher values
 * (the rendezvous address, job ids) when none was given: anyone who can read them has it. */
bool zc__secret_derived(const zc_config *cfg);
/* Splits "host:port"; false unless both parts are there and the port is 1..65535. */
bool zc__split_addr(const char *addr, char *host, size_t host_cap, uint16_t *port);

/* Whether a communicator of cfg is in overlay mode (cfg->overlay_min_ranks ranks or more):
 * connected to its own host's ranks and the overlay only (layout.h: the connection set). */
static inline bool zc__overlay(const zc_config *cfg) {
    return cfg->overlay_min_ranks && cfg->nranks >= cfg->overlay_min_ranks;
}

/* The deadline span_ns after now_ns, saturated: a timeout too large to add is "no deadline
 * within the clock's range", never a sum that wraps into the past. */
static inline uint64_t zc__deadline_after(uint64_t now_ns, uint64_t span_ns) {
    return span_ns > UINT64_MAX - now_ns ? UINT64_MAX : now_ns + span_ns;
}

#endif
