#!/usr/bin/env bash
# Checks a linked program that runs a student's code:
#   scripts/check-program.sh LESSON PROGRAM STUDENT-OBJECT...
# It must hold none of its lesson's references: the "reference" lines of
# tests/symbols/all.txt and LESSON.txt, given code that computes what the
# lesson's student code must compute (lesson 07's adamw_step_mixed, which
# the tests compare the CPU Adam with). The checks on the student's files
# refuse a call to one by name (scripts/check-submission.sh); code can
# also reach a function by its address, so the program must not hold one
# at all: not because an object it shares with an allowed function was
# linked, nor because an earlier lesson's file that this lesson's programs
# link calls it. The Makefile links with unused sections dropped
# (GC_LDFLAGS), so what the program holds is code it can run.
# STUDENT-OBJECT: the student's files the program links, named in the
# refusal when one of them calls the reference. One line "refused: ..."
# for each reference found; exits 0 when there is none, 1 otherwise.
. "$(dirname "$0")/portable.sh" "$@"  # bash 4, GNU tools, ELF names (macOS: Homebrew's)
set -uo pipefail
usage="usage: check-program.sh LESSON PROGRAM STUDENT-OBJECT..."
lesson=${1:?$usage}
program=${2:?$usage}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)

# "GLOB REASON" for each reference line; the globs as regular expressions.
references=$(cat "$root/tests/symbols/all.txt" "$root/tests/symbols/$lesson.txt" 2>/dev/null |
    awk '$1 == "reference" { $1 = ""; sub(/^ /, ""); print }')
[ -n "$references" ] || exit 0
found=$(nm --defined-only "$program" 2>/dev/null | awk -v references="$references" '
    BEGIN {
        n = split(references, lines, "\n")
        for (k = 1; k <= n; k++) {
            glob = lines[k]; sub(/ .*/, "", glob)
            reason[k] = lines[k]; sub(/^[^ ]* ?/, "", reason[k])
            pattern = glob; gsub(/[.+^$(){}|\[\]\\]/, "\\\\&", pattern)
            gsub(/\*/, ".*", pattern); gsub(/\?/, ".", pattern)
            patterns[k] = "^" pattern "$"
        }
    }
    NF >= 3 { for (k = 1; k <= n; k++) if ($3 ~ patterns[k] && !seen[$3]++) print $3 "\t" reason[k] }')
[ -n "$found" ] || exit 0

# Who calls it: the student's files whose undefined symbols name it.
while IFS=$'\t' read -r symbol reason; do
    callers=""
    for object in "$@"; do
        if nm -u "$object" 2>/dev/null | awk '{ print $NF }' | grep -qxF "$symbol"; then
            part=${object%/*}
            callers+="${callers:+, }lessons/${part##*/}/$(basename "${object%.o}").c"
        fi
    done
    # The reason says what the reference is ("is the reference ...: what to
    # do"); its first part is enough here.
    what=${reason%%: *}
    if [ -n "$callers" ]; then
        echo "refused: $callers calls $symbol, which $what, from code that $(basename "$program") (lesson $lesson) runs: no program that runs your code may hold its lesson's reference; call it only from code that lesson $lesson never runs" >&2
    else
        echo "refused: $program holds $symbol, which $what, and none of your files calls it: the toolkit's given code links it, a fault of the toolkit's, not of your files (tell whoever gave you the toolkit)" >&2
    fi
done <<< "$found"
exit 1
