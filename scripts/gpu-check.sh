#!/usr/bin/env bash
# Lesson 04 on a machine with a CUDA device, in one go, from the repository's
# top folder: builds what lesson 04 needs; runs its tests on the solution
# (every test must pass, none may be skipped) and on the untouched skeleton
# (every test must fail); grades each broken submission in
# tests/fixtures/04-cuda-matvec against what a GPU must show
# (expected-gpu.txt); runs the driver in both precisions and the benchmark;
# prints the figures, then one line per step.
#
# Needs this repository, the CUDA toolkit (nvcc; compute-sanitizer for the
# two memcheck tests) and what the toolkit's tests need anyway (a C
# compiler, make, pkg-config and Check). Installs nothing; writes only under
# build/.
#
#   scripts/gpu-check.sh                 every step
#   scripts/gpu-check.sh --quick         no fixtures, no benchmark, a small driver run
#   scripts/gpu-check.sh --no-fixtures --no-bench --sanitize
#       --sanitize also runs the suite built with AddressSanitizer
# Exits 0 only when every step that ran passed.
. "$(dirname "$0")/portable.sh" "$@"  # bash 4, GNU tools (macOS: Homebrew's)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

fixtures=true bench=true sanitize=false driver_size=(--m 8192 --n 8192)
for option in "$@"; do
    case "$option" in
        --quick) fixtures=false bench=false driver_size=(--m 2048 --n 2048) ;;
        --no-fixtures) fixtures=false ;;
        --no-bench) bench=false ;;
        --sanitize) sanitize=true ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu-check: unknown option '$option' (see --help)" >&2; exit 2 ;;
    esac
done

lesson=04-cuda-matvec
out=build/gpu-check
# make is told where nvcc is only when the caller said so (NVCC=...).
make_vars=()
[ -n "${NVCC:-}" ] && make_vars=(NVCC="$NVCC")
mkdir -p "$out"
steps=()
status=0
start_all=$SECONDS

# step NAME RESULT [DETAIL]: records one line of the final table.
step() {
    steps+=("$(printf '%-34s %-5s %s' "$1" "$2" "${3:-}")")
    [ "$2" = pass ] || [ "$2" = skip ] || status=1
}

echo "== the machine"
if ! command -v "${NVCC:-nvcc}" >/dev/null 2>&1; then
    echo "gpu-check: nvcc is not on PATH (or NVCC=/path/to/nvcc): lesson 04 cannot be built" >&2
    exit 2
fi
"${NVCC:-nvcc}" --version | tail -n 2
command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
# compute-sanitizer comes with the toolkit, next to nvcc; the tests look for
# it on PATH.
nvcc_dir=$(dirname "$(command -v "${NVCC:-nvcc}")")
for dir in "$nvcc_dir" "${CUDA_HOME:-/usr/local/cuda}/bin" /usr/local/cuda/bin; do
    if [ -x "$dir/compute-sanitizer" ]; then
        PATH=$PATH:$dir
        break
    fi
done
export PATH
command -v compute-sanitizer >/dev/null 2>&1 &&
    echo "compute-sanitizer: $(command -v compute-sanitizer)" ||
    echo "compute-sanitizer: not found (its two tests will be skipped)"
have_check=true
pkg-config --exists check 2>/dev/null || have_check=false
$have_check || echo "Check (libcheck) is not installed: the test suites cannot be built"
echo

echo "== building lesson 04 (make; only what is missing)"
t0=$SECONDS
targets=("build/solution/$lesson/cuda_matvec" "build/student/$lesson/cuda_matvec")
$have_check && targets+=("build/solution/tests/test_$lesson" "build/student/tests/test_$lesson"
                         build/grade-tool/grade)
$have_check && $sanitize && targets+=("build/sanitize/tests/test_$lesson")
if make -s --no-print-directory "${make_vars[@]}" "${targets[@]}" > "$out/build.log" 2>&1; then
    step "build" pass "$((SECONDS - t0)) s"
else
    cat "$out/build.log"
    step "build" FAIL "see $out/build.log"
    printf '%s\n' "${steps[@]}"
    exit 1
fi
echo "  done in $((SECONDS - t0)) s"
echo

echo "== is there a device?"
probe=$(build/solution/$lesson/cuda_matvec --m 1 --n 1 --reps 1 2>&1)
if grep -q '^cuda_matvec: skipped' <<< "$probe"; then
    echo "$probe"
    echo "gpu-check: CUDA sees no device here: nothing to check" >&2
    exit 1
fi
echo "  yes: $(head -n 1 <<< "$probe")"
echo

# suite TITLE BUILD MODE LOG: one lesson 04 suite, with a time limit.
suite() {
    ZZ_BUILD_DIR=$2 timeout 900 "$2/tests/test_$lesson" --title "$1" --mode "$3" \
        --results "$4.results" > "$4" 2>&1
}

if $have_check; then
    echo "== the tests on the solution: every one must pass, none be skipped"
    t0=$SECONDS
    suite "lesson $lesson: the solution" build/solution solution "$out/solution.log"
    code=$?
    grep -v '^\s*\[pass\]' "$out/solution.log"
    skipped=$(grep -c '^skip' "$out/solution.log.results")
    passed=$(grep -c '^pass' "$out/solution.log.results")
    total=$(wc -l < "$out/solution.log.results")
    if [ $code -eq 0 ] && [ "$skipped" -eq 0 ]; then
        step "tests on the solution" pass "$passed of $total passed, $((SECONDS - t0)) s"
    elif [ $code -eq 0 ]; then
        step "tests on the solution" FAIL "$passed of $total passed, $skipped skipped (see above)"
    else
        step "tests on the solution" FAIL "$passed of $total passed (see $out/solution.log)"
    fi
    echo

    echo "== the tests on the untouched skeleton: every one must fail"
    t0=$SECONDS
    suite "lesson $lesson: the skeleton" build/student skeleton "$out/skeleton.log"
    code=$?
    cat "$out/skeleton.log"
    skipped=$(grep -c '^skip' "$out/skeleton.log.results")
    if [ $code -eq 0 ] && [ "$skipped" -eq 0 ]; then
        step "tests on the skeleton" pass "all fail, $((SECONDS - t0)) s"
    else
        step "tests on the skeleton" FAIL "$skipped skipped, or some passed (see above)"
    fi
    echo

    # The grader caps each lesson's address space (scripts/grade.sh,
    # GRADE_MEMORY_KIB, 4 GiB by default). The CUDA driver reserves far more
    # address space than that for itself: see whether one test survives it.
    echo "== one test under the grader's default address-space cap (ulimit -v 4194304)"
    probe_name=$(ZZ_BUILD_DIR=build/solution build/solution/tests/test_$lesson --list | head -n 1)
    (
        ulimit -v 4194304
        CK_RUN_CASE="$probe_name" ZZ_BUILD_DIR=build/solution timeout 300 \
            build/solution/tests/test_$lesson --title "under ulimit -v" --mode solution
    ) > "$out/ulimit.log" 2>&1
    code=$?
    cat "$out/ulimit.log"
    if [ $code -eq 0 ] && grep -q '\[pass\]' "$out/ulimit.log"; then
        step "a test under ulimit -v 4 GiB" pass "make grade's default cap is fine"
    else
        step "a test under ulimit -v 4 GiB" FAIL "make grade needs GRADE_MEMORY_KIB=unlimited for lesson 04"
    fi
    echo

    if $sanitize; then
        echo "== the tests on the solution, built with AddressSanitizer"
        # CUDA maps memory where ASan keeps its shadow unless told not to.
        ASAN_OPTIONS=protect_shadow_gap=0:allocator_may_return_null=1 \
            suite "sanitized lesson $lesson" build/sanitize solution "$out/sanitize.log"
        code=$?
        grep -v '^\s*\[pass\]' "$out/sanitize.log"
        skipped=$(grep -c '^skip' "$out/sanitize.log.results")
        if [ $code -eq 0 ] && [ "$skipped" -eq 0 ]; then
            step "tests under AddressSanitizer" pass
        else
            step "tests under AddressSanitizer" FAIL "see $out/sanitize.log"
        fi
        echo
    fi

    if $fixtures; then
        for expect in tests/fixtures/"$lesson"/*/expected-gpu.txt; do
            [ -e "$expect" ] || continue
            fixture=$(dirname "$expect")
            name=$(basename "$fixture")
            echo "== broken submission '$name', graded as make grade grades it"
            t0=$SECONDS
            # Lesson 04 alone; no address-space cap (see the step above).
            if ZZ_LESSONS=$lesson ZZ_EDITED=$lesson/cuda_matvec.cu GRADE_MEMORY_KIB=unlimited GRADE_SANITIZERS=0 \
                    scripts/grade.sh --no-sandbox --lesson $lesson --overlay "$fixture" \
                    --out "$out/fixtures/$name" --expect "$expect"; then
                step "fixture $name" pass "$((SECONDS - t0)) s"
            else
                step "fixture $name" FAIL "logs in $out/fixtures/$name/work"
            fi
            echo
        done
    fi
else
    step "test suites" FAIL "Check (libcheck) is not installed"
fi

echo "== the driver, both precisions (${driver_size[*]})"
for precision in double float; do
    build/solution/$lesson/cuda_matvec "${driver_size[@]}" --precision $precision \
        > "$out/driver-$precision.log" 2>&1
    code=$?
    cat "$out/driver-$precision.log"
    summary=$(grep '^summary:' "$out/driver-$precision.log" | sed 's/^summary: //')
    if [ $code -eq 0 ]; then
        step "driver, $precision" pass "$(grep -o 'best=[^ ]* best_of_cublas=[^ ]* best_of_copy=[^ ]*' <<< "$summary")"
    else
        step "driver, $precision" FAIL "exit status $code"
    fi
    echo
done

if $bench; then
    echo "== the benchmark (bench/bench_04.c)"
    t0=$SECONDS
    # Built by make where the Makefile's bench rule knows CUDA; otherwise
    # here, with the same flags.
    binary=build/bench/bench_04
    if ! make -s --no-print-directory "${make_vars[@]}" $binary > "$out/bench-build.log" 2>&1; then
        cuda_home=$(cd "$nvcc_dir/.." && pwd)
        binary=$out/bench_04
        make -s --no-print-directory "${make_vars[@]}" build/solution/$lesson/cuda_matvec.o \
            build/solution/$lesson/float_reference.o build/solution/common/libcommon.a \
            build/solution/common/check_cuda.o >> "$out/bench-build.log" 2>&1 &&
        ${CC:-cc} -O3 -std=c11 -Wall -Wextra -I"$cuda_home/include" -Icommon -Ilessons/$lesson \
            bench/bench_04.c build/solution/$lesson/cuda_matvec.o \
            build/solution/$lesson/float_reference.o build/solution/common/check_cuda.o \
            build/solution/common/libcommon.a -L"$cuda_home/lib64" \
            -Wl,-rpath,"$cuda_home/lib64" -lcublas -lcudart -lstdc++ -lm \
            -o "$binary" >> "$out/bench-build.log" 2>&1
    fi
    if [ -x "$binary" ] && ZZ_BENCH_CSV=$out/bench.csv "$binary" > "$out/bench.log" 2>&1; then
        cat "$out/bench.log"
        step "benchmark" pass "$(grep '^targets:' "$out/bench.log" | sed 's/^targets: //'), $((SECONDS - t0)) s"
    else
        cat "$out/bench-build.log" "$out/bench.log" 2>/dev/null
        step "benchmark" FAIL "see $out/bench.log"
    fi
    echo
fi

echo "== gpu-check: $((SECONDS - start_all)) s in all"
printf '%s\n' "${steps[@]}"
exit $status
