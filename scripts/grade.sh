#!/usr/bin/env bash
# make grade: builds and tests a submission lesson by lesson, and scores it.
#
#   scripts/grade.sh                        your own tree (lessons/), every lesson
#   scripts/grade.sh --lesson 02-mpi-matvec one lesson (or "L1 L2", several)
#   scripts/grade.sh --submission DIR       another student's tree: only the files
#                                           a student edits are taken from it
#   scripts/grade.sh --out DIR              where results go (build/grade)
#   scripts/grade.sh --sandbox              student code runs under bubblewrap:
#                                           no capabilities, no network, its own
#                                           PID namespace, all read-only
# For make test: --solutions (grade the reference solutions), --overlay DIR (a
# broken submission: the solutions with DIR's patches applied, FILE.patch for
# FILE, or FILE.skeleton for the untouched skeleton), --expect FILE and
# --tally FILE.
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
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

lesson_filter="" submission="" out=build/grade overlay="" expect="" tally=""
sandbox=false
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
    [ -z "$lesson_filter" ] || [[ " $lesson_filter " == *" $lesson "* ]] && lessons+=("$lesson")
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
rm -rf "$src" "$build_dir"
mkdir -p "$src" "$work" || exit 2
# Only the graded lessons' logs go: make grade L=06 leaves lesson 07's last
# grading in place, which make progress reads.
for lesson in "${lessons[@]}"; do
    rm -rf "${work:?}/$lesson".* "${work:?}/$lesson"
done
root=$PWD
start=$SECONDS

# Lessons whose files were refused before any build, and why.
declare -A refused=()

# Copies one handed-in file, never through a symbolic link: a link could
# point at the solutions. A file that is not a plain file, or is too large to
# be source code, is refused too.
take_file() {   # take_file LESSON FILE FROM (FROM relative to BASE) BASE
    local lesson=$1 file=$2 from=$3 base=$4 path=$4 part
    local IFS=/
    for part in $from; do
        path=$path/$part
        if [ -L "$path" ]; then
            refused[$lesson]+="refused: lessons/$lesson/$file: ${path#"$base"/} is a symbolic link (to $(readlink "$path")); hand in the file itself"$'\n'
            return
        fi
    done
    if [ ! -f "$path" ]; then
        refused[$lesson]+="refused: lessons/$lesson/$file is not a plain file"$'\n'
    elif [ "$(wc -c < "$path")" -gt 1048576 ]; then
        refused[$lesson]+="refused: lessons/$lesson/$file is larger than 1 MiB"$'\n'
    else
        cp "$path" "$src/$lesson/$file" || exit 2
    fi
}

# The submission's edited files, and nothing else of it.
for pair in $ZZ_EDITED; do
    lesson=${pair%%/*} file=${pair#*/}
    mkdir -p "$src/$lesson"
    if [ -n "$overlay" ]; then
        # A broken submission: the solution, with the fixture's patch (or
        # its whole file) in place of the file it breaks; FILE.skeleton (an
        # empty file) stands for the untouched skeleton.
        if [ -e "$overlay/$file.skeleton" ]; then
            cp "lessons/$lesson/$file" "$src/$lesson/$file" || exit 2
        elif [ -e "$overlay/$file.patch" ]; then
            patch --quiet --output="$src/$lesson/$file" "solutions/$lesson/$file" \
                < "$overlay/$file.patch" || {
                echo "grade: $overlay/$file.patch does not apply to solutions/$lesson/$file" >&2
                exit 2
            }
        elif [ -e "$overlay/$file" ] || [ -L "$overlay/$file" ]; then
            take_file "$lesson" "$file" "$file" "$overlay"
        else
            take_file "$lesson" "$file" "$lesson/$file" solutions
        fi
    elif [ -n "$submission" ]; then
        if [ -e "$submission/lessons/$lesson/$file" ] || [ -L "$submission/lessons/$lesson/$file" ]; then
            take_file "$lesson" "$file" "lessons/$lesson/$file" "$submission"
        else
            # A file the student did not hand in is the untouched skeleton.
            cp "lessons/$lesson/$file" "$src/$lesson/$file" || exit 2
        fi
    else
        take_file "$lesson" "$file" "$lesson/$file" lessons
    fi
done

# The grading's own copy of the grade tool, built afresh: a tool that an
# earlier grading's code replaced in build/grade-tool/ is never used. Its
# files and the manifests are fingerprinted here and checked before the
# scores are written: a grading whose code changed them says so, and scores
# nothing (without the sandbox, code on disk is only detected, not stopped).
mkdir -p "$build_dir" || exit 2
grade_tool=$build_dir/grade
${CC:-cc} -O2 -std=c11 tests/harness/grade.c -o "$grade_tool" || exit 2
fingerprint() {
    sha256sum "$grade_tool" tests/manifest/*.txt $(ls tests/hidden/manifest/*.txt 2>/dev/null) 2>/dev/null
}
grader_files=$(fingerprint)

sandbox_env=()
if $sandbox; then
    if ! command -v bwrap >/dev/null 2>&1; then
        echo "grade: --sandbox needs bubblewrap (apt-get install bubblewrap)" >&2
        exit 2
    fi
    # Each program the tests run (never the tests themselves) runs under
    # bubblewrap (tests/harness/harness.c): an unprivileged user with no
    # capabilities, its own PID, network and IPC namespaces, the whole file
    # system read-only, this repository hidden but for this grading's build,
    # and nothing writable but the run's own scratch folder.
    sandbox_env=(ZZ_SANDBOX=1 "ZZ_SANDBOX_HIDE=$root" "ZZ_SANDBOX_SHOW=$root/$build_dir")
fi

# Where every program runs in a PID namespace of its own, the kernel ends
# whatever a test left behind; elsewhere (no namespaces here) the grader
# sweeps this grading's own programs by their absolute path afterwards.
namespaces=false
if unshare --pid --fork true 2>/dev/null || unshare --user --pid --fork true 2>/dev/null; then
    namespaces=true
fi

# What each lesson's tests judged, kept here until every lesson is done: no
# program of a later lesson can reach it. Every lesson is built before any
# test runs, so no lesson's code can change another's sources before they
# are compiled; each lesson's programs are fingerprinted once built, and a
# lesson whose programs changed before its tests ran is not run.
declare -A verdicts=() endings=() build_logs=() built=()
for lesson in "${lessons[@]}"; do
    # A lesson that cannot be built here (CUDA without nvcc): every test is
    # skipped, with the reason, and scored as its manifest says.
    if [[ " ${ZZ_UNBUILT:-} " == *" $lesson "* ]]; then
        verdicts[$lesson]=$(grep '^[^#].*|.*|' "tests/manifest/$lesson.txt" |
            awk -F'|' -v why="${ZZ_UNBUILT_REASON:-not built here}" '
                { name = $3; gsub(/^ +| +$/, "", name); print "skip\t" name "\t" why }')
        continue
    fi
    if [ -n "${refused[$lesson]:-}" ]; then
        build_logs[$lesson]=${refused[$lesson]}
        echo "grade: lesson $lesson was refused (see $work/$lesson.build.log)"
        continue
    fi
    binary=$build_dir/tests/test_$lesson
    if ! make -s --no-print-directory GRADE_SRC="$src" GRADE_ID="$grade_id" \
            ${GRADE_SYMBOL_CHECK:+GRADE_SYMBOL_CHECK=$GRADE_SYMBOL_CHECK} \
            "$binary" > "$work/$lesson.build.log" 2>&1; then
        build_logs[$lesson]=$(cat "$work/$lesson.build.log")
        echo "grade: lesson $lesson does not build (see $work/$lesson.build.log)"
        continue
    fi
    built[$lesson]=$(find "$build_dir/tests/test_$lesson" "$build_dir/$lesson" -type f ! -name '*.[od]' -exec sha256sum {} + 2>/dev/null)
done

for lesson in "${lessons[@]}"; do
    [ -n "${built[$lesson]:-}" ] || continue
    binary=$build_dir/tests/test_$lesson
    if ! sha256sum --quiet --check <(printf '%s\n' "${built[$lesson]}") > /dev/null 2>&1; then
        endings[$lesson]="the lesson's test programs were changed after they were built (by code of a lesson graded before it?), so they were not run"
        echo "grade: lesson $lesson: ${endings[$lesson]}"
        verdicts[$lesson]=""
        continue
    fi
    # CUDA reserves far more address space than it uses: its lessons get
    # no address-space limit (the GPU's own memory bounds them).
    lesson_memory=$memory_kib
    [[ " ${ZZ_CUDA_LESSONS:-} " == *" $lesson "* ]] && lesson_memory=unlimited
    lesson_start=$SECONDS
    # The lesson's temporary files go to a folder of its own, removed
    # afterwards however its test program ended (even at the wall limit).
    lesson_tmp=$(mktemp -d "${TMPDIR:-/tmp}/zz-grade-XXXXXX") || exit 2
    # The runner sends its verdicts, one line a test as each ends, to
    # descriptor 3: a pipe into this script, which no program it runs holds.
    output=$( {
        (
            ulimit -t "$cpu_seconds" -v "$lesson_memory" -f "$file_kib"
            [ "$(id -u)" -eq 0 ] || ulimit -u "$processes"
            exec timeout --kill-after=10 "$wall_seconds" \
                env TMPDIR="$lesson_tmp" ZZ_BUILD_DIR="$root/$build_dir" "${sandbox_env[@]}" "$binary" \
                --title "lesson $lesson" --mode student --results-fd 3 \
                3>&1 > "$work/$lesson.log" 2>&1 < /dev/null
        )
        echo "ended $?"
    } )
    status=${output##*ended }
    verdicts[$lesson]=${output%ended*}
    rm -rf "$lesson_tmp"
    seconds=$((SECONDS - lesson_start))
    case "$status" in
        0|1) ;;
        124|137) endings[$lesson]="the lesson's tests were stopped at its wall-clock limit of $wall_seconds s" ;;
        152) endings[$lesson]="the lesson's test program was killed by its CPU-time limit of $cpu_seconds s, after $seconds s" ;;
        *)
            if [ "$status" -gt 128 ]; then
                endings[$lesson]="the lesson's test program was killed by signal $((status - 128)) ($(kill -l $((status - 128)) 2>/dev/null || echo '?')) after $seconds s"
            else
                endings[$lesson]="the lesson's test program failed with status $status after $seconds s"
            fi ;;
    esac
    if [ -n "${endings[$lesson]:-}" ]; then
        endings[$lesson]+="; its log ends: $(tail -n 3 "$work/$lesson.log" | tr '\n\t' '  ' | cut -c1-300)"
        echo "grade: lesson $lesson: ${endings[$lesson]}"
    fi
    $namespaces || "$grade_tool" --sweep "$root/$build_dir"
done

# Only now, with every lesson's tests ended, do the verdicts reach files,
# over whatever a test may have written there.
for lesson in "${lessons[@]}"; do
    rm -f "$work/$lesson.results" "$work/$lesson.ended" "$work/$lesson.build.log"
done
for lesson in "${!build_logs[@]}"; do
    printf '%s\n' "${build_logs[$lesson]}" > "$work/$lesson.build.log"
done
for lesson in "${!verdicts[@]}"; do
    printf '%s' "${verdicts[$lesson]}" > "$work/$lesson.results"
done
for lesson in "${!endings[@]}"; do
    printf '%s\n' "${endings[$lesson]}" > "$work/$lesson.ended"
done

# The scores: written after every test of every lesson has ended, with
# nothing left of what a test may have written in their place.
rm -f "$out/results.json" "$out/junit.xml" "$out/results.tap" "$out/scores.txt"
if [ "$(fingerprint)" != "$grader_files" ]; then
    echo "grade: the grader's own files (its tool, the manifests) were changed during this grading: its score cannot be trusted, and none is given. Grade untrusted submissions with SANDBOX=1." >&2
    exit 3
fi
grade=("$grade_tool" --lessons "${lessons[*]}" --work "$work"
       --sources "$src")
if [ -n "$expect" ]; then
    "${grade[@]}" --expect "$expect" ${tally:+--tally "$tally"} \
        --title "broken submission '$(basename "$overlay")' of lesson ${lessons[*]}"
    exit $?
fi
"${grade[@]}" --out "$out" --seconds $((SECONDS - start))
status=$?
echo "Results: $out/results.json, $out/junit.xml, $out/results.tap; logs in $work/"
exit $status
