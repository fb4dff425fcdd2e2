#!/usr/bin/env bash
# make check L=NN T=N: the tests of one TODO alone, for a quick verdict on
# the TODO you work on (make check L=NN runs them all).
#
#   scripts/check-todo.sh LESSON TODO TITLE   (run by make, after the build)
#
# Which tests are TODO N's, the lesson's manifest says (tests/manifest/,
# its TODO column: a number, a range "3-5" or a list "1,3"): every test
# whose last TODO is N, so that TODO N's tests can pass once TODOs 1 to N
# are done (a test of TODOs 1-2 is TODO 2's, not TODO 1's); where no test
# ends at N, every test whose column holds N. Each runs alone in the lesson's test program
# (CK_RUN_CASE, one run each), with the same verdicts and messages as make
# check. The lesson's record for make progress (build/check/LESSON.results)
# gets these tests' new results; its other tests keep their last ones, or
# are marked not run. After a test that hangs (no answer at its limit), the
# TODO's remaining tests are said not run, so that a hung ring gives its
# verdict in one limit's time, not in one per test. Exit status 0 when
# every test passed, 1 when one did not, 2 on bad input.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
if [ $# -ne 3 ]; then
    echo "usage: scripts/check-todo.sh LESSON TODO TITLE (make check L=NN T=N runs it)" >&2
    exit 2
fi
lesson=$1 todo=$2 title=$3
# ZZ_CHECK_JUDGE: another test program in its place (tests/check-todo.sh's
# stand-in; never needed otherwise).
judge=${ZZ_CHECK_JUDGE:-build/student/tests/test_$lesson}
number=${lesson%%-*}
if ! [[ $todo =~ ^[0-9]+$ ]]; then
    echo "make check: T=$todo: say one TODO's number, e.g. make check L=$number T=2" >&2
    exit 2
fi
todo=$((10#$todo))

# Every manifest line "POINTS | TODO | NAME [| OPTIONS]" as "TODOS<TAB>NAME",
# TODOS the numbers its TODO column covers, comma-separated.
manifests=("tests/manifest/$lesson.txt")
[ -e "tests/hidden/manifest/$lesson.txt" ] && manifests+=("tests/hidden/manifest/$lesson.txt")
todos_of=$(awk -F'|' '
    /^[^#].*\|.*\|/ {
        field = $2; name = $3
        gsub(/^ +| +$/, "", name)
        gsub(/[^0-9,-]+/, " ", field)       # "hello_mpi.c 1-3": the numbers
        gsub(/ +/, ",", field)
        count = split(field, pieces, ",")
        numbers = ""
        for (k = 1; k <= count; k++) {
            if (pieces[k] == "") continue
            if (split(pieces[k], ends, "-") == 2 && ends[1] != "" && ends[2] != "")
                for (n = ends[1] + 0; n <= ends[2] + 0; n++) numbers = numbers "," n
            else
                numbers = numbers "," (pieces[k] + 0)
        }
        print substr(numbers, 2) "\t" name
    }' "${manifests[@]}")
# A test's TODOs ("1,3"), and the last of them.
todos_of_test() {
    printf '%s\n' "$todos_of" | awk -F'\t' -v name="$1" '$2 == name { print $1; exit }'
}
last_todo() {
    printf '%s\n' "$1" | tr ',' '\n' | sort -n | tail -n 1
}
names=$(ZZ_BUILD_DIR=build/student "$judge" --list) || exit 2
selected=() holding=()
while IFS= read -r name; do
    todos=$(todos_of_test "$name")
    [[ ",$todos," == *",$todo,"* ]] || continue
    holding+=("$name")
    [ "$(last_todo "$todos")" = "$todo" ] && selected+=("$name")
done <<< "$names"
# A TODO no test ends (lesson 08's 2 and 3, whose tests need TODO 4 too)
# runs the tests that hold it, and says they need the later TODOs.
of_todo="of TODO $todo"
if [ ${#selected[@]} -eq 0 ] && [ ${#holding[@]} -gt 0 ]; then
    selected=("${holding[@]}")
    held=$(todos_of_test "${holding[0]}")
    of_todo="that need TODO $todo, with TODOs ${held%%,*}-$(last_todo "$held")"
fi
if [ ${#selected[@]} -eq 0 ]; then
    all=$(printf '%s\n' "$todos_of" | cut -f1 | tr ',' '\n' | sort -nu | tr '\n' ' ')
    echo "make check: lesson $lesson has no tests of TODO $todo (its TODOs: ${all% })" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/zz-check-todo-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
tests="${#selected[@]} tests"
[ ${#selected[@]} -eq 1 ] && tests="1 test"
echo "$title: the $tests $of_todo (make check L=$number: the whole lesson)"
passed=0 failed=0 not_started=0 k=0 hung=""
: > "$work/results"
for name in "${selected[@]}"; do
    k=$((k + 1))
    # After a test that got no answer (a hang), the TODO's other tests
    # would most likely hang too, each for its whole limit: the verdict is
    # in, so they are said not run (make check L=NN runs them all).
    if [ -n "$hung" ]; then
        why="not run: TODO $todo's test '$hung' got no answer; once it does, make check L=$number T=$todo runs this one too"
        printf 'skip\t%s\t%s\n' "$name" "$why" >> "$work/results"
        echo "  [skip] $name: $why"
        continue
    fi
    CK_RUN_CASE=$name ZZ_BUILD_DIR=build/student "$judge" --title "$title" --mode student \
        --results "$work/one.results" > "$work/one.out" 2>&1
    status=$?
    line=$(awk -F'\t' -v name="$name" '$2 == name' "$work/one.results" 2>/dev/null)
    if [ "$status" -gt 1 ] || [ -z "$line" ]; then
        echo "make check: the test program $judge stopped (exit status $status) on test '$name':" >&2
        sed 's/^/  | /' "$work/one.out" >&2
        exit 2
    fi
    printf '%s\n' "$line" >> "$work/results"
    case ${line%%$'\t'*} in
        pass) passed=$((passed + 1)) ;;
        todo) failed=$((failed + 1)) not_started=$((not_started + 1)) ;;
        skip) ;;
        *) failed=$((failed + 1))
           [[ $line != *"no answer from "* ]] || hung=$name ;;
    esac
    # The runner's lines for this test (and a note about the system, once):
    # not its title, its summary, nor the other tests it did not run.
    awk -v first="$k" '
        NR == 1 { next }
        /not run: CK_RUN_CASE names another test$/ { next }
        /^  [0-9]+ passed, [0-9]+ failed/ || /^[0-9]+%: Checks: / { next }
        /^  \(/ && first != 1 { next }
        { print }' "$work/one.out"
done
echo "  $passed passed, $failed failed ($not_started of them not started), of TODO $todo's $tests"

# make progress's record: these tests' new results, the others' last ones.
mkdir -p build/check || exit 2
cut -f2 "$work/results" > "$work/ran"
record=build/check/$lesson.results
while IFS= read -r name; do
    line=$(awk -F'\t' -v name="$name" '$2 == name' "$work/results")
    [ -n "$line" ] || [ ! -e "$record" ] || line=$(awk -F'\t' -v name="$name" '$2 == name' "$record")
    # A test of this TODO and later ones, not run now: a failure it had
    # before this TODO's code changed no longer says anything true.
    if [ -n "$line" ] && [ "${line%%$'\t'*}" != pass ] && [[ $line != *$'\t'"not run yet"* ]] &&
        ! grep -qxF -- "$name" "$work/ran" && printf '%s\n' "${holding[@]}" | grep -qxF -- "$name"; then
        todos=$(todos_of_test "$name")
        last=$(last_todo "$todos")
        line=$(printf 'skip\t%s\tnot run since TODO %s changed (it tests TODOs %s): make check L=%s T=%s runs it' \
            "$name" "$todo" "${todos//,/, }" "$number" "$last")
    fi
    # Never run: a note that stays true whichever T= runs next.
    if [ -z "$line" ]; then
        todos=$(todos_of_test "$name")
        which="TODO $todos"
        [[ $todos != *,* ]] || which="TODOs ${todos//,/, }"
        line=$(printf 'skip\t%s\tnot run yet (it tests %s): make check L=%s T=%s runs it, make check L=%s the whole lesson' \
            "$name" "$which" "$number" "$(last_todo "$todos")" "$number")
    fi
    printf '%s\n' "$line"
done <<< "$names" > "$work/record"
mv "$work/record" "$record" || exit 2
rm -f "build/check/$lesson.build.log"
[ "$failed" -eq 0 ]
