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
# ip and busybox (unshare, timeout, ...), plus /zc/lib/bad_rkey.so, built from
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
while [ $# -gt 0 ]; do
    case $1 in
    --cmd) [ $# -ge 2 ] || usage; MODE=cmd CMD=$2; shift 2 ;;
    --cmd=*) MODE=cmd CMD=${1#--cmd=}; shift ;;
    --list) MODE=list; shift ;;
    --timeout) [ $# -ge 2 ] || usage; TIMEOUT=$2; shift 2 ;;
    --smp) [ $# -ge 2 ] || usage; SMP=$2; shift 2 ;;
    --mem) [ $# -ge 2 ] || usage; MEM=$2; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --kernel-log) KLOG=1; shift ;;
    -h|--help) usage 0 ;;
    --) shift; PREFIXES+=("$@"); break ;;
    -*) echo "test-rxe: unknown option $1" >&2; usage ;;
    *) PREFIXES+=("$1"); shift ;;
    esac
done
if [ "$MODE" = list ]; then
    sed -n 's/^ *run_test \([^ ]*\) .*/\1/p' tests/rxe/suite.sh | sed '/^zcrun_passes/q'
    # run_zctest_group ib_: build/zctest's ib_ tests, as zctest/NAME
    [ ! -x build/zctest ] || build/zctest --list | sed -n 's|^ib_|zctest/ib_|p'
    sed -n 's/^ *run_test \([^ ]*\) .*/\1/p' tests/rxe/suite.sh | sed '1,/^zcrun_passes/d'
    exit 0
fi
[ -n "$TIMEOUT" ] || { [ "$MODE" = cmd ] && TIMEOUT=600 || TIMEOUT=1200; }
if [ -z "$SMP" ]; then SMP=$(nproc); [ "$SMP" -le 4 ] || SMP=4; fi

say() { echo "test-rxe: $*"; }
die() { echo "test-rxe: $*" >&2; exit 1; }
mkdir -p "$W"

# ---- 1. host packages ----------------------------------------------------------------------
[ "$(uname -m)" = x86_64 ] || die "needs an x86_64 Debian host (this is $(uname -m))"
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
    die "needs Debian's apt-get and dpkg-deb (Debian 12 amd64)"
MA=x86_64-linux-gnu
missing_pkgs() {
    local m=""
    command -v qemu-system-x86_64 >/dev/null || m+=" qemu-system-x86"
    # The guest has no other libc to offer busybox, so it must be the static one.
    { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || m+=" busybox-static"
    command -v ibv_devinfo >/dev/null || m+=" ibverbs-utils"
    { ls /usr/lib/$MA/libibverbs/librxe-rdmav*.so && [ -f /etc/libibverbs.d/rxe.driver ]; } \
        >/dev/null 2>&1 || m+=" ibverbs-providers"
    { command -v rdma && command -v ip; } >/dev/null || m+=" iproute2"
    command -v cc >/dev/null || m+=" build-essential"
    echo "$m"
}
APT_UPDATED=0
apt_update() {
    [ "$APT_UPDATED" = 0 ] || return 0
    say "apt-get update"
    apt-get update -qq || die "apt-get update failed"
    APT_UPDATED=1
}
MISSING=$(missing_pkgs)
if [ -n "$MISSING" ]; then
    if [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ]; then
        say "installing:$MISSING"
        apt_update
        say "apt-get install -y --no-install-recommends$MISSING"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $MISSING \
            >"$W/apt-install.log" 2>&1 ||
            { cat "$W/apt-install.log"; die "apt-get install failed"; }
        MISSING=$(missing_pkgs)
        [ -z "$MISSING" ] || die "still missing after apt-get install:$MISSING"
    else
        die "missing:$MISSING. As root: apt-get install --no-install-recommends$MISSING"
    fi
fi

# ---- 2. the kernel: the newest linux-image-6.1.0-N-amd64 apt offers, cached ---------------
newest_kernel_pkg() {
    apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
        awk '{print $1}' | sort -V | tail -n 1
}
KDIR=$W/kernel
mkdir -p "$KDIR"
# Runs may overlap (a debugging --cmd next to `ninja test-rxe`): one at a time fetches and
# extracts; each run has its own initramfs folder, build/rxe/run.PID, removed at exit.
exec 9>"$W/kernel.lock"
flock 9
KPKG=$(newest_kernel_pkg)
if [ -z "$KPKG" ] && ! ls "$KDIR"/linux-image-6.1.0-*-amd64_*.deb >/dev/null 2>&1 &&
    [ "$(id -u)" = 0 ] && [ "$INSTALL" = 1 ]; then
    apt_update
    KPKG=$(newest_kernel_pkg)
fi
fetch_kernel() { # KPKG: sets DEB to the package file, downloading it unless cached
    local kver
    kver=$(apt-cache policy "$1" | awk '/Candidate:/ {print $2}')
    DEB=$(ls "$KDIR/${1}_${kver//:/%3a}_amd64.deb" 2>/dev/null || true)
    [ -z "$DEB" ] || return 0
    say "apt-get download $1 ($kver)"
    (cd "$KDIR" && apt-get download -q "$1" >../apt-download.log 2>&1) || return 1
    DEB=$(ls -t "$KDIR/${1}"_*_amd64.deb | head -n 1)
}
if [ -n "$KPKG" ]; then
    if ! fetch_kernel "$KPKG"; then
        # Old lists name a package the mirror no longer has: update them once and retry.
        [ "$(id -u)" = 0 ] && [ "$INSTALL" = 1 ] && [ "$APT_UPDATED" = 0 ] || {
            cat "$W/apt-download.log"; die "apt-get download $KPKG failed"; }
        apt_update
        KPKG=$(newest_kernel_pkg)
        fetch_kernel "$KPKG" || { cat "$W/apt-download.log"; die "apt-get download $KPKG failed"; }
    fi
else
    # No apt lists (or no 6.1 kernel in them): the newest package downloaded before.
    DEB=$(ls "$KDIR"/linux-image-6.1.0-*-amd64_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$DEB" ] || die "apt offers no linux-image-6.1.0-N-amd64 (apt-get update?)" \
        "and none is cached in $KDIR"
    say "apt offers no 6.1 kernel image; using the cached $(basename "$DEB")"
fi
KNAME=$(basename "$DEB" .deb)
KX=$KDIR/$KNAME   # vmlinuz, modules/*.ko (uncompressed), load-order
if [ ! -f "$KX/done" ]; then
    say "extracting the kernel and rdma_rxe's modules from $(basename "$DEB")"
    rm -rf "$KX" "$KX.tmp"
    mkdir -p "$KX.tmp/x" "$KX.tmp/modules"
    # One pass over the package: the kernel, modules.builtin and the folders that hold
    # rdma_rxe, its dependencies, crc32_generic and dummy. (The package has no modules.dep:
    # depmod writes it at install time. The dependencies come from each module's modinfo.)
    dpkg-deb --fsys-tarfile "$DEB" | tar -x -C "$KX.tmp/x" --wildcards \
        './boot/vmlinuz-*' '*/modules/*/modules.builtin' \
        '*/modules/*/kernel/drivers/infiniband/*' '*/modules/*/kernel/net/*' \
        '*/modules/*/kernel/crypto/*' '*/modules/*/kernel/lib/*' \
        '*/modules/*/kernel/drivers/net/dummy.ko*'
    # Load order: crc32_generic first (rxe's crc32 shash, which no "depends=" names), then
    # each wanted module after the modules its "depends=" names. Built-in ones are left out.
    : >"$KX.tmp/load-order"
    add_module() { # NAME: appends NAME's dependencies and NAME to load-order, once each
        local name=$1 path d
        grep -qx "$name" "$KX.tmp/load-order" && return 0
        # File names use - or _ either way; module names use _.
        path=$(find "$KX.tmp/x" -name '*.ko*' | awk -v n="$name" '{ f = $0; sub(/.*\//, "", f)
            sub(/\.ko.*/, "", f); gsub(/-/, "_", f); if (f == n && !done) { print; done = 1 } }')
        if [ -z "$path" ]; then
            grep -q "/${name//_/[-_]}\.ko" "$KX.tmp"/x/*/modules/*/modules.builtin \
                "$KX.tmp"/x/*/*/modules/*/modules.builtin 2>/dev/null && return 0
            die "kernel module $name is neither in the extracted folders nor built in ($DEB)"
        fi
        case $path in
        *.ko) cp "$path" "$KX.tmp/modules/$name.ko" ;;
        *.ko.xz) xz -dc "$path" >"$KX.tmp/modules/$name.ko" ;;
        *.ko.zst) zstd -qdc "$path" >"$KX.tmp/modules/$name.ko" ;;
        *.ko.gz) gzip -dc "$path" >"$KX.tmp/modules/$name.ko" ;;
        *) die "unknown module compression: $path" ;;
        esac
        # .modinfo holds NUL-separated key=value strings, "depends=a,b" among them.
        for d in $(tr '\0' '\n' <"$KX.tmp/modules/$name.ko" |
                   sed -n 's/^depends=//p' | tr ',' ' '); do
            add_module "${d//-/_}"
        done
        echo "$name" >>"$KX.tmp/load-order"
    }
    for m in crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe dummy; do
        add_module "$m"
    done
    cp "$(ls "$KX.tmp/x"/boot/vmlinuz-* | head -n 1)" "$KX.tmp/vmlinuz"
    rm -rf "$KX.tmp/x"
    echo "$KNAME" >"$KX.tmp/done"
    mv "$KX.tmp" "$KX"
    # Older kernels' packages and trees are not needed any more.
    for old in "$KDIR"/linux-image-*; do
        case $old in "$KX"|"$DEB") ;; *) rm -rf "$old" ;; esac
    done
fi

flock -u 9

# ---- 3. the initramfs ------------------------------------------------------------------------
for f in build/zctest build/zcrun; do
    [ -x "$f" ] || die "$f is missing: run ./configure.py && ninja first"
done
grep -q -- '-DZC_HAVE_IB=1' build.ninja 2>/dev/null ||
    die "this build has no transport_ib (configure.py found no libibverbs):" \
        "apt-get install libibverbs-dev, then ./configure.py && ninja test-rxe"
# The wrong-rkey shim (tests/rxe/bad_rkey.c) is built here, outside the library's build.
if [ ! -f "$W/bad_rkey.so" ] || [ tests/rxe/bad_rkey.c -nt "$W/bad_rkey.so" ]; then
    cc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -o "$W/bad_rkey.so" \
        tests/rxe/bad_rkey.c -ldl || die "cannot build tests/rxe/bad_rkey.c"
fi

RUN=$W/run.$$
R=$RUN/root
trap 'rm -rf "$RUN"' EXIT
rm -rf "$RUN"
mkdir -p "$R"/usr/bin "$R"/usr/sbin "$R/usr/lib/$MA" "$R"/usr/lib64 "$R"/lib/modules \
    "$R"/etc/libibverbs.d "$R"/proc "$R"/sys "$R"/dev "$R"/tmp "$R"/run "$R"/root \
    "$R"/zc/build "$R"/zc/lib
# Debian 12's merged /usr: /bin, /sbin, /lib64 point into /usr (so /lib/... paths from ldd work).
ln -s usr/bin "$R/bin"; ln -s usr/sbin "$R/sbin"; ln -s usr/lib64 "$R/lib64"
ln -s ../usr/lib/$MA "$R/lib/$MA"
copy_file() { # PATH: copies PATH (symlinks followed) to the same path in the guest
    local dst=$R$1
    [ -e "$dst" ] && return 0
    mkdir -p "$(dirname "$dst")"
    cp -L "$1" "$dst"
}
copy_with_libs() { # FILE [GUEST_PATH]: copies FILE and the libraries ldd says it needs
    local src=$1 dst=${2:-$1}
    mkdir -p "$(dirname "$R$dst")"
    cp -L "$src" "$R$dst"
    # ldd lines: "libx.so.1 => /lib/.../libx.so.1 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)"
    local l
    for l in $(ldd "$src" 2>/dev/null | awk '/=> \// {print $3} /^\t\// {print $1}'); do
        copy_file "$l"
    done
}
cp /bin/busybox "$R/usr/bin/busybox"
for b in ibv_devinfo ibv_devices ibv_rc_pingpong rdma ip; do
    copy_with_libs "$(command -v $b)" "/usr/bin/$b"
done
for p in /usr/lib/$MA/libibverbs/librxe-rdmav*.so; do copy_with_libs "$p"; done
cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
for b in zctest zcrun zcbench zcgputest libzcoll.so; do
    [ -e "build/$b" ] && copy_with_libs "build/$b" "/zc/build/$b"
done
cp "$W/bad_rkey.so" "$R/zc/lib/bad_rkey.so"
# busybox applets for every name no real program has taken
for a in $(/bin/busybox --list); do
    [ -e "$R/usr/bin/$a" ] || ln -s busybox "$R/usr/bin/$a"
done
cp "$KX"/modules/*.ko "$R/lib/modules/"
cp "$KX/load-order" "$R/lib/modules/load-order"
cp tests/rxe/init "$R/init"
cp tests/rxe/suite.sh "$R/zc/suite.sh"
chmod 755 "$R/init"
echo "root:x:0:0:root:/root:/bin/sh" >"$R/etc/passwd"
echo "root:x:0:" >"$R/etc/group"
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
(cd "$R" && find . | LC_ALL=C sort | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1) \
    >"$RUN/initrd.cpio.gz"
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
