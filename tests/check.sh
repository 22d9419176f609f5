#!/usr/bin/env bash
# tests/check.sh [--ib] [--baremetal]: the whole test suite, as CI and README's test command
# run it (`ninja check` runs it once the static checks passed, with --ib when configure.py built
# transport_ib, --baremetal when it built the bare-metal aarch64 image): build/zctest (unit,
# in-process and multi-process tests); build/zcgputest on the simulated device (tests/gpu); the
# same zctest built by clang and under ThreadSanitizer, the fault-injection build (every
# platform call failed in turn), and the fuzz targets' corpus replay and fixed-seed pass, when
# clang is installed (tests/variants.sh, tests/fuzz/run.sh check); then, with --ib, the
# soft-RoCE suite in a QEMU guest (tests/rxe/run.sh) and the two-guest suite (tests/rxe/hosts.sh:
# two soft-RoCE guests on a virtual wire, cut, lossy, a guest killed); then, with --baremetal,
# the image booted with no OS (tests/baremetal/run.sh); then the zcoll_torch suite
# (tests/python/run.py, when a python3 imports torch) and torch's own distributed tests under
# gloo and zcoll (tests/python/torch_suite.py), the build-tree and install test
# (tests/install/run.sh) and the launcher tests
# (tests/launchers/run.sh). Prints the runners' output and then one combined final line
# `N passed, N failed, N skipped`; exits non-zero if any runner failed.
#   ZC_CHECK_RXE=0 leaves both guest suites out (each is then counted as one skipped test),
#   ZC_CHECK_RXE2=0 the two-guest suite alone;
#   ZC_CHECK_VARIANTS=0 the clang, TSan and faults builds and the fuzz pass (four skipped).
set -uo pipefail
cd "$(dirname "$0")/.."

IB=0 BAREMETAL=0
for arg in "$@"; do
    case "$arg" in
    --ib) IB=1 ;;
    --baremetal) BAREMETAL=1 ;;
    esac
done

P=0 F=0 S=0 RC=0
# Adds the counts of a runner's final `N passed, N failed[, N skipped]` line.
tally() {
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
    if [ -z "$line" ]; then
        echo "check.sh: $2 printed no summary line" >&2
        F=$((F + 1))
        return
    fi
    local p f s
    p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
    s=$(sed -nE 's/.*, ([0-9]+) skipped.*/\1/p' <<<"$line")
    P=$((P + p)) F=$((F + f)) S=$((S + ${s:-0}))
}

LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT

# Runs one runner (a command) under a title, shows its output and tallies its summary line.
RUNS=0
run() {
    local title=$1 log
    shift
    RUNS=$((RUNS + 1))
    log="$LOG/$RUNS"
    echo "=== check: $title ==="
    "$@" 2>&1 | tee "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || RC=1
    tally "$log" "$title"
}

# A runner left out: one skipped test, and the reason.
leave_out() {
    echo "=== check: $1 ==="
    S=$((S + 1))
}

run "build/zctest" build/zctest
# The device-memory suite on the simulated device (gpu/sim.c; every build): every device
# schedule at 1, 2 and 4 ranks, stream forms, an injected fault. `ninja check-gpu` runs it on
# CUDA.
run "build/zcgputest on the simulated device" env ZC_GPU_PROVIDER=sim build/zcgputest

# The same tests built by clang and under ThreadSanitizer (about 5 minutes on 2 cores), every
# platform call failed in turn, and every fuzz target's corpus and fixed-seed pass (the same
# inputs on every run: open-ended exploration is `ninja fuzz`'s).
if command -v clang >/dev/null 2>&1 && [ "${ZC_CHECK_VARIANTS:-1}" != 0 ]; then
    run "build/zctest built by clang (tests/variants.sh)" bash tests/variants.sh clang "--cc clang"
    run "build/zctest under ThreadSanitizer (tests/variants.sh)" \
        bash tests/variants.sh tsan "--cc clang --mode tsan"
    run "every platform call failed in turn (tests/variants.sh faults)" \
        bash tests/variants.sh faults "--mode faults" faults_
    run "every fuzz target: its corpus replayed, then a fixed-seed pass (tests/fuzz/run.sh check)" \
        bash tests/fuzz/run.sh check
else
    for what in "clang build" "ThreadSanitizer build" "fault injection" "fuzz pass"; do
        leave_out "$what skipped (no clang, or ZC_CHECK_VARIANTS=0)"
    done
fi

if [ "$IB" = 0 ]; then
    leave_out "no transport_ib in this build: soft-RoCE suite skipped"
    leave_out "no transport_ib in this build: two-guest soft-RoCE suite skipped"
elif [ "${ZC_CHECK_RXE:-1}" = 0 ]; then
    leave_out "soft-RoCE suite left out (ZC_CHECK_RXE=0)"
    leave_out "two-guest soft-RoCE suite left out (ZC_CHECK_RXE=0)"
else
    run "tests/rxe/run.sh (transport_ib on soft-RoCE in a QEMU guest)" bash tests/rxe/run.sh
    if [ "${ZC_CHECK_RXE2:-1}" = 0 ]; then
        leave_out "two-guest soft-RoCE suite left out (ZC_CHECK_RXE2=0)"
    else
        run "tests/rxe/hosts.sh (two soft-RoCE guests on a virtual wire)" bash tests/rxe/hosts.sh
    fi
fi

if [ "$BAREMETAL" = 1 ]; then
    run "tests/baremetal/run.sh (the core on aarch64 with no OS, in QEMU)" \
        bash tests/baremetal/run.sh
else
    leave_out "no bare-metal image in this build (configure.py: baremetal: no): skipped"
fi

# The zcoll_torch suite (backend "zcoll" of torch.distributed) with the first python3 that
# imports torch (Debian's python3-torch lives in /usr/bin/python3); one skipped test without.
TORCH_PY=""
for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null && "$py" -c 'import torch' 2>/dev/null; then
        TORCH_PY=$py
        break
    fi
done
if [ -n "$TORCH_PY" ]; then
    run "tests/python/run.py (zcoll_torch with $TORCH_PY)" "$TORCH_PY" tests/python/run.py
    # PyTorch's own distributed test class under gloo and zcoll side by side (about 5 minutes).
    run "tests/python/torch_suite.py (torch's DistributedTest under gloo and zcoll)" \
        "$TORCH_PY" tests/python/torch_suite.py
else
    leave_out "no python3 with torch (apt-get install python3-torch): zcoll_torch suite skipped"
fi

# The build tree and an install tree (ninja install into a DESTDIR) used as outside programs use
# them; real launchers.
run "tests/install/run.sh" bash tests/install/run.sh
run "tests/launchers/run.sh" bash tests/launchers/run.sh

[ "$F" -eq 0 ] || RC=1
echo "$P passed, $F failed, $S skipped"
exit "$RC"
