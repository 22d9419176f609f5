#!/usr/bin/env bash
# run_demo.sh: runs every seed tutorial example (examples/seed*.c, built by `ninja` into
# build/examples/) under build/zcrun with the rank count its article uses, each with a header
# line; exits non-zero if any of them fails or is missing. `ninja demo` runs it from the top of
# the tree; it also works when called from elsewhere.
set -u

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

ZCRUN=build/zcrun
TIMEOUT=60

# program  ranks  (what it shows)
DEMOS=(
    "seed000_reduce_scatter 2"   # reduce_scatter of two inputs, all_gather of rank*3+i
    "seed002_collectives 4"      # reduce, all_reduce, scatter, gather, all_gather, broadcast
    "seed003_patterns 3"         # the patterns page: values [1, 2, 3], use cases
    "seed004_primitives 4"       # broadcast, all_reduce of rank+1, scatter, gather, async
)

if [ ! -x "$ZCRUN" ]; then
    echo "run_demo.sh: $ZCRUN not found; run ./configure.py && ninja first" >&2
    exit 1
fi

failed=()
for demo in "${DEMOS[@]}"; do
    read -r name ranks <<<"$demo"
    prog=build/examples/$name
    echo "=== $name: zcrun -n $ranks ==="
    if [ ! -x "$prog" ]; then
        echo "run_demo.sh: $prog not built" >&2
        failed+=("$name")
        continue
    fi
    "$ZCRUN" -n "$ranks" --timeout "$TIMEOUT" "$prog"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "run_demo.sh: $name failed (zcrun exit status $rc)" >&2
        failed+=("$name")
    fi
done

if [ "${#failed[@]}" -ne 0 ]; then
    echo "=== demo FAILED: ${failed[*]} ===" >&2
    exit 1
fi
echo "=== demo passed: ${#DEMOS[@]} programs ==="
