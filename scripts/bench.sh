#!/usr/bin/env bash
# make bench: runs every lesson's benchmark, each comparison side by side in
# one run; prints the tables and writes build/bench/results.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/bench
export ZZ_BENCH_CSV=build/bench/results.csv
rm -f "$ZZ_BENCH_CSV"
# One thread for the serial lessons, whatever the environment says.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
echo "machine: $(uname -sm), $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores"
build/bench/bench_01 "$@"
echo
echo "results: $ZZ_BENCH_CSV"
