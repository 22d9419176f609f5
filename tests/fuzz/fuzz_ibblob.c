/* fuzz_ibblob.c: transport_ib's check of a peer's address blob (zc_ib_check_blob in
 * transport_ib/ib.c, included here to reach it) against any bytes. The input is a blob head;
 * this rank's state is fixed. Every outcome must be ZC_OK only for a blob whose magic,
 * communicator, rank, geometry (connection count within the same cap), queue pairs, zero-copy
 * threshold and link layer equal this
 * rank's expectations, and otherwise ZC_MISMATCH or ZC_PEER_LOST (the 0xff blob of a rank
 * whose create failed) with a sentence. Built only where libibverbs-dev is installed. */
#include "fake_plat.h"

#include "../../transport_ib/ib.c"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
    if (len < 1) return 0;
    fp_install();
    static zc_ib s;
    memset(&s, 0, sizeof s);
    s.g.comm_id = 0x1234567890abcdefull;
    s.g.rank = 0;
    s.g.nranks = 4;
    s.g.slots = 8;
    s.g.stride = 320;
    s.g.nconn = 4; /* a full mesh of 4 */
    s.g.conn_cap = 4;
    s.qps = 2;
    s.put_min = 262144;
    s.dev.link_layer = ZC_IB_LINK_ETH;
    uint32_t p = 1u + data[0] % 3u;
    /* The blob: a valid one for rank p, with the input XORed over it (an empty rest: valid). */
    uint8_t raw[sizeof(zc_ib_blob)];
    zc_ib_blob b = {ZC_IB_MAGIC, s.g.comm_id, p, 4, 8, 320, 2, ZC_IB_LINK_ETH, 0, 0, 0, 0,
                    0, 0, 0, 0, {0}, 262144, 4, 4, 0};
    memcpy(raw, &b, sizeof raw);
    for (size_t i = 1; i < len && i - 1 < sizeof raw; i++) raw[i - 1] ^= data[i];
    memcpy(&b, raw, sizeof b);
    char err[256] = "";
    zc_status st = zc_ib_check_blob(&s, p, &b, raw, err, sizeof err);
    bool same = b.magic == ZC_IB_MAGIC && b.comm_id == s.g.comm_id && b.rank == p &&
                b.nranks == 4 && b.slots == 8 && b.stride == 320 && b.qps == 2 &&
                b.put_min == 262144 && b.link_layer == ZC_IB_LINK_ETH && b.conn_cap == 4 &&
                b.nconn <= 4;
    if (st == ZC_OK && !same) abort();           /* a wrong blob was accepted */
    if (st != ZC_OK && same && !zc_ib_blob_failed(raw)) abort(); /* a right one refused */
    if (st != ZC_OK && (st != ZC_MISMATCH && st != ZC_PEER_LOST)) abort();
    if (st != ZC_OK && !err[0]) abort();         /* a refusal says why */
    return 0;
}
