#!/usr/bin/env bash
# make student-release: a tarball of the repository for students, as
# committed (git archive HEAD), without what would give answers away or
# cannot run without them:
#   solutions/       the reference solutions
#   tests/fixtures/  broken submissions, each a solution with one bug
#   tests/hidden/    an instructor's hidden tests (see tests/hidden/README.md)
#   tests/texts/fixtures/  broken submissions that the texts quote, each a
#                    patch on a solution (so, lines of it)
#   .ci/             the toolkit's CI, which runs make test
# make test checks that what is left holds no answer (tests/check-release.sh).
# With --upto NN (make student-release UPTO=NN), the lessons after NN are
# left out too, with their tests, benchmarks and slides: a course that
# hands out one lesson at a time never ships a later lesson, whose given
# code could hold an earlier lesson's answer.
# Writes build/zero-to-zero-student.tar.gz (--out FILE: FILE). With
# --worktree, of the tracked files as they are now, not as committed (what
# the next commit would release: make test checks that one). Without
# solutions/, the Makefile has no solution build: make all, check, watch,
# progress, grade, demo, bench and plots work on the student's own files
# (build/student/), and make test and the other targets that need the
# solutions say so.
set -euo pipefail
cd "$(dirname "$0")/.."
upto="" tarball=build/zero-to-zero-student.tar.gz worktree=""
while [ $# -gt 0 ]; do
    case "$1" in
        --upto) upto=${2:-}
            if ! [[ $upto =~ ^[0-9]{1,2}$ ]] || ! compgen -G "lessons/$(printf '%02d' "$((10#$upto))")-*" >/dev/null; then
                echo "student-release: --upto needs a lesson's number (lessons: $(ls lessons | tr '\n' ' '))" >&2
                exit 2
            fi
            upto=$((10#$upto))
            shift ;;
        --out) tarball=${2:-}
            if [ -z "$tarball" ] || [ -d "$tarball" ]; then
                echo "student-release: --out needs the tarball's path, a file" >&2
                exit 2
            fi
            shift ;;
        --worktree) worktree=yes ;;
        *) echo "student-release: unknown argument '$1'" >&2
           echo "usage: scripts/student-release.sh [--upto NN] [--out FILE] [--worktree]" >&2
           exit 2 ;;
    esac
    shift
done
if ! git rev-parse --verify -q HEAD >/dev/null; then
    echo "student-release: needs a git checkout with at least one commit" >&2
    exit 2
fi
tree=HEAD
if [ -n "$worktree" ]; then
    # A commit of the tracked files as they are (none when nothing changed).
    tree=$(git stash create) || exit 2
    tree=${tree:-HEAD}
elif [ -n "$(git status --porcelain -- lessons common tests Makefile)" ]; then
    echo "student-release: note: uncommitted changes are not included (git archive takes HEAD)"
fi
mkdir -p "$(dirname "$tarball")"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
git archive --format=tar --prefix=zero-to-zero/ "$tree" | tar -x -C "$staging"
rm -rf "$staging/zero-to-zero/solutions" "$staging/zero-to-zero/tests/fixtures" \
       "$staging/zero-to-zero/tests/hidden" "$staging/zero-to-zero/tests/texts/fixtures" \
       "$staging/zero-to-zero/.ci"
later=()
if [ -n "$upto" ]; then
    for folder in "$staging"/zero-to-zero/lessons/*/; do
        lesson=$(basename "$folder")
        number=$((10#${lesson%%-*}))
        [ "$number" -gt "$upto" ] || continue
        later+=("$lesson")
        nn=${lesson%%-*}
        # The lesson and everything named after it.
        (cd "$staging/zero-to-zero" && rm -rf "lessons/$lesson" \
            "tests/test_$lesson.c" "tests/producer/$lesson".* \
            "tests/manifest/$lesson.txt" "tests/symbols/$lesson.txt" \
            bench/bench_"$nn".* slides/"$nn"-*)
    done
fi
# GitHub Classroom's autograding for the lessons it holds.
scripts/classroom.sh "$staging/zero-to-zero" > /dev/null || exit 2
tar -C "$staging" -czf "$tarball" zero-to-zero
echo "$tarball: $(tar -tzf "$tarball" | wc -l) entries, without solutions/, tests/fixtures/, tests/hidden/, tests/texts/fixtures/, .ci/${later[*]:+, lessons ${later[*]}}"
