#!/usr/bin/env bash
# make bench: runs every lesson's benchmark, each comparison side by side in
# one run; prints the tables and writes build/bench/results.csv.
#   bench/bench_NN.sh, when it exists, runs lesson NN's benchmark (MPI ones
#   launch several runs, interleaved); otherwise build/bench/bench_NN does.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/bench
export ZZ_BENCH_CSV=build/bench/results.csv
rm -f "$ZZ_BENCH_CSV"
echo "machine: $(uname -sm), $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores"
for source in bench/bench_*.c bench/bench_*.sh; do
    [ -e "$source" ] || continue
    name=$(basename "${source%.*}")
    case "$source" in
        *.c) [ -e "bench/$name.sh" ] && continue
             # Serial benchmarks: one thread, whatever the environment says;
             # threaded ones set their own counts.
             OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "build/bench/$name" ;;
        *.sh) bash "$source" ;;
    esac
    echo
done
echo "results: $ZZ_BENCH_CSV"
