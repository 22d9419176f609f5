#!/usr/bin/env bash
# tests/launchers/run.sh: zcoll started by real launchers, each running the C program
# tests/install/zchello.c (rank, size and rendezvous from the launcher's environment through
# zc_config_from_env) and, where torch is installed, tests/launchers/job.py (backend "zcoll"):
#   torchrun  Debian's 1.13 torchrun dies on Python 3.11 in its log-redirect option parsing
#             (Std.from_str); --redirects 1 --tee 1 avoids that code path, so every run passes them;
#   mpirun    Open MPI (openmpi-bin), --allow-run-as-root under root, --oversubscribe;
#   srun      a one-node Slurm this script starts (munged, slurmctld, slurmd on this host with a
#             generated slurm.conf in a temporary folder) and stops afterwards.
# Each checks every rank printed the right sum (the C program is run with ZC_SECRET and again with
# ZC_SECRET_FILE; no rank may warn of a derived secret). A launcher that is not installed is
# skipped.
# Prints PASS/FAIL/SKIP lines and `N passed, N failed, N skipped`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
TOP=$PWD
# shellcheck source=tests/suite.sh
source tests/suite.sh

TMP=$(mktemp -d)
cleanup() {
    [ -n "${SLURM_PIDS:-}" ] && kill $SLURM_PIDS 2>/dev/null
    [ -n "${MUNGE_PID:-}" ] && kill "$MUNGE_PID" 2>/dev/null
    sleep 0.5
    rm -rf "$TMP"
}
trap cleanup EXIT

# Linked against the build tree, found at run time by its SONAME in build/ (the rpath).
HELLO=$TMP/zchello
cc -std=c11 -Iinclude -o "$HELLO" tests/install/zchello.c -Lbuild -lzcoll \
    -Wl,-rpath,"$TOP/build" || { fail "build zchello"; summary; exit 1; }
PY=""
for py in python3 /usr/bin/python3; do
    if "$py" -c 'import torch' 2>/dev/null; then PY=$py; break; fi
done
SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
SECRET_FILE=$TMP/secret # the same secret, in a file only this user reads (ZC_SECRET_FILE)
(umask 077 && echo "$SECRET" >"$SECRET_FILE")
port() { echo $((20000 + RANDOM % 20000)); }

# check NAME N LOG: every rank 0..N-1 printed the sum N(N+1)/2, and no rank warned of a
# derived secret (every job here is given one).
check() {
    local name=$1 n=$2 log=$3 sum=$(($2 * ($2 + 1) / 2)) r ok=1
    for ((r = 0; r < n; r++)); do
        grep -Eq "rank $r of $n.*sum $sum\$" "$log" || ok=0
    done
    grep -q "secret is derived" "$log" && ok=0
    if [ "$ok" = 1 ]; then pass "$name"; else fail "$name"; cat "$log"; fi
}

# --- torchrun --------------------------------------------------------------------------------
if [ -n "$PY" ] && "$PY" -c 'import torch.distributed.run' 2>/dev/null; then
    TR=("$PY" -m torch.distributed.run --redirects 1 --tee 1 --nproc_per_node 2)
    ZC_SECRET=$SECRET timeout 120 "${TR[@]}" --master_port "$(port)" --no_python "$HELLO" \
        >"$TMP/tr_c.log" 2>&1
    check "torchrun: C program on 2 ranks" 2 "$TMP/tr_c.log"
    ZC_SECRET_FILE=$SECRET_FILE timeout 120 "${TR[@]}" --master_port "$(port)" --no_python \
        "$HELLO" >"$TMP/tr_f.log" 2>&1
    check "torchrun: C program on 2 ranks, secret in ZC_SECRET_FILE" 2 "$TMP/tr_f.log"
    timeout 120 "${TR[@]}" --master_port "$(port)" tests/launchers/job.py >"$TMP/tr_py.log" 2>&1
    check "torchrun: Python backend zcoll on 2 ranks" 2 "$TMP/tr_py.log"
else
    skip "torchrun (no python3 with torch)"
fi

# --- mpirun ----------------------------------------------------------------------------------
if command -v mpirun >/dev/null; then
    MPI=(mpirun -n 3 --oversubscribe --bind-to none)
    [ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
    timeout 120 "${MPI[@]}" -x ZC_ROOT_ADDR="127.0.0.1:$(port)" -x ZC_SECRET="$SECRET" "$HELLO" \
        >"$TMP/mpi_c.log" 2>&1
    check "mpirun: C program on 3 ranks" 3 "$TMP/mpi_c.log"
    timeout 120 "${MPI[@]}" -x ZC_ROOT_ADDR="127.0.0.1:$(port)" -x ZC_SECRET_FILE="$SECRET_FILE" \
        "$HELLO" >"$TMP/mpi_f.log" 2>&1
    check "mpirun: C program on 3 ranks, secret in ZC_SECRET_FILE" 3 "$TMP/mpi_f.log"
    if [ -n "$PY" ]; then
        timeout 120 "${MPI[@]}" -x ZCT_STORE_PORT="$(port)" "$PY" tests/launchers/job.py \
            >"$TMP/mpi_py.log" 2>&1
        check "mpirun: Python backend zcoll on 3 ranks" 3 "$TMP/mpi_py.log"
    else
        skip "mpirun: Python (no python3 with torch)"
    fi
else
    skip "mpirun (apt-get install openmpi-bin)"
fi

# --- srun on a one-node Slurm started here ------------------------------------------------------
start_slurm() {
    local d=$TMP/slurm host cpus
    host=$(hostname -s)
    cpus=$(nproc)
    mkdir -p "$d/state" "$d/spool" "$d/munge"
    chmod 700 "$d/munge"
    dd if=/dev/urandom of="$d/munge/key" bs=1024 count=1 2>/dev/null
    chmod 400 "$d/munge/key"
    munged --key-file="$d/munge/key" --socket="$d/munge/sock" --pid-file="$d/munge/pid" \
        --log-file="$d/munge/log" --seed-file="$d/munge/seed" --force || return 1
    MUNGE_PID=$(cat "$d/munge/pid")
    local sport=$(port) dport=$(port)
    cat > "$d/slurm.conf" <<CONF
ClusterName=zctest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
SlurmctldPort=$sport
SlurmdPort=$dport
AuthType=auth/munge
AuthInfo=socket=$d/munge/sock
CredType=cred/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=zc Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
    export SLURM_CONF=$d/slurm.conf
    slurmctld -D -f "$d/slurm.conf" >"$d/ctld.out" 2>&1 &
    SLURM_PIDS="$!"
    slurmd -D -f "$d/slurm.conf" >"$d/d.out" 2>&1 &
    SLURM_PIDS="$SLURM_PIDS $!"
    local i
    for ((i = 0; i < 60; i++)); do
        sinfo -h -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)' && return 0
        sleep 0.5
    done
    cat "$d"/*.log "$d"/*.out 2>/dev/null | tail -20
    return 1
}
if command -v srun >/dev/null && command -v slurmctld >/dev/null && command -v munged >/dev/null; then
    if start_slurm; then
        SR=(srun -n 2 --overcommit --oversubscribe -t 2)
        ZC_ROOT_ADDR="127.0.0.1:$(port)" ZC_SECRET=$SECRET timeout 120 "${SR[@]}" "$HELLO" \
            >"$TMP/srun_c.log" 2>&1
        check "srun: C program on 2 ranks" 2 "$TMP/srun_c.log"
        ZC_ROOT_ADDR="127.0.0.1:$(port)" ZC_SECRET_FILE=$SECRET_FILE timeout 120 "${SR[@]}" \
            "$HELLO" >"$TMP/srun_f.log" 2>&1
        check "srun: C program on 2 ranks, secret in ZC_SECRET_FILE" 2 "$TMP/srun_f.log"
        if [ -n "$PY" ]; then
            ZCT_STORE_PORT=$(port) timeout 120 "${SR[@]}" "$PY" tests/launchers/job.py \
                >"$TMP/srun_py.log" 2>&1
            check "srun: Python backend zcoll on 2 ranks" 2 "$TMP/srun_py.log"
        else
            skip "srun: Python (no python3 with torch)"
        fi
    else
        fail "start a one-node Slurm (munged, slurmctld, slurmd)"
    fi
else
    skip "srun (apt-get install slurm-wlm munge)"
fi

summary
