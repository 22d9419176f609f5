/* fuzz_env.c: zc_config_from_env against any environment. The input is "NAME=VALUE" lines
 * (the variables zcoll reads: ZC_*, the launchers' rank variables, MASTER_ADDR/PORT). Every
 * outcome must be ZC_OK with a config that zc_comm_arena_bytes accepts, or ZC_INVALID_ARG with
 * a sentence, and the caller's config untouched but for the sentence. */
#include "fake_plat.h"
#include "zcoll.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
    fp_state *st = fp_install();
    fp_set_env(st, data, len);
    zc_config cfg, before;
    zc_config_default(&cfg);
    before = cfg;
    zc_status s = zc_config_from_env(&cfg);
    size_t n = strnlen(cfg.error_text, sizeof cfg.error_text);
    if (n == sizeof cfg.error_text) abort(); /* the sentence must be terminated */
    if (s == ZC_OK) {
        if (n != 0) abort();
        (void)zc_comm_arena_bytes(&cfg);
    } else if (s == ZC_INVALID_ARG) {
        if (n == 0) abort(); /* a refusal says why */
        memcpy(cfg.error_text, before.error_text, sizeof cfg.error_text);
        if (memcmp(&cfg, &before, sizeof cfg) != 0) abort(); /* and changes nothing else */
    } else {
        abort();
    }
    return 0;
}
