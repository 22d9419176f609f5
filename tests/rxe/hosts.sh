#!/usr/bin/env bash
# tests/rxe/hosts.sh: transport_ib between two real kernels. Boots two QEMU guests (TCG) of
# Debian's stock 6.1 kernel with the initramfs of tests/rxe/run.sh (tests/rxe/prepare.sh), each
# with its own soft-RoCE device rxe0 on its own virtio NIC, joined by a virtual Ethernet wire
# that this script controls from the host: QEMU's socket network backend (a TCP stream between
# the two QEMU processes), cut and restored through guest a's QEMU monitor (`set_link`: a's NIC loses
# carrier, b's keeps it and hears nothing, as with a cable pulled between a and a switch).
# Ranks run in both guests, rank 0 (the rendezvous) on a; then the scenarios below: every
# collective and send/recv on host and (simulated) device memory, a lossy link (tc netem in
# the guests), the link cut past the deadline and for less than the retry window, the
# rendezvous unreachable at init, and guest b killed (SIGKILL to its QEMU) mid-call. Each is
# bounded in time and checks every rank's status and sentence. `ninja test-rxe2` runs it
# after building everything; `ninja check` runs it when transport_ib is built.
#
#   tests/rxe/hosts.sh              every scenario; one line per scenario and
#                                   `N passed, N failed, N skipped`; exit 1 on any failure
#   tests/rxe/hosts.sh PREFIX...    only the scenarios whose names start with a PREFIX
#   tests/rxe/hosts.sh --list       the scenario names (no guest)
#
# Options:
#   --timeout S    the whole run's limit (default 900); the guests are killed at it
#   --smp N        CPUs of each guest (default 2)
#   --mem MB       memory of each guest (default 512)
#   --no-install   never apt-get install anything; just say what is missing
#
# The guests: a is 10.9.9.1/24 (host name host-a), b is 10.9.9.2/24 (host-b), both rxe0 with
# the IPv4-mapped RoCE v2 GID at index 1, MTU 1500 (active MTU 1024). Each runs the agent of
# tests/rxe/hosts_guest.sh on a virtio serial port; this script sends it commands and reads
# the results. Their consoles are saved to build/rxe/hosts-a.log and hosts-b.log, the commands
# and results to build/rxe/hosts-ctl-a.log and -b.log. Both QEMUs are killed when the script
# ends, however it ends; nothing stays running. What it needs: as tests/rxe/run.sh (tc comes
# with iproute2; the netem module with the kernel package).
set -euo pipefail
cd "$(dirname "$0")/../.."
W=build/rxe
T0=$(date +%s)

TIMEOUT=900 SMP=2 MEM=512 INSTALL=1 LIST=0
PREFIXES=()
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
TAG=test-rxe2
. tests/rxe/prepare.sh
hosts_option() { [ "$1" != --list ] || { LIST=1 USED=1; }; }
rxe_args hosts_option "$@"
if [ "$LIST" = 1 ]; then
    sed -n 's/^ *scenario \([^ ]*\) .*/\1/p' "$0"
    exit 0
fi

mkdir -p "$W"
rxe_packages
rxe_kernel

RUN=$W/hosts.$$
declare -A PID CTL MON
cleanup() {
    local g
    for g in a b; do
        if [ -n "${PID[$g]:-}" ] && kill -0 "${PID[$g]}" 2>/dev/null; then
            kill -9 "${PID[$g]}" 2>/dev/null || true
            wait "${PID[$g]}" 2>/dev/null || true
        fi
        [ -f "$RUN/console-$g.log" ] && tr -d '\r' <"$RUN/console-$g.log" >"$W/hosts-$g.log"
        [ -f "$RUN/ctl-$g.out" ] && cp "$RUN/ctl-$g.out" "$W/hosts-ctl-$g.log"
    done
    rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$RUN"
rxe_fill_root "$RUN/root"
rxe_pack "$RUN/root" "$RUN/initrd.cpio.gz"
rm -rf "$RUN/root"
T1=$(date +%s)
say "guests: 2 x $KNAME, initramfs $(( $(stat -c %s "$RUN/initrd.cpio.gz") / 1024 )) KiB," \
    "$SMP CPU(s) and ${MEM} MiB each, TCG, time limit ${TIMEOUT} s (prepared in $((T1 - T0)) s);" \
    "host load: $(cut -d' ' -f1-3 /proc/loadavg)"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
END_MS=$(($(now_ms) + TIMEOUT * 1000))

# ---- the guests ------------------------------------------------------------------------------

# boot G WIRE: starts guest G's QEMU in the background; WIRE is its NIC's end of the wire, a
# TCP stream between the two QEMU processes (listen=127.0.0.1:PORT on a, connect=... on b:
# lossless, so that only netem loses packets).
boot() {
    local g=$1 fd
    mkfifo "$RUN/ctl-$g.in" "$RUN/mon-$g.in"
    : >"$RUN/ctl-$g.out"
    : >"$RUN/mon-$g.out"
    qemu-system-x86_64 -accel tcg -m "$MEM" -smp "$SMP" -nodefaults -display none -no-reboot \
        -kernel "$KX/vmlinuz" -initrd "$RUN/initrd.cpio.gz" \
        -append "console=ttyS0 panic=-1 rdinit=/init mitigations=off quiet zc_host=$g" \
        -serial "file:$RUN/console-$g.log" \
        -device virtio-serial-pci -chardev "pipe,id=ctl,path=$RUN/ctl-$g" \
        -device virtserialport,chardev=ctl,name=zc.ctl \
        -chardev "pipe,id=mon,path=$RUN/mon-$g" -mon chardev=mon,mode=readline \
        -netdev "socket,id=wire,$2" \
        -device "virtio-net-pci,netdev=wire,mac=52:54:00:00:09:0$([ "$g" = a ] && echo 1 || echo 2)" \
        </dev/null >"$RUN/qemu-$g.log" 2>&1 &
    PID[$g]=$!
    exec {fd}<>"$RUN/ctl-$g.in"
    CTL[$g]=$fd
    exec {fd}<>"$RUN/mon-$g.in"
    MON[$g]=$fd
}

alive() { kill -0 "${PID[$1]}" 2>/dev/null; }

# listening PORT: whether a TCP socket listens on the host's port PORT now.
listening() {
    awk -v p="$(printf %04X "$1")" 'NR > 1 && $4 == "0A" { split($2, a, ":"); if (a[2] == p) f = 1 }
        END { exit !f }' /proc/net/tcp
}

# Boots guest a listening on a free TCP port for the wire, then guest b connecting to it.
boot_both() {
    local p
    for _ in $(seq 20); do
        p=$((20000 + RANDOM % 20000))
        listening "$p" && continue
        boot a "listen=127.0.0.1:$p"
        for _ in $(seq 100); do listening "$p" && break; alive a || break; sleep 0.1; done
        if listening "$p" && alive a; then
            boot b "connect=127.0.0.1:$p"
            return 0
        fi
        wait "${PID[a]}" 2>/dev/null || true # the port was taken meanwhile: another one
    done
    die "guest a could not listen for the wire: $(tail -n 3 "$RUN/qemu-a.log")"
}

# gsend G COMMAND: sends COMMAND to G's agent; ID is its number (the host's clock in ns:
# unique also when the caller runs in a subshell, as $(...) does).
gsend() {
    ID=$(date +%s%N)
    printf '%s %s\n' "$ID" "$2" >&"${CTL[$1]}"
}
# gget G ID LIMIT_S: waits for command ID's end on G (at most LIMIT_S s, the run's limit, or
# G's end); prints its output; returns its status (124: no answer).
gget() {
    local g=$1 id=$2 end rc
    end=$(($(now_ms) + $3 * 1000))
    [ "$end" -le "$END_MS" ] || end=$END_MS
    until grep -q "^@@done $id " "$RUN/ctl-$g.out"; do
        if [ "$(now_ms)" -ge "$end" ] || ! alive "$g"; then
            echo "-- guest $g: no answer to command $id within the limit"
            return 124
        fi
        sleep 0.1
    done
    sed -n "s/^@@ $id //p" "$RUN/ctl-$g.out"
    rc=$(sed -n "s/^@@done $id \([0-9]*\).*/\1/p" "$RUN/ctl-$g.out")
    return "${rc:-1}"
}
# gcmd G LIMIT_S COMMAND: runs COMMAND on G and waits for it.
gcmd() {
    gsend "$1" "$3"
    gget "$1" "$ID" "$2"
}
# mon G COMMAND: a QEMU monitor command for G.
mon() { printf '%s\n' "$2" >&"${MON[$1]}"; }

# ---- jobs across the guests ------------------------------------------------------------------

SEED=${ZT_SEED:-20261121}
JOBS=0
# jstart NAME NA NB LIMIT_S PROGRAM [VAR=VALUE...]: an NA+NB-rank job, ranks 0..NA-1 on a and
# the rest on b, rank 0 listening at ROOT_IP (default a's):PORT (default a new one per job),
# every rank under a limit of LIMIT_S s. PROGRAM as job_start takes it (zctest+--rank+NAME).
jstart() {
    local name=$1 na=$2 nb=$3 limit=$4 prog=$5 secret
    shift 5
    JOBS=$((JOBS + 1))
    JPORT=${PORT:-$((29500 + JOBS))}
    secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    local vars="ZC_SECRET=$secret ZT_SEED=$SEED $*"
    local root=${ROOT_IP:-10.9.9.1}:$JPORT
    if [ "$na" -gt 0 ]; then
        gcmd a 30 "job_start $name $((na + nb)) 0 $na $root $limit $prog $vars" || return 1
    fi
    if [ "$nb" -gt 0 ]; then
        gcmd b 30 "job_start $name $((na + nb)) $na $nb $root $limit $prog $vars" || return 1
    fi
}
# jwait NAME LIMIT_S [GUESTS]: waits for the job's ranks on each guest (default "a b") and
# prints their output ("[R] LINE", "@rank R exit STATUS").
jwait() {
    local g rc=0
    for g in ${3:-a b}; do gcmd "$g" "$(($2 + 10))" "job_wait $1 $2" || rc=1; done
    return $rc
}
# jline NAME PATTERN LIMIT_S [GUESTS]: waits until every rank of the job printed PATTERN.
jline() {
    local g rc=0
    for g in ${4:-a b}; do gcmd "$g" "$(($3 + 10))" "job_wait_line $1 '$2' $3" || rc=1; done
    return $rc
}
# all_exit_0 N: every rank 0..N-1 exited 0.
all_exit_0() {
    local r ok=0
    for r in $(seq 0 $(($1 - 1))); do
        grep -qx "@rank $r exit 0" "$OUT" || { echo "-- rank $r did not exit 0"; ok=1; }
    done
    ! grep -q 'mp FAILED\|check failed' "$OUT" || ok=1
    return $ok
}
# counters G: G's rxe0 port counters as "NAME=VALUE ..." (the counters command of the agent).
counters() { gcmd "$1" 30 counters | sed -n 's/^@count \([^ ]*\) \(.*\)/\1=\2/p' | tr '\n' ' '; }
# delta BEFORE AFTER NAME: how much counter NAME grew.
delta() {
    local b a
    b=$(tr ' ' '\n' <<<"$1" | sed -n "s/^$3=//p")
    a=$(tr ' ' '\n' <<<"$2" | sed -n "s/^$3=//p")
    echo $((${a:-0} - ${b:-0}))
}
# mp-result lines of the output, one a rank.
# (Once each: a scenario prints them into $OUT, and may read them again.)
results() { grep '^\[[0-9]*\] mp-result' "$OUT" | sort -u | sort -t']' -k1.2n; }

# ---- the scenarios ---------------------------------------------------------------------------
PASS=0 FAIL=0 SKIP=0
OUT=$RUN/scenario.out

selected() {
    [ ${#PREFIXES[@]} = 0 ] && return 0
    local p
    for p in "${PREFIXES[@]}"; do
        case $1 in "$p"*) return 0 ;; esac
    done
    return 1
}

# scenario NAME FUNCTION [ARGS...]: FUNCTION's output goes to $OUT; it returns 0 (pass), 77
# (skip) or anything else (fail), may set NOTE (shown in the result line) and SHOW=1 (show its
# output on success too). Afterwards nothing of the job stays running on either guest, the
# wire is up and no netem is left on it.
scenario() {
    local name=$1 t0 rc ms g
    shift
    selected "$name" || return 0
    NOTE="" SHOW=0
    if [ "$(now_ms)" -ge "$END_MS" ]; then
        FAIL=$((FAIL + 1))
        echo "FAIL $name (not run: the ${TIMEOUT} s limit passed)"
        return 0
    fi
    t0=$(now_ms)
    set +e
    "$@" >"$OUT" 2>&1
    rc=$?
    set -e
    ms=$(($(now_ms) - t0))
    case $rc in
    0)
        PASS=$((PASS + 1))
        echo "ok   $name ($ms ms${NOTE:+, $NOTE})"
        [ "$SHOW" = 1 ] && sed 's/^/    /' "$OUT"
        ;;
    77)
        SKIP=$((SKIP + 1))
        echo "skip $name${NOTE:+ ($NOTE)}"
        sed 's/^/    /' "$OUT"
        ;;
    *)
        FAIL=$((FAIL + 1))
        echo "FAIL $name (exit $rc, $ms ms${NOTE:+, $NOTE})"
        tail -n 150 "$OUT" | sed 's/^/    /'
        for g in a b; do
            alive "$g" || continue
            echo "    -- guest $g: rxe0 counters and the kernel's last words"
            gcmd "$g" 30 'counters; dmesg | tail -n 15' 2>&1 | sed 's/^/    /'
        done
        ;;
    esac
    alive a && mon a "set_link wire on"
    for g in a b; do alive "$g" && { gcmd "$g" 30 sweep_jobs >/dev/null || true; }; done
    return 0
}

# -- the wire --

# ping over the wire, then rdma-core's ibv_rc_pingpong between the two rxe0 (without zcoll).
s_wire() {
    gcmd a 30 "ping -c 5 -i 0.2 10.9.9.2; free -m" || return 1
    NOTE="rtt $(sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p' "$OUT" | tail -n 1) ms avg"
    gcmd b 10 "(timeout -s KILL 60 ibv_rc_pingpong -d rxe0 -g 1 -n 50 >/tmp/pp.out 2>&1; echo \$? >/tmp/pp.rc) >/dev/null 2>&1 &" || return 1
    sleep 1
    gcmd a 70 "timeout -s KILL 60 ibv_rc_pingpong -d rxe0 -g 1 -n 50 10.9.9.2" || return 1
    gcmd b 70 "while [ ! -e /tmp/pp.rc ]; do sleep 0.1; done; cat /tmp/pp.out; exit \$(cat /tmp/pp.rc)" ||
        return 1
    SHOW=1
}

# -- every call, results checked --

# t_job NAME NA NB LIMIT_S PROGRAM CHECK [VAR=VALUE...]: runs a job to its end; every rank
# must exit 0 and rxe0 must have sent packets on both guests; CHECK (a grep -E pattern) must
# be in the output. Shows the lines that match SHOWN.
t_job() {
    local name=$1 na=$2 nb=$3 limit=$4 prog=$5 check=$6 ca cb ca2 cb2
    shift 6
    ca=$(counters a)
    cb=$(counters b)
    jstart "$name" "$na" "$nb" "$limit" "$prog" "$@" || return 1
    jwait "$name" "$limit" || return 1
    ca2=$(counters a)
    cb2=$(counters b)
    NOTE="rxe packets a $(delta "$ca" "$ca2" sent_pkts), b $(delta "$cb" "$cb2" sent_pkts)"
    all_exit_0 $((na + nb)) || return 1
    [ "$(delta "$ca" "$ca2" sent_pkts)" -gt 0 ] && [ "$(delta "$cb" "$cb2" sent_pkts)" -gt 0 ] ||
        { echo "-- no rxe packets on one of the guests: did the ranks use ib?"; return 1; }
    grep -qE "$check" "$OUT" || { echo "-- no line matches /$check/"; return 1; }
    grep -E "$SHOWN" "$OUT" | sed 's/  */ /g'
    SHOW=1
}
# t_bench NAME NA NB PATH [VAR=VALUE...]: zcbench's every collective and send/recv at 4 and
# 64 KiB on buffers on the simulated device (--device) with --check (every rank verifies every
# timed iteration): every table "transport ib", 0 in #wrong, and (all but the barrier's)
# every call on the device path PATH (direct or staged), read from its "# device path" line.
t_bench() {
    local name=$1 na=$2 nb=$3 path=$4 tables wrong rows took want
    shift 4
    t_job "$name" "$na" "$nb" 300 "zcbench+-c+all+-b+4K+-e+64K+-f+16+-w+2+-n+10+--check+--device" \
        '# zcbench' ZC_GPU_PROVIDER=sim "$@" || return 1
    tables=$(grep -c '^\[0\] # zcbench: .* transport ib,' "$OUT")
    wrong=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ && $10 != "0" { n++ } END { print n + 0 }' "$OUT")
    rows=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ { n++ } END { print n + 0 }' "$OUT")
    if [ "$path" = staged ]; then want='staged: [1-9][0-9]* staged calls in [0-9]* rounds, 0 direct'
    else want='direct: 0 staged calls in 0 rounds, [1-9][0-9]* direct calls'; fi
    took=$(grep -c "^\[0\] # device path $want" "$OUT")
    NOTE="$tables tables over ib, $took on the $path path, $rows rows, $wrong wrong; $NOTE"
    awk '$2 == "#" && $3 == "zcbench:" { c = $4 }
         $1 == "[0]" && $2 ~ /^[0-9]+$/ { printf "%-15s %6s bytes %10s us  #wrong %s\n", c, $2, $7, $10 }' \
        "$OUT"
    # two sizes a table, one for the barrier
    [ "$tables" -ge 10 ] && [ "$wrong" = 0 ] && [ "$rows" = $((2 * tables - 1)) ] &&
        [ "$took" -ge $((tables - 1)) ]
}
SHOWN='mp-info: sweep|equal to the host reference|^\[[0-9]+\] path |rank [0-9]+: host'
# The sweep's line must count every kind (allreduce ... ring, i.e. send/recv, barrier).
EVERY_KIND='mp-info: sweep .*allreduce [1-9][0-9]*, reduce [1-9][0-9]*, broadcast [1-9][0-9]*, reduce_scatter [1-9][0-9]*, allgather [1-9][0-9]*, gather [1-9][0-9]*, scatter [1-9][0-9]*, alltoall [1-9][0-9]*, send/recv ring [1-9][0-9]*, barrier [1-9]'
SWEEP=zctest+--rank+mp_rank_sweep
ZG=zcgputest+--rank

# -- a lossy link: tc netem on both guests' NICs --

LOSSY_BASE=""
# t_lossy NETEM_A NETEM_B [VAR=VALUE...]: the sweep's fixed work (MP_BATCHES batches, every
# result checked) with `tc qdisc ... netem NETEM_X` on guest X's NIC ("" for none); NOTE says
# how long it took against the clean run, and how often the queue pairs retried: rxe0's
# completer_retry_err (retries the requester started: after a timeout or a sequence NAK),
# rcvd_seq_err (sequence NAKs received), duplicate_request and out_of_seq_request (what
# the responder saw), retry_exceeded_err (queue pairs that gave up), on both guests.
t_lossy() {
    local na=$1 nb=$2 ca cb ca2 cb2 secs c sum
    shift 2
    [ -z "$na" ] || gcmd a 30 "netem $na" >/dev/null || return 1
    [ -z "$nb" ] || gcmd b 30 "netem $nb" >/dev/null || return 1
    ca=$(counters a)
    cb=$(counters b)
    jstart lossy 1 1 300 "$SWEEP" MP_BATCHES=12 MP_BUDGET_MS=600000 "$@" || return 1
    jwait lossy 300
    local rc=$?
    ca2=$(counters a)
    cb2=$(counters b)
    gcmd a 30 "netem off" | sed 's/^@netem sent/netem on a: sent/'
    gcmd b 30 "netem off" | sed 's/^@netem sent/netem on b: sent/'
    [ $rc = 0 ] && all_exit_0 2 || return 1
    grep -qE "$EVERY_KIND" "$OUT" || { echo "-- the sweep did not run every kind"; return 1; }
    secs=$(sed -n 's/.*MB per rank, \([0-9.]*\) s$/\1/p' "$OUT" | head -n 1)
    if [ -z "$LOSSY_BASE" ]; then # the clean run, twice: the faster is the baseline
        LOSSY_BASE=$secs
        t_lossy "" "" >/dev/null 2>&1 || return 1
        secs=$(awk -v a="$secs" -v b="$LOSSY_BASE" 'BEGIN { print (a < b ? a : b) }')
        LOSSY_BASE=$secs
    fi
    NOTE="sweep $secs s ($(awk -v a="$secs" -v b="$LOSSY_BASE" 'BEGIN { printf "%.1f", a / b }')x)"
    for c in completer_retry_err rcvd_seq_err duplicate_request out_of_seq_request \
        retry_exceeded_err; do
        sum="$(delta "$ca" "$ca2" $c)/$(delta "$cb" "$cb2" $c)"
        NOTE="$NOTE, $c $sum"
    done
    NOTE="$NOTE (a/b)"
    grep -E 'mp-info: sweep|netem on' "$OUT" | sed 's/  */ /g'
    SHOW=1
}

# Eight communicators in a row in the same two processes, each init, one checked 16 KiB
# allreduce and fini at once, over a link losing 5% of the packets both ways (4 KiB slots:
# messages of 4 packets, see docs/across-hosts.md on large messages; 268 ms a try): the rank that
# finishes first must not take its last messages with it (its fini waits for them to be
# acknowledged), and the bootstrap's handshakes must survive a lossy TCP.
s_fini_lossy() {
    gcmd a 30 "netem loss 5%" >/dev/null || return 1
    gcmd b 30 "netem loss 5%" >/dev/null || return 1
    jstart finis 1 1 240 $LINK MP_EXPECT=ok MP_CALLS=1 MP_KIB=16 MP_GO_FILE=/dev/null \
        MP_AGAIN=8 MP_AGAIN_KIB=16 ZC_SLOT_BYTES=4096 ZC_IB_TIMEOUT=16
    jwait finis 240
    local rc=$?
    gcmd a 30 "netem off" | sed 's/^@netem sent/netem on a: sent/'
    gcmd b 30 "netem off" | sed 's/^@netem sent/netem on b: sent/'
    grep -E 'netem on|warn' "$OUT" | sort -u
    [ $rc = 0 ] && all_exit_0 2 || return 1
    local n
    n=$(grep -c 'a new communicator works' "$OUT")
    NOTE="$n of 16 communicators worked"
    [ "$n" = 16 ] || return 1
    SHOW=1
}

# -- the link cut, the rendezvous unreachable, a guest killed --

# link on|off: guest a's NIC on the wire (its carrier; b's NIC keeps its own).
link() { mon a "set_link wire $1"; }
LINK=zctest+--rank+mp_rank_link
KILLED=0

# mark G NAME: G's boot clock now (ms), as G's agent reads it.
mark_ms() { gcmd "$1" 30 "mark $2" | sed -n 's/^@mark [^ ]* //p'; }

# check_failures NAMES MARK_A MARK_B LIMIT_MS: every rank R in NAMES ("0 1 ...") reported a
# failure (ZC_PEER_LOST or ZC_TIMED_OUT) with a sentence that names a rank, at most LIMIT_MS
# after the mark of its guest (ranks below NA=$NA on a); NOTE gets each one's status and delay.
check_failures() {
    local r line st ms at good=0 mark
    for r in $1; do
        line=$(grep "^\[$r\] mp-result: rank $r: " "$OUT" | head -n 1)
        st=$(sed -n 's/.*: rank [0-9]*: \(ZC_[A-Z_]*\) in call.*/\1/p' <<<"$line")
        at=$(sed -n 's/.*boot clock \([0-9]*\) ms.*/\1/p' <<<"$line")
        if [ "$r" -lt "$NA" ]; then mark=$2; else mark=$3; fi
        case $st in
        ZC_PEER_LOST|ZC_TIMED_OUT) ;;
        *) echo "-- rank $r: no ZC_PEER_LOST or ZC_TIMED_OUT report: $line"; good=1; continue ;;
        esac
        grep -q 'rank [0-9]' <<<"${line#*ms: }" || { echo "-- rank $r: no rank named"; good=1; }
        ms=$((at - mark))
        [ "$ms" -le "$4" ] || { echo "-- rank $r reported $ms ms after the fault"; good=1; }
        NOTE="$NOTE${NOTE:+, }$r: ${st#ZC_} ${ms} ms"
    done
    return $good
}

# The link cut for less than the retry window: the call in flight waits and completes.
# ZC_TIMEOUT_MS=20000: the queue pairs' timeout is derived from it (4.096 us * 2^18, about
# 1.07 s a try, 7 tries: 7.5 s before a queue pair gives up); the cut lasts 3 s.
s_short_cut() {
    local ca cb ca2 cb2 t0 t1
    jstart shortcut 1 1 120 $LINK MP_EXPECT=ok MP_KIB=1024 MP_STOP_FILE=/tmp/stop.short \
        ZC_TIMEOUT_MS=20000 || return 1
    jline shortcut 'mp-info: rank [0-9]+ ready' 60 || return 1
    sleep 1
    ca=$(counters a)
    cb=$(counters b)
    t0=$(now_ms)
    link off
    sleep 3
    link on
    t1=$(now_ms)
    sleep 3
    gcmd a 30 "touch /tmp/stop.short" || return 1
    jwait shortcut 60
    local rc=$?
    ca2=$(counters a)
    cb2=$(counters b)
    [ $rc = 0 ] && all_exit_0 2 || return 1
    results
    [ "$(results | grep -c ': ZC_OK: ')" = 2 ] || { echo "-- not every rank finished ZC_OK"; return 1; }
    NOTE="cut $((t1 - t0)) ms; slowest call $(sed -n 's/.*(the slowest \([0-9]*\) ms).*/\1/p' "$OUT" |
        sort -n | tail -n 1) ms; completer_retry_err a $(delta "$ca" "$ca2" completer_retry_err)"
    NOTE="$NOTE, b $(delta "$cb" "$cb2" completer_retry_err)"
    SHOW=1
}

# The link cut mid-allreduce (1 MiB calls, 2 ranks a guest) and restored after the deadline
# (ZC_TIMEOUT_MS=10000: 537 ms a try, 7 tries, 3.8 s): every rank fails with ZC_PEER_LOST or
# ZC_TIMED_OUT by its deadline naming a rank; once the link is back, a new communicator in
# the same processes works.
s_cut() {
    local ma mb t0
    NA=2
    jstart cut 2 2 180 $LINK MP_EXPECT=fail MP_KIB=1024 ZC_TIMEOUT_MS=10000 \
        MP_GO_FILE=/tmp/go.cut || return 1
    jline cut 'mp-info: rank [0-9]+ ready' 60 || return 1
    sleep 1
    t0=$(now_ms)
    link off
    ma=$(mark_ms a cut)
    mb=$(mark_ms b cut)
    jline cut 'mp-result' 30 || { jwait cut 5; return 1; }
    while [ "$(now_ms)" -lt $((t0 + 11000)) ]; do sleep 0.2; done
    link on
    NOTE="link back after $(($(now_ms) - t0)) ms"
    sleep 2
    gcmd a 30 "touch /tmp/go.cut" || return 1
    gcmd b 30 "touch /tmp/go.cut" || return 1
    jwait cut 90
    local rc=$?
    results
    [ $rc = 0 ] && all_exit_0 4 || return 1
    check_failures "0 1 2 3" "$ma" "$mb" 10000 || return 1
    [ "$(grep -c 'a new communicator works' "$OUT")" = 4 ] ||
        { echo "-- not every rank ran a new communicator"; return 1; }
    SHOW=1
}

# The rendezvous unreachable at init: the link is cut before the job starts; rank 0 on a and
# rank 1 on b both fail init by its deadline (MP_INIT_MS=8000) with a sentence.
s_unreachable() {
    link off
    sleep 1
    jstart unreach 1 1 60 $LINK MP_EXPECT=init_fail MP_INIT_MS=8000 || { link on; return 1; }
    jwait unreach 40
    local rc=$?
    link on
    results
    [ $rc = 0 ] && all_exit_0 2 || return 1
    grep -q '^\[1\] mp-result: rank 1: init ZC_[A-Z_]* .*10\.9\.9\.1' "$OUT" ||
        { echo "-- rank 1's sentence does not name the rendezvous 10.9.9.1"; return 1; }
    NOTE=$(results | sed -n 's/.*rank \([0-9]*\): init ZC_\([A-Z_]*\) after \([0-9]*\) ms.*/\1: \2 \3 ms/p' |
        tr '\n' ',' | sed 's/,$//; s/,/, /g')
    SHOW=1
    sleep 2 # the link's carrier back on a before the next job
}

# Guest b killed (SIGKILL to its QEMU: no shutdown, nothing closed) mid-allreduce: ranks 0
# and 1 on a fail by the deadline naming a rank.
s_killed() {
    local ma
    NA=2
    jstart kill 2 2 120 $LINK MP_EXPECT=fail MP_KIB=1024 ZC_TIMEOUT_MS=10000 || return 1
    KILL_PORT=$JPORT
    jline kill 'mp-info: rank [0-9]+ ready' 60 || return 1
    sleep 1
    kill -9 "${PID[b]}"
    ma=$(mark_ms a kill)
    wait "${PID[b]}" 2>/dev/null || true
    KILLED=1
    jwait kill 40 a
    local rc=$?
    results
    [ $rc = 0 ] && all_exit_0 2 || return 1
    check_failures "0 1" "$ma" 0 10000 || return 1
    SHOW=1
}

# After the kill: a new job on the survivor, rank 0 on the killed job's port, is not held up
# by the half-open connections towards b (2 ranks on a over ib, 3 checked calls).
s_survivor() {
    [ "$KILLED" = 1 ] || { NOTE="needs fault/guest_killed_mid_call"; return 77; }
    local t0
    t0=$(now_ms)
    PORT=$KILL_PORT jstart again 2 0 60 $LINK MP_EXPECT=ok MP_CALLS=3 MP_KIB=64 ZC_TRANSPORT=ib ||
        return 1
    jwait again 60 a
    local rc=$?
    results
    [ $rc = 0 ] && all_exit_0 2 || return 1
    NOTE="the job took $(($(now_ms) - t0)) ms"
    SHOW=1
}

# After the kill: the rendezvous host is gone; ranks 1 and 2 of 3 on a fail init by its
# deadline (MP_INIT_MS=8000), naming b's address.
s_dead_root() {
    [ "$KILLED" = 1 ] || { NOTE="needs fault/guest_killed_mid_call"; return 77; }
    local secret
    secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    gcmd a 30 "job_start deadroot 3 1 2 10.9.9.2:29999 60 $LINK ZC_SECRET=$secret \
        MP_EXPECT=init_fail MP_INIT_MS=8000" || return 1
    jwait deadroot 40 a
    local rc=$?
    results
    [ $rc = 0 ] || return 1
    for r in 1 2; do
        grep -qx "@rank $r exit 0" "$OUT" || { echo "-- rank $r did not exit 0"; return 1; }
        grep -q "^\[$r\] mp-result: rank $r: init ZC_[A-Z_]* .*10\.9\.9\.2:29999" "$OUT" ||
            { echo "-- rank $r's sentence does not name 10.9.9.2:29999"; return 1; }
    done
    NOTE=$(results | sed -n 's/.*rank \([0-9]*\): init ZC_\([A-Z_]*\) after \([0-9]*\) ms.*/\1: \2 \3 ms/p' |
        tr '\n' ',' | sed 's/,$//; s/,/, /g')
    SHOW=1
}


# ---- the run ---------------------------------------------------------------------------------
boot_both
for g in a b; do
    until grep -q '^@@ready' "$RUN/ctl-$g.out"; do
        alive "$g" || die "guest $g stopped while booting: $(tail -n 5 "$RUN/qemu-$g.log" \
            "$RUN/console-$g.log" 2>/dev/null)"
        [ "$(now_ms)" -lt "$END_MS" ] || die "guest $g did not boot within ${TIMEOUT} s"
        sleep 0.2
    done
done
T2=$(date +%s)
say "both guests up in $((T2 - T1)) s: $(grep -h '^@@ready' "$RUN"/ctl-[ab].out | cut -d' ' -f2 |
    tr '\n' ' ')"
grep -h 'setup-error' "$RUN"/console-[ab].log && die "rxe setup failed in a guest"

scenario wire/ping_and_rc_pingpong s_wire
scenario host/collectives_2x1 t_job sweep21 1 1 240 $SWEEP "$EVERY_KIND" MP_BUDGET_MS=15000
scenario host/collectives_2x2 t_job sweep22 2 2 240 $SWEEP "$EVERY_KIND" MP_BUDGET_MS=15000
scenario device/direct_collectives_2x1 t_bench bdir21 1 1 direct
scenario device/staged_collectives_2x1 t_bench bstg21 1 1 staged ZC_GPU_PATH=staged \
    ZC_GPU_STAGE_BYTES=16384
scenario device/direct_collectives_2x2 t_bench bdir22 2 2 direct
scenario device/staged_collectives_2x2 t_bench bstg22 2 2 staged ZC_GPU_PATH=staged
scenario device/mixed_shm_and_ib_2x2 t_job gmix22 2 2 120 $ZG+zg_rank_mixed \
    'host child on shm' ZC_GPU_PROVIDER=sim ZG_PER_HOST=2
scenario lossy/clean t_lossy "" ""
scenario lossy/loss_1_percent t_lossy "loss 1%" "loss 1%"
scenario lossy/loss_1_percent_64k_slots t_lossy "loss 1%" "loss 1%" MP_SLOT_BYTES=65536
scenario lossy/loss_10_percent t_lossy "loss 10%" "loss 10%"
scenario lossy/loss_10_percent_ib_timeout_16 t_lossy "loss 10%" "loss 10%" ZC_IB_TIMEOUT=16
scenario lossy/delay_5ms_and_reorder t_lossy "delay 5ms reorder 25% 50%" "delay 5ms"
scenario lossy/last_messages_survive_fini s_fini_lossy
scenario fault/short_cut_under_the_retry_window s_short_cut
scenario fault/cut_past_the_deadline_then_a_new_communicator s_cut
scenario fault/rendezvous_unreachable_at_init s_unreachable
scenario fault/guest_killed_mid_call s_killed
scenario fault/new_job_on_the_survivor s_survivor
scenario fault/rendezvous_host_dead_at_init s_dead_root

# ---- the end -----------------------------------------------------------------------------------
for g in a b; do
    if alive "$g"; then
        gsend "$g" poweroff
        for _ in $(seq 100); do alive "$g" || break; sleep 0.2; done
    fi
done
T3=$(date +%s)
say "scenarios ran $((T3 - T2)) s, $((T3 - T0)) s in all; host load now" \
    "$(cut -d' ' -f1-3 /proc/loadavg); consoles in $W/hosts-a.log, $W/hosts-b.log"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
