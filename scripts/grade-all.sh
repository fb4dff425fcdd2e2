#!/usr/bin/env bash
# make grade-all SUBMISSIONS=DIR: grades every submission in DIR (one folder
# each, laid out like this repository: DIR/NAME/lessons/NN-*/...), one after
# another, each in its own output folder, and writes a roster:
#   build/grade-all/roster.csv        one row per submission, points per lesson
#   build/grade-all/NAME/             results.json, junit.xml, results.tap
#   build/grade-all/NAME.log          everything the grading printed
# One submission that fails to build, crashes or hangs costs only its own
# grade: the next one is graded as usual.
set -uo pipefail
cd "$(dirname "$0")/.."
submissions=${1:?usage: scripts/grade-all.sh FOLDER [--sandbox]}
shift
if [ ! -d "$submissions" ]; then
    echo "grade-all: '$submissions' is not a folder" >&2
    exit 2
fi
out=build/grade-all
mkdir -p "$out"
roster=$out/roster.csv
header="submission"
for lesson in $ZZ_LESSONS; do header+=",$lesson"; done
echo "$header,total,max,seconds" > "$roster"

count=0
for dir in "$submissions"/*/; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir")
    start=$SECONDS
    scripts/grade.sh --submission "$dir" --out "$out/$name" "$@" > "$out/$name.log" 2>&1
    row="$name"
    for lesson in $ZZ_LESSONS; do
        points=$(awk -v l="$lesson" '$1 == l { print $2 }' "$out/$name/scores.txt" 2>/dev/null)
        row+=",${points:-0}"
    done
    total=$(awk '$1 == "total" { print $2 "," $3 }' "$out/$name/scores.txt" 2>/dev/null)
    echo "$row,${total:-0,?},$((SECONDS - start))" >> "$roster"
    echo "  $name: $(grep '^Score:' "$out/$name.log" || echo 'no score (see the log)')"
    count=$((count + 1))
done
echo "graded $count submission(s): $roster"
