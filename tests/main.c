/* main.c: build/zctest, the test suite's runner: every test of tests/list.h (or those named on
 * the command line, by prefix), each in a forked child with its time limit, one line each, then
 * `N passed, N failed, N skipped`. `zctest --rank NAME` runs a rank program instead (zcrun
 * starts those). The machinery is tests/harness.c's. */
#include "zt.h"

#define ZT_TEST(name, timeout_s) {#name, name, timeout_s},
#define ZT_RANK(name)
static const zt_entry zt_tests[] = {
#include "list.h"
};
#undef ZT_TEST
#undef ZT_RANK
#define ZT_TEST(name, timeout_s)
#define ZT_RANK(name) {#name, name},
static const zt_rank_entry zt_ranks[] = {
#include "list.h"
    {NULL, NULL}
};
#undef ZT_TEST
#undef ZT_RANK

int main(int argc, char **argv) {
    return zt_main(argc, argv, "zctest", zt_tests, sizeof zt_tests / sizeof zt_tests[0], zt_ranks);
}
