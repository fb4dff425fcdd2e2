#!/usr/bin/env bash
# Lesson 06's benchmark: the step time of ZeRO stages 1, 2 and 3 (and 3
# with prefetch) against stage 0, on 2 ranks and on 4 (oversubscribed on
# fewer than 4 cores), the same model and global batch for every stage.
# Within each repetition the stages run one after another, starting from a
# different one each time (a busy neighbour slows them alike); the medians
# of samples per second over the repetitions give the ratios, all from this
# one run. Each stage's peak bytes per rank and bytes sent a step are rank
# 0's, from the driver's summary line (its ledgers). Then the ZeRO paper's
# Figure 1, measured: the model state rank 0 holds at each stage on 1 to 4
# ranks, against the formulas of common/zero_memory.h (make plots draws
# it). Writes rows to $ZZ_BENCH_CSV. Run by make bench.
set -euo pipefail
cd "$(dirname "$0")/.."
mpirun_cmd=${ZZ_MPIRUN:-scripts/mpirun}
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
program=${ZZ_BENCH_BUILD:-build/solution}/06-zero/train_zero
runs=${BENCH_RUNS:-5}
hidden=3 width=512 global_batch=128
# The variants: a stage, or a stage with flags.
variants=("0" "1" "2" "3" "3 --prefetch")

for ranks in 2 4; do
    log=build/bench/bench_06_p$ranks.log
    : > "$log"
    note=""
    steps=40 reps=$runs
    if [ "$ranks" -gt "$cores" ]; then
        # Oversubscribed ranks wait for a core at every message: slow, and
        # these figures say little about a real network.
        note=" (oversubscribed: $ranks ranks on $cores cores)"
        steps=10 reps=$((runs < 3 ? runs : 3))
    fi
    for ((rep = 0; rep < reps; rep++)); do
        for ((k = 0; k < ${#variants[@]}; k++)); do
            # shellcheck disable=SC2206  # a variant is a stage and its flags
            variant=(${variants[(k + rep) % ${#variants[@]}]})
            # shellcheck disable=SC2086  # ZZ_MPIRUN is a command line
            env OMP_NUM_THREADS=1 $mpirun_cmd -np $ranks $program \
                --stage "${variant[@]}" --hidden $hidden --width $width \
                --local-batch $((global_batch / ranks)) --steps $steps \
                --samples 4096 --held-out 256 | grep '^summary:' >> "$log"
        done
    done
    awk -v csv="${ZZ_BENCH_CSV:-/dev/null}" -v P="$ranks" -v note="$note" \
        -v hidden=$hidden -v width=$width -v batch=$global_batch -v steps="$steps" \
        -f bench/summary.awk -f /dev/stdin "$log" <<'AWK'
    {
        v = value["stage"] (value["prefetch"] == 1 ? "p" : "")
        count[v]++; rate[v, count[v]] = value["samples_per_s"]
        peak[v] = value["peak_bytes"]; sent[v] = value["sent_bytes_per_step"]
    }
    END {
        split("0 1 2 3 3p", order, " ")
        for (i = 1; i <= 5; i++) {
            v = order[i]
            for (k = 1; k <= count[v]; k++) r[k] = rate[v, k]
            R[v] = median(r, count[v])
        }
        shape = sprintf("hidden%dx%d_batch%d", hidden, width, batch)
        printf "lesson 06: ZeRO stages on %d ranks%s: %d hidden layers of %d, global batch %d, %d steps, medians of %d runs (stages alternating)\n", P, note, hidden, width, batch, steps, count["0"]
        printf "  stage         samples/s  of stage 0  peak bytes a rank  sent a step (bytes)\n"
        for (i = 1; i <= 5; i++) {
            v = order[i]
            name = v == "3p" ? "3 prefetch" : v
            printf "  %-12s  %9.0f  %10.2f  %17d  %19d\n", name, R[v], R[v] / R["0"], peak[v], sent[v]
        }
        printf "  prefetch against stage 3 without: %.2f\n", R["3p"] / R["3"]
        if (P == 2)
            printf "targets: at P = 2, stages 1 and 2 >= 0.9 of stage 0: %.2f, %.2f; stage 3 >= 0.7: %.2f; prefetch >= 0.95 of stage 3: %.2f\n", R["1"] / R["0"], R["2"] / R["0"], R["3"] / R["0"], R["3p"] / R["3"]
        for (i = 1; i <= 5; i++) {
            v = order[i]
            variant = v == "3p" ? "stage3_prefetch" : "stage" v
            base = v == "0" ? "" : v == "3p" ? "stage3" : "stage0"
            ratio = v == "0" ? "" : sprintf("%.3f", v == "3p" ? R[v] / R["3"] : R[v] / R["0"])
            printf "06,%s,%s,1,%d,throughput,%.6g,samples/s,%s,%s\n", variant, shape, P, R[v], base, ratio >> csv
            printf "06,%s,%s,1,%d,peak_bytes,%d,bytes,,\n", variant, shape, P, peak[v] >> csv
            printf "06,%s,%s,1,%d,sent_per_step,%d,bytes,,\n", variant, shape, P, sent[v] >> csv
        }
    }
AWK
    echo
done

# Bytes per rank against P: one short run per stage and rank count (the
# bytes depend on neither the steps nor the batch), the memory ledger's
# parameters + gradients + optimizer state on rank 0 (its last lines), and
# Ψ (its first line), which the formulas' lines need.
log=build/bench/bench_06_memory.log
: > "$log"
for ranks in 1 2 3 4; do
    for stage in 0 1 2 3; do
        # shellcheck disable=SC2086  # ZZ_MPIRUN is a command line
        env OMP_NUM_THREADS=1 $mpirun_cmd -np $ranks $program --stage $stage \
            --hidden $hidden --width $width --local-batch 8 --steps 1 \
            --samples 256 --held-out 16 |
            sed -n -e 's/.* \([0-9]*\) parameters in .*/parameters \1/p' \
                -e "s/^rank 0 held at most [0-9]* bytes: parameters \([0-9]*\), gradients \([0-9]*\), optimizer \([0-9]*\),.*/held $ranks $stage \1 \2 \3/p" >> "$log"
    done
done
awk -v csv="${ZZ_BENCH_CSV:-/dev/null}" -v shape="hidden${hidden}x${width}" \
    -f /dev/stdin "$log" <<'AWK'
$1 == "parameters" { psi = $2 }
$1 == "held" { P = $2; s = $3; got[P, s] = $4 + $5 + $6; seen[P, s] = 1 }
END {
    if (psi == "") {
        print "bench_06: the driver did not say how many parameters" > "/dev/stderr"
        exit 1
    }
    printf "lesson 06: model state on rank 0 (parameters, gradients, optimizer state: the memory ledger's peaks), %s, %d parameters, against the ZeRO paper's formulas for rank 0's block\n", shape, psi
    printf "  ranks  stage  ledger (bytes)  formula (bytes)\n"
    missing = 0
    for (P = 1; P <= 4; P++)
        for (s = 0; s <= 3; s++) {
            if (!seen[P, s]) {
                printf "bench_06: no ledger line from the run at P = %d, stage %d\n", P, s > "/dev/stderr"
                missing = 1
                continue
            }
            own = int((psi + P - 1) / P)   # rank 0's block, the largest
            formula = (s == 3 ? 2 * own : 2 * psi) + (s >= 2 ? 2 * own : 2 * psi) + (s >= 1 ? 12 * own : 12 * psi)
            printf "  %5d  %5d  %14d  %15d%s\n", P, s, got[P, s], formula, got[P, s] == formula ? "" : "  (differs)"
            printf "06,stage%d,%s,1,%d,model_state_bytes,%d,bytes,,\n", s, shape, P, got[P, s] >> csv
        }
    printf "06,model,%s,1,1,parameters,%d,count,,\n", shape, psi >> csv
    exit missing
}
AWK
