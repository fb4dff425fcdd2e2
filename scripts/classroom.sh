#!/usr/bin/env bash
# GitHub Classroom's autograding, one test per lesson:
#   scripts/classroom.sh [FOLDER]     (make classroom: this checkout)
# writes FOLDER/.github/workflows/classroom.yml, a workflow of GitHub's
# autograding actions (classroom-resources/autograding-command-grader for
# each lesson, then autograding-grading-reporter, which sends the points to
# Classroom), and FOLDER/.github/classroom/autograding.json, the same tests
# in the form Classroom's assignment page reads. A student release carries
# both (scripts/student-release.sh), for its own lessons.
#
# Each lesson's test is `make grade L=NN`: its score is full (exit status
# 0) or not, so the lesson's points, the manifest's total, come in whole
# once every test of it passes; a finished lesson counts before the course
# is. Its time limit, in minutes: make grade's wall-clock limit of a lesson
# (GRADE_WALL_SECONDS, 600 s) for each of its passes (plain, AddressSanitizer
# and UBSan, and ThreadSanitizer where the lesson's code runs threads), and
# 10 minutes for the builds. The CUDA lessons are left out: GitHub's runners
# have no GPU, and a lesson whose tests are all skipped scores 0 of 0, which
# make grade calls full.
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.}
[ -d "$dest/lessons" ] || { echo "classroom: $dest has no lessons/" >&2; exit 2; }
wall=${GRADE_WALL_SECONDS:-600}

ids=() names=() commands=() minutes=() points=() skipped=()
for mk in "$dest"/lessons/*/lesson.mk; do
    lesson=$(basename "$(dirname "$mk")")
    number=${lesson%%-*}
    if grep -q '^$(LESSON)_CUDA *:= *[^ ]' "$mk"; then
        skipped+=("$lesson")
        continue
    fi
    # The lesson's points as make grade counts them there: its manifest's,
    # and its hidden tests' where the folder has them (a release has none).
    manifests=("$dest/tests/manifest/$lesson.txt")
    [ -f "$dest/tests/hidden/manifest/$lesson.txt" ] &&
        manifests+=("$dest/tests/hidden/manifest/$lesson.txt")
    total=$(awk -F'|' '!/^#/ && NF > 2 { points += $1 } END { print points + 0 }' "${manifests[@]}") || exit 2
    passes=2
    grep -q '^$(LESSON)_TSAN *:= *yes' "$mk" && passes=3
    title=$(sed -n 's/^$(LESSON)_TITLE *:= *//p' "$mk")
    ids+=("lesson-$number")
    names+=("lesson ${title:-$lesson}")
    commands+=("make grade L=$number")
    minutes+=($(( (wall * passes + 599) / 60 + 10 )))
    points+=("$total")
done
[ ${#ids[@]} -gt 0 ] || { echo "classroom: no lesson to grade in $dest/lessons" >&2; exit 2; }

mkdir -p "$dest/.github/workflows" "$dest/.github/classroom" || exit 2
workflow=$dest/.github/workflows/classroom.yml
{
    echo "# GitHub Classroom's autograding: one test per lesson, \`make grade L=NN\`,"
    echo "# worth the lesson's points once all of its tests pass. Made by make"
    echo "# classroom (scripts/classroom.sh), from the lessons' manifests.${skipped[*]:+ Left out:}"
    [ ${#skipped[@]} -eq 0 ] || echo "# ${skipped[*]} (CUDA: the runners have no GPU; grade it on a machine with one)."
    echo "name: Autograding Tests"
    echo "'on':"
    echo "- push"
    echo "- repository_dispatch"
    echo "permissions:"
    echo "  checks: write"
    echo "  actions: read"
    echo "  contents: read"
    echo "jobs:"
    echo "  run-autograding-tests:"
    echo "    runs-on: ubuntu-latest"
    echo "    if: github.actor != 'github-classroom[bot]'"
    echo "    steps:"
    echo "    - name: Checkout code"
    echo "      uses: actions/checkout@v4"
    echo "    - name: Install what the toolkit needs"
    echo "      run: sudo scripts/install-deps.sh"
    for k in "${!ids[@]}"; do
        echo "    - name: ${names[k]}"
        echo "      id: ${ids[k]}"
        echo "      uses: classroom-resources/autograding-command-grader@v1"
        echo "      with:"
        echo "        test-name: ${names[k]}"
        echo "        command: ${commands[k]}"
        echo "        timeout: ${minutes[k]}"
        echo "        max-score: ${points[k]}"
    done
    echo "    - name: Autograding Reporter"
    echo "      uses: classroom-resources/autograding-grading-reporter@v1"
    echo "      env:"
    for k in "${!ids[@]}"; do
        upper=$(printf '%s' "${ids[k]}" | tr '[:lower:]' '[:upper:]')
        echo "        ${upper}_RESULTS: \"\${{steps.${ids[k]}.outputs.result}}\""
    done
    echo "      with:"
    echo "        runners: $(IFS=,; echo "${ids[*]}")"
} > "$workflow" || exit 2

json=$dest/.github/classroom/autograding.json
{
    echo "{"
    echo "  \"tests\": ["
    for k in "${!ids[@]}"; do
        echo "    {"
        echo "      \"name\": \"${names[k]}\","
        echo "      \"setup\": \"sudo scripts/install-deps.sh\","
        echo "      \"run\": \"${commands[k]}\","
        echo "      \"input\": \"\","
        echo "      \"output\": \"\","
        echo "      \"comparison\": \"included\","
        echo "      \"timeout\": ${minutes[k]},"
        echo "      \"points\": ${points[k]}"
        echo "    }$( [ "$k" -eq $((${#ids[@]} - 1)) ] || echo ,)"
    done
    echo "  ]"
    echo "}"
} > "$json" || exit 2
echo "classroom: $workflow and $json: ${#ids[@]} lessons, $(IFS=+; echo $(( ${points[*]} ))) points${skipped[*]:+ (left out: ${skipped[*]}, CUDA)}"
