#!/usr/bin/env bash
# macOS's branches, as far as a Linux machine can run them: with stand-ins
# for macOS's commands first on PATH (uname saying Darwin and arm64, brew,
# Apple's clang answering --version, and nm writing Mach-O's names with an
# underscore in front), made here in a folder of this run's own:
#
#   tests/check-macos.sh [--tally FILE]      (make test; after make's builds)
#
#   1. the Makefile: Homebrew's libomp with Apple's clang (-Xpreprocessor
#      -fopenmp, -lomp), -dead_strip, -mcpu=native, and pkg-config sent to
#      OpenBLAS's keg (make print-flags);
#   2. scripts/install-deps.sh: on a PATH without the toolkit's tools, what
#      it asks brew to install: bash, coreutils and libomp beside Open MPI,
#      Check, pkg-config and OpenBLAS;
#   3. the checks on a student's files (scripts/check-submission.sh) read
#      Mach-O's names as ELF's: lesson 02's compiled files accepted, and one
#      that leaves out block_range refused, each with the same lines and
#      status as with this machine's own nm;
#   4. in objects compiled for macOS (Mach-O), code that runs before or
#      after main (constructors, destructors, exit handlers) refused.
# What has not run on a real Mac is in docs/ (README's macOS section).
# Prints [pass] or [FAIL] lines; exit status 0 when all pass.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
tally=""
[ "${1:-}" != --tally ] || tally=${2:?usage: tests/check-macos.sh [--tally FILE]}
echo "== macOS's branches, with its commands stood in for (tests/check-macos.sh)"
work=$(mktemp -d "${TMPDIR:-/tmp}/zz-macos-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
. tests/say.sh
say_to "$tally" macos

# The stand-ins.
mac=$work/mac
mkdir -p "$mac"
cat > "$mac/uname" <<'EOF'
#!/bin/sh
case "$1" in -m) echo arm64 ;; *) echo Darwin ;; esac
EOF
cat > "$mac/brew" <<EOF
#!/bin/sh
# Homebrew: --prefix names libomp's keg; the rest is written down.
if [ "\$1" = --prefix ]; then
    [ -e "$work/have-libomp" ] && echo /opt/homebrew/opt/\$2 && exit 0
    exit 1
fi
echo "\$*" >> "$work/brew.log"
EOF
cat > "$mac/cc" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && echo "Apple clang version 15.0.0 (clang-1500.3.9.4)" && exit 0
exit 1
EOF
real_nm=$(type -P nm)
cat > "$mac/nm" <<EOF
#!/bin/sh
# Mach-O's names: an underscore in front of each.
"$real_nm" "\$@" | awk 'NF >= 2 { \$NF = "_" \$NF } { print }'
EOF
chmod +x "$mac"/*

# ---- 1. the Makefile ------------------------------------------------------
touch "$work/have-libomp"
PATH=$mac:$PATH PKG_CONFIG_PATH= make -s --no-print-directory print-flags CC=cc > "$work/flags" 2>&1
want="OPENMP_FLAGS=-Xpreprocessor -fopenmp -I/opt/homebrew/opt/libomp/include
LDFLAGS=-L/opt/homebrew/opt/libomp/lib -lomp
GC_LDFLAGS=-Wl,-dead_strip
ARCH_FLAGS=-mcpu=native
PKG_CONFIG_PATH=/opt/homebrew/opt/openblas/lib/pkgconfig"
if [ "$(grep -E '^(OPENMP_FLAGS|LDFLAGS|GC_LDFLAGS|ARCH_FLAGS|PKG_CONFIG_PATH)=' "$work/flags")" = "$want" ] &&
   grep -q '^UNAME_S=Darwin$' "$work/flags"; then
    say yes "the Makefile on macOS with Apple's clang: $(grep '^OPENMP_FLAGS=' "$work/flags"), $(grep '^LDFLAGS=' "$work/flags")"
else
    printf 'expected:\n%s\n' "$want" >> "$work/flags"
    say no "the Makefile's macOS branch" "$work/flags"
fi

# ---- 2. install-deps ------------------------------------------------------
# A PATH of the stand-ins and what the script itself runs, without the
# toolkit's tools (no bash 4 found, no GNU tools, no libomp, no MPI).
rm -f "$work/have-libomp"
bare=$work/bare
mkdir -p "$bare"
for tool in sed grep awk cat id head tr; do ln -s "$(type -P "$tool")" "$bare/$tool"; done
PATH=$mac:$bare "$(type -P bash)" scripts/install-deps.sh > "$work/deps" 2>&1
asked=$(cat "$work/brew.log" 2>/dev/null)
missing=""
for package in bash coreutils libomp open-mpi check pkg-config openblas; do
    [[ " $asked " == *" $package "* ]] || missing+=" $package"
done
if [[ $asked == install\ * ]] && [ -z "$missing" ]; then
    say yes "install-deps on macOS asks Homebrew for: brew $asked"
else
    echo "brew was asked: ${asked:-nothing}; missing:$missing" >> "$work/deps"
    say no "install-deps on macOS should install bash, coreutils, libomp, open-mpi, check, pkg-config and openblas" "$work/deps"
fi

# ---- 3. the checks on a student's files, on Mach-O's names ------------------
# Lesson 02's command, as make runs it, plainly and with the stand-ins.
rm -f build/student/02-mpi-matvec/submission.ok
command=$(make -n --no-print-directory build/student/02-mpi-matvec/submission.ok 2>/dev/null |
          grep '^scripts/check-submission.sh 02-mpi-matvec ')
if [ -z "$command" ]; then
    echo "make -n printed no check of lesson 02's files" > "$work/none"
    say no "the checks on Mach-O's names: lesson 02's command" "$work/none"
else
    # A copy of rows.c that leaves out block_range (it names its own
    # function otherwise), compiled as make compiles it.
    mkdir -p "$work/planted"
    { echo '#define block_range block_range_of_my_own'; cat lessons/02-mpi-matvec/rows.c; } > "$work/planted/rows.c"
    compile=$(make -n --no-print-directory -W lessons/02-mpi-matvec/rows.c build/student/02-mpi-matvec/rows.o 2>/dev/null |
              grep ' -c lessons/02-mpi-matvec/rows.c ')
    compile=${compile/ -c lessons\/02-mpi-matvec\/rows.c / -c $work/planted/rows.c }
    compile=${compile/ -o build\/student\/02-mpi-matvec\/rows.o/ -o $work/planted/rows.o}
    planted_command=${command//build\/student\/02-mpi-matvec\/rows.o/$work/planted/rows.o}
    if ! eval "$compile" > "$work/compile.log" 2>&1; then
        say no "the checks on Mach-O's names: the planted rows.c did not compile" "$work/compile.log"
    else
        for which in accepted refused; do
            run=$command
            [ "$which" = accepted ] || run=$planted_command
            eval "$run" > "$work/$which-elf" 2>&1; elf=$?
            PATH=$mac:$PATH eval "$run" > "$work/$which-macho" 2>&1; macho=$?
            sed -i "s|$work|WORK|g" "$work/$which-elf" "$work/$which-macho"
            if [ "$which" = accepted ]; then want=0; else want=1; fi
            if [ $elf -eq $want ] && [ $macho -eq $elf ] && cmp -s "$work/$which-elf" "$work/$which-macho" &&
               { [ "$which" = accepted ] || grep -q "does not define block_range" "$work/$which-macho"; }; then
                say yes "the checks on Mach-O's names: lesson 02's files $which as on ELF (status $macho$( [ "$which" = refused ] && echo ": $(grep -m1 -o 'does not define block_range[^:;]*' "$work/$which-macho")"))"
            else
                { echo "ELF, status $elf:"; cat "$work/$which-elf"; echo "Mach-O's names, status $macho:"; cat "$work/$which-macho"; } > "$work/$which.log"
                say no "the checks on Mach-O's names: lesson 02's files should be $which as on ELF" "$work/$which.log"
            fi
        done
    fi
    touch build/student/02-mpi-matvec/submission.ok
fi

# ---- 4. code that runs before or after main, in Mach-O objects -------------
# Compiled for macOS here (clang's arm64-apple-macos target, no system
# headers needed): a file with a constructor that registers an exit handler
# and a destructor, refused with each named; a plain one, not.
if ! command -v clang > /dev/null || ! command -v llvm-objdump > /dev/null; then
    say skip "the checks on Mach-O objects: needs clang and llvm-objdump, which this machine lacks"
elif [ -z "$command" ]; then
    say no "the checks on Mach-O objects: no command of lesson 02's check" "$work/none"
else
    mkdir -p "$work/macho"
    cat > "$work/macho/rows.c" <<'EOF'
int atexit(void (*)(void));
static void tidy(void) { }
__attribute__((constructor)) static void early(void) { atexit(tidy); }
__attribute__((destructor)) static void late(void) { }
int rows_of(int x) { return x + 1; }
EOF
    printf 'int columns_of(int x) { return x + 2; }\n' > "$work/macho/columns.c"
    if ! { clang -target arm64-apple-macos11 -fstack-usage -c "$work/macho/rows.c" -o "$work/macho/rows.o" &&
           clang -target arm64-apple-macos11 -fstack-usage -c "$work/macho/columns.c" -o "$work/macho/columns.o"; } > "$work/macho.log" 2>&1; then
        say no "the checks on Mach-O objects: clang did not compile them for macOS" "$work/macho.log"
    else
        run="${command% build/student/02-mpi-matvec/rows.o build/student/02-mpi-matvec/columns.o} $work/macho/rows.o $work/macho/columns.o"
        PATH=$mac:$PATH eval "$run" > "$work/macho.log" 2>&1
        found=$(grep -c -e 'rows.c has code that runs before main: .*early (a constructor' \
                        -e 'rows.c calls atexit (in section __text)' \
                        -e 'rows.c calls __cxa_atexit' "$work/macho.log")
        if [ "$found" -eq 3 ] && ! grep -q 'columns.c has code\|columns.c calls' "$work/macho.log"; then
            say yes "the checks on Mach-O objects: a constructor, an exit handler and a destructor refused, by name ($(grep -m1 -o 'has code that runs before main: [^(]*[^( ]' "$work/macho.log")); a plain file not"
        else
            say no "the checks on Mach-O objects: rows.c's constructor, atexit and destructor should be refused, columns.c not" "$work/macho.log"
        fi
    fi
fi

# The nm wrapper portable.sh made for the stand-in's macOS goes with it.
grep -qs "$work" build/gnu-tools/nm && rm -f build/gnu-tools/nm
exit $say_failed
