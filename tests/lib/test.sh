# What every test script of tests/ shares; source it, do not run it.
# shellcheck shell=bash
#
# One format for every test result, whatever ran the test (a glib test's
# TAP output, a selftest's status, a script's own check):
#   PASS  NAME [SECONDS]
#   FAIL  NAME (REASON)
#   SKIP  NAME (REASON)
# and, at the end of a script, 'N passed, N failed, N skipped' (which
# tests/check and .ci/run sum).  tests/lib/results.py prints the same for
# the Python tests.

. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
. "$top/tests/lib/tap.sh"

pass=0 fail=0 skip=0
result() {  # result pass|fail|skip NAME [REASON]
    local r=$1 name=$2 why=${3:-}
    case $r in
    pass) pass=$((pass + 1)); printf 'PASS  %s\n' "$name" ;;
    fail) fail=$((fail + 1)); printf 'FAIL  %s%s\n' "$name" "${why:+ ($why)}" ;;
    skip) skip=$((skip + 1)); printf 'SKIP  %s%s\n' "$name" "${why:+ ($why)}" ;;
    esac
}

summary() {
    echo "$pass passed, $fail failed, $skip skipped"
}

# count_results LOG: add the result lines of LOG (another test script's
# output) to the counts
count_results() {
    local p f s
    p=$(grep -c '^PASS  ' "$1"); f=$(grep -c '^FAIL  ' "$1"); s=$(grep -c '^SKIP  ' "$1")
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    [ "$f" = 0 ]
}
