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
             # A lesson that is not built here (CUDA without nvcc) has no
             # benchmark to run: say so, and go on.
             lesson=""
             for unbuilt in ${ZZ_UNBUILT:-}; do
                 case $unbuilt in "${name#bench_}"-*) lesson=$unbuilt ;; esac
             done
             if [ -n "$lesson" ]; then
                 echo "lesson ${name#bench_}: skipped: ${ZZ_UNBUILT_REASON:-not built here}"
                 echo
                 continue
             fi
             # Serial benchmarks: one thread, whatever the environment says;
             # threaded ones set their own counts.
             OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "build/bench/$name" ;;
        *.sh) bash "$source" ;;
    esac
    echo
done
echo "results: $ZZ_BENCH_CSV"
