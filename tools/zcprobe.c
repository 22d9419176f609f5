/* zcprobe: what this machine offers zcoll's device-memory collectives and what zcoll would do
 * with it (zc_device_report): CUDA driver and runtime versions, GPUs and their GPUDirect
 * attributes, the peer-access matrix, RDMA devices and whether they register GPU memory, and
 * the path ranks on one host and across hosts would take, with the reason. The configuration
 * comes from the environment (ZC_GPU_PROVIDER=sim describes the simulated GPU and its knobs).
 *   zcprobe                 prints the report; exit 0
 *   zcprobe --require-gpu   the same, exit 1 unless a GPU is usable (tests/gpu/run.sh) */
#include <stdio.h>
#include <string.h>

#include "zcoll.h"

static void zp_print(void *user, const char *line) {
    (void)user;
    printf("%s\n", line);
}

int main(int argc, char **argv) {
    int require = argc == 2 && strcmp(argv[1], "--require-gpu") == 0;
    if (argc > 1 && !require) {
        fprintf(stderr, "usage: zcprobe [--require-gpu]\n");
        return 2;
    }
    zc_config cfg;
    zc_config_default(&cfg);
    if (zc_config_from_env(&cfg) != ZC_OK) {
        fprintf(stderr, "zcprobe: %s\n", cfg.error_text);
        return 2;
    }
    zc_status st = zc_device_report(&cfg, zp_print, NULL);
    fflush(stdout);
    return require && st != ZC_OK ? 1 : 0;
}
