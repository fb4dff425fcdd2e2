#!/usr/bin/env bash
# Lists the symbols that MPI's predefined constants refer to, for
# scripts/check-submission.sh (a student's file may use every one of them):
#   scripts/mpi-constants.sh OUTPUT MPICC [FLAGS...] [-- MPICC [FLAGS...]]...
# The standard's constants are macros of mpi.h: the handles (MPI_COMM_WORLD,
# MPI_DOUBLE, MPI_SUM, MPI_REQUEST_NULL, MPI_MESSAGE_NO_PROC, the error
# handlers and infos), the special pointers (MPI_IN_PLACE,
# MPI_STATUSES_IGNORE) and the numbers (MPI_ANY_SOURCE, MPI_PROC_NULL).
# Under MPICH most are numbers; under Open MPI a handle is the address of a
# variable of the library (MPI_REQUEST_NULL is &ompi_request_null), which a
# file that uses it leaves undefined, as it leaves a function it calls.
# Rather than a list by hand, which a new MPI version would outgrow, every
# object-like MPI_* macro the header defines, and every other name in
# capitals it declares, is used in a function of a probe file, compiled with each MPICC: what the probe leaves undefined is
# what the constants refer to. A macro that is not a value (one that names
# a type, or that mpi.h marks as removed from the standard) does not
# compile, and is left out. OUTPUT: one symbol a line, sorted.
# Exits 2, saying why, when an MPICC cannot compile the probe.
. "$(dirname "$0")/portable.sh" "$@"  # bash 4, GNU tools, ELF names (macOS: Homebrew's)
set -uo pipefail
usage="usage: mpi-constants.sh OUTPUT MPICC [FLAGS...] [-- MPICC [FLAGS...]]..."
output=${1:?$usage}
shift
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/zz-mpi-constants-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
: > "$work/symbols"

# Writes the probe: one function per macro, on one line, so that a
# compiler's error names the macro by its line.
write_probe() {   # write_probe MACRO-LIST PROBE
    {
        echo '#include <mpi.h>'
        echo '#include <stdint.h>'
        # A volatile store keeps the reference at any optimisation.
        echo 'const void *volatile zz_constant_sink;'
        awk '{ printf "void zz_use_%d(void) { zz_constant_sink = (const void *)(uintptr_t)(%s); }\n", NR, $1 }' "$1"
    } > "$2"
}

probe_with() {   # probe_with MPICC [FLAGS...]
    printf '#include <mpi.h>\n' > "$work/header.c"
    if ! "$@" -E -dM "$work/header.c" > "$work/macros" 2> "$work/log"; then
        echo "mpi-constants.sh: '$*' cannot read mpi.h: $(head -1 "$work/log")" >&2
        exit 2
    fi
    # Object-like macros: "#define MPI_NAME VALUE", not "MPI_NAME(...)";
    # and the names in capitals that the header declares otherwise (MPICH
    # declares MPI_UNWEIGHTED as a constant variable, "extern int * const
    # MPI_UNWEIGHTED"). The standard names its constants in capitals, its
    # functions and types in mixed case (MPI_Send, MPI_Comm).
    if ! "$@" -E "$work/header.c" > "$work/declarations" 2> "$work/log"; then
        echo "mpi-constants.sh: '$*' cannot read mpi.h: $(head -1 "$work/log")" >&2
        exit 2
    fi
    { awk '$1 == "#define" && $2 ~ /^MPI_[A-Z0-9_]+$/ && NF >= 3 { print $2 }' "$work/macros"
      grep -v '^#' "$work/declarations" | grep -oE '\bMPI_[A-Z0-9_]+\b'; } | sort -u > "$work/list"
    # Each round drops the macros whose lines the compiler refused. GCC's
    # -ftrack-macro-expansion=0 reports an error at the line that uses the
    # macro, not inside mpi.h; clang has no such flag, and reports it at
    # the use first anyway.
    local round track=()
    if "$@" -ftrack-macro-expansion=0 -E "$work/header.c" > /dev/null 2>&1; then
        track=(-ftrack-macro-expansion=0)
    fi
    for round in 1 2 3 4 5 6; do
        write_probe "$work/list" "$work/probe.c"
        if "$@" -c -O0 -w "${track[@]}" "$work/probe.c" -o "$work/probe.o" > "$work/log" 2>&1; then
            nm -u "$work/probe.o" | awk '{ print $NF }' | sed 's/@.*//' |
                grep -vxE 'zz_constant_sink|_GLOBAL_OFFSET_TABLE_' >> "$work/symbols"
            return 0
        fi
        grep -oE "probe\.c:[0-9]+:" "$work/log" | cut -d: -f2 | sort -un > "$work/refused"
        # Line 4 is the first macro's (lines 1-3: the includes, the sink).
        awk 'NR == FNR { refused[$1 - 3] = 1; next } !(FNR in refused)' "$work/refused" "$work/list" > "$work/kept"
        if [ ! -s "$work/refused" ] || cmp -s "$work/kept" "$work/list"; then
            break
        fi
        mv "$work/kept" "$work/list"
    done
    echo "mpi-constants.sh: '$*' does not compile a probe of mpi.h's constants: $(grep -m1 error "$work/log")" >&2
    exit 2
}

command=()
for word in "$@" --; do
    if [ "$word" = -- ]; then
        [ "${#command[@]}" -gt 0 ] && probe_with "${command[@]}"
        command=()
    else
        command+=("$word")
    fi
done
sort -u "$work/symbols" > "$work/sorted" && mv "$work/sorted" "$output"
