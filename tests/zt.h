/* zt.h: the test runner's interface (tests/harness.c), shared by build/zctest (tests listed once
 * in tests/list.h, run by tests/main.c) and build/zcgputest (tests/gpu/list.h, tests/gpu/main.c).
 * Each test runs in its own forked process with a time limit; the runner counts the results.
 * No malloc anywhere in the runner. A failing check prints file:line and the expression and
 * ends the test; ZT_SKIP marks a test whose hardware is absent. */
#ifndef ZT_H
#define ZT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ref.h"

/* Ends the current test as failed (exit code 1) after printing where and what. */
_Noreturn void zt_fail(const char *file, int line, const char *expr, const char *detail);
/* Ends the current test as skipped (exit code 77), printing why. */
_Noreturn void zt_skip(const char *why);

#define ZT_CHECK(expr)                                                                        \
    do {                                                                                      \
        if (!(expr)) zt_fail(__FILE__, __LINE__, #expr, NULL);                                \
    } while (0)

/* Equality of two integers, printing both values on failure. */
#define ZT_CHECK_EQ(a, b)                                                                     \
    do {                                                                                      \
        long long zt_a_ = (long long)(a), zt_b_ = (long long)(b);                             \
        if (zt_a_ != zt_b_) {                                                                 \
            char zt_d_[96];                                                                   \
            snprintf(zt_d_, sizeof zt_d_, "%lld != %lld", zt_a_, zt_b_);                      \
            zt_fail(__FILE__, __LINE__, #a " == " #b, zt_d_);                                 \
        }                                                                                     \
    } while (0)

/* A zc_status compared with the expected one, printing both names and the communicator's
 * sentence on failure (comm may be NULL). */
#define ZT_CHECK_COMM(comm, call, expected)                                                   \
    do {                                                                                      \
        zc_status zt_s_ = (call), zt_w_ = (expected);                                         \
        if (zt_s_ != zt_w_) {                                                                 \
            char zt_d_[400];                                                                  \
            snprintf(zt_d_, sizeof zt_d_, "%s, expected %s: %s", zc_status_name(zt_s_),       \
                     zc_status_name(zt_w_), (comm) ? zc_comm_error_text(comm) : "");          \
            zt_fail(__FILE__, __LINE__, #call, zt_d_);                                        \
        }                                                                                     \
    } while (0)

/* A zc_status compared with the expected one, printing both names on failure. */
#define ZT_CHECK_ST(call, expected)                                                           \
    do {                                                                                      \
        int zt_s_ = (int)(call), zt_e_ = (int)(expected);                                     \
        if (zt_s_ != zt_e_) zt_fail_status(__FILE__, __LINE__, #call, zt_s_, zt_e_);          \
    } while (0)
_Noreturn void zt_fail_status(const char *file, int line, const char *expr, int got, int want);

#define ZT_SKIP(why) zt_skip(why)

/* For rank programs: prints "<what> FAILED: rank <ZC_RANK>: <message>" on stdout, flushed,
 * and returns 1 (the rank's exit status). */
int zt_rank_fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Path of the build directory (the folder of the running test binary), for zcrun and
 * friends. */
const char *zt_build_dir(void);
/* Monotonic time. */
uint64_t zt_now_ms(void);
double zt_now_s(void);

/* Runs argv[0] (a path) with argv, the extra "NAME=VALUE" environment entries env (NULL
 * terminated, may be NULL), stdout+stderr captured into out (NUL-terminated, truncated at
 * cap-1). Kills it at timeout_ms. Returns the exit status (128+signal if killed by a signal,
 * -1 if it could not start) and the elapsed milliseconds in *elapsed_ms (may be NULL). */
int zt_run(const char *const argv[], const char *const env[], char *out, size_t cap,
           uint32_t timeout_ms, uint32_t *elapsed_ms);

/* Runs `zcrun -n nranks --timeout S <this test binary> --rank NAME` and returns zcrun's exit
 * status; output as in zt_run (out may be NULL to let it through to the console). */
int zt_run_ranks(uint32_t nranks, const char *rank_fn_name, uint32_t timeout_s,
                 const char *const env[], char *out, size_t cap);

/* zc_config_default, then an in-process group of n ranks with rings of slots x slot_bytes. */
void zt_inproc_config(zc_config *cfg, uint32_t n, uint32_t slots, uint32_t slot_bytes);
/* An in-process group of cfg->nranks ranks: an arena each (aligned_alloc) into arenas[], the
 * communicators into comms[]; a failure is a failed check that prints init's sentence. */
void zt_inproc_open(const zc_config *cfg, void **arenas, zc_comm **comms);
/* Finishes every rank of such a group (each must say ZC_OK) and frees the arenas. */
void zt_inproc_close(uint32_t n, void **arenas, zc_comm **comms);

/* zt_rng, the seeded stream (zt_rng_next, zt_rng_below), is in ref.h with the reference. */
/* The seed of this run: ZT_SEED from the environment, else a fixed default. Printed by the
 * runner so a failing sweep can be replayed. */
uint64_t zt_seed(void);

/* A runner's tables (built from a list.h) and the runner: `BIN --rank NAME` runs a rank
 * program, `BIN --list` names the tests, `BIN [PREFIX...]` runs those tests (all without
 * arguments), one line each, then `N passed, N failed, N skipped`; exit 1 if one failed. */
typedef struct zt_entry {
    const char *name;
    void (*fn)(void);
    uint32_t timeout_s;
} zt_entry;
typedef struct zt_rank_entry {
    const char *name;
    int (*fn)(void);
} zt_rank_entry;
int zt_main(int argc, char **argv, const char *name, const zt_entry *tests, size_t ntests,
            const zt_rank_entry *ranks);

/* Declarations of every test and rank program in tests/list.h. */
#define ZT_TEST(name, timeout_s) void name(void);
#define ZT_RANK(name) int name(void);
#include "list.h"
#undef ZT_TEST
#undef ZT_RANK

#endif /* ZT_H */
