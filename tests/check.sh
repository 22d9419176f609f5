#!/usr/bin/env bash
# tests/check.sh [--ib]: the whole test suite, as CI and README's test command run it (`ninja
# check` runs it once the static checks passed, with --ib when configure.py built
# transport_ib): build/zctest (unit, in-process and multi-process tests), then, with --ib, the
# soft-RoCE suite in a QEMU guest (tests/rxe/run.sh), then the zcoll_torch suite
# (tests/python/run.py, when a python3 imports torch), the install test (tests/install/run.sh)
# and the launcher tests (tests/launchers/run.sh). Prints both runners' output and then one combined final line
# `N passed, N failed, N skipped`; exits non-zero if either runner failed.
#   ZC_CHECK_RXE=0 leaves the guest suite out (it is then counted as one skipped test).
set -uo pipefail
cd "$(dirname "$0")/.."

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

echo "=== check: build/zctest ==="
build/zctest 2>&1 | tee "$LOG/zctest"
[ "${PIPESTATUS[0]}" -eq 0 ] || RC=1
tally "$LOG/zctest" build/zctest

if [ "${1:-}" = --ib ]; then
    if [ "${ZC_CHECK_RXE:-1}" = 0 ]; then
        echo "=== check: soft-RoCE suite left out (ZC_CHECK_RXE=0) ==="
        S=$((S + 1))
    else
        echo "=== check: tests/rxe/run.sh (transport_ib on soft-RoCE in a QEMU guest) ==="
        bash tests/rxe/run.sh 2>&1 | tee "$LOG/rxe"
        [ "${PIPESTATUS[0]}" -eq 0 ] || RC=1
        tally "$LOG/rxe" tests/rxe/run.sh
    fi
else
    echo "=== check: no transport_ib in this build: soft-RoCE suite skipped ==="
    S=$((S + 1))
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
    echo "=== check: tests/python/run.py (zcoll_torch with $TORCH_PY) ==="
    "$TORCH_PY" tests/python/run.py 2>&1 | tee "$LOG/python"
    [ "${PIPESTATUS[0]}" -eq 0 ] || RC=1
    tally "$LOG/python" tests/python/run.py
else
    echo "=== check: no python3 with torch (apt-get install python3-torch): zcoll_torch suite skipped ==="
    S=$((S + 1))
fi

# Install tree (ninja install into a DESTDIR) used through pkg-config only; real launchers.
for suite in tests/install/run.sh tests/launchers/run.sh; do
    [ -f "$suite" ] || continue
    echo "=== check: $suite ==="
    bash "$suite" 2>&1 | tee "$LOG/$(basename "$(dirname "$suite")")"
    [ "${PIPESTATUS[0]}" -eq 0 ] || RC=1
    tally "$LOG/$(basename "$(dirname "$suite")")" "$suite"
done

[ "$F" -eq 0 ] || RC=1
echo "$P passed, $F failed, $S skipped"
exit "$RC"
