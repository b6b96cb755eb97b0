#!/usr/bin/env bash
# Soak the slow tier (issue 33): run `pytest -n 2 -m slow` N times (default 5) while two CPU-bound
# processes keep the machine busy, print each run's result line, and exit non-zero if any run failed.
#
#     scripts/soak_tests.sh [N] [extra pytest arguments...]
#
# Run from a checkout with the test extras in .venv (the README's second command makes it).
set -uo pipefail
# Job control: without it bash starts background commands with SIGINT ignored, and every Python they start
# inherits that (no KeyboardInterrupt), which the Ctrl-C tests would then see instead of what they test.
set -m
cd "$(dirname "$0")/.."
runs="${1:-5}"
shift || true
pytest_bin="${PYTEST:-.venv/bin/pytest}"
load_pids=()
run_pid=""
stop_load() {
    # the run in progress (its xdist workers end with it) and the two load processes
    [ -n "$run_pid" ] && kill -- "-$run_pid" 2>/dev/null  # its process group (set -m): the workers too
    for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
}
trap stop_load EXIT
trap 'exit 130' INT TERM
for _ in 1 2; do
    yes >/dev/null &
    load_pids+=("$!")
done
failed=0
for i in $(seq 1 "$runs"); do
    log=$(mktemp "${TMPDIR:-/tmp}/soak-run-$i.XXXXXX")
    start=$(date +%s)
    # in the background and waited for, so that a Ctrl-C or kill reaches the trap at once
    "$pytest_bin" -n 2 -m slow -q -p no:cacheprovider "$@" >"$log" 2>&1 &
    run_pid=$!
    wait "$run_pid"
    rc=$?
    run_pid=""
    summary=$(grep -E "(passed|failed|error|no tests ran)" "$log" | tail -1)
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ]; then
        echo "soak run $i/$runs: ok   ($(( $(date +%s) - start )) s) $summary"
        rm -f "$log"
    else
        failed=$((failed + 1))
        echo "soak run $i/$runs: FAIL exit $rc ($(( $(date +%s) - start )) s) $summary; log: $log"
        grep -E "^(FAILED|ERROR) " "$log" | sed 's/^/    /'
    fi
done
echo "soak: $failed of $runs run(s) failed (two CPU-bound processes beside -n 2)"
[ "$failed" -eq 0 ]
