#!/usr/bin/env bash
# tests/fuzz/run.sh [check | explore [SECONDS] | SECONDS]: builds every libFuzzer target
# tests/fuzz/fuzz_*.c with clang (ASan and UBSan, the core on platform/freestanding.c with
# tests/fuzz/fake_plat.c's in-memory hooks, so no input touches the OS; compiled once into
# build/fuzz/libcore.a), then per target:
#   check    (`ninja check`): replays every input of its corpus tests/fuzz/corpus/NAME, then
#            runs a pass of FUZZ_CHECK_RUNS inputs (default 20000) mutated from that corpus with
#            the fixed seed FUZZ_CHECK_SEED (default 1), new inputs kept in a scratch folder:
#            the same tree gives the same inputs on every run, so a green check depends on the
#            code alone, never on luck;
#   explore  (`ninja fuzz`, the default): open-ended random exploration for SECONDS (default
#            $FUZZ_SECONDS, else 60) from the corpus and the inputs earlier explorations kept in
#            build/fuzz/corpus/NAME. A finding is left in build/fuzz/ (crash-*, leak-*,
#            timeout-*): fix it, then copy the input into tests/fuzz/corpus/NAME under a name
#            that says what it found, so that every later check replays it.
# Prints a line per target and `N passed, N failed`; a crash, a leak or a broken check fails
# its target.
set -uo pipefail
cd "$(dirname "$0")/../.."

mode=explore secs=${FUZZ_SECONDS:-60}
case "${1:-}" in
check) mode=check ;;
explore) secs=${2:-$secs} ;;
'') ;;
*) secs=$1 ;;
esac
runs=${FUZZ_CHECK_RUNS:-20000} seed=${FUZZ_CHECK_SEED:-1}
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

# check: every corpus input once, then the fixed pass; the log is build/fuzz/NAME.log.
check_target() {
    local name=$1 scratch="$out/scratch/$1" n
    n=$(find "tests/fuzz/corpus/$name" -type f | wc -l)
    rm -rf "$scratch"
    mkdir -p "$scratch"
    if ! (cd "$out" && find "../../tests/fuzz/corpus/$name" -type f -print0 | sort -z |
        xargs -0 "./$name" >"$name.log" 2>&1); then
        echo "FAIL $name: a corpus input fails (build/fuzz/$name.log)"
        grep -E "ERROR|SUMMARY|Running: " "$out/$name.log" | tail -3
        return 1
    fi
    # -use_cmp=0: compared values feed mutations, and some are addresses, which ASLR changes
    # from run to run; without them the same seed gives the same inputs.
    if ! (cd "$out" && "./$name" -seed="$seed" -runs="$runs" -reload=0 -use_cmp=0 \
        -print_final_stats=1 \
        "scratch/$name" "../../tests/fuzz/corpus/$name" >>"$name.log" 2>&1); then
        echo "FAIL $name: the fixed pass (seed $seed) found an input (build/fuzz/$name.log)"
        grep -E "ERROR|SUMMARY|Test unit written" "$out/$name.log" | head -5
        return 1
    fi
    echo "ok   $name: $n corpus inputs, then $runs inputs of seed $seed, no finding"
}

explore_target() {
    local name=$1 done_runs
    mkdir -p "$out/corpus/$name"
    if ! (cd "$out" && "./$name" -max_total_time="$secs" -print_final_stats=1 \
        "corpus/$name" "../../tests/fuzz/corpus/$name" >"$name.log" 2>&1); then
        echo "FAIL $name: a finding (build/fuzz/$name.log; the input is in build/fuzz/: once" \
             "fixed, add it to tests/fuzz/corpus/$name)"
        grep -E "ERROR|SUMMARY|Test unit written" "$out/$name.log" | head -5
        return 1
    fi
    done_runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$out/$name.log")
    echo "ok   $name: ${done_runs:-?} inputs in $secs s, no finding"
}

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
    if "${mode}_target" "$name"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
