#!/usr/bin/env bash
# Grades one broken submission (tests/fixtures/LESSON/NAME) as make grade
# grades a student's, and checks its expectations:
#   scripts/grade-fixture.sh tests/fixtures/LESSON/NAME [--tally FILE]
# expected.txt holds what grading without the sandbox must give (graded
# with --no-sandbox), and expected-sandbox.txt (if there is one) what
# grading with it must give (--sandbox); at least one of them must be there.
# expected-no-boundary.txt, where there is one, is graded without the
# sandbox and with the producers' run-time boundary open (ZZ_NO_BOUNDARY=1
# to the judges): what stops the attack where there is no boundary (a
# CUDA lesson, a system without seccomp or Landlock).
# Each holds lines
#   score: X/Y, fails: NAME | WORDS, passes: NAME   (build/grade-tool/grade)
#   refuses: WORDS     the grading must give no score at all (status 3 or
#                      4, no results files) and say WORDS
#   bait: PATH         a file outside the grading, PATH in a folder made for
#                      this grading alone (bait: PATH/ for a folder PATH
#                      with files in it), which the grading's programs find
#                      in ZZ_BAIT: it must be there, unchanged, after the
#                      grading; the folder is removed afterwards
# and may say more about how to grade, in lines "graded: ...":
#   graded: GRADE_SYMBOL_CHECK=0   without the checks on the files (to prove
#                                  that another defence stops the attack)
#   graded: GRADE_SANITIZERS=1     with the sanitized passes (AddressSanitizer
#                                  and UBSan, ThreadSanitizer for threaded
#                                  lessons), which are otherwise left out
#   graded: lessons L1 L2          these lessons (else the folder's lesson)
#   graded: bait in /tmp           the bait's folder in /tmp (or /dev/shm),
#                                  not /var/tmp: for attacks on /tmp itself
#   graded: in a copy of the tree  in a copy of this checkout made for the
#                                  grading and removed after it, where
#                                  ZZ_GRADED_IN_A_COPY is set: for attacks
#                                  that write the checkout
#   graded: with /tmp full         with the machine's /tmp full (a mount
#                                  namespace with a full 1 MiB tmpfs there;
#                                  skipped, with the reason, where none can
#                                  be made)
# Run it through make (make grade-fixture F=...), or from tests/run-all.sh.
. "$(dirname "$0")/portable.sh" "$@"  # bash 4, GNU tools (macOS: Homebrew's)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# The bait folder's files: type, mode, name, a link's target, contents.
bait_listing() {   # bait_listing FOLDER
    (cd "$1" && find . -printf '%y %m %p %l\n' | LC_ALL=C sort &&
        find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
}

# Makes each bait in FOLDER: a file holding its name and a random word, or
# a folder (PATH/) with a file and a folder with a file in it.
make_baits() {   # make_baits FOLDER PATH...
    local folder=$1 path word
    shift
    for path in "$@"; do
        word=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
        if [[ $path == */ ]]; then
            mkdir -p "$folder/$path/inner" &&
                printf 'bait %s %s\n' "$path" "$word" > "$folder/$path/keep" &&
                printf 'bait %s inner %s\n' "$path" "$word" > "$folder/$path/inner/keep"
        else
            mkdir -p "$(dirname "$folder/$path")" &&
                printf 'bait %s %s\n' "$path" "$word" > "$folder/$path"
        fi || return 1
    done
}

# A copy of this checkout's files (tracked, and untracked but not ignored)
# and of the builds a grading links (the solution build, the grade tool),
# times kept, so that make builds nothing again there.
copy_tree() {   # copy_tree FOLDER
    mkdir -p "$1/build" &&
        git ls-files -z --cached --others --exclude-standard |
            xargs -0 cp -p --parents -t "$1" &&
        cp -rp build/solution build/grade-tool "$1/build/"
}

# COMMAND with the machine's /tmp full: a tmpfs of 1 MiB, filled, on /tmp
# in a mount namespace of its own (as root). Status 97 where it cannot be
# made.
with_full_tmp() {   # with_full_tmp COMMAND...
    unshare --mount --propagation private -- bash -c '
        mount -t tmpfs -o size=1m zz-full-tmp /tmp 2>/dev/null || exit 97
        head -c 2M /dev/zero > /tmp/filler 2>/dev/null
        [ "$(df -Pk /tmp | awk "NR == 2 { print \$4 }")" -eq 0 ] || exit 97
        exec "$@"' with-full-tmp "$@"
}

main() {
folder=${1:?usage: scripts/grade-fixture.sh tests/fixtures/LESSON/NAME [--tally FILE]}
folder=${folder%/}
shift
tally=""
if [ "${1:-}" = --tally ] && [ -n "${2:-}" ]; then
    tally=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
fi
lesson_of_folder=$(basename "$(dirname "$folder")")
name=$(basename "$folder")
status=0 graded=0
for expect in "$folder/expected.txt" "$folder/expected-sandbox.txt" \
        "$folder/expected-no-boundary.txt"; do
    [ -f "$expect" ] || continue
    # A CUDA lesson's fixture has two sets of expectations: expected.txt
    # where its tests are skipped (no GPU), expected-gpu.txt where they run.
    if [ "$expect" = "$folder/expected.txt" ] && [ -e "$folder/expected-gpu.txt" ] &&
            command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
        expect=$folder/expected-gpu.txt
    fi
    # The sanitized passes only where the expectations ask for them
    # (graded: GRADE_SANITIZERS=1): the others were made for the plain
    # tests, and make test's time is short.
    lessons=$lesson_of_folder options=(--no-sandbox) settings=(GRADE_SANITIZERS=0) suffix="" mode=""
    bait_place=/var/tmp in_copy=false tmp_full=false
    if [[ $expect == *-sandbox.txt ]]; then
        options=(--sandbox) suffix=-sandbox mode=" (sandbox)"
    elif [[ $expect == *-no-boundary.txt ]]; then
        settings+=(ZZ_NO_BOUNDARY=1) suffix=-no-boundary mode=" (without the boundary)"
    fi
    while read -r _ word rest; do
        case "$word $rest" in
            *=*) settings+=("$word") ;;
            "lessons "*) lessons=$rest ;;
            "bait in "*) bait_place=${rest#in } ;;
            "in a copy of the tree") in_copy=true ;;
            "with /tmp full") tmp_full=true ;;
        esac
    done < <(grep '^graded:' "$expect")
    baits=() refuses=""
    while read -r _ path; do baits+=("$path"); done < <(grep '^bait:' "$expect")
    refuses=$(sed -n 's/^refuses: *//p' "$expect" | head -n 1)
    title="broken submission '$name' of lesson $lessons$mode"
    out=build/test/fixtures/$lesson_of_folder/$name$suffix
    rm -rf "$out"
    mkdir -p "$out"
    graded=$((graded + 1))

    # The bait, in a folder of this grading's own.
    bait_folder="" bait_before=""
    if [ ${#baits[@]} -gt 0 ]; then
        bait_folder=$(mktemp -d "$bait_place/zz-bait-XXXXXX") &&
            make_baits "$bait_folder" "${baits[@]}" ||
            { echo "grade-fixture: cannot make the bait in $bait_place" >&2; exit 2; }
        bait_before=$(bait_listing "$bait_folder")
        settings+=("ZZ_BAIT=$bait_folder")
    fi
    # Where it is graded: here, or in a copy of this checkout.
    # (The copy's programs see ZZ_GRADED_IN_A_COPY: an attack fixture that
    # would damage the tree it finds does so only there.)
    tree=$root
    if $in_copy; then
        mkdir -p build/test
        tree=$(mktemp -d "$root/build/test/tree-XXXXXX") && copy_tree "$tree" ||
            { echo "grade-fixture: cannot copy the checkout to $tree" >&2; exit 2; }
        settings+=(ZZ_GRADED_IN_A_COPY=1)
    fi
    command=(env "${settings[@]}" scripts/grade.sh --lesson "$lessons"
             --overlay "$folder" --out "$out" --expect "$expect"
             "${options[@]}" ${tally:+--tally "$tally"})
    log=$(mktemp "$root/$out.log-XXXXXX")
    if $tmp_full && [[ $root == /tmp/* ]]; then
        # A /tmp made full would hide the checkout itself.
        code=98
    elif $tmp_full; then
        (cd "$tree" && with_full_tmp "${command[@]}") > "$log" 2>&1
        code=$?
    else
        (cd "$tree" && "${command[@]}") > "$log" 2>&1
        code=$?
    fi
    if [ "$code" -eq 98 ] && $tmp_full; then
        echo "$title"
        echo "  [skip] graded with /tmp full: the checkout lies in /tmp ($root), which a full /tmp would hide"
        [ -z "$tally" ] || echo "0 0 1 $title" >> "$tally"
    elif [ "$code" -eq 97 ] && $tmp_full; then
        echo "$title"
        echo "  [skip] graded with /tmp full: no mount namespace with a tmpfs can be made here (needs root)"
        [ -z "$tally" ] || echo "0 0 1 $title" >> "$tally"
    elif [ -n "$refuses" ]; then
        # No score: the grading stops, says why, and leaves no results.
        echo "$title"
        sed 's/^/    /' "$log"
        left=$(cd "$tree" && ls "$out"/results.json "$out"/scores.txt "$out"/work/*.results 2>/dev/null | head -n 3)
        if { [ "$code" -eq 3 ] || [ "$code" -eq 4 ]; } && grep -qF -- "$refuses" "$log" && [ -z "$left" ]; then
            echo "  [pass] refuses: $refuses"
            echo "  1 of 1 expectations hold"
            [ -z "$tally" ] || echo "1 0 0 $title" >> "$tally"
        else
            echo "  [FAIL] refuses: $refuses: the grading ended with status $code${left:+, leaving $left}"
            echo "  0 of 1 expectations hold"
            [ -z "$tally" ] || echo "0 1 0 $title" >> "$tally"
            status=1
        fi
    else
        cat "$log"
        [ "$code" -eq 0 ] || status=1
    fi
    rm -f "$log"
    # The bait: still there, unchanged; then removed, with anything put in
    # its folder (rm follows no link inside it).
    if [ -n "$bait_folder" ]; then
        if [ "$(bait_listing "$bait_folder")" = "$bait_before" ]; then
            echo "  [pass] bait ${baits[*]}: still there, unchanged"
            [ -z "$tally" ] || echo "1 0 0 $title: bait" >> "$tally"
        else
            echo "  [FAIL] bait ${baits[*]}: changed by the grading:"
            diff <(printf '%s\n' "$bait_before") <(bait_listing "$bait_folder") | head -n 8 | sed 's/^/    /'
            [ -z "$tally" ] || echo "0 1 0 $title: bait" >> "$tally"
            status=1
        fi
        rm -rf "$bait_folder"
    fi
    if $in_copy; then
        rm -rf "$tree"
    fi
done
if [ "$graded" -eq 0 ]; then
    echo "grade-fixture: $folder has neither expected.txt nor expected-sandbox.txt" >&2
    exit 2
fi
exit $status
}

# Read whole before it runs (as scripts/grade.sh is).
main "$@"; exit $?
