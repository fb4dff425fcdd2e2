#!/usr/bin/env bash
# The roster of make grade-all for one submission, alice, that scores full
# marks where no GPU is: its header as scripts/grade-all.sh writes it, and
# alice's row from the manifests (tests/manifest/, and tests/hidden/manifest/
# where this copy has hidden tests): each lesson's points, lesson 04's CUDA
# tests skipped and left out of total and max ("excluded if skipped"), and
# the seconds her grading took (a measurement: "?" here). make test grades
# the solutions to these points ("the solutions, graded: full marks"). For
# tests/check-texts.sh, which checks docs/instructors.md's roster with it.
set -euo pipefail
cd "$(dirname "$0")/../.."
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/scripts" "$d/empty"
cp scripts/grade-all.sh "$d/scripts/"
lessons=$(for mk in lessons/*/lesson.mk; do basename "$(dirname "$mk")"; done)
(cd "$d" && ZZ_LESSONS=$(echo $lessons) scripts/grade-all.sh empty > /dev/null)
head -1 "$d/build/grade-all/roster.csv"
row=alice total=0
for lesson in $lessons; do
    points=$(cat "tests/manifest/$lesson.txt" $(ls "tests/hidden/manifest/$lesson.txt" 2>/dev/null) |
        awk -F'|' '!/^#/ && NF > 2 { sum += $1 } END { print sum + 0 }')
    grep -q '^$(LESSON)_CUDA *:= *[^ ]' "lessons/$lesson/lesson.mk" && points=0
    row+=",$points"
    total=$((total + points))
done
echo "$row,$total,$total,?"
