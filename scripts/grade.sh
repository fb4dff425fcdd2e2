#!/usr/bin/env bash
# make grade: builds and tests a submission lesson by lesson, and scores it.
#
#   scripts/grade.sh                        your own tree (lessons/), every lesson
#   scripts/grade.sh --lesson 02-mpi-matvec one lesson
#   scripts/grade.sh --submission DIR       another student's tree: only the files
#                                           a student edits are taken from it
#   scripts/grade.sh --out DIR              where results go (build/grade)
#   scripts/grade.sh --sandbox              student code runs under bubblewrap:
#                                           no network, the tree read-only
#   scripts/grade.sh --progress             one line per lesson and TODO
# For make test: --solutions (grade the reference solutions), --overlay DIR (a
# broken submission: the solutions with DIR's patches applied, FILE.patch for
# FILE), --expect FILE and --tally FILE.
#
# Run it through make (make grade ...), which tells it the lessons and the
# files each lesson's student edits. Each lesson is built on its own: one that
# does not compile scores 0 with the compiler's message, and the others are
# still graded. Each lesson's tests run with limits on CPU time, memory, file
# size and (when not root) processes, and a wall-clock limit; afterwards every
# process that the tests left behind is killed. The score comes from the
# grader's records of each test (build/grade-tool/grade), never from anything
# the submission prints or writes.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

lesson_filter="" submission="" out=build/grade overlay="" expect="" tally=""
sandbox=false progress=false
while [ $# -gt 0 ]; do
    case "$1" in
        --lesson) lesson_filter=${2:?}; shift ;;
        --submission) submission=${2:?}; shift ;;
        --out) out=${2:?}; shift ;;
        --overlay) overlay=${2:?}; shift ;;
        --solutions) overlay=/nonexistent ;;
        --expect) expect=${2:?}; shift ;;
        --tally) tally=${2:?}; shift ;;
        --sandbox) sandbox=true ;;
        --progress) progress=true ;;
        -h|--help) usage ;;
        *) echo "grade: unknown option '$1'" >&2; usage ;;
    esac
    shift
done
if [ -z "${ZZ_LESSONS:-}" ] || [ -z "${ZZ_EDITED:-}" ]; then
    echo "grade: run me through make: make grade [L=NN] [SUBMISSION=DIR]" >&2
    exit 2
fi
if [ -n "$submission" ] && [ ! -d "$submission" ]; then
    echo "grade: --submission: '$submission' is not a folder" >&2
    exit 2
fi

lessons=()
for lesson in $ZZ_LESSONS; do
    [ -z "$lesson_filter" ] || [ "$lesson" = "$lesson_filter" ] && lessons+=("$lesson")
done
if [ ${#lessons[@]} -eq 0 ]; then
    echo "grade: no lesson '$lesson_filter' (lessons: $ZZ_LESSONS)" >&2
    exit 2
fi

# Limits for each lesson's tests: generous for honest code, fatal for a
# runaway. Every test also has its own time limit inside the runner.
cpu_seconds=${GRADE_CPU_SECONDS:-600}
memory_kib=${GRADE_MEMORY_KIB:-4194304}      # 4 GiB of address space
file_kib=${GRADE_FILE_KIB:-65536}           # 64 MiB per file written
processes=${GRADE_PROCESSES:-512}           # not enforceable for root
wall_seconds=${GRADE_WALL_SECONDS:-600}

out=${out%/}
# One build folder per output folder, so that several gradings never mix.
grade_id=$(printf '%s' "$out" | tr -c 'A-Za-z0-9_.-' '_')
build_dir=build/graded/$grade_id
src=$out/src
work=$out/work
rm -rf "$src" "$work" "$build_dir"
mkdir -p "$src" "$work" || exit 2
start=$SECONDS

# The submission's edited files, and nothing else of it.
for pair in $ZZ_EDITED; do
    lesson=${pair%%/*} file=${pair#*/}
    mkdir -p "$src/$lesson"
    if [ -n "$overlay" ]; then
        # A broken submission: the solution, with the fixture's patch (or
        # its whole file) in place of the file it breaks.
        from=solutions/$lesson/$file
        [ -e "$overlay/$file" ] && from=$overlay/$file
        if [ -e "$overlay/$file.patch" ]; then
            patch --quiet --output="$src/$lesson/$file" "$from" \
                < "$overlay/$file.patch" || {
                echo "grade: $overlay/$file.patch does not apply to $from" >&2
                exit 2
            }
            continue
        fi
    elif [ -n "$submission" ]; then
        from=$submission/lessons/$lesson/$file
        # A file the student did not hand in is the untouched skeleton.
        [ -e "$from" ] || from=lessons/$lesson/$file
    else
        from=lessons/$lesson/$file
    fi
    cp "$from" "$src/$lesson/$file" || exit 2
done

make -s --no-print-directory build/grade-tool/grade >/dev/null || exit 2

sandbox_command=()
if $sandbox; then
    if ! command -v bwrap >/dev/null 2>&1; then
        echo "grade: --sandbox needs bubblewrap (apt-get install bubblewrap)" >&2
        exit 2
    fi
    # The whole tree read-only, a private /tmp, the work folder writable,
    # no network.
    sandbox_command=(bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp
                     --tmpfs /dev/shm --bind "$PWD/$work" "$PWD/$work"
                     --unshare-net --die-with-parent --)
fi

# Kills every process still running from this grading's build folder:
# what a test left behind, even one that made itself a session of its own.
sweep() {
    local proc pid exe command
    for proc in /proc/[0-9]*; do
        pid=${proc#/proc/}
        [ "$pid" = "$$" ] && continue
        exe=$(readlink "$proc/exe" 2>/dev/null) || continue
        command=$(tr '\0' ' ' < "$proc/cmdline" 2>/dev/null) || continue
        case "$exe $command" in
            *"$build_dir/"*) kill -9 "$pid" 2>/dev/null ;;
        esac
    done
}

for lesson in "${lessons[@]}"; do
    # A lesson that cannot be built here (CUDA without nvcc): every test is
    # skipped, with the reason, and scored as its manifest says.
    if [[ " ${ZZ_UNBUILT:-} " == *" $lesson "* ]]; then
        grep '^[^#].*|.*|' "tests/manifest/$lesson.txt" |
            awk -F'|' -v why="${ZZ_UNBUILT_REASON:-not built here}" '
                { name = $3; gsub(/^ +| +$/, "", name); print "skip\t" name "\t" why }' \
            > "$work/$lesson.results"
        continue
    fi
    binary=$build_dir/tests/test_$lesson
    if ! make -s --no-print-directory GRADE_SRC="$src" GRADE_ID="$grade_id" \
            "$binary" > "$work/$lesson.build.log" 2>&1; then
        $progress || echo "grade: lesson $lesson does not compile (see $work/$lesson.build.log)"
        continue
    fi
    # CUDA reserves far more address space than it uses: its lessons get
    # no address-space limit (the GPU's own memory bounds them).
    lesson_memory=$memory_kib
    [[ " ${ZZ_CUDA_LESSONS:-} " == *" $lesson "* ]] && lesson_memory=unlimited
    (
        ulimit -t "$cpu_seconds" -v "$lesson_memory" -f "$file_kib"
        [ "$(id -u)" -eq 0 ] || ulimit -u "$processes"
        exec timeout --kill-after=10 "$wall_seconds" setsid \
            "${sandbox_command[@]}" env ZZ_BUILD_DIR="$build_dir" "$binary" \
            --title "lesson $lesson" --mode student --results "$work/$lesson.results"
    ) > "$work/$lesson.log" 2>&1 < /dev/null
    sweep
done

# The scores: written after every test of every lesson has ended, over any
# file of the same name that a test may have written.
grade=(build/grade-tool/grade --lessons "${lessons[*]}" --work "$work"
       --sources "$src")
if $progress; then
    "${grade[@]}" --progress
    exit 0
fi
if [ -n "$expect" ]; then
    "${grade[@]}" --expect "$expect" ${tally:+--tally "$tally"} \
        --title "broken submission '$(basename "$overlay")' of lesson ${lessons[*]}"
    exit $?
fi
"${grade[@]}" --out "$out" --seconds $((SECONDS - start))
status=$?
echo "Results: $out/results.json, $out/junit.xml, $out/results.tap; logs in $work/"
exit $status
