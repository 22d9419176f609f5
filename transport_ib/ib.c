/* ib.c: placeholder until transport_ib lands (issue 5): every create fails cleanly. */
#include "platform.h"
#include "wire.h"

static size_t zc_ib_state_bytes(const zc_wire_geom *g) { (void)g; return 64; }
static size_t zc_ib_window_bytes(const zc_wire_geom *g) { (void)g; return 0; }
static size_t zc_ib_addr_bytes(const zc_wire_geom *g) { (void)g; return 0; }
static zc_status zc_ib_create(void *state, const zc_wire_geom *g, void *window, void *blob,
                              char *err, size_t cap) {
    (void)state; (void)g; (void)window; (void)blob;
    const char *m = "ib: transport_ib is not implemented yet";
    size_t n = 0;
    for (; m[n] && n + 1 < cap; n++) err[n] = m[n];
    if (cap) err[n] = 0;
    return ZC_UNSUPPORTED;
}
static zc_status zc_ib_attach(void *state, const void *addrs, char *err, size_t cap) {
    (void)state; (void)addrs; (void)err; (void)cap;
    return ZC_UNSUPPORTED;
}
static void zc_ib_nop(void *state) { (void)state; }
static void *zc_ib_tx_slot(void *s, uint32_t l, uint32_t p, uint32_t k) {
    (void)s; (void)l; (void)p; (void)k; return 0;
}
static zc_status zc_ib_post(void *s, uint32_t l, uint32_t p, uint32_t k, size_t b, uint64_t t) {
    (void)s; (void)l; (void)p; (void)k; (void)b; (void)t; return ZC_UNSUPPORTED;
}
static const void *zc_ib_rx_slot(void *s, uint32_t l, uint32_t p, uint32_t k, uint64_t t) {
    (void)s; (void)l; (void)p; (void)k; (void)t; return 0;
}
static void zc_ib_credit(void *s, uint32_t l, uint32_t p, uint64_t c) {
    (void)s; (void)l; (void)p; (void)c;
}
static uint64_t zc_ib_credits(void *s, uint32_t l, uint32_t p) { (void)s; (void)l; (void)p; return 0; }
static void zc_ib_alarm(void *s, uint64_t w) { (void)s; (void)w; }
static uint64_t zc_ib_alarmed(void *s) { (void)s; return 0; }
static zc_status zc_ib_peer_alive(void *s, uint32_t p, char *err, size_t cap) {
    (void)s; (void)p; (void)err; (void)cap; return ZC_OK;
}
const zc_wire_ops zc_wire_ib = {
    sizeof(zc_wire_ops), ZC_WIRE_VERSION, "ib",
    zc_ib_state_bytes, zc_ib_window_bytes, zc_ib_addr_bytes,
    zc_ib_create, zc_ib_attach, zc_ib_nop, zc_ib_nop,
    zc_ib_tx_slot, zc_ib_post, zc_ib_rx_slot, zc_ib_credit, zc_ib_credits,
    zc_ib_alarm, zc_ib_alarmed, zc_ib_peer_alive,
};
