#!/usr/bin/env bash
# tests/rxe/run.sh: transport_ib on real kernel verbs. Boots Debian's stock 6.1 kernel under
# QEMU (TCG, no KVM needed) with an initramfs built here from Debian packages only, creates a
# soft-RoCE device (rdma_rxe) rxe0 on a dummy netdev, and runs the rxe suite (tests/rxe/suite.sh)
# or one command inside the guest. `ninja test-rxe` runs it after building everything.
#
#   tests/rxe/run.sh                  the whole suite; prints one line per test and
#                                     `N passed, N failed, N skipped`; exit 1 on any failure
#   tests/rxe/run.sh PREFIX...        only the suite tests whose names start with a PREFIX
#                                     (e.g. `ib/mp_persistent`, `zctest/ib_` or `rxe_`)
#   tests/rxe/run.sh --list           the suite's test names (no guest)
#   tests/rxe/run.sh --cmd 'COMMAND'  boot, set up rxe0, run COMMAND with sh in the guest and
#                                     print its output; exits with COMMAND's status
#                                     (1 if the guest never ran it)
#
# For debugging transport_ib with --cmd. The guest's working folder is /zc, and build/ of this
# tree is /zc/build: build/zctest, build/zcrun, build/zcbench, and build/libzcoll.so. /zc/build
# is on PATH. The guest has rxe0 on dummy0 (10.9.9.1/24, MTU 1500, so active MTU 1024) with
# GID 0 (fe80::, RoCE v2) and GID 1 (::ffff:10.9.9.1, RoCE v2, the IPv4-mapped one); lo is up
# for the TCP bootstrap. The guest also holds ibv_devinfo, ibv_devices, ibv_rc_pingpong, rdma,
# ip, /usr/bin/tc and busybox (unshare, timeout, ...), plus /zc/lib/bad_rkey.so, built from
# tests/rxe/bad_rkey.c (see there). Nothing else is set (ZT_SEED is passed on when set), so
# name the transport yourself. Examples:
#   tests/rxe/run.sh --cmd 'ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0 build/zctest mp_persistent_plans'
#   tests/rxe/run.sh --cmd 'ZC_TRANSPORT=ib zcrun -n 2 zctest --rank mp_rank_plans; rdma stat'
#   tests/rxe/run.sh --cmd 'ibv_devinfo -v -d rxe0; dmesg | tail'
# Each run rebuilds the initramfs from the current build/ (a second or two), so rebuild with
# `ninja` first. Boot and rxe setup take about 6 s on TCG; the emulated link moves about
# 30 MB/s. Runs may overlap (each has its own build/rxe/run.PID/).
#
# Options:
#   --timeout S    stop the guest after S seconds (default 1200; with --cmd 600)
#   --smp N        guest CPUs (default: the host's, at most 4; TCG runs one thread per CPU)
#   --mem MB       guest memory (default 2048)
#   --no-install   never apt-get install anything; just say what is missing
#   --kernel-log   show the guest kernel's messages on the console (no `quiet`)
#
# What it needs (Debian 12, amd64), installed with apt-get when run as root, otherwise named:
#   apt-get install --no-install-recommends qemu-system-x86 busybox-static ibverbs-utils \
#       ibverbs-providers iproute2
# plus the build's own (build-essential ninja-build python3 libibverbs-dev rdma-core). The
# kernel is the newest linux-image-6.1.0-N-amd64 that apt offers, fetched with
# `apt-get download` into build/rxe/kernel/ and reused from there on later runs (even without
# apt lists). Work files are under build/rxe/; the whole guest console goes to
# build/rxe/guest.log. The guest speaks through its serial console: lines starting with
# "@@rxe: " are markers that this script reads and does not show.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=build/rxe
T0=$(date +%s)

# ---- command line --------------------------------------------------------------------------
MODE=suite CMD="" TIMEOUT="" SMP="" MEM=2048 INSTALL=1 KLOG=0
PREFIXES=()
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
TAG=test-rxe
. tests/rxe/prepare.sh
run_option() {
    case $1 in
    --cmd) [ $# -ge 2 ] || usage; MODE=cmd CMD=$2 USED=2 ;;
    --cmd=*) MODE=cmd CMD=${1#--cmd=} USED=1 ;;
    --list) MODE=list USED=1 ;;
    --kernel-log) KLOG=1 USED=1 ;;
    esac
}
rxe_args run_option "$@"
if [ "$MODE" = list ]; then
    sed -n 's/^ *run_test \([^ ]*\) .*/\1/p' tests/rxe/suite.sh | sed '/^zcrun_passes/q'
    # run_zctest_group ib_: build/zctest's ib_ tests, as zctest/NAME
    [ ! -x build/zctest ] || build/zctest --list | sed -n 's|^ib_|zctest/ib_|p'
    sed -n 's/^ *run_test \([^ ]*\) .*/\1/p' tests/rxe/suite.sh | sed '1,/^zcrun_passes/d'
    exit 0
fi
[ -n "$TIMEOUT" ] || { [ "$MODE" = cmd ] && TIMEOUT=600 || TIMEOUT=1200; }
if [ -z "$SMP" ]; then SMP=$(nproc); [ "$SMP" -le 4 ] || SMP=4; fi

mkdir -p "$W"

# ---- 1. host packages, 2. the kernel (tests/rxe/prepare.sh) ----------------------------------
rxe_packages
rxe_kernel

# ---- 3. the initramfs ------------------------------------------------------------------------
RUN=$W/run.$$
R=$RUN/root
trap 'rm -rf "$RUN"' EXIT
rm -rf "$RUN"
rxe_fill_root "$R"
# The job /init runs after setting up rxe0.
{
    [ -z "${ZT_SEED:-}" ] || printf 'export ZT_SEED=%q\n' "$ZT_SEED"
    if [ "$MODE" = cmd ]; then
        printf '%s\n' "$CMD"
    else
        printf 'exec sh /zc/suite.sh'
        [ ${#PREFIXES[@]} = 0 ] || printf ' %q' "${PREFIXES[@]}"
        echo
    fi
} >"$R/zc/job.sh"
rxe_pack "$R" "$RUN/initrd.cpio.gz"
T1=$(date +%s)
say "guest: $KNAME, initramfs $(( $(stat -c %s "$RUN/initrd.cpio.gz") / 1024 )) KiB," \
    "$SMP CPU(s), ${MEM} MiB, TCG, time limit ${TIMEOUT} s (prepared in $((T1 - T0)) s)"

# ---- 4. boot ---------------------------------------------------------------------------------
APPEND="console=ttyS0 panic=-1 rdinit=/init mitigations=off"
[ "$KLOG" = 1 ] || APPEND+=" quiet"
LOG=$RUN/guest.log # moved to build/rxe/guest.log at the end
# What the console shows of the guest: no markers, nothing between "@@rxe: hide" and
# "@@rxe: show" (the log only), not the kernel's last word.
visible() {
    awk '/^@@rxe: hide/ { h = 1; next } /^@@rxe: show/ { h = 0; next }
         /^@@rxe: / || /^\[ *[0-9.]+\] reboot: Power down/ { next } !h { print; fflush() }'
}
set +e
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 -accel tcg -m "$MEM" -smp "$SMP" \
    -kernel "$KX/vmlinuz" -initrd "$RUN/initrd.cpio.gz" -append "$APPEND" \
    -display none -monitor none -serial stdio -nic none -no-reboot </dev/null 2>&1 |
    tr -d '\r' | tee "$LOG" | visible
QRC=${PIPESTATUS[0]}
set -e
T2=$(date +%s)
mv -f "$LOG" "$W/guest.log"
LOG=$W/guest.log

# ---- 5. results ------------------------------------------------------------------------------
TIMING="guest ran $((T2 - T1)) s, $((T2 - T0)) s in all"
if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
    WHY="the guest did not finish within ${TIMEOUT} s (killed)"
elif ! grep -q '^@@rxe: job-start' "$LOG"; then
    WHY="the guest stopped before the job started (qemu exit $QRC)"
else
    WHY="the guest stopped before the job ended (qemu exit $QRC)"
fi
if [ "$MODE" = cmd ]; then
    RC=$(sed -n 's/^@@rxe: job-exit \([0-9]*\)$/\1/p' "$LOG" | tail -n 1)
    if [ -z "$RC" ]; then
        say "$WHY; console in $LOG"
        exit 1
    fi
    say "command exited with status $RC ($TIMING)"
    exit "$RC"
fi
P=$(grep -c '^@@rxe: result ok ' "$LOG" || true)
F=$(grep -c '^@@rxe: result FAIL ' "$LOG" || true)
S=$(grep -c '^@@rxe: result skip ' "$LOG" || true)
if ! grep -q '^@@rxe: suite-end' "$LOG"; then
    echo "FAIL test-rxe guest: $WHY; the last console lines:"
    visible <"$LOG" | tail -n 20 | sed 's/^/    /'
    F=$((F + 1))
fi
say "$TIMING; console in $LOG"
echo "$P passed, $F failed, $S skipped"
[ "$F" = 0 ]
