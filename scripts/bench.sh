#!/usr/bin/env bash
# make bench: runs every lesson's benchmark, each comparison side by side in
# one run; prints the tables and writes build/bench/results.csv.
#   bench/bench_NN.sh, when it exists, runs lesson NN's benchmark (MPI ones
#   launch several runs, interleaved); otherwise build/bench/bench_NN does.
# They time the programs of $ZZ_BENCH_BUILD (make sets it): the solutions',
# or in a student release the student's own. --lesson LESSON (make bench
# L=NN): that lesson's alone. A benchmark that fails (in a student's build,
# a TODO not done yet) says so and the others go on; the exit status is 1
# when one failed.
set -uo pipefail
cd "$(dirname "$0")/.."
only=""
case "${1:-}" in
    "") ;;
    --lesson) only=${2:?usage: scripts/bench.sh [--lesson LESSON]} ;;
    *) echo "usage: scripts/bench.sh [--lesson LESSON]" >&2; exit 2 ;;
esac
build=${ZZ_BENCH_BUILD:-build/solution}
export ZZ_BENCH_BUILD=$build
mkdir -p build/bench || exit 2
export ZZ_BENCH_CSV=build/bench/results.csv
# One lesson's run adds its rows to the others' of an earlier run.
if [ -z "$only" ]; then
    rm -f "$ZZ_BENCH_CSV"
elif [ -e "$ZZ_BENCH_CSV" ]; then
    grep -v "^${only%%-*}," "$ZZ_BENCH_CSV" > "$ZZ_BENCH_CSV.others"
    mv "$ZZ_BENCH_CSV.others" "$ZZ_BENCH_CSV"
fi
case $build in
    build/solution) whose="the reference solutions ($build/)" ;;
    *) whose="your own files ($build/)" ;;
esac
echo "machine: $(uname -sm), $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores; timing $whose"
failed=()
for source in bench/bench_*.c bench/bench_*.sh; do
    [ -e "$source" ] || continue
    name=$(basename "${source%.*}")
    number=${name#bench_}
    [ -z "$only" ] || [ "$number" = "${only%%-*}" ] || continue
    [ "${source##*.}" = c ] && [ -e "bench/$name.sh" ] && continue
    # A lesson that is not built here (CUDA without nvcc) has no benchmark
    # to run: say so, and go on.
    unbuilt=""
    for lesson in ${ZZ_UNBUILT:-}; do
        case $lesson in "$number"-*) unbuilt=$lesson ;; esac
    done
    if [ -n "$unbuilt" ]; then
        echo "lesson $number: skipped: ${ZZ_UNBUILT_REASON:-not built here}"
        echo
        continue
    fi
    case "$source" in
        # Serial benchmarks: one thread, whatever the environment says;
        # threaded ones set their own counts.
        *.c) OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "build/bench/$name" ;;
        *.sh) bash "$source" ;;
    esac
    status=$?
    if [ "$status" -ne 0 ]; then
        echo "lesson $number: the benchmark stopped (exit status $status; a \"not started\" line above names a TODO still to do)"
        failed+=("$number")
    fi
    echo
done
echo "results: $ZZ_BENCH_CSV"
if [ ${#failed[@]} -gt 0 ]; then
    echo "bench: lesson ${failed[*]} did not finish (see above); the others' figures are in $ZZ_BENCH_CSV" >&2
    exit 1
fi
