#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS]: builds every libFuzzer target tests/fuzz/fuzz_*.c with clang
# (ASan and UBSan, the core on platform/freestanding.c with tests/fuzz/fake_plat.c's in-memory
# hooks, so no input touches the OS; compiled once into build/fuzz/libcore.a) and runs each
# for SECONDS (default $FUZZ_SECONDS, else 60), starting from its seed corpus in tests/fuzz/corpus/NAME (the inputs found go to
# build/fuzz/corpus/NAME, which later runs start from too). `ninja fuzz` runs it; `ninja check`
# runs a 10-second pass. Prints a line per target and `N passed, N failed`; a crash, a leak or
# a broken check fails its target and leaves the input in build/fuzz/.
set -uo pipefail
cd "$(dirname "$0")/../.."

secs=${1:-${FUZZ_SECONDS:-60}}
out=build/fuzz
mkdir -p "$out"
if ! command -v clang >/dev/null 2>&1; then
    echo "fuzz: clang is not installed (apt-get install clang libclang-rt-14-dev)"
    echo "0 passed, 1 failed"
    exit 1
fi
# The library's portable sources (the set check-freestanding compiles) and the fake platform,
# compiled once, instrumented, into one archive every target links.
srcs=(core/*.c transport_shm/*.c platform/freestanding.c tests/fuzz/fake_plat.c)
common=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -std=c11 -Wall -Wextra
        -Werror -Wno-pass-failed -D_GNU_SOURCE -Iinclude -Iplatform -Iprovider -Icore)
flags=("${common[@]}" -fsanitize=fuzzer)
pass=0 fail=0
rm -rf "$out/obj"
mkdir -p "$out/obj"
for src in "${srcs[@]}"; do
    obj="$out/obj/$(tr / _ <<<"${src%.c}").o"
    if ! clang "${common[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" \
        >>"$out/obj/build.log" 2>&1; then
        echo "fuzz: $src does not build"
        tail -20 "$out/obj/build.log"
        echo "0 passed, 1 failed"
        exit 1
    fi
done
ar rcs "$out/libcore.a" "$out"/obj/*.o
for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    extra=()
    if [ "$name" = fuzz_ibblob ]; then # includes transport_ib/ib.c: needs libibverbs-dev
        if [ ! -f /usr/include/infiniband/verbs.h ]; then
            echo "skip $name: no libibverbs-dev"
            continue
        fi
        extra=(-DZC_HAVE_IB=1 -Itransport_ib transport_ib/verbs.c transport_ib/path.c)
        extra+=("$out/libcore.a" -libverbs) # ib.c's calls into the core come after it
    fi
    if ! clang "${flags[@]}" "$src" "${extra[@]}" "$out/libcore.a" -o "$out/$name" \
        >"$out/$name.build.log" 2>&1; then
        echo "FAIL $name: does not build"
        tail -20 "$out/$name.build.log"
        fail=$((fail + 1))
        continue
    fi
    mkdir -p "$out/corpus/$name"
    if (cd "$out" && "./$name" -max_total_time="$secs" -print_final_stats=1 \
            "corpus/$name" "../../tests/fuzz/corpus/$name" >"$name.log" 2>&1); then
        runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$out/$name.log")
        echo "ok   $name: ${runs:-?} inputs in $secs s, no finding"
        pass=$((pass + 1))
    else
        echo "FAIL $name: a finding (build/fuzz/$name.log; the input is in build/fuzz/)"
        grep -E "ERROR|SUMMARY|Test unit written" "$out/$name.log" | head -5
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
