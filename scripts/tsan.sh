#!/usr/bin/env bash
# Looks for data races in a lesson's OpenMP code with ThreadSanitizer:
#   scripts/tsan.sh 03                  the reference solutions
#   scripts/tsan.sh 03 --student        your files in lessons/03-openmp/
#                                       (make tsan L=03)
#   scripts/tsan.sh 03 --overlay DIR    a broken submission: the solutions
#                                       with DIR's patches (FILE.patch, as in
#                                       tests/fixtures/), or FILE.skeleton
#   scripts/tsan.sh 07 [--student|--overlay DIR]
#                                       another lesson whose code runs
#                                       threads (lesson.mk's TSAN): its
#                                       tests, built as make grade's race
#                                       pass builds them (make tsan L=07)
# Builds the lesson's OpenMP driver with clang -fsanitize=thread -fopenmp
# into build/tsan/LESSON-WHICH/ (the shared library's objects, built the
# same way, in build/tsan/common/), runs it on small products with 2 and 4
# threads, and prints ThreadSanitizer's verdict: PASS when it saw no data
# race, FAIL with the place of each race it saw, NO VERDICT when a test did
# not finish under it (status 1).
#
# Why clang and LLVM's OpenMP runtime (libomp), not GCC's libgomp: the
# runtime's own barriers and locks are not compiled for ThreadSanitizer,
# so it cannot see that they order the threads' accesses, and would report
# races that are none. libomp comes with Archer, a tool that tells
# ThreadSanitizer what OpenMP's synchronisation means; this script checks
# that Archer is active. ThreadSanitizer reserves terabytes of address
# space for its shadow memory, so it cannot run under make grade's limit
# (ulimit -v): graded tests do without it, and this script refuses to run
# under such a limit rather than fail confusingly.
#
# What it finds: every pair of accesses to the same memory, one a write,
# from two threads, with nothing ordering them, in the code that this run
# executes, even when the results come out right (a shared temporary that
# the compiler keeps in a register). What it cannot find: a race in code
# that did not run. Exit status 0 (no race seen), 1 (a race, or the driver
# failed), 2 (cannot run here: no clang or libomp, a limited address space,
# a bad command line).
. "$(dirname "$0")/portable.sh" "$@"  # bash 4, GNU tools (macOS: Homebrew's)
. "$(dirname "$0")/tsan-options.sh"
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[ $# -ge 1 ] || usage
lesson_arg=$1
shift
which=solutions overlay=""
while [ $# -gt 0 ]; do
    case "$1" in
        --student) which=student ;;
        --overlay) overlay=${2:?--overlay needs a folder}; which=overlay; shift ;;
        -h|--help) usage ;;
        *) echo "tsan: unknown option '$1'" >&2; usage ;;
    esac
    shift
done

# The lesson, as make names it: 3, 03 or 03-openmp.
case "$lesson_arg" in [0-9]) lesson_arg=0$lesson_arg ;; esac
lesson=""
for dir in lessons/"$lesson_arg"*/; do
    [ -f "$dir/lesson.mk" ] && lesson=$(basename "$dir") && break
done
if [ -z "$lesson" ]; then
    echo "tsan: there is no lesson '$lesson_arg'" >&2
    exit 2
fi

# What each lesson runs under ThreadSanitizer: its program, and the
# arguments of each run. Small products: ThreadSanitizer makes every access
# some ten times slower, and a race shows on the first pair of accesses
# whatever the size. Two threads and four (more than the cores of a small
# machine, so threads are also switched in the middle of their work).
# The other lessons whose code runs threads (lesson.mk's TSAN) run their
# own tests under ThreadSanitizer instead, on your files only, as make
# grade's race pass does.
program="" runs=()
case "$lesson" in
    03-openmp)
        program=openmp
        runs=("--threads 2 --m 203 --n 157 --reps 1"
              "--threads 4 --m 203 --n 157 --reps 1") ;;
    *)
        if ! grep -q '^$(LESSON)_TSAN *:= *yes' "lessons/$lesson/lesson.mk"; then
            echo "tsan: lesson $lesson has no ThreadSanitizer run: its code runs no threads of its own" >&2
            exit 2
        fi
 ;;
esac

CLANG=${CLANG:-clang}
if ! command -v "$CLANG" >/dev/null 2>&1; then
    echo "tsan: cannot run: $CLANG (LLVM's C compiler) is not installed; on Debian or Ubuntu: apt-get install clang libomp-dev" >&2
    exit 2
fi
if [ "$(ulimit -v)" != unlimited ]; then
    echo "tsan: cannot run: ThreadSanitizer reserves terabytes of address space, and this shell allows $(ulimit -v) KiB (ulimit -v); run it where that limit is lifted" >&2
    exit 2
fi

# A build that failed: LLVM's OpenMP runtime missing (status 2), or the
# code (status 1), with the log's first errors.
build_failed() {   # build_failed LOG WHAT
    if grep -qi "omp.h.*not found\|cannot find -lomp\|unable to find library -lomp" "$1"; then
        echo "tsan: cannot run: LLVM's OpenMP runtime is not installed; on Debian or Ubuntu: apt-get install libomp-dev" >&2
        exit 2
    fi
    echo "tsan: lesson $lesson, $2: does not build with $CLANG -fsanitize=thread:" >&2
    grep -m 5 -i "error" "$1" >&2
    echo "(all of it: $1)" >&2
    exit 1
}

# llvm-symbolizer turns addresses into file:line; Debian installs it under
# LLVM's own folder, not always on PATH.
symbolizer=$(command -v llvm-symbolizer 2>/dev/null ||
             ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null | tail -1)

# A lesson without a run of its own: its tests, built as make grade's race
# pass builds them (the Makefile's GRADE_SANITIZE=thread, from your files
# in lessons/), each failing test that ThreadSanitizer stopped quoted.
# The edited files come from lessons/ (--student), solutions/, or a copy
# of solutions/ with the overlay's patches applied to this lesson's.
if [ -z "$program" ]; then
    case "$which" in
        student) name=student what="your files" sources=$PWD/lessons ;;
        solutions) name=solutions what="the reference solutions" sources=$PWD/solutions ;;
        overlay) name=$(basename "${overlay%/}")
                 name=overlay-${name//[^A-Za-z0-9_.-]/_}
                 what="the solutions with $overlay" sources=$PWD/build/tsan/$lesson-$name/src ;;
    esac
    build=build/graded/tsan-$name
    out=build/tsan/$lesson-$name
    rm -rf "$out"
    mkdir -p "$out" || exit 2
    if [ "$which" = overlay ]; then
        [ -d "$overlay" ] || { echo "tsan: --overlay: '$overlay' is not a folder" >&2; exit 2; }
        cp -R solutions "$sources" || exit 2
        for patch_file in "$overlay"/*.patch; do
            [ -e "$patch_file" ] || continue
            file=$(basename "$patch_file" .patch)
            patch --quiet "$sources/$lesson/$file" < "$patch_file" >&2 ||
                { echo "tsan: $patch_file does not apply to solutions/$lesson/$file" >&2; exit 2; }
        done
    fi
    echo "ThreadSanitizer on lesson $lesson, $what: its tests ($("$CLANG" --version | head -1), LLVM's OpenMP runtime)"
    if ! make -s --no-print-directory CC="$CLANG" GRADE_SRC="$sources" GRADE_ID="tsan-$name" \
            GRADE_SANITIZE=thread "$build/tests/test_$lesson" > "$out/build.log" 2>&1; then
        build_failed "$out/build.log" "$what"
    fi
    env ZZ_BUILD_DIR="$PWD/$build" OMP_NUM_THREADS=2 \
        TSAN_OPTIONS="$tsan_options halt_on_error=0 report_signal_unsafe=0${symbolizer:+ external_symbolizer_path=$symbolizer}" \
        "$build/tests/test_$lesson" --title "lesson $lesson, $what, under ThreadSanitizer" \
        --mode student > "$out/tests.log" 2>&1
    raced=$(grep "^  \[FAIL\].*ThreadSanitizer: " "$out/tests.log")
    if [ -n "$raced" ]; then
        echo "$raced" | sed "s|$PWD/||g" | cut -c1-600
        echo "FAIL: ThreadSanitizer stopped the tests above at a data race: two threads use the same memory, one of them writing, with nothing ordering them; the place is the line of your code that raced (the whole run: $out/tests.log)"
        exit 1
    fi
    echo "  $(grep -E '^  [0-9]+ passed, [0-9]+ failed' "$out/tests.log" | tail -1 | sed 's/^ *//')"
    # The tests that did not run under it, and why (the runner's words).
    grep '^  \[skip\] ' "$out/tests.log" | cut -c1-300
    # A test stopped at its time limit ran only partly under it: a race in
    # the rest is not seen, so no verdict (the halt at a race's report
    # ends a test at once, never at its limit).
    unfinished=$(grep -E '^  \[FAIL\] .*(no answer from|timed out|time limit)' "$out/tests.log")
    if [ -n "$unfinished" ]; then
        echo "$unfinished" | sed "s|$PWD/||g" | cut -c1-300
        echo "NO VERDICT: $(echo "$unfinished" | wc -l | tr -d ' ') test(s) above did not finish under ThreadSanitizer, which runs threaded code 5 to 15 times slower: a race in what they did not reach is not seen. Run make tsan L=${lesson%%-*} again on a quieter machine (the whole run: $out/tests.log)"
        exit 1
    fi
    echo "PASS: ThreadSanitizer saw no data race in the tests that ran (any that failed, failed for another reason: make check L=${lesson%%-*} says why)"
    exit 0
fi

# The lesson's variables, as the Makefile reads them from lesson.mk.
lesson_var() {
    make -s --no-print-directory -f Makefile -f <(printf 'zz-print-%%:\n\t@echo $(%s_$*)\n' "$lesson") \
        "zz-print-$1" 2>/dev/null
}
edited=$(lesson_var EDITED)
objects=$(lesson_var "${program}_OBJS")
if [ -z "$edited" ] || [ -z "$objects" ]; then
    echo "tsan: cannot read the lesson's files from lessons/$lesson/lesson.mk" >&2
    exit 2
fi

case "$which" in
    solutions) what="the reference solutions" ;;
    student) what="your files in lessons/$lesson" ;;
    overlay) what="the solutions with $overlay"
             [ -d "$overlay" ] || { echo "tsan: --overlay: '$overlay' is not a folder" >&2; exit 2; } ;;
esac
name=$which
if [ "$which" = overlay ]; then
    name=$(basename "${overlay%/}")
    name=overlay-${name//[^A-Za-z0-9_.-]/_}
fi
out=build/tsan/$lesson-$name
rm -rf "$out"
mkdir -p "$out/src" build/tsan/common || exit 2

# Where each edited file comes from: the solutions, the student's copy, or
# a patched copy of the solution (reports then name the copy in $out/src).
edited_source() {   # edited_source FILE: its path, after making any copy
    local file=$1
    case "$which" in
        solutions) echo "solutions/$lesson/$file" ;;
        student) echo "lessons/$lesson/$file" ;;
        overlay)
            if [ -e "$overlay/$file.skeleton" ]; then
                echo "lessons/$lesson/$file"
            elif [ -e "$overlay/$file.patch" ]; then
                patch --quiet --output="$out/src/$file" "solutions/$lesson/$file" \
                    < "$overlay/$file.patch" >&2 || return 1
                echo "$out/src/$file"
            else
                echo "solutions/$lesson/$file"
            fi ;;
    esac
}

flags=(-std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=thread -fopenmp=libomp -w)
failed_build=false
build_log=$out/build.log
: > "$build_log"

# The shared library, rebuilt only where a source or header changed.
# Its plain C part, as the Makefile lists it (COMMON_SOURCES: not the MPI
# or CUDA parts, which the OpenMP driver does not link).
newest_header=$(ls -t common/*.h | head -1)
common_sources=$(make -s --no-print-directory -f Makefile \
    -f <(printf 'zz-print-common:\n\t@echo $(COMMON_SOURCES)\n') zz-print-common 2>/dev/null)
if [ -z "$common_sources" ]; then
    echo "tsan: cannot read the shared library's sources from the Makefile" >&2
    exit 2
fi
common_objects=()
for source in $common_sources; do
    base=$(basename "$source" .c)
    object=build/tsan/common/$base.o
    common_objects+=("$object")
    if [ ! -e "$object" ] || [ "$source" -nt "$object" ] || [ "$newest_header" -nt "$object" ]; then
        echo "$CLANG ${flags[*]} -Icommon -c $source -o $object"
    fi
done > "$out/common.jobs"
if [ -s "$out/common.jobs" ]; then
    xargs -P "$(nproc 2>/dev/null || echo 2)" -I{} sh -c '{}' < "$out/common.jobs" >> "$build_log" 2>&1 ||
        failed_build=true
fi

# The lesson's objects: edited files from where they come, the rest given.
lesson_objects=()
for object in $objects; do
    file=${object%.o}.c
    if [[ " $edited " == *" $file "* ]]; then
        source=$(edited_source "$file") || { echo "tsan: $overlay/$file.patch does not apply to solutions/$lesson/$file" >&2; exit 2; }
    else
        source=lessons/$lesson/$file
    fi
    "$CLANG" "${flags[@]}" -Icommon -I"lessons/$lesson" -c "$source" -o "$out/$object" >> "$build_log" 2>&1 ||
        failed_build=true
    lesson_objects+=("$out/$object")
done
if ! $failed_build; then
    "$CLANG" "${flags[@]}" "${lesson_objects[@]}" "${common_objects[@]}" -lm -o "$out/$program" >> "$build_log" 2>&1 ||
        failed_build=true
fi
if $failed_build; then
    build_failed "$build_log" "$what"
fi

tsan_options+=" halt_on_error=0"
[ -n "$symbolizer" ] && tsan_options+=" external_symbolizer_path=$symbolizer"

# Removes from a log each report whose location is a heap block the OpenMP
# runtime allocated (the allocation's frame #1 in libomp's or libgomp's
# module).
drop_runtime_races() {   # drop_runtime_races LOG
    awk '
        function flush() { if (n > 0 && !runtime) for (k = 1; k <= n; k++) print block[k]; n = 0; runtime = 0 }
        /^WARNING: ThreadSanitizer:/ { flush(); inside = 1 }
        inside {
            block[++n] = $0
            if ($0 ~ /^  Location is heap block/) location = 1
            else if (location && $0 ~ /^ +#1 /) { runtime = $0 ~ /\((libomp|libgomp)\.so/; location = 0 }
            if ($0 ~ /^SUMMARY: ThreadSanitizer/) { flush(); inside = 0; location = 0 }
            next
        }
        { print }
        END { flush() }' "$1" > "$1.kept" && mv "$1.kept" "$1"
}

# Each race in a log, in a few lines: what raced (the summary's place and
# function), then the first report's two accesses, each with the place in
# the code and the function around it (not OpenMP's outlined copy of the
# region), and where the memory lives. Paths relative to the repository.
describe_races() {   # describe_races LOG
    sed "s|$PWD/||g" "$1" | awk '
        /^SUMMARY: ThreadSanitizer:/ {
            sub(/^SUMMARY: ThreadSanitizer: /, ""); sub(/ in [^ ]*$/, "")
            sub(/^data race /, "data race at "); seen[$0]++
            if (seen[$0] == 1) order[++kinds] = $0
        }
        /^WARNING: ThreadSanitizer:/ { reports++ }
        reports == 1 && /^  (Read|Write|Previous|Atomic)/ {
            access = $0; sub(/^ +/, "", access); sub(/ at 0x[0-9a-f]+/, "", access)
            sub(/:$/, "", access); place = ""; function_name = ""; next
        }
        reports == 1 && access != "" && /^ +#[0-9]/ {
            if (place == "") place = $3
            if (function_name == "" && $2 !~ /^(\.omp_outlined|__kmp)/) function_name = $2
            if (function_name != "") {
                print "      " access ": " place " (in " function_name ")"
                access = ""
            }
            next
        }
        reports == 1 && /^  Location is/ && location == "" {
            location = $0; sub(/^ +/, "", location); sub(/ at 0x[0-9a-f]+/, "", location)
            sub(/[:.]$/, "", location)
        }
        END {
            for (k = 1; k <= kinds; k++)
                printf "    %s (%d report%s)\n", order[k], seen[order[k]], seen[order[k]] == 1 ? "" : "s"
            if (location != "") print "      " location
        }' | awk '/^    [^ ]/ { print; next } { rest[++n] = $0 } END { for (k = 1; k <= n; k++) print rest[k] }'
}

echo "ThreadSanitizer on lesson $lesson, $what ($("$CLANG" --version | head -1), LLVM's OpenMP runtime)"
status=0 raced=false stopped=false
for k in "${!runs[@]}"; do
    log=$out/run-$((k + 1)).log
    # shellcheck disable=SC2086  # the run's arguments, split on purpose
    TSAN_OPTIONS="$tsan_options" ARCHER_OPTIONS=verbose=1 \
        "$out/$program" ${runs[k]} > "$out/run-$((k + 1)).out" 2> "$log" &
    pid=$!
    # At most 5 minutes. LLVM's OpenMP runtime registers each process in
    # /dev/shm/__KMP_REGISTERED_LIB_PID_UID and removes it at a clean exit:
    # a driver that crashed or was stopped leaves it, so it goes here (the
    # PID is this run's own driver, started just above).
    finished=true
    timeout 300 tail --pid="$pid" -f /dev/null || { finished=false; kill -KILL "$pid" 2> /dev/null; }
    wait "$pid"
    code=$?
    rm -f "/dev/shm/__KMP_REGISTERED_LIB_${pid}_$(id -u)"
    # The reports of memory the OpenMP runtime allocated (a task's
    # firstprivate copies, reused for the next task) are the runtime's, not
    # the code's: tests/harness/harness.c, runtime_race, says why. They go;
    # the exit status a race gave goes with them when none is left.
    drop_runtime_races "$log"
    races=$(grep -c "^WARNING: ThreadSanitizer:" "$log")
    [ "$races" -eq 0 ] && [ "$code" -eq 66 ] && code=0
    line="  $program ${runs[k]}:"
    # Archer says so on standard output when it starts.
    if ! grep -q "Archer detected OpenMP application" "$out/run-$((k + 1)).out"; then
        echo "$line cannot judge: Archer (LLVM's OpenMP tool for ThreadSanitizer) did not start, so OpenMP's own synchronisation would look like races; install libomp-dev" >&2
        status=2
        continue
    fi
    if [ "$races" -gt 0 ]; then
        echo "$line $races data race report$( [ "$races" -eq 1 ] || echo s):"
        # Each report's one-line summary names the racing line; the first
        # report's two stacks show both sides of the race.
        describe_races "$log"
        echo "    (the whole reports: $log)"
        raced=true
        status=1
    elif [ "$code" -ne 0 ]; then
        reason=$(grep -v -e '^Archer' -e 'LLVMSymbolizer' -e '^Warning: please export' "$log" | head -1)
        $finished || reason="it did not finish in 5 minutes, and was stopped"
        echo "$line the driver stopped (exit status $code), with no data race seen up to there: ${reason:-no message}"
        stopped=true
        status=1
    else
        echo "$line no data race seen"
    fi
done
case $status in
    0) echo "PASS: ThreadSanitizer saw no data race in ${#runs[@]} runs" ;;
    1) if $raced; then
           echo "FAIL: data races, above: two threads use the same memory, one of them writing, with nothing ordering them (lesson 03, TODO 3); each place is a line of the code that raced"
       else
           echo "FAIL: the driver stopped before the end, so ThreadSanitizer did not see all of the code run; make check L=${lesson%%-*} says what is wrong"
       fi ;;
    *) echo "tsan: ThreadSanitizer could not judge here" ;;
esac
exit $status
