#!/usr/bin/env bash
# make gradescope-zip [L=NN]: the autograder to upload to Gradescope, as
#   scripts/gradescope-zip.sh [LESSON]     (LESSON: 01-serial-matvec, ...)
# writes build/gradescope-autograder.zip (every lesson), or with a lesson
# build/gradescope-autograder-NN.zip, whose run_autograder grades that
# lesson alone (one assignment per lesson; GRADE_LESSON in Gradescope's
# environment still overrides it). The zip holds the repository as
# committed, in zero-to-zero/, with setup.sh and run_autograder from
# scripts/gradescope/ at its top. A change not committed (a hidden test
# written and not added, say) would be left out silently: the zip is
# refused until the tree is clean.
set -uo pipefail
cd "$(dirname "$0")/.."
lesson=${1:-}
if [ -n "$lesson" ] && [ ! -d "lessons/$lesson" ]; then
    echo "gradescope-zip: there is no lesson '$lesson'" >&2
    exit 2
fi
if ! git rev-parse --verify --quiet HEAD > /dev/null; then
    echo "gradescope-zip: the zip is made from git's committed tree, and this is no git checkout with a commit" >&2
    exit 2
fi
changes=$(git status --porcelain --untracked-files=normal)
if [ -n "$changes" ]; then
    count=$(printf '%s\n' "$changes" | wc -l | tr -d ' ')
    first=$(printf '%s\n' "$changes" | head -1 | cut -c4-)
    echo "gradescope-zip: the tree has $count change$( [ "$count" -eq 1 ] || echo s) not committed (the first: $first; git status lists all), which the zip, made from the committed tree, would leave out: commit them (a hidden test too) or stash them first" >&2
    exit 2
fi
number=${lesson%%-*}
folder=build/gradescope/${number:-all}
zip=build/gradescope-autograder${number:+-$number}.zip
rm -rf "$folder"
mkdir -p "$folder" || exit 2
# run_autograder with this lesson as its default.
sed "s/^lesson=\${GRADE_LESSON:-}\$/lesson=\${GRADE_LESSON:-$lesson}/" \
    scripts/gradescope/run_autograder > "$folder/run_autograder" || exit 2
if [ -n "$lesson" ] && ! grep -q "^lesson=\${GRADE_LESSON:-$lesson}\$" "$folder/run_autograder"; then
    echo "gradescope-zip: scripts/gradescope/run_autograder has no line lesson=\${GRADE_LESSON:-} to set the lesson in" >&2
    exit 2
fi
chmod +x "$folder/run_autograder"
git archive --format=zip --add-file=scripts/gradescope/setup.sh \
    --add-file="$folder/run_autograder" --prefix=zero-to-zero/ HEAD -o "$zip" || exit 2
rm -rf "$folder"
echo "$zip: upload it as the autograder (docs/instructors.md)${lesson:+; it grades lesson $lesson alone}"
