/* acc_stub.h: temporary declarations of the accumulator functions (until order-24 lands). */
#ifndef ZC_CORE_ACC_STUB_H
#define ZC_CORE_ACC_STUB_H
#include <stddef.h>
#include <stdint.h>
#include "zcoll.h"
size_t zc__acc_bytes(zc_dtype dtype, zc_op op);
void zc__acc_load(void *acc, const void *in, size_t count, zc_dtype dtype, zc_op op);
void zc__acc_combine(void *out, const void *left, const void *right, size_t count,
                     zc_dtype dtype, zc_op op);
void zc__acc_store(void *out, const void *acc, size_t count, zc_dtype dtype, zc_op op,
                   uint32_t n);
#endif
