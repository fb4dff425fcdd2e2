#!/usr/bin/env bash
# Grades one broken submission (tests/fixtures/LESSON/NAME) as make grade
# grades a student's, and checks its expected.txt:
#   scripts/grade-fixture.sh tests/fixtures/LESSON/NAME [--tally FILE]
# expected.txt may say how to grade it, in lines "graded: ...":
#   graded: --sandbox              with SANDBOX=1
#   graded: GRADE_SYMBOL_CHECK=0   without the checks on the files (to prove
#                                  that another defence stops the attack)
#   graded: lessons L1 L2          these lessons (else the folder's lesson)
# Run it through make (make grade-fixture F=...), or from tests/run-all.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
folder=${1:?usage: scripts/grade-fixture.sh tests/fixtures/LESSON/NAME [--tally FILE]}
folder=${folder%/}
shift
expect=$folder/expected.txt
# A CUDA lesson's fixture has two sets of expectations: expected.txt where
# its tests are skipped (no GPU), expected-gpu.txt where they run.
if [ -e "$folder/expected-gpu.txt" ] && command -v nvidia-smi >/dev/null 2>&1 &&
        nvidia-smi -L 2>/dev/null | grep -q GPU; then
    expect=$folder/expected-gpu.txt
fi
if [ ! -f "$expect" ]; then
    echo "grade-fixture: $expect does not exist" >&2
    exit 2
fi
lesson=$(basename "$(dirname "$folder")")
options=() settings=()
while read -r _ word rest; do
    case "$word" in
        --sandbox) options+=(--sandbox) ;;
        *=*) settings+=("$word") ;;
        lessons) lesson=$rest ;;
    esac
done < <(grep '^graded:' "$expect")
out=build/test/fixtures/$(basename "$(dirname "$folder")")/$(basename "$folder")
mkdir -p "$out"
exec env "${settings[@]}" scripts/grade.sh --lesson "$lesson" --overlay "$folder" \
    --out "$out" --expect "$expect" "${options[@]}" "$@"
