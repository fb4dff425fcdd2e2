#!/usr/bin/env bash
# Lesson 07's benchmark, in two parts. First the CPU Adam (bench_07.c):
# the fused update against the scalar reference, an unfused version, a
# read-modify-write stream and, where it is installed, PyTorch. Then the
# offload step: where a step's time goes, with and without the delayed
# parameter update, on 1 rank and on 2 (where the allgather has something
# to gather), of a model of 3.2 million parameters (4 hidden layers of
# 1024), each pair of runs alternating, medians over the repetitions. The
# columns are the driver's summary keys (lessons/07-offload/main.c says
# how each is taken), in ms a step: forward; backward, with each layer's
# reduce-scatter and copy down started; waiting for the copies down (the
# device layer's clock); the CPU Adam, wherever it ran (the update's time
# less what it spent in MPI and waiting for copies and for the task, and,
# with the delay, the task's runs on their own thread, beside the next
# step's forward and backward); waiting for the copies up; inside MPI
# during the update (the communication ledger's clock: the allgather);
# and the update waiting for the delayed update's task. Writes rows to
# $ZZ_BENCH_CSV. Run by make bench.
set -euo pipefail
cd "$(dirname "$0")/.."
OPENBLAS_NUM_THREADS=1 build/bench/bench_07
echo

mpirun_cmd=${ZZ_MPIRUN:-scripts/mpirun}
program=${ZZ_BENCH_BUILD:-build/solution}/07-offload/train_offload
runs=${BENCH_RUNS:-5}
hidden=4 width=1024 steps=30 warmup=5
log=build/bench/bench_07_offload.log
: > "$log"
for ((rep = 0; rep < runs; rep++)); do
    for ranks in 1 2; do
        for ((k = 0; k < 2; k++)); do
            dpu=$(( (k + rep) % 2 == 0 ? 0 : warmup ))
            # shellcheck disable=SC2086  # ZZ_MPIRUN is a command line
            $mpirun_cmd -np $ranks $program --hidden $hidden --width $width \
                --steps $steps --dpu $dpu --held-out 256 |
                grep '^summary:' >> "$log"
        done
    done
done
awk -v csv="${ZZ_BENCH_CSV:-/dev/null}" -v hidden=$hidden -v width=$width \
    -v steps=$steps -v warmup=$warmup -f bench/summary.awk -f /dev/stdin "$log" <<'AWK'
BEGIN {
    count = split("forward_ms backward_ms wait_down_ms adam_ms wait_up_ms mpi_ms task_wait_ms update_ms samples_per_s", keys, " ")
}
{
    p = value["ranks"]; d = value["dpu"] > 0 ? 1 : 0
    n[p, d]++
    for (i = 1; i <= count; i++) got[p, d, keys[i], n[p, d]] = value[keys[i]]
}
END {
    for (p = 1; p <= 2; p++)
        for (d = 0; d <= 1; d++)
            for (i = 1; i <= count; i++) {
                for (k = 1; k <= n[p, d]; k++) list[k] = got[p, d, keys[i], k]
                M[p, d, keys[i]] = median(list, n[p, d])
            }
    printf "lesson 07: the offload step, %d hidden layers of %d, %d steps, medians of %d runs (alternating); ms a step\n", hidden, width, steps, n[1, 0]
    printf "  %-5s %-24s %7s %8s %9s %8s %7s %6s %9s %9s %9s\n", "ranks", "run", "forward", "backward", "down wait", "CPU Adam", "up wait", "MPI", "task wait", "samples/s", "of no DPU"
    shape = sprintf("hidden%dx%d", hidden, width)
    for (p = 1; p <= 2; p++)
        for (d = 0; d <= 1; d++) {
            name = d ? sprintf("delayed update (--dpu %d)", warmup) : "no delay"
            printf "  %-5d %-24s %7.2f %8.2f %9.2f %8.2f %7.2f %6.2f %9.2f %9.0f %9.2f\n", p, name, M[p, d, "forward_ms"], M[p, d, "backward_ms"], M[p, d, "wait_down_ms"], M[p, d, "adam_ms"], M[p, d, "wait_up_ms"], M[p, d, "mpi_ms"], M[p, d, "task_wait_ms"], M[p, d, "samples_per_s"], M[p, d, "samples_per_s"] / M[p, 0, "samples_per_s"]
            variant = d ? "offload_dpu" : "offload"
            for (i = 1; i < count; i++)
                printf "07,%s,%s,1,%d,%s,%.6g,ms,,\n", variant, shape, p, keys[i], M[p, d, keys[i]] >> csv
            printf "07,%s,%s,1,%d,throughput,%.6g,samples/s,%s,%s\n", variant, shape, p, M[p, d, "samples_per_s"], d ? "offload" : "", d ? sprintf("%.3f", M[p, 1, "samples_per_s"] / M[p, 0, "samples_per_s"]) : "" >> csv
        }
    printf "  (down wait, up wait: waiting for copies; MPI: inside MPI during the update, the allgather; task wait: the update waiting for the delayed update's task)\n"
    printf "  (CPU Adam: the update's remainder on the main thread, and with the delay the task's runs on their own thread, beside the next step's forward and backward)\n"
    printf "  (here the device is the host's own cores: the delayed update moves the CPU Adam beside the next step, it does not make it free)\n"
}
AWK
