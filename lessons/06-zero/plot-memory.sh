#!/usr/bin/env bash
# The ZeRO paper's Figure 1, measured: the model state rank 0 holds (the
# memory ledger's peak parameters + gradients + optimizer state) at each
# stage on 1 to 4 ranks, as points over the paper's formulas for the same
# Ψ, as lines. Also each run's whole peak (activations and buffers too).
# Prints the table, writes build/plots/06-memory.dat and 06-memory.png.
#
#   lessons/06-zero/plot-memory.sh          your build (make all first)
#   ZZ_BUILD_DIR=build/solution lessons/06-zero/plot-memory.sh
#
# Needs gnuplot (scripts/install-deps.sh --extras). Runs through
# scripts/mpirun, the Makefile's MPIRUN (as root, and with --oversubscribe
# for Open MPI: 4 ranks on fewer cores are slow, but the bytes are exact).
set -euo pipefail
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "plot-memory.sh: gnuplot is not installed (scripts/install-deps.sh --extras installs it)" >&2
    exit 1
fi
cd "$(dirname "$0")/../.."
program=${ZZ_BUILD_DIR:-build/student}/06-zero/train_zero
if [ ! -x "$program" ]; then
    echo "plot-memory.sh: no $program: run make all first" >&2
    exit 1
fi
mpirun_cmd=scripts/mpirun
out=build/plots
mkdir -p "$out"
data=$out/06-memory.dat

# One short run per stage and rank count; the bytes do not depend on the
# steps. Rank 0 names Ψ on its first line and its peaks on its last.
echo "# ranks stage model_state_measured model_state_formula peak_total" > "$data"
psi=""
for ranks in 1 2 3 4; do
    for stage in 0 1 2 3; do
        # shellcheck disable=SC2086  # ZZ_MPIRUN is a command line
        output=$($mpirun_cmd -np $ranks "$program" --stage $stage --steps 2 \
                 --samples 256 --held-out 16)
        psi=$(echo "$output" | sed -n 's/.* \([0-9]*\) parameters in .*/\1/p')
        echo "$output" | sed -n 's/^rank 0 held at most \([0-9]*\) bytes: parameters \([0-9]*\), gradients \([0-9]*\), optimizer \([0-9]*\),.*/\1 \2 \3 \4/p' |
            awk -v P="$ranks" -v s="$stage" -v psi="$psi" '{
                own = int((psi + P - 1) / P)          # rank 0 s block, the largest
                formula = (s == 3 ? 2 * own : 2 * psi) + (s >= 2 ? 2 * own : 2 * psi) + (s >= 1 ? 12 * own : 12 * psi)
                print P, s, $2 + $3 + $4, formula, $1
            }' >> "$data"
    done
done
echo "model state on rank 0, in bytes, for Ψ = $psi (formula: rank 0's block of the partition)"
awk '!/^#/ { printf "  P = %d  stage %d  measured %9d  formula %9d  whole peak %9d\n", $1, $2, $3, $4, $5 }' "$data"

gnuplot <<GNUPLOT
set terminal pngcairo size 1000,600 font ",11"
set output "$out/06-memory.png"
set title "Bytes per rank, Ψ = $psi: the paper's formulas (lines), the ledger (points)"
set xlabel "data-parallel ranks P"
set ylabel "bytes on rank 0"
set xtics 1
set xrange [0.8:4.2]
set yrange [0:*]
set key outside right
psi = $psi
plot 16*psi                 with lines lc 1 title "stage 0: 16Ψ", \
     4*psi + 12*psi/x        with lines lc 2 title "stage 1: 4Ψ + 12Ψ/P", \
     2*psi + 14*psi/x        with lines lc 3 title "stage 2: 2Ψ + 14Ψ/P", \
     16*psi/x                with lines lc 4 title "stage 3: 16Ψ/P", \
     for [s=0:3] "$data" using 1:(\$2 == s ? \$3 : 1/0) with points pt 7 ps 1.5 lc s+1 title sprintf("stage %d, measured", s), \
     for [s=0:3] "$data" using 1:(\$2 == s ? \$5 : 1/0) with points pt 6 ps 1.2 lc s+1 title sprintf("stage %d, whole peak", s)
GNUPLOT
echo "plot: $out/06-memory.png"
