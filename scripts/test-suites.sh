#!/usr/bin/env bash
# Every lesson's suites on the builds as they are: the shared library's unit
# tests and each lesson's against the solution (all must pass), each
# lesson's against the untouched skeleton (all must fail), as make test runs
# them. make test-clang runs this after building with clang:
#   scripts/test-suites.sh "WHAT THE BUILDS ARE" [--fixtures NAME] LESSON...
# --fixtures NAME: then each lesson's fixture tests/fixtures/LESSON/NAME,
# where there is one, graded on these builds (make test-mpich grades the
# correct programs that use MPI's constants, uses-mpi-constants, with MPICH).
# Ends with Check's closing line for the whole run and "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
what=${1:?usage: scripts/test-suites.sh "WHAT THE BUILDS ARE" [--fixtures NAME] LESSON...}
shift
fixture=""
if [ "${1:-}" = --fixtures ]; then
    fixture=${2:?usage: scripts/test-suites.sh "WHAT THE BUILDS ARE" [--fixtures NAME] LESSON...}
    shift 2
fi
tally=build/test-suites/tally
rm -rf build/test-suites
mkdir -p build/test-suites
: > "$tally"
# Everything this run prints is also kept, for the list of failures at the end.
exec > >(tee build/test-suites/run.log) 2>&1
tee_pid=$!
status=0
test_tmp=$(mktemp -d "${TMPDIR:-/tmp}/zz-suites-XXXXXX") || exit 2
trap 'rm -rf "$test_tmp"' EXIT
export TMPDIR=$test_tmp

run_suite() {   # run_suite BUILD_DIR BINARY TITLE MODE
    local start=$SECONDS
    ZZ_BUILD_DIR=$1 "$2" --title "$3 ($what)" --mode "$4" --tally "$tally" || status=1
    echo "  ($((SECONDS - start)) s)"
    echo
}

echo "== the shared library and the given programs ($what)"
for t in build/solution/tests/common/test_*; do
    case "$t" in *.o|*.d) continue ;; esac
    run_suite build/solution "$t" "common: ${t##*/test_}" solution
done
for lesson in "$@"; do
    echo "== lesson $lesson ($what)"
    run_suite build/solution "build/solution/tests/test_$lesson" "lesson $lesson: the solution" solution
    run_suite build/student "build/student/tests/test_$lesson" "lesson $lesson: the skeleton" skeleton
done

if [ -n "$fixture" ]; then
    echo "== the fixtures named $fixture, graded ($what)"
    make -s --no-print-directory build/grade-tool/grade || status=1
    for lesson in "$@"; do
        [ -d "tests/fixtures/$lesson/$fixture" ] || continue
        scripts/grade-fixture.sh "tests/fixtures/$lesson/$fixture" --tally "$tally" || status=1
        echo
    done
fi

awk -f tests/what-failed.awk build/test-suites/run.log
awk -f tests/tally-summary.awk "$tally"
exec > /dev/null 2>&1
wait "$tee_pid"
exit $status
