#!/usr/bin/env bash
# make progress: where a student stands, in seconds, from the results that
# make check and make grade last wrote (build/check/, build/grade/work/):
# one line per lesson and TODO (done, failing, not started, skipped), with
# the points those results score (the grader's own scoring of them,
# build/grade-tool/grade), and what to do next. Files are named where the
# student edits them (lessons/...), also in a grading's messages, which
# name its copies (build/grade/src/...). A lesson that neither has checked
# says so; nothing is built or run here.
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
    case $base in
        build/check/*) tool="make check" ;;
        *) tool="make grade" ;;
    esac
    printf '%s\t%s, %s\n' "$lesson" "$tool" "$(date -r "$newest" '+%Y-%m-%d %H:%M' 2>/dev/null)" >> "$work/sources"
done
grade=(build/grade-tool/grade --lessons "$ZZ_LESSONS" --work "$work" --sources build/grade/src)
# The points: the grader's results.json of these results, one test a line
# with its score and its lesson's and TODO's tags.
mkdir -p "$work/scores" || exit 2
"${grade[@]}" --out "$work/scores" > /dev/null 2>&1
"${grade[@]}" --progress > "$work/progress" || exit 2
touch "$work/sources"
awk -v json="$work/scores/results.json" -v sources="$work/sources" '
    BEGIN {
        FS = "\t"
        while ((getline line < sources) > 0) {
            split(line, parts, "\t")
            source[parts[1]] = parts[2]
        }
        while ((getline line < json) > 0) {
            if (!match(line, /"score": [-0-9.e+]+, "max_score": [-0-9.e+]+/))
                continue
            split(substr(line, RSTART, RLENGTH), numbers, /[:,] */)
            if (!match(line, /"tags": \["lesson [0-9]+", "TODO [^"]*"/))
                continue
            tags = substr(line, RSTART, RLENGTH)
            sub(/^"tags": \["lesson /, "", tags)
            number = tags; sub(/".*/, "", number)
            todo = tags; sub(/^[0-9]+", "TODO /, "", todo); sub(/"$/, "", todo)
            got[number, todo] += numbers[2]; of[number, todo] += numbers[4]
            lesson_got[number] += numbers[2]; lesson_of[number] += numbers[4]
            todos[number] = todos[number] "\n" todo
        }
        FS = " "
    }
    /^lesson / {
        lesson = $2; number = substr(lesson, 1, 2)
        if (lesson in source)
            printf "lesson %s: %g/%g points, from your last %s\n", lesson,
                   lesson_got[number], lesson_of[number], source[lesson]
        else
            print
        next
    }
    /^  TODO / && lesson in source {
        count = split(substr(todos[number], 2), list, "\n")
        for (k = 1; k <= count; k++) {
            prefix = "  TODO " list[k] " "
            if (substr($0, 1, length(prefix)) == prefix && sub(/ tests pass/, sprintf(" tests pass, %g/%g points", got[number, list[k]], of[number, list[k]]))) {
                break
            }
        }
    }
    { print }' "$work/progress"
