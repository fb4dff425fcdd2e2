#!/usr/bin/env bash
# Lesson 04's occupancy table, from the compiler: the registers and shared
# memory of the reference solution's kernels in double (nvcc
# --resource-usage, as the README's command shows), and what follows from
# them on compute capability 9.0 by the README's own arithmetic: registers
# handed out per warp in units of 256 from 65,536, 228 KiB of shared memory
# plus 1 KiB per block, at most 2048 threads and 32 blocks. Exits 77
# (skipped) without nvcc, or with another nvcc than the one the table was
# made with. For tests/check-texts.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
nvcc=${NVCC:-nvcc}
made_with=13.0
command -v "$nvcc" >/dev/null 2>&1 || { echo "nvcc not found: the table is checked where the CUDA toolkit is"; exit 77; }
version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
[ "$version" = "$made_with" ] || { echo "nvcc $version, not the $made_with the table was made with"; exit 77; }
[ -e solutions/04-cuda-matvec/cuda_matvec.cu ] || { echo "no solutions/ in this copy"; exit 77; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/zz-texts-nvcc-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
"$nvcc" -O3 -std=c++17 -arch=sm_90 -Icommon -Ilessons/04-cuda-matvec --resource-usage \
    -c solutions/04-cuda-matvec/cuda_matvec.cu -o "$scratch/x.o" 2> "$scratch/usage.txt"
echo "| kernel | registers per thread | shared memory per block | blocks of 256 per SM | occupancy |"
echo "|---|---|---|---|---|"
awk '
    /Compiling entry function/ { name = ""; if (match($0, /_Z[0-9]+[a-z_]+IdEv/)) { name = substr($0, RSTART, RLENGTH); sub(/^_Z[0-9]+/, "", name); sub(/IdEv$/, "", name) } }
    /Used [0-9]+ registers/ && name != "" {
        regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
        smem = 0; if ($0 ~ /bytes smem/) { smem = $0; sub(/.*barriers, /, "", smem); sub(/ bytes smem.*/, "", smem) }
        per_warp = int((regs * 32 + 255) / 256) * 256
        blocks = int(65536 / (8 * per_warp)); if (blocks > 8) blocks = 8
        if (smem > 0 && int(228 * 1024 / (smem + 1024)) < blocks) blocks = int(228 * 1024 / (smem + 1024))
        row[name] = sprintf("| `%s` | %d | %s | %d | %g%% |", name, regs, smem > 0 ? smem / 1024 " KiB" : "-", blocks, 100 * blocks * 8 / 64)
    }
    END { split("thread_per_row warp_per_row vectorised shared_x", order, " "); for (k = 1; k <= 4; k++) print row[order[k]] }
' "$scratch/usage.txt"
