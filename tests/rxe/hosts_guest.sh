# tests/rxe/hosts_guest.sh: the guest side of tests/rxe/hosts.sh (two guests on a virtual
# wire), sourced by tests/rxe/init in each guest. hg_agent reads commands from the virtio
# serial port the host named zc.ctl (/dev/vportNp1: lossless, unlike an emulated UART whose
# input a starved guest can overrun), one a line: "ID COMMAND", runs COMMAND with sh in /zc
# (the functions below are defined there), then writes back on the same port every line of its
# output as "@@ ID LINE" and "@@done ID STATUS". One command at a time; jobs run in the
# background between commands. The command "poweroff" ends the agent.
#
# A job is NAME's ranks on this guest: job_start starts them, job_wait_line waits until each
# printed a line, job_wait until each exited and prints their output ("[R] LINE") and status
# ("@rank R exit STATUS"). Ranks run each under `timeout -s KILL`, so none outlives its limit.


# Milliseconds since boot (/proc/uptime has hundredths); the rank programs print the same
# clock (CLOCK_BOOTTIME), so a mark and a rank's report can be subtracted.
hg_now_ms() {
    read -r u _ </proc/uptime
    echo $((${u%.*} * 1000 + (1${u#*.} - 100) * 10))
}

# job_start NAME NRANKS FIRST COUNT ROOT LIMIT_S PROGRAM [VAR=VALUE...]: ranks FIRST ..
# FIRST+COUNT-1 of an NRANKS-rank job whose rank 0 listens at ROOT (host:port), each
# `env VAR=VALUE... PROGRAM` killed after LIMIT_S seconds. PROGRAM is one word (a command of
# /zc/build with its arguments joined by '+': zctest+--rank+mp_rank_link).
job_start() {
    name=$1 n=$2 first=$3 count=$4 root=$5 limit=$6 prog=$7
    shift 7
    d=/tmp/job.$name
    rm -rf "$d"
    mkdir -p "$d"
    local_rank=0
    r=$first
    while [ "$r" -lt $((first + count)) ]; do
        (
            env ZC_RANK=$r ZC_NRANKS=$n ZC_LOCAL_RANK=$local_rank ZC_ROOT_ADDR=$root "$@" \
                timeout -s KILL "$limit" $(echo "$prog" | tr + ' ') >"$d/$r.out" 2>&1 </dev/null
            echo $? >"$d/$r.rc"
        ) >/dev/null 2>&1 &
        r=$((r + 1))
        local_rank=$((local_rank + 1))
    done
    echo "started ranks $first..$((first + count - 1)) of $n ($prog)"
}

# job_wait_line NAME PATTERN LIMIT_S: waits until every rank of NAME printed a line matching
# PATTERN (grep -E) or exited; status 1 when LIMIT_S passed first.
job_wait_line() {
    d=/tmp/job.$1 end=$(($(hg_now_ms) + $3 * 1000))
    while [ "$(hg_now_ms)" -lt "$end" ]; do
        missing=0
        for f in "$d"/*.out; do
            grep -qE "$2" "$f" || [ -e "${f%.out}.rc" ] || missing=1
        done
        [ $missing = 0 ] && return 0
        sleep 0.1
    done
    echo "not every rank of $1 printed /$2/ within $3 s"
    return 1
}

# job_wait NAME LIMIT_S: waits until every rank of NAME exited (they are killed at their own
# limit anyway), then prints each rank's output and exit status.
job_wait() {
    d=/tmp/job.$1 end=$(($(hg_now_ms) + $2 * 1000))
    while [ "$(hg_now_ms)" -lt "$end" ]; do
        done=1
        for f in "$d"/*.out; do [ -e "${f%.out}.rc" ] || done=0; done
        [ $done = 1 ] && break
        sleep 0.1
    done
    for f in "$d"/*.out; do
        r=${f##*/}
        r=${r%.out}
        sed "s/^/[$r] /" "$f"
        echo "@rank $r exit $(cat "$d/$r.rc" 2>/dev/null || echo running)"
    done
}

# mark NAME: remembers and prints the boot clock (ms), as "@mark NAME MS".
mark() { echo "@mark $1 $(hg_now_ms)"; }

# netem ARGS...: `tc qdisc replace dev eth0 root netem ARGS` ("off": removes it); prints the
# qdisc's statistics before the change.
netem() {
    /usr/bin/tc -s qdisc show dev eth0 | sed -n 's/^ *Sent /@netem sent /p' | head -n 1
    if [ "$1" = off ]; then
        /usr/bin/tc qdisc del dev eth0 root 2>/dev/null
        return 0
    fi
    /usr/bin/tc qdisc replace dev eth0 root netem "$@"
}

# counters: rxe0's port counters that tell retries and losses, as "@count NAME VALUE".
counters() {
    for c in sent_pkts rcvd_pkts duplicate_request out_of_seq_request rcvd_seq_err \
        completer_retry_err retry_exceeded_err rcvd_rnr_err send_rnr_err send_err link_downed; do
        v=$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/$c 2>/dev/null) &&
            echo "@count $c $v"
    done
    echo "@port $(cat /sys/class/infiniband/rxe0/ports/1/state)"
}

# sweep_jobs: kills every rank still running (a job whose ranks outlived the test) and takes
# any netem off the NIC.
sweep_jobs() {
    for p in /proc/[0-9]*; do
        case $({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) in
        timeout*|/zc/build/*|zctest*|zcgputest*|zcbench*) kill -9 "${p#/proc/}" 2>/dev/null ;;
        esac
    done
    /usr/bin/tc qdisc del dev eth0 root 2>/dev/null
    return 0
}

hg_agent() {
    local port=
    for p in /sys/class/virtio-ports/vport*; do
        [ "$(cat "$p/name" 2>/dev/null)" = zc.ctl ] && port=/dev/${p##*/}
    done
    [ -c "$port" ] || { echo "hosts agent: no virtio port named zc.ctl"; return 1; }
    # A virtio port opens once at a time: one descriptor both ways, closed for the commands.
    exec 3<>"$port"
    echo "@@ready $(hostname) $(hg_now_ms)" >&3
    while IFS= read -r line <&3; do
        id=${line%% *}
        cmd=${line#* }
        [ "$cmd" = poweroff ] && { echo "@@done $id 0" >&3; return 0; }
        (eval "$cmd") >/tmp/hg.out 2>&1 </dev/null 3>&-
        rc=$?
        { sed "s/^/@@ $id /" /tmp/hg.out; echo "@@done $id $rc"; } >&3
    done
}
