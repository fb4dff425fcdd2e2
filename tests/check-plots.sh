#!/usr/bin/env bash
# make plots, checked on a small results.csv (make test runs this):
# tests/plots/results.csv holds rows of one make bench run on the 2-core VM,
# trimmed (lesson 05 at three sizes, lesson 07 at 10M parameters).
#   1. every figure is written, a PNG, and named in one line of the output;
#   2. with lesson 06's rows and lesson 02's rows past P = 1 left out, those
#      two figures are reported skipped with the reason, and not written
#      (an old one of the same name is removed), the others still are;
#   3. a gnuplot that writes nothing makes scripts/plots.sh fail, naming
#      each figure, never report a figure it did not write;
#   4. without gnuplot, or without results.csv, it says what to do and
#      fails.
# Prints a [pass] or [FAIL] line for each; exit status 0 when all pass, 1
# when one fails, 77 (skipped) without gnuplot, which make test does not
# need (scripts/install-deps.sh --extras installs it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
if ! command -v "${GNUPLOT:-gnuplot}" >/dev/null 2>&1; then
    echo "  [skip] make plots: gnuplot is not installed (scripts/install-deps.sh --extras installs it)"
    exit 77
fi
fixture=tests/plots/results.csv
work=build/test/plots
rm -rf "$work"
mkdir -p "$work"
figures=(01-bandwidth 02-strong-scaling 05-allreduce-busbw 06-bytes-per-rank 07-cpu-adam)
failures=0
pass() { echo "  [pass] $1"; }
fail() { echo "  [FAIL] $1"; failures=$((failures + 1)); }
show() { sed 's/^/    | /' "$1"; }
is_png() {   # is_png FILE: a file that starts with PNG's signature
    [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}

# 1. Every figure from the whole fixture.
out=$work/all
if scripts/plots.sh --csv "$fixture" --out "$out" > "$work/all.log" 2>&1; then
    missing=""
    for figure in "${figures[@]}"; do
        is_png "$out/$figure.png" && grep -q "^  wrote $out/$figure.png: " "$work/all.log" ||
            missing="$missing $figure.png"
    done
    if [ -z "$missing" ]; then
        pass "every figure from $fixture: ${figures[*]/%/.png}"
    else
        fail "from $fixture, not written as a PNG or not reported:$missing"
        show "$work/all.log"
    fi
else
    fail "scripts/plots.sh --csv $fixture failed (exit status $?)"
    show "$work/all.log"
fi

# 2. Rows missing: those figures skipped with the reason, the others drawn.
out=$work/partial
mkdir -p "$out"
echo "an old figure" > "$out/06-bytes-per-rank.png"
grep -v -e '^06,' -e '^02,rows,[^,]*,[0-9]*,[2-9],' "$fixture" > "$work/partial.csv"
scripts/plots.sh --csv "$work/partial.csv" --out "$out" > "$work/partial.log" 2>&1
status=$?
wrong=""
[ $status -eq 0 ] || wrong="$wrong exit status $status;"
for figure in 06-bytes-per-rank 02-strong-scaling; do
    [ ! -e "$out/$figure.png" ] || wrong="$wrong $figure.png exists;"
done
grep -q '^  \[skip\] 06-bytes-per-rank.png: no parameters row for lesson 06' "$work/partial.log" ||
    wrong="$wrong no skip line for 06-bytes-per-rank.png;"
grep -q '^  \[skip\] 02-strong-scaling.png: .*P = 1 only' "$work/partial.log" ||
    wrong="$wrong no skip line for 02-strong-scaling.png;"
for figure in 01-bandwidth 05-allreduce-busbw 07-cpu-adam; do
    is_png "$out/$figure.png" || wrong="$wrong $figure.png not written;"
done
if [ -z "$wrong" ]; then
    pass "without lesson 06's rows and lesson 02's past P = 1: those two skipped, with the reason, the rest drawn"
else
    fail "rows left out:$wrong"
    show "$work/partial.log"
fi

# 3. A gnuplot that answers but draws nothing.
cat > "$work/silent-gnuplot" <<'SCRIPT'
#!/bin/sh
cat > /dev/null
exit 0
SCRIPT
chmod +x "$work/silent-gnuplot"
out=$work/silent
GNUPLOT=$work/silent-gnuplot scripts/plots.sh --csv "$fixture" --out "$out" > "$work/silent.log" 2>&1
status=$?
failed_lines=$(grep -c '^  \[FAIL\] .*\.png: gnuplot did not write it' "$work/silent.log")
if [ $status -ne 0 ] && [ "$failed_lines" -eq ${#figures[@]} ] && ! grep -q '^  wrote ' "$work/silent.log" &&
        [ -z "$(ls -A "$out" 2>/dev/null)" ]; then
    pass "a gnuplot that writes nothing: each figure reported failed, exit status $status"
else
    fail "a gnuplot that writes nothing: exit status $status, $failed_lines figures reported failed"
    show "$work/silent.log"
fi

# 4. Nothing to draw with, nothing to draw.
GNUPLOT=/nonexistent/gnuplot scripts/plots.sh --csv "$fixture" --out "$work/none" > "$work/no-gnuplot.log" 2>&1
status=$?
if [ $status -ne 0 ] && grep -q 'scripts/install-deps.sh --extras' "$work/no-gnuplot.log"; then
    pass "without gnuplot: says scripts/install-deps.sh --extras, exit status $status"
else
    fail "without gnuplot: exit status $status"
    show "$work/no-gnuplot.log"
fi
scripts/plots.sh --csv "$work/no-such.csv" --out "$work/none" > "$work/no-csv.log" 2>&1
status=$?
if [ $status -ne 0 ] && grep -q 'run make bench first' "$work/no-csv.log"; then
    pass "without results.csv: says run make bench first, exit status $status"
else
    fail "without results.csv: exit status $status"
    show "$work/no-csv.log"
fi

# 5. Lesson 09's timeline of a pipeline's first step (scripts/timeline.sh),
# from the solution's train_pp: the text and a PNG that is one.
if [ -x build/solution/09-pipeline-parallel/train_pp ]; then
    ZZ_BUILD=build/solution scripts/timeline.sh -np 2 --micro-batches 4 \
        --schedule 1f1b --out "$work/timeline.png" > "$work/timeline.log" 2>&1
    status=$?
    if [ $status -eq 0 ] && grep -q '^rank 1 | ' "$work/timeline.log" &&
            head -c 8 "$work/timeline.png" | od -An -c | grep -q 'P   N   G'; then
        pass "scripts/timeline.sh: lesson 09's 1F1B on 2 stages, the text timeline and a PNG of it"
    else
        fail "scripts/timeline.sh: exit status $status"
        show "$work/timeline.log"
    fi
fi

[ "$failures" -eq 0 ]
