# The verdict on one glib test path from its TAP output, for the host's
# tests (tests/check, tests/soak) and the HGM kernel's guest
# (tests/guest/init, busybox sh): source it, do not run it.
# shellcheck shell=sh

# tap_below BINARY PATH [ARGS...]: '-s SUB' for every test path of BINARY
# below PATH.  glib's -p runs those too (say, .../preempt/recovery under
# .../preempt); the callers run each on its own.
tap_below() {
    local bin=$1 path=$2 sub
    shift 2
    for sub in $("$bin" "$@" -l 2>/dev/null | grep "^$path/"); do
        printf -- '-s %s ' "$sub"
    done
}

# tap_verdict LOG PATH RC: how test PATH fared, from the TAP output in LOG
# and its binary's exit code RC.  Prints one line: 'pass', 'skip REASON'
# (the test skipped itself), 'none' (the binary ran nothing of that name:
# the test is not registered on this host, say without userfaultfd) or
# 'fail'.
tap_verdict() {
    local log=$1 path=$2 rc=$3 re
    # test paths may hold regex characters (multifd+postcopy)
    re=$(printf '%s' "$path" | sed 's/[][\\.*^$+?(){}|]/\\&/g')
    if grep -Eq "^ok [0-9]+ $re # SKIP" "$log"; then
        echo "skip $(grep -E "^ok [0-9]+ $re # SKIP" "$log" | head -n1 | sed 's/.*# SKIP *//')"
    elif [ "$rc" = 0 ] && grep -Eq "^ok [0-9]+ $re\$" "$log"; then
        echo pass
    elif [ "$rc" = 0 ] && ! grep -Eq "^(not )?ok " "$log"; then
        echo none
    else
        echo fail
    fi
}
