#!/usr/bin/env bash
# make demo, small and fast, for tests/check-texts.sh: runs scripts/demo.sh
# itself, unchanged, in a scratch folder whose build/solution/ programs are
# wrappers that add small sizes to what demo.sh passes (later options win),
# so the table has the rows, labels and keys of a real `make demo` in a few
# seconds. Lesson 04 is reported as on a machine without nvcc, with the
# Makefile's own reason, so that the rows are the same on every machine.
#   tests/texts/demo-small.sh      (from anywhere; needs the solution build)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
scratch=$(mktemp -d "${TMPDIR:-/tmp}/zz-texts-demo-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# Small sizes per program; a program not named here runs at its default.
small_options() {
    case "$1" in
        00-setup/stream)            echo "--n 100000 --reps 3" ;;
        00-setup/pingpong)          echo "--max-bytes 4096 --reps 10" ;;
        01-serial-matvec/matvec)    echo "--m 256 --n 256 --reps 2" ;;
        02-mpi-matvec/matvec_mpi)   echo "--m 256 --n 256 --reps 2" ;;
        03-openmp/openmp)           echo "--m 256 --n 256 --reps 2" ;;
        03-openmp/hybrid)           echo "--m 256 --n 256 --reps 2" ;;
        04-cuda-matvec/cuda_matvec) echo "--m 256 --n 256 --reps 2" ;;
        05-data-parallel/train)     echo "--steps 5 --samples 512" ;;
        06-zero/train_zero)         echo "--steps 5 --samples 512" ;;
        08-tensor-parallel/train_tp) echo "--steps 5 --samples 512" ;;
        09-pipeline-parallel/train_pp) echo "--steps 5 --samples 512" ;;
    esac
}

mkdir -p "$scratch/scripts"
cp scripts/demo.sh "$scratch/scripts/"
for program in build/solution/[0-9][0-9]-*/*; do
    [ -f "$program" ] && [ -x "$program" ] || continue
    case "$program" in *.o|*.d|*/producer|*/submission.ok) continue ;; esac
    name=${program#build/solution/}
    mkdir -p "$scratch/build/solution/${name%/*}"
    printf '#!/bin/sh\nexec "%s" "$@" %s\n' "$root/$program" "$(small_options "$name")" \
        > "$scratch/build/solution/$name"
    chmod +x "$scratch/build/solution/$name"
done

# The Makefile's view of a machine without nvcc, and its mpirun.
settings=$scratch/settings.mk
printf 'zz-texts-settings:\n\t@echo "$(ZZ_UNBUILT)"; echo "$(ZZ_UNBUILT_REASON)"; echo "$(ZZ_MPIRUN)"\n' > "$settings"
{ read -r unbuilt; read -r reason; read -r mpirun; } < <(make -s --no-print-directory \
    NVCC=zz-texts-no-nvcc -f Makefile -f "$settings" zz-texts-settings)
ZZ_UNBUILT=$unbuilt ZZ_UNBUILT_REASON=$reason ZZ_MPIRUN=${ZZ_MPIRUN:-$mpirun} \
    "$scratch/scripts/demo.sh"
