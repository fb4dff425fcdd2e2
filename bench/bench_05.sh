#!/usr/bin/env bash
# Lesson 05's benchmark: the ring allreduce against MPI_Allreduce on 2 and 4
# ranks (bench_05, which interleaves the two within each run), then the
# training throughput on 1 and 2 ranks: runs alternate, medians of samples
# per second. Writes rows to $ZZ_BENCH_CSV. Run by make bench.
set -euo pipefail
cd "$(dirname "$0")/.."
mpirun_cmd=${ZZ_MPIRUN:-scripts/mpirun}
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
for ranks in 2 4; do
    [ "$ranks" -le "$cores" ] || echo "(note: $ranks ranks on $cores cores: oversubscribed, so these figures say little about a real network)"
    # shellcheck disable=SC2086  # ZZ_MPIRUN is a command line
    $mpirun_cmd -np $ranks build/bench/bench_05
    echo
done

program=${ZZ_BENCH_BUILD:-build/solution}/05-data-parallel/train
runs=${BENCH_RUNS:-3}
log=build/bench/bench_05_train.log
: > "$log"
for ((run = 0; run < runs; run++)); do
    for ranks in 1 2; do
        # shellcheck disable=SC2086
        $mpirun_cmd -np $ranks --bind-to core $program --steps 200 \
            --local-batch $((64 / ranks)) | grep '^summary:' >> "$log"
    done
done
# The training loop's own samples per second (start-up excluded), medians.
awk -v csv="${ZZ_BENCH_CSV:-/dev/null}" -f bench/summary.awk -f /dev/stdin "$log" <<'AWK'
    {
        p = value["ranks"]; count[p]++; rate[p, count[p]] = value["samples_per_s"]
    }
    END {
        for (p = 1; p <= 2; p++) {
            for (i = 1; i <= count[p]; i++) r[i] = rate[p, i]
            R[p] = median(r, count[p])
        }
        printf "lesson 05: training throughput, global batch 64, 200 steps, medians of %d alternating runs\n", count[1]
        printf "  ranks  samples/s  speedup\n"
        for (p = 1; p <= 2; p++) printf "  %5d  %9.0f  %7.2f\n", p, R[p], R[p] / R[1]
        printf "05,train,batch64,1,1,throughput,%.6g,samples/s,,\n", R[1] >> csv
        printf "05,train,batch64,1,2,throughput,%.6g,samples/s,train_p1,%.3f\n", R[2], R[2] / R[1] >> csv
    }
AWK
