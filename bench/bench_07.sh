#!/usr/bin/env bash
# Lesson 07's benchmark, in two parts. First the CPU Adam (bench_07.c):
# the fused update against the scalar reference, an unfused version, a
# read-modify-write stream and, where it is installed, PyTorch. Then the
# offload step: where a step's time goes, with and without the delayed
# parameter update, on one rank of a model of 3.2 million parameters (4
# hidden layers of 1024), the two runs alternating, medians over the
# repetitions. The phases are the driver's (its summary line): forward;
# backward, with each layer's reduce-scatter and copy down started; the
# update; and, inside those, the time spent waiting for copies down and up
# (the device layer's clock). The CPU Adam and the allgather are the rest
# of the update. Writes rows to $ZZ_BENCH_CSV. Run by make bench.
set -euo pipefail
cd "$(dirname "$0")/.."
OPENBLAS_NUM_THREADS=1 build/bench/bench_07
echo

mpirun_cmd=${ZZ_MPIRUN:-mpirun}
program=build/solution/07-offload/train_offload
runs=${BENCH_RUNS:-5}
hidden=4 width=1024 steps=30 warmup=5
log=build/bench/bench_07_offload.log
: > "$log"
for ((rep = 0; rep < runs; rep++)); do
    for ((k = 0; k < 2; k++)); do
        dpu=$(( (k + rep) % 2 == 0 ? 0 : warmup ))
        # shellcheck disable=SC2086  # ZZ_MPIRUN is a command line
        $mpirun_cmd -np 1 $program --hidden $hidden --width $width \
            --steps $steps --dpu $dpu --held-out 256 | grep '^summary:' >> "$log"
    done
done
awk -v csv="${ZZ_BENCH_CSV:-/dev/null}" -v hidden=$hidden -v width=$width \
    -v steps=$steps -v warmup=$warmup -f bench/summary.awk -f /dev/stdin "$log" <<'AWK'
{
    d = value["dpu"] > 0 ? 1 : 0
    n[d]++
    split("forward_ms backward_ms update_ms wait_down_ms wait_up_ms samples_per_s", keys, " ")
    for (i = 1; i <= 6; i++) got[d, keys[i], n[d]] = value[keys[i]]
}
END {
    split("forward_ms backward_ms update_ms wait_down_ms wait_up_ms samples_per_s", keys, " ")
    for (d = 0; d <= 1; d++)
        for (i = 1; i <= 6; i++) {
            for (k = 1; k <= n[d]; k++) list[k] = got[d, keys[i], k]
            M[d, keys[i]] = median(list, n[d])
        }
    printf "lesson 07: the offload step on 1 rank, %d hidden layers of %d, %d steps, medians of %d runs (alternating); ms a step\n", hidden, width, steps, n[0]
    printf "  %-24s %8s %9s %7s %12s %10s %10s %9s\n", "run", "forward", "backward", "update", "wait down", "wait up", "samples/s", "of no DPU"
    for (d = 0; d <= 1; d++) {
        name = d ? sprintf("delayed update (--dpu %d)", warmup) : "no delay"
        printf "  %-24s %8.2f %9.2f %7.2f %12.2f %10.2f %10.0f %9.2f\n", name, M[d, "forward_ms"], M[d, "backward_ms"], M[d, "update_ms"], M[d, "wait_down_ms"], M[d, "wait_up_ms"], M[d, "samples_per_s"], M[d, "samples_per_s"] / M[0, "samples_per_s"]
        variant = d ? "offload_dpu" : "offload"
        shape = sprintf("hidden%dx%d", hidden, width)
        for (i = 1; i <= 5; i++)
            printf "07,%s,%s,1,1,%s,%.6g,ms,,\n", variant, shape, keys[i], M[d, keys[i]] >> csv
        printf "07,%s,%s,1,1,throughput,%.6g,samples/s,%s,%s\n", variant, shape, M[d, "samples_per_s"], d ? "offload" : "", d ? sprintf("%.3f", M[1, "samples_per_s"] / M[0, "samples_per_s"]) : "" >> csv
    }
    printf "  (here the device is the host's own cores: the delayed update moves the CPU Adam beside the next step, it does not make it free)\n"
}
AWK
