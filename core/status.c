/* status.c: names and sentences of statuses, dtypes and ops (the maps in zcoll.h). Pure
 * tables; no state. */
#include "zcoll.h"

const char *zc_status_name(zc_status s) {
    switch (s) {
#define ZC_STATUS_NAME_(code, value, text) case code: return #code;
        ZC_STATUS_MAP(ZC_STATUS_NAME_)
#undef ZC_STATUS_NAME_
    }
    return "ZC_UNKNOWN_STATUS";
}

const char *zc_status_text(zc_status s) {
    switch (s) {
#define ZC_STATUS_TEXT_(code, value, text) case code: return text;
        ZC_STATUS_MAP(ZC_STATUS_TEXT_)
#undef ZC_STATUS_TEXT_
    }
    return "Unknown status value.";
}

static const struct {
    const char *name;
    uint8_t bytes;
} zc_dtypes[ZC_DTYPE_COUNT_] = {
    [ZC_INT8] = {"int8", 1},         [ZC_UINT8] = {"uint8", 1},
    [ZC_INT32] = {"int32", 4},       [ZC_UINT32] = {"uint32", 4},
    [ZC_INT64] = {"int64", 8},       [ZC_UINT64] = {"uint64", 8},
    [ZC_FLOAT16] = {"float16", 2},   [ZC_BFLOAT16] = {"bfloat16", 2},
    [ZC_FLOAT32] = {"float32", 4},   [ZC_FLOAT64] = {"float64", 8},
    [ZC_FP8_E4M3] = {"fp8_e4m3", 1}, [ZC_FP8_E5M2] = {"fp8_e5m2", 1},
};

size_t zc_dtype_bytes(zc_dtype t) {
    return (unsigned)t < ZC_DTYPE_COUNT_ ? zc_dtypes[t].bytes : 0;
}

const char *zc_dtype_name(zc_dtype t) {
    return (unsigned)t < ZC_DTYPE_COUNT_ ? zc_dtypes[t].name : "unknown";
}

const char *zc_op_name(zc_op op) {
    static const char *const names[ZC_OP_COUNT_] = {"sum", "prod", "min", "max", "avg"};
    return (unsigned)op < ZC_OP_COUNT_ ? names[op] : "unknown";
}
