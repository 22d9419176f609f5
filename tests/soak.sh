#!/usr/bin/env bash
# tests/soak.sh [SECONDS] [RANKS]: `ninja soak`. Random collectives (every kind, dtype and op,
# counts up to 1M elements, roots, in place, up to 8 calls in flight) on RANKS local ranks
# (default 4) for SECONDS (default $SOAK_SECONDS, else 600) through zcrun, every element of
# every result checked against the reference; each rank samples its resident set and open
# descriptors once a second and fails on growth after the warm-up (test_mp.c's MP_SOAK).
# Exits non-zero on any wrong element, failure or drift.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-${SOAK_SECONDS:-600}}
ranks=${2:-4}
echo "soak: $ranks ranks, $secs s (ZT_SEED=${ZT_SEED:-default})"
MP_SOAK=1 MP_BATCHES=1000000000 MP_MAX_COUNT=1048576 MP_BUDGET_MS=$((secs * 1000)) \
    build/zcrun -n "$ranks" --timeout $((secs + 120)) build/zctest --rank mp_rank_sweep
rc=$?
if [ "$rc" -eq 0 ]; then echo "soak: passed"; else echo "soak: FAILED (exit $rc)"; fi
exit "$rc"
