#!/usr/bin/env bash
# Lists the symbols that the shared libraries of a kind of program define,
# for scripts/check-submission.sh (a student's file may not define one:
# its definition would replace the library's for every caller, the
# library's own and the given code's):
#   scripts/library-symbols.sh OUTPUT LINK-COMMAND... [-- LINK-COMMAND...]...
# Each LINK-COMMAND is a compiler and flags that link a program the way the
# Makefile links the lessons' (mpicc, OpenMP's flags, -lm, CUDA's
# libraries; another MPI's mpicc, where one is installed). An empty program
# is linked with each, keeping every library it names (--no-as-needed), and
# every library the loader would load for it (ldd: the ones they need in
# turn too) is read: "SYMBOL<TAB>LIBRARY<TAB>KIND" for each symbol it
# defines (KIND: function, or data for a variable), one a line, sorted by
# symbol, in OUTPUT. Derived from the libraries
# themselves, so that a new library version's new symbols are covered.
# (macOS has no ldd: otool -L names the libraries there, and nm -gU reads
# them.) Exits 2, saying why, when a command does not link or neither ldd
# nor otool is found.
. "$(dirname "$0")/portable.sh" "$@"  # bash 4, GNU tools (macOS: Homebrew's)
set -uo pipefail
output=${1:?usage: library-symbols.sh OUTPUT LINK-COMMAND... [-- LINK-COMMAND...]...}
shift
if command -v ldd > /dev/null; then
    loader=ldd
elif command -v otool > /dev/null; then
    loader=otool
else
    echo "library-symbols.sh: needs ldd (or otool), to find the libraries a program loads" >&2
    exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/zz-library-symbols-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
printf 'int main(void)\n{\n    return 0;\n}\n' > "$work/empty.c"

# Links the empty program with one command; prints the libraries it loads.
libraries_of() {   # libraries_of LINKER [FLAGS...]
    local linker=$1
    shift
    # --no-as-needed before the libraries: an empty program needs none of
    # them, and a linker that drops unneeded ones would hide them.
    if ! "$linker" -Wl,--no-as-needed "$work/empty.c" "$@" -o "$work/empty" > "$work/link.log" 2>&1 &&
       ! "$linker" "$work/empty.c" "$@" -o "$work/empty" > "$work/link.log" 2>&1; then
        echo "library-symbols.sh: '$linker $*' does not link an empty program: $(head -1 "$work/link.log")" >&2
        exit 2
    fi
    if [ "$loader" = ldd ]; then
        ldd "$work/empty" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
    else
        otool -L "$work/empty" | awk 'NR > 1 && $1 ~ /^\// { print $1 }'
    fi
}

commands=() libraries=()
for word in "$@" --; do
    if [ "$word" = -- ]; then
        [ "${#commands[@]}" -gt 0 ] && mapfile -t -O "${#libraries[@]}" libraries < <(libraries_of "${commands[@]}")
        commands=()
    else
        commands+=("$word")
    fi
done
# A library named by several commands is read once; its symbols are
# "SYMBOL LIBRARY" after the version (memcpy@@GLIBC_2.14) is cut off.
printf '%s\n' "${libraries[@]}" | awk '!seen[$0]++' | while read -r library; do
    { if [ "$loader" = ldd ]; then nm -D --defined-only "$library"; else nm -gU "$library"; fi; } 2>/dev/null |
        awk -v name="${library##*/}" 'NF >= 3 { sub(/@.*/, "", $3); print $3 "\t" name "\t" ($2 ~ /^[BDGRSVbdgrsvu]$/ ? "data" : "function") }'
done | sort -t "$(printf '\t')" -k1,1 -u > "$work/symbols" || exit 2
mv "$work/symbols" "$output"
