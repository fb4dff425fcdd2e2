#!/usr/bin/env bash
# make grade-all SUBMISSIONS=DIR [JOBS=N]: grades every submission in DIR
# (one folder each, laid out like this repository: DIR/NAME/lessons/NN-*/...),
# N at a time (1 unless told), each in its own output and build folder, and
# writes a roster:
#   build/grade-all/roster.csv        one row per submission, points per lesson
#   build/grade-all/NAME/             results.json, junit.xml, results.tap
#   build/grade-all/NAME.log          everything the grading printed
# One submission that fails to build, crashes or hangs costs only its own
# grade. Gradings at once never touch each other's processes or files, so
# every score is the one a grading alone gives (make test proves it); on a
# machine of C cores, N = C/2 leaves each grading's MPI tests room.
#
# make grade-all SUBMISSIONS=DIR SLURM=1 [L=NN] [JOBS=N]: the same gradings
# as a Slurm job array, one task per submission (at most N at once when
# JOBS is given), submitted with sbatch --wait from this folder, which
# every node must see (a shared file system); then the same roster. Each
# task asks for 1 task of 2 CPUs (GRADE_SLURM_CPUS) and grades as on a
# machine of its own: it hides the allocation from the grading's mpirun,
# whose ranks stay on the task's node. GRADE_SLURM_OPTIONS adds sbatch
# options (a partition, a time limit). Each task's Slurm output is
# build/grade-all/slurm-JOB_TASK.out. make test-cluster checks that the
# array gives the scores of grading one at a time.
. "$(dirname "$0")/portable.sh" "$@"  # bash 4, GNU tools (macOS: Homebrew's)
set -uo pipefail
cd "$(dirname "$0")/.."
usage() {
    echo "usage: scripts/grade-all.sh FOLDER [--jobs N] [--sandbox|--no-sandbox] [--lesson 'L...'] [--slurm]" >&2
    exit 2
}
submissions=${1:-}
[ -n "$submissions" ] || usage
shift
jobs=1 jobs_given=false options=() slurm=false
while [ $# -gt 0 ]; do
    case "$1" in
        --jobs) jobs=${2:-}; jobs_given=true; shift ;;
        --sandbox|--no-sandbox) options+=("$1") ;;
        --lesson) options+=(--lesson "${2:-}"); shift ;;
        --slurm) slurm=true ;;
        *) usage ;;
    esac
    shift
done
if [ ! -d "$submissions" ]; then
    echo "grade-all: '$submissions' is not a folder" >&2
    exit 2
fi
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]] || [ "$jobs" -gt 64 ]; then
    echo "grade-all: JOBS must be a whole number from 1 to 64, not '$jobs'" >&2
    exit 2
fi
out=${ZZ_GRADE_ALL_OUT:-build/grade-all}   # make test-cluster grades elsewhere
mkdir -p "$out"

# A submission's log and seconds are made afresh (removed, then written),
# never written through a link that an earlier grading's code, run without
# the sandbox, left in their place.
grade_one() {   # grade_one NAME FOLDER
    local start=$SECONDS
    rm -f "$out/$1.log" "$out/$1.seconds"
    scripts/grade.sh --submission "$2" --out "$out/$1" "${options[@]}" > "$out/$1.log" 2>&1
    rm -f "$out/$1.seconds"
    echo $((SECONDS - start)) > "$out/$1.seconds"
}

names=()
dirs=()
for dir in "$submissions"/*/; do
    [ -d "$dir" ] || continue
    names+=("$(basename "$dir")")
    dirs+=("$(cd "$dir" && pwd)")
done
# No score from an earlier grading may stand for one that never ended.
# (A NAME that is a link is no grading's folder: grade.sh refuses it, and
# nothing is removed or read through it.)
for name in "${names[@]}"; do
    rm -f "$out/$name.seconds"
    [ -L "$out/$name" ] || rm -f "$out/$name/scores.txt"
done

if ! $slurm; then
    running=0
    for k in "${!names[@]}"; do
        if [ "$running" -ge "$jobs" ]; then
            wait -n
            running=$((running - 1))
        fi
        grade_one "${names[$k]}" "${dirs[$k]}" &
        running=$((running + 1))
    done
    wait
elif [ ${#names[@]} -gt 0 ]; then
    command -v sbatch >/dev/null 2>&1 || {
        echo "grade-all: SLURM=1: there is no sbatch here (run it on the cluster's login node)" >&2
        exit 2
    }
    # The array's task K grades line K+1 of this list.
    list=$out/slurm-submissions.txt
    for k in "${!names[@]}"; do printf '%s\t%s\n' "${names[$k]}" "${dirs[$k]}"; done > "$list"
    task=$out/slurm-grade.sbatch
    {
        echo '#!/usr/bin/env bash'
        echo "# One task of make grade-all SLURM=1 (scripts/grade-all.sh): grades"
        echo "# the submission on line SLURM_ARRAY_TASK_ID + 1 of $list."
        echo 'set -uo pipefail'
        printf 'cd %q\n' "$PWD"
        printf 'line=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" %q)\n' "$list"
        echo 'name=${line%%$'"'"'\t'"'"'*} dir=${line#*$'"'"'\t'"'"'}'
        echo 'echo "grade-all: task $SLURM_ARRAY_TASK_ID on $(hostname): $name"'
        echo '# As on a machine of its own: the grading'"'"'s mpirun must not take'
        echo '# its ranks for the allocation'"'"'s tasks (Open MPI reads SLURM_*).'
        echo 'for variable in $(compgen -e); do case $variable in SLURM_*) unset "$variable" ;; esac; done'
        echo 'start=$SECONDS'
        printf 'rm -f %q/"$name.log" %q/"$name.seconds"\n' "$out" "$out"
        printf 'scripts/grade.sh --submission "$dir" --out %q/"$name"' "$out"
        for option in "${options[@]}"; do printf ' %q' "$option"; done
        printf ' > %q/"$name.log" 2>&1\n' "$out"
        printf 'rm -f %q/"$name.seconds"; echo $((SECONDS - start)) > %q/"$name.seconds"\n' "$out" "$out"
    } > "$task"
    array=0-$((${#names[@]} - 1))
    ! $jobs_given || array+="%$jobs"
    read -r -a slurm_options <<< "${GRADE_SLURM_OPTIONS:-}"
    echo "grade-all: submitting ${#names[@]} grading(s) as a Slurm job array ($array), waiting for them"
    job=$(sbatch --wait --parsable --export=ALL --job-name=zz-grade-all --array="$array" \
        --ntasks=1 --cpus-per-task="${GRADE_SLURM_CPUS:-2}" \
        --output="$out/slurm-%A_%a.out" "${slurm_options[@]}" "$task")
    sbatch_status=$?
    # sbatch --wait gives the highest status of any task: a grading that
    # scored less than full marks is no failure of the array.
    echo "grade-all: job array ${job:-(not submitted)} ended (sbatch status $sbatch_status)"
fi

roster=$out/roster.csv
header="submission"
for lesson in $ZZ_LESSONS; do header+=",$lesson"; done
echo "$header,total,max,seconds" > "$roster"
for name in "${names[@]}"; do
    row="$name" scores=$out/$name/scores.txt
    [ -L "$out/$name" ] && scores=/dev/null
    for lesson in $ZZ_LESSONS; do
        points=$(awk -v l="$lesson" '$1 == l { print $2 }' "$scores" 2>/dev/null)
        row+=",${points:-0}"
    done
    total=$(awk '$1 == "total" { print $2 "," $3 }' "$scores" 2>/dev/null)
    echo "$row,${total:-0,?},$(cat "$out/$name.seconds" 2>/dev/null || echo '?')" >> "$roster"
    if [ ! -f "$out/$name.seconds" ]; then
        echo "  $name: not graded: its grading never ended$($slurm && echo " (its Slurm task's output: $out/slurm-*_*.out)")"
        continue
    fi
    echo "  $name: $(grep '^Score:' "$out/$name.log" || echo 'no score (see the log)')"
done
echo "graded ${#names[@]} submission(s): $roster"
