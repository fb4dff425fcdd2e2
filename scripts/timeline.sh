#!/usr/bin/env bash
# Lesson 09's picture: the first step of a pipeline, as train_pp --trace
# replays it on the virtual clock, drawn with gnuplot: a row a stage, a
# box a forward (light, 1 unit) or backward (dark, 2 units), labelled with
# its micro-batch (and chunk), the idle time left blank: the bubble.
#
#   scripts/timeline.sh [--out FILE.png] [-np P] [train_pp's flags...]
#   scripts/timeline.sh -np 4 --micro-batches 8 --schedule gpipe
#
# Runs build/student/09-pipeline-parallel/train_pp (your code; ZZ_BUILD
# names another build folder) with --trace and 2 steps, prints the text
# timeline and the file written (default build/plots/09-timeline.png).
# Exit status 0 when drawn, 1 when train_pp failed or gnuplot is missing
# (the text timeline is still printed), 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/plots/09-timeline.png
ranks=2
flags=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:?--out needs a file}; shift 2 ;;
        -np) ranks=${2:?-np needs a number}; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) flags+=("$1"); shift ;;
    esac
done
[[ $ranks =~ ^[1-9][0-9]*$ ]] || { echo "timeline: -np needs a number of ranks, got '$ranks'" >&2; exit 2; }
program=${ZZ_BUILD:-build/student}/09-pipeline-parallel/train_pp
[ -x "$program" ] || { echo "timeline: $program is not built (make all)" >&2; exit 1; }
text=$(mktemp "${TMPDIR:-/tmp}/zz-timeline-XXXXXX")
trap 'rm -f "$text" "$text.dat"' EXIT
if ! scripts/mpirun -np "$ranks" "$program" --steps 2 --held-out 32 \
        --trace "${flags[@]+"${flags[@]}"}" > "$text"; then
    cat "$text"
    echo "timeline: train_pp failed" >&2
    exit 1
fi
sed -n '/^the first step on the virtual clock/,$p' "$text"
grep -q '^rank 0 |' "$text" || { echo "timeline: train_pp printed no timeline" >&2; exit 1; }
gnuplot=${GNUPLOT:-gnuplot}
if ! command -v "$gnuplot" >/dev/null 2>&1; then
    echo "timeline: gnuplot is not installed (scripts/install-deps.sh --extras installs it): the text above is the timeline" >&2
    exit 1
fi
# One line a box: rank, start, end, kind (0 forward, 1 backward), label.
awk '/^rank [0-9]+ \|/ {
        rank = $2; busy_until = 0
        for (f = 4; f <= NF; f++) {
            t = f - 4
            if ($f == "." || t < busy_until)
                continue
            kind = substr($f, 1, 1) == "F" ? 0 : 1
            busy_until = t + (kind == 0 ? 1 : 2)
            printf "%d %d %d %d %s\n", rank, t, busy_until, kind, $f
        }
    }' "$text" > "$text.dat"
ranks_seen=$(awk '{ if ($1 + 1 > n) n = $1 + 1 } END { print n + 0 }' "$text.dat")
end=$(awk '{ if ($3 > n) n = $3 } END { print n + 0 }' "$text.dat")
bubble=$(sed -n 's/^bubble \([0-9.]*\) over.*/\1/p' "$text")
mkdir -p "$(dirname "$out")"
"$gnuplot" <<GNUPLOT
set terminal pngcairo size 1100,$((120 + 60 * ranks_seen)) font ",10"
set output "$out"
set title "the first step on the virtual clock: bubble $bubble (forward 1 unit, backward 2)"
set xlabel "time (units)"
set ylabel "rank"
set xrange [0:$end]
set yrange [$ranks_seen - 0.4:-0.6]
set ytics 1
unset key
set style fill solid 1.0 border lc rgb "black"
plot "$text.dat" using (\$2 + (\$3 - \$2) / 2.0):1:((\$3 - \$2) / 2.0):(0.35):(\$4 == 0 ? 0xa6cee3 : 0x1f78b4) with boxxyerror lc rgb variable, \
     "" using (\$2 + (\$3 - \$2) / 2.0):1:5 with labels font ",8"
GNUPLOT
echo "timeline: $out"
