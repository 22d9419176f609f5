/* acc_stub.c: temporary stand-ins (accumulator = element; AVG not divided). */
#include "acc_stub.h"
#include "reduce.h"
#include "text.h"
size_t zc__acc_bytes(zc_dtype dtype, zc_op op) { (void)op; return zc_dtype_bytes(dtype); }
void zc__acc_load(void *acc, const void *in, size_t count, zc_dtype dtype, zc_op op) {
    (void)op;
    zc__memmove(acc, in, count * zc_dtype_bytes(dtype));
}
void zc__acc_combine(void *out, const void *left, const void *right, size_t count,
                     zc_dtype dtype, zc_op op) {
    const void *in[2] = {left, right};
    zc__reduce(out, in, 2, count, dtype, op == ZC_AVG ? ZC_SUM : op);
}
void zc__acc_store(void *out, const void *acc, size_t count, zc_dtype dtype, zc_op op,
                   uint32_t n) {
    (void)op, (void)n;
    zc__memmove(out, acc, count * zc_dtype_bytes(dtype));
}
