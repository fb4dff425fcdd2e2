#!/usr/bin/env bash
# Lesson 08's benchmark: training with tensor parallelism on a model whose
# products dominate (2 hidden layers of 1024: the row layer's W is 1024 x
# 1024), at t = 1 and 2, 2 with sequence parallelism, and 4 (oversubscribed
# on fewer than 4 cores), one OpenMP thread a rank, the same batch of 64
# for every t. Within each repetition the variants run one after another,
# starting from a different one each time, and between them lesson 03's
# product on 1 and 2 threads (its rows_speedup): the ideal speedup that two
# cores give a memory-bound product here, measured beside the runs it
# judges. Medians of samples per second and of the share of the steps spent
# inside MPI (the communication ledger's clock). Writes rows to
# $ZZ_BENCH_CSV. Run by make bench.
set -euo pipefail
cd "$(dirname "$0")/.."
mpirun_cmd=${ZZ_MPIRUN:-scripts/mpirun}
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
build=${ZZ_BENCH_BUILD:-build/solution}
program=$build/08-tensor-parallel/train_tp
runs=${BENCH_RUNS:-5}
hidden=2 width=1024 batch=64 steps=20
variants=("1" "2" "2 --sequence-parallel")
[ "$cores" -ge 4 ] || note4=" (oversubscribed: 4 ranks on $cores cores)"

# Lesson 03's program, for the ideal (make bench L=08 builds lesson 08's
# programs only).
[ -x "$build/03-openmp/openmp" ] ||
    make -s --no-print-directory "$build/03-openmp/openmp"
log=build/bench/bench_08.log
: > "$log"
for ((rep = 0; rep < runs; rep++)); do
    for ((k = 0; k < ${#variants[@]}; k++)); do
        # shellcheck disable=SC2206  # a variant is t and its flags
        variant=(${variants[(k + rep) % ${#variants[@]}]})
        # shellcheck disable=SC2086  # ZZ_MPIRUN is a command line
        env OMP_NUM_THREADS=1 $mpirun_cmd -np "${variant[0]}" $program \
            "${variant[@]:1}" --hidden $hidden --width $width \
            --local-batch $batch --steps $steps --samples 4096 \
            --held-out 256 | grep '^summary:' >> "$log"
    done
    env OMP_NUM_THREADS=2 "$build/03-openmp/openmp" --threads 2 --reps 5 |
        grep '^summary:' >> "$log"
done
# t = 4: fewer runs, oversubscribed here.
for ((rep = 0; rep < (runs < 3 ? runs : 3); rep++)); do
    # shellcheck disable=SC2086
    env OMP_NUM_THREADS=1 $mpirun_cmd -np 4 $program --hidden $hidden \
        --width $width --local-batch $batch --steps $steps --samples 4096 \
        --held-out 256 | grep '^summary:' >> "$log"
done

awk -v csv="${ZZ_BENCH_CSV:-/dev/null}" -v note4="${note4:-}" \
    -v hidden=$hidden -v width=$width -v batch=$batch -v steps=$steps \
    -f bench/summary.awk -f /dev/stdin "$log" <<'AWK'
    {
        if ("rows_speedup" in value) {
            nl++; lesson03[nl] = value["rows_speedup"]
            next
        }
        v = value["tp"] (value["sequence_parallel"] == 1 ? "s" : "")
        count[v]++; rate[v, count[v]] = value["samples_per_s"]
        share[v, count[v]] = value["mpi_share"]
        sent[v] = value["tp_sent_bytes_per_step"]; peak[v] = value["peak_bytes"]
    }
    END {
        split("1 2 2s 4", order, " ")
        for (i = 1; i <= 4; i++) {
            v = order[i]
            for (k = 1; k <= count[v]; k++) { r[k] = rate[v, k]; s[k] = share[v, k] }
            R[v] = median(r, count[v]); S[v] = median(s, count[v])
        }
        ideal = median(lesson03, nl)
        shape = sprintf("hidden%dx%d_batch%d", hidden, width, batch)
        printf "lesson 08: tensor parallelism, %d hidden layers of %d, batch %d, %d steps, 1 thread a rank, medians of %d runs (variants alternating)\n", hidden, width, batch, steps, count["1"]
        printf "  t              samples/s  speedup  in MPI  peak bytes a rank  sent a step (bytes)\n"
        for (i = 1; i <= 4; i++) {
            v = order[i]
            name = v == "2s" ? "2 sequence-par." : v == "4" ? "4" note4 : v
            printf "  %-15s  %9.0f  %7.2f  %5.0f%%  %17d  %19d\n", name, R[v], R[v] / R["1"], 100 * S[v], peak[v], sent[v]
        }
        printf "  sequence parallelism against plain at t = 2: %.2f (it sends %.2f times the bytes on this model: its output layer, whole, gathers its input)\n", R["2s"] / R["2"], sent["2s"] / sent["2"]
        printf "  lesson 03's product on 2 threads against 1 (the ideal here): %.2f\n", ideal
        printf "targets: at t = 2, speedup >= 0.8 of lesson 03's 2-thread speedup: %.2f / %.2f = %.2f\n", R["2"] / R["1"], ideal, (R["2"] / R["1"]) / ideal
        for (i = 1; i <= 4; i++) {
            v = order[i]
            variant = v == "2s" ? "tp2_sequence_parallel" : "tp" v
            base = v == "1" ? "" : v == "2s" ? "tp2" : "tp1"
            ratio = v == "1" ? "" : sprintf("%.3f", v == "2s" ? R[v] / R["2"] : R[v] / R["1"])
            ranks = v == "2s" ? 2 : v + 0
            printf "08,%s,%s,1,%d,throughput,%.6g,samples/s,%s,%s\n", variant, shape, ranks, R[v], base, ratio >> csv
            printf "08,%s,%s,1,%d,mpi_share,%.3f,fraction,,\n", variant, shape, ranks, S[v] >> csv
            printf "08,%s,%s,1,%d,sent_per_step,%d,bytes,,\n", variant, shape, ranks, sent[v] >> csv
        }
        printf "08,lesson03_rows_2_threads,default,2,1,speedup,%.3f,ratio,,\n", ideal >> csv
        printf "08,tp2_of_ideal,%s,1,2,target,%.3f,ratio,lesson03_rows_2_threads,%.3f\n", shape, (R["2"] / R["1"]) / ideal, (R["2"] / R["1"]) / ideal >> csv
    }
AWK
