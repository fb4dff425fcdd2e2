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
set -uo pipefail
cd "$(dirname "$0")/.."
usage() {
    echo "usage: scripts/grade-all.sh FOLDER [--jobs N] [--sandbox]" >&2
    exit 2
}
submissions=${1:-}
[ -n "$submissions" ] || usage
shift
jobs=1 options=()
while [ $# -gt 0 ]; do
    case "$1" in
        --jobs) jobs=${2:-}; shift ;;
        --sandbox) options+=(--sandbox) ;;
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
out=build/grade-all
mkdir -p "$out"

grade_one() {   # grade_one NAME FOLDER
    local start=$SECONDS
    scripts/grade.sh --submission "$2" --out "$out/$1" "${options[@]}" > "$out/$1.log" 2>&1
    echo $((SECONDS - start)) > "$out/$1.seconds"
}

names=()
running=0
for dir in "$submissions"/*/; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir")
    names+=("$name")
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
    grade_one "$name" "$dir" &
    running=$((running + 1))
done
wait

roster=$out/roster.csv
header="submission"
for lesson in $ZZ_LESSONS; do header+=",$lesson"; done
echo "$header,total,max,seconds" > "$roster"
for name in "${names[@]}"; do
    row="$name"
    for lesson in $ZZ_LESSONS; do
        points=$(awk -v l="$lesson" '$1 == l { print $2 }' "$out/$name/scores.txt" 2>/dev/null)
        row+=",${points:-0}"
    done
    total=$(awk '$1 == "total" { print $2 "," $3 }' "$out/$name/scores.txt" 2>/dev/null)
    echo "$row,${total:-0,?},$(cat "$out/$name.seconds" 2>/dev/null || echo '?')" >> "$roster"
    echo "  $name: $(grep '^Score:' "$out/$name.log" || echo 'no score (see the log)')"
done
echo "graded ${#names[@]} submission(s): $roster"
