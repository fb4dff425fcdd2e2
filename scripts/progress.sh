#!/usr/bin/env bash
# make progress: where a student stands, in seconds, from the results that
# make check and make grade last wrote (build/check/, build/grade/work/):
# one line per lesson and TODO (done, failing, not started, skipped), and
# what to do next. A lesson that neither has checked says so; nothing is
# built or run here.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ZZ_LESSONS:-}" ]; then
    echo "progress: run me through make: make progress" >&2
    exit 2
fi
work=build/progress/work
rm -rf "$work"
mkdir -p "$work" || exit 2
for lesson in $ZZ_LESSONS; do
    if [[ " ${ZZ_UNBUILT:-} " == *" $lesson "* ]]; then
        grep '^[^#].*|.*|' "tests/manifest/$lesson.txt" |
            awk -F'|' -v why="${ZZ_UNBUILT_REASON:-not built here}" '
                { name = $3; gsub(/^ +| +$/, "", name); print "skip\t" name "\t" why }' \
            > "$work/$lesson.results"
        continue
    fi
    # The newer of the two places that know about this lesson.
    newest=""
    for candidate in build/check/$lesson build/grade/work/$lesson; do
        for file in "$candidate.results" "$candidate.build.log"; do
            [ -e "$file" ] || continue
            if [ -z "$newest" ] || [ "$file" -nt "$newest" ]; then
                newest=$file
            fi
        done
    done
    [ -n "$newest" ] || continue
    base=${newest%.results}
    base=${base%.build.log}
    for suffix in results build.log ended; do
        [ -e "$base.$suffix" ] && [ ! "$base.$suffix" -ot "$newest" ] &&
            cp "$base.$suffix" "$work/$lesson.$suffix"
    done
done
exec build/grade-tool/grade --lessons "$ZZ_LESSONS" --work "$work" --progress
