#!/usr/bin/env bash
# tests/baremetal/run.sh [IMAGE]: boots the bare-metal aarch64 image (default
# build/baremetal/zcoll.elf, built by `ninja check-baremetal`) in QEMU's `virt` machine with no
# firmware and no OS (`-kernel`, semihosting for the exit status), two Cortex-A53 cores run by
# multi-threaded TCG (one host thread each, so the two-core part is truly concurrent), and
# prints its UART output. The image prints `N passed, N failed` and exits with 0 when none
# failed; this script then prints the same counts (plus `0 skipped`) and the boot-to-done wall
# time, and exits non-zero on a failure, a missing summary line, a non-zero exit or a hang.
#   ZC_BAREMETAL_TIMEOUT: seconds before the emulator is killed (default 120).
set -uo pipefail
cd "$(dirname "$0")/../.."

IMAGE=${1:-build/baremetal/zcoll.elf}
if ! command -v qemu-system-aarch64 >/dev/null; then
    echo "baremetal: qemu-system-aarch64 not found: apt-get install qemu-system-arm"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT

START=$(date +%s%N)
timeout "${ZC_BAREMETAL_TIMEOUT:-120}" qemu-system-aarch64 -M virt -cpu cortex-a53 -smp 2 \
    -accel tcg,thread=multi \
    -m 128M -nographic -monitor none -serial stdio -nic none -semihosting -no-reboot \
    -kernel "$IMAGE" </dev/null 2>&1 | tr -d '\r' | tee "$LOG"
RC=${PIPESTATUS[0]}
MS=$((($(date +%s%N) - START) / 1000000))

LINE=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$LOG" | tail -1)
if [ -z "$LINE" ]; then
    echo "baremetal: the image printed no summary line (emulator exit $RC after $MS ms)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
P=${LINE%% passed*}
F=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed$/\1/' <<<"$LINE")
if [ "$RC" -ne 0 ] && [ "$F" -eq 0 ]; then
    F=1 # a clean summary but a bad exit (a fault or panic after it, or the timeout)
fi
echo "baremetal: emulator exit $RC, boot to exit $MS ms (wall, QEMU TCG)"
echo "$P passed, $F failed, 0 skipped"
[ "$F" -eq 0 ]
