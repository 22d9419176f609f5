# tests/suite.sh: sourced by the shell test suites (tests/install/run.sh,
# tests/launchers/run.sh): counters and the PASS/FAIL/SKIP lines; `summary` prints the final
# `N passed, N failed, N skipped` line that tests/check.sh adds up, and returns non-zero when a
# test failed.
P=0 F=0 S=0
pass() { echo "PASS $1"; P=$((P + 1)); }
fail() { echo "FAIL $1"; F=$((F + 1)); }
skip() { echo "SKIP $1"; S=$((S + 1)); }
summary() {
    echo "$P passed, $F failed, $S skipped"
    [ "$F" -eq 0 ]
}
