#!/usr/bin/env bash
# Lesson 09's benchmark: training with pipeline parallelism on a model
# whose products dominate a micro-batch's time (3 hidden layers of 1024, a
# batch of 256), one OpenMP thread a rank: on 2 stages, GPipe and 1F1B with
# m = 1, 2, 4 and 8 micro-batches, against one rank accumulating the same
# micro-batches (1 stage, m = 8), and 1F1B on 4 stages with m = 8
# (oversubscribed on fewer than 4 cores). Each run reports the bubble
# measured on the wall clock (train_pp's measured_bubble: 1 - the ranks'
# busy time over ranks x the steps' spans, second half of the steps)
# beside the virtual clock's (p - 1)/(m + p - 1), and the ledger's peak of
# activations a rank. Within each repetition the variants run one after
# another, starting from a different one each time. Medians. Writes rows
# to $ZZ_BENCH_CSV. Run by make bench.
set -euo pipefail
cd "$(dirname "$0")/.."
mpirun_cmd=${ZZ_MPIRUN:-scripts/mpirun}
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
build=${ZZ_BENCH_BUILD:-build/solution}
program=$build/09-pipeline-parallel/train_pp
runs=${BENCH_RUNS:-3}
hidden=3 width=1024 batch=256 steps=12
variants=("1 gpipe 8" "2 gpipe 1" "2 gpipe 2" "2 gpipe 4" "2 gpipe 8"
          "2 1f1b 1" "2 1f1b 2" "2 1f1b 4" "2 1f1b 8")
[ "$cores" -ge 4 ] || note4=" (oversubscribed: 4 ranks on $cores cores)"
log=build/bench/bench_09.log
mkdir -p build/bench
: > "$log"
run() {  # ranks schedule micro-batches
    # shellcheck disable=SC2086  # ZZ_MPIRUN is a command line
    env OMP_NUM_THREADS=1 $mpirun_cmd -np "$1" $program --schedule "$2" \
        --micro-batches "$3" --hidden $hidden --width $width \
        --local-batch $batch --steps $steps --samples 4096 --held-out 256 |
        grep '^summary:' >> "$log"
}
for ((rep = 0; rep < runs; rep++)); do
    for ((k = 0; k < ${#variants[@]}; k++)); do
        # shellcheck disable=SC2206  # a variant is three words
        variant=(${variants[(k + rep) % ${#variants[@]}]})
        run "${variant[@]}"
    done
done
for ((rep = 0; rep < (runs < 2 ? runs : 2); rep++)); do
    run 4 1f1b 8
done

awk -v csv="${ZZ_BENCH_CSV:-/dev/null}" -v note4="${note4:-}" \
    -v hidden=$hidden -v width=$width -v batch=$batch -v steps=$steps \
    -f bench/summary.awk -f /dev/stdin "$log" <<'AWK'
    {
        v = value["stages"] " " value["schedule"] " " value["micro_batches"]
        count[v]++; rate[v, count[v]] = value["samples_per_s"]
        measured[v, count[v]] = value["measured_bubble"]
        bubble[v] = value["bubble"]; peak[v] = value["peak_activations"]
    }
    END {
        n = split("1 gpipe 8|2 gpipe 1|2 gpipe 2|2 gpipe 4|2 gpipe 8|2 1f1b 1|2 1f1b 2|2 1f1b 4|2 1f1b 8|4 1f1b 8", order, "|")
        for (i = 1; i <= n; i++) {
            v = order[i]
            for (k = 1; k <= count[v]; k++) { r[k] = rate[v, k]; b[k] = measured[v, k] }
            R[v] = median(r, count[v]); B[v] = median(b, count[v])
        }
        shape = sprintf("hidden%dx%d_batch%d", hidden, width, batch)
        printf "lesson 09: pipeline parallelism, %d hidden layers of %d, batch %d, %d steps, 1 thread a rank, medians of %d runs (variants alternating)\n", hidden, width, batch, steps, count["2 gpipe 8"]
        printf "  stages  schedule  m  samples/s  against 1 rank  bubble: virtual  measured  peak activations a rank (bytes)\n"
        base = "1 gpipe 8"
        for (i = 1; i <= n; i++) {
            v = order[i]; split(v, w, " ")
            printf "  %6s  %-8s %2s  %9.0f  %14.2f  %15.4f  %8.4f  %d%s\n", w[1], w[2], w[3], R[v], R[v] / R[base], bubble[v], B[v], peak[v], w[1] == 4 ? note4 : ""
            variant = sprintf("p%s_%s_m%s", w[1], w[2], w[3])
            printf "09,%s,%s,1,%d,throughput,%.6g,samples/s,p1_gpipe_m8,%.3f\n", variant, shape, w[1], R[v], R[v] / R[base] >> csv
            printf "09,%s,%s,1,%d,measured_bubble,%.4f,fraction,virtual_bubble,%.4f\n", variant, shape, w[1], B[v], bubble[v] >> csv
            printf "09,%s,%s,1,%d,peak_activations,%d,bytes,,\n", variant, shape, w[1], peak[v] >> csv
        }
        printf "  1F1B's peak activations against GPipe's at p = 2, m = 8: %.2f\n", peak["2 1f1b 8"] / peak["2 gpipe 8"]
        printf "targets: at p = 2, m = 8, the measured bubble within 0.05 of (p - 1)/(m + p - 1): %.4f against %.4f (%.4f apart); 1F1B's throughput >= 0.95 of GPipe's: %.2f\n", B["2 gpipe 8"], bubble["2 gpipe 8"], B["2 gpipe 8"] - bubble["2 gpipe 8"], R["2 1f1b 8"] / R["2 gpipe 8"]
        printf "09,p2_m8_bubble_gap,%s,1,2,target,%.4f,fraction,virtual_bubble,%.4f\n", shape, B["2 gpipe 8"] - bubble["2 gpipe 8"], bubble["2 gpipe 8"] >> csv
        printf "09,p2_m8_1f1b_of_gpipe,%s,1,2,target,%.3f,ratio,p2_gpipe_m8,%.3f\n", shape, R["2 1f1b 8"] / R["2 gpipe 8"], R["2 1f1b 8"] / R["2 gpipe 8"] >> csv
    }
AWK
