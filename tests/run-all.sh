#!/usr/bin/env bash
# make test: the toolkit's own test suite.
#   1. the shared library's unit tests and the drivers' input checks;
#   2. every lesson's suite against the solutions: every test must pass;
#   3. every lesson's suite against the untouched skeletons: every test must
#      fail (a test that passes there cannot fail, and is a bug);
#   4. every broken submission in tests/fixtures/ against its expectations:
#      the tests must catch it, with a message that names the problem;
#   5. the solutions again under AddressSanitizer and UBSan.
# Ends with Check's closing line for the whole run and "N passed, N failed".
# Usage: tests/run-all.sh LESSON...   (run by make test, after the builds)
set -u
cd "$(dirname "$0")/.."

tally=build/test/tally
mkdir -p build/test
: > "$tally"
status=0

run_suite() {   # run_suite BUILD_DIR BINARY TITLE MODE [RUNNER OPTIONS]
    case "$2" in *.o|*.d) return ;; esac
    local build=$1 binary=$2 title=$3 mode=$4
    shift 4
    local start=$SECONDS
    ZZ_BUILD_DIR=$build "$binary" --title "$title" --mode "$mode" --tally "$tally" "$@" || status=1
    echo "  ($((SECONDS - start)) s)"
    echo
}

echo "== the shared library and the given programs"
for t in build/solution/tests/common/test_*; do
    run_suite build/solution "$t" "common: ${t##*/test_}" solution
done

for lesson in "$@"; do
    echo "== lesson $lesson"
    run_suite build/solution "build/solution/tests/test_$lesson" "lesson $lesson: the solution" solution
    run_suite build/student "build/student/tests/test_$lesson" "lesson $lesson: the skeleton" skeleton
    for expect in tests/fixtures/"$lesson"/*/expected.txt; do
        [ -e "$expect" ] || continue
        name=$(basename "$(dirname "$expect")")
        run_suite "build/fixture/$lesson/$name" "build/fixture/$lesson/$name/tests/test_$lesson" \
            "lesson $lesson: broken submission '$name'" fixture --expect "$expect"
    done
done

echo "== the solutions under AddressSanitizer and UndefinedBehaviorSanitizer"
# A size too large for memory must reach the program's own error path (exit
# 2), as it does without the sanitizer, instead of ASan's report.
export ASAN_OPTIONS=allocator_may_return_null=1
# The library's own code, and every lesson; the given programs' handling of
# bad input and the MPI harness are not worth a second, slower pass.
run_suite build/sanitize build/sanitize/tests/common/test_library "sanitized common: library" solution
for lesson in "$@"; do
    run_suite build/sanitize "build/sanitize/tests/test_$lesson" "sanitized lesson $lesson" solution
done

awk -v status="$status" '
    { passed += $1; failed += $2; skipped += $3 }
    END {
        total = passed + failed
        percent = total ? int(100 * passed / total) : 100
        printf "%d%%: Checks: %d, Failures: %d, Errors: 0\n", percent, total, failed
        if (skipped) printf "%d passed, %d failed, %d skipped\n", passed, failed, skipped
        else printf "%d passed, %d failed\n", passed, failed
    }' "$tally"
exit $status
