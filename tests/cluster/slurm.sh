#!/usr/bin/env bash
# make test-cluster's Slurm part, run by tests/cluster/run.sh inside
# scripts/cluster/slurm.sh (a real Slurm on the namespace hosts: slurmctld
# on node1, a slurmd on each host, MpiDefault=none). It checks:
#   - every job script in scripts/slurm/, submitted with sbatch --wait as
#     the scripts say (arguments after the script make the runs small; the
#     reference solution's build, ZZ_BUILD=build/solution), once with
#     ranks started by srun --mpi=pmix and once by mpirun inside the
#     allocation: the job's exit status is 0, each run says it is right,
#     and each run's world is the tasks asked for, across both nodes. A
#     GPU job is skipped, with the reason, where there is no GPU;
#   - what srun without PMI does: matvec_mpi.sbatch with srun --mpi=none
#     fails in MPI_Init (Open MPI says why); with ranks that start alone,
#     each rank 0 of 1 and each right (as MPICH's do), the scripts'
#     world-size check must end the job with status 1 and say so;
#   - srun --mpi=pmix from outside a job: one world of 4 ranks;
#   - make grade-all SUBMISSIONS=DIR L=02 SLURM=1 (JOBS=2, and options for
#     sbatch in GRADE_SLURM_OPTIONS), a job array over three
#     submissions (the solution, one with a broken fixture's patch, the
#     untouched skeleton), gives the roster of grading them one at a time.
# Writes under build/test-cluster/slurm/; adds "PASS FAIL SKIP" lines to
# build/test-cluster/tally.
set -u
cd "$(dirname "$0")/../.."
work=build/test-cluster/slurm
tally=build/test-cluster/tally
rm -rf "$work"
mkdir -p "$work"
touch "$work/ran"
status=0
pass() { echo "  [pass] $*"; echo "1 0 0" >> "$tally"; }
fail() { echo "  [FAIL] $*"; echo "0 1 0" >> "$tally"; status=1; }
skip() { echo "  [skip] $*"; echo "0 0 1" >> "$tally"; }
limit=300

export ZZ_BUILD=build/solution
export TMPDIR=$ZZ_CLUSTER_DIR/tmp
[ "$(id -u)" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The nodes say they have 8 CPUs each (this machine has fewer cores), so
# mpirun cannot bind a rank to 4 cores of its own.
export ZZ_MPIRUN_BIND="--bind-to none"
nodes=$(sinfo -h -o '%N' | head -1)

# Submits a job script and waits: submit NAME SCRIPT [ARG...]; sets $log
# and $job_status.
submit() {
    local name=$1
    shift
    log=$work/$name.out
    timeout -k 10 "$limit" sbatch --wait --output="$log" "$@" > "$work/$name.submit" 2>&1
    job_status=$?
    [ -f "$log" ] || cp "$work/$name.submit" "$log"
}
show() { tail -"${2:-6}" "$1" | sed 's/^/      /'; }

# Checks a job's output: every run right, and each world as asked.
check_job() {   # check_job LABEL RUNS WORLD RIGHT-PATTERN
    local label=$1 runs=$2 world=$3 right=$4 worlds rights
    if [ "$job_status" != 0 ]; then
        fail "$label: the job ended with status $job_status ($log):"
        show "$log"
        return
    fi
    worlds=$(grep -Fxc "world size: $world, as asked, on $nodes" "$log")
    rights=$(grep -Ec "$right" "$log")
    if [ "$worlds" = "$runs" ] && [ "$rights" = "$runs" ]; then
        pass "$label: status 0; $runs run(s) right, each $world on $nodes"
    else
        fail "$label: $rights of $runs runs right, $worlds of $runs of $world on $nodes ($log):"
        show "$log"
    fi
}

echo "Slurm: the job scripts in scripts/slurm/, by srun --mpi=pmix and by mpirun"
for script in scripts/slurm/*.sbatch; do
    base=$(basename "$script" .sbatch)
    case "$base" in
        matvec_mpi)
            for launcher in srun mpirun; do
                ZZ_LAUNCHER=$launcher submit "$base-$launcher" "$script" --m 2048 --n 512 --reps 3
                check_job "$base.sbatch, ranks by $launcher" 2 "4 ranks" ': right$'
            done ;;
        hybrid)
            for launcher in srun mpirun; do
                ZZ_LAUNCHER=$launcher submit "$base-$launcher" "$script" --m 1024 --n 512
                check_job "$base.sbatch, ranks by $launcher" 1 "4 ranks x 4 threads" '^  right: '
            done ;;
        cuda_matvec)
            # What Slurm says to it here (--test-only: not submitted).
            said=$(sbatch --test-only "$script" 2>&1 | tail -1)
            if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; }; then
                skip "$base.sbatch: no GPU on this machine (nvidia-smi finds none); this Slurm, which has no GPUs to give, answers: $said"
            elif ! command -v nvcc >/dev/null 2>&1; then
                skip "$base.sbatch: a GPU, but no nvcc to build lesson 04 with"
            else
                skip "$base.sbatch: this test's Slurm has no gpu GRES configured (a GPU is here: run it on a real cluster)"
            fi ;;
        *)
            fail "$base.sbatch: a job script this test does not know: say how to check it in tests/cluster/slurm.sh" ;;
    esac
done

# srun from the login node, as docs/clusters.md (its Slurm section) shows it.
srun_log=$work/srun-direct.out
timeout -k 10 "$limit" srun --nodes=2 --ntasks=4 --mpi=pmix build/solution/02-mpi-matvec/matvec_mpi --m 2048 --n 512 > "$srun_log" 2>&1
srun_status=$?
if [ "$srun_status" = 0 ] && grep -q '^summary: variant=rows ranks=4 ' "$srun_log" && [ "$(grep -c '^summary:' "$srun_log")" = 1 ]; then
    pass "srun --nodes=2 --ntasks=4 --mpi=pmix matvec_mpi: one world of 4 ranks, right"
else
    fail "srun --nodes=2 --ntasks=4 --mpi=pmix matvec_mpi: status $srun_status ($srun_log):"
    show "$srun_log"
fi

# Without PMI. Open MPI's ranks started by srun --mpi=none stop in
# MPI_Init ("OMPI was not built with SLURM's PMI support"): the job fails.
# An MPI that falls back to a world of one (MPICH does) starts lone ranks,
# each rank 0 of 1, each right: shown here by ranks that cannot see the
# job (env -i), which Open MPI then starts as singletons. The scripts'
# world-size check must fail that job.
sed 's/srun --mpi=pmix/srun --mpi=none/' scripts/slurm/matvec_mpi.sbatch > "$work/matvec_mpi-no-pmi.sbatch"
submit matvec_mpi-no-pmi "$work/matvec_mpi-no-pmi.sbatch" --m 2048 --n 512 --reps 3
if [ "$job_status" != 0 ] && grep -q "OMPI was not built with SLURM's PMI support" "$log" &&
        ! grep -q '^world size: 4 ranks, as asked' "$log"; then
    pass "matvec_mpi.sbatch with srun --mpi=none: the job fails (status $job_status): \"OMPI was not built with SLURM's PMI support\""
else
    fail "matvec_mpi.sbatch with srun --mpi=none: not the error expected (status $job_status; $log):"
    show "$log"
fi
sed 's/srun --mpi=pmix/srun --mpi=none env -i PATH="$PATH" TMPDIR="$TMPDIR" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1/' \
    scripts/slurm/matvec_mpi.sbatch > "$work/matvec_mpi-lone-ranks.sbatch"
submit matvec_mpi-lone-ranks "$work/matvec_mpi-lone-ranks.sbatch" --m 2048 --n 512 --reps 3
if [ "$job_status" = 1 ] && grep -q "^world size: the ranks saw 1 instead of one world of 4" "$log" &&
        [ "$(grep -c ': right$' "$log")" = 4 ]; then
    pass "matvec_mpi.sbatch with lone ranks: 4 worlds of 1, each right, and the job fails: \"$(grep '^world size' "$log" | head -1 | cut -c1-60)...\""
else
    fail "matvec_mpi.sbatch with lone ranks: the world-size check did not catch them (status $job_status; $log):"
    show "$log"
fi

# make grade-all as a job array, against grading one at a time.
echo "Slurm: make grade-all SLURM=1 (a job array) against one at a time"
submissions=$work/submissions
lesson=02-mpi-matvec
for name in solution drops-remainder-rows skeleton; do
    mkdir -p "$submissions/$name/lessons/$lesson"
done
cp solutions/$lesson/* "$submissions/solution/lessons/$lesson/"
cp solutions/$lesson/* "$submissions/drops-remainder-rows/lessons/$lesson/"
patch -s -d "$submissions/drops-remainder-rows/lessons/$lesson" < tests/fixtures/$lesson/drops-remainder-rows/rows.c.patch
for file in $(make -s --no-print-directory print-edited); do
    case "$file" in $lesson/*) cp "lessons/$file" "$submissions/skeleton/lessons/$lesson/" ;; esac
done
roster() {   # roster FOLDER: its roster without the seconds column
    cut -d, -f1-$(($(head -1 "$1/roster.csv" | tr ',' '\n' | wc -l) - 1)) "$1/roster.csv"
}
# Each grading in a folder of its own, not build/grade-all. Each array task
# asks for 5 of a node's 8 CPUs, so the tasks spread over both nodes.
start=$(date +%s)
ZZ_GRADE_ALL_OUT=$work/grade-one-at-a-time make -s --no-print-directory grade-all SUBMISSIONS="$submissions" L=02 SANDBOX=0 > "$work/grade-one-at-a-time.log" 2>&1
one_status=$?
roster "$work/grade-one-at-a-time" > "$work/roster-one-at-a-time.csv"
middle=$(date +%s)
ZZ_GRADE_ALL_OUT=$work/grade-slurm GRADE_SLURM_CPUS=5 make -s --no-print-directory grade-all SUBMISSIONS="$submissions" L=02 SANDBOX=0 SLURM=1 JOBS=2 GRADE_SLURM_OPTIONS="--partition=debug --time=00:10:00" > "$work/grade-slurm.log" 2>&1
array_status=$?
roster "$work/grade-slurm" > "$work/roster-slurm.csv"
end=$(date +%s)
hosts_used=$(cat "$work"/grade-slurm/slurm-*_*.out 2>/dev/null | sed -n 's/^grade-all: task [0-9]* on \([a-z0-9]*\):.*/\1/p' | sort | uniq -c | awk '{ printf "%s%s x %s", (NR > 1 ? ", " : ""), $2, $1 }')
scores=$(awk -F, 'NR > 1 { printf "%s%s %s/%s", (NR > 2 ? ", " : ""), $1, $(NF - 1), $NF }' "$work/roster-slurm.csv")
if [ "$one_status" != 0 ] || [ "$array_status" != 0 ]; then
    fail "grade-all: one at a time ended with status $one_status, the array with $array_status ($work/grade-*.log):"
    show "$work/grade-slurm.log"
elif ! grep -q '^solution,.*,30,30$' "$work/roster-one-at-a-time.csv" ||
     ! grep -q '^drops-remainder-rows,.*,8,30$' "$work/roster-one-at-a-time.csv"; then
    fail "grade-all one at a time: not the fixture's scores (solution 30/30, drops-remainder-rows 8/30):"
    show "$work/roster-one-at-a-time.csv"
elif ! grep -q 'as a Slurm job array (0-2%2)' "$work/grade-slurm.log" || [ -z "$hosts_used" ]; then
    fail "grade-all SLURM=1 did not run as a job array ($work/grade-slurm.log):"
    show "$work/grade-slurm.log"
elif cmp -s "$work/roster-one-at-a-time.csv" "$work/roster-slurm.csv"; then
    pass "grade-all SLURM=1: 3 array tasks (on $hosts_used), the roster of one at a time: $scores ($((middle - start)) s one at a time, $((end - middle)) s as an array)"
else
    fail "grade-all SLURM=1: its roster differs from one at a time:"
    diff "$work/roster-one-at-a-time.csv" "$work/roster-slurm.csv" | sed 's/^/      /'
fi
exit "$status"
