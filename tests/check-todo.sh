#!/usr/bin/env bash
# make check L=NN T=N (scripts/check-todo.sh), with a stand-in for the
# lesson's test program that answers as the runner does, so that the cases
# need no build:
#
#   tests/check-todo.sh [--tally FILE]      (make test)
#
#   1. T=3 of lesson 05 runs exactly the tests whose last TODO is 3 (the
#      manifest's TODO column), each once, and says how many passed;
#   2. after one of them gets no answer (a hang at its limit), the others
#      are said not run, with the hung test's name, and not run (each would
#      wait out its own limit); the status is 1;
#   3. make progress's record holds every test of the lesson: the new
#      results of these, "not run yet" for the others;
#   4. a TODO the lesson has no tests of: one line, status 2;
#   5. a failure recorded for a test of TODO N and later ones, before
#      T=N ran, is said not run since TODO N changed (it was stale); one
#      never run is still said not run yet;
#   6. make progress on that record: TODOs whose tests did not run are
#      "not run" (not skipped, not done), and what comes next is the first
#      TODO of the lesson worked on that is failing or not run (with its
#      T=), not the first lesson never checked; once the lesson is done,
#      the next lesson never checked after it.
# Prints [pass] or [FAIL] lines; exit status 0 when all pass.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
tally=""
[ "${1:-}" != --tally ] || tally=${2:?usage: tests/check-todo.sh [--tally FILE]}
echo "== make check T=N: one TODO's tests (tests/check-todo.sh)"
work=$(mktemp -d "${TMPDIR:-/tmp}/zz-check-todo-test-XXXXXX") || exit 2
record=build/check/05-data-parallel.results
saved=""
if [ -e "$record" ]; then
    saved=$work/saved.results
    cp "$record" "$saved" || exit 2
fi
trap 'if [ -n "$saved" ]; then cp "$saved" "$record"; else rm -f "$record"; fi; rm -rf "$work"' EXIT
. tests/say.sh
say_to "$tally" check-todo

# The stand-in: --list gives the manifest's names; a run (CK_RUN_CASE)
# writes its one result and the runner's line, and notes that it ran. The
# test named in HANG_AT gets no answer; the others fail as not done.
cat > "$work/judge" <<'JUDGE'
#!/usr/bin/env bash
if [ "$1" = --list ]; then
    sed -n 's/^[0-9][0-9]* *| *[^|]*| *\([^|]*[^| ]\) *\(|.*\)\{0,1\}$/\1/p' tests/manifest/05-data-parallel.txt
    exit 0
fi
results=""
while [ $# -gt 0 ]; do
    [ "$1" != --results ] || results=$2
    shift
done
echo "$CK_RUN_CASE" >> "$RAN"
echo "05 data parallel"
if [ "$CK_RUN_CASE" = "${HANG_AT:-}" ]; then
    why="no answer from ring_check in 4 s: a deadlock (every rank waited inside an MPI call for 3 s, none moving on)"
else
    why="not done yet (TODO 3)"
fi
printf 'fail\t%s\t%s\n' "$CK_RUN_CASE" "$why" > "$results"
echo "  [FAIL] $CK_RUN_CASE: $why"
exit 1
JUDGE
chmod +x "$work/judge"
run_todo() {   # run_todo TODO HANG_AT: output in $work/out, status in $code
    : > "$work/ran"
    ZZ_CHECK_JUDGE=$work/judge RAN=$work/ran HANG_AT=$2 \
        scripts/check-todo.sh 05-data-parallel "$1" "05 data parallel" > "$work/out" 2>&1
    code=$?
}
# TODO 3's tests: those whose TODO column ends at 3 ("3", "1, 3").
ring_tests=$(awk -F'|' '/^[0-9]/ { n = split($2, t, /[^0-9]+/); last = ""
        for (k = 1; k <= n; k++) if (t[k] != "") last = t[k]
        if (last == "3") { sub(/^ +/, "", $3); sub(/ +$/, "", $3); print $3 } }' \
    tests/manifest/05-data-parallel.txt)
count=$(printf '%s\n' "$ring_tests" | grep -c .)

# 1. Every test of TODO 3, once, none other (from no record at all).
rm -f "$record"
run_todo 3 ""
if [ "$code" -eq 1 ] && [ "$(sort "$work/ran")" = "$(printf '%s\n' "$ring_tests" | sort)" ] &&
        grep -q "0 passed, $count failed" "$work/out"; then
    say yes "T=3 runs the $count tests whose last TODO is 3, each once (status 1: they fail)"
else
    say no "T=3 should run the $count tests of TODO 3, each once (status $code; ran: $(tr '\n' ';' < "$work/ran"))" "$work/out"
fi

# 2. A hang: the rest are not run, and say why.
second=$(printf '%s\n' "$ring_tests" | sed -n 2p)
run_todo 3 "$second"
ran=$(grep -c . "$work/ran")
skipped=$(grep -c "\[skip\] .*not run: TODO 3's test '$second' got no answer" "$work/out")
if [ "$code" -eq 1 ] && [ "$ran" -eq 2 ] && [ "$skipped" -eq $((count - 2)) ]; then
    say yes "after the hung test '$second', the other $((count - 2)) tests of TODO 3 are said not run, and do not run"
else
    say no "after a hang the rest should be said not run (status $code, $ran ran, $skipped said not run)" "$work/out"
fi

# 3. make progress's record: every test of the lesson, these with their
# new results.
all=$("$work/judge" --list | grep -c .)
if [ "$(grep -c . "$record" 2>/dev/null)" -eq "$all" ] &&
        grep -q "^fail	$second	no answer" "$record" &&
        [ "$(grep -c "^skip	.*got no answer" "$record")" -eq $((count - 2)) ] &&
        grep -q "^skip	shard: one rank, the first step	not run yet (it tests TODO 1): make check L=05 T=1 runs it" "$record"; then
    say yes "make progress's record holds all $all tests: TODO 3's new results, the others not run yet"
else
    say no "make progress's record should hold all $all tests with TODO 3's results" "$record"
fi

# 5. A failure recorded before a TODO changed is stale: after T=1, the
# tests of TODO 1 and later ones that T=1 did not run ("train: ... (ring)",
# TODOs 1 and 3) no longer show their old failure.
later=$(awk -F'|' '/^[0-9]/ && $2 ~ /1, 3/ { sub(/^ +/, "", $3); sub(/ +$/, "", $3); print $3; exit }' \
    tests/manifest/05-data-parallel.txt)
run_todo 1 ""
if grep -q "^skip	$later	not run since TODO 1 changed (it tests TODOs 1, 3): make check L=05 T=3 runs it" "$record" &&
        ! grep -q "^fail	$later	" "$record" && ! grep -qxF "$later" "$work/ran"; then
    say yes "after T=1, '$later' (TODOs 1, 3) is said not run since TODO 1 changed, not failing as it was"
else
    say no "after T=1, '$later' should be said not run since TODO 1 changed" "$record"
fi
# A test of TODO 1 and later ones that never ran is still just not run yet.
never=$(awk -F'|' '/^[0-9]/ && $2 ~ /1, 4/ { sub(/^ +/, "", $3); sub(/ +$/, "", $3); print $3; exit }' \
    tests/manifest/05-data-parallel.txt)
if grep -q "^skip	$never	not run yet (it tests TODOs 1, 4): make check L=05 T=4 runs it" "$record"; then
    say yes "after T=1, '$never' (TODOs 1, 4), never run, is said not run yet, and which T= runs it"
else
    say no "after T=1, '$never', never run, should be said not run yet" "$record"
fi

# 6. make progress on that record, beside a lesson never checked: the
# TODOs whose tests T=N did not run are "not run", not skipped (as a CUDA
# test without a GPU is) nor done, and what to do next is the failing TODO
# of the lesson worked on, not the first lesson never checked.
mkdir -p "$work/progress" || exit 2
cp "$record" "$work/progress/05-data-parallel.results" || exit 2
progress_of() {   # progress_of LESSONS: make progress's lines, in $work/progress.out
    [ -x build/grade-tool/grade ] &&
        build/grade-tool/grade --lessons "$1" --work "$work/progress" --progress > "$work/progress.out" 2>&1
}
if progress_of "00-setup 05-data-parallel" &&
        grep -q "^  TODO 2 .* not run .*0/3 tests pass" "$work/progress.out" &&
        grep -q "^next: lesson 05-data-parallel, TODO 1 " "$work/progress.out"; then
    say yes "make progress after T=1: TODO 2 is not run, and next is TODO 1 of lesson 05, not lesson 00: $(grep '^next' "$work/progress.out")"
else
    say no "make progress after T=1 should show TODO 2 not run and point at lesson 05's TODO 1" "$work/progress.out"
fi
# Once TODO 1 passes, what is left not run comes next, with its T=.
sed -i.bak 's/^fail\(\tshard: [^\t]*\t\)/pass\1/' "$work/progress/05-data-parallel.results"
if progress_of "00-setup 05-data-parallel" &&
        grep -q "^next: lesson 05-data-parallel, TODO 2, .*(make check L=05 T=2)" "$work/progress.out"; then
    say yes "with TODO 1 done, next is TODO 2, never run, with its T=: $(grep '^next' "$work/progress.out")"
else
    say no "with TODO 1 done, next should be TODO 2 (make check L=05 T=2)" "$work/progress.out"
fi

# Once the lesson is done, the next lesson never checked after it comes
# next, not the first one never checked (lessons 00-04 done elsewhere).
awk -F'\t' 'BEGIN { OFS = "\t" } { print "pass", $2, "" }' "$work/progress/05-data-parallel.results" \
    > "$work/progress/all-pass" && mv "$work/progress/all-pass" "$work/progress/05-data-parallel.results"
if progress_of "00-setup 05-data-parallel 06-zero" &&
        grep -q "^next: lesson 06-zero (make check L=06)" "$work/progress.out"; then
    say yes "with lesson 05 done and lessons 00 and 06 never checked, next is lesson 06: $(grep '^next' "$work/progress.out")"
else
    say no "with lesson 05 done, next should be lesson 06, the next never checked" "$work/progress.out"
fi

# 4. A TODO without tests.
run_todo 9 ""
if [ "$code" -eq 2 ] && [ "$(grep -c . "$work/out")" -eq 1 ] &&
        grep -q "has no tests of TODO 9" "$work/out" && [ ! -s "$work/ran" ]; then
    say yes "T=9 (no such tests): one line, status 2: $(cat "$work/out")"
else
    say no "T=9 should say in one line that lesson 05 has no tests of TODO 9 (status $code)" "$work/out"
fi
exit "$say_failed"
