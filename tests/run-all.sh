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
#   7. (make test-full) the solutions again under AddressSanitizer and UBSan;
#   8. each lesson's tests' time limits add up to less than the wall-clock
#      limit of grading the lesson;
#   9. three gradings at once (two output folders of this checkout, and the
#      same output folder in a second checkout), beside a process whose
#      command line names the same build folder: each gives the score of
#      one grading alone, and the bystander survives;
#  10. what the texts quote is what the programs print (tests/check-texts.sh),
#      every predefined constant of MPI is accepted in every MPI lesson
#      (tests/check-mpi-constants.sh),
#      the shared library keeps its rule for errors
#      (tests/check-common-errors.sh), make plots draws a small
#      results.csv (tests/check-plots.sh; skipped without gnuplot), a
#      student release holds no answer (tests/check-release.sh), and what
#      GitHub Classroom and Gradescope read is as they read it
#      (tests/check-platforms.sh; with --full their commands run);
#  11. the run leaves nothing in the temporary folder or /dev/shm.
# Ends with Check's closing line for the whole run and "N passed, N failed".
# Usage: tests/run-all.sh [--full] LESSON...   (run by make test and make
# test-full, after the builds). --full grades only the slow and attack
# fixtures (those whose expectations say "graded: in make test-full"), runs
# the sanitizers (7, and ThreadSanitizer on the OpenMP lessons), then 11.
set -u
cd "$(dirname "$0")/.."

full=false
if [ "${1:-}" = --full ]; then
    full=true
    shift
fi
tally=build/test/tally
rm -rf build/test
mkdir -p build/test/solutions/work
: > "$tally"
# Everything this run prints is also kept, for the list of failures at the end.
exec > >(tee build/test/run.log) 2>&1
tee_pid=$!
status=0
tally_line() {   # tally_line OK NAME: one result of this script's own
    if [ "$1" = yes ]; then echo "1 0 0 $2" >> "$tally"; else echo "0 1 0 $2" >> "$tally"; status=1; fi
}

# Everything the tests write to the temporary folder goes into one folder
# of this run's own, which must be empty at the end.
test_tmp=$(mktemp -d "${TMPDIR:-/tmp}/zz-test-XXXXXX") || exit 2
export TMPDIR=$test_tmp
shm_before=$(ls -A /dev/shm 2>/dev/null | sort)

run_suite() {   # run_suite BUILD_DIR BINARY TITLE MODE [RUNNER OPTIONS]
    case "$2" in *.o|*.d) return ;; esac
    local build=$1 binary=$2 title=$3 mode=$4
    shift 4
    local start=$SECONDS
    ZZ_BUILD_DIR=$build "$binary" --title "$title" --mode "$mode" --tally "$tally" "$@" || status=1
    echo "  ($((SECONDS - start)) s)"
    echo
}

if ! $full; then
echo "== the shared library and the given programs"
# The given programs' refusals (test_drivers) spend a minute starting
# mpirun and its ranks, mostly waiting: that suite runs beside the others
# and the lessons' suites, and its lines follow theirs.
drivers=build/solution/tests/common/test_drivers
if [ -x "$drivers" ]; then
    ( run_suite build/solution "$drivers" "common: drivers" solution
      echo "$status" > build/test/drivers.status ) > build/test/drivers.log 2>&1 &
    drivers_pid=$!
fi
for t in build/solution/tests/common/test_*; do
    [ "$t" = "$drivers" ] && continue
    run_suite build/solution "$t" "common: ${t##*/test_}" solution
done

for lesson in "$@"; do
    echo "== lesson $lesson"
    # The skeleton's suite runs beside the solution's, as the drivers' do
    # beside all: much of a suite's time is mpirun starting and stopping.
    # Its lines follow the solution's.
    skeleton_log=build/test/$lesson.skeleton.log
    ( status=0
      run_suite build/student "build/student/tests/test_$lesson" "lesson $lesson: the skeleton" skeleton
      echo "$status" > "$skeleton_log.status" ) > "$skeleton_log" 2>&1 &
    skeleton_pid=$!
    run_suite build/solution "build/solution/tests/test_$lesson" "lesson $lesson: the solution" solution \
        --results "build/test/solutions/work/$lesson.results"
    wait "$skeleton_pid"
    cat "$skeleton_log"
    [ "$(cat "$skeleton_log.status" 2>/dev/null)" = 0 ] || status=1
    # The lesson's points: every test has exactly one line in its manifest.
    ZZ_BUILD_DIR=build/solution "build/solution/tests/test_$lesson" --list > "build/test/$lesson.names"
    build/grade-tool/grade --lessons "$lesson" --check-names "build/test/$lesson.names" \
        --tally "$tally" || status=1
done

if [ -n "${drivers_pid:-}" ]; then
    wait "$drivers_pid"
    echo "== the given programs' refusals (run beside the suites above)"
    cat build/test/drivers.log
    [ "$(cat build/test/drivers.status 2>/dev/null)" = 0 ] || status=1
fi

fi

# Broken submissions, graded as make grade grades: each must get its
# expected score, and fail the expected tests with the expected words. Three
# at a time: most of their time is spent waiting for time limits (deadlocks,
# endless loops), and each has its own build and output folders.
echo "== broken submissions (tests/fixtures), graded"
fixtures=()
for lesson in "$@"; do
    for folder in tests/fixtures/"$lesson"/*/; do
        [ -e "$folder/expected.txt" ] || [ -e "$folder/expected-sandbox.txt" ] || continue
        # make test grades the others, make test-full the attack fixtures.
        if cat "$folder"/expected*.txt | grep -q '^graded: in make test-full'; then
            $full || { deferred=$((${deferred:-0} + 1)); continue; }
        else
            $full && continue
        fi
        fixtures+=("$lesson ${folder%/}")
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
    # At most four at once: wait for the oldest still running.
    if [ $((k + 1)) -ge 4 ]; then
        wait "${pids[k - 3]}"
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
    # A grading skipped with its reason ([skip]: no /tmp can be made full
    # here) holds no expectations, and fails nothing.
    { grep -q "expectations hold" "$log" || grep -q "^  \[skip\]" "$log"; } &&
        ! grep -q "^  \[FAIL\]" "$log" || status=1
    echo
done

[ -z "${deferred:-}" ] || echo "  ($deferred slow or attack fixtures are graded by make test-full)"
echo

# What the texts quote, against what the programs print (after the broken
# submissions, whose logs some quotes come from; make test-full checks the
# quotes of those it grades).
if $full; then
    tests/check-texts.sh --full --tally "$tally" || status=1
else
    tests/check-texts.sh --tally "$tally" || status=1
fi
echo

# Every predefined constant of MPI accepted by the checks on a student's
# files, in every MPI lesson (a lesson.mk whose _MPI lists sources), under
# each MPI installed.
echo "== MPI's predefined constants and the functions that move no data, in every MPI lesson (tests/check-mpi-constants.sh)"
mpi_lessons=()
for lesson in "$@"; do
    grep -qE '^\$\(LESSON\)_MPI +:= *[^ ]' "lessons/$lesson/lesson.mk" 2>/dev/null && mpi_lessons+=("$lesson")
done
tests/check-mpi-constants.sh build/solution "${mpi_lessons[@]}" --tally "$tally" || status=1
echo

echo "== the rule for errors in common/"
if tests/check-common-errors.sh; then
    tally_line yes "common errors"
else
    tally_line no "common errors"
fi
echo

tests/check-release.sh --tally "$tally" || status=1
echo

# The scripts on macOS's bash 3.2 and Homebrew's g-prefixed GNU tools, and
# macOS's branches of the Makefile, install-deps and the file checks.
tests/check-bash32.sh --tally "$tally" || status=1
echo
tests/check-macos.sh --tally "$tally" || status=1
echo

# make check T=N's choice of tests, and its stop after a hang.
tests/check-todo.sh --tally "$tally" || status=1
echo

# What GitHub Classroom and Gradescope read (make test-full: their
# commands run too, on the solutions and the skeletons).
tests/check-platforms.sh $($full && echo --full) --tally "$tally" || status=1
echo

echo "== make plots, on a small results.csv (tests/plots/)"
tests/check-plots.sh
case $? in
    0) tally_line yes "plots" ;;
    77) echo "0 0 1 plots" >> "$tally" ;;
    *) tally_line no "plots" ;;
esac
echo

if $full; then
echo "== the solutions under AddressSanitizer and UndefinedBehaviorSanitizer"
# A size too large for memory must reach the program's own error path (exit
# 2), as it does without the sanitizer, instead of ASan's report.
export ASAN_OPTIONS=allocator_may_return_null=1
# The library's own code, and every lesson; the given programs' handling of
# bad input and the MPI harness are not worth a second, slower pass.
run_suite build/sanitize build/sanitize/tests/common/test_library "sanitized common: library" solution
# bf16's exhaustive test samples every 97th float here (seconds, not minutes).
run_suite build/sanitize build/sanitize/tests/common/test_bf16 "sanitized common: bf16" solution
run_suite build/sanitize build/sanitize/tests/common/test_zero_memory "sanitized common: zero_memory" solution
run_suite build/sanitize build/sanitize/tests/common/test_optimizer "sanitized common: optimizer" solution
run_suite build/sanitize build/sanitize/tests/common/test_device "sanitized common: device" solution
for lesson in "$@"; do
    # CUDA maps memory where AddressSanitizer keeps its shadow gap.
    options=$ASAN_OPTIONS
    [[ " ${ZZ_CUDA_LESSONS:-} " == *" $lesson "* ]] && options="protect_shadow_gap=0:$ASAN_OPTIONS"
    ASAN_OPTIONS=$options run_suite build/sanitize "build/sanitize/tests/test_$lesson" "sanitized lesson $lesson" solution
done
fi

if $full; then
echo "== the solutions graded with the sanitized passes: full marks"
# make grade's passes under AddressSanitizer and UBSan (every lesson) and
# under ThreadSanitizer (the lessons whose code runs threads) refuse no
# correct program: the solutions keep every point.
log=build/test/solutions-sanitized.log
GRADE_SANITIZERS=1 scripts/grade.sh --solutions --no-sandbox --lesson "$*" \
    --out build/test/solutions-sanitized > "$log" 2>&1
score=$(grep -m1 '^Score:' "$log")
if grep -q '^grade: skipped:' "$log"; then
    grep '^grade: skipped:' "$log" | sed 's/^grade: /  [skip] /'
fi
if [ -n "$score" ] && awk '{ split($2, s, "/"); exit !(s[1] == s[2]) }' <<< "$score"; then
    echo "  [pass] $score"
    tally_line yes "solutions graded with the sanitized passes"
else
    echo "  [FAIL] the solutions lose points under the sanitized passes:"
    grep -E '^Score:|^ *fail|under (AddressSanitizer|ThreadSanitizer)' "$log" | head -20 | sed 's/^/    /'
    tally_line no "solutions graded with the sanitized passes"
fi
echo

echo "== ThreadSanitizer on the lessons whose code runs threads (scripts/tsan.sh, make tsan)"
for lesson in "$@"; do
    grep -q '^$(LESSON)_TSAN *:= *yes' "lessons/$lesson/lesson.mk" || continue
    log=build/test/tsan-$lesson-solutions.log
    scripts/tsan.sh "$lesson" > "$log" 2>&1; code=$?
    # A lesson whose tests run under it: every one of them passes too.
    if [ $code -eq 0 ] && grep -q "its tests" "$log" && ! grep -q "^  [0-9]* passed, 0 failed" "$log"; then
        code=1
    fi
    if [ $code -eq 2 ]; then
        echo "  [skip] $lesson: $(grep -m1 'cannot' "$log")"
        echo "0 0 1 tsan $lesson" >> "$tally"
        continue
    elif [ $code -eq 0 ]; then
        echo "  [pass] $lesson, the solutions: $(tail -1 "$log")"
        echo "1 0 0 tsan $lesson solutions" >> "$tally"
    else
        echo "  [FAIL] $lesson, the solutions:"
        sed 's/^/    /' "$log"
        echo "0 1 0 tsan $lesson solutions" >> "$tally"
        status=1
    fi
    # Each race fixture says whether ThreadSanitizer must find its race.
    for expect in tests/fixtures/"$lesson"/*/expected.txt; do
        [ -e "$expect" ] || continue
        want=$(sed -n 's/^tsan: *//p' "$expect")
        [ -n "$want" ] || continue
        folder=$(dirname "$expect")
        log=build/test/tsan-$lesson-$(basename "$folder").log
        scripts/tsan.sh "$lesson" --overlay "$folder" > "$log" 2>&1; code=$?
        if { [ "$want" = fails ] && [ $code -eq 1 ]; } || { [ "$want" = passes ] && [ $code -eq 0 ]; }; then
            echo "  [pass] $folder: ThreadSanitizer $want, as it must"
            echo "1 0 0 tsan $folder" >> "$tally"
        else
            echo "  [FAIL] $folder: ThreadSanitizer should say it $want (exit status $code):"
            sed 's/^/    /' "$log"
            echo "0 1 0 tsan $folder" >> "$tally"
            status=1
        fi
    done
done
echo
fi

if ! $full; then
# Lessons that could not be built here (CUDA without nvcc): every test is
# reported skipped, with the reason, and counted as skipped.
for lesson in ${ZZ_UNBUILT:-}; do
    count=$(grep -c '^[^#].*|.*|' "tests/manifest/$lesson.txt")
    echo "== lesson $lesson"
    echo "  [skip] all $count tests: ${ZZ_UNBUILT_REASON:-not built here}"
    echo "0 0 $count lesson $lesson (not built)" >> "$tally"
    echo
done

fi

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

if ! $full; then
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

echo "== each lesson's time limits fit in the wall-clock limit of grading it"
wall=${GRADE_WALL_SECONDS:-600}
for lesson in "$@"; do
    sum=$(ZZ_BUILD_DIR=build/solution "build/solution/tests/test_$lesson" --limits)
    if [ "$sum" -lt "$wall" ]; then
        echo "  [pass] lesson $lesson: its tests' limits add up to $sum s, under $wall s"
        tally_line yes "limits $lesson"
    else
        echo "  [FAIL] lesson $lesson: its tests' limits add up to $sum s, over the $wall s that grading a lesson may take: one hanging test would cost every point"
        tally_line no "limits $lesson"
    fi
done
echo

echo "== three gradings at once, beside a bystander"
# Lessons 01 and 03 (OpenMP, and the hybrid's four MPI ranks); the other
# checkout is a copy of this one's files and of its solution build.
concurrent_lessons=$(printf '%s\n' "$@" | grep -E '^0[13]-' | tr '\n' ' ')
other=build/test/other-checkout
start=$SECONDS
mkdir -p "$other/build"
git ls-files -z --cached --others --exclude-standard 2>/dev/null |
    xargs -0 cp -p --parents -t "$other" 2>/dev/null
cp -rp build/solution build/grade-tool "$other/build/"
# The bystander: another checkout's process whose command line names the
# output folder the gradings use; only this grading's own processes may go.
(cd "$other" && exec bash -c 'sleep 600' "build/graded/build_test_concurrent_a/tests/test_03-openmp") &
bystander=$!
GRADE_SANITIZERS=0 scripts/grade.sh --solutions --no-sandbox --lesson "$concurrent_lessons" --out build/test/concurrent/a > build/test/concurrent-a.log 2>&1 &
first=$!
GRADE_SANITIZERS=0 scripts/grade.sh --solutions --no-sandbox --lesson "$concurrent_lessons" --out build/test/concurrent/b > build/test/concurrent-b.log 2>&1 &
second=$!
(cd "$other" && GRADE_SANITIZERS=0 scripts/grade.sh --solutions --no-sandbox --lesson "$concurrent_lessons" --out build/test/concurrent/a) > build/test/concurrent-c.log 2>&1 &
third=$!
wait "$first" "$second" "$third"
mkdir -p build/test/concurrent/alone
alone=$(build/grade-tool/grade --lessons "$concurrent_lessons" --work build/test/solutions/work --out build/test/concurrent/alone | grep '^Score:')
for run in a b c; do
    got=$(grep '^Score:' "build/test/concurrent-$run.log")
    case $run in a) where="this checkout, build/test/concurrent/a" ;; b) where="this checkout, build/test/concurrent/b" ;; c) where="the other checkout, build/test/concurrent/a" ;; esac
    if [ -n "$got" ] && [ "$got" = "$alone" ]; then
        echo "  [pass] $where: $got, as alone"
        tally_line yes "concurrent $run"
    else
        echo "  [FAIL] $where: '${got:-no score}', alone: $alone (see build/test/concurrent-$run.log)"
        grep -E '^\s+\[FAIL\]' "build/test/concurrent-$run.log" | head -5
        tally_line no "concurrent $run"
    fi
done
if kill -0 "$bystander" 2>/dev/null; then
    echo "  [pass] the bystander in the other checkout survived"
    tally_line yes "bystander"
else
    echo "  [FAIL] the bystander in the other checkout was killed by a grading"
    tally_line no "bystander"
fi
kill "$bystander" 2>/dev/null
wait "$bystander" 2>/dev/null
rm -rf "$other"
echo "  ($((SECONDS - start)) s)"
echo

fi

echo "== nothing left in the temporary folder or /dev/shm"
left=$(find "$test_tmp" -mindepth 1 -maxdepth 2 2>/dev/null | head -20)
if [ -z "$left" ]; then
    echo "  [pass] the temporary folder the tests used ($test_tmp) is empty"
    tally_line yes "temporary folder"
else
    echo "  [FAIL] left in the temporary folder the tests used:"
    echo "$left" | sed 's/^/    /'
    tally_line no "temporary folder"
fi
# A file another job on this machine is still using (another user's, or one
# that a live process maps) is not ours: only the rest counts.
in_use() {   # in_use NAME
    [ -O "/dev/shm/$1" ] || return 0
    grep -qsF "/dev/shm/$1" /proc/[0-9]*/maps
}
new_shm=""
for name in $(comm -13 <(echo "$shm_before") <(ls -A /dev/shm 2>/dev/null | sort) |
              grep -E '^(zz|vader|sm_segment|ompi|psm|open_mpi|__KMP_REGISTERED_LIB_|ucx|mpich)'); do
    [ -e "/dev/shm/$name" ] && ! in_use "$name" && new_shm="$new_shm $name"
done
if [ -z "$new_shm" ]; then
    echo "  [pass] nothing of the toolkit's, an MPI's or an OpenMP runtime's is new in /dev/shm"
    tally_line yes "shm"
else
    echo "  [FAIL] new in /dev/shm, and no process uses it:$new_shm"
    tally_line no "shm"
fi
rm -rf "$test_tmp"
echo

awk -f tests/what-failed.awk build/test/run.log
awk -f tests/tally-summary.awk "$tally"
exec > /dev/null 2>&1
wait "$tee_pid"
exit $status
