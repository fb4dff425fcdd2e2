#!/usr/bin/env bash
# A student release holds no answer to a lesson (make test runs this; it
# takes a second or two).
#
#   tests/check-release.sh [--tally FILE]
#
# Makes the release of the tracked files as they are now
# (scripts/student-release.sh --worktree, into a folder of its own) and
# refuses:
#   1. a path the release must leave out: solutions/, tests/fixtures/,
#      tests/hidden/, tests/texts/fixtures/, .ci/, and any patch (*.patch,
#      *.diff: a broken submission is a patch on a solution, so holds lines
#      of it);
#   2. a file holding two lines in a row (blank lines between them aside)
#      of one lesson's answer. An answer line is a line of
#      solutions/LESSON/FILE between its "TODO N start" and "TODO N end"
#      markers, of 12 characters or more besides spaces, that no file the
#      lesson gives (lessons/LESSON/) holds too; lines compare with their
#      runs of spaces as one, and a line of a patch without its leading
#      "+" or "-".
# Two kinds of file may hold an earlier lesson's answer, on purpose: the
# files of a later lesson (its folder, tests, benchmark and slides, which
# make student-release UPTO=NN leaves out for a course that hands lessons
# out one at a time), and the C code of the shared library and the tests
# (common/, tests/), which later lessons link and run: block_range is
# lesson 02's TODO 1, the kernels lesson 01's, MPI's start lesson 00's.
# Then it proves it can refuse: it plants two lines of an answer in a text
# and a patch under tests/fixtures/ in the unpacked release, and each must
# be refused.
# Prints a [pass] or [FAIL] line for each; exit status 0 when all pass, 1
# when one fails, 2 on bad usage; --tally appends "P F S release" to FILE.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
tally=""
case "${1:-}" in
    "") ;;
    --tally) tally=${2:?usage: tests/check-release.sh [--tally FILE]} ;;
    *) echo "usage: tests/check-release.sh [--tally FILE]" >&2; exit 2 ;;
esac
echo "== the student release holds no answer (tests/check-release.sh)"
if ! command -v python3 >/dev/null 2>&1; then
    echo "  [skip] the student release: python3 is not installed"
    [ -z "$tally" ] || echo "0 0 1 release" >> "$tally"
    exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/zz-release-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
if ! scripts/student-release.sh --worktree --out "$work/release.tar.gz" > "$work/log" 2>&1 ||
   ! tar -xzf "$work/release.tar.gz" -C "$work"; then
    echo "  [FAIL] make student-release did not make a release:"
    sed 's/^/    | /' "$work/log"
    [ -z "$tally" ] || echo "0 1 0 release" >> "$tally"
    exit 1
fi
python3 - "$work/zero-to-zero" "$tally" <<'PYTHON'
import glob
import os
import re
import sys

RELEASE, TALLY = sys.argv[1], sys.argv[2]
LEFT_OUT = ("solutions/", "tests/fixtures/", "tests/hidden/", "tests/texts/fixtures/", ".ci/")
PATCHES = (".patch", ".diff")
SHORTEST = 12      # characters besides spaces
START = re.compile(r"\bTODO\s+\d+\s+start\b")
END = re.compile(r"\bTODO\s+\d+\s+end\b")


def normal(line):
    return " ".join(line.split())


def read_lines(path):
    """A text file's lines, or None for a binary one."""
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace").split("\n")


def answers():
    """{normal line: {lesson: "solutions/LESSON/FILE:LINE"}} of every
    lesson's answer lines (the header says which)."""
    found = {}
    for path in sorted(glob.glob("solutions/*/*")):
        lesson = path.split("/")[1]
        given = set()
        for name in glob.glob(f"lessons/{lesson}/*"):
            if os.path.isfile(name):
                given |= {normal(l) for l in read_lines(name) or []}
        depth = 0
        for number, line in enumerate(read_lines(path) or [], 1):
            if START.search(line):
                depth += 1
            elif END.search(line):
                depth -= 1
            else:
                text = normal(line)
                if depth > 0 and len(text.replace(" ", "")) >= SHORTEST and text not in given:
                    found.setdefault(text, {}).setdefault(lesson, f"{path}:{number}")
    return found


def may_hold(relative, lesson):
    """Whether a release file may hold an answer of `lesson` (the header
    says why)."""
    later = re.match(r"(?:lessons/|slides/|bench/bench_|tests/test_|tests/producer/|"
                     r"tests/manifest/|tests/symbols/)(\d\d)", relative)
    if later and int(later.group(1)) > int(lesson[:2]):
        return True
    return (relative.startswith(("common/", "tests/"))
            and relative.endswith((".c", ".h", ".cu", ".cuh")))


def problems_in(tree, known):
    paths, held = [], []
    files = 0
    for top, folders, names in os.walk(tree):
        folders.sort()
        for name in sorted(names):
            path = os.path.join(top, name)
            relative = os.path.relpath(path, tree)
            files += 1
            if relative.startswith(LEFT_OUT) or relative.endswith(PATCHES):
                paths.append(relative)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            lines = read_lines(path)
            if lines is None:
                continue
            run = {}      # lesson: [(line number, where in the solution)]
            for number, line in enumerate(lines + [" end "], 1):
                text = normal(line)
                if text[:1] in "+-" and text[:2] not in ("++", "--"):
                    text = normal(text[1:])
                if not text:
                    continue
                here = {lesson: where for lesson, where in known.get(text, {}).items()
                        if not may_hold(relative, lesson)}
                for lesson in list(run):
                    if lesson not in here:
                        if len(run[lesson]) >= 2:
                            held.append((relative, lesson, run[lesson]))
                        del run[lesson]
                for lesson, where in here.items():
                    run.setdefault(lesson, []).append((number, where))
    return files, paths, held


def report(files, paths, held, known):
    problems = []
    for path in paths:
        problems.append(f"{path}: a student release leaves this out (scripts/student-release.sh)")
    for path, lesson, run in held:
        problems.append(f"{path}:{run[0][0]}-{run[-1][0]}: {len(run)} lines of lesson {lesson}'s "
                        f"answer ({', '.join(where for _, where in run[:3])}"
                        f"{', ...' if len(run) > 3 else ''})")
    return problems


known = answers()
results = []
files, paths, held = problems_in(RELEASE, known)
problems = report(files, paths, held, known)
lessons = len({lesson for places in known.values() for lesson in places})
if problems:
    results.append(False)
    print(f"  [FAIL] the student release holds what it must not ({len(problems)}):")
    for problem in problems:
        print(f"         {problem}")
else:
    results.append(True)
    print(f"  [pass] the student release ({files} files) holds no path it leaves out and no "
          f"two lines in a row of an answer ({len(known)} answer lines of {lessons} lessons)")

# The check can fail: two answer lines in a row planted in a text, and a
# patch where the release leaves fixtures out.
by_lesson = {}
for text, places in known.items():
    for lesson, where in places.items():
        by_lesson.setdefault(lesson, []).append((where, text))
lesson = sorted(by_lesson)[min(1, len(by_lesson) - 1)] if by_lesson else None
if lesson is None:
    results.append(False)
    print("  [FAIL] no answer line found in solutions/: the check could not refuse anything")
else:
    ordered = sorted(by_lesson[lesson], key=lambda item: (item[0].rsplit(":", 1)[0],
                                                          int(item[0].rsplit(":", 1)[1])))
    planted_text = os.path.join(RELEASE, "docs", "planted-answer.md")
    planted_patch = os.path.join(RELEASE, "tests", "fixtures", "planted", "answer.c.patch")
    os.makedirs(os.path.dirname(planted_text), exist_ok=True)
    os.makedirs(os.path.dirname(planted_patch), exist_ok=True)
    with open(planted_text, "w") as f:
        f.write("A note that quotes an answer:\n\n```c\n    " + ordered[0][1] + "\n\n  "
                + ordered[1][1] + "\n```\n")
    with open(planted_patch, "w") as f:
        f.write("--- a/answer.c\n+++ b/answer.c\n")
    _, paths, held = problems_in(RELEASE, known)
    caught_text = any(path == "docs/planted-answer.md" and held_lesson == lesson
                      for path, held_lesson, _ in held)
    caught_patch = "tests/fixtures/planted/answer.c.patch" in paths
    results += [caught_text, caught_patch]
    print(f"  [{'pass' if caught_text else 'FAIL'}] two lines of lesson {lesson}'s answer "
          f"({ordered[0][0]}, {ordered[1][0]}) planted in docs/planted-answer.md: "
          f"{'refused' if caught_text else 'NOT refused'}")
    print(f"  [{'pass' if caught_patch else 'FAIL'}] a patch planted in tests/fixtures/: "
          f"{'refused' if caught_patch else 'NOT refused'}")
if TALLY:
    with open(TALLY, "a") as f:
        f.write(f"{results.count(True)} {results.count(False)} 0 release\n")
sys.exit(0 if all(results) else 1)
PYTHON
