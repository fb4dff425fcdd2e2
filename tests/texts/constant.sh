#!/usr/bin/env bash
# One of the grader's settings, read from the code that sets it, in the
# unit docs/instructors.md gives it in: for its says markers (tests/
# check-texts.sh), so that the docs' limits and sizes follow the code.
#   tests/texts/constant.sh NAME
# Exits 1, saying so, when the setting is no longer where it was read from.
set -uo pipefail
cd "$(dirname "$0")/../.."

# The first number of the first line of FILE that matches the extended
# regular expression RE, after the match's PREFIX (a fixed string).
number_after() {
    local file=$1 re=$2 prefix=$3 line
    line=$(grep -m1 -E "$re" "$file") || { echo "constant.sh: '$re' is not in $file" >&2; exit 1; }
    line=${line#*"$prefix"}
    [[ $line =~ ^[^0-9]*([0-9]+) ]] || { echo "constant.sh: no number after '$prefix' in $file" >&2; exit 1; }
    echo "${BASH_REMATCH[1]}"
}
divide() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%g\n", a / b }'; }

case "${1:-}" in
    grade-cpu-seconds) number_after scripts/grade.sh '^cpu_seconds=' 'GRADE_CPU_SECONDS:-' ;;
    grade-wall-seconds) number_after scripts/grade.sh '^wall_seconds=' 'GRADE_WALL_SECONDS:-' ;;
    grade-memory-gib) divide "$(number_after scripts/grade.sh '^memory_kib=' 'GRADE_MEMORY_KIB:-')" 1048576 ;;
    grade-file-mib) divide "$(number_after scripts/grade.sh '^file_kib=' 'GRADE_FILE_KIB:-')" 1024 ;;
    grade-tmp-mib) number_after scripts/grade.sh '^tmp_mib=' 'GRADE_TMP_MIB:-' ;;
    handed-in-mib) divide "$(number_after scripts/grade.sh 'wc -c < "\$path"\)" -gt [0-9]+' '-gt ')" 1048576 ;;
    run-shm-mib) number_after tests/harness/harness.c 'RUN_SHM_MIB = [0-9]+' 'RUN_SHM_MIB = ' ;;
    sandbox-tmp-mib) number_after tests/harness/harness.c 'SANDBOX_TMP_MIB = [0-9]+' 'SANDBOX_TMP_MIB = ' ;;
    tcp-fragment-kib) divide "$(number_after tests/harness/harness.c 'btl_tcp_max_send_size=[0-9]+' 'max_send_size=')" 1024 ;;
    freed-block-kib) divide "$(number_after tests/harness/harness.c 'MALLOC_MMAP_THRESHOLD_=[0-9]+' 'THRESHOLD_=')" 1024 ;;
    wire-header-bytes) number_after tests/harness/harness.c 'return [0-9]+ \+ [0-9]+ \* messages' '+ ' ;;
    wire-long-share)
        # bytes / D: a share of 100 / D percent, said as "under 0.2%" (the
        # next tenth of a percent up).
        share=$(divide 100 "$(number_after tests/harness/harness.c 'return [0-9]+ \+ [0-9]+ \* messages \+ bytes / [0-9]+' 'bytes / ')")
        awk -v s="$share" 'BEGIN { t = int(s * 10); if (t < s * 10) t++; printf "under %g%%\n", t / 10 }' ;;
    memory-slack-mib)
        shift_by=$(number_after tests/harness/harness.h 'HARNESS_MEMORY_SLACK = 1 << [0-9]+' '1 << ')
        divide "$(( 1 << shift_by ))" 1048576 ;;
    variable-kib) divide "$(number_after scripts/check-submission.sh '^VARIABLE_LIMIT=' '=')" 1024 ;;
    data-kib) divide "$(number_after scripts/check-submission.sh '^DATA_LIMIT=' '=')" 1024 ;;
    code-mib) divide "$(number_after scripts/check-submission.sh '^CODE_LIMIT=' '=')" 1048576 ;;
    frame-kib) divide "$(number_after scripts/check-submission.sh '^FRAME_LIMIT=' '=')" 1024 ;;
    *) echo "usage: tests/texts/constant.sh NAME (one of the names in its case)" >&2; exit 2 ;;
esac
