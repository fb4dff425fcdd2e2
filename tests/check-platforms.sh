#!/usr/bin/env bash
# What the toolkit hands the grading platforms, checked as they read it:
#
#   tests/check-platforms.sh [--full] [--tally FILE]
#
# make test (quick, a few seconds):
#   1. GitHub Classroom: a student release (of the tracked files as they
#      are now) carries .github/classroom/autograding.json and
#      .github/workflows/classroom.yml (scripts/classroom.sh): every field
#      the autograding actions document and no other, one test per lesson
#      that is not a CUDA one, each `make grade L=NN` worth the lesson's
#      points as its manifest counts them (read here from the manifests),
#      and the reporter fed every grader's result;
#   2. Gradescope: make gradescope-zip L=01 (in a clone of HEAD) holds
#      setup.sh and a run_autograder that grades lesson 01 alone at the
#      zip's top, and the repository in zero-to-zero/; the same with a
#      file not committed is refused, status 2, saying so.
# make test-full (--full, minutes):
#   3. every command of autograding.json run in the release, once with the
#      solutions in its lessons/ (status 0, full points) and once as
#      released (a status other than 0, no point);
#   4. the lesson-01 zip set up and run as Gradescope does
#      (AUTOGRADER_ROOT stands in for /autograder): the solution's two files
#      uploaded flat score full marks, the skeleton's none, each test with
#      a status.
# Prints a [pass] or [FAIL] line for each; exit status 0 when all pass.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD
full=false tally=""
while [ $# -gt 0 ]; do
    case "$1" in
        --full) full=true ;;
        --tally) tally=${2:?usage: tests/check-platforms.sh [--full] [--tally FILE]}; shift ;;
        *) echo "usage: tests/check-platforms.sh [--full] [--tally FILE]" >&2; exit 2 ;;
    esac
    shift
done
echo "== what Classroom and Gradescope read (tests/check-platforms.sh$($full && echo " --full"))"
. tests/say.sh
say_to "$tally" platforms
finish() {
    exit $say_failed
}
if ! command -v python3 > /dev/null 2>&1; then
    say skip "Classroom and Gradescope: python3 is not installed"
    finish
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/zz-platforms-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

# ---- 1. GitHub Classroom ------------------------------------------------
release=$work/release/zero-to-zero
mkdir -p "$work/release"
if scripts/student-release.sh --worktree --out "$work/release.tar.gz" > "$work/release.log" 2>&1 &&
   tar -xzf "$work/release.tar.gz" -C "$work/release"; then
    if python3 - "$release" > "$work/classroom.log" 2>&1 <<'PYTHON'
import glob, json, os, re, sys
top = sys.argv[1]
tests = json.load(open(f"{top}/.github/classroom/autograding.json"))["tests"]
# The lessons and their points, from the release's own files.
expected = []
for mk in sorted(glob.glob(f"{top}/lessons/*/lesson.mk")):
    lesson = os.path.basename(os.path.dirname(mk))
    if re.search(r"^\$\(LESSON\)_CUDA *:= *\S", open(mk).read(), re.M):
        continue
    points = 0
    for line in open(f"{top}/tests/manifest/{lesson}.txt"):
        fields = line.split("|")
        if not line.startswith("#") and len(fields) > 2:
            points += int(fields[0])
    expected.append((lesson[:2], points))
assert expected, "no lesson"
# Classroom's assignment page: these fields, no others.
fields = {"name", "setup", "run", "input", "output", "comparison", "timeout",
          "points"}
assert len(tests) == len(expected), f"{len(tests)} tests for {len(expected)} lessons"
for test, (number, points) in zip(tests, expected):
    assert set(test) == fields, f"{test.get('name')}: fields {sorted(test)}"
    assert test["run"] == f"make grade L={number}", test
    assert test["points"] == points, f"{test['name']}: {test['points']} points, the manifest says {points}"
    assert test["comparison"] in ("included", "exact", "regex"), test
    assert isinstance(test["timeout"], int) and 1 <= test["timeout"] <= 360, test
# The workflow: each grader step with the command grader's inputs only,
# then the reporter with every grader's result and the list of them.
text = open(f"{top}/.github/workflows/classroom.yml").read()
steps = re.split(r"^    - ", text, flags=re.M)[1:]
graders, reporter = [], None
for step in steps:
    uses = re.search(r"^ *uses: (\S+)", step, re.M)
    if uses and uses.group(1) == "classroom-resources/autograding-command-grader@v1":
        ident = re.search(r"^ *id: (\S+)$", step, re.M).group(1)
        inputs = dict(re.findall(r"^        ([a-z-]+): (.*)$", step, re.M))
        assert set(inputs) <= {"test-name", "setup-command", "command",
                               "timeout", "max-score"}, inputs
        assert {"test-name", "command"} <= set(inputs), inputs
        graders.append((ident, inputs))
    elif uses and uses.group(1) == "classroom-resources/autograding-grading-reporter@v1":
        reporter = step
assert reporter is not None, "no reporter step"
assert len(graders) == len(tests), "the workflow and autograding.json differ"
for (ident, inputs), test in zip(graders, tests):
    assert inputs["command"] == test["run"] and int(inputs["max-score"]) == test["points"] \
        and int(inputs["timeout"]) == test["timeout"] and inputs["test-name"] == test["name"], (ident, inputs, test)
    env = f'{ident.upper()}_RESULTS: "${{{{steps.{ident}.outputs.result}}}}"'
    assert env in reporter, f"the reporter lacks {env}"
runners = re.search(r"^        runners: (\S+)$", reporter, re.M).group(1)
assert runners.split(",") == [ident for ident, _ in graders], runners
print(f"{len(tests)} lessons, {sum(t['points'] for t in tests)} points")
PYTHON
    then
        say yes "GitHub Classroom: the release's autograding.json and classroom.yml: $(tail -1 "$work/classroom.log"), each field as the autograding actions document it"
    else
        say no "GitHub Classroom: the release's autograding files" "$work/classroom.log"
    fi
else
    say no "GitHub Classroom: make student-release did not make a release" "$work/release.log"
fi

# ---- 2. Gradescope's zip ------------------------------------------------
clone=$work/clone
if git clone --quiet --depth 1 "file://$root" "$clone" > "$work/clone.log" 2>&1 &&
   (cd "$clone" && scripts/gradescope-zip.sh 01-serial-matvec) > "$work/zip.log" 2>&1; then
    if python3 - "$clone/build/gradescope-autograder-01.zip" > "$work/zip-check.log" 2>&1 <<'PYTHON'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for name in ("setup.sh", "run_autograder", "zero-to-zero/Makefile",
             "zero-to-zero/lessons/01-serial-matvec/matvec.c"):
    assert name in names, f"{name} is not in the zip"
script = zipfile.ZipFile(sys.argv[1]).read("run_autograder").decode()
assert "lesson=${GRADE_LESSON:-01-serial-matvec}\n" in script, "run_autograder does not grade lesson 01"
print(f"{len(names)} entries")
PYTHON
    then
        say yes "Gradescope: make gradescope-zip L=01: $(tail -1 "$work/zip-check.log"), setup.sh and a run_autograder of lesson 01 at the top"
    else
        say no "Gradescope: make gradescope-zip L=01's zip" "$work/zip-check.log"
    fi
    echo "a hidden test, written and not committed" > "$clone/tests/hidden/not-committed.c"
    (cd "$clone" && scripts/gradescope-zip.sh 01-serial-matvec) > "$work/dirty.log" 2>&1
    code=$?
    if [ $code -eq 2 ] && grep -q "the tree has 1 change not committed (the first: tests/hidden/not-committed.c; git status lists all)" "$work/dirty.log"; then
        say yes "Gradescope: a file not committed is refused, status 2: $(head -c 120 "$work/dirty.log")..."
    else
        echo "(exit status $code)" >> "$work/dirty.log"
        say no "Gradescope: a file not committed should be refused" "$work/dirty.log"
    fi
    rm -f "$clone/tests/hidden/not-committed.c"
else
    cat "$work/clone.log" "$work/zip.log" > "$work/zip-all.log" 2>/dev/null
    say no "Gradescope: make gradescope-zip L=01 failed" "$work/zip-all.log"
fi

$full || finish

# ---- 3. Classroom's commands, on the solutions and the skeletons ---------
# The score line of make grade, and what the test promised.
score_of() { sed -n 's/^Score: \([0-9.]*\/[0-9.]*\)$/\1/p' "$1" | tail -1; }
if [ -f "$release/.github/classroom/autograding.json" ]; then
    solved=$work/solved/zero-to-zero
    mkdir -p "$work/solved"
    cp -R "$release" "$solved" && cp -R solutions/. "$solved/lessons/"
    python3 -c 'import json, sys
for t in json.load(open(sys.argv[1]))["tests"]:
    print(t["points"], t["run"])' "$release/.github/classroom/autograding.json" > "$work/commands"
    while read -r points command; do
        for tree in "$solved" "$release"; do
            log=$work/command.log
            (cd "$tree" && GRADE_SANITIZERS=${GRADE_SANITIZERS:-1} bash -c "$command") < /dev/null > "$log" 2>&1
            code=$?
            score=$(score_of "$log")
            # The command grader awards the points on status 0 alone.
            if [ "$tree" = "$solved" ]; then
                want="0 $points/$points" what="the solutions"
            else
                want="failed 0/$points" what="the skeletons"
                [ "$code" -eq 0 ] || code=failed
            fi
            if [ "$code $score" = "$want" ]; then
                say yes "Classroom's $command on $what: $([ "$code" = 0 ] && echo "status 0" || echo "a failing status"), $score"
            else
                echo "(exit status $code, score ${score:-none}; expected ${want})" >> "$log"
                say no "Classroom's $command on $what" "$log"
            fi
        done
    done < "$work/commands"
fi

# ---- 4. Gradescope, set up and run as it does ----------------------------
zip=$clone/build/gradescope-autograder-01.zip
if [ -f "$zip" ]; then
    scope=$work/autograder
    mkdir -p "$scope/source" "$scope/submission"
    # As unzip does: each file with the mode the zip keeps for it.
    python3 -c 'import os, sys, zipfile
archive = zipfile.ZipFile(sys.argv[1])
for info in archive.infolist():
    path = archive.extract(info, sys.argv[2])
    mode = info.external_attr >> 16
    if mode and not info.is_dir():
        os.chmod(path, mode & 0o777)' "$zip" "$scope/source"
    if AUTOGRADER_ROOT=$scope bash "$scope/source/setup.sh" > "$work/setup.log" 2>&1; then
        for which in solution skeleton; do
            rm -rf "$scope/submission" "$scope/results"
            mkdir -p "$scope/submission"
            for file in $(make -s --no-print-directory print-edited | tr ' ' '\n' | grep '^01-'); do
                if [ "$which" = solution ]; then
                    cp "solutions/$file" "$scope/submission/"
                else
                    cp "lessons/$file" "$scope/submission/"
                fi
            done
            AUTOGRADER_ROOT=$scope bash "$scope/source/run_autograder" > "$work/run.log" 2>&1
            if python3 - "$scope/results/results.json" "$which" > "$work/results-check.log" 2>&1 <<'PYTHON'
import json, sys
results = json.load(open(sys.argv[1]))
tests = results["tests"]
top = sum(t["max_score"] for t in tests)
assert tests and all(t["name"].startswith("01: ") or t["name"].startswith("[skipped] 01: ") for t in tests), "not lesson 01 alone"
assert all(t.get("status") in ("passed", "failed") for t in tests), "a test without a status"
want = top if sys.argv[2] == "solution" else 0
assert results["score"] == want, f"score {results['score']} of {top}, expected {want}"
print(f"{results['score']:g}/{top:g}")
PYTHON
            then
                say yes "Gradescope, the lesson-01 zip set up and run as Gradescope does, the $which's files uploaded flat: $(tail -1 "$work/results-check.log")"
            else
                cat "$work/run.log" >> "$work/results-check.log"
                say no "Gradescope, the lesson-01 zip, the $which's files" "$work/results-check.log"
            fi
        done
    else
        say no "Gradescope: the zip's setup.sh failed" "$work/setup.log"
    fi
fi
finish
