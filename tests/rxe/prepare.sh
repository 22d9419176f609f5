# tests/rxe/prepare.sh: what the soft-RoCE guests share, sourced by tests/rxe/run.sh (one guest)
# and tests/rxe/hosts.sh (two guests on a virtual wire). Defines:
#   rxe_packages         checks the host's packages; installs the missing ones as root with
#                        INSTALL=1, otherwise names them and stops
#   rxe_kernel           the newest linux-image-6.1.0-N-amd64 apt offers, fetched with
#                        `apt-get download` into build/rxe/kernel/ once; sets KX (the kernel and
#                        the modules below, decompressed, with their load order) and KNAME
#   rxe_fill_root R      the initramfs tree in R: busybox, the modules, rdma-core's userspace
#                        with the rxe provider, ip, rdma and tc from iproute2, the build's
#                        programs and the ldd closure of each, tests/rxe/init and the suite
#   rxe_pack R OUT       R as a gzipped cpio archive
# The caller sets W (build/rxe), INSTALL (1: apt-get may install) and TAG (its name, for the
# messages), and runs from the top of the tree.

MA=x86_64-linux-gnu
# The guest's kernel modules, each loaded after the ones its modinfo "depends=" names:
# crc32_generic first (rxe's crc32 shash, which no "depends=" names), rdma_rxe and its
# stack, dummy (the one-guest netdev), virtio_pci and virtio_net (the two-guest wire),
# sch_netem (tc netem on that wire) and virtio_console (the two-guest control channel).
RXE_MODULES="crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe dummy \
virtio_pci virtio_net sch_netem virtio_console"

say() { echo "$TAG: $*"; }
die() { echo "$TAG: $*" >&2; exit 1; }

# rxe_args EXTRA ARGS...: the command line both runners take: --timeout S, --smp N, --mem MB,
# --no-install, -h/--help (the caller's usage), --, and name prefixes (into PREFIXES); any
# other option goes to the function EXTRA, which sets USED to how many arguments it took (0:
# none, an unknown option).
rxe_args() {
    local extra=$1
    shift
    while [ $# -gt 0 ]; do
        case $1 in
        --timeout) [ $# -ge 2 ] || usage; TIMEOUT=$2; shift 2 ;;
        --smp) [ $# -ge 2 ] || usage; SMP=$2; shift 2 ;;
        --mem) [ $# -ge 2 ] || usage; MEM=$2; shift 2 ;;
        --no-install) INSTALL=0; shift ;;
        -h|--help) usage 0 ;;
        --) shift; PREFIXES+=("$@"); break ;;
        -*)
            USED=0
            "$extra" "$@"
            [ "$USED" -gt 0 ] || { echo "$TAG: unknown option $1" >&2; usage; }
            shift "$USED"
            ;;
        *) PREFIXES+=("$1"); shift ;;
        esac
    done
}

# ---- host packages ---------------------------------------------------------------------------
rxe_missing_pkgs() {
    local m=""
    command -v qemu-system-x86_64 >/dev/null || m+=" qemu-system-x86"
    # The guest has no other libc to offer busybox, so it must be the static one.
    { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || m+=" busybox-static"
    command -v ibv_devinfo >/dev/null || m+=" ibverbs-utils"
    { ls /usr/lib/$MA/libibverbs/librxe-rdmav*.so && [ -f /etc/libibverbs.d/rxe.driver ]; } \
        >/dev/null 2>&1 || m+=" ibverbs-providers"
    { command -v rdma && command -v ip && command -v tc; } >/dev/null || m+=" iproute2"
    command -v cc >/dev/null || m+=" build-essential"
    echo "$m"
}
APT_UPDATED=0
rxe_apt_update() {
    [ "$APT_UPDATED" = 0 ] || return 0
    say "apt-get update"
    apt-get update -qq || die "apt-get update failed"
    APT_UPDATED=1
}
rxe_packages() {
    [ "$(uname -m)" = x86_64 ] || die "needs an x86_64 Debian host (this is $(uname -m))"
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
        die "needs Debian's apt-get and dpkg-deb (Debian 12 amd64)"
    local missing
    missing=$(rxe_missing_pkgs)
    [ -n "$missing" ] || return 0
    if [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ]; then
        say "installing:$missing"
        rxe_apt_update
        say "apt-get install -y --no-install-recommends$missing"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing \
            >"$W/apt-install.log" 2>&1 ||
            { cat "$W/apt-install.log"; die "apt-get install failed"; }
        missing=$(rxe_missing_pkgs)
        [ -z "$missing" ] || die "still missing after apt-get install:$missing"
    else
        die "missing:$missing. As root: apt-get install --no-install-recommends$missing"
    fi
}

# ---- the kernel: the newest linux-image-6.1.0-N-amd64 apt offers, cached --------------------
rxe_newest_kernel_pkg() {
    apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
        awk '{print $1}' | sort -V | tail -n 1
}
rxe_fetch_kernel() { # PKG: sets DEB to the package file, downloading it unless cached
    local kver
    kver=$(apt-cache policy "$1" | awk '/Candidate:/ {print $2}')
    DEB=$(ls "$KDIR/${1}_${kver//:/%3a}_amd64.deb" 2>/dev/null || true)
    [ -z "$DEB" ] || return 0
    say "apt-get download $1 ($kver)"
    (cd "$KDIR" && apt-get download -q "$1" >../apt-download.log 2>&1) || return 1
    DEB=$(ls -t "$KDIR/${1}"_*_amd64.deb | head -n 1)
}
# Appends NAME's dependencies and NAME to $KX.tmp/load-order, once each, decompressing the
# modules into $KX.tmp/modules.
rxe_add_module() {
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
        rxe_add_module "${d//-/_}"
    done
    echo "$name" >>"$KX.tmp/load-order"
}
rxe_kernel() {
    local kpkg old
    KDIR=$W/kernel
    mkdir -p "$KDIR"
    # Runs may overlap (a debugging --cmd next to `ninja test-rxe`): one at a time fetches and
    # extracts; each run has its own initramfs folder, build/rxe/run.PID, removed at exit.
    exec 9>"$W/kernel.lock"
    flock 9
    kpkg=$(rxe_newest_kernel_pkg)
    if [ -z "$kpkg" ] && ! ls "$KDIR"/linux-image-6.1.0-*-amd64_*.deb >/dev/null 2>&1 &&
        [ "$(id -u)" = 0 ] && [ "$INSTALL" = 1 ]; then
        rxe_apt_update
        kpkg=$(rxe_newest_kernel_pkg)
    fi
    if [ -n "$kpkg" ]; then
        if ! rxe_fetch_kernel "$kpkg"; then
            # Old lists name a package the mirror no longer has: update them once and retry.
            [ "$(id -u)" = 0 ] && [ "$INSTALL" = 1 ] && [ "$APT_UPDATED" = 0 ] || {
                cat "$W/apt-download.log"; die "apt-get download $kpkg failed"; }
            rxe_apt_update
            kpkg=$(rxe_newest_kernel_pkg)
            rxe_fetch_kernel "$kpkg" ||
                { cat "$W/apt-download.log"; die "apt-get download $kpkg failed"; }
        fi
    else
        # No apt lists (or no 6.1 kernel in them): the newest package downloaded before.
        DEB=$(ls "$KDIR"/linux-image-6.1.0-*-amd64_*.deb 2>/dev/null | sort -V | tail -n 1 ||
              true)
        [ -n "$DEB" ] || die "apt offers no linux-image-6.1.0-N-amd64 (apt-get update?)" \
            "and none is cached in $KDIR"
        say "apt offers no 6.1 kernel image; using the cached $(basename "$DEB")"
    fi
    KNAME=$(basename "$DEB" .deb)
    KX=$KDIR/$KNAME # vmlinuz, modules/*.ko (uncompressed), load-order, done
    # "done" names the package and the module list it was extracted for.
    if [ "$(cat "$KX/done" 2>/dev/null)" != "$KNAME: $RXE_MODULES" ]; then
        say "extracting the kernel and the guest's modules from $(basename "$DEB")"
        rm -rf "$KX" "$KX.tmp"
        mkdir -p "$KX.tmp/x" "$KX.tmp/modules"
        # One pass over the package: the kernel, modules.builtin and the folders that hold the
        # modules and their dependencies. (The package has no modules.dep: depmod writes it at
        # install time. The dependencies come from each module's modinfo.)
        dpkg-deb --fsys-tarfile "$DEB" | tar -x -C "$KX.tmp/x" --wildcards \
            './boot/vmlinuz-*' '*/modules/*/modules.builtin' \
            '*/modules/*/kernel/drivers/infiniband/*' '*/modules/*/kernel/net/*' \
            '*/modules/*/kernel/crypto/*' '*/modules/*/kernel/lib/*' \
            '*/modules/*/kernel/drivers/net/dummy.ko*' \
            '*/modules/*/kernel/drivers/net/virtio_net.ko*' \
            '*/modules/*/kernel/drivers/net/net_failover.ko*' \
            '*/modules/*/kernel/drivers/virtio/*' \
            '*/modules/*/kernel/drivers/char/virtio_console.ko*'
        : >"$KX.tmp/load-order"
        for m in $RXE_MODULES; do rxe_add_module "$m"; done
        cp "$(ls "$KX.tmp/x"/boot/vmlinuz-* | head -n 1)" "$KX.tmp/vmlinuz"
        rm -rf "$KX.tmp/x"
        echo "$KNAME: $RXE_MODULES" >"$KX.tmp/done"
        mv "$KX.tmp" "$KX"
        # Older kernels' packages and trees are not needed any more.
        for old in "$KDIR"/linux-image-*; do
            case $old in "$KX"|"$DEB") ;; *) rm -rf "$old" ;; esac
        done
    fi
    flock -u 9
}

# ---- the initramfs ---------------------------------------------------------------------------
rxe_check_build() {
    for f in build/zctest build/zcrun; do
        [ -x "$f" ] || die "$f is missing: run ./configure.py && ninja first"
    done
    grep -q -- '-DZC_HAVE_IB=1' build.ninja 2>/dev/null ||
        die "this build has no transport_ib (configure.py found no libibverbs):" \
            "apt-get install libibverbs-dev, then ./configure.py && ninja $TAG"
    # The wrong-rkey shim (tests/rxe/bad_rkey.c) is built here, outside the library's build.
    if [ ! -f "$W/bad_rkey.so" ] || [ tests/rxe/bad_rkey.c -nt "$W/bad_rkey.so" ]; then
        cc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -o "$W/bad_rkey.so" \
            tests/rxe/bad_rkey.c -ldl || die "cannot build tests/rxe/bad_rkey.c"
    fi
}
rxe_copy_file() { # R PATH: copies PATH (symlinks followed) to the same path under R
    local dst=$1$2
    [ -e "$dst" ] && return 0
    mkdir -p "$(dirname "$dst")"
    cp -L "$2" "$dst"
}
rxe_copy_with_libs() { # R FILE [GUEST_PATH]: copies FILE and the libraries ldd says it needs
    local r=$1 src=$2 dst=${3:-$2} l
    mkdir -p "$(dirname "$r$dst")"
    cp -L "$src" "$r$dst"
    # ldd lines: "libx.so.1 => /lib/.../libx.so.1 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)"
    for l in $(ldd "$src" 2>/dev/null | awk '/=> \// {print $3} /^\t\// {print $1}'); do
        rxe_copy_file "$r" "$l"
    done
}
rxe_fill_root() { # R
    local R=$1 b p a
    rxe_check_build
    mkdir -p "$R"/usr/bin "$R"/usr/sbin "$R/usr/lib/$MA" "$R"/usr/lib64 "$R"/lib/modules \
        "$R"/etc/libibverbs.d "$R"/proc "$R"/sys "$R"/dev "$R"/tmp "$R"/run "$R"/root \
        "$R"/zc/build "$R"/zc/lib
    # Debian 12's merged /usr: /bin, /sbin, /lib64 point into /usr (so ldd's /lib paths work).
    ln -s usr/bin "$R/bin"; ln -s usr/sbin "$R/sbin"; ln -s usr/lib64 "$R/lib64"
    ln -s ../usr/lib/$MA "$R/lib/$MA"
    cp /bin/busybox "$R/usr/bin/busybox"
    for b in ibv_devinfo ibv_devices ibv_rc_pingpong rdma ip tc; do
        rxe_copy_with_libs "$R" "$(command -v $b)" "/usr/bin/$b"
    done
    # tc netem's delay distributions (tc reads them for "distribution NAME").
    for p in /usr/lib/$MA/tc/*.dist; do [ -e "$p" ] && rxe_copy_file "$R" "$p"; done
    for p in /usr/lib/$MA/libibverbs/librxe-rdmav*.so; do rxe_copy_with_libs "$R" "$p"; done
    cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
    for b in zctest zcrun zcbench zcgputest libzcoll.so; do
        [ -e "build/$b" ] && rxe_copy_with_libs "$R" "build/$b" "/zc/build/$b"
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
    cp tests/rxe/hosts_guest.sh "$R/zc/hosts_guest.sh"
    chmod 755 "$R/init"
    echo "root:x:0:0:root:/root:/bin/sh" >"$R/etc/passwd"
    echo "root:x:0:" >"$R/etc/group"
}
rxe_pack() { # R OUT
    (cd "$1" && find . | LC_ALL=C sort | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1) \
        >"$2"
}
