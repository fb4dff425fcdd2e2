#!/usr/bin/env bash
# Lesson 02's benchmark: strong scaling of the row split on the same 8192 x
# 8192 matrix (512 MiB), P = 1 and 2 ranks, and 4 and 8 where the machine
# has that many cores (BENCH_02_RANKS="1 2 3" says which), the time split
# into computing and communicating. Runs of each P alternate (a busy
# neighbour slows all alike); each run reports the medians of its
# repetitions, as the slowest rank saw them; the median over runs is
# reported. Writes rows to $ZZ_BENCH_CSV. Run by make bench.
set -euo pipefail
cd "$(dirname "$0")/.."
mpirun_cmd=${ZZ_MPIRUN:-scripts/mpirun}
program=${ZZ_BENCH_BUILD:-build/solution}/02-mpi-matvec/matvec_mpi
runs=${BENCH_RUNS:-5}
size=8192
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
rank_counts=${BENCH_02_RANKS:-1 2}
if [ -z "${BENCH_02_RANKS:-}" ]; then
    for ranks in 4 8; do
        [ "$ranks" -le "$cores" ] && rank_counts="$rank_counts $ranks"
    done
fi
case " $rank_counts " in
    *" 1 "*) ;;
    *) echo "bench_02: BENCH_02_RANKS must include 1, the baseline: '$rank_counts'" >&2; exit 2 ;;
esac
log=build/bench/bench_02.log
: > "$log"
for ((run = 0; run < runs; run++)); do
    for ranks in $rank_counts; do
        # shellcheck disable=SC2086  # ZZ_MPIRUN is a command line
        $mpirun_cmd -np $ranks --bind-to core $program --m $size --n $size \
            --reps 10 | grep '^summary:' >> "$log"
    done
done
# Medians per rank count, then the table, the CSV rows and the target.
awk -v csv="${ZZ_BENCH_CSV:-/dev/null}" -v size="${size}x${size}" -v rank_counts="$rank_counts" \
    -f bench/summary.awk -f /dev/stdin "$log" <<'AWK'
    {
        p = value["ranks"]; count[p]++
        total[p, count[p]] = value["total_ms"]
        compute[p, count[p]] = value["compute_ms"]
        comm[p, count[p]] = value["comm_ms"]
    }
    END {
        np = split(rank_counts, P, " ")
        for (k = 1; k <= np; k++) {
            p = P[k]; n = count[p]
            for (i = 1; i <= n; i++) { t[i] = total[p, i]; c[i] = compute[p, i]; m[i] = comm[p, i] }
            T[p] = median(t, n); C[p] = median(c, n); M[p] = median(m, n)
        }
        printf "lesson 02: row split, A %s, medians of %d alternating runs\n", size, count[P[1]]
        printf "  ranks  total (ms)  compute (ms)  communicate (ms)  speedup  efficiency\n"
        for (k = 1; k <= np; k++) {
            p = P[k]
            printf "  %5d  %10.3f  %12.3f  %16.3f  %7.2f  %10.2f\n", p, T[p], C[p], M[p], T[1] / T[p], T[1] / T[p] / p
        }
        if (2 in T)
            printf "targets: parallel efficiency at P = 2 >= 0.8: %.2f\n", T[1] / T[2] / 2
        for (k = 1; k <= np; k++) {
            p = P[k]
            printf "02,rows,%s,1,%d,total_time,%.6g,ms,%s,%s\n", size, p, T[p], p == 1 ? "" : "rows_p1", p == 1 ? "" : sprintf("%.3f", T[p] / T[1]) >> csv
            printf "02,rows,%s,1,%d,compute_time,%.6g,ms,,\n", size, p, C[p] >> csv
            printf "02,rows,%s,1,%d,comm_time,%.6g,ms,,\n", size, p, M[p] >> csv
        }
        for (k = 1; k <= np; k++)
            if ((p = P[k]) > 1)
                printf "02,rows,%s,1,%d,parallel_efficiency,%.6g,,rows_p1,%.3f\n", size, p, T[1] / T[p] / p, T[1] / T[p] / p >> csv
    }
AWK
