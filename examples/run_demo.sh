#!/usr/bin/env bash
# run_demo.sh: runs every example program (examples/*.c, built by `ninja` into build/examples/)
# under build/zcrun with the rank count its tutorial uses, a header line before each, then a
# short zcbench sweep of every collective on 2 local ranks with every result checked; exits
# non-zero if any of them fails, times out or was not built. `ninja demo` runs it from the top
# of the tree; it finds the tree from its own path, so it works from anywhere.
set -u

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

ZCRUN=build/zcrun
TIMEOUT_S=60

# The rank count each program's article uses; 2 for an example not listed here.
ranks_of() {
    case "$1" in
        seed000_reduce_scatter) echo 2 ;;  # the thread's 2 GPUs
        seed002_collectives) echo 4 ;;     # the article's size = 4
        seed003_patterns) echo 3 ;;        # the page's values 1, 2, 3
        seed004_primitives) echo 4 ;;      # the article's world_size = 4
        *) echo 2 ;;
    esac
}

if [ ! -x "$ZCRUN" ]; then
    echo "run_demo.sh: $ZCRUN is missing; run ./configure.py && ninja first" >&2
    exit 1
fi

failed=()
count=0
for src in examples/*.c; do
    [ -e "$src" ] || continue
    name=$(basename "$src" .c)
    prog=build/examples/$name
    ranks=$(ranks_of "$name")
    count=$((count + 1))
    echo "=== $name: $ZCRUN -n $ranks --timeout $TIMEOUT_S $prog ==="
    if [ ! -x "$prog" ]; then
        echo "run_demo.sh: $prog is missing; run ninja first" >&2
        failed+=("$name")
        continue
    fi
    "$ZCRUN" -n "$ranks" --timeout "$TIMEOUT_S" "$prog"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "run_demo.sh: $name failed: zcrun exit status $rc" >&2
        failed+=("$name")
    fi
done

# The tutorials' own Python programs (examples/*.py, backend "zcoll"), when a python3 with
# torch is installed (Debian: apt-get install python3-torch; it is /usr/bin/python3).
TORCH_PY=""
for py in python3 /usr/bin/python3; do
    if "$py" -c 'import torch' 2>/dev/null; then TORCH_PY=$py; break; fi
done
for src in examples/*.py; do
    [ -e "$src" ] || continue
    name=$(basename "$src")
    if [ -z "$TORCH_PY" ]; then
        echo "=== $name: skipped (no python3 with torch) ==="
        continue
    fi
    count=$((count + 1))
    echo "=== $name: $TORCH_PY $src (backend zcoll) ==="
    if ! MASTER_PORT=$((20000 + RANDOM % 20000)) timeout "$TIMEOUT_S" "$TORCH_PY" "$src"; then
        echo "run_demo.sh: $name failed" >&2
        failed+=("$name")
    fi
done

# The benchmark on local ranks: every collective, 8 B to 1 MiB, results checked (--check).
# The full comparison with Open MPI, MPICH and Gloo is `ninja bench` (bench/README.md).
BENCH=(build/zcbench -c all -b 8 -e 1M -f 32 --check)
count=$((count + 1))
echo "=== zcbench: $ZCRUN -n 2 --timeout 120 ${BENCH[*]} ==="
if "$ZCRUN" -n 2 --timeout 120 "${BENCH[@]}"; then
    :
else
    echo "run_demo.sh: zcbench failed: zcrun exit status $?" >&2
    failed+=(zcbench)
fi

if [ "${#failed[@]}" -ne 0 ]; then
    echo "=== demo FAILED: ${failed[*]} ===" >&2
    exit 1
fi
echo "=== demo passed: $count programs (the examples, C and Python, and zcbench) ==="
