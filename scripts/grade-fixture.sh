#!/usr/bin/env bash
# Grades one broken submission (tests/fixtures/LESSON/NAME) as make grade
# grades a student's, and checks its expectations:
#   scripts/grade-fixture.sh tests/fixtures/LESSON/NAME [--tally FILE]
# expected.txt holds what grading without the sandbox must give, and
# expected-sandbox.txt (if there is one) what grading with SANDBOX=1 must
# give; at least one of them must be there. Each may say more about how to
# grade, in lines "graded: ...":
#   graded: GRADE_SYMBOL_CHECK=0   without the checks on the files (to prove
#                                  that another defence stops the attack)
#   graded: lessons L1 L2          these lessons (else the folder's lesson)
# Run it through make (make grade-fixture F=...), or from tests/run-all.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
folder=${1:?usage: scripts/grade-fixture.sh tests/fixtures/LESSON/NAME [--tally FILE]}
folder=${folder%/}
shift
lesson_of_folder=$(basename "$(dirname "$folder")")
status=0 graded=0
for expect in "$folder/expected.txt" "$folder/expected-sandbox.txt"; do
    [ -f "$expect" ] || continue
    # A CUDA lesson's fixture has two sets of expectations: expected.txt
    # where its tests are skipped (no GPU), expected-gpu.txt where they run.
    if [ "$expect" = "$folder/expected.txt" ] && [ -e "$folder/expected-gpu.txt" ] &&
            command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
        expect=$folder/expected-gpu.txt
    fi
    lessons=$lesson_of_folder options=() settings=()
    [[ $expect == *-sandbox.txt ]] && options+=(--sandbox)
    while read -r _ word rest; do
        case "$word" in
            *=*) settings+=("$word") ;;
            lessons) lessons=$rest ;;
        esac
    done < <(grep '^graded:' "$expect")
    out=build/test/fixtures/$lesson_of_folder/$(basename "$folder")${options:+-sandbox}
    mkdir -p "$out"
    env "${settings[@]}" scripts/grade.sh --lesson "$lessons" --overlay "$folder" \
        --out "$out" --expect "$expect" "${options[@]}" "$@" || status=1
    graded=$((graded + 1))
done
if [ "$graded" -eq 0 ]; then
    echo "grade-fixture: $folder has neither expected.txt nor expected-sandbox.txt" >&2
    exit 2
fi
exit $status
