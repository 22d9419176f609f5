#!/bin/sh
# tests/rxe/suite.sh: the test-rxe suite, run by busybox sh inside the guest (tests/rxe/init
# starts it in /zc once rxe0 is up; tests/rxe/run.sh parses its markers). Arguments: name
# prefixes; none runs every test. Prints one line per test like build/zctest ("ok   NAME (N ms)",
# "FAIL NAME (...)" with the output indented, "skip NAME") and a marker per result.
#
# The ib/ tests are build/zctest's multi-process tests (tests/test_mp.c) with ZC_TRANSPORT=ib
# and ZC_IB_DEVICE=rxe0 in the environment, which build/zcrun hands on to every rank; each
# is named after the zctest test it mirrors. Those that are plain mp_job calls run their rank
# program through zcrun here, with limits sized for TCG; the others run through build/zctest.
# Each must also move packets through rxe0 (its sent_pkts counter): proof that the ranks
# really talked over verbs. Sizes stay small: the emulated link moves about 30 MB/s. Besides:
# rxe_* (the kernel's verbs without zcoll), zctest/ib_* (build/zctest's own ib_ tests, as on
# the host), zcbench/* (zcbench --check over ib) and the faults at the end.
cd /zc || exit 1
SEL="$*"
PASS=0 FAIL=0 SKIP=0
OUT=/tmp/test.out
PORT=/sys/class/infiniband/rxe0/ports/1

selected() {
    [ -z "$SEL" ] && return 0
    for p in $SEL; do
        case $1 in "$p"*) return 0 ;; esac
    done
    return 1
}

# Milliseconds since boot (/proc/uptime has hundredths).
now_ms() {
    read -r u _ </proc/uptime
    echo $((${u%.*} * 1000 + (1${u#*.} - 100) * 10))
}

# rxe0's port counter NAME (hw_counters), 0 when absent.
counter() { cat "$PORT/hw_counters/$1" 2>/dev/null || echo 0; }

# Kills what a test left behind (ranks of a job that timed out): every process running a
# program from /zc/build. This is the guest, where nothing else runs.
sweep() {
    for d in /proc/[0-9]*; do
        [ "${d#/proc/}" = $$ ] && continue
        case $({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) in
        /zc/build/*|build/*|zc*|timeout*) kill -9 "${d#/proc/}" 2>/dev/null ;;
        esac
    done
}

# run_test NAME FUNCTION [ARGS...]: FUNCTION's output goes to $OUT; it returns 0 (pass),
# 77 (skip) or anything else (fail) and may set NOTE (shown in the result line) and SHOW=1
# (show the output on success too).
run_test() {
    name=$1
    shift
    selected "$name" || return 0
    NOTE="" SHOW=0
    t0=$(now_ms)
    "$@" >"$OUT" 2>&1
    rc=$?
    ms=$(($(now_ms) - t0))
    case $rc in
    0)
        PASS=$((PASS + 1))
        echo "ok   $name ($ms ms${NOTE:+, $NOTE})"
        [ "$SHOW" = 1 ] && sed 's/^/    /' "$OUT"
        echo "@@rxe: result ok $name"
        ;;
    77)
        SKIP=$((SKIP + 1))
        echo "skip $name${NOTE:+ ($NOTE)}"
        sed 's/^/    /' "$OUT"
        echo "@@rxe: result skip $name"
        ;;
    *)
        FAIL=$((FAIL + 1))
        echo "FAIL $name (exit $rc, $ms ms${NOTE:+, $NOTE})"
        tail -n 150 "$OUT" | sed 's/^/    /'
        echo "@@rxe: result FAIL $name"
        sweep
        ;;
    esac
}

# ---- verbs underneath: the kernel's rxe, without zcoll ----------------------------------------

t_device_active() {
    SHOW=1
    ibv_devinfo -d rxe0 >/tmp/devinfo 2>&1
    rc=$?
    cat /tmp/devinfo
    [ $rc = 0 ] || return 1
    grep -q 'state:.*PORT_ACTIVE' /tmp/devinfo || { echo "port 1 is not PORT_ACTIVE"; return 1; }
    grep -q 'link_layer:.*Ethernet' /tmp/devinfo || { echo "link layer is not Ethernet"; return 1; }
}

t_ipv4_gid() {
    SHOW=1
    found=0
    for g in "$PORT"/gids/*; do
        read -r gid <"$g" 2>/dev/null || continue
        case $gid in 0000:0000:0000:0000:0000:0000:0000:0000|"") continue ;; esac
        i=${g##*/}
        read -r type <"$PORT/gid_attrs/types/$i"
        read -r ndev <"$PORT/gid_attrs/ndevs/$i"
        echo "GID $i: $gid ($type, $ndev)"
        if [ "$gid" = 0000:0000:0000:0000:0000:ffff:0a09:0901 ] && [ "$type" = "RoCE v2" ]; then
            NOTE="GID index $i"
            found=1
        fi
    done
    [ "$found" = 1 ] || { echo "no RoCE v2 GID ::ffff:10.9.9.1"; return 1; }
}

t_rc_pingpong() {
    before=$(counter sent_pkts)
    timeout -s KILL 60 ibv_rc_pingpong -d rxe0 -g 1 -n 50 >/tmp/srv.out 2>&1 &
    srv=$!
    sleep 1
    timeout -s KILL 60 ibv_rc_pingpong -d rxe0 -g 1 -n 50 127.0.0.1
    rc=$?
    wait $srv
    src=$?
    echo "-- server:"
    cat /tmp/srv.out
    NOTE="$(($(counter sent_pkts) - before)) rxe packets"
    [ $rc = 0 ] && [ $src = 0 ]
}

# ---- the launcher --------------------------------------------------------------------------

t_env_reaches_ranks() {
    ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0 timeout -s KILL 60 zcrun -n 3 --timeout 30 /bin/sh -c \
        'echo "env: rank $ZC_RANK of $ZC_NRANKS," \
              "ZC_TRANSPORT=$ZC_TRANSPORT ZC_IB_DEVICE=$ZC_IB_DEVICE"'
    rc=$?
    [ $rc = 0 ] || return 1
    for r in 0 1 2; do
        grep -qx "\[$r\] env: rank $r of 3, ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0" "$OUT" ||
            { echo "rank $r did not see ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0"; return 1; }
    done
}

# ---- build/zctest's own ib_ tests (tests/test_ib.c): with rxe0 they take their device branch

# run_zctest_group PREFIX: every build/zctest test whose name starts with PREFIX, run as on the
# host (one `build/zctest NAME...`, nothing added to the environment), one result each, as
# zctest/NAME. zctest prints a test's indented lines before its result line.
run_zctest_group() {
    names=""
    for t in $(build/zctest --list | grep "^$1"); do
        selected "zctest/$t" && names="$names $t"
    done
    [ -n "$names" ] || return 0
    timeout -s KILL 600 build/zctest $names >/tmp/group.out 2>&1
    : >/tmp/group.lines
    while IFS= read -r line; do
        case $line in
        "ok   "*|"FAIL "*|"skip "*)
            t=${line#?????}
            t=${t%% *}
            rest=${line#"${line%%(*}"}
            case $line in
            ok*) PASS=$((PASS + 1)) r=ok ;;
            skip*) SKIP=$((SKIP + 1)) r=skip ;;
            *) FAIL=$((FAIL + 1)) r=FAIL ;;
            esac
            printf '%-4s zctest/%s %s\n' "$r" "$t" "$rest" | sed 's/ *$//'
            cat /tmp/group.lines
            echo "@@rxe: result $r zctest/$t"
            : >/tmp/group.lines
            names=$(echo " $names " | sed "s/ $t / /")
            ;;
        "    "*) echo "$line" >>/tmp/group.lines ;;
        esac
    done </tmp/group.out
    for t in $names; do
        FAIL=$((FAIL + 1))
        echo "FAIL zctest/$t (no result: build/zctest stopped early)"
        sed 's/^/    /' /tmp/group.lines
        tail -n 20 /tmp/group.out | sed 's/^/    /'
        echo "@@rxe: result FAIL zctest/$t"
    done
}

# ---- zcoll over verbs: build/zctest's multi-process tests --------------------------------------

# Counts rxe0's packets around a job: NOTE says how many; with NEEDS_TRAFFIC=1 a job that
# passed without one fails (its ranks did not talk over verbs).
traffic_begin() { before=$(counter sent_pkts); }
traffic_end() { # NEEDS_TRAFFIC
    pkts=$(($(counter sent_pkts) - before))
    NOTE="$pkts rxe packets${NOTE:+, $NOTE}"
    if [ "$1" = 1 ] && [ "$pkts" -le 0 ]; then
        echo "-- passed without a single packet through rxe0: did the ranks use ib?"
        return 1
    fi
}

# t_mp NRANKS RANK_PROGRAM LIMIT_S [VAR=VALUE...]: what build/zctest's mp_job does (zcrun
# exits 0 and no rank printed "mp FAILED"), with a time limit sized for TCG instead of
# zctest's: the rank programs check every result themselves. Shows their mp-info lines.
t_mp() {
    n=$1 prog=$2 limit=$3
    shift 3
    traffic_begin
    env ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0 "$@" timeout -s KILL $((limit + 15)) \
        zcrun -n "$n" --timeout "$limit" build/zctest --rank "$prog" >/tmp/mp.out 2>&1
    rc=$?
    if [ $rc = 0 ] && ! grep -q 'mp FAILED' /tmp/mp.out; then
        grep 'mp-info' /tmp/mp.out && SHOW=1
        traffic_end 1
        return
    fi
    cat /tmp/mp.out
    traffic_end 0
    echo "-- zcrun exit $rc (0 expected, 124: the ${limit} s limit passed)"
    return 1
}

# t_zctest ZCTEST_NAME NEEDS_TRAFFIC [VAR=VALUE...]: one build/zctest test, whole, with
# ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0 (and the VAR=VALUEs) in the environment that zctest and
# zcrun hand on to the ranks. For the tests whose checks are more than mp_job's.
t_zctest() {
    zname=$1 traffic=$2
    shift 2
    traffic_begin
    env ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0 "$@" timeout -s KILL 300 build/zctest "$zname" \
        >/tmp/zctest.out 2>&1
    rc=$?
    if grep -q "^ok   $zname " /tmp/zctest.out; then
        grep '^    ' /tmp/zctest.out | sed 's/^    //' && SHOW=1
        traffic_end "$traffic"
        return
    fi
    grep -v '^[0-9]* passed, [0-9]* failed' /tmp/zctest.out
    traffic_end 0
    grep -q "^skip $zname" /tmp/zctest.out && return 77
    [ $rc = 0 ] && rc=1
    return $rc
}

# mp_allocation_free_after_init: mp_job plus both ranks' "0 allocation calls" line.
t_alloc_free() {
    t_mp 2 mp_rank_alloc_free 240 || return 1
    for r in 0 1; do
        grep -q "^\[$r\] mp-info: rank $r: 10000 calls in .* after init: 0 allocation calls" \
            /tmp/mp.out || { echo "-- rank $r: no \"0 allocation calls\" line"; return 1; }
    done
}

# zcbench over ib: every collective at 64 KiB on 3 ranks with --check (each rank verifies each
# timed iteration), 20 iterations. Every table must say "transport ib", show 0 in #wrong and
# end with "# allocations during timed loops: 0". Arguments: VAR=VALUEs for the environment
# (zcbench registers its buffers: ZC_IB_ZCOPY_MIN_BYTES=4096 puts the streams in place).
t_zcbench() {
    traffic_begin
    env ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0 "$@" timeout -s KILL 150 zcrun -n 3 --timeout 120 \
        zcbench -c all -b 64K -e 64K --check -n 20 $ZB_ARGS >/tmp/bench.out 2>&1
    rc=$?
    tables=$(grep -c '^\[0\] # zcbench: .* transport ib,' /tmp/bench.out)
    allocs=$(grep -c '^\[0\] # allocations during timed loops: 0$' /tmp/bench.out)
    wrong=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ && $10 != "0" { n++ } END { print n + 0 }' \
        /tmp/bench.out)
    rows=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ { n++ } END { print n + 0 }' /tmp/bench.out)
    NOTE="$tables tables over ib"
    if [ -n "$ZB_ARGS" ]; then # --device: every table's calls took the path $ZB_PATH
        if [ "$ZB_PATH" = staged ]; then
            want='staged: [1-9][0-9]* staged calls in [0-9]* rounds, 0 direct'
        else
            want='direct: 0 staged calls in 0 rounds, [1-9][0-9]* direct calls'
        fi
        took=$(grep -c "^\[0\] # device path $want" /tmp/bench.out)
        NOTE="$NOTE, $took $ZB_PATH"
        [ "$took" -ge $((tables - 1)) ] || rc=1 # all but the barrier's
    fi
    if [ $rc = 0 ] && [ "$tables" -ge 10 ] && [ "$allocs" = "$tables" ] &&
        [ "$rows" = "$tables" ] && [ "$wrong" = 0 ]; then
        awk '$2 == "#" && $3 == "zcbench:" { c = $4 }
             $1 == "[0]" && $2 ~ /^[0-9]+$/ {
                 printf "%-15s %6s bytes %10s us  #wrong %s\n", c, $2, $7, $10 }' \
            /tmp/bench.out
        SHOW=1
        traffic_end 1
        return
    fi
    cat /tmp/bench.out
    echo "-- zcrun exit $rc; $tables tables over ib (10 expected), $rows rows, $wrong with" \
        "#wrong > 0, $allocs with 0 allocations"
    traffic_end 0
    return 1
}

# ---- faults ----------------------------------------------------------------------------------

# mp_killed_peer_is_reported_as_peer_lost as between hosts: each rank runs in a UTS namespace
# of its own named hostR (busybox unshare -u), so transport_ib sees three hosts (its host id
# is the host name and the boot id) and cannot watch the killed rank's process; the loss has
# to show on the wire. ZC_IB_TIMEOUT=12 (16.8 ms per try, 8 tries) keeps the queue pairs'
# own retries well inside the rank program's 1 s bound. The checks are zctest's: rank 2 dies
# of SIGKILL mid-allreduce and ranks 0 and 1 report it (ZC_PEER_LOST, or ZC_TIMED_OUT, at
# most 1 s after the kill: the rank program checks that) and then abort cleanly.
t_killed_other_host() {
    otherhost_wrapper
    traffic_begin
    ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0 ZC_IB_TIMEOUT=12 timeout -s KILL 60 zcrun -n 3 \
        --timeout 40 --keep-going /tmp/otherhost /zc/build/zctest --rank mp_rank_killed \
        >/tmp/mp.out 2>&1
    rc=$?
    ok=1
    [ $rc = 137 ] || { echo "-- zcrun exit $rc, 137 (rank 2's SIGKILL) expected"; ok=0; }
    grep -q 'zcrun: rank 2 killed by signal SIGKILL' /tmp/mp.out ||
        { echo "-- rank 2 was not killed by SIGKILL"; ok=0; }
    for r in 0 1; do
        grep -q "^\[$r\] mp-info: rank $r peer lost ok" /tmp/mp.out ||
            { echo "-- rank $r: no 'peer lost ok' line"; ok=0; }
    done
    grep -q 'mp FAILED' /tmp/mp.out && ok=0
    if [ $ok = 1 ]; then
        grep 'mp-info' /tmp/mp.out && SHOW=1
        traffic_end 1
        return
    fi
    cat /tmp/mp.out
    traffic_end 0
    return 1
}

# t_clean_exit [otherhost]: mp_clean_exit_after_a_call_is_not_a_loss over verbs (with
# `otherhost`, each rank a host of its own: the exit shows only as the probe's failure): rank 1
# finishes a reduce, closes and exits while rank 2 joins MP_LATE_MS late (longer than rank 1's
# close may wait for rank 0, with ZC_IB_TIMEOUT=12): rank 0 completes with the right sum; then
# rank 1 closes before the reduce: ranks 0 and 2 fail ZC_PEER_LOST, rank 0 saying rank 1 closed
# (the mark in its window).
t_clean_exit() {
    wrap=""
    if [ "${1:-}" = otherhost ]; then otherhost_wrapper; wrap=/tmp/otherhost; fi
    traffic_begin
    ok=1
    for c in late early; do
        env ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0 ZC_IB_TIMEOUT=12 MP_LATE_MS=1500 MP_CASE=$c \
            timeout -s KILL 75 zcrun -n 3 --timeout 60 $wrap /zc/build/zctest \
            --rank mp_rank_clean_exit >/tmp/mp.$c 2>&1 || ok=0
        grep -q 'mp FAILED' /tmp/mp.$c && ok=0
    done
    grep -q '^\[0\] mp-result: rank 0: reduce done' /tmp/mp.late || ok=0
    grep -q '^\[0\] mp-result: rank 0: ZC_PEER_LOST: .*closed the communicator' /tmp/mp.early ||
        ok=0
    grep -q '^\[2\] mp-result: rank 2: ZC_PEER_LOST' /tmp/mp.early || ok=0
    if [ $ok = 1 ]; then
        grep -h 'mp-result: rank 0' /tmp/mp.late /tmp/mp.early && SHOW=1
        traffic_end 1
        return
    fi
    cat /tmp/mp.late /tmp/mp.early
    traffic_end 0
    return 1
}

# The failure lines of a wrong-rkey job (MARKER starts each rank's line): every rank reported a
# failure that is not its deadline, one names the remote access error, and the job took less
# than the 30 s deadline (MS). Says what is wrong, and returns 1, otherwise.
rkey_failures() {
    marker=$1 ms=$2 good=1
    for r in 0 1; do
        line=$(grep "^\[$r\] $marker" "$OUT" | head -n 1)
        case $line in
        "") echo "-- rank $r reported no failure"; good=0 ;;
        *ZC_TIMED_OUT*) echo "-- rank $r waited for its deadline, not seeing the error"; good=0 ;;
        *ZC_INTERNAL*|*ZC_OK:*) echo "-- rank $r: $line"; good=0 ;;
        esac
    done
    grep "^\[[01]\] $marker" "$OUT" | grep -qi 'remote access\|REM_ACCESS' ||
        { echo "-- no rank's error text names the remote access error"; good=0; }
    [ "$ms" -lt 30000 ] || { echo "-- took $ms ms, the deadline is 30000 ms"; good=0; }
    [ $good = 1 ]
}

# A wrong rkey: rank 1 hands its peers rkeys with one bit flipped (tests/rxe/bad_rkey.c, an
# LD_PRELOAD shim), so rank 0's first RDMA write to rank 1 fails with a remote access error.
# Both ranks of a 1 MiB float32 allreduce must fail with a status (not ZC_TIMED_OUT: the
# error is reported, not waited out) well before the 30 s deadline, and one of them must
# name the remote access error.
t_wrong_rkey() {
    t0=$(now_ms)
    ZC_TRANSPORT=ib ZC_IB_DEVICE=rxe0 MP_MIB=1 ZC_RXE_BAD_RKEY_RANK=1 \
        LD_PRELOAD=/zc/lib/bad_rkey.so timeout -s KILL 120 \
        zcrun -n 2 --keep-going --timeout 90 build/zctest --rank mp_rank_allreduce_big
    rc=$?
    ms=$(($(now_ms) - t0))
    NOTE="job $ms ms"
    grep -q '^\[1\] bad_rkey: rank 1: ' "$OUT" || {
        echo "-- no rkey was flipped: rank 1 registered no remote-access memory region"
        echo "   through ibv_reg_mr/ibv_reg_mr_iova/ibv_reg_mr_iova2/ibv_reg_dmabuf_mr"
        return 1
    }
    ok=0
    case $rc in
    0) echo "-- the job succeeded with a wrong rkey" ;;
    124|137) echo "-- the job hung until zcrun's timeout (exit $rc)" ;;
    *) ok=1 ;;
    esac
    rkey_failures 'mp FAILED' "$ms" || ok=0
    [ $ok = 1 ] && SHOW=1
    [ $ok = 1 ]
}

# ---- device memory over ib on the simulated device: the direct path (core/sched_put.c) and
# the staged path (core/sched_stage.c) ----------------------------------------------------------

# Each rank of a job in a UTS namespace of its own named hostH, H = rank / ZG_PER_HOST (1 by
# default: every rank its own host; as t_killed_other_host): the
# ranks present as different hosts, so ZC_TRANSPORT auto picks ib, and gpu_path auto the direct
# path (the simulated device takes NIC writes: its memory is host memory rxe registers), or the
# staged one with ZC_GPU_PATH=staged or a device that takes none (ZC_GPU_SIM_NO_RDMA); the rank
# programs check which path ran when ZG_PATH is set.
otherhost_wrapper() {
    cat >/tmp/otherhost <<'EOF'
#!/bin/sh
exec unshare -u sh -c 'hostname "host$((ZC_RANK / ${ZG_PER_HOST:-1}))" && exec "$@"' sh "$@"
EOF
    chmod 755 /tmp/otherhost
}

# t_gpu NRANKS RANK_PROGRAM LIMIT_S [VAR=VALUE...]: build/zcgputest's rank program on the
# simulated device across "hosts"; zcrun must exit 0 and rxe0 must have moved packets.
t_gpu() {
    n=$1 prog=$2 limit=$3
    shift 3
    otherhost_wrapper
    traffic_begin
    env ZC_IB_DEVICE=rxe0 ZC_GPU_PROVIDER=sim "$@" timeout -s KILL $((limit + 15)) \
        zcrun -n "$n" --timeout "$limit" /tmp/otherhost /zc/build/zcgputest --rank "$prog" \
        >/tmp/gpu.out 2>&1
    rc=$?
    if [ $rc = 0 ] && ! grep -q 'check failed' /tmp/gpu.out; then
        grep -E 'path |equal to|rank [0-9]+: ' /tmp/gpu.out && SHOW=1
        traffic_end "${GPU_TRAFFIC:-1}"
        return
    fi
    cat /tmp/gpu.out
    traffic_end 0
    echo "-- zcrun exit $rc (0 expected)"
    return 1
}

# t_gpu for a job that fails at init, before any packet (the device path is decided over the
# bootstrap): its sentence, checked by the rank program, names the ib wire's direct path.
t_gpu_init_fails() {
    GPU_TRAFFIC=0
    t_gpu "$@"
    rc=$?
    GPU_TRAFFIC=1
    return $rc
}

# A wrong rkey under a device all_reduce (as t_wrong_rkey; VAR=VALUEs pick the path, and with
# ZC_RXE_BAD_RKEY_SKIP=1 only memory registered after the wire's window has the wrong key: on
# the direct path the device landing and buffers): both ranks fail with a status that is not
# ZC_TIMED_OUT well before the 30 s deadline; one names the access error.
t_gpu_wrong_rkey() {
    otherhost_wrapper
    t0=$(now_ms)
    env "$@" ZC_IB_DEVICE=rxe0 ZC_GPU_PROVIDER=sim ZC_RXE_BAD_RKEY_RANK=1 \
        LD_PRELOAD=/zc/lib/bad_rkey.so timeout -s KILL 120 zcrun -n 2 --keep-going \
        --timeout 90 /tmp/otherhost /zc/build/zcgputest --rank zg_rank_must_fail
    rc=$?
    ms=$(($(now_ms) - t0))
    NOTE="job $ms ms"
    ok=1
    [ $rc = 0 ] || { echo "-- zcrun exit $rc (0: both ranks' calls failed)"; ok=0; }
    rkey_failures 'zg-result: ' "$ms" || ok=0
    [ $ok = 1 ] && SHOW=1
    [ $ok = 1 ]
}

# zcbench --device (buffers on the simulated device, ZC_MEM_CUDA) over ib: t_zcbench's checks,
# and every table's calls on the path PATH (its "# device path PATH: ..." line: the staged and
# direct calls it ran). Arguments: PATH, then VAR=VALUEs.
t_zcbench_device() {
    ZB_ARGS=--device ZB_PATH=$1
    shift
    t_zcbench ZC_GPU_PROVIDER=sim "$@"
    rc=$?
    ZB_ARGS=
    return $rc
}

# ---- the list (tests/rxe/run.sh --list reads the run_test lines) ------------------------------
echo "@@rxe: suite-start"
echo "test-rxe suite in the guest: $(uname -r), $(nproc) CPUs${ZT_SEED:+, ZT_SEED=$ZT_SEED}"
run_test rxe_device_is_active t_device_active
run_test rxe_has_roce_v2_ipv4_gid t_ipv4_gid
run_test rxe_rc_pingpong t_rc_pingpong
run_test zcrun_passes_environment_to_ranks t_env_reaches_ranks
run_zctest_group ib_
run_test ib/mp_collectives_match_reference_n2 t_mp 2 mp_rank_sweep 120
run_test ib/mp_collectives_match_reference_n3 t_mp 3 mp_rank_sweep 120
run_test ib/mp_allreduce_4mib_float32_matches_reference_n2 t_mp 2 mp_rank_allreduce_big 120 MP_MIB=4
run_test ib/mp_registered_buffers_put_in_place_n2 t_mp 2 mp_rank_sweep 150 MP_REGISTER=1 \
    MP_EXPECT_PLACED=1 ZC_IB_ZCOPY_MIN_BYTES=100
run_test ib/mp_registered_buffers_put_in_place_n3 t_mp 3 mp_rank_sweep 150 MP_REGISTER=1 \
    MP_EXPECT_PLACED=1 ZC_IB_ZCOPY_MIN_BYTES=100
run_test ib/mp_persistent_plans_restart t_mp 3 mp_rank_plans 240
run_test ib/mp_split_children_work_concurrently_with_parent t_mp 4 mp_rank_split 120
run_test ib/mp_misuse_leaves_comm_usable t_mp 2 mp_rank_misuse 60
run_test ib/mp_overlay_processes_match_reference_n9 t_mp 9 mp_rank_overlay 300 MP_PER_HOST=3 \
    MP_BATCHES=6
run_test ib/mp_overlay_processes_match_reference_n17 t_mp 17 mp_rank_overlay 400 MP_PER_HOST=4 \
    MP_BATCHES=3
run_test ib/mp_overlay_relayed_send_recv_every_pair_n9 t_mp 9 mp_rank_overlay_relay 300 \
    MP_PER_HOST=3
run_test ib/mp_overlay_relayed_send_recv_every_pair_n17 t_mp 17 mp_rank_overlay_relay 400 \
    MP_PER_HOST=4
run_test ib/mp_overlay_killed_relay_fails_calls_over_it t_zctest \
    mp_overlay_killed_relay_fails_calls_over_it 1
run_test ib/mp_overlay_misuse_fails_init_on_every_rank t_zctest \
    mp_overlay_misuse_fails_init_on_every_rank 0
run_test ib/mp_hier_processes_match_reference_n6 t_mp 6 mp_rank_hier 400 ZC_TRANSPORT=hier \
    MP_LAYOUT=3,2,1 MP_BATCHES=4
run_test ib/mp_hier_overlay_processes_match_reference_n6 t_mp 6 mp_rank_hier 400 \
    ZC_TRANSPORT=hier MP_LAYOUT=2,3,1 MP_BATCHES=3 MP_OVERLAY=1
run_test ib/mp_hier_hierarchical_all_reduce_n8 t_mp 8 mp_rank_hier 400 ZC_TRANSPORT=hier \
    MP_LAYOUT=4,4 MP_BATCHES=4 MP_OVERLAY=1 MP_HBLOCK=4 MP_ALLREDUCE_ONLY=1
run_test ib/mp_hier_killed_peer_is_reported_as_peer_lost \
    t_zctest mp_hier_killed_peer_is_reported_as_peer_lost 1 MP_HIER_IB=1 MP_COUNT=12
run_test ib/mp_fini_returns_promptly_after_small_calls_n3 t_mp 3 mp_rank_fini_prompt 60
run_test ib/mp_fini_returns_promptly_after_peers_closed_n3 t_mp 3 mp_rank_fini_prompt 60 \
    MP_FINI_STAGGER_MS=300
run_test ib/mp_fini_returns_promptly_after_a_peer_crashed_n3 t_mp 3 mp_rank_fini_prompt 60 \
    MP_FINI_CRASH=1
run_test ib/mp_allocation_free_after_init t_alloc_free
run_test zcbench/all_collectives_checked_over_ib_n3 t_zcbench
run_test zcbench/all_collectives_checked_in_place_over_ib_n3 t_zcbench ZC_IB_ZCOPY_MIN_BYTES=4096
run_test ib/mp_mismatch_is_reported_on_every_rank t_zctest mp_mismatch_is_reported_on_every_rank 1
run_test ib/mp_rank_that_never_joins_times_out t_zctest mp_rank_that_never_joins_times_out 0
run_test ib/mp_killed_peer_is_reported_as_peer_lost \
    t_zctest mp_killed_peer_is_reported_as_peer_lost 1
run_test ib/mp_killed_peer_on_another_host_is_reported t_killed_other_host
run_test ib/mp_clean_exit_after_a_call_is_not_a_loss t_clean_exit
run_test ib/mp_clean_exit_on_another_host_is_not_a_loss t_clean_exit otherhost
run_test ib/wrong_rkey_is_reported t_wrong_rkey
run_test gpu/direct_collectives_match_reference_n2 t_gpu 2 zg_rank_collectives 400 ZG_PATH=direct
run_test gpu/direct_collectives_match_reference_n3 t_gpu 3 zg_rank_collectives 400 ZG_PATH=direct
run_test gpu/direct_injected_device_fault_fails_every_rank_n2 t_gpu 2 zg_rank_fault 60
run_test gpu/direct_killed_rank_is_reported_as_peer_lost_n2 t_gpu 2 zg_rank_peer_trouble 60 \
    ZG_ACT=exit ZC_IB_TIMEOUT=12
run_test gpu/direct_mismatch_is_reported_on_every_rank_n3 t_gpu 3 zg_rank_mismatch 60
run_test gpu/direct_wrong_rkey_is_reported t_gpu_wrong_rkey ZC_RXE_BAD_RKEY_SKIP=1
run_test gpu/direct_stream_forms_in_order_n2 t_gpu 2 zg_rank_stream_forms 200
run_test gpu/auto_path_is_staged_when_a_device_takes_no_rdma_n3 t_gpu 3 zg_rank_path_choice 60 \
    ZG_NO_RDMA_RANK=2 ZG_PATH=staged
run_test gpu/auto_path_is_direct_when_every_device_takes_rdma_n3 t_gpu 3 zg_rank_path_choice \
    60 ZG_PATH=direct
run_test gpu/direct_split_children_decide_their_path_n4 t_gpu 4 zg_rank_split 120 ZG_PATH=direct
run_test gpu/mixed_job_splits_by_host_onto_shared_memory_n4 t_gpu 4 zg_rank_mixed 120 \
    ZG_PER_HOST=2 ZC_LOG=info
run_test gpu/forced_direct_fails_init_naming_the_rank_that_cannot_n2 t_gpu_init_fails 2 \
    zg_rank_path_choice 60 ZG_NO_RDMA_RANK=1 ZC_GPU_PATH=direct
run_test gpu/staged_collectives_match_reference_n2 t_gpu 2 zg_rank_collectives 400 ZG_PATH=staged \
    ZC_GPU_PATH=staged ZC_GPU_STAGE_BYTES=16384
run_test gpu/staged_collectives_match_reference_n3 t_gpu 3 zg_rank_collectives 400 ZG_PATH=staged \
    ZC_GPU_PATH=staged
run_test gpu/staged_injected_device_fault_fails_every_rank_n2 t_gpu 2 zg_rank_fault 60 \
    ZG_FAULT_AT=5 ZC_GPU_PATH=staged
run_test gpu/staged_killed_rank_is_reported_as_peer_lost_n2 t_gpu 2 zg_rank_peer_trouble 60 \
    ZG_ACT=exit ZC_IB_TIMEOUT=12 ZC_GPU_PATH=staged
run_test gpu/staged_wrong_rkey_is_reported t_gpu_wrong_rkey ZC_GPU_PATH=staged
run_test zcbench/all_collectives_checked_on_device_buffers_over_ib_n3 t_zcbench_device direct
run_test zcbench/all_collectives_checked_on_staged_device_buffers_over_ib_n3 t_zcbench_device \
    staged ZC_GPU_PATH=staged
echo "@@rxe: suite-end $PASS $FAIL $SKIP"
