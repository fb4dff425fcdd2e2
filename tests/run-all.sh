#!/usr/bin/env bash
# make test: the toolkit's own test suite.
#   1. the shared library's unit tests and the drivers' input checks;
#   2. every lesson's suite against the solutions: every test must pass;
#   3. every lesson's suite against the untouched skeletons: every test must
#      fail (a test that passes there cannot fail, and is a bug);
#   4. every lesson's manifest gives points to each of its tests;
#   5. every broken submission in tests/fixtures/, graded as make grade
#      grades: its score, and the failures that name the problem;
#   6. the solutions' results graded: full marks, well-formed Gradescope
#      JSON, JUnit XML and TAP that agree;
#   7. the solutions again under AddressSanitizer and UBSan.
# Ends with Check's closing line for the whole run and "N passed, N failed".
# Usage: tests/run-all.sh LESSON...   (run by make test, after the builds)
set -u
cd "$(dirname "$0")/.."

tally=build/test/tally
rm -rf build/test
mkdir -p build/test/solutions/work
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
    run_suite build/solution "build/solution/tests/test_$lesson" "lesson $lesson: the solution" solution \
        --results "build/test/solutions/work/$lesson.results"
    run_suite build/student "build/student/tests/test_$lesson" "lesson $lesson: the skeleton" skeleton
    # The lesson's points: every test has exactly one line in its manifest.
    ZZ_BUILD_DIR=build/solution "build/solution/tests/test_$lesson" --list > "build/test/$lesson.names"
    build/grade-tool/grade --lessons "$lesson" --check-names "build/test/$lesson.names" \
        --tally "$tally" || status=1
done

# Broken submissions, graded as make grade grades: each must get its
# expected score, and fail the expected tests with the expected words. Three
# at a time: most of their time is spent waiting for time limits (deadlocks,
# endless loops), and each has its own build and output folders.
echo "== broken submissions (tests/fixtures), graded"
fixtures=()
for lesson in "$@"; do
    for expect in tests/fixtures/"$lesson"/*/expected.txt; do
        [ -e "$expect" ] && fixtures+=("$lesson $(dirname "$expect")")
    done
done
grade_fixture() {   # grade_fixture LESSON FOLDER: output to FOLDER's log
    local out="build/test/fixtures/$1/$(basename "$2")"
    mkdir -p "$out"
    local start=$SECONDS
    scripts/grade-fixture.sh "$2" --tally "$tally" > "$out.log" 2>&1
    local result=$?
    echo "  ($((SECONDS - start)) s)" >> "$out.log"
    return $result
}
pids=()
for k in "${!fixtures[@]}"; do
    # shellcheck disable=SC2086  # "LESSON FOLDER"
    grade_fixture ${fixtures[$k]} &
    pids[k]=$!
    # At most three at once: wait for the oldest still running.
    if [ $((k + 1)) -ge 3 ]; then
        wait "${pids[k - 2]}"
    fi
done
for k in "${!pids[@]}"; do
    wait "${pids[k]}" 2>/dev/null
done
# A finished job's status is gone once waited for; the logs tell.
for entry in "${fixtures[@]}"; do
    lesson=${entry%% *} folder=${entry#* }
    log="build/test/fixtures/$lesson/$(basename "$folder").log"
    cat "$log"
    grep -q "expectations hold" "$log" && ! grep -q "^  \[FAIL\]" "$log" || status=1
    echo
done

# Lessons that could not be built here (CUDA without nvcc): every test is
# reported skipped, with the reason, and counted as skipped.
for lesson in ${ZZ_UNBUILT:-}; do
    count=$(grep -c '^[^#].*|.*|' "tests/manifest/$lesson.txt")
    echo "== lesson $lesson"
    echo "  [skip] all $count tests: ${ZZ_UNBUILT_REASON:-not built here}"
    echo "0 0 $count lesson $lesson (not built)" >> "$tally"
    echo
done

echo "== after the lessons and the broken submissions: nothing left running"
strays=$(for proc in /proc/[0-9]*; do readlink "$proc/exe"; done 2>/dev/null | grep -c "^$PWD/build/")
if [ "$strays" -eq 0 ]; then
    echo "  [pass] no process of the toolkit's builds is still running"
    echo "1 0 0 strays" >> "$tally"
else
    echo "  [FAIL] $strays process(es) of the toolkit's builds still running:"
    for proc in /proc/[0-9]*; do
        exe=$(readlink "$proc/exe" 2>/dev/null) && case "$exe" in "$PWD/build/"*) echo "    ${proc#/proc/} $exe" ;; esac
    done
    echo "0 1 0 strays" >> "$tally"
    status=1
fi
echo

echo "== the solutions, graded: full marks, in every format"
if build/grade-tool/grade --lessons "$*" --work build/test/solutions/work \
        --out build/test/solutions > build/test/solutions/table.txt; then
    echo "  [pass] $(grep '^Score:' build/test/solutions/table.txt)"
    echo "1 0 0 solutions graded" >> "$tally"
else
    cat build/test/solutions/table.txt
    echo "  [FAIL] the solutions do not grade to full marks"
    echo "0 1 0 solutions graded" >> "$tally"
    status=1
fi
if command -v python3 >/dev/null 2>&1; then
    if tests/check_formats.py build/test/solutions; then
        echo "1 0 0 formats" >> "$tally"
    else
        echo "0 1 0 formats" >> "$tally"
        status=1
    fi
else
    echo "  [skip] the grader's file formats: python3 is not installed"
    echo "0 0 1 formats" >> "$tally"
fi
echo

echo "== the solutions under AddressSanitizer and UndefinedBehaviorSanitizer"
# A size too large for memory must reach the program's own error path (exit
# 2), as it does without the sanitizer, instead of ASan's report.
export ASAN_OPTIONS=allocator_may_return_null=1
# The library's own code, and every lesson; the given programs' handling of
# bad input and the MPI harness are not worth a second, slower pass.
run_suite build/sanitize build/sanitize/tests/common/test_library "sanitized common: library" solution
for lesson in "$@"; do
    # CUDA maps memory where AddressSanitizer keeps its shadow gap.
    options=$ASAN_OPTIONS
    [[ " ${ZZ_CUDA_LESSONS:-} " == *" $lesson "* ]] && options="protect_shadow_gap=0:$ASAN_OPTIONS"
    ASAN_OPTIONS=$options run_suite build/sanitize "build/sanitize/tests/test_$lesson" "sanitized lesson $lesson" solution
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
