#!/usr/bin/env bash
# make grade: builds and tests a submission lesson by lesson, and scores it.
#
#   scripts/grade.sh                        your own tree (lessons/), every lesson
#   scripts/grade.sh --lesson 02-mpi-matvec one lesson (or "L1 L2", several)
#   scripts/grade.sh --submission DIR       another student's tree: only the files
#                                           a student edits are taken from it
#   scripts/grade.sh --out DIR              where results go (build/grade)
#   scripts/grade.sh --sandbox              student code runs under bubblewrap
#                                           (tests/harness/harness.c); refused
#                                           where bubblewrap cannot run
#   scripts/grade.sh --no-sandbox           it does not, even for --submission
# A --submission is graded with the sandbox unless --no-sandbox says
# otherwise: where bubblewrap or the user namespaces it needs are missing,
# one line says so and it is graded without. Your own tree is graded
# without the sandbox unless --sandbox says otherwise.
# For make test: --solutions (grade the reference solutions), --overlay DIR (a
# broken submission: the solutions with DIR's patches applied, FILE.patch for
# FILE, or FILE.skeleton for the untouched skeleton), --expect FILE and
# --tally FILE.
#
# Run it through make (make grade ...), which tells it the lessons and the
# files each lesson's student edits. Each lesson is built on its own: one that
# does not compile scores 0 with the compiler's message, and the others are
# still graded. Each lesson's tests run with limits on CPU time, memory, file
# size and (when not root) processes, and a wall-clock limit, with a /tmp of
# their own (the runner's --private-tmp); afterwards every process that the
# tests left behind is killed. The score comes from the grader's records of
# each test (build/grade-tool/grade), never from anything the submission
# prints or writes; and none is given when the files the grading rests on
# changed while it ran (status 3), or when there was no room left to grade
# (status 4).
. "$(dirname "$0")/portable.sh" "$@"  # bash 4, GNU tools (macOS: Homebrew's)
. "$(dirname "$0")/tsan-options.sh"
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# Copies one handed-in file, never through a symbolic link: a link could
# point at the solutions. A file that is not a plain file, or is too large to
# be source code, is refused too (into `refused`, main's).
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

# Why the sandbox cannot run here, in a few words; nothing when it can.
# The probe asks bubblewrap for what the harness asks of it: a user
# namespace of its own without capabilities, no network, and a tmpfs of a
# given size (bubblewrap 0.7 or later).
sandbox_unavailable() {
    if ! command -v bwrap >/dev/null 2>&1; then
        echo "bubblewrap is not installed (apt-get install bubblewrap)"
        return
    fi
    local why
    why=$(bwrap --unshare-user --uid 65534 --gid 65534 --unshare-net \
              --cap-drop ALL --ro-bind / / --dev /dev \
              --size 1048576 --tmpfs /tmp -- true 2>&1 >/dev/null) && return
    echo "bubblewrap cannot start here (${why%%$'\n'*})"
}

# The folders a grading writes and removes (its output folder and its build
# folder), and every folder on the way to them, must be folders, not
# symbolic links: without the sandbox a grading's code can write them, and
# could put a link in place of one so that this script, or the next
# grading, removes or overwrites whatever it points to. A folder inside the
# checkout is checked from the checkout down; the output folder, from the
# folder it was given in (out_parent, main's). One line and status 3 when
# one is a link.
refuse_links() {   # refuse_links PATH...
    local path base rest prefix part
    local IFS=/
    set -f
    for path in "$@"; do
        if [[ $path == /* ]]; then
            base=$out_parent rest=${path#"$out_parent"/}
        else
            base=. rest=$path
        fi
        prefix=$base
        for part in $rest; do
            [ -n "$part" ] && [ "$part" != . ] || continue
            prefix=$prefix/$part
            if [ -L "$prefix" ]; then
                set +f
                echo "grade: ${prefix#./} is a symbolic link (to $(readlink "$prefix")), not the grading's own folder: code run without the sandbox put it there. No score is given; remove it, and grade untrusted work with the sandbox." >&2
                exit 3
            fi
        done
    done
    set +f
}

# What the grading rests on, fingerprinted: the tests and the harness, the
# scripts, the shared library's and the lessons' given files, the solutions
# (make test grades fixtures on them), the Makefile: every file's type,
# mode, name and content (and a link's target). Grading your own tree, your
# edited files are yours to change (`mine`, main's, lists them).
tree_fingerprint() {
    local paths=(Makefile tests scripts common lessons) excluded=() file
    [ -d solutions ] && paths+=(solutions)
    for file in "${mine[@]}"; do excluded+=(! -path "$file"); done
    find "${paths[@]}" \( -type f -o -type l \) "${excluded[@]}" \
        -printf '%y %m %p %l\n' 2>/dev/null | LC_ALL=C sort
    find "${paths[@]}" -type f "${excluded[@]}" -print0 2>/dev/null |
        LC_ALL=C sort -z | xargs -0 sha256sum 2>/dev/null
}

# And what the builds made that the grading runs or links: its grade tool,
# and the library builds (libcommon.a, the harness's and the tests' objects;
# the sanitize build's for the sanitized pass) that every graded program
# and judge is linked with.
build_fingerprint() {
    local parts=("$grade_tool" "build/$library/common" "build/$library/tests")
    [ -n "$sanitizers_off" ] || parts+=(build/sanitize/common build/sanitize/tests)
    [ -n "$tsan_off" ] || parts+=(build/tsan/common build/tsan/tests)
    find "${parts[@]}" \( -type f -o -type l \) -printf '%y %m %p %l\n' 2>/dev/null | LC_ALL=C sort
    find "${parts[@]}" -type f -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha256sum 2>/dev/null
}

# The files named in one fingerprint and not the other, or differently:
# the first three, for a person.
changed_files() {   # changed_files BEFORE AFTER
    LC_ALL=C comm -3 <(printf '%s\n' "$1" | LC_ALL=C sort) <(printf '%s\n' "$2" | LC_ALL=C sort) |
        awk '{ $1 = $1 } $1 ~ /^[fl]$/ { print $3; next } { print $2 }' |
        LC_ALL=C sort -u | head -n 3 | paste -sd, - | sed 's/,/, /g'
}

# No score, and no file that claims one: what an earlier grading left in
# OUT, and what this one wrote of its lessons' verdicts.
remove_scores() {
    rm -f "$out/results.json" "$out/junit.xml" "$out/results.tap" "$out/scores.txt"
    for lesson in "${lessons[@]}"; do rm -f "$work/$lesson.results"; done
}

# Room to work, on the file systems the grading writes (its output folder's
# and its build folder's, where its temporary files go too): short of
# GRADE_MIN_FREE_MIB there, a test could fail for want of room rather than
# for the student's code. The grading then stops, scores nothing and says
# which file system is short (status 4): an infrastructure error, never a
# student's 0.
check_room() {   # check_room WHEN
    local folder free
    for folder in "$out" "$build_dir"; do
        free=$(df -Pk -- "$folder" 2>/dev/null | awk 'NR == 2 { print $4 }')
        if [ -z "$free" ] || [ "$free" -lt "$min_free_kib" ]; then
            remove_scores
            echo "grade: infrastructure error $1: the file system of $folder has ${free:-no} KiB free, less than the $min_free_kib KiB a grading needs (GRADE_MIN_FREE_MIB): no score is given. Make room and grade again." >&2
            exit 4
        fi
    done
}

# The sanitized passes. Each lesson is built a second time under
# AddressSanitizer and UBSan (make GRADE_SANITIZE=1) and its tests run again
# on that build; a lesson whose code runs threads (lesson.mk's TSAN), a
# third time under ThreadSanitizer (GRADE_SANITIZE=thread). A test passes
# only when it passes in each. A sanitized test fails a plain pass only
# with a sanitizer's report (the harness's words "built with the
# sanitizers"): a test that runs slower under the sanitizers, or that they
# make meaningless (the kernel's count of a rank's memory), never costs a
# correct program its points.
# merge_sanitized UNDER PLAIN SANITIZED MANIFEST...: the verdicts, merged;
# the manifests' TODO column names the TODO in the failure, after UNDER
# ("under ThreadSanitizer").
merge_sanitized() {
    local under=$1 plain=$2 sanitized=$3
    shift 3
    awk -F'\t' -v under="$under" -v plain="$plain" -v sanitized="$sanitized" '
        /^[^#].*\|.*\|/ {
            split($0, field, "|"); name = field[3]; todo = field[2]
            gsub(/^ +| +$/, "", name); gsub(/^ +| +$/, "", todo)
            todo_of[name] = todo
        }
        END {
            count = split(sanitized, lines, "\n")
            for (k = 1; k <= count; k++) {
                if (split(lines[k], part, "\t") < 3) continue
                if (part[1] == "fail" && index(part[3], "built with the sanitizers") > 0)
                    found[part[2]] = part[3]
            }
            count = split(plain, lines, "\n")
            for (k = 1; k <= count; k++) {
                if (lines[k] == "") continue
                split(lines[k], part, "\t")
                todo = todo_of[part[2]]
                if (part[1] == "pass" && (part[2] in found))
                    printf "fail\t%s\t%s%s: %s\n", part[2], under,
                        todo != "" ? " (TODO " todo ")" : "", found[part[2]]
                # A plain failure that the sanitizer also saw the cause of
                # (a race that showed as wrong numbers): both, cause last.
                else if (part[1] == "fail" && (part[2] in found))
                    printf "fail\t%s\t%s; and %s%s: %s\n", part[2], part[3],
                        under, todo != "" ? " (TODO " todo ")" : "",
                        found[part[2]]
                else
                    print lines[k]
            }
        }' "$@" /dev/null
}

# One run of a lesson's test program, under the grading's limits, its
# verdicts (one line a test, as each ends) and then "ended STATUS" on
# standard output. The runner sends its verdicts to descriptor 3: a pipe
# into this script, which no program it runs holds. Its tests get a /tmp
# of their own (--private-tmp), gone when it ends; where none can be had,
# TMPDIR, this grading's build folder.
# run_tests BUILD MEMORY_KIB TITLE LOG [SETTING...]   (MEMORY_KIB: the
# address-space limit, or unlimited; the lesson is $lesson)
run_tests() {
    local build=$1 memory=$2 title=$3 log=$4
    shift 4
    {
        (
            ulimit -t "$cpu_seconds" -v "$memory" -f "$file_kib"
            [ "$(id -u)" -eq 0 ] || ulimit -u "$processes"
            exec timeout --kill-after=10 "$wall_seconds" \
                env ZZ_BUILD_DIR="$root/$build" "${sandbox_env[@]}" "$@" \
                ${sandbox_env:+"ZZ_SANDBOX_SHOW=$root/$build/$lesson"} "$build/tests/test_$lesson" \
                --title "$title" --mode student --results-fd 3 \
                --private-tmp "$tmp_mib" \
                3>&1 > "$log" 2>&1 < /dev/null
        )
        echo "ended $?"
    }
}

main() {
lesson_filter="" submission="" out=build/grade overlay="" expect="" tally=""
sandbox=default
while [ $# -gt 0 ]; do
    case "$1" in
        --lesson) lesson_filter=${2:?}; shift ;;
        --submission) submission=${2:?}; shift ;;
        --out) out=${2:?}; shift ;;
        --overlay) overlay=${2:?}; shift ;;
        --solutions) overlay=/nonexistent ;;
        --expect) expect=${2:?}; shift ;;
        --tally) tally=${2:?}; shift ;;
        --sandbox) sandbox=yes ;;
        --no-sandbox) sandbox=no ;;
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

# With the sandbox or without: said, or the default for what is graded.
if [ "$sandbox" = yes ]; then
    why=$(sandbox_unavailable)
    if [ -n "$why" ]; then
        echo "grade: --sandbox: $why" >&2
        exit 2
    fi
elif [ "$sandbox" = default ]; then
    sandbox=no
    if [ -n "$submission" ]; then
        why=$(sandbox_unavailable)
        if [ -z "$why" ]; then
            sandbox=yes
        else
            echo "grade: grading without the sandbox: $why (docs/instructors.md, \"The sandbox\")"
        fi
    fi
fi

# Limits for each lesson's tests: generous for honest code, fatal for a
# runaway. Every test also has its own time limit inside the runner.
cpu_seconds=${GRADE_CPU_SECONDS:-600}
memory_kib=${GRADE_MEMORY_KIB:-4194304}      # 4 GiB of address space
file_kib=${GRADE_FILE_KIB:-65536}           # 64 MiB per file written
processes=${GRADE_PROCESSES:-512}           # not enforceable for root
wall_seconds=${GRADE_WALL_SECONDS:-600}
# The /tmp of each lesson's tests (memory, used only as far as it is
# filled): the tests keep at most some 153 MiB there at once (lesson 07's,
# measured: inputs, outputs and the MPI runs' shared-memory files), and the
# output of the programs they run, up to the file limit above (64 MiB, on
# each of standard output and error). Room for three times that.
tmp_mib=${GRADE_TMP_MIB:-768}
# Room on disk (the output and the build folders' file systems): a graded
# build of every lesson and its output folder; where no /tmp of the tests'
# own can be had, their temporary files (153 MiB at most) go there too.
min_free_kib=$(( ${GRADE_MIN_FREE_MIB:-512} * 1024 ))

out=${out%/}
out_parent=$(dirname "$out")
# One build folder per output folder, so that several gradings never mix.
grade_id=$(printf '%s' "$out" | tr -c 'A-Za-z0-9_.-' '_')
build_dir=build/graded/$grade_id
sanitized_dir=build/graded/$grade_id-sanitize
tsan_dir=build/graded/$grade_id-tsan
src=$out/src
work=$out/work
refuse_links "$out" "$build_dir" "$sanitized_dir" "$tsan_dir" "$src" "$work"
rm -rf "$src" "$build_dir" "$sanitized_dir" "$tsan_dir"
mkdir -p "$src" "$work" "$build_dir/tmp" || exit 2
# Only the graded lessons' logs go: make grade L=06 leaves lesson 07's last
# grading in place, which make progress reads.
for lesson in "${lessons[@]}"; do
    rm -rf "${work:?}/$lesson".* "${work:?}/$lesson"
done
root=$PWD
start=$SECONDS
check_room "before the grading"
# Every temporary file of the grading (the compiler's, and the tests' where
# they get no /tmp of their own) goes to its build folder: a /tmp that
# something else filled cannot fail it.
export TMPDIR=$root/$build_dir/tmp

# Lessons whose files were refused before any build, and why.
declare -A refused=()

# The files a student edits, as lessons/LESSON/FILE; grading your own
# tree, they are yours (and left out of the fingerprint).
mine=()
if [ -z "$submission" ] && [ -z "$overlay" ]; then
    for pair in $ZZ_EDITED; do mine+=("lessons/$pair"); done
fi
tree_before=$(tree_fingerprint)

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
# earlier grading's code replaced in build/grade-tool/ is never used.
grade_tool=$build_dir/grade
${CC:-cc} -O2 -std=c11 tests/harness/grade.c -o "$grade_tool" || exit 2
# The library build that graded programs link (the Makefile's
# GRADE_VARIANT_LIBRARY).
library=student
[ -d solutions ] && library=solution

sandbox_env=()
if [ "$sandbox" = yes ]; then
    # Each program the tests run (never the tests themselves) runs under
    # bubblewrap (tests/harness/harness.c): an unprivileged user with no
    # capabilities, its own PID, network and IPC namespaces, the system's
    # programs and libraries read-only, of this checkout only the lesson's
    # programs of this grading (read-only), and nothing writable but the
    # run's own scratch folder. ZZ_SANDBOX_SHOW is set for each lesson.
    sandbox_env=(ZZ_SANDBOX=1 "ZZ_SANDBOX_HIDE=$root")
fi

# Where every program runs in a PID namespace of its own, the kernel ends
# whatever a test left behind; elsewhere (no namespaces here) the grader
# sweeps this grading's own programs by their absolute path afterwards.
namespaces=false
if unshare --pid --fork true 2>/dev/null || unshare --user --pid --fork true 2>/dev/null; then
    namespaces=true
fi

# The sanitized passes (merge_sanitized), unless GRADE_SANITIZERS=0, where
# the compiler can build and run a program under AddressSanitizer and
# UBSan, and clang one under ThreadSanitizer with LLVM's OpenMP runtime and
# its Archer tool (without which OpenMP's own barriers would look like
# races: scripts/tsan.sh). Why not, in a few words, for the log.
sanitizers_off="" tsan_off=""
if [ "${GRADE_SANITIZERS:-1}" = 0 ]; then
    sanitizers_off="not asked for (GRADE_SANITIZERS=0)"
elif ! printf 'int main(void) { return 0; }\n' |
        "${CC:-cc}" -fsanitize=address,undefined -x c - -o "$build_dir/tmp/sanitizers-probe" > /dev/null 2>&1 ||
     ! ASAN_OPTIONS=detect_leaks=0 "$build_dir/tmp/sanitizers-probe" > /dev/null 2>&1; then
    sanitizers_off="${CC:-cc} cannot build and run a program with -fsanitize=address,undefined here"
fi
rm -f "$build_dir/tmp/sanitizers-probe"
clang=${CLANG:-clang}
if [ "${GRADE_SANITIZERS:-1}" = 0 ]; then
    tsan_off="not asked for (GRADE_SANITIZERS=0)"
elif [ -z "${ZZ_TSAN_LESSONS:-}" ]; then
    tsan_off="no lesson graded here runs threads"
elif ! command -v "$clang" > /dev/null 2>&1; then
    tsan_off="$clang (LLVM's C compiler) is not installed; on Debian or Ubuntu: apt-get install clang libomp-dev"
elif ! printf '#include <omp.h>\nint main(void) { int n = 0;\n#pragma omp parallel\n#pragma omp atomic\nn++;\nreturn n < 1; }\n' |
        "$clang" -fsanitize=thread -fopenmp -x c - -o "$build_dir/tmp/tsan-probe" > /dev/null 2>&1 ||
     ! OMP_NUM_THREADS=2 ARCHER_OPTIONS=verbose=1 TSAN_OPTIONS=ignore_noninstrumented_modules=1 \
        "$build_dir/tmp/tsan-probe" 2>/dev/null | grep -q "Archer detected OpenMP application"; then
    tsan_off="$clang cannot build and run an OpenMP program under ThreadSanitizer with LLVM's OpenMP runtime and Archer here (on Debian or Ubuntu: apt-get install libomp-dev)"
fi
rm -f "$build_dir/tmp/tsan-probe"
# llvm-symbolizer turns the reports' addresses into file:line (Debian keeps
# it in LLVM's own folder); without it, the reports name the binary.
symbolizer=$(command -v llvm-symbolizer 2>/dev/null || ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null | tail -1)
[ -z "$sanitizers_off" ] || [ "${GRADE_SANITIZERS:-1}" = 0 ] ||
    echo "grade: skipped: the tests run again under AddressSanitizer and UBSan: $sanitizers_off"
[ -z "$tsan_off" ] || [ "${GRADE_SANITIZERS:-1}" = 0 ] || [ -z "${ZZ_TSAN_LESSONS:-}" ] ||
    echo "grade: skipped: the tests of threaded code run again under ThreadSanitizer: $tsan_off"

# What each lesson's tests judged, kept here until every lesson is done: no
# program of a later lesson can reach it. Every lesson is built before any
# test runs, so no lesson's code can change another's sources before they
# are compiled; each lesson's programs are fingerprinted once built, and a
# lesson whose programs changed before its tests ran is not run.
declare -A verdicts=() endings=() build_logs=() built=() built_sanitized=() built_tsan=()
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
        # The checks on the files run in the build, before the compiler
        # links anything: a refusal is not a build error.
        if grep -q '^refused: ' "$work/$lesson.build.log"; then
            echo "grade: lesson $lesson was refused: $(grep -m1 '^refused: ' "$work/$lesson.build.log" | cut -c10-) (see $work/$lesson.build.log)"
        else
            echo "grade: lesson $lesson does not build (see $work/$lesson.build.log)"
        fi
        continue
    fi
    built[$lesson]=$(find "$build_dir/tests/test_$lesson" "$build_dir/$lesson" -type f ! -name '*.[od]' -exec sha256sum {} + 2>/dev/null)
    # The same files again, under the sanitizers: where that build fails
    # (a toolchain's limit, since the plain build of the same files
    # passed), the lesson is graded on its plain tests, and the log says so.
    if [ -z "$sanitizers_off" ]; then
        if make -s --no-print-directory GRADE_SRC="$src" GRADE_ID="$grade_id-sanitize" GRADE_SANITIZE=1 \
                "$sanitized_dir/tests/test_$lesson" > "$work/$lesson.sanitized-build.log" 2>&1; then
            built_sanitized[$lesson]=$(find "$sanitized_dir/tests/test_$lesson" "$sanitized_dir/$lesson" -type f ! -name '*.[od]' -exec sha256sum {} + 2>/dev/null)
            rm -f "$work/$lesson.sanitized-build.log"
        else
            echo "grade: lesson $lesson: not run under AddressSanitizer and UBSan, whose build failed (see $work/$lesson.sanitized-build.log)"
        fi
    fi
    if [ -z "$tsan_off" ] && [[ " $ZZ_TSAN_LESSONS " == *" $lesson "* ]]; then
        if make -s --no-print-directory CC="$clang" GRADE_SRC="$src" GRADE_ID="$grade_id-tsan" GRADE_SANITIZE=thread \
                "$tsan_dir/tests/test_$lesson" > "$work/$lesson.tsan-build.log" 2>&1; then
            built_tsan[$lesson]=$(find "$tsan_dir/tests/test_$lesson" "$tsan_dir/$lesson" -type f ! -name '*.[od]' -exec sha256sum {} + 2>/dev/null)
            rm -f "$work/$lesson.tsan-build.log"
        else
            echo "grade: lesson $lesson: not run under ThreadSanitizer, whose build failed (see $work/$lesson.tsan-build.log)"
        fi
    fi
done
check_room "after the builds"
build_before=$(build_fingerprint)

for lesson in "${lessons[@]}"; do
    [ -n "${built[$lesson]:-}" ] || continue
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
    # The runner sends its verdicts, one line a test as each ends, to
    # descriptor 3: a pipe into this script, which no program it runs holds.
    # Its tests get a /tmp of their own (--private-tmp), gone when it ends;
    # where none can be had, TMPDIR, this grading's build folder.
    output=$(run_tests "$build_dir" "$lesson_memory" "lesson $lesson" "$work/$lesson.log")
    status=${output##*ended }
    verdicts[$lesson]=${output%ended*}
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
    manifests=("tests/manifest/$lesson.txt")
    [ -e "tests/hidden/manifest/$lesson.txt" ] && manifests+=("tests/hidden/manifest/$lesson.txt")
    if [ -n "${built_sanitized[$lesson]:-}" ] && [ -z "${endings[$lesson]:-}" ] &&
       sha256sum --quiet --check <(printf '%s\n' "${built_sanitized[$lesson]}") > /dev/null 2>&1; then
        # No address-space limit: the sanitizers reserve terabytes of it for
        # their shadow memory. Leaks are not graded; a size too large for
        # memory reaches the program's own error path, as without them.
        options=detect_leaks=0:allocator_may_return_null=1
        [ -z "$symbolizer" ] || options+=":external_symbolizer_path=$symbolizer"
        [ "$lesson_memory" = unlimited ] && options="protect_shadow_gap=0:$options"
        sanitized=$(run_tests "$sanitized_dir" unlimited "lesson $lesson, under AddressSanitizer and UBSan" \
            "$work/$lesson.sanitized.log" ASAN_OPTIONS="$options" \
            UBSAN_OPTIONS="print_stacktrace=1${symbolizer:+:external_symbolizer_path=$symbolizer}")
        verdicts[$lesson]=$(merge_sanitized "under AddressSanitizer and UBSan" "${verdicts[$lesson]}" \
            "${sanitized%ended*}" "${manifests[@]}")$'\n'
    fi
    if [ -n "${built_tsan[$lesson]:-}" ] && [ -z "${endings[$lesson]:-}" ] &&
       sha256sum --quiet --check <(printf '%s\n' "${built_tsan[$lesson]}") > /dev/null 2>&1; then
        # A race makes the program fail at its end (exitcode), unless every
        # race reported was in the OpenMP runtime's own memory (the
        # harness, tests/harness/harness.c: runtime_race); races inside
        # libraries built without ThreadSanitizer (MPI's) are not the
        # student's.
        sanitized=$(run_tests "$tsan_dir" unlimited "lesson $lesson, under ThreadSanitizer" \
            "$work/$lesson.tsan.log" \
            TSAN_OPTIONS="$tsan_options halt_on_error=0 report_signal_unsafe=0${symbolizer:+ external_symbolizer_path=$symbolizer}")
        verdicts[$lesson]=$(merge_sanitized "under ThreadSanitizer" "${verdicts[$lesson]}" \
            "${sanitized%ended*}" "${manifests[@]}")$'\n'
    fi
    $namespaces || "$grade_tool" --sweep "$root/$build_dir"
    $namespaces || "$grade_tool" --sweep "$root/$sanitized_dir"
    $namespaces || "$grade_tool" --sweep "$root/$tsan_dir"
    # What the tests left in the build folder's temporary folder (where
    # they had no /tmp of their own) goes before the next lesson's.
    refuse_links "$build_dir/tmp"
    find "$build_dir/tmp" -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null
    check_room "after lesson $lesson's tests"
done

# Before any score: the files the grading rests on are as they were when
# its first program ran, and its own folders are still its own.
refuse_links "$out" "$build_dir" "$src" "$work"
tree_after=$(tree_fingerprint)
build_after=$(build_fingerprint)
if [ "$tree_after" != "$tree_before" ] || [ "$build_after" != "$build_before" ]; then
    remove_scores
    echo "grade: files the grading rests on were changed while it ran ($(changed_files "$tree_before"$'\n'"$build_before" "$tree_after"$'\n'"$build_after")): its score cannot be trusted, and none is given. Restore them (git status shows what changed; make builds the rest again), and grade untrusted work with the sandbox." >&2
    exit 3
fi

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
grade=("$grade_tool" --lessons "${lessons[*]}" --work "$work"
       --sources "$src")
if [ -n "$expect" ]; then
    "${grade[@]}" --expect "$expect" ${tally:+--tally "$tally"} \
        --title "broken submission '$(basename "$overlay")' of lesson ${lessons[*]}"
    return $?
fi
"${grade[@]}" --out "$out" --seconds $((SECONDS - start))
status=$?
echo "Results: $out/results.json, $out/junit.xml, $out/results.tap; logs in $work/"
return $status
}

# The whole script is read before any of it runs: a grading's code that
# rewrites this file in place cannot change what the rest of the grading
# does (bash reads a script as it goes, not before).
main "$@"; exit $?
