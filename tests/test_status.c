/* test_status.c: the status map (code -> name -> sentence), element sizes and names of the
 * dtypes, and names of the ops, checked against hand-written references taken from docs/api.md.
 * Pure table lookups: no communicator, no environment. */
#include "zt.h"

#include "zcoll.h"

#include <string.h>

/* Every entry of ZC_STATUS_MAP, produced by the X-macro itself, so a code added to the map
 * is covered here without editing this file. */
typedef struct zt_status_entry {
    zc_status code;
    int value;
    const char *id;
    const char *text;
} zt_status_entry;

static const zt_status_entry zt_status_map[] = {
#define ZT_STATUS_ENTRY_(code, value, text) {code, value, #code, text},
    ZC_STATUS_MAP(ZT_STATUS_ENTRY_)
#undef ZT_STATUS_ENTRY_
};
#define ZT_STATUS_COUNT (sizeof zt_status_map / sizeof zt_status_map[0])

/* docs/api.md's numbers, typed in by hand: the independent reference for the map's values. */
typedef struct zt_status_ref {
    const char *id;
    int value;
} zt_status_ref;

static const zt_status_ref zt_status_api[] = {
    {"ZC_OK", 0},           {"ZC_IN_PROGRESS", 1},   {"ZC_AGAIN", -1},
    {"ZC_INVALID_ARG", -2}, {"ZC_INVALID_STATE", -3}, {"ZC_TOO_SMALL", -4},
    {"ZC_LIMIT", -5},       {"ZC_UNSUPPORTED", -6},   {"ZC_TIMED_OUT", -7},
    {"ZC_MISMATCH", -8},    {"ZC_AUTH", -9},          {"ZC_SYSTEM", -10},
    {"ZC_TRANSPORT", -20},  {"ZC_GPU", -21},          {"ZC_PEER_LOST", -40},
    {"ZC_ABORTED", -41},    {"ZC_INTERNAL", -99},
};
#define ZT_STATUS_API_COUNT (sizeof zt_status_api / sizeof zt_status_api[0])

static const zt_status_ref *zt_status_api_find(const char *id) {
    for (size_t i = 0; i < ZT_STATUS_API_COUNT; i++)
        if (strcmp(zt_status_api[i].id, id) == 0) return &zt_status_api[i];
    return NULL;
}

static void zt_check_sentence(const char *s) {
    ZT_CHECK(s != NULL);
    size_t len = strlen(s);
    ZT_CHECK(len >= 2);
    ZT_CHECK(s[0] >= 'A' && s[0] <= 'Z');
    ZT_CHECK(s[len - 1] == '.');
}

void status_map_round_trip_distinct_names_and_sentences(void) {
    /* The map holds exactly docs/api.md's codes, with its values. */
    ZT_CHECK_EQ(ZT_STATUS_COUNT, ZT_STATUS_API_COUNT);
    for (size_t i = 0; i < ZT_STATUS_COUNT; i++) {
        const zt_status_entry *e = &zt_status_map[i];
        const zt_status_ref *ref = zt_status_api_find(e->id);
        if (!ref) zt_fail(__FILE__, __LINE__, "status code is in docs/api.md", e->id);
        ZT_CHECK_EQ(e->value, ref->value);
        ZT_CHECK_EQ((int)e->code, ref->value);
    }
    for (size_t i = 0; i < ZT_STATUS_COUNT; i++) {
        const zt_status_entry *e = &zt_status_map[i];
        const char *name = zc_status_name(e->code);
        const char *text = zc_status_text(e->code);
        ZT_CHECK(name != NULL);
        if (strcmp(name, e->id) != 0) zt_fail(__FILE__, __LINE__, "name == identifier", name);
        zt_check_sentence(text);
        ZT_CHECK(strcmp(text, e->text) == 0);
        /* Round trip through the integer value, as a caller holding an int would. */
        ZT_CHECK(strcmp(zc_status_name((zc_status)e->value), e->id) == 0);
        for (size_t j = 0; j < i; j++) {
            const zt_status_entry *o = &zt_status_map[j];
            ZT_CHECK(e->value != o->value);
            ZT_CHECK(strcmp(name, zc_status_name(o->code)) != 0);
            ZT_CHECK(strcmp(text, zc_status_text(o->code)) != 0);
        }
    }
    /* Values outside the map: the fixed unknown name and some sentence, never NULL. */
    static const int unknown[] = {2, -11, -19, -22, -42, -98, -100, 12345, -2147483647 - 1};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *name = zc_status_name((zc_status)unknown[i]);
        ZT_CHECK(name != NULL);
        ZT_CHECK(strcmp(name, "ZC_UNKNOWN_STATUS") == 0);
        zt_check_sentence(zc_status_text((zc_status)unknown[i]));
    }
}

typedef struct zt_dtype_ref {
    zc_dtype type;
    int value; /* position in docs/api.md's enum */
    size_t bytes;
} zt_dtype_ref;

void dtype_bytes_and_names_cover_every_type(void) {
    static const zt_dtype_ref ref[] = {
        {ZC_INT8, 0, 1},    {ZC_UINT8, 1, 1},    {ZC_INT32, 2, 4},     {ZC_UINT32, 3, 4},
        {ZC_INT64, 4, 8},   {ZC_UINT64, 5, 8},   {ZC_FLOAT16, 6, 2},   {ZC_BFLOAT16, 7, 2},
        {ZC_FLOAT32, 8, 4}, {ZC_FLOAT64, 9, 8},  {ZC_FP8_E4M3, 10, 1}, {ZC_FP8_E5M2, 11, 1},
    };
    const size_t n = sizeof ref / sizeof ref[0];
    ZT_CHECK_EQ(ZC_DTYPE_COUNT_, n);
    for (size_t i = 0; i < n; i++) {
        ZT_CHECK_EQ((int)ref[i].type, ref[i].value);
        ZT_CHECK_EQ(zc_dtype_bytes(ref[i].type), ref[i].bytes);
        const char *name = zc_dtype_name(ref[i].type);
        ZT_CHECK(name != NULL && name[0] != '\0');
        ZT_CHECK(strcmp(name, "unknown") != 0);
        for (size_t j = 0; j < i; j++) ZT_CHECK(strcmp(name, zc_dtype_name(ref[j].type)) != 0);
    }
    /* The two names the header spells out. */
    ZT_CHECK(strcmp(zc_dtype_name(ZC_FLOAT32), "float32") == 0);
    ZT_CHECK(strcmp(zc_dtype_name(ZC_BFLOAT16), "bfloat16") == 0);
    static const int unknown[] = {ZC_DTYPE_COUNT_, ZC_DTYPE_COUNT_ + 1, 99, -1};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        ZT_CHECK_EQ(zc_dtype_bytes((zc_dtype)unknown[i]), 0);
        ZT_CHECK(strcmp(zc_dtype_name((zc_dtype)unknown[i]), "unknown") == 0);
    }
}

void op_names_cover_every_op(void) {
    static const struct {
        zc_op op;
        int value;
        const char *name;
    } ref[] = {
        {ZC_SUM, 0, "sum"}, {ZC_PROD, 1, "prod"}, {ZC_MIN, 2, "min"},
        {ZC_MAX, 3, "max"}, {ZC_AVG, 4, "avg"},
    };
    const size_t n = sizeof ref / sizeof ref[0];
    ZT_CHECK_EQ(ZC_OP_COUNT_, n);
    for (size_t i = 0; i < n; i++) {
        ZT_CHECK_EQ((int)ref[i].op, ref[i].value);
        const char *name = zc_op_name(ref[i].op);
        ZT_CHECK(name != NULL);
        if (strcmp(name, ref[i].name) != 0) zt_fail(__FILE__, __LINE__, "op name", name);
    }
    static const int unknown[] = {ZC_OP_COUNT_, 77, -1};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        ZT_CHECK(strcmp(zc_op_name((zc_op)unknown[i]), "unknown") == 0);
}
